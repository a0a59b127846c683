"""Train once, before the test runs: every checkpoint that a notebook 06 or 07 of the course loads.

`make test` runs several notebooks 06 and 07 at once, each of which would train the same model on shared cores.
`make checkpoints`, their prerequisite, trains each model once, first: for each notebook 06 and 07 (default: every
one), it runs, in the notebook's folder, only what its train_or_load and train_or_load_gpt calls depend on
(training_code), so the checkpoint keys are the notebook's own; and the solution's notebooks 06 and 07 once more
alone in a folder, as nbgrader's assignment of its own has each (no notebook 05 beside it: notebook 05's parts are
the reference's). A model already in .cache/checkpoints is loaded, as it is in the notebook.

Every model is trained on one thread, whatever OMP_NUM_THREADS says: a model's weights depend on the number of
threads that trained it (its sums are split differently), and the stored outputs of notebooks 06 and 07 are those of
models trained on one. Two notebooks are run at once, each in a process of its own (--jobs), so that both cores
work; a model that both need is trained by the first to reach it, while the other waits for it, then loads it.

    python -m course_tools.pretrain [--jobs N] [NOTEBOOK.ipynb ...]
"""

from __future__ import annotations

import argparse
import ast
import concurrent.futures
import contextlib
import inspect
import io
import linecache
import multiprocessing
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from unittest import mock

from course_tools.console import utf8_output
from helpers.notebook_io import code_cells, python_lines, read_json_notebook

ROOT = Path(__file__).resolve().parent.parent
TRAINING = ("06_training.ipynb", "07_gpt.ipynb")  # the notebooks that train models
TRAINERS = ("train_or_load", "train_or_load_gpt")  # helpers.train_or_load, helpers.gpt_training.train_or_load_gpt
KEPT = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
CLAIMS: Path | None = None  # in a --jobs run: the folder where a process claims the checkpoint it is training


def _statements(path: Path) -> list[ast.stmt]:
    """Every top-level statement of the notebook's code cells, in order (IPython's magics left out)."""
    statements = []
    for _, source in code_cells(read_json_notebook(path)):
        text = python_lines(source)
        try:
            body = ast.parse(text).body
        except SyntaxError:  # a student's unfinished cell: nothing of it is needed to train
            continue
        for statement in body:  # its text as written: the checkpoint keys fingerprint the student's source
            statement.text = ast.get_source_segment(text, statement) or ast.unparse(statement)
        statements.extend(body)
    return statements


def _trains(statement: ast.stmt) -> bool:
    return any(isinstance(node, ast.Call)
               and getattr(node.func, "attr", getattr(node.func, "id", None)) in TRAINERS
               for node in ast.walk(statement))


def _assigned(statement: ast.stmt) -> set[str]:
    targets = statement.targets if isinstance(statement, ast.Assign) else \
        [statement.target] if isinstance(statement, (ast.AnnAssign, ast.AugAssign)) else []
    return {node.id for target in targets for node in ast.walk(target) if isinstance(node, ast.Name)}


def _used(statement: ast.stmt) -> set[str]:
    return {node.id for node in ast.walk(statement) if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)}


def training_code(path: Path) -> str:
    """The notebook's imports, functions and classes, and the statements its train_or_load (and train_or_load_gpt)
    calls need, in order: each such statement and, going back, the last assignment before it of every name it
    reads."""
    statements = _statements(path)
    last = max((i for i, s in enumerate(statements) if _trains(s)), default=-1)
    keep = {i for i, s in enumerate(statements[:last + 1]) if isinstance(s, KEPT) or _trains(s)}
    wanted = [(i, name) for i in sorted(keep) for name in _used(statements[i])]
    while wanted:
        before, name = wanted.pop()
        source = next((j for j in range(before - 1, -1, -1) if name in _assigned(statements[j])), None)
        if source is not None and source not in keep:
            keep.add(source)
            wanted.extend((source, used) for used in _used(statements[source]))
    return "\n".join(statements[i].text for i in sorted(keep))


