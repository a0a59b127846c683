"""The check harness: the exercise registry, a safe call of the student's code, comparisons, verdicts.

Every exercise is declared once, on its check function, and everything else reads that declaration
(the grader's list of exercises, the nbgrader metadata of the notebooks, the tests that count them):

    @exercise("create_position_matrix", notebook="01_positional_encoding", defines="create_position_matrix",
              success="correct! Sine on the even columns, cosine on the odd ones.",
              mistakes={"sin_cos_swapped": "you put cos on the even columns and sin on the odd ones. ..."})
    def check_create_position_matrix(create_position_matrix): ...

Each known mistake is data: a short stable code, the hint the student reads, and (in the check
module) the wrong implementation that produces it. A check body raises ``Known(code)`` when the
answer equals a known wrong answer, ``Mistake(message)`` for anything else it can explain, and
returns when the answer is right. The decorator turns that into a ``Verdict``: an object whose
display is the one verdict line and which is truthy exactly when the exercise passes.

    ✅ create_position_matrix: correct! ...
    📝 create_position_matrix: not implemented yet: replace `# Your Code Here` and `raise NotImplementedError()` ...
    ❌ create_position_matrix: you put cos on the even columns and sin on the odd ones ...

A check never raises, with one exception: under nbgrader's autograding (the environment variable
``NBGRADER_EXECUTION`` is set) a verdict other than a pass raises ``CheckFailed`` with the verdict
line as its message, so that the check cell earns no points. The course grader does not read the
verdicts a notebook's kernel computes: it computes its own (course_tools/verdicts.py).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import math
import os
import string
import sys
import traceback
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from ..i18n import tr
from .guard import TAMPERING, OffLimitsUsed, forbidden, off_limits_name, static_tampering, tampering_message, used

PASS, FAIL, TODO = "pass", "fail", "todo"
SYMBOLS = {PASS: "✅", FAIL: "❌", TODO: "📝"}

# Codes every check may report besides its own known mistakes: what the harness itself recognises.
GENERIC_MISTAKES = {
    "not_callable": "expected a function or class, got {kind}. Pass it itself, without ().",
    "returned_none": "{what} returned None. Did you forget the `return` statement?",
    "not_an_array": "{what} returned a {kind}, which is not {expected}.",
    "not_a_pair": "{what} returned a {kind}; it must return a pair: `return output, weights`.",
    "raised_error": "{call} raised {error}{where}",
    "wrong_shape": "{what} has shape {actual}, expected {expected}.{hint}",
    "not_finite": "{what} contains NaN or inf (first at index {index}).",
    "check_error": "the check could not run ({error}).",
    "complex_values": "{what} holds complex numbers (for example {example}): the answer is real. Look for a "
                      "square root or a power of a negative number, or a stray `j`.",
    "not_numbers": "{what} holds {kind}, not numbers: return the numbers themselves, an array or a tensor of "
                   "floats.",
    "changed_input": "{call} changed its argument `{name}` in place: the caller's array is not the same after "
                     "the call. Compute on a copy (or with operations that return new arrays, such as x - m "
                     "instead of x -= m).",
    "used_off_limits": "{call} called `{name}`, which is off limits in this exercise: the point is to write it "
                       "yourself. Remove that call and compute the result with the operations the exercise describes.",
}


# ---------------------------------------------------------------------------------------- registry
@dataclass(frozen=True)
class Exercise:
    """One exercise: where it lives, what the student writes, and the mistakes its check names."""

    name: str  # reported by the grader; the nbgrader grade_id of its check cell
    notebook: str  # the notebook's file name without .ipynb, e.g. "01_positional_encoding"
    defines: str  # the function or class the student completes in the exercise cell
    success: str  # the start of the verdict line of a pass
    mistakes: dict[str, str] = field(default_factory=dict)  # code -> hint (a str.format template)
    points: int = 1
    check: Callable | None = field(default=None, compare=False, repr=False)
    # What the student's code may not call while this check runs (the exercise's own reference in
    # helpers, the built-ins the notebook names as off limits), as dotted names such as
    # "helpers.positional.positional_encoding" or "torch.nn.functional.layer_norm". Enforced by guard.py.
    off_limits: tuple[str, ...] = ()

    @property
    def check_name(self) -> str:
        return self.check.__name__ if self.check else f"check_{self.name}"

    def hint(self, code: str, **fields: Any) -> str:
        """The hint of a known (or generic) mistake, its template filled with fields."""
        template = self.mistakes.get(code, GENERIC_MISTAKES.get(code))
        if template is None:
            raise KeyError(f"{self.name} declares no mistake {code!r}")
        return template.format(**fields) if fields else template


EXERCISES: dict[str, Exercise] = {}  # name -> Exercise, in the order the check modules declare them


def exercise(name: str, *, notebook: str, defines: str, success: str = "correct!",
             mistakes: dict[str, str] | None = None, points: int = 1,
             off_limits: tuple[str, ...] | list[str] = ()) -> Callable:
    """Declare an exercise on its check body and turn the body into a never-raising check.

    The body receives the student's function (and any extra arguments). It raises ``Known(code)``
    or ``Mistake(message)`` when the answer is wrong, and returns an optional sentence that is
    added to the success line when it is right.
    """
    mistakes = dict(mistakes or {})
    for code in mistakes:
        if not code.isidentifier() or code != code.lower() or code in GENERIC_MISTAKES:
            raise ValueError(f"mistake code {code!r} of {name}: use a new lower_snake_case identifier")
    if name in EXERCISES:
        raise ValueError(f"exercise {name!r} is declared twice")

    def decorate(body: Callable) -> Callable:
        declared = Exercise(name, notebook, defines, success, mistakes, points, None, tuple(off_limits))

        @functools.wraps(body)
        def check(*args: Any, **kwargs: Any) -> Verdict:
            with warnings.catch_warnings(), np.errstate(all="ignore"), _running(declared):  # no warning shown
                warnings.simplefilter("ignore")
                try:
                    reached = static_tampering(args[0], defines) if args else None
                    if reached:  # the statement of the answer reaches into the checking code: the grader's verdict
                        raise Mistake(tampering_message(reached), TAMPERING)
                    extra = body(*args, **kwargs)
                except NotImplementedYet:
                    verdict = Verdict(name, TODO, tr("harness:todo", "not implemented yet: replace `# Your Code Here` "
                                                     "and `raise NotImplementedError()` with your code."))
                except Known as known:
                    verdict = Verdict(name, FAIL, *_fill(declared, known.code, known.fields))
                except Mistake as mistake:
                    verdict = Verdict(name, FAIL, str(mistake), mistake.code)
                except Exception as bug:  # a bug in the check itself must still not show a traceback wall
                    verdict = Verdict(name, FAIL, *_fill(declared, "check_error",
                                                         {"error": f"{type(bug).__name__}: {bug}"}))
                else:
                    verdict = Verdict(name, PASS, f"{_translated(f'{name}:success', success)} {extra or ''}".strip())
            return verdict.record()

        registered = Exercise(name, notebook, defines, success, mistakes, points, check, tuple(off_limits))
        EXERCISES[name] = registered
        check.exercise = registered
        return check

    return decorate


def _translated(key: str, english: str, **fields: Any) -> str:
    """The registry's text `english` (a success line or a hint template) in the student's language
    (helpers.set_language), filled with fields. The key is <exercise>:success, <exercise>:<code> or
    generic:<code>; tfs-translate extracts these texts from the registry itself."""
    return tr(key, english, **fields)


def _fill(declared: Exercise, code: str, fields: dict) -> tuple[str, str]:
    """(message, code) of a known mistake; an undeclared code or a missing field is a bug of the check."""
    try:
        if code in declared.mistakes:
            return _translated(f"{declared.name}:{code}", declared.mistakes[code], **fields), code
        declared.hint(code, **fields)  # an undeclared code raises KeyError here
        return _translated(f"generic:{code}", GENERIC_MISTAKES[code], **fields), code
    except (KeyError, IndexError) as error:
        return _fill(declared, "check_error",
                     {"error": tr("harness:unknown_mistake", "unknown mistake or field: {error}", error=error)})


def exercises_in(notebook: str) -> list[Exercise]:
    """The exercises of one notebook (its file name, with or without .ipynb), in notebook order."""
    stem = notebook[:-6] if notebook.endswith(".ipynb") else notebook
    return [e for e in EXERCISES.values() if e.notebook == stem]


def hint_fields(template: str) -> list[str]:
    """The {fields} a hint template needs."""
    return [f for _, f, _, _ in string.Formatter().parse(template) if f]


_RUNNING: list[Exercise] = []  # the exercises whose checks are running (innermost last)


@contextlib.contextmanager
def _running(declared: Exercise):
    """Mark `declared` as the exercise whose check runs, so that call() guards its off-limits names."""
    _RUNNING.append(declared)
    try:
        yield
    finally:
        _RUNNING.pop()


def current_exercise() -> Exercise | None:
    """The exercise whose check is running now (None outside a check)."""
    return _RUNNING[-1] if _RUNNING else None


def _nested_code(code: Any, name: str) -> Any:
    return next(c for c in code.co_consts if getattr(c, "co_name", None) == name)


_CHECK_CODE = _nested_code(_nested_code(exercise.__code__, "decorate"), "check")  # every check's wrapper


def _checking() -> Exercise | None:
    """The exercise of the innermost check on the call stack (None outside a check): read from the frame of
    its check's wrapper, which an answer cannot change (unlike a list it could empty)."""
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_code is _CHECK_CODE:
            declared = frame.f_locals.get("declared")
            return declared if isinstance(declared, Exercise) else None
        frame = frame.f_back
    return None


