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
