"""One source per notebook: the committed student notebooks are exactly what the generator makes."""

import json

import nbformat
import pytest

from helpers.checks import EXERCISES
from helpers.make_student import BEGIN, END, MarkerError, generate, make_student_notebook, strip_solutions

from conftest import ROOT, SOLUTIONS


def test_strip_solutions_keeps_indentation_and_surroundings():
    source = "def f(x):\n    y = 1\n    ### BEGIN SOLUTION\n    y = x * 2\n    ### END SOLUTION\n    return y"
    assert strip_solutions(source) == (
        "def f(x):\n    y = 1\n    # Your Code Here\n    raise NotImplementedError()\n    return y"
    )


@pytest.mark.parametrize(
    "source,problem",
    [(f"{BEGIN}\nx = 1", "never closed"), (f"x = 1\n{END}", "without BEGIN"),
     (f"{BEGIN}\n{BEGIN}\n{END}\n{END}", "inside another region")],
)
def test_malformed_regions_are_reported(source, problem):
    with pytest.raises(MarkerError, match=problem):
        strip_solutions(source)


def test_stub_that_breaks_python_is_reported():
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(f"if True:\n{BEGIN}\n    x = 1\n{END}")])
    with pytest.raises(MarkerError, match="not valid Python"):
        make_student_notebook(notebook)


def test_committed_student_notebooks_match_the_generator(tmp_path):
    assert SOLUTIONS, "no solution notebooks found"
    assert generate(ROOT / "solutions", ROOT / "notebooks", check=True) == 0, (
        "notebooks/ is stale: run `make student-notebooks`")
    assert generate(ROOT / "solutions", tmp_path) == 0  # and writing them afresh gives the same files
    for path in SOLUTIONS:
        assert (tmp_path / path.name).read_text() == (ROOT / "notebooks" / path.name).read_text()


def test_check_mode_fails_on_a_stale_notebook(tmp_path):
    generate(ROOT / "solutions", tmp_path)
    target = tmp_path / SOLUTIONS[0].name
    target.write_text(target.read_text().replace("Your Code Here", "Your code here"))
    assert generate(ROOT / "solutions", tmp_path, check=True) == 1


@pytest.mark.parametrize("path", SOLUTIONS, ids=lambda p: p.stem)
def test_solution_and_student_versions_are_complete(path):
    solution = nbformat.read(path, as_version=4)
    student = nbformat.read(ROOT / "notebooks" / path.name, as_version=4)
    code = [c for c in solution.cells if c.cell_type == "code" and c.source.strip()]
    assert all(c.execution_count is not None for c in code), "solution notebooks are stored executed"
    assert not any("Your Code Here" in c.source for c in code), "solutions hold no stubs"
    assert any(BEGIN in c.source for c in code), "every notebook has at least one exercise"
    text = json.dumps([c.source for c in student.cells])
    assert BEGIN not in text and END not in text, "student notebooks hold no solutions"
    assert all(not c.get("outputs") for c in student.cells if c.cell_type == "code")
    assert path.stem in EXERCISES, "the grader must know this notebook's exercises"
    for name in EXERCISES[path.stem]:  # each exercise has a check cell that calls its check
        assert any(f"check_{name}(" in c.source for c in code), f"no check cell for {name}"
