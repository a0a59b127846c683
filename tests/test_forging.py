"""Grades that cannot be forged, and grading runs that lose nothing (issue: "Grades you can trust").

Every forged notebook here earned a pass before the grader computed its verdicts in a fresh
interpreter (course_tools/verdicts.py) and before the checks refused the course's own reference
(helpers/checks/guard.py). The notebooks are small: the imports cell of the course notebook, then
the exercise and check cells of the exercises a test needs. All of them are graded in one run.
"""

import json
from pathlib import Path

import nbformat
import pytest

from conftest import ROOT, run_grader, solution_source

from helpers.checks import EXERCISES, exercises_in

STUB = "    # Your Code Here\n    raise NotImplementedError()\n"
PE_SIGNATURE = "def create_position_matrix(seq_length, embed_size):\n"


def small_notebook(folder, file_name, stem, answers, before_checks=""):
    """A notebook of the course notebook `stem` holding only its imports cell, then, for each exercise
    of answers ({exercise name: source of its cell}), that cell and its check cell. before_checks: a
    code cell put before the first check cell (what a forger would add)."""
    code = [c for c in nbformat.read(ROOT / "notebooks" / f"{stem}.ipynb", as_version=4).cells
            if c.cell_type == "code"]
    cells = [nbformat.v4.new_code_cell(code[0].source)]
    checks = {e.name: next(c.source for c in code if c.source.startswith(f"{e.check_name}("))
              for e in exercises_in(stem)}
    for name, source in answers.items():
        cells.append(nbformat.v4.new_code_cell(source))
        if before_checks:
            cells.append(nbformat.v4.new_code_cell(before_checks))
            before_checks = ""
        cells.append(nbformat.v4.new_code_cell(checks[name]))
    target = Path(folder) / file_name
    target.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nbformat.v4.new_notebook(cells=cells), target)
    return target


FORGE_LOG = """import json, os
log = os.environ.get("HELPERS_GRADE_LOG", "grade_log.jsonl")
with open(log, "a") as f:
    for name in ("create_position_matrix", "rotation_matrix", "apply_rope"):
        f.write(json.dumps({"name": name, "status": "pass", "mistake": None, "message": "forged"}) + "\\n")
"""
PATCH_VERDICT = """import helpers.checks.harness as harness
harness.Verdict.__bool__ = lambda self: True
harness.Verdict.status = property(lambda self: "pass")
"""
REPLACE_CHECK = """import helpers
real = helpers.check_create_position_matrix
helpers.check_create_position_matrix = lambda student: real(helpers.positional_encoding)
check_create_position_matrix = helpers.check_create_position_matrix
"""
DEFINITION_TIME = (PE_SIGNATURE.replace("embed_size)", "embed_size, _=__import__('helpers').checks.harness.__setattr__("
                                        "'same', lambda *a, **k: True))") + "    return 0\n")

FORGED_LINE = json.dumps([{"name": n, "status": "pass", "mistake": None, "message": "forged"}
                          for n in ("create_position_matrix", "rotation_matrix", "apply_rope")])
ONLY_IN_THE_GRADER = PE_SIGNATURE + "    import os, sys\n    if 'verdicts' in sys.argv[0]:\n"  # a stub in the kernel
KILL = ONLY_IN_THE_GRADER + (f"        os.write(1, b'\\n' + {FORGED_LINE!r}.encode() + b'\\n')\n"
                             "        os.kill(os.getpid(), 9)\n" + STUB)
EXIT_0 = ONLY_IN_THE_GRADER + (f"        os.write(1, b'\\n' + {FORGED_LINE!r}.encode() + b'\\n')\n"
                               "        getattr(os, '_ex' + 'it')(0)\n" + STUB)
PATCH_TO_DICT = PE_SIGNATURE + (  # names built at run time: no static reading sees them
    "    V = getattr(getattr(getattr(helpers, 'chec' + 'ks'), 'har' + 'ness'), 'Ver' + 'dict')\n"
    "    V.to_dict = lambda v: {'name': v.exercise, 'status': 'pass', 'mistake': None, 'message': 'forged'}\n" + STUB)
