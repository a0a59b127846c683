"""Wrong answers to notebook 05's exercises, written fresh for issue 33 the way a class writes them (before the
checks were read): none passes, none gets a wrong name, and each that deserves a name gets it."""

import functools
import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import helpers
from helpers import (check_decoder_layer, check_encoder_layer, check_feed_forward, check_layer_norm,
                     check_transformer)

CHECKS = {"layer_norm": check_layer_norm, "feed_forward": check_feed_forward, "encoder_layer": check_encoder_layer,
          "decoder_layer": check_decoder_layer, "transformer": check_transformer}


# ---------------------------------------------------------------------- the given constructors
class GivenLayerNorm(nn.Module):
    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model))


class GivenFeedForward(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.1):
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)


class GivenEncoderLayer(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__()
        self.self_attn = helpers.MultiHeadAttention(d_model, num_heads, dropout)
        self.ff = helpers.PositionwiseFeedForward(d_model, d_ff, dropout)
        self.norm1 = helpers.LayerNorm(d_model)
        self.norm2 = helpers.LayerNorm(d_model)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)
        self.norm_first = norm_first


class GivenDecoderLayer(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__()
        self.self_attn = helpers.MultiHeadAttention(d_model, num_heads, dropout)
        self.cross_attn = helpers.MultiHeadAttention(d_model, num_heads, dropout)
        self.ff = helpers.PositionwiseFeedForward(d_model, d_ff, dropout)
        self.norm1 = helpers.LayerNorm(d_model)
        self.norm2 = helpers.LayerNorm(d_model)
        self.norm3 = helpers.LayerNorm(d_model)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)
        self.dropout3 = nn.Dropout(dropout)
        self.norm_first = norm_first


def layer_norm(forward):
    return type("LayerNorm", (GivenLayerNorm,), {"forward": forward})


def feed_forward(forward):
    return type("PositionwiseFeedForward", (GivenFeedForward,), {"forward": forward})


def encoder(forward):
    return type("EncoderLayer", (GivenEncoderLayer,), {"forward": forward})


def decoder(forward):
    return type("DecoderLayer", (GivenDecoderLayer,), {"forward": forward})


# ---------------------------------------------------------------------- exercise 1: LayerNorm
def ln_unbiased(s, x):
    mean = x.mean(-1, keepdim=True)
    var = x.var(-1, keepdim=True)
    return s.weight * (x - mean) / torch.sqrt(var + s.eps) + s.bias


def ln_eps_outside(s, x):
    mean = x.mean(-1, keepdim=True)
    std = x.std(-1, keepdim=True, correction=0)
    return s.weight * (x - mean) / (std + s.eps) + s.bias


def ln_annotated(s, x):  # the Annotated Transformer's formula
    mean = x.mean(-1, keepdim=True)
    std = x.std(-1, keepdim=True)
    return s.weight * (x - mean) / (std + s.eps) + s.bias


def ln_no_keepdim(s, x):
    mean = x.mean(-1)
    var = ((x - mean) ** 2).mean(-1)
    return s.weight * (x - mean) / torch.sqrt(var + s.eps) + s.bias


def ln_axis_0(s, x):
    mean = x.mean(0, keepdim=True)
    var = ((x - mean) ** 2).mean(0, keepdim=True)
    return s.weight * (x - mean) / torch.sqrt(var + s.eps) + s.bias


def ln_two_axes(s, x):  # the statistics over the positions and the features
    mean = x.mean((-2, -1), keepdim=True)
    var = ((x - mean) ** 2).mean((-2, -1), keepdim=True)
    return s.weight * (x - mean) / torch.sqrt(var + s.eps) + s.bias


def ln_no_gain_bias(s, x):
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + s.eps)


def ln_no_bias(s, x):
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return s.weight * (x - mean) / torch.sqrt(var + s.eps)


def ln_no_eps(s, x):
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return s.weight * (x - mean) / torch.sqrt(var) + s.bias


def ln_mean_of_squares(s, x):  # the "variance" without the mean taken out
    mean = x.mean(-1, keepdim=True)
    var = (x ** 2).mean(-1, keepdim=True)
    return s.weight * (x - mean) / torch.sqrt(var + s.eps) + s.bias


def ln_not_centred(s, x):
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return s.weight * x / torch.sqrt(var + s.eps) + s.bias


def ln_gain_bias_swapped(s, x):
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return s.bias * (x - mean) / torch.sqrt(var + s.eps) + s.weight


def ln_in_place(s, x):
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    x -= mean
    return s.weight * x / torch.sqrt(var + s.eps) + s.bias


def ln_no_sqrt(s, x):
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return s.weight * (x - mean) / (var + s.eps) + s.bias


def ln_eps_hardcoded(s, x):
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return s.weight * (x - mean) / torch.sqrt(var + 1e-5) + s.bias


def ln_bias_inside(s, x):
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return s.weight * ((x - mean) / torch.sqrt(var + s.eps) + s.bias)


def ln_detached(s, x):  # .item()-style statistics: no gradient through mean and variance
    mean = x.mean(-1, keepdim=True).detach()
    var = ((x - mean) ** 2).mean(-1, keepdim=True).detach()
    return s.weight * (x - mean) / torch.sqrt(var + s.eps) + s.bias


