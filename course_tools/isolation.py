"""Where a submission runs while it is graded: a private copy in a fresh folder, and, on Linux with bubblewrap
(Debian package ``bubblewrap``), a sandbox around each of its processes (its kernel, its verdicts).

In the sandbox the whole file system is read-only but the workspace, /tmp is empty (but for the course and its
Python, when they live there), there is no network, no other process is visible (where allowed), and everything
ends with the grader. Without bwrap, or with ``TFS_GRADE_ISOLATION=off`` (``tfs-grade --no-isolation``), submissions
run from private copies, not isolated.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
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


def under_sandbox_root() -> list[str]:
    """What the sandbox's empty /tmp would hide and a submission needs: this Python's environment and base
    installation, and the course's checkout (a clone under /tmp, as CI may make), each bound back read-only."""
    course = Path(__file__).resolve().parents[1]
    needed = {Path(os.path.realpath(path)) for path in (sys.prefix, sys.base_prefix, sys.executable)} | {course}
    root = SANDBOX_ROOT.resolve()
    return sorted(str(path) for path in needed if path.is_relative_to(root) and path != root)


@functools.lru_cache(maxsize=None)
def bwrap_options() -> tuple[str, ...] | None:
    """bwrap and the options of every sandbox, when bwrap works here (tried once); None otherwise."""
    bwrap = shutil.which("bwrap") if sys.platform.startswith("linux") else None
    if bwrap is None or not SANDBOX_ROOT.is_dir():
        return None
    base = (bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", str(SANDBOX_ROOT),
            *[option for path in under_sandbox_root() for option in ("--ro-bind", path, path)],
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
    """This Python, in isolated mode (no user site, no PYTHON* variables, no current folder on the path), no .pyc,
    in UTF-8 mode (-X utf8: open() and its standard streams in UTF-8, whatever the grader's locale). -I ignores
    PYTHONUTF8 and PYTHONIOENCODING, so the option is what makes a kernel or a verdicts process read and print
    Vietnamese under a Latin-1 locale or a Windows code page, as it does on the student's machine."""
    return [sys.executable, "-I", "-B", "-X", "utf8"]


class Workspace:
    """A fresh temporary folder holding a private copy (self.notebook) of the submission at notebook (its bytes: data,
    when already read), the only folder its code can write to when it runs sandboxed."""

    def __init__(self, notebook: Path, data: bytes | None = None, isolate: bool = True, siblings: bool = True):
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
        for other in sorted(source.parent.glob("*.ipynb")):
            with contextlib.suppress(OSError):  # unreadable: missing here, as it would be in the student's folder
                if other.name != source.name and other.is_file():
                    shutil.copyfile(other, self.work / other.name)

    def _copy_caches(self) -> None:
        """Matplotlib's font list (else each kernel rebuilds it) and the trained checkpoints of notebook 06, copied:
        a submission may write its own, never the course's."""
        import matplotlib

        from helpers.checkpoints import cache_dir

        for folder, pattern, into in ((Path(matplotlib.get_cachedir()), "fontlist-*.json", "matplotlib"),
                                      (cache_dir(), "*.pt", "cache")):
            for found in folder.glob(pattern) if folder.is_dir() else ():
                if found.is_file() and found.stat().st_size <= CHECKPOINT_BYTES:
                    shutil.copyfile(found, self.root / into / found.name)

    def environment(self, **extra: str) -> dict[str, str]:
        """The environment of a process of this submission: the grader's with its own temporary folder and caches,
        and Python's UTF-8 mode (PYTHONUTF8, and PYTHONIOENCODING, which would win over it): for a kernel whose
        Python is not interpreter(), which ignores them and sets UTF-8 mode with -X utf8."""
        env = dict(os.environ)
        for name in ("PYTHONPATH", "PYTHONSTARTUP"):
            env.pop(name, None)
        env.update(TMPDIR=str(self.root / "tmp"), TFS_CACHE_DIR=str(self.root / "cache"),
                   MPLCONFIGDIR=str(self.root / "matplotlib"), IPYTHONDIR=str(self.root / "ipython"),
                   JUPYTER_RUNTIME_DIR=str(self.root / "runtime"), PYTHONDONTWRITEBYTECODE="1", PYTHONUTF8="1",
                   PYTHONIOENCODING="utf-8", **extra)
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

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> "Workspace":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
