"""The learning-rate schedule of the paper (section 5.3), and the cool-down notebook 06 adds to it.

    transformer_lr(step, d_model, warmup)   lrate = d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)
    scheduled_lr(step, config)              the same, brought linearly to zero over the last steps

This module imports nothing from helpers.training (which imports it): scheduled_lr reads the five
fields it needs from any configuration that has them (a helpers.TrainConfig in practice).
"""

from __future__ import annotations

from typing import Callable, Protocol, runtime_checkable

from .validation import positive_float, positive_int, step_number


@runtime_checkable
class ScheduleConfig(Protocol):
    """What scheduled_lr reads from a configuration (helpers.TrainConfig has all five)."""

    d_model: int
    warmup: int
    steps: int
    lr_factor: float
    cooldown: float


def transformer_lr(step: int, d_model: int, warmup: int, factor: float = 1.0) -> float:
    """lrate = factor * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)   (paper, section 5.3).

    It rises linearly for `warmup` steps, peaks at factor / sqrt(d_model * warmup), then decays
    as 1/sqrt(step). Steps count from 1 (step 0 is treated as step 1); step must be an integer >= 0.
    """
    step = step_number(step)
    d_model = positive_int(d_model, "d_model")
    warmup = positive_int(warmup, "warmup")
    factor = positive_float(factor, "factor")
    step = max(step, 1)
    return factor * d_model ** -0.5 * min(step ** -0.5, step * warmup ** -1.5)


def scheduled_lr(step: int, config: ScheduleConfig, formula: Callable[[int, int, int], float] | None = None) -> float:
    """The learning rate of a training step: config.lr_factor times the paper's schedule, then (with
    config.cooldown > 0) a linear fall to zero over the last cooldown * steps steps.

    config: a helpers.TrainConfig (d_model, warmup, steps, lr_factor and cooldown are read).
    formula(step, d_model, warmup) is the paper's schedule: transformer_lr unless given (notebook 06
    passes the student's own).

    The paper trained 100,000 steps and stopped while the rate was still 1/sqrt(step)-sized; a
    short run ends far better when the rate is brought down at the end (the weights settle
    instead of jumping around the minimum).
    """
    step = step_number(step)
    if not isinstance(config, ScheduleConfig):
        raise TypeError(f"config must be a helpers.TrainConfig (with d_model, warmup, steps, lr_factor and "
                        f"cooldown), got {type(config).__name__}")
    if formula is not None and not callable(formula):
        raise TypeError(f"formula must be a function formula(step, d_model, warmup) -> learning rate (or None "
                        f"for transformer_lr), got {formula!r} ({type(formula).__name__})")
    formula = formula or transformer_lr
    rate = config.lr_factor * formula(max(step, 1), config.d_model, config.warmup)
    cooldown_steps = int(round(config.cooldown * config.steps))
    if cooldown_steps > 0:
        rate *= min(1.0, max(config.steps - step + 1, 0) / cooldown_steps)
    return rate


__all__ = ["ScheduleConfig", "scheduled_lr", "transformer_lr"]