# ---------------------------------------------------------------------------------------- verdicts
_SILENCED = [0]  # > 0 inside silenced(): verdicts are neither logged nor raised


@contextlib.contextmanager
def silenced():
    """Run checks without raising under nbgrader.

    For code that checks ANOTHER notebook's exercises (to decide whether to use the student's
    version): those verdicts must not count as this notebook's."""
    _SILENCED[0] += 1
    try:
        yield
    finally:
        _SILENCED[0] -= 1


class CheckFailed(Exception):
    """Raised by a check under nbgrader's autograding when the exercise does not pass."""


class Verdict(tuple):
    """What a check returns: displayed as its one verdict line, truthy exactly when it passes.

    A tuple (exercise, status, message, mistake) without attributes of its own: once made it cannot be
    changed, not even with ``object.__setattr__`` (the grader reads it after the student's code ran)."""

    __slots__ = ()

    def __new__(cls, exercise: str, status: str, message: str, mistake: str | None = None) -> "Verdict":
        return tuple.__new__(cls, (exercise, status, " ".join(str(message).split()), mistake))  # one line, always

    exercise = property(lambda self: tuple.__getitem__(self, 0), doc="the exercise's name")
    status = property(lambda self: tuple.__getitem__(self, 1), doc="pass, fail or todo")
    message = property(lambda self: tuple.__getitem__(self, 2), doc="the verdict line without its symbol and name")
    mistake = property(lambda self: tuple.__getitem__(self, 3), doc="the code of the mistake recognised, or None")

    def __getnewargs__(self) -> tuple:
        return tuple(self)

    def __bool__(self) -> bool:
        return self.status == PASS

    def __str__(self) -> str:
        return f"{SYMBOLS[self.status]} {self.exercise}: {self.message}"

    __repr__ = __str__

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:  # IPython's display of a cell's last value
        printer.text(str(self))

    def to_dict(self) -> dict:
        return {"name": self.exercise, "status": self.status, "mistake": self.mistake, "message": self.message}

    def record(self) -> "Verdict":
        """Under nbgrader's autograding, raise when the verdict is not a pass (the course grader computes
        its own verdicts in a fresh interpreter, course_tools/verdicts.py: nothing is logged for it)."""
        if _SILENCED[0]:
            return self
        if os.environ.get("NBGRADER_EXECUTION") and not self:
            raise CheckFailed(str(self))
        return self


