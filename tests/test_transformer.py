"""The Transformer of notebook 05: equal to PyTorch's layers after copying weights, and behaves as the paper says."""

import math

import pytest
import torch
from torch import nn

import helpers
from helpers.masking import causal_mask_torch, decoder_mask, padding_mask
from helpers.transformer import (Decoder, DecoderLayer, Encoder, EncoderLayer, PositionwiseFeedForward, Transformer,
                                 attention_maps, count_parameters, parameter_breakdown, to_torch_decoder_layer,
                                 to_torch_encoder_layer)

D_MODEL, HEADS, D_FF = 32, 4, 64


def _inputs(seed=0, batch=3, l_tgt=5, l_src=7):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, l_tgt, D_MODEL, generator=gen, dtype=torch.float64)
    memory = torch.randn(batch, l_src, D_MODEL, generator=gen, dtype=torch.float64)
    src_ids = torch.randint(1, 9, (batch, l_src), generator=gen)
    src_ids[1, -3:] = 0
    src_ids[2, -1:] = 0
    return x, memory, padding_mask(src_ids, 0)


def _randomise_norms(module, seed=0):
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in module.named_parameters():
            if "norm" in name:
                offset = 1.0 if name.endswith("weight") else 0.0
                p.copy_(torch.randn(p.shape, generator=gen, dtype=p.dtype) * 0.5 + offset)


def test_feed_forward_is_the_paper_formula():
    torch.manual_seed(0)
    ff = PositionwiseFeedForward(8, 16, dropout=0.1).eval()
    x = torch.randn(2, 3, 8)
    manual = torch.clamp(x @ ff.linear1.weight.T + ff.linear1.bias, min=0) @ ff.linear2.weight.T + ff.linear2.bias
    torch.testing.assert_close(ff(x), manual)
    # position-wise: each position alone gives the same result
    torch.testing.assert_close(ff(x[:, 1:2]), ff(x)[:, 1:2])


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_layer_equals_pytorch(norm_first):
    torch.manual_seed(0)
    ours = EncoderLayer(D_MODEL, HEADS, D_FF, dropout=0.1, norm_first=norm_first).double().eval()
    _randomise_norms(ours)
    theirs = to_torch_encoder_layer(ours).eval()
    _, x, src_mask = _inputs()
    expected = theirs(x, src_key_padding_mask=~src_mask[:, 0, 0, :])
    got = ours(x, src_mask)
    keep = src_mask[:, 0, 0, :]  # PyTorch's fast path may zero padded rows: compare the real tokens
    torch.testing.assert_close(got[keep], expected[keep], atol=1e-10, rtol=1e-10)
    torch.testing.assert_close(ours(x), theirs(x), atol=1e-10, rtol=1e-10)


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_layer_equals_pytorch(norm_first):
    torch.manual_seed(1)
    ours = DecoderLayer(D_MODEL, HEADS, D_FF, dropout=0.1, norm_first=norm_first).double().eval()
    _randomise_norms(ours, 1)
    theirs = to_torch_decoder_layer(ours).eval()
    x, memory, src_mask = _inputs(1)
    causal = causal_mask_torch(x.shape[1])
    expected = theirs(x, memory, tgt_mask=~causal, memory_key_padding_mask=~src_mask[:, 0, 0, :])
    torch.testing.assert_close(ours(x, memory, causal, src_mask), expected, atol=1e-10, rtol=1e-10)


