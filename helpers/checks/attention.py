"""Checks for notebook 02: softmax and scaled_dot_product_attention (numpy).

Also holds the small tools the attention, multi-head and masking checks share: a quiet call
(numpy overflow warnings would otherwise print ipykernel paths into the notebook), unpacking an
(output, weights) pair, and comparing against a list of known wrong answers.
"""

from __future__ import annotations

import math
import warnings
from typing import Any, Callable

import numpy as np

from ..attention import masked_softmax, scaled_dot_product_attention, softmax
from .harness import (Known, Mistake, as_numpy, call, compare, exercise, expect_finite, expect_shape,  # noqa: F401
                      first_difference, match_known, output_and_weights, same, to_array)


# ----------------------------------------------------------------------------- shared tools
def quiet_call(func: Any, *args: Any, **kwargs: Any) -> Any:
    """``call`` with numpy's overflow/invalid warnings silenced (the check reports them itself)."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return call(func, *args, **kwargs)


def output_and_weights(result: Any, what: str) -> tuple[np.ndarray, np.ndarray]:
    """Split a returned (output, weights) pair into two float arrays, or explain what is wrong."""
    if result is None:
        raise Mistake(f"{what} returned None. Did you forget `return output, weights`?")
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        kind = type(result).__name__
        shape = getattr(result, "shape", None)
        extra = f" of shape {tuple(shape)}" if shape is not None else ""
        raise Mistake(f"{what} returned a {kind}{extra}; it must return a pair: `return output, weights`.")
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return to_array(result[0], f"{what}[0] (output)"), to_array(result[1], f"{what}[1] (weights)")


def has_nan(array: np.ndarray) -> bool:
    return bool(np.isnan(array).any())


def match_known(actual: np.ndarray, wrong: dict[str, np.ndarray]) -> None:
    """Raise the hint of the first known wrong answer ``actual`` equals (NaN compared as equal)."""
    for hint, answer in wrong.items():
        if actual.shape == answer.shape and bool(np.allclose(actual, answer, rtol=1e-5, atol=1e-6, equal_nan=True)):
            raise Mistake(hint)


def compare(actual: np.ndarray, expected: np.ndarray, wrong: dict[str, np.ndarray], what: str) -> None:
    """Pass when actual equals expected; else the hint of a known mistake, else the first difference."""
    if same(actual, expected):
        return
    match_known(actual, wrong)
    if has_nan(actual):
        bad = tuple(int(i) for i in np.argwhere(np.isnan(actual))[0])
        raise Mistake(f"{what} contains NaN (first at index {bad}).")
    raise Mistake(f"{what} differs from the reference: {first_difference(actual, expected)}.")


def _plain_softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    with np.errstate(all="ignore"):
        e = np.exp(x)
        return e / e.sum(axis=axis, keepdims=True)


def _seeded(seed: int, *shape: int, scale: float = 1.0) -> np.ndarray:
    return np.random.default_rng(seed).normal(scale=scale, size=shape)


# ----------------------------------------------------------------------------- softmax
def softmax_cases() -> list[tuple[str, np.ndarray, dict]]:
    """(description, x, kwargs) the student's softmax is called with, in order."""
    return [
        ("a square 3 x 3 matrix", _seeded(23, 3, 3, scale=2.0), {}),
        ("a 4 x 6 matrix, default axis", _seeded(20, 4, 6, scale=3.0), {}),
        ("a 4 x 6 matrix with axis=0", _seeded(21, 4, 6, scale=3.0), {"axis": 0}),
        ("a 2 x 3 x 4 array with axis=1", _seeded(22, 2, 3, 4, scale=2.0), {"axis": 1}),
        ("logits of about +1000 and -1000", np.array([[1000.0, 1000.0, 999.0, 990.0],
                                                      [-1000.0, -1000.0, -1001.0, -1010.0]]), {}),
    ]