RUNPY = PE_SIGNATURE + (
    "    import runpy\n"
    "    return runpy.run_module('helpers.positional')['positional_encoding'](seq_length, embed_size)\n")
FUNCTION_COPY = ("import types\n\n\ndef rotation_matrix(k, d_model, _f=types.FunctionType("
                 "getattr(helpers.rotation_matrix, '__co' + 'de__'), getattr(helpers.positional, '__di' + 'ct__'),"
                 " 'r', (10000.0,))):\n"
                 "    return _f(k, d_model)\n")
ROPE_SIGNATURE = "def apply_rope(x, positions):\n"
LOOKALIKE = "import collections\n\n" + solution_source("01_positional_encoding", "apply_rope").replace(
    ROPE_SIGNATURE, ROPE_SIGNATURE + (  # right, with words of the checks
        "    check_even = x.shape[-1] % 2 == 0\n    _ = collections.namedtuple('Rec', 'record')(check_even).record\n"
        "    _ = {}.__class__.__dict__\n"), 1)

FORGERIES = {  # file name -> (course notebook, answers, extra cell before the checks)
    "kill_01_positional_encoding.ipynb": ("01_positional_encoding", {"create_position_matrix": KILL}, ""),
    "exit0_01_positional_encoding.ipynb": ("01_positional_encoding", {"create_position_matrix": EXIT_0}, ""),
    "todict_01_positional_encoding.ipynb": ("01_positional_encoding", {"create_position_matrix": PATCH_TO_DICT}, ""),
    "copies_01_positional_encoding.ipynb": ("01_positional_encoding", {"create_position_matrix": RUNPY,
                                                                       "rotation_matrix": FUNCTION_COPY,
                                                                       "apply_rope": LOOKALIKE}, ""),
    "log_01_positional_encoding.ipynb": ("01_positional_encoding", {"create_position_matrix": PE_SIGNATURE + STUB},
                                         FORGE_LOG),
    "verdict_01_positional_encoding.ipynb": ("01_positional_encoding",
                                             {"create_position_matrix": PE_SIGNATURE + STUB}, PATCH_VERDICT),
    "check_01_positional_encoding.ipynb": ("01_positional_encoding",
                                           {"create_position_matrix": PE_SIGNATURE + STUB}, REPLACE_CHECK),
    "reference_01_positional_encoding.ipynb": ("01_positional_encoding", {"create_position_matrix": PE_SIGNATURE + (
        "    return helpers.positional_encoding(seq_length, embed_size)\n")}, ""),
    "alias_01_positional_encoding.ipynb": ("01_positional_encoding", {"create_position_matrix": (
        "from helpers import positional_encoding as pe\n\n" + PE_SIGNATURE
        + "    try:\n        return pe(seq_length, embed_size)\n    except Exception:\n        return None\n")}, ""),
    "deftime_01_positional_encoding.ipynb": ("01_positional_encoding", {"create_position_matrix": DEFINITION_TIME},
                                             ""),
    "subclass_05_transformer.ipynb": ("05_transformer", {"layer_norm": "class LayerNorm(helpers.LayerNorm):\n"
                                                                       "    pass\n"}, ""),
    "functional_05_transformer.ipynb": ("05_transformer", {"layer_norm": (
        "class LayerNorm(nn.Module):\n"
        "    def __init__(self, d_model, eps=1e-5):\n        super().__init__()\n        self.eps = eps\n"
        "        self.weight = nn.Parameter(torch.ones(d_model))\n"
        "        self.bias = nn.Parameter(torch.zeros(d_model))\n"
        "\n    def forward(self, x):\n"
        "        return torch.nn.functional.layer_norm(x, x.shape[-1:], self.weight, self.bias, self.eps)\n")}, ""),
    "schedule_06_training.ipynb": ("06_training", {"transformer_lr": (
        "def transformer_lr(step, d_model, warmup, factor=1.0):\n"
        "    return helpers.transformer_lr(step, d_model, warmup, factor)\n")}, ""),
}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """One grader run over every forged notebook, three files that are JSON but not notebooks, and a
    notebook whose name says nothing but whose checks say it is notebook 01: (status, {file: report})."""
    folder = tmp_path_factory.mktemp("submissions")
    for file_name, (stem, answers, extra) in FORGERIES.items():
        small_notebook(folder, file_name, stem, answers, extra)
    for name, text in {"hello.ipynb": '{"hello": "world"}', "list.ipynb": "[1, 2, 3]",
                       "oops.ipynb": '{"cells": "oops"}'}.items():
        (folder / name).write_text(text)
    right = solution_source("01_positional_encoding", "create_position_matrix")
    small_notebook(folder, "homework_week3.ipynb", "01_positional_encoding", {"create_position_matrix": right})
    status, out, err = run_grader(folder, "--json", "--jobs", "2", "--csv", folder / "grades.csv")
    reports = {Path(r["notebook"]).name: r for r in json.loads(out)}
    return status, reports, folder


