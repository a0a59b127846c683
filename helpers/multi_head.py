"""Multi-head attention (Vaswani et al. 2017, section 3.2.2), in numpy and as a torch module.

    MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O,   head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V)

Row-vector convention: W^Q, W^K, W^V of shape (d_model, h * d_k) hold the h per-head matrices
(d_model, d_k) side by side (head i owns columns i*d_k .. (i+1)*d_k - 1); W^O is (h * d_v, d_model).
Here d_k = d_v = d_model / h, so all four are (d_model, d_model). The paper's projections are plain matrices,
without biases; the optional biases b_* of ``multi_head_attention`` are those nn.Linear adds in the torch module.

Masks are boolean, True = may attend, broadcastable to the weights (batch, h, L_q, L_k).
A fully masked query row gets zero weights and a zero attention output (never NaN).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from torch import nn

from .attention import as_float_array, scaled_dot_product_attention
from .validation import positive_int, probability, shape_str


# ----------------------------------------------------------------------------- numpy reference
def split_heads(x: Any, num_heads: int) -> np.ndarray:
    """(batch, L, d_model) -> (batch, h, L, d_k), with d_k = d_model / h.

    Reshape the last axis into (h, d_k), THEN swap the L and h axes. Reshaping straight to
    (batch, h, L, d_k) would silently mix positions across heads.
    """
    x = as_float_array(x, "x", 2, "(batch, L, d_model)")
    num_heads = positive_int(num_heads, "num_heads")
    d_model = x.shape[-1]
    if d_model % num_heads:
        raise ValueError(f"x has d_model={d_model}, not divisible by num_heads={num_heads}: "
                         f"x must have shape (batch, L, d_model) with d_model a multiple of num_heads")
    heads = x.reshape(*x.shape[:-1], num_heads, d_model // num_heads)  # (batch, L, h, d_k)
    return np.swapaxes(heads, -2, -3)  # (batch, h, L, d_k)


def combine_heads(x: Any) -> np.ndarray:
    """(batch, h, L, d_k) -> (batch, L, h * d_k): the inverse of split_heads (concatenate the heads)."""
    x = as_float_array(x, "x", 3, "(batch, h, L, d_k)")
    heads = np.swapaxes(x, -2, -3)  # (batch, L, h, d_k)
    return heads.reshape(*heads.shape[:-2], heads.shape[-2] * heads.shape[-1])


def _projection(w: Any, name: str, rows: int, cols: int) -> np.ndarray:
    w = as_float_array(w, name, 2, f"(d_model={rows}, d_model={cols})")
    if w.shape != (rows, cols):
        raise ValueError(f"{name} must have shape (d_model={rows}, d_model={cols}) (row-vector convention: "
                         f"x @ {name}), got {shape_str(w.shape)}")
    return w


def _bias(b: Any, name: str, size: int) -> Any:
    if b is None:
        return 0.0
    b = as_float_array(b, name)
    if b.shape != (size,):
        raise ValueError(f"{name} must have shape (d_model={size},), got {shape_str(b.shape)}")
    return b


def _reject_3d_mask(shape: tuple) -> None:
    """A (batch, L_q, L_k) mask would broadcast its batch axis onto the heads axis: refuse it."""
    if len(shape) == 3:
        raise ValueError(f"mask of shape {shape_str(shape)} is 3-D, so its first axis would line up with the heads, "
                         f"not the batch: give it shape (batch, 1, L_q, L_k) (mask[:, None]) or (L_q, L_k)")


def multi_head_attention(x_q: Any, x_kv: Any, w_q: Any, w_k: Any, w_v: Any, w_o: Any, num_heads: int,
                         mask: Any = None, *, b_q: Any = None, b_k: Any = None, b_v: Any = None,
                         b_o: Any = None) -> tuple[np.ndarray, np.ndarray]:
    """Multi-head attention in numpy, returning (output, weights).

    x_q: (batch, L_q, d_model) the queries' inputs; x_kv: (batch, L_k, d_model) the keys' and values'
    inputs (x_kv = x_q for self-attention). w_q, w_k, w_v, w_o: (d_model, d_model); optional biases
    b_*: (d_model,). mask: boolean, True = may attend, broadcastable to (batch, h, L_q, L_k).
    Returns output (batch, L_q, d_model) and weights (batch, h, L_q, L_k).
    """
    x_q = as_float_array(x_q, "x_q", 3, "(batch, L_q, d_model)")
    x_kv = as_float_array(x_kv, "x_kv", 3, "(batch, L_k, d_model)")
    if x_q.ndim != 3:
        raise ValueError(f"x_q must have shape (batch, L_q, d_model), got {shape_str(x_q.shape)}")
    d_model = x_q.shape[-1]
    if x_kv.ndim != 3 or x_kv.shape[-1] != d_model or x_kv.shape[0] != x_q.shape[0]:
        raise ValueError(f"x_kv must have shape (batch={x_q.shape[0]}, L_k, d_model={d_model}) to match x_q "
                         f"{shape_str(x_q.shape)}, got {shape_str(x_kv.shape)}")
    num_heads = positive_int(num_heads, "num_heads")
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}: each head needs "
                         f"d_k = d_model / num_heads dimensions")
    w_q, w_k, w_v, w_o = (_projection(w, n, d_model, d_model)
                          for w, n in ((w_q, "w_q"), (w_k, "w_k"), (w_v, "w_v"), (w_o, "w_o")))
    b_q, b_k, b_v, b_o = (_bias(b, n, d_model) for b, n in ((b_q, "b_q"), (b_k, "b_k"), (b_v, "b_v"), (b_o, "b_o")))
    q = split_heads(x_q @ w_q + b_q, num_heads)  # (batch, h, L_q, d_k)
    k = split_heads(x_kv @ w_k + b_k, num_heads)  # (batch, h, L_k, d_k)
    v = split_heads(x_kv @ w_v + b_v, num_heads)  # (batch, h, L_k, d_v)
    if mask is not None:
        _reject_3d_mask(np.shape(mask))
    heads, weights = scaled_dot_product_attention(q, k, v, mask)  # (batch, h, L_q, d_v), (batch, h, L_q, L_k)
    return combine_heads(heads) @ w_o + b_o, weights


# ----------------------------------------------------------------------------- torch module
def masked_attention_weights(scores: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """softmax(scores) over the keys (the last axis), blocked keys given weight 0.

    scores (batch, h, L_q, L_k); mask boolean, True = may attend, broadcastable to scores (None: none blocked).
    A fully masked query row gets zero weights, never NaN and never a uniform average.
    """
    if mask is None:
        return torch.softmax(scores, dim=-1)
    # The smallest finite number instead of -inf: a fully masked row stays finite (uniform), then the
    # second masked_fill sets it to exactly zero. Blocked keys of a partly masked row already get exp(min - max) = 0.
    scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    return torch.softmax(scores, dim=-1).masked_fill(~mask, 0.0)


class MultiHeadAttention(nn.Module):
    """Multi-head attention with nn.Linear projections w_q, w_k, w_v, w_o (each d_model -> d_model, with bias:
    the paper's W^Q, W^K, W^V, W^O have none; nn.Linear, nn.MultiheadAttention and the Annotated Transformer add one).

    forward(query, key, value, mask=None):
        query (batch, L_q, d_model), key and value (batch, L_k, d_model),
        mask boolean, True = may attend, broadcastable to (batch, h, L_q, L_k)
        -> output (batch, L_q, d_model).
    Only when ``self.store_attention_weights`` is True (False by default) does a call keep its weights
    (batch, h, L_q, L_k), detached and taken before dropout, in ``self.attention_weights``, for plots:
    training does not keep one such tensor per layer alive. ``helpers.attention_maps`` turns it on for one call.
    Dropout (p=dropout) is applied to the attention weights.
    A fully masked query row gets zero weights and a zero attention output, never NaN.

    nn.Linear stores weight as (out, in) and computes x @ weight.T + bias, so the numpy W^Q of the
    row-vector convention is ``w_q.weight.T``.
    """

    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0):
        super().__init__()
        self.d_model = positive_int(d_model, "d_model")
        self.num_heads = positive_int(num_heads, "num_heads")
        if self.d_model % self.num_heads:
            raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}: each head needs "
                             f"d_k = d_model / num_heads dimensions")
        self.d_k = self.d_model // self.num_heads
        self.w_q = nn.Linear(self.d_model, self.d_model)
        self.w_k = nn.Linear(self.d_model, self.d_model)
        self.w_v = nn.Linear(self.d_model, self.d_model)
        self.w_o = nn.Linear(self.d_model, self.d_model)
        self.dropout = nn.Dropout(probability(dropout, "dropout"))
        self.store_attention_weights = False  # True: forward keeps its weights in attention_weights, for plots
        self.attention_weights: torch.Tensor | None = None

    def _split(self, x: torch.Tensor) -> torch.Tensor:
        batch, length, _ = x.shape
        return x.view(batch, length, self.num_heads, self.d_k).transpose(1, 2)  # (batch, h, L, d_k)

    def _check_inputs(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> None:
        for name, x, length in (("query", query, "L_q"), ("key", key, "L_k"), ("value", value, "L_k")):
            if not isinstance(x, torch.Tensor):
                raise ValueError(f"{name} must be a torch tensor of shape (batch, {length}, d_model={self.d_model}), "
                                 f"got {type(x).__name__}")
            if x.dim() != 3 or x.shape[-1] != self.d_model:
                raise ValueError(f"{name} must have shape (batch, {length}, d_model={self.d_model}), "
                                 f"got {shape_str(x.shape)}")
        if key.shape[:2] != value.shape[:2]:
            raise ValueError(f"value must have shape (batch={key.shape[0]}, L_k={key.shape[1]}, d_model) to match key "
                             f"{shape_str(key.shape)}, got {shape_str(value.shape)}")
        if query.shape[0] != key.shape[0]:
            raise ValueError(f"key must have shape (batch={query.shape[0]}, L_k, d_model) to match query "
                             f"{shape_str(query.shape)}, got {shape_str(key.shape)}")

    def _check_mask(self, mask: Any, target: tuple) -> torch.Tensor:
        if not isinstance(mask, torch.Tensor):
            mask = torch.as_tensor(np.asarray(mask))
        if mask.dtype != torch.bool:
            raise ValueError(f"mask must be boolean (True = may attend, False = blocked), got dtype {mask.dtype}")
        _reject_3d_mask(tuple(mask.shape))
        try:
            ok = torch.broadcast_shapes(mask.shape, target) == torch.Size(target)
        except RuntimeError:
            ok = False
        if not ok:
            raise ValueError(f"mask of shape {shape_str(mask.shape)} does not broadcast to the weights "
                             f"(batch, h, L_q, L_k) = {shape_str(target)}")
        return mask

    def forward(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                mask: torch.Tensor | None = None) -> torch.Tensor:
        self._check_inputs(query, key, value)
        batch, length_q, _ = query.shape
        q = self._split(self.w_q(query))  # (batch, h, L_q, d_k)
        k = self._split(self.w_k(key))  # (batch, h, L_k, d_k)
        v = self._split(self.w_v(value))  # (batch, h, L_k, d_v)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_k)  # (batch, h, L_q, L_k)
        if mask is not None:
            mask = self._check_mask(mask, tuple(scores.shape)).to(scores.device)
        weights = masked_attention_weights(scores, mask)  # (batch, h, L_q, L_k)
        if self.store_attention_weights:  # only when asked: a plot needs them, training does not
            self.attention_weights = weights.detach()
        heads = self.dropout(weights) @ v  # (batch, h, L_q, d_v)
        concat = heads.transpose(1, 2).reshape(batch, length_q, self.d_model)  # (batch, L_q, h * d_v)
        return self.w_o(concat)


def to_nn_multihead_attention(module: nn.Module) -> nn.MultiheadAttention:
    """An nn.MultiheadAttention (batch_first=True) holding copies of ``module``'s weights.

    module: a MultiHeadAttention, the reference or a class with the same attributes (notebook 03's
    exercise): d_model, num_heads, dropout and the nn.Linear w_q, w_k, w_v, w_o.

    nn.MultiheadAttention packs W^Q, W^K, W^V into one in_proj_weight (3 d_model, d_model) and
    calls W^O out_proj. Remember its masks use the opposite convention (True = blocked).
    """
    if not isinstance(module, nn.Module) or not all(isinstance(getattr(module, name, None), nn.Linear)
                                                    for name in ("w_q", "w_k", "w_v", "w_o")):
        raise ValueError(f"module must be a MultiHeadAttention (an nn.Module with nn.Linear w_q, w_k, w_v, w_o), "
                         f"got {type(module).__name__}")
    reference = nn.MultiheadAttention(module.d_model, module.num_heads, dropout=module.dropout.p, bias=True,
                                      batch_first=True)
    reference = reference.to(device=module.w_q.weight.device, dtype=module.w_q.weight.dtype)
    with torch.no_grad():
        reference.in_proj_weight.copy_(torch.cat([module.w_q.weight, module.w_k.weight, module.w_v.weight]))
        reference.in_proj_bias.copy_(torch.cat([module.w_q.bias, module.w_k.bias, module.w_v.bias]))
        reference.out_proj.weight.copy_(module.w_o.weight)
        reference.out_proj.bias.copy_(module.w_o.bias)
    return reference.train(module.training)


def numpy_weights(module: MultiHeadAttention) -> dict[str, np.ndarray]:
    """The module's parameters in the numpy row-vector convention: w_q = W^Q = w_q.weight.T, etc.

    ``multi_head_attention(x_q, x_kv, **numpy_weights(m), num_heads=m.num_heads)`` equals ``m(x_q, x_kv, x_kv)``.
    """
    out = {}
    for name in ("q", "k", "v", "o"):
        linear = getattr(module, f"w_{name}")
        out[f"w_{name}"] = linear.weight.detach().cpu().double().numpy().T.copy()
        out[f"b_{name}"] = linear.bias.detach().cpu().double().numpy().copy()
    return out


__all__ = ["split_heads", "combine_heads", "multi_head_attention", "MultiHeadAttention", "masked_attention_weights",
           "to_nn_multihead_attention", "numpy_weights"]