# ---------------------------------------------------------------------- exercise 2: feed-forward
def ff_no_relu(s, x):
    return s.linear2(s.dropout(s.linear1(x)))


def ff_relu_on_output(s, x):
    return torch.relu(s.linear2(s.dropout(torch.relu(s.linear1(x)))))


def ff_gelu(s, x):
    return s.linear2(s.dropout(F.gelu(s.linear1(x))))


def ff_tanh(s, x):
    return s.linear2(s.dropout(torch.tanh(s.linear1(x))))


def ff_sigmoid(s, x):
    return s.linear2(s.dropout(torch.sigmoid(s.linear1(x))))


def ff_dropout_on_output(s, x):
    return s.dropout(s.linear2(torch.relu(s.linear1(x))))


def ff_dropout_on_input(s, x):
    return s.linear2(torch.relu(s.linear1(s.dropout(x))))


def ff_no_dropout(s, x):
    return s.linear2(torch.relu(s.linear1(x)))


def ff_no_bias(s, x):
    hidden = torch.relu(x @ s.linear1.weight.T)
    return s.dropout(hidden) @ s.linear2.weight.T


def ff_no_first_bias(s, x):
    hidden = torch.relu(x @ s.linear1.weight.T)
    return s.linear2(s.dropout(hidden))


def ff_dropout_always(s, x):  # F.dropout without training=self.training
    return s.linear2(F.dropout(torch.relu(s.linear1(x)), p=0.1))


def ff_linears_swapped(s, x):
    return s.linear1(s.dropout(torch.relu(s.linear2(x))))


def ff_no_second_linear(s, x):
    return s.dropout(torch.relu(s.linear1(x)))


def ff_softmax(s, x):
    return s.linear2(s.dropout(torch.softmax(s.linear1(x), dim=-1)))


def ff_leaky(s, x):
    return s.linear2(s.dropout(F.leaky_relu(s.linear1(x))))


# ---------------------------------------------------------------------- exercise 3: encoder layer
def enc_no_residual(s, x, m=None):
    if s.norm_first:
        h = s.norm1(x)
        x = x + s.dropout1(s.self_attn(h, h, h, m))
        return x + s.dropout2(s.ff(s.norm2(x)))
    x = s.norm1(s.dropout1(s.self_attn(x, x, x, m)))
    return s.norm2(x + s.dropout2(s.ff(x)))


def enc_pre_adds_normalised(s, x, m=None):
    if s.norm_first:
        h = s.norm1(x)
        x = h + s.dropout1(s.self_attn(h, h, h, m))
        h = s.norm2(x)
        return h + s.dropout2(s.ff(h))
    x = s.norm1(x + s.dropout1(s.self_attn(x, x, x, m)))
    return s.norm2(x + s.dropout2(s.ff(x)))


def enc_placements_swapped(s, x, m=None):
    if not s.norm_first:
        h = s.norm1(x)
        x = x + s.dropout1(s.self_attn(h, h, h, m))
        return x + s.dropout2(s.ff(s.norm2(x)))
    x = s.norm1(x + s.dropout1(s.self_attn(x, x, x, m)))
    return s.norm2(x + s.dropout2(s.ff(x)))


def enc_norm1_reused(s, x, m=None):
    if s.norm_first:
        h = s.norm1(x)
        x = x + s.dropout1(s.self_attn(h, h, h, m))
        return x + s.dropout2(s.ff(s.norm1(x)))
    x = s.norm1(x + s.dropout1(s.self_attn(x, x, x, m)))
    return s.norm1(x + s.dropout2(s.ff(x)))


def enc_no_dropout(s, x, m=None):
    if s.norm_first:
        h = s.norm1(x)
        x = x + s.self_attn(h, h, h, m)
        return x + s.ff(s.norm2(x))
    x = s.norm1(x + s.self_attn(x, x, x, m))
    return s.norm2(x + s.ff(x))


def enc_dropout_after_norm(s, x, m=None):
    if s.norm_first:
        h = s.norm1(x)
        x = x + s.dropout1(s.self_attn(h, h, h, m))
        return x + s.dropout2(s.ff(s.norm2(x)))
    x = s.dropout1(s.norm1(x + s.self_attn(x, x, x, m)))
    return s.dropout2(s.norm2(x + s.ff(x)))


def enc_no_mask(s, x, m=None):
    if s.norm_first:
        h = s.norm1(x)
        x = x + s.dropout1(s.self_attn(h, h, h))
        return x + s.dropout2(s.ff(s.norm2(x)))
    x = s.norm1(x + s.dropout1(s.self_attn(x, x, x)))
    return s.norm2(x + s.dropout2(s.ff(x)))


def enc_ff_on_layer_input(s, x, m=None):  # post-norm: the feed-forward reads the layer's input
    if s.norm_first:
        h = s.norm1(x)
        x = x + s.dropout1(s.self_attn(h, h, h, m))
        return x + s.dropout2(s.ff(s.norm2(x)))
    a = s.norm1(x + s.dropout1(s.self_attn(x, x, x, m)))
    return s.norm2(a + s.dropout2(s.ff(x)))


