"""Shared helpers of the benchmark scripts: environment description, timing, tables and JSON output.

Benchmarks are never part of the unit tests: they measure this machine, which may be busy.
Results go to benchmarks/results/ (git-ignored).
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Callable, Sequence

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch: see the README, "Determinism"

import torch  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def solution_recipe():
    """What notebook 06 trains when every check passes: the Recipe of the solution notebooks, that is the
    create_position_matrix of notebook 01, the MultiHeadAttention of notebook 03, the classes of notebook 05,
    and the transformer_lr, LabelSmoothingLoss and train_step of notebook 06 (as its recipe cell builds it)."""
    from helpers.student_code import load_definitions, your_recipe

    own = load_definitions(ROOT / "solutions" / "06_training.ipynb").namespace
    recipe = your_recipe(ROOT / "solutions" / "05_transformer.ipynb", transformer_lr=own["transformer_lr"],
                         LabelSmoothingLoss=own["LabelSmoothingLoss"], train_step=own["train_step"])
    theirs = [name for name, origin in recipe.origin.items() if origin != "yours" and name != "greedy_decode"]
    if theirs:
        raise RuntimeError(f"the solution notebooks should pass every check; the reference stands in for {theirs}")
    return recipe


def environment() -> dict:
    """What the figures depend on: machine, threads, versions, device."""
    device = "cuda" if torch.cuda.is_available() else "cpu"
    return {
        "device": device,
        "gpu": torch.cuda.get_device_name(0) if device == "cuda" else None,
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        "time": time.strftime("%Y-%m-%d %H:%M:%S"),
    }


def sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def timed(fn: Callable[[], object], device: str) -> float:
    sync(device)
    start = time.perf_counter()
    fn()
    sync(device)
    return time.perf_counter() - start


def interleaved_medians(fns: dict[str, Callable[[], object]], repeats: int, warmup: int, device: str) -> dict:
    """Run each function warmup times, then `repeats` rounds of all of them in turn; medians in seconds.

    Interleaving spreads any slowdown of a shared machine over all candidates alike, so their
    ratio stays meaningful even when the absolute times move.
    """
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            times[name].append(timed(fn, device))
    return {name: statistics.median(t) for name, t in times.items()}


def table(rows: Sequence[dict], columns: Sequence[tuple[str, str]]) -> str:
    """A plain-text table: columns are (key, header) pairs; values are printed as given."""
    cells = [[str(row.get(key, "")) for key, _ in columns] for row in rows]
    widths = [max(len(header), *(len(c[i]) for c in cells)) if cells else len(header)
              for i, (_, header) in enumerate(columns)]
    lines = ["  ".join(h.rjust(w) for (_, h), w in zip(columns, widths)),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.rjust(w) for c, w in zip(cell, widths)) for cell in cells]
    return "\n".join(lines)


def save(name: str, payload: dict) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    payload = {"benchmark": name, "environment": environment(), **payload}
    path.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    return path