def wrong_softmaxes(x: np.ndarray, axis: int = -1) -> dict[str, np.ndarray]:
    """The usual wrong softmaxes of x along axis, each with its hint."""
    with np.errstate(all="ignore"):
        whole = np.exp(x - x.max())
        return {
            "your softmax overflows: exp(1000) is inf and inf / inf is NaN. Subtract the maximum of each "
            "row before np.exp (x - x.max(axis=axis, keepdims=True)); it cancels in the ratio.":
                _plain_softmax(x, axis),
            "you subtracted the maximum of the WHOLE array: a row far below it underflows to 0 / 0 = NaN. "
            "Subtract each row's own maximum: x.max(axis=axis, keepdims=True).":
                whole / whole.sum(axis=axis, keepdims=True),
            "you divided by the sum of the whole array, so the rows do not sum to 1. "
            "Sum along the axis: exps.sum(axis=axis, keepdims=True).":
                np.exp(x - x.max(axis=axis, keepdims=True)) / np.exp(x - x.max(axis=axis, keepdims=True)).sum(),
            **{f"you ignored the `axis` argument (or used the wrong one: {a} instead of {axis}): the softmax must "
               "run along `axis`, so pass axis=axis to both max and sum.": softmax(x, axis=a)
               for a in range(x.ndim) if a != axis % x.ndim},
            "the sum lost its axis: without keepdims=True, exps / exps.sum(axis=axis) divides by the wrong "
            "entries (broadcasting pairs them with the last axis). Use keepdims=True.":
                _no_keepdims(x, axis),
        }


def _no_keepdims(x: np.ndarray, axis: int) -> np.ndarray:
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    s = e.sum(axis=axis)
    try:
        return e / s
    except ValueError:
        return np.full_like(x, np.inf)


@exercise("softmax", notebook="02_attention", defines="softmax",
          success="correct! Stable at logits of 1000, and each slice along `axis` sums to 1.")
def check_softmax(softmax_fn: Callable) -> str:
    """Check a student's softmax(x, axis=-1) against the reference, including huge logits."""
    for description, x, kwargs in softmax_cases():
        axis = kwargs.get("axis", -1)
        args = ", axis=" + str(axis) if kwargs else ""
        what = f"softmax(<{description}>{args})"
        try:
            result = to_array(quiet_call(softmax_fn, x.copy(), **kwargs), what)
        except Mistake as crash:
            if "could not be broadcast" in str(crash):
                raise Mistake(f"{crash} Keep the summed axis: exps.sum(axis=axis, keepdims=True).") from None
            raise
        expect_shape(result, x.shape, what, "The softmax keeps the shape of its input.")
        expected = softmax(x, axis=axis)
        compare(result, expected, wrong_softmaxes(x, axis), what)
        if not np.all(np.isfinite(result)):
            raise Mistake(f"{what} contains NaN or inf.")
    return "Checked 5 inputs (2-D and 3-D, axis -1, 0 and 1)."


# ----------------------------------------------------------------------------- attention
def attention_cases() -> list[tuple[str, tuple, Any]]:
    """(description, (Q, K, V), mask) for scaled_dot_product_attention, in the order they are tried.

    The first is 2-D with L_k = d_k, so an untransposed K still runs and gets its own hint; d_v
    differs from d_k everywhere, so scaling by sqrt(d_v) is told apart.
    """
    rng = np.random.default_rng(30)
    q1, k1, v1 = rng.normal(size=(3, 4)) * 2, rng.normal(size=(4, 4)) * 2, rng.normal(size=(4, 5))
    q2, k2, v2 = rng.normal(size=(2, 5, 8)) * 2, rng.normal(size=(2, 6, 8)) * 2, rng.normal(size=(2, 6, 3))
    q3, k3, v3 = rng.normal(size=(2, 3, 4, 16)), rng.normal(size=(2, 3, 7, 16)), rng.normal(size=(2, 3, 7, 2))
    mask = rng.random((2, 1, 4, 7)) > 0.4
    mask[..., 0] = True  # every query keeps at least one key (fully masked rows are notebook 04's topic)
    mask[..., -1] = False  # ... and so does every query of the inverted mask
    return [
        ("Q (3, 4), K (4, 4), V (4, 5)", (q1, k1, v1), None),
        ("batched Q (2, 5, 8), K (2, 6, 8), V (2, 6, 3)", (q2, k2, v2), None),
        ("Q (2, 3, 4, 16), K (2, 3, 7, 16), V (2, 3, 7, 2) with a mask (2, 1, 4, 7)", (q3, k3, v3), mask),
    ]


