"""Checks for notebook 02: softmax and scaled_dot_product_attention (numpy)."""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from ..attention import masked_softmax, scaled_dot_product_attention, softmax
from ..i18n import tr
from .harness import (Known, Mistake, call, compare, exercise, expect_finite, expect_shape, first_difference,
                      graded, match_known, output_and_weights, same, to_array)


def _naive_softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """exp(x) / sum(exp(x)) without subtracting the maximum: inf / inf = NaN once exp overflows."""
    with np.errstate(all="ignore"):
        e = np.exp(x)
        return e / e.sum(axis=axis, keepdims=True)


def _seeded(seed: int, *shape: int, scale: float = 1.0) -> np.ndarray:
    return np.random.default_rng(seed).normal(scale=scale, size=shape)


SOFTMAX_MISTAKES = {
    "softmax_overflows": "your softmax overflows: exp(1000) is inf and inf / inf is NaN. Subtract the maximum of "
                         "each slice along `axis` before exponentiating; the shift cancels in the ratio.",
    "max_of_whole_array": "you subtracted the maximum of the WHOLE array: a row far below it underflows to "
                          "0 / 0 = NaN. Subtract each slice's own maximum, taken along `axis`.",
    "sum_of_whole_array": "you divided by the sum of the whole array, so the slices along `axis` do not sum to 1. "
                          "Divide each slice by its own sum, taken along `axis`.",
    "axis_ignored": "you ignored the `axis` argument (or used the wrong one: {used} instead of {axis}): the softmax "
                    "runs along `axis`, so both the maximum and the sum must be taken along it.",
    "max_without_keepdims": "the maximum lost its axis: taken along `axis`, it has one axis fewer than the input, "
                            "so broadcasting subtracts each slice's maximum from the wrong entries (or fails). Keep "
                            "the reduced axis as an axis of size 1.",
    "subtracted_min": "you subtracted each slice's MINIMUM: then the largest entry can be over 709 above it and "
                      "exp overflows to inf. Subtract the maximum, so the largest exponent is exp(0) = 1.",
    "subtracted_mean": "you subtracted each slice's MEAN: an entry far above the mean still overflows exp. "
                       "Subtract the maximum, so the largest exponent is exp(0) = 1.",
    "log_softmax": "you returned the LOG of the softmax (x - max - log(sum(exp(x - max)))): the softmax is the "
                   "ratio exp(x - max) / sum(exp(x - max)) itself, positive numbers that sum to 1 along `axis`.",
    "sum_without_keepdims": "the sum lost its axis: once the summed axis disappears, broadcasting pairs the sums "
                            "with the wrong entries (or fails). Keep the summed axis as an axis of size 1, for the "
                            "maximum and for the sum.",
    "axes_differ": "you took the maximum along axis {max_axis} but the sum along axis {sum_axis}: both go along "
                   "`axis` (here {axis}), the maximum so that its shift is the same for every entry of a slice and "
                   "cancels in the ratio, the sum so that each slice sums to 1.",
    "not_normalised": "your slices along `axis` do not sum to 1: after exponentiating, divide each slice by its "
                      "own sum.",
}


def softmax_cases() -> list[tuple[str, np.ndarray, dict]]:
    """(description, x, kwargs) the student's softmax is called with, in order."""
    return [
        (tr("softmax:case_square", "a square 3 x 3 matrix"), _seeded(23, 3, 3, scale=2.0), {}),
        (tr("softmax:case_default_axis", "a 4 x 6 matrix, default axis"), _seeded(20, 4, 6, scale=3.0), {}),
        (tr("softmax:case_axis_0", "a 4 x 6 matrix with axis=0"), _seeded(21, 4, 6, scale=3.0), {"axis": 0}),
        (tr("softmax:case_axis_1", "a 2 x 3 x 4 array with axis=1"), _seeded(22, 2, 3, 4, scale=2.0), {"axis": 1}),
        (tr("softmax:case_large", "logits of about +1000 and -1000"),
         np.array([[1000.0, 1000.0, 999.0, 990.0], [-1000.0, -1000.0, -1001.0, -1010.0],
                   [700.0, -1000.0, -1000.0, -1000.0], [500.0, 0.0, 0.0, -300.0]]), {}),
    ]


def _no_keepdims(x: np.ndarray, axis: int, max_kept: bool = True, sum_kept: bool = False) -> np.ndarray | None:
    """The softmax with the maximum and/or the sum taken without keepdims; None where broadcasting fails."""
    try:
        e = np.exp(x - x.max(axis=axis, keepdims=max_kept))
        return e / e.sum(axis=axis, keepdims=sum_kept)
    except ValueError:
        return None


