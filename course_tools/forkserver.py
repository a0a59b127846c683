"""The grader's verdicts processes, forked from a server that has already imported the checking code.

A verdicts process (course_tools/verdicts.py) is a new interpreter for each graded notebook, and starting
one costs about 1.5 s of CPU, nearly all of it importing torch, numpy, matplotlib and the checks. The
grader therefore starts, once, a *fork server*:

    python -m course_tools.forkserver --fd N      (started by the grader: run_verdicts below)

It imports what a verdicts process imports before any student code runs (``sandbox._import_everything``),
and torch._dynamo, which torch imports when a check first builds an optimizer; nothing else. It never
reads a notebook and never runs a student's code. For each notebook, the grader sends it one message on
a Unix socket (N): the notebook, the exercise names, the time-out, the grader's working folder and
environment, with four file descriptors: the read end of the key pipe, the write end of the result
pipe, the write end of a pipe for stderr, and one end of a socket of this request alone.
The server forks a *waiter*, which forks the verdicts process, then reports on the request's socket the
process's pid (so that the grader can kill it at its time-out) and, when it ends, its exit status.

The verdicts process closes every descriptor but its own four (the key on 0, /dev/null on 1, stderr on 2,
the result pipe on 3): no student code can reach the server, the waiter or another notebook's pipes. It
then runs ``verdicts.main`` as ``python -m course_tools.verdicts`` would: the key is read before anything
else, the snapshot of the checking code taken and the audit hook installed before any student code runs.
What a student's code changes dies with its own fork; the server's copy of the checking code is never
exposed to it. Where the platform cannot do this (no fork, no SOCK_SEQPACKET), the grader starts each
verdicts process as a new interpreter instead (spawn_verdicts).
"""

from __future__ import annotations

import argparse
import atexit
import fcntl
import json
import os
import signal
import socket
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

_EXIT = os._exit  # bound before any student code runs: what ends a fork of the server
PIPES = 4  # key (read end), result (write end), stderr (write end), the request's own socket
MESSAGE_LIMIT = 1 << 20  # bytes of one request


# ---------------------------------------------------------------------------------------- the grader's side
def _read_all(fd: int, limit: int = 1 << 20) -> bytes:
    """What is written to the pipe fd until every writer closed it (at most limit + 1 bytes are kept)."""
    chunks, size = [], 0
    with os.fdopen(fd, "rb", buffering=0) as pipe:
        while True:
            chunk = pipe.read(65536)
            if not chunk:
                break
            if size <= limit:
                chunks.append(chunk)
            size += len(chunk)
    return b"".join(chunks)[:limit + 1]


def _command(path: Path, names: list[str], timeout: int, result_fd: int) -> list[str]:
    return [str(path), *names, "--timeout", str(timeout), "--result-fd", str(result_fd)]


def spawn_verdicts(path: Path, names: list[str], timeout: int, key: bytes) -> tuple[int, bytes, bytes]:
    """Run `python -m course_tools.verdicts` for the notebook in a new interpreter: (exit status, what it wrote
    on the result pipe, its stderr). A negative status is the signal that ended it."""
    read_end, write_end = os.pipe()
    command = [sys.executable, "-m", "course_tools.verdicts", *_command(path, names, timeout, write_end)]
    try:
        process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                   pass_fds=(write_end,), env={**os.environ, "PYTHONUNBUFFERED": "1"})
    finally:
        os.close(write_end)
    with ThreadPoolExecutor(max_workers=1) as reader:
        received = reader.submit(_read_all, read_end)
        try:
            _, stderr = process.communicate(key, timeout=timeout * len(names) + 120)
        except subprocess.TimeoutExpired:
            process.kill()
            _, stderr = process.communicate()
        data = received.result()
    return process.returncode, data, stderr


class ForkServer:
    """The grader's handle on one fork server (see the module's docstring); safe to use from several threads."""

    def __init__(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "course_tools.forkserver", "--fd", str(theirs.fileno())],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, pass_fds=(theirs.fileno(),),
                env={**os.environ, "PYTHONUNBUFFERED": "1"})
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        self.socket = ours

    def alive(self) -> bool:
        return self.process.poll() is None

    def close(self) -> None:
        self.socket.close()  # the server reads the end of its socket, and exits
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def run(self, path: Path, names: list[str], timeout: int, key: bytes) -> tuple[int, bytes, bytes]:
        """As spawn_verdicts, in a process forked by the server."""
        key_read, key_write = os.pipe()
        result_read, result_write = os.pipe()
        error_read, error_write = os.pipe()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        request = json.dumps({"argv": _command(path, names, timeout, 3), "cwd": os.getcwd(),
                              "env": dict(os.environ)}).encode()
        try:
            socket.send_fds(self.socket, [request], [key_read, result_write, error_write, theirs.fileno()])
            os.write(key_write, key)
        except OSError as error:  # the server ended: no process has this key
            ours.close()
            os.close(result_read)
            os.close(error_read)
            raise ServerGone() from error
        finally:
            for fd in (key_read, key_write, result_write, error_write):
                os.close(fd)
            theirs.close()
        with ours, ThreadPoolExecutor(max_workers=2) as readers:
            received, stderr = readers.submit(_read_all, result_read), readers.submit(_read_all, error_read)
            status = _wait(ours, timeout * len(names) + 120, grace=60)
            return status, received.result(), stderr.result()


class ServerGone(Exception):
    """The fork server ended before it received a request."""


