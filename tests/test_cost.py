"""helpers.cost: the multiply-add counts of the paper's Table 1 (notebook 03, section 6), the memory that
autograd keeps for attention (quadratic in L), and the benchmark that shares the measurement."""

import sys
from pathlib import Path

import pytest
import torch

from helpers.cost import layer_multiply_adds, lstm_crossover, measure_attention, saved_bytes

ROOT = Path(__file__).resolve().parent.parent


def test_multiply_adds_match_the_formulas():
    counts = layer_multiply_adds(100, 64, kernel=5)
    assert counts == {"self-attention": 2 * 100**2 * 64, "projections": 4 * 100 * 64**2,
                      "recurrent": 2 * 100 * 64**2, "lstm": 8 * 100 * 64**2, "convolutional": 5 * 100 * 64**2}


def test_multi_head_attention_costs_less_than_an_lstm_below_n_equals_2d():
    """Notebook 03: 2n^2 d + 4n d^2 < 8n d^2 exactly when n < 2d (equal at n = 2d)."""
    for d in (8, 64, 512):
        assert lstm_crossover(d) == 2 * d + 1
        at = layer_multiply_adds(2 * d, d)
        assert at["self-attention"] + at["projections"] == at["lstm"]


def test_self_attention_equals_recurrent_exactly_at_n_equals_d():
    """Notebook 03: the ratio is n / d, so self-attention is cheaper below n = d and dearer above."""
    d = 512
    for n in (16, 256, 512, 1024, 4096):
        counts = layer_multiply_adds(n, d)
        assert counts["self-attention"] * d == counts["recurrent"] * n
    assert layer_multiply_adds(511, d)["self-attention"] < layer_multiply_adds(511, d)["recurrent"]
    assert layer_multiply_adds(512, d)["self-attention"] == layer_multiply_adds(512, d)["recurrent"]
    assert layer_multiply_adds(513, d)["self-attention"] > layer_multiply_adds(513, d)["recurrent"]
    # ... and the n^2 part equals the four projections at n = 2d
    assert layer_multiply_adds(1024, d)["self-attention"] == layer_multiply_adds(1024, d)["projections"]


@pytest.mark.parametrize("kwargs, match", [
    ({"n": 0, "d": 8}, "n must be a positive integer"),
    ({"n": 4, "d": 2.5}, "d must be a positive integer"),
    ({"n": 4, "d": 8, "kernel": -1}, "kernel must be a positive integer"),
    ({"n": True, "d": 8}, "n must be a positive integer"),
])
def test_multiply_adds_reject_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        layer_multiply_adds(**kwargs)


def test_saved_bytes_counts_what_autograd_keeps():
    x = torch.randn(100, 50, requires_grad=True)  # 20,000 bytes in float32
    assert saved_bytes(lambda: (x * 2).sum()) == 0  # multiplying by a number saves nothing
    assert saved_bytes(lambda: (x * x).sum()) == 100 * 50 * 4  # x is saved once, not twice
    assert saved_bytes(lambda: x.exp().sum()) == 100 * 50 * 4  # exp saves its result
    with pytest.raises(ValueError, match="fn must be a function"):
        saved_bytes(3)


def test_attention_memory_grows_quadratically():
    """What notebook 03 says about its (masked) measurement: the memory factor per doubling of L
    grows towards 4, and the weights matrix is 4 h L^2 bytes."""
    rows = measure_attention(lengths=(128, 256, 512, 1024), d_model=16, num_heads=2, repeats=1)
    assert [row["L"] for row in rows] == [128, 256, 512, 1024]
    factors = [b["saved_MB"] / a["saved_MB"] for a, b in zip(rows, rows[1:])]
    assert factors == sorted(factors) and 3.7 < factors[-1] <= 4.0, factors
    assert all(row["weights_MB"] == 2 * row["L"] ** 2 * 4 / 2**20 for row in rows)
    assert all(row["ms"] > 0 for row in rows)


def test_measurement_is_seeded_and_leaves_the_global_state_alone():
    torch.manual_seed(123)
    expected = torch.rand(3)
    threads = torch.get_num_threads()
    torch.manual_seed(123)
    first = measure_attention(lengths=(8,), d_model=8, num_heads=2, repeats=1)
    assert torch.equal(torch.rand(3), expected), "measure_attention must not move the global generator"
    assert torch.get_num_threads() == threads, "measure_attention restores the number of threads"
    second = measure_attention(lengths=(8,), d_model=8, num_heads=2, repeats=1)
    assert first[0]["saved_MB"] == second[0]["saved_MB"]


@pytest.mark.parametrize("kwargs, match", [
    ({"lengths": []}, "lengths must be a non-empty sequence"),
    ({"lengths": 128}, "lengths must be a non-empty sequence"),
    ({"lengths": (128, 0)}, "each of lengths must be a positive integer"),
    ({"lengths": (8,), "repeats": 0}, "repeats must be a positive integer"),
    ({"lengths": (8,), "d_model": 10, "num_heads": 4}, "not divisible by num_heads"),
])
def test_measure_attention_rejects_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        measure_attention(**kwargs)


def test_the_benchmark_uses_the_same_measurement():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import bench_attention
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    assert bench_attention.saved_bytes is saved_bytes
