"""Benchmark 4: greedy decoding with the KV cache against re-running the decoder over the whole prefix.

    .venv/bin/python benchmarks/bench_decoding.py [--repeats 5] [--lengths 64 128] [--skip-base]

helpers.greedy_decode(..., use_cache=False) re-runs the decoder over every token generated so far
at each step (O(t^2) work for the t-th token); use_cache=True computes only the new position and
reads the earlier keys and values from a cache (O(t)); see helpers.decoding.KVCacheDecoder for the
counts. Both decode the same random model (eval mode) for exactly n steps (end_id=-1 is never
produced) and must give the same tokens, which is checked. Steps per second: decoding steps (one
new token for every row of the batch) per second; the speed-up is the ratio of the median times of
interleaved repeats, so a busy machine slows both alike.
"""

from __future__ import annotations

import argparse
import statistics

from common import save, table, timed

import torch

import helpers

NOTEBOOK = dict(src_vocab=75, tgt_vocab=14, d_model=64, num_heads=4, num_layers=2, d_ff=256, share=False)
BASE = dict(src_vocab=37000, tgt_vocab=37000, d_model=512, num_heads=8, num_layers=6, d_ff=2048, share=True)


def configurations(lengths=(64,), skip_base=False) -> list[tuple[str, dict]]:
    """(label, model size + batch, source length L_src and steps n) of every row of the table."""
    rows = [("notebook 06 model, batch 500 (predict's), n = 11 (a date)", dict(NOTEBOOK, batch=500, l_src=20, n=11)),
            ("notebook 06 model, batch 1, n = 11", dict(NOTEBOOK, batch=1, l_src=20, n=11))]
    if not skip_base:
        rows += [(f"paper base size (d_model 512, 6+6 layers, 37k vocab), batch 4, n = {n}",
                  dict(BASE, batch=4, l_src=32, n=n)) for n in lengths]
    return rows


def run(repeats: int = 5, lengths=(64,), skip_base: bool = False) -> dict:
    device = helpers.default_device()
    rows = []
    for label, c in configurations(lengths, skip_base):
        torch.manual_seed(0)
        model = helpers.Transformer(c["src_vocab"], c["tgt_vocab"], d_model=c["d_model"], num_heads=c["num_heads"],
                                    num_layers=c["num_layers"], d_ff=c["d_ff"], dropout=0.1,
                                    max_len=max(64, c["n"]), share_embeddings=c["share"]).to(device).eval()
        src = torch.randint(1, c["src_vocab"], (c["batch"], c["l_src"]), generator=torch.Generator().manual_seed(0))
        src[0, -c["l_src"] // 4:] = 0  # one padded source
        src = src.to(device)
        outputs = {}

        def decode(use_cache, n=c["n"]):
            outputs[use_cache] = helpers.greedy_decode(model, src, n, 1, -1, use_cache=use_cache)
        for use_cache in (False, True):  # warm-up, a few steps
            decode(use_cache, n=4)
        reps = repeats if c["d_model"] < 512 else max(2, repeats // 2)
        times: dict[bool, list[float]] = {False: [], True: []}
        for _ in range(reps):
            for use_cache in (False, True):
                times[use_cache].append(timed(lambda: decode(use_cache), device))
        slow, fast = statistics.median(times[False]), statistics.median(times[True])
        rows.append({"configuration": label, "n": c["n"], "batch": c["batch"],
                     "recompute_steps_per_s": round(c["n"] / slow, 1), "cache_steps_per_s": round(c["n"] / fast, 1),
                     "recompute_ms": round(slow * 1000, 1), "cache_ms": round(fast * 1000, 1),
                     "speedup": round(slow / fast, 1), "same_tokens": torch.equal(outputs[False], outputs[True]),
                     "repeats": reps, "device": device})
    print("Greedy decoding of n tokens: re-running the prefix (use_cache=False) against the KV cache (use_cache=True),"
          " median of interleaved repeats")
    print(table(rows, [("configuration", "configuration"), ("recompute_ms", "recompute ms"), ("cache_ms", "cache ms"),
                       ("recompute_steps_per_s", "recompute steps/s"), ("cache_steps_per_s", "cache steps/s"),
                       ("speedup", "speed-up"), ("same_tokens", "same tokens")]))
    path = save("decoding", {"rows": rows})
    print(f"wrote {path}")
    return {"rows": rows}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--lengths", type=int, nargs="+", default=[64], help="n for the paper-size model")
    parser.add_argument("--skip-base", action="store_true", help="only the notebook's model")
    args = parser.parse_args()
    run(args.repeats, tuple(args.lengths), args.skip_base)