def _wait(reply: socket.socket, seconds: float, grace: float) -> int:
    """The exit status the waiter reports on reply; the verdicts process is killed after seconds, and its status
    awaited grace seconds more. A waiter or server that ended without saying counts as a process killed (-9)."""
    killed = -signal.SIGKILL
    reply.settimeout(seconds)
    try:
        pid = int(reply.recv(64) or b"0")
    except (OSError, ValueError):
        return killed
    if not pid:
        return killed
    try:
        return int(reply.recv(64) or killed)
    except socket.timeout:  # its time is up
        try:
            os.kill(pid, signal.SIGKILL)  # not reaped yet: its waiter reports its status only after waiting for it
        except OSError:  # it ended just now
            pass
    except (OSError, ValueError):
        return killed
    reply.settimeout(grace)
    try:
        return int(reply.recv(64) or killed)
    except (OSError, ValueError):
        return killed


_SERVER: ForkServer | None = None
_LOCK = threading.Lock()


def _server() -> ForkServer | None:
    """The fork server of this process (started on first use, restarted if it ended); None where the platform
    cannot run one."""
    global _SERVER
    with _LOCK:
        if _SERVER is None or not _SERVER.alive():
            if not hasattr(os, "fork") or not hasattr(socket, "send_fds"):
                return None
            try:
                _SERVER = ForkServer()
            except OSError:
                return None
            atexit.register(_SERVER.close)
        return _SERVER


def run_verdicts(path: Path, names: list[str], timeout: int, key: bytes) -> tuple[int, bytes, bytes]:
    """(exit status, what the verdicts process wrote on its result pipe, its stderr), for the notebook at path."""
    server = _server()
    if server is not None:
        try:
            return server.run(path, names, timeout, key)
        except ServerGone:  # it ended since it was started: this notebook gets a new interpreter
            pass
    return spawn_verdicts(path, names, timeout, key)


# ---------------------------------------------------------------------------------------- the server's side
def _verdicts_process(request: dict, fds: list[int]) -> None:
    """In the forked verdicts process: its four descriptors in place, every other one closed, then
    verdicts.main. Never returns."""
    status, exit_now, write = 1, _EXIT, os.write  # bound before any student code runs, in this frame alone
    try:
        key_read, result_write, error_write, _ = (fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in fds)
        null = fcntl.fcntl(os.open(os.devnull, os.O_WRONLY), fcntl.F_DUPFD, 10)  # none of them on 0 to 3 yet
        for target, fd in ((0, key_read), (1, null), (2, error_write), (3, result_write)):
            os.dup2(fd, target)
        os.closerange(4, os.sysconf("SC_OPEN_MAX") if hasattr(os, "sysconf") else 4096)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        import random

        import numpy

        random.seed()  # a new interpreter's random state, not the server's
        numpy.random.seed()
        from course_tools import verdicts

        sys.argv = [verdicts.__file__, *request["argv"]]
        verdicts.main(request["argv"])  # it ends the process itself; if it returns, as sys.exit(main()) would:
        status = 0
    except SystemExit:  # argparse refused the command line (nothing of an answer's reads an exception here)
        status = 2
    except BaseException:  # noqa: BLE001 - no traceback: printing one would call code an answer can replace
        write(2, b"the verdicts process ended with an exception\n")
    finally:
        exit_now(status)


def _waiter(request: dict, fds: list[int]) -> None:
    """In the forked waiter: fork the verdicts process, report its pid, then its exit status. Never returns."""
    exit_now = _EXIT
    try:
        pid = os.fork()
        if pid == 0:
            _verdicts_process(request, fds)
        reply = socket.socket(fileno=fds[3])
        for fd in fds[:3]:
            os.close(fd)
        reply.sendall(str(pid).encode())
        _, status = os.waitpid(pid, 0)
        reply.sendall(str(os.waitstatus_to_exitcode(status)).encode())
    finally:
        exit_now(0)


def _reap(block: bool) -> None:
    """Wait for the waiters that ended (block: for all of them), so that their CPU time, and their verdicts
    processes', is counted as this server's children's, as `time make test` reports it."""
    while True:
        try:
            pid, _ = os.waitpid(-1, 0 if block else os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def serve(fd: int) -> None:
    """Import the checking code, then fork a waiter for each request on the socket fd, until it closes."""
    import gc

    from course_tools import sandbox

    sandbox._import_everything()
    import torch._dynamo  # noqa: F401 - what torch imports when a check first builds an optimizer: 0.9 s, once here

    gc.collect()
    gc.freeze()  # what is imported now stays shared with the forks, not copied by their collections
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the grader's Ctrl-C is the grader's to handle
    server = socket.socket(fileno=fd)
    while True:
        _reap(block=False)
        message, fds, _, _ = socket.recv_fds(server, MESSAGE_LIMIT, PIPES)
        if not message:
            _reap(block=True)
            return
        try:
            request = json.loads(message) if len(fds) == PIPES else None
        except ValueError:
            request = None
        if request is not None:
            sys.stderr.flush()
            if os.fork() == 0:
                server.close()
                _waiter(request, fds)
        for received in fds:
            os.close(received)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m course_tools.forkserver",
                                     description="The grader's fork server for its verdicts processes.")
    parser.add_argument("--fd", type=int, required=True, help="the file descriptor of the grader's socket")
    serve(parser.parse_args(argv).fd)
    return 0


if __name__ == "__main__":
    sys.exit(main())
