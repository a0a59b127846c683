"""Pictures of the positional encoding (notebook 01).

Every function draws what it is given, labelled, and returns what it drew on (an Axes, or an array of
Axes for the two-panel pictures). Bad input raises a ValueError naming the argument.
"""

from __future__ import annotations

from typing import Any, Sequence

import matplotlib.pyplot as plt
import numpy as np

from ..i18n import tr
from ..validation import shape_str


def _array(values: Any, name: str, ndim: int, layout: str) -> np.ndarray:
    if hasattr(values, "detach") and hasattr(values, "cpu"):  # a torch tensor
        values = values.detach().cpu().numpy()
    try:
        array = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be an array of numbers of shape {layout}, got {type(values).__name__}") from None
    if array.ndim != ndim:
        raise ValueError(f"{name} must have shape {layout}, got {shape_str(array.shape)}")
    return array


def _offsets(offsets: Any, name: str = "offsets") -> np.ndarray:
    array = np.asarray(offsets)
    if array.ndim != 1 or array.size == 0 or array.dtype.kind not in "iu" or array.min() < 0:
        raise ValueError(f"{name} must be a non-empty 1-D array of non-negative integers, got {offsets!r}")
    return array


def _starts(starts: Sequence[int], offsets: np.ndarray, length: int, name: str = "starts") -> list[int]:
    starts = list(starts)
    if not starts or not all(isinstance(s, (int, np.integer)) and not isinstance(s, bool) and s >= 0 for s in starts):
        raise ValueError(f"{name} must be a non-empty list of non-negative integer positions, got {starts!r}")
    if max(starts) + int(offsets.max()) >= length:
        raise ValueError(f"{name} plus the largest offset ({max(starts)} + {int(offsets.max())}) must be a row of pe, "
                         f"which has {length} rows")
    return [int(s) for s in starts]


def _columns(dims: Sequence[int], width: int) -> list[int]:
    dims = list(dims)
    if not dims or not all(isinstance(d, (int, np.integer)) and not isinstance(d, bool) and 0 <= d < width
                           for d in dims):
        raise ValueError(f"dims must be a non-empty list of column indices in [0, {width}), got {dims!r}")
    return [int(d) for d in dims]


def plot_encoding(pe: Any, title: str = "", ax=None):
    """Heatmap of an encoding matrix pe: (positions, d_model); rows are positions, columns dimensions."""
    pe = _array(pe, "pe", 2, "(positions, d_model)")
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 3.2))
    image = ax.pcolormesh(pe, cmap="viridis", vmin=-1, vmax=1)
    ax.set_xlabel(tr("plots:pe_dimension", "dimension (column of PE)"))
    ax.set_ylabel(tr("plots:position", "position"))
    ax.set_title(title or tr("plots:pe_title", "Positional encoding: {positions} positions x {dims} dimensions",
                             positions=pe.shape[0], dims=pe.shape[1]))
    ax.invert_yaxis()  # position 0 at the top, as in the printed matrix
    plt.colorbar(image, ax=ax)
    return ax


def plot_encodings(encodings: Sequence[Any], titles: Sequence[str] | None = None):
    """Heatmaps of several encoding matrices side by side (one panel each); returns the array of Axes."""
    encodings = list(encodings)
    if not encodings:
        raise ValueError("encodings must hold at least one matrix (positions, d_model)")
    titles = [""] * len(encodings) if titles is None else list(titles)
    if len(titles) != len(encodings):
        raise ValueError(f"titles must have one title per encoding ({len(encodings)}), got {len(titles)}")
    fig, axes = plt.subplots(1, len(encodings), figsize=(5.5 * len(encodings), 3.2), squeeze=False)
    for pe, title, ax in zip(encodings, titles, axes[0]):
        plot_encoding(pe, title, ax=ax)
    fig.tight_layout()
    return axes[0]


def plot_dimensions(pe: Any, dims: Sequence[int], ax=None, title: str = ""):
    """Curves of a few columns of pe (positions, d_model) against position (one sinusoid per dimension)."""
    pe = _array(pe, "pe", 2, "(positions, d_model)")
    dims = _columns(dims, pe.shape[1])
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 3))
    for d in dims:
        kind = "sin" if d % 2 == 0 else "cos"
        ax.plot(pe[:, d], label=tr("plots:dim_label", "dim {d} ({kind})", d=d, kind=kind))
    ax.set_xlabel(tr("plots:position", "position"))
    ax.set_ylabel(tr("plots:pe_value", "PE value"))
    if title:
        ax.set_title(title)
    ax.legend(loc="upper right", fontsize="small")
    return ax


