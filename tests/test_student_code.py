"""Loading the student's definitions from a saved notebook, and choosing theirs or the reference."""

import json
import sys

import nbformat
import numpy as np
import pytest

import helpers
from helpers.student_code import load_definitions, student_or_reference

from conftest import ROOT

STUDENT = """def create_position_matrix(seq_length, embed_size):
    position_matrix = np.zeros((seq_length, embed_size))
    for pos in range(seq_length):
        for i in range(0, embed_size, 2):
            angle = pos / 10000 ** (i / embed_size)
            position_matrix[pos, i] = np.{even}(angle)
            position_matrix[pos, i + 1] = np.{odd}(angle)
    return position_matrix
"""
RIGHT, SWAPPED = STUDENT.format(even="sin", odd="cos"), STUDENT.format(even="cos", odd="sin")
PARTS = {"create_position_matrix": (helpers.check_create_position_matrix, helpers.positional_encoding),
         "rotation_matrix": (helpers.check_rotation_matrix, helpers.rotation_matrix)}


def notebook(tmp_path, *sources, name="01_positional_encoding.ipynb"):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(s) for s in sources]
    path = tmp_path / name
    nbformat.write(nb, path)
    return path


def test_only_imports_and_definitions_run(tmp_path):
    path = notebook(tmp_path, "%matplotlib inline\nimport numpy as np\nSIDE_EFFECT = 1\nraise SystemExit('no')",
                    RIGHT, "print('this must not run')\nx = create_position_matrix(2, 4)")
    found = load_definitions(path)
    assert "SIDE_EFFECT" not in found.namespace and "x" not in found.namespace
    assert np.allclose(found.namespace["create_position_matrix"](3, 4), helpers.positional_encoding(3, 4))
    assert found.sources["create_position_matrix"].startswith("def create_position_matrix(")


def test_broken_cells_are_skipped_and_named(tmp_path):
    path = notebook(tmp_path, "def broken(:\n    pass", "import not_a_module_xyz", RIGHT)
    found = load_definitions(path)
    assert "create_position_matrix" in found.sources
    assert any("cell 0: not valid Python" in s for s in found.skipped)
    assert any("cell 1: ModuleNotFoundError" in s for s in found.skipped)


def test_a_passing_exercise_uses_the_students_code_and_a_failing_one_the_reference(tmp_path, monkeypatch):
    log = tmp_path / "log.jsonl"
    monkeypatch.setenv("HELPERS_GRADE_LOG", str(log))
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")  # another notebook's failing check must not raise
    stub = "def rotation_matrix(k, d_model):\n    raise NotImplementedError()"
    choice = student_or_reference(notebook(tmp_path, RIGHT, stub), PARTS)
    assert choice.origin == {"create_position_matrix": "yours", "rotation_matrix": "reference"}
    assert choice.objects["rotation_matrix"] is helpers.rotation_matrix
    assert choice.objects["create_position_matrix"] is not helpers.positional_encoding
    assert choice.reasons["rotation_matrix"] == "not written yet"
    assert "create_position_matrix: your version" in choice.describe()
    assert not log.exists() or log.read_text(encoding="utf-8") == "", "these verdicts belong to another notebook"


def test_a_wrong_answer_falls_back_with_its_hint(tmp_path):
    choice = student_or_reference(notebook(tmp_path, SWAPPED), PARTS)
    assert choice.origin["create_position_matrix"] == "reference"
    assert "cos on the even columns" in choice.reasons["create_position_matrix"]


def test_the_fingerprint_follows_the_students_code(tmp_path):
    first = student_or_reference(notebook(tmp_path, RIGHT), PARTS).fingerprint()
    same = student_or_reference(notebook(tmp_path, "# a comment cell", RIGHT), PARTS).fingerprint()
    other = student_or_reference(notebook(tmp_path, RIGHT.replace("10000", "10000.0")), PARTS).fingerprint()
    assert first == same != other


def test_the_solution_notebook_is_all_theirs_and_the_pristine_one_all_reference():
    solved = student_or_reference(ROOT / "solutions" / "01_positional_encoding.ipynb", PARTS)
    pristine = student_or_reference(ROOT / "notebooks" / "01_positional_encoding.ipynb", PARTS)
    assert set(solved.origin.values()) == {"yours"} and set(pristine.origin.values()) == {"reference"}


