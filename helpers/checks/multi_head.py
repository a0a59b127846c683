"""Checks for notebook 03: split_heads, combine_heads and multi_head_attention (numpy)."""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from ..attention import masked_softmax
from ..multi_head import combine_heads, multi_head_attention, split_heads
from .attention import output_and_weights, quiet_call
from .harness import (Known, Mistake, as_numpy, call, compare, exercise, expect_finite, expect_shape,  # noqa: F401
                      first_difference, match_known, output_and_weights, same, to_array)

MIXED_HINT = ("you reshaped straight to (batch, h, L, d_k) without a transpose: that silently mixes "
              "positions across heads (head 0 gets the first positions' features, not d_k features of "
              "every position).")


# ----------------------------------------------------------------------------- split / combine
def split_cases() -> list[tuple[np.ndarray, int]]:
    """(x, num_heads) pairs; L differs from h and d_k so that swapped axes show in the shape."""
    return [
        (np.arange(2 * 5 * 6, dtype=np.float64).reshape(2, 5, 6), 2),  # batch 2, L 5, d_model 6, d_k 3
        (np.random.default_rng(40).normal(size=(3, 4, 12)), 3),  # L 4, h 3, d_k 4
        (np.random.default_rng(41).normal(size=(1, 7, 64)), 8),
    ]


def wrong_splits(x: np.ndarray, num_heads: int) -> dict[str, np.ndarray]:
    batch, length, d_model = x.shape
    d_k = d_model // num_heads
    return {
        MIXED_HINT + " Reshape to (batch, L, h, d_k) first, then swap axes 1 and 2.":
            x.reshape(batch, num_heads, length, d_k),
        "head i must own the CONTIGUOUS columns i*d_k .. (i+1)*d_k - 1; you interleaved them "
        "(reshape to (batch, L, d_k, h) splits column j into head j % h). Reshape to (batch, L, h, d_k).":
            x.reshape(batch, length, d_k, num_heads).transpose(0, 3, 1, 2),
    }


@exercise("split_heads", notebook="03_multi_head_attention", defines="split_heads",
          success="correct! (batch, L, d_model) -> (batch, h, L, d_k), head i owns columns i*d_k...")
def check_split_heads(split_fn: Callable) -> str:
    """Check a student's split_heads(x, num_heads): (batch, L, d_model) -> (batch, h, L, d_k)."""
    for x, num_heads in split_cases():
        batch, length, d_model = x.shape
        d_k = d_model // num_heads
        what = f"split_heads(<x of shape {x.shape}>, {num_heads})"
        result = to_array(quiet_call(split_fn, x.copy(), num_heads), what)
        if result.shape == (batch, length, num_heads, d_k):
            raise Mistake(f"{what} has shape {result.shape}, which is (batch, L, h, d_k): swap axes 1 and 2 to get "
                          f"(batch, h, L, d_k) = {(batch, num_heads, length, d_k)}.")
        expect_shape(result, (batch, num_heads, length, d_k), what, "The result is (batch, h, L, d_k).")
        expected = split_heads(x, num_heads)
        if same(result, expected):
            continue
        for hint, answer in wrong_splits(x, num_heads).items():
            if same(result, answer):
                raise Mistake(hint)
        raise Mistake(f"{what} differs from the reference: {first_difference(result, expected)}.")
    return "Checked 3 shapes, up to h = 8 heads of d_k = 8."


def wrong_combines(x: np.ndarray) -> dict[str, np.ndarray]:
    batch, heads, length, d_k = x.shape
    return {
        MIXED_HINT.replace("reshaped straight to (batch, h, L, d_k)", "reshaped (batch, h, L, d_k) "
                                                "straight to (batch, L, h * d_k)")
        + " Swap axes 1 and 2 first (to (batch, L, h, d_k)), then reshape.":
            x.reshape(batch, length, heads * d_k),
        "you interleaved the heads (feature 0 of every head, then feature 1, ...). Concatenate "
        "them: head 0's d_k features first, then head 1's. Transpose to (batch, L, h, d_k), not (batch, L, d_k, h).":
            x.transpose(0, 2, 3, 1).reshape(batch, length, heads * d_k),
    }


