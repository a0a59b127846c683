"""The Transformer of notebook 05: equal to PyTorch's LayerNorm, layers and whole nn.Transformer after copying
weights, and behaves as the paper says."""

import math

import pytest
import torch
from torch import nn

import helpers
from helpers.masking import causal_mask_torch, decoder_mask, padding_mask
from helpers.layers import Decoder, DecoderLayer, Encoder, EncoderLayer, LayerNorm, PositionwiseFeedForward
from helpers.torch_copies import (nn_transformer_logits, to_nn_transformer, to_torch_decoder_layer,
                                  to_torch_encoder_layer)
from helpers.transformer import (PAPER_TABLE3, PAPER_VOCAB_SIZE, Transformer, attention_maps, count_parameters,
                                 parameter_breakdown)

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


@pytest.mark.parametrize("shape, eps", [((2, 3, 8), 1e-5), ((5, 16), 1e-5), ((2, 2, 3, 512), 1e-6), ((4, 8), 0.1)])
def test_layer_norm_equals_pytorch(shape, eps):
    torch.manual_seed(0)
    theirs = nn.LayerNorm(shape[-1], eps=eps).double()
    with torch.no_grad():
        theirs.weight.normal_(1.0, 0.5)
        theirs.bias.normal_(0.0, 0.5)
    ours = LayerNorm(shape[-1], eps=eps).double()
    ours.load_state_dict(theirs.state_dict())  # the same parameter names: weight, bias
    x = 3.0 * torch.randn(*shape, dtype=torch.float64) + 2.0
    x[0, ...] = 0.5  # constant rows (variance 0): eps alone keeps the division finite
    torch.testing.assert_close(ours(x), theirs(x), atol=1e-12, rtol=1e-12)
    x.requires_grad_(True)
    grad_ours = torch.autograd.grad(ours(x).pow(2).sum(), x)[0]
    grad_theirs = torch.autograd.grad(theirs(x).pow(2).sum(), x)[0]
    torch.testing.assert_close(grad_ours, grad_theirs, atol=1e-10, rtol=1e-10)
    theirs.load_state_dict(ours.state_dict())


def test_layer_norm_starts_as_plain_normalisation():
    norm = LayerNorm(6)
    assert torch.equal(norm.weight, torch.ones(6)) and torch.equal(norm.bias, torch.zeros(6)) and norm.eps == 1e-5
    with torch.no_grad():
        y = norm(torch.tensor([[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]]))
    assert abs(float(y.mean())) < 1e-6 and abs(float(y.var(unbiased=False)) - 1) < 1e-4  # biased: var 1, not 5/6


def test_layers_use_our_layer_norm():
    layer = DecoderLayer(8, 2, 16)
    assert all(type(getattr(layer, n)) is LayerNorm for n in ("norm1", "norm2", "norm3"))
    assert type(Encoder(1, 8, 2, 16, norm_first=True).norm) is LayerNorm


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
    assert isinstance(model.encoder.norm, LayerNorm) and isinstance(model.decoder.norm, LayerNorm)
    assert sum(parameter_breakdown(model).values()) == count_parameters(model)
    assert isinstance(_model().encoder.norm, nn.Identity)


def _whole_model_inputs():
    src = torch.tensor([[4, 5, 6, 7, 0, 0, 0], [8, 9, 10, 11, 12, 4, 5], [3, 3, 4, 0, 0, 0, 0]])
    tgt = torch.tensor([[1, 3, 4, 5, 6], [1, 7, 8, 0, 0], [1, 9, 10, 3, 0]])
    return src, tgt