@pytest.mark.parametrize("norm_first", [False, True])
def test_stacks_equal_pytorch(norm_first):
    """Post-norm stacks have no final norm (as the paper); pre-norm stacks end in one (as PyTorch's)."""
    torch.manual_seed(2)
    enc = Encoder(3, D_MODEL, HEADS, D_FF, 0.1, norm_first).double().eval()
    dec = Decoder(3, D_MODEL, HEADS, D_FF, 0.1, norm_first).double().eval()
    torch_enc = nn.TransformerEncoder(to_torch_encoder_layer(enc.layers[0]), 3, enable_nested_tensor=False,
                                      norm=nn.LayerNorm(D_MODEL) if norm_first else None).double().eval()
    torch_dec = nn.TransformerDecoder(to_torch_decoder_layer(dec.layers[0]), 3,
                                      norm=nn.LayerNorm(D_MODEL) if norm_first else None).double().eval()
    for i in range(3):
        torch_enc.layers[i] = to_torch_encoder_layer(enc.layers[i])
        torch_dec.layers[i] = to_torch_decoder_layer(dec.layers[i])
    x, memory, src_mask = _inputs(2)
    causal = causal_mask_torch(x.shape[1])
    torch.testing.assert_close(enc(memory), torch_enc(memory), atol=1e-10, rtol=1e-10)
    torch.testing.assert_close(dec(x, memory, causal, src_mask),
                               torch_dec(x, memory, tgt_mask=~causal, memory_key_padding_mask=~src_mask[:, 0, 0, :]),
                               atol=1e-10, rtol=1e-10)


def _model(**kwargs):
    torch.manual_seed(0)
    args = dict(d_model=D_MODEL, num_heads=HEADS, num_layers=2, d_ff=D_FF, dropout=0.1, max_len=40)
    args.update(kwargs)
    return Transformer(13, 11, **args).eval()


def test_forward_shape_and_masks_built_from_ids():
    model = _model()
    src = torch.tensor([[4, 5, 6, 7, 0, 0], [4, 5, 6, 7, 8, 9]])
    tgt = torch.tensor([[1, 3, 4, 5], [1, 5, 0, 0]])
    logits = model(src, tgt)
    assert logits.shape == (2, 4, 11)
    assert torch.equal(model.make_src_mask(src), padding_mask(src, 0))
    assert torch.equal(model.make_tgt_mask(tgt), decoder_mask(tgt, 0))
    assert torch.allclose(logits, model.decode(tgt, model.encode(src), model.make_src_mask(src)))


def test_future_target_tokens_do_not_change_earlier_logits():
    model = _model()
    src = torch.randint(1, 13, (2, 6))
    tgt = torch.randint(1, 11, (2, 5))
    changed = tgt.clone()
    changed[:, 3:] = (changed[:, 3:] + 4) % 10 + 1
    a, b = model(src, tgt), model(src, changed)
    torch.testing.assert_close(a[:, :3], b[:, :3])
    assert not torch.allclose(a[:, 3:], b[:, 3:])


def test_padded_source_tokens_do_not_change_the_output():
    model = _model()
    src = torch.tensor([[4, 5, 6, 0, 0, 0]])
    tgt = torch.tensor([[1, 3, 4]])
    other = src.clone()
    other[0, 3:] = torch.tensor([7, 8, 9])  # different content where the mask says "pad"...
    mask = model.make_src_mask(src)
    a = model.decode(tgt, model.encode(src, mask), mask)
    b = model.decode(tgt, model.encode(other, mask), mask)
    torch.testing.assert_close(a, b)
    # ...and more padding changes nothing either
    longer = torch.cat([src, torch.zeros(1, 4, dtype=torch.long)], dim=1)
    torch.testing.assert_close(model(src, tgt), model(longer, tgt))


def test_embeddings_are_scaled_by_sqrt_d_model():
    model = _model(dropout=0.0)
    src = torch.tensor([[4, 5, 6]])
    captured = {}
    model.encoder.register_forward_pre_hook(lambda m, args: captured.setdefault("x", args[0]))
    model.encode(src)
    expected = model.src_embed(src) * math.sqrt(D_MODEL) + model.positional.pe[:3]
    torch.testing.assert_close(captured["x"], expected)


def test_shared_embeddings_tie_one_matrix():
    torch.manual_seed(0)
    model = Transformer(20, 20, d_model=16, num_heads=2, num_layers=1, d_ff=32, share_embeddings=True)
    assert model.src_embed.weight is model.tgt_embed.weight is model.generator.weight
    untied = Transformer(20, 20, d_model=16, num_heads=2, num_layers=1, d_ff=32)
    assert count_parameters(untied) - count_parameters(model) == 2 * 20 * 16


