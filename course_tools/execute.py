"""Running one submission for the grader, inside its workspace (isolation.py): its notebook in a kernel, driven
by nbclient, and its verdicts in a ``python -I -B -X utf8 -m course_tools.verdicts`` process of their own.

A cell still running after ``timeout`` seconds is interrupted (nbclient's ``interrupt_on_timeout``); a kernel still
busy ``grace`` seconds later (a loop that catches KeyboardInterrupt) is killed, and the cells after that one run in a
new kernel. A verdicts process whose check outlives the time-out plus the grace is killed: that exercise is
``timed_out``, and a new process computes the exercises after it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import secrets
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from typing import Any

import nbformat
from jupyter_client.manager import AsyncKernelManager
from nbclient import NotebookClient
from nbclient.exceptions import DeadKernelError

from helpers.i18n import tr

from .isolation import Workspace, interpreter
from .verdicts import row, timed_out_message

STARTUP_SECONDS = 300  # the longest a kernel or a verdicts process may take to start and load the definitions
QUIET = logging.getLogger("tfs-grade.kernel")  # nbclient's notes about a time-out are the grader's to give
QUIET.setLevel(logging.CRITICAL + 1)
QUIET.propagate = False


def grace_seconds(timeout: int) -> int:
    """How long an interrupted cell or check may take to stop before its process is killed."""
    return min(30, max(5, int(timeout)))


@dataclass
class Run:
    """What happened when the notebook ran: which cells ran, and where it stopped."""

    executed: set[int] = field(default_factory=set)  # indices of the code cells that ran to the end
    timed_out: set[int] = field(default_factory=set)  # cells interrupted after --timeout seconds
    restarted: set[int] = field(default_factory=set)  # timed-out cells after which the kernel had to be killed
    died_at: int | None = None  # the cell during which the kernel died


class WorkspaceKernelManager(AsyncKernelManager):
    """An IPython kernel in a submission's workspace: run by this Python in isolated mode, in the sandbox when
    there is one, talking to the grader over Unix sockets in the workspace (a sandbox has no network)."""

    def __init__(self, workspace: Workspace, **kwargs: Any):
        runtime = workspace.root / "runtime"
        super().__init__(transport="ipc", ip=str(runtime / "kernel"), connection_file=str(runtime / "kernel.json"),
                         kernel_name="python3", **kwargs)
        self.workspace = workspace

    def format_kernel_cmd(self, extra_arguments: list[str] | None = None) -> list[str]:
        command = super().format_kernel_cmd(extra_arguments)
        if command and command[0] == sys.executable:
            command = [*interpreter(), *command[1:]]
        return self.workspace.command(command)


async def _idle_within(client: NotebookClient, seconds: float) -> bool:
    """Whether the kernel answers a request of its own within seconds (it is free again)."""
    try:
        await client.kc.execute_interactive("", silent=True, store_history=False, timeout=seconds)
    except TimeoutError:
        return False
    return True


async def _run_from(notebook: nbformat.NotebookNode, first: int, workspace: Workspace, timeout: int,
                    run: Run) -> int | None:
    """Run the cells from index first in a new kernel; the index to go on from in another kernel, or None."""
    marker = {"ename": "TimeoutError", "evalue": f"tfs-grade {secrets.token_hex(8)}", "traceback": []}
    timed_out: set[int] = set()

    def on_executed(cell: Any, cell_index: int, execute_reply: dict, **_: Any) -> None:
        if execute_reply.get("content", {}).get("evalue") == marker["evalue"]:
            timed_out.add(cell_index)

    client = NotebookClient(
        notebook, km=WorkspaceKernelManager(workspace), timeout=timeout, interrupt_on_timeout=True,
        error_on_timeout=marker, allow_errors=True, shutdown_kernel="immediate", log=QUIET,
        # not the kernel's own notes ("KeyboardInterrupt caught" after a time-out, ...)
        extra_arguments=["--log-level=CRITICAL"], resources={"metadata": {"path": str(workspace.work)}},
        on_cell_executed=on_executed)
    async with client.async_setup_kernel(env=workspace.environment(), cleanup_kc=True):
        for index in range(first, len(notebook.cells)):
            try:
                await client.async_execute_cell(notebook.cells[index], index)
            except DeadKernelError:
                run.died_at = index
                return None
            if index not in timed_out:
                run.executed.add(index)
                continue
            run.timed_out.add(index)
            if not await _idle_within(client, grace_seconds(timeout)):  # it caught the interrupt: kill it
                run.restarted.add(index)
                return index + 1
    return None


def execute(notebook: nbformat.NotebookNode, workspace: Workspace, timeout: int) -> Run:
    """Run the notebook top to bottom (errors do not stop it) in the workspace's kernel; say which cells ran.
    The notebook's cells get their outputs."""
    run = Run()

    async def everything() -> None:
        first: int | None = 0
        while first is not None and first < len(notebook.cells):
            try:
                first = await _run_from(notebook, first, workspace, timeout, run)
            except (RuntimeError, OSError, TimeoutError):  # the kernel did not start, or died before answering
                if run.died_at is None:
                    run.died_at = first
                return

    asyncio.run(everything())
    return run