def wrong_attentions(Q: np.ndarray, K: np.ndarray, V: np.ndarray, mask: Any) -> dict[str, tuple]:
    """hint -> (output, weights) of the usual wrong attentions."""
    d_k, d_v = Q.shape[-1], V.shape[-1]
    kt = np.swapaxes(K, -1, -2)
    raw = Q @ kt
    wrong: dict[str, tuple] = {}

    def add(hint: str, weights: np.ndarray) -> None:
        wrong[hint] = (weights @ V, weights)

    def masked(scores: np.ndarray) -> np.ndarray:
        return masked_softmax(scores, mask)

    add("you forgot to divide the scores by sqrt(d_k): softmax(Q K^T / sqrt(d_k)).", masked(raw))
    add("you divided by d_k instead of sqrt(d_k): the scale is 1 / sqrt(d_k) (= 1/8 for d_k = 64).",
        masked(raw / d_k))
    if d_v != d_k:
        add("you scaled by sqrt(d_v), the width of V; the scale is 1 / sqrt(d_k), the width of Q and K "
            "(Q.shape[-1]).", masked(raw / math.sqrt(d_v)))
    with np.errstate(all="ignore"):
        scores = raw / math.sqrt(d_k)
        filled = scores if mask is None else np.where(mask, scores, -np.inf)
        e = np.exp(filled - np.nanmax(filled, axis=-2, keepdims=True))
        add("your softmax runs over the wrong axis (over the queries): each ROW of the weights, one query "
            "against all keys, must sum to 1. Use axis=-1.", e / e.sum(axis=-2, keepdims=True))
    if K.shape[-2] == K.shape[-1]:  # only then does Q @ K run without the transpose
        add("K is not transposed: the scores are Q K^T (each query dotted with each key), not Q K.",
            masked(Q @ K / math.sqrt(d_k)))
    if mask is not None:
        add("the mask is applied after the softmax: blocked keys must be removed BEFORE it (set their "
            "scores to -inf), or the remaining weights no longer sum to 1.",
            softmax(scores, axis=-1) * mask)
        add("the mask is ignored: set the scores of blocked keys (mask == False) to -inf before the softmax.",
            softmax(scores, axis=-1))
        add("your mask is inverted: True means MAY attend (the convention of F.scaled_dot_product_attention), "
            "so block the keys where mask is False.", masked_softmax(scores, ~np.broadcast_to(mask, scores.shape)))
    return wrong


@exercise("scaled_dot_product_attention", notebook="02_attention", defines="scaled_dot_product_attention",
          success="correct! softmax(Q K^T / sqrt(d_k)) V, batched and masked.")
def check_scaled_dot_product_attention(attention_fn: Callable) -> str:
    """Check a student's scaled_dot_product_attention(Q, K, V, mask=None) -> (output, weights)."""
    passed_2d = False
    for description, (Q, K, V), mask in attention_cases():
        what = f"scaled_dot_product_attention(<{description}>)"
        args = (Q.copy(), K.copy(), V.copy()) + (() if mask is None else (mask.copy(),))
        try:
            result = quiet_call(attention_fn, *args)
        except Mistake as crash:
            if passed_2d and Q.ndim > 2:
                raise Mistake(f"{crash} It works for 2-D inputs but not batched ones: K.T reverses ALL axes; "
                              "transpose only the last two with np.swapaxes(K, -1, -2).") from None
            raise
        output, weights = output_and_weights(result, what)
        expected_out, expected_w = scaled_dot_product_attention(Q, K, V, mask)
        if output.shape == expected_w.shape and weights.shape == expected_out.shape and output.shape != weights.shape:
            raise Mistake(f"{what}: output and weights are swapped. Return (output, weights), in that order.")
        expect_shape(weights, expected_w.shape, f"{what}: weights", "The weights are (..., L_q, L_k).")
        expect_shape(output, expected_out.shape, f"{what}: output", "The output is (..., L_q, d_v).")
        if same(weights, expected_w) and same(output, expected_out):
            passed_2d = passed_2d or Q.ndim == 2
            continue
        for hint, (wrong_out, wrong_w) in wrong_attentions(Q, K, V, mask).items():
            if same(weights, wrong_w) and same(output, wrong_out):
                raise Mistake(hint)
        if passed_2d and Q.ndim > 2 and not same(weights, expected_w):
            raise Mistake(f"{what}: right for 2-D inputs but not batched ones. K.T reverses ALL axes; "
                          "transpose only the last two: np.swapaxes(K, -1, -2) (and take max/sum over axis=-1).")
        if not np.allclose(weights.sum(axis=-1), 1.0):
            raise Mistake(f"{what}: the rows of your weights do not sum to 1 (row 0 sums to "
                          f"{weights.reshape(-1, weights.shape[-1])[0].sum():.4f}). Apply the softmax along the last axis.")
        if same(weights, expected_w):
            raise Mistake(f"{what}: the weights are right but the output is not "
                          f"({first_difference(output, expected_out)}). The output is weights @ V.")
        compare(weights, expected_w, {}, f"{what}: weights")
    return "Checked 2-D, batched and 4-D masked inputs."


__all__ = ["check_softmax", "check_scaled_dot_product_attention", "wrong_softmaxes", "wrong_attentions",
           "softmax_cases", "attention_cases", "quiet_call", "output_and_weights", "compare", "match_known"]
