"""helpers.multi_head: split/combine heads, numpy multi_head_attention against
F.multi_head_attention_forward, and the MultiHeadAttention module against nn.MultiheadAttention."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from helpers.masking import causal_mask_torch, padding_mask
from helpers.multi_head import (MultiHeadAttention, combine_heads, multi_head_attention, numpy_weights, split_heads,
                                to_nn_multihead_attention)

# (batch, L_q, L_k, d_model, h)
SHAPES = [(1, 4, 4, 512, 8), (2, 3, 5, 12, 3), (3, 6, 6, 16, 4), (2, 1, 7, 8, 8), (4, 5, 2, 6, 1), (2, 9, 9, 64, 2)]


# ----------------------------------------------------------------------------- split / combine
@pytest.mark.parametrize("batch, length, d_model, h", [(2, 5, 6, 2), (1, 4, 512, 8), (3, 7, 12, 4), (2, 3, 8, 1)])
def test_split_heads_gives_each_head_its_columns(batch, length, d_model, h):
    x = np.random.default_rng(0).normal(size=(batch, length, d_model))
    heads = split_heads(x, h)
    d_k = d_model // h
    assert heads.shape == (batch, h, length, d_k)
    for i in range(h):
        np.testing.assert_array_equal(heads[:, i], x[:, :, i * d_k:(i + 1) * d_k])
    np.testing.assert_array_equal(combine_heads(heads), x)


def test_split_heads_is_not_a_plain_reshape():
    x = np.arange(2 * 3 * 4, dtype=float).reshape(2, 3, 4)
    assert not np.array_equal(split_heads(x, 2), x.reshape(2, 2, 3, 2))


def test_split_heads_rejects_indivisible_width():
    with pytest.raises(ValueError, match=r"d_model=10, not divisible by num_heads=3"):
        split_heads(np.zeros((1, 2, 10)), 3)
    with pytest.raises(ValueError, match="num_heads"):
        split_heads(np.zeros((1, 2, 10)), 0)
    with pytest.raises(ValueError, match=r"x must have shape \(batch, h, L, d_k\)"):
        combine_heads(np.zeros((2, 3)))


# ----------------------------------------------------------------------------- numpy vs F.multi_head_attention_forward
def random_weights(rng, d_model):
    return {k: rng.normal(scale=d_model ** -0.5, size=(d_model, d_model)) for k in ("w_q", "w_k", "w_v", "w_o")}


def torch_mha_forward(x_q, x_kv, w, h, attn_mask=None, key_padding_mask=None, separate=False, biases=None):
    """F.multi_head_attention_forward with our row-vector weights mapped to torch's (out, in) layout."""
    t = lambda a: torch.from_numpy(np.ascontiguousarray(a))  # noqa: E731
    query, key = t(x_q).transpose(0, 1), t(x_kv).transpose(0, 1)  # (L, batch, d_model)
    d_model = x_q.shape[-1]
    b = biases or {}
    in_bias = torch.cat([t(b.get(n, np.zeros(d_model))) for n in ("b_q", "b_k", "b_v")])
    kwargs = dict(use_separate_proj_weight=True, q_proj_weight=t(w["w_q"].T), k_proj_weight=t(w["w_k"].T),
                  v_proj_weight=t(w["w_v"].T), in_proj_weight=None) if separate else dict(
        in_proj_weight=torch.cat([t(w["w_q"].T), t(w["w_k"].T), t(w["w_v"].T)]))
    out, weights = F.multi_head_attention_forward(
        query, key, key, d_model, h, in_proj_bias=in_bias, bias_k=None, bias_v=None, add_zero_attn=False,
        dropout_p=0.0, out_proj_weight=t(w["w_o"].T), out_proj_bias=t(b.get("b_o", np.zeros(d_model))),
        training=False, key_padding_mask=key_padding_mask, need_weights=True, attn_mask=attn_mask,
        average_attn_weights=False, **kwargs)
    return out.transpose(0, 1).numpy(), weights.numpy()


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("shape", SHAPES)
def test_numpy_multi_head_equals_torch_functional(shape, seed):
    batch, length_q, length_k, d_model, h = shape
    rng = np.random.default_rng(seed)
    x_q, x_kv = rng.normal(size=(batch, length_q, d_model)), rng.normal(size=(batch, length_k, d_model))
    w = random_weights(rng, d_model)
    output, weights = multi_head_attention(x_q, x_kv, **w, num_heads=h)
    expected_out, expected_w = torch_mha_forward(x_q, x_kv, w, h, separate=bool(seed % 2))
    assert output.shape == (batch, length_q, d_model) and weights.shape == (batch, h, length_q, length_k)
    np.testing.assert_allclose(output, expected_out, rtol=0, atol=1e-9)
    np.testing.assert_allclose(weights, expected_w, rtol=0, atol=1e-9)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("shape", SHAPES)
