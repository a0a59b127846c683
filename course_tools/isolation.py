"""Where a submission runs while it is graded: a private copy in a fresh folder, and, on Linux with
bubblewrap (``/usr/bin/bwrap``, the Debian package ``bubblewrap``), a sandbox around each process.

    with Workspace(notebook) as room:      a fresh temporary folder, private to this one submission
        room.notebook                      the private copy of the notebook (its sibling *.ipynb beside it)
        room.sha256                        the SHA-256 of the bytes graded
        room.command(argv)                 argv, to run inside the sandbox (argv itself where there is none)
        room.environment()                 the environment for it: its own TMPDIR, caches, no .pyc written

Both the kernel that executes the notebook and the process that computes the verdicts run this way, each
in a workspace of its own. In the sandbox (``bwrap``) the whole file system is read-only (the course, the
environment, the home folder, the other submissions: ``--ro-bind / /``), /tmp is an empty folder of its own,
and only the workspace is writable; there is no network (``--unshare-net``: the kernel talks to the grader
over Unix sockets in the workspace), no other process is visible (``--unshare-pid`` where the system allows
it), and everything in it ends with the grader (``--die-with-parent``). So nothing one submission writes
reaches another submission, the course, its ``__pycache__`` or the environment.

Without bwrap (macOS, Windows, a Linux without it) submissions still run from private copies, but not
isolated: the grader says so once per run, on stderr. ``TFS_GRADE_ISOLATION=off`` (or ``tfs-grade
--no-isolation``) turns the sandbox off on purpose.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ENVIRONMENT_SWITCH = "TFS_GRADE_ISOLATION"  # "off" (or 0, no, false): run without the sandbox
OFF = {"0", "off", "no", "false"}
CHECKPOINT_BYTES = 64 << 20  # a trained checkpoint larger than this is not copied (notebook 06's is about 1 MB)
SANDBOX_ROOT = Path("/tmp")  # an empty tmpfs in each sandbox; the workspaces live here, each bound back alone
# The sandbox's SIGINT is ignored by bwrap itself (an interrupt reaches the kernel, not the wrapper): jupyter_client
# interrupts a kernel by signalling its whole process group, and bwrap would die of it, taking the kernel along.
IGNORE_SIGINT = ["/bin/sh", "-c", 'trap "" INT; exec "$@"', "sh"]
NOT_ISOLATED = ("note: the submissions are not isolated from each other or from this computer (bubblewrap is not "
                "available here): a notebook's code can write wherever you can and use the network. On Linux, "
                "install bubblewrap (sudo apt-get install bubblewrap), or grade in a container.")
TURNED_OFF = (f"note: the submissions are not isolated ({ENVIRONMENT_SWITCH}=off or --no-isolation): a notebook's code "
              "can write wherever you can and use the network.")


def wanted() -> bool:
    """Whether isolation is asked for (it is unless TFS_GRADE_ISOLATION says off)."""
    return os.environ.get(ENVIRONMENT_SWITCH, "").strip().lower() not in OFF


@functools.lru_cache(maxsize=None)
def bwrap_options() -> tuple[str, ...] | None:
    """bwrap and the options of every sandbox, when bwrap works here (tried once); None otherwise."""
    bwrap = shutil.which("bwrap") if sys.platform.startswith("linux") else None
    if bwrap is None or not SANDBOX_ROOT.is_dir():
        return None
    base = (bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", str(SANDBOX_ROOT),
            "--unshare-net", "--unshare-ipc", "--unshare-uts", "--die-with-parent")
    for options in (base + ("--unshare-pid",), base):  # a container may refuse a new PID namespace
        try:
            tried = subprocess.run([*options, "--", sys.executable, "-I", "-c", "pass"], capture_output=True,
                                   timeout=60, check=False)
        except (OSError, subprocess.SubprocessError):
            return None
        if tried.returncode == 0:
            return options
    return None


def sandboxed(isolate: bool = True) -> bool:
    """Whether this run's submissions run in the sandbox."""
    return isolate and wanted() and bwrap_options() is not None


