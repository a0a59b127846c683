"""Grade student notebooks from the command line (console command ``tfs-grade``).

    python -m course_tools.grade notebooks/01_positional_encoding.ipynb
    python -m course_tools.grade path/to/student.ipynb --json
    python -m course_tools.grade submissions/alice/ submissions/bob/ --csv grades.csv

Each argument is a notebook or a folder (every ``*.ipynb`` in it, recursively, sorted; checkpoint
copies in ``.ipynb_checkpoints`` are skipped). The exercises a notebook must contain come from the
exercise registry (``helpers.checks.EXERCISES``): its file name must contain the course notebook's
stem, e.g. ``alice_01_positional_encoding.ipynb``.

Each notebook is executed top to bottom in a fresh kernel, down to its last check cell (the last
code cell that calls a check of the registry, such as ``check_create_position_matrix(``): the
cells after it cannot change a grade, so they are not run. Errors do not stop the run; a cell
running longer than --timeout seconds is interrupted, and the next cells still run. Every check cell
reports its exercise as ``pass``, ``fail`` (with a mistake code when the check recognised the
mistake) or ``todo``. An exercise whose check never ran is a ``fail`` with code ``check_not_run``.

--json prints, for one notebook file, one object
    {"notebook": path, "exercises": [{"name", "status", "mistake", "message"}], "passed": N, "total": M}
and, for several notebooks or a folder, a list of them; a notebook that cannot be read is
reported as {"notebook": path, "error": why}.

--csv FILE writes one row per notebook and exercise (student_file, notebook, exercise, status,
mistake), then prints how often each mistake occurred: on stdout after the reports, or on stderr
with --json (stdout stays JSON).

Exit status: 0 when every exercise of every notebook passes, 1 otherwise, 2 when a notebook
cannot be read (the others are still graded).
"""

from __future__ import annotations

import argparse
import copy
import csv
import json
import os
import re
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from collections import Counter
from pathlib import Path
from typing import Iterable, TextIO

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellTimeoutError, DeadKernelError

from helpers.checks import EXERCISES, exercises_in
from helpers.checks.harness import FAIL, PASS, SYMBOLS

NOT_RUN = "its check cell did not run: it was deleted, or the cell failed before the check was called."
NOT_RUN_CODE = "check_not_run"
CSV_COLUMNS = ["student_file", "notebook", "exercise", "status", "mistake"]
ERROR = "error"  # the status of a CSV row for a notebook that could not be read


# ---------------------------------------------------------------------------------------- finding
def course_notebook(path: Path) -> str | None:
    """The course notebook (stem, e.g. "01_positional_encoding") whose name this file's name contains."""
    stems = sorted({e.notebook for e in EXERCISES.values()}, key=lambda s: (-len(s), s))  # longest first
    return next((stem for stem in stems if stem in path.name), None)


def expected_exercises(path: Path) -> list[str]:
    """The exercises the course's notebook of this name contains, in notebook order."""
    stem = course_notebook(path)
    return [e.name for e in exercises_in(stem)] if stem else []


def find_notebooks(paths: Iterable[Path]) -> list[tuple[Path, str | None]]:
    """(notebook path, None) for each notebook to grade, or (path, why) for an argument that gives none."""
    found: list[tuple[Path, str | None]] = []
    for path in paths:
        if path.is_dir():
            notebooks = sorted(p for p in path.rglob("*.ipynb")
                               if ".ipynb_checkpoints" not in p.relative_to(path).parts and p.is_file())
            found += [(p, None) for p in notebooks] or [(path, f"cannot read {path}: no .ipynb file in this folder")]
        else:
            found.append((path, None))
    return found


# ---------------------------------------------------------------------------------------- grading
CHECK_CALL = re.compile(r"\b(?:" + "|".join(sorted({re.escape(e.check_name) for e in EXERCISES.values()}))
                        + r")\s*\(")


