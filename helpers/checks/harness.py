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
``NBGRADER_EXECUTION`` was set when this module was imported) a verdict other than a pass raises
``CheckFailed`` with the verdict line as its message, so that the check cell earns no points.
``check.verdict_of(answer)`` computes the same verdict and never raises (for code that checks another
notebook's exercise to decide whether to use the student's version). The course grader does not read
the verdicts a notebook's kernel computes: it computes its own.

A stub is recognised by its source (source.is_stub), never by the exception it raises; a crash is
located at the answer's own line. When grading (``TFS_GRADING_SEED`` or ``NBGRADER_EXECUTION`` set at
import), ``grading_rng()`` gives each check a generator for one extra case of drawn sizes and seeds,
so that an answer precomputed for the fixed cases fails; a notebook's own runs keep the fixed cases.
"""

from __future__ import annotations

import contextvars
import functools
import importlib
import inspect
import os
import string
import traceback
import warnings
import zlib
from dataclasses import dataclass, field
from typing import Any, Callable, NamedTuple

import numpy as np

from ..i18n import tr
from . import guard
from .guard import TAMPERING, static_tampering, tampering_message
from .mistakes import GENERIC_MISTAKES, Known, Mistake, NotImplementedYet, generic, translated
from .off_limits import OffLimitsUsed, forbidden, off_limits_reached
from .source import answer_files, is_stub
from .values import (as_numpy, compare, distinct, expect_finite, expect_shape, first_difference, is_close,
                     match_known, output_and_weights, same, to_array)

PASS, FAIL, TODO = "pass", "fail", "todo"
SYMBOLS = {PASS: "✅", FAIL: "❌", TODO: "📝"}

# Read once, when the checks are imported: an answer that changes the environment later changes nothing.
NBGRADER = bool(os.environ.get("NBGRADER_EXECUTION"))  # nbgrader's autograding: a failing check cell raises


def _grading_seed() -> int | None:
    text = os.environ.get("TFS_GRADING_SEED")  # set by the course grader for its verdicts process
    if text:
        return int(text) if text.strip().isdigit() else zlib.crc32(text.encode("utf-8"))
    return int.from_bytes(os.urandom(8), "little") if NBGRADER else None


GRADING_SEED = _grading_seed()
_translated = translated  # the name the grader's older code imports


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
    # What the student's code may not use (the exercise's own reference in helpers, the built-ins the
    # notebook names as off limits), as dotted names such as "helpers.positional.positional_encoding" or
    # "torch.nn.functional.layer_norm". Enforced by off_limits.py.
    off_limits: tuple[str, ...] = ()
    # The dotted name of the exercise's reference in helpers, e.g. "helpers.positional.positional_encoding".
    reference: str = ""

    def reference_object(self) -> Any:
        """The reference function or class that `reference` names, imported."""
        module, _, attribute = self.reference.rpartition(".")
        return getattr(importlib.import_module(module), attribute)

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


class _Running(NamedTuple):
    exercise: Exercise
    files: frozenset  # the files of the answer's code: a crash is located at its last line in them


_RUNNING: contextvars.ContextVar[_Running | None] = contextvars.ContextVar("tfs_running_check", default=None)


def current_exercise() -> Exercise | None:
    """The exercise whose check is running now (None outside a check)."""
    running = _RUNNING.get()
    return running.exercise if running else None


def grading_rng() -> np.random.Generator | None:
    """When grading, a generator for the extra case of the running check (its sizes and the seeds of its
    random inputs), drawn from the grading seed and the exercise's name; None in a notebook's own runs."""
    if GRADING_SEED is None:
        return None
    exercise = current_exercise()
    return np.random.default_rng([GRADING_SEED, zlib.crc32((exercise.name if exercise else "").encode("utf-8"))])


def graded(cases: list, draw: Callable[[np.random.Generator], Any]) -> list:
    """The fixed cases, plus one drawn with draw(grading_rng()) when grading."""
    rng = grading_rng()
    return list(cases) + ([draw(rng)] if rng is not None else [])


def exercise(name: str, *, notebook: str, defines: str, reference: str, success: str = "correct!",
             mistakes: dict[str, str] | None = None, points: int = 1,
             off_limits: tuple[str, ...] | list[str] = ()) -> Callable:
    """Declare an exercise on its check body and turn the body into a never-raising check.

    The body receives the student's function (and any extra arguments). It raises ``Known(code)``
    or ``Mistake(message)`` when the answer is wrong, and returns an optional sentence that is
    added to the success line when it is right. `mistakes` may give a generic code its own hint.
    """
    mistakes = dict(mistakes or {})
    for code in mistakes:
        if not code.isidentifier() or code != code.lower():
            raise ValueError(f"mistake code {code!r} of {name}: use a new lower_snake_case identifier")
    if name in EXERCISES:
        raise ValueError(f"exercise {name!r} is declared twice")

    def decorate(body: Callable) -> Callable:
        declared = Exercise(name, notebook, defines, success, mistakes, points, None, tuple(off_limits), reference)

        def verdict_of(*args: Any, **kwargs: Any) -> Verdict:
            """The verdict of the check, computed without ever raising CheckFailed."""
            answer = args[0] if args else None
            token = _RUNNING.set(_Running(declared, frozenset(answer_files(answer)) if args else frozenset()))
            try:
                with warnings.catch_warnings(), np.errstate(all="ignore"):  # no warning shown
                    warnings.simplefilter("ignore")
                    return _verdict(declared, body, args, kwargs)
            finally:
                _RUNNING.reset(token)

        @functools.wraps(body)
        def check(*args: Any, **kwargs: Any) -> Verdict:
            verdict = verdict_of(*args, **kwargs)
            if NBGRADER and not verdict:
                raise CheckFailed(str(verdict))
            return verdict

        registered = Exercise(name, notebook, defines, success, mistakes, points, check, tuple(off_limits), reference)
        EXERCISES[name] = registered
        guard.CHECK_NAMES.add(check.__name__)
        check.exercise = registered
        check.verdict_of = verdict_of
        return check

    return decorate


def _verdict(declared: Exercise, body: Callable, args: tuple, kwargs: dict) -> Verdict:
    name = declared.name
    try:
        if args:
            reached = static_tampering(args[0], declared.defines)
            if reached:  # the statement of the answer reaches into the checking code: the grader's verdict
                raise Mistake(tampering_message(reached), TAMPERING)
            if is_stub(args[0]):
                raise NotImplementedYet()
            used = off_limits_reached(args[0], declared.off_limits)
            if used:
                raise generic("used_off_limits", call=_call_label(args[0], (), {}), name=used)
        extra = body(*args, **kwargs)
    except NotImplementedYet:
        return Verdict(name, TODO, tr("harness:todo", "not implemented yet: replace `# Your Code Here` "
                                      "and `raise NotImplementedError()` with your code."))
    except Known as known:
        return Verdict(name, FAIL, *_fill(declared, known.code, known.fields))
    except Mistake as mistake:
        return Verdict(name, FAIL, str(mistake), mistake.code)
    except Exception as bug:  # a bug in the check itself must still not show a traceback wall
        return Verdict(name, FAIL, *_fill(declared, "check_error", {"error": f"{type(bug).__name__}: {bug}"}))
    return Verdict(name, PASS, f"{translated(f'{name}:success', declared.success)} {extra or ''}".strip())


def _fill(declared: Exercise, code: str, fields: dict) -> tuple[str, str]:
    """(message, code) of a known mistake; an undeclared code or a missing field is a bug of the check."""
    try:
        if code in declared.mistakes:
            return translated(f"{declared.name}:{code}", declared.mistakes[code], **fields), code
        declared.hint(code, **fields)  # an undeclared code raises KeyError here
        return translated(f"generic:{code}", GENERIC_MISTAKES[code], **fields), code
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


# ---------------------------------------------------------------------------------------- verdicts
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


# ---------------------------------------------------------------------------------------- calling
def call(func: Any, *args: Any, **kwargs: Any) -> Any:
    """Call the student's code quietly, its off-limits torch functions refused; turn its crash (located at
    the answer's own line), a change of its arguments or an off-limits call into a readable Mistake."""
    if not callable(func):
        raise generic("not_callable", kind=type(func).__name__)
    running = _RUNNING.get()
    declared = running.exercise if running else None
    own = declared is not None and "changed_input" in declared.mistakes  # the check names changed inputs itself
    snapshots = [] if own else _snapshots(func, args, kwargs)
    tried: list[str] | None = None
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"), forbidden(declared) as tried:
            warnings.simplefilter("ignore")
            result = func(*args, **kwargs)
        if tried:  # the student's code called something off limits, and caught the error it raised
            raise OffLimitsUsed(tried[0])
        for name, value, before in snapshots:
            if not _unchanged(value, before):
                raise _ChangedInput(name)
        return result
    except _ChangedInput as changed:
        raise generic("changed_input", call=_call_label(func, args, kwargs), name=changed.name) from None
    except KeyboardInterrupt:  # the student stops a hang: the cell stops, as they asked
        raise
    except BaseException as error:  # noqa: BLE001 - SystemExit too: report where it broke, in one line
        if tried or isinstance(error, OffLimitsUsed):
            raise generic("used_off_limits", call=_call_label(func, args, kwargs),
                          name=tried[0] if tried else str(error)) from None
        where = _where(error, running.files if running else frozenset())
        raise generic("raised_error", call=_call_label(func, args, kwargs), error=f"{type(error).__name__}: {error}",
                      where=where) from None


