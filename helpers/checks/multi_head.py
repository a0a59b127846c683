"""Checks for notebook 03: split_heads, combine_heads and multi_head_attention (numpy)."""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from ..attention import masked_softmax, softmax
from ..multi_head import combine_heads, multi_head_attention, split_heads
from ..i18n import tr
from .harness import (Known, call, compare, exercise, expect_shape, first_difference, graded, match_known,
                     output_and_weights, same, to_array)

_MIXES = ("that silently mixes positions across heads (head 0 gets the first positions' features, not d_k "
          "features of every position).")


SPLIT_MISTAKES = {
    "reshape_without_transpose": "you reshaped straight to (batch, h, L, d_k) without a transpose: " + _MIXES
                                 + " First split the last axis into (h, d_k), giving (batch, L, h, d_k); then "
                                 "exchange the L and h axes.",
    "heads_interleaved": "head i must own the CONTIGUOUS columns i*d_k .. (i+1)*d_k - 1; you interleaved them "
                         "(splitting the last axis as (d_k, h) sends column j to head j % h). Split it as (h, d_k): "
                         "the head index first.",
    "axes_not_swapped": "{what} has shape {shape}, which is (batch, L, h, d_k): the L and h axes still have to "
                        "be exchanged to get (batch, h, L, d_k) = {expected}.",
    "head_transposed": "{what} has shape {shape}, which is (batch, h, d_k, L): each head's matrix is transposed. "
                       "After splitting the last axis into (h, d_k), exchange only the L and h axes (axes 1 and 2), "
                       "to get (batch, h, L, d_k) = {expected}.",
    "heads_on_batch_axis": "{what} has shape {shape}, which is (batch * h, L, d_k): you stacked the heads on the "
                           "batch axis. Keep them on an axis of their own, (batch, h, L, d_k) = {expected}, so that "
                           "a mask of shape (batch, 1, L_q, L_k) broadcasts over the heads.",
    "heads_before_batch": "{what} has shape {shape}, which is (h, batch, L, d_k): the heads axis comes before the "
                          "batch axis (a list of heads, or heads stacked on a new first axis, gives this). Put the "
                          "heads after the batch axis: (batch, h, L, d_k) = {expected}.",
}

COMBINE_MISTAKES = {
    "reshape_without_transpose": "you reshaped (batch, h, L, d_k) straight to (batch, L, h * d_k) without a "
                                 "transpose: " + _MIXES + " Exchange the h and L axes first (to (batch, L, h, d_k)), "
                                 "then merge the last two.",
    "heads_interleaved": "you interleaved the heads (feature 0 of every head, then feature 1, ...). Concatenate "
                         "them: head 0's d_k features first, then head 1's. Before merging, the axes must be in the "
                         "order (batch, L, h, d_k), not (batch, L, d_k, h).",
    "not_reshaped": "{what} has shape {shape}: after exchanging the axes, the last two (h, d_k) still have "
                    "to be merged into one of h * d_k, giving {expected}.",
    "h_and_d_k_exchanged": "you exchanged the h axis with the d_k axis (axes 1 and 3): exchange it with the L axis "
                           "(axes 1 and 2), so that the array is (batch, L, h, d_k) before its last two axes are "
                           "merged.",
    "heads_reversed": "you concatenated the heads in reverse order (the last head's features first). Keep the "
                      "head order: head 0's d_k features take columns 0 .. d_k - 1, head 1's the next d_k, ...",
    "heads_reduced": "{what} has shape {shape}: you added up (or averaged) the heads into one (batch, L, d_k). "
                     "Concatenate them instead: each head keeps its own d_k features, side by side, giving "
                     "{expected}.",
}


def split_cases() -> list[tuple[np.ndarray, int]]:
    """(x, num_heads) pairs; L differs from h and d_k so that swapped axes show in the shape."""
    return [
        (np.arange(2 * 5 * 6, dtype=np.float64).reshape(2, 5, 6), 2),  # batch 2, L 5, d_model 6, d_k 3
        (np.random.default_rng(40).normal(size=(3, 4, 12)), 3),  # L 4, h 3, d_k 4
        (np.random.default_rng(41).normal(size=(1, 7, 64)), 8),
    ]


