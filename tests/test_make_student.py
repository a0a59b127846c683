"""One source per notebook: the committed student notebooks are exactly what the generator makes, and
the nbgrader metadata of every notebook is exactly what the exercise registry gives."""

import json
import shutil

import nbformat
import pytest

from course_tools.make_student import (BEGIN, END, MarkerError, generate, make_student_notebook, render,
                                       strip_solutions)
from course_tools.nbgrader import answer_cell_metadata, check_cell_metadata, expected_metadata, metadata_problems
from helpers.checks import EXERCISES, exercises_in

from conftest import ROOT, SOLUTIONS

NOTEBOOKS = [ROOT / "notebooks" / p.name for p in SOLUTIONS]


def _copy_solutions(tmp_path):
    """A copy of solutions/ (named solutions, as the header cell says) to break on purpose."""
    target = tmp_path / "solutions"
    shutil.copytree(ROOT / "solutions", target)
    return target


def _cell(notebook, grade_id):
    (cell,) = [c for c in notebook.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id]
    return cell


# ---------------------------------------------------------------------------------------- markers
def test_strip_solutions_keeps_indentation_and_surroundings():
    source = "def f(x):\n    y = 1\n    # BEGIN SOLUTION\n    y = x * 2\n    # END SOLUTION\n    return y"
    assert strip_solutions(source) == (
        "def f(x):\n    y = 1\n    # Your Code Here\n    raise NotImplementedError()\n    return y"
    )


def test_markers_are_the_single_hash_form():
    assert (BEGIN, END) == ("# BEGIN SOLUTION", "# END SOLUTION")


@pytest.mark.parametrize(
    "source,problem",
    [(f"{BEGIN}\nx = 1", "never closed"), (f"x = 1\n{END}", "without BEGIN"),
     (f"{BEGIN}\n{BEGIN}\n{END}\n{END}", "inside another region"),
     ("def f():\n    ### BEGIN SOLUTION\n    return 1\n    ### END SOLUTION", "single #"),
     ("def f():\n    ## END SOLUTION", "single #"),
     ("x = 1  # BEGIN SOLUTION\n# END SOLUTION", "alone on its line")],
)
def test_malformed_regions_are_reported(source, problem):
    with pytest.raises(MarkerError, match=problem):
        strip_solutions(source)


def test_stub_that_breaks_python_is_reported():
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(f"if True:\n{BEGIN}\n    x = 1\n{END}")])
    with pytest.raises(MarkerError, match="not valid Python"):
        make_student_notebook(notebook)


def test_the_old_marker_form_in_a_solution_notebook_stops_the_generator(tmp_path, capsys):
    solutions = _copy_solutions(tmp_path)
    path = solutions / SOLUTIONS[0].name
    path.write_text(path.read_text(encoding="utf-8").replace(BEGIN, "### BEGIN SOLUTION"), encoding="utf-8")
    assert generate(solutions, tmp_path / "notebooks") == 2
    assert "single #" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------- drift
def test_committed_student_notebooks_match_the_generator(tmp_path):
    assert SOLUTIONS, "no solution notebooks found"
    assert generate(ROOT / "solutions", ROOT / "notebooks", check=True) == 0, (
        "solutions/ or notebooks/ is stale: run `make student-notebooks`")
    solutions = _copy_solutions(tmp_path)  # writing afresh changes no solution and gives the same files
    assert generate(solutions, tmp_path / "notebooks") == 0
    for path in SOLUTIONS:
        assert (solutions / path.name).read_bytes() == path.read_bytes()
        written = (tmp_path / "notebooks" / path.name).read_text(encoding="utf-8")
        assert written == (ROOT / "notebooks" / path.name).read_text(encoding="utf-8")


def test_check_mode_fails_on_a_stale_notebook(tmp_path, capsys):
    generate(_copy_solutions(tmp_path), tmp_path / "notebooks")
    target = tmp_path / "notebooks" / SOLUTIONS[0].name
    target.write_text(target.read_text(encoding="utf-8").replace("Your Code Here", "Your code here"),
                      encoding="utf-8")
    assert generate(tmp_path / "solutions", tmp_path / "notebooks", check=True) == 1
    assert f"{target} differs" in capsys.readouterr().err


