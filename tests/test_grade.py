"""End-to-end grading through `tfs-grade` (course_tools.grade), kept cheap: each notebook executes once.

Notebook executions in this module: 8 in one grader run over a class folder (ana: the pristine student notebooks 01,
06 and 07; beto: the solutions of 01, 03, 05, 06 and 07, the first notebook, the parts of the full model, the two
that train and the GPT, whose models `make checkpoints` trained before), with every output the grader writes (JSON,
CSV, gradebook, feedback pages) + 2 (cut-down notebooks 01 without imports: a check that never returns, a loop that
catches the interrupt; no cell of theirs but the slow one takes time, so that a busy machine cannot time out
another) = 10. The verdicts of
every pristine student notebook are computed in-process (the verdicts process's own code), and every student
notebook runs whole in the browser test; every solution notebook passes every check under strict nbval and under
nbgrader (tests/test_nbgrader.py). The wrong answers (7 more, one per notebook) are in test_grade_wrong_answers.py;
the checks themselves are tested in-process, against many more wrong answers, in tests/test_checks_*.py.
"""

import csv
import json
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import nbformat
import pytest

from course_tools import grade
from course_tools.results import CSV_COLUMNS, exit_status
from course_tools.verdicts import compute
from helpers.checks import exercises_in

from conftest import ROOT, SOLUTIONS, SOLUTION_MARKER, run_grader, with_answer

STEMS = [path.stem for path in SOLUTIONS]
PRISTINE = ["01_positional_encoding", "06_training", "07_gpt"]  # ana's, from notebooks/
# beto's, from solutions/: with notebooks 01, 03 and 05 beside them, notebooks 06 and 07 train with the student's parts
# that solutions/ has, whose models make checkpoints trained (without 03, their keys would differ: trained here)
SOLVED = ["01_positional_encoding", "03_multi_head_attention", "05_transformer", "06_training", "07_gpt"]


def exercise_names(stem):
    return [e.name for e in exercises_in(stem)]


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """One grader run over a class folder, ana's pristine and beto's solved notebooks, with every output:
    {"status", "reports": {(student, stem): report}, "err", "folder"}."""
    root = tmp_path_factory.mktemp("class")
    folder = root / "submitted"
    for student, source, stems in (("ana", "notebooks", PRISTINE), ("beto", "solutions", SOLVED)):
        (folder / student).mkdir(parents=True)
        for stem in stems:
            shutil.copyfile(ROOT / source / f"{stem}.ipynb", folder / student / f"{stem}.ipynb")
    (root / "points.toml").write_text("[points]\ntransformer = 10\n", encoding="utf-8")  # the full model weighs more
    status, out, err = run_grader(folder, "--json", "--jobs", "2", "--csv", root / "grades.csv",
                                  "--gradebook", root / "gradebook.csv", "--feedback", root / "feedback",
                                  "--points", root / "points.toml")
    reports = json.loads(out)
    assert isinstance(reports, list) and len(reports) == len(PRISTINE + SOLVED), "a list, one report a notebook"
    by_student = {(r["student"], next(s for s in STEMS if s in r["notebook"])): r for r in reports}
    return {"status": status, "reports": by_student, "err": err, "root": root}


def test_a_class_with_an_unfinished_notebook_exits_1_and_one_that_passes_everything_0(graded):
    assert graded["status"] == 1
    reports = graded["reports"]
    assert exit_status([reports[("beto", stem)] for stem in SOLVED]) == 0


@pytest.mark.parametrize("stem", PRISTINE)
def test_pristine_student_notebook_grades_all_todo(graded, stem):
    report = graded["reports"][("ana", stem)]
    assert [e["name"] for e in report["exercises"]] == exercise_names(stem)
    assert [(e["status"], e["mistake"]) for e in report["exercises"]] == [("todo", None)] * len(exercise_names(stem)), \
        report
    assert report["passed"] == 0 and report["total"] == len(exercise_names(stem))
    assert report["points"] == 0 and report["max_points"] == sum(e.points for e in exercises_in(stem))


@pytest.mark.parametrize("stem", STEMS)
def test_the_verdicts_of_every_pristine_student_notebook_are_todo(stem):
    """The verdicts process's own code, in-process, on each student notebook as it is handed out."""
    rows = []
    compute(ROOT / "notebooks" / f"{stem}.ipynb", tuple(exercise_names(stem)), 120, rows.append)
    verdicts = [(r["name"], r["status"], r["mistake"]) for r in rows if "checking" not in r]
    assert verdicts == [(name, "todo", None) for name in exercise_names(stem)]