def through_last_check(notebook: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The notebook without the cells after its last check cell (a copy; all of it when no cell calls a check).

    A check cell is a code cell that calls one of the registry's checks (``check_<exercise>(``),
    wherever the student moved it: the experiments and pictures that follow the last one cannot
    change a grade, and skipping them makes grading faster (notebook 06 decodes thousands of dates after it).
    """
    calls = [i for i, cell in enumerate(notebook.cells) if cell.cell_type == "code" and CHECK_CALL.search(cell.source)]
    trimmed = copy.deepcopy(notebook)
    if calls:
        trimmed.cells = trimmed.cells[:calls[-1] + 1]
    return trimmed


def execute(notebook: nbformat.NotebookNode, workdir: Path, timeout: int) -> list[dict]:
    """Run the notebook in a fresh kernel whose checks log to a temporary file; return the logged verdicts."""
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "checks.jsonl"
        log.touch()
        client = NotebookClient(
            notebook,
            timeout=timeout,
            interrupt_on_timeout=True,
            allow_errors=True,
            kernel_name="python3",
            extra_arguments=["--log-level=ERROR"],  # not the kernel's own notes (TCP without encryption, ...)
            resources={"metadata": {"path": str(workdir)}},
        )
        try:
            client.execute(env={**os.environ, "HELPERS_GRADE_LOG": str(log)})  # only the kernel sees the log
        except (DeadKernelError, CellTimeoutError):  # the kernel died, or ignored the interrupt: grade what was logged
            pass
        records = []
        for line in log.read_text(encoding="utf-8").splitlines():
            try:
                records.append(json.loads(line))
            except ValueError:  # a torn or foreign line: the verdicts around it still count
                continue
        return [r for r in records if isinstance(r, dict) and "name" in r and "status" in r]


def grade(path: Path, timeout: int = 600) -> dict:
    """Execute and grade one notebook. Raises ValueError when it cannot be read."""
    try:
        notebook = nbformat.read(path, as_version=4)
    except (OSError, ValueError, nbformat.reader.NotJSONError) as error:
        raise ValueError(f"cannot read {path}: {error}") from None
    latest: dict[str, dict] = {}
    # A check run twice counts with its last verdict.
    for record in execute(through_last_check(notebook), path.resolve().parent, timeout):
        latest[record["name"]] = record
    expected = expected_exercises(path)
    names = expected + [name for name in latest if name not in expected]
    not_run = {"status": FAIL, "mistake": NOT_RUN_CODE, "message": NOT_RUN}
    exercises = [{"name": name, **{k: latest.get(name, not_run).get(k) for k in ("status", "mistake", "message")}}
                 for name in names]
    return {
        "notebook": str(path),
        "exercises": exercises,
        "passed": sum(e["status"] == PASS for e in exercises),
        "total": len(exercises),
    }


def grade_all(paths: Iterable[Path], timeout: int = 600, jobs: int = 1) -> list[dict]:
    """Grade every notebook the paths name: a report each, or {"notebook", "error"} when it cannot be read.

    With jobs > 1, that many notebooks execute at once (each in its own kernel); the reports keep
    the order of the notebooks."""
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise ValueError(f"jobs must be a positive integer, got {jobs!r}")

    def one(found: tuple[Path, str | None]) -> dict:
        path, problem = found
        if problem:
            return {"notebook": str(path), "error": problem}
        try:
            return grade(path, timeout)
        except ValueError as error:
            return {"notebook": str(path), "error": str(error)}

    notebooks = find_notebooks(paths)
    if jobs == 1 or len(notebooks) < 2:
        return [one(found) for found in notebooks]
    with ThreadPoolExecutor(max_workers=jobs) as pool:  # the work happens in the kernels, not in this process
        return list(pool.map(one, notebooks))


def all_pass(report: dict) -> bool:
    return "error" not in report and report["total"] > 0 and report["passed"] == report["total"]


def exit_status(reports: list[dict]) -> int:
    if any("error" in r for r in reports):
        return 2
    return 0 if reports and all(all_pass(r) for r in reports) else 1


# ---------------------------------------------------------------------------------------- reporting
def format_report(report: dict) -> str:
    if "error" in report:
        return f"Grading {report['notebook']}\n  error: {report['error']}"
    width = max([len(e["name"]) for e in report["exercises"]] + [8])
    lines = [f"Grading {report['notebook']}"]
    for e in report["exercises"]:
        code = f"[{e['mistake']}] " if e.get("mistake") else ""
        lines.append(f"  {SYMBOLS[e['status']]} {e['name']:<{width}}  {e['status']:<4}  {code}{e['message']}")
    if not report["exercises"]:
        lines.append("  (no exercise found: the file name contains no course notebook's name, and no check ran)")
    lines.append(f"{report['passed']}/{report['total']} exercises pass")
    return "\n".join(lines)


def format_summary(reports: list[dict]) -> str:
    graded = [r for r in reports if "error" not in r]
    text = (f"{len(reports)} notebooks: {sum(all_pass(r) for r in graded)} pass completely; "
            f"{sum(r['passed'] for r in graded)}/{sum(r['total'] for r in graded)} exercises pass")
    unreadable = len(reports) - len(graded)
    return text + (f"; {unreadable} could not be read" if unreadable else "")


def csv_rows(reports: list[dict]) -> list[dict]:
    """One row per notebook and exercise; a notebook that could not be read gets status "error"."""
    rows = []
    for report in reports:
        path = Path(report["notebook"])
        base = {"student_file": report["notebook"], "notebook": course_notebook(path) or ""}
        if "error" in report:
            rows += [{**base, "exercise": name, "status": ERROR, "mistake": ""}
                     for name in expected_exercises(path) or [""]]
            continue
        rows += [{**base, "exercise": e["name"], "status": e["status"], "mistake": e.get("mistake") or ""}
                 for e in report["exercises"]]
    return rows


def write_csv(rows: list[dict], target: Path) -> None:
    with open(target, "w", newline="", encoding="utf-8") as out:
        writer = csv.DictWriter(out, fieldnames=CSV_COLUMNS)
        writer.writeheader()
        writer.writerows(rows)


UNRECOGNISED = "(unrecognised)"  # a fail whose check gave no mistake code


def mistake_counts(rows: list[dict]) -> list[tuple[str, str, int]]:
    """(exercise, mistake, count) of every failed exercise, the most frequent first."""
    counts = Counter((r["exercise"], r["mistake"] or UNRECOGNISED) for r in rows if r["status"] == FAIL)
    order = {name: i for i, name in enumerate(EXERCISES)}
    return [(ex, code, n) for (ex, code), n in
            sorted(counts.items(), key=lambda item: (-item[1], order.get(item[0][0], len(order)), item[0]))]


def format_mistakes(counts: list[tuple[str, str, int]], notebooks: int) -> str:
    if not counts:
        return f"Mistakes over {notebooks} notebooks: none (every exercise passes or is still todo)."
    ex_width = max(len("exercise"), *(len(ex) for ex, _, _ in counts))
    code_width = max(len("mistake"), *(len(code) for _, code, _ in counts))
    lines = [f"Mistakes over {notebooks} notebooks ({sum(n for _, _, n in counts)} failed exercises):",
             f"  {'exercise':<{ex_width}}  {'mistake':<{code_width}}  count"]
    lines += [f"  {ex:<{ex_width}}  {code:<{code_width}}  {n:>5}" for ex, code, n in counts]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------- command line
def main(argv: list[str] | None = None, stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    stdout, stderr = stdout or sys.stdout, stderr or sys.stderr
    parser = argparse.ArgumentParser(prog="tfs-grade",
                                     description="Execute student notebooks and grade their exercises.")
    parser.add_argument("paths", nargs="+", type=Path, metavar="NOTEBOOK_OR_FOLDER",
                        help="a .ipynb file, or a folder: every .ipynb in it, recursively")
    parser.add_argument("--json", action="store_true",
                        help="print the report as JSON (a list when several notebooks or a folder are given)")
    parser.add_argument("--csv", type=Path, metavar="FILE",
                        help="write one row per notebook and exercise to FILE, then print how often each "
                             "mistake occurred")
    parser.add_argument("--timeout", type=int, default=600, help="seconds allowed per cell (default 600)")
    parser.add_argument("--jobs", type=int, default=1,
                        help="notebooks executed at once, each in its own kernel (default 1; at most the CPU cores)")
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f"--jobs must be at least 1, got {args.jobs}")

    reports = grade_all(args.paths, timeout=args.timeout, jobs=args.jobs)
    if args.json:
        single = len(args.paths) == 1 and not args.paths[0].is_dir()
        print(json.dumps(reports[0] if single else reports, ensure_ascii=False, indent=2), file=stdout)
    else:
        print("\n\n".join(format_report(r) for r in reports), file=stdout)
        if len(reports) > 1:
            print("\n" + format_summary(reports), file=stdout)
        for report in reports:
            if "error" in report:
                print(f"error: {report['error']}", file=stderr)
    if args.csv:
        rows = csv_rows(reports)
        write_csv(rows, args.csv)
        table = format_mistakes(mistake_counts(rows), len(reports))
        print(("\n" if not args.json else "") + table, file=stderr if args.json else stdout)
        print(f"wrote {len(rows)} rows to {args.csv}", file=stderr)
    return exit_status(reports)


if __name__ == "__main__":
    sys.exit(main())