# ---------------------------------------------------------------------------------------- failures
class Mistake(Exception):
    """Raised inside a check body: the answer is wrong; the text is the message shown."""

    def __init__(self, message: str, code: str | None = None):
        super().__init__(message)
        self.code = code


class Known(Exception):
    """Raised inside a check body: the answer equals a known wrong answer (a declared mistake code)."""

    def __init__(self, code: str, **fields: Any):
        super().__init__(code)
        self.code, self.fields = code, fields


class NotImplementedYet(Exception):
    """Raised inside a check body: the student's function still holds its stub."""


def generic(code: str, **fields: Any) -> Mistake:
    """A Mistake with one of the GENERIC_MISTAKES codes and its filled-in message (in the student's language)."""
    return Mistake(_translated(f"generic:{code}", GENERIC_MISTAKES[code], **fields), code)


# ---------------------------------------------------------------------------------------- calling
def call(func: Any, *args: Any, **kwargs: Any) -> Any:
    """Call the student's function quietly; turn its stub or its crash into a readable message."""
    if not callable(func):
        raise generic("not_callable", kind=type(func).__name__)
    declared = _checking()  # a check that names changed inputs itself keeps that job
    own = declared is not None and bool({"changes_input", "modified_input", "input_modified"} & set(declared.mistakes))
    snapshots = [] if own else _snapshots(func, args, kwargs)
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"), forbidden(declared):
            warnings.simplefilter("ignore")
            result = func(*args, **kwargs)
            tried = used()
        if tried:  # the student's code called something off limits, and caught the error it raised
            raise OffLimitsUsed(tried[0])
        for name, value, before in snapshots:
            if not _unchanged(value, before):
                raise _ChangedInput(name)
        return result
    except _ChangedInput as changed:
        raise generic("changed_input", call=_call_label(func, args, kwargs), name=changed.name) from None
    except NotImplementedError:
        raise NotImplementedYet("replace `# Your Code Here` and `raise NotImplementedError()` "
                                "with your code.") from None
    except KeyboardInterrupt:  # the student stops a hang: the cell stops, as they asked
        raise
    except BaseException as error:  # noqa: BLE001 - SystemExit too: report where it broke, in one line
        name = used()[0] if used() else off_limits_name(error)
        if name or isinstance(error, OffLimitsUsed):
            raise generic("used_off_limits", call=_call_label(func, args, kwargs), name=name or str(error)) from None
        where = ""
        try:
            frames = traceback.extract_tb(error.__traceback__)
        except Exception:  # noqa: BLE001 - a traceback the grader's sandbox does not let anyone read
            frames = traceback.StackSummary()
        if len(frames) > 1:
            frame = frames[-1]
            code = (frame.line or "").strip()
            where = (tr("harness:at_line_code", " (at line {line}: `{code}`)", line=frame.lineno, code=code) if code
                     else tr("harness:at_line", " (at line {line})", line=frame.lineno))
        raise generic("raised_error", call=_call_label(func, args, kwargs), error=f"{type(error).__name__}: {error}",
                      where=where) from None


