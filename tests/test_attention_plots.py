"""helpers.plots.attention: the attention, score, mask, heads, saturation and cost pictures draw what they are
given, labelled, and refuse bad input with a ValueError naming the argument."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from helpers.masking import causal_mask, padding_mask  # noqa: E402
from helpers.plots import plot_attention, plot_heads, plot_mask  # noqa: E402
from helpers.plots.attention import (plot_attention_cost, plot_masking, plot_masks, plot_saturation,  # noqa: E402
                                     plot_scores)

WORDS = ["La", "vida", "es", "bella"]


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def test_plot_attention_labels_and_annotates():
    weights = np.array([[0.1, 0.2, 0.3, 0.4]] * 4)
    ax = plot_attention(weights, WORDS, title="weights")
    assert [t.get_text() for t in ax.get_xticklabels()] == WORDS
    assert [t.get_text() for t in ax.get_yticklabels()] == WORDS
    assert len(ax.texts) == 16 and ax.texts[3].get_text() == "0.40"
    np.testing.assert_array_equal(ax.images[0].get_array(), weights)
    assert ax.get_title() == "weights"


def test_plot_attention_handles_rectangles_minus_inf_and_tensors():
    scores = np.array([[1.0, -np.inf, 2.0], [0.5, 0.2, -np.inf]])
    ax = plot_attention(torch.from_numpy(scores), ["a", "b"], ["x", "y", "z"])
    assert "-inf" in [t.get_text() for t in ax.texts]
    ax = plot_attention(np.zeros((20, 20)))
    assert not ax.texts  # large matrices are not annotated


def test_plot_attention_rejects_bad_input():
    with pytest.raises(ValueError, match=r"weights must have shape \(L_q, L_k\)"):
        plot_attention(np.zeros((2, 2, 2)))
    with pytest.raises(ValueError, match="row_labels"):
        plot_attention(np.zeros((2, 3)), ["a"])


def test_plot_mask_squeezes_broadcast_shapes():
    ax = plot_mask(causal_mask(4), WORDS)
    np.testing.assert_array_equal(ax.images[0].get_array(), causal_mask(4))
    assert [t.get_text() for t in ax.texts][:4] == ["1", "0", "0", "0"]
    ax = plot_mask(padding_mask(np.array([[3, 4, 0]]), 0), ["q"], ["a", "b", "<pad>"])
    np.testing.assert_array_equal(ax.images[0].get_array(), [[True, True, False]])
    with pytest.raises(ValueError, match="mask must be boolean"):
        plot_mask(np.ones((2, 2)))


def test_plot_heads_draws_one_panel_per_head():
    weights = np.random.default_rng(0).dirichlet(np.ones(4), size=(8, 4))
    fig = plot_heads(weights, WORDS)
    panels = [ax for ax in fig.axes if ax.images]
    assert len(panels) == 8
    np.testing.assert_array_equal(panels[5].images[0].get_array(), weights[5])
    assert [ax.get_title() for ax in panels] == [f"head {i}" for i in range(8)]  # counted from 0, as the h axis
    with pytest.raises(ValueError, match=r"weights_per_head must have shape \(h, L_q, L_k\)"):
        plot_heads(weights[0])


# ----------------------------------------------------------------------------- pictures added for notebooks 02-04
def test_plot_scores_centres_the_colours_on_zero_and_writes_minus_inf():
    scores = np.array([[1.0, -3.0], [2.0, -np.inf]])
    ax = plot_scores(scores, ["a", "b"])
    assert ax.images[0].get_clim() == (-3.0, 3.0)
    assert [t.get_text() for t in ax.texts] == ["1.00", "-3.00", "2.00", "-inf"]
    assert plot_scores(scores, ["a", "b"], limit=5).images[0].get_clim() == (-5.0, 5.0)
    with pytest.raises(ValueError, match="limit must be a positive number"):
        plot_scores(scores, limit=0)
    with pytest.raises(ValueError, match=r"scores must have shape \(L_q, L_k\)"):
        plot_scores(np.zeros(3))


def test_plot_masking_draws_scores_blocked_scores_and_weights():
    scores = np.random.default_rng(0).normal(size=(4, 4))
    fig = plot_masking(scores, causal_mask(4), WORDS)
    panels = [ax for ax in fig.axes if ax.images]
    assert [ax.get_title() for ax in panels] == ["scores", "scores, blocked keys = -inf", "weights after the softmax"]
    np.testing.assert_array_equal(panels[0].images[0].get_array(), scores)
    blocked = np.ma.getmaskarray(panels[1].images[0].get_array())
    np.testing.assert_array_equal(blocked, ~causal_mask(4))  # -inf is drawn blank
    weights = np.asarray(panels[2].images[0].get_array())
    np.testing.assert_allclose(weights.sum(axis=1), 1.0)
    assert np.all(weights[~causal_mask(4)] == 0)
    with pytest.raises(ValueError, match="mask must be boolean"):
        plot_masking(scores, np.ones((4, 4)))
    with pytest.raises(ValueError, match=r"mask of shape \(3, 3\) does not broadcast"):
        plot_masking(scores, causal_mask(3))


def test_plot_masks_draws_one_panel_per_mask():
    masks = [causal_mask(4), np.ones((4, 4), dtype=bool)]
    fig = plot_masks(masks, WORDS, titles=["causal", "all"])
    panels = [ax for ax in fig.axes if ax.images]
    assert [ax.get_title() for ax in panels] == ["causal", "all"]
    np.testing.assert_array_equal(panels[0].images[0].get_array(), causal_mask(4))
    with pytest.raises(ValueError, match="titles must have one title per mask"):
        plot_masks(masks, WORDS, titles=["one"])
    with pytest.raises(ValueError, match="masks must be a non-empty list"):
        plot_masks(causal_mask(4))
    with pytest.raises(ValueError, match="masks must be a non-empty list"):
        plot_masks([])


def test_plot_saturation_draws_both_curves():
    widths = [4, 16, 64]
    raw, scaled = [(0.6, 0.3), (0.8, 0.2), (0.9, 0.1)], [(0.5, 0.4)] * 3
    fig = plot_saturation(widths, raw, scaled)
    left, right = fig.axes
    np.testing.assert_array_equal(left.lines[0].get_ydata(), [0.6, 0.8, 0.9])
    np.testing.assert_array_equal(right.lines[1].get_ydata(), [0.4, 0.4, 0.4])
    assert left.get_xscale() == "log"
    with pytest.raises(ValueError, match=r"raw must hold one \(largest weight, Jacobian norm\) pair per width"):
        plot_saturation(widths, raw[:2], scaled)
    with pytest.raises(ValueError, match="widths must be positive"):
        plot_saturation([0, 16, 64], raw, scaled)
    with pytest.raises(ValueError, match="widths must hold"):
        plot_saturation(["a", "b", "c"], raw, scaled)


def test_plot_attention_cost_draws_measurements_and_a_quadratic_reference():
    rows = [{"L": 128, "ms": 2.0, "saved_MB": 1.0}, {"L": 256, "ms": 7.0, "saved_MB": 3.5},
            {"L": 512, "ms": 30.0, "saved_MB": 15.0}]
    fig = plot_attention_cost(rows)
    time_ax, memory_ax = fig.axes
    np.testing.assert_array_equal(time_ax.lines[0].get_ydata(), [2.0, 7.0, 30.0])
    np.testing.assert_allclose(memory_ax.lines[1].get_ydata(), [15.0 / 16, 15.0 / 4, 15.0])  # L^2 through the last
    assert time_ax.get_xscale() == time_ax.get_yscale() == "log"
    assert [t.get_text() for t in time_ax.get_xticklabels()] == ["128", "256", "512"]
    with pytest.raises(ValueError, match="rows must be a non-empty list of dicts"):
        plot_attention_cost([])
    with pytest.raises(ValueError, match=r"missing \['saved_MB'\]"):
        plot_attention_cost([{"L": 128, "ms": 2.0}])
    with pytest.raises(ValueError, match="positive"):
        plot_attention_cost([{"L": 128, "ms": 0.0, "saved_MB": 1.0}])


def test_plot_rnn_influence_draws_one_log_curve_per_scale():
    from helpers.plots.attention import plot_rnn_influence

    moves = np.array([[1e-6, 1e-3, 1.0], [0.5, 0.7, 1.0]])
    ax = plot_rnn_influence([1, 2, 3], moves, [1.0, 3.0])
    assert ax.get_yscale() == "log" and len(ax.lines) == 2
    np.testing.assert_array_equal(ax.lines[0].get_ydata(), moves[0])
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["g = 1.0", "g = 3.0"]
    for bad in (moves[:1], np.zeros((2, 3)), np.full((2, 3), np.nan)):
        with pytest.raises(ValueError, match="moves"):
            plot_rnn_influence([1, 2, 3], bad, [1.0, 3.0])
    with pytest.raises(ValueError, match="words"):
        plot_rnn_influence("abc", moves, [1.0, 3.0])
