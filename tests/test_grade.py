"""End-to-end grading: execute notebooks through `python -m helpers.grade`."""

import json
import subprocess
import sys

import nbformat
import pytest

from helpers.checks import EXERCISES
from helpers.make_student import BEGIN

from conftest import ROOT, SOLUTIONS


def grade(path, *extra):
    result = subprocess.run([sys.executable, "-m", "helpers.grade", str(path), "--json", *extra],
                            capture_output=True, text=True, timeout=900)
    return result.returncode, json.loads(result.stdout)


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


def with_answer(tmp_path, name, function_source):
    """A copy of the student notebook 01 where the cell defining `name` holds function_source."""
    notebook = nbformat.read(ROOT / "notebooks" / "01_positional_encoding.ipynb", as_version=4)
    (cell,) = [c for c in notebook.cells if c.cell_type == "code" and c.source.startswith(f"def {name}(")]
    cell.source = function_source
    target = tmp_path / "01_positional_encoding.ipynb"
    nbformat.write(notebook, target)
    return target


def student_answer(even_column, odd_column):
    """create_position_matrix as a student writes it, with the two assignments given."""
    return f"""def create_position_matrix(seq_length, embed_size):
    position_matrix = np.zeros((seq_length, embed_size))
    for pos in range(seq_length):
        for i in range(0, embed_size, 2):
            {even_column}
            {odd_column}
    return position_matrix
"""


WRONG_ANSWERS = {  # hint -> the wrong implementations named in issue #2
    "cos on the even columns": student_answer(
        "position_matrix[pos, i] = np.cos(pos / 10000 ** (i / embed_size))",
        "position_matrix[pos, i + 1] = np.sin(pos / 10000 ** (i / embed_size))"),
    "all the sines first": student_answer(
        "position_matrix[pos, i // 2] = np.sin(pos / 10000 ** (i / embed_size))",
        "position_matrix[pos, embed_size // 2 + i // 2] = np.cos(pos / 10000 ** (i / embed_size))"),
    "uses i where it should use 2i": student_answer(
        "position_matrix[pos, i] = np.sin(pos / 10000 ** (i / 2 / embed_size))",
        "position_matrix[pos, i + 1] = np.cos(pos / 10000 ** (i / 2 / embed_size))"),
    "base looks like 1000 ": student_answer(
        "position_matrix[pos, i] = np.sin(pos / 1000 ** (i / embed_size))",
        "position_matrix[pos, i + 1] = np.cos(pos / 1000 ** (i / embed_size))"),
    "positions start at 1": student_answer(
        "position_matrix[pos, i] = np.sin((pos + 1) / 10000 ** (i / embed_size))",
        "position_matrix[pos, i + 1] = np.cos((pos + 1) / 10000 ** (i / embed_size))"),
}


@pytest.mark.parametrize("hint", list(WRONG_ANSWERS))
def test_wrong_answer_grades_fail_with_its_hint(tmp_path, hint):
    code, report = grade(with_answer(tmp_path, "create_position_matrix", WRONG_ANSWERS[hint]))
    assert code == 1
    first, second = report["exercises"]
    assert first["status"] == "fail" and hint in first["message"], first
    assert second["status"] == "todo"


def test_runaway_cell_is_interrupted_and_graded(tmp_path):
    looping = "def create_position_matrix(seq_length, embed_size):\n    while True:\n        pass\n"
    notebook = with_answer(tmp_path, "create_position_matrix", looping)
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
