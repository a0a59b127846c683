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

Sub-module names follow ``nn.TransformerEncoderLayer`` / ``nn.TransformerDecoderLayer`` where
they can (norm1, dropout1, ...; the feed-forward's linear1 and linear2 sit in ``ff``), and
``to_torch_encoder_layer`` / ``to_torch_decoder_layer`` copy our weights into PyTorch's layers.
Masks are boolean, True = may attend (see helpers.masking).
"""

from __future__ import annotations

import math
from collections import OrderedDict

import torch
from torch import nn

from .masking import decoder_mask, padding_mask
from .multi_head import MultiHeadAttention, to_nn_multihead_attention
from .positional import PositionalEncoding
from .validation import positive_int, probability, shape_str


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
        if x.shape[-1] != self.d_model:
            raise ValueError(f"x must have shape (batch, L, d_model={self.d_model}), got {shape_str(x.shape)}")
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
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
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
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.norm3 = nn.LayerNorm(d_model)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)
        self.dropout3 = nn.Dropout(dropout)
        self.norm_first = bool(norm_first)

    def forward(self, x: torch.Tensor, memory: torch.Tensor, tgt_mask: torch.Tensor | None = None,
                memory_mask: torch.Tensor | None = None) -> torch.Tensor:
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
        self.norm = nn.LayerNorm(d_model) if norm_first else nn.Identity()

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
        self.norm = nn.LayerNorm(d_model) if norm_first else nn.Identity()

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
    3.4). share_embeddings=True (one vocabulary for both sides) ties the source embedding, the
    target embedding and the pre-softmax projection to one matrix, as in the paper.
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
        """Xavier-uniform for every matrix (as nn.Transformer and the Annotated Transformer do)."""
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)

    # ------------------------------------------------------------------ masks
    def _ids(self, ids: torch.Tensor, name: str) -> torch.Tensor:
        if not isinstance(ids, torch.Tensor) or ids.dim() != 2:
            shape = shape_str(ids.shape) if hasattr(ids, "shape") else type(ids).__name__
            raise ValueError(f"{name} must be a tensor of token ids of shape (batch, L_{name}), got {shape}")
        if ids.dtype.is_floating_point:
            raise ValueError(f"{name} must hold integer token ids, got dtype {ids.dtype}")
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
        return self.generator(self.decoder(y, memory, tgt_mask, src_mask))

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        src_mask = self.make_src_mask(src)
        return self.decode(tgt, self.encode(src, src_mask), src_mask, self.make_tgt_mask(tgt))

    def config(self) -> dict:
        """The constructor arguments, enough to rebuild the model: Transformer(**model.config())."""
        return dict(src_vocab_size=self.src_vocab_size, tgt_vocab_size=self.tgt_vocab_size, d_model=self.d_model,
                    num_heads=self.num_heads, num_layers=self.num_layers, d_ff=self.d_ff, dropout=self.dropout_p,
                    max_len=self.max_len, share_embeddings=self.share_embeddings, pad_id=self.pad_id,
                    norm_first=self.norm_first)


# ---------------------------------------------------------------------- counting parameters
def count_parameters(module: nn.Module) -> int:
    """Number of trainable numbers; a tied matrix counts once."""
    return sum(p.numel() for p in module.parameters() if p.requires_grad)


def parameter_breakdown(model: Transformer) -> "OrderedDict[str, int]":
    """Where the parameters of a Transformer sit, in groups that add up to count_parameters(model)."""
    groups: OrderedDict[str, int] = OrderedDict()

    def add(name: str, *modules: nn.Module) -> None:
        groups[name] = groups.get(name, 0) + sum(count_parameters(m) for m in modules)

    if model.share_embeddings:
        add("shared embedding = output projection (V x d_model)", model.src_embed)
        groups["output projection bias (V)"] = model.generator.bias.numel()
    else:
        add("source embedding (V_src x d_model)", model.src_embed)
        add("target embedding (V_tgt x d_model)", model.tgt_embed)
        add("output projection (d_model x V_tgt + V_tgt)", model.generator)
    enc, dec = model.encoder.layers, model.decoder.layers
    add(f"encoder self-attention ({len(enc)} x 4 d_model^2 + biases)", *[layer.self_attn for layer in enc])
    add(f"encoder feed-forward ({len(enc)} x 2 d_model d_ff + biases)", *[layer.ff for layer in enc])
    add(f"encoder layer norms ({len(enc)} x 2 x 2 d_model)", *[m for layer in enc for m in (layer.norm1, layer.norm2)])
    add(f"decoder masked self-attention ({len(dec)} x 4 d_model^2 + biases)", *[layer.self_attn for layer in dec])
    add(f"decoder cross-attention ({len(dec)} x 4 d_model^2 + biases)", *[layer.cross_attn for layer in dec])
    add(f"decoder feed-forward ({len(dec)} x 2 d_model d_ff + biases)", *[layer.ff for layer in dec])
    add(f"decoder layer norms ({len(dec)} x 3 x 2 d_model)",
        *[m for layer in dec for m in (layer.norm1, layer.norm2, layer.norm3)])
    if model.norm_first:
        add("final layer norms (2 x 2 d_model)", model.encoder.norm, model.decoder.norm)
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


__all__ = ["PositionwiseFeedForward", "EncoderLayer", "DecoderLayer", "Encoder", "Decoder", "Transformer",
           "count_parameters", "parameter_breakdown", "to_torch_encoder_layer", "to_torch_decoder_layer",
           "attention_maps"]
