"""The values an answer returns: turned into numpy arrays (or refused, with the reason), then compared.

Only a real numpy array, torch tensor or number (or the lists and tuples of them an exercise asks for) is
accepted as a result: an object that merely converts itself (``__array__``) is a ``not_a_real_array`` fail.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
import torch

from ..i18n import tr
from .mistakes import Known, Mistake, generic

NUMBERS = (int, float, complex, bool, np.generic, np.ndarray, torch.Tensor, str, bytes)


def pretended_array(value: Any, depth: int = 0) -> str | None:
    """The type name of the first object in value (itself, or an item of its lists and tuples) that is not an
    array, a tensor, a number or text but has an __array__ method; None when there is none."""
    if isinstance(value, NUMBERS) or value is None:
        return None
    if isinstance(value, (list, tuple)):
        return None if depth > 8 else next((k for item in value if (k := pretended_array(item, depth + 1))), None)
    return type(value).__name__ if hasattr(value, "__array__") else None


# ---------------------------------------------------------------------------------------- converting
def as_numpy(value: Any, what: str, dtype: Any = None, kind: str | None = None) -> np.ndarray:
    """Turn a returned value (array, tensor, nested list) into a numpy array, or explain why it cannot be one.

    kind: what the value should have been, for the message (default "an array")."""
    if value is None:
        raise generic("returned_none", what=what)
    pretender = pretended_array(value)
    if pretender is not None:
        raise generic("not_a_real_array", what=what, kind=pretender)
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu()
        value = value.resolve_conj().numpy() if value.is_complex() else value.numpy()
    if dtype is not None and np.dtype(dtype).kind == "f":  # numbers expected: no silent complex or text
        try:
            raw = np.asarray(value)
        except Exception:  # noqa: BLE001 - ragged lists: the conversion below explains
            raw = np.zeros(0)
        items = list(raw.flat) if raw.dtype.kind == "O" else []  # an array of Python objects (dtype=object)
        if raw.dtype.kind == "c" or any(isinstance(v, complex) for v in items):
            flat = raw.reshape(-1)
            example = next((v for v in flat if complex(v).imag != 0), flat[0] if flat.size else 0j)
            raise generic("complex_values", what=what, example=f"{complex(example):.4g}")
        if raw.dtype.kind in "USbO":  # text, booleans or objects
            kinds = {"U": tr("harness:strings", "strings"), "S": tr("harness:bytes", "bytes"),
                     "b": tr("harness:booleans", "booleans (True/False)"),
                     "O": tr("harness:objects", "Python objects (an array of dtype object)")}
            text = any(isinstance(v, (str, bytes)) for v in items)
            raise generic("not_numbers", what=what, kind=kinds["U" if text else raw.dtype.kind])
    try:
        with warnings.catch_warnings(action="ignore"):
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
        shaped = isinstance(result, (np.ndarray, torch.Tensor))
        extra = tr("harness:of_shape", " of shape {shape}", shape=tuple(result.shape)) if shaped else ""
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
    bad = np.argwhere(~np.isfinite(array))
    if bad.size:
        raise generic("not_finite", what=what, index=tuple(int(i) for i in bad[0]))


def same(actual: Any, expected: Any, atol: float = 1e-5) -> bool:
    """True when two arrays (or (output, weights) pairs) have the same shapes and agree to float32-level
    tolerance (torch's default precision is right); NaN equals NaN, so a wrong answer giving NaN is recognised."""
    if isinstance(expected, tuple):
        return (isinstance(actual, tuple) and len(actual) == len(expected)
                and all(same(a, e, atol) for a, e in zip(actual, expected)))
    return actual.shape == expected.shape and bool(np.allclose(actual, expected, rtol=1e-5, atol=atol,
                                                               equal_nan=True))


def match_known(actual: Any, wrong_answers: dict[Any, Any]) -> None:
    """Raise the known mistake of the first wrong answer that actual equals. wrong_answers maps a mistake
    code (or a ``Known(code, **fields)``) to the wrong array, or (output, weights) pair, it produces."""
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
