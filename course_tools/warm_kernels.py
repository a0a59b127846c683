"""Kernels forked from a warm process: the same IPython kernels, started for a tenth of the CPU time.

A new IPython kernel costs about 2 s of CPU before its first cell has done anything: starting Python and
ipykernel, then that cell's imports of torch, numpy and matplotlib. `make test` starts about a hundred of them.
This module is a jupyter_client *kernel provisioner* (jupyter_client's documented way to start kernels
differently), which the Makefile names for its test runs, and only for them:

    JUPYTER_DEFAULT_PROVISIONER_NAME=tfs-warm-kernels

The first kernel that a process starts this way also starts its *warm server*,
``python -m course_tools.warm_kernels``, which imports those libraries (none of the course's own code) and
waits. Every kernel is then a fork of it, made into what ``python -m ipykernel_launcher -f CONNECTION_FILE``
would be, in everything a notebook of the course can see (tests/test_warm_kernels.py compares them): its own
session, the requested working folder and environment, stdin (a pipe), stdout and stderr and no other
descriptor, fresh random states (random, numpy, torch), ``sys.argv`` and ``sys.path`` as the launcher leaves
them, the inline matplotlib backend, and what the imports computed from the working folder computed again in
its own. What differs: the libraries are imported already (so their warning filters come before the kernel's
own in the list, none matching another's warnings), the process's command line is the server's, and the hash
seed of str is the server's, one per test run rather than one per kernel.

The server forks a *waiter* for each kernel, which reports the kernel's pid once the kernel is in its own
session and, when it ends, its exit status. A kernel whose manager goes away ends as any kernel does when its
parent does (ipykernel polls its parent: the waiter, which ends with the manager). The server runs no code of a
notebook: what a kernel does dies with it.

The usual start, a new interpreter, is kept wherever a fork could differ: another kernel than ipykernel,
another Python, an environment other than the server's (what the imports read, such as OMP_NUM_THREADS) or
with a relative PYTHONPATH, a working folder that does not exist or holds a ``matplotlibrc``, output piped
back, a kernel meant to outlive its manager, a platform without fork, or a server that did not answer.
`make lab` starts kernels the usual way, and so does the grader unless told otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import contextlib
import gc
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import weakref
from pathlib import Path
from typing import Any

from jupyter_client.connect import KernelConnectionInfo
from jupyter_client.provisioning import LocalProvisioner

NAME = "tfs-warm-kernels"  # the entry point (pyproject.toml) that JUPYTER_DEFAULT_PROVISIONER_NAME names
PIPES = 4  # the kernel's stdin, stdout and stderr, and the request's own socket
MESSAGE_LIMIT = 1 << 20
STARTUP_SECONDS, FORK_SECONDS = 300, 60  # the longest wait for the server's imports, and for a fork
VOLATILE = ("JPY_", "PYTEST_CURRENT_TEST")  # set anew for each kernel (jupyter_client) or test (pytest)
_EXIT = os._exit


def _ours(env: dict[str, str]) -> dict[str, str]:
    """The environment that the server's imports may read: without what changes from one kernel to the next."""
    return {key: value for key, value in env.items() if not key.startswith(VOLATILE)}


# ------------------------------------------------------------------------------------ the manager's side
class ForkedKernel:
    """A kernel forked by the warm server, with what jupyter_client uses of a subprocess.Popen."""

    stdout = stderr = None

    def __init__(self, pid: int, reply: socket.socket, stdin: Any) -> None:
        self.pid, self.returncode, self.stdin, self._reply = pid, None, stdin, reply
        _LIVE.add(self)

    def poll(self) -> int | None:
        return self.wait(0) if self.returncode is None else self.returncode

    def wait(self, timeout: float | None = None) -> int | None:
        """Its exit status, once its waiter reported it; within timeout seconds, or subprocess.TimeoutExpired
        (poll: None at once)."""
        if self.returncode is None:
            readable = select.poll()
            readable.register(self._reply, select.POLLIN)
            if not readable.poll(None if timeout is None else timeout * 1000):
                if timeout == 0:
                    return None
                raise subprocess.TimeoutExpired(f"kernel {self.pid}", timeout)
            try:
                data = self._reply.recv(64)
            except OSError:
                data = b""
            self.returncode = int(data) if data else -signal.SIGKILL  # its waiter ended without saying
            self.close()
        return self.returncode

    def close(self) -> None:
        """Let go of it: its waiter ends, and with it the kernel, if it still runs (as when its manager ends)."""
        self._reply.close()
        _LIVE.discard(self)

    def send_signal(self, signum: int) -> None:
        if self.poll() is None:  # not yet reaped by its waiter, so the pid is still the kernel's
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signum)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)


