"""Benchmark 2: our attention against F.scaled_dot_product_attention for growing sequence lengths.

    .venv/bin/python benchmarks/bench_attention.py [--lengths 128 256 512 1024 2048] [--repeats 5]

Both sides use the same helpers.MultiHeadAttention module (same projections W^Q, W^K, W^V, W^O,
same causal mask); only the core softmax(Q K^T / sqrt(d_k)) V differs:
  ours  = the module's forward (scores, masked_fill, softmax, weights @ V: it builds the whole
          (batch, h, L, L) matrix, and keeps it for the backward pass and for plotting);
  fused = F.scaled_dot_product_attention (PyTorch picks a fused kernel, flash attention where it
          can, that never stores the L x L matrix).
Time is forward + backward. Memory is what the forward pass keeps for the backward pass (bytes of
the tensors autograd saves, counted by helpers.cost.saved_bytes, which notebook 03 uses too), plus, on
a GPU, the peak allocated memory. Ours grows as L^2.
"""

from __future__ import annotations

import argparse

from common import interleaved_medians, save, table

import torch
import torch.nn.functional as F

import helpers
from helpers.cost import saved_bytes  # shared with notebook 03's measurement


def fused_forward(mha: helpers.MultiHeadAttention, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    batch, length, _ = x.shape
    q, k, v = (w(x).view(batch, length, mha.num_heads, mha.d_k).transpose(1, 2) for w in (mha.w_q, mha.w_k, mha.w_v))
    heads = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    return mha.w_o(heads.transpose(1, 2).reshape(batch, length, mha.d_model))


def run(lengths=(128, 256, 512, 1024, 2048), repeats: int = 5, batch: int = 4, d_model: int = 256,
        heads: int = 4) -> dict:
    device = helpers.default_device()
    torch.manual_seed(0)
    mha = helpers.MultiHeadAttention(d_model, heads, dropout=0.0).to(device)
    rows = []
    for length in lengths:
        x = torch.randn(batch, length, d_model, device=device, requires_grad=True)
        mask = helpers.causal_mask_torch(length, device)
        with torch.no_grad():
            same = torch.allclose(mha(x, x, x, mask), fused_forward(mha, x, mask), atol=1e-4)

        def ours():
            mha(x, x, x, mask).sum().backward()

        def fused():
            fused_forward(mha, x, mask).sum().backward()

        medians = interleaved_medians({"ours": ours, "fused": fused}, repeats=repeats, warmup=1, device=device)
        row = {"L": length, "ours_ms": round(medians["ours"] * 1000, 1), "fused_ms": round(medians["fused"] * 1000, 1),
               "ratio": round(medians["ours"] / medians["fused"], 2),
               "ours_saved_MB": round(saved_bytes(lambda: mha(x, x, x, mask)) / 2**20, 1),
               "fused_saved_MB": round(saved_bytes(lambda: fused_forward(mha, x, mask)) / 2**20, 1),
               "LxL_matrix_MB": round(batch * heads * length * length * 4 / 2**20, 1), "same_output": same}
        if device == "cuda":
            for name, fn in (("ours", ours), ("fused", fused)):
                torch.cuda.reset_peak_memory_stats()
                fn()
                row[f"{name}_peak_MB"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
        rows.append(row)
    print(f"Attention, forward + backward, batch {batch}, d_model {d_model}, {heads} heads, causal mask, {device}")
    columns = [("L", "L"), ("ours_ms", "ours ms"), ("fused_ms", "SDPA ms"), ("ratio", "ours / SDPA"),
               ("ours_saved_MB", "ours saved MB"), ("fused_saved_MB", "SDPA saved MB"),
               ("LxL_matrix_MB", "one LxL matrix MB")]
    if device == "cuda":
        columns += [("ours_peak_MB", "ours peak MB"), ("fused_peak_MB", "SDPA peak MB")]
    print(table(rows, columns))
    growth = [f"{b['ours_ms'] / a['ours_ms']:.1f}x" for a, b in zip(rows, rows[1:])]
    print("ours: time multiplied by", ", ".join(growth), "each time L doubles (4x = quadratic)")
    path = save("attention", {"batch": batch, "d_model": d_model, "heads": heads, "rows": rows})
    print(f"wrote {path}")
    return {"rows": rows}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[128, 256, 512, 1024, 2048])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    run(tuple(args.lengths), args.repeats)