def test_numpy_multi_head_with_masks_and_biases_equals_torch_functional(shape, seed):
    batch, length_q, length_k, d_model, h = shape
    rng = np.random.default_rng(50 + seed)
    x_q, x_kv = rng.normal(size=(batch, length_q, d_model)), rng.normal(size=(batch, length_k, d_model))
    w = random_weights(rng, d_model)
    biases = {k: rng.normal(size=d_model) for k in ("b_q", "b_k", "b_v", "b_o")}
    keep = rng.random((batch, length_k)) > 0.3  # padding: True = real key
    allowed = rng.random((length_q, length_k)) > 0.3  # an arbitrary (L_q, L_k) pattern
    keep[:, 0], allowed[:, 0] = True, True  # torch gives NaN for fully masked rows; compared separately
    mask = keep[:, None, None, :] & allowed  # ours: True = may attend, (batch, 1, L_q, L_k)
    output, weights = multi_head_attention(x_q, x_kv, **w, num_heads=h, mask=mask, **biases)
    expected_out, expected_w = torch_mha_forward(x_q, x_kv, w, h, attn_mask=torch.from_numpy(~allowed),
                                                 key_padding_mask=torch.from_numpy(~keep), biases=biases)
    np.testing.assert_allclose(output, expected_out, rtol=0, atol=1e-9)
    np.testing.assert_allclose(weights, expected_w, rtol=0, atol=1e-9)


def test_numpy_multi_head_fully_masked_rows_are_zero_not_nan():
    rng = np.random.default_rng(7)
    x = rng.normal(size=(2, 3, 8))
    w = random_weights(rng, 8)
    mask = np.ones((2, 1, 3, 3), dtype=bool)
    mask[1, :, 2, :] = False
    output, weights = multi_head_attention(x, x, **w, num_heads=2, mask=mask)
    assert not np.isnan(output).any()
    assert np.all(weights[1, :, 2] == 0.0)
    assert np.all(output[1, 2] == 0.0)  # zero attention output, and no bias was given


@pytest.mark.parametrize("kwargs, match", [
    (dict(num_heads=3), r"d_model=8 is not divisible by num_heads=3"),
    (dict(num_heads=2, w_q=np.zeros((8, 6))), r"w_q must have shape \(d_model=8, d_model=8\)"),
    (dict(num_heads=2, x_kv=np.zeros((2, 4, 6))), r"x_kv must have shape \(batch=2, L_k, d_model=8\)"),
    (dict(num_heads=2, x_q=np.zeros((3, 8))), r"x_q must have shape \(batch, L_q, d_model\)"),
    (dict(num_heads=2, mask=np.ones((2, 3, 3), dtype=bool)), r"mask of shape \(2, 3, 3\) is 3-D"),
    (dict(num_heads=2, mask=np.ones((2, 1, 3, 4), dtype=bool)), r"mask of shape \(2, 1, 3, 4\) does not broadcast"),
    (dict(num_heads=2, b_o=np.zeros(7)), r"b_o must have shape \(d_model=8,\)"),
])
def test_numpy_multi_head_rejects_bad_input(kwargs, match):
    rng = np.random.default_rng(8)
    args = dict(x_q=rng.normal(size=(2, 3, 8)), x_kv=rng.normal(size=(2, 3, 8)), **random_weights(rng, 8))
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        multi_head_attention(**args)


