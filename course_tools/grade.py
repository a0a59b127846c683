"""Grade student notebooks from the command line (console command ``tfs-grade``; docs/instructors.md).

    python -m course_tools.grade path/to/student.ipynb --json
    python -m course_tools.grade submissions/alice/ submissions/bob/ --csv grades.csv --report grades.html

Each argument is a notebook or a folder (its ``*.ipynb``, recursively); what cannot be graded is reported, never
skipped. Each notebook runs from a private copy (isolation.py) in a kernel (execute.py), but its grade comes from a
process of its own (verdicts.py). An exercise is ``pass``, ``fail`` (with a mistake code) or ``todo``. Exit status:
0 when every exercise of every notebook passes, 1 otherwise, 2 when a notebook cannot be graded.
"""

from __future__ import annotations

import argparse
import ast
import copy
import json
import os
import sys
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Iterable, Iterator, TextIO

import nbformat

from helpers.checks import EXERCISES, exercises_in
from helpers.i18n import tr
from helpers.notebook_io import python_lines

from . import isolation, students
from .console import utf8_output
from .execute import Run, execute, fresh_verdicts, grace_seconds
from .results import (CsvLog, JsonStream, course_notebook, exit_status, format_mistakes, format_report,
                      format_summary, mistake_counts, output_problem)
from .verdicts import notebook_language, row
from .versions import provenance

NOT_RUN_CODE = "check_not_run"
# The cores this process may use: its affinity where the system has one (Linux), else every core.
CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


# ---------------------------------------------------------------------------------------- reading
def parse_notebook(path: Path, data: bytes) -> nbformat.NotebookNode:
    """The notebook whose file holds data; a ValueError with one line when it is not a notebook."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ValueError(f"cannot read {path}: {error}") from None
    try:
        notebook = json.loads(text)
    except ValueError as error:
        raise ValueError(f"cannot read {path}: not JSON ({error})") from None
    cells = notebook.get("cells") if isinstance(notebook, dict) else None
    if not isinstance(cells, list) or not all(
            isinstance(c, dict) and c.get("cell_type") in {"code", "markdown", "raw"}
            and isinstance(c.get("source", ""), (str, list)) for c in cells):
        raise ValueError(f"cannot read {path}: it is JSON but not a Jupyter notebook (no list of cells)")
    try:
        return nbformat.reads(text, as_version=4)
    except Exception as error:  # noqa: BLE001 - nbformat's own complaints about an odd file
        raise ValueError(f"cannot read {path}: not a Jupyter notebook of format 4 ({type(error).__name__})") from None


# ---------------------------------------------------------------------------------------- finding
def find_notebooks(paths: Iterable[Path]) -> list[tuple[Path, str | None]]:
    """(notebook path, None) for each notebook to grade, or (path, why) for what cannot be graded: an argument
    that gives no notebook, a folder that cannot be read, a link that leads nowhere."""
    found: list[tuple[Path, str | None]] = []
    for path in map(Path, paths):
        if path.is_dir():
            found += _walk(path) or [(path, f"cannot read {path}: no .ipynb file in this folder")]
        else:
            found.append(_dangling(path))
    return found


def _dangling(path: Path) -> tuple[Path, str | None]:
    """(path, why) for a link that leads nowhere; (path, None) otherwise."""
    if path.is_symlink() and not path.exists():
        return path, f"cannot read {path}: a link to {os.readlink(path)}, which does not exist"
    return path, None


def _walk(root: Path) -> list[tuple[Path, str | None]]:
    """The notebooks under root, sorted, and what in it cannot be read (checkpoint folders skipped)."""
    found: list[tuple[Path, str | None]] = []

    def unreadable(error: OSError) -> None:
        found.append((Path(error.filename), f"cannot read {error.filename}: the folder cannot be read "
                                            f"({error.strerror})"))

    for folder, folders, files in os.walk(root, onerror=unreadable):
        folders[:] = sorted(f for f in folders if f != ".ipynb_checkpoints")
        paths = [Path(folder) / name for name in files if name.endswith(".ipynb")]
        found += [item for item in map(_dangling, paths) if item[1] or item[0].is_file()]
    return sorted(found, key=lambda item: item[0].as_posix())


# ---------------------------------------------------------------------------------------- check cells
CHECK_NAMES = {e.check_name: e.name for e in EXERCISES.values()}  # check function -> exercise
# Notebooks graded at once (--jobs) are parsed one at a time: on Python 3.11, ast.parse in two threads can raise
# "SystemError: AST constructor recursion depth mismatch" (CPython issue 106905; it failed a grader test here).
PARSING = threading.Lock()


def parse_cell(source: str) -> ast.Module:
    """A code cell's syntax tree, its IPython magics blanked (raises SyntaxError)."""
    with PARSING:
        return ast.parse(python_lines(source))


