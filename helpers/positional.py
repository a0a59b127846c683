"""Sinusoidal positional encoding (Vaswani et al. 2017, section 3.5).

    PE(pos, 2i)   = sin(pos / base^(2i / d_model))
    PE(pos, 2i+1) = cos(pos / base^(2i / d_model))

with base = 10000, so the wavelengths run from 2*pi to base*2*pi.

apply_rope is the rotary position embedding (Su et al. 2021, "RoFormer"), in the interleaved layout:
the pair of dimensions (2i, 2i+1) of the row at position pos turns by the angle pos * w_i, with the
frequencies w_i of the encoding above.
"""

from __future__ import annotations

import math
import numbers
from typing import Any, Callable

import numpy as np
import torch
from torch import nn

from .i18n import tr
from .validation import positive_float, positive_int, probability, shape_str


def positional_encoding(max_len: int, d_model: int, base: float = 10000.0) -> np.ndarray:
    """The sinusoidal encoding of positions 0 .. max_len-1.

    Returns a float64 array of shape (max_len, d_model): sine on the even columns 2i,
    cosine on the odd columns 2i+1, both at angle pos / base^(2i / d_model).
    """
    max_len = positive_int(max_len, "max_len")
    d_model = positive_int(d_model, "d_model", even=True)
    base = positive_float(base, "base")
    positions = np.arange(max_len, dtype=np.float64)[:, None]  # (max_len, 1)
    two_i = np.arange(0, d_model, 2, dtype=np.float64)  # (d_model/2,)
    angles = positions / base ** (two_i / d_model)  # (max_len, d_model/2)
    pe = np.zeros((max_len, d_model))
    pe[:, 0::2] = np.sin(angles)
    pe[:, 1::2] = np.cos(angles)
    return pe


def frequencies(d_model: int, base: float = 10000.0) -> np.ndarray:
    """The d_model/2 angular frequencies w_i = 1 / base^(2i / d_model), shape (d_model/2,)."""
    d_model = positive_int(d_model, "d_model", even=True)
    return 1.0 / positive_float(base, "base") ** (np.arange(0, d_model, 2) / d_model)


def rotation_matrix(k: int, d_model: int, base: float = 10000.0) -> np.ndarray:
    """The (d_model, d_model) matrix R with PE(pos + k) = PE(pos) @ R for every pos.

    R is block diagonal; block i rotates the pair (sin, cos) of frequency w_i by the angle k * w_i:
        [[cos(k w_i), -sin(k w_i)],
         [sin(k w_i),  cos(k w_i)]]
    (row-vector convention, as in Q = X W^Q).
    """
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
        raise ValueError(f"k must be an integer offset, got {k!r}")
    angles = k * frequencies(d_model, base)
    rotation = np.zeros((d_model, d_model))
    for i, angle in enumerate(angles):
        c, s = math.cos(angle), math.sin(angle)
        rotation[2 * i : 2 * i + 2, 2 * i : 2 * i + 2] = [[c, -s], [s, c]]
    return rotation


def apply_rope(x, positions, base: float = 10000.0) -> np.ndarray:
    """Rotary position embedding (RoFormer), interleaved layout: rotate each pair of dimensions.

    x: (..., L, d) with d even, e.g. the queries or keys of one head (batch, h, L, d_k).
    positions: (L,) non-negative integers, the position of each of the L rows.
    Returns a float64 array of the same shape as x in which, for every row at position pos and every
    pair i, (x_2i, x_2i+1) becomes (x_2i cos a - x_2i+1 sin a, x_2i sin a + x_2i+1 cos a), a = pos * w_i,
    w_i = 1 / base^(2i / d). In row-vector form this is x @ rotation_matrix(pos, d).T, so the score
    apply_rope(q, [m]) . apply_rope(k, [n]) depends on the offset n - m only.
    """
    x, positions = _rope_inputs(x, positions)
    angles = positions[:, None] * frequencies(x.shape[-1], base)[None, :]  # (L, d/2)
    cos, sin = np.cos(angles), np.sin(angles)
    x_even, x_odd = x[..., 0::2], x[..., 1::2]  # (..., L, d/2) each
    rotated = np.empty_like(x)
    rotated[..., 0::2] = x_even * cos - x_odd * sin
    rotated[..., 1::2] = x_even * sin + x_odd * cos
    return rotated


