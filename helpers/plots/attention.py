"""Pictures of attention: score and weight matrices, masks, the heads of multi-head attention, and costs.

    plot_attention(weights, ...)             one heatmap of weights (L_q, L_k)                  (notebooks 02-04)
    plot_scores(scores, ...)                 one heatmap of scores, colours centred on 0, -inf blank  (02, 04)
    plot_masking(scores, mask, labels)       scores, scores with blocked keys at -inf, weights  (04)
    plot_masks(masks, labels, titles)        several boolean masks side by side                 (04)
    plot_mask(mask, ...)                     one boolean mask                                   (04)
    plot_heads(weights_per_head, ...)        one heatmap per head                               (03)
    plot_saturation(widths, raw, scaled)     softmax saturation and gradient size against d_k   (02)
    plot_attention_cost(rows)                measured time and memory against L, log-log        (03)
    plot_rnn_influence(words, moves, scales) how far an RNN's last state moves, per word replaced (02)

The matrix pictures label the rows with the queries and the columns with the keys (token labels on
both axes), accept numpy arrays or torch tensors, and return what they drew on (the Axes or Figure).
"""

from __future__ import annotations

from typing import Any, Sequence

import matplotlib.pyplot as plt
import numpy as np

from ..i18n import number, tr
from ..attention import masked_softmax
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
                   ax=None, title: str | None = None, annotate: bool | None = None, cmap: str = "viridis",
                   vmin: float | None = None, vmax: float | None = None, colorbar: bool = True, fmt: str = ".2f"):
    """Heatmap of a score or weight matrix (L_q, L_k): row i = query i, column j = key j.

    row_labels / col_labels: the query and key tokens (col_labels defaults to row_labels, as in
    self-attention). title defaults to "Attention weights"; "" draws none. Values are written in the
    cells when annotate is True (default: when the matrix has at most 10 x 10 entries). Masked entries
    given as -inf are shown blank.
    """
    title = tr("plots:attention_weights", "Attention weights") if title is None else title
    matrix = _matrix(weights, "weights").astype(np.float64)
    rows = _labels(row_labels, matrix.shape[0], "row_labels")
    cols = _labels(col_labels if col_labels is not None else (row_labels if matrix.shape[0] == matrix.shape[1]
                                                             else None), matrix.shape[1], "col_labels")
    if ax is None:
        _, ax = plt.subplots(figsize=(1.0 + 0.6 * len(cols), 0.8 + 0.5 * len(rows)) if len(cols) <= 12 else (6, 5))
    shown = np.ma.masked_invalid(matrix)
    image = ax.imshow(shown, cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto")
    _ticks(ax, rows, cols)
    ax.set_xlabel(tr("plots:key", "key"))
    ax.set_ylabel(tr("plots:query", "query"))
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
                color = ("black" if value > middle else "white") if np.isfinite(value) else "gray"
                ax.text(j, i, text, ha="center", va="center", fontsize=8, color=color)
    if colorbar:
        ax.figure.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    return ax


def plot_mask(mask: Any, row_labels: Sequence[str] | None = None, col_labels: Sequence[str] | None = None,
              ax=None, title: str | None = None):
    """Picture of a boolean mask (L_q, L_k): filled cells may attend, blank ones are blocked.

    Broadcast shapes such as (batch, 1, 1, L) or (1, L) are squeezed to 2-D first when possible.
    """
    title = tr("plots:mask_title", "Mask (True = may attend)") if title is None else title
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
    ax.set_xlabel(tr("plots:key", "key"))
    ax.set_ylabel(tr("plots:query", "query"))
    if title:
        ax.set_title(title)
    if matrix.shape[0] <= 12 and matrix.shape[1] <= 12:
        for i in range(matrix.shape[0]):
            for j in range(matrix.shape[1]):
                ax.text(j, i, "1" if matrix[i, j] else "0", ha="center", va="center", fontsize=8,
                        color="white" if matrix[i, j] else "gray")
    return ax


def plot_heads(weights_per_head: Any, labels: Sequence[str] | None = None, col_labels: Sequence[str] | None = None,
               ncols: int = 4, title: str | None = None, annotate: bool = False):
    """One heatmap per head, side by side: weights_per_head (h, L_q, L_k) (take one batch item first).

    All heads share the colour scale 0..1 so they can be compared. The panels are titled "head 0", "head 1",
    ...: their index along the h axis, counted from 0 as Python counts. The figure's title defaults to
    "Attention weights per head". Returns the Figure.
    """
    title = tr("plots:weights_per_head", "Attention weights per head") if title is None else title
    weights = _matrix(weights_per_head, "weights_per_head", 3, "(h, L_q, L_k)").astype(np.float64)
    heads = weights.shape[0]
    ncols = max(1, min(int(ncols), heads))
    nrows = -(-heads // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(2.4 * ncols, 2.3 * nrows), squeeze=False)
    for index, ax in enumerate(axes.flat):
        if index >= heads:
            ax.axis("off")
            continue
        plot_attention(weights[index], labels, col_labels, ax=ax, title=tr("plots:head_n", "head {n}", n=index),
                       annotate=annotate, vmin=0.0, vmax=1.0, colorbar=False)
        if index % ncols:
            ax.set_ylabel("")
        if index < heads - ncols:
            ax.set_xlabel("")
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def plot_scores(scores: Any, row_labels: Sequence[str] | None = None, col_labels: Sequence[str] | None = None,
                ax=None, title: str | None = None, limit: float | None = None):
    """Heatmap of a score matrix (L_q, L_k) in a diverging colour map centred on 0.

    Positive scores are red, negative ones blue; -inf (a blocked key) is left blank and written "-inf".
    ``limit`` sets the colour scale to [-limit, limit] (default: the largest finite |score|). title
    defaults to "scores (row = query, column = key)".
    """
    title = tr("plots:scores_title", "scores (row = query, column = key)") if title is None else title
    matrix = _matrix(scores, "scores").astype(np.float64)
    if limit is None:
        finite = np.abs(matrix[np.isfinite(matrix)])
        limit = float(finite.max()) if finite.size and finite.max() > 0 else 1.0
    elif isinstance(limit, bool) or not isinstance(limit, (int, float)) or not limit > 0:
        raise ValueError(f"limit must be a positive number (the colour scale is [-limit, limit]), got {limit!r}")
    return plot_attention(matrix, row_labels, col_labels, ax=ax, title=title, cmap="coolwarm", vmin=-limit,
                          vmax=limit)


def plot_masking(scores: Any, mask: Any, labels: Sequence[str] | None = None):
    """Three panels: the scores, the scores with blocked keys set to -inf, and the weights after the softmax.

    scores: (L_q, L_k); mask: boolean (True = may attend) that broadcasts to it. The weights are
    ``masked_softmax(scores, mask)``: blocked keys get 0. Returns the Figure.
    """
    matrix = _matrix(scores, "scores").astype(np.float64)
    if hasattr(mask, "detach") and hasattr(mask, "cpu"):
        mask = mask.detach().cpu().numpy()
    mask = np.asarray(mask)
    if mask.dtype != bool:
        raise ValueError(f"mask must be boolean (True = may attend), got dtype {mask.dtype}")
    try:
        full = np.broadcast_to(mask, matrix.shape)
    except ValueError:
        raise ValueError(f"mask of shape {shape_str(mask.shape)} does not broadcast to the scores "
                         f"{shape_str(matrix.shape)}") from None
    limit = float(np.abs(matrix).max()) or 1.0
    fig, axes = plt.subplots(1, 3, figsize=(4.6 * 3, 0.9 + 0.55 * matrix.shape[0]))
    plot_scores(matrix, labels, ax=axes[0], title=tr("plots:scores", "scores"), limit=limit)
    blocked = tr("plots:blocked_scores", "scores, blocked keys = -inf")
    plot_scores(np.where(full, matrix, -np.inf), labels, ax=axes[1], title=blocked, limit=limit)
    after = tr("plots:weights_after_softmax", "weights after the softmax")
    plot_attention(masked_softmax(matrix, full), labels, ax=axes[2], title=after, vmin=0.0, vmax=1.0)
    fig.tight_layout()
    return fig


def plot_masks(masks: Sequence[Any], labels: Sequence[str] | None = None, titles: Sequence[str] | None = None):
    """Several boolean masks (each (L_q, L_k), or one that squeezes to it) side by side. Returns the Figure."""
    if isinstance(masks, np.ndarray) or hasattr(masks, "detach") or not isinstance(masks, Sequence) or not masks:
        raise ValueError("masks must be a non-empty list of boolean masks, one per panel, "
                         f"got {type(masks).__name__}")
    if titles is None:
        titles = [tr("plots:mask_n", "mask {n}", n=index + 1) for index in range(len(masks))]
    titles = [str(title) for title in titles]
    if len(titles) != len(masks):
        raise ValueError(f"titles must have one title per mask ({len(masks)}), got {len(titles)}")
    size = len(labels) if labels is not None else 5
    fig, axes = plt.subplots(1, len(masks), figsize=(4.0 * len(masks), 1.0 + 0.4 * size), squeeze=False)
    for mask, title, ax in zip(masks, titles, axes[0]):
        plot_mask(mask, labels, ax=ax, title=title)
    fig.tight_layout()
    return fig


def _curve(values: Any, name: str, size: int) -> np.ndarray:
    """values as a 1-D float array of ``size`` finite numbers, or a ValueError naming ``name``."""
    try:
        array = np.asarray(values, dtype=np.float64) if not isinstance(values, (str, bytes)) else np.array([])
    except (TypeError, ValueError):
        array = np.array([np.nan])
    if array.shape != (size,) or not np.all(np.isfinite(array)):
        raise ValueError(f"{name} must hold {size} finite numbers, one per point, got {values!r}")
    return array


def plot_saturation(widths: Sequence[int], raw: Sequence[Sequence[float]], scaled: Sequence[Sequence[float]]):
    """Two panels against d_k (log scale): the average largest softmax weight and the average Jacobian norm.

    raw and scaled hold one (largest weight, Jacobian norm) pair per width, for softmax(QK^T) and for
    softmax(QK^T / sqrt(d_k)). Returns the Figure.
    """
    x = _curve(widths, "widths", int(np.size(widths)) if not isinstance(widths, (str, bytes)) else -1)
    if x.size == 0 or not np.all(x > 0):
        raise ValueError(f"widths must be positive (they are d_k values), got {list(widths)!r}")
    curves = {}
    for name, pairs in (("raw", raw), ("scaled", scaled)):
        try:
            array = np.asarray(pairs, dtype=np.float64) if not isinstance(pairs, (str, bytes)) else np.array([])
        except (TypeError, ValueError):
            array = np.array([])
        if array.shape != (len(x), 2) or not np.all(np.isfinite(array)):
            raise ValueError(f"{name} must hold one (largest weight, Jacobian norm) pair per width, shape "
                             f"({len(x)}, 2), got shape {shape_str(array.shape)}")
        curves[name] = array
    fig, axes = plt.subplots(1, 2, figsize=(9, 3))
    for name, style, label in (("raw", "o-", "softmax(QK^T)"), ("scaled", "s--", "softmax(QK^T / sqrt(d_k))")):
        axes[0].plot(x, curves[name][:, 0], style, label=label)
        axes[1].plot(x, curves[name][:, 1], style, label=label)
    axes[0].set(xscale="log", xlabel="d_k", ylabel=tr("plots:average_largest_weight", "average largest weight"),
                title=tr("plots:saturation", "saturation"))
    axes[1].set(xscale="log", xlabel="d_k", ylabel=tr("plots:average_jacobian", "average Jacobian norm"),
                title=tr("plots:gradient_size", "gradient size"))
    axes[0].legend(fontsize="small")
    fig.tight_layout()
    return fig


def plot_attention_cost(rows: Sequence[dict]):
    """Measured time and memory of attention against the sequence length L, both axes logarithmic.

    rows: one dict per length with the keys "L", "ms" and "saved_MB" (what helpers.cost.measure_attention
    returns). A dashed line proportional to L^2, through the last point, shows quadratic growth.
    Returns the Figure.
    """
    if not isinstance(rows, Sequence) or not rows or not all(isinstance(row, dict) for row in rows):
        raise ValueError(f"rows must be a non-empty list of dicts with keys 'L', 'ms', 'saved_MB', got {rows!r}")
    missing = [key for key in ("L", "ms", "saved_MB") if any(key not in row for row in rows)]
    if missing:
        raise ValueError(f"rows must be dicts with keys 'L', 'ms', 'saved_MB'; missing {missing}")
    lengths = _curve([row["L"] for row in rows], "the L of rows", len(rows))
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.2))
    for ax, key, label in ((axes[0], "ms", tr("plots:time_ms", "time, forward + backward (ms)")),
                           (axes[1], "saved_MB", tr("plots:memory_mib", "memory kept for backward (MiB)"))):
        values = _curve([row[key] for row in rows], f"the {key!r} of rows", len(rows))
        if not np.all(values > 0) or not np.all(lengths > 0):
            raise ValueError(f"rows must hold positive L and {key!r} values (they are drawn on log axes)")
        ax.plot(lengths, values, "o-", label=tr("plots:measured", "measured"))
        ax.plot(lengths, values[-1] * (lengths / lengths[-1]) ** 2, "k--", linewidth=1,
                label=tr("plots:proportional_l2", "proportional to L²"))
        ax.set(xscale="log", yscale="log", xlabel=tr("plots:sequence_length", "sequence length L"), ylabel=label)
        ax.minorticks_off()
        ax.set_xticks(lengths, [f"{length:g}" for length in lengths])
        ax.legend(fontsize="small")
    fig.tight_layout()
    return fig