@exercise("combine_heads", notebook="03_multi_head_attention", defines="combine_heads",
          success="correct! It undoes split_heads: the heads are concatenated back to d_model.")
def check_combine_heads(combine_fn: Callable) -> str:
    """Check a student's combine_heads(x): (batch, h, L, d_k) -> (batch, L, h * d_k)."""
    for x, num_heads in split_cases():
        heads = split_heads(x, num_heads)
        batch, h, length, d_k = heads.shape
        what = f"combine_heads(<x of shape {heads.shape}>)"
        result = to_array(quiet_call(combine_fn, heads.copy()), what)
        if result.shape == (batch, length, h, d_k):
            raise Mistake(f"{what} has shape {result.shape}: after swapping the axes, reshape to "
                          f"(batch, L, h * d_k) = {(batch, length, h * d_k)}.")
        expect_shape(result, (batch, length, h * d_k), what, "The result is (batch, L, h * d_k).")
        expected = combine_heads(heads)
        if same(result, expected):
            continue
        for hint, answer in wrong_combines(heads).items():
            if same(result, answer):
                raise Mistake(hint)
        raise Mistake(f"{what} differs from the reference: {first_difference(result, expected)}.")
    return "combine_heads(split_heads(x)) gives x back for 3 shapes."


# ----------------------------------------------------------------------------- multi-head attention
def mha_cases() -> list[tuple[str, dict]]:
    """(description, kwargs) for multi_head_attention: cross-attention (L_q != L_k), then with a mask."""
    rng = np.random.default_rng(50)
    d_model = 12

    def weights() -> dict:
        return {name: rng.normal(scale=1 / math.sqrt(d_model), size=(d_model, d_model))
                for name in ("w_q", "w_k", "w_v", "w_o")}

    first = dict(x_q=rng.normal(size=(2, 3, d_model)), x_kv=rng.normal(size=(2, 5, d_model)), **weights(),
                 num_heads=3, mask=None)
    second = dict(x_q=rng.normal(size=(2, 4, d_model)), x_kv=rng.normal(size=(2, 6, d_model)), **weights(),
                  num_heads=4, mask=None)
    mask = rng.random((2, 1, 4, 6)) > 0.4
    mask[..., 0], mask[..., -1] = True, False
    second["mask"] = mask
    return [("x_q (2, 3, 12), x_kv (2, 5, 12), h = 3", first),
            ("x_q (2, 4, 12), x_kv (2, 6, 12), h = 4, mask (2, 1, 4, 6)", second)]


def _mha_variant(x_q, x_kv, w_q, w_k, w_v, w_o, num_heads, mask, *, scale=None, split=split_heads,
                 combine=combine_heads, use_w_o=True, kv_from_q=False, transpose_w=False, ignore_mask=False):
    if transpose_w:
        w_q, w_k, w_v, w_o = w_q.T, w_k.T, w_v.T, w_o.T
    source = x_q if kv_from_q else x_kv
    q, k, v = split(x_q @ w_q, num_heads), split(source @ w_k, num_heads), split(source @ w_v, num_heads)
    d_k = q.shape[-1]
    scores = q @ np.swapaxes(k, -1, -2) / (math.sqrt(d_k) if scale is None else scale)
    weights = masked_softmax(scores, None if ignore_mask else mask)
    heads = combine(weights @ v)
    return (heads @ w_o if use_w_o else heads), weights


