"""Train once, before the test runs: every checkpoint that a notebook 06 of the course loads.

`make test` runs several notebooks 06 at the same time (strict nbval of the solutions, the browser test, the
grader's and nbgrader's end-to-end tests). Each calls helpers.train_or_load, which loads its model from
.cache/checkpoints or, the first time, trains it: several runs would then train the same model at once, on
shared cores, each as slowly as the others make it. `make checkpoints` (a prerequisite of those runs) trains
each model once, alone, first; the notebooks then load it.

For each notebook 06 given (by default every one: solutions/, notebooks/ and each edition's two folders), the
statements that the notebook's train_or_load calls depend on are run, in the notebook's own folder (its
`your_recipe("05_transformer.ipynb", ...)` reads the notebook 05 beside it): its imports, its functions and
classes, and the assignments their arguments come from, found by name in the notebook's code; nothing
else (no plot, no print, no check). So the checkpoint keys are the notebook's own: the same configuration,
data and recipe (the student's code where its check passes). A model already in the cache is loaded, which
takes seconds; helpers.checkpoints decides, as it does in the notebook.

    python -m course_tools.pretrain [NOTEBOOK.ipynb ...]
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import io
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TRAINING = "06_training.ipynb"
KEPT = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _statements(path: Path) -> list[ast.stmt]:
    """Every top-level statement of the notebook's code cells, in order (IPython's magics left out)."""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    statements = []
    for cell in cells:
        if cell.get("cell_type") != "code":
            continue
        source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        lines = ["" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines()]
        try:
            statements.extend(ast.parse("\n".join(lines)).body)
        except SyntaxError:  # a student's unfinished cell: nothing of it is needed to train
            continue
    return statements


def _trains(statement: ast.stmt) -> bool:
    return any(isinstance(node, ast.Call) and (getattr(node.func, "attr", None) == "train_or_load"
                                               or getattr(node.func, "id", None) == "train_or_load")
               for node in ast.walk(statement))


def _assigned(statement: ast.stmt) -> set[str]:
    targets = []
    if isinstance(statement, ast.Assign):
        targets = statement.targets
    elif isinstance(statement, (ast.AnnAssign, ast.AugAssign)):
        targets = [statement.target]
    return {node.id for target in targets for node in ast.walk(target) if isinstance(node, ast.Name)}


def _used(statement: ast.stmt) -> set[str]:
    return {node.id for node in ast.walk(statement) if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)}


def training_code(path: Path) -> str:
    """The notebook's imports, functions and classes, and the statements its train_or_load calls need, in order:
    each train_or_load statement and, going back, the last assignment before it of every name it reads."""
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
    return "\n".join(ast.unparse(statements[i]) for i in sorted(keep))


@contextlib.contextmanager
def _working_folder(folder: Path):
    before = Path.cwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(before)


def pretrain(path: Path) -> list[str]:
    """Run the training code of one notebook 06: one line per train_or_load call (trained or loaded, where)."""
    import helpers

    found = []
    original = helpers.train_or_load

    def train_or_load(*args, **kwargs):
        kwargs["progress"] = False
        result = original(*args, **kwargs)
        found.append(f"{'trained' if result.trained else 'loaded'} {result.path.name} "
                     f"({result.history.seconds:.0f} s of training)")
        return result

    namespace = {"__name__": "__pretrain__"}
    code = compile(training_code(path), f"{path} (its training code)", "exec")
    with _working_folder(path.parent), contextlib.redirect_stdout(io.StringIO()):
        helpers.train_or_load = train_or_load
        try:
            exec(code, namespace)
        finally:
            helpers.train_or_load = original
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m course_tools.pretrain", description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path, help=f"notebooks {TRAINING} (default: every one)")
    args = parser.parse_args(argv)
    notebooks = args.notebooks or sorted(ROOT.glob(f"solutions/{TRAINING}")) + sorted(
        ROOT.glob(f"notebooks/{TRAINING}")) + sorted(ROOT.glob(f"editions/*/*/{TRAINING}"))
    for path in notebooks:
        start = time.monotonic()
        try:
            lines = pretrain(path.resolve())
        except Exception as error:  # noqa: BLE001 - the notebook's own run reports it in full
            print(f"{path}: its training code failed ({type(error).__name__}: {error}); the notebook will train "
                  f"what it needs itself", file=sys.stderr)
            continue
        shown = path.resolve().relative_to(ROOT) if path.resolve().is_relative_to(ROOT) else path
        print(f"{shown}: {'; '.join(lines) or 'no train_or_load call'} [{time.monotonic() - start:.0f} s]", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