def wrong_softmaxes(x: np.ndarray, axis: int = -1) -> dict:
    """The usual wrong softmaxes of x along axis: mistake code (or Known) -> the array it produces."""
    def normalised(e: np.ndarray) -> np.ndarray:
        return e / e.sum(axis=axis, keepdims=True)

    with np.errstate(all="ignore"):
        rowwise = np.exp(x - x.max(axis=axis, keepdims=True))
        return {
            "softmax_overflows": _naive_softmax(x, axis),
            "max_of_whole_array": normalised(np.exp(x - x.max())),
            "sum_of_whole_array": rowwise / rowwise.sum(),
            "subtracted_min": normalised(np.exp(x - x.min(axis=axis, keepdims=True))),
            "subtracted_mean": normalised(np.exp(x - x.mean(axis=axis, keepdims=True))),
            **{Known("axis_ignored", used=used, axis=axis): softmax(x, axis=used) for used in range(x.ndim)
               if used != axis % x.ndim},
            "log_softmax": x - x.max(axis=axis, keepdims=True) - np.log(rowwise.sum(axis=axis, keepdims=True)),
            "sum_without_keepdims": _no_keepdims(x, axis),
            # the maximum without keepdims, the sum with or without
            **{Known("max_without_keepdims"): _no_keepdims(x, axis, False, kept) for kept in (True, False)},
            "not_normalised": rowwise,
            **{Known("axes_differ", max_axis=other, sum_axis=axis % x.ndim, axis=axis):
               normalised(np.exp(x - x.max(axis=other, keepdims=True))) for other in range(x.ndim)
               if other != axis % x.ndim},
            **{Known("axes_differ", max_axis=axis % x.ndim, sum_axis=other, axis=axis):
               rowwise / rowwise.sum(axis=other, keepdims=True) for other in range(x.ndim) if other != axis % x.ndim},
        }


@exercise("softmax", notebook="02_attention", points=2, defines="softmax",
          reference="helpers.attention.softmax",
          off_limits=("helpers.attention.softmax", "helpers.attention.masked_softmax", "scipy.special.softmax",
                      "torch.softmax", "torch.nn.functional.softmax", "torch.Tensor.softmax",
                      "helpers.attention.scaled_dot_product_attention", "scipy.special.log_softmax",
                      "torch.ops.aten.*softmax*"),
          success="correct! Stable at logits of 1000, and each slice along `axis` sums to 1.",
          mistakes=SOFTMAX_MISTAKES)
def check_softmax(softmax_fn: Callable) -> str:
    """Check a student's softmax(x, axis=-1) against the reference, including huge logits."""
    for description, x, kwargs in graded(softmax_cases(), _drawn_softmax_case):
        axis = kwargs.get("axis", -1)
        args = ", axis=" + str(axis) if kwargs else ""
        what = f"softmax(<{description}>{args})"
        try:
            result = to_array(call(softmax_fn, x.copy(), **kwargs), what)
        except Mistake as crash:
            if crash.code == "raised_error" and "could not be broadcast" in str(crash):
                raise Known("sum_without_keepdims") from None
            raise
        expect_shape(result, x.shape, what, tr("softmax:shape_hint", "The softmax keeps the shape of its input."))
        compare(result, softmax(x, axis=axis), wrong_softmaxes(x, axis), what)
    return tr("softmax:checked", "Checked 5 inputs (2-D and 3-D, axis -1, 0 and 1).")


def _drawn_softmax_case(rng: np.random.Generator) -> tuple[str, np.ndarray, dict]:
    shape = tuple(int(n) for n in rng.integers(2, 7, size=3))
    axis = int(rng.integers(-3, 3))
    return "x".join(map(str, shape)), rng.normal(scale=3.0, size=shape), {"axis": axis}