def _drawn_split_case(rng: np.random.Generator) -> tuple[np.ndarray, int]:
    heads, d_k = int(rng.integers(2, 6)), int(rng.integers(2, 6))
    return rng.normal(size=(int(rng.integers(1, 4)), int(rng.integers(2, 9)), heads * d_k)), heads


def wrong_splits(x: np.ndarray, num_heads: int) -> dict:
    """The usual wrong split_heads: mistake code -> the array it produces."""
    batch, length, _ = x.shape
    return {
        "reshape_without_transpose": x.reshape(batch, num_heads, length, -1),
        "heads_interleaved": x.reshape(batch, length, -1, num_heads).transpose(0, 3, 1, 2),
    }


@exercise("split_heads", notebook="03_multi_head_attention", points=2, defines="split_heads",
          reference="helpers.multi_head.split_heads",
          off_limits=("helpers.multi_head.split_heads", "helpers.multi_head.MultiHeadAttention"),
          success="correct! (batch, L, d_model) -> (batch, h, L, d_k): head i owns columns i*d_k to (i+1)*d_k - 1.",
          mistakes=SPLIT_MISTAKES)
def check_split_heads(split_fn: Callable) -> str:
    """Check a student's split_heads(x, num_heads): (batch, L, d_model) -> (batch, h, L, d_k)."""
    for x, num_heads in graded(split_cases(), _drawn_split_case):
        what = tr("split_heads:what", "split_heads(<x of shape {shape}>, {num_heads})", shape=x.shape,
                  num_heads=num_heads)
        result = to_array(call(split_fn, x.copy(), num_heads), what)
        expected = split_heads(x, num_heads)
        batch, heads, length, d_k = expected.shape
        for code, wrong in (("axes_not_swapped", expected.transpose(0, 2, 1, 3)),  # L and h not exchanged
                            ("head_transposed", expected.transpose(0, 1, 3, 2)),
                            ("heads_on_batch_axis", expected.reshape(batch * heads, length, d_k)),
                            ("heads_before_batch", expected.transpose(1, 0, 2, 3))):
            if same(result, wrong):
                raise Known(code, what=what, shape=result.shape, expected=expected.shape)
        expect_shape(result, expected.shape, what, tr("split_heads:shape_hint", "The result is (batch, h, L, d_k)."))
        compare(result, expected, wrong_splits(x, num_heads), what)
    return tr("split_heads:checked", "Checked 3 shapes, up to h = 8 heads of d_k = 8.")


def wrong_combines(x: np.ndarray) -> dict:
    """The usual wrong combine_heads of x (batch, h, L, d_k): mistake code -> the array it produces."""
    batch, heads, length, d_k = x.shape
    return {
        "reshape_without_transpose": x.reshape(batch, length, heads * d_k),
        "heads_interleaved": x.transpose(0, 2, 3, 1).reshape(batch, length, heads * d_k),
        "heads_reversed": x[:, ::-1].transpose(0, 2, 1, 3).reshape(batch, length, heads * d_k),
        "h_and_d_k_exchanged": x.swapaxes(1, 3).reshape(batch, length, heads * d_k),
    }


@exercise("combine_heads", notebook="03_multi_head_attention", points=1, defines="combine_heads",
          reference="helpers.multi_head.combine_heads",
          off_limits=("helpers.multi_head.combine_heads",),
          success="correct! It undoes split_heads: the heads are concatenated back to d_model.",
          mistakes=COMBINE_MISTAKES)
def check_combine_heads(combine_fn: Callable) -> str:
    """Check a student's combine_heads(x): (batch, h, L, d_k) -> (batch, L, h * d_k)."""
    for x, num_heads in graded(split_cases(), _drawn_split_case):
        heads = split_heads(x, num_heads)
        what = tr("combine_heads:what", "combine_heads(<x of shape {shape}>)", shape=heads.shape)
        result = to_array(call(combine_fn, heads.copy()), what)
        if same(result, heads.transpose(0, 2, 1, 3)):  # (batch, L, h, d_k): the last two not merged
            raise Known("not_reshaped", what=what, shape=result.shape, expected=x.shape)
        if same(result, heads.sum(axis=1)) or same(result, heads.mean(axis=1)):
            raise Known("heads_reduced", what=what, shape=result.shape, expected=x.shape)
        expect_shape(result, x.shape, what, tr("combine_heads:shape_hint", "The result is (batch, L, h * d_k)."))
        compare(result, combine_heads(heads), wrong_combines(heads), what)
    return tr("combine_heads:checked", "combine_heads(split_heads(x)) gives x back for 3 shapes.")


