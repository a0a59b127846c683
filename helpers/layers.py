"""The layers of the Transformer (Vaswani et al. 2017, section 3.1): LayerNorm, the position-wise feed-forward
network, the encoder and decoder layers, and their stacks. The whole model is in ``transformer.py``.

Every sub-layer (attention or feed-forward) is wrapped in a residual connection and a layer
normalisation. The paper puts the norm AFTER the addition (post-norm):

    x = LayerNorm(x + Dropout(Sublayer(x)))

most models since 2019 put it BEFORE the sub-layer (pre-norm), and add one final LayerNorm at
the end of each stack:

    x = x + Dropout(Sublayer(LayerNorm(x)))

Every layer and stack takes ``norm_first`` to switch (False = the paper).

Every LayerNorm is ours (``LayerNorm`` below: mean and biased variance over the last axis, eps
inside the square root), with parameters named as ``nn.LayerNorm``'s (weight, bias), so the state
dicts of the two load into each other.

A layer takes its parts as arguments, the references by default: ``attention`` (called as
attention(d_model, num_heads, dropout)), ``layer_norm`` (layer_norm(d_model)) and ``feed_forward``
(feed_forward(d_model, d_ff, dropout)); a stack takes ``layer`` (layer(d_model, num_heads, d_ff, dropout,
norm_first)) and the ``layer_norm`` of its final norm. Notebook 06 builds the student's parts into the
reference model this way (helpers.student_code.your_recipe).

Sub-module names follow ``nn.TransformerEncoderLayer`` / ``nn.TransformerDecoderLayer`` where
they can (norm1, dropout1, ...; the feed-forward's linear1 and linear2 sit in ``ff``). Masks are
boolean, True = may attend (see helpers.masking).
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import nn

from .multi_head import MultiHeadAttention
from .validation import floating, positive_float, positive_int, probability, shape_str, tensor


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

    attention, layer_norm, feed_forward: the classes of its parts (see the module's docstring).
    """

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.1, norm_first: bool = False, *,
                 attention: Callable[..., nn.Module] = MultiHeadAttention,
                 layer_norm: Callable[..., nn.Module] = LayerNorm,
                 feed_forward: Callable[..., nn.Module] = PositionwiseFeedForward):
        super().__init__()
        self.self_attn = attention(d_model, num_heads, dropout)
        self.ff = feed_forward(d_model, d_ff, dropout)
        self.norm1 = layer_norm(d_model)
        self.norm2 = layer_norm(d_model)
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
    attention, layer_norm, feed_forward: the classes of its parts (see the module's docstring).
    """

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.1, norm_first: bool = False, *,
                 attention: Callable[..., nn.Module] = MultiHeadAttention,
                 layer_norm: Callable[..., nn.Module] = LayerNorm,
                 feed_forward: Callable[..., nn.Module] = PositionwiseFeedForward):
        super().__init__()
        self.self_attn = attention(d_model, num_heads, dropout)
        self.cross_attn = attention(d_model, num_heads, dropout)
        self.ff = feed_forward(d_model, d_ff, dropout)
        self.norm1 = layer_norm(d_model)
        self.norm2 = layer_norm(d_model)
        self.norm3 = layer_norm(d_model)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)
        self.dropout3 = nn.Dropout(dropout)
        self.norm_first = bool(norm_first)

    def forward(self, x: torch.Tensor, memory: torch.Tensor, tgt_mask: torch.Tensor | None = None,
                memory_mask: torch.Tensor | None = None) -> torch.Tensor:
        three_d = isinstance(x, torch.Tensor) and x.dim() == 3
        check_memory(x.shape[0] if three_d else "batch", x.shape[-1] if three_d else "d_model", memory)
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


def check_memory(batch: int | str, d_model: int | str, memory: torch.Tensor) -> None:
    """memory must be the encoder output for the same batch: (batch, L_src, d_model)."""
    expected = f"(batch={batch}, L_src, d_model={d_model}) (the encoder output for the same batch)"
    tensor(memory, "memory", f"of shape {expected}")
    if memory.dim() != 3 or memory.shape[0] != batch or memory.shape[-1] != d_model:
        raise ValueError(f"memory must have shape {expected}, got {shape_str(memory.shape)}")
    floating(memory, "memory")


class Encoder(nn.Module):
    """N encoder layers (layer(d_model, num_heads, d_ff, dropout, norm_first) each, EncoderLayer by default);
    with norm_first a final layer_norm(d_model) (post-norm layers already end in one).

    forward(x, src_mask=None): (batch, L_src, d_model) -> (batch, L_src, d_model).
    """

    def __init__(self, num_layers: int, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.1,
                 norm_first: bool = False, *, layer: Callable[..., nn.Module] = EncoderLayer,
                 layer_norm: Callable[..., nn.Module] = LayerNorm):
        super().__init__()
        num_layers = positive_int(num_layers, "num_layers")
        self.layers = nn.ModuleList(layer(d_model, num_heads, d_ff, dropout, norm_first) for _ in range(num_layers))
        self.norm = layer_norm(d_model) if norm_first else nn.Identity()

    def forward(self, x: torch.Tensor, src_mask: torch.Tensor | None = None) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x, src_mask)
        return self.norm(x)


class Decoder(nn.Module):
    """N decoder layers (DecoderLayer by default), each reading the same encoder output; with norm_first a
    final layer_norm(d_model).

    forward(x, memory, tgt_mask=None, memory_mask=None): (batch, L_tgt, d_model) -> same shape.
    """

    def __init__(self, num_layers: int, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.1,
                 norm_first: bool = False, *, layer: Callable[..., nn.Module] = DecoderLayer,
                 layer_norm: Callable[..., nn.Module] = LayerNorm):
        super().__init__()
        num_layers = positive_int(num_layers, "num_layers")
        self.layers = nn.ModuleList(layer(d_model, num_heads, d_ff, dropout, norm_first) for _ in range(num_layers))
        self.norm = layer_norm(d_model) if norm_first else nn.Identity()

    def forward(self, x: torch.Tensor, memory: torch.Tensor, tgt_mask: torch.Tensor | None = None,
                memory_mask: torch.Tensor | None = None) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x, memory, tgt_mask, memory_mask)
        return self.norm(x)


__all__ = ["Decoder", "DecoderLayer", "Encoder", "EncoderLayer", "LayerNorm", "PositionwiseFeedForward",
           "check_memory"]