def enc_pre_norm_also_after(s, x, m=None):  # pre-norm that normalises the sums as well
    if s.norm_first:
        h = s.norm1(x)
        x = s.norm1(x + s.dropout1(s.self_attn(h, h, h, m)))
        return s.norm2(x + s.dropout2(s.ff(s.norm2(x))))
    x = s.norm1(x + s.dropout1(s.self_attn(x, x, x, m)))
    return s.norm2(x + s.dropout2(s.ff(x)))


def enc_pre_query_only_normalised(s, x, m=None):
    if s.norm_first:
        h = s.norm1(x)
        x = x + s.dropout1(s.self_attn(h, x, x, m))
        return x + s.dropout2(s.ff(s.norm2(x)))
    x = s.norm1(x + s.dropout1(s.self_attn(x, x, x, m)))
    return s.norm2(x + s.dropout2(s.ff(x)))


def enc_ff_first(s, x, m=None):
    if s.norm_first:
        x = x + s.dropout2(s.ff(s.norm2(x)))
        h = s.norm1(x)
        return x + s.dropout1(s.self_attn(h, h, h, m))
    x = s.norm2(x + s.dropout2(s.ff(x)))
    return s.norm1(x + s.dropout1(s.self_attn(x, x, x, m)))


def enc_residual_after_norm(s, x, m=None):
    if s.norm_first:
        h = s.norm1(x)
        x = x + s.dropout1(s.self_attn(h, h, h, m))
        return x + s.dropout2(s.ff(s.norm2(x)))
    x = x + s.norm1(s.dropout1(s.self_attn(x, x, x, m)))
    return x + s.norm2(s.dropout2(s.ff(x)))


def enc_mask_inverted(s, x, m=None):
    m = ~m if m is not None else None
    if s.norm_first:
        h = s.norm1(x)
        x = x + s.dropout1(s.self_attn(h, h, h, m))
        return x + s.dropout2(s.ff(s.norm2(x)))
    x = s.norm1(x + s.dropout1(s.self_attn(x, x, x, m)))
    return s.norm2(x + s.dropout2(s.ff(x)))


def enc_no_return(s, x, m=None):
    if s.norm_first:
        h = s.norm1(x)
        x = x + s.dropout1(s.self_attn(h, h, h, m))
        x = x + s.dropout2(s.ff(s.norm2(x)))
    else:
        x = s.norm1(x + s.dropout1(s.self_attn(x, x, x, m)))
        x = s.norm2(x + s.dropout2(s.ff(x)))


def enc_post_only(s, x, m=None):  # ignores norm_first
    x = s.norm1(x + s.dropout1(s.self_attn(x, x, x, m)))
    return s.norm2(x + s.dropout2(s.ff(x)))


def enc_pre_norm1_reused(s, x, m=None):  # pre-norm only: norm1 before the feed-forward too
    if s.norm_first:
        h = s.norm1(x)
        x = x + s.dropout1(s.self_attn(h, h, h, m))
        return x + s.dropout2(s.ff(s.norm1(x)))
    x = s.norm1(x + s.dropout1(s.self_attn(x, x, x, m)))
    return s.norm2(x + s.dropout2(s.ff(x)))


# ---------------------------------------------------------------------- exercise 4: decoder layer
def dec(cross=None, self_mask="tgt", cross_mask="mem", norms=(1, 2, 3), pre_residual="x", order="scf",
        memory_normed=False, residual=(True, True, True), q_from_input=False, dropout=True, placement="right"):
    """A decoder layer with one of the mistakes a student makes; `cross(s, q, memory, mask)` for the cross-attention."""
    cross = cross or (lambda s, q, mem, mask: s.cross_attn(q, mem, mem, mask))

    def forward(s, x, memory, tgt_mask=None, memory_mask=None):
        masks = {"tgt": tgt_mask, "mem": memory_mask, None: None}
        norm = [getattr(s, f"norm{i}") for i in norms]
        drop = [getattr(s, f"dropout{i}") if dropout else (lambda t: t) for i in (1, 2, 3)]
        pre = s.norm_first if placement == "right" else not s.norm_first
        x0 = x
        subs = {"s": lambda q: s.self_attn(q, q, q, masks[self_mask]),
                "c": lambda q: cross(s, x0 if q_from_input else q, s.norm2(memory) if memory_normed and pre else memory,
                                     masks[cross_mask]),
                "f": lambda q: s.ff(q)}
        index = {"s": 0, "c": 1, "f": 2}
        for step in order:
            i = index[step]
            if pre:
                h = norm[i](x)
                base = h if pre_residual == "h" else x
                x = base + drop[i](subs[step](h)) if residual[i] else drop[i](subs[step](h))
            else:
                x = norm[i](x + drop[i](subs[step](x))) if residual[i] else norm[i](drop[i](subs[step](x)))
        return x
    return decoder(forward)


def dec_pre_only_post(s, x, memory, tgt_mask=None, memory_mask=None):  # ignores norm_first
    x = s.norm1(x + s.dropout1(s.self_attn(x, x, x, tgt_mask)))
    x = s.norm2(x + s.dropout2(s.cross_attn(x, memory, memory, memory_mask)))
    return s.norm3(x + s.dropout3(s.ff(x)))


