"""The grader's verdicts, computed in a process of their own from the student's definitions alone.

    python -m course_tools.verdicts NOTEBOOK.ipynb EXERCISE [EXERCISE ...] --result-fd FD [--timeout S]

The grader (course_tools/grade.py) starts this process, or forks it from its fork server that has
already imported the checking code (course_tools/forkserver.py, which then calls main as this command
line would), with a fresh random key on its stdin and a pipe of its own on file descriptor FD. The
process writes exactly one line there, its verdicts signed with the key (HMAC-SHA256), and exits with
status 0; the grader accepts nothing else. What a student's code prints, or writes anywhere, is not a
verdict: it is not signed.

Nothing a notebook's kernel computed is trusted, and here, in a process no other notebook's code ran in:

1. the key is read before anything else, and lives only inside the process's audit hook
   (``sys.addaudithook``), which no Python code can list; the checking code and everything it uses are
   imported, and a snapshot of them taken, before any student code runs;
2. the notebook's code cells are read as JSON, and only their imports and ``def``/``class``
   statements run (``helpers.student_code.load_definitions``); a statement that reaches into the
   grading machinery (``helpers.guard.machinery_used``) is refused before it runs, and the exercise
   it defines fails with the code ``tampering``;
3. each exercise's check is called on the student's definition, with a time-out;
4. the audit hook refuses, while student code can run, what no answer needs: ending or signalling
   the process (``os.kill``, ``os.system``, ``subprocess``, ``os.exec*``, ``os.fork``, ``posix_spawn``),
   walking the interpreter's objects or other threads' frames (``gc.get_objects``/``get_referrers``,
   ``sys._current_frames``, ``ctypes``), tracing (``sys.settrace``; ``sys.setprofile`` is the guard's
   alone), a new audit hook or interpreter, changing the code of a function of ``helpers``,
   ``course_tools``, ``torch`` or ``numpy``, making a function from the checking code's code objects
   (``helpers/checks``, ``course_tools``; a copy of a reference's is allowed: the guard knows its code, and
   calling it is off limits as the reference is), running the course's code again (``exec`` or ``compile``
   of a file of ``helpers/`` or ``course_tools/``), reading those files (while a check runs: off limits, a
   fresh copy of the reference through ``runpy`` or ``importlib``), and installing a signal handler. Each
   refusal counts as ``tampering`` for the exercise whose check was running (for every exercise while the
   definitions load). It also checks, after each check and before it
   signs, that the checking code is as it was imported: every module, class, function (its code,
   defaults and closure) and module-level table of ``helpers`` and ``course_tools``, and the
   namespaces of ``builtins``, ``numpy``, ``torch`` and the standard modules the checks use; a change
   is ``tampering`` too;
5. the hook signs and writes the verdicts only when asked by this module's own code, called from its
   own ``main`` (it checks the code of every frame of the stack), with no other thread left running.

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

LANGUAGE_CALL = re.compile(r"""set_language\(\s*["'](\w+)["']\s*\)""")
SIGNED = b"TFSV1"  # the first word of the signed line

TAMPERING = "tampering"
TIMED_OUT = "timed_out"
NOT_DEFINED = "not_defined"
_AUDIT = sys.audit  # captured before any student code: the channel to the audit hook
_ALARM = signal.alarm
_FIELD = tuple.__getitem__  # a Verdict is a tuple: its fields, read without any of its class's code


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


# ---------------------------------------------------------------------------------------- the signed line
def encode(rows: Any) -> bytes:
    """The verdicts [(name, status, mistake or None, message)] as one line of hex fields (no JSON parser needed)."""
    return b";".join(b":".join(("" if field is None else field).encode("utf-8").hex().encode() for field in row)
                     for row in rows)


def decode(payload: bytes) -> list[dict]:
    """The inverse of encode: [{"name", "status", "mistake", "message"}]."""
    rows = []
    for row in payload.split(b";") if payload else []:
        name, status, mistake, message = (bytes.fromhex(field.decode()).decode("utf-8") for field in row.split(b":"))
        rows.append({"name": name, "status": status, "mistake": mistake or None, "message": message})
    return rows


def verify(data: bytes, key: bytes) -> list[dict] | None:
    """The verdicts of the output of this process: exactly one line, signed with key; None otherwise."""
    import hmac

    lines = data.split(b"\n")
    if len(lines) != 2 or lines[1] != b"":
        return None
    parts = lines[0].split(b" ")
    if len(parts) != 3 or parts[0] != SIGNED:
        return None
    expected = hmac.new(key, parts[1], "sha256").hexdigest().encode()
    if not hmac.compare_digest(expected, parts[2]):
        return None
    try:
        return decode(parts[1])
    except (ValueError, UnicodeDecodeError):
        return None


# ---------------------------------------------------------------------------------------- computing
class _TimeUp(KeyboardInterrupt):
    """Raised by the alarm: a KeyboardInterrupt, so that the checks (which stop on one) let it through."""


def _alarm(signum: int, frame: Any) -> None:
    raise _TimeUp()


def compute(path: Path, names: tuple[str, ...], timeout: int = 600) -> tuple:
    """The verdict of each exercise named, for the notebook at path, computed here (call this in a verdicts
    process, from main): a tuple of (name, status, mistake or None, message), in the order asked.

    Everything kept here between two checks is a tuple or a str: nothing a student's code could change."""
    from helpers.checks.guard import machinery_used, tampering_message, check_names
    from helpers.checks.harness import EXERCISES, FAIL, PASS, TODO, Verdict  # captured before any student code
    from helpers.i18n import tr
    from helpers.student_code import load_definitions

    exercises = tuple((name, EXERCISES[name].defines, EXERCISES[name].check) if name in EXERCISES else (name, None,
                                                                                                         None)
                      for name in names)
    statuses, checks = (PASS, FAIL, TODO), frozenset(check_names())
    defined_by = {defines: name for name, defines, _ in exercises if defines}
    tampered: dict[str, str] = {}

    def refuse(node: ast.stmt, source: str) -> str | None:
        reached = machinery_used(node, checks)
        if reached is None:
            return None
        name = getattr(node, "name", None)
        if name in defined_by:
            tampered[defined_by[name]] = reached
        return f"refused: it uses {reached}"

    notebook = Path(str(path))
    str(notebook)  # computed now: the audit hook reads a Path's text only once it is known
    try:
        found = load_definitions(notebook, refuse=refuse)
        namespace, sources = dict(found.namespace), frozenset(found.sources)
    except BaseException as error:  # noqa: BLE001 - a definition that exits, say: every exercise fails
        why = f"{type(error).__name__}: {error}"[:200]
        return tuple((name, FAIL, "check_error", f"the notebook's definitions could not be loaded ({why})")
                     for name in names)
    tampered_now = tuple(tampered.items())
    results: tuple = ()
    for name, defines, check in exercises:
        _AUDIT("tfs.exercise", name)
        reached = next((why for which, why in tampered_now if which == name), None)
        if check is None:
            row = (name, FAIL, "check_error", f"no exercise named {name!r} in this version of the course")
        elif reached is not None:
            row = (name, FAIL, TAMPERING, tampering_message(reached))
        elif defines not in namespace or defines not in sources:
            row = (name, FAIL, NOT_DEFINED, tr("grader:not_defined", "the notebook does not define `{defines}`: keep "
                                               "the exercise's cell, and write your answer in it.", defines=defines))
        else:
            row = _checked(name, check, namespace[defines], timeout, Verdict, statuses, tr)
        results = results + (row,)
    _AUDIT("tfs.exercise", None)
    return results


def _checked(name: str, check: Any, answer: Any, timeout: int, verdict_class: type, statuses: tuple, tr: Any) -> tuple:
    """(name, status, mistake, message) of one check on one answer, within the time-out."""
    _ALARM(max(1, int(timeout)))
    try:
        verdict = check(answer)
    except KeyboardInterrupt:
        return (name, "fail", TIMED_OUT, tr("grader:check_timed_out", "its check ran longer than {seconds} seconds "
                                            "on your answer and was stopped: look for a loop that never ends.",
                                            seconds=int(timeout)))
    except BaseException as error:  # noqa: BLE001 - the check itself never raises; say so if it did
        return (name, "fail", "check_error", f"the check could not run ({type(error).__name__})")
    finally:
        _ALARM(0)
    if type(verdict) is not verdict_class:  # noqa: E721 - exactly the class captured before any student code
        return (name, "fail", "check_error", "the check returned something other than a verdict")
    row = tuple(_FIELD(verdict, index) for index in (0, 1, 3, 2))  # exercise, status, mistake, message
    if row[0] != name or row[1] not in statuses or not all(type(v) is str for v in row[:2] + row[3:]) \
            or not (row[2] is None or type(row[2]) is str):
        return (name, "fail", "check_error", "the check returned something other than a verdict")
    return row


def _finish(results: tuple) -> None:
    """Hand the verdicts to the audit hook, which signs them, writes them to the grader's pipe and ends the
    process; it returns only when the hook refused (then the grader receives no verdict)."""
    _AUDIT("tfs.verdicts", results)


def main(argv: list[str] | None = None) -> int:
    key = os.read(0, 64)  # first of all, before anything of the student's is read
    parser = argparse.ArgumentParser(prog="python -m course_tools.verdicts",
                                     description="Compute a notebook's verdicts from its definitions alone.")
    parser.add_argument("notebook", type=Path)
    parser.add_argument("exercises", nargs="+")
    parser.add_argument("--timeout", type=int, default=600, help="seconds allowed to each check")
    parser.add_argument("--result-fd", type=int, required=True, help="the file descriptor of the grader's pipe")
    args = parser.parse_args(argv)
    from .sandbox import protect  # imports the checking code, snapshots it, installs the audit hook

    signal.signal(signal.SIGALRM, _alarm)
    protect(key, args.result_fd, notebook_language(args.notebook), tuple(args.exercises), compute=compute,
            finish=_finish, main=main)
    del key
    with contextlib.redirect_stdout(io.StringIO()):  # what the student's code prints is not a verdict
        results = compute(args.notebook, tuple(args.exercises), args.timeout)
    _finish(results)
    os._exit(3)  # the hook refused to sign


if __name__ == "__main__":
    sys.exit(main())
