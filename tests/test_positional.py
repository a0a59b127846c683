"""The reference positional encoding: values from the course documents, an independent PyTorch
formulation, the rotation property, and clear errors for bad input."""

import math

import numpy as np
import pytest
import torch

import helpers
from helpers import PositionalEncoding, positional_encoding, rotation_matrix


def torch_reference(max_len, d_model):
    """The exp/log formulation used by the Annotated Transformer, written independently in torch."""
    position = torch.arange(max_len, dtype=torch.float64).unsqueeze(1)
    div_term = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float64) * -(math.log(10000.0) / d_model))
    pe = torch.zeros(max_len, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term)
    return pe.numpy()


@pytest.mark.parametrize("max_len,d_model", [(10, 16), (1, 2), (128, 512), (50, 128), (7, 6)])
def test_matches_independent_torch_formulation(max_len, d_model):
    pe = positional_encoding(max_len, d_model)
    assert pe.dtype == np.float64 and pe.shape == (max_len, d_model)
    np.testing.assert_allclose(pe, torch_reference(max_len, d_model), atol=1e-12)


def test_values_printed_in_the_course_documents():
    pe = positional_encoding(10, 16)
    # Rows 1, 2 and 9 of the 10x16 matrix in the source documents (8 significant digits).
    np.testing.assert_allclose(pe[1, :4], [8.41470985e-01, 5.40302306e-01, 3.10983593e-01, 9.50415280e-01], rtol=1e-8)
    np.testing.assert_allclose(pe[2, :2], [9.09297427e-01, -4.16146837e-01], rtol=1e-8)
    np.testing.assert_allclose(pe[9, -4:], [8.99987850e-03, 9.99959500e-01, 2.84604605e-03, 9.99995950e-01], rtol=1e-8)
    np.testing.assert_array_equal(pe[0], np.tile([0.0, 1.0], 8))
    pe512 = positional_encoding(2, 512)
    np.testing.assert_allclose(np.round(pe512[1, :4], 4), [0.8415, 0.5403, 0.8219, 0.5697])
    np.testing.assert_allclose(np.trunc(pe512[1, :4] * 1e4) / 1e4, [0.8414, 0.5403, 0.8218, 0.5696])
    np.testing.assert_allclose(np.round(pe512[1, -2:], 4), [0.0001, 1.0])


def test_sine_on_even_columns_cosine_on_odd():
    pe = positional_encoding(20, 8)
    angle = 3 / 10000 ** (2 / 8)
    assert pe[3, 2] == pytest.approx(math.sin(angle)) and pe[3, 3] == pytest.approx(math.cos(angle))


def test_base_argument_and_frequencies():
    np.testing.assert_allclose(positional_encoding(5, 4, base=100.0)[2, 2], math.sin(2 / 100 ** 0.5))
    np.testing.assert_allclose(helpers.frequencies(8), [1, 10000 ** -0.25, 10000 ** -0.5, 10000 ** -0.75])


@pytest.mark.parametrize(
    "args,match",
    [((0, 16), "max_len"), ((-3, 16), "max_len"), ((2.5, 16), "max_len"), ((10, 0), "d_model"),
     ((10, 15), "d_model must be even"), ((10, "16"), "d_model"), ((True, 16), "max_len")],
)
def test_bad_sizes_raise_value_error_naming_the_argument(args, match):
    with pytest.raises(ValueError, match=match):
        positional_encoding(*args)
    with pytest.raises(ValueError, match="base"):
        positional_encoding(4, 4, base=0)


@pytest.mark.parametrize("k,d_model", [(1, 8), (5, 64), (42, 512), (0, 4)])
def test_rotation_matrix_shifts_every_position(k, d_model):
    pe = positional_encoding(100 + k, d_model)
    R = rotation_matrix(k, d_model)
    np.testing.assert_allclose(pe[: len(pe) - k] @ R, pe[k:], atol=1e-10)
    np.testing.assert_allclose(R @ R.T, np.eye(d_model), atol=1e-12)


def test_rotation_matrix_rejects_bad_offset():
    with pytest.raises(ValueError, match="k"):
        rotation_matrix(1.5, 8)