def check_cells(notebook: nbformat.NotebookNode) -> dict[str, list[int]]:
    """{exercise: the indices of the code cells that really call its check (comments and strings aside)}."""
    cells: dict[str, list[int]] = {}
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type != "code":
            continue
        try:
            tree = parse_cell(cell.source)
        except SyntaxError:
            continue
        calls = [getattr(node.func, "id", getattr(node.func, "attr", None))
                 for node in ast.walk(tree) if isinstance(node, ast.Call)]
        for name in dict.fromkeys(CHECK_NAMES[call] for call in calls if call in CHECK_NAMES):
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
    """A copy of the notebook for its kernel: without the cells after its last check cell, which cannot change a
    grade (notebook 06 decodes thousands of dates after it; all of it when no cell calls a check), and without the
    check calls of its check cells, whose verdicts the verdicts process computes (the kernel would compute them
    again, for nothing)."""
    found = check_cells(notebook)
    calls = [i for indices in found.values() for i in indices]
    trimmed = copy.deepcopy(notebook)
    if calls:
        trimmed.cells = trimmed.cells[:max(calls) + 1]
    for index in set(calls):
        cell = trimmed.cells[index]
        lines = cell.source.splitlines()
        for statement in parse_cell(cell.source).body:  # check_cells parsed it already
            value = getattr(statement, "value", None)
            called = getattr(value, "func", None)
            if isinstance(value, ast.Call) and getattr(called, "id", getattr(called, "attr", "")) in CHECK_NAMES:
                lines[statement.lineno - 1:statement.end_lineno] = [""] * (statement.end_lineno - statement.lineno + 1)
        cell.source = "\n".join(lines) if any(line.strip() for line in lines) else "pass  # its check runs elsewhere"
    return trimmed


# ---------------------------------------------------------------------------------------- grading
def _cell_label(notebook: nbformat.NotebookNode, index: int, language: str) -> str:
    """'code cell 3 (`its first line`)', in the notebook's language."""
    code = [i for i, c in enumerate(notebook.cells) if c.cell_type == "code"]
    first = next((line.strip() for line in notebook.cells[index].source.splitlines() if line.strip()), "")
    number = code.index(index) + 1 if index in code else index + 1
    if first:
        return tr("grader:code_cell_line", "code cell {number} (`{line}`)", in_language=language, number=number,
                  line=first[:60])
    return tr("grader:code_cell", "code cell {number}", in_language=language, number=number)


def _verdict(name: str, cells: dict[str, list[int]], run: Run, fresh: dict[str, dict], trimmed: nbformat.NotebookNode,
             timeout: int, language: str) -> dict:
    """The verdict of one exercise: the verdicts process's, when the kernel ran its check cell to the end."""
    if [i for i in cells.get(name, []) if i in run.executed and i not in run.timed_out]:
        return fresh[name]
    if not cells.get(name):
        return row(name, "fail", NOT_RUN_CODE, tr(
            "grader:check_not_run", "its check cell is missing: the notebook no longer calls `{check}(...)`. "
            "Keep the check cells as they were given.", in_language=language, check=EXERCISES[name].check_name))
    if run.died_at is not None and min(cells[name]) >= run.died_at:
        return row(name, "fail", "kernel_died", tr(
            "grader:kernel_died", "the kernel died while running {cell}, so its check cell never ran: look "
            "for code that exits Python or uses up the memory.", in_language=language,
            cell=_cell_label(trimmed, run.died_at, language)))
    late = [i for i in sorted(run.timed_out) if i <= max(cells[name])] or [min(cells[name])]
    return row(name, "fail", "timed_out", tr(
        "grader:cell_timed_out", "{cell} ran longer than {seconds} seconds and was interrupted, so its check "
        "did not finish: look for a loop that never ends.", in_language=language,
        cell=_cell_label(trimmed, late[-1], language), seconds=timeout))


def _notes(run: Run, checked: set[int], trimmed: nbformat.NotebookNode, timeout: int, language: str) -> list[str]:
    notes = [tr("grader:other_cell_timed_out", "{cell} ran longer than {seconds} seconds and was interrupted; the "
                "cells after it still ran.", in_language=language, cell=_cell_label(trimmed, i, language),
                seconds=timeout)
             for i in sorted(run.timed_out - checked)]
    if run.died_at is not None and not [i for i in checked if i >= run.died_at]:  # no exercise's verdict says it
        notes.append(tr("grader:other_cell_died", "the kernel died while running {cell}; the cells after it did not "
                        "run.", in_language=language, cell=_cell_label(trimmed, run.died_at, language)))
    return notes + [tr("grader:kernel_restarted", "{cell} went on running after it was interrupted, so its kernel "
                       "was stopped {seconds} seconds later; the cells after it ran in a new kernel.",
                       in_language=language, cell=_cell_label(trimmed, i, language), seconds=grace_seconds(timeout))
                    for i in sorted(run.restarted)]


