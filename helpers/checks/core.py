"""The machinery every exercise check shares.

A check never raises. It calls the student's function in a protected way, compares the result
with the reference, prints exactly one line and returns True or False:

    ✅ create_position_matrix: correct! ...
    📝 create_position_matrix: not implemented yet: replace `raise NotImplementedError()` ...
    ❌ create_position_matrix: you put cos on the even columns and sin on the odd ones ...

When the environment variable ``HELPERS_GRADE_LOG`` names a file, each result is also appended
to it as one JSON line; ``python -m helpers.grade`` reads that file.
"""

from __future__ import annotations

import functools
import json
import math
import os
import traceback
from typing import Any, Callable

import numpy as np

PASS, FAIL, TODO = "pass", "fail", "todo"
SYMBOLS = {PASS: "✅", FAIL: "❌", TODO: "📝"}


class Mistake(Exception):
    """Raised inside a check body: the student's answer is wrong; the text is the hint shown."""


class NotImplementedYet(Exception):
    """Raised inside a check body: the student's function still holds its stub."""


def _record(name: str, status: str, message: str) -> None:
    path = os.environ.get("HELPERS_GRADE_LOG")
    if not path:
        return
    try:
        with open(path, "a", encoding="utf-8") as log:
            log.write(json.dumps({"name": name, "status": status, "message": message}) + "\n")
    except OSError:
        pass


def report(name: str, status: str, message: str) -> bool:
    """Print the one line of a check's verdict, log it for the grader, return True on a pass."""
    message = " ".join(str(message).split())  # one line, whatever the hint held
    print(f"{SYMBOLS[status]} {name}: {message}")
    _record(name, status, message)
    return status == PASS


def exercise_check(name: str, success: str = "correct!") -> Callable:
    """Decorator turning a check body into a never-raising check.

    The body receives the student's function (and any extra arguments) and raises ``Mistake``
    with a hint when something is wrong. Whatever else happens becomes a clear one-line message.
    """

    def decorate(body: Callable) -> Callable:
        @functools.wraps(body)
        def check(*args: Any, **kwargs: Any) -> bool:
            try:
                extra = body(*args, **kwargs)
            except NotImplementedYet as todo:
                return report(name, TODO, f"not implemented yet: {todo}")
            except Mistake as mistake:
                return report(name, FAIL, str(mistake))
            except Exception as bug:  # a bug in the check itself must still not show a traceback wall
                return report(name, FAIL, f"the check could not run ({type(bug).__name__}: {bug}).")
            return report(name, PASS, f"{success} {extra or ''}".strip())

        check.exercise = name
        return check

    return decorate


def call(func: Any, *args: Any, **kwargs: Any) -> Any:
    """Call the student's function; turn its stub or its crash into a readable message."""
    label = _call_label(func, args, kwargs)
    if not callable(func):
        raise Mistake(f"expected a function, got {type(func).__name__}. Pass the function itself, without ().")
    try:
        return func(*args, **kwargs)
    except NotImplementedError:
        raise NotImplementedYet("replace `# Your Code Here` and `raise NotImplementedError()` with your code.") from None
    except Exception as error:  # report where in the student's code it broke, in one line
        where = ""
        frames = traceback.extract_tb(error.__traceback__)
        if len(frames) > 1:
            frame = frames[-1]
            code = (frame.line or "").strip()
            where = f" (at line {frame.lineno}: `{code}`)" if code else f" (at line {frame.lineno})"
        raise Mistake(f"{label} raised {type(error).__name__}: {error}{where}") from None


def _call_label(func: Any, args: tuple, kwargs: dict) -> str:
    name = getattr(func, "__name__", "your function")
    parts = [_short(a) for a in args] + [f"{k}={_short(v)}" for k, v in kwargs.items()]
    return f"{name}({', '.join(parts)})"


def _short(value: Any) -> str:
    shape = getattr(value, "shape", None)
    if shape is not None:
        return f"<{type(value).__name__} of shape {tuple(shape)}>"
    text = repr(value)
    return text if len(text) <= 30 else text[:27] + "..."


def as_numpy(value: Any, what: str, dtype: Any = None, kind: str = "an array") -> np.ndarray:
    """Turn a returned value (array, tensor, nested list) into a numpy array, or explain why it cannot be one."""
    if value is None:
        raise Mistake(f"{what} returned None. Did you forget the `return` statement?")
    if hasattr(value, "detach") and hasattr(value, "cpu"):  # a torch tensor
        value = value.detach().cpu().numpy()
    try:
        return np.asarray(value, dtype=dtype)
    except Exception:  # noqa: BLE001 - ragged lists, strings, odd objects
        raise Mistake(f"{what} returned a {type(value).__name__}, which is not {kind}.") from None


def to_array(value: Any, what: str) -> np.ndarray:
    """Turn a returned value into a float64 numpy array, or explain why it cannot be one."""
    return as_numpy(value, what, np.float64, "an array of numbers")


def expect_shape(array: np.ndarray, shape: tuple, what: str, hint: str = "") -> None:
    """Raise a Mistake naming both shapes when they differ."""
    if array.shape != tuple(shape):
        extra = f" {hint}" if hint else ""
        raise Mistake(f"{what} has shape {array.shape}, expected {tuple(shape)}.{extra}")


def expect_finite(array: np.ndarray, what: str) -> None:
    if not np.all(np.isfinite(array)):
        bad = np.argwhere(~np.isfinite(array))[0]
        raise Mistake(f"{what} contains NaN or inf (first at index {tuple(int(i) for i in bad)}).")


def same(actual: np.ndarray, expected: np.ndarray, atol: float = 1e-6) -> bool:
    """True when two arrays have the same shape and agree to float32-level tolerance."""
    return actual.shape == expected.shape and bool(np.allclose(actual, expected, rtol=1e-5, atol=atol))


def first_difference(actual: np.ndarray, expected: np.ndarray) -> str:
    """Describe the first entry where two same-shaped arrays differ."""
    diff = np.abs(actual - expected)
    index = tuple(int(i) for i in np.unravel_index(int(np.argmax(diff)), diff.shape))
    return f"at index {index} you have {actual[index]:.6g}, the reference has {expected[index]:.6g}"


def diagnose(actual: np.ndarray, expected: np.ndarray, wrong_answers: dict[str, np.ndarray], what: str) -> None:
    """Pass silently when actual matches expected; else raise the hint of the known mistake it matches."""
    if same(actual, expected):
        return
    for hint, wrong in wrong_answers.items():
        if same(actual, wrong):
            raise Mistake(hint)
    raise Mistake(f"{what} differs from the reference: {first_difference(actual, expected)}.")


def is_close(a: float, b: float, tol: float = 1e-6) -> bool:
    return math.isclose(a, b, rel_tol=tol, abs_tol=tol)
