"""The encoder-decoder Transformer of "Attention Is All You Need" (Vaswani et al. 2017, section 3).

    src (batch, L_src) ids -> Embedding * sqrt(d_model) + PE -> Dropout -> Encoder (N x EncoderLayer) -> memory
    tgt (batch, L_tgt) ids -> Embedding * sqrt(d_model) + PE -> Dropout -> Decoder (N x DecoderLayer, reads memory)
                           -> Linear -> logits (batch, L_tgt, tgt_vocab_size)

Every sub-layer (attention or feed-forward) is wrapped in a residual connection and a layer
normalisation. The paper puts the norm AFTER the addition (post-norm):

    x = LayerNorm(x + Dropout(Sublayer(x)))

most models since 2019 put it BEFORE the sub-layer (pre-norm), and add one final LayerNorm at
the end of each stack:

    x = x + Dropout(Sublayer(LayerNorm(x)))

Every layer and the whole model take ``norm_first`` to switch (False = the paper).

Every LayerNorm is ours (``LayerNorm`` below: mean and biased variance over the last axis, eps
inside the square root), with parameters named as ``nn.LayerNorm``'s (weight, bias), so the state
dicts of the two load into each other.

Sub-module names follow ``nn.TransformerEncoderLayer`` / ``nn.TransformerDecoderLayer`` where
they can (norm1, dropout1, ...; the feed-forward's linear1 and linear2 sit in ``ff``), and
``to_torch_encoder_layer`` / ``to_torch_decoder_layer`` / ``to_nn_transformer`` copy our weights
into PyTorch's modules. Masks are boolean, True = may attend (see helpers.masking).
"""

from __future__ import annotations

import math
import warnings
from collections import OrderedDict

import torch
from torch import nn

from .masking import causal_mask_torch, decoder_mask, padding_mask
from .multi_head import MultiHeadAttention, to_nn_multihead_attention
from .positional import PositionalEncoding
from .validation import floating, integer_ids, positive_float, positive_int, probability, shape_str, tensor


class LayerNorm(nn.Module):
    """Layer normalisation over the last axis (Ba, Kiros and Hinton, 2016), written out:

        LayerNorm(x) = weight * (x - mean) / sqrt(var + eps) + bias

    mean and var are taken over the last axis (the d_model features of one position), var is the
    BIASED variance (the mean of the squared deviations, divided by d_model), and eps sits inside
    the square root: exactly what nn.LayerNorm computes. weight (the gain, starts at 1) and bias
    (starts at 0) have d_model entries each and nn.LayerNorm's names, so its state dict loads.

    x: (..., d_model) -> same shape.
    """

    def __init__(self, d_model: int, eps: float = 1e-5):
        super().__init__()
        self.d_model = positive_int(d_model, "d_model")
        self.eps = positive_float(eps, "eps")
        self.weight = nn.Parameter(torch.ones(self.d_model))
        self.bias = nn.Parameter(torch.zeros(self.d_model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not isinstance(x, torch.Tensor) or x.dim() == 0 or x.shape[-1] != self.d_model:
            shape = shape_str(x.shape) if hasattr(x, "shape") else type(x).__name__
            raise ValueError(f"x must be a tensor of shape (..., d_model={self.d_model}), got {shape}")
        if not x.dtype.is_floating_point:
            raise ValueError(f"x must be a floating-point tensor (mean and variance need fractions), got dtype "
                             f"{x.dtype}: convert it with x.float()")
        mean = x.mean(dim=-1, keepdim=True)  # (..., 1)
        var = x.var(dim=-1, correction=0, keepdim=True)  # (..., 1), biased: the sum of squares / d_model
        return self.weight * (x - mean) / torch.sqrt(var + self.eps) + self.bias

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, eps={self.eps}"


class PositionwiseFeedForward(nn.Module):
    """FFN(x) = max(0, x W_1 + b_1) W_2 + b_2, the same two linear maps at every position.

    x: (batch, L, d_model) -> (batch, L, d_model); W_1: d_model -> d_ff, W_2: d_ff -> d_model.
    As in PyTorch's layers, dropout is also applied to the hidden activations (training only).
    """

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.1):
        super().__init__()
        self.d_model = positive_int(d_model, "d_model")
        self.d_ff = positive_int(d_ff, "d_ff")
        self.linear1 = nn.Linear(self.d_model, self.d_ff)
        self.linear2 = nn.Linear(self.d_ff, self.d_model)
        self.dropout = nn.Dropout(probability(dropout, "dropout"))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        tensor(x, "x", f"of shape (batch, L, d_model={self.d_model})")
        if x.shape[-1] != self.d_model:
            raise ValueError(f"x must have shape (batch, L, d_model={self.d_model}), got {shape_str(x.shape)}")
        floating(x, "x")
        return self.linear2(self.dropout(torch.relu(self.linear1(x))))


class EncoderLayer(nn.Module):
    """Self-attention then feed-forward, each with a residual connection and a LayerNorm.

    forward(x, src_mask=None): x (batch, L_src, d_model); src_mask bool (batch, 1, 1, L_src),
    True = real token -> (batch, L_src, d_model).
    Post-norm (paper, norm_first=False):          Pre-norm (norm_first=True):
        x = norm1(x + dropout1(self_attn(x)))         x = x + dropout1(self_attn(norm1(x)))
        x = norm2(x + dropout2(ff(x)))                x = x + dropout2(ff(norm2(x)))
    """

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.1, norm_first: bool = False):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.ff = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.norm1 = LayerNorm(d_model)
        self.norm2 = LayerNorm(d_model)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)
        self.norm_first = bool(norm_first)

    def forward(self, x: torch.Tensor, src_mask: torch.Tensor | None = None) -> torch.Tensor:
        if self.norm_first:
            h = self.norm1(x)
            x = x + self.dropout1(self.self_attn(h, h, h, src_mask))
            x = x + self.dropout2(self.ff(self.norm2(x)))
        else:
            x = self.norm1(x + self.dropout1(self.self_attn(x, x, x, src_mask)))
            x = self.norm2(x + self.dropout2(self.ff(x)))
        return x


