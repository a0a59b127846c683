"""The encoder-decoder Transformer of "Attention Is All You Need" (Vaswani et al. 2017, section 3).

    src (batch, L_src) ids -> Embedding * sqrt(d_model) + PE -> Dropout -> Encoder (N x EncoderLayer) -> memory
    tgt (batch, L_tgt) ids -> Embedding * sqrt(d_model) + PE -> Dropout -> Decoder (N x DecoderLayer, reads memory)
                           -> Linear -> logits (batch, L_tgt, tgt_vocab_size)

The layers (LayerNorm, PositionwiseFeedForward, EncoderLayer, DecoderLayer, Encoder, Decoder) are in
``layers.py``, and imported here too; the copies of our weights into PyTorch's own modules are in
``torch_copies.py``. Here: the model, its parameter count beside the paper's Table 3, and its attention maps.

The model takes its parts as arguments, the references by default: the attention, LayerNorm and
feed-forward classes of its layers, the encoder and decoder layer classes themselves, and the function
that computes the positional encoding. Notebook 06 trains the student's parts this way
(helpers.student_code.your_recipe); the weights are created in the same order whatever the parts, and
the default model is the one every notebook uses.
"""

from __future__ import annotations

import functools
import math
from collections import OrderedDict
from typing import Any, Callable

import torch
from torch import nn

from .layers import Decoder, DecoderLayer, Encoder, EncoderLayer, LayerNorm, PositionwiseFeedForward, check_memory
from .masking import decoder_mask, padding_mask
from .multi_head import MultiHeadAttention
from .positional import PositionalEncoding, positional_encoding
from .validation import integer_ids, positive_int, probability, shape_str, tensor


