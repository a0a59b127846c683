"""Checks for notebook 04: causal_mask, padding_mask and masked_softmax (numpy).

Convention checked: boolean masks, True = may attend. A fully masked row of weights is all zeros.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..attention import masked_softmax, softmax
from ..masking import causal_mask, padding_mask
from .attention import compare, quiet_call
from .harness import (Known, Mistake, as_numpy, call, compare, exercise, expect_finite, expect_shape,  # noqa: F401
                      first_difference, match_known, output_and_weights, same, to_array)

INVERTED = ("your mask is inverted: here True means MAY attend (the convention of "
            "F.scaled_dot_product_attention); True = blocked is nn.MultiheadAttention's convention.")


def to_bool_array(value: Any, what: str) -> np.ndarray:
    """A returned mask as a numpy bool array, or a Mistake explaining why it is not one."""
    array = as_numpy(value, what)
    if array.dtype != bool:
        if array.dtype.kind in "iuf" and array.size and np.isin(array, (0, 1)).all():
            raise Mistake(f"{what} has dtype {array.dtype} with 0/1 values: return a BOOLEAN array "
                          "(dtype=bool, e.g. `== 1` or `.astype(bool)`), since `~mask` and masked_fill need booleans.")
        raise Mistake(f"{what} has dtype {array.dtype}: return a boolean array (True = may attend).")
    return array


# ----------------------------------------------------------------------------- causal_mask
def wrong_causal_masks(size: int) -> dict[str, np.ndarray]:
    ones = np.ones((size, size), dtype=bool)
    return {
        "the diagonal is masked (off by one): each token may attend to ITSELF and to the earlier ones, so "
        "keep the diagonal: np.tril(..., k=0).": np.tril(ones, k=-1),
        "the upper and lower triangles are swapped: query i (row) may attend to keys j <= i (columns), "
        "which is the LOWER triangle, np.tril.": np.triu(ones),
        "your mask is inverted (True on the future, strictly above the diagonal): " + INVERTED.split(": ", 1)[1]:
            np.triu(ones, k=1),
        "you returned a mask full of True: nothing is hidden. Keep only the lower triangle (np.tril).": ones,
    }


@exercise("causal_mask", notebook="04_masking", defines="causal_mask",
          success="correct! Lower triangle including the diagonal: no query sees its future.")
def check_causal_mask(causal_fn: Callable) -> str:
    """Check a student's causal_mask(size): bool (size, size), True on and below the diagonal."""
    for size in (5, 1, 8):
        what = f"causal_mask({size})"
        result = to_bool_array(quiet_call(causal_fn, size), what)
        expect_shape(result, (size, size), what, "The mask is (L, L): one row per query, one column per key.")
        expected = causal_mask(size)
        if np.array_equal(result, expected):
            continue
        for hint, wrong in wrong_causal_masks(size).items():
            if np.array_equal(result, wrong):
                raise Mistake(hint)
        index = tuple(int(i) for i in np.argwhere(result != expected)[0])
        raise Mistake(f"{what} is {bool(result[index])} at {index} (query {index[0]}, key {index[1]}); expected "
                      f"{bool(expected[index])}: query i may attend to key j exactly when j <= i.")
    return "Checked sizes 5, 1 and 8."


# ----------------------------------------------------------------------------- padding_mask
def padding_cases() -> list[tuple[np.ndarray, int]]:
    """(tokens, pad_id): the second uses pad_id = 1 and contains real tokens of id 0."""
    return [
        (np.array([[5, 7, 9, 0, 0], [3, 0, 0, 0, 0], [4, 6, 8, 2, 1]]), 0),
        (np.array([[0, 4, 1, 1], [2, 3, 5, 0]]), 1),
    ]


@exercise("padding_mask", notebook="04_masking", defines="padding_mask",
          success="correct! True for real tokens, False for padding, shape (batch, 1, 1, L).")
def check_padding_mask(padding_fn: Callable) -> str:
    """Check a student's padding_mask(tokens, pad_id): bool (batch, 1, 1, L), True for real tokens."""
    for tokens, pad_id in padding_cases():
        what = f"padding_mask(<tokens of shape {tokens.shape}>, pad_id={pad_id})"
        result = to_bool_array(quiet_call(padding_fn, tokens.copy(), pad_id), what)
        expected = padding_mask(tokens, pad_id)
        batch, length = tokens.shape
        if result.size == expected.size and result.shape != expected.shape:
            flat = result.reshape(batch, length)
            hint = {(batch, length): "add the two singleton axes: mask[:, None, None, :]",
                    (batch, 1, length): "it needs two singleton axes, (batch, 1, 1, L), one for the heads "
                                        "and one for the queries",
                    (batch, length, 1, 1): "the padding is on the KEYS, the last axis: (batch, 1, 1, L), not "
                                           "(batch, L, 1, 1), which would mask query rows"}.get(result.shape, "")
            if np.array_equal(flat, expected[:, 0, 0, :]) or np.array_equal(flat, ~expected[:, 0, 0, :]):
                raise Mistake(f"{what} has shape {result.shape}, expected (batch, 1, 1, L) = {expected.shape}: "
                              f"{hint or 'reshape it with mask[:, None, None, :]'}.")
        expect_shape(result, expected.shape, what, "The mask is (batch, 1, 1, L): it broadcasts over heads and queries.")
        if np.array_equal(result, expected):
            continue
        if np.array_equal(result, ~expected):
            raise Mistake("the pads are marked True: " + INVERTED + " Use tokens != pad_id.")
        if pad_id != 0 and np.array_equal(result, padding_mask(tokens, 0)):
            raise Mistake(f"{what}: you compared with 0 instead of pad_id = {pad_id}: use tokens != pad_id.")
        if result.all():
            raise Mistake(f"{what} is True everywhere: the pads (tokens == pad_id) must be False.")
        raise Mistake(f"{what} differs from tokens != pad_id at {tuple(int(i) for i in np.argwhere(result != expected)[0])}.")
    return "Checked pad_id = 0 and pad_id = 1."


