"""helpers.plots.training: the loss-history picture titles its learning-rate panel from the history."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from helpers.loss import loss_floor  # noqa: E402
from helpers.plots import plot_history  # noqa: E402
from helpers.schedule import scheduled_lr  # noqa: E402
from helpers.training import History, TrainConfig  # noqa: E402


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def history_of(lr):
    lr = list(lr)
    return History(loss=[2.0 - 0.01 * i for i in range(len(lr))], lr=list(lr))


def test_the_notebook_schedule_is_titled_with_its_warm_up():
    config = TrainConfig(d_model=64, num_heads=4, num_layers=2, d_ff=256, steps=600, warmup=200, cooldown=0.4)
    fig = plot_history(history_of(scheduled_lr(s, config) for s in range(1, 601)), vocab_size=14, smoothing=0.1)
    ax_lr, ax_loss = fig.axes
    assert ax_lr.get_title() == "Warm-up for 200 steps, then decay"
    assert ax_loss.get_title() == "Training loss"
    floor = [line for line in ax_loss.get_lines() if line.get_linestyle() == "--"]
    assert len(floor) == 1 and floor[0].get_ydata()[0] == pytest.approx(loss_floor(14, 0.1))


@pytest.mark.parametrize("lr", [[1e-3] * 10, [1e-3 * (i + 1) for i in range(10)], [1e-3 / (i + 1) for i in range(10)],
                                [1e-3, 2e-3, 1e-3, 2e-3, 1e-3], [1e-3, 2e-3]])
def test_other_curves_get_a_plain_title(lr):
    """Constant, only rising, only falling, or up and down again: no warm-up-then-decay claim."""
    ax_lr, _ = plot_history(history_of(lr)).axes
    assert ax_lr.get_title() == "Learning rate of each step"


def test_the_validation_exact_match_is_drawn_beside_the_loss():
    config = TrainConfig(d_model=64, num_heads=4, num_layers=2, d_ff=256, steps=600, warmup=200, cooldown=0.4)
    history = history_of(scheduled_lr(s, config) for s in range(1, 601))
    history.valid_step, history.valid_exact_match = [100, 200, 300], [0.5, 0.9, 0.995]
    fig = plot_history(history, vocab_size=14)
    assert len(fig.axes) == 3
    ax_valid = fig.axes[2]
    assert ax_valid.get_title() == "Exact match on the validation dates"
    curve = ax_valid.get_lines()[0]
    assert list(curve.get_xdata()) == [100, 200, 300] and list(curve.get_ydata()) == pytest.approx([50, 90, 99.5])
    assert len(plot_history(history_of([1e-3] * 5)).axes) == 2  # no validation recorded: two panels