def interpreter() -> list[str]:
    """This Python, in isolated mode (no user site, no PYTHON* variables, no current folder on the path),
    writing no .pyc files."""
    return [sys.executable, "-I", "-B"]


class Workspace:
    """A fresh temporary folder holding a private copy of one submission; the only folder its code can
    write to when it runs sandboxed (see the module's docstring)."""

    def __init__(self, notebook: Path, data: bytes | None = None, isolate: bool = True, siblings: bool = True):
        """notebook: the submission's path; data: its bytes, when already read (what is hashed is what is graded)."""
        source = Path(notebook)
        data = source.read_bytes() if data is None else data
        self.sha256 = hashlib.sha256(data).hexdigest()
        self.isolated = sandboxed(isolate)
        parent = SANDBOX_ROOT if self.isolated else None
        self.root = Path(tempfile.mkdtemp(prefix="tfs-grade-", dir=parent)).resolve()
        try:
            self.work = self.root / "work"
            for folder in ("work", "tmp", "cache", "ipython", "matplotlib", "runtime"):
                (self.root / folder).mkdir()
            self.notebook = self.work / source.name
            self.notebook.write_bytes(data)
            if siblings:  # notebooks 05 and 06 read the student's earlier notebooks from their own folder
                self._copy_siblings(source)
            self._copy_caches()
        except BaseException:
            self.close()
            raise

    def _copy_siblings(self, source: Path) -> None:
        try:
            others = sorted(p for p in source.parent.glob("*.ipynb") if p.name != source.name)
        except OSError:
            return
        for other in others:
            try:
                if other.is_file():
                    shutil.copyfile(other, self.work / other.name)
            except OSError:  # unreadable: that notebook is missing here, as it would be in the student's folder
                continue

    def _copy_caches(self) -> None:
        """Matplotlib's font list (else each kernel rebuilds it) and the trained checkpoints of notebook 06, copied:
        a submission may write its own, never the course's."""
        import matplotlib

        fonts = Path(matplotlib.get_cachedir())
        for found in fonts.glob("fontlist-*.json") if fonts.is_dir() else ():
            shutil.copyfile(found, self.root / "matplotlib" / found.name)
        from helpers.checkpoints import cache_dir

        checkpoints = cache_dir()
        for found in checkpoints.glob("*.pt") if checkpoints.is_dir() else ():
            if found.is_file() and found.stat().st_size <= CHECKPOINT_BYTES:
                shutil.copyfile(found, self.root / "cache" / found.name)

    def environment(self, base: dict[str, str] | None = None, **extra: str) -> dict[str, str]:
        """The environment of a process of this submission: base (the grader's) with its own temporary folder
        and caches, and no .pyc written (PYTHONDONTWRITEBYTECODE, for the processes that read it)."""
        env = dict(os.environ if base is None else base)
        for name in ("PYTHONPATH", "PYTHONSTARTUP"):
            env.pop(name, None)
        env.update(TMPDIR=str(self.root / "tmp"), TFS_CACHE_DIR=str(self.root / "cache"),
                   MPLCONFIGDIR=str(self.root / "matplotlib"), IPYTHONDIR=str(self.root / "ipython"),
                   JUPYTER_RUNTIME_DIR=str(self.root / "runtime"), PYTHONDONTWRITEBYTECODE="1", **extra)
        return env

    def command(self, argv: list[str]) -> list[str]:
        """argv, run in this workspace's sandbox when there is one (argv unchanged otherwise)."""
        if not self.isolated:
            return list(argv)
        options = bwrap_options()
        assert options is not None
        return [*IGNORE_SIGINT, *options, "--bind", str(self.root), str(self.root), "--chdir", str(self.work),
                "--unsetenv", "JPY_PARENT_PID",  # the grader's pid means nothing in the sandbox's PID namespace
                "--", *argv]

    def describe(self) -> str:
        return shlex.join(self.command(["python"]))

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> "Workspace":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["ENVIRONMENT_SWITCH", "NOT_ISOLATED", "TURNED_OFF", "Workspace", "bwrap_options", "interpreter", "sandboxed",
           "wanted"]
