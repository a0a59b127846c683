"""Our Transformer's weights copied into PyTorch's own modules, to compare the two (notebook 05, the tests).

    to_torch_encoder_layer(layer)   an nn.TransformerEncoderLayer holding copies of an EncoderLayer's weights
    to_torch_decoder_layer(layer)   an nn.TransformerDecoderLayer holding copies of a DecoderLayer's weights
    to_nn_transformer(model)        an nn.Transformer holding copies of the two stacks of a Transformer
    nn_transformer_logits(model, theirs, src, tgt)   our embeddings, encoding and generator around theirs

PyTorch's masks mean the opposite of ours: True = blocked. (multi_head.to_nn_multihead_attention does the
same for one attention module.)
"""

from __future__ import annotations

import math
import warnings

import torch
from torch import nn

from .layers import DecoderLayer, EncoderLayer
from .masking import causal_mask_torch, padding_mask
from .multi_head import to_nn_multihead_attention
from .transformer import Transformer


def to_torch_encoder_layer(layer: EncoderLayer) -> nn.TransformerEncoderLayer:
    """An nn.TransformerEncoderLayer (batch_first, ReLU, same norm placement) holding copies of our weights.

    Its masks use the opposite convention: pass src_key_padding_mask = ~src_mask[:, 0, 0, :].
    """
    if not isinstance(layer, EncoderLayer):
        raise ValueError(f"layer must be an EncoderLayer, got {type(layer).__name__}")
    attn, ff = layer.self_attn, layer.ff
    theirs = nn.TransformerEncoderLayer(attn.d_model, attn.num_heads, ff.d_ff, dropout=layer.dropout1.p,
                                        batch_first=True, norm_first=layer.norm_first)
    theirs = theirs.to(device=ff.linear1.weight.device, dtype=ff.linear1.weight.dtype)  # before copying
    theirs.self_attn = to_nn_multihead_attention(attn)
    copy_linear_and_norms(layer, theirs, ("norm1", "norm2"))
    return theirs.train(layer.training)


def to_torch_decoder_layer(layer: DecoderLayer) -> nn.TransformerDecoderLayer:
    """An nn.TransformerDecoderLayer (batch_first, ReLU, same norm placement) holding copies of our weights.

    PyTorch calls cross-attention ``multihead_attn``. Masks: tgt_mask = ~causal (L_tgt, L_tgt),
    memory_key_padding_mask = ~src_mask[:, 0, 0, :].
    """
    if not isinstance(layer, DecoderLayer):
        raise ValueError(f"layer must be a DecoderLayer, got {type(layer).__name__}")
    attn, ff = layer.self_attn, layer.ff
    theirs = nn.TransformerDecoderLayer(attn.d_model, attn.num_heads, ff.d_ff, dropout=layer.dropout1.p,
                                        batch_first=True, norm_first=layer.norm_first)
    theirs = theirs.to(device=ff.linear1.weight.device, dtype=ff.linear1.weight.dtype)  # before copying
    theirs.self_attn = to_nn_multihead_attention(attn)
    theirs.multihead_attn = to_nn_multihead_attention(layer.cross_attn)
    copy_linear_and_norms(layer, theirs, ("norm1", "norm2", "norm3"))
    return theirs.train(layer.training)


def copy_linear_and_norms(ours: nn.Module, theirs: nn.Module, norms: tuple[str, ...]) -> None:
    """Copy the feed-forward's linear1 and linear2 and the named norms of our layer into PyTorch's."""
    with torch.no_grad():
        for name in ("linear1", "linear2"):
            getattr(theirs, name).weight.copy_(getattr(ours.ff, name).weight)
            getattr(theirs, name).bias.copy_(getattr(ours.ff, name).bias)
        for name in norms:
            getattr(theirs, name).weight.copy_(getattr(ours, name).weight)
            getattr(theirs, name).bias.copy_(getattr(ours, name).bias)


