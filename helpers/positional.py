"""Sinusoidal positional encoding (Vaswani et al. 2017, section 3.5).

    PE(pos, 2i)   = sin(pos / base^(2i / d_model))
    PE(pos, 2i+1) = cos(pos / base^(2i / d_model))

with base = 10000, so the wavelengths run from 2*pi to base*2*pi.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

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


class PositionalEncoding(nn.Module):
    """Adds the sinusoidal encoding to a batch of embeddings, then applies dropout.

    forward(x): x of shape (batch, L, d_model) with L <= max_len -> same shape.
    The encoding is a buffer (saved with the model, moved by .to(device), never trained).
    """

    def __init__(self, d_model: int, max_len: int = 5000, dropout: float = 0.1):
        super().__init__()
        self.d_model = positive_int(d_model, "d_model", even=True)
        self.max_len = positive_int(max_len, "max_len")
        self.dropout = nn.Dropout(probability(dropout, "dropout"))
        pe = torch.from_numpy(positional_encoding(self.max_len, self.d_model)).float()
        self.register_buffer("pe", pe, persistent=False)  # (max_len, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() != 3 or x.shape[-1] != self.d_model:
            raise ValueError(
                f"x must have shape (batch, L, d_model={self.d_model}), got {shape_str(x.shape)}"
            )
        length = x.shape[1]
        if length > self.max_len:
            raise ValueError(
                f"x has length L={length}, longer than max_len={self.max_len}: "
                "build PositionalEncoding with a larger max_len"
            )
        return self.dropout(x + self.pe[:length].to(x.dtype))