class _ChangedInput(Exception):
    def __init__(self, name: str):
        super().__init__(name)
        self.name = name


def _snapshots(func: Any, args: tuple, kwargs: dict) -> list[tuple[str, Any, Any]]:
    """(argument name, the array or tensor passed, a copy of it) for each array or tensor argument."""
    try:
        names = list(inspect.signature(func).parameters)
    except (TypeError, ValueError):
        names = []
    found = []
    for index, value in list(enumerate(args)) + list(kwargs.items()):
        name = index if isinstance(index, str) else (names[index] if index < len(names) else f"argument {index + 1}")
        if isinstance(value, np.ndarray):
            found.append((name, value, value.copy()))
        elif hasattr(value, "detach") and hasattr(value, "clone") and getattr(value, "device", None) is not None:
            if str(value.device) != "meta":
                found.append((name, value, value.detach().clone()))
    return found


def _unchanged(value: Any, before: Any) -> bool:
    if isinstance(value, np.ndarray):
        return value.shape == before.shape and np.array_equal(value, before, equal_nan=value.dtype.kind in "fc")
    now = value.detach()
    if now.shape != before.shape:
        return False
    if now.is_floating_point() or now.is_complex():
        return bool(((now == before) | (now.isnan() & before.isnan())).all())
    return bool((now == before).all())