# ---------------------------------------------------------------------------------------- verdicts
async def _verdicts_process(workspace: Workspace, names: list[str], timeout: int, seed: str) -> dict:
    """One verdicts process for names: {"rows": {name: row}, "status": exit status or None when killed for
    running too long, "stderr": its last line, "checking": the exercise whose check it started last}."""
    command = workspace.command([*interpreter(), "-m", "course_tools.verdicts", str(workspace.notebook), *names,
                                 "--timeout", str(timeout)])
    rows: dict[str, dict] = {}
    wait, checking, status = STARTUP_SECONDS + timeout + grace_seconds(timeout), None, None
    with tempfile.TemporaryFile(dir=workspace.root) as errors:
        process = await asyncio.create_subprocess_exec(
            *command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=errors, cwd=workspace.work,
            env=workspace.environment(TFS_GRADING_SEED=seed), start_new_session=True, limit=1 << 24)
        try:
            while len(rows) < len(names) and (line := await asyncio.wait_for(process.stdout.readline(), wait)):
                found, expected = _parsed(line), names[len(rows)]
                if found.get("checking") == expected:  # its check starts: it has the time-out and the grace
                    wait, checking = timeout + grace_seconds(timeout), expected
                elif found.get("name") == expected and found.get("status") in ("pass", "fail", "todo"):
                    rows[expected] = row(expected, found["status"], found.get("mistake") or None,
                                         str(found.get("message")))
        except (TimeoutError, ValueError):  # a check that does not stop (or a line past 16 MiB): the process goes
            await _kill(process)
        else:
            try:
                await asyncio.wait_for(process.wait(), grace_seconds(timeout))
            except TimeoutError:
                await _kill(process)
            status = process.returncode
        errors.seek(max(0, errors.seek(0, os.SEEK_END) - 65536))
        text = errors.read().decode("utf-8", "replace")
    last = next((line.strip() for line in reversed(text.splitlines()) if line.strip()), "")
    return {"rows": rows, "status": status, "stderr": last[-200:], "checking": checking}


def _parsed(line: bytes) -> dict:
    """A line of the verdicts process as a dict ({} when it is not a JSON object)."""
    try:
        found = json.loads(line)
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


async def _kill(process: asyncio.subprocess.Process) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (OSError, AttributeError):
        process.kill()
    await process.wait()


def fresh_verdicts(workspace: Workspace, names: list[str], timeout: int, language: str = "en") -> dict[str, dict]:
    """{exercise: verdict row}, computed by `python -I -m course_tools.verdicts` in the workspace, from the
    notebook's definitions alone. A process killed past its time-out loses its current exercise (``timed_out``),
    and a new one computes the rest; a process that ended without its verdicts fails those left."""
    found: dict[str, dict] = {}
    left = list(names)
    while left:
        result = asyncio.run(_verdicts_process(workspace, left, timeout, str(secrets.randbelow(2 ** 31))))
        found.update(result["rows"])
        left = [name for name in left if name not in found]
        if left and result["status"] is not None:
            found.update(_no_verdicts(left, result["status"], result["stderr"], language))
            break
        # killed: the check it was in did not stop, or else the definitions never finished loading
        stuck = left[:1] if left and result["checking"] == left[0] else left
        found.update({name: row(name, "fail", "timed_out", timed_out_message(timeout, language)) for name in stuck})
        left = left[len(stuck):]
    return {name: found[name] for name in names}


def _no_verdicts(names: list[str], status: int, stderr: str, language: str) -> dict[str, dict]:
    if status == 0:  # it ended normally, yet without these verdicts: not our code's doing
        message = tr("grader:no_verdicts", "the process that computes the grader's verdicts ended before it gave "
                     "them: code in the notebook ended it. An answer may only compute its result.",
                     in_language=language)
        return {name: row(name, "fail", "tampering", message) for name in names}
    how = f"signal {-status}" if status < 0 else f"exit status {status}"
    message = tr("grader:verdicts_died", "the process that computes the grader's verdicts from your definitions "
                 "died ({how}{why}): look for code that exits Python or uses up the memory.", in_language=language,
                 how=how, why=f": {stderr}" if stderr else "")
    return {name: row(name, "fail", "kernel_died", message) for name in names}