@pytest.mark.parametrize("stem", SOLVED)
def test_solution_notebook_grades_all_pass_with_every_point(graded, stem):
    report = graded["reports"][("beto", stem)]
    assert [e["name"] for e in report["exercises"]] == exercise_names(stem)
    assert [(e["status"], e["mistake"]) for e in report["exercises"]] == [("pass", None)] * len(exercise_names(stem)), \
        report
    assert report["passed"] == report["total"] == len(exercise_names(stem))
    weights = {e.name: 10 if e.name == "transformer" else e.points for e in exercises_in(stem)}  # --points
    assert [(e["points"], e["max_points"]) for e in report["exercises"]] == [
        (weights[name],) * 2 for name in exercise_names(stem)]
    assert report["points"] == report["max_points"] == sum(weights.values())


def test_the_csv_names_the_student_and_the_points(graded):
    with open(graded["root"] / "grades.csv", encoding="utf-8", newline="") as table:
        rows = list(csv.DictReader(table))
    assert len(rows) == sum(len(exercise_names(s)) for s in PRISTINE + SOLVED)
    assert {row["student"] for row in rows} == {"ana", "beto"}
    beto = [row for row in rows if row["student"] == "beto"]
    weights = sum(10 if e.name == "transformer" else e.points for s in SOLVED for e in exercises_in(s))
    assert sum(int(row["points"]) for row in beto) == weights


def test_a_bad_points_file_is_refused_before_any_grading(tmp_path):
    (tmp_path / "points.toml").write_text("[points]\nsoftmaks = 2\n", encoding="utf-8")
    status, _, err = run_grader(tmp_path, "--points", tmp_path / "points.toml")
    assert status == 2 and err.startswith("error: ") and "softmaks" in err and "softmax" in err, err


def test_the_gradebook_and_the_feedback_pages_are_written(graded):
    root = graded["root"]
    with open(root / "gradebook.csv", encoding="utf-8-sig", newline="") as table:
        rows = list(csv.reader(table))
    assert rows[0][:5] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]  # Canvas, the default
    assert rows[1][0] == "Points Possible" and sorted(row[0] for row in rows[2:]) == ["ana", "beto"]
    pages = sorted(path.name for path in (root / "feedback").iterdir())
    assert pages == ["ana.html", "beto.html"], pages
    assert "wrote 2 feedback pages" in graded["err"]


def test_runaway_cell_is_interrupted_and_the_rest_still_graded(tmp_path):
    looping = ("def create_position_matrix(seq_length, embed_size):\n    import time\n\n    while True:\n"
               "        time.sleep(0.01)\n")  # a loop that never ends, asleep: no core spins for the 16 s it runs
    path = with_answer(tmp_path, "01_positional_encoding", "create_position_matrix", looping)
    notebook = nbformat.read(path, as_version=4)
    code = [c for c in notebook.cells if c.cell_type == "code"]
    exercises = exercises_in("01_positional_encoding")
    needed = tuple(f"def {e.defines}(" for e in exercises) + tuple(f"{e.check_name}(" for e in exercises)
    keep = [c for c in code if c.source.startswith(needed)]
    assert len(keep) == 2 * len(exercises), "the exercise and check cells of every exercise"
    (check,) = [c for c in keep if c.source.startswith("check_create_position_matrix(")]
    check.source = "create_position_matrix(1, 2)\n" + check.source  # the call never returns
    notebook.cells = keep  # no imports cell: with a busy machine's imports, only the looping cell takes time
    nbformat.write(notebook, path)
    status, out, _ = run_grader(path, "--json", "--timeout", "8")
    report = json.loads(out)  # one notebook file: one object
    assert status == 1
    first, *others = report["exercises"]
    assert (first["name"], first["status"], first["mistake"]) == ("create_position_matrix", "fail", "timed_out")
    assert "ran longer than 8 seconds and was interrupted" in first["message"]
    assert [(e["name"], e["status"]) for e in others] == [(e.name, "todo") for e in exercises[1:]], (
        "the cells after the interrupt ran")