def test_paper_base_model_has_about_63_million_parameters():
    with torch.device("meta"):
        model = Transformer(37000, 37000, share_embeddings=True)
    groups = parameter_breakdown(model)
    assert sum(groups.values()) == count_parameters(model) == 63_119_496
    layer = 4 * (512 * 512 + 512) + (512 * 2048 + 2048 + 2048 * 512 + 512) + 2 * 2 * 512
    assert count_parameters(model.encoder) == 6 * layer


def test_pre_norm_model_adds_final_norms_and_counts_them():
    model = _model(norm_first=True)
    assert isinstance(model.encoder.norm, nn.LayerNorm) and isinstance(model.decoder.norm, nn.LayerNorm)
    assert sum(parameter_breakdown(model).values()) == count_parameters(model)
    assert isinstance(_model().encoder.norm, nn.Identity)


def test_config_rebuilds_the_model():
    model = _model()
    twin = Transformer(**model.config())
    assert count_parameters(twin) == count_parameters(model)
    twin.load_state_dict(model.state_dict())


def test_attention_maps_shapes_and_rows():
    model = _model()
    src = torch.tensor([[4, 5, 6, 7, 0, 0]])
    tgt = torch.tensor([[1, 3, 4]])
    maps = attention_maps(model, src, tgt)
    assert [w.shape for w in maps["encoder"]] == [(1, HEADS, 6, 6)] * 2
    assert [w.shape for w in maps["cross"]] == [(1, HEADS, 3, 6)] * 2
    assert torch.allclose(maps["cross"][0].sum(-1), torch.ones(1, HEADS, 3))
    assert torch.all(maps["cross"][0][..., 4:] == 0)  # the padding gets no attention
    assert torch.all(maps["decoder_self"][0].triu(1) == 0)  # no attention to the future


@pytest.mark.parametrize("kwargs, name", [
    (dict(d_model=30, num_heads=4), "d_model"),
    (dict(d_model=0), "d_model"),
    (dict(num_layers=0), "num_layers"),
    (dict(dropout=1.5), "dropout"),
    (dict(pad_id=99), "pad_id"),
    (dict(share_embeddings=True), "share_embeddings"),
])
def test_bad_arguments_raise_value_error_naming_them(kwargs, name):
    args = dict(d_model=16, num_heads=2, num_layers=1, d_ff=32)
    args.update(kwargs)
    with pytest.raises(ValueError, match=name):
        Transformer(13, 11, **args)


def test_bad_inputs_raise_value_error():
    model = _model()
    with pytest.raises(ValueError, match="src"):
        model(torch.zeros(2, 3, 4, dtype=torch.long), torch.zeros(2, 3, dtype=torch.long))
    with pytest.raises(ValueError, match="tgt"):
        model(torch.zeros(2, 3, dtype=torch.long), torch.zeros(2, 3))
    with pytest.raises(ValueError, match="max_len"):
        model(torch.zeros(1, 41, dtype=torch.long), torch.zeros(1, 3, dtype=torch.long))
    with pytest.raises(ValueError, match="src_vocab_size=13"):  # ids outside the vocabulary, not an IndexError
        model(torch.tensor([[3, 13]]), torch.tensor([[1, 2]]))
    with pytest.raises(ValueError, match="tgt_vocab_size=11"):
        model(torch.tensor([[3, 4]]), torch.tensor([[1, 11]]))
    with pytest.raises(ValueError, match="src_vocab_size"):
        model.encode(torch.tensor([[-1, 4]]))
    with pytest.raises(ValueError, match="d_ff"):
        PositionwiseFeedForward(8, 0)
    with pytest.raises(ValueError, match="layer"):
        to_torch_encoder_layer(DecoderLayer(8, 2, 16))


def test_public_api_is_exported():
    for name in ("Transformer", "EncoderLayer", "DecoderLayer", "Encoder", "Decoder", "PositionwiseFeedForward",
                 "greedy_decode", "make_date_dataset", "train_or_load", "check_encoder_layer",
                 "check_decoder_layer", "check_greedy_decode"):
        assert hasattr(helpers, name), name
