"""Benchmark 3: seconds of training until the date model reaches 99% and 99.9% exact match.

    .venv/bin/python benchmarks/bench_time_to_accuracy.py [--seeds 0 1 2] [--every 50] [--code notebook05]

Trains notebook 06's configuration (helpers.training.NOTEBOOK_CONFIG, the seed changed) on the
notebook's data set and measures the exact match on the 2,000 held-out test dates every `every`
steps. Evaluation time is excluded from the training seconds. The run continues to the end of
the schedule (the learning rate cools down over its last steps), so the final accuracy is the
notebook's. --code notebook05 trains what notebook 06 trains once every check passes, the solutions:
the create_position_matrix of notebook 01, the MultiHeadAttention of notebook 03, the classes of
notebook 05, and the schedule, loss and training step of notebook 06 (common.solution_recipe),
instead of the reference.
"""

from __future__ import annotations

import argparse
import dataclasses

from common import save, solution_recipe, table

import torch

import helpers
from helpers.decoding import exact_match
from helpers.training import NOTEBOOK_CONFIG, NOTEBOOK_DATA, REFERENCE, ShuffledBatches, build_model, train_model


def run(seeds=(0,), every: int = 50, config=NOTEBOOK_CONFIG, code: str = "reference") -> dict:
    device = helpers.default_device()
    recipe = REFERENCE if code == "reference" else solution_recipe()
    data = helpers.make_date_dataset(**NOTEBOOK_DATA)
    rows = []
    for seed in seeds:
        cfg = dataclasses.replace(config, seed=seed)
        model = build_model(cfg, recipe)
        batches = ShuffledBatches(data.train, cfg.batch_size, seed=cfg.seed)
        log: list[tuple[int, float]] = []

        def callback(step, m):
            log.append((step, exact_match(m, data.test)))
            return False

        history = train_model(model, batches, cfg, device=device, progress=False, callback=callback,
                              callback_every=every, recipe=recipe)
        # history.seconds excludes the evaluations; steps take the same time, so seconds = steps * per_step
        per_step = history.seconds / len(history.loss)
        hits = {t: next(((s, a) for s, a in log if a >= t), None) for t in (0.99, 0.999)}
        final = log[-1][1] if log else float("nan")
        rows.append({
            "seed": seed, "code": code, "device": device, "threads": torch.get_num_threads(),
            "steps_to_99": hits[0.99][0] if hits[0.99] else None,
            "seconds_to_99": round(hits[0.99][0] * per_step, 1) if hits[0.99] else None,
            "steps_to_99.9": hits[0.999][0] if hits[0.999] else None,
            "seconds_to_99.9": round(hits[0.999][0] * per_step, 1) if hits[0.999] else None,
            "final_accuracy": round(final, 4), "total_steps": len(history.loss),
            "total_seconds": round(history.seconds, 1), "ms_per_step": round(per_step * 1000, 1),
            "curve": [(s, round(a, 4)) for s, a in log],
        })
    print(f"Training to a target on the date task ({config.num_layers}+{config.num_layers} layers, "
          f"d_model {config.d_model}, {config.steps} steps), test accuracy every {every} steps")
    print(table(rows, [("seed", "seed"), ("code", "code"), ("threads", "threads"), ("steps_to_99", "steps to 99%"),
                       ("seconds_to_99", "s to 99%"), ("steps_to_99.9", "steps to 99.9%"),
                       ("seconds_to_99.9", "s to 99.9%"), ("final_accuracy", "final acc"),
                       ("total_seconds", "total s"), ("ms_per_step", "ms/step")]))
    path = save(f"time_to_accuracy_{code}", {"config": dataclasses.asdict(config), "every": every, "rows": rows})
    print(f"wrote {path}")
    return {"rows": rows}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--every", type=int, default=50)
    parser.add_argument("--code", choices=["reference", "notebook05"], default="reference",
                        help="train the reference, or the solutions of notebooks 01, 03, 05 and 06")
    args = parser.parse_args()
    run(tuple(args.seeds), args.every, code=args.code)
