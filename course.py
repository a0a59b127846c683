"""Transformers from Scratch: set up the course and open it, on Windows, macOS or Linux, with one command.

    python course.py            set up .venv (the first time, and again when requirements.txt or pyproject.toml
                                change), then open notebook 01 in JupyterLab
    python course.py es         the same in an edition (es, pt, vi); also: python course.py --edition es
    python course.py setup      set up .venv only (make setup runs this)
    python course.py test       run the tests: `make test` where make is, else what runs without it (it says which)

On Windows type `py course.py`; on macOS and Linux `python3 course.py` where `python` is not Python 3.11 or newer.
It needs only the standard library: everything else runs in .venv (.venv\\Scripts on Windows, .venv/bin elsewhere).
"""

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

NEEDED = (3, 11)
ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
STAMP = VENV / ".installed"  # what .venv was installed from (install_key); make setup used to leave it empty
LOG = ROOT / ".cache" / "setup.log"  # everything pip and the checks printed during the last installation
INSTALLED_FROM = ("requirements.txt", "pyproject.toml")
NOISE = ("is ignored",)  # pip's notes about the machine's extra package folders; everything else it says is shown
OFFLINE = ("NewConnectionError", "Failed to establish a new connection", "Temporary failure in name resolution",
           "getaddrinfo failed", "Network is unreachable", "No route to host", "ConnectTimeoutError")
NBVAL = ["--nbval-current-env", "--nbval-sanitize-with", "tests/nbval_sanitize.cfg"]  # the Makefile's NBVAL
IMPORTS = ("torch", "numpy", "matplotlib", "nbval", "nbgrader", "helpers", "course_tools")  # checked once installed
NOTEBOOK_01 = "notebooks/01_positional_encoding.ipynb"
WINDOWS = os.name == "nt"


def python_too_old(version=sys.version_info):
    """The one-line error for a Python older than the course needs, or None (runs on any Python 3.6+)."""
    if tuple(version[:2]) >= NEEDED:
        return None
    return (f"error: the course needs Python {NEEDED[0]}.{NEEDED[1]} or newer, this is {version[0]}.{version[1]}: "
            "get it from https://www.python.org/downloads/ (Linux: your package manager), then run this again")


def no_venv_module():
    """The one-line error for a Python without venv and ensurepip (Debian and Ubuntu ship them apart), or None."""
    try:
        import ensurepip  # noqa: F401
        import venv  # noqa: F401
    except ImportError:
        return ("error: this Python has no venv module: on Debian or Ubuntu run `sudo apt install python3-venv` "
                f"(or python{sys.version_info[0]}.{sys.version_info[1]}-venv), then run this again")
    return None


def venv_python(venv=VENV):
    """The environment's Python: Scripts\\python.exe on Windows, bin/python elsewhere."""
    return venv / "Scripts" / "python.exe" if WINDOWS else venv / "bin" / "python"


def install_key(root=ROOT):
    """What an environment is installed from: a hash of requirements.txt and pyproject.toml, and the folder (an
    editable install points at it)."""
    digest = hashlib.sha256(b"".join((root / name).read_bytes() for name in INSTALLED_FROM))
    return f"{digest.hexdigest()[:16]} {root}"


def up_to_date(root=ROOT):
    """Whether root's .venv holds what requirements.txt and pyproject.toml ask for: its stamp holds their key, or is
    the empty one the Makefile left, newer than both files."""
    stamp = root / ".venv" / ".installed"
    if not (venv_python(root / ".venv").exists() and stamp.exists()):
        return False
    text = stamp.read_text(encoding="utf-8").strip()
    if not text:
        return all(stamp.stat().st_mtime >= (root / name).stat().st_mtime for name in INSTALLED_FROM)
    return text == install_key(root)