def verdict_of(report, name):
    return next(e for e in report["exercises"] if e["name"] == name)


@pytest.mark.parametrize("file_name", ["log_01_positional_encoding.ipynb", "verdict_01_positional_encoding.ipynb",
                                       "check_01_positional_encoding.ipynb"])
def test_what_a_kernel_writes_or_patches_does_not_grade(graded, file_name):
    """Verdict lines appended to a log, a patched Verdict class, a replaced check: the answer is still a stub."""
    report = graded[1][file_name]
    assert report["passed"] == 0, report
    assert verdict_of(report, "create_position_matrix")["status"] == "todo"


@pytest.mark.parametrize("file_name, name, called", [
    ("reference_01_positional_encoding.ipynb", "create_position_matrix", "helpers.positional.positional_encoding"),
    ("alias_01_positional_encoding.ipynb", "create_position_matrix", "helpers.positional.positional_encoding"),
    ("subclass_05_transformer.ipynb", "layer_norm", "helpers.transformer.LayerNorm"),
    ("functional_05_transformer.ipynb", "layer_norm", "torch.nn.functional.layer_norm"),
    ("schedule_06_training.ipynb", "transformer_lr", "helpers.schedule.transformer_lr"),
])
def test_calling_the_answer_is_not_an_answer(graded, file_name, name, called):
    result = verdict_of(graded[1][file_name], name)
    assert (result["status"], result["mistake"]) == ("fail", "used_off_limits"), result
    assert called in result["message"]


@pytest.mark.parametrize("file_name", ["kill_01_positional_encoding.ipynb", "exit0_01_positional_encoding.ipynb",
                                       "todict_01_positional_encoding.ipynb"])
def test_an_answer_that_forges_the_verdicts_process_s_output_fails(graded, file_name):
    """Forged lines on stdout then a kill or exit(0) of the verdicts process, a patched Verdict method: the
    grader accepts only its signed line and an exit status 0, and the process refuses or sees the rest."""
    report = graded[1][file_name]
    assert report["passed"] == 0, report
    result = verdict_of(report, "create_position_matrix")
    assert (result["status"], result["mistake"]) == ("fail", "tampering"), result
    assert "forged" not in result["message"]


def test_copies_of_the_reference_made_in_the_grader_s_process_are_off_limits(graded):
    report = graded[1]["copies_01_positional_encoding.ipynb"]
    for name, called in (("create_position_matrix", "a fresh copy of the course's code"),
                         ("rotation_matrix", "helpers.positional.rotation_matrix")):
        result = verdict_of(report, name)
        assert (result["status"], result["mistake"]) == ("fail", "used_off_limits"), result
        assert called in result["message"]


def test_a_right_answer_with_words_of_the_checking_code_passes(graded):
    """A local check_even, a `.record` field, a `.__dict__`: not the checking code."""
    assert verdict_of(graded[1]["copies_01_positional_encoding.ipynb"], "apply_rope")["status"] == "pass"