class Transformer(nn.Module):
    """The whole encoder-decoder model: token ids in, next-token logits out.

    forward(src, tgt): src (batch, L_src) and tgt (batch, L_tgt) token ids -> logits
    (batch, L_tgt, tgt_vocab_size); logits[:, t] predicts the token after tgt[:, :t+1]. The
    causal target mask and the padding masks (pad_id) are built here, from the ids.

    encode(src, src_mask=None) -> memory (batch, L_src, d_model)
    decode(tgt, memory, src_mask, tgt_mask=None) -> logits (batch, L_tgt, tgt_vocab_size)
    make_src_mask(src) -> bool (batch, 1, 1, L_src); make_tgt_mask(tgt) -> bool (batch, 1, L_tgt, L_tgt)

    Embeddings are multiplied by sqrt(d_model) before the positional encoding is added (section
    3.4); they are initialised from N(0, 1/d_model), so the scaled entries start with standard
    deviation 1, the scale of the encoding's sines and cosines. share_embeddings=True (one
    vocabulary for both sides) ties the source embedding, the target embedding and the pre-softmax
    projection to one matrix, as in the paper.

    Its parts (keyword only; the references by default):
        attention(d_model, num_heads, dropout), layer_norm(d_model), feed_forward(d_model, d_ff, dropout):
            the classes of the sub-layers of the reference EncoderLayer and DecoderLayer (layer_norm also
            builds the final norms of a pre-norm model);
        encoder_layer, decoder_layer (d_model, num_heads, d_ff, dropout, norm_first): the classes of the N
            encoder and N decoder layers; None means the reference layer built of the three parts above (a
            given layer class builds its own parts);
        encoding(max_len, d_model): the positional encoding matrix (helpers.positional_encoding).
    """

    def __init__(self, src_vocab_size: int, tgt_vocab_size: int, d_model: int = 512, num_heads: int = 8,
                 num_layers: int = 6, d_ff: int = 2048, dropout: float = 0.1, max_len: int = 512,
                 share_embeddings: bool = False, pad_id: int = 0, norm_first: bool = False, *,
                 attention: Callable[..., nn.Module] = MultiHeadAttention,
                 layer_norm: Callable[..., nn.Module] = LayerNorm,
                 feed_forward: Callable[..., nn.Module] = PositionwiseFeedForward,
                 encoder_layer: Callable[..., nn.Module] | None = None,
                 decoder_layer: Callable[..., nn.Module] | None = None,
                 encoding: Callable[[int, int], Any] = positional_encoding):
        super().__init__()
        self.src_vocab_size = positive_int(src_vocab_size, "src_vocab_size")
        self.tgt_vocab_size = positive_int(tgt_vocab_size, "tgt_vocab_size")
        self.d_model = positive_int(d_model, "d_model", even=True)
        self.num_heads = positive_int(num_heads, "num_heads")
        if self.d_model % self.num_heads:
            raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
        self.num_layers = positive_int(num_layers, "num_layers")
        self.d_ff = positive_int(d_ff, "d_ff")
        self.dropout_p = probability(dropout, "dropout")
        self.max_len = positive_int(max_len, "max_len")
        if isinstance(pad_id, bool) or not isinstance(pad_id, int) or not 0 <= pad_id < min(src_vocab_size,
                                                                                               tgt_vocab_size):
            raise ValueError(f"pad_id must be a token id in [0, {min(src_vocab_size, tgt_vocab_size)}), got {pad_id!r}")
        self.pad_id = pad_id
        self.share_embeddings = bool(share_embeddings)
        if self.share_embeddings and src_vocab_size != tgt_vocab_size:
            raise ValueError("share_embeddings=True needs one shared vocabulary: src_vocab_size "
                             f"({src_vocab_size}) must equal tgt_vocab_size ({tgt_vocab_size})")
        self.norm_first = bool(norm_first)

        self.src_embed = nn.Embedding(self.src_vocab_size, self.d_model)
        self.tgt_embed = self.src_embed if self.share_embeddings else nn.Embedding(self.tgt_vocab_size, self.d_model)
        self.positional = PositionalEncoding(self.d_model, self.max_len, self.dropout_p, encoding)
        parts = dict(attention=attention, layer_norm=layer_norm, feed_forward=feed_forward)
        self.encoder = Encoder(num_layers, d_model, num_heads, d_ff, dropout, norm_first, layer_norm=layer_norm,
                               layer=encoder_layer or functools.partial(EncoderLayer, **parts))
        self.decoder = Decoder(num_layers, d_model, num_heads, d_ff, dropout, norm_first, layer_norm=layer_norm,
                               layer=decoder_layer or functools.partial(DecoderLayer, **parts))
        self.generator = nn.Linear(self.d_model, self.tgt_vocab_size)
        self._reset_parameters()
        if self.share_embeddings:
            self.generator.weight = self.src_embed.weight  # one matrix, three uses

    def _reset_parameters(self) -> None:
        """Xavier-uniform for every matrix, as the Annotated Transformer does (nn.Transformer too, but it
        draws W^Q, W^K, W^V as one packed (3 d_model, d_model) matrix, whose bound sqrt(6 / (4 d_model)) is
        1/sqrt(2) of ours), then the embeddings drawn from N(0, 1/d_model): after the sqrt(d_model) scaling
        their entries have standard deviation 1, the scale of the positional encoding's sines and cosines."""
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)
        nn.init.normal_(self.src_embed.weight, std=self.d_model ** -0.5)
        if not self.share_embeddings:
            nn.init.normal_(self.tgt_embed.weight, std=self.d_model ** -0.5)

    # ------------------------------------------------------------------ masks
    def _ids(self, ids: torch.Tensor, name: str) -> torch.Tensor:
        tensor(ids, name, f"of token ids of shape (batch, L_{name})")
        if ids.dim() != 2:
            shape = shape_str(ids.shape) if hasattr(ids, "shape") else type(ids).__name__
            raise ValueError(f"{name} must be a tensor of token ids of shape (batch, L_{name}), got {shape}")
        integer_ids(ids, name)
        if ids.shape[1] == 0:
            raise ValueError(f"{name} must hold at least one token per row (shape (batch, L_{name}) with "
                             f"L_{name} >= 1), got shape {shape_str(ids.shape)}")
        if ids.shape[1] > self.max_len:
            raise ValueError(f"{name} has length {ids.shape[1]} > max_len={self.max_len}")
        vocab_size = self.src_vocab_size if name == "src" else self.tgt_vocab_size
        if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= vocab_size):
            raise ValueError(f"{name} must hold token ids in [0, {name}_vocab_size={vocab_size}), got ids from "
                             f"{int(ids.min())} to {int(ids.max())}")
        return ids

    def make_src_mask(self, src: torch.Tensor) -> torch.Tensor:
        """bool (batch, 1, 1, L_src): True for real source tokens (every query may look at them)."""
        return padding_mask(self._ids(src, "src"), self.pad_id)

    def make_tgt_mask(self, tgt: torch.Tensor) -> torch.Tensor:
        """bool (batch, 1, L_tgt, L_tgt): position i may look at j <= i, and not at padding."""
        return decoder_mask(self._ids(tgt, "tgt"), self.pad_id)

    # ------------------------------------------------------------------ the two halves
    def encode(self, src: torch.Tensor, src_mask: torch.Tensor | None = None) -> torch.Tensor:
        """src (batch, L_src) ids -> memory (batch, L_src, d_model)."""
        if src_mask is None:
            src_mask = self.make_src_mask(src)
        x = self.positional(self.src_embed(self._ids(src, "src")) * math.sqrt(self.d_model))
        return self.encoder(x, src_mask)

    def decode(self, tgt: torch.Tensor, memory: torch.Tensor, src_mask: torch.Tensor | None,
               tgt_mask: torch.Tensor | None = None) -> torch.Tensor:
        """tgt (batch, L_tgt) ids, memory (batch, L_src, d_model) -> logits (batch, L_tgt, tgt_vocab_size).

        src_mask (batch, 1, 1, L_src), from make_src_mask(src), hides the source padding from
        cross-attention (None: nothing hidden); tgt_mask defaults to make_tgt_mask(tgt).
        """
        if tgt_mask is None:
            tgt_mask = self.make_tgt_mask(tgt)
        y = self.positional(self.tgt_embed(self._ids(tgt, "tgt")) * math.sqrt(self.d_model))
        check_memory(tgt.shape[0], self.d_model, memory)
        return self.generator(self.decoder(y, memory, tgt_mask, src_mask))

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        src_mask = self.make_src_mask(src)
        if isinstance(tgt, torch.Tensor) and tgt.dim() == 2 and tgt.shape[0] != src.shape[0]:
            raise ValueError(f"src and tgt must have the same batch size, got {src.shape[0]} and {tgt.shape[0]} "
                             f"(row i of tgt is the translation of row i of src)")
        return self.decode(tgt, self.encode(src, src_mask), src_mask, self.make_tgt_mask(tgt))

    def config(self) -> dict:
        """The constructor's sizes, enough to rebuild a model of this shape: Transformer(**model.config()) (with
        the reference parts: the parts given to the constructor are not in it)."""
        return dict(src_vocab_size=self.src_vocab_size, tgt_vocab_size=self.tgt_vocab_size, d_model=self.d_model,
                    num_heads=self.num_heads, num_layers=self.num_layers, d_ff=self.d_ff, dropout=self.dropout_p,
                    max_len=self.max_len, share_embeddings=self.share_embeddings, pad_id=self.pad_id,
                    norm_first=self.norm_first)