class WarmServer:
    """This process's handle on its warm server; safe to use from several threads."""

    def __init__(self, env: dict[str, str]) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "course_tools.warm_kernels", "--fd", str(theirs.fileno())], cwd="/",
                env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                pass_fds=(theirs.fileno(),), start_new_session=True)
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        self.socket, self.env, self.lock = ours, env, threading.Lock()
        ours.settimeout(STARTUP_SECONDS)  # its imports take seconds, minutes on a very busy machine
        try:
            ready = ours.recv(64) == b"ready"
        except OSError:
            ready = False
        ours.settimeout(None)
        if not ready:
            self.close(now=True)
            raise OSError("the warm server did not start")

    def close(self, now: bool = False) -> None:
        self.socket.close()  # the server reads the end of its socket, and exits
        if now:
            self.process.kill()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def fork(self, cmd: list[str], cwd: str, env: dict[str, str], stdio: list[int]) -> ForkedKernel | None:
        """A kernel for cmd (python -m ipykernel_launcher ...), or None if the server is gone."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        stdin_read, stdin_write = os.pipe()
        request = json.dumps({"argv": cmd[3:], "cwd": cwd, "env": env}).encode()
        try:
            with self.lock:
                socket.send_fds(self.socket, [request], [stdin_read, *stdio, theirs.fileno()])
            ours.settimeout(FORK_SECONDS)
            pid = int(ours.recv(64) or b"0")
            ours.settimeout(None)
        except (OSError, ValueError):
            pid = 0
            self.close(now=True)  # a server that does not answer forks nothing more: a new one takes its place
        finally:
            os.close(stdin_read)
            theirs.close()
        if not pid:
            ours.close()
            os.close(stdin_write)
            return None
        return ForkedKernel(pid, ours, os.fdopen(stdin_write, "wb"))


_SERVER: WarmServer | None = None
_LOCK = threading.Lock()
_LIVE: weakref.WeakSet[ForkedKernel] = weakref.WeakSet()  # the kernels not known to have ended


def _server(env: dict[str, str]) -> WarmServer | None:
    """This process's warm server (started on first use, again if it ended); None if it was started for another
    environment than env."""
    global _SERVER
    with _LOCK:
        if _SERVER is None or _SERVER.process.poll() is not None:
            if _SERVER is not None:
                _SERVER.socket.close()
            try:
                _SERVER = WarmServer(env)
            except OSError:
                return None
        return _SERVER if _SERVER.env == env else None


@atexit.register
def _close() -> None:
    for kernel in list(_LIVE):  # still running as this process ends: they end with it, as any kernel does
        kernel.close()
    if _SERVER is not None:
        _SERVER.close()


def _stdio(kwargs: dict[str, Any], probe: bool = False) -> list[int] | None:
    """The descriptors for the kernel's stdout and stderr, as Popen would give them (DEVNULL: opened here, for the
    caller to close); None for a pipe back, which only Popen gives. probe: opens nothing."""
    fds = []
    for name, default in (("stdout", 1), ("stderr", 2)):
        given = kwargs.get(name)
        if given is None:
            fds.append(default)
        elif given == subprocess.DEVNULL:
            fds.append(-1 if probe else os.open(os.devnull, os.O_WRONLY))
        elif isinstance(given, int) and given >= 0:
            fds.append(given)
        elif hasattr(given, "fileno"):
            fds.append(given.fileno())
        else:
            return None
    return fds


def exact(cmd: list[str], kwargs: dict[str, Any]) -> bool:
    """Whether a fork of the server would be exactly the kernel that Popen(cmd, **kwargs) starts (module docstring);
    the environment is compared when the server is asked for (_server)."""
    env = kwargs.get("env") or os.environ
    python = shutil.which(cmd[0], path=env.get("PATH")) if cmd else None
    return (len(cmd) >= 3 and cmd[1:3] == ["-m", "ipykernel_launcher"] and python is not None
            and os.path.abspath(python) == os.path.abspath(sys.executable)
            and not kwargs.get("independent") and kwargs.get("stdin") is None
            and not set(kwargs) - {"env", "cwd", "stdout", "stderr", "independent", "stdin"}
            and Path(str(kwargs.get("cwd") or os.getcwd())).is_dir()
            and not Path(str(kwargs.get("cwd") or os.getcwd()), "matplotlibrc").exists()
            and all(os.path.isabs(entry) for entry in env.get("PYTHONPATH", "").split(os.pathsep) if entry)
            and hasattr(os, "fork") and hasattr(socket, "send_fds") and _stdio(kwargs, probe=True) is not None)


def fork_kernel(cmd: list[str], kwargs: dict[str, Any]) -> ForkedKernel | None:
    """The kernel forked by the warm server, or None where only a new interpreter is exact (module docstring)."""
    if not exact(cmd, kwargs):
        return None
    env = dict(kwargs.get("env") or os.environ)
    server = _server(_ours(env))
    if server is None:
        return None
    stdio = _stdio(kwargs)
    try:
        return server.fork(cmd, str(kwargs.get("cwd") or os.getcwd()), env, stdio)
    finally:
        for fd, name in zip(stdio, ("stdout", "stderr")):
            if kwargs.get(name) == subprocess.DEVNULL:
                os.close(fd)


class WarmKernelProvisioner(LocalProvisioner):
    """LocalProvisioner, with kernels forked from the warm server where that is exact (module docstring)."""

    async def launch_kernel(self, cmd: list[str], **kwargs: Any) -> KernelConnectionInfo:
        # in a thread: the first call waits for the server's imports, and a server's event loop must not
        kernel = await asyncio.get_running_loop().run_in_executor(None, fork_kernel, cmd, self._scrub_kwargs(kwargs))
        if kernel is None:
            return await super().launch_kernel(cmd, **kwargs)
        self.process, self.pid, self.pgid = kernel, kernel.pid, kernel.pid  # its own session: pgid == pid
        self.cwd = kwargs.get("cwd", Path.cwd())
        return self.connection_info

    async def send_signal(self, signum: int) -> None:
        if isinstance(self.process, ForkedKernel) and self.process.poll() is not None:
            return  # it ended and its waiter reaped it: its group id may belong to another process now
        await super().send_signal(signum)


# ------------------------------------------------------------------------------------ the server's side
def _preload() -> None:
    """What a kernel of this course imports before its first cell has finished; none of the course's code."""
    os.environ.setdefault("MPLBACKEND", "module://matplotlib_inline.backend_inline")  # as ipykernel sets it
    import ipykernel.ipkernel  # noqa: F401
    import ipykernel.kernelapp  # noqa: F401
    import matplotlib.pyplot  # noqa: F401 - not its backend: matplotlib_inline hooks into the shell it is imported in
    import numpy  # noqa: F401
    import torch  # noqa: F401
    import torch._dynamo  # noqa: F401 - what torch imports when an optimizer is first built


