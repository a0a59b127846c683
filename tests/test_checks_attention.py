"""The checks of notebooks 02-04 accept the reference, name each wrong implementation they claim to
catch with its own mistake code, report stubs as todo, and never raise whatever the student returns.

Tests assert mistake codes, never hint words: the hints may be reworded freely. The last tests read the
solution notebooks 02-04: every exercise has a time budget and two hints, and the hints write no solution code.
"""

import math

import numpy as np
import pytest
import torch
from conftest import define, solution_source
from test_checks_softmax import NEW_ATTENTION_WRONG, NEW_SOFTMAX_WRONG

import helpers
from helpers.checks import (EXERCISES, check_causal_mask, check_combine_heads, check_masked_softmax,
                            check_multi_head_attention, check_padding_mask, check_scaled_dot_product_attention,
                            check_softmax, check_split_heads, exercises_in)
from helpers.checks.harness import Verdict


def run(check, func, capsys):
    """The verdict of check(func): returned, never printed, one line, never a bug of the check itself."""
    verdict = check(func)
    assert capsys.readouterr().out == "", "a check returns its verdict, it prints nothing"
    assert isinstance(verdict, Verdict)
    assert "\n" not in str(verdict) and str(verdict) == repr(verdict)
    assert verdict.mistake != "check_error", verdict
    assert "{" not in verdict.message, f"a hint template was not filled in: {verdict}"
    return verdict


def assert_mistake(check, wrong, code, capsys):
    verdict = run(check, wrong, capsys)
    assert not verdict and verdict.status == "fail" and verdict.exercise == check.exercise.name
    assert verdict.mistake == code, verdict
    assert str(verdict).startswith(f"❌ {check.exercise.name}: ")


def assert_every_code_triggered(name, wrong_answers):
    """The wrong answers of a test list trigger every mistake code the exercise declares."""
    assert {code for *_, code in wrong_answers} == set(EXERCISES[name].mistakes)


def stub(*args, **kwargs):
    raise NotImplementedError()


# ----------------------------------------------------------------------------- softmax
def softmax_no_max(x, axis=-1):
    e = np.exp(x)
    return e / e.sum(axis=axis, keepdims=True)


def softmax_global_max(x, axis=-1):
    e = np.exp(x - np.max(x))
    return e / e.sum(axis=axis, keepdims=True)


def softmax_whole_sum(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / np.sum(e)


def softmax_ignores_axis(x, axis=-1):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def softmax_no_keepdims(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis)


def softmax_none_instead_of_keepdims(x, axis=-1):  # right for axis=-1 of a 2-D array, crashes for axis=0
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis)[:, None]


