"""Who handed in a file (course_tools/students.py), and which version of the course graded it."""

import re
import subprocess

import pytest

from course_tools import students
from course_tools.versions import provenance
from helpers.checks import EXERCISES

from conftest import ROOT, run_grader


@pytest.mark.parametrize("relative, student", [
    ("alice/01_positional_encoding.ipynb", "alice"),  # nbgrader's submitted/<student>/<assignment>/...
    ("alice/ps1/05_transformer.ipynb", "alice"),
    ("bob_02_attention.ipynb", "bob"),  # a file directly in the graded folder: its name without the notebook's
    ("02_attention-carla.ipynb", "carla"),
    ("02_attention.ipynb", "submitted"),  # nothing but the notebook's name: the folder holding it
    ("homework.ipynb", "homework"),
])
def test_the_default_rule(tmp_path, relative, student):
    path = tmp_path / "submitted" / relative
    assert students.student_of(path, [tmp_path / "submitted"]) == student


@pytest.mark.parametrize("roots", [["alice", "bob"], ["alice/01_positional_encoding", "bob/01_positional_encoding"]])
def test_folders_graded_one_per_student_name_their_students(tmp_path, roots):
    """tfs-grade submitted/alice/ submitted/bob/, or nbgrader's submitted/*/01_positional_encoding/: each file is
    named only for its notebook, and its folder (an assignment folder skipped) names its student."""
    root = tmp_path / "submitted"
    paths = [root / folder / "01_positional_encoding.ipynb" for folder in roots]
    assert [students.student_of(path, [root / r for r in roots]) for path in paths] == ["alice", "bob"]


def test_a_file_given_alone_is_named_from_its_own_name(tmp_path):
    assert students.student_of(tmp_path / "dana_04_masking.ipynb", [tmp_path / "dana_04_masking.ipynb"]) == "dana"


def test_the_deepest_graded_folder_holding_a_file_counts(tmp_path):
    (tmp_path / "class" / "ana").mkdir(parents=True)
    path = tmp_path / "class" / "ana" / "01_positional_encoding.ipynb"
    assert students.student_of(path, [tmp_path / "class", tmp_path / "class" / "ana"]) == "ana"  # its own folder
    assert students.student_of(path, [tmp_path / "class"]) == "ana"


def test_a_pattern_names_the_student_by_its_group_or_its_match(tmp_path):
    root = tmp_path / "week3"
    path = root / "2026" / "id-4711" / "01_positional_encoding.ipynb"
    assert students.student_of(path, [root], r"id-(?P<student>\d+)") == "4711"
    assert students.student_of(path, [root], r"id-\d+") == "id-4711"
    assert students.student_of(path, [root], r"nomatch") == "2026/id-4711/01_positional_encoding.ipynb"


def test_a_bad_pattern_is_refused_before_any_grading(tmp_path):
    status, _, err = run_grader(tmp_path, "--student-pattern", "(?P<student>")
    assert status == 2 and err.startswith("error: --student-pattern '(?P<student>' is not a regular expression")


def test_points_are_a_point_per_five_minutes_61_in_all():
    """docs/instructors.md, "Grading with tfs-grade": 61 points in all, 51 in notebooks 01 to 06 and 10 in notebook
    07 (each exercise's against its time: tests/test_notebooks.py)."""
    assert sum(e.points for e in EXERCISES.values() if e.notebook != "07_gpt") == 51
    assert sum(e.points for e in EXERCISES.values()) == 61
    assert (ROOT / "docs" / "instructors.md").read_text(encoding="utf-8").count("61 in all") == 2


def test_provenance_names_the_version_and_the_commit():
    found = re.fullmatch(r"course (\S+), commit ([0-9a-f]{12})( \+ local changes)?", provenance())
    assert found, provenance()
    import helpers

    assert found.group(1) == helpers.__version__
    head = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    assert found.group(2) == head.stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT, capture_output=True,
                           text=True).stdout.strip()
    assert bool(found.group(3)) == bool(dirty)