def _become_kernel(request: dict, fds: list[int]) -> None:
    """In the forked kernel: what a new `python -m ipykernel_launcher` process would be, before its import of
    ipykernel."""
    for target, fd in enumerate(fds[:3]):
        os.dup2(fd, target)
    os.closerange(3, os.sysconf("SC_OPEN_MAX") if hasattr(os, "sysconf") else 4096)
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGCHLD, signal.SIGPIPE):
        signal.signal(signum, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)  # as Python sets it at start-up
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    os.environ["JPY_PARENT_PID"] = str(os.getppid())  # its waiter: the kernel ends if the waiter does
    import random

    import ipykernel_launcher
    import numpy
    import torch
    from ipykernel.kernelapp import IPKernelApp

    # the one default that ipykernel reads from the environment when imported, and that differs here
    IPKernelApp.parent_handle.default_value = os.getppid()
    if "parent_handle" in getattr(IPKernelApp, "_static_immutable_initial_values", {}):
        IPKernelApp._static_immutable_initial_values["parent_handle"] = os.getppid()

    random.seed()  # a new interpreter's random states, not the server's (CUDA's seeds are fixed, not random)
    numpy.random.seed()
    torch.default_generator.seed()
    _as_imported_here()
    sys.stdout.reconfigure(line_buffering=os.isatty(1))  # as Python sets it for the stdout it starts with
    sys.argv = [ipykernel_launcher.__file__, *request["argv"]]
    if sys.path[0] == "/":  # the server's folder; the launcher removes its own, and IPython puts '' in front
        del sys.path[0]


