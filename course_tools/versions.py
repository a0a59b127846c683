"""Print the versions that matter to the course, each against its pin, and the system they run on: the OS and
the accelerators torch can use, CUDA and Apple's MPS (console command ``tfs-versions``).

    python -m course_tools.versions           # always exits 0: paste the output into a bug report
    python -m course_tools.versions --check   # exits 1 when an installed version differs from its pin

The pins are the ``name==version`` lines of the repository's requirements.txt, matched the PEP 440 way
(``torch==2.13.0`` accepts ``2.13.0+cpu``). A package without a pin is never a mismatch; a pinned one that
is not installed is. Without torch, or with a torch that fails to import, the CUDA and MPS rows say so: this
command never fails on a broken install, which is what a bug report needs to show.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import importlib.metadata
import platform
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, TextIO

from course_tools.console import utf8_output

REQUIREMENTS = Path(__file__).resolve().parent.parent / "requirements.txt"

# What a bug report needs, in this order; every other pinned package follows, in requirements.txt order.
PACKAGES = ["torch", "numpy", "matplotlib", "jupyterlab", "nbval", "nbgrader", "nbclient", "nbformat", "ruff"]

OK, MISMATCH, NOT_PINNED, NOT_INSTALLED = "ok", "MISMATCH", "not pinned", "not installed"

_PIN = re.compile(r"([A-Za-z0-9][A-Za-z0-9_.\-]*)\s*==\s*([^\s;#]+)")


@dataclass(frozen=True)
class Row:
    name: str
    installed: str | None  # None: not installed
    pinned: str | None  # None: no pin
    note: str = ""

    @property
    def shown(self) -> str:
        """The installed version, or why there is none."""
        return self.installed or ("not importable" if self.name == "course" else NOT_INSTALLED)

    @property
    def status(self) -> str:
        if self.pinned is None:
            return NOT_PINNED
        if self.installed is None:
            return f"{MISMATCH} ({NOT_INSTALLED})"
        return OK if matches(self.installed, self.pinned) else MISMATCH

    @property
    def mismatch(self) -> bool:
        return self.status.startswith(MISMATCH)


def normalise(name: str) -> str:
    """A distribution name the PEP 503 way: Jupyter_Lab and jupyterlab are one package."""
    return re.sub(r"[-_.]+", "-", name).lower()


def matches(installed: str, pinned: str) -> bool:
    """PEP 440 `==`: equal versions, and a pin without a local label (+cpu) accepts any local label."""
    if installed == pinned:
        return True
    try:
        from packaging.version import Version
        have, want = Version(installed), Version(pinned)
    except ImportError:  # packaging is almost always there; without it compare the text
        return "+" not in pinned and installed.split("+")[0] == pinned
    except ValueError:  # packaging.version.InvalidVersion
        return False
    return have == want or ("+" not in pinned and Version(have.public) == want)


def read_pins(requirements: Path = REQUIREMENTS) -> dict[str, str]:
    """name (normalised) -> version of every `name==version` line; {} when the file does not exist."""
    try:
        text = requirements.read_text(encoding="utf-8")
    except OSError:
        return {}
    found = (_PIN.fullmatch(line.split("#")[0].strip()) for line in text.splitlines())
    return {normalise(match.group(1)): match.group(2) for match in found if match}


def installed_version(name: str) -> str | None:
    with contextlib.suppress(importlib.metadata.PackageNotFoundError):
        return importlib.metadata.version(name)
    return None


def course_version() -> tuple[str | None, str]:
    """helpers.__version__, or None and why it cannot be imported."""
    try:
        import helpers
    except Exception as error:  # noqa: BLE001 - a broken install is exactly what this tool must show
        return None, f"import helpers failed: {type(error).__name__}: {error}"
    return getattr(helpers, "__version__", None), "helpers.__version__"


@functools.cache
def provenance() -> str:
    """Which version of the course graded: "course 0.2.0, commit 4e020db" ("+ local changes" when the checkout's
    tracked files differ from that commit; no commit outside a git checkout or without git)."""
    version = course_version()[0] or "unknown version"
    root = REQUIREMENTS.parent
    try:
        git = functools.partial(subprocess.run, cwd=root, capture_output=True, text=True, timeout=20, check=True)
        commit = git(["git", "rev-parse", "--short=12", "HEAD"]).stdout.strip()
        changed = git(["git", "status", "--porcelain", "--untracked-files=no"]).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return f"course {version}"
    return f"course {version}, commit {commit}" + (" + local changes" if changed else "")


def versions(requirements: Path = REQUIREMENTS) -> list[Row]:
    """Python, the course's packages and every pinned package, then the course itself, each with its pin."""
    pins = read_pins(requirements)
    rows = [Row("Python", platform.python_version(), pins.get("python"), sys.executable)]
    names = PACKAGES + [name for name in pins if name not in {normalise(p) for p in PACKAGES} | {"python"}]
    rows += [Row(name, installed_version(name), pins.get(normalise(name))) for name in names]
    version, note = course_version()
    rows.append(Row("course", version, pins.get("course"), note))
    return rows