def _where(error: BaseException, files: frozenset) -> str:
    """" (at line N: `code`)" of the last traceback frame in the answer's own files, or "" when there is none."""
    try:
        frames = traceback.extract_tb(error.__traceback__)
    except Exception:  # noqa: BLE001 - a traceback that cannot be read
        return ""
    frame = next((f for f in reversed(frames) if f.filename in files), None)
    if frame is None:
        return ""
    code = (frame.line or "").strip()
    return (tr("harness:at_line_code", " (at line {line}: `{code}`)", line=frame.lineno, code=code) if code
            else tr("harness:at_line", " (at line {line})", line=frame.lineno))


class _ChangedInput(Exception):
    def __init__(self, name: str):
        super().__init__(name)
        self.name = name


def _snapshots(func: Any, args: tuple, kwargs: dict) -> list[tuple[str, Any, Any]]:
    """(argument name, the array or tensor passed, a copy of it) for each array or tensor argument."""
    import torch

    try:
        names = list(inspect.signature(func).parameters)
    except (TypeError, ValueError):
        names = []
    found = []
    for index, value in list(enumerate(args)) + list(kwargs.items()):
        name = index if isinstance(index, str) else (names[index] if index < len(names) else f"argument {index + 1}")
        if isinstance(value, np.ndarray):
            found.append((name, value, value.copy()))
        elif isinstance(value, torch.Tensor) and str(value.device) != "meta":
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
    name = getattr(func, "__name__", None) or getattr(type(func), "__name__", None) or tr(
        "harness:your_function", "your function")
    parts = [_short(a) for a in args] + [f"{k}={_short(v)}" for k, v in kwargs.items()]
    return f"{name}({', '.join(parts)})"


def _short(value: Any) -> str:
    shape = getattr(value, "shape", None)
    if shape is not None:
        return tr("harness:value_of_shape", "<{kind} of shape {shape}>", kind=type(value).__name__, shape=tuple(shape))
    text = repr(value)
    return text if len(text) <= 30 else text[:27] + "..."


__all__ = ["CheckFailed", "EXERCISES", "Exercise", "FAIL", "GENERIC_MISTAKES", "GRADING_SEED", "Known", "Mistake",
           "NBGRADER", "NotImplementedYet", "PASS", "SYMBOLS", "TODO", "Verdict", "as_numpy", "call", "compare",
           "current_exercise", "distinct", "exercise", "exercises_in", "expect_finite", "expect_shape",
           "first_difference", "generic", "graded", "grading_rng", "hint_fields", "is_close", "match_known",
           "output_and_weights", "same", "to_array"]
