"""The grader's verdicts, computed in a process of their own from the student's definitions alone.

    python -I -B -X utf8 -m course_tools.verdicts NOTEBOOK.ipynb EXERCISE [EXERCISE ...] [--timeout S]

Started by execute.py in the notebook's workspace, with TFS_GRADING_SEED set (the checks draw sizes from it). It
prints, in the order asked, {"checking": name} before each check (the grader times it from there) and one line
{"name", "status": "pass" | "fail" | "todo", "mistake": code or null, "message"} per exercise, and exits with 0.
Only the notebook's imports and ``def``/``class`` statements run; one that names the checking code is refused, and
a check after which the checks or ``Verdict`` are not the objects they were is ``tampering``. These are speed bumps:
the wall is the sandbox (isolation.py). The messages are in the language the notebook sets.
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
from typing import Any, Callable

from .console import utf8_output

LANGUAGE_CALL = re.compile(r"""set_language\(\s*["'](\w+)["']\s*\)""")
STATUSES = ("pass", "fail", "todo")
TAMPERING = "tampering"
TIMED_OUT = "timed_out"
NOT_DEFINED = "not_defined"
CHECK_ERROR = "check_error"


def notebook_language(path: Path) -> str:
    """The language a notebook sets with set_language("..") in a code cell ("en" when none)."""
    from helpers.notebook_io import code_cells, read_json_notebook

    try:
        sources = [source for _, source in code_cells(read_json_notebook(path))]
    except (ValueError, KeyError, TypeError, AttributeError):
        return "en"
    found = [m.group(1) for source in sources for m in LANGUAGE_CALL.finditer(source)]
    return found[-1] if found else "en"


def row(name: str, status: str, mistake: str | None, message: str) -> dict:
    return {"name": name, "status": status, "mistake": mistake, "message": message}


def timed_out_message(timeout: int, language: str | None = None) -> str:
    from helpers.i18n import tr

    return tr("grader:check_timed_out", "its check ran longer than {seconds} seconds on your answer and was stopped: "
              "look for a loop that never ends.", in_language=language, seconds=int(timeout))


class Machinery:
    """The checking code as it is before any student code runs: what each check is checked against."""

    def __init__(self, names: tuple[str, ...]):
        import helpers.checks as checks
        from helpers.checks import EXERCISES, Verdict
        from helpers.checks.guard import check_names, machinery_used, tampering_message

        self.checks_module, self.verdict_class = checks, Verdict
        self.exercises = {name: EXERCISES[name] for name in names if name in EXERCISES}
        self.check = {name: e.check for name, e in self.exercises.items()}
        self.code = {name: getattr(e.check, "__code__", None) for name, e in self.exercises.items()}
        self.verdict_attributes = dict(vars(Verdict))
        self.registry = EXERCISES
        self.machinery_used, self.tampering_message = machinery_used, tampering_message
        self.check_names = frozenset(check_names())

    def changed(self) -> str | None:
        """What the student's code changed in the checking code (a short description), or None."""
        from helpers.checks import EXERCISES, Verdict

        if self.checks_module.Verdict is not self.verdict_class or Verdict is not self.verdict_class:
            return "helpers.checks.Verdict"
        if EXERCISES is not self.registry:
            return "helpers.checks.EXERCISES"
        now = dict(vars(self.verdict_class))
        if now.keys() != self.verdict_attributes.keys() or any(now[k] is not v for k, v in
                                                                self.verdict_attributes.items()):
            return "helpers.checks.Verdict"
        for name, exercise in self.exercises.items():
            if self.registry.get(name) is not exercise or exercise.check is not self.check[name] \
                    or getattr(exercise.check, "__code__", None) is not self.code[name]:
                return f"helpers.checks.{exercise.check_name}"
        return None

    def accepted(self, name: str, verdict: Any) -> dict | None:
        """The verdict as a row, when it is a real Verdict of this exercise; None otherwise."""
        if type(verdict) is not self.verdict_class:  # noqa: E721 - exactly the class, not a subclass
            return None
        fields = (verdict.exercise, verdict.status, verdict.message)
        if fields[0] != name or fields[1] not in STATUSES or not all(type(f) is str for f in fields) \
                or not (verdict.mistake is None or type(verdict.mistake) is str):
            return None
        return row(name, verdict.status, verdict.mistake, verdict.message)


def compute(path: Path, names: tuple[str, ...], timeout: int, emit: Callable[[dict], None]) -> None:
    """Compute the verdict of each exercise named, for the notebook at path, and hand each to emit as soon as
    it is known (a row: name, status, mistake, message), in the order asked."""
    from helpers.i18n import tr
    from helpers.student_code import load_definitions

    machinery = Machinery(names)  # captured before any student code is loaded
    defined_by = {e.defines: name for name, e in machinery.exercises.items()}
    tampered: dict[str, str] = {}

    def refuse(node: ast.stmt, source: str) -> str | None:
        reached = machinery.machinery_used(node, machinery.check_names)
        if reached is None:
            return None
        if getattr(node, "name", None) in defined_by:
            tampered[defined_by[node.name]] = reached
        return f"refused: it uses {reached}"

    try:
        with contextlib.redirect_stdout(io.StringIO()):
            found = load_definitions(path, refuse=refuse)
        namespace, sources = dict(found.namespace), dict(found.sources)
    except BaseException as error:  # noqa: BLE001 - a definition that exits, say: every exercise fails
        why = f"{type(error).__name__}: {error}"[:200]
        for name in names:
            emit(row(name, "fail", CHECK_ERROR, f"the notebook's definitions could not be loaded ({why})"))
        return
    for name in names:
        exercise = machinery.exercises.get(name)
        if exercise is None:
            emit(row(name, "fail", CHECK_ERROR, f"no exercise named {name!r} in this version of the course"))
        elif name in tampered:
            emit(row(name, "fail", TAMPERING, machinery.tampering_message(tampered[name])))
        elif exercise.defines not in namespace or exercise.defines not in sources:
            emit(row(name, "fail", NOT_DEFINED, tr(
                "grader:not_defined", "the notebook does not define `{defines}`: keep the exercise's cell, and "
                "write your answer in it.", defines=exercise.defines)))
        else:
            emit({"checking": name})  # the grader's clock for this check starts now
            emit(checked(machinery, name, namespace[exercise.defines], timeout))


def checked(machinery: Machinery, name: str, answer: Any, timeout: int) -> dict:
    """The row of one check on one answer, within the time-out."""
    check = machinery.check[name]
    alarm = getattr(signal, "alarm", lambda seconds: None)  # none on Windows: the grader's time-out holds there
    alarm(max(1, int(timeout)))
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            verdict = check(answer)
    except KeyboardInterrupt:
        return row(name, "fail", TIMED_OUT, timed_out_message(timeout))
    except BaseException as error:  # noqa: BLE001 - the check itself never raises; say so if it did
        return row(name, "fail", CHECK_ERROR, f"the check could not run ({type(error).__name__})")
    finally:
        alarm(0)
    changed = machinery.changed()
    if changed is not None:
        return row(name, "fail", TAMPERING, machinery.tampering_message(changed))
    accepted = machinery.accepted(name, verdict)
    if accepted is None:
        return row(name, "fail", CHECK_ERROR, "the check returned something other than a verdict")
    return accepted


def main(argv: list[str] | None = None) -> int:
    utf8_output()  # its stderr, which the grader reads as UTF-8
    parser = argparse.ArgumentParser(prog="python -m course_tools.verdicts",
                                     description="Compute a notebook's verdicts from its definitions alone.")
    parser.add_argument("notebook", type=Path)
    parser.add_argument("exercises", nargs="+")
    parser.add_argument("--timeout", type=int, default=600, help="seconds allowed to each check")
    args = parser.parse_args(argv)
    channel = os.fdopen(os.dup(1), "w", encoding="utf-8")  # the grader's; file descriptor 1 goes nowhere now
    quiet = os.open(os.devnull, os.O_WRONLY)
    os.dup2(quiet, 1)
    os.close(quiet)
    from helpers.i18n import set_language

    language = notebook_language(args.notebook)
    with contextlib.suppress(ValueError):
        set_language(language)
    if hasattr(signal, "SIGALRM"):  # a KeyboardInterrupt, which the checks (that stop on one) let through
        signal.signal(signal.SIGALRM, signal.default_int_handler)

    def emit(result: dict) -> None:
        channel.write(json.dumps(result, ensure_ascii=False) + "\n")
        channel.flush()

    compute(args.notebook, tuple(args.exercises), args.timeout, emit)
    channel.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