def dec_cross_with_self_attn(s, x, memory, tgt_mask=None, memory_mask=None):  # the self-attention's weights twice
    if s.norm_first:
        h = s.norm1(x)
        x = x + s.dropout1(s.self_attn(h, h, h, tgt_mask))
        x = x + s.dropout2(s.self_attn(s.norm2(x), memory, memory, memory_mask))
        return x + s.dropout3(s.ff(s.norm3(x)))
    x = s.norm1(x + s.dropout1(s.self_attn(x, x, x, tgt_mask)))
    x = s.norm2(x + s.dropout2(s.self_attn(x, memory, memory, memory_mask)))
    return s.norm3(x + s.dropout3(s.ff(x)))


# ---------------------------------------------------------------------- exercise 5: Transformer
class GivenTransformer(nn.Module):
    def __init__(self, src_vocab_size, tgt_vocab_size, d_model=512, num_heads=8, num_layers=6, d_ff=2048,
                 dropout=0.1, max_len=512, share_embeddings=False, pad_id=0, norm_first=False):
        super().__init__()
        self.d_model, self.pad_id = d_model, pad_id
        self.src_embed = nn.Embedding(src_vocab_size, d_model)
        self.tgt_embed = self.src_embed if share_embeddings else nn.Embedding(tgt_vocab_size, d_model)
        self.positional = helpers.PositionalEncoding(d_model, max_len, dropout, helpers.positional_encoding)
        self.encoder = nn.ModuleDict({
            "layers": nn.ModuleList(helpers.EncoderLayer(d_model, num_heads, d_ff, dropout, norm_first)
                                    for _ in range(num_layers)),
            "norm": helpers.LayerNorm(d_model) if norm_first else nn.Identity()})
        self.decoder = nn.ModuleDict({
            "layers": nn.ModuleList(helpers.DecoderLayer(d_model, num_heads, d_ff, dropout, norm_first)
                                    for _ in range(num_layers)),
            "norm": helpers.LayerNorm(d_model) if norm_first else nn.Identity()})
        self.generator = nn.Linear(d_model, tgt_vocab_size)
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)
        nn.init.normal_(self.src_embed.weight, std=d_model ** -0.5)
        if share_embeddings:
            self.generator.weight = self.src_embed.weight
        else:
            nn.init.normal_(self.tgt_embed.weight, std=d_model ** -0.5)

    def make_src_mask(self, src):
        return (src != self.pad_id)[:, None, None, :]

    def make_tgt_mask(self, tgt):
        length = tgt.shape[1]
        causal = torch.tril(torch.ones(length, length, dtype=torch.bool, device=tgt.device))
        return causal & (tgt != self.pad_id)[:, None, None, :]

    def embed_src(self, src):
        return self.positional(self.src_embed(src) * math.sqrt(self.d_model))

    def embed_tgt(self, tgt):
        return self.positional(self.tgt_embed(tgt) * math.sqrt(self.d_model))

    def encode(self, src, src_mask=None):
        if src_mask is None:
            src_mask = self.make_src_mask(src)
        x = self.embed_src(src)
        for layer in self.encoder.layers:
            x = layer(x, src_mask)
        return self.encoder.norm(x)

    def decode(self, tgt, memory, src_mask, tgt_mask=None):
        if tgt_mask is None:
            tgt_mask = self.make_tgt_mask(tgt)
        y = self.embed_tgt(tgt)
        for layer in self.decoder.layers:
            y = layer(y, memory, tgt_mask, src_mask)
        return self.generator(self.decoder.norm(y))

    def forward(self, src, tgt):
        src_mask = self.make_src_mask(src)
        return self.decode(tgt, self.encode(src, src_mask), src_mask, self.make_tgt_mask(tgt))


def model(**methods):
    """The right model with some methods replaced by a student's wrong ones (embed_* are helpers of this file
    only: a student writes them inline in encode and decode, which the wrong ones below do)."""
    return type("Transformer", (GivenTransformer,), methods)


def causal(length, device, diagonal=0):
    return torch.tril(torch.ones(length, length, dtype=torch.bool, device=device), diagonal=diagonal)


def encode_with(embed):
    def encode(self, src, src_mask=None):
        if src_mask is None:
            src_mask = self.make_src_mask(src)
        x = embed(self, src)
        for layer in self.encoder.layers:
            x = layer(x, src_mask)
        return self.encoder.norm(x)
    return encode


def decode_with(embed):
    def decode(self, tgt, memory, src_mask, tgt_mask=None):
        if tgt_mask is None:
            tgt_mask = self.make_tgt_mask(tgt)
        y = embed(self, tgt)
        for layer in self.decoder.layers:
            y = layer(y, memory, tgt_mask, src_mask)
        return self.generator(self.decoder.norm(y))
    return decode


def both_embeds(fn_src, fn_tgt):
    return {"encode": encode_with(fn_src), "decode": decode_with(fn_tgt)}


def tf_no_scale():
    return both_embeds(lambda s, ids: s.positional(s.src_embed(ids)), lambda s, ids: s.positional(s.tgt_embed(ids)))


