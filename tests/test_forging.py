"""Grades that cannot be forged, and grading runs that lose nothing (issue: "Grades you can trust").

Every forged notebook here earned a pass before the grader computed its verdicts in a fresh
interpreter (course_tools/verdicts.py) and before the checks refused the course's own reference
(helpers/checks/guard.py). The notebooks are small: the imports cell of the course notebook, then
the exercise and check cells of the exercises a test needs. All of them are graded in one run.
What the sandbox keeps a submission from doing (writing elsewhere, the network) is in test_isolation.py.
"""

import itertools
import json
from pathlib import Path

import nbformat
import pytest

from conftest import ROOT, run_grader, solution_source

from helpers.checks import EXERCISES, exercises_in

STUB = "    # Your Code Here\n    raise NotImplementedError()\n"
WRONG = "    return None\n"  # not a stub: the check calls this answer (a stub is `todo` without a call)
PE_SIGNATURE = "def create_position_matrix(seq_length, embed_size):\n"


def small_notebook(folder, file_name, stem, answers, before_checks=""):
    """A notebook of the course notebook `stem` holding only its imports cells (the leading code cells that
    start with an import), then, for each exercise of answers ({exercise name: source of its cell}), that
    cell and its check cell. before_checks: a code cell put before the first check cell (what a forger
    would add)."""
    code = [c for c in nbformat.read(ROOT / "notebooks" / f"{stem}.ipynb", as_version=4).cells
            if c.cell_type == "code"]
    imports = [code[0]] + list(itertools.takewhile(lambda c: c.source.startswith(("import ", "from ")), code[1:]))
    cells = [nbformat.v4.new_code_cell(c.source) for c in imports]
    checks = {e.name: next(c.source for c in code if c.source.startswith(f"{e.check_name}("))
              for e in exercises_in(stem) if e.name in answers}
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
                             "        os.kill(os.getpid(), 9)\n" + WRONG)
EXIT_0 = ONLY_IN_THE_GRADER + (f"        os.write(1, b'\\n' + {FORGED_LINE!r}.encode() + b'\\n')\n"
                               "        getattr(os, '_ex' + 'it')(0)\n" + WRONG)
PATCH_TO_DICT = PE_SIGNATURE + (  # names built at run time: no static reading sees them
    "    V = getattr(getattr(getattr(helpers, 'chec' + 'ks'), 'har' + 'ness'), 'Ver' + 'dict')\n"
    "    V.to_dict = lambda v: {'name': v.exercise, 'status': 'pass', 'mistake': None, 'message': 'forged'}\n" + WRONG)
FUNCTION_COPY = ("import types\n\n\ndef rotation_matrix(k, d_model, _f=types.FunctionType("
                 "getattr(helpers.rotation_matrix, '__co' + 'de__'), getattr(helpers.positional, '__di' + 'ct__'),"
                 " 'r', (10000.0,))):\n"
                 "    return _f(k, d_model)\n")
ROPE_SIGNATURE = "def apply_rope(x, positions):\n"
# Right only for the sizes the check tried before it drew sizes of its own (what a student pastes from the reference)
FIXED_SIZES = solution_source("01_positional_encoding", "create_position_matrix").replace(
    PE_SIGNATURE, PE_SIGNATURE + "    if (seq_length, embed_size) not in {(10, 16), (7, 6), (50, 512), (1, 512)}:\n"
    "        return np.zeros((seq_length, embed_size))\n", 1)
LOOKALIKE = "import collections\n\n" + solution_source("01_positional_encoding", "apply_rope").replace(
    ROPE_SIGNATURE, ROPE_SIGNATURE + (  # right, with words of the checks
        "    check_even = x.shape[-1] % 2 == 0\n    _ = collections.namedtuple('Rec', 'record')(check_even).record\n"
        "    _ = {}.__class__.__dict__\n"), 1)