ATTENTION_MISTAKES = {
    "not_scaled": "you forgot to divide the scores by sqrt(d_k): the weights are softmax(Q K^T / sqrt(d_k)).",
    "divided_by_d_k": "you divided by d_k instead of sqrt(d_k): the scale is 1 / sqrt(d_k) (= 1/8 for d_k = 64).",
    "scaled_by_sqrt_l_k": "you scaled by sqrt(L_k), the square root of the NUMBER of keys; the scale is "
                          "1 / sqrt(d_k), with d_k the width of Q and K (their last axis).",
    "d_k_wrong_axis": "you took d_k from axis {axis} of Q (size {size}): d_k is the width of the queries and keys, "
                      "the size of Q's LAST axis (here {d_k}), whatever axes come before.",
    "scores_multiplied_by_mask": "your blocked keys get score 0 (the scores multiplied by the mask, or filled with "
                                 "0), not -inf, so they still receive weight. Replace the blocked scores by -inf "
                                 "before the softmax.",
    "multiplied_by_sqrt_d_k": "you multiplied the scores by sqrt(d_k): divide them by it, softmax(Q K^T / sqrt(d_k)), "
                              "so that the scores of wide keys do not grow with d_k.",
    "weights_transposed": "{what}: your weights are transposed, (..., L_k, L_q): return them as (..., L_q, L_k), one "
                          "row per query, the matrix that multiplies V.",
    "scaled_by_sqrt_d_v": "you scaled by sqrt(d_v), the width of V; the scale is 1 / sqrt(d_k), with d_k the width "
                          "of Q and K (their last axis).",
    "softmax_wrong_axis": "your softmax runs over the wrong axis (over the queries): each ROW of the weights, one "
                          "query against all keys, must sum to 1, so the softmax runs over the last axis.",
    "k_not_transposed": "K is not transposed: the scores are Q K^T (each query dotted with each key), not Q K.",
    "k_transposed_all_axes": "{what}: it works for 2-D inputs but not batched ones. Transposing the whole of K "
                             "reverses ALL its axes, batch and head axes included; transpose only its last two.",
    "batched_axes_wrong": "{what}: right for 2-D inputs but not batched ones. Count the axes from the end, so "
                          "that leading (batch, head) axes do not matter: d_k is the size of the last axis of Q, "
                          "the softmax runs over the last axis, and only the last two axes of K are swapped.",
    "mask_after_softmax": "the mask is applied after the softmax: blocked keys must be removed BEFORE it (set "
                          "their scores to -inf), or the remaining weights no longer sum to 1.",
    "mask_ignored": "the mask is ignored: the scores of blocked keys (where the mask is False) must become -inf "
                    "before the softmax.",
    "mask_inverted": "your mask is inverted: True means MAY attend (the convention of "
                     "F.scaled_dot_product_attention), so the keys to block are those where the mask is False.",
    "softmax_overflows": "your softmax overflows on large scores: exp(1000) is inf and inf / inf is NaN, so "
                         "some weights are NaN. Subtract each row's maximum before exponentiating, or use the "
                         "stable softmax of exercise 1.",
    "output_weights_swapped": "{what}: output and weights are swapped. The function returns the pair "
                              "(output, weights), in that order.",
    "rows_do_not_sum_to_one": "{what}: the rows of your weights do not sum to 1 (row 0 sums to {row_sum}). "
                              "Normalise each row: apply the softmax along the last axis.",
    "output_not_weights_at_v": "{what}: the weights are right but the output is not ({difference}). "
                               "Each output row is the weighted sum of the rows of V, with that row's weights.",
    "renormalised_after_softmax": "you applied the mask after the softmax, then divided the weights by their new "
                                  "row sums. That is right in exact arithmetic, but where a blocked key scores far "
                                  "above the allowed ones (scores of about 2000 here), the softmax gives every "
                                  "allowed key exactly 0 and the division is 0 / 0 = NaN: the NaN comes from that "
                                  "division, not from an overflow. Set the blocked scores to -inf BEFORE the "
                                  "softmax.",
    "mask_added": "you added the boolean mask to the scores: True counts as 1 and False as 0, so blocked keys keep "
                  "their weight. The mask selects: replace the blocked scores (where it is False) by -inf before "
                  "the softmax.",
}