def plot_binary_and_sines(bits: Any, periods: Sequence[float]):
    """Left: the binary code of positions, bits: (positions, n_bits) of 0/1, least significant bit in column 0.
    Right: cosines cos(2 pi pos / period) of the given periods over the same positions, the smooth counterpart
    of the bit columns, drawn continuously with a dot at each whole-number position (the only ones a word has).
    Cosines, not sines: the sine of period 2, sin(pi pos), is 0 at every whole number."""
    bits = _array(bits, "bits", 2, "(positions, n_bits)")
    if not np.isin(bits, (0, 1)).all():
        raise ValueError("bits must hold only 0 and 1")
    periods = np.asarray(list(periods), dtype=np.float64)
    if periods.ndim != 1 or periods.size == 0 or not (periods > 0).all():
        raise ValueError(f"periods must be a non-empty list of positive numbers, got {periods.tolist()!r}")
    fig, axes = plt.subplots(1, 2, figsize=(10, 2.8))
    axes[0].imshow(bits, cmap="gray_r", aspect="auto")
    axes[0].set_xticks(range(bits.shape[1]), [tr("plots:bit_n", "bit {b}", b=b) for b in range(bits.shape[1])])
    axes[0].set(title=tr("plots:binary_title", "binary code of positions 0-{last}", last=bits.shape[0] - 1),
                xlabel=tr("plots:binary_x", "bit (least significant, the fastest, on the left)"),
                ylabel=tr("plots:position", "position"))
    samples = 20  # points drawn per unit of position; every 20th point is a whole-number position
    positions = np.linspace(0, bits.shape[0] - 1, samples * (bits.shape[0] - 1) + 1)
    for period in periods:
        axes[1].plot(positions, np.cos(2 * np.pi * positions / period), marker="o", markersize=3,
                     markevery=samples, label=tr("plots:period", "period {period:g}", period=period))
    axes[1].set(title=tr("plots:smooth_title", "smooth version: cosines of doubling period"),
                xlabel=tr("plots:smooth_x", "position (dots: whole numbers)"))
    axes[1].legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1))  # outside: no dot hidden
    fig.tight_layout()
    return axes


def plot_bounded_and_unique(pe: Any, offsets: Any, starts: Sequence[int] = (0, 1000)):
    """Left: histogram of every value of pe (positions, d_model). Right: the distance ||PE(p) - PE(p + k)||
    against the offset k, one curve per start position p."""
    pe = _array(pe, "pe", 2, "(positions, d_model)")
    offsets = _offsets(offsets)
    starts = _starts(starts, offsets, pe.shape[0])
    fig, axes = plt.subplots(1, 2, figsize=(10, 2.8))
    axes[0].hist(pe.ravel(), bins=50, range=(-1.1, 1.1))
    axes[0].set(title=tr("plots:all_values", "all values, positions 0 .. {last} (d_model = {d_model})",
                         last=pe.shape[0] - 1, d_model=pe.shape[1]),
                xlabel=tr("plots:value", "value"), ylabel=tr("plots:count", "count"))
    for number, start in enumerate(starts):
        distances = np.linalg.norm(pe[start + offsets] - pe[start], axis=1)
        axes[1].plot(offsets, distances, "-" if number == 0 else "--", label=f"p = {start}")
    axes[1].set(title=tr("plots:distance_title", "distance between PE(p) and PE(p + k)"),
                xlabel=tr("plots:offset_k", "offset k"), ylim=(0, None))
    axes[1].legend()
    fig.tight_layout()
    return axes


def plot_extrapolation(pe: Any, dims: Sequence[int], trained_length: int, ax=None):
    """Columns dims of pe against position, with the positions 0 .. trained_length shaded (seen in training)."""
    pe = _array(pe, "pe", 2, "(positions, d_model)")
    if isinstance(trained_length, bool) or not isinstance(trained_length, (int, np.integer)) or \
            not 0 < trained_length < pe.shape[0]:
        raise ValueError(f"trained_length must be an integer in [1, {pe.shape[0]}), got {trained_length!r}")
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 2.6))
    ax.axvspan(0, trained_length, color="0.9", label=tr("plots:trained_lengths", "lengths seen in training"))
    plot_dimensions(pe, dims, ax=ax)
    ax.set_title(tr("plots:extrapolation_title",
                    "The encoding continues past the training lengths (d_model = {d_model})", d_model=pe.shape[1]))
    return ax


def plot_offset_dot_products(pe: Any, offsets: Any, starts: Sequence[int] = (0, 50, 200), ax=None):
    """PE(p) . PE(p + k) against the offset k, one curve per start position p."""
    pe = _array(pe, "pe", 2, "(positions, d_model)")
    offsets = _offsets(offsets)
    starts = _starts(starts, offsets, pe.shape[0])
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 3))
    for start in starts:
        ax.plot(offsets, pe[start + offsets] @ pe[start], label=f"p = {start}")
    ax.set(xlabel=tr("plots:offset_k", "offset k"), ylabel="PE(p) . PE(p + k)",
           title=tr("plots:dot_title", "The dot product depends on the offset only (d_model = {d_model})",
                    d_model=pe.shape[1]))
    ax.legend()
    return ax


def plot_scores_along_sentence(additive: Any, rotary: Any, offsets: Sequence[int], starts: Any):
    """The attention score of a query at p and a key at p + k against p, one curve per offset k, for
    positions added to the input (left) and for RoPE (right). additive and rotary: (len(offsets), len(starts))."""
    starts = _offsets(starts, "starts")
    offsets = list(offsets)
    layout = f"(len(offsets), len(starts)) = ({len(offsets)}, {starts.size})"
    panels = [_array(additive, "additive", 2, layout), _array(rotary, "rotary", 2, layout)]
    for name, scores in zip(("additive", "rotary"), panels):
        if scores.shape != (len(offsets), starts.size):
            raise ValueError(f"{name} must have shape {layout}, got {shape_str(scores.shape)}")
    fig, axes = plt.subplots(1, 2, figsize=(10, 2.8), sharey=True)
    titles = [tr("plots:added_title", "positions added to the input"), tr("plots:rope_title", "RoPE: q and k rotated")]
    for ax, scores, title in zip(axes, panels, titles):
        for k, row in zip(offsets, scores):
            ax.plot(starts, row, label=f"k = {k}")
        ax.set(title=title, xlabel=tr("plots:query_position", "position p of the query"))
    axes[0].set_ylabel(tr("plots:score_pk", "score of (p, p + k)"))
    axes[1].legend(fontsize="small")
    fig.tight_layout()
    return axes
