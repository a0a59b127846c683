"""End-to-end grading: execute notebooks through `python -m helpers.grade`."""

import json
import subprocess
import sys

import nbformat
import pytest

from helpers.checks import EXERCISES
from helpers.make_student import BEGIN

from conftest import ROOT, SOLUTIONS, grade, with_answer


@pytest.mark.parametrize("path", SOLUTIONS, ids=lambda p: p.stem)
def test_pristine_student_notebook_grades_all_todo(path):
    code, report = grade(ROOT / "notebooks" / path.name)
    assert code == 1
    assert [e["name"] for e in report["exercises"]] == EXERCISES[path.stem]
    assert [e["status"] for e in report["exercises"]] == ["todo"] * len(EXERCISES[path.stem]), report
    assert report["passed"] == 0 and report["total"] == len(EXERCISES[path.stem])


@pytest.mark.parametrize("path", SOLUTIONS, ids=lambda p: p.stem)
def test_solution_notebook_grades_all_pass(path):
    code, report = grade(path)
    assert code == 0, report
    assert report["passed"] == report["total"] == len(EXERCISES[path.stem])


def test_runaway_cell_is_interrupted_and_graded(tmp_path):
    looping = "def create_position_matrix(seq_length, embed_size):\n    while True:\n        pass\n"
    notebook = with_answer(tmp_path, "01_positional_encoding", "create_position_matrix", looping)
    nb = nbformat.read(notebook, as_version=4)
    (check,) = [c for c in nb.cells if c.source.startswith("check_create_position_matrix(")]
    check.source = "create_position_matrix(1, 2)\n" + check.source  # the call never returns
    nbformat.write(nb, notebook)
    code, report = grade(notebook, "--timeout", "5")
    assert code == 1
    assert report["exercises"][0]["status"] == "fail"
    assert "did not run" in report["exercises"][0]["message"]


def test_unreadable_notebook_exits_2(tmp_path):
    broken = tmp_path / "broken.ipynb"
    broken.write_text("{not json")
    result = subprocess.run([sys.executable, "-m", "helpers.grade", str(broken)], capture_output=True, text=True)
    assert result.returncode == 2 and "cannot read" in result.stderr
    missing = subprocess.run([sys.executable, "-m", "helpers.grade", str(tmp_path / "nope.ipynb"), "--json"],
                             capture_output=True, text=True)
    assert missing.returncode == 2 and "error" in json.loads(missing.stdout)


def test_solution_regions_only_inside_functions():
    for path in SOLUTIONS:
        for cell in nbformat.read(path, as_version=4).cells:
            for line in cell.source.splitlines():
                if line.strip() == BEGIN:
                    assert line.startswith(" "), f"{path.name}: a solution region at top level breaks the student notebook"