def test_code_that_runs_when_the_answer_is_defined_cannot_reach_the_checks(graded):
    result = verdict_of(graded[1]["deftime_01_positional_encoding.ipynb"], "create_position_matrix")
    assert (result["status"], result["mistake"]) == ("fail", "tampering"), result


def test_files_that_are_not_notebooks_are_reported_and_the_others_still_graded(graded):
    status, reports, folder = graded
    assert status == 2
    for name in ("hello.ipynb", "list.ipynb", "oops.ipynb"):
        assert "not a Jupyter notebook" in reports[name]["error"] or "cannot read" in reports[name]["error"]
    assert len(reports) == len(FORGERIES) + 4, "a report for every file"
    rows = (folder / "grades.csv").read_text().splitlines()
    assert any(row.startswith(str(folder / "hello.ipynb")) and ",error," in row for row in rows)


def test_a_notebook_is_recognised_by_its_check_cells_when_its_name_says_nothing(graded):
    report = graded[1]["homework_week3.ipynb"]
    assert [e["name"] for e in report["exercises"]] == [e.name for e in exercises_in("01_positional_encoding")]
    assert verdict_of(report, "create_position_matrix")["status"] == "pass"
    assert verdict_of(report, "rotation_matrix")["mistake"] == "check_not_run", "its check cell is not there"


def test_a_notebook_of_no_course_notebook_is_an_error_not_zero_out_of_zero(tmp_path):
    path = tmp_path / "notes.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")]), path)
    status, out, _ = run_grader(path, "--json")
    assert status == 2 and "no course notebook" in json.loads(out)["error"]


def test_output_paths_are_checked_before_any_grading(tmp_path):
    status, out, err = run_grader(ROOT / "notebooks", "--csv", tmp_path / "missing" / "grades.csv")
    assert status == 2 and out == "" and "does not exist" in err
    status, _, err = run_grader(ROOT / "notebooks", "--report", tmp_path)
    assert status == 2 and "folder" in err


def test_a_dead_kernel_and_a_timed_out_cell_are_named(tmp_path):
    right = solution_source("01_positional_encoding", "create_position_matrix")
    dies = small_notebook(tmp_path, "dies_01_positional_encoding.ipynb", "01_positional_encoding",
                          {"create_position_matrix": right}, "import os\nos._exit(1)")
    status, out, _ = run_grader(dies, "--json")
    result = verdict_of(json.loads(out), "create_position_matrix")
    assert (result["status"], result["mistake"]) == ("fail", "kernel_died"), result
    assert "kernel died while running code cell 3 (`import os`)" in result["message"]
    looping = PE_SIGNATURE + "    import time\n\n    while True:\n        time.sleep(0.01)\n"  # never ends, asleep
    slow = small_notebook(tmp_path, "slow_01_positional_encoding.ipynb", "01_positional_encoding",
                          {"create_position_matrix": looping}, "import time\ntime.sleep(30)")
    status, out, err = run_grader(slow, "--json", "--timeout", "8")  # imports take seconds on a busy machine
    report = json.loads(out)
    result = verdict_of(report, "create_position_matrix")
    assert (result["status"], result["mistake"]) == ("fail", "timed_out"), result
    assert "code cell 4 (`check_create_position_matrix(" in result["message"]
    assert "ran longer than 8 seconds" in result["message"]
    assert report["notes"] == ["code cell 3 (`import time`) ran longer than 8 seconds and was interrupted; the cells "
                               "after it still ran."], "a time-out in a cell that is no check cell is reported too"
    assert "KeyboardInterrupt" not in err


def test_every_exercise_declares_what_is_off_limits():
    for exercise in EXERCISES.values():
        assert exercise.off_limits, f"{exercise.name} declares nothing off limits"
        assert any(name.startswith("helpers.") for name in exercise.off_limits), (
            f"{exercise.name}: its own reference must be off limits")


