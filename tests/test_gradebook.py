"""The --gradebook file against the import rules of Canvas and Moodle (course_tools/gradebook.py's docstring), the
--points file's errors, and the --csv file's columns: from report dicts built here, no notebook executed."""

import csv
import re

import pytest

from course_tools import gradebook, results, versions
from course_tools.gradebook import LAYOUTS, read_points, write_gradebook
from helpers.checks import EXERCISES, exercises_in

PROVENANCE = "course 0.2.0, commit 4e020db5a1b2 + local changes"
ATTENTION = sum(e.points for e in exercises_in("02_attention"))
POSITIONAL = sum(e.points for e in exercises_in("01_positional_encoding"))


def report(student, stem, passed, folder="submitted"):
    """A graded notebook's report: its first `passed` exercises pass, the others are todo."""
    exercises = [{"name": e.name, "status": "pass" if i < passed else "todo", "mistake": None, "message": "",
                  "points": e.points if i < passed else 0, "max_points": e.points}
                 for i, e in enumerate(exercises_in(stem))]
    return {"notebook": f"/class/{folder}/{student}/{stem}.ipynb", "student": student, "sha256": "0" * 64,
            "isolated": True, "exercises": exercises, "passed": passed, "total": len(exercises),
            "points": sum(e["points"] for e in exercises), "max_points": sum(e["max_points"] for e in exercises)}


def unreadable(student, stem):
    return {"notebook": f"/class/submitted/{student}/{stem}.ipynb", "student": student,
            "error": "cannot read: not JSON"}


# ana: all of 02, half of 01; bo: nothing of 02, and an unreadable 01; "José Núñez": only 02, all of it.
REPORTS = [report("ana", "01_positional_encoding", 1), report("ana", "02_attention", 2),
           unreadable("bo", "01_positional_encoding"), report("bo", "02_attention", 0),
           report("José Núñez", "02_attention", 2)]


def written(tmp_path, layout, reports=REPORTS):
    path = tmp_path / f"{layout}.csv"
    write_gradebook(reports, path, layout, PROVENANCE)
    with open(path, encoding="utf-8-sig", newline="") as table:
        return list(csv.reader(table))


def by_student(rows, first_row):
    return {row[0]: dict(zip(rows[0], row)) for row in rows[first_row:]}


# ---------------------------------------------------------------------------------------- Canvas
# Canvas's importer, app/models/gradebook_importer.rb (instructure/canvas-lms): header?, update_column_count,
# NON_ASSIGNMENT_COLUMN_HEADERS, check_for_non_student_row, process_student.
CANVAS_COMPUTED = ["Current Score", "Current Points", "Current Grade", "Final Score", "Final Points", "Final Grade",
                   "Override Score", "Override Grade", "Override Status"]


def canvas_student_columns(header):
    """How many student columns Canvas's importer counts in a header (its update_column_count), or None when it
    refuses the header ("Invalid header row")."""
    if not (len(header) > 3 and "Student" in header[0] and "ID" in header[1]):
        return None
    count = 3
    if re.search(r"SIS\s+Login\s+ID", header[2]):
        count += 1
    elif re.search(r"SIS\s+User\s+ID", header[2]) and re.search(r"SIS\s+Login\s+ID", header[3]):
        count += 2
    return count if "Section" in header[count - 1] else None


def canvas_assignments(header):
    """The columns Canvas imports as assignments: after the student columns, but the totals it computes."""
    return [name for name in header[canvas_student_columns(header):]
            if not re.search("|".join(CANVAS_COMPUTED), name)]


def test_canvas_header_starts_with_student_and_id_and_its_student_columns_end_with_section(tmp_path):
    header = written(tmp_path, "canvas")[0]
    assert header[:5] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
    assert canvas_student_columns(header) == 5


def test_canvas_sis_user_id_is_followed_by_sis_login_id(tmp_path):
    header = written(tmp_path, "canvas")[0]
    assert header[header.index("SIS User ID") + 1] == "SIS Login ID"
    assert canvas_student_columns(["Student", "ID", "SIS User ID", "Section", "x"]) is None, "the rule, checked"


