"""Pictures for notebook 06: the learning-rate schedule, the loss curve, and a trained model's attention.

Each function accepts numpy arrays, lists or torch tensors and returns what it drew on.
"""

from __future__ import annotations

from typing import Any, Sequence

import matplotlib.pyplot as plt
import numpy as np

from ..i18n import tr
from ..loss import loss_floor
from ..schedule import transformer_lr
from ..training import History


def moving_average(values: Sequence[float], window: int = 25) -> np.ndarray:
    """The mean of each run of `window` consecutive values (len(values) - window + 1 of them)."""
    values = np.asarray(values, dtype=np.float64)
    window = max(1, min(int(window), len(values)))
    if len(values) == 0:
        return values
    kernel = np.ones(window) / window
    return np.convolve(values, kernel, mode="valid")


def plot_schedule(d_model: int, warmup: int, steps: int, factor: float = 1.0, ax=None,
                  others: Sequence[tuple[int, int]] = ()):
    """The paper's learning rate over `steps` steps; `others` adds curves for other (d_model, warmup) pairs."""
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 3))
    x = np.arange(1, steps + 1)
    for dm, wu in [(d_model, warmup), *others]:
        ax.plot(x, [transformer_lr(s, dm, wu, factor) for s in x], label=f"d_model={dm}, warmup={wu}")
    ax.axvline(warmup, color="gray", linestyle=":", linewidth=1)
    ax.set_xlabel(tr("plots:step", "step"))
    ax.set_ylabel(tr("plots:learning_rate", "learning rate"))
    ax.set_title("lrate = d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)", fontsize=9)
    ax.legend(fontsize=8)
    return ax


def _schedule_title(lr: Sequence[float]) -> str:
    """What a learning-rate curve shows: a warm-up to its peak, then a decay; or nothing so simple."""
    lr = np.asarray(lr, dtype=np.float64)
    if len(lr) < 3:
        return tr("plots:lr_each_step", "Learning rate of each step")
    peak = int(np.argmax(lr))
    rises, falls = np.diff(lr[:peak + 1]), np.diff(lr[peak:])
    if 0 < peak < len(lr) - 1 and (rises > 0).all() and (falls <= 0).all() and lr[-1] < lr[peak]:
        return tr("plots:warmup_then_decay", "Warm-up for {steps} steps, then decay", steps=peak + 1)
    return tr("plots:lr_each_step", "Learning rate of each step")


def plot_history(history: History, vocab_size: int | None = None, smoothing: float = 0.1, window: int = 25,
                 target: float | None = 0.99):
    """The learning rate of every step, the training loss (raw and smoothed), and, when the history holds
    it, the exact match on the validation pairs measured during training: two or three panels side by side.

    The learning-rate panel's title is read from the history: "Warm-up for P steps, then decay" when
    the rate rises to its peak at step P and falls after it, "Learning rate of each step" otherwise.
    With vocab_size, a dashed line marks the lowest loss label smoothing allows (loss_floor); with
    target (a fraction), a dotted line marks that exact match.
    """
    validated = len(history.valid_step) > 0
    fig, axes = plt.subplots(1, 3 if validated else 2, figsize=(14, 3.2) if validated else (10, 3.2))
    ax_lr, ax_loss = axes[0], axes[1]
    steps = np.arange(1, len(history.loss) + 1)
    ax_lr.plot(steps, history.lr)
    ax_lr.set_xlabel(tr("plots:step", "step"))
    ax_lr.set_ylabel(tr("plots:learning_rate", "learning rate"))
    ax_lr.set_title(_schedule_title(history.lr))
    ax_loss.plot(steps, history.loss, alpha=0.3, label=tr("plots:loss_each_batch", "loss of each batch"))
    smooth = moving_average(history.loss, window)
    ax_loss.plot(steps[len(steps) - len(smooth):], smooth,
                 label=tr("plots:mean_of_steps", "mean of {window} steps", window=window))
    if vocab_size:
        ax_loss.axhline(loss_floor(vocab_size, smoothing), color="gray", linestyle="--", linewidth=1,
                        label=tr("plots:loss_floor", "floor set by label smoothing"))
    ax_loss.set_yscale("log")
    ax_loss.set_xlabel(tr("plots:step", "step"))
    ax_loss.set_ylabel(tr("plots:smoothed_cross_entropy", "label-smoothed cross-entropy"))
    ax_loss.set_title(tr("plots:training_loss", "Training loss"))
    ax_loss.legend(fontsize=8)
    if validated:
        ax_valid = axes[2]
        ax_valid.plot(history.valid_step, 100 * np.asarray(history.valid_exact_match), "o-", markersize=3)
        if target is not None:
            ax_valid.axhline(100 * target, color="gray", linestyle=":", linewidth=1,
                             label=tr("plots:target", "target: {target}%", target=f"{100 * target:g}"))
            ax_valid.legend(fontsize=8, loc="lower right")
        ax_valid.set_ylim(0, 100)
        ax_valid.set_xlim(0, max(len(history.loss), history.valid_step[-1]))
        ax_valid.set_xlabel(tr("plots:step", "step"))
        ax_valid.set_ylabel(tr("plots:exact_match_percent", "exact match (%)"))
        ax_valid.set_title(tr("plots:validation_exact_match", "Exact match on the validation dates"))
    fig.tight_layout()
    return fig


def plot_cross_attention(weights: Any, output_labels: Sequence[str], source_labels: Sequence[str], ax=None,
                         title: str | None = None):
    """Heatmap of cross-attention weights (L_out, L_src): which input character each output character reads.

    title defaults to "Cross-attention"."""
    title = tr("plots:cross_attention", "Cross-attention") if title is None else title
    if hasattr(weights, "detach"):
        weights = weights.detach().cpu().numpy()
    weights = np.asarray(weights, dtype=np.float64)
    if weights.ndim != 2 or weights.shape != (len(output_labels), len(source_labels)):
        raise ValueError(f"weights must have shape (L_out={len(output_labels)}, L_src={len(source_labels)}), "
                         f"got {weights.shape}")
    if ax is None:
        _, ax = plt.subplots(figsize=(0.28 * len(source_labels) + 1.6, 0.3 * len(output_labels) + 1.2))
    ax.imshow(weights, cmap="viridis", vmin=0.0, vmax=max(float(weights.max()), 1e-9), aspect="auto")
    ax.set_xticks(range(len(source_labels)), [repr(c)[1:-1] if c != " " else "␣" for c in source_labels])
    ax.set_yticks(range(len(output_labels)), list(output_labels))
    ax.set_xlabel(tr("plots:input_character", "input character (key)"))
    ax.set_ylabel(tr("plots:output_character", "output character (query)"))
    ax.set_title(title)
    return ax


__all__ = ["moving_average", "plot_cross_attention", "plot_history", "plot_schedule"]
