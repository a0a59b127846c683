"""The check harness: the exercise registry, a safe call of the student's code, comparisons, verdicts.

Every exercise is declared once, on its check function (``@exercise(name, notebook=..., defines=...,
success=..., mistakes={code: hint})``), and the grader, the nbgrader metadata and the tests read that.
A check body raises ``Known(code)`` for a known wrong answer, ``Mistake(message)`` for anything else it
can explain, and returns when the answer is right; the decorator turns that into a ``Verdict``, one line
that is truthy exactly on a pass. A check never raises, except under nbgrader's autograding
(``NBGRADER_EXECUTION`` set at import), where a verdict other than a pass raises ``CheckFailed`` so that
the check cell earns no points, and a pass is printed, not returned (nbgrader reads a cell's value as a
partial score); ``check.verdict_of(answer)`` never raises. A stub is recognised by its source, a crash is
located at the answer's own line. When grading (``TFS_GRADING_SEED`` or
``NBGRADER_EXECUTION`` set at import), ``graded`` adds a case of drawn sizes and seeds to the fixed ones.
"""

from __future__ import annotations

import contextvars
import functools
import importlib
import inspect
import os
import string
import sys
import traceback
import warnings
import zlib
from dataclasses import dataclass, field, replace
from typing import Any, Callable, NamedTuple

import numpy as np
import torch

from ..i18n import tr
from .guard import CHECK_NAMES, TAMPERING, static_tampering, tampering_message
from .mistakes import GENERIC_MISTAKES, Known, Mistake, NotImplementedYet, generic
from .off_limits import OffLimitsUsed, forbidden, off_limits_reached
from .source import answer_files, is_stub
from .values import (as_numpy, compare, distinct, expect_finite, expect_shape, first_difference,  # noqa: F401
                     is_close, match_known, output_and_weights, same, to_array)  # re-exported for the checks

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
    # What the student's code may not use (its reference, the built-ins the notebook names as off limits), as
    # dotted names such as "torch.nn.functional.layer_norm": see off_limits.py.
    off_limits: tuple[str, ...] = ()
    reference: str = ""  # the dotted name of the reference in helpers, "helpers.positional.positional_encoding"

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
    """The fixed cases, plus one drawn with draw(grading_rng()) when grading, never equal to a fixed one (an
    answer precomputed for the fixed cases must meet a new one)."""
    rng, cases = grading_rng(), list(cases)
    if rng is None:
        return cases
    drawn = draw(rng)
    while any(repr(drawn) == repr(case) for case in cases):
        drawn = draw(rng)
    return cases + [drawn]


def exercise(name: str, *, notebook: str, defines: str, reference: str, success: str = "correct!",
             mistakes: dict[str, str] | None = None, points: int = 1,
             off_limits: tuple[str, ...] | list[str] = ()) -> Callable:
    """Declare an exercise on its check body and turn the body into a never-raising check. The body gets the
    student's function (and any extra arguments), raises ``Known(code)`` or ``Mistake(message)`` when the answer
    is wrong, and may return a sentence added to the success line. `mistakes` may give a generic code its hint."""
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
            token = _RUNNING.set(_Running(declared, frozenset(answer_files(args[0]) if args else ())))
            try:
                with warnings.catch_warnings(action="ignore"), np.errstate(all="ignore"):  # no warning shown
                    return _verdict(declared, body, args, kwargs)
            finally:
                _RUNNING.reset(token)

        @functools.wraps(body)
        def check(*args: Any, **kwargs: Any) -> Verdict | None:
            verdict = verdict_of(*args, **kwargs)
            if NBGRADER and not verdict:
                raise CheckFailed(str(verdict))
            if NBGRADER:  # printed, not the cell's value, which nbgrader would try to read as a partial score
                sys.stdout.write(f"{verdict}\n")  # one write: print() writes the newline apart, a second output
                return None
            return verdict

        EXERCISES[name] = check.exercise = replace(declared, check=check)
        CHECK_NAMES.add(check.__name__)
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
    return Verdict(name, PASS, f"{tr(f'{name}:success', declared.success)} {extra or ''}".strip())