def to_nn_transformer(model: Transformer, keep_torch_final_norms: bool = False) -> nn.Transformer:
    """An nn.Transformer (batch_first, ReLU, the same norm placement) holding copies of our two stacks.

    nn.Transformer is the encoder and decoder stacks only: the embeddings, the positional encoding
    and the final projection (generator) stay outside it (see nn_transformer_logits). It always ends
    each stack with a LayerNorm (encoder.norm, decoder.norm), in post-norm too, where the paper and
    our model have none (each post-norm layer already ends in its own norm). Here those two get
    copies of our final norms for a pre-norm model, and become nn.Identity for a post-norm model,
    unless keep_torch_final_norms=True leaves PyTorch's own (fresh: weight 1, bias 0).
    """
    if not isinstance(model, Transformer):
        raise ValueError(f"model must be a helpers.Transformer, got {type(model).__name__}")
    if not isinstance(keep_torch_final_norms, bool):
        raise ValueError(f"keep_torch_final_norms must be True or False, got {keep_torch_final_norms!r}")
    weight = model.generator.weight
    with warnings.catch_warnings():  # nn.TransformerEncoder warns that pre-norm disables its nested-tensor path
        warnings.simplefilter("ignore")
        theirs = nn.Transformer(model.d_model, model.num_heads, model.num_layers, model.num_layers, model.d_ff,
                                dropout=model.dropout_p, batch_first=True, norm_first=model.norm_first)
    theirs = theirs.to(device=weight.device, dtype=weight.dtype)  # before copying
    for i, layer in enumerate(model.encoder.layers):
        theirs.encoder.layers[i] = to_torch_encoder_layer(layer)
    for i, layer in enumerate(model.decoder.layers):
        theirs.decoder.layers[i] = to_torch_decoder_layer(layer)
    for ours, stack in ((model.encoder, theirs.encoder), (model.decoder, theirs.decoder)):
        if model.norm_first:
            with torch.no_grad():
                stack.norm.weight.copy_(ours.norm.weight)
                stack.norm.bias.copy_(ours.norm.bias)
        elif not keep_torch_final_norms:
            stack.norm = nn.Identity()
    return theirs.train(model.training)


def nn_transformer_logits(model: Transformer, theirs: nn.Transformer, src: torch.Tensor,
                          tgt: torch.Tensor) -> torch.Tensor:
    """model's embeddings, positional encoding and generator around theirs (from to_nn_transformer).

    src (batch, L_src), tgt (batch, L_tgt) token ids -> logits (batch, L_tgt, tgt_vocab_size), to
    compare with model(src, tgt). PyTorch's masks mean the opposite of ours (True = blocked): the
    causal mask is passed as tgt_mask, the padding as the three *_key_padding_mask arguments.
    """
    if not isinstance(model, Transformer):
        raise ValueError(f"model must be a helpers.Transformer, got {type(model).__name__}")
    if not isinstance(theirs, nn.Transformer):
        raise ValueError(f"theirs must be an nn.Transformer (see to_nn_transformer), got {type(theirs).__name__}")
    src_pad = ~model.make_src_mask(src)[:, 0, 0, :]  # (batch, L_src), True = padding
    model.make_tgt_mask(tgt)  # checks the target ids
    tgt_pad = ~padding_mask(tgt, model.pad_id)[:, 0, 0, :]  # (batch, L_tgt)
    future = ~causal_mask_torch(tgt.shape[1], device=tgt.device)  # (L_tgt, L_tgt), True = a later position
    scale = math.sqrt(model.d_model)
    x = model.positional(model.src_embed(src) * scale)
    y = model.positional(model.tgt_embed(tgt) * scale)
    with warnings.catch_warnings():  # the nested-tensor fast path of eval mode may announce itself
        warnings.simplefilter("ignore")
        out = theirs(x, y, tgt_mask=future, src_key_padding_mask=src_pad, tgt_key_padding_mask=tgt_pad,
                     memory_key_padding_mask=src_pad)
    return model.generator(out)


__all__ = ["copy_linear_and_norms", "nn_transformer_logits", "to_nn_transformer", "to_torch_decoder_layer",
           "to_torch_encoder_layer"]
