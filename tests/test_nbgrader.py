"""A real nbgrader course built from solutions/: the registry's metadata grades what it should.

One module-scoped fixture builds a throw-away course whose assignment holds the six solution notebooks and,
for every edition (editions/<language>/), its notebook 01 as `01_positional_encoding_<language>`; it
releases them with one `nbgrader generate_assignment` and autogrades three submissions in one
`nbgrader autograde`:

    release    notebooks 01 and 05 as nbgrader released them         -> 0 points (the pristine student
                                                                            notebooks, which carry the same
                                                                            cells, all run in the browser test)
    solutions  the six English solution notebooks                       -> every exercise's points
    swapped    notebook 01 in English and in every edition, with sin     -> all points of 01 but that one
               and cos swapped in create_position_matrix                    create_position_matrix, the hint in
                                                                            the notebook's language; nbgrader
                                                                            scores the absent notebooks 0
                                                                            without running them

Every submitted notebook is cut after its last check cell: the cells after it cannot change a grade (strict
nbval runs the solutions whole, the browser test the student notebooks).

Autograding executes 9 notebooks and one per edition, so this module takes a minute or more; it runs once.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest
from nbgrader.api import Gradebook

from course_tools import translate
from helpers.checks import EXERCISES, exercises_in

from conftest import ROOT, SOLUTIONS

ASSIGNMENT = "ps1"
EDITIONS = sorted(translate.LANGUAGES)  # es, pt, vi: notebook "01_positional_encoding_<language>" of ps1
COURSE = "tfs-test"
STUDENTS = ("release", "solutions", "swapped")
NOTEBOOK_01 = "01_positional_encoding"
RELEASED = (NOTEBOOK_01, "05_transformer")  # the release notebooks submitted unanswered
CONFIG = """\
c = get_config()
c.CourseDirectory.course_id = {course!r}
c.CourseDirectory.root = {root!r}
c.ExecutePreprocessor.timeout = 600
c.ClearSolutions.code_stub = {{"python": "# Your Code Here\\nraise NotImplementedError()"}}  # our generator's stub
"""


def _nbgrader(root: Path, *args: str) -> subprocess.CompletedProcess:
    """Run `nbgrader ARGS` in the course root, the venv's bin first on PATH (nbgrader starts `alembic`)."""
    bin_dir = Path(sys.executable).parent
    env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    env.pop("NBGRADER_EXECUTION", None)
    env.setdefault("MPLCONFIGDIR", str(ROOT / ".cache" / "matplotlib"))
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    result = subprocess.run([str(bin_dir / "nbgrader"), *args], cwd=root, env=env, capture_output=True, text=True,
                            timeout=1800)
    if result.returncode != 0:
        pytest.fail(f"`nbgrader {' '.join(args)}` exited {result.returncode}:\n{result.stdout[-3000:]}\n"
                    f"{result.stderr[-6000:]}")
    return result


def _grade_id(cell) -> str | None:
    return cell.metadata.get("nbgrader", {}).get("grade_id")


def _swap_sin_and_cos(notebook: nbformat.NotebookNode) -> None:
    (cell,) = [c for c in notebook.cells if _grade_id(c) == "create_position_matrix_answer"]
    swapped = cell.source.replace("np.sin(", "SIN(").replace("np.cos(", "np.sin(").replace("SIN(", "np.cos(")
    assert swapped != cell.source and "np.sin(" in swapped, "the solution of create_position_matrix changed shape"
    cell.source = swapped


def _edition_01(language: str) -> str:
    """The name of an edition's notebook 01 in the assignment."""
    return f"{NOTEBOOK_01}_{language}"