def test_a_kernel_that_ignores_the_interrupt_is_restarted_and_the_rest_still_graded(tmp_path):
    """A loop that catches KeyboardInterrupt, asleep: killed once the time-out and the grace have passed; the check
    cell after it runs in a new kernel (the stub's verdict, `todo`, says it ran). No cell but that one takes time:
    no import, and the check cell fails at once in the new kernel (the verdict comes from the verdicts process)."""
    code = nbformat.v4.new_code_cell
    stubborn = ("import time\n\nwhile True:\n    try:\n        time.sleep(0.05)\n    except KeyboardInterrupt:\n"
                "        pass\n")
    path = tmp_path / "stubborn_01_positional_encoding.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[
        code("def create_position_matrix(seq_length, embed_size):\n    raise NotImplementedError()\n"),
        code(stubborn), code("check_create_position_matrix(create_position_matrix)")]), path)
    status, out, _ = run_grader(path, "--json", "--timeout", "3")
    report = json.loads(out)
    first = report["exercises"][0]
    assert (first["name"], first["status"]) == ("create_position_matrix", "todo"), report
    assert report["notes"] == [
        "code cell 2 (`import time`) ran longer than 3 seconds and was interrupted; the cells after it still ran.",
        "code cell 2 (`import time`) went on running after it was interrupted, so its kernel was stopped 5 seconds "
        "later; the cells after it ran in a new kernel."], report


def test_unreadable_notebook_exits_2(tmp_path):
    broken = tmp_path / "broken.ipynb"
    broken.write_text("{not json", encoding="utf-8")
    result = subprocess.run([sys.executable, "-m", "course_tools.grade", str(broken)], capture_output=True, text=True,
                            encoding="utf-8", timeout=300)
    assert result.returncode == 2 and "cannot read" in result.stderr
    status, out, _ = run_grader(tmp_path / "nope.ipynb", "--json")
    assert status == 2 and "error" in json.loads(out)
    empty = tmp_path / "empty_folder"
    empty.mkdir()
    status, out, _ = run_grader(empty, "--json")
    assert status == 2 and "error" in json.loads(out)[0]


def test_folders_are_searched_recursively_skipping_checkpoints(tmp_path):
    from course_tools.grade import course_notebook, find_notebooks

    for name in ("b/bob_02_attention.ipynb", "a/alice_01_positional_encoding.ipynb", "a/.ipynb_checkpoints/x.ipynb",
                 "a/notes.txt", "top_04_masking.ipynb"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("{}", encoding="utf-8")
    found = find_notebooks([tmp_path])
    assert [p.relative_to(tmp_path).as_posix() for p, problem in found if problem is None] == [
        "a/alice_01_positional_encoding.ipynb", "b/bob_02_attention.ipynb", "top_04_masking.ipynb"]
    assert [course_notebook(p) for p, _ in found] == ["01_positional_encoding", "02_attention", "04_masking"]


def test_solution_regions_only_inside_functions():
    for path in SOLUTIONS:
        for cell in nbformat.read(path, as_version=4).cells:
            for line in cell.source.splitlines():
                if SOLUTION_MARKER.match(line) and "BEGIN" in line:
                    assert line.startswith(" "), \
                        f"{path.name}: a solution region at top level breaks the student notebook"


def test_jobs_must_be_a_positive_integer(tmp_path):
    from course_tools.grade import grade_all
    for jobs in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="jobs"):
            grade_all([tmp_path], jobs=jobs)
    with pytest.raises(SystemExit):
        run_grader(tmp_path, "--jobs", "0")


def test_the_grader_runs_each_notebook_down_to_its_last_check_cell():
    from course_tools.grade import through_last_check

    markdown, code = nbformat.v4.new_markdown_cell, nbformat.v4.new_code_cell
    notebook = nbformat.v4.new_notebook(cells=[
        code("import helpers"), code("def softmax(x):\n    return x"), code("check_softmax(softmax)"),
        markdown("Call `check_causal_mask(causal_mask)` again whenever you like."),
        code("helpers.check_causal_mask (causal_mask)  # a call of the registry, however it is written"),
        code("# an experiment after the last check\nplot_everything()"), markdown("The end.")])
    trimmed = through_last_check(notebook)
    kernel_runs = [c.source for c in notebook.cells[:5]]
    kernel_runs[2] = kernel_runs[4] = "pass  # its check runs elsewhere"  # the verdicts process calls the checks
    assert [c.source for c in trimmed.cells] == kernel_runs
    assert len(notebook.cells) == 7 and notebook.cells[2].source == "check_softmax(softmax)", "the notebook given stays"
    mixed = nbformat.v4.new_notebook(cells=[code("x = 1\ncheck_softmax(\n    softmax)\nprint(x)  # check_softmax(y)")])
    assert through_last_check(mixed).cells[0].source == "x = 1\n\n\nprint(x)  # check_softmax(y)", "the rest runs"
    notebook.cells.append(code("check_softmax(softmax)  # a student checks again at the very end"))
    assert len(through_last_check(notebook).cells) == 8
    unchecked = nbformat.v4.new_notebook(cells=[code("x = 1"), code("check_nothing_of_ours(x)"), markdown("…")])
    assert len(through_last_check(unchecked).cells) == 3, "a notebook that calls no check runs whole"
    for path in SOLUTIONS:  # the course's own notebooks: the last check cell is the last exercise's
        whole = nbformat.read(path, as_version=4)
        kept = through_last_check(whole).cells
        last = exercises_in(path.stem)[-1]
        assert whole.cells[len(kept) - 1].source.startswith(f"{last.check_name}("), (path.name, len(kept))


