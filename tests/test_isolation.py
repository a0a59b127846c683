"""What a graded submission cannot do (course_tools/isolation.py): write outside its private folder, or open a
connection, neither from the kernel that executes it nor from the process that computes its verdicts.

One grader run over a class folder of three small notebooks (the imports cell of notebook 01, its first
exercise and check): alice's kernel and bob's verdicts process each try to write into carol's notebook, a .pyc
into helpers/checks/__pycache__ and a .pth into the environment, and to connect to a port this test listens on.
Each attack shows, in the grade, that it ran and that every attempt failed: alice's kernel ends itself
(`kernel_died` at that cell) and bob's answer is right (`pass`) only then. Both also register an atexit
function that writes into carol's notebook: it runs when bob's verdicts process ends (alice's kernel is killed,
so its own never runs). These tests need bubblewrap; without
it they are skipped, with the reason. Where submissions run without it, the grader says so once per run.
"""

import hashlib
import json
import shutil
import socket
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from course_tools import isolation

from conftest import ROOT, run_grader, solution_source
from test_forging import PE_SIGNATURE, small_notebook, verdict_of

NEEDS_BWRAP = pytest.mark.skipif(not isolation.sandboxed(), reason="bubblewrap (bwrap) is not available here, or "
                                 f"{isolation.ENVIRONMENT_SWITCH}=off: submissions are not isolated")
PYC = ROOT / "helpers" / "checks" / "__pycache__" / "tfs_isolation_test.cpython-311.pyc"
PTH = Path(sysconfig.get_paths()["purelib"]) / "tfs_isolation_test.pth"


def attempts(victim: Path, port: int, indent: str) -> str:
    """Code that tries each forbidden thing and leaves `outcomes`: "done" or the error's name, one per attempt."""
    lines = ["import os, socket", "outcomes = []",
             *(f"try:\n    with open({str(path)!r}, 'w') as out:\n        out.write({text!r})\n"
               "    outcomes.append('done')\nexcept OSError as error:\n    outcomes.append(type(error).__name__)"
               for path, text in ((victim, "{}"), (PYC, "forged"), (PTH, "import os"))),
             f"try:\n    socket.create_connection(('127.0.0.1', {port}), timeout=5).close()\n"
             "    outcomes.append('done')\nexcept OSError as error:\n    outcomes.append(type(error).__name__)"]
    return "\n".join(indent + line for block in lines for line in block.split("\n")) + "\n"


@pytest.fixture(scope="module")
def listener():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.setblocking(False)
    yield server
    server.close()


@pytest.fixture(scope="module")
def attacked(tmp_path_factory, listener):
    """(grader's status, {file name: report}, carol's notebook, its bytes before, the port)."""
    folder = tmp_path_factory.mktemp("class")
    port = listener.getsockname()[1]
    right = solution_source("01_positional_encoding", "create_position_matrix")
    carol = small_notebook(folder, "carol_01_positional_encoding.ipynb", "01_positional_encoding",
                           {"create_position_matrix": right})
    kernel_attack = ("import atexit\n" + attempts(carol, port, "")
                     + f"atexit.register(lambda: open({str(carol)!r}, 'w').write('{{}}'))\n"
                     "if 'done' not in outcomes:\n    os._exit(3)  # every attempt failed: the grade shows it\n")
    small_notebook(folder, "alice_01_positional_encoding.ipynb", "01_positional_encoding",
                   {"create_position_matrix": right}, before_checks=kernel_attack)
    answer = right.replace(PE_SIGNATURE, PE_SIGNATURE + attempts(carol, port, "    ")
                           + f"    __import__('atexit').register(lambda: open({str(carol)!r}, 'w').write('{{}}'))\n"
                           "    if 'done' in outcomes:\n        return None\n", 1)
    small_notebook(folder, "bob_01_positional_encoding.ipynb", "01_positional_encoding",
                   {"create_position_matrix": answer})
    before = carol.read_bytes()
    try:
        status, out, _ = run_grader(folder, "--json", "--jobs", "2")
    finally:
        written = [path for path in (PYC, PTH) if path.exists()]
        for path in written:
            path.unlink()
    assert not written, f"a submission wrote {written}"
    return status, {Path(r["notebook"]).name: r for r in json.loads(out)}, carol, before


@NEEDS_BWRAP
def test_the_kernel_writes_nowhere_outside_its_folder_and_reaches_no_network(attacked, listener):
    status, reports, carol, before = attacked
    result = verdict_of(reports["alice_01_positional_encoding.ipynb"], "create_position_matrix")
    assert (result["status"], result["mistake"]) == ("fail", "kernel_died"), result
    assert "kernel died while running code cell 3 (`import atexit`)" in result["message"], \
        "the attack ran, and every attempt failed"
    assert carol.read_bytes() == before
    with pytest.raises(BlockingIOError):
        listener.accept()