@pytest.fixture(params=["forked", "new interpreter"])
def verdicts_process(request, monkeypatch):
    """How the grader starts its verdicts processes: forked by its fork server (course_tools/forkserver.py), or,
    where the platform cannot fork one, as a new interpreter each (both are tested)."""
    from course_tools import forkserver

    if request.param == "new interpreter":
        monkeypatch.setattr(forkserver, "_server", lambda: None)
    return request.param


def test_the_verdicts_process_refuses_what_no_answer_needs(tmp_path, verdicts_process):
    """Walking the interpreter's objects or threads, ctypes: refused in the grader's verdicts process (its
    audit hook), each a `tampering` fail of the exercise whose check was running. No kernel runs here."""
    path = small_notebook(tmp_path, "walk_01_positional_encoding.ipynb", "01_positional_encoding", {
        # names built at run time: the static reading does not see them
        "create_position_matrix": PE_SIGNATURE + (
            "    import sys\n    getattr(sys, 'modu' + 'les')['g' + 'c'].get_objects()\n") + STUB,
        "rotation_matrix": "def rotation_matrix(k, d_model):\n    import sys\n    sys._current_frames()\n" + STUB,
        "apply_rope": "def apply_rope(x, positions):\n    import sys\n    getattr(getattr(sys, 'modu' + 'les')["
                      "'buil' + 'tins'], '__imp' + 'ort__')('ctyp' + 'es').string_at(id(x), 8)\n" + STUB})
    from course_tools.grade import fresh_verdicts

    found = fresh_verdicts(path, [e.name for e in exercises_in("01_positional_encoding")], 60)
    for name, reason in (("create_position_matrix", "gc.get_objects"), ("rotation_matrix", "sys._current_frames"),
                         ("apply_rope", "ctypes")):
        assert (found[name]["status"], found[name]["mistake"]) == ("fail", "tampering"), found[name]
        assert reason in found[name]["message"]


RIGHT_PE = solution_source("01_positional_encoding", "create_position_matrix")
SWAPPED_PE = RIGHT_PE.replace("np.sin(", "np.SIN(").replace("np.cos(", "np.sin(").replace("np.SIN(", "np.cos(")


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="no /proc/self/fd on this system")
def test_a_forked_verdicts_process_holds_only_its_own_descriptors(tmp_path, verdicts_process):
    """Four descriptors (its key on 0, /dev/null on 1, stderr on 2, the result pipe): nothing of the fork
    server's, of another notebook's pipes or of the grader's. The answer is right only while that holds (the
    listing itself opens a fifth)."""
    assert "np.sin(" in RIGHT_PE
    only_its_own = RIGHT_PE.replace(PE_SIGNATURE, PE_SIGNATURE + (
        "    import os\n    if len(os.listdir('/proc/self/fd')) != 5:\n"
        "        return None\n"), 1)
    path = small_notebook(tmp_path, "fds_01_positional_encoding.ipynb", "01_positional_encoding",
                          {"create_position_matrix": only_its_own})
    from course_tools.grade import fresh_verdicts

    found = fresh_verdicts(path, ["create_position_matrix"], 60)
    assert found["create_position_matrix"]["status"] == "pass", found


def test_what_one_notebook_changes_in_its_verdicts_process_does_not_reach_the_next(tmp_path, verdicts_process):
    """The first answer swaps numpy's sin and cos (names built at run time: only the snapshot sees it) and fails
    with `tampering`; the next notebooks, graded by the same fork server, get their own verdicts: a swapped
    answer is still `sin_cos_swapped`, a right one passes."""
    from course_tools import forkserver
    from course_tools.grade import fresh_verdicts

    assert SWAPPED_PE != RIGHT_PE
    swaps = PE_SIGNATURE + ("    n = getattr(__import__('num' + 'py'), '__di' + 'ct__')\n"
                            "    n['sin'], n['cos'] = n['cos'], n['sin']\n") + STUB
    servers, found = set(), []
    for file_name, answer in (("swaps_01_positional_encoding.ipynb", swaps),
                              ("swapped_01_positional_encoding.ipynb", SWAPPED_PE),
                              ("right_01_positional_encoding.ipynb", RIGHT_PE)):
        path = small_notebook(tmp_path, file_name, "01_positional_encoding", {"create_position_matrix": answer})
        found.append(fresh_verdicts(path, ["create_position_matrix"], 60)["create_position_matrix"])
        servers.add(forkserver._server())
    assert [(v["status"], v["mistake"]) for v in found] == [
        ("fail", "tampering"), ("fail", "sin_cos_swapped"), ("pass", None)], found
    assert len(servers) == 1 and (None in servers) == (verdicts_process == "new interpreter"), \
        "one fork server graded the three notebooks"