def test_what_cannot_be_read_is_listed_as_not_graded(tmp_path, monkeypatch):
    """A link that leads nowhere, a folder that cannot be read, a file that cannot be read: each is an error of its
    own in the text, the JSON and the CSV, never skipped silently."""
    import os

    from course_tools import grade

    (tmp_path / "gone_01_positional_encoding.ipynb").symlink_to(tmp_path / "nowhere.ipynb")
    locked = tmp_path / "locked"
    locked.mkdir()
    (locked / "x_02_attention.ipynb").write_text("{}", encoding="utf-8")
    scandir = os.scandir

    def refusing(path="."):
        if Path(path) == locked:
            raise PermissionError(13, "Permission denied", str(path))
        return scandir(path)

    monkeypatch.setattr(grade.os, "scandir", refusing)
    found = dict(grade.find_notebooks([tmp_path, tmp_path / "dangling.ipynb"]))
    assert "which does not exist" in found[tmp_path / "gone_01_positional_encoding.ipynb"]
    assert "the folder cannot be read" in found[locked]
    assert found[tmp_path / "dangling.ipynb"] is None, "a missing argument is read, and reported, by grade()"
    status, out, err = run_grader(tmp_path, "--json", "--csv", tmp_path / "grades.csv")
    reports = {Path(r["notebook"]).name: r for r in json.loads(out)}
    assert status == 2 and set(reports) == {"gone_01_positional_encoding.ipynb", "locked"}
    assert all("error" in r for r in reports.values()) and err.count("error: ") == 2
    rows = (tmp_path / "grades.csv").read_text(encoding="utf-8").splitlines()
    assert sum(",error," in row for row in rows) == len(exercises_in("01_positional_encoding")) + 1
    if os.geteuid() != 0:  # root reads any file
        unreadable = tmp_path / "shut_01_positional_encoding.ipynb"
        unreadable.write_text("{}", encoding="utf-8")
        unreadable.chmod(0)
        assert "cannot read" in grade.grade_all([unreadable])[0]["error"]


def test_each_notebook_s_rows_are_on_disk_as_soon_as_it_is_graded(tmp_path, monkeypatch):
    """A run that dies after its first notebook (a crash, a full disk) keeps that notebook's rows."""
    from course_tools import grade

    first = {"notebook": "a/alice_02_attention.ipynb", "student": "alice", "sha256": "0" * 64, "isolated": True,
             "passed": 1, "total": 1, "points": 2, "max_points": 2,
             "exercises": [{"name": "softmax", "status": "pass", "mistake": None, "message": "correct!", "points": 2,
                            "max_points": 2}]}

    def dies_after_one(*args, **kwargs):
        yield first
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(grade, "grade_each", dies_after_one)
    table = tmp_path / "grades.csv"
    with pytest.raises(OSError):
        run_grader(tmp_path, "--csv", table, "--json")
    header, row = table.read_text(encoding="utf-8").splitlines()
    assert header == ",".join(CSV_COLUMNS)
    assert row.startswith('a/alice_02_attention.ipynb,02_attention,softmax,pass,,alice,2,2,"course ')


def test_jobs_default_to_the_cores_this_process_may_use():
    import os

    from course_tools.grade import CORES, _parser

    assert _parser().parse_args(["x.ipynb"]).jobs == CORES >= 1
    if hasattr(os, "sched_getaffinity"):  # Linux: the cores this process may run on
        assert CORES == len(os.sched_getaffinity(0))


def test_notebooks_graded_at_once_are_parsed_one_at_a_time():
    """ast.parse in two threads at once can raise SystemError on Python 3.11 (CPython issue 106905; it failed a
    --jobs 2 run of tests/test_isolation.py): a grading thread waits for the lock that another holds."""
    trees = []
    with grade.PARSING:
        waiting = threading.Thread(target=lambda: trees.append(grade.parse_cell("%time\nx = 1")))
        waiting.start()
        waiting.join(timeout=0.5)
        assert waiting.is_alive() and not trees, "parse_cell did not wait for the lock"
    waiting.join()
    assert [type(node).__name__ for node in trees[0].body] == ["Assign"]  # the magic blanked