@NEEDS_BWRAP
def test_the_verdicts_process_writes_nowhere_outside_its_folder_and_reaches_no_network(attacked, listener):
    status, reports, carol, before = attacked
    result = verdict_of(reports["bob_01_positional_encoding.ipynb"], "create_position_matrix")
    assert result["status"] == "pass", f"an attempt succeeded, or the attack did not run: {result}"
    assert carol.read_bytes() == before
    with pytest.raises(BlockingIOError):
        listener.accept()


@NEEDS_BWRAP
def test_the_victim_is_graded_from_what_it_handed_in(attacked):
    status, reports, carol, before = attacked
    report = reports["carol_01_positional_encoding.ipynb"]
    assert verdict_of(report, "create_position_matrix")["status"] == "pass", report
    assert report["sha256"] == hashlib.sha256(before).hexdigest() and report["isolated"] is True


def test_without_the_sandbox_the_grader_says_so_once(tmp_path, monkeypatch):
    monkeypatch.setattr(isolation, "bwrap_options", lambda: None)
    for name in ("a.ipynb", "b.ipynb"):
        (tmp_path / name).write_text("{not json", encoding="utf-8")
    status, out, err = run_grader(tmp_path, "--json")
    assert status == 2 and len(json.loads(out)) == 2
    assert err.count("not isolated") == 1 and "bubblewrap" in err, err
    monkeypatch.setenv(isolation.ENVIRONMENT_SWITCH, "off")
    status, out, err = run_grader(tmp_path, "--json")
    assert err.count("not isolated") == 1 and isolation.ENVIRONMENT_SWITCH in err, err


def test_a_submission_runs_from_a_private_copy(tmp_path):
    """What its code writes beside itself lands in the private folder, which is gone afterwards."""
    folder = tmp_path / "alice"
    notebook = small_notebook(folder, "alice_01_positional_encoding.ipynb", "01_positional_encoding",
                              {"create_position_matrix": solution_source("01_positional_encoding",
                                                                         "create_position_matrix")})
    (folder / "alice_02_attention.ipynb").write_text("{}", encoding="utf-8")
    with isolation.Workspace(notebook) as room:
        assert room.notebook.read_bytes() == notebook.read_bytes() and room.notebook != notebook
        assert (room.work / "alice_02_attention.ipynb").read_text(encoding="utf-8") == "{}", "its siblings too"
        assert room.sha256 == hashlib.sha256(notebook.read_bytes()).hexdigest()
        root = room.root
    assert not root.exists()


def test_the_sandbox_works_wherever_bubblewrap_does():
    """A plain bwrap that works here (the sandbox's options but its empty /tmp) means the grader's sandbox works too:
    a checkout or an environment under /tmp (a CI clone) is bound back, not hidden, so the tests above run, not skip.
    It fails on the isolation.py before this test, in a clone under /tmp."""
    bwrap = shutil.which("bwrap")
    if bwrap is None or not sys.platform.startswith("linux"):
        pytest.skip("bubblewrap (bwrap) is not installed here")
    plain = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-net", "--die-with-parent",
             "--", sys.executable, "-I", "-c", "pass"]
    if subprocess.run(plain, capture_output=True, timeout=60, check=False).returncode != 0:
        pytest.skip("bubblewrap cannot make a sandbox on this machine (user namespaces refused)")
    options = isolation.bwrap_options.__wrapped__()  # tried afresh, not the answer cached by the tests above
    assert options is not None, "bwrap works here, yet the grader's sandbox does not"
    for path in (sys.prefix, ROOT):
        if Path(path).resolve().is_relative_to(isolation.SANDBOX_ROOT.resolve()):
            assert str(Path(path).resolve()) in options


def test_what_lives_under_tmp_is_bound_back(monkeypatch):
    """The course's Python environment under /tmp (a CI clone's .venv) is bound back into the sandbox; one elsewhere
    needs nothing, since the sandbox sees the whole file system read-only but /tmp."""
    venv = isolation.SANDBOX_ROOT.resolve() / "clone" / ".venv"
    monkeypatch.setattr(sys, "prefix", str(venv))
    assert str(venv) in isolation.under_sandbox_root()
    monkeypatch.setattr(sys, "prefix", "/opt/course/.venv")
    assert "/opt/course/.venv" not in isolation.under_sandbox_root()
