"""Run every benchmark, print its table and write its JSON under benchmarks/results/ (git-ignored).

    make benchmark                                   # = .venv/bin/python benchmarks/run_all.py
    .venv/bin/python benchmarks/run_all.py --quick   # fewer repeats, shorter sequences, no paper-size model

1. bench_training_step.py     our Transformer vs nn.Transformer, one training step
2. bench_attention.py         our attention vs F.scaled_dot_product_attention, growing L
3. bench_time_to_accuracy.py  seconds of training to 99% and 99.9% on the date task
4. bench_decoding.py          greedy decoding with the KV cache against re-running the prefix

About 7 minutes on a 2-core CPU (--quick: about 3). Never run by the unit tests.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import environment  # noqa: E402  (sets OMP_WAIT_POLICY before torch is imported)

import bench_attention  # noqa: E402
import bench_decoding  # noqa: E402
import bench_time_to_accuracy  # noqa: E402
import bench_training_step  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run: small sizes, few repeats")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0], help="seeds for the time-to-accuracy run")
    args = parser.parse_args(argv)
    env = environment()
    print(f"device {env['device']}, {env['cpu_count']} CPUs, {env['torch_threads']} torch threads, "
          f"torch {env['torch']}, OMP_WAIT_POLICY={env['omp_wait_policy']}, load average {env['load_average']}")
    start = time.perf_counter()
    print("\n== 1. training step ==")
    bench_training_step.run(repeats=4 if args.quick else 10, skip_base=args.quick)
    print("\n== 2. attention ==")
    bench_attention.run(lengths=(64, 128, 256) if args.quick else (128, 256, 512, 1024, 2048),
                        repeats=2 if args.quick else 5)
    print("\n== 3. time to accuracy ==")
    if args.quick:  # a smoke run of the code path only: 300 steps do not reach the target
        config = dataclasses.replace(bench_time_to_accuracy.NOTEBOOK_CONFIG, steps=300, warmup=100)
        bench_time_to_accuracy.run(seeds=tuple(args.seeds), every=100, config=config)
    else:
        bench_time_to_accuracy.run(seeds=tuple(args.seeds), every=50)
    print("\n== 4. decoding ==")
    bench_decoding.run(repeats=2 if args.quick else 5, skip_base=args.quick)
    print(f"\nall benchmarks: {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
