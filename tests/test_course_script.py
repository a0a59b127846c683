"""course.py, the one command that sets up and opens the course on Windows, macOS and Linux: its pieces in process
(paths per system, the stamp, the command line, the errors, the test runs without make), cheap; and, for
`make test-setup` only (TFS_TEST_SETUP=1; one of make test's runs), `python course.py setup` on a fresh copy of the
repository, from nothing, then notebook 01 executed in the .venv it made."""

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import ROOT

spec = importlib.util.spec_from_file_location("course", ROOT / "course.py")
course = importlib.util.module_from_spec(spec)
spec.loader.exec_module(course)


@pytest.mark.parametrize("windows, tail", [(True, ("Scripts", "python.exe")), (False, ("bin", "python"))])
def test_the_environment_python_is_where_venv_puts_it_on_each_system(monkeypatch, windows, tail):
    monkeypatch.setattr(course, "WINDOWS", windows)
    assert course.venv_python(Path("somewhere")).parts == ("somewhere", *tail)
    env = course.course_environment({"PATH": "elsewhere"})
    assert env["PATH"] == str(course.VENV.joinpath(*tail[:1])) + os.pathsep + "elsewhere"


def test_the_environment_is_the_makefiles_and_in_utf8_mode():
    env = course.course_environment({"PATH": "x", "HOME": "h"})
    assert env["MPLCONFIGDIR"] == str(ROOT / ".cache" / "matplotlib") and env["PYTHONUTF8"] == "1"
    assert env["OMP_WAIT_POLICY"] == "PASSIVE" and env["PIP_DISABLE_PIP_VERSION_CHECK"] == "1" and env["HOME"] == "h"
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert re.search(r"^NBVAL := (.*)$", makefile, re.M).group(1).split() == course.NBVAL


def test_jupyterlab_gets_allow_root_only_as_root_on_posix(monkeypatch):
    monkeypatch.setattr(course, "WINDOWS", False)
    monkeypatch.setattr(os, "geteuid", lambda: 0, raising=False)
    assert course.lab_command()[3:] == ["--notebook-dir=.", "--allow-root", "notebooks/01_positional_encoding.ipynb"]
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert course.lab_command("es")[2:] == ["jupyterlab", "--notebook-dir=.",
                                            "editions/es/notebooks/01_positional_encoding.ipynb"]
    monkeypatch.delattr(os, "geteuid")  # as on Windows
    assert not course.running_as_root() and "--allow-root" not in course.lab_command()


def _fake_checkout(root: Path, stamp: str | None) -> Path:
    (root / ".venv" / "bin").mkdir(parents=True)
    (root / ".venv" / "bin" / "python").write_text("", encoding="utf-8")
    (root / "requirements.txt").write_text("torch==2.13.0\n", encoding="utf-8")
    (root / "pyproject.toml").write_text("[project]\n", encoding="utf-8")
    if stamp is not None:
        (root / ".venv" / ".installed").write_text(stamp, encoding="utf-8")
    return root


def test_the_stamp_says_whether_requirements_or_pyproject_changed(tmp_path, monkeypatch):
    monkeypatch.setattr(course, "WINDOWS", False)
    root = _fake_checkout(tmp_path, None)
    assert not course.up_to_date(root), "never installed"
    (root / ".venv" / ".installed").write_text(course.install_key(root) + "\n", encoding="utf-8")
    assert course.up_to_date(root) and str(root) in course.install_key(root)
    (root / "requirements.txt").write_text("torch==2.13.0\nnumpy==2.4.6\n", encoding="utf-8")
    assert not course.up_to_date(root)
    (root / ".venv" / ".installed").write_text(course.install_key(root), encoding="utf-8")
    (root / "pyproject.toml").write_text("[project]\nname = 'x'\n", encoding="utf-8")
    assert not course.up_to_date(root)
    (root / ".venv" / ".installed").write_text(course.install_key(root), encoding="utf-8")
    (root / ".venv" / "bin" / "python").unlink()
    assert not course.up_to_date(root), "an environment without its Python"