def _call_label(func: Any, args: tuple, kwargs: dict) -> str:
    name = getattr(func, "__name__", tr("harness:your_function", "your function"))
    parts = [_short(a) for a in args] + [f"{k}={_short(v)}" for k, v in kwargs.items()]
    return f"{name}({', '.join(parts)})"


def _short(value: Any) -> str:
    shape = getattr(value, "shape", None)
    if shape is not None:
        return tr("harness:value_of_shape", "<{kind} of shape {shape}>", kind=type(value).__name__, shape=tuple(shape))
    text = repr(value)
    return text if len(text) <= 30 else text[:27] + "..."


# ---------------------------------------------------------------------------------------- converting
def as_numpy(value: Any, what: str, dtype: Any = None, kind: str | None = None) -> np.ndarray:
    """Turn a returned value (array, tensor, nested list) into a numpy array, or explain why it cannot be one.

    kind: what the value should have been, for the message (default "an array")."""
    if value is None:
        raise generic("returned_none", what=what)
    if hasattr(value, "detach") and hasattr(value, "cpu"):  # a torch tensor
        value = value.detach().cpu()
        value = value.resolve_conj().numpy() if value.is_complex() else value.numpy()
    if dtype is not None and np.dtype(dtype).kind == "f":  # numbers expected: no silent complex or text
        try:
            raw = np.asarray(value)
        except Exception:  # noqa: BLE001 - ragged lists: the conversion below explains
            raw = None
        if raw is not None:
            if raw.dtype.kind == "c" or (raw.dtype.kind == "O" and any(isinstance(v, complex) for v in raw.flat)):
                flat = raw.reshape(-1)
                example = next((v for v in flat if complex(v).imag != 0), flat[0] if flat.size else 0j)
                raise generic("complex_values", what=what, example=f"{complex(example):.4g}")
            text = raw.dtype.kind == "O" and any(isinstance(v, (str, bytes)) for v in raw.flat)
            if raw.dtype.kind in "USbO":  # text, booleans, or an array of Python objects (dtype=object)
                kinds = {"U": tr("harness:strings", "strings"), "S": tr("harness:bytes", "bytes"),
                         "b": tr("harness:booleans", "booleans (True/False)"),
                         "O": tr("harness:objects", "Python objects (an array of dtype object)")}
                raise generic("not_numbers", what=what, kind=kinds["U"] if text else kinds[raw.dtype.kind])
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return np.asarray(value, dtype=dtype)
    except Exception:  # noqa: BLE001 - ragged lists, strings, odd objects
        raise generic("not_an_array", what=what, kind=type(value).__name__,
                      expected=kind if kind is not None else tr("harness:an_array", "an array")) from None


def to_array(value: Any, what: str) -> np.ndarray:
    """Turn a returned value into a float64 numpy array, or explain why it cannot be one."""
    return as_numpy(value, what, np.float64, tr("harness:an_array_of_numbers", "an array of numbers"))


def output_and_weights(result: Any, what: str) -> tuple[np.ndarray, np.ndarray]:
    """Split a returned (output, weights) pair into two float arrays, or explain what is wrong."""
    if result is None:
        raise generic("returned_none", what=what)
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        shape = getattr(result, "shape", None)
        extra = tr("harness:of_shape", " of shape {shape}", shape=tuple(shape)) if shape is not None else ""
        raise generic("not_a_pair", what=what, kind=f"{type(result).__name__}{extra}")
    return (to_array(result[0], tr("harness:pair_output", "{what}[0] (output)", what=what)),
            to_array(result[1], tr("harness:pair_weights", "{what}[1] (weights)", what=what)))


