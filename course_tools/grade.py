"""Grade student notebooks from the command line (console command ``tfs-grade``).

    python -m course_tools.grade notebooks/01_positional_encoding.ipynb
    python -m course_tools.grade path/to/student.ipynb --json
    python -m course_tools.grade submissions/alice/ submissions/bob/ --csv grades.csv

Each argument is a notebook or a folder (every ``*.ipynb`` in it, recursively, sorted; checkpoint
copies in ``.ipynb_checkpoints`` are skipped). Which course notebook a file is comes from its name
(e.g. ``alice_01_positional_encoding.ipynb``), or else from the checks its cells call; a file that
is neither is reported as an error, never graded 0/0. Its exercises come from the exercise registry
(``helpers.checks.EXERCISES``).

Each notebook is executed top to bottom in a fresh kernel, down to its last check cell (the last
code cell that calls a check of the registry, such as ``check_create_position_matrix(``): the
cells after it cannot change a grade, so they are not run. Errors do not stop the run; a cell
running longer than --timeout seconds is interrupted, and the next cells still run.

The grade does not come from that kernel: a student's cell could write or patch anything there.
Each exercise's verdict is computed in a second process, the notebook's own, that loads only the notebook's
imports and ``def``/``class`` statements and calls the registry's check (course_tools/verdicts.py, forked
from a server that has imported the checking code: course_tools/forkserver.py).
An exercise is ``pass``, ``fail`` (with a mistake code when the check recognised the mistake) or
``todo``; it fails with ``check_not_run`` when its check cell is missing, ``kernel_died`` or
``timed_out`` when the kernel died or a cell timed out before its check cell ran, and
``tampering`` when the answer reaches into the checking code.

--json prints, for one notebook file, one object
    {"notebook": path, "exercises": [{"name", "status", "mistake", "message"}], "passed": N, "total": M}
and, for several notebooks or a folder, a list of them; a notebook that cannot be read is
reported as {"notebook": path, "error": why}.

--csv FILE writes one row per notebook and exercise (student_file, notebook, exercise, status,
mistake), then prints how often each mistake occurred: on stdout after the reports, or on stderr
with --json (stdout stays JSON). --report FILE.html writes a self-contained page for instructors
(course_tools/report.py). Both are checked before any grading starts and written whole (through a
temporary file) or not at all.

Exit status: 0 when every exercise of every notebook passes, 1 otherwise, 2 when a notebook
cannot be read (the others are still graded).
"""

from __future__ import annotations

import argparse
import ast
import copy
import csv
import io
import json
import os
import re
import secrets
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, TextIO

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellTimeoutError, DeadKernelError

from helpers.checks import EXERCISES, exercises_in
from helpers.checks.harness import FAIL, PASS, SYMBOLS
from helpers.i18n import tr

from .forkserver import run_verdicts
from .verdicts import notebook_language, verify

NOT_RUN_CODE = "check_not_run"
CSV_COLUMNS = ["student_file", "notebook", "exercise", "status", "mistake"]
ERROR = "error"  # the status of a CSV row for a notebook that could not be read