def test_positional_encoding_module_adds_the_table_in_eval_mode():
    module = PositionalEncoding(16, max_len=20, dropout=0.1).eval()
    x = torch.randn(3, 7, 16)
    expected = x + torch.from_numpy(positional_encoding(7, 16)).float()
    torch.testing.assert_close(module(x), expected)
    assert "pe" not in module.state_dict()  # a fixed buffer, not a parameter to save or train
    assert not any(p.requires_grad for p in module.parameters())


def test_positional_encoding_module_applies_dropout_in_train_mode():
    torch.manual_seed(0)
    module = PositionalEncoding(64, max_len=50, dropout=0.5).train()
    out = module(torch.zeros(4, 50, 64))
    zero_fraction = (out == 0).float().mean().item()
    assert 0.4 < zero_fraction < 0.6
    kept = out != 0
    np.testing.assert_allclose(out[kept].numpy(), (2 * module.pe.expand(4, 50, 64))[kept].numpy(), rtol=1e-6)


def test_positional_encoding_module_errors():
    module = PositionalEncoding(8, max_len=10)
    with pytest.raises(ValueError, match="max_len=10"):
        module(torch.zeros(1, 11, 8))
    with pytest.raises(ValueError, match=r"d_model=8"):
        module(torch.zeros(1, 4, 6))
    with pytest.raises(ValueError, match=r"\(batch, L, d_model"):
        module(torch.zeros(4, 8))
    with pytest.raises(ValueError, match="dropout"):
        PositionalEncoding(8, dropout=1.5)
    with pytest.raises(ValueError, match="d_model"):
        PositionalEncoding(7)


