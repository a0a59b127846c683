"""Grade a student notebook from the command line.

    python -m course_tools.grade notebooks/01_positional_encoding.ipynb
    python -m course_tools.grade path/to/student.ipynb --json

The notebook is executed top to bottom in a fresh kernel (errors do not stop it; a cell running
longer than --timeout seconds is interrupted). Every check cell reports its exercise as
``pass``, ``fail`` or ``todo``. An exercise whose check never ran counts as ``fail``.

Exit status: 0 when every exercise passes, 1 otherwise, 2 when the notebook cannot be read.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from helpers.checks import exercises_in
from helpers.checks.harness import FAIL, PASS, SYMBOLS

NOT_RUN = "its check cell did not run: it was deleted, or the cell failed before the check was called."


def expected_exercises(path: Path) -> list[str]:
    """The exercises the course's notebook of this name contains (matched on the file name)."""
    from helpers.checks import EXERCISES
    stems = {e.notebook for e in EXERCISES.values()}
    for stem in stems:
        if stem in path.stem:
            return [e.name for e in exercises_in(stem)]
    return []


def execute(notebook: nbformat.NotebookNode, workdir: Path, timeout: int) -> list[dict]:
    """Run the notebook with checks logging to a temporary file; return the logged results."""
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "checks.jsonl"
        log.touch()
        previous = os.environ.get("HELPERS_GRADE_LOG")
        os.environ["HELPERS_GRADE_LOG"] = str(log)  # the kernel inherits our environment
        try:
            client = NotebookClient(
                notebook,
                timeout=timeout,
                interrupt_on_timeout=True,
                allow_errors=True,
                kernel_name="python3",
                resources={"metadata": {"path": str(workdir)}},
            )
            client.execute()
        finally:
            if previous is None:
                os.environ.pop("HELPERS_GRADE_LOG", None)
            else:
                os.environ["HELPERS_GRADE_LOG"] = previous
        return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines() if line.strip()]


def grade(path: Path, timeout: int = 600) -> dict:
    """Execute and grade one notebook. Raises ValueError when it cannot be read."""
    try:
        notebook = nbformat.read(path, as_version=4)
    except (OSError, ValueError, nbformat.reader.NotJSONError) as error:
        raise ValueError(f"cannot read {path}: {error}") from None
    results = execute(notebook, path.resolve().parent, timeout)
    latest: dict[str, dict] = {}
    for record in results:  # a check run twice counts with its last verdict
        latest[record["name"]] = record
    names = expected_exercises(path) + [n for n in latest if n not in expected_exercises(path)]
    exercises = [
        latest.get(name, {"name": name, "status": FAIL, "message": NOT_RUN}) for name in names
    ]
    return {
        "notebook": str(path),
        "exercises": [{k: e[k] for k in ("name", "status", "message")} for e in exercises],
        "passed": sum(e["status"] == PASS for e in exercises),
        "total": len(exercises),
    }


def format_report(report: dict) -> str:
    width = max([len(e["name"]) for e in report["exercises"]] + [8])
    lines = [f"Grading {report['notebook']}"]
    for e in report["exercises"]:
        lines.append(f"  {SYMBOLS[e['status']]} {e['name']:<{width}}  {e['status']:<4}  {e['message']}")
    lines.append(f"{report['passed']}/{report['total']} exercises pass")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Execute a student notebook and grade its exercises.")
    parser.add_argument("notebook", type=Path, help="the .ipynb file to grade")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--timeout", type=int, default=600, help="seconds allowed per cell (default 600)")
    args = parser.parse_args(argv)
    try:
        report = grade(args.notebook, timeout=args.timeout)
    except ValueError as error:
        if args.json:
            print(json.dumps({"notebook": str(args.notebook), "error": str(error)}))
        else:
            print(f"error: {error}", file=sys.stderr)
        return 2
    print(json.dumps(report, ensure_ascii=False, indent=2) if args.json else format_report(report))
    return 0 if report["total"] and report["passed"] == report["total"] else 1


if __name__ == "__main__":
    sys.exit(main())