def test_canvas_imports_one_assignment_per_notebook_and_ignores_the_total(tmp_path):
    header = written(tmp_path, "canvas")[0]
    assert canvas_assignments(header) == ["01_positional_encoding", "02_attention"], "in the course's order"
    assert header[-1] == "Final Points" and header[-1] not in canvas_assignments(header)


def test_canvas_points_possible_row_gives_each_notebook_s_max_points(tmp_path):
    header, points_row = written(tmp_path, "canvas")[:2]
    assert "Points Possible" in points_row[0]
    possible = dict(zip(header, points_row))
    assert [possible[name] for name in canvas_assignments(header)] == [str(POSITIONAL), str(ATTENTION)]


def test_canvas_every_other_row_is_a_student(tmp_path):
    rows = written(tmp_path, "canvas")
    assert [row[0] for row in rows[2:]] == ["ana", "bo", "José Núñez"], "one row a student, sorted case aside"
    assert all(len(row) == len(rows[0]) for row in rows)


def test_canvas_provenance_is_only_where_canvas_reads_nothing(tmp_path):
    rows = written(tmp_path, "canvas")
    places = [(r, c) for r, row in enumerate(rows) for c, cell in enumerate(row) if PROVENANCE in cell]
    assert places == [(1, rows[0].index("Section"))], "the Section cell of the Points Possible row"


def test_canvas_finds_a_student_by_login_then_by_name(tmp_path):
    rows = by_student(written(tmp_path, "canvas"), 2)
    for name, row in rows.items():
        assert row["Student"] == row["SIS Login ID"] == name
        assert row["ID"] == row["SIS User ID"] == row["Section"] == "", "an empty ID is not looked up"


def test_canvas_no_grade_is_an_empty_cell(tmp_path):
    rows = by_student(written(tmp_path, "canvas"), 2)
    assert rows["bo"]["01_positional_encoding"] == "", "unreadable: no grade, not a 0"
    assert rows["José Núñez"]["01_positional_encoding"] == "", "not handed in"
    assert rows["bo"]["02_attention"] == "0", "graded, nothing passes: a real 0"


def test_canvas_cells_are_points_earned_and_the_total_their_sum(tmp_path):
    rows = by_student(written(tmp_path, "canvas"), 2)
    first = exercises_in("01_positional_encoding")[0].points
    assert rows["ana"]["01_positional_encoding"] == str(first) and rows["ana"]["02_attention"] == str(ATTENTION)
    assert rows["ana"]["Final Points"] == str(first + ATTENTION) and rows["bo"]["Final Points"] == "0"


# ---------------------------------------------------------------------------------------- Moodle
# Moodle's CSV import: grade/import/csv/classes/load_data.php (map_user_data_with_value, update_grade_item,
# import_new_grade_item, prepare_import_grade_data) and grade/import/grade_import_form.php.
def test_moodle_one_column_identifies_the_user(tmp_path):
    header = written(tmp_path, "moodle")[0]
    assert header[0] == "username" and header.count("username") == 1
    assert len(set(header)) == len(header), "each header is mapped on its own"


def test_moodle_every_line_is_a_user(tmp_path):
    rows = written(tmp_path, "moodle")
    assert [row[0] for row in rows[1:]] == ["ana", "bo", "José Núñez"], "no other rows: an unknown user aborts"


def test_moodle_grade_columns_then_total_and_provenance_left_on_ignore(tmp_path):
    rows = written(tmp_path, "moodle")
    assert rows[0] == ["username", "01_positional_encoding", "02_attention", "total", "graded_by"]
    assert {row[-1] for row in rows[1:]} == {PROVENANCE}


def test_moodle_no_grade_is_a_dash(tmp_path):
    rows = by_student(written(tmp_path, "moodle"), 1)
    assert rows["bo"]["01_positional_encoding"] == rows["José Núñez"]["01_positional_encoding"] == "-"
    assert rows["bo"]["02_attention"] == "0"


