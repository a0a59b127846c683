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


def step_number(value: Any, name: str = "step") -> int:
    """A training step number (an integer >= 0; step 0 counts as step 1 in the schedule), or TypeError/ValueError."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer step number, got {value!r} ({type(value).__name__})")
    if value < 0:
        raise ValueError(f"{name} must be a step number >= 0 (steps count from 1), got {value}")
    return int(value)


def token_id(value: Any, name: str) -> int:
    """An integer token id (any sign: -100 is a common "ignore" id), or TypeError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer token id, got {value!r} ({type(value).__name__})")
    return int(value)


def flag(value: Any, name: str) -> bool:
    """True or False exactly (a string such as "no" is truthy, so it is refused), or TypeError."""
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, got {value!r} ({type(value).__name__})")
    return value


def tensor(value: Any, name: str, expected: str) -> Any:
    """value itself when it is a torch.Tensor, else TypeError: "{name} must be a torch.Tensor {expected}"."""
    import torch

    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor {expected}, got {type(value).__name__}")
    return value


def floating(value: Any, name: str) -> Any:
    """value itself when it is a floating-point tensor, else ValueError naming ``name`` and its dtype."""
    if not value.dtype.is_floating_point:
        raise ValueError(f"{name} must be a floating-point tensor, got dtype {value.dtype}: convert it with "
                         f"{name}.float()")
    return value


def integer_ids(ids: Any, name: str) -> Any:
    """ids itself when it holds integer token ids (not float, not bool), else ValueError naming ``name``."""
    if ids.dtype.is_floating_point or ids.dtype.is_complex or str(ids.dtype) == "torch.bool":
        raise ValueError(f"{name} must hold integer token ids, got dtype {ids.dtype}")
    return ids


def texts(value: Any, name: str = "texts") -> list[str]:
    """A list of strings; one string alone is refused (it would be read as one text per character)."""
    if isinstance(value, str):
        raise TypeError(f"{name} must be a list of strings, got one str: wrap it in a list, [text]")
    if not isinstance(value, (list, tuple)) or not all(isinstance(t, str) for t in value):
        kind = type(value).__name__ if not isinstance(value, (list, tuple)) else \
            f"a {type(value).__name__} holding a {next(type(t).__name__ for t in value if not isinstance(t, str))}"
        raise TypeError(f"{name} must be a list of strings, got {kind}")
    return list(value)


def pairs(value: Any, name: str = "pairs") -> list[tuple[str, str]]:
    """A list of (written date, ISO date) pairs of strings, or TypeError/ValueError naming the first bad one."""
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        raise TypeError(f"{name} must be a list of (written date, ISO date) pairs, got {type(value).__name__}")
    for index, pair in enumerate(value):
        if isinstance(pair, str) or not isinstance(pair, (list, tuple)):
            raise TypeError(f"{name} must hold (written date, ISO date) pairs; {name}[{index}] is a "
                            f"{type(pair).__name__}")
        if len(pair) != 2:
            raise ValueError(f"{name} must hold (written date, ISO date) pairs; {name}[{index}] has {len(pair)} "
                             f"element{'s' if len(pair) != 1 else ''}")
        if not all(isinstance(text, str) for text in pair):
            raise TypeError(f"{name} must hold pairs of strings; {name}[{index}] is {pair!r}")
    return list(value)