def tf_divided_scale():
    return both_embeds(lambda s, ids: s.positional(s.src_embed(ids) / math.sqrt(s.d_model)),
                       lambda s, ids: s.positional(s.tgt_embed(ids) / math.sqrt(s.d_model)))


def tf_scale_after_pe():
    return both_embeds(lambda s, ids: s.positional(s.src_embed(ids)) * math.sqrt(s.d_model),
                       lambda s, ids: s.positional(s.tgt_embed(ids)) * math.sqrt(s.d_model))


def tf_no_positional():
    return both_embeds(lambda s, ids: s.src_embed(ids) * math.sqrt(s.d_model),
                       lambda s, ids: s.tgt_embed(ids) * math.sqrt(s.d_model))


def tf_scale_by_d_model():
    return both_embeds(lambda s, ids: s.positional(s.src_embed(ids) * s.d_model),
                       lambda s, ids: s.positional(s.tgt_embed(ids) * s.d_model))


def tf_decode_src_embed():
    return {"decode": decode_with(lambda s, ids: s.positional(s.src_embed(ids) * math.sqrt(s.d_model)))}


def tf_decoder_no_positional():
    return {"decode": decode_with(lambda s, ids: s.tgt_embed(ids) * math.sqrt(s.d_model))}


def tf_no_final_norms():
    def encode(self, src, src_mask=None):
        if src_mask is None:
            src_mask = self.make_src_mask(src)
        x = self.embed_src(src)
        for layer in self.encoder.layers:
            x = layer(x, src_mask)
        return x

    def decode(self, tgt, memory, src_mask, tgt_mask=None):
        if tgt_mask is None:
            tgt_mask = self.make_tgt_mask(tgt)
        y = self.embed_tgt(tgt)
        for layer in self.decoder.layers:
            y = layer(y, memory, tgt_mask, src_mask)
        return self.generator(y)
    return {"encode": encode, "decode": decode}


def tf_softmax():
    def decode(self, tgt, memory, src_mask, tgt_mask=None):
        if tgt_mask is None:
            tgt_mask = self.make_tgt_mask(tgt)
        y = self.embed_tgt(tgt)
        for layer in self.decoder.layers:
            y = layer(y, memory, tgt_mask, src_mask)
        return torch.softmax(self.generator(self.decoder.norm(y)), dim=-1)
    return {"decode": decode}


def tf_decoder_masks_swapped():
    def decode(self, tgt, memory, src_mask, tgt_mask=None):
        if tgt_mask is None:
            tgt_mask = self.make_tgt_mask(tgt)
        y = self.embed_tgt(tgt)
        for layer in self.decoder.layers:
            y = layer(y, memory, src_mask, tgt_mask)
        return self.generator(self.decoder.norm(y))
    return {"decode": decode}


def tf_forward_masks_swapped():
    def forward(self, src, tgt):
        src_mask = self.make_src_mask(src)
        return self.decode(tgt, self.encode(src, src_mask), self.make_tgt_mask(tgt), src_mask)
    return {"forward": forward}


def tf_first_layer_only():
    def encode(self, src, src_mask=None):
        if src_mask is None:
            src_mask = self.make_src_mask(src)
        x = self.embed_src(src)
        for _ in self.encoder.layers:
            x = self.encoder.layers[0](x, src_mask)
        return self.encoder.norm(x)

    def decode(self, tgt, memory, src_mask, tgt_mask=None):
        if tgt_mask is None:
            tgt_mask = self.make_tgt_mask(tgt)
        y = self.embed_tgt(tgt)
        for _ in self.decoder.layers:
            y = self.decoder.layers[0](y, memory, tgt_mask, src_mask)
        return self.generator(self.decoder.norm(y))
    return {"encode": encode, "decode": decode}


def tf_not_chained():
    def encode(self, src, src_mask=None):
        if src_mask is None:
            src_mask = self.make_src_mask(src)
        x = self.embed_src(src)
        for layer in self.encoder.layers:
            out = layer(x, src_mask)
        return self.encoder.norm(out)

    def decode(self, tgt, memory, src_mask, tgt_mask=None):
        if tgt_mask is None:
            tgt_mask = self.make_tgt_mask(tgt)
        y = self.embed_tgt(tgt)
        for layer in self.decoder.layers:
            out = layer(y, memory, tgt_mask, src_mask)
        return self.generator(self.decoder.norm(out))
    return {"encode": encode, "decode": decode}


def tf_last_encoder_layer_memory_per_layer():  # each decoder layer reads the embeddings of the source
    def forward(self, src, tgt):
        src_mask = self.make_src_mask(src)
        return self.decode(tgt, self.embed_src(src), src_mask, self.make_tgt_mask(tgt))
    return {"forward": forward}


def tf_forward_shifts():
    def forward(self, src, tgt):
        src_mask = self.make_src_mask(src)
        tgt = tgt[:, :-1]
        return self.decode(tgt, self.encode(src, src_mask), src_mask, self.make_tgt_mask(tgt))
    return {"forward": forward}


def tf_forward_no_masks():
    def forward(self, src, tgt):
        return self.decode(tgt, self.encode(src), None)
    return {"forward": forward}