def _fill(declared: Exercise, code: str, fields: dict) -> tuple[str, str]:
    """(message, code) of a known mistake; an undeclared code or a missing field is a bug of the check."""
    key = f"{declared.name}:{code}" if code in declared.mistakes else f"generic:{code}"
    try:
        return tr(key, declared.hint(code), **fields), code  # an undeclared code raises KeyError here
    except (KeyError, IndexError) as error:
        return _fill(declared, "check_error",
                     {"error": tr("harness:unknown_mistake", "unknown mistake or field: {error}", error=error)})


def exercises_in(notebook: str) -> list[Exercise]:
    """The exercises of one notebook (its file name, with or without .ipynb), in notebook order."""
    return [e for e in EXERCISES.values() if e.notebook == notebook.removesuffix(".ipynb")]


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

    __repr__ = __str__  # IPython's display of a cell's last value too

    def to_dict(self) -> dict:
        return {"name": self.exercise, "status": self.status, "mistake": self.mistake, "message": self.message}


# ---------------------------------------------------------------------------------------- calling
def call(func: Any, *args: Any, **kwargs: Any) -> Any:
    """Call the student's code quietly, its off-limits torch functions refused; turn its crash (located at
    the answer's own line), a change of its arguments or an off-limits call into a readable Mistake."""
    if not callable(func):
        raise generic("not_callable", kind=type(func).__name__)
    label = _call_label(func, args, kwargs)
    running = _RUNNING.get()
    declared = running.exercise if running else None
    own = declared is not None and "changed_input" in declared.mistakes  # the check names changed inputs itself
    snapshots = [] if own else _snapshots(func, args, kwargs)
    tried: list[str] = []
    try:
        with warnings.catch_warnings(action="ignore"), np.errstate(all="ignore"), forbidden(declared) as tried:
            result = func(*args, **kwargs)
    except KeyboardInterrupt:  # the student stops a hang: the cell stops, as they asked
        raise
    except BaseException as error:  # noqa: BLE001 - SystemExit too: report where it broke, in one line
        if not (tried or isinstance(error, OffLimitsUsed)):
            where = _where(error, running.files if running else frozenset())
            raise generic("raised_error", call=label, error=f"{type(error).__name__}: {error}", where=where) from None
        tried = tried or [str(error)]
    if tried:  # the student's code called something off limits (and maybe caught the error it raised)
        raise generic("used_off_limits", call=label, name=tried[0])
    for name, value, before in snapshots:
        if not _unchanged(value, before):
            raise generic("changed_input", call=label, name=name)
    return result


def _where(error: BaseException, files: frozenset) -> str:
    """" (at line N: `code`)" of the last traceback frame in the answer's own files, or "" when there is none."""
    try:
        frame = next((f for f in reversed(traceback.extract_tb(error.__traceback__)) if f.filename in files), None)
    except Exception:  # noqa: BLE001 - a traceback that cannot be read
        frame = None
    if frame is None:
        return ""
    code = (frame.line or "").strip()
    return (tr("harness:at_line_code", " (at line {line}: `{code}`)", line=frame.lineno, code=code) if code
            else tr("harness:at_line", " (at line {line})", line=frame.lineno))


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
        elif isinstance(value, torch.Tensor) and str(value.device) != "meta":
            found.append((name, value, value.detach().clone()))
    return found


def _unchanged(value: Any, before: Any) -> bool:
    if value.shape != before.shape:
        return False
    if isinstance(value, np.ndarray):
        return np.array_equal(value, before, equal_nan=value.dtype.kind in "fc")
    now = value.detach()
    return bool(((now == before) | (now.isnan() & before.isnan())).all())


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