class DecoderLayer(nn.Module):
    """Masked self-attention, encoder-decoder (cross) attention, feed-forward; each in residual + LayerNorm.

    forward(x, memory, tgt_mask=None, memory_mask=None):
        x (batch, L_tgt, d_model) the decoder's stream; memory (batch, L_src, d_model) the encoder output;
        tgt_mask bool (batch, 1, L_tgt, L_tgt) causal & padding; memory_mask bool (batch, 1, 1, L_src)
        -> (batch, L_tgt, d_model).
    In cross-attention the queries come from the decoder (x), the keys and values from memory.
    """

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.1, norm_first: bool = False):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.cross_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.ff = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.norm1 = LayerNorm(d_model)
        self.norm2 = LayerNorm(d_model)
        self.norm3 = LayerNorm(d_model)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)
        self.dropout3 = nn.Dropout(dropout)
        self.norm_first = bool(norm_first)

    def forward(self, x: torch.Tensor, memory: torch.Tensor, tgt_mask: torch.Tensor | None = None,
                memory_mask: torch.Tensor | None = None) -> torch.Tensor:
        three_d = isinstance(x, torch.Tensor) and x.dim() == 3
        _check_memory(x.shape[0] if three_d else "batch", x.shape[-1] if three_d else "d_model", memory)
        if self.norm_first:
            h = self.norm1(x)
            x = x + self.dropout1(self.self_attn(h, h, h, tgt_mask))
            x = x + self.dropout2(self.cross_attn(self.norm2(x), memory, memory, memory_mask))
            x = x + self.dropout3(self.ff(self.norm3(x)))
        else:
            x = self.norm1(x + self.dropout1(self.self_attn(x, x, x, tgt_mask)))
            x = self.norm2(x + self.dropout2(self.cross_attn(x, memory, memory, memory_mask)))
            x = self.norm3(x + self.dropout3(self.ff(x)))
        return x


def _check_memory(batch: int | str, d_model: int | str, memory: torch.Tensor) -> None:
    """memory must be the encoder output for the same batch: (batch, L_src, d_model)."""
    expected = f"(batch={batch}, L_src, d_model={d_model}) (the encoder output for the same batch)"
    tensor(memory, "memory", f"of shape {expected}")
    if memory.dim() != 3 or memory.shape[0] != batch or memory.shape[-1] != d_model:
        raise ValueError(f"memory must have shape {expected}, got {shape_str(memory.shape)}")
    floating(memory, "memory")


class Encoder(nn.Module):
    """N EncoderLayers; with norm_first a final LayerNorm (post-norm layers already end in one).

    forward(x, src_mask=None): (batch, L_src, d_model) -> (batch, L_src, d_model).
    """

    def __init__(self, num_layers: int, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.1,
                 norm_first: bool = False):
        super().__init__()
        num_layers = positive_int(num_layers, "num_layers")
        self.layers = nn.ModuleList(EncoderLayer(d_model, num_heads, d_ff, dropout, norm_first)
                                    for _ in range(num_layers))
        self.norm = LayerNorm(d_model) if norm_first else nn.Identity()

    def forward(self, x: torch.Tensor, src_mask: torch.Tensor | None = None) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x, src_mask)
        return self.norm(x)