def _cut_after_the_last_check(notebook: nbformat.NotebookNode) -> None:
    """Drop the cells after the last graded (check) cell: they cannot change a grade."""
    last = max(i for i, c in enumerate(notebook.cells) if c.metadata.get("nbgrader", {}).get("grade"))
    del notebook.cells[last + 1:]


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """The course root after autograding, and the scores read back from gradebook.db:
    {student: {notebook: {"score", "max_score", "grades": {grade_id: (score, max_score)}}}}."""
    started = time.perf_counter()
    root = tmp_path_factory.mktemp("nbgrader-course")
    (root / "nbgrader_config.py").write_text(CONFIG.format(course=COURSE, root=str(root)))
    source = root / "source" / ASSIGNMENT
    source.mkdir(parents=True)
    for path in SOLUTIONS:
        shutil.copy(path, source / path.name)
    for language in EDITIONS:
        shutil.copy(ROOT / "editions" / language / "solutions" / f"{NOTEBOOK_01}.ipynb",
                    source / f"{_edition_01(language)}.ipynb")
    _nbgrader(root, "generate_assignment", ASSIGNMENT)

    released = root / "release" / ASSIGNMENT
    submissions = {student: root / "submitted" / student / ASSIGNMENT for student in STUDENTS}
    for folder in submissions.values():
        folder.mkdir(parents=True)
    for name in RELEASED:
        notebook = nbformat.read(released / f"{name}.ipynb", as_version=4)
        _cut_after_the_last_check(notebook)
        nbformat.write(notebook, submissions["release"] / f"{name}.ipynb")
    for path in SOLUTIONS:
        notebook = nbformat.read(source / path.name, as_version=4)
        _cut_after_the_last_check(notebook)
        nbformat.write(notebook, submissions["solutions"] / path.name)
    for name in (NOTEBOOK_01, *map(_edition_01, EDITIONS)):
        notebook = nbformat.read(source / f"{name}.ipynb", as_version=4)
        _swap_sin_and_cos(notebook)
        _cut_after_the_last_check(notebook)
        nbformat.write(notebook, submissions["swapped"] / f"{name}.ipynb")

    autograde = _nbgrader(root, "autograde", ASSIGNMENT)  # every student of submitted/ in one run

    scores: dict[str, dict] = {}
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}", COURSE) as gradebook:
        for student in STUDENTS:
            submission = gradebook.find_submission(ASSIGNMENT, student)
            scores[student] = {nb.name: {"score": nb.score, "max_score": nb.max_score,
                                         "grades": {g.name: (g.score, g.max_score) for g in nb.grades}}
                               for nb in submission.notebooks}
    seconds = time.perf_counter() - started
    print(f"\nnbgrader course built and autograded in {seconds:.0f} s")
    return {"root": root, "scores": scores, "log": autograde.stderr, "seconds": seconds}


def test_release_holds_no_solution_and_matches_the_student_notebooks(course):
    for path in SOLUTIONS:
        released = nbformat.read(course["root"] / "release" / ASSIGNMENT / path.name, as_version=4)
        text = json.dumps([c.source for c in released.cells])
        assert "BEGIN SOLUTION" not in text and "END SOLUTION" not in text
        answers = {_grade_id(c): c.source for c in released.cells if c.metadata.get("nbgrader", {}).get("solution")}
        assert len(answers) == len(exercises_in(path.stem))
        student = nbformat.read(ROOT / "notebooks" / path.name, as_version=4)  # our generator's stubs, same cells
        assert answers == {_grade_id(c): c.source for c in student.cells if _grade_id(c) in answers}
    for language in EDITIONS:  # and each edition's notebook 01, with the stubs of its student notebook
        released = nbformat.read(course["root"] / "release" / ASSIGNMENT / f"{_edition_01(language)}.ipynb", 4)
        answers = {_grade_id(c): c.source for c in released.cells if c.metadata.get("nbgrader", {}).get("solution")}
        student = nbformat.read(ROOT / "editions" / language / "notebooks" / f"{NOTEBOOK_01}.ipynb", as_version=4)
        assert answers and answers == {_grade_id(c): c.source for c in student.cells if _grade_id(c) in answers}


def test_the_gradebook_knows_every_exercise_of_the_registry(course):
    editions = {_edition_01(language) for language in EDITIONS}
    for notebook, result in course["scores"]["solutions"].items():
        expected = {e.name: e.points for e in exercises_in(NOTEBOOK_01 if notebook in editions else notebook)}
        assert {g: m for g, (_, m) in result["grades"].items()} == expected, notebook
    assert sum(r["max_score"] for n, r in course["scores"]["solutions"].items() if n not in editions) == sum(
        e.points for e in EXERCISES.values())


def test_solutions_get_full_marks(course):
    scores = course["scores"]["solutions"]
    assert set(scores) == {p.stem for p in SOLUTIONS} | {_edition_01(language) for language in EDITIONS}
    scores = {notebook: result for notebook, result in scores.items() if notebook in {p.stem for p in SOLUTIONS}}
    for notebook, result in scores.items():
        lost = {g: s for g, s in result["grades"].items() if s[0] != s[1]}
        assert not lost, f"{notebook}: the solution loses points on {lost}"
        assert result["score"] == result["max_score"] == sum(e.points for e in exercises_in(notebook))


