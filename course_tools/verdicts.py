"""The grader's verdicts, computed in a fresh interpreter from the student's definitions alone.

    python -m course_tools.verdicts NOTEBOOK.ipynb EXERCISE [EXERCISE ...] [--timeout S]

prints one JSON list, [{"name", "status", "mistake", "message"}] in the order asked.

Nothing a notebook's kernel computed is trusted: a student's cell could write a verdict file,
patch the ``Verdict`` class or replace a check function there. Here, in a new process:

1. the checks, the ``Verdict`` class and the status names are captured before any student code runs;
2. the notebook's code cells are read as JSON, and only their imports and ``def``/``class``
   statements run (``helpers.student_code.load_definitions``); a statement that reaches into the
   grading machinery (``helpers.checks``, ``Verdict``, ``sys.modules``, ``__code__``, ``exec``, ...) is
   refused before it runs, and the exercise it defines fails with the code ``tampering``;
3. each exercise's check is called on the student's definition, with a time-out; the result counts
   only if it is a ``Verdict`` of the captured class.

The language of the messages is the one the notebook sets (``set_language("es")`` in a code cell).
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import io
import json
import os
import re
import signal
import sys
from pathlib import Path
from typing import Any

# Names and attributes through which an answer could reach the grading machinery instead of the task.
MACHINERY_NAMES = {"Verdict", "EXERCISES", "harness", "guard", "silenced", "course_tools", "exec", "eval",
                   "compile", "__import__", "globals", "vars", "importlib", "builtins", "__builtins__", "ctypes",
                   "gc", "HELPERS_GRADE_LOG", "NBGRADER_EXECUTION", "atexit", "threading", "_thread",
                   "multiprocessing", "subprocess", "signal", "__stdout__"}
MACHINERY_ATTRIBUTES = {"checks", "harness", "guard", "Verdict", "EXERCISES", "__code__", "__globals__",
                        "__builtins__", "__dict__", "__closure__", "f_globals", "f_locals", "f_back", "environ",
                        "record", "silenced", "__stdout__", "_exit"}
MACHINERY_MODULES = ("helpers.checks", "course_tools", "builtins", "importlib", "ctypes", "gc", "inspect", "atexit",
                     "threading", "_thread", "multiprocessing", "subprocess", "signal")
LANGUAGE_CALL = re.compile(r"""set_language\(\s*["'](\w+)["']\s*\)""")

TAMPERING = "tampering"
TIMED_OUT = "timed_out"
NOT_DEFINED = "not_defined"


def machinery_used(node: ast.AST) -> str | None:
    """The first name in node (a statement of the student's) that reaches into the grading machinery, or None."""
    for child in ast.walk(node):
        if isinstance(child, ast.Name) and (child.id in MACHINERY_NAMES or child.id.startswith("check_")):
            return child.id
        if isinstance(child, ast.Attribute):
            if child.attr in MACHINERY_ATTRIBUTES or child.attr.startswith("check_"):
                return f".{child.attr}"
            if child.attr == "modules" and isinstance(child.value, ast.Name) and child.value.id == "sys":
                return "sys.modules"
        if isinstance(child, ast.Call) and isinstance(child.func, ast.Name) and child.func.id in {"setattr", "delattr"}:
            target = child.args[0] if child.args else None
            if not (isinstance(target, ast.Name) and target.id == "self"):
                return child.func.id
        if isinstance(child, ast.Import):
            for alias in child.names:
                if alias.name.startswith(MACHINERY_MODULES):
                    return alias.name
        if isinstance(child, ast.ImportFrom):
            module = child.module or ""
            names = {alias.name for alias in child.names}
            if module.startswith(MACHINERY_MODULES) or (module == "helpers" and names & {"checks", "harness"}):
                return module
            if names & MACHINERY_NAMES:  # importing a check by name is fine; calling one from an answer is not
                return sorted(names & MACHINERY_NAMES)[0]
    return None


def notebook_language(path: Path) -> str:
    """The language a notebook sets with set_language("..") in a code cell ("en" when none)."""
    try:
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        sources = ["".join(c["source"]) if isinstance(c["source"], list) else c["source"]
                   for c in cells if c.get("cell_type") == "code"]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return "en"
    found = [m.group(1) for source in sources for m in LANGUAGE_CALL.finditer(source)]
    return found[-1] if found else "en"


class _TimeUp(KeyboardInterrupt):
    """Raised by the alarm: a KeyboardInterrupt, so that the checks (which stop on one) let it through."""


def _alarm(signum: int, frame: Any) -> None:
    raise _TimeUp()


def compute(path: Path, names: list[str], timeout: int = 600) -> list[dict]:
    """The verdict of each exercise named, for the notebook at path, computed here (call this in a fresh process)."""
    from helpers.checks.harness import EXERCISES, FAIL, PASS, TODO, Verdict  # captured before any student code
    from helpers.i18n import set_language, tr
    from helpers.student_code import load_definitions

    language = notebook_language(path)
    try:
        set_language(language)
    except ValueError:
        language = "en"
    exercises = {name: EXERCISES[name] for name in names if name in EXERCISES}
    checks = {name: exercise.check for name, exercise in exercises.items()}
    statuses = (PASS, FAIL, TODO)
    defined_by = {exercise.defines: name for name, exercise in exercises.items()}
    tampered: dict[str, str] = {}

    def refuse(node: ast.stmt, source: str) -> str | None:
        reached = machinery_used(node)
        if reached is None:
            return None
        name = getattr(node, "name", None)
        if name in defined_by:
            tampered[defined_by[name]] = reached
        return f"refused: it uses {reached}"

    found = load_definitions(path, refuse=refuse)
    results = []
    for name in names:
        exercise = exercises.get(name)
        if exercise is None:
            results.append({"name": name, "status": FAIL, "mistake": "check_error",
                            "message": f"no exercise named {name!r} in this version of the course"})
            continue
        if name in tampered:
            results.append({"name": name, "status": FAIL, "mistake": TAMPERING, "message": tr(
                "grader:tampering", "your answer uses `{reached}`, which reaches into the course's checking code; "
                "an answer may only compute its result.", reached=tampered[name].lstrip("."))})
            continue
        if exercise.defines not in found.namespace or exercise.defines not in found.sources:
            results.append({"name": name, "status": FAIL, "mistake": NOT_DEFINED, "message": tr(
                "grader:not_defined", "the notebook does not define `{defines}`: keep the exercise's cell, and "
                "write your answer in it.", defines=exercise.defines)})
            continue
        previous = signal.signal(signal.SIGALRM, _alarm)
        signal.alarm(max(1, int(timeout)))
        try:
            verdict = checks[name](found.namespace[exercise.defines])
        except KeyboardInterrupt:
            verdict = None
            results.append({"name": name, "status": FAIL, "mistake": TIMED_OUT, "message": tr(
                "grader:check_timed_out", "its check ran longer than {seconds} seconds on your answer and was "
                "stopped: look for a loop that never ends.", seconds=int(timeout))})
        finally:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, previous)
        if verdict is None:
            continue
        if type(verdict) is not Verdict or verdict.status not in statuses:
            results.append({"name": name, "status": FAIL, "mistake": "check_error",
                            "message": "the check returned something other than a verdict"})
            continue
        results.append(verdict.to_dict())
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m course_tools.verdicts",
                                     description="Compute a notebook's verdicts from its definitions alone.")
    parser.add_argument("notebook", type=Path)
    parser.add_argument("exercises", nargs="+")
    parser.add_argument("--timeout", type=int, default=600, help="seconds allowed to each check")
    args = parser.parse_args(argv)
    real_stdout = sys.stdout
    try:  # what the student's code prints must not mix with the verdicts
        with contextlib.redirect_stdout(io.StringIO()):
            results: Any = compute(args.notebook, args.exercises, args.timeout)
        status = 0
    except ValueError as error:  # the notebook cannot be read
        results, status = {"error": str(error)}, 2
    real_stdout.write("\n" + json.dumps(results, ensure_ascii=False) + "\n")
    real_stdout.flush()
    os._exit(status)  # nothing of the student's (a thread, an atexit function) runs after the verdicts


if __name__ == "__main__":
    sys.exit(main())