def test_check_mode_fails_on_wrong_metadata_and_writing_restamps_only_the_metadata(tmp_path, capsys):
    solutions = _copy_solutions(tmp_path)
    generate(solutions, tmp_path / "notebooks")
    path = solutions / "01_positional_encoding.ipynb"
    original = path.read_text(encoding="utf-8")
    notebook = nbformat.reads(original, as_version=4)
    check_cell = _cell(notebook, "create_position_matrix")
    check_cell.metadata.nbgrader.points = 5  # typed by hand: not what the registry says
    stray = notebook.cells[0]
    stray.metadata["nbgrader"] = {"schema_version": 3, "grade": False, "solution": False, "locked": True,
                                  "grade_id": "intro"}
    path.write_text(render(notebook), encoding="utf-8")
    capsys.readouterr()
    assert generate(solutions, tmp_path / "notebooks", check=True) == 1
    err = capsys.readouterr().err
    index = notebook.cells.index(check_cell)
    assert f"{path}, cell {index}: nbgrader metadata" in err and "'points': 2" in err  # the registry's
    assert f"{path}, cell 0: carries nbgrader metadata" in err
    assert path.read_text(encoding="utf-8") != original, "--check writes nothing"

    assert generate(solutions, tmp_path / "notebooks") == 0
    assert path.read_text(encoding="utf-8") == original, "writing restamps the metadata, and changes nothing else"
    assert generate(solutions, tmp_path / "notebooks", check=True) == 0


@pytest.mark.parametrize("kind", ["answer", "check"])
def test_check_mode_fails_when_an_exercise_has_no_cell(tmp_path, capsys, kind):
    solutions = _copy_solutions(tmp_path)
    path = solutions / "02_attention.ipynb"
    notebook = nbformat.read(path, as_version=4)
    if kind == "answer":
        cell = _cell(notebook, "softmax_answer")
        cell.source = cell.source.replace("def softmax(", "def my_softmax(")
    else:
        notebook.cells.remove(_cell(notebook, "softmax"))
    path.write_text(render(notebook), encoding="utf-8")
    assert generate(solutions, tmp_path / "notebooks", check=True) == 1
    err = capsys.readouterr().err
    assert f"{path}: exercise 'softmax' needs exactly one {kind} cell" in err
    assert generate(solutions, tmp_path / "notebooks") == 2, "nothing to stamp: writing refuses too"


def test_a_marker_outside_an_answer_cell_is_reported(tmp_path):
    notebook = nbformat.read(SOLUTIONS[0], as_version=4)
    notebook.cells[3].source += f"\n{BEGIN}\n{END}"
    _, problems = expected_metadata(notebook, SOLUTIONS[0].stem, "nb")
    assert problems == ["nb, cell 3: holds a solution marker but is no exercise's answer cell "
                        "(nbgrader refuses solution regions outside solution cells)."]


def test_check_mode_fails_when_a_registry_notebook_is_missing(tmp_path, capsys):
    solutions = _copy_solutions(tmp_path)
    (solutions / "05_transformer.ipynb").unlink()
    assert generate(solutions, tmp_path / "notebooks", check=True) == 1
    err = capsys.readouterr().err
    for exercise in exercises_in("05_transformer"):
        assert f"exercise '{exercise.name}' of the registry names notebook '05_transformer'" in err


def test_one_notebook_alone_is_stamped_and_generated_and_nothing_else_is_touched(tmp_path, capsys):
    """tfs-make-student solutions/07_gpt.ipynb notebooks: a new notebook, without regenerating the others."""
    solutions = tmp_path / "solutions"
    solutions.mkdir()
    for name in ("02_attention.ipynb", "07_gpt.ipynb"):
        notebook = nbformat.read(ROOT / "solutions" / name, as_version=4)
        for cell in notebook.cells:
            cell.metadata.pop("nbgrader", None)  # as an author writes a new notebook: no metadata yet
        (solutions / name).write_text(render(notebook), encoding="utf-8")
    other = (solutions / "02_attention.ipynb").read_text(encoding="utf-8")
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    (notebooks / "99_stray.ipynb").write_text("{}", encoding="utf-8")  # not this run's business
    assert generate(solutions / "07_gpt.ipynb", notebooks) == 0
    assert sorted(p.name for p in notebooks.iterdir()) == ["07_gpt.ipynb", "99_stray.ipynb"]
    assert (solutions / "02_attention.ipynb").read_text(encoding="utf-8") == other, "the other solution untouched"
    stamped = nbformat.read(solutions / "07_gpt.ipynb", as_version=4)
    assert metadata_problems(stamped, "07_gpt") == []
    student = nbformat.read(notebooks / "07_gpt.ipynb", as_version=4)
    assert student.metadata.tfs.generated_from == "solutions/07_gpt.ipynb"
    assert [c.metadata.get("nbgrader") for c in student.cells] == [c.metadata.get("nbgrader") for c in stamped.cells]
    capsys.readouterr()
    assert generate(solutions / "07_gpt.ipynb", notebooks, check=True) == 0
    assert "1 solution notebooks" in capsys.readouterr().out
    assert generate(solutions / "08_missing.ipynb", notebooks) == 2