def attention_cases() -> list[tuple[str, tuple, Any]]:
    """(description, (Q, K, V), mask) for scaled_dot_product_attention, in the order they are tried.

    First 2-D with L_q, L_k, d_k, d_v all different (each wrong scale shows; Q K crashes), then 2-D with
    L_k = d_k (where Q K runs, tried after that crash), ..., last scores up to about 2000 (exp overflows).
    """
    rng = np.random.default_rng(30)
    q0, k0, v0 = rng.normal(size=(3, 4)) * 2, rng.normal(size=(6, 4)) * 2, rng.normal(size=(6, 5))
    q1, k1, v1 = rng.normal(size=(3, 4)) * 2, rng.normal(size=(4, 4)) * 2, rng.normal(size=(4, 5))
    q2, k2, v2 = rng.normal(size=(2, 5, 8)) * 2, rng.normal(size=(2, 6, 8)) * 2, rng.normal(size=(2, 6, 3))
    q3, k3, v3 = rng.normal(size=(2, 3, 4, 16)), rng.normal(size=(2, 3, 7, 16)), rng.normal(size=(2, 3, 7, 2))
    mask = rng.random((2, 1, 4, 7)) > 0.4
    mask[..., 0] = True  # every query keeps at least one key (fully masked rows are notebook 04's topic)
    mask[..., -1] = False  # ... and so does every query of the inverted mask
    q4, k4, v4 = rng.normal(size=(2, 4, 8)) * 25, rng.normal(size=(2, 6, 8)) * 25, rng.normal(size=(2, 6, 3))
    q4[:, 0] /= 100  # a row of small scores in each batch: its weights are finite even without the max
    mask4 = rng.random((2, 4, 6)) > 0.3
    mask4[..., 0] = True
    return [
        ("Q (3, 4), K (6, 4), V (6, 5)", (q0, k0, v0), None),
        ("Q (3, 4), K (4, 4), V (4, 5)", (q1, k1, v1), None),
        (tr("scaled_dot_product_attention:case_batched", "batched Q (2, 5, 8), K (2, 6, 8), V (2, 6, 3)"),
         (q2, k2, v2), None),
        (tr("scaled_dot_product_attention:case_masked",
            "Q (2, 3, 4, 16), K (2, 3, 7, 16), V (2, 3, 7, 2) with a mask (2, 1, 4, 7)"), (q3, k3, v3), mask),
        (tr("scaled_dot_product_attention:case_large",
            "large scores (up to about 2000): Q (2, 4, 8), K (2, 6, 8), V (2, 6, 3) with a mask (2, 4, 6)"),
         (q4, k4, v4), mask4),
    ]


def wrong_attentions(Q: np.ndarray, K: np.ndarray, V: np.ndarray, mask: Any) -> dict:
    """The usual wrong attentions: mistake code -> the (output, weights) pair it produces."""
    d_k, d_v, l_k = Q.shape[-1], V.shape[-1], K.shape[-2]
    raw = Q @ np.swapaxes(K, -1, -2)
    divisors: dict = {"not_scaled": 1.0, "divided_by_d_k": d_k, "multiplied_by_sqrt_d_k": 1 / math.sqrt(d_k)}
    if d_v != d_k:
        divisors["scaled_by_sqrt_d_v"] = math.sqrt(d_v)
    if l_k != d_k:
        divisors["scaled_by_sqrt_l_k"] = math.sqrt(l_k)
    for axis, size in enumerate(Q.shape[:-1]):  # d_k read from another axis of Q (L_q, batch or heads)
        if size not in (1, d_k, d_v, l_k):
            divisors[Known("d_k_wrong_axis", axis=axis, size=size, d_k=d_k)] = math.sqrt(size)
    with np.errstate(all="ignore"):
        scores = raw / math.sqrt(d_k)
        filled = scores if mask is None else np.where(mask, scores, -np.inf)
        weights = {code: masked_softmax(raw / divisor, mask) for code, divisor in divisors.items()}
        weights["softmax_wrong_axis"] = softmax(filled, axis=-2)
        if l_k == d_k:  # only then does Q @ K run without the transpose
            weights["k_not_transposed"] = masked_softmax(Q @ K / math.sqrt(d_k), mask)
        weights["softmax_overflows"] = _naive_softmax(filled)
        if mask is not None:
            weights.update({"mask_after_softmax": softmax(scores) * mask, "mask_ignored": softmax(scores),
                            "mask_inverted": masked_softmax(scores, ~np.broadcast_to(mask, scores.shape)),
                            "scores_multiplied_by_mask": softmax(scores * mask),
                            "mask_added": softmax(scores + mask)})
            after = softmax(scores) * mask
            weights["renormalised_after_softmax"] = after / after.sum(axis=-1, keepdims=True)
        return {code: (w @ V, w) for code, w in weights.items()}


def _untransposed_k_on_square_keys(attention_fn: Callable, case: tuple) -> None:
    """After a crash on keys with L_k != d_k: raise k_not_transposed if the answer is Q K on keys with L_k = d_k."""
    _, (Q, K, V), mask = case
    try:
        output, weights = output_and_weights(call(attention_fn, Q.copy(), K.copy(), V.copy()), "")
    except Mistake:
        return
    match_known((output, weights), {"k_not_transposed": wrong_attentions(Q, K, V, mask).get("k_not_transposed")})


