"""The learning-rate schedule of the paper (section 5.3), and the cool-down notebook 06 adds to it.

    transformer_lr(step, d_model, warmup)   lrate = d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)
    scheduled_lr(step, config)              the same, brought linearly to zero over the last steps
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from .validation import positive_float, positive_int

if TYPE_CHECKING:
    from .training import TrainConfig


def transformer_lr(step: int, d_model: int, warmup: int, factor: float = 1.0) -> float:
    """lrate = factor * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)   (paper, section 5.3).

    It rises linearly for `warmup` steps, peaks at factor / sqrt(d_model * warmup), then decays
    as 1/sqrt(step). Steps count from 1 (step 0 is treated as step 1).
    """
    d_model = positive_int(d_model, "d_model")
    warmup = positive_int(warmup, "warmup")
    factor = positive_float(factor, "factor")
    step = max(int(step), 1)
    return factor * d_model ** -0.5 * min(step ** -0.5, step * warmup ** -1.5)


def scheduled_lr(step: int, config: "TrainConfig", formula: Callable[[int, int, int], float] | None = None) -> float:
    """The learning rate of a training step: config.lr_factor times the paper's schedule, then (with
    config.cooldown > 0) a linear fall to zero over the last cooldown * steps steps.

    formula(step, d_model, warmup) is the paper's schedule: transformer_lr unless given (notebook 06
    passes the student's own).

    The paper trained 100,000 steps and stopped while the rate was still 1/sqrt(step)-sized; a
    short run ends far better when the rate is brought down at the end (the weights settle
    instead of jumping around the minimum).
    """
    formula = formula or transformer_lr
    rate = config.lr_factor * formula(max(int(step), 1), config.d_model, config.warmup)
    cooldown_steps = int(round(config.cooldown * config.steps))
    if cooldown_steps > 0:
        rate *= min(1.0, max(config.steps - step + 1, 0) / cooldown_steps)
    return rate


__all__ = ["scheduled_lr", "transformer_lr"]