def course_environment(base=None):
    """The environment every command runs in (as the Makefile exports it): .venv's programs first on PATH, a
    matplotlib cache in .cache, quiet OpenMP and pip, and Python's UTF-8 mode, so files read the same everywhere."""
    env = dict(os.environ if base is None else base)
    env.update(MPLCONFIGDIR=str(ROOT / ".cache" / "matplotlib"), OMP_WAIT_POLICY="PASSIVE", PYTHONUTF8="1",
               PYDEVD_DISABLE_FILE_VALIDATION="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    env["PATH"] = str(venv_python().parent) + os.pathsep + env.get("PATH", "")
    return env


def logged(command, env):
    """Run command in ROOT, its output whole into LOG and, but for pip's noise, on the screen; its exit status."""
    with open(LOG, "a", encoding="utf-8") as log:
        log.write("$ " + subprocess.list2cmdline(command) + "\n")
        log.flush()
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   text=True, encoding="utf-8", errors="replace")
        for line in process.stdout:
            log.write(line)
            if not any(noise in line for noise in NOISE):
                print(line, end="", flush=True)
        return process.wait()


def failed(what):
    """The one-line error for a step of the installation that failed, from what LOG holds."""
    text = LOG.read_text(encoding="utf-8", errors="replace")
    if any(sign in text for sign in OFFLINE):
        return f"error: {what} failed: no internet? pip could not reach the package index; connect, then run this again"
    return f"error: {what} failed: the whole output is in {LOG}"


def install(env):
    """Create .venv if it has no working Python, then install the pinned packages and the course into it (pip's
    output in LOG), check the imports, build matplotlib's font cache and write the stamp; an error or None."""
    LOG.parent.mkdir(parents=True, exist_ok=True)
    Path(env["MPLCONFIGDIR"]).mkdir(parents=True, exist_ok=True)
    LOG.write_text("", encoding="utf-8")
    env = dict(env, PYTHONWARNINGS="ignore:Editable installation")
    python = str(venv_python())
    pip = [python, "-m", "pip", "install", "--quiet"]
    steps = [("upgrading pip", pip + ["--upgrade", "pip"]),
             ("installing requirements.txt", pip + ["-r", "requirements.txt"]),
             ("installing the course (pip install -e .)", pip + ["--no-deps", "-e", "."]),
             ("checking the installed packages", [python, "-c", f"import {', '.join(IMPORTS)}"]),
             ("building matplotlib's font cache", [python, "-c", "import matplotlib.pyplot"])]
    if not (Path(python).exists() and subprocess.run([python, "-c", ""], capture_output=True).returncode == 0):
        problem = no_venv_module()
        if problem:
            return problem
        steps.insert(0, ("creating .venv", [sys.executable, "-m", "venv", *(["--clear"] if VENV.exists() else []),
                                            str(VENV)]))
    print(f"setting up .venv from requirements.txt and pyproject.toml (the whole output: {LOG.relative_to(ROOT)})")
    for what, command in steps:
        print(f"  {what}", flush=True)
        if logged(command, env) != 0:
            return failed(what)
    STAMP.write_text(install_key() + "\n", encoding="utf-8")
    return None


def setup(env):
    """What make setup does: install when needed, then merge the students' JupyterLab settings; an error or None."""
    if not up_to_date():
        problem = install(env)
        if problem:
            return problem
    if subprocess.run([str(venv_python()), "-m", "course_tools.jupyter"], cwd=ROOT, env=env).returncode != 0:
        return "error: could not install the students' JupyterLab settings (python -m course_tools.jupyter)"
    return None


def running_as_root():
    """Whether JupyterLab needs --allow-root: root on POSIX (Windows has no os.geteuid, and no such check)."""
    geteuid = getattr(os, "geteuid", None)
    return geteuid is not None and geteuid() == 0


def lab_command(edition=None):
    """JupyterLab in the repository, at notebook 01 of the English course or of an edition."""
    notebook = f"editions/{edition}/{NOTEBOOK_01}" if edition else NOTEBOOK_01
    root = ["--allow-root"] if running_as_root() else []
    return [str(venv_python()), "-m", "jupyterlab", "--notebook-dir=.", *root, notebook]


def editions():
    """The editions' languages: the folders of editions/ that hold an EDITION file."""
    return sorted(path.parent.name for path in ROOT.glob("editions/*/EDITION"))


