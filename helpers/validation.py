"""Argument checks shared by the reference code: every bad input becomes a ValueError that
names the argument and says what was expected."""

from __future__ import annotations

import numbers
from typing import Any


def positive_int(value: Any, name: str, *, even: bool = False) -> int:
    """Return ``value`` as an int, or raise ValueError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be a positive integer, got {value!r} ({type(value).__name__})")
    if value <= 0:
        raise ValueError(f"{name} must be a positive integer, got {value}")
    if even and value % 2:
        raise ValueError(f"{name} must be even (sine and cosine columns come in pairs), got {value}")
    return int(value)


def positive_float(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not value > 0:
        raise ValueError(f"{name} must be a positive number, got {value!r}")
    return float(value)


def probability(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0.0 <= value < 1.0:
        raise ValueError(f"{name} must be a probability in [0, 1), got {value!r}")
    return float(value)


def shape_str(shape: Any) -> str:
    return "(" + ", ".join(str(s) for s in shape) + ")"
