"""The checks of notebooks 02-04 accept the reference, reject each wrong implementation they claim
to catch with its own hint, report stubs as todo, and never raise whatever the student returns."""

import math

import numpy as np
import pytest
import torch

import helpers
from helpers.checks import (EXERCISES, check_causal_mask, check_combine_heads, check_masked_softmax,
                            check_multi_head_attention, check_padding_mask, check_scaled_dot_product_attention,
                            check_softmax, check_split_heads)


def verdict(check, func, capsys):
    ok = check(func)
    out = capsys.readouterr().out
    assert out.count("\n") == 1, f"a check must print exactly one line, got: {out!r}"
    return ok, out


def stub(*args, **kwargs):
    raise NotImplementedError()


# ----------------------------------------------------------------------------- wrong softmaxes
def softmax_no_max(x, axis=-1):
    e = np.exp(x)
    return e / e.sum(axis=axis, keepdims=True)


def softmax_global_max(x, axis=-1):
    e = np.exp(x - np.max(x))
    return e / e.sum(axis=axis, keepdims=True)


def softmax_whole_sum(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum()


def softmax_ignores_axis(x, axis=-1):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def softmax_no_keepdims(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis)


# ----------------------------------------------------------------------------- wrong attentions
def _softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def make_attention(scale="sqrt", axis=-1, transpose=True, mask_mode="before", batched_t=True):
    def attention(Q, K, V, mask=None):
        d_k = Q.shape[-1]
        kt = (np.swapaxes(K, -1, -2) if batched_t else K.T) if transpose else K
        scores = Q @ kt
        scores = scores / {"sqrt": math.sqrt(d_k), "none": 1.0, "d_k": d_k, "d_v": math.sqrt(V.shape[-1])}[scale]
        if mask is not None and mask_mode == "before":
            scores = np.where(mask, scores, -np.inf)
        if mask is not None and mask_mode == "inverted":
            scores = np.where(mask, -np.inf, scores)
        weights = _softmax(scores, axis=axis)
        if mask is not None and mask_mode == "after":
            weights = weights * mask
        return weights @ V, weights
    return attention


ATTENTION_MISTAKES = [
    (make_attention(scale="none"), "forgot to divide the scores by sqrt(d_k)"),
    (make_attention(scale="d_k"), "divided by d_k instead of sqrt(d_k)"),
    (make_attention(scale="d_v"), "scaled by sqrt(d_v)"),
    (make_attention(axis=-2), "softmax runs over the wrong axis"),
    (make_attention(transpose=False), "K is not transposed"),
    (make_attention(mask_mode="after"), "mask is applied after the softmax"),
    (make_attention(mask_mode="ignored"), "the mask is ignored"),
    (make_attention(mask_mode="inverted"), "your mask is inverted"),
    (make_attention(batched_t=False), "K.T reverses ALL axes"),
    (lambda Q, K, V, mask=None: helpers.scaled_dot_product_attention(Q, K, V, mask)[::-1], "swapped"),
    (lambda Q, K, V, mask=None: helpers.scaled_dot_product_attention(Q, K, V, mask)[0], "must return a pair"),
]


@pytest.mark.parametrize("wrong, hint", [
    (softmax_no_max, "overflows"), (softmax_global_max, "maximum of the WHOLE array"),
    (softmax_whole_sum, "sum of the whole array"), (softmax_ignores_axis, "ignored the `axis` argument"),
    (softmax_no_keepdims, "keepdims=True"),
])
def test_check_softmax_rejects_each_mistake(wrong, hint, capsys):
    ok, out = verdict(check_softmax, wrong, capsys)
    assert not ok and out.startswith("❌ softmax") and hint in out


@pytest.mark.parametrize("wrong, hint", ATTENTION_MISTAKES)
def test_check_attention_rejects_each_mistake(wrong, hint, capsys):
    ok, out = verdict(check_scaled_dot_product_attention, wrong, capsys)
    assert not ok and out.startswith("❌ scaled_dot_product_attention") and hint in out, out


def test_check_attention_hints_are_distinct():
    cases = helpers.checks.attention.attention_cases()
    (Q, K, V), mask = cases[-1][1], cases[-1][2]
    hints = list(helpers.checks.attention.wrong_attentions(Q, K, V, mask))
    assert len(hints) == len(set(hints)) >= 6


# ----------------------------------------------------------------------------- wrong split / combine / MHA
def split_no_transpose(x, num_heads):
    b, length, d = x.shape
    return x.reshape(b, num_heads, length, d // num_heads)


def split_interleaved(x, num_heads):
    b, length, d = x.shape
    return x.reshape(b, length, d // num_heads, num_heads).transpose(0, 3, 1, 2)


def split_forgot_swap(x, num_heads):
    b, length, d = x.shape
    return x.reshape(b, length, num_heads, d // num_heads)


def combine_no_transpose(x):
    b, h, length, d_k = x.shape
    return x.reshape(b, length, h * d_k)


def combine_interleaved(x):
    b, h, length, d_k = x.shape
    return x.transpose(0, 2, 3, 1).reshape(b, length, h * d_k)


def combine_forgot_reshape(x):
    return x.transpose(0, 2, 1, 3)


def make_mha(**options):
    def mha(x_q, x_kv, w_q, w_k, w_v, w_o, num_heads, mask=None):
        case = dict(x_q=x_q, x_kv=x_kv, w_q=w_q, w_k=w_k, w_v=w_v, w_o=w_o, num_heads=num_heads, mask=mask)
        return helpers.checks.multi_head._mha_variant(**case, **options)
    return mha


def mha_averaged(*args, **kwargs):
    out, weights = helpers.multi_head_attention(*args, **kwargs)
    return out, weights.mean(axis=1)


@pytest.mark.parametrize("check, wrong, hint", [
    (check_split_heads, split_no_transpose, "silently mixes positions across heads"),
    (check_split_heads, split_interleaved, "CONTIGUOUS columns"),
    (check_split_heads, split_forgot_swap, "swap axes 1 and 2"),
    (check_combine_heads, combine_no_transpose, "silently mixes positions across heads"),
    (check_combine_heads, combine_interleaved, "interleaved the heads"),
    (check_combine_heads, combine_forgot_reshape, "reshape to (batch, L, h * d_k)"),
    (check_multi_head_attention, make_mha(use_w_o=False), "forgot the output projection"),
    (check_multi_head_attention, make_mha(scale=math.sqrt(12)), "scaled by sqrt(d_model)"),
    (check_multi_head_attention, make_mha(split=split_no_transpose, combine=combine_no_transpose),
     "without a transpose"),
    (check_multi_head_attention, make_mha(kv_from_q=True), "must come from x_kv"),
    (check_multi_head_attention, make_mha(transpose_w=True), "used transposed"),
    (check_multi_head_attention, make_mha(ignore_mask=True), "ignored the mask"),
    (check_multi_head_attention, mha_averaged, "without averaging over the heads"),
])
def test_multi_head_checks_reject_each_mistake(check, wrong, hint, capsys):
    ok, out = verdict(check, wrong, capsys)
    assert not ok and out.startswith(f"❌ {check.exercise}") and hint in out, out


# ----------------------------------------------------------------------------- wrong masks
def causal_no_diagonal(size):
    return np.tril(np.ones((size, size), dtype=bool), k=-1)


def causal_swapped(size):
    return np.triu(np.ones((size, size), dtype=bool))


def causal_inverted(size):
    return np.triu(np.ones((size, size), dtype=bool), k=1)


def causal_as_floats(size):
    return np.tril(np.ones((size, size)))


def padding_inverted(tokens, pad_id):
    return (tokens == pad_id)[:, None, None, :]


def padding_flat(tokens, pad_id):
    return tokens != pad_id


def padding_on_queries(tokens, pad_id):
    return (tokens != pad_id)[:, :, None, None]


def padding_hard_coded_zero(tokens, pad_id):
    return (tokens != 0)[:, None, None, :]


def masked_nan_rows(scores, mask):
    return _softmax_ignoring_warnings(np.where(mask, scores, -np.inf))


def masked_uniform_rows(scores, mask):
    return _softmax(np.where(mask, scores, -1e9))


def masked_inverted(scores, mask):
    return helpers.masked_softmax(scores, ~np.broadcast_to(mask, scores.shape))


def masked_multiplied(scores, mask):
    return _softmax(scores * mask)


def masked_after(scores, mask):
    return _softmax(scores) * mask


def _softmax_ignoring_warnings(x):
    with np.errstate(all="ignore"):
        return _softmax(x)


@pytest.mark.parametrize("check, wrong, hint", [
    (check_causal_mask, causal_no_diagonal, "off by one"),
    (check_causal_mask, causal_swapped, "triangles are swapped"),
    (check_causal_mask, causal_inverted, "inverted"),
    (check_causal_mask, causal_as_floats, "return a BOOLEAN array"),
    (check_padding_mask, padding_inverted, "pads are marked True"),
    (check_padding_mask, padding_flat, "add the two singleton axes"),
    (check_padding_mask, padding_on_queries, "padding is on the KEYS"),
    (check_padding_mask, padding_hard_coded_zero, "compared with 0 instead of pad_id"),
    (check_masked_softmax, masked_nan_rows, "fully masked row gives NaN"),
    (check_masked_softmax, masked_uniform_rows, "uniform weights"),
    (check_masked_softmax, masked_inverted, "your mask is inverted"),
    (check_masked_softmax, masked_multiplied, "multiplied the scores by the mask"),
    (check_masked_softmax, masked_after, "after the softmax without renormalising"),
    (check_masked_softmax, lambda s, m: _softmax(s), "ignored the mask"),
    (check_masked_softmax, lambda s, m: _softmax_ignoring_warnings(np.where(m, s, -np.inf)).swapaxes(-1, -2)
     .swapaxes(-1, -2) * 0 + _softmax_ignoring_warnings(np.where(m, s, -np.inf), axis=-2), "wrong axis"),
])
def test_masking_checks_reject_each_mistake(check, wrong, hint, capsys):
    ok, out = verdict(check, wrong, capsys)
    assert not ok and out.startswith(f"❌ {check.exercise}") and hint in out, out


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


@pytest.mark.parametrize("check, reference", ALL)
def test_reference_passes(check, reference, capsys):
    ok, out = verdict(check, reference, capsys)
    assert ok and out.startswith(f"✅ {check.exercise}: correct!"), out


@pytest.mark.parametrize("check, reference", ALL)
def test_stub_is_todo(check, reference, capsys):
    ok, out = verdict(check, stub, capsys)
    assert not ok and out.startswith(f"📝 {check.exercise}") and "not implemented" in out


BAD_RETURNS = [None, [1, 2], "text", 3.0, torch.zeros(2), np.full((5, 5), np.nan), (None, None),
               (np.zeros(1), np.zeros(1)), np.zeros(0), object(), {"a": 1}]


@pytest.mark.parametrize("check, reference", ALL)
@pytest.mark.parametrize("value", BAD_RETURNS, ids=lambda v: type(v).__name__)
def test_checks_survive_any_return_value(check, reference, value, capsys):
    ok, out = verdict(check, lambda *args, **kwargs: value, capsys)
    assert not ok and out.startswith(f"❌ {check.exercise}")
    assert "could not run" not in out, out  # a readable hint, not a crash of the check itself


@pytest.mark.parametrize("check, reference", ALL)
def test_checks_survive_crashes_and_non_functions(check, reference, capsys):
    def crash(*args, **kwargs):
        return 1 / 0

    ok, out = verdict(check, crash, capsys)
    assert not ok and "ZeroDivisionError" in out
    ok, out = verdict(check, None, capsys)
    assert not ok and "expected a function" in out


@pytest.mark.parametrize("check, reference", ALL)
def test_checks_accept_torch_returning_implementations(check, reference, capsys):
    """A student who answers with torch tensors (or tensors inside the pair) is not failed for it."""
    def via_torch(*args, **kwargs):
        result = reference(*args, **kwargs)
        if isinstance(result, tuple):
            return tuple(torch.from_numpy(np.asarray(r)) for r in result)
        return torch.from_numpy(np.asarray(result))

    ok, out = verdict(check, via_torch, capsys)
    assert ok, out


def test_checks_do_not_modify_student_visible_state(capsys):
    """A student function that modifies its arguments in place cannot corrupt later cases."""
    def destructive(x, axis=-1):
        result = helpers.softmax(x, axis=axis)
        x[...] = 0
        return result

    ok, _ = verdict(check_softmax, destructive, capsys)
    assert ok


def test_exercises_are_registered():
    assert EXERCISES["02_attention"] == ["softmax", "scaled_dot_product_attention"]
    assert EXERCISES["03_multi_head_attention"] == ["split_heads", "combine_heads", "multi_head_attention"]
    assert EXERCISES["04_masking"] == ["causal_mask", "padding_mask", "masked_softmax"]
    names = {check.exercise for check, _ in ALL}
    assert names == set(EXERCISES["02_attention"] + EXERCISES["03_multi_head_attention"] + EXERCISES["04_masking"])