@pytest.mark.parametrize("norm_first", [False, True])
def test_whole_model_equals_nn_transformer(norm_first):
    """Embeddings, positional encoding and generator around nn.Transformer holding our stacks: the same logits."""
    model = _model(norm_first=norm_first, num_layers=3).double()
    _randomise_norms(model, 3)
    theirs = to_nn_transformer(model).eval()
    assert isinstance(theirs, nn.Transformer) and len(theirs.encoder.layers) == len(theirs.decoder.layers) == 3
    assert isinstance(theirs.encoder.norm, nn.LayerNorm if norm_first else nn.Identity)
    src, tgt = _whole_model_inputs()
    with torch.no_grad():
        ours = model(src, tgt)
        torch.testing.assert_close(nn_transformer_logits(model, theirs, src, tgt), ours, atol=1e-12, rtol=1e-12)


def test_nn_transformer_adds_a_final_norm_even_in_post_norm():
    """Left in place, PyTorch's final LayerNorms change a post-norm model's output: they are not the paper's."""
    model = _model().double()
    _randomise_norms(model, 4)
    kept = to_nn_transformer(model, keep_torch_final_norms=True).eval()
    assert isinstance(kept.encoder.norm, nn.LayerNorm) and isinstance(kept.decoder.norm, nn.LayerNorm)
    src, tgt = _whole_model_inputs()
    with torch.no_grad():
        assert (nn_transformer_logits(model, kept, src, tgt) - model(src, tgt)).abs().max() > 0.01


def test_whole_model_equals_nn_transformer_in_float32():
    model = _model()
    src, tgt = _whole_model_inputs()
    with torch.no_grad():
        torch.testing.assert_close(nn_transformer_logits(model, to_nn_transformer(model).eval(), src, tgt),
                                   model(src, tgt), atol=1e-5, rtol=1e-5)


def test_embeddings_start_with_std_one_after_scaling():
    torch.manual_seed(0)
    model = Transformer(2000, 2000, d_model=64, num_heads=4, num_layers=1, d_ff=32)
    for table in (model.src_embed, model.tgt_embed):
        scaled = table.weight.detach() * math.sqrt(64)
        assert abs(float(scaled.std()) - 1.0) < 0.01 and abs(float(scaled.mean())) < 0.01
    shared = Transformer(2000, 2000, d_model=64, num_heads=4, num_layers=1, d_ff=32, share_embeddings=True)
    assert abs(float(shared.generator.weight.detach().std()) - 64 ** -0.5) < 0.001


def test_paper_table3_parameter_counts():
    """Our counts with a 37,000-token shared vocabulary, against the paper's column "params x 10^6"."""
    counts = {}
    for label, kwargs, paper in PAPER_TABLE3:
        with torch.device("meta"):
            model = Transformer(PAPER_VOCAB_SIZE, PAPER_VOCAB_SIZE, share_embeddings=True, **kwargs)
        counts[label] = count_parameters(model)
        assert abs(counts[label] / 1e6 - paper) < 5, label  # within 5 M of every row
    assert counts["base"] == 63_119_496 and counts["big"] == 214_282_376
    # one encoder layer and one decoder layer of the base model: 7,356,416 parameters (the paper: 36 -> 50 -> 65 -> 80)
    assert counts["(C) N=4"] - counts["(C) N=2"] == counts["(C) N=8"] - counts["base"] == 2 * 7_356_416


def test_config_rebuilds_the_model():
    model = _model()
    twin = Transformer(**model.config())
    assert count_parameters(twin) == count_parameters(model)
    twin.load_state_dict(model.state_dict())


class _MyAttention(helpers.MultiHeadAttention):
    pass


class _MyNorm(LayerNorm):
    pass


class _MyFeedForward(PositionwiseFeedForward):
    pass


class _MyEncoderLayer(EncoderLayer):
    pass


def _doubled(max_len, d_model):
    return 2 * helpers.positional_encoding(max_len, d_model)