# ----------------------------------------------------------------------------- the torch module
def make_module(d_model, h, seed=0, dtype=torch.float64):
    """A reference module in eval mode that stores its attention weights (the tests compare them)."""
    torch.manual_seed(seed)
    module = MultiHeadAttention(d_model, h).to(dtype).eval()
    module.store_attention_weights = True
    return module


@pytest.mark.parametrize("shape", SHAPES)
def test_module_equals_nn_multihead_attention(shape):
    batch, length_q, length_k, d_model, h = shape
    module = make_module(d_model, h, seed=batch + d_model)
    reference = to_nn_multihead_attention(module).eval()
    gen = torch.Generator().manual_seed(d_model)
    query = torch.randn(batch, length_q, d_model, dtype=torch.float64, generator=gen)
    memory = torch.randn(batch, length_k, d_model, dtype=torch.float64, generator=gen)
    out = module(query, memory, memory)
    expected, expected_w = reference(query, memory, memory, average_attn_weights=False)
    torch.testing.assert_close(out, expected, rtol=0, atol=1e-9)
    torch.testing.assert_close(module.attention_weights, expected_w, rtol=0, atol=1e-9)


@pytest.mark.parametrize("shape", SHAPES)
def test_module_with_masks_equals_nn_multihead_attention(shape):
    batch, length_q, length_k, d_model, h = shape
    module = make_module(d_model, h, seed=1)
    reference = to_nn_multihead_attention(module).eval()
    gen = torch.Generator().manual_seed(2)
    query = torch.randn(batch, length_q, d_model, dtype=torch.float64, generator=gen)
    memory = torch.randn(batch, length_k, d_model, dtype=torch.float64, generator=gen)
    tokens = torch.randint(1, 9, (batch, length_k), generator=gen)
    tokens[:, 1:] = torch.where(torch.rand(batch, length_k - 1, generator=gen) < 0.3, 0, tokens[:, 1:])
    keep = padding_mask(tokens, 0)  # (batch, 1, 1, L_k), True = real token
    allowed = torch.rand(length_q, length_k, generator=gen) > 0.4
    allowed[:, 0] = True
    out = module(query, memory, memory, mask=keep & allowed)
    expected, expected_w = reference(query, memory, memory, key_padding_mask=~keep[:, 0, 0, :],
                                     attn_mask=~allowed, average_attn_weights=False)
    torch.testing.assert_close(out, expected, rtol=0, atol=1e-9)
    torch.testing.assert_close(module.attention_weights, expected_w, rtol=0, atol=1e-9)
    # self-attention with a causal mask
    x = torch.randn(batch, length_q, d_model, dtype=torch.float64, generator=gen)
    causal = causal_mask_torch(length_q)
    expected, _ = reference(x, x, x, attn_mask=~causal)
    torch.testing.assert_close(module(x, x, x, mask=causal), expected, rtol=0, atol=1e-9)


@pytest.mark.parametrize("shape", SHAPES)
def test_numpy_equals_module(shape):
    batch, length_q, length_k, d_model, h = shape
    module = make_module(d_model, h, seed=3)
    gen = torch.Generator().manual_seed(4)
    query = torch.randn(batch, length_q, d_model, dtype=torch.float64, generator=gen)
    memory = torch.randn(batch, length_k, d_model, dtype=torch.float64, generator=gen)
    mask = torch.rand(batch, 1, length_q, length_k, generator=gen) > 0.5
    out = module(query, memory, memory, mask=mask)
    np_out, np_w = multi_head_attention(query.numpy(), memory.numpy(), **numpy_weights(module), num_heads=h,
                                        mask=mask.numpy())
    np.testing.assert_allclose(np_out, out.detach().numpy(), rtol=0, atol=1e-9)
    np.testing.assert_allclose(np_w, module.attention_weights.numpy(), rtol=0, atol=1e-12)