__all__ = ["plot_attention", "plot_attention_cost", "plot_heads", "plot_mask", "plot_masking", "plot_masks",
           "plot_saturation", "plot_scores"]


def plot_rnn_influence(words: Sequence[int], moves: Any, scales: Sequence[float]):
    """How far the last state of a recurrent network moves when one word is replaced (log scale), against the
    position of that word: one curve per scale g of the recurrent weights (standard deviation g / sqrt(d)).

    words: the positions replaced (1 = the first word); moves: one row per scale, one column per position.
    Returns the Axes.
    """
    x = _curve(words, "words", int(np.size(words)) if not isinstance(words, (str, bytes)) else -1)
    g = _curve(scales, "scales", int(np.size(scales)) if not isinstance(scales, (str, bytes)) else -1)
    array = _matrix(moves, "moves", layout="(len(scales), len(words))").astype(np.float64)
    if array.shape != (len(g), len(x)) or not np.all(np.isfinite(array)) or not np.all(array > 0):
        raise ValueError(f"moves must hold one positive distance per scale and word, shape ({len(g)}, {len(x)}), "
                         f"got shape {shape_str(array.shape)}")
    _, ax = plt.subplots(figsize=(6, 3.5))
    for scale, row in zip(g, array):
        ax.plot(x, row, "o-", markersize=3, label=f"g = {number(scale, 1)}")
    ax.set(yscale="log", xlabel=tr("plots:word_replaced", "position of the word replaced"),
           ylabel=tr("plots:last_state_moves", "how far the last state moves"),
           title=tr("plots:rnn_influence", "a random tanh RNN, recurrent weights of standard deviation g/sqrt(d)"))
    ax.legend(fontsize="small")
    return ax