class Decoder(nn.Module):
    """N DecoderLayers, each reading the same encoder output; with norm_first a final LayerNorm.

    forward(x, memory, tgt_mask=None, memory_mask=None): (batch, L_tgt, d_model) -> same shape.
    """

    def __init__(self, num_layers: int, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.1,
                 norm_first: bool = False):
        super().__init__()
        num_layers = positive_int(num_layers, "num_layers")
        self.layers = nn.ModuleList(DecoderLayer(d_model, num_heads, d_ff, dropout, norm_first)
                                    for _ in range(num_layers))
        self.norm = LayerNorm(d_model) if norm_first else nn.Identity()

    def forward(self, x: torch.Tensor, memory: torch.Tensor, tgt_mask: torch.Tensor | None = None,
                memory_mask: torch.Tensor | None = None) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x, memory, tgt_mask, memory_mask)
        return self.norm(x)


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
    """

    def __init__(self, src_vocab_size: int, tgt_vocab_size: int, d_model: int = 512, num_heads: int = 8,
                 num_layers: int = 6, d_ff: int = 2048, dropout: float = 0.1, max_len: int = 512,
                 share_embeddings: bool = False, pad_id: int = 0, norm_first: bool = False):
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
        self.positional = PositionalEncoding(self.d_model, self.max_len, self.dropout_p)
        self.encoder = Encoder(num_layers, d_model, num_heads, d_ff, dropout, norm_first)
        self.decoder = Decoder(num_layers, d_model, num_heads, d_ff, dropout, norm_first)
        self.generator = nn.Linear(self.d_model, self.tgt_vocab_size)
        self._reset_parameters()
        if self.share_embeddings:
            self.generator.weight = self.src_embed.weight  # one matrix, three uses

    def _reset_parameters(self) -> None:
        """Xavier-uniform for every matrix (as nn.Transformer and the Annotated Transformer do), then the
        embeddings drawn from N(0, 1/d_model): after the sqrt(d_model) scaling their entries have
        standard deviation 1, the scale of the positional encoding's sines and cosines."""
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
        _check_memory(tgt.shape[0], self.d_model, memory)
        return self.generator(self.decoder(y, memory, tgt_mask, src_mask))

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        src_mask = self.make_src_mask(src)
        if isinstance(tgt, torch.Tensor) and tgt.dim() == 2 and tgt.shape[0] != src.shape[0]:
            raise ValueError(f"src and tgt must have the same batch size, got {src.shape[0]} and {tgt.shape[0]} "
                             f"(row i of tgt is the translation of row i of src)")
        return self.decode(tgt, self.encode(src, src_mask), src_mask, self.make_tgt_mask(tgt))

    def config(self) -> dict:
        """The constructor arguments, enough to rebuild the model: Transformer(**model.config())."""
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


# ---------------------------------------------------------------------- PyTorch's own layers
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
    _copy_common(layer, theirs, ("norm1", "norm2"))
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
    _copy_common(layer, theirs, ("norm1", "norm2", "norm3"))
    return theirs.train(layer.training)


def _copy_common(ours: nn.Module, theirs: nn.Module, norms: tuple[str, ...]) -> None:
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
    tgt_pad = ~padding_mask(model._ids(tgt, "tgt"), model.pad_id)[:, 0, 0, :]  # (batch, L_tgt)
    future = ~causal_mask_torch(tgt.shape[1], device=tgt.device)  # (L_tgt, L_tgt), True = a later position
    scale = math.sqrt(model.d_model)
    x = model.positional(model.src_embed(src) * scale)
    y = model.positional(model.tgt_embed(tgt) * scale)
    with warnings.catch_warnings():  # the nested-tensor fast path of eval mode may announce itself
        warnings.simplefilter("ignore")
        out = theirs(x, y, tgt_mask=future, src_key_padding_mask=src_pad, tgt_key_padding_mask=tgt_pad,
                     memory_key_padding_mask=src_pad)
    return model.generator(out)


def attention_maps(model: Transformer, src: torch.Tensor, tgt: torch.Tensor) -> dict[str, list[torch.Tensor]]:
    """Run the model once (eval mode, no gradient) and collect every layer's attention weights.

    Returns {"encoder": [(batch, h, L_src, L_src) per layer], "decoder_self": [(batch, h, L_tgt, L_tgt)],
    "cross": [(batch, h, L_tgt, L_src)]}: row = query (the position that looks), column = key.
    """
    was_training = model.training
    model.eval()
    with torch.no_grad():
        model(src, tgt)
    model.train(was_training)
    return {
        "encoder": [layer.self_attn.attention_weights.cpu() for layer in model.encoder.layers],
        "decoder_self": [layer.self_attn.attention_weights.cpu() for layer in model.decoder.layers],
        "cross": [layer.cross_attn.attention_weights.cpu() for layer in model.decoder.layers],
    }


__all__ = ["LayerNorm", "PositionwiseFeedForward", "EncoderLayer", "DecoderLayer", "Encoder", "Decoder",
           "Transformer", "PAPER_TABLE3", "PAPER_VOCAB_SIZE", "count_parameters", "parameter_breakdown",
           "to_torch_encoder_layer", "to_torch_decoder_layer", "to_nn_transformer", "nn_transformer_logits",
           "attention_maps"]
