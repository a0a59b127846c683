"""The course's commands under a locale that is not UTF-8 (a Latin-1 locale here; a Windows code page is alike):
what they print and the files they write are UTF-8 (course_tools/console.py), and the grader's child processes
run in Python's UTF-8 mode (course_tools/isolation.py). The locale tests need en_US.ISO-8859-1 (Debian: package
``locales``, then ``localedef -i en_US -f ISO-8859-1 en_US.ISO-8859-1``); they are skipped without it."""

import csv
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from course_tools.console import utf8_output
from course_tools.isolation import Workspace, interpreter
from helpers.i18n import catalog

from conftest import ROOT

LATIN_1 = "en_US.ISO-8859-1"
VIETNAMESE = "ư"  # U+01B0: not in Latin-1 ("'latin-1' codec can't encode character '\u01b0'")
SPANISH = "ó"  # in Latin-1: a Latin-1 console shows it


def latin_1_environment() -> dict[str, str]:
    """This environment under the Latin-1 locale, with nothing that would make Python use UTF-8 anyway."""
    env = {name: value for name, value in os.environ.items() if name != "PYTHONIOENCODING"}
    env.update(LC_ALL=LATIN_1, PYTHONUTF8="0", OMP_NUM_THREADS="1")
    return env


def locale_encoding() -> str:
    """The encoding Python picks under LC_ALL=en_US.ISO-8859-1 (something else when the locale is missing)."""
    done = subprocess.run([sys.executable, "-c", "import locale; print(locale.getpreferredencoding(False))"],
                          env=latin_1_environment(), capture_output=True, encoding="ascii", errors="replace")
    return done.stdout.strip()


needs_latin_1 = pytest.mark.skipif(
    sys.platform == "win32" or locale_encoding() != "ISO-8859-1",
    reason=f"the {LATIN_1} locale is not installed (Debian: localedef -i en_US -f ISO-8859-1 {LATIN_1})")


class Terminal(io.BytesIO):
    def isatty(self) -> bool:
        return True


def test_redirected_output_becomes_utf8_and_a_console_keeps_its_encoding(monkeypatch):
    redirected, console = io.BytesIO(), Terminal()
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(redirected, encoding="latin-1"))
    monkeypatch.setattr(sys, "stderr", io.TextIOWrapper(console, encoding="latin-1"))
    utf8_output()
    print(SPANISH, VIETNAMESE, end="", flush=True)
    print(SPANISH, VIETNAMESE, end="", file=sys.stderr, flush=True)
    assert redirected.getvalue() == f"{SPANISH} {VIETNAMESE}".encode("utf-8")
    assert console.getvalue() == b"\xf3 \\u01b0", "a character the console cannot show is an escape, not an error"


def test_streams_that_are_not_files_are_left_alone(monkeypatch):
    text = io.StringIO()
    monkeypatch.setattr(sys, "stdout", text)
    monkeypatch.setattr(sys, "stderr", None)  # pythonw on Windows
    utf8_output()
    assert sys.stdout is text and sys.stderr is None


@needs_latin_1
def test_a_command_prints_utf8_to_a_file_under_latin_1(tmp_path):
    code = ("import sys\nfrom course_tools.console import utf8_output\nutf8_output()\n"
            f"print({VIETNAMESE!a})\nprint({VIETNAMESE!a}, file=sys.stderr)\n")  # argv is Latin-1 there
    with open(tmp_path / "out", "wb") as out, open(tmp_path / "err", "wb") as err:
        done = subprocess.run([sys.executable, "-c", code], stdout=out, stderr=err, env=latin_1_environment(),
                              cwd=ROOT)
    assert done.returncode == 0, (tmp_path / "err").read_bytes()
    assert (tmp_path / "out").read_text(encoding="utf-8") == (tmp_path / "err").read_text(encoding="utf-8") == \
        f"{VIETNAMESE}\n"


@needs_latin_1
def test_the_graders_children_run_in_utf8_mode_whatever_the_locale(tmp_path, monkeypatch):
    """The kernel and the verdicts process: interpreter() (-X utf8, which -I does not ignore), or the environment
    a workspace gives a process (PYTHONUTF8, PYTHONIOENCODING) for a kernel whose Python is another."""
    show = "import sys, locale; print(sys.flags.utf8_mode, sys.stdout.encoding, locale.getpreferredencoding(False))"
    env = {**latin_1_environment(), "PYTHONIOENCODING": "latin-1"}
    done = subprocess.run([*interpreter(), "-c", show], env=env, capture_output=True, encoding="utf-8")
    assert done.stdout.split() == ["1", "utf-8", "utf-8"], done.stderr
    notebook = tmp_path / "01_positional_encoding.ipynb"
    notebook.write_text("{}", encoding="utf-8")
    monkeypatch.setenv("LC_ALL", LATIN_1)  # the grader's own environment, which the workspace's starts from
    monkeypatch.setenv("PYTHONIOENCODING", "latin-1")
    with Workspace(notebook, isolate=False, siblings=False) as workspace:
        env = workspace.environment()
    assert env["LC_ALL"] == LATIN_1
    done = subprocess.run([sys.executable, "-c", show], env=env, capture_output=True, encoding="utf-8")
    assert done.stdout.split() == ["1", "utf-8", "utf-8"], done.stderr


@needs_latin_1
def test_tfs_grade_json_to_a_file_under_latin_1_keeps_the_vietnamese(tmp_path):
    """The reported failure: `tfs-grade editions/vi/notebooks/01_positional_encoding.ipynb --json > out.json` under
    a Latin-1 locale died with UnicodeEncodeError. Now out.json, and every file the grader writes, is UTF-8 and
    holds the Vietnamese messages as the notebook's language has them."""
    notebook = ROOT / "editions" / "vi" / "notebooks" / "01_positional_encoding.ipynb"
    found = shutil.which("tfs-grade", path=str(Path(sys.executable).parent))
    command = [found] if found else [sys.executable, "-m", "course_tools.grade"]
    command += [str(notebook), "--json", "--csv", str(tmp_path / "grades.csv"), "--report",
                str(tmp_path / "report.html"), "--feedback", str(tmp_path / "feedback"), "--gradebook",
                str(tmp_path / "gradebook.csv"), "--jobs", "1"]
    with open(tmp_path / "out.json", "wb") as out:
        done = subprocess.run(command, stdout=out, stderr=subprocess.PIPE, env=latin_1_environment(), cwd=tmp_path,
                              timeout=900)
    errors = done.stderr.decode("utf-8", "replace")
    assert "Traceback" not in errors and "UnicodeEncodeError" not in errors, errors
    report = json.loads((tmp_path / "out.json").read_text(encoding="utf-8"))
    todo = catalog("vi")["harness:todo"][1]  # the Vietnamese of "not implemented yet: replace ..."
    assert VIETNAMESE in todo
    assert report["exercises"] and all(e["status"] == "todo" and e["message"] == todo for e in report["exercises"])
    with open(tmp_path / "grades.csv", newline="", encoding="utf-8") as table:
        assert {row["status"] for row in csv.DictReader(table)} == {"todo"}
    shown = todo.split("`")[0]  # the pages show `code` in <code>
    assert shown in (tmp_path / "report.html").read_text(encoding="utf-8")
    pages = list((tmp_path / "feedback").glob("*.html"))
    assert pages and shown in pages[0].read_text(encoding="utf-8")
    assert (tmp_path / "gradebook.csv").read_text(encoding="utf-8-sig").count("\n") >= 2