def test_an_empty_stamp_from_the_makefile_counts_while_newer_than_both_files(tmp_path, monkeypatch):
    monkeypatch.setattr(course, "WINDOWS", False)
    root = _fake_checkout(tmp_path, "")
    stamp = root / ".venv" / ".installed"
    os.utime(stamp, (time.time() + 10, time.time() + 10))
    assert course.up_to_date(root)
    os.utime(stamp, (time.time() - 10, time.time() - 10))
    assert not course.up_to_date(root)


@pytest.mark.parametrize("argv, command, edition", [
    ([], "lab", None), (["lab"], "lab", None), (["setup"], "setup", None), (["test"], "test", None),
    (["versions"], "versions", None),
    (["es"], "lab", "es"), (["--edition", "vi"], "lab", "vi"), (["lab", "--edition", "pt"], "lab", "pt")])
def test_the_command_line(argv, command, edition):
    args = course.parse(argv)
    assert (args.command, args.edition) == (command, edition)


@pytest.mark.parametrize("argv, message", [
    (["install"],
     "argument command: no command or edition 'install': say lab, setup, test, versions or one of es, pt, vi"),
    (["--edition", "fr"], "argument --edition: there is no edition 'fr': one of es, pt, vi"),
    (["setup", "--edition", "es"], "argument --edition: goes with opening the course, not with 'setup'")])
def test_a_wrong_command_line_says_which_argument(argv, message, capsys):
    with pytest.raises(SystemExit) as exit:
        course.parse(argv)
    assert exit.value.code == 2 and message in capsys.readouterr().err


def test_python_older_than_311_gets_one_line_saying_what_and_where():
    assert course.python_too_old((3, 11, 0)) is None and course.python_too_old((3, 14, 1)) is None
    message = course.python_too_old((3, 10, 13))
    assert message.startswith("error: the course needs Python 3.11 or newer, this is 3.10")
    assert "https://www.python.org/downloads/" in message and "\n" not in message


