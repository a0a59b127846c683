"""Scaled dot-product attention in numpy (Vaswani et al. 2017, section 3.2.1).

    Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V

Row-vector convention: each row of Q, K, V is one token, Q = X W^Q with W^Q of shape (d_model, d_k).
Shapes: Q (..., L_q, d_k), K (..., L_k, d_k), V (..., L_k, d_v); the leading axes (batch, h, ...)
broadcast. Masks are boolean, True = may attend, broadcastable to the scores (..., L_q, L_k).
A query row whose keys are all masked gets zero weights and a zero output (never NaN).
All results are float64.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .validation import shape_str


def as_float_array(value: Any, name: str, min_ndim: int = 0, layout: str = "") -> np.ndarray:
    """``value`` as a float64 numpy array with at least ``min_ndim`` axes, or a ValueError naming it."""
    if hasattr(value, "detach") and hasattr(value, "cpu"):  # a torch tensor
        value = value.detach().cpu().numpy()
    try:
        array = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be an array of numbers, got {type(value).__name__}") from None
    if array.ndim < min_ndim:
        raise ValueError(f"{name} must have shape {layout or f'with at least {min_ndim} axes'}, "
                         f"got {shape_str(array.shape)}")
    return array


def as_bool_mask(mask: Any, target_shape: tuple, layout: str, name: str = "mask") -> np.ndarray:
    """A boolean mask (True = may attend) that broadcasts to ``target_shape``, or a ValueError."""
    if hasattr(mask, "detach") and hasattr(mask, "cpu"):
        mask = mask.detach().cpu().numpy()
    mask = np.asarray(mask)
    if mask.dtype != bool:
        raise ValueError(f"{name} must be boolean (True = may attend, False = blocked), got dtype {mask.dtype}. "
                         "For a 0/1 array use mask.astype(bool); for an additive mask use additive == 0.")
    try:
        ok = np.broadcast_shapes(mask.shape, tuple(target_shape)) == tuple(target_shape)
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(f"{name} of shape {shape_str(mask.shape)} does not broadcast to the scores {layout} = "
                         f"{shape_str(target_shape)}")
    return mask


def softmax(x: Any, axis: int = -1) -> np.ndarray:
    """Numerically stable softmax along ``axis``: exp(x - max) / sum(exp(x - max)).

    Subtracting the maximum changes nothing mathematically (it cancels in the ratio) but keeps
    exp() from overflowing: logits of 1000 give exp(0) = 1, not inf. Returns float64, same shape.
    """
    x = as_float_array(x, "x")
    if x.ndim == 0:
        raise ValueError("x must have at least one axis to take the softmax over, got shape ()")
    if not -x.ndim <= axis < x.ndim:
        raise ValueError(f"axis={axis} is out of range for x of shape {shape_str(x.shape)}")
    with np.errstate(over="ignore"):  # x - max can only overflow to -inf, whose exp is the right 0
        exps = np.exp(x - x.max(axis=axis, keepdims=True))
    return exps / exps.sum(axis=axis, keepdims=True)


def masked_softmax(scores: Any, mask: Any = None) -> np.ndarray:
    """Softmax over the last axis (the keys) that gives blocked keys EXACTLY zero weight.

    scores: (..., L_q, L_k); mask: boolean, True = may attend, broadcastable to scores.
    A row whose keys are all blocked gets all-zero weights, never NaN (what -inf alone gives:
    exp(-inf - (-inf)) = exp(NaN)) and never a uniform average (what a large finite negative gives).
    """
    scores = as_float_array(scores, "scores", 1, "(..., L_q, L_k)")
    if mask is None:
        return softmax(scores, axis=-1)
    mask = as_bool_mask(mask, scores.shape, "(..., L_q, L_k)")
    filled = np.where(mask, scores, -np.inf)
    row_max = filled.max(axis=-1, keepdims=True)
    row_max = np.where(np.isfinite(row_max), row_max, 0.0)  # fully masked row: avoid -inf - -inf
    exps = np.exp(filled - row_max)  # exactly 0 where blocked
    totals = exps.sum(axis=-1, keepdims=True)
    return exps / np.where(totals > 0, totals, 1.0)


def scaled_dot_product_attention(Q: Any, K: Any, V: Any, mask: Any = None) -> tuple[np.ndarray, np.ndarray]:
    """softmax(Q K^T / sqrt(d_k)) V, returning (output, weights).

    Q: (..., L_q, d_k), K: (..., L_k, d_k), V: (..., L_k, d_v), leading axes broadcast.
    mask: boolean, True = may attend, broadcastable to the weights (..., L_q, L_k).
    Returns output (..., L_q, d_v) and weights (..., L_q, L_k), each row of weights a
    distribution over the keys (all zeros for a fully masked row, whose output is then zero).
    """
    Q = as_float_array(Q, "Q", 2, "(..., L_q, d_k)")
    K = as_float_array(K, "K", 2, "(..., L_k, d_k)")
    V = as_float_array(V, "V", 2, "(..., L_k, d_v)")
    d_k = Q.shape[-1]
    if K.shape[-1] != d_k:
        raise ValueError(f"K must have shape (..., L_k, d_k={d_k}) to match Q {shape_str(Q.shape)}, "
                         f"got {shape_str(K.shape)}: Q and K need the same d_k")
    if V.shape[-2] != K.shape[-2]:
        raise ValueError(f"V must have shape (..., L_k={K.shape[-2]}, d_v) to match K {shape_str(K.shape)}, "
                         f"got {shape_str(V.shape)}: one value per key")
    try:
        np.broadcast_shapes(Q.shape[:-2], K.shape[:-2], V.shape[:-2])
    except ValueError:
        raise ValueError(f"the leading (batch, h, ...) axes of Q {shape_str(Q.shape)}, K {shape_str(K.shape)} "
                         f"and V {shape_str(V.shape)} do not broadcast") from None
    scores = Q @ np.swapaxes(K, -1, -2) / math.sqrt(d_k)  # (..., L_q, L_k)
    weights = masked_softmax(scores, mask)
    return weights @ V, weights


__all__ = ["softmax", "masked_softmax", "scaled_dot_product_attention"]