def softmax_minus_min(x, axis=-1):
    e = np.exp(x - x.min(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def softmax_minus_mean(x, axis=-1):
    e = np.exp(x - np.mean(x, axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def softmax_max_without_keepdims(x, axis=-1):
    e = np.exp(x - np.max(x, axis=axis))
    return e / np.sum(e, axis=axis, keepdims=True)


def softmax_in_place(x, axis=-1):  # right values, but the caller's array is changed
    x -= x.max(axis=axis, keepdims=True)
    np.exp(x, out=x)
    x /= x.sum(axis=axis, keepdims=True)
    return x


def softmax_returns_log(x, axis=-1):  # the log-softmax, a step too far
    shifted = x - x.max(axis=axis, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))


SOFTMAX_WRONG = [
    (softmax_returns_log, "log_softmax"),
    (softmax_minus_min, "subtracted_min"),
    (softmax_minus_mean, "subtracted_mean"),
    (softmax_max_without_keepdims, "max_without_keepdims"),
    (softmax_no_max, "softmax_overflows"),
    (softmax_global_max, "max_of_whole_array"),
    (softmax_whole_sum, "sum_of_whole_array"),
    (softmax_ignores_axis, "axis_ignored"),
    (softmax_no_keepdims, "sum_without_keepdims"),
    (softmax_none_instead_of_keepdims, "sum_without_keepdims"),
]


@pytest.mark.parametrize("wrong, code", SOFTMAX_WRONG, ids=[c for _, c in SOFTMAX_WRONG])
def test_check_softmax_names_each_mistake(wrong, code, capsys):
    assert_mistake(check_softmax, wrong, code, capsys)


def test_softmax_wrong_answers_cover_every_code():
    assert_every_code_triggered("softmax", SOFTMAX_WRONG + NEW_SOFTMAX_WRONG)


# ----------------------------------------------------------------------------- scaled_dot_product_attention
def attention_not_scaled(Q, K, V, mask=None):
    scores = Q @ np.swapaxes(K, -1, -2)
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    weights = helpers.softmax(scores)
    return weights @ V, weights


def attention_divided_by_d_k(Q, K, V, mask=None):
    scores = Q @ np.swapaxes(K, -1, -2) / Q.shape[-1]
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    weights = helpers.softmax(scores)
    return weights @ V, weights


def attention_scaled_by_d_v(Q, K, V, mask=None):
    scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(V.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    weights = helpers.softmax(scores)
    return weights @ V, weights


def attention_softmax_over_queries(Q, K, V, mask=None):
    scores = Q @ np.swapaxes(K, -1, -2) / math.sqrt(Q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    weights = helpers.softmax(scores, axis=-2)
    return weights @ V, weights


def attention_k_not_transposed(Q, K, V, mask=None):
    scores = Q @ K / math.sqrt(Q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    weights = helpers.softmax(scores)
    return weights @ V, weights


def attention_k_dot_t(Q, K, V, mask=None):  # K.T reverses every axis of a batched K: a crash
    scores = Q @ K.T / math.sqrt(Q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    weights = helpers.softmax(scores)
    return weights @ V, weights


def attention_d_k_from_axis_1(Q, K, V, mask=None):  # Q.shape[1] is d_k only for 2-D inputs
    scores = Q @ np.swapaxes(K, -1, -2) / math.sqrt(Q.shape[1])
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    weights = helpers.softmax(scores)
    return weights @ V, weights


def attention_d_k_first_axis(Q, K, V, mask=None):  # Q.shape[0] is L_q in 2-D, the batch size when batched
    scores = Q @ np.swapaxes(K, -1, -2) / math.sqrt(Q.shape[0])
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    weights = helpers.softmax(scores)
    return weights @ V, weights


def attention_sum_over_axis_1(Q, K, V, mask=None):  # a hand-made softmax: the max over -1, the sum over axis 1
    scores = Q @ np.swapaxes(K, -1, -2) / math.sqrt(Q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights = e / e.sum(axis=1, keepdims=True)
    return weights @ V, weights


def attention_mask_multiplied(Q, K, V, mask=None):
    scores = Q @ np.swapaxes(K, -1, -2) / math.sqrt(Q.shape[-1])
    if mask is not None:
        scores = scores * mask
    weights = helpers.softmax(scores)
    return weights @ V, weights


def attention_times_sqrt_d_k(Q, K, V, mask=None):
    scores = Q @ np.swapaxes(K, -1, -2) * math.sqrt(Q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    weights = helpers.softmax(scores)
    return weights @ V, weights


def attention_blocked_filled_with_0(Q, K, V, mask=None):
    scores = Q @ np.swapaxes(K, -1, -2) / math.sqrt(Q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, 0.0)
    weights = helpers.softmax(scores)
    return weights @ V, weights


def attention_weights_transposed(Q, K, V, mask=None):
    output, weights = helpers.scaled_dot_product_attention(Q, K, V, mask)
    return output, np.swapaxes(weights, -1, -2)


def attention_mask_after_softmax(Q, K, V, mask=None):
    weights = helpers.softmax(Q @ np.swapaxes(K, -1, -2) / math.sqrt(Q.shape[-1]))
    if mask is not None:
        weights = weights * mask
    return weights @ V, weights


def attention_mask_ignored(Q, K, V, mask=None):
    weights = helpers.softmax(Q @ np.swapaxes(K, -1, -2) / math.sqrt(Q.shape[-1]))
    return weights @ V, weights


def attention_mask_inverted(Q, K, V, mask=None):
    scores = Q @ np.swapaxes(K, -1, -2) / math.sqrt(Q.shape[-1])
    if mask is not None:
        scores = np.where(mask, -np.inf, scores)
    weights = helpers.softmax(scores)
    return weights @ V, weights


def attention_naive_softmax(Q, K, V, mask=None):
    s = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    w = np.exp(s)
    w = w / w.sum(-1, keepdims=True)
    return w @ V, w


def attention_naive_softmax_finite_fill(Q, K, V, mask=None):
    s = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])
    if mask is not None:
        s = np.where(mask, s, -1e9)
    w = np.exp(s) / np.exp(s).sum(axis=-1, keepdims=True)
    return w @ V, w


def attention_naive_softmax_float32(Q, K, V, mask=None):  # overflows from 89 on, a NaN pattern of its own
    s = (Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])).astype(np.float32)
    if mask is not None:
        s = np.where(mask, s, np.float32(-np.inf))
    w = np.exp(s)
    w = w / w.sum(-1, keepdims=True)
    return w @ V, w


def attention_swapped(Q, K, V, mask=None):
    output, weights = helpers.scaled_dot_product_attention(Q, K, V, mask)
    return weights, output


def attention_not_normalised(Q, K, V, mask=None):
    scores = Q @ np.swapaxes(K, -1, -2) / math.sqrt(Q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return weights @ V, weights


def attention_scores_times_v(Q, K, V, mask=None):
    scores = Q @ np.swapaxes(K, -1, -2) / math.sqrt(Q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    weights = helpers.softmax(scores)
    return scores @ V, weights


def attention_scaled_by_l_k(Q, K, V, mask=None):
    scores = Q @ np.swapaxes(K, -1, -2) / math.sqrt(K.shape[-2])
    weights = helpers.masked_softmax(scores, mask)
    return weights @ V, weights


ATTENTION_WRONG = [
    (attention_scaled_by_l_k, "scaled_by_sqrt_l_k"),
    (attention_not_scaled, "not_scaled"),
    (attention_divided_by_d_k, "divided_by_d_k"),
    (attention_scaled_by_d_v, "scaled_by_sqrt_d_v"),
    (attention_softmax_over_queries, "softmax_wrong_axis"),
    (attention_k_not_transposed, "k_not_transposed"),
    (attention_k_dot_t, "k_transposed_all_axes"),
    (attention_d_k_from_axis_1, "d_k_wrong_axis"),
    (attention_d_k_first_axis, "d_k_wrong_axis"),
    (attention_sum_over_axis_1, "batched_axes_wrong"),
    (attention_mask_multiplied, "scores_multiplied_by_mask"),
    (attention_weights_transposed, "weights_transposed"),
    (attention_times_sqrt_d_k, "multiplied_by_sqrt_d_k"),
    (attention_blocked_filled_with_0, "scores_multiplied_by_mask"),
    (attention_mask_after_softmax, "mask_after_softmax"),
    (attention_mask_ignored, "mask_ignored"),
    (attention_mask_inverted, "mask_inverted"),
    (attention_naive_softmax, "softmax_overflows"),
    (attention_naive_softmax_finite_fill, "softmax_overflows"),
    (attention_naive_softmax_float32, "softmax_overflows"),
    (attention_swapped, "output_weights_swapped"),
    (attention_not_normalised, "rows_do_not_sum_to_one"),
    (attention_scores_times_v, "output_not_weights_at_v"),
]


@pytest.mark.parametrize("wrong, code", ATTENTION_WRONG, ids=[w.__name__ for w, _ in ATTENTION_WRONG])
def test_check_attention_names_each_mistake(wrong, code, capsys):
    assert_mistake(check_scaled_dot_product_attention, wrong, code, capsys)


def test_attention_wrong_answers_cover_every_code():
    assert_every_code_triggered("scaled_dot_product_attention", ATTENTION_WRONG + NEW_ATTENTION_WRONG)


def test_the_first_attention_case_tells_the_scales_apart():
    """Issue 18: the first case has L_k != d_k (and L_q, d_v different again), so that scaling by sqrt(L_k) is named
    there, not told "right for 2-D inputs but not batched ones"; the second keeps L_k = d_k for an untransposed K."""
    cases = helpers.checks.attention.attention_cases()
    _, (Q, K, V), _ = cases[0]
    assert len({Q.shape[-2], K.shape[-2], Q.shape[-1], V.shape[-1]}) == 4
    _, (Q, K, V), _ = cases[1]
    assert Q.ndim == 2 and K.shape[-2] == K.shape[-1]
    verdict = check_scaled_dot_product_attention(attention_scaled_by_l_k)
    assert verdict.mistake == "scaled_by_sqrt_l_k", verdict


def test_naive_softmax_is_only_caught_by_the_large_scores():
    """The overflow case is needed: on the other cases the naive softmax gives the right answer."""
    cases = helpers.checks.attention.attention_cases()
    for _, (Q, K, V), mask in cases[:-1]:
        naive = attention_naive_softmax(Q, K, V, mask)
        assert all(np.allclose(a, e, equal_nan=True)
                   for a, e in zip(naive, helpers.scaled_dot_product_attention(Q, K, V, mask)))
    _, (Q, K, V), mask = cases[-1]
    with np.errstate(all="ignore"):
        _, naive_weights = attention_naive_softmax(Q, K, V, mask)
    assert np.isnan(naive_weights).any() and np.isfinite(helpers.scaled_dot_product_attention(Q, K, V, mask)[1]).all()


def attention_einsum_finite_fill(Q, K, V, mask=None):  # a different but right implementation
    scores = np.einsum("...qd,...kd->...qk", Q, K) / np.sqrt(K.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -1e9)
    scores = scores - scores.max(axis=-1, keepdims=True)
    weights = np.exp(scores) / np.exp(scores).sum(axis=-1, keepdims=True)
    return np.einsum("...qk,...kv->...qv", weights, V), weights


def test_check_attention_accepts_a_different_right_implementation(capsys):
    assert run(check_scaled_dot_product_attention, attention_einsum_finite_fill, capsys)


# ----------------------------------------------------------------------------- split_heads / combine_heads
def split_no_transpose(x, num_heads):
    b, length, d = x.shape
    return x.reshape(b, num_heads, length, d // num_heads)


def split_interleaved(x, num_heads):
    b, length, d = x.shape
    return x.reshape(b, length, d // num_heads, num_heads).transpose(0, 3, 1, 2)


def split_forgot_swap(x, num_heads):
    b, length, d = x.shape
    return x.reshape(b, length, num_heads, d // num_heads)


def split_each_head_transposed(x, num_heads):  # (batch, h, d_k, L)
    b, length, d = x.shape
    return x.reshape(b, length, num_heads, d // num_heads).transpose(0, 2, 3, 1)


def split_heads_on_batch_axis(x, num_heads):  # (batch * h, L, d_k), as nn.MultiheadAttention keeps them inside
    b, length, d = x.shape
    return x.reshape(b, length, num_heads, d // num_heads).transpose(0, 2, 1, 3).reshape(b * num_heads, length, -1)


def split_list_of_heads(x, num_heads):  # a list of (batch, L, d_k) slices: (h, batch, L, d_k) as an array
    d_k = x.shape[-1] // num_heads
    return [x[:, :, i * d_k:(i + 1) * d_k] for i in range(num_heads)]


SPLIT_WRONG = [
    (split_no_transpose, "reshape_without_transpose"),
    (split_interleaved, "heads_interleaved"),
    (split_forgot_swap, "axes_not_swapped"),
    (split_each_head_transposed, "head_transposed"),
    (split_heads_on_batch_axis, "heads_on_batch_axis"),
    (split_list_of_heads, "heads_before_batch"),
]


def combine_no_transpose(x):
    b, h, length, d_k = x.shape
    return x.reshape(b, length, h * d_k)


def combine_interleaved(x):
    b, h, length, d_k = x.shape
    return x.transpose(0, 2, 3, 1).reshape(b, length, h * d_k)


def combine_forgot_reshape(x):
    return x.transpose(0, 2, 1, 3)


def combine_swapaxes_1_3(x):  # exchanges h with d_k instead of with L
    b, h, length, d_k = x.shape
    return x.swapaxes(1, 3).reshape(b, length, h * d_k)


def combine_reversed(x):
    return np.concatenate([x[:, i] for i in reversed(range(x.shape[1]))], axis=-1)


def combine_summed(x):
    return x.sum(axis=1)


def combine_averaged(x):
    return x.mean(axis=1)


COMBINE_WRONG = [
    (combine_summed, "heads_reduced"),
    (combine_averaged, "heads_reduced"),
    (combine_reversed, "heads_reversed"),
    (combine_no_transpose, "reshape_without_transpose"),
    (combine_interleaved, "heads_interleaved"),
    (combine_forgot_reshape, "not_reshaped"),
    (combine_swapaxes_1_3, "h_and_d_k_exchanged"),
]


@pytest.mark.parametrize("wrong, code", SPLIT_WRONG, ids=[c for _, c in SPLIT_WRONG])
def test_check_split_heads_names_each_mistake(wrong, code, capsys):
    assert_mistake(check_split_heads, wrong, code, capsys)


@pytest.mark.parametrize("wrong, code", COMBINE_WRONG, ids=[c for _, c in COMBINE_WRONG])
def test_check_combine_heads_names_each_mistake(wrong, code, capsys):
    assert_mistake(check_combine_heads, wrong, code, capsys)


def test_split_and_combine_wrong_answers_cover_every_code():
    assert_every_code_triggered("split_heads", SPLIT_WRONG)
    assert_every_code_triggered("combine_heads", COMBINE_WRONG)


# ----------------------------------------------------------------------------- multi_head_attention
def mha_no_w_o(x_q, x_kv, w_q, w_k, w_v, w_o, num_heads, mask=None):
    q = helpers.split_heads(x_q @ w_q, num_heads)
    k, v = helpers.split_heads(x_kv @ w_k, num_heads), helpers.split_heads(x_kv @ w_v, num_heads)
    out, weights = helpers.scaled_dot_product_attention(q, k, v, mask)
    return helpers.combine_heads(out), weights


def mha_scaled_by_d_model(x_q, x_kv, w_q, w_k, w_v, w_o, num_heads, mask=None):
    q = helpers.split_heads(x_q @ w_q, num_heads)
    k, v = helpers.split_heads(x_kv @ w_k, num_heads), helpers.split_heads(x_kv @ w_v, num_heads)
    weights = helpers.masked_softmax(q @ np.swapaxes(k, -1, -2) / np.sqrt(x_q.shape[-1]), mask)
    return helpers.combine_heads(weights @ v) @ w_o, weights


def mha_split_without_transpose(x_q, x_kv, w_q, w_k, w_v, w_o, num_heads, mask=None):
    q = split_no_transpose(x_q @ w_q, num_heads)
    k, v = split_no_transpose(x_kv @ w_k, num_heads), split_no_transpose(x_kv @ w_v, num_heads)
    out, weights = helpers.scaled_dot_product_attention(q, k, v, mask)
    return combine_no_transpose(out) @ w_o, weights


def mha_kv_from_x_q(x_q, x_kv, w_q, w_k, w_v, w_o, num_heads, mask=None):
    q = helpers.split_heads(x_q @ w_q, num_heads)
    k, v = helpers.split_heads(x_q @ w_k, num_heads), helpers.split_heads(x_q @ w_v, num_heads)
    out, weights = helpers.scaled_dot_product_attention(q, k, v)
    return helpers.combine_heads(out) @ w_o, weights


def mha_transposed_weights(x_q, x_kv, w_q, w_k, w_v, w_o, num_heads, mask=None):
    q = helpers.split_heads(x_q @ w_q.T, num_heads)
    k, v = helpers.split_heads(x_kv @ w_k.T, num_heads), helpers.split_heads(x_kv @ w_v.T, num_heads)
    out, weights = helpers.scaled_dot_product_attention(q, k, v, mask)
    return helpers.combine_heads(out) @ w_o.T, weights


def mha_mask_ignored(x_q, x_kv, w_q, w_k, w_v, w_o, num_heads, mask=None):
    q = helpers.split_heads(x_q @ w_q, num_heads)
    k, v = helpers.split_heads(x_kv @ w_k, num_heads), helpers.split_heads(x_kv @ w_v, num_heads)
    out, weights = helpers.scaled_dot_product_attention(q, k, v)
    return helpers.combine_heads(out) @ w_o, weights


def mha_averaged(*args, **kwargs):
    out, weights = helpers.multi_head_attention(*args, **kwargs)
    return out, weights.mean(axis=1)


def mha_only_w_o_transposed(x_q, x_kv, w_q, w_k, w_v, w_o, num_heads, mask=None):
    q = helpers.split_heads(x_q @ w_q, num_heads)
    k, v = helpers.split_heads(x_kv @ w_k, num_heads), helpers.split_heads(x_kv @ w_v, num_heads)
    out, weights = helpers.scaled_dot_product_attention(q, k, v, mask)
    return helpers.combine_heads(out) @ w_o.T, weights


def mha_k_v_swapped(x_q, x_kv, w_q, w_k, w_v, w_o, num_heads, mask=None):
    q = helpers.split_heads(x_q @ w_q, num_heads)
    k, v = helpers.split_heads(x_kv @ w_v, num_heads), helpers.split_heads(x_kv @ w_k, num_heads)
    out, weights = helpers.scaled_dot_product_attention(q, k, v, mask)
    return helpers.combine_heads(out) @ w_o, weights


def mha_not_scaled(x_q, x_kv, w_q, w_k, w_v, w_o, num_heads, mask=None):
    q = helpers.split_heads(x_q @ w_q, num_heads)
    k, v = helpers.split_heads(x_kv @ w_k, num_heads), helpers.split_heads(x_kv @ w_v, num_heads)
    weights = helpers.masked_softmax(q @ np.swapaxes(k, -1, -2), mask)
    return helpers.combine_heads(weights @ v) @ w_o, weights


def mha_softmax_over_queries(x_q, x_kv, w_q, w_k, w_v, w_o, num_heads, mask=None):
    q = helpers.split_heads(x_q @ w_q, num_heads)
    k, v = helpers.split_heads(x_kv @ w_k, num_heads), helpers.split_heads(x_kv @ w_v, num_heads)
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    weights = helpers.softmax(scores, axis=2)
    return helpers.combine_heads(weights @ v) @ w_o, weights


def mha_mask_inverted(x_q, x_kv, w_q, w_k, w_v, w_o, num_heads, mask=None):
    q = helpers.split_heads(x_q @ w_q, num_heads)
    k, v = helpers.split_heads(x_kv @ w_k, num_heads), helpers.split_heads(x_kv @ w_v, num_heads)
    out, weights = helpers.scaled_dot_product_attention(q, k, v, None if mask is None else ~mask)
    return helpers.combine_heads(out) @ w_o, weights


def mha_combined_without_transpose(x_q, x_kv, w_q, w_k, w_v, w_o, num_heads, mask=None):
    q = helpers.split_heads(x_q @ w_q, num_heads)
    k, v = helpers.split_heads(x_kv @ w_k, num_heads), helpers.split_heads(x_kv @ w_v, num_heads)
    out, weights = helpers.scaled_dot_product_attention(q, k, v, mask)
    return out.reshape(x_q.shape) @ w_o, weights


def mha_q_from_x_kv(x_q, x_kv, w_q, w_k, w_v, w_o, num_heads, mask=None):
    q = helpers.split_heads(x_kv @ w_q, num_heads)
    k, v = helpers.split_heads(x_kv @ w_k, num_heads), helpers.split_heads(x_kv @ w_v, num_heads)
    out, weights = helpers.scaled_dot_product_attention(q, k, v, mask)
    return helpers.combine_heads(out) @ w_o, weights


def mha_single_head(x_q, x_kv, w_q, w_k, w_v, w_o, num_heads, mask=None):
    out, weights = helpers.scaled_dot_product_attention(x_q @ w_q, x_kv @ w_k, x_kv @ w_v, mask)
    return out @ w_o, weights


def mha_own_attention(fill):
    def mha(x_q, x_kv, w_q, w_k, w_v, w_o, num_heads, mask=None):
        q = helpers.split_heads(x_q @ w_q, num_heads)
        k, v = helpers.split_heads(x_kv @ w_k, num_heads), helpers.split_heads(x_kv @ w_v, num_heads)
        scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
        if mask is not None and fill == "zero":
            scores = np.where(mask, scores, 0.0)
        weights = helpers.softmax(scores)
        if mask is not None and fill == "after":
            weights = weights * mask
        return helpers.combine_heads(weights @ v) @ w_o, weights
    return mha


MHA_WRONG = [
    (mha_combined_without_transpose, "combine_without_transpose"),
    (mha_q_from_x_kv, "q_from_x_kv"),
    (mha_single_head, "single_head"),
    (mha_own_attention("zero"), "masked_with_zero"),
    (mha_own_attention("after"), "mask_after_softmax"),
    (mha_mask_inverted, "mask_inverted"),
    (mha_not_scaled, "not_scaled"),
    (mha_softmax_over_queries, "softmax_wrong_axis"),
    (mha_k_v_swapped, "k_v_swapped"),
    (mha_no_w_o, "no_output_projection"),
    (mha_scaled_by_d_model, "scaled_by_sqrt_d_model"),
    (mha_split_without_transpose, "reshape_without_transpose"),
    (mha_kv_from_x_q, "kv_from_x_q"),
    (mha_transposed_weights, "weights_transposed"),
    (mha_mask_ignored, "mask_ignored"),
    (mha_averaged, "weights_averaged_over_heads"),
    (mha_only_w_o_transposed, "output_wrong_weights_right"),
]


@pytest.mark.parametrize("wrong, code", MHA_WRONG, ids=[c for _, c in MHA_WRONG])
def test_check_multi_head_attention_names_each_mistake(wrong, code, capsys):
    assert_mistake(check_multi_head_attention, wrong, code, capsys)


def test_multi_head_attention_wrong_answers_cover_every_code():
    assert_every_code_triggered("multi_head_attention", MHA_WRONG)


# ----------------------------------------------------------------------------- causal_mask / padding_mask
CAUSAL_WRONG = [
    (lambda size: np.tril(np.ones((size, size), dtype=bool), k=-1), "diagonal_masked"),
    (lambda size: np.triu(np.ones((size, size), dtype=bool)), "triangles_swapped"),
    (lambda size: np.triu(np.ones((size, size), dtype=bool), k=1), "inverted"),
    (lambda size: np.ones((size, size), dtype=bool), "all_true"),
    (lambda size: np.tril(np.ones((size, size))), "not_boolean"),
    (lambda size: np.tril(np.ones((size, size), dtype=int)), "not_boolean"),
    (lambda size: np.tril(np.ones((size, size), dtype=bool), k=1), "one_future_key"),
]


@pytest.mark.parametrize("check, wrong", [
    (check_causal_mask, lambda size: torch.tril(torch.ones(size, size, dtype=torch.bool))),
    (check_causal_mask, lambda size: [[j <= i for j in range(size)] for i in range(size)]),
    (check_padding_mask, lambda tokens, pad_id: torch.from_numpy(tokens != pad_id)[:, None, None, :]),
], ids=["causal torch", "causal list", "padding torch"])
def test_mask_checks_ask_for_a_numpy_array(check, wrong, capsys):
    """The exercises ask for a boolean NumPy array: a torch tensor or a list is told so (issue 33)."""
    verdict = run(check, wrong, capsys)
    assert verdict.status == "fail" and verdict.mistake == "not_an_array" and "NumPy" in verdict.message, verdict

PADDING_WRONG = [
    (lambda tokens, pad_id: (tokens == pad_id)[:, None, None, :], "inverted"),
    (lambda tokens, pad_id: (tokens != pad_id).astype(int)[:, None, None, :], "not_boolean"),
    (lambda tokens, pad_id: tokens != pad_id, "missing_singleton_axes"),
    (lambda tokens, pad_id: (tokens != pad_id)[:, None, :], "missing_singleton_axes"),
    (lambda tokens, pad_id: (tokens != pad_id)[:, None, :, None], "mask_on_queries"),
    (lambda tokens, pad_id: (tokens != pad_id)[:, :, None, None], "wrong_axis_order"),
    (lambda tokens, pad_id: (tokens > pad_id)[:, None, None, :], "greater_than_pad"),
    (lambda tokens, pad_id: (tokens != 0)[:, None, None, :], "compared_with_zero"),
    (lambda tokens, pad_id: np.ones_like(tokens, dtype=bool)[:, None, None, :], "all_true"),
]


@pytest.mark.parametrize("wrong, code", CAUSAL_WRONG, ids=[c for _, c in CAUSAL_WRONG])
def test_check_causal_mask_names_each_mistake(wrong, code, capsys):
    assert_mistake(check_causal_mask, wrong, code, capsys)


@pytest.mark.parametrize("wrong, code", PADDING_WRONG, ids=[c for _, c in PADDING_WRONG])
def test_check_padding_mask_names_each_mistake(wrong, code, capsys):
    assert_mistake(check_padding_mask, wrong, code, capsys)


def causal_mask_one_cell_off(size):  # an unknown wrong mask: one future key visible
    mask = np.tril(np.ones((size, size), dtype=bool))
    if size > 1:
        mask[0, 1] = True
    return mask


def test_check_causal_mask_localises_an_unknown_wrong_mask(capsys):
    """Regression (issue 18): an unknown wrong mask got "the check could not run (TypeError: tr() got
    multiple values for argument 'key')"; it is told where it differs."""
    verdict = run(check_causal_mask, causal_mask_one_cell_off, capsys)
    assert verdict.status == "fail" and verdict.mistake is None, verdict
    assert "(0, 1)" in verdict.message and "query 0" in verdict.message and "key 1" in verdict.message


def test_mask_wrong_answers_cover_every_code():
    assert_every_code_triggered("causal_mask", CAUSAL_WRONG)
    assert_every_code_triggered("padding_mask", PADDING_WRONG)


# ----------------------------------------------------------------------------- masked_softmax
def masked_nan_rows(scores, mask):
    return helpers.softmax(np.where(mask, scores, -np.inf))


def masked_uniform_rows(scores, mask):
    return helpers.softmax(np.where(mask, scores, -1e9))


def masked_inverted(scores, mask):
    return np.nan_to_num(helpers.softmax(np.where(mask, -np.inf, scores)))


def masked_multiplied(scores, mask):
    return helpers.softmax(scores * mask)


def masked_after(scores, mask):
    return helpers.softmax(scores) * mask


def masked_ignored(scores, mask):
    return helpers.softmax(scores)


def masked_wrong_axis(scores, mask):
    return np.nan_to_num(helpers.softmax(np.where(mask, scores, -np.inf), axis=-2))


def masked_small_fill(scores, mask):  # exp(-100) is tiny but not zero
    weights = helpers.softmax(np.where(mask, scores, -100.0))
    return np.where(np.broadcast_to(mask, scores.shape).any(axis=-1, keepdims=True), weights, 0.0)


def masked_unshifted(scores, mask):  # no maximum subtracted: right on small scores, inf / inf on large ones
    full = np.broadcast_to(mask, scores.shape)
    e = np.where(full, np.exp(scores), 0.0)
    total = e.sum(axis=-1, keepdims=True)
    return np.divide(e, total, out=np.zeros_like(e), where=total > 0)


def masked_nan_repaired(scores, mask):  # right values, but 0/0 computed on the empty rows, then repaired
    with np.errstate(invalid="ignore"):
        return np.nan_to_num(helpers.softmax(np.where(mask, scores, -np.inf)))


def masked_nan_unsilenced(scores, mask):  # the same 0/0, NaN replaced without silencing numpy
    weights = helpers.softmax(np.where(mask, scores, -np.inf))
    return np.where(weights == weights, weights, 0.0)


def masked_sum_over_queries(scores, mask):
    filled = np.where(mask, scores, -np.inf)
    row_max = filled.max(axis=-1, keepdims=True)
    exps = np.exp(filled - np.where(np.isfinite(row_max), row_max, 0.0))
    totals = exps.sum(axis=-2, keepdims=True)
    return exps / np.where(totals > 0, totals, 1.0)


def masked_max_without_keepdims(scores, mask):
    filled = np.where(mask, scores, -np.inf)
    row_max = filled.max(axis=-1)
    exps = np.exp(filled - np.where(np.isfinite(row_max), row_max, 0.0))
    totals = exps.sum(axis=-1, keepdims=True)
    return exps / np.where(totals > 0, totals, 1.0)


MASKED_SOFTMAX_WRONG = [
    (masked_nan_repaired, "zero_over_zero"),
    (masked_nan_unsilenced, "zero_over_zero"),
    (masked_sum_over_queries, "sum_over_queries"),
    (masked_max_without_keepdims, "max_without_keepdims"),
    (masked_unshifted, "overflows"),
    (masked_nan_rows, "nan_on_empty_rows"),
    (masked_uniform_rows, "uniform_on_empty_rows"),
    (masked_inverted, "inverted"),
    (masked_multiplied, "scores_multiplied_by_mask"),
    (masked_after, "mask_after_softmax"),
    (masked_ignored, "mask_ignored"),
    (masked_wrong_axis, "softmax_wrong_axis"),
    (masked_small_fill, "blocked_not_zero"),
]


@pytest.mark.parametrize("wrong, code", MASKED_SOFTMAX_WRONG, ids=[c for _, c in MASKED_SOFTMAX_WRONG])
def test_check_masked_softmax_names_each_mistake(wrong, code, capsys):
    assert_mistake(check_masked_softmax, wrong, code, capsys)


def test_masked_softmax_wrong_answers_cover_every_code():
    assert_every_code_triggered("masked_softmax", MASKED_SOFTMAX_WRONG)


# ----------------------------------------------------------------------------- every check
ALL = [
    (check_softmax, helpers.softmax),
    (check_scaled_dot_product_attention, helpers.scaled_dot_product_attention),
    (check_split_heads, helpers.split_heads),
    (check_combine_heads, helpers.combine_heads),
    (check_multi_head_attention, helpers.multi_head_attention),
    (check_causal_mask, helpers.causal_mask),
    (check_padding_mask, helpers.padding_mask),
    (check_masked_softmax, helpers.masked_softmax),
]
IDS = [check.exercise.name for check, _ in ALL]


@pytest.mark.parametrize("check, reference", ALL, ids=IDS)
def test_reference_passes(check, reference, capsys):
    verdict = run(check, reference, capsys)
    assert verdict and verdict.status == "pass" and verdict.mistake is None, verdict
    assert str(verdict).startswith(f"✅ {check.exercise.name}: correct!"), verdict


@pytest.mark.parametrize("check, reference", ALL, ids=IDS)
def test_stub_is_todo(check, reference, capsys):
    verdict = run(check, stub, capsys)
    assert not verdict and verdict.status == "todo", verdict
    assert str(verdict).startswith(f"📝 {check.exercise.name}: ")


BAD_RETURNS = [None, [1, 2], "text", 3.0, torch.zeros(2), np.full((5, 5), np.nan), (None, None),
               (np.zeros(1), np.zeros(1)), np.zeros(0), object(), {"a": 1}]


@pytest.mark.parametrize("check, reference", ALL, ids=IDS)
@pytest.mark.parametrize("value", BAD_RETURNS, ids=lambda v: type(v).__name__)
def test_checks_survive_any_return_value(check, reference, value, capsys):
    verdict = run(check, lambda *args, **kwargs: value, capsys)
    assert not verdict and verdict.status == "fail", verdict
    assert str(verdict).startswith(f"❌ {check.exercise.name}: ")


def test_attention_must_return_a_pair(capsys):
    def output_only(Q, K, V, mask=None):
        return helpers.scaled_dot_product_attention(Q, K, V, mask)[0]

    verdict = run(check_scaled_dot_product_attention, output_only, capsys)
    assert not verdict and verdict.mistake == "not_a_pair", verdict


@pytest.mark.parametrize("check, reference", ALL, ids=IDS)
def test_checks_survive_crashes_and_non_functions(check, reference, capsys):
    def crash(*args, **kwargs):
        return 1 / 0

    verdict = run(check, crash, capsys)
    assert not verdict and verdict.mistake == "raised_error" and "ZeroDivisionError" in verdict.message, verdict
    verdict = run(check, None, capsys)
    assert not verdict and verdict.mistake == "not_callable", verdict


NUMPY_ASKED = ("causal_mask", "padding_mask")  # their exercises ask for a boolean NumPy array (issue 33)


@pytest.mark.parametrize("check, reference", [(c, r) for c, r in ALL if c.exercise.name not in NUMPY_ASKED],
                         ids=[i for i in IDS if i not in NUMPY_ASKED])
def test_checks_accept_torch_returning_implementations(check, reference, capsys):
    """A student who answers with torch tensors (or tensors inside the pair) is not failed for it, unless the
    exercise asks for a NumPy array (test_mask_checks_ask_for_a_numpy_array)."""
    def via_torch(*args, **kwargs):
        result = reference(*args, **kwargs)
        if isinstance(result, tuple):
            return tuple(torch.from_numpy(np.asarray(r)) for r in result)
        return torch.from_numpy(np.asarray(result))

    assert run(check, via_torch, capsys)


def test_a_softmax_computed_in_place_is_told_it_changed_its_input(capsys):
    verdict = run(check_softmax, softmax_in_place, capsys)
    assert not verdict and verdict.mistake == "changed_input"


def test_a_function_that_changes_its_input_is_told_so(capsys):
    """A student function that modifies its arguments in place is named, and cannot corrupt later cases."""
    def destructive(x, axis=-1):
        result = helpers.softmax(x, axis=axis)
        x[...] = 0
        return result

    verdict = run(check_softmax, destructive, capsys)
    assert not verdict and verdict.mistake == "changed_input" and "`x`" in verdict.message


def test_exercises_are_registered():
    assert [e.name for e in exercises_in("02_attention")] == ["softmax", "scaled_dot_product_attention"]
    assert [e.name for e in exercises_in("03_multi_head_attention")] == [
        "split_heads", "combine_heads", "multi_head_attention", "multi_head_attention_module"]
    assert [e.name for e in exercises_in("04_masking")] == ["causal_mask", "padding_mask", "masked_softmax"]
    for check, _ in ALL:
        assert EXERCISES[check.exercise.name].check is check


FIXED_CODES = {  # codes other tests and the grader rely on
    "softmax": {"softmax_overflows"},
    "scaled_dot_product_attention": {"not_scaled", "divided_by_d_k", "softmax_wrong_axis", "k_not_transposed",
                                     "mask_after_softmax", "softmax_overflows"},
    "split_heads": {"reshape_without_transpose"},
    "combine_heads": {"reshape_without_transpose"},
    "causal_mask": {"diagonal_masked", "triangles_swapped"},
    "padding_mask": {"inverted"},
    "masked_softmax": {"nan_on_empty_rows"},
}


@pytest.mark.parametrize("name", list(FIXED_CODES))
def test_fixed_codes_are_declared(name):
    assert FIXED_CODES[name] <= set(EXERCISES[name].mistakes)


# ----------------------------------------------------------------------------- the hints the student reads
SOLUTION_CODE = ["np.", "keepdims", "axis=", ".max(", ".sum(", "swapaxes", ".T ", ".T)", ".T,", "tril", "triu",
                 "!=", "[:,", "None", "@", "reshape(", "transpose(", ".astype", "where("]
NOTEBOOKS_02_04 = ["02_attention", "03_multi_head_attention", "04_masking"]


@pytest.mark.parametrize("check, reference", ALL, ids=IDS)
def test_fail_messages_name_the_rule_without_the_solution_code(check, reference):
    for code, hint in check.exercise.mistakes.items():
        found = [fragment for fragment in SOLUTION_CODE if fragment in hint]
        assert not found, f"{check.exercise.name}/{code}: the hint writes out code ({found}): {hint}"


def test_the_exercise_recipe_gives_nan_for_a_fully_masked_row():
    """Notebook 02, section 9: the solution of exercise 2 (-inf before the softmax) returns NaN for a query
    whose keys are all masked; the reference returns zeros; both agree on every other query."""
    namespace = {"np": np, "math": math, "helpers": helpers}
    define(solution_source("02_attention", "scaled_dot_product_attention"), namespace)
    rng = np.random.default_rng(7)
    Q, K, V = rng.normal(size=(3, 4)), rng.normal(size=(5, 4)), rng.normal(size=(5, 2))
    mask = np.ones((3, 5), dtype=bool)
    mask[1] = False
    with np.errstate(invalid="ignore"):
        output, weights = namespace["scaled_dot_product_attention"](Q, K, V, mask)
    assert np.isnan(weights[1]).all() and np.isnan(output[1]).all()
    ref_output, ref_weights = helpers.scaled_dot_product_attention(Q, K, V, mask)
    assert np.all(ref_weights[1] == 0) and np.all(ref_output[1] == 0)
    np.testing.assert_allclose(weights[[0, 2]], ref_weights[[0, 2]], atol=1e-15)