def tf_generator_before_norm():
    def decode(self, tgt, memory, src_mask, tgt_mask=None):
        if tgt_mask is None:
            tgt_mask = self.make_tgt_mask(tgt)
        y = self.embed_tgt(tgt)
        for layer in self.decoder.layers:
            y = layer(y, memory, tgt_mask, src_mask)
        return self.decoder.norm(self.generator(y))
    return {"decode": decode}


def src_mask_2d(self, src):
    return src != self.pad_id


def src_mask_inverted(self, src):
    return (src == self.pad_id)[:, None, None, :]


def src_mask_pad_hardcoded(self, src):
    return (src != 0)[:, None, None, :]


def src_mask_wrong_axes(self, src):  # (batch, 1, L_src, 1)
    return (src != self.pad_id)[:, None, :, None]


def tgt_mask_triu(self, tgt):
    length = tgt.shape[1]
    upper = torch.triu(torch.ones(length, length, dtype=torch.bool, device=tgt.device))
    return upper & (tgt != self.pad_id)[:, None, None, :]


def tgt_mask_no_padding(self, tgt):
    return causal(tgt.shape[1], tgt.device)[None, None]


def tgt_mask_no_diagonal(self, tgt):
    return causal(tgt.shape[1], tgt.device, -1) & (tgt != self.pad_id)[:, None, None, :]


def tgt_mask_one_future(self, tgt):
    return causal(tgt.shape[1], tgt.device, 1) & (tgt != self.pad_id)[:, None, None, :]


def tgt_mask_padding_on_queries(self, tgt):
    return causal(tgt.shape[1], tgt.device) & (tgt != self.pad_id)[:, None, :, None]


def tgt_mask_float(self, tgt):
    length = tgt.shape[1]
    return torch.tril(torch.ones(length, length)) * (tgt != self.pad_id)[:, None, None, :].float()


def tgt_mask_pad_hardcoded(self, tgt):
    return causal(tgt.shape[1], tgt.device) & (tgt != 0)[:, None, None, :]


def tgt_mask_causal_only_no_batch(self, tgt):  # the padding forgotten, the causal mask (L, L) alone
    return causal(tgt.shape[1], tgt.device)


def tgt_mask_or(self, tgt):  # | instead of &
    return causal(tgt.shape[1], tgt.device) | (tgt != self.pad_id)[:, None, None, :]


def tgt_mask_ones_triu_negated(self, tgt):  # ~triu(diagonal=0): the diagonal blocked
    length = tgt.shape[1]
    upper = torch.triu(torch.ones(length, length, dtype=torch.bool), diagonal=0)
    return ~upper & (tgt != self.pad_id)[:, None, None, :]