MHA_MISTAKES = {
    "no_output_projection": "you forgot the output projection: multiply the concatenated heads by w_o.",
    "scaled_by_sqrt_d_model": "you scaled by sqrt(d_model) = {sqrt_d_model}: each head uses its own "
                              "d_k = d_model / h = {d_k}, so the scale is 1 / sqrt(d_k).",
    "reshape_without_transpose": "you split the heads without a transpose (a reshape straight to "
                                 "(batch, h, L, d_k)): that silently mixes positions across heads. Split and "
                                 "combine the heads as in exercises 1 and 2.",
    "kv_from_x_q": "{what}: the weights have one column per QUERY ({length_q}), not per key ({length_k}). The keys "
                   "and values must come from x_kv (x_q only gives the queries); with x_kv = x_q this is "
                   "self-attention, otherwise cross-attention.",
    "weights_transposed": "the weight matrices are used transposed: in the row-vector convention the inputs "
                          "multiply w_q, w_k, w_v and w_o from the left, as they are (Q = x_q W^Q).",
    "mask_ignored": "you ignored the mask: pass it to the attention of every head (it broadcasts over h).",
    "mask_inverted": "your mask is inverted: True means MAY attend, so the scores to block are those where the mask is "
                     "False. Pass the mask as it is given.",
    "k_v_swapped": "the keys and the values use each other's projection: K = x_kv w_k and V = x_kv w_v, not "
                   "the other way round.",
    "weights_averaged_over_heads": "{what}: your weights, of shape {shape}, are the average of the heads' weights; "
                                   "keep one matrix per head, (batch, h, L_q, L_k) = {expected}.",
    "not_scaled": "the scores are not scaled: each head divides them by sqrt(d_k), with d_k = d_model / h = {d_k}.",
    "softmax_wrong_axis": "the softmax runs over the queries: each query's weights over the KEYS must sum to 1, so "
                          "the softmax runs over the last axis of the scores (batch, h, L_q, L_k).",
    "output_wrong_weights_right": "{what}: the weights are right but the output is not ({difference}). "
                                  "Combine the heads, then multiply by w_o.",
    "combine_without_transpose": "the weights are right, but you combined the heads with a reshape straight from "
                                 "(batch, h, L_q, d_k) to (batch, L_q, d_model): that mixes positions across heads. "
                                 "Combine them as in exercise 2 (exchange the h and L_q axes first).",
    "q_from_x_kv": "{what}: the weights have one row per KEY ({length_k}), not per query ({length_q}). The queries "
                   "come from x_q, the keys and the values from x_kv.",
    "single_head": "{what}: your weights, of shape {shape}, come from one attention over the full width d_model. "
                   "Split the projections into h heads of d_k = d_model / h = {d_k} features, attend in each, and "
                   "keep one matrix of weights per head: (batch, h, L_q, L_k) = {expected}.",
    "masked_with_zero": "your blocked keys get score 0 (the scores multiplied by the mask, or filled with 0), not "
                        "-inf, so they still receive weight. Pass the mask to the attention (or fill the blocked "
                        "scores with -inf before the softmax).",
    "mask_after_softmax": "the mask is applied after the softmax without renormalising: the weights of a query no "
                          "longer sum to 1. Mask the scores before the softmax (scaled_dot_product_attention does "
                          "it when you pass the mask).",
}


def _mha_case(rng: np.random.Generator, batch: int, l_q: int, l_k: int, heads: int, d_k: int, masked: bool) -> dict:
    """The keyword arguments of multi_head_attention for a cross-attention drawn from rng."""
    d_model = heads * d_k
    case = dict(x_q=rng.normal(size=(batch, l_q, d_model)), x_kv=rng.normal(size=(batch, l_k, d_model)))
    case.update({name: rng.normal(scale=1 / math.sqrt(d_model), size=(d_model, d_model))
                 for name in ("w_q", "w_k", "w_v", "w_o")}, num_heads=heads, mask=None)
    if masked:
        case["mask"] = rng.random((batch, 1, l_q, l_k)) > 0.4
        case["mask"][..., 0], case["mask"][..., -1] = True, False
    return case