# ------------------------------------------------------------------------------------ rotary embeddings
def rope_loop(x, positions):
    """RoFormer's rotation written as plain loops: pair (2i, 2i+1) of row r turns by positions[r] * w_i."""
    x = np.asarray(x, dtype=np.float64)
    out = np.zeros_like(x)
    d = x.shape[-1]
    for index in np.ndindex(*x.shape[:-1]):
        pos = positions[index[-1]]
        for i in range(d // 2):
            a = pos / 10000 ** (2 * i / d)
            x0, x1 = x[index + (2 * i,)], x[index + (2 * i + 1,)]
            out[index + (2 * i,)] = x0 * math.cos(a) - x1 * math.sin(a)
            out[index + (2 * i + 1,)] = x0 * math.sin(a) + x1 * math.cos(a)
    return out


@pytest.mark.parametrize("shape,positions", [((5, 8), [3, 7, 0, 12, 5]), ((2, 3, 4, 6), [0, 1, 2, 100]),
                                             ((1, 2), [9])])
def test_apply_rope_equals_the_plain_loop(shape, positions):
    x = np.random.default_rng(0).normal(size=shape)
    np.testing.assert_allclose(helpers.apply_rope(x, np.array(positions)), rope_loop(x, positions), atol=1e-12)


def test_apply_rope_is_the_transposed_rotation_matrix_and_keeps_lengths():
    x = np.random.default_rng(1).normal(size=(6, 16))
    positions = np.array([0, 1, 5, 9, 40, 300])
    rotated = helpers.apply_rope(x, positions)
    for row, pos in enumerate(positions):
        np.testing.assert_allclose(rotated[row], x[row] @ rotation_matrix(int(pos), 16).T, atol=1e-12)
    np.testing.assert_allclose(np.linalg.norm(rotated, axis=-1), np.linalg.norm(x, axis=-1), atol=1e-12)
    assert not np.allclose(rotated[1:], x[1:]), "every row after position 0 moves"
    np.testing.assert_array_equal(rotated[0], x[0])


def test_rope_scores_depend_only_on_the_offset():
    rng = np.random.default_rng(2)
    q, k = rng.normal(size=(2, 32))
    for offset in (-7, 0, 3, 50):
        scores = [float(helpers.apply_rope(q[None], [p])[0] @ helpers.apply_rope(k[None], [p + offset])[0])
                  for p in (60, 100, 1000, 10_000)]
        np.testing.assert_allclose(scores, scores[0], rtol=1e-9, atol=1e-9)
    after = helpers.apply_rope(q[None], [60])[0] @ helpers.apply_rope(k[None], [63])[0]
    before = helpers.apply_rope(q[None], [60])[0] @ helpers.apply_rope(k[None], [57])[0]
    assert not np.isclose(after, before), "unlike PE(p).PE(p+k), the RoPE score tells after from before"


def test_added_encoding_scores_depend_on_the_position_but_the_raw_dot_product_does_not():
    """What notebook 01 says in section 6: the sum is offset-only and symmetric; after W^Q, W^K it is neither."""
    rng = np.random.default_rng(1)
    w_q, w_k = rng.normal(size=(2, 64, 16)) / 8
    pe = positional_encoding(300, 64)
    raw = [pe[p] @ pe[p + 3] for p in (0, 10, 50, 200)]
    np.testing.assert_allclose(raw, raw[0])
    assert np.isclose(pe[100] @ pe[90], pe[100] @ pe[110])
    projected = [pe[p] @ w_q @ w_k.T @ pe[p + 3] for p in (0, 10, 50, 200)]
    assert np.ptp(projected) > 1.0


def test_halves_layout_is_the_interleaved_one_up_to_a_permutation():
    """The notebook says the two RoPE layouts give the same scores once the columns of W^Q, W^K are permuted."""
    rng = np.random.default_rng(3)
    d, length = 8, 5
    x, w_q, w_k = rng.normal(size=(length, 16)), rng.normal(size=(16, d)), rng.normal(size=(16, d))
    positions = np.arange(length)
    half = d // 2
    angles = positions[:, None] / 10000 ** (2 * np.arange(half) / d)

    def halves(v):  # dimension j paired with j + d/2 (GPT-NeoX, Hugging Face LLaMA)
        a, b = v[:, :half], v[:, half:]
        return np.concatenate([a * np.cos(angles) - b * np.sin(angles), a * np.sin(angles) + b * np.cos(angles)], 1)

    interleaved_to_halves = np.concatenate([np.arange(0, d, 2), np.arange(1, d, 2)])  # column 2i -> i, 2i+1 -> i+d/2
    scores_halves = halves(x @ w_q[:, interleaved_to_halves]) @ halves(x @ w_k[:, interleaved_to_halves]).T
    scores_interleaved = helpers.apply_rope(x @ w_q, positions) @ helpers.apply_rope(x @ w_k, positions).T
    np.testing.assert_allclose(scores_halves, scores_interleaved, atol=1e-10)
    assert not np.allclose(halves(x @ w_q) @ halves(x @ w_k).T, scores_interleaved), "without the permutation"


def test_apply_rope_accepts_tensors_lists_and_leaves_x_unchanged():
    x = np.random.default_rng(4).normal(size=(3, 4))
    copy = x.copy()
    expected = helpers.apply_rope(x, np.array([1, 2, 3]))
    np.testing.assert_array_equal(x, copy)
    np.testing.assert_allclose(helpers.apply_rope(torch.from_numpy(x), torch.tensor([1, 2, 3])), expected)
    np.testing.assert_allclose(helpers.apply_rope(x.tolist(), [1, 2, 3]), expected)
    assert helpers.apply_rope(x, [1, 2, 3]).dtype == np.float64


@pytest.mark.parametrize(
    "x,positions,match",
    [(np.zeros(4), [0], r"x must have shape \(\.\.\., L, d\)"),
     (np.zeros((3, 5)), [0, 1, 2], "even, positive last axis"),
     (np.zeros((3, 0)), [0, 1, 2], "even, positive last axis"),
     ("abc", [0], "x must be an array of numbers"),
     (np.zeros((3, 4)), [0, 1], r"positions must have shape \(L,\) = \(3,\)"),
     (np.zeros((3, 4)), [[0, 1, 2]], "positions must have shape"),
     (np.zeros((3, 4)), [0.0, 1.5, 2.0], "positions must be integers"),
     (np.zeros((3, 4)), [True, False, True], "positions must be integers"),
     (np.zeros((3, 4)), [0, -1, 2], "positions must be non-negative")],
)
def test_apply_rope_rejects_bad_input_naming_the_argument(x, positions, match):
    with pytest.raises(ValueError, match=match):
        helpers.apply_rope(x, positions)


# ------------------------------------------------------------------------------------ the pictures
def test_plots_draw_what_they_are_given():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from helpers.plots import positional as plots

    pe = positional_encoding(300, 16)
    try:
        ax = plots.plot_dimensions(pe, [2, 3], title="columns")
        np.testing.assert_array_equal(ax.lines[1].get_ydata(), pe[:, 3])
        assert ax.get_title() == "columns" and ax.get_legend().get_texts()[0].get_text() == "dim 2 (sin)"

        bits = np.array([[(p >> b) & 1 for b in range(4)] for p in range(16)])
        left, right = plots.plot_binary_and_sines(bits, (2, 4, 8, 16))
        np.testing.assert_array_equal(left.images[0].get_array(), bits)
        assert [t.get_text() for t in left.get_xticklabels()] == ["bit 0", "bit 1", "bit 2", "bit 3"]
        assert len(right.lines) == 4 and right.get_legend().get_texts()[3].get_text() == "period 16"
        period_2 = right.lines[0]  # a cosine, drawn continuously, with a dot at each whole-number position
        dots = period_2.get_markevery()
        np.testing.assert_allclose(period_2.get_xdata()[::dots], np.arange(16), atol=1e-12)
        np.testing.assert_allclose(period_2.get_ydata()[::dots], 1 - 2 * bits[:, 0], atol=1e-12)

        hist, curves = plots.plot_bounded_and_unique(pe, np.arange(1, 51), starts=(0, 100))
        assert sum(patch.get_height() for patch in hist.patches) == pe.size
        np.testing.assert_allclose(curves.lines[1].get_ydata(), np.linalg.norm(pe[101:151] - pe[100], axis=1))

        ax = plots.plot_offset_dot_products(pe, np.arange(20), starts=(0, 7))
        np.testing.assert_allclose(ax.lines[1].get_ydata(), pe[7:27] @ pe[7])

        ax = plots.plot_extrapolation(pe, [6], trained_length=100)
        np.testing.assert_array_equal(ax.lines[0].get_ydata(), pe[:, 6])
        assert len(ax.patches) == 1  # the shaded training range

        axes = plots.plot_encodings([pe[:10], pe], ["a", "b"])
        assert [a.get_title() for a in axes] == ["a", "b"]

        added, rotary = np.arange(6.0).reshape(2, 3), np.ones((2, 3))
        left, right = plots.plot_scores_along_sentence(added, rotary, (1, 3), np.arange(3))
        np.testing.assert_array_equal(left.lines[1].get_ydata(), [3, 4, 5])
        assert right.get_legend().get_texts()[1].get_text() == "k = 3"
    finally:
        plt.close("all")


def test_plots_reject_bad_input_naming_the_argument():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from helpers.plots import positional as plots

    pe = positional_encoding(50, 8)
    try:
        with pytest.raises(ValueError, match=r"pe must have shape \(positions, d_model\)"):
            plots.plot_encoding(np.zeros(3))
        with pytest.raises(ValueError, match="dims must be"):
            plots.plot_dimensions(pe, [8])
        with pytest.raises(ValueError, match="titles must have one title per encoding"):
            plots.plot_encodings([pe, pe], ["one"])
        with pytest.raises(ValueError, match="encodings must hold"):
            plots.plot_encodings([])
        with pytest.raises(ValueError, match="bits must hold only 0 and 1"):
            plots.plot_binary_and_sines(np.full((4, 2), 2), (2, 4))
        with pytest.raises(ValueError, match="periods must be"):
            plots.plot_binary_and_sines(np.zeros((4, 2)), (2, -4))
        with pytest.raises(ValueError, match="offsets must be"):
            plots.plot_bounded_and_unique(pe, [1.5, 2.5])
        with pytest.raises(ValueError, match="starts plus the largest offset"):
            plots.plot_offset_dot_products(pe, np.arange(10), starts=(45,))
        with pytest.raises(ValueError, match="starts must be"):
            plots.plot_offset_dot_products(pe, np.arange(10), starts=(-1,))
        with pytest.raises(ValueError, match="trained_length"):
            plots.plot_extrapolation(pe, [0], trained_length=50)
        with pytest.raises(ValueError, match=r"rotary must have shape \(len\(offsets\), len\(starts\)\)"):
            plots.plot_scores_along_sentence(np.zeros((2, 3)), np.zeros((3, 2)), (1, 3), np.arange(3))
    finally:
        plt.close("all")
