"""helpers.masking, and behaviour tests of masked attention: the future and the padding
cannot change what a query sees."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from helpers.attention import scaled_dot_product_attention
from helpers.masking import (causal_mask, causal_mask_torch, decoder_mask, padding_mask, to_additive_mask,
                             to_nn_multihead_mask)
from helpers.multi_head import MultiHeadAttention, multi_head_attention


# ----------------------------------------------------------------------------- the masks
@pytest.mark.parametrize("size", [1, 2, 5, 17])
def test_causal_mask_is_lower_triangle_with_diagonal(size):
    mask = causal_mask(size)
    assert mask.dtype == bool and mask.shape == (size, size)
    for i in range(size):
        for j in range(size):
            assert mask[i, j] == (j <= i)
    assert torch.equal(causal_mask_torch(size), torch.from_numpy(mask))
    assert causal_mask_torch(size).dtype == torch.bool


def test_causal_mask_rejects_bad_size():
    for bad in (0, -3, 2.5, "4", True):
        with pytest.raises(ValueError, match="size"):
            causal_mask(bad)


def test_padding_mask_numpy_and_torch():
    tokens = np.array([[5, 7, 9, 0, 0], [3, 0, 0, 0, 0]])
    mask = padding_mask(tokens, 0)
    assert isinstance(mask, np.ndarray) and mask.dtype == bool and mask.shape == (2, 1, 1, 5)
    np.testing.assert_array_equal(mask[:, 0, 0], tokens != 0)
    torch_mask = padding_mask(torch.from_numpy(tokens), 0)
    assert isinstance(torch_mask, torch.Tensor) and torch_mask.dtype == torch.bool
    assert torch.equal(torch_mask, torch.from_numpy(mask))
    np.testing.assert_array_equal(padding_mask([[1, 2, 1]], 1)[0, 0, 0], [False, True, False])


def test_padding_mask_rejects_wrong_shape():
    with pytest.raises(ValueError, match=r"tokens must have shape \(batch, L\)"):
        padding_mask(np.zeros(4), 0)
    with pytest.raises(ValueError, match=r"tokens must have shape \(batch, L\)"):
        padding_mask(torch.zeros(1, 2, 3), 0)


@pytest.mark.parametrize("pad_id", [1.5, None, "0", True])
def test_padding_mask_rejects_a_pad_id_that_is_not_an_integer(pad_id):
    for tokens in (np.array([[1, 2, 0]]), torch.tensor([[1, 2, 0]])):
        with pytest.raises(ValueError, match="pad_id must be an integer"):
            padding_mask(tokens, pad_id)


def test_decoder_mask_combines_padding_and_causal():
    tokens = np.array([[4, 5, 6, 0], [7, 0, 0, 0]])
    mask = decoder_mask(tokens, 0)
    assert mask.shape == (2, 1, 4, 4)
    np.testing.assert_array_equal(mask, padding_mask(tokens, 0) & causal_mask(4))
    assert torch.equal(decoder_mask(torch.from_numpy(tokens), 0), torch.from_numpy(mask))


def test_mask_conversions():
    mask = causal_mask(3)
    additive = to_additive_mask(mask)
    assert np.all(additive[mask] == 0) and np.all(np.isneginf(additive[~mask]))
    np.testing.assert_array_equal(to_nn_multihead_mask(mask), ~mask)
    assert torch.equal(to_nn_multihead_mask(causal_mask_torch(3)), ~causal_mask_torch(3))
    assert torch.isneginf(to_additive_mask(causal_mask_torch(3))).sum() == 3
    with pytest.raises(ValueError, match="mask must be a boolean"):
        to_nn_multihead_mask(np.ones((2, 2)))
    with pytest.raises(ValueError, match="mask must be a boolean"):
        to_additive_mask(torch.ones(2, 2))


def test_additive_and_boolean_masks_agree_on_partly_masked_rows():
    rng = np.random.default_rng(0)
    Q, K, V = rng.normal(size=(5, 8)), rng.normal(size=(5, 8)), rng.normal(size=(5, 3))
    scores = Q @ K.T / np.sqrt(8) + to_additive_mask(causal_mask(5))
    e = np.exp(scores - scores.max(-1, keepdims=True))
    weights = e / e.sum(-1, keepdims=True)
    _, expected = scaled_dot_product_attention(Q, K, V, causal_mask(5))
    np.testing.assert_allclose(weights, expected, atol=1e-15)


# ----------------------------------------------------------------------------- behaviour: the future
@pytest.mark.parametrize("seed", range(5))
def test_changing_future_tokens_does_not_change_earlier_outputs_numpy(seed):
    rng = np.random.default_rng(seed)
    length, d_model, h = 6, 16, 4
    x = rng.normal(size=(2, length, d_model))
    w = {k: rng.normal(scale=0.25, size=(d_model, d_model)) for k in ("w_q", "w_k", "w_v", "w_o")}
    t = int(rng.integers(1, length))
    changed = x.copy()
    changed[:, t:] += 10 * rng.normal(size=changed[:, t:].shape)
    out, weights = multi_head_attention(x, x, **w, num_heads=h, mask=causal_mask(length))
    out2, _ = multi_head_attention(changed, changed, **w, num_heads=h, mask=causal_mask(length))
    np.testing.assert_array_equal(out[:, :t], out2[:, :t])  # bit-for-bit: blocked keys get exactly 0
    assert not np.allclose(out[:, t:], out2[:, t:])
    assert np.all(np.triu(np.ones((length, length)), 1)[None, None] * weights == 0)


def test_changing_future_tokens_does_not_change_earlier_outputs_module():
    torch.manual_seed(0)
    module = MultiHeadAttention(16, 4).double().eval()
    x = torch.randn(2, 7, 16, dtype=torch.float64)
    changed = x.clone()
    changed[:, 3:] += 10
    mask = causal_mask_torch(7)
    torch.testing.assert_close(module(x, x, x, mask)[:, :3], module(changed, changed, changed, mask)[:, :3],
                               rtol=0, atol=1e-12)


# ----------------------------------------------------------------------------- behaviour: padding
@pytest.mark.parametrize("seed", range(5))
def test_changing_padded_tokens_does_not_change_real_outputs(seed):
    rng = np.random.default_rng(10 + seed)
    d_model, h, pad = 12, 3, 0
    tokens = np.array([[3, 4, 5, 6, 2, 0, 0], [7, 8, 0, 0, 0, 0, 0], [1, 2, 3, 4, 5, 6, 7]])
    embed = rng.normal(size=(10, d_model))
    x = embed[tokens]
    w = {k: rng.normal(scale=0.3, size=(d_model, d_model)) for k in ("w_q", "w_k", "w_v", "w_o")}
    mask = padding_mask(tokens, pad)
    out, weights = multi_head_attention(x, x, **w, num_heads=h, mask=mask)
    changed = x.copy()
    changed[tokens == pad] = 100 * rng.normal(size=changed[tokens == pad].shape)
    out2, _ = multi_head_attention(changed, changed, **w, num_heads=h, mask=mask)
    real = tokens != pad
    np.testing.assert_array_equal(out[real], out2[real])
    assert np.all(weights[np.broadcast_to(~mask, weights.shape)] == 0.0)  # padded keys: exactly zero weight
    np.testing.assert_allclose(weights.sum(-1), 1.0)  # every row keeps its real keys


def test_padded_keys_get_zero_weight_in_module_and_batch_matches_single_sentences():
    torch.manual_seed(1)
    module = MultiHeadAttention(8, 2).double().eval()
    module.store_attention_weights = True
    tokens = torch.tensor([[5, 6, 7, 0], [4, 0, 0, 0]])
    embed = torch.randn(10, 8, dtype=torch.float64)
    x = embed[tokens]
    out = module(x, x, x, padding_mask(tokens, 0))
    assert (module.attention_weights[1, :, :, 1:] == 0).all()
    alone = embed[torch.tensor([[5, 6, 7]])]
    torch.testing.assert_close(out[0, :3], module(alone, alone, alone)[0], rtol=0, atol=1e-12)


def test_decoder_mask_with_leading_pad_gives_zero_rows_not_nan():
    tokens = np.array([[0, 4, 5]])  # a pad at position 0: query 0 has no key at all
    rng = np.random.default_rng(2)
    x = rng.normal(size=(1, 3, 8))
    w = {k: rng.normal(size=(8, 8)) for k in ("w_q", "w_k", "w_v", "w_o")}
    out, weights = multi_head_attention(x, x, **w, num_heads=2, mask=decoder_mask(tokens, 0))
    assert not np.isnan(out).any() and np.all(weights[0, :, 0] == 0.0)


def test_pytorch_documents_its_opposite_mask_conventions():
    """Notebook 04, section 6: the docstrings of nn.Transformer.forward and F.scaled_dot_product_attention each
    carry a note that the two boolean conventions are opposite."""
    transformer_note = " ".join(nn.Transformer.forward.__doc__.split())
    assert "positions with a ``True`` value are not allowed to participate in the attention" in transformer_note
    assert ("opposite of the definition for :attr:`attn_mask` in "
            ":func:`torch.nn.functional.scaled_dot_product_attention`") in transformer_note
    sdpa_note = " ".join(F.scaled_dot_product_attention.__doc__.split())
    assert "The boolean mask semantics for ``attn_mask`` are the inverse of" in sdpa_note