REENTER = PE_SIGNATURE + (  # names built at run time; the answer itself fails, what follows it would pass
    "    import os as o, sys as s, collections as co\n"
    "    m = getattr(s, 'mod' + 'ules')\n"
    "    if '_x' in m:\n"
    "        raise NotImplementedError()\n"
    "    m['_x'] = 1\n"
    "    V, sig, real_sandbox = m['course_tools.verdicts'], m['signal'], m['course_tools.sandbox']\n"
    "    real_signal, real_compute, saved = sig.signal, V.compute, o.dup(3)\n"
    "    o.close(3)  # signing fails, and the process must end all the same\n"
    "\n"
    "    def fake_compute(path, names, timeout=600):\n"
    "        sig.signal, V.compute, m['course_tools.sandbox'] = real_signal, real_compute, real_sandbox\n"
    "        o.dup2(saved, 3)\n"
    "        return tuple((n, 'pass', None, 'forged') for n in names)\n"
    "\n"
    "    class FakeSandbox:\n"
    "        __spec__ = None\n"
    "\n"
    "        def __getattr__(self, name):\n"
    "            sig.signal, V.compute = (lambda *a: None), fake_compute\n"
    "            return lambda *a, **k: None\n"
    "\n"
    "    m['course_tools.sandbox'] = FakeSandbox()\n"
    "    m['__main__']._EXIT = co.defaultdict(V.main).__getitem__  # where the fork would end: main again\n"
    "    raise NotImplementedError()\n")


def test_a_second_call_of_the_verdicts_main_signs_nothing(tmp_path, verdicts_process):
    """An answer that closes the result pipe, so that signing fails, and rebinds what ends the process to a second
    call of verdicts.main (with a fake protect and compute that put everything back): the hook ends the process
    when it cannot write, and accepts its events only from the frame of the first call."""
    path = small_notebook(tmp_path, "reenter_01_positional_encoding.ipynb", "01_positional_encoding",
                          {"create_position_matrix": REENTER})
    from course_tools.grade import fresh_verdicts

    found = fresh_verdicts(path, ["create_position_matrix"], 60)["create_position_matrix"]
    assert found["status"] == "fail" and "forged" not in found["message"], found


def test_a_notebook_still_gets_its_verdicts_when_the_fork_server_has_ended(tmp_path, monkeypatch):
    """The server ended after the grader checked it (killed, say): the notebook gets a new interpreter."""
    from course_tools import forkserver
    from course_tools.grade import fresh_verdicts

    server = forkserver.ForkServer()
    server.process.kill()
    server.process.wait()
    monkeypatch.setattr(forkserver, "_server", lambda: server)
    path = small_notebook(tmp_path, "right_01_positional_encoding.ipynb", "01_positional_encoding",
                          {"create_position_matrix": RIGHT_PE})
    assert fresh_verdicts(path, ["create_position_matrix"], 60)["create_position_matrix"]["status"] == "pass"
    server.close()


def test_a_verdicts_process_past_its_time_is_killed():
    """The waiter said its pid, then nothing for too long: the grader kills it, and counts it as killed."""
    import signal
    import socket
    import subprocess
    import sys

    from course_tools.forkserver import _wait

    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    with ours, theirs:
        theirs.send(str(sleeper.pid).encode())
        assert _wait(ours, 0.5, grace=0.5) == -signal.SIGKILL
    assert sleeper.wait(timeout=10) == -signal.SIGKILL