# ---------------------------------------------------------------------- the fresh set
FRESH = [
    # exercise name, what the student did, the wrong answer, the code a fair check names (None: "differs")
    ("layer_norm", "unbiased variance (x.var)", layer_norm(ln_unbiased), "unbiased_variance"),
    ("layer_norm", "eps added to the standard deviation", layer_norm(ln_eps_outside), "eps_outside_sqrt"),
    ("layer_norm", "the Annotated Transformer's formula", layer_norm(ln_annotated), "unbiased_variance"),
    ("layer_norm", "no keepdim on the variance", layer_norm(ln_no_keepdim), "no_keepdim"),
    ("layer_norm", "statistics over axis 0", layer_norm(ln_axis_0), "wrong_axis"),
    ("layer_norm", "statistics over the positions and the features", layer_norm(ln_two_axes), "wrong_axis"),
    ("layer_norm", "no gain and no bias", layer_norm(ln_no_gain_bias), "no_gain_bias"),
    ("layer_norm", "the gain without the bias", layer_norm(ln_no_bias), "no_gain_bias"),
    ("layer_norm", "no eps", layer_norm(ln_no_eps), "no_eps"),
    ("layer_norm", "the mean of the squares as the variance", layer_norm(ln_mean_of_squares), None),
    ("layer_norm", "x not centred in the numerator", layer_norm(ln_not_centred), "not_centred"),
    ("layer_norm", "gain and bias swapped", layer_norm(ln_gain_bias_swapped), "gain_bias_swapped"),
    ("layer_norm", "x -= mean on the caller's tensor", layer_norm(ln_in_place), "changed_input"),
    ("layer_norm", "no square root", layer_norm(ln_no_sqrt), "divides_by_variance"),
    ("layer_norm", "eps written as 1e-5", layer_norm(ln_eps_hardcoded), "eps_hardcoded"),
    ("layer_norm", "the bias multiplied by the gain", layer_norm(ln_bias_inside), None),
    ("layer_norm", "statistics detached", layer_norm(ln_detached), "wrong_gradients"),
    ("feed_forward", "no ReLU", feed_forward(ff_no_relu), "no_relu"),
    ("feed_forward", "a ReLU on the output too", feed_forward(ff_relu_on_output), "relu_on_output"),
    ("feed_forward", "GELU", feed_forward(ff_gelu), "wrong_activation"),
    ("feed_forward", "tanh", feed_forward(ff_tanh), "wrong_activation"),
    ("feed_forward", "sigmoid", feed_forward(ff_sigmoid), "wrong_activation"),
    ("feed_forward", "softmax", feed_forward(ff_softmax), "wrong_activation"),
    ("feed_forward", "leaky ReLU", feed_forward(ff_leaky), "wrong_activation"),
    ("feed_forward", "dropout on the output", feed_forward(ff_dropout_on_output), "dropout_on_output"),
    ("feed_forward", "dropout on the input", feed_forward(ff_dropout_on_input), "dropout_on_input"),
    ("feed_forward", "no dropout", feed_forward(ff_no_dropout), "no_dropout"),
    ("feed_forward", "no biases", feed_forward(ff_no_bias), "no_bias"),
    ("feed_forward", "no first bias", feed_forward(ff_no_first_bias), "no_bias"),
    ("feed_forward", "F.dropout active in eval mode", feed_forward(ff_dropout_always), "dropout_in_eval_mode"),
    ("feed_forward", "linear2 first", feed_forward(ff_linears_swapped), "linears_swapped"),
    ("feed_forward", "no second linear map", feed_forward(ff_no_second_linear), "no_second_linear"),
    ("encoder_layer", "no residual around the attention", encoder(enc_no_residual), "no_residual_attention"),
    ("encoder_layer", "pre-norm adds the normalised input", encoder(enc_pre_adds_normalised), "residual_from_normed"),
    ("encoder_layer", "post-norm and pre-norm swapped", encoder(enc_placements_swapped), "pre_norm_instead_of_post"),
    ("encoder_layer", "norm1 for both sub-layers", encoder(enc_norm1_reused), "same_norm_twice"),
    ("encoder_layer", "pre-norm: norm1 before the feed-forward", encoder(enc_pre_norm1_reused), "same_norm_twice"),
    ("encoder_layer", "no dropout", encoder(enc_no_dropout), "no_dropout"),
    ("encoder_layer", "dropout after the norm", encoder(enc_dropout_after_norm), "dropout_after_norm"),
    ("encoder_layer", "no mask", encoder(enc_no_mask), "no_src_mask"),
    ("encoder_layer", "post-norm: the feed-forward reads the layer input", encoder(enc_ff_on_layer_input),
     "ff_reads_input"),
    ("encoder_layer", "pre-norm normalises the sums too", encoder(enc_pre_norm_also_after), None),
    ("encoder_layer", "pre-norm: only the queries normalised", encoder(enc_pre_query_only_normalised), None),
    ("encoder_layer", "feed-forward first", encoder(enc_ff_first), "sublayers_out_of_order"),
    ("encoder_layer", "residual added after the norm", encoder(enc_residual_after_norm), "norm_before_residual"),
    ("encoder_layer", "mask inverted", encoder(enc_mask_inverted), "mask_inverted"),
    ("encoder_layer", "no return", encoder(enc_no_return), "returned_none"),
    ("encoder_layer", "norm_first ignored (post-norm always)", encoder(enc_post_only), "post_norm_instead_of_pre"),
    ("decoder_layer", "cross-attention values from x", dec(lambda s, q, mem, mask: s.cross_attn(q, mem, q, mask)),
     "values_from_decoder"),
    ("decoder_layer", "cross-attention keys from x", dec(lambda s, q, mem, mask: s.cross_attn(q, q, mem, mask)),
     "keys_from_decoder"),
    ("decoder_layer", "cross-attention queries from memory",
     dec(lambda s, q, mem, mask: s.cross_attn(mem, q, q, mask)), "q_from_memory"),
    ("decoder_layer", "cross-attention keys and values from x (a second self-attention)",
     dec(lambda s, q, mem, mask: s.cross_attn(q, q, q, mask)), "kv_from_decoder"),
    ("decoder_layer", "norm2 for the third sub-layer", dec(norms=(1, 2, 2)), "same_norm_twice"),
    ("decoder_layer", "norm1 for all three sub-layers", dec(norms=(1, 1, 1)), "same_norm_twice"),
    ("decoder_layer", "masks swapped", dec(self_mask="mem", cross_mask="tgt"), "masks_swapped"),
    ("decoder_layer", "no tgt_mask", dec(self_mask=None), "no_causal_mask"),
    ("decoder_layer", "no memory_mask", dec(cross_mask=None), "no_memory_mask"),
    ("decoder_layer", "pre-norm normalises memory", dec(memory_normed=True), "memory_normalised"),
    ("decoder_layer", "cross-attention queries from the layer input", dec(q_from_input=True), "cross_attn_reads_input"),
    ("decoder_layer", "pre-norm adds the normalised input", dec(pre_residual="h"), "residual_from_normed"),
    ("decoder_layer", "no residual around the cross-attention", dec(residual=(True, False, True)),
     "no_residual_cross_attention"),
    ("decoder_layer", "cross-attention before self-attention", dec(order="csf"), "sublayers_out_of_order"),
    ("decoder_layer", "feed-forward before cross-attention", dec(order="sfc"), "sublayers_out_of_order"),
    ("decoder_layer", "post-norm and pre-norm swapped", dec(placement="swapped"), "pre_norm_instead_of_post"),
    ("decoder_layer", "no dropout", dec(dropout=False), "no_dropout"),
    ("decoder_layer", "norm_first ignored", decoder(dec_pre_only_post), "post_norm_instead_of_pre"),
    ("decoder_layer", "self_attn used for the cross-attention", decoder(dec_cross_with_self_attn),
     "cross_attn_is_self_attn"),
    ("transformer", "src mask (batch, L_src)", model(make_src_mask=src_mask_2d), "wrong_shape"),
    ("transformer", "src mask True at padding", model(make_src_mask=src_mask_inverted), "mask_inverted"),
    ("transformer", "src mask with pad id 0", model(make_src_mask=src_mask_pad_hardcoded), "pad_id_hardcoded"),
    ("transformer", "src mask (batch, 1, L_src, 1)", model(make_src_mask=src_mask_wrong_axes), "wrong_shape"),
    ("transformer", "tgt mask upper triangle", model(make_tgt_mask=tgt_mask_triu), "tgt_mask_upper_triangle"),
    ("transformer", "tgt mask without padding", model(make_tgt_mask=tgt_mask_no_padding), "tgt_mask_no_padding"),
    ("transformer", "tgt mask without the diagonal", model(make_tgt_mask=tgt_mask_no_diagonal),
     "tgt_mask_diagonal_blocked"),
    ("transformer", "tgt mask allows one future token", model(make_tgt_mask=tgt_mask_one_future),
     "tgt_mask_one_future"),
    ("transformer", "tgt mask padding on the queries", model(make_tgt_mask=tgt_mask_padding_on_queries),
     "tgt_padding_on_queries"),
    ("transformer", "tgt mask of floats", model(make_tgt_mask=tgt_mask_float), "mask_not_boolean"),
    ("transformer", "tgt mask with pad id 0", model(make_tgt_mask=tgt_mask_pad_hardcoded), "pad_id_hardcoded"),
    ("transformer", "tgt mask (L, L) without padding", model(make_tgt_mask=tgt_mask_causal_only_no_batch),
     "tgt_mask_no_padding"),
    ("transformer", "tgt mask with | for &", model(make_tgt_mask=tgt_mask_or), "tgt_mask_or"),
    ("transformer", "tgt mask ~triu: diagonal blocked", model(make_tgt_mask=tgt_mask_ones_triu_negated),
     "tgt_mask_diagonal_blocked"),
    ("transformer", "no sqrt(d_model)", model(**tf_no_scale()), "no_sqrt_d_model"),
    ("transformer", "divided by sqrt(d_model)", model(**tf_divided_scale()), "wrong_embedding_scale"),
    ("transformer", "scaled after the positional encoding", model(**tf_scale_after_pe()), "sqrt_after_positional"),
    ("transformer", "scaled by d_model", model(**tf_scale_by_d_model()), "wrong_embedding_scale"),
    ("transformer", "no positional encoding", model(**tf_no_positional()), "no_positional_encoding_src"),
    ("transformer", "decoder without positional encoding", model(**tf_decoder_no_positional()),
     "no_positional_encoding_tgt"),
    ("transformer", "decode with src_embed", model(**tf_decode_src_embed()), "embeddings_swapped"),
    ("transformer", "no final norms", model(**tf_no_final_norms()), "no_final_norm"),
    ("transformer", "softmax on the logits", model(**tf_softmax()), "returns_probabilities"),
    ("transformer", "decoder layer masks swapped", model(**tf_decoder_masks_swapped()), "masks_swapped"),
    ("transformer", "forward passes the masks in the wrong order", model(**tf_forward_masks_swapped()),
     "masks_swapped"),
    ("transformer", "the first layer N times", model(**tf_first_layer_only()), "same_layer_repeated"),
    ("transformer", "layers not chained", model(**tf_not_chained()), "layers_not_chained"),
    ("transformer", "memory = the source embeddings", model(**tf_last_encoder_layer_memory_per_layer()),
     "memory_not_used"),
    ("transformer", "forward shifts tgt", model(**tf_forward_shifts()), "wrong_shape"),
    ("transformer", "forward gives decode no source mask", model(**tf_forward_no_masks()),
     "src_mask_not_in_cross_attention"),
    ("transformer", "generator before the final norm", model(**tf_generator_before_norm()), None),
]


CRASH = "raised_error"  # the answer's own crash, located at its line: no name, an honest report


@functools.lru_cache(maxsize=None)
def verdict(i):
    name, _, wrong, _ = FRESH[i]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return CHECKS[name](wrong)


@pytest.mark.parametrize("i", range(len(FRESH)), ids=[f"{e}-{d}" for e, d, *_ in FRESH])
def test_fresh_wrong_answer(i):
    expected = FRESH[i][3]
    result = verdict(i)
    assert result.status != "pass", "a wrong answer passes"
    assert result.mistake in (expected, None, CRASH), f"named {result.mistake}, expected {expected}: {result}"
    if expected is not None:
        assert result.mistake == expected, f"not named: {result}"


def test_most_fresh_wrong_answers_get_a_named_hint():
    named = sum(verdict(i).mistake == expected for i, (*_, expected) in enumerate(FRESH) if expected is not None)
    assert named >= 0.85 * len(FRESH), f"{named} of {len(FRESH)} named"