def wrong_multi_heads(case: dict) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """hint -> (output, weights) of the usual wrong multi-head attentions."""
    d_model = case["x_q"].shape[-1]
    h = case["num_heads"]

    def split_mixed(x, n):
        b, length, d = x.shape
        return x.reshape(b, n, length, d // n)

    def combine_mixed(x):
        b, n, length, d_k = x.shape
        return x.reshape(b, length, n * d_k)

    wrong = {
        "you forgot the output projection: multiply the concatenated heads by w_o.": dict(use_w_o=False),
        f"you scaled by sqrt(d_model) = {math.sqrt(d_model):.3g}: each head uses its own d_k = d_model / h = "
        f"{d_model // h}, so the scale is 1 / sqrt(d_k).": dict(scale=math.sqrt(d_model)),
        "you split the heads without a transpose (reshape straight to (batch, h, L, d_k)): that silently "
        "mixes positions across heads. Use split_heads and combine_heads as in the exercise above.":
            dict(split=split_mixed, combine=combine_mixed),
        "the keys and values must come from x_kv (x_q only gives the queries); with x_kv = x_q this is "
        "self-attention, otherwise cross-attention.": dict(kv_from_q=True),
        "the weights are used transposed: in the row-vector convention Q = x_q @ w_q (no .T).":
            dict(transpose_w=True),
    }
    if case["mask"] is not None:
        wrong["you ignored the mask: pass it to the attention of every head (it broadcasts over h)."] = dict(
            ignore_mask=True)
    answers = {}
    for hint, options in wrong.items():
        try:
            answers[hint] = _mha_variant(**case, **options)
        except ValueError:  # e.g. the case's mask does not fit this variant's shapes
            continue
    return answers


@exercise("multi_head_attention", notebook="03_multi_head_attention", defines="multi_head_attention",
          success="correct! Project, split, attend per head, concatenate, project with W^O.")
def check_multi_head_attention(mha_fn: Callable) -> str:
    """Check a student's multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, num_heads, mask=None)."""
    for description, case in mha_cases():
        what = f"multi_head_attention(<{description}>)"
        args = [case[k].copy() for k in ("x_q", "x_kv", "w_q", "w_k", "w_v", "w_o")] + [case["num_heads"]]
        kwargs = {} if case["mask"] is None else {"mask": case["mask"].copy()}
        output, weights = output_and_weights(quiet_call(mha_fn, *args, **kwargs), what)
        expected_out, expected_w = multi_head_attention(**case)
        batch, length_q, _ = case["x_q"].shape
        if weights.shape == (batch, length_q, expected_w.shape[-1]):
            raise Mistake(f"{what}: the weights have shape {weights.shape}; keep one matrix per head, "
                          f"(batch, h, L_q, L_k) = {expected_w.shape}, without averaging over the heads.")
        length_k = case["x_kv"].shape[1]
        if weights.shape[:-1] == expected_w.shape[:-1] and weights.shape[-1] == length_q != length_k:
            raise Mistake(f"{what}: the weights have one column per QUERY ({length_q}), not per key ({length_k}). "
                          "The keys and values must come from x_kv (x_q only gives the queries); with x_kv = x_q "
                          "this is self-attention, otherwise cross-attention.")
        expect_shape(weights, expected_w.shape, f"{what}: weights", "The weights are (batch, h, L_q, L_k).")
        expect_shape(output, expected_out.shape, f"{what}: output", "The output is (batch, L_q, d_model).")
        if same(output, expected_out) and same(weights, expected_w):
            continue
        for hint, (wrong_out, wrong_w) in wrong_multi_heads(case).items():
            if same(output, wrong_out) and same(weights, wrong_w):
                raise Mistake(hint)
        if same(weights, expected_w):
            raise Mistake(f"{what}: the weights are right but the output is not ({first_difference(output, expected_out)}). "
                          "Combine the heads, then multiply by w_o.")
        raise Mistake(f"{what}: the weights differ from the reference: {first_difference(weights, expected_w)}.")
    return "Cross-attention with h = 3 and a masked case with h = 4 match the reference."


__all__ = ["check_split_heads", "check_combine_heads", "check_multi_head_attention", "wrong_splits",
           "wrong_combines", "wrong_multi_heads", "split_cases", "mha_cases"]