def runs_without_make(python):
    """Without make: what make test runs there, one after another: lint, the models notebooks 06 and 07 load, the unit
    tests (the browser and sandbox tests skip themselves, saying why), strict nbval of every solution, lax nbval of
    the English student notebooks (make test's way where Chromium is missing)."""
    runs = [("ruff", [python, "-m", "ruff", "check", "helpers", "course_tools", "tests", "benchmarks",
                     "course.py"]),
            ("checkpoints", [python, "-m", "course_tools.pretrain"]),
            ("unit tests", [python, "-m", "pytest", "tests", "-q", "-rs"]),
            ("strict nbval solutions", [python, "-m", "pytest", *NBVAL, "--nbval", "solutions", "-q"])]
    runs += [(f"strict nbval editions/{language}/solutions",
              [python, "-m", "pytest", *NBVAL, "--nbval", f"editions/{language}/solutions", "-q"])
             for language in editions()]
    return runs + [("lax nbval notebooks", [python, "-m", "pytest", *NBVAL, "--nbval-lax", "notebooks", "-q"])]


def run_tests(env, use_make=True):
    """The README's second command: make test where make is (not on Windows), else runs_without_make; an exit status."""
    if use_make and not WINDOWS and shutil.which("make"):
        print("python course.py test: running `make test`", flush=True)
        return subprocess.run(["make", "test"], cwd=ROOT).returncode
    problem = setup(env)
    if problem:
        return problem
    runs = runs_without_make(str(venv_python()))
    print("python course.py test: without make, one after another: " + ", ".join(n for n, _ in runs))
    failures = []
    for name, command in runs:
        print(f"\n== {name}: {' '.join(command)}", flush=True)
        if subprocess.run(command, cwd=ROOT, env=env).returncode != 0:
            failures.append(name)
    passed = [name for name, _ in runs if name not in failures]
    print(f"\npython course.py test: passed: {', '.join(passed) or 'none'}; failed: {', '.join(failures) or 'none'}")
    return 1 if failures else 0


def parse(argv=None):
    """The command line: [lab | setup | test | versions | LANGUAGE] [--edition LANGUAGE] [--without-make]."""
    parser = argparse.ArgumentParser(prog="python course.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", nargs="?", default="lab", help="lab, setup, test, versions, or an edition: "
                        + ", ".join(editions()))
    parser.add_argument("--edition", help="open this edition's notebook 01 (one of: %s)" % ", ".join(editions()))
    parser.add_argument("--without-make", action="store_true", help="test: run the tests as on Windows, without make")
    args = parser.parse_args(argv)
    if args.command in editions() and args.edition is None:
        args.command, args.edition = "lab", args.command
    if args.command not in ("lab", "setup", "test", "versions"):
        parser.error(f"argument command: no command or edition '{args.command}': say lab, setup, test, versions or "
                     "one of "
                     + ", ".join(editions()))
    if args.edition is not None and args.edition not in editions():
        parser.error(f"argument --edition: there is no edition '{args.edition}': one of " + ", ".join(editions()))
    if args.edition is not None and args.command != "lab":
        parser.error(f"argument --edition: goes with opening the course, not with '{args.command}'")
    return args


def main(argv=None):
    """Check the Python, then do what the command line asks; an exit status, or an error line (exit status 1)."""
    problem = python_too_old()
    if problem:
        return problem
    args = parse(argv)
    env = course_environment()
    if args.command == "test":
        return run_tests(env, use_make=not args.without_make)
    problem = setup(env)
    if problem or args.command == "setup":
        return problem or 0
    if args.command == "versions":  # for a bug report: the environment's versions, the OS, CUDA and MPS
        return subprocess.run([str(venv_python()), "-m", "course_tools.versions"], cwd=ROOT, env=env).returncode
    print("opening JupyterLab: stop it with Ctrl+C", flush=True)
    lab = subprocess.Popen(lab_command(args.edition), cwd=ROOT, env=env)
    while True:
        try:
            return lab.wait()
        except KeyboardInterrupt:  # JupyterLab had it too (one console): it asks, or shuts down; wait for it
            continue


if __name__ == "__main__":
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(encoding="utf-8", errors="replace")
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit("stopped: run the same command again to go on (it installs what is missing)")