def test_module_layout_and_attention_weights():
    module = MultiHeadAttention(16, 4)
    for name in ("w_q", "w_k", "w_v", "w_o"):
        linear = getattr(module, name)
        assert isinstance(linear, nn.Linear) and linear.weight.shape == (16, 16) and linear.bias is not None
    assert module.d_k == 4 and module.attention_weights is None and module.store_attention_weights is False
    x = torch.randn(2, 5, 16, requires_grad=True)
    out = module(x, x, x)
    assert out.shape == (2, 5, 16) and module.attention_weights is None  # not asked: nothing kept
    module.store_attention_weights = True
    out = module(x, x, x)
    assert module.attention_weights.shape == (2, 4, 5, 5) and not module.attention_weights.requires_grad
    torch.testing.assert_close(module.attention_weights.sum(-1), torch.ones(2, 4, 5))


def test_module_fully_masked_rows_give_zero_attention_and_finite_gradients():
    module = MultiHeadAttention(8, 2)
    module.store_attention_weights = True
    x = torch.randn(2, 4, 8, requires_grad=True)
    mask = torch.ones(2, 1, 4, 4, dtype=torch.bool)
    mask[0, :, 1, :] = False
    out = module(x, x, x, mask=mask)
    out.square().sum().backward()
    assert torch.isfinite(out).all() and torch.isfinite(x.grad).all()
    assert (module.attention_weights[0, :, 1] == 0).all()
    torch.testing.assert_close(out[0, 1], module.w_o.bias)  # zero attention output, then W^O's bias


def test_module_dropout_acts_on_weights_in_training_only():
    torch.manual_seed(0)
    module = MultiHeadAttention(16, 4, dropout=0.5)
    module.store_attention_weights = True
    x = torch.randn(2, 6, 16)
    module.eval()
    first, second = module(x, x, x), module(x, x, x)
    torch.testing.assert_close(first, second)
    module.train()
    dropped = module(x, x, x)
    assert not torch.allclose(dropped, first)
    torch.testing.assert_close(module.attention_weights.sum(-1), torch.ones(2, 4, 6))  # stored before dropout


def test_module_works_in_float32_with_masks():
    module = MultiHeadAttention(8, 2)
    module.store_attention_weights = True
    x = torch.randn(1, 3, 8)
    mask = torch.zeros(3, 3, dtype=torch.bool)
    out = module(x, x, x, mask=mask)
    assert torch.isfinite(out).all() and (module.attention_weights == 0).all()


@pytest.mark.parametrize("call, match", [
    (lambda m: MultiHeadAttention(10, 3), r"d_model=10 is not divisible by num_heads=3"),
    (lambda m: MultiHeadAttention(8, 2, dropout=1.5), "dropout"),
    (lambda m: m(torch.zeros(2, 3, 6), torch.zeros(2, 3, 8), torch.zeros(2, 3, 8)),
     r"query must have shape \(batch, L_q, d_model=8\)"),
    (lambda m: m(torch.zeros(2, 3, 8), torch.zeros(2, 4, 8), torch.zeros(2, 5, 8)),
     r"value must have shape \(batch=2, L_k=4, d_model\)"),
    (lambda m: m(torch.zeros(2, 3, 8), torch.zeros(1, 4, 8), torch.zeros(1, 4, 8)),
     r"key must have shape \(batch=2, L_k, d_model\)"),
    (lambda m: m(torch.zeros(2, 3, 8), torch.zeros(2, 4, 8), torch.zeros(2, 4, 8), torch.ones(3, 3).bool()),
     r"mask of shape \(3, 3\) does not broadcast to the weights \(batch, h, L_q, L_k\) = \(2, 2, 3, 4\)"),
    (lambda m: m(torch.zeros(2, 3, 8), torch.zeros(2, 4, 8), torch.zeros(2, 4, 8), torch.ones(3, 4)),
     "mask must be boolean"),
    (lambda m: m(torch.zeros(2, 3, 8), torch.zeros(2, 4, 8), torch.zeros(2, 4, 8), torch.ones(2, 3, 4).bool()),
     r"mask of shape \(2, 3, 4\) is 3-D"),
])
def test_module_rejects_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call(MultiHeadAttention(8, 2))