# ---------------------------------------------------------------------------------------- metadata
@pytest.mark.parametrize("path", SOLUTIONS + NOTEBOOKS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_nbgrader_metadata_is_the_registry(path):
    notebook = nbformat.read(path, as_version=4)
    stem = path.stem
    if path.parent.name == "solutions":  # the answer cells of a student notebook hold stubs, not markers
        assert metadata_problems(notebook, stem, str(path)) == []
    else:
        solution = nbformat.read(ROOT / "solutions" / path.name, as_version=4)
        assert [c.metadata.get("nbgrader") for c in notebook.cells] == [
            c.metadata.get("nbgrader") for c in solution.cells], "student notebooks keep the solution's metadata"
    stamped = [c for c in notebook.cells if "nbgrader" in c.metadata]
    grade_ids = [c.metadata.nbgrader.grade_id for c in stamped]
    assert len(grade_ids) == len(set(grade_ids)), "grade_ids are unique in a notebook"
    exercises = exercises_in(stem)
    assert exercises, f"the registry has no exercise in {stem}"
    assert len(stamped) == 2 * len(exercises), "only answer and check cells carry nbgrader metadata"
    for exercise in exercises:
        answer, check = _cell(notebook, f"{exercise.name}_answer"), _cell(notebook, exercise.name)
        assert answer.cell_type == check.cell_type == "code"
        assert answer.metadata.nbgrader == answer_cell_metadata(exercise)
        assert check.metadata.nbgrader == check_cell_metadata(exercise)
        assert check.metadata.nbgrader.points == exercise.points
        assert answer.source.startswith((f"def {exercise.defines}(", f"class {exercise.defines}("))
        assert f"{exercise.check_name}(" in check.source
        assert notebook.cells.index(answer) < notebook.cells.index(check)
    for cell in stamped:
        assert not {"checksum", "cell_type"} & set(cell.metadata.nbgrader), "nbgrader adds those itself"


def test_every_registry_exercise_is_in_a_notebook():
    stems = {p.stem for p in SOLUTIONS}
    assert {e.notebook for e in EXERCISES.values()} <= stems


# ---------------------------------------------------------------------------------------- student notebooks
@pytest.mark.parametrize("path", SOLUTIONS, ids=lambda p: p.stem)
def test_student_notebooks_say_where_they_come_from_in_their_metadata_only(path):
    """Nothing in front of the student: the first cell is the solution's first cell; the generated-from
    notice lives in metadata.tfs (compared by --check like every other byte); no nbval marker lines."""
    student = nbformat.read(ROOT / "notebooks" / path.name, as_version=4)
    solution = nbformat.read(path, as_version=4)
    assert student.metadata["tfs"]["generated_from"] == f"solutions/{path.name}"
    assert "make student-notebooks" in student.metadata["tfs"]["note"]
    assert student.cells[0].source == solution.cells[0].source
    assert [c.cell_type for c in student.cells] == [c.cell_type for c in solution.cells]
    ids = [c.id for c in student.cells]
    assert ids[0] == f"{path.stem[:2]}-000" and len(set(ids)) == len(ids)
    assert not any("NBVAL" in c.source for c in student.cells), "test-suite markers are not for students"


def test_nbval_marker_lines_are_dropped_and_nothing_else():
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("# NBVAL_IGNORE_OUTPUT\nx = 1  # NBVAL\n"
                                                                         "    # NBVAL_SKIP\ny = 2")])
    assert make_student_notebook(notebook).cells[0].source == "x = 1  # NBVAL\ny = 2"


def test_a_generated_notebook_records_its_solution_when_the_header_would_have_changed(tmp_path, capsys):
    """The drift test covers the notice: a student notebook whose metadata names another source is stale."""
    generate(_copy_solutions(tmp_path), tmp_path / "notebooks")
    target = tmp_path / "notebooks" / SOLUTIONS[0].name
    notebook = nbformat.read(target, as_version=4)
    notebook.metadata["tfs"]["generated_from"] = "elsewhere.ipynb"
    target.write_text(render(notebook), encoding="utf-8")
    assert generate(tmp_path / "solutions", tmp_path / "notebooks", check=True) == 1
    assert f"{target} differs" in capsys.readouterr().err


