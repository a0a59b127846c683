"""Pictures of attention: score and weight matrices, masks, and the heads of multi-head attention.

Every function labels the rows with the queries and the columns with the keys (token labels on
both axes), accepts numpy arrays or torch tensors, and returns what it drew on (the Axes or Figure).
"""

from __future__ import annotations

from typing import Any, Sequence

import matplotlib.pyplot as plt
import numpy as np

from ..validation import shape_str


def _matrix(values: Any, name: str, ndim: int = 2, layout: str = "(L_q, L_k)") -> np.ndarray:
    if hasattr(values, "detach") and hasattr(values, "cpu"):  # a torch tensor
        values = values.detach().cpu().numpy()
    array = np.asarray(values)
    if array.ndim != ndim:
        raise ValueError(f"{name} must have shape {layout}, got {shape_str(array.shape)}")
    return array


def _labels(labels: Sequence[str] | None, size: int, name: str) -> list[str]:
    if labels is None:
        return [str(i) for i in range(size)]
    labels = [str(label) for label in labels]
    if len(labels) != size:
        raise ValueError(f"{name} must have one label per row/column ({size}), got {len(labels)}")
    return labels


def _ticks(ax, rows: list[str], cols: list[str], max_ticks: int = 40) -> None:
    if len(cols) <= max_ticks:
        ax.set_xticks(range(len(cols)), cols, rotation=45 if max(map(len, cols), default=0) > 3 else 0,
                      ha="right" if max(map(len, cols), default=0) > 3 else "center")
    if len(rows) <= max_ticks:
        ax.set_yticks(range(len(rows)), rows)


def plot_attention(weights: Any, row_labels: Sequence[str] | None = None, col_labels: Sequence[str] | None = None,
                   ax=None, title: str = "Attention weights", annotate: bool | None = None, cmap: str = "viridis",
                   vmin: float | None = None, vmax: float | None = None, colorbar: bool = True, fmt: str = ".2f"):
    """Heatmap of a score or weight matrix (L_q, L_k): row i = query i, column j = key j.

    row_labels / col_labels: the query and key tokens (col_labels defaults to row_labels, as in
    self-attention). Values are written in the cells when annotate is True (default: when the
    matrix has at most 10 x 10 entries). Masked entries given as -inf are shown blank.
    """
    matrix = _matrix(weights, "weights").astype(np.float64)
    rows = _labels(row_labels, matrix.shape[0], "row_labels")
    cols = _labels(col_labels if col_labels is not None else (row_labels if matrix.shape[0] == matrix.shape[1]
                                                             else None), matrix.shape[1], "col_labels")
    if ax is None:
        _, ax = plt.subplots(figsize=(1.0 + 0.6 * len(cols), 0.8 + 0.5 * len(rows)) if len(cols) <= 12 else (6, 5))
    shown = np.ma.masked_invalid(matrix)
    image = ax.imshow(shown, cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto")
    _ticks(ax, rows, cols)
    ax.set_xlabel("key")
    ax.set_ylabel("query")
    if title:
        ax.set_title(title)
    if annotate is None:
        annotate = matrix.shape[0] <= 10 and matrix.shape[1] <= 10
    if annotate:
        finite = matrix[np.isfinite(matrix)]
        middle = (finite.min() + finite.max()) / 2 if finite.size else 0.0
        for i in range(matrix.shape[0]):
            for j in range(matrix.shape[1]):
                value = matrix[i, j]
                text = f"{value:{fmt}}" if np.isfinite(value) else ("-inf" if value < 0 else "nan")
                ax.text(j, i, text, ha="center", va="center", fontsize=8,
                        color="black" if np.isfinite(value) and value > middle else "white")
    if colorbar:
        ax.figure.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    return ax


def plot_mask(mask: Any, row_labels: Sequence[str] | None = None, col_labels: Sequence[str] | None = None,
              ax=None, title: str = "Mask (True = may attend)"):
    """Picture of a boolean mask (L_q, L_k): filled cells may attend, blank ones are blocked.

    Broadcast shapes such as (batch, 1, 1, L) or (1, L) are squeezed to 2-D first when possible.
    """
    if hasattr(mask, "detach") and hasattr(mask, "cpu"):
        mask = mask.detach().cpu().numpy()
    mask = np.asarray(mask)
    if mask.dtype != bool:
        raise ValueError(f"mask must be boolean (True = may attend), got dtype {mask.dtype}")
    if mask.ndim > 2:
        mask = mask.reshape(mask.shape[-2:]) if int(np.prod(mask.shape[:-2])) == 1 else mask
    matrix = _matrix(mask, "mask", 2, "(L_q, L_k), or one that squeezes to it")
    rows = _labels(row_labels, matrix.shape[0], "row_labels")
    cols = _labels(col_labels if col_labels is not None else (row_labels if matrix.shape[0] == matrix.shape[1]
                                                             else None), matrix.shape[1], "col_labels")
    if ax is None:
        _, ax = plt.subplots(figsize=(1.0 + 0.45 * len(cols), 0.8 + 0.4 * len(rows)) if len(cols) <= 12 else (5, 5))
    ax.imshow(matrix, cmap="Blues", vmin=-0.3, vmax=1.2, aspect="auto")
    _ticks(ax, rows, cols)
    ax.set_xlabel("key")
    ax.set_ylabel("query")
    if title:
        ax.set_title(title)
    if matrix.shape[0] <= 12 and matrix.shape[1] <= 12:
        for i in range(matrix.shape[0]):
            for j in range(matrix.shape[1]):
                ax.text(j, i, "1" if matrix[i, j] else "0", ha="center", va="center", fontsize=8,
                        color="white" if matrix[i, j] else "gray")
    return ax


def plot_heads(weights_per_head: Any, labels: Sequence[str] | None = None, col_labels: Sequence[str] | None = None,
               ncols: int = 4, title: str = "Attention weights per head", annotate: bool = False):
    """One heatmap per head, side by side: weights_per_head (h, L_q, L_k) (take one batch item first).

    All heads share the colour scale 0..1 so they can be compared. Returns the Figure.
    """
    weights = _matrix(weights_per_head, "weights_per_head", 3, "(h, L_q, L_k)").astype(np.float64)
    heads = weights.shape[0]
    ncols = max(1, min(int(ncols), heads))
    nrows = -(-heads // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(2.4 * ncols, 2.3 * nrows), squeeze=False)
    for index, ax in enumerate(axes.flat):
        if index >= heads:
            ax.axis("off")
            continue
        plot_attention(weights[index], labels, col_labels, ax=ax, title=f"head {index + 1}", annotate=annotate,
                       vmin=0.0, vmax=1.0, colorbar=False)
        if index % ncols:
            ax.set_ylabel("")
        if index < heads - ncols:
            ax.set_xlabel("")
    fig.suptitle(title)
    fig.tight_layout()
    return fig


__all__ = ["plot_attention", "plot_mask", "plot_heads"]
