"""What a check body raises when an answer is wrong (``Known(code)``, ``Mistake(message)``, ``generic(code)``;
``NotImplementedYet`` for a stub), and the generic mistakes every check may name."""

from __future__ import annotations

from typing import Any

from ..i18n import tr

# Codes every check may report besides its own known mistakes: what the harness itself recognises.
# An exercise may give one of them its own hint (its `mistakes` then names the code too).
GENERIC_MISTAKES = {
    "not_callable": "expected a function or class, got {kind}. Pass it itself, without ().",
    "returned_none": "{what} returned None. Did you forget the `return` statement?",
    "not_an_array": "{what} returned a {kind}, which is not {expected}.",
    "not_a_real_array": "{what} returned a {kind}, an object that only turns itself into an array: return a NumPy "
                        "array, a torch tensor or a number.",
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


class Mistake(Exception):
    """Raised inside a check body: the answer is wrong; the text is the message shown."""

    def __init__(self, message: str, code: str | None = None):
        super().__init__(message)
        self.code = code


class Known(Exception):
    """Raised inside a check body: the answer equals a known wrong answer (a declared or generic mistake code)."""

    def __init__(self, code: str, **fields: Any):
        super().__init__(code)
        self.code, self.fields = code, fields


class NotImplementedYet(Exception):
    """The student's function still holds its stub (read from its source: source.is_stub)."""


def generic(code: str, **fields: Any) -> Mistake:
    """A Mistake with one of the GENERIC_MISTAKES codes and its filled-in message (in the student's language).
    Its key is generic:<code>; tfs-translate reads the registry's texts from GENERIC_MISTAKES itself."""
    return Mistake(tr(f"generic:{code}", GENERIC_MISTAKES[code], **fields), code)