@pytest.mark.parametrize("text", ["{not json", '{"cells": "oops"}', "[1, 2, 3]"])
def test_a_solution_that_is_no_notebook_is_a_one_line_error_and_nothing_is_written(tmp_path, capsys, text):
    solutions = _copy_solutions(tmp_path)
    (solutions / "07_broken.ipynb").write_text(text, encoding="utf-8")
    assert generate(solutions, tmp_path / "notebooks") == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {solutions / '07_broken.ipynb'}") and len(err.strip().splitlines()) == 1
    assert "Traceback" not in err
    assert not (tmp_path / "notebooks").exists(), "every notebook is read before anything is written"


def test_the_command_line_reports_a_non_json_notebook_in_one_line(tmp_path):
    import subprocess
    import sys

    (tmp_path / "solutions").mkdir()
    (tmp_path / "solutions" / "01_x.ipynb").write_text('{"cells": [', encoding="utf-8")
    run = subprocess.run([sys.executable, "-m", "course_tools.make_student", str(tmp_path / "solutions"),
                          str(tmp_path / "notebooks")], capture_output=True, text=True, encoding="utf-8",
                          cwd=ROOT)
    assert run.returncode == 2 and "Traceback" not in run.stderr
    path = tmp_path / "solutions" / "01_x.ipynb"
    assert run.stderr.strip() == f"error: {path}:1: not JSON (Expecting value, column 12)"


def test_writes_go_through_a_temporary_file_and_a_rename(tmp_path, monkeypatch):
    """An interrupted write leaves the old file whole, and no temporary file behind."""
    import helpers.notebook_io as notebook_io
    from course_tools.make_student import write_atomically

    assert write_atomically is notebook_io.write_atomically, "one way to write a file whole"
    target = tmp_path / "nb.ipynb"
    target.write_text("old", encoding="utf-8")

    def interrupted(src, dst):
        raise KeyboardInterrupt

    monkeypatch.setattr(notebook_io.os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_atomically(target, "new")
    assert target.read_text(encoding="utf-8") == "old" and [p.name for p in tmp_path.iterdir()] == ["nb.ipynb"]
    monkeypatch.undo()
    write_atomically(target, "new")
    assert target.read_text(encoding="utf-8") == "new" and [p.name for p in tmp_path.iterdir()] == ["nb.ipynb"]


def test_a_written_file_keeps_its_permissions_and_a_new_one_gets_a_plain_files(tmp_path):
    """The temporary file of write_atomically is private (mkstemp); what is left in its place is not."""
    import os
    import stat

    from course_tools.make_student import write_atomically

    plain = tmp_path / "plain.txt"
    plain.write_text("x", encoding="utf-8")  # what open() gives a new file under this umask
    new, kept = tmp_path / "new.ipynb", tmp_path / "kept.ipynb"
    kept.write_text("old", encoding="utf-8")
    os.chmod(kept, 0o640)
    write_atomically(new, "new")
    write_atomically(kept, "new")
    assert stat.S_IMODE(new.stat().st_mode) == stat.S_IMODE(plain.stat().st_mode)
    assert stat.S_IMODE(kept.stat().st_mode) == 0o640


@pytest.mark.parametrize("path", SOLUTIONS, ids=lambda p: p.stem)
def test_solution_and_student_versions_are_complete(path):
    solution = nbformat.read(path, as_version=4)
    student = nbformat.read(ROOT / "notebooks" / path.name, as_version=4)
    code = [c for c in solution.cells if c.cell_type == "code" and c.source.strip()]
    assert all(c.execution_count is not None for c in code), "solution notebooks are stored executed"
    assert not any("Your Code Here" in c.source for c in code), "solutions hold no stubs"
    assert any(BEGIN in c.source for c in code), "every notebook has at least one exercise"
    text = json.dumps([c.source for c in student.cells])
    assert "BEGIN SOLUTION" not in text and "END SOLUTION" not in text, "student notebooks hold no solutions"
    assert all(not c.get("outputs") and c.execution_count is None for c in student.cells if c.cell_type == "code")
    for exercise in exercises_in(path.stem):
        assert "# Your Code Here\n" in _cell(student, f"{exercise.name}_answer").source