@pytest.mark.parametrize("version", ["3.6", "3.10"])
def test_an_older_python_running_the_script_gets_that_line(version):
    """The script reaches its check on any Python from 3.6 (pyenv's, where there is one)."""
    found = sorted(Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")).glob(f"versions/{version}.*/bin/python"))
    if not found:
        pytest.skip(f"no Python {version} here")
    done = subprocess.run([str(found[-1]), str(ROOT / "course.py"), "setup"], capture_output=True, text=True,
                          encoding="utf-8", timeout=60)
    assert done.returncode == 1 and done.stderr.startswith("error: the course needs Python 3.11 or newer")


def test_a_python_without_venv_is_told_the_apt_command(monkeypatch):
    assert course.no_venv_module() is None
    monkeypatch.setitem(sys.modules, "ensurepip", None)  # as on Debian without python3-venv
    assert "sudo apt install python3-venv" in course.no_venv_module()


def test_a_failed_installation_points_at_the_log_or_says_no_internet(tmp_path, monkeypatch):
    monkeypatch.setattr(course, "LOG", tmp_path / "setup.log")
    course.LOG.write_text("ERROR: Could not build wheels for numpy\n", encoding="utf-8")
    assert course.failed("installing requirements.txt") == (
        f"error: installing requirements.txt failed: the whole output is in {course.LOG}")
    course.LOG.write_text("WARNING: Retrying ... NewConnectionError('Failed to establish a new connection')\n",
                          encoding="utf-8")
    assert "no internet?" in course.failed("upgrading pip")


def test_a_step_shows_all_but_pips_noise_and_logs_everything_as_utf8(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(course, "LOG", tmp_path / "setup.log")
    # written with escapes: a command line in a Latin-1 locale (make test's) cannot hold Vietnamese letters
    script = "print('DEPRECATION: /opt/x is ignored'); print('Ti\\u1ebfng Vi\\u1ec7t \\u2713'); raise SystemExit(3)"
    assert course.logged([sys.executable, "-c", script], dict(os.environ, PYTHONUTF8="1")) == 3
    assert capsys.readouterr().out == "Tiếng Việt ✓\n"
    assert "is ignored" in course.LOG.read_text(encoding="utf-8") and "Tiếng Việt ✓" in course.LOG.read_text(
        encoding="utf-8")


def test_course_test_runs_make_test_where_make_is(monkeypatch):
    ran = []
    monkeypatch.setattr(course, "WINDOWS", False)
    monkeypatch.setattr(shutil, "which", lambda name: "/usr/bin/make")
    monkeypatch.setattr(subprocess, "run", lambda command, **kw: ran.append(command) or subprocess.CompletedProcess(
        command, 0))
    assert course.run_tests({}) == 0 and ran == [["make", "test"]]


def test_course_test_without_make_runs_each_test_run_and_fails_if_one_failed(monkeypatch, capsys):
    """Windows' way: ruff, the checkpoints, pytest over tests/, strict nbval of every solutions folder, lax nbval of
    the English notebooks, one after another; it says which ran and which failed."""
    ran = []
    monkeypatch.setattr(course, "WINDOWS", True)
    monkeypatch.setattr(course, "setup", lambda env: None)
    monkeypatch.setattr(subprocess, "run", lambda command, **kw: ran.append(command) or subprocess.CompletedProcess(
        command, 1 if "ruff" in command else 0))
    assert course.run_tests({}) == 1
    out = capsys.readouterr().out
    assert "python course.py test: without make, one after another: ruff, checkpoints" in out
    assert "failed: ruff\n" in out
    assert "passed: checkpoints, unit tests, strict nbval solutions, strict nbval editions/es/solutions" in out
    words = [command[2:] for command in ran]
    assert words[0] == ["ruff", "check", "helpers", "course_tools", "tests", "benchmarks", "course.py"]
    assert ["pytest", "tests", "-q", "-rs"] in words and ["course_tools.pretrain"] in words
    nbval = [command[command.index("--nbval") + 1] for command in words if "--nbval" in command]
    assert nbval == ["solutions"] + [f"editions/{language}/solutions" for language in course.editions()]
    assert words[-1] == ["pytest", *course.NBVAL, "--nbval-lax", "notebooks", "-q"]


def test_the_script_uses_nothing_posix_only_and_names_every_encoding():
    source = (ROOT / "course.py").read_text(encoding="utf-8")
    for posix_only in ("fork", "killpg", "setsid", "start_new_session", "preexec_fn", "import signal", "SIG"):
        assert posix_only not in source, posix_only
    assert "shell=True" not in source and "geteuid = getattr(os, \"geteuid\", None)" in source
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "course.py"], cwd=ROOT, capture_output=True,
                          text=True, encoding="utf-8", timeout=60)
    assert done.returncode == 0, done.stdout  # PLW1514 among its rules: every open() names its encoding


@pytest.mark.skipif(shutil.which("make") is None, reason="no make here")
def test_make_setup_and_lab_run_the_script():
    done = subprocess.run(["make", "-n", "--no-print-directory", "lab", "lab-es", "setup", "PYTHON=python3"],
                          cwd=ROOT, capture_output=True, text=True, encoding="utf-8", timeout=60)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    for command in ("python3 course.py lab", "python3 course.py lab --edition es", "python3 course.py setup"):
        assert command in lines, done.stdout
    done = subprocess.run(["make", "-s", "--no-print-directory", "lab-fr"], cwd=ROOT, capture_output=True, text=True,
                          encoding="utf-8", timeout=60)
    assert done.returncode == 2 and "There is no edition 'fr'" in done.stderr


def _system_python() -> Path:
    """The Python this test's environment was made from (TFS_SETUP_PYTHON names another)."""
    if os.environ.get("TFS_SETUP_PYTHON"):
        return Path(os.environ["TFS_SETUP_PYTHON"])
    if os.name == "nt":
        return Path(sys.base_prefix) / "python.exe"
    return Path(sys.base_prefix) / "bin" / f"python{sys.version_info[0]}.{sys.version_info[1]}"


