"""helpers.attention: softmax, masked_softmax and scaled_dot_product_attention (numpy, float64)
against torch.nn.functional.scaled_dot_product_attention."""

import math
import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from helpers.attention import masked_softmax, scaled_dot_product_attention, softmax

# (leading axes, L_q, L_k, d_k, d_v): 2-D, batched, (batch, h), broadcast leading axes, length 1
SHAPES = [((), 4, 4, 64, 64), ((), 3, 7, 5, 2), ((2,), 5, 6, 8, 3), ((3, 4), 6, 9, 16, 16), ((2, 8), 1, 1, 4, 4),
          ((1, 2, 3), 2, 5, 3, 7), ((5,), 10, 3, 32, 1)]


def random_qkv(rng, lead, length_q, length_k, d_k, d_v):
    return (rng.normal(size=(*lead, length_q, d_k)), rng.normal(size=(*lead, length_k, d_k)),
            rng.normal(size=(*lead, length_k, d_v)))


def torch_sdpa(Q, K, V, mask=None):
    t = [torch.from_numpy(np.ascontiguousarray(a)) for a in (Q, K, V)]
    attn_mask = None if mask is None else torch.from_numpy(np.ascontiguousarray(mask))
    return F.scaled_dot_product_attention(*t, attn_mask=attn_mask).numpy()


# ----------------------------------------------------------------------------- softmax
def test_softmax_equals_torch_on_random_shapes():
    rng = np.random.default_rng(0)
    for shape in [(5,), (3, 4), (2, 3, 4), (2, 1, 6, 7)]:
        x = rng.normal(scale=5.0, size=shape)
        for axis in range(-len(shape), len(shape)):
            expected = torch.softmax(torch.from_numpy(x), dim=axis).numpy()
            np.testing.assert_allclose(softmax(x, axis=axis), expected, rtol=0, atol=1e-12)