# ---------------------------------------------------------------------------------------- comparing
def expect_shape(array: np.ndarray, shape: tuple, what: str, hint: str = "") -> None:
    """Raise a wrong_shape Mistake naming both shapes when they differ."""
    if array.shape != tuple(shape):
        raise generic("wrong_shape", what=what, actual=array.shape, expected=tuple(shape),
                      hint=f" {hint}" if hint else "")


def expect_finite(array: np.ndarray, what: str) -> None:
    if not np.all(np.isfinite(array)):
        bad = np.argwhere(~np.isfinite(array))[0]
        raise generic("not_finite", what=what, index=tuple(int(i) for i in bad))


def same(actual: Any, expected: Any, atol: float = 1e-5) -> bool:
    """True when two arrays (or two (output, weights) pairs) have the same shapes and agree to
    float32-level tolerance (an answer computed in float32, torch's default, is right). NaN equals NaN,
    so a known wrong answer that gives NaN is recognised."""
    if isinstance(expected, tuple):
        return (isinstance(actual, tuple) and len(actual) == len(expected)
                and all(same(a, e, atol) for a, e in zip(actual, expected)))
    return actual.shape == expected.shape and bool(np.allclose(actual, expected, rtol=1e-5, atol=atol,
                                                               equal_nan=True))


def match_known(actual: Any, wrong_answers: dict[Any, Any]) -> None:
    """Raise the known mistake of the first wrong answer that actual equals.

    wrong_answers maps a mistake code (or a ``Known(code, **fields)`` whose hint needs fields) to
    the wrong array, or the wrong (output, weights) pair, that the mistake produces.
    """
    for key, wrong in wrong_answers.items():
        if wrong is not None and same(actual, wrong):
            raise key if isinstance(key, Known) else Known(key)


def distinct(actual: float, expected: float) -> tuple[str, str]:
    """Two numbers written with just enough digits to look different (never "0.821856" against "0.821856")."""
    for digits in range(6, 18):
        a, b = f"{actual:.{digits}g}", f"{expected:.{digits}g}"
        if a != b:
            return a, b
    return repr(float(actual)), repr(float(expected))


def first_difference(actual: np.ndarray, expected: np.ndarray) -> str:
    """Describe the entry where two same-shaped arrays differ most."""
    diff = np.nan_to_num(np.abs(actual - expected), nan=np.inf)
    index = tuple(int(i) for i in np.unravel_index(int(np.argmax(diff)), diff.shape))
    got, want = distinct(actual[index], expected[index])
    return tr("harness:first_difference", "at index {index} you have {actual}, the reference has {expected}",
              index=index, actual=got, expected=want)


def compare(actual: np.ndarray, expected: np.ndarray, wrong_answers: dict[str, Any], what: str) -> None:
    """Pass when actual equals expected; else the known mistake it matches; else NaN or the first difference."""
    if same(actual, expected):
        return
    match_known(actual, wrong_answers)
    if np.isnan(actual).any():
        raise generic("not_finite", what=what, index=tuple(int(i) for i in np.argwhere(np.isnan(actual))[0]))
    raise Mistake(tr("harness:differs", "{what} differs from the reference: {difference}.", what=what,
                     difference=first_difference(actual, expected)))


def is_close(a: float, b: float, tol: float = 1e-6) -> bool:
    return math.isclose(a, b, rel_tol=tol, abs_tol=tol)


__all__ = ["CheckFailed", "EXERCISES", "Exercise", "FAIL", "GENERIC_MISTAKES", "Known", "Mistake", "NotImplementedYet",
           "PASS", "SYMBOLS", "TODO", "Verdict", "as_numpy", "call", "compare", "current_exercise", "distinct",
           "exercise", "exercises_in", "expect_finite", "expect_shape", "first_difference", "generic", "hint_fields",
           "is_close", "match_known", "output_and_weights", "same", "silenced", "to_array"]
