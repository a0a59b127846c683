"""The mistake codes of notebook 02's checks added for issue 33: each is named for a wrong answer written the way
a student writes it, and never for a right one. (The older codes are tested in test_checks_attention.py.)"""

import math

import numpy as np
import pytest

import helpers
from helpers.checks import check_scaled_dot_product_attention, check_softmax
from helpers.checks.attention import attention_cases, wrong_softmaxes


def softmax_max_last_axis(x, axis=-1):
    e = np.exp(x - x.max(axis=-1, keepdims=True))  # the maximum along the last axis, whatever `axis`
    return e / e.sum(axis=axis, keepdims=True)


def softmax_sum_last_axis(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)  # the sum along the last axis, whatever `axis`


def softmax_never_divided(x, axis=-1):
    return np.exp(x - np.max(x, axis=axis, keepdims=True))


def softmax_divided_by_max(x, axis=-1):
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / e.max(axis=axis, keepdims=True)


def stable(scores):
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def attention_renormalised_after_softmax(Q, K, V, mask=None):
    weights = stable(Q @ np.swapaxes(K, -1, -2) / math.sqrt(Q.shape[-1]))
    if mask is not None:
        weights = weights * mask
        weights = weights / weights.sum(axis=-1, keepdims=True)
    return weights @ V, weights


def attention_mask_added(Q, K, V, mask=None):
    scores = Q @ np.swapaxes(K, -1, -2) / math.sqrt(Q.shape[-1])
    if mask is not None:
        scores = scores + mask
    weights = stable(scores)
    return weights @ V, weights


NEW_SOFTMAX_WRONG = [
    (softmax_max_last_axis, "axes_differ"),
    (softmax_sum_last_axis, "axes_differ"),
    (softmax_never_divided, "not_normalised"),
    (softmax_divided_by_max, "not_normalised"),
]
NEW_ATTENTION_WRONG = [
    (attention_renormalised_after_softmax, "renormalised_after_softmax"),
    (attention_mask_added, "mask_added"),
]


@pytest.mark.parametrize("wrong, code", NEW_SOFTMAX_WRONG, ids=[w.__name__ for w, _ in NEW_SOFTMAX_WRONG])
def test_softmax_names_the_new_mistakes(wrong, code):
    verdict = check_softmax(wrong)
    assert verdict.status == "fail" and verdict.mistake == code, verdict
    assert "{" not in verdict.message


def test_axes_differ_names_both_axes():
    verdict = check_softmax(softmax_max_last_axis)
    assert "axis 1 but the sum along axis 0" in str(verdict), verdict


@pytest.mark.parametrize("wrong, code", NEW_ATTENTION_WRONG, ids=[w.__name__ for w, _ in NEW_ATTENTION_WRONG])
def test_attention_names_the_new_mistakes(wrong, code):
    verdict = check_scaled_dot_product_attention(wrong)
    assert verdict.status == "fail" and verdict.mistake == code, verdict


def test_renormalising_is_right_until_the_allowed_weights_underflow():
    """Issue 33: the renormalised answer was told its softmax overflows. Its softmax is stable; it agrees with the
    reference on every case but the large scores, where every allowed weight of some row is 0 and 0 / 0 is NaN."""
    cases = attention_cases()
    for _, (Q, K, V), mask in cases[:-1]:
        got = attention_renormalised_after_softmax(Q, K, V, mask)
        assert all(np.allclose(a, e) for a, e in zip(got, helpers.scaled_dot_product_attention(Q, K, V, mask)))
    _, (Q, K, V), mask = cases[-1]
    with np.errstate(all="ignore"):
        _, weights = attention_renormalised_after_softmax(Q, K, V, mask)
        scores = Q @ np.swapaxes(K, -1, -2) / math.sqrt(Q.shape[-1])
    assert np.isnan(weights).any()
    assert np.isfinite(stable(scores)).all(), "the softmax itself stays finite"


def test_new_wrong_softmaxes_are_distinct_from_the_right_one():
    x = np.random.default_rng(0).normal(scale=3.0, size=(4, 6))
    for axis in (0, 1, -1):
        right = helpers.softmax(x, axis=axis)
        for key, wrong in wrong_softmaxes(x, axis).items():
            code = getattr(key, "code", key)
            if code in ("axes_differ", "not_normalised"):  # the overflows differ only on large inputs
                assert not np.allclose(wrong, right), (axis, code)