def system() -> list[tuple[str, str]]:
    """(what, value) of the machine: the OS (platform.platform() and the machine, such as x86_64 or arm64), then
    whether torch can use CUDA and Apple's MPS. Never raises."""
    machine = platform.machine() or "unknown"
    return [("OS", f"{platform.platform()} (machine {machine})"), *accelerators()]


def accelerators() -> list[tuple[str, str]]:
    """("CUDA", ...) and ("MPS", ...): available or not, as torch says; why it cannot tell when torch is missing
    or broken (any error in importing it or asking it)."""
    try:
        import torch
    except Exception as error:  # noqa: BLE001 - a broken torch is what a bug report must show, not a crash
        why = ("torch is not installed" if isinstance(error, ModuleNotFoundError) and error.name == "torch"
               else f"import torch failed: {type(error).__name__}: {error}")
        return [("CUDA", f"unknown ({why})"), ("MPS", f"unknown ({why})")]
    return [("CUDA", asked(lambda: cuda(torch))), ("MPS", asked(lambda: mps(torch)))]


def asked(question: Callable[[], str]) -> str:
    """question's answer, or "unknown" and the error it raised."""
    try:
        return question()
    except Exception as error:  # noqa: BLE001 - a torch that breaks when asked: say how
        return f"unknown (torch failed: {type(error).__name__}: {error})"


def cuda(torch: Any) -> str:
    """Whether torch can use CUDA: "available: <device> (<n> devices), CUDA <version>", else "not available"
    and whether this torch was built with CUDA at all."""
    built = torch.version.cuda
    if not torch.cuda.is_available():
        return "not available" + (f" (torch built for CUDA {built}, no usable GPU)" if built
                                  else f" (torch {torch.__version__} is built without CUDA)")
    count = torch.cuda.device_count()
    devices = f" ({count} devices)" if count > 1 else ""
    return f"available: {torch.cuda.get_device_name(0)}{devices}, CUDA {built}"


def mps(torch: Any) -> str:
    """Whether Apple's Metal (MPS) is available to torch."""
    return "available" if torch.backends.mps.is_available() else "not available"


def format_table(rows: list[Row], requirements: Path = REQUIREMENTS,
                 machine: list[tuple[str, str]] | None = None) -> str:
    """The versions table, after the machine's rows (system()) when given, and a blank line."""
    source = f"pins from {requirements}" if requirements.exists() else f"no pins: {requirements} not found"
    name_width = max(len(r.name) for r in rows)
    have_width = max(len(r.shown) for r in rows)
    pin_width = max(len("pinned"), *(len(r.pinned or "-") for r in rows))
    lines = [f"Transformers from Scratch: versions ({source})"]
    if machine:
        width = max(len(what) for what, _ in machine)
        lines += [f"  {what:<{width}}  {value}" for what, value in machine] + [""]
    lines += [f"  {'package':<{name_width}}  {'installed':<{have_width}}  {'pinned':<{pin_width}}  status"]
    for r in rows:
        note = f"  ({r.note})" if r.note else ""
        lines.append(f"  {r.name:<{name_width}}  {r.shown:<{have_width}}  "
                     f"{r.pinned or '-':<{pin_width}}  {r.status}{note}")
    bad = [r.name for r in rows if r.mismatch]
    lines.append(f"{len(bad)} mismatch(es): {', '.join(bad)}" if bad else "Every pinned package matches its pin.")
    return "\n".join(lines)


def main(argv: list[str] | None = None, stdout: TextIO | None = None) -> int:
    utf8_output()
    parser = argparse.ArgumentParser(prog="tfs-versions",
                                     description="Print the versions the course depends on, against requirements.txt.")
    parser.add_argument("--check", action="store_true", help="exit 1 when an installed version differs from its pin")
    parser.add_argument("--requirements", type=Path, default=REQUIREMENTS, metavar="FILE",
                        help=f"the pins to compare with (default {REQUIREMENTS})")
    args = parser.parse_args(argv)
    rows = versions(args.requirements)
    print(format_table(rows, args.requirements, system()), file=stdout or sys.stdout)
    return 1 if args.check and any(r.mismatch for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