def pretrain(path: Path) -> list[str]:
    """Run the training code of one notebook 06 or 07: one line per train_or_load or train_or_load_gpt call
    (trained or loaded, where)."""
    import helpers
    from helpers import gpt_training

    found = []

    def quiet(original):
        def train(*args, **kwargs):
            kwargs["progress"] = False
            with claimed(original, args, kwargs):
                result = original(*args, **kwargs)
            found.append(f"{'trained' if result.trained else 'loaded'} {result.path.name} "
                         f"({result.history.seconds:.0f} s of training)")
            return result
        return train

    text = training_code(path)
    filename = f"<{path.name}, its training code>"
    # registered as a kernel registers a cell, so that inspect reads the student's definitions here as in the
    # notebook: the same source, the same checks passed, the same fingerprint and checkpoint key
    linecache.cache[filename] = (len(text), None, text.splitlines(keepends=True), filename)
    code = compile(text, filename, "exec")
    with (contextlib.chdir(path.parent), contextlib.redirect_stdout(io.StringIO()),
          mock.patch.object(helpers, "train_or_load", quiet(helpers.train_or_load)),
          mock.patch.object(gpt_training, "train_or_load_gpt", quiet(gpt_training.train_or_load_gpt))):
        exec(code, {"__name__": "__pretrain__"})
    return found


@contextlib.contextmanager
def claimed(trainer, args: tuple, kwargs: dict):
    """In a --jobs run, hold the claim on the checkpoint that this train_or_load (or train_or_load_gpt) call trains
    or loads: a process that needs a checkpoint another is training waits until it is saved, then loads it."""
    if CLAIMS is None:
        yield
        return
    from helpers import checkpoints, gpt_training

    call = inspect.signature(trainer).bind(*args, **kwargs)
    call.apply_defaults()
    a = call.arguments
    path = gpt_training.checkpoint_path(a["config"], a["task"], a["data_key"], a["fingerprint"]) if "task" in a \
        else checkpoints.checkpoint_path(a["config"], a["data"], a["recipe"])
    claim = CLAIMS / path.name
    while True:
        try:
            os.close(os.open(claim, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            break
        except FileExistsError:
            time.sleep(1)
    try:
        yield
    finally:
        claim.unlink()


def one_thread(claims: str | None = None) -> None:
    """Each process that trains: one thread (see the module's docstring), and where the claims are."""
    global CLAIMS
    import torch

    torch.set_num_threads(1)
    CLAIMS = Path(claims) if claims else None


def main(argv: list[str] | None = None) -> int:
    utf8_output()
    parser = argparse.ArgumentParser(prog="python -m course_tools.pretrain", description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path,
                        help=f"notebooks {' or '.join(TRAINING)} (default: every one)")
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1),
                        help="notebooks run at once, each in a process of its own (default: 2, or 1 on one core)")
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f"--jobs must be 1 or more, not {args.jobs}")
    notebooks = list(args.notebooks)
    with tempfile.TemporaryDirectory() as alone, tempfile.TemporaryDirectory() as claims:
        for name in reversed(TRAINING) if not args.notebooks else ():  # 07 first: its models take longest
            notebooks += sorted(ROOT.glob(f"solutions/{name}")) + sorted(ROOT.glob(f"notebooks/{name}"))
            if (ROOT / "solutions" / name).exists():  # as nbgrader's assignment of its own has it: no notebook 05
                notebooks.append(Path(shutil.copy(ROOT / "solutions" / name, alone)))  # beside it
        for name in TRAINING if not args.notebooks else ():  # the editions' load the same models
            notebooks += sorted(ROOT.glob(f"editions/*/*/{name}"))
        if args.jobs == 1:
            one_thread()
            lines = map(report, notebooks)
        else:
            pool = concurrent.futures.ProcessPoolExecutor(args.jobs, multiprocessing.get_context("spawn"),
                                                          initializer=one_thread, initargs=(claims,))
            lines = pool.map(report, notebooks)
        for line, failed in lines:  # in the order of the notebooks, each as soon as it and those before are done
            print(line, file=sys.stderr if failed else sys.stdout, flush=True)
        if args.jobs > 1:
            pool.shutdown()
    return 0


def report(path: Path) -> tuple[str, bool]:
    """Pretrain one notebook 06 or 07: one line that says what it trained or loaded, or why its training code
    failed (and True then)."""
    start = time.monotonic()
    try:
        lines = pretrain(path.resolve())
    except Exception as error:  # noqa: BLE001 - the notebook's own run reports it in full
        return (f"{path}: its training code failed ({type(error).__name__}: {error}); the notebook will train "
                f"what it needs itself"), True
    shown = path.resolve().relative_to(ROOT) if path.resolve().is_relative_to(ROOT) else path
    return f"{shown}: {'; '.join(lines) or 'no train_or_load call'} [{time.monotonic() - start:.0f} s]", False


if __name__ == "__main__":
    sys.exit(main())