def test_softmax_is_stable_at_huge_logits():
    x = np.array([[1000.0, 1000.0, 999.0], [-1000.0, -1000.0, -1001.0], [1e308, 0.0, -1e308]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow warning either
        out = softmax(x)
    assert np.all(np.isfinite(out))
    np.testing.assert_allclose(out.sum(axis=-1), 1.0, atol=1e-15)
    np.testing.assert_allclose(out[0], out[1], atol=1e-15)  # shifting logits changes nothing
    assert out.dtype == np.float64


def test_softmax_accepts_lists_and_tensors():
    np.testing.assert_allclose(softmax([0.0, 0.0]), [0.5, 0.5])
    np.testing.assert_allclose(softmax(torch.zeros(2, 2)), np.full((2, 2), 0.5))


@pytest.mark.parametrize("bad, kwargs, match", [(3.0, {}, "x"), (np.zeros((2, 3)), {"axis": 2}, "axis"),
                                                ("text", {}, "x")])
def test_softmax_rejects_bad_input(bad, kwargs, match):
    with pytest.raises(ValueError, match=match):
        softmax(bad, **kwargs)


# ----------------------------------------------------------------------------- masked_softmax
def test_masked_softmax_gives_blocked_keys_exact_zeros_and_empty_rows_zero():
    rng = np.random.default_rng(1)
    scores = rng.normal(size=(2, 4, 6))
    mask = rng.random((2, 4, 6)) > 0.5
    mask[0, 1, :] = False
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        weights = masked_softmax(scores, mask)
    assert np.all(weights[~mask] == 0.0)
    assert np.all(weights[0, 1] == 0.0)
    sums = weights.sum(axis=-1)
    np.testing.assert_allclose(sums[mask.any(axis=-1)], 1.0, atol=1e-12)
    # where a row has keys, it is the softmax over those keys only
    row = scores[1, 2][mask[1, 2]]
    np.testing.assert_allclose(weights[1, 2][mask[1, 2]], softmax(row), atol=1e-15)


def test_masked_softmax_without_mask_is_softmax():
    x = np.random.default_rng(2).normal(size=(3, 5))
    np.testing.assert_array_equal(masked_softmax(x), softmax(x))


# ----------------------------------------------------------------------------- scaled dot-product attention
@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("shape", SHAPES)
def test_attention_equals_torch_sdpa(shape, seed):
    rng = np.random.default_rng(seed)
    Q, K, V = random_qkv(rng, *shape)
    output, weights = scaled_dot_product_attention(Q, K, V)
    np.testing.assert_allclose(output, torch_sdpa(Q, K, V), rtol=0, atol=1e-9)
    assert output.dtype == weights.dtype == np.float64
    assert weights.shape == (*shape[0], shape[1], shape[2])
    np.testing.assert_allclose(weights.sum(axis=-1), 1.0, atol=1e-12)
    # the weights are the softmax of the scaled scores, row by row
    scores = Q @ np.swapaxes(K, -1, -2) / math.sqrt(shape[3])
    np.testing.assert_allclose(weights, torch.softmax(torch.from_numpy(scores), -1).numpy(), atol=1e-12)


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("shape", SHAPES)
def test_masked_attention_equals_torch_sdpa(shape, seed):
    """Boolean masks (True = may attend) of several broadcast shapes, fully masked rows included:
    torch's SDPA also gives those rows a zero output."""
    rng = np.random.default_rng(100 + seed)
    lead, length_q, length_k = shape[0], shape[1], shape[2]
    Q, K, V = random_qkv(rng, *shape)
    mask_shapes = [(length_q, length_k), (*lead, length_q, length_k), (1, length_k), (length_q, 1)]
    if lead:
        mask_shapes.append((lead[0],) + (1,) * (len(lead) - 1) + (1, length_k))
    for mask_shape in mask_shapes:
        mask = rng.random(mask_shape) > 0.3
        output, weights = scaled_dot_product_attention(Q, K, V, mask)
        np.testing.assert_allclose(output, torch_sdpa(Q, K, V, mask), rtol=0, atol=1e-9)
        full = np.broadcast_to(mask, weights.shape)
        assert np.all(weights[~full] == 0.0)
        empty = ~full.any(axis=-1)
        assert np.all(output[empty] == 0.0) and not np.isnan(output).any()


def test_fully_masked_rows_give_zero_weights_and_output():
    rng = np.random.default_rng(3)
    Q, K, V = random_qkv(rng, (2,), 3, 4, 8, 5)
    mask = np.ones((2, 3, 4), dtype=bool)
    mask[1, 0] = False
    output, weights = scaled_dot_product_attention(Q, K, V, mask)
    assert np.all(weights[1, 0] == 0.0) and np.all(output[1, 0] == 0.0)
    np.testing.assert_allclose(weights[0].sum(axis=-1), 1.0)
    nothing = scaled_dot_product_attention(Q, K, V, np.zeros((1, 4), dtype=bool))
    assert np.all(nothing[0] == 0.0) and np.all(nothing[1] == 0.0)


def test_attention_of_the_worked_example_shapes():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(4, 512))
    W = [rng.normal(scale=512 ** -0.5, size=(512, 64)) for _ in range(3)]
    output, weights = scaled_dot_product_attention(X @ W[0], X @ W[1], X @ W[2])
    assert output.shape == (4, 64) and weights.shape == (4, 4)


@pytest.mark.parametrize("args, match", [
    ((np.zeros((3, 8)), np.zeros((4, 6)), np.zeros((4, 5))), r"K must have shape \(\.\.\., L_k, d_k=8\)"),
    ((np.zeros((3, 8)), np.zeros((4, 8)), np.zeros((5, 5))), r"V must have shape \(\.\.\., L_k=4, d_v\)"),
    ((np.zeros(8), np.zeros((4, 8)), np.zeros((4, 5))), r"Q must have shape \(\.\.\., L_q, d_k\)"),
    ((np.zeros((2, 3, 8)), np.zeros((3, 4, 8)), np.zeros((3, 4, 5))), "do not broadcast"),
])
def test_attention_rejects_mismatched_shapes(args, match):
    with pytest.raises(ValueError, match=match):
        scaled_dot_product_attention(*args)


@pytest.mark.parametrize("mask, match", [
    (np.ones((3, 5), dtype=bool),
     r"mask of shape \(3, 5\) does not broadcast to the scores \(\.\.\., L_q, L_k\) = \(2, 3, 4\)"),
    (np.ones((2, 2, 3, 4), dtype=bool), "mask of shape"),
    (np.ones((3, 4)), "mask must be boolean"),
])
def test_attention_rejects_bad_masks(mask, match):
    rng = np.random.default_rng(4)
    Q, K, V = random_qkv(rng, (2,), 3, 4, 8, 5)
    with pytest.raises(ValueError, match=match):
        scaled_dot_product_attention(Q, K, V, mask)


def test_attention_does_not_modify_its_inputs():
    rng = np.random.default_rng(5)
    Q, K, V = random_qkv(rng, (2,), 3, 4, 8, 5)
    copies = [a.copy() for a in (Q, K, V)]
    scaled_dot_product_attention(Q, K, V, np.ones((3, 4), dtype=bool))
    for before, after in zip(copies, (Q, K, V)):
        np.testing.assert_array_equal(before, after)
