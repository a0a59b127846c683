"""helpers.plotting: the attention, mask and heads pictures draw what they are given, labelled."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from helpers.masking import causal_mask, padding_mask  # noqa: E402
from helpers.plots import plot_attention, plot_heads, plot_mask  # noqa: E402

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
    with pytest.raises(ValueError, match=r"weights_per_head must have shape \(h, L_q, L_k\)"):
        plot_heads(weights[0])