def test_moodle_grades_are_numbers_with_a_decimal_point(tmp_path):
    rows = written(tmp_path, "moodle")
    grades = [cell for row in rows[1:] for cell in row[1:-1]]
    assert grades and all(re.fullmatch(r"\d+(\.\d+)?|-", cell) for cell in grades), grades


# ---------------------------------------------------------------------------------------- both
@pytest.mark.parametrize("layout", LAYOUTS)
def test_utf8_with_a_byte_order_mark_for_excel_and_crlf_lines(tmp_path, layout):
    written(tmp_path, layout)
    data = (tmp_path / f"{layout}.csv").read_bytes()
    assert data.startswith(b"\xef\xbb\xbf") and "José Núñez".encode() in data
    assert data.count(b"\r\n") == data.count(b"\n") > 0


@pytest.mark.parametrize("layout", LAYOUTS)
def test_written_whole_or_not_at_all(tmp_path, layout, monkeypatch):
    path = tmp_path / "gradebook.csv"
    path.write_text("the old gradebook", encoding="utf-8")

    def fails(*args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(gradebook, "gradebook_rows", lambda *args: [["x"], fails()])
    with pytest.raises(OSError):
        write_gradebook(REPORTS, path, layout, PROVENANCE)
    assert path.read_text(encoding="utf-8") == "the old gradebook"
    assert [p.name for p in tmp_path.iterdir()] == ["gradebook.csv"], "no temporary file left"


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_notebook_handed_in_twice_counts_its_best_file(tmp_path, layout):
    twice = [report("ana", "02_attention", 2, "late"), report("ana", "02_attention", 0),
             unreadable("ana", "02_attention")]
    rows = by_student(written(tmp_path, layout, twice), 2 if layout == "canvas" else 1)
    assert rows["ana"]["02_attention"] == str(ATTENTION)


def test_max_points_are_the_graded_reports_own_those_of_points(tmp_path):
    weighted = report("ana", "02_attention", 2)
    for e in weighted["exercises"]:
        e["points"] = e["max_points"] = 10
    weighted["points"] = weighted["max_points"] = 20
    header, points_row = written(tmp_path, "canvas", [unreadable("bo", "02_attention"), weighted])[:2]
    assert dict(zip(header, points_row))["02_attention"] == "20"


def test_a_notebook_only_ever_unreadable_has_its_registry_max_points(tmp_path):
    header, points_row = written(tmp_path, "canvas", [unreadable("bo", "01_positional_encoding")])[:2]
    assert dict(zip(header, points_row))["01_positional_encoding"] == str(POSITIONAL)


def test_a_file_of_no_course_notebook_still_lists_its_student(tmp_path):
    odd = {"notebook": "/class/submitted/cy/notes.ipynb", "student": "cy", "error": "cannot grade: no course notebook"}
    rows = written(tmp_path, "moodle", [odd])
    assert rows == [["username", "total", "graded_by"], ["cy", "0", PROVENANCE]]


def test_an_unknown_layout_is_refused(tmp_path):
    with pytest.raises(ValueError, match="unknown gradebook layout 'blackboard'"):
        write_gradebook(REPORTS, tmp_path / "g.csv", "blackboard", PROVENANCE)
    assert not (tmp_path / "g.csv").exists()


# ---------------------------------------------------------------------------------------- --points
def points_file(tmp_path, text):
    path = tmp_path / "points.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_read_points_gives_the_table(tmp_path):
    assert read_points(points_file(tmp_path, "[points]\nsoftmax = 4\ntransformer = 10\n")) == {
        "softmax": 4, "transformer": 10}
    assert read_points(points_file(tmp_path, "[points]\n")) == {}, "no weight changed"


@pytest.mark.parametrize(("text", "problem"), [
    ("[points\nsoftmax = 4\n", "not TOML (Expected ']'"),
    ("softmax = 4\n", "no [points] table"),
    ("points = 4\n", "no [points] table"),
    ("[points]\nsoftmax = 4\n[weights]\n", "only the [points] table is read, not 'weights'"),
    ("[points]\nsofmax = 4\n", "unknown exercise 'sofmax' in [points] (did you mean softmax"),
    ("[points]\nxyz = 4\n", "unknown exercise 'xyz' in [points] (the exercises are create_position_matrix, "),
    ("[points]\nsoftmax = 0\n", "softmax = 0 in [points]: the points must be a positive whole number"),
    ("[points]\nsoftmax = -2\n", "softmax = -2 in [points]: the points"),
    ("[points]\nsoftmax = 2.5\n", "softmax = 2.5 in [points]: the points"),
    ("[points]\nsoftmax = \"3\"\n", "softmax = '3' in [points]: the points"),
    ("[points]\nsoftmax = true\n", "softmax = True in [points]: the points"),
])
def test_read_points_errors_name_the_file_and_the_problem(tmp_path, text, problem):
    path = points_file(tmp_path, text)
    with pytest.raises(ValueError) as error:
        read_points(path)
    message = str(error.value)
    assert message.startswith(f"--points {path}: ") and problem in message and "\n" not in message, message


def test_read_points_of_a_file_that_cannot_be_read_or_is_not_utf8(tmp_path):
    with pytest.raises(ValueError, match="cannot read it"):
        read_points(tmp_path / "missing.toml")
    path = tmp_path / "latin1.toml"
    path.write_bytes("[points]\n# poids modifiés\nsoftmax = 4\n".encode("latin-1"))
    with pytest.raises(ValueError, match="not TOML \\(not UTF-8 text\\)"):
        read_points(path)


def test_every_registry_exercise_can_be_weighted(tmp_path):
    text = "[points]\n" + "".join(f"{name} = {e.points + 1}\n" for name, e in EXERCISES.items())
    assert read_points(points_file(tmp_path, text)) == {name: e.points + 1 for name, e in EXERCISES.items()}


# ---------------------------------------------------------------------------------------- --csv
def test_csv_columns_keep_the_old_ones_first_and_add_student_points_and_provenance():
    assert results.CSV_COLUMNS == ["student_file", "notebook", "exercise", "status", "mistake",
                                   "student", "points", "max_points", "graded_by"]


def test_csv_rows_give_each_exercise_s_points_and_an_unreadable_notebook_s_registry_max_points():
    rows = results.csv_rows([REPORTS[0], REPORTS[2]], PROVENANCE)
    assert all(list(row) == results.CSV_COLUMNS for row in rows)
    graded = [(r["student"], r["exercise"], r["status"], r["points"], r["max_points"]) for r in rows[:3]]
    assert graded == [("ana", e.name, "pass" if i == 0 else "todo", e.points if i == 0 else 0, e.points)
                      for i, e in enumerate(exercises_in("01_positional_encoding"))]
    errors = [(r["student"], r["status"], r["points"], r["max_points"]) for r in rows[3:]]
    assert errors == [("bo", "error", "", e.points) for e in exercises_in("01_positional_encoding")]
    assert {r["graded_by"] for r in rows} == {PROVENANCE}


def test_csv_log_writes_the_provenance_and_each_notebook_s_rows_as_it_is_graded(tmp_path, monkeypatch):
    monkeypatch.setattr(versions, "provenance", lambda: "course 9.9.9")
    path = tmp_path / "grades.csv"
    log = results.CsvLog(path)  # as grade.py calls it: the provenance asked of course_tools.versions
    log.add(REPORTS[1])
    with open(path, encoding="utf-8", newline="") as table:
        rows = list(csv.DictReader(table))  # before close(): flushed per notebook
    log.close()
    assert list(rows[0]) == results.CSV_COLUMNS and len(rows) == len(exercises_in("02_attention"))
    assert {(r["student"], r["graded_by"]) for r in rows} == {("ana", "course 9.9.9")}
    assert [int(r["points"]) for r in rows] == [e.points for e in exercises_in("02_attention")]
    given = results.CsvLog(tmp_path / "given.csv", PROVENANCE)
    given.add(REPORTS[2])
    given.close()
    assert {r["graded_by"] for r in given.rows} == {PROVENANCE}