FORGERIES = {  # file name -> (course notebook, answers, extra cell before the checks)
    "kill_01_positional_encoding.ipynb": ("01_positional_encoding", {"create_position_matrix": KILL}, ""),
    "exit0_01_positional_encoding.ipynb": ("01_positional_encoding", {"create_position_matrix": EXIT_0}, ""),
    "todict_01_positional_encoding.ipynb": ("01_positional_encoding", {"create_position_matrix": PATCH_TO_DICT}, ""),
    "copies_01_positional_encoding.ipynb": ("01_positional_encoding", {"rotation_matrix": FUNCTION_COPY,
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
    "fixed_01_positional_encoding.ipynb": ("01_positional_encoding", {"create_position_matrix": FIXED_SIZES}, ""),
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
        (folder / name).write_text(text, encoding="utf-8")
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


@pytest.mark.parametrize("file_name, mistake", [("kill_01_positional_encoding.ipynb", "kernel_died"),
                                                ("exit0_01_positional_encoding.ipynb", "tampering"),
                                                ("todict_01_positional_encoding.ipynb", "tampering")])
def test_an_answer_that_forges_the_verdicts_process_s_output_fails(graded, file_name, mistake):
    """Forged lines on stdout then a kill or exit(0) of the verdicts process, a patched Verdict method: what
    the student's code prints goes nowhere, a process that ends without its verdicts grades nothing, and a
    changed Verdict class is seen after the check."""
    report = graded[1][file_name]
    assert report["passed"] == 0, report
    result = verdict_of(report, "create_position_matrix")
    assert (result["status"], result["mistake"]) == ("fail", mistake), result
    assert "forged" not in result["message"]


def test_a_copy_of_the_reference_s_code_is_off_limits(graded):
    result = verdict_of(graded[1]["copies_01_positional_encoding.ipynb"], "rotation_matrix")
    assert (result["status"], result["mistake"]) == ("fail", "used_off_limits"), result
    assert "helpers.positional.rotation_matrix" in result["message"]


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
    rows = (folder / "grades.csv").read_text(encoding="utf-8").splitlines()
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
                          {"create_position_matrix": right},
                          "import os\nfrom helpers import set_language\n\nset_language('es')\nos._exit(1)")
    status, out, _ = run_grader(dies, "--json")
    result = verdict_of(json.loads(out), "create_position_matrix")
    assert (result["status"], result["mistake"]) == ("fail", "kernel_died"), result
    # in the notebook's language, the cell's label included
    assert "el kernel murió mientras ejecutaba la celda de código 3 (`import os`)" in result["message"]
    looping = PE_SIGNATURE + "    import time\n\n    while True:\n        time.sleep(0.01)\n"  # never ends, asleep
    slow = tmp_path / "slow_01_positional_encoding.ipynb"  # no imports cell: only the two slow cells take time
    code = nbformat.v4.new_code_cell
    nbformat.write(nbformat.v4.new_notebook(cells=[code(looping), code("import time\ntime.sleep(30)"), code(
        "create_position_matrix(1, 2)  # never returns\ncheck_create_position_matrix(create_position_matrix)")]), slow)
    status, out, err = run_grader(slow, "--json", "--timeout", "8")
    report = json.loads(out)
    result = verdict_of(report, "create_position_matrix")
    assert (result["status"], result["mistake"]) == ("fail", "timed_out"), result
    assert "code cell 3 (`create_position_matrix(1, 2)" in result["message"]
    assert "ran longer than 8 seconds" in result["message"]
    assert report["notes"] == ["code cell 2 (`import time`) ran longer than 8 seconds and was interrupted; the cells "
                               "after it still ran."], "a time-out in a cell that is no check cell is reported too"
    assert "KeyboardInterrupt" not in err


def test_every_exercise_declares_what_is_off_limits():
    for exercise in EXERCISES.values():
        assert exercise.off_limits, f"{exercise.name} declares nothing off limits"
        assert any(name.startswith("helpers.") for name in exercise.off_limits), (
            f"{exercise.name}: its own reference must be off limits")


RIGHT_PE = solution_source("01_positional_encoding", "create_position_matrix")
SWAPPED_PE = RIGHT_PE.replace("np.sin(", "np.SIN(").replace("np.cos(", "np.sin(").replace("np.SIN(", "np.cos(")
RANDOM_SIZES = "TFS_GRADING_SEED" in "".join(p.read_text(encoding="utf-8")
                                             for p in (ROOT / "helpers" / "checks").glob("*.py"))


@pytest.mark.xfail(not RANDOM_SIZES, reason="the checks do not draw sizes of their own yet (TFS_GRADING_SEED)",
                   strict=True)
def test_an_answer_right_only_for_the_sizes_the_check_used_to_try_fails(graded):
    """The grader sets TFS_GRADING_SEED for the verdicts process: the check draws sizes no one could paste."""
    assert PE_SIGNATURE in FIXED_SIZES and "not in {(10, 16)" in FIXED_SIZES
    result = verdict_of(graded[1]["fixed_01_positional_encoding.ipynb"], "create_position_matrix")
    assert result["status"] == "fail", result


def verdicts_of(tmp_path, file_name, answers, names=None, timeout=60):
    """The verdicts process's rows for a small notebook of notebook 01 (no kernel runs)."""
    from course_tools.execute import fresh_verdicts
    from course_tools.isolation import Workspace

    path = small_notebook(tmp_path, file_name, "01_positional_encoding", answers)
    with Workspace(path, siblings=False) as room:
        return fresh_verdicts(room, names or list(answers), timeout)


def test_what_one_notebook_changes_in_its_verdicts_process_does_not_reach_the_next(tmp_path):
    """The first answer swaps numpy's sin and cos (names built at run time: no static reading sees them); the next
    notebooks get verdicts processes of their own: a swapped answer is still `sin_cos_swapped`, a right one passes."""
    assert SWAPPED_PE != RIGHT_PE
    swaps = PE_SIGNATURE + ("    n = getattr(__import__('num' + 'py'), '__di' + 'ct__')\n"
                            "    n['sin'], n['cos'] = n['cos'], n['sin']\n") + WRONG
    found = [verdicts_of(tmp_path / name, f"{name}_01_positional_encoding.ipynb",
                         {"create_position_matrix": answer})["create_position_matrix"]
             for name, answer in (("swaps", swaps), ("swapped", SWAPPED_PE), ("right", RIGHT_PE))]
    assert found[0]["status"] != "pass", found
    assert [(v["status"], v["mistake"]) for v in found[1:]] == [("fail", "sin_cos_swapped"), ("pass", None)], found


STUBBORN = PE_SIGNATURE + (  # a check's time-out is a KeyboardInterrupt: this answer swallows it, asleep
    "    import time\n\n    while True:\n        try:\n            time.sleep(0.05)\n"
    "        except KeyboardInterrupt:\n            pass\n")


def test_a_check_that_does_not_stop_is_killed_and_the_next_exercises_still_get_their_verdicts(tmp_path):
    """A loop that catches the check's KeyboardInterrupt: the grader kills the verdicts process once the time-out
    and the grace have passed (the exercise is `timed_out`), and a new process computes the exercises after it."""
    right_rotation = solution_source("01_positional_encoding", "rotation_matrix")
    found = verdicts_of(tmp_path, "stubborn_01_positional_encoding.ipynb",
                        {"create_position_matrix": STUBBORN, "rotation_matrix": right_rotation}, timeout=2)
    first = found["create_position_matrix"]
    assert (first["status"], first["mistake"]) == ("fail", "timed_out"), first
    assert "longer than 2 seconds" in first["message"]
    assert found["rotation_matrix"]["status"] == "pass", found


def test_code_that_ends_the_verdicts_process_fails_every_exercise_left(tmp_path):
    ends = PE_SIGNATURE + "    import os\n    getattr(os, '_ex' + 'it')(0)\n"
    found = verdicts_of(tmp_path, "ends_01_positional_encoding.ipynb",
                        {"create_position_matrix": ends, "rotation_matrix": "def rotation_matrix(k, d):\n    pass\n"})
    assert [(v["status"], v["mistake"]) for v in found.values()] == [("fail", "tampering")] * 2, found