def test_released_notebooks_get_zero(course):
    for notebook, result in course["scores"]["release"].items():
        assert result["max_score"] > 0
        assert result["score"] == 0, f"{notebook}: the unanswered notebook scores {result['grades']}"
    for name in RELEASED:  # every submitted released notebook was executed, and only its check cells failed
        graded = nbformat.read(course["root"] / "autograded" / "release" / ASSIGNMENT / f"{name}.ipynb", as_version=4)
        failed = {_grade_id(c): o.ename for c in graded.cells if c.cell_type == "code"
                  for o in c.outputs if o.output_type == "error"}
        assert failed == {e.name: "CheckFailed" for e in exercises_in(name)}, name


def test_swapped_sin_and_cos_loses_exactly_that_exercise(course):
    scores = course["scores"]["swapped"]
    first = scores[NOTEBOOK_01]
    assert first["grades"]["create_position_matrix"][0] == 0
    others = [e for e in exercises_in(NOTEBOOK_01) if e.name != "create_position_matrix"]
    for exercise in others:  # every other exercise of notebook 01 keeps its points
        assert first["grades"][exercise.name] == (exercise.points,) * 2
    assert first["score"] == sum(e.points for e in others) < first["max_score"]
    for notebook, result in scores.items():  # nbgrader scores a notebook that was not submitted 0, unexecuted
        if notebook != NOTEBOOK_01 and notebook not in {_edition_01(language) for language in EDITIONS}:
            assert result["score"] == 0 and result["max_score"] > 0
    assert "No submitted file" in course["log"]

    # and the failing check cell shows the student the verdict line of the known mistake
    graded = nbformat.read(course["root"] / "autograded" / "swapped" / ASSIGNMENT / f"{NOTEBOOK_01}.ipynb", 4)
    (cell,) = [c for c in graded.cells if _grade_id(c) == "create_position_matrix"]
    errors = [o for o in cell.outputs if o.output_type == "error"]
    assert errors and errors[0].ename == "CheckFailed"
    assert EXERCISES["create_position_matrix"].mistakes["sin_cos_swapped"][:40] in errors[0].evalue


@pytest.mark.parametrize("path", SOLUTIONS, ids=lambda p: p.stem)
def test_check_cells_of_the_solutions_write_nothing_to_stderr(course, path):
    graded = nbformat.read(course["root"] / "autograded" / "solutions" / ASSIGNMENT / path.name, as_version=4)
    errors = [(i, o.ename) for i, c in enumerate(graded.cells) if c.cell_type == "code"
              for o in c.outputs if o.output_type == "error"]
    assert not errors, f"{path.stem}: cells fail under nbgrader: {errors}"
    tests = [c for c in graded.cells if c.metadata.get("nbgrader", {}).get("grade")]
    assert len(tests) == len(exercises_in(path.stem))
    for cell in tests:
        grade_id = cell.metadata.nbgrader.grade_id
        bad = [o for o in cell.outputs if o.output_type == "error" or o.get("name") == "stderr"]
        assert not bad, f"{path.stem}, check cell {grade_id}: {bad}"
        assert [o.output_type for o in cell.outputs] == ["stream"], f"{path.stem}, {grade_id}: {cell.outputs}"
        assert cell.outputs[0].text.startswith(f"✅ {grade_id}:"), f"{path.stem}, {grade_id}: {cell.outputs}"


def test_autograding_gives_no_warning_about_the_check_cells_output(course):
    """A check cell's value (execute_result) is what nbgrader reads as a partial score: a pass prints its line
    instead, so that nbgrader never warns that the output "cannot be converted to a float"."""
    assert "cannot be converted" not in course["log"] and "partial credit" not in course["log"], course["log"][-3000:]


@pytest.mark.parametrize("language", EDITIONS)
def test_every_edition_is_graded_the_same_with_hints_in_its_language(course, language):
    from helpers.i18n import tr

    first = course["scores"]["swapped"][_edition_01(language)]
    assert first == course["scores"]["swapped"][NOTEBOOK_01]
    graded = nbformat.read(course["root"] / "autograded" / "swapped" / ASSIGNMENT /
                           f"{_edition_01(language)}.ipynb", 4)
    (cell,) = [c for c in graded.cells if _grade_id(c) == "create_position_matrix"]
    errors = [o for o in cell.outputs if o.output_type == "error"]
    hint = EXERCISES["create_position_matrix"].mistakes["sin_cos_swapped"]
    translated = tr("create_position_matrix:sin_cos_swapped", hint, in_language=language)
    assert translated != hint
    assert errors and errors[0].ename == "CheckFailed"
    assert translated[:40] in errors[0].evalue
