"""A real nbgrader course built from solutions/ by docs/instructors.md's own commands: the registry's metadata grades
what it should.

One module-scoped fixture runs that page's nbgrader commands exactly as written (only the line naming the
course's folder set to this checkout), in a new bash whose PATH holds no environment: its config file, the loop
that makes each solution notebook an assignment and releases it, then its autograde line for each assignment and
its export line. Before that, notebook 01 of every edition (editions/<language>/) is put into assignment
01_positional_encoding as `01_positional_encoding_<language>`. Three students hand in:

    release    notebooks 01 and 05 as nbgrader released them         -> 0 points (the pristine student
                                                                            notebooks, which carry the same
                                                                            cells, all run in the browser test)
    solutions  the seven English solution notebooks                      -> every exercise's points; the editions'
                                                                            notebooks of assignment 01, absent, 0
    swapped    notebook 01 in English and in every edition, with sin     -> all points of 01 but those of
               and cos swapped in create_position_matrix                    create_position_matrix, the hint in
                                                                            the notebook's language

Every submitted notebook is cut after its last check cell: the cells after it cannot change a grade (strict
nbval runs the solutions whole, the browser test the student notebooks).
"""

from __future__ import annotations

import csv
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest
from nbgrader.api import Gradebook, MissingEntry

from course_tools import translate
from helpers.checks import EXERCISES, exercises_in

from conftest import ROOT, SOLUTIONS

EDITIONS = sorted(translate.LANGUAGES)  # es, pt, vi: notebook "01_positional_encoding_<language>"
STUDENTS = ("release", "solutions", "swapped")
NOTEBOOK_01 = "01_positional_encoding"
ASSIGNMENTS = [path.stem for path in SOLUTIONS]  # one per notebook, named after it
RELEASED = (NOTEBOOK_01, "05_transformer")  # the release notebooks submitted unanswered


def readme_blocks(language: str) -> list[str]:
    """The fenced blocks of a language ("bash", "python") in docs/instructors.md's nbgrader section (what this test
    runs: edit them there and this test runs the edit)."""
    text = (ROOT / "docs" / "instructors.md").read_text(encoding="utf-8")
    section = text[text.index("## nbgrader on JupyterHub"):]
    return re.findall(rf"```{language}\n(.*?)```", section, re.S)


def _bash(root: Path, script: str) -> subprocess.CompletedProcess:
    """Run a block of docs/instructors.md in a new bash in the course root, as a new shell has it: no environment
    on PATH."""
    venv_bin = str(Path(sys.executable).parent)
    path = os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep) if p and p != venv_bin)
    env = {key: value for key, value in os.environ.items() if key not in {"VIRTUAL_ENV", "NBGRADER_EXECUTION"}}
    env |= {"PATH": path or "/usr/bin:/bin"}
    env.setdefault("MPLCONFIGDIR", str(ROOT / ".cache" / "matplotlib"))
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    result = subprocess.run(["bash", "-e", "-c", script], cwd=root, env=env, capture_output=True, text=True,
                            timeout=1800)
    if result.returncode != 0:
        pytest.fail(f"the instructors' guide's commands exited {result.returncode}:\n{script}\n"
                    f"{result.stdout[-3000:]}\n{result.stderr[-6000:]}")
    return result


def _grade_id(cell) -> str | None:
    return cell.metadata.get("nbgrader", {}).get("grade_id")


def _swap_sin_and_cos(notebook: nbformat.NotebookNode) -> None:
    (cell,) = [c for c in notebook.cells if _grade_id(c) == "create_position_matrix_answer"]
    swapped = cell.source.replace("np.sin(", "SIN(").replace("np.cos(", "np.sin(").replace("SIN(", "np.cos(")
    assert swapped != cell.source and "np.sin(" in swapped, "the solution of create_position_matrix changed shape"
    cell.source = swapped


def _edition_01(language: str) -> str:
    """The name of an edition's notebook 01 in assignment 01_positional_encoding."""
    return f"{NOTEBOOK_01}_{language}"


def _assignment(notebook: str) -> str:
    return NOTEBOOK_01 if notebook.startswith(NOTEBOOK_01) else notebook


def _cut_after_the_last_check(notebook: nbformat.NotebookNode) -> None:
    """Drop the cells after the last graded (check) cell: they cannot change a grade."""
    last = max(i for i, c in enumerate(notebook.cells) if c.metadata.get("nbgrader", {}).get("grade"))
    del notebook.cells[last + 1:]