def _rope_inputs(x, positions) -> tuple[np.ndarray, np.ndarray]:
    """x as a float64 array (..., L, d) with d even, positions as an int array (L,): or a ValueError."""
    if hasattr(x, "detach"):  # a torch tensor
        x = x.detach().cpu().numpy()
    try:
        x = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"x must be an array of numbers of shape (..., L, d), got {type(x).__name__}") from None
    if x.ndim < 2:
        raise ValueError(f"x must have shape (..., L, d) with at least 2 axes, got {shape_str(x.shape)}")
    if x.shape[-1] == 0 or x.shape[-1] % 2:
        raise ValueError(f"x must have an even, positive last axis d (pairs of dimensions), got d={x.shape[-1]}")
    if hasattr(positions, "detach"):
        positions = positions.detach().cpu().numpy()
    raw = np.asarray(positions)
    if raw.ndim != 1 or raw.shape[0] != x.shape[-2]:
        raise ValueError(f"positions must have shape (L,) = ({x.shape[-2]},), one position per row of x, "
                         f"got {shape_str(raw.shape)}")
    if raw.size and not all(isinstance(p, numbers.Integral) and not isinstance(p, (bool, np.bool_))
                            for p in raw.tolist()):
        raise ValueError(f"positions must be integers, got dtype {raw.dtype}")
    if raw.size and raw.min() < 0:
        raise ValueError(f"positions must be non-negative, got {int(raw.min())}")
    return x, raw.astype(np.float64)


class PositionalEncoding(nn.Module):
    """Adds the sinusoidal encoding to a batch of embeddings, then applies dropout.

    forward(x): x of shape (batch, L, d_model) with L <= max_len -> same shape.
    The encoding is a non-persistent buffer (``persistent=False``): moved by .to(device), never trained, and not
    in the state_dict, so a saved model does not store it; building the module recomputes it, once, with
    ``encoding(max_len, d_model)``: positional_encoding, or the student's create_position_matrix of
    notebook 01 (notebook 05 passes it once its check passes); ``self.encoding`` keeps the function used.
    """

    def __init__(self, d_model: int, max_len: int = 5000, dropout: float = 0.1,
                 encoding: Callable[[int, int], Any] = positional_encoding):
        super().__init__()
        self.d_model = positive_int(d_model, "d_model", even=True)
        self.max_len = positive_int(max_len, "max_len")
        self.dropout = nn.Dropout(probability(dropout, "dropout"))
        if not callable(encoding):
            raise TypeError(f"encoding must be a function (max_len, d_model) -> matrix, got {type(encoding).__name__}")
        self.encoding = encoding
        matrix = encoding(self.max_len, self.d_model)
        if isinstance(matrix, torch.Tensor):
            matrix = matrix.detach().cpu().numpy()
        matrix = np.asarray(matrix, dtype=np.float64)
        if matrix.shape != (self.max_len, self.d_model):
            raise ValueError(f"encoding({self.max_len}, {self.d_model}) must return a matrix of shape "
                             f"(max_len={self.max_len}, d_model={self.d_model}), got {shape_str(matrix.shape)}")
        self.register_buffer("pe", torch.from_numpy(matrix).float(), persistent=False)  # (max_len, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() != 3 or x.shape[-1] != self.d_model:
            raise ValueError(tr("positional:x_shape", "x must have shape (batch, L, d_model={d_model}), got {shape}",
                                d_model=self.d_model, shape=shape_str(x.shape)))
        length = x.shape[1]
        if length > self.max_len:
            raise ValueError(tr("positional:too_long", "x has length L={length}, longer than max_len={max_len}: "
                                "build PositionalEncoding with a larger max_len", length=length, max_len=self.max_len))
        return self.dropout(x + self.pe[:length].to(x.dtype))