@pytest.mark.parametrize("norm_first", [False, True])
def test_the_model_takes_its_parts_as_arguments_with_the_same_weights_in_the_same_places(norm_first):
    """Notebook 06 hands the student's parts to the reference model: every layer holds them, the state dict has
    the reference's names (checkpoints rely on them), and the same seed gives the same weights."""
    reference = _model(norm_first=norm_first)
    same = _model(norm_first=norm_first, attention=helpers.MultiHeadAttention, layer_norm=LayerNorm,
                  feed_forward=PositionwiseFeedForward, encoding=helpers.positional_encoding)
    mine = _model(norm_first=norm_first, attention=_MyAttention, layer_norm=_MyNorm, feed_forward=_MyFeedForward,
                  encoding=_doubled)
    for model in (same, mine):
        assert list(model.state_dict()) == list(reference.state_dict())
        for name, tensor in reference.state_dict().items():
            assert torch.equal(model.state_dict()[name], tensor * (2 if name == "positional.pe" and model is mine
                                                                   else 1)), name
    layers = [*mine.encoder.layers, *mine.decoder.layers]
    assert {type(m) for layer in layers for m in (layer.self_attn, getattr(layer, "cross_attn", layer.self_attn))} \
        == {_MyAttention}
    assert {type(layer.ff) for layer in layers} == {_MyFeedForward}
    norms = {type(m) for m in mine.modules() if isinstance(m, LayerNorm)}
    assert norms == {_MyNorm} and (norm_first == isinstance(mine.encoder.norm, _MyNorm))
    assert mine.positional.encoding is _doubled


def test_a_given_layer_class_builds_its_own_parts():
    model = _model(encoder_layer=_MyEncoderLayer, attention=_MyAttention, norm_first=True, layer_norm=_MyNorm)
    assert {type(layer) for layer in model.encoder.layers} == {_MyEncoderLayer}
    assert type(model.encoder.layers[0].self_attn) is helpers.MultiHeadAttention  # the layer's own
    assert type(model.decoder.layers[0].self_attn) is _MyAttention  # the reference DecoderLayer, given attention
    assert type(model.encoder.norm) is _MyNorm and type(model.decoder.norm) is _MyNorm  # the final norms


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
    attentions = [m for m in model.modules() if isinstance(m, helpers.MultiHeadAttention)]
    assert len(attentions) == 6 and not any(m.store_attention_weights for m in attentions)  # set back: off
    assert all(m.attention_weights is None for m in attentions)  # and nothing left kept in the modules
    model.train()
    model(src, tgt).sum().backward()  # training stores no weights
    assert all(m.attention_weights is None for m in attentions)


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


@pytest.mark.parametrize("make, name", [
    (lambda: LayerNorm(0), "d_model"), (lambda: LayerNorm(8, eps=0.0), "eps"),
    (lambda: LayerNorm(8, eps="1e-5"), "eps"),
    (lambda: LayerNorm(8)(torch.zeros(2, 7)), "x"), (lambda: LayerNorm(8)([1.0] * 8), "x"),
    (lambda: to_nn_transformer(EncoderLayer(8, 2, 16)), "model"),
    (lambda: to_nn_transformer(_model(), keep_torch_final_norms="yes"), "keep_torch_final_norms"),
    (lambda: nn_transformer_logits(_model(), nn.Linear(2, 2), torch.ones(1, 2, dtype=torch.long),
                                   torch.ones(1, 2, dtype=torch.long)), "theirs"),
    (lambda: nn_transformer_logits(nn.Linear(2, 2), None, None, None), "model"),
])
def test_new_helpers_reject_bad_input_naming_the_argument(make, name):
    with pytest.raises(ValueError, match=name):
        make()


def test_public_api_is_exported():
    for name in ("Transformer", "EncoderLayer", "DecoderLayer", "Encoder", "Decoder", "PositionwiseFeedForward",
                 "LayerNorm", "to_nn_transformer", "nn_transformer_logits", "PAPER_TABLE3", "PAPER_VOCAB_SIZE",
                 "greedy_decode", "make_date_dataset", "train_or_load", "check_layer_norm", "check_feed_forward",
                 "check_encoder_layer", "check_decoder_layer", "check_transformer", "check_greedy_decode"):
        assert hasattr(helpers, name), name