# ---------------------------------------------------------------------- counting parameters
# Table 3 of the paper ("Variations on the Transformer architecture"): the base model, the rows (C)
# that change N, d_model or d_ff alone (h stays 8, so d_k = d_v = d_model / 8), and "big". Each row:
# (label, the Transformer keyword arguments that differ, the paper's column "params x 10^6"). The
# paper's models share one byte-pair vocabulary of "about 37000 tokens" between English and German.
PAPER_VOCAB_SIZE = 37_000
PAPER_TABLE3 = (
    ("base", dict(num_layers=6, d_model=512, num_heads=8, d_ff=2048), 65),
    ("(C) N=2", dict(num_layers=2, d_model=512, num_heads=8, d_ff=2048), 36),
    ("(C) N=4", dict(num_layers=4, d_model=512, num_heads=8, d_ff=2048), 50),
    ("(C) N=8", dict(num_layers=8, d_model=512, num_heads=8, d_ff=2048), 80),
    ("(C) d_model=256", dict(num_layers=6, d_model=256, num_heads=8, d_ff=2048), 28),
    ("(C) d_model=1024", dict(num_layers=6, d_model=1024, num_heads=8, d_ff=2048), 168),
    ("(C) d_ff=1024", dict(num_layers=6, d_model=512, num_heads=8, d_ff=1024), 53),
    ("(C) d_ff=4096", dict(num_layers=6, d_model=512, num_heads=8, d_ff=4096), 90),
    ("big", dict(num_layers=6, d_model=1024, num_heads=16, d_ff=4096), 213),
)


def count_parameters(module: nn.Module) -> int:
    """Number of trainable numbers; a tied matrix counts once."""
    return sum(p.numel() for p in module.parameters() if p.requires_grad)