def mha_cases() -> list[tuple[str, dict]]:
    """(description, kwargs) for multi_head_attention: cross-attention (L_q != L_k), then with a mask."""
    rng = np.random.default_rng(50)
    first, second = _mha_case(rng, 2, 3, 5, 3, 4, masked=False), _mha_case(rng, 2, 4, 6, 4, 3, masked=True)
    return [("x_q (2, 3, 12), x_kv (2, 5, 12), h = 3", first),
            (tr("multi_head_attention:case_masked", "x_q (2, 4, 12), x_kv (2, 6, 12), h = 4, mask (2, 1, 4, 6)"),
             second)]


def _drawn_mha_case(rng: np.random.Generator) -> tuple[str, dict]:
    heads, d_k, batch = int(rng.integers(2, 5)), int(rng.integers(2, 5)), int(rng.integers(1, 4))
    case = _mha_case(rng, batch, int(rng.integers(2, 7)), int(rng.integers(2, 7)), heads, d_k, masked=True)
    return f"x_q {case['x_q'].shape}, x_kv {case['x_kv'].shape}, h = {heads}, mask {case['mask'].shape}", case


def _mha_variant(x_q, x_kv, w_q, w_k, w_v, w_o, num_heads, mask, *, scale=None, split=split_heads,
                 combine=combine_heads, use_w_o=True, transpose_w=False, ignore_mask=False, swap_k_v=False,
                 softmax_axis=-1, invert_mask=False, mask_mode="before"):
    if transpose_w:
        w_q, w_k, w_v, w_o = w_q.T, w_k.T, w_v.T, w_o.T
    if swap_k_v:
        w_k, w_v = w_v, w_k
    if invert_mask and mask is not None:
        mask = ~mask
    q, k, v = split(x_q @ w_q, num_heads), split(x_kv @ w_k, num_heads), split(x_kv @ w_v, num_heads)
    d_k = q.shape[-1]
    scores = q @ np.swapaxes(k, -1, -2) / (math.sqrt(d_k) if scale is None else scale)
    if mask is not None and mask_mode == "zero":  # blocked scores set to 0, not -inf
        weights = softmax(np.where(mask, scores, 0.0))
    elif mask is not None and mask_mode == "after":  # the softmax of every score, times the mask
        weights = softmax(scores) * mask
    elif softmax_axis == -1:
        weights = masked_softmax(scores, None if ignore_mask else mask)
    else:  # the softmax over the queries
        weights = softmax(scores if mask is None else np.where(mask, scores, -np.inf), axis=softmax_axis)
    heads = combine(weights @ v)
    return (heads @ w_o if use_w_o else heads), weights