def grade(path: Path, timeout: int = 600, isolate: bool = True, points: dict[str, int] | None = None) -> dict:
    """Execute and grade one notebook. Raises ValueError when it cannot be read or is no course notebook.
    points: an exercise's weight when it is not the registry's (tfs-grade --points)."""
    path = Path(path)
    try:
        data = path.read_bytes()  # read once: what is hashed, copied, executed and checked
    except OSError as error:
        raise ValueError(f"cannot read {path}: {error.strerror or error}") from None
    notebook = parse_notebook(path, data)
    stem = identify(path, notebook)
    if stem is None:
        raise ValueError(f"cannot grade {path}: its name contains no course notebook's name "
                         f"(such as 01_positional_encoding) and none of its cells calls a check")
    names = [e.name for e in exercises_in(stem)]
    trimmed = through_last_check(notebook)
    with isolation.Workspace(path, data, isolate) as kernel_room, \
            isolation.Workspace(path, data, isolate, siblings=False) as verdicts_room:
        language = notebook_language(verdicts_room.notebook)
        with ThreadPoolExecutor(max_workers=1) as pool:  # the verdicts process works while the kernel runs
            verdicts = pool.submit(fresh_verdicts, verdicts_room, names, timeout, language)
            run = execute(trimmed, kernel_room, timeout)
            fresh = verdicts.result()
        isolated, sha256 = kernel_room.isolated, kernel_room.sha256
    cells = check_cells(notebook)  # the trimmed copy has no check calls left
    exercises = [_verdict(name, cells, run, fresh, trimmed, timeout, language) for name in names]
    for e in exercises:
        e["max_points"] = (points or {}).get(e["name"], EXERCISES[e["name"]].points)
        e["points"] = e["max_points"] if e["status"] == "pass" else 0
    notes = _notes(run, {i for found in cells.values() for i in found}, trimmed, timeout, language)
    return {"notebook": str(path), "sha256": sha256, "isolated": isolated, "exercises": exercises,
            **({"notes": notes} if notes else {}), "passed": sum(e["status"] == "pass" for e in exercises),
            "total": len(exercises), "points": sum(e["points"] for e in exercises),
            "max_points": sum(e["max_points"] for e in exercises)}


def grade_each(paths: Iterable[Path], timeout: int = 600, jobs: int = 1, isolate: bool = True,
               points: dict[str, int] | None = None, student_pattern: str | None = None) -> Iterator[dict]:
    """The report of every notebook the paths name, each as soon as it is graded, in the order of the notebooks:
    a report, or {"notebook", "error"} for what cannot be graded, each with its "student" (students.py's rule, or
    student_pattern). With jobs > 1, that many notebooks are graded at once (each in its own kernel)."""
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise ValueError(f"jobs must be a positive integer, got {jobs!r}")

    paths = list(paths)
    pattern = students.compile_pattern(student_pattern) if student_pattern is not None else None

    def one(found: tuple[Path, str | None]) -> dict:
        path, problem = found
        student = {"student": students.student_of(path, paths, pattern)}
        if problem:
            return {"notebook": str(path), **student, "error": problem}
        try:
            return {**grade(path, timeout, isolate, points), **student}
        except ValueError as error:
            return {"notebook": str(path), **student, "error": str(error)}
        except OSError as error:  # no room for its private copy, say: the others are still graded
            return {"notebook": str(path), **student, "error": f"cannot grade {path}: {error}"}

    notebooks = find_notebooks(paths)
    if jobs == 1 or len(notebooks) < 2:
        yield from map(one, notebooks)
        return
    with ThreadPoolExecutor(max_workers=jobs) as pool:  # the work happens in the kernels, not in this process
        yield from pool.map(one, notebooks)


def grade_all(paths: Iterable[Path], timeout: int = 600, jobs: int = 1, isolate: bool = True, **options) -> list[dict]:
    """Every report of grade_each, as one list."""
    return list(grade_each(paths, timeout, jobs, isolate, **options))


