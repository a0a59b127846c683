"""What a layer costs: the multiply-adds of the paper's Table 1, and attention's time and memory measured.

    layer_multiply_adds(n, d, kernel=3)   multiply-adds of one layer over n positions of width d:
                                          self-attention (its n^2 part and its projections),
                                          a recurrent layer (tanh), an LSTM, a convolution of width ``kernel``
    lstm_crossover(d)                     the first n where a multi-head attention layer costs more than an LSTM
    saved_bytes(fn)                       bytes of the tensors autograd keeps for the backward pass during fn()
    measure_attention(lengths, ...)       time (forward + backward) and saved memory of one
                                          MultiHeadAttention layer with a causal mask, for each length

Counting conventions (Vaswani et al. 2017, Table 1 and section 4): self-attention relates every pair of
positions, QK^T and weights @ V, n^2 d multiply-adds each; its four projections (W^Q, W^K, W^V, W^O)
add 4 n d^2, which Table 1 leaves out. A recurrent layer h_t = tanh(h_{t-1} W_h + x_t W_x) costs
2 d^2 per position; an LSTM (four gates, each a d x d product of x_t and one of h_{t-1}, as in GNMT, the
recurrent model the paper compares with) 8 d^2 per position; a convolution of width k from d to d channels costs
k d^2 per position. The element-wise work (tanh, sigmoids, the softmax) is not counted.

The measurements are those of ``benchmarks/bench_attention.py``, which imports ``saved_bytes`` from here.
"""

from __future__ import annotations

import statistics
import time
from typing import Any, Callable, Sequence

import torch

from .masking import causal_mask_torch
from .multi_head import MultiHeadAttention
from .validation import positive_int


def layer_multiply_adds(n: int, d: int, kernel: int = 3) -> dict[str, int]:
    """Multiply-adds of one layer over ``n`` positions of width ``d`` (the rows of the paper's Table 1).

    Returns {"self-attention": 2 n^2 d, "projections": 4 n d^2, "recurrent": 2 n d^2, "lstm": 8 n d^2,
    "convolutional": kernel n d^2}. "self-attention" is the part Table 1 counts (every query against
    every key, then the weighted sum of the values); "projections" is what a multi-head attention layer
    adds to it.
    """
    n, d, kernel = positive_int(n, "n"), positive_int(d, "d"), positive_int(kernel, "kernel")
    return {
        "self-attention": 2 * n * n * d,
        "projections": 4 * n * d * d,
        "recurrent": 2 * n * d * d,
        "lstm": 8 * n * d * d,
        "convolutional": kernel * n * d * d,
    }


def lstm_crossover(d: int) -> int:
    """The smallest n at which a multi-head attention layer (2 n^2 d + 4 n d^2) costs more multiply-adds than an
    LSTM layer (8 n d^2): found by counting, n = 2d + 1."""
    d = positive_int(d, "d")
    n = 1
    while (lambda c: c["self-attention"] + c["projections"] <= c["lstm"])(layer_multiply_adds(n, d)):
        n += 1
    return n


def saved_bytes(fn: Callable[[], Any]) -> int:
    """Bytes of the tensors autograd saves for the backward pass while ``fn()`` runs (each storage once)."""
    if not callable(fn):
        raise ValueError(f"fn must be a function of no arguments, got {type(fn).__name__}")
    seen: dict[int, int] = {}

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        try:
            storage = tensor.untyped_storage()
            seen[storage.data_ptr()] = storage.nbytes()
        except RuntimeError:  # a tensor without storage (a view of a wrapper): nothing to count
            pass
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        out = fn()
    del out
    return sum(seen.values())


def _lengths(lengths: Any) -> list[int]:
    if isinstance(lengths, (str, bytes)) or not isinstance(lengths, Sequence) or not lengths:
        raise ValueError(f"lengths must be a non-empty sequence of positive integers, got {lengths!r}")
    return [positive_int(length, "each of lengths") for length in lengths]


def measure_attention(lengths: Sequence[int] = (128, 256, 512, 1024, 2048), d_model: int = 64, num_heads: int = 4,
                      batch: int = 1, repeats: int = 3, seed: int = 0) -> list[dict]:
    """Time and memory of one causal self-attention layer (``MultiHeadAttention``, float32, on the CPU).

    The layer runs on one CPU thread (the setting is restored afterwards), so that other programs on
    the machine disturb the times less. For each L of ``lengths``: the median over ``repeats`` runs
    (after one warm-up run) of a forward and backward pass, in milliseconds, and the mebibytes (MiB,
    2^20 bytes each) autograd keeps for the backward pass. Returns one dict per length:
    {"L", "ms", "saved_MB", "weights_MB"}, where "weights_MB" is the size of one (batch, h, L, L)
    float32 matrix of attention weights; both sizes are in MiB, whatever the "MB" of the keys.
    """
    lengths = _lengths(lengths)
    d_model, num_heads = positive_int(d_model, "d_model"), positive_int(num_heads, "num_heads")
    batch, repeats = positive_int(batch, "batch"), positive_int(repeats, "repeats")
    generator = torch.Generator().manual_seed(int(seed))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        layer = MultiHeadAttention(d_model, num_heads)  # its own ValueError when d_model % num_heads != 0
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # one thread: steadier times on a machine that is busy with other work
    try:
        return [_measure_one(layer, length, batch, repeats, generator) for length in lengths]
    finally:
        torch.set_num_threads(threads)


def _measure_one(layer: MultiHeadAttention, length: int, batch: int, repeats: int,
                 generator: torch.Generator) -> dict:
    """One row of measure_attention: time and saved memory of ``layer`` on one random batch of ``length``."""
    x = torch.randn(batch, length, layer.d_model, generator=generator, requires_grad=True)
    mask = causal_mask_torch(length)

    def step() -> None:
        layer(x, x, x, mask).sum().backward()

    step()  # warm-up: the first run of a size pays for allocations
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    saved = saved_bytes(lambda: layer(x, x, x, mask))  # the layer stores no weights: store_attention_weights is off
    return {"L": length, "ms": 1000 * statistics.median(times), "saved_MB": saved / 2**20,
            "weights_MB": batch * layer.num_heads * length * length * 4 / 2**20}


__all__ = ["layer_multiply_adds", "measure_attention", "saved_bytes"]
