"""Pictures of the positional encoding (notebook 01)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np


def plot_encoding(pe: np.ndarray, title: str = "", ax=None):
    """Heatmap of an encoding matrix pe: (positions, d_model); rows are positions, columns dimensions."""
    if pe.ndim != 2:
        raise ValueError(f"pe must have shape (positions, d_model), got {pe.shape}")
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 3.2))
    image = ax.pcolormesh(pe, cmap="viridis", vmin=-1, vmax=1)
    ax.set_xlabel("dimension (column of PE)")
    ax.set_ylabel("position")
    ax.invert_yaxis()  # position 0 at the top, as in the printed matrix
    ax.set_title(title or f"Positional encoding: {pe.shape[0]} positions x {pe.shape[1]} dimensions")
    plt.colorbar(image, ax=ax)
    return ax


def plot_dimensions(pe: np.ndarray, dims: list[int], ax=None):
    """Curves of a few columns of pe against position (one sinusoid per dimension)."""
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 3))
    for d in dims:
        kind = "sin" if d % 2 == 0 else "cos"
        ax.plot(pe[:, d], label=f"dim {d} ({kind})")
    ax.set_xlabel("position")
    ax.set_ylabel("PE value")
    ax.legend(loc="upper right", fontsize="small")
    return ax