def _hand_in(root: Path, student: str, notebook: nbformat.NotebookNode, name: str) -> None:
    _cut_after_the_last_check(notebook)
    folder = root / "submitted" / student / _assignment(name)
    folder.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, folder / f"{name}.ipynb")


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """The course root after autograding, and the scores read back from gradebook.db:
    {student: {notebook: {"score", "max_score", "grades": {grade_id: (score, max_score)}}}}."""
    started = time.perf_counter()
    root = tmp_path_factory.mktemp("nbgrader-course")
    (config,) = readme_blocks("python")
    (release, grade) = readme_blocks("bash")
    (root / "nbgrader_config.py").write_text(config, encoding="utf-8")
    course_id = re.search(r'course_id = "([^"]+)"', config).group(1)
    (root / "source" / NOTEBOOK_01).mkdir(parents=True)
    for language in EDITIONS:
        shutil.copy(ROOT / "editions" / language / "solutions" / f"{NOTEBOOK_01}.ipynb",
                    root / "source" / NOTEBOOK_01 / f"{_edition_01(language)}.ipynb")
    folder_line = "TFS=path/to/transformers-from-scratch"
    assert release.count(folder_line) == 1, "the guide's block names the course's folder on one line"
    _bash(root, release.replace(folder_line, f"TFS={shlex.quote(str(ROOT))}"))

    source = {path.stem: root / "source" / path.stem / path.name for path in SOLUTIONS}
    for name in RELEASED:
        released = nbformat.read(root / "release" / name / f"{name}.ipynb", as_version=4)
        _hand_in(root, "release", released, name)
    for name, path in source.items():
        _hand_in(root, "solutions", nbformat.read(path, as_version=4), name)
    for name in (NOTEBOOK_01, *map(_edition_01, EDITIONS)):
        notebook = nbformat.read(root / "source" / NOTEBOOK_01 / f"{name}.ipynb", as_version=4)
        _swap_sin_and_cos(notebook)
        _hand_in(root, "swapped", notebook, name)

    autograde, export = grade.strip().splitlines()
    assert autograde.startswith(f"nbgrader autograde {NOTEBOOK_01} ") and export.startswith("nbgrader export")
    activate = release.splitlines()[1]  # the same shell: the environment activated
    logs = [_bash(root, f"TFS={shlex.quote(str(ROOT))}\n{activate}\n{autograde.replace(NOTEBOOK_01, name)}").stderr
            for name in ASSIGNMENTS]
    _bash(root, f"TFS={shlex.quote(str(ROOT))}\n{activate}\n{export}")

    scores: dict[str, dict] = {}
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}", course_id) as gradebook:
        for student in STUDENTS:
            scores[student] = {}
            for assignment in ASSIGNMENTS:
                try:
                    submission = gradebook.find_submission(assignment, student)
                except MissingEntry:
                    continue
                scores[student] |= {nb.name: {"score": nb.score, "max_score": nb.max_score,
                                              "grades": {g.name: (g.score, g.max_score) for g in nb.grades}}
                                    for nb in submission.notebooks}
    with open(root / "grades.csv", encoding="utf-8", newline="") as table:
        exported = list(csv.DictReader(table))
    seconds = time.perf_counter() - started
    print(f"\nnbgrader course built and autograded in {seconds:.0f} s")
    return {"root": root, "scores": scores, "log": "\n".join(logs), "seconds": seconds, "exported": exported}


def _graded(course, student: str, name: str) -> nbformat.NotebookNode:
    return nbformat.read(course["root"] / "autograded" / student / _assignment(name) / f"{name}.ipynb", 4)


def test_the_export_has_a_row_per_student_and_assignment(course):
    rows = {(row["student_id"], row["assignment"]): float(row["score"]) for row in course["exported"]}
    assert {a for _, a in rows} == set(ASSIGNMENTS)
    assert rows[("solutions", "05_transformer")] == sum(e.points for e in exercises_in("05_transformer"))
    assert rows[("release", "05_transformer")] == 0


def test_release_holds_no_solution_and_matches_the_student_notebooks(course):
    for path in SOLUTIONS:
        released = nbformat.read(course["root"] / "release" / path.stem / path.name, as_version=4)
        text = json.dumps([c.source for c in released.cells])
        assert "BEGIN SOLUTION" not in text and "END SOLUTION" not in text
        answers = {_grade_id(c): c.source for c in released.cells if c.metadata.get("nbgrader", {}).get("solution")}
        assert len(answers) == len(exercises_in(path.stem))
        student = nbformat.read(ROOT / "notebooks" / path.name, as_version=4)  # our generator's stubs, same cells
        assert answers == {_grade_id(c): c.source for c in student.cells if _grade_id(c) in answers}
    for language in EDITIONS:  # and each edition's notebook 01, with the stubs of its student notebook
        released = nbformat.read(course["root"] / "release" / NOTEBOOK_01 / f"{_edition_01(language)}.ipynb", 4)
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
    for language in EDITIONS:  # nbgrader scores a notebook of the assignment that was not handed in 0, unexecuted
        assert scores[_edition_01(language)]["score"] == 0 < scores[_edition_01(language)]["max_score"]
    assert "No submitted file" in course["log"]
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
        graded = _graded(course, "release", name)
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
    assert set(scores) == {NOTEBOOK_01, *map(_edition_01, EDITIONS)}  # the one assignment handed in

    # and the failing check cell shows the student the verdict line of the known mistake
    graded = _graded(course, "swapped", NOTEBOOK_01)
    (cell,) = [c for c in graded.cells if _grade_id(c) == "create_position_matrix"]
    errors = [o for o in cell.outputs if o.output_type == "error"]
    assert errors and errors[0].ename == "CheckFailed"
    assert EXERCISES["create_position_matrix"].mistakes["sin_cos_swapped"][:40] in errors[0].evalue


@pytest.mark.parametrize("path", SOLUTIONS, ids=lambda p: p.stem)
def test_check_cells_of_the_solutions_write_nothing_to_stderr(course, path):
    graded = _graded(course, "solutions", path.stem)
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
    graded = _graded(course, "swapped", _edition_01(language))
    (cell,) = [c for c in graded.cells if _grade_id(c) == "create_position_matrix"]
    errors = [o for o in cell.outputs if o.output_type == "error"]
    hint = EXERCISES["create_position_matrix"].mistakes["sin_cos_swapped"]
    translated = tr("create_position_matrix:sin_cos_swapped", hint, in_language=language)
    assert translated != hint
    assert errors and errors[0].ename == "CheckFailed"
    assert translated[:40] in errors[0].evalue