RUN_NOTEBOOK = """
import sys, nbformat, nbclient
notebook = nbformat.read(sys.argv[1], as_version=4)
notebook.cells.append(nbformat.v4.new_code_cell("import sys; print(sys.prefix)"))
nbclient.NotebookClient(notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": sys.argv[2]}}
                        ).execute()
nbformat.write(notebook, sys.argv[3])
"""


@pytest.mark.skipif(not os.environ.get("TFS_TEST_SETUP"),
                    reason="minutes of pip: make test-setup runs it (TFS_TEST_SETUP=1)")
def test_python_course_py_sets_up_a_fresh_copy_that_runs_notebook_01(tmp_path):
    """The README's command on the repository's files (tracked and new, as a clone will have them), from nothing:
    .venv made with the system Python, the packages installed (pip's cache), notebook 01 run in its kernel, the
    students' settings in it; then setup again is a no-op."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, text=True, encoding="utf-8", check=True).stdout.split("\0")
    copy = tmp_path / "transformers from scratch"
    for name in filter(None, listed):
        if (ROOT / name).is_file():
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, copy / name)
    env = {k: v for k, v in os.environ.items() if k not in {"VIRTUAL_ENV", "MAKEFLAGS", "MFLAGS", "MAKELEVEL"}}
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if not p.startswith(str(ROOT)))
    start = time.monotonic()
    done = subprocess.run([str(_system_python()), "course.py", "setup"], cwd=copy, env=env, capture_output=True,
                          text=True, encoding="utf-8", timeout=1800)
    took = time.monotonic() - start
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    python = copy / ".venv" / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    assert "installing requirements.txt" in done.stdout and "installed the students' JupyterLab settings" in done.stdout
    print(f"\npython course.py setup from nothing: {took:.0f} s")

    notebook = copy / "notebooks" / "01_positional_encoding.ipynb"
    ran = tmp_path / "ran.ipynb"
    run_env = dict(env, MPLCONFIGDIR=str(copy / ".cache" / "matplotlib"),
                   PATH=str(python.parent) + os.pathsep + env["PATH"])
    done = subprocess.run([str(python), "-c", RUN_NOTEBOOK, str(notebook), str(notebook.parent), str(ran)],
                          cwd=copy, env=run_env, capture_output=True, text=True, encoding="utf-8", timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    cells = [cell for cell in json.loads(ran.read_text(encoding="utf-8"))["cells"] if cell["cell_type"] == "code"]
    assert all(cell["execution_count"] for cell in cells), "every code cell ran"
    assert not [out for cell in cells for out in cell["outputs"] if out["output_type"] == "error"]
    printed = "".join(cells[-1]["outputs"][0]["text"]).strip()  # a list of lines in the file
    assert Path(printed) == copy / ".venv", "in the kernel of the .venv it made"
    done = subprocess.run([str(python), "-m", "course_tools.jupyter", "--check"], cwd=copy, env=env)
    assert done.returncode == 0, "the students' JupyterLab settings are installed"

    start = time.monotonic()
    done = subprocess.run([str(_system_python()), "course.py", "setup"], cwd=copy, env=env, capture_output=True,
                          text=True, encoding="utf-8", timeout=300)
    assert done.returncode == 0 and done.stdout == "", done.stdout + done.stderr
    print(f"python course.py setup again, nothing changed: {time.monotonic() - start:.1f} s")


def test_versions_runs_the_environment_s_check_after_setting_up(monkeypatch):
    """README.md's bug-report line: `python course.py versions` prints what course_tools.versions shows, run by
    .venv's Python (the system's would list its own packages)."""
    ran = []
    monkeypatch.setattr(course, "setup", lambda env: None)
    monkeypatch.setattr(course.subprocess, "run",
                        lambda cmd, **kw: ran.append(cmd) or subprocess.CompletedProcess(cmd, 0))
    assert course.main(["versions"]) == 0
    assert ran == [[str(course.venv_python()), "-m", "course_tools.versions"]]