# ---------------------------------------------------------------------------------------- command line
def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tfs-grade", description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="+", type=Path, metavar="NOTEBOOK_OR_FOLDER",
                        help="a .ipynb file, or a folder: every .ipynb in it, recursively")
    parser.add_argument("--json", action="store_true",
                        help="print the report as JSON (a list when several notebooks or a folder are given)")
    parser.add_argument("--csv", type=Path, metavar="FILE",
                        help="one row per notebook and exercise to FILE, then print how often each mistake occurred")
    parser.add_argument("--timeout", type=int, default=600, help="seconds allowed per cell (default 600)")
    parser.add_argument("--jobs", type=int, default=CORES,
                        help=f"notebooks executed at once, each in its own kernel (default: the {CORES} CPU cores "
                             "this process may use)")
    parser.add_argument("--report", type=Path, metavar="FILE.html",
                        help="write a self-contained HTML page for instructors (course_tools/report.py)")
    parser.add_argument("--feedback", type=Path, metavar="FOLDER",
                        help="write one HTML page per student into FOLDER, to hand back: each exercise and its "
                             "check's message, in the notebook's language (course_tools/feedback.py)")
    parser.add_argument("--gradebook", type=Path, metavar="FILE.csv",
                        help="one row per student, a column per notebook and the total, for an LMS to import")
    parser.add_argument("--gradebook-layout", choices=("canvas", "moodle"), default="canvas",
                        help="the --gradebook columns Canvas's or Moodle's grade import reads (default canvas)")
    parser.add_argument("--points", type=Path, metavar="FILE.toml",
                        help="exercise weights other than the registry's: a [points] table of exercise = points")
    parser.add_argument("--student-pattern", metavar="REGEX", help="who handed in a file (default: the first "
                        "folder under the graded folder, else the file name): " + students.PATTERN_HELP)
    parser.add_argument("--no-isolation", action="store_true",
                        help=f"run the submissions without the bubblewrap sandbox (as {isolation.ENVIRONMENT_SWITCH}"
                             "=off does); only for notebooks you trust")
    return parser


def main(argv: list[str] | None = None, stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    utf8_output()
    stdout, stderr = stdout or sys.stdout, stderr or sys.stderr
    parser = _parser()
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f"--jobs must be at least 1, got {args.jobs}")
    if args.timeout < 1:
        parser.error(f"--timeout must be at least 1 second, got {args.timeout}")
    outputs = ((args.csv, "--csv"), (args.report, "--report"), (args.gradebook, "--gradebook"))
    problems = [problem for path, option in outputs if path and (problem := output_problem(path, option))]
    if args.feedback and args.feedback.exists() and not args.feedback.is_dir():
        problems.append(f"--feedback {args.feedback} is a file, not a folder")
    points = None
    try:
        if args.student_pattern is not None:
            students.compile_pattern(args.student_pattern)
        if args.points:
            from .gradebook import read_points

            points = read_points(args.points)
    except ValueError as error:
        problems.append(str(error))
    for problem in problems:  # before any grading work
        print(f"error: {problem}", file=stderr)
    if problems:
        return 2
    isolate = not args.no_isolation
    if not isolation.sandboxed(isolate):
        print(isolation.NOT_ISOLATED if isolate and isolation.wanted() else isolation.TURNED_OFF, file=stderr)

    single = len(args.paths) == 1 and not args.paths[0].is_dir()
    stream = JsonStream(stdout, single) if args.json else None
    table = CsvLog(args.csv) if args.csv else None
    reports: list[dict] = []
    try:
        for report in grade_each(args.paths, timeout=args.timeout, jobs=args.jobs, isolate=isolate, points=points,
                                 student_pattern=args.student_pattern):
            reports.append(report)
            if table:
                table.add(report)
            if stream:
                stream.add(report)
            else:
                print(("\n" if len(reports) > 1 else "") + format_report(report), file=stdout, flush=True)
            if "error" in report:
                print(f"error: {report['error']}", file=stderr, flush=True)
    finally:
        for output in (stream, table):
            if output:
                output.close()
    if not args.json and len(reports) > 1:
        print("\n" + format_summary(reports), file=stdout)
    if table:
        counts = format_mistakes(mistake_counts(table.rows), len(reports))
        print(("\n" if not args.json else "") + counts, file=stderr if args.json else stdout)
        print(f"wrote {len(table.rows)} rows to {args.csv}", file=stderr)
    if args.report:
        from .report import write_report

        write_report(reports, args.report, roots=args.paths)
        print(f"wrote the report to {args.report}", file=stderr)
    if args.feedback:
        from .feedback import write_feedback

        pages = write_feedback(reports, args.feedback, provenance())
        print(f"wrote {len(pages)} feedback pages to {args.feedback}", file=stderr)
    if args.gradebook:
        from .gradebook import write_gradebook

        write_gradebook(reports, args.gradebook, args.gradebook_layout, provenance())
        print(f"wrote the {args.gradebook_layout} gradebook to {args.gradebook}", file=stderr)
    return exit_status(reports)


if __name__ == "__main__":
    sys.exit(main())