# ----------------------------------------------------------------------------- masked_softmax
def masked_softmax_cases() -> list[tuple[str, np.ndarray, np.ndarray]]:
    """(description, scores, mask); the second has fully masked rows, the third a broadcast mask."""
    rng = np.random.default_rng(60)
    scores1 = rng.normal(scale=2.0, size=(5, 5))
    scores2 = rng.normal(scale=2.0, size=(2, 4, 5))
    mask2 = rng.random((2, 4, 5)) > 0.4
    mask2[..., 0], mask2[..., -1] = True, False
    mask2[0, 2, :] = False  # a query row with no key at all
    mask2[1, 0, :] = False
    scores3 = rng.normal(scale=2.0, size=(2, 3, 4, 6))
    mask3 = padding_mask(np.array([[7, 8, 9, 0, 0, 0], [1, 2, 3, 4, 5, 0]]), 0)  # (2, 1, 1, 6)
    return [
        ("scores (5, 5), causal mask", scores1, causal_mask(5)),
        ("scores (2, 4, 5), a mask with fully masked rows", scores2, mask2),
        ("scores (2, 3, 4, 6), padding mask (2, 1, 1, 6)", scores3, mask3),
    ]


def wrong_masked_softmaxes(scores: np.ndarray, mask: np.ndarray) -> dict[str, np.ndarray]:
    full = np.broadcast_to(mask, scores.shape)
    with np.errstate(all="ignore"):
        nan_rows = softmax(np.where(full, scores, -np.inf))
        return {
            "a fully masked row gives NaN: with every score at -inf the softmax computes -inf - (-inf) = NaN. "
            "Give such rows zero weights (e.g. np.where(mask, weights, 0) after a softmax of a finite fill, "
            "or divide by the row sum only where it is > 0).": nan_rows,
            "a fully masked row gets uniform weights (an average over keys it must not see): a large negative "
            "fill like -1e9 is not enough. Set the weights of blocked keys to exactly 0 after the softmax.":
                softmax(np.where(full, scores, -1e9)),
            INVERTED + " Keep the scores where mask is True.": masked_softmax(scores, ~full),
            "you multiplied the scores by the mask: a blocked key gets score 0, not -inf, so it still "
            "receives weight. Replace blocked scores with -inf (np.where), don't multiply.":
                softmax(scores * full),
            "the mask is applied after the softmax without renormalising: the rows no longer sum to 1. Mask "
            "the scores BEFORE the softmax.": softmax(scores) * full,
            "you ignored the mask.": softmax(scores),
            "the softmax runs over the wrong axis: each row (one query, all keys) must sum to 1; use axis=-1.":
                softmax(np.where(full, scores, -np.inf), axis=-2),
        }


@exercise("masked_softmax", notebook="04_masking", defines="masked_softmax",
          success="correct! Blocked keys get exactly 0, fully masked rows are all zeros, no NaN.")
def check_masked_softmax(masked_softmax_fn: Callable) -> str:
    """Check a student's masked_softmax(scores, mask): softmax over keys, blocked keys 0, empty rows 0."""
    for description, scores, mask in masked_softmax_cases():
        what = f"masked_softmax(<{description}>)"
        result = to_array(quiet_call(masked_softmax_fn, scores.copy(), mask.copy()), what)
        expect_shape(result, scores.shape, what, "The weights have the shape of the scores.")
        expected = masked_softmax(scores, mask)
        compare(result, expected, wrong_masked_softmaxes(scores, mask), what)
        blocked = ~np.broadcast_to(mask, scores.shape)
        if np.any(result[blocked] != 0.0):
            raise Mistake(f"{what}: blocked keys must get EXACTLY zero weight (got up to "
                          f"{np.abs(result[blocked]).max():.2g}). Use -inf or zero them after the softmax.")
    return "Checked a causal mask, fully masked rows and a broadcast padding mask."


__all__ = ["check_causal_mask", "check_padding_mask", "check_masked_softmax", "wrong_causal_masks",
           "wrong_masked_softmaxes", "masked_softmax_cases", "padding_cases", "to_bool_array"]
