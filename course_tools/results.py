"""What the grader writes: the text report, the JSON, the CSV and the table of mistakes (course_tools/grade.py).

Every notebook's result is written as soon as it is known: its text report is printed, its JSON object is
printed as one more element of the list, its CSV rows are appended and flushed. A grading run that stops half-way
(a crash, a full disk, Ctrl-C) keeps everything graded before it.
"""

from __future__ import annotations

import csv
import json
import os
from collections import Counter
from pathlib import Path
from typing import TextIO

from helpers.checks import EXERCISES, exercises_in

from . import versions

# The first five as before; then who handed the file in, that exercise's points earned and possible (tfs-grade
# --points weights), and which version of the course graded it (course_tools.versions.provenance()).
CSV_COLUMNS = ["student_file", "notebook", "exercise", "status", "mistake", "student", "points", "max_points",
               "graded_by"]
ERROR = "error"  # the status of a CSV row for a notebook that could not be read
UNRECOGNISED = "(unrecognised)"  # a fail whose check gave no mistake code
SYMBOLS = {"pass": "✅", "fail": "❌", "todo": "📝"}  # as the checks show them


def course_notebook(path: Path) -> str | None:
    """The course notebook (stem, e.g. "01_positional_encoding") whose name this file's name contains."""
    stems = sorted({e.notebook for e in EXERCISES.values()}, key=lambda s: (-len(s), s))  # longest first
    return next((stem for stem in stems if stem in Path(path).name), None)


def all_pass(report: dict) -> bool:
    return "error" not in report and report["total"] > 0 and report["passed"] == report["total"]


def exit_status(reports: list[dict]) -> int:
    if any("error" in r for r in reports):
        return 2
    return 0 if reports and all(all_pass(r) for r in reports) else 1


# ---------------------------------------------------------------------------------------- text
def format_report(report: dict) -> str:
    if "error" in report:
        return f"Grading {report['notebook']}\n  error: {report['error']}"
    width = max([len(e["name"]) for e in report["exercises"]] + [8])
    lines = [f"Grading {report['notebook']}"]
    for e in report["exercises"]:
        code = f"[{e['mistake']}] " if e.get("mistake") else ""
        lines.append(f"  {SYMBOLS[e['status']]} {e['name']:<{width}}  {e['status']:<4}  {code}{e['message']}")
    lines += [f"  note: {note}" for note in report.get("notes", [])]
    lines.append(f"{report['passed']}/{report['total']} exercises pass")
    return "\n".join(lines)


def format_summary(reports: list[dict]) -> str:
    graded = [r for r in reports if "error" not in r]
    text = (f"{len(reports)} notebooks: {sum(all_pass(r) for r in graded)} pass completely; "
            f"{sum(r['passed'] for r in graded)}/{sum(r['total'] for r in graded)} exercises pass")
    unreadable = len(reports) - len(graded)
    return text + (f"; {unreadable} could not be read" if unreadable else "")


# ---------------------------------------------------------------------------------------- CSV
def csv_rows(reports: list[dict], provenance: str = "") -> list[dict]:
    """One row per notebook and exercise; a notebook that could not be read gets status "error", empty points and
    the registry's max_points (a row per exercise its name promises). provenance: the graded_by of every row."""
    rows = []
    for report in reports:
        stem = course_notebook(Path(report["notebook"]))
        base = {"student_file": report["notebook"], "notebook": stem or "", "student": report.get("student", ""),
                "graded_by": provenance}
        if "error" in report:
            names = [e.name for e in exercises_in(stem)] if stem else []
            rows += [{**base, "exercise": name, "status": ERROR, "mistake": "", "points": "",
                      "max_points": EXERCISES[name].points if name else ""} for name in names or [""]]
            continue
        rows += [{**base, "exercise": e["name"], "status": e["status"], "mistake": e.get("mistake") or "",
                  "points": e.get("points", ""), "max_points": e.get("max_points", "")}
                 for e in report["exercises"]]
    return [{column: row[column] for column in CSV_COLUMNS} for row in rows]


class CsvLog:
    """The --csv file, written as the grading goes: its header first, then each notebook's rows, flushed to disk."""

    def __init__(self, target: Path, provenance: str | None = None):
        """provenance: the graded_by column (default: course_tools.versions.provenance(), asked once)."""
        self.provenance = versions.provenance() if provenance is None else provenance
        self.file = open(target, "w", encoding="utf-8", newline="")  # noqa: SIM115 - closed by close()
        self.writer = csv.DictWriter(self.file, fieldnames=CSV_COLUMNS)
        self.writer.writeheader()
        self.rows: list[dict] = []
        self._flush()

    def add(self, report: dict) -> None:
        rows = csv_rows([report], self.provenance)
        self.writer.writerows(rows)
        self.rows += rows
        self._flush()

    def _flush(self) -> None:
        self.file.flush()
        os.fsync(self.file.fileno())

    def close(self) -> None:
        self.file.close()


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


# ---------------------------------------------------------------------------------------- JSON
class JsonStream:
    """--json output: one object for one notebook file; otherwise a list, each element printed when known."""

    def __init__(self, out: TextIO, single: bool):
        self.out, self.single, self.count = out, single, 0

    def add(self, report: dict) -> None:
        text = json.dumps(report, ensure_ascii=False, indent=2)
        if self.single:
            self.out.write(text + "\n")
        else:
            self.out.write(("[\n" if self.count == 0 else ",\n") + "\n".join("  " + line for line in text.split("\n")))
        self.count += 1
        self.out.flush()

    def close(self) -> None:
        if not self.single:
            self.out.write("\n]\n" if self.count else "[]\n")
            self.out.flush()


# ---------------------------------------------------------------------------------------- mistakes
def mistake_counts(rows: list[dict]) -> list[tuple[str, str, int]]:
    """(exercise, mistake, count) of every failed exercise, the most frequent first."""
    counts = Counter((r["exercise"], r["mistake"] or UNRECOGNISED) for r in rows if r["status"] == "fail")
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