def _as_imported_here() -> None:
    """The values that the server's imports computed from its working folder ("/"), computed again in the kernel's."""
    here = os.getcwd()
    if "multiprocessing.process" in sys.modules:
        sys.modules["multiprocessing.process"].ORIGINAL_DIR = here
    if "torch._dynamo.config" in sys.modules:
        dynamo = sys.modules["torch._dynamo.config"]
        dynamo.debug_dir_root = dynamo.default_debug_dir_root()
    if "torch._inductor.config" in sys.modules:
        sys.modules["torch._inductor.config"].xpu.cutlass_dir = os.path.realpath(
            os.environ.get("TORCHINDUCTOR_CUTLASS_DIR", ""))


def _waiter(fds: list[int]) -> int:
    """In the forked waiter: fork the kernel (0 there), report its pid, then its exit status, then end."""
    settled_read, settled_write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(settled_read)
        os.setsid()  # its own session and signals before its pid is known: an interrupt is never lost
        signal.signal(signal.SIGINT, signal.default_int_handler)
        os.close(settled_write)
        return 0
    try:
        os.close(settled_write)
        os.read(settled_read, 1)  # the kernel closed its end
        os.close(settled_read)
        reply = socket.socket(fileno=fds[3])
        for fd in fds[:3]:
            os.close(fd)
        reply.sendall(str(pid).encode())
        try:
            ended = os.pidfd_open(pid)
        except (AttributeError, OSError):  # no pidfd: its status is awaited, without watching the manager
            ended = None
        while ended is not None:
            ready, _, _ = select.select([ended, reply], [], [])
            if ended in ready:
                break
            if not reply.recv(64, socket.MSG_PEEK):  # the manager is gone: so is the waiter, and the kernel
                _EXIT(0)  # with it (its parent changed)
        _, status = os.waitpid(pid, 0)
        reply.sendall(str(os.waitstatus_to_exitcode(status)).encode())
    finally:
        _EXIT(0)


def _reap_waiters(seconds: float) -> None:
    """Wait up to seconds for the waiters still running, so that their CPU time, and their kernels', is counted as
    this server's children's (as `time make test` reports it)."""
    deadline = time.monotonic() + seconds
    with contextlib.suppress(ChildProcessError):
        while time.monotonic() < deadline:
            if not os.waitpid(-1, os.WNOHANG)[0]:
                time.sleep(0.05)


def serve(fd: int) -> tuple[dict, list[int]] | None:
    """Import, then fork a waiter for each request on the socket fd until it closes (None); in a forked kernel,
    return its request and descriptors."""
    _preload()
    gc.collect()
    gc.freeze()  # what is imported now stays shared with the forks, not copied by their collections
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the manager's Ctrl-C is the manager's to handle
    server = socket.socket(fileno=fd)
    server.sendall(b"ready")
    while True:
        with contextlib.suppress(ChildProcessError):
            while os.waitpid(-1, os.WNOHANG)[0]:  # the waiters that ended
                pass
        message, fds, _, _ = socket.recv_fds(server, MESSAGE_LIMIT, PIPES)
        if not message:
            _reap_waiters(seconds=5)
            return None
        try:
            request = json.loads(message) if len(fds) == PIPES else None
        except ValueError:
            request = None
        if request is not None and os.fork() == 0:
            server.close()
            if _waiter(fds) == 0:
                _become_kernel(request, fds)
                return request, fds
        for received in fds:
            os.close(received)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m course_tools.warm_kernels",
                                     description="The warm server that kernels are forked from (make test).")
    parser.add_argument("--fd", type=int, required=True, help="the file descriptor of the manager's socket")
    if serve(parser.parse_args(argv).fd) is None:
        return 0
    from ipykernel import kernelapp  # already imported: as ipykernel_launcher runs it

    kernelapp.launch_new_instance()
    return 0


if __name__ == "__main__":
    sys.exit(main())