# ---------------------------------------------------------------------------------------- reading
def read_notebook(path: Path) -> nbformat.NotebookNode:
    """The notebook at path; a ValueError with one line when it cannot be read or is not a notebook."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ValueError(f"cannot read {path}: {error}") from None
    try:
        data = json.loads(text)
    except ValueError as error:
        raise ValueError(f"cannot read {path}: not JSON ({error})") from None
    cells = data.get("cells") if isinstance(data, dict) else None
    if not isinstance(cells, list) or not all(
            isinstance(c, dict) and c.get("cell_type") in {"code", "markdown", "raw"}
            and isinstance(c.get("source", ""), (str, list)) for c in cells):
        raise ValueError(f"cannot read {path}: it is JSON but not a Jupyter notebook (no list of cells)")
    try:
        return nbformat.reads(text, as_version=4)
    except Exception as error:  # noqa: BLE001 - nbformat's own complaints about an odd file
        raise ValueError(f"cannot read {path}: not a Jupyter notebook of format 4 ({type(error).__name__})") from None


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


# ---------------------------------------------------------------------------------------- check cells
CHECK_NAMES = {e.check_name: e.name for e in EXERCISES.values()}  # check function -> exercise
CHECK_CALL = re.compile(r"\b(?:" + "|".join(sorted(re.escape(name) for name in CHECK_NAMES)) + r")\s*\(")


def _called_checks(source: str) -> list[str]:
    """The exercises whose check a cell really calls (comments and strings aside), in order."""
    lines = "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines())
    try:
        tree = ast.parse(lines)
    except SyntaxError:
        return []
    called = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
            if name in CHECK_NAMES and CHECK_NAMES[name] not in called:
                called.append(CHECK_NAMES[name])
    return called


def check_cells(notebook: nbformat.NotebookNode) -> dict[str, list[int]]:
    """{exercise: the indices of the code cells that call its check}."""
    cells: dict[str, list[int]] = {}
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type == "code":
            for name in _called_checks(cell.source):
                cells.setdefault(name, []).append(index)
    return cells


def identify(path: Path, notebook: nbformat.NotebookNode) -> str | None:
    """The course notebook a file is: by its name, else by the checks its cells call (the most of one notebook)."""
    stem = course_notebook(path)
    if stem:
        return stem
    counts = Counter(EXERCISES[name].notebook for name in check_cells(notebook))
    return counts.most_common(1)[0][0] if counts else None


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


# ---------------------------------------------------------------------------------------- running
@dataclass
class Run:
    """What happened when the notebook ran in its kernel: which cells ran, and where it stopped."""

    executed: set[int] = field(default_factory=set)  # indices of the code cells that ran to the end
    timed_out: set[int] = field(default_factory=set)  # cells interrupted after --timeout seconds
    died_at: int | None = None  # the cell during which the kernel died


def execute(notebook: nbformat.NotebookNode, workdir: Path, timeout: int) -> Run:
    """Run the notebook top to bottom in a fresh kernel (errors do not stop it); say which cells ran."""
    run, started, took = Run(), {}, {}

    def on_start(cell: Any, cell_index: int, **_: Any) -> None:
        started[cell_index] = time.monotonic()

    def on_complete(cell: Any, cell_index: int, **_: Any) -> None:
        run.executed.add(cell_index)
        took[cell_index] = time.monotonic() - started.get(cell_index, time.monotonic())

    client = NotebookClient(
        notebook,
        timeout=timeout,
        interrupt_on_timeout=True,
        allow_errors=True,
        kernel_name="python3",
        # not the kernel's own notes (TCP without encryption, "KeyboardInterrupt caught" after a time-out, ...)
        extra_arguments=["--log-level=CRITICAL"],
        resources={"metadata": {"path": str(workdir)}},
        on_cell_start=on_start,
        on_cell_executed=on_complete,
    )
    handle_timeout = client._async_handle_timeout

    async def timed_out(timeout: int, cell: Any = None) -> Any:  # nbclient interrupts the cell: note which
        run.timed_out.update(i for i, c in enumerate(notebook.cells) if c is cell)
        return await handle_timeout(timeout, cell)

    client._async_handle_timeout = timed_out
    try:
        client.execute()
    except DeadKernelError:
        unfinished = [i for i in started if i not in run.executed]
        run.died_at = max(unfinished) if unfinished else (max(started) if started else 0)
    except CellTimeoutError:  # the kernel ignored the interrupt
        unfinished = [i for i in started if i not in run.executed]
        if unfinished:
            run.timed_out.add(max(unfinished))
            run.died_at = max(unfinished)
    for index, seconds in took.items():  # interrupted after --timeout seconds (the outputs are complete now)
        outputs = notebook.cells[index].get("outputs", [])
        if seconds >= timeout * 0.9 and any(o.get("output_type") == "error" and o.get("ename") == "KeyboardInterrupt"
                                            for o in outputs):
            run.timed_out.add(index)
    return run


def _no_verdicts(names: list[str], mistake: str, message: str) -> dict[str, dict]:
    return {name: {"name": name, "status": FAIL, "mistake": mistake, "message": message} for name in names}


def fresh_verdicts(path: Path, names: list[str], timeout: int, language: str = "en") -> dict[str, dict]:
    """{exercise: verdict dict}, computed in a process of its own from the notebook's definitions alone
    (course_tools.verdicts, forked by course_tools.forkserver). It receives a fresh random key on its stdin
    and the write end of a pipe; only one line on that pipe, signed with the key, followed by the exit
    status 0, is accepted."""
    if not names:
        return {}
    key = secrets.token_bytes(32)
    status, data, stderr = run_verdicts(path, names, timeout, key)
    results = verify(data, key) if status == 0 else None
    if results is not None and [r["name"] for r in results] == names:
        return {r["name"]: r for r in results}
    if status == 0 or results is not None:  # it ended normally, yet without one right signed line: not our code's
        return _no_verdicts(names, "tampering", tr(
            "grader:unsigned", "the process that computes the grader's verdicts ended without its signed verdicts: "
            "code in the notebook ended it, or wrote to its channel. An answer may only compute its result.",
            in_language=language))
    how = f"signal {-status}" if status < 0 else f"exit status {status}"
    lines = [line.strip() for line in stderr.decode("utf-8", "replace").splitlines() if line.strip()]
    why = lines[-1][-200:] if lines else ""
    return _no_verdicts(names, "kernel_died", tr(
        "grader:verdicts_died", "the process that computes the grader's verdicts from your definitions died "
        "({how}{why}): look for code that exits Python or uses up the memory.", in_language=language, how=how,
        why=f": {why}" if why else ""))


def _cell_label(notebook: nbformat.NotebookNode, index: int) -> str:
    code = [i for i, c in enumerate(notebook.cells) if c.cell_type == "code"]
    first = next((line.strip() for line in notebook.cells[index].source.splitlines() if line.strip()), "")
    number = code.index(index) + 1 if index in code else index + 1
    return f"code cell {number} (`{first[:60]}`)" if first else f"code cell {number}"


def grade(path: Path, timeout: int = 600) -> dict:
    """Execute and grade one notebook. Raises ValueError when it cannot be read or is no course notebook."""
    notebook = read_notebook(path)
    stem = identify(path, notebook)
    if stem is None:
        raise ValueError(f"cannot grade {path}: its name contains no course notebook's name "
                         f"(such as 01_positional_encoding) and none of its cells calls a check")
    names = [e.name for e in exercises_in(stem)]
    language = notebook_language(path)
    with ThreadPoolExecutor(max_workers=1) as pool:  # the verdicts process works while the kernel runs
        verdicts = pool.submit(fresh_verdicts, path, names, timeout, language)
        trimmed = through_last_check(notebook)
        run = execute(trimmed, path.resolve().parent, timeout)
        fresh = verdicts.result()
    cells = check_cells(trimmed)
    exercises = []
    for name in names:
        ran = [i for i in cells.get(name, []) if i in run.executed and i not in run.timed_out]
        if ran:
            verdict = fresh[name]
        elif not cells.get(name):
            verdict = {"status": FAIL, "mistake": NOT_RUN_CODE, "message": tr(
                "grader:check_not_run", "its check cell is missing: the notebook no longer calls `{check}(...)`. "
                "Keep the check cells as they were given.", in_language=language, check=EXERCISES[name].check_name)}
        elif run.died_at is not None and min(cells[name]) >= run.died_at:
            verdict = {"status": FAIL, "mistake": "kernel_died", "message": tr(
                "grader:kernel_died", "the kernel died while running {cell}, so its check cell never ran: look "
                "for code that exits Python or uses up the memory.", in_language=language,
                cell=_cell_label(trimmed, run.died_at))}
        else:
            late = [i for i in sorted(run.timed_out) if i <= max(cells[name])] or [min(cells[name])]
            verdict = {"status": FAIL, "mistake": "timed_out", "message": tr(
                "grader:cell_timed_out", "{cell} ran longer than {seconds} seconds and was interrupted, so its check "
                "did not finish: look for a loop that never ends.", in_language=language,
                cell=_cell_label(trimmed, late[-1]), seconds=timeout)}
        exercises.append({"name": name, **{k: verdict.get(k) for k in ("status", "mistake", "message")}})
    checked = {i for found in cells.values() for i in found}
    notes = [tr("grader:other_cell_timed_out", "{cell} ran longer than {seconds} seconds and was interrupted; the "
                "cells after it still ran.", in_language=language, cell=_cell_label(trimmed, i), seconds=timeout)
             for i in sorted(run.timed_out - checked)]
    return {
        "notebook": str(path),
        "exercises": exercises,
        **({"notes": notes} if notes else {}),
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
    lines += [f"  note: {note}" for note in report.get("notes", [])]
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


def write_atomically(target: Path, text: str) -> None:
    """Write text to target through a temporary file beside it and a rename: never half a file."""
    handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8", newline="") as out:
            out.write(text)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def write_csv(rows: list[dict], target: Path) -> None:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=CSV_COLUMNS)
    writer.writeheader()
    writer.writerows(rows)
    write_atomically(target, buffer.getvalue())


def output_problem(target: Path, option: str) -> str | None:
    """Why an output file cannot be written (checked before any grading work), or None."""
    folder = target.parent if str(target.parent) else Path(".")
    if target.is_dir():
        return f"{option} {target}: this is a folder; give a file name"
    if not folder.is_dir():
        return f"{option} {target}: the folder {folder} does not exist"
    if not os.access(folder, os.W_OK):
        return f"{option} {target}: the folder {folder} is not writable"
    return None


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
    parser.add_argument("--report", type=Path, metavar="FILE.html",
                        help="write one self-contained HTML page for instructors: per exercise how many passed, "
                             "failed or did not try, the mistakes in a bar chart with their hints, and a "
                             "student-by-exercise table")
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f"--jobs must be at least 1, got {args.jobs}")
    if args.timeout < 1:
        parser.error(f"--timeout must be at least 1 second, got {args.timeout}")
    problems = [p for p in (output_problem(args.csv, "--csv") if args.csv else None,
                            output_problem(args.report, "--report") if args.report else None) if p]
    if problems:  # before any grading work
        for problem in problems:
            print(f"error: {problem}", file=stderr)
        return 2

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
    if args.report:
        from .report import write_report

        write_report(reports, args.report, roots=args.paths)
        print(f"wrote the report to {args.report}", file=stderr)
    return exit_status(reports)


if __name__ == "__main__":
    sys.exit(main())