def _drawn_attention_case(rng: np.random.Generator) -> tuple[str, tuple, Any]:
    b, lq, lk, dk, dv = (int(n) for n in rng.integers(2, 8, size=5))
    q, k, v = rng.normal(size=(b, lq, dk)), rng.normal(size=(b, lk, dk)), rng.normal(size=(b, lk, dv))
    mask = rng.random((b, lq, lk)) > 0.4
    mask[..., 0], mask[..., -1] = True, False  # no fully masked row, in the mask or in its inverse
    return f"Q {q.shape}, K {k.shape}, V {v.shape}, mask {mask.shape}", (q, k, v), mask


@exercise("scaled_dot_product_attention", notebook="02_attention", points=3, defines="scaled_dot_product_attention",
          reference="helpers.attention.scaled_dot_product_attention",
          off_limits=("helpers.attention.scaled_dot_product_attention",
                      "torch.nn.functional.scaled_dot_product_attention", "torch.ops.aten.*scaled_dot_product*",
                      "helpers.multi_head.multi_head_attention", "helpers.multi_head.MultiHeadAttention",
                      "torch.nn.MultiheadAttention", "torch.nn.functional.multi_head_attention_forward"),
          success="correct! softmax(Q K^T / sqrt(d_k)) V, batched, masked and stable at large scores.",
          mistakes=ATTENTION_MISTAKES)
def check_scaled_dot_product_attention(attention_fn: Callable) -> str:
    """Check a student's scaled_dot_product_attention(Q, K, V, mask=None) -> (output, weights)."""
    passed_2d = passed_batched = False
    cases = attention_cases()
    cases = graded(cases[:-1], _drawn_attention_case) + cases[-1:]  # the large scores stay last
    for number, (description, (Q, K, V), mask) in enumerate(cases):
        what = f"scaled_dot_product_attention(<{description}>)"
        args = (Q.copy(), K.copy(), V.copy()) + (() if mask is None else (mask.copy(),))
        try:
            result = call(attention_fn, *args)
        except Mistake as crash:
            if passed_2d and not passed_batched and crash.code == "raised_error" and "ValueError" in str(crash):
                raise Known("k_transposed_all_axes", what=what) from None
            if number == 0 and crash.code == "raised_error":
                _untransposed_k_on_square_keys(attention_fn, cases[1])
            raise
        output, weights = output_and_weights(result, what)
        expected_out, expected_w = scaled_dot_product_attention(Q, K, V, mask)
        if same((weights, output), (expected_out, expected_w)):
            raise Known("output_weights_swapped", what=what)
        if weights.ndim >= 2 and same((output, np.swapaxes(weights, -1, -2)), (expected_out, expected_w)):
            raise Known("weights_transposed", what=what)
        part_w = tr("harness:part_weights", "{what}: weights", what=what)
        expect_shape(weights, expected_w.shape, part_w,
                     tr("scaled_dot_product_attention:weights_shape", "The weights are (..., L_q, L_k)."))
        expect_shape(output, expected_out.shape, tr("harness:part_output", "{what}: output", what=what),
                     tr("scaled_dot_product_attention:output_shape", "The output is (..., L_q, d_v)."))
        if same((output, weights), (expected_out, expected_w)):
            passed_2d = passed_2d or Q.ndim == 2
            passed_batched = passed_batched or Q.ndim > 2
            continue
        match_known((output, weights), wrong_attentions(Q, K, V, mask))
        if number == len(cases) - 1 and not np.isfinite(weights).all():  # right on small scores, not on large
            raise Known("softmax_overflows")
        if passed_2d and not passed_batched:
            raise Known("batched_axes_wrong", what=what)
        expect_finite(weights, part_w)
        if not np.allclose(weights.sum(axis=-1), 1.0):
            row_sum = weights.reshape(-1, weights.shape[-1])[0].sum()
            raise Known("rows_do_not_sum_to_one", what=what, row_sum=f"{row_sum:.4f}")
        if same(weights, expected_w):
            raise Known("output_not_weights_at_v", what=what, difference=first_difference(output, expected_out))
        compare(weights, expected_w, {}, part_w)
    return tr("scaled_dot_product_attention:checked",
              "Checked 2-D, batched, 4-D masked inputs and scores of about 2000.")