def wrong_multi_heads(case: dict) -> dict:
    """The usual wrong multi-head attentions: mistake code (or Known) -> the (output, weights) pair it gives."""
    d_model = case["x_q"].shape[-1]
    h = case["num_heads"]
    wrong = {
        "no_output_projection": dict(use_w_o=False),
        Known("scaled_by_sqrt_d_model", sqrt_d_model=f"{math.sqrt(d_model):.3g}", d_k=d_model // h):
            dict(scale=math.sqrt(d_model)),
        "reshape_without_transpose": dict(split=lambda x, n: x.reshape(x.shape[0], n, x.shape[1], -1),
                                          combine=lambda x: x.reshape(x.shape[0], x.shape[2], -1)),
        "weights_transposed": dict(transpose_w=True),
        "k_v_swapped": dict(swap_k_v=True),
        Known("not_scaled", d_k=d_model // h): dict(scale=1.0),
        "softmax_wrong_axis": dict(softmax_axis=-2),
    }
    if case["mask"] is not None:
        wrong["mask_ignored"] = dict(ignore_mask=True)
        wrong["mask_inverted"] = dict(invert_mask=True)
        wrong["masked_with_zero"] = dict(mask_mode="zero")
        wrong["mask_after_softmax"] = dict(mask_mode="after")
    variants = {key: _mha_variant(**case, **options) for key, options in wrong.items()}
    plain = wrong["reshape_without_transpose"]  # the split alone without its transpose is the same mistake
    variants[Known("reshape_without_transpose")] = _mha_variant(**case, split=plain["split"])
    variants["combine_without_transpose"] = _mha_variant(**case, combine=plain["combine"])
    return variants


def _single_head(case: dict) -> tuple[np.ndarray, np.ndarray]:
    """One attention over the full width d_model (no heads): weights (batch, L_q, L_k)."""
    q, k, v = case["x_q"] @ case["w_q"], case["x_kv"] @ case["w_k"], case["x_kv"] @ case["w_v"]
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    weights = masked_softmax(scores, None if case["mask"] is None else case["mask"][:, 0])
    return weights @ v @ case["w_o"], weights


def _q_from_x_kv(case: dict) -> np.ndarray | None:
    """The weights the attention gives with the queries computed from x_kv (None where it cannot run)."""
    try:
        with np.errstate(all="ignore"):
            mask = None if case["mask"] is None else case["mask"][..., :1, :]  # a mask for L_k queries: broadcast
            return _mha_variant(**{**case, "x_q": case["x_kv"], "mask": mask})[1]
    except ValueError:
        return None


def _kv_from_x_q(case: dict) -> tuple[np.ndarray, np.ndarray] | None:
    """What the attention gives with the keys and values computed from x_q (None where it cannot run)."""
    try:
        with np.errstate(all="ignore"):
            return _mha_variant(**{**case, "x_kv": case["x_q"]})
    except ValueError:
        return None


@exercise("multi_head_attention", notebook="03_multi_head_attention", points=3, defines="multi_head_attention",
          reference="helpers.multi_head.multi_head_attention",
          off_limits=("helpers.multi_head.multi_head_attention", "helpers.multi_head.MultiHeadAttention",
                      "torch.nn.MultiheadAttention", "torch.nn.functional.multi_head_attention_forward"),
          success="correct! Project, split, attend per head, concatenate, project with W^O.", mistakes=MHA_MISTAKES)
def check_multi_head_attention(mha_fn: Callable) -> str:
    """Check a student's multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, num_heads, mask=None)."""
    for description, case in graded(mha_cases(), _drawn_mha_case):
        what = f"multi_head_attention(<{description}>)"
        args = [case[k].copy() for k in ("x_q", "x_kv", "w_q", "w_k", "w_v", "w_o")] + [case["num_heads"]]
        kwargs = {} if case["mask"] is None else {"mask": case["mask"].copy()}
        output, weights = output_and_weights(call(mha_fn, *args, **kwargs), what)
        expected_out, expected_w = multi_head_attention(**case)
        length_q, length_k = case["x_q"].shape[1], case["x_kv"].shape[1]
        if same(weights, expected_w.mean(axis=1)):
            raise Known("weights_averaged_over_heads", what=what, shape=weights.shape, expected=expected_w.shape)
        if weights.shape[:-1] == expected_w.shape[:-1] and weights.shape[-1] == length_q != length_k:
            match_known((output, weights), {Known("kv_from_x_q", what=what, length_q=length_q, length_k=length_k):
                                            _kv_from_x_q(case)})
        if weights.shape == expected_w.shape[:2] + (length_k, length_k) and length_q != length_k:
            match_known(weights, {Known("q_from_x_kv", what=what, length_q=length_q, length_k=length_k):
                                  _q_from_x_kv(case)})
        if weights.shape == expected_w.shape[:1] + expected_w.shape[2:]:
            d_k = case["x_q"].shape[-1] // case["num_heads"]
            match_known(weights, {Known("single_head", what=what, shape=weights.shape, expected=expected_w.shape,
                                        d_k=d_k): _single_head(case)[1]})
        part_w = tr("harness:part_weights", "{what}: weights", what=what)
        expect_shape(weights, expected_w.shape, part_w,
                     tr("multi_head_attention:weights_shape", "The weights are (batch, h, L_q, L_k)."))
        expect_shape(output, expected_out.shape, tr("harness:part_output", "{what}: output", what=what),
                     tr("multi_head_attention:output_shape", "The output is (batch, L_q, d_model)."))
        if same((output, weights), (expected_out, expected_w)):
            continue
        match_known((output, weights), wrong_multi_heads(case))
        if same(weights, expected_w):
            raise Known("output_wrong_weights_right", what=what, difference=first_difference(output, expected_out))
        compare(weights, expected_w, {}, part_w)
    return tr("multi_head_attention:checked",
              "Cross-attention with h = 3 and a masked case with h = 4 match the reference.")