def test_a_missing_or_unreadable_notebook_falls_back_to_the_reference(tmp_path):
    (tmp_path / "bad.ipynb").write_text(json.dumps({"not": "a notebook"})[:5], encoding="utf-8")
    for path in (tmp_path / "missing.ipynb", tmp_path / "bad.ipynb"):
        choice = student_or_reference(path, PARTS)
        assert set(choice.origin.values()) == {"reference"}
    with pytest.raises(ValueError, match="path must name a .ipynb"):
        load_definitions(tmp_path / "x.py")
    with pytest.raises(ValueError, match="parts"):
        student_or_reference(tmp_path / "missing.ipynb", {})


def test_a_json_file_that_is_not_a_notebook_is_a_clear_error(tmp_path):
    for name, content in (("list.ipynb", "[1, 2]"), ("no_cells.ipynb", '{"nbformat": 4}'),
                          ("torn.ipynb", '{"cells": [')):
        (tmp_path / name).write_text(content, encoding="utf-8")
        with pytest.raises(ValueError, match="cannot read the notebook"):
            load_definitions(tmp_path / name)
    choice = student_or_reference(tmp_path / "list.ipynb", PARTS)
    assert set(choice.origin.values()) == {"reference"}


def test_cell_sources_saved_as_one_string_or_as_lines_load_alike(tmp_path):
    lines = {"cells": [{"cell_type": "markdown", "source": ["def hidden():\n", "    pass\n"]},
                       {"cell_type": "code", "source": RIGHT.splitlines(keepends=True)}]}
    whole = {"cells": [{"cell_type": "code", "source": RIGHT}]}
    for name, content in (("lines.ipynb", lines), ("whole.ipynb", whole)):
        (tmp_path / name).write_text(json.dumps(content), encoding="utf-8")
        found = load_definitions(tmp_path / name)
        assert list(found.sources) == ["create_position_matrix"] and found.skipped == []
        assert found.sources["create_position_matrix"] == RIGHT.strip()


def test_loading_a_notebook_does_not_need_nbformat(monkeypatch):
    """nbformat takes two seconds to import; notebook 06 reads notebook 05 without it."""
    monkeypatch.setitem(sys.modules, "nbformat", None)  # `import nbformat` now raises ImportError
    found = load_definitions(ROOT / "solutions" / "05_transformer.ipynb")
    assert {"LayerNorm", "Transformer"} <= set(found.sources) and found.skipped == []


def test_every_reference_comes_from_the_registry():
    """student_code names no reference itself: each part's check and reference are its exercise's."""
    from helpers.checks import EXERCISES
    from helpers.student_code import exercise_defining, notebook_parts, yours_or_reference

    for exercise in EXERCISES.values():
        check, reference = notebook_parts(exercise.notebook)[exercise.defines]
        assert check is exercise.check and reference is exercise.reference_object()
        assert exercise_defining(exercise.defines) is exercise
    assert notebook_parts("05_transformer")["LayerNorm"][1] is helpers.LayerNorm
    assert yours_or_reference(lambda: None, "LayerNorm")[0] is helpers.LayerNorm


def test_a_stub_loaded_from_a_notebook_is_not_written_yet(tmp_path):
    """The cells' source is registered with linecache, as a kernel does: the check reads the stub from it."""
    stub = "def create_position_matrix(seq_length, embed_size):\n    # Your Code Here\n    raise NotImplementedError()"
    choice = student_or_reference(notebook(tmp_path, stub), PARTS)
    assert choice.reasons["create_position_matrix"] == "not written yet"
    edited = student_or_reference(notebook(tmp_path, RIGHT), PARTS)  # the same file, saved again: its new code
    assert edited.origin["create_position_matrix"] == "yours"


def test_magics_are_blanked_and_an_operator_starting_a_continuation_line_stays(tmp_path):
    source = ("%matplotlib inline\ndef label(x):\n    %time y = 1\n    !echo hi\n    return ('%d'\n            % x\n"
              "            if x\n            != 0 else 'zero')")
    found = load_definitions(notebook(tmp_path, source))
    assert found.skipped == [] and found.namespace["label"](3) == "3" and found.namespace["label"](0) == "zero"