def parameter_breakdown(model: Transformer) -> "OrderedDict[str, int]":
    """Where the parameters of a Transformer sit, in groups that add up to count_parameters(model)."""
    groups: OrderedDict[str, int] = OrderedDict()

    def add(name: str, *modules: nn.Module) -> None:
        groups[name] = groups.get(name, 0) + sum(count_parameters(m) for m in modules)

    from .i18n import tr

    if model.share_embeddings:
        add(tr("parameters:shared_embedding", "shared embedding = output projection (V x d_model)"), model.src_embed)
        groups[tr("parameters:output_bias", "output projection bias (V)")] = model.generator.bias.numel()
    else:
        add(tr("parameters:source_embedding", "source embedding (V_src x d_model)"), model.src_embed)
        add(tr("parameters:target_embedding", "target embedding (V_tgt x d_model)"), model.tgt_embed)
        add(tr("parameters:output_projection", "output projection (d_model x V_tgt + V_tgt)"), model.generator)
    enc, dec = model.encoder.layers, model.decoder.layers
    add(tr("parameters:encoder_self_attention", "encoder self-attention ({n} x 4 d_model^2 + biases)", n=len(enc)),
        *[layer.self_attn for layer in enc])
    add(tr("parameters:encoder_feed_forward", "encoder feed-forward ({n} x 2 d_model d_ff + biases)", n=len(enc)),
        *[layer.ff for layer in enc])
    add(tr("parameters:encoder_norms", "encoder layer norms ({n} x 2 x 2 d_model)", n=len(enc)),
        *[m for layer in enc for m in (layer.norm1, layer.norm2)])
    add(tr("parameters:decoder_self_attention", "decoder masked self-attention ({n} x 4 d_model^2 + biases)",
           n=len(dec)), *[layer.self_attn for layer in dec])
    add(tr("parameters:decoder_cross_attention", "decoder cross-attention ({n} x 4 d_model^2 + biases)", n=len(dec)),
        *[layer.cross_attn for layer in dec])
    add(tr("parameters:decoder_feed_forward", "decoder feed-forward ({n} x 2 d_model d_ff + biases)", n=len(dec)),
        *[layer.ff for layer in dec])
    add(tr("parameters:decoder_norms", "decoder layer norms ({n} x 3 x 2 d_model)", n=len(dec)),
        *[m for layer in dec for m in (layer.norm1, layer.norm2, layer.norm3)])
    if model.norm_first:
        add(tr("parameters:final_norms", "final layer norms (2 x 2 d_model)"), model.encoder.norm, model.decoder.norm)
    return groups


def attention_maps(model: Transformer, src: torch.Tensor, tgt: torch.Tensor) -> dict[str, list[torch.Tensor]]:
    """Run the model once (eval mode, no gradient) and collect every layer's attention weights.

    Each attention module stores its weights only while its ``store_attention_weights`` is True: it is turned
    on for this one call, then set back (and the stored weights dropped from the modules).
    Returns {"encoder": [(batch, h, L_src, L_src) per layer], "decoder_self": [(batch, h, L_tgt, L_tgt)],
    "cross": [(batch, h, L_tgt, L_src)]}: row = query (the position that looks), column = key.
    """
    groups = {"encoder": [layer.self_attn for layer in model.encoder.layers],
              "decoder_self": [layer.self_attn for layer in model.decoder.layers],
              "cross": [layer.cross_attn for layer in model.decoder.layers]}
    modules = [module for group in groups.values() for module in group]
    asked = [getattr(module, "store_attention_weights", False) for module in modules]
    was_training = model.training
    model.eval()
    try:
        for module in modules:
            module.store_attention_weights = True
        with torch.no_grad():
            model(src, tgt)
        return {name: [module.attention_weights.cpu() for module in group] for name, group in groups.items()}
    finally:
        model.train(was_training)
        for module, before in zip(modules, asked):
            module.store_attention_weights = before
            if not before:
                module.attention_weights = None


__all__ = ["PAPER_TABLE3", "PAPER_VOCAB_SIZE", "Decoder", "DecoderLayer", "Encoder", "EncoderLayer", "LayerNorm",
           "PositionwiseFeedForward", "Transformer", "attention_maps", "count_parameters", "parameter_breakdown"]
