"""Grades an LMS imports (``tfs-grade FOLDER --gradebook FILE.csv --gradebook-layout canvas|moodle``), and the
exercise weights of ``--points FILE.toml``.

The gradebook has one row per student (the report's "student": course_tools/students.py), one column per course
notebook graded (named by its file name without .ipynb, such as ``01_positional_encoding``), in the course's order,
and a total. A cell holds the points the student earned in that notebook (out of its max_points: the sum of its
exercises' points, the registry's or those of --points); a student who handed in the same notebook more than once
gets the best of those files. A notebook the student did not hand in, or that could not be graded, has no grade
(see each layout): an unreadable file is the grader's business, not a 0, and a 0 would look like a real grade.
The file is UTF-8 with a byte-order mark, its lines end in CRLF (RFC 4180), and its points are whole numbers.
The byte-order mark is there for Excel, which reads a CSV without one in the computer's legacy code page
(mangling a name like "José"); both LMSs read it: Canvas's importer looks for "Student" *within* the first
header cell, and Canvas writes one itself when a user asks (lib/gradebook_exporter.rb, ``include_bom``);
Moodle's CSV reader removes it (lib/csvlib.class.php, ``trim_utf8_bom``).

canvas: Student, ID, SIS User ID, SIS Login ID, Section, one column per notebook, Final Points; then a row
    "Points Possible" (each notebook's max_points), then a row per student.
  What Canvas's gradebook import (Grades > Import) requires, as its importer reads a file (instructure/canvas-lms,
  app/models/gradebook_importer.rb; the columns also in https://teaching.resources.osu.edu/toolsets/carmencanvas/
  guides/calculating-final-grades/import-csv-file-carmen-grades):
  - the first header cell contains "Student", the second "ID"; then optionally "SIS Login ID", or "SIS User ID"
    followed by "SIS Login ID"; the student columns end with "Section" (else "Invalid header row");
  - every later column is an assignment, found by its title or created, except the totals Canvas computes itself:
    a name containing Current/Final Score, Points or Grade, or Override Score/Grade/Status, is ignored;
  - a row whose first cell contains "Points Possible" sets each assignment's points possible (a new one's too);
    Canvas reads only its assignment cells. Every other row, but a blank or "Muted" one, is a student;
  - a student is found by ID, then SIS User ID, then SIS Login ID (the login), then by name (Student); one not
    found is listed on Canvas's import page, for the instructor to match by hand.
  We write the student in Student and in SIS Login ID (folder names are usually logins: Canvas finds them by
  login, else by name, else asks), and leave ID, SIS User ID and Section empty. The total is "Final Points",
  which Canvas ignores. No grade is an empty cell (Canvas's own "no score"). Which version graded (the
  provenance) is in the Section cell of the Points Possible row, which Canvas never reads: a row of its own would
  be imported as a student, and changing the assignment names would create new assignments at each version.

moodle: username, one column per notebook, total, graded_by (the provenance, on every row).
  What Moodle's CSV grade import (Grades > Import > CSV file) requires (https://docs.moodle.org/311/en/Grade_import;
  grade/import/csv/classes/load_data.php, grade/import/grade_import_form.php):
  - one column identifies the user: the instructor picks it ("Map from") and what it holds ("Map to": userid,
    username, useridnumber or useremail); every other column is mapped to a grade item or "new grade item", or
    left on "ignore", its default;
  - every line is a user, and a user Moodle cannot find aborts the whole import: so no other rows;
  - a grade is a number with a decimal point (or the site's decimal separator); "-", or an empty cell for an
    existing grade item, is no grade; a grade over 100 is refused unless the site allows it (unlimitedgrades).
  Map "username" to username (to useremail or useridnumber when the folders are named by those); leave "total" and
  "graded_by" on ignore (Moodle computes its own course total). No grade is "-", Moodle's own mark: in a column
  mapped to a new grade item, an empty cell would be taken as the grade "" rather than as no grade. Moodle's file has
  no row for the maximum: give each grade item the notebook's max_points (the --csv file's max_points, summed over
  its exercises).
"""

from __future__ import annotations

import csv
import difflib
import io
import tomllib
from pathlib import Path

from helpers.checks import EXERCISES, exercises_in
from helpers.notebook_io import write_atomically

from .results import course_notebook

LAYOUTS = ("canvas", "moodle")
NO_GRADE = {"canvas": "", "moodle": "-"}  # the cell of a notebook not handed in or not graded
CANVAS_STUDENT_COLUMNS = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
CANVAS_TOTAL = "Final Points"  # a name Canvas's importer skips: it computes its own totals
CANVAS_POINTS_ROW = "Points Possible"
MOODLE_USER, MOODLE_TOTAL, MOODLE_PROVENANCE = "username", "total", "graded_by"
BYTE_ORDER_MARK = "\ufeff"


# ---------------------------------------------------------------------------------------- --points
def read_points(path: Path) -> dict[str, int]:
    """The weights of the --points file, {exercise: points}: a TOML file with one table, ``[points]``, of
    ``exercise_name = positive whole number`` (an exercise left out keeps the registry's weight,
    helpers.checks.EXERCISES[name].points). A ValueError with one line naming the file and what is wrong."""
    where = f"--points {path}"
    try:
        with open(path, "rb") as file:
            data = tomllib.load(file)
    except OSError as error:
        raise ValueError(f"{where}: cannot read it ({error.strerror or error})") from None
    except UnicodeDecodeError:
        raise ValueError(f"{where}: not TOML (not UTF-8 text)") from None
    except tomllib.TOMLDecodeError as error:
        raise ValueError(f"{where}: not TOML ({error})") from None
    table = data.get("points")
    if not isinstance(table, dict):
        raise ValueError(f"{where}: no [points] table (write [points], then a line `exercise_name = points` each)")
    others = [key for key in data if key != "points"]
    if others:
        raise ValueError(f"{where}: only the [points] table is read, not {others[0]!r}")
    for name, value in table.items():
        if name not in EXERCISES:
            close = difflib.get_close_matches(name, list(EXERCISES), n=3)
            hint = f"did you mean {' or '.join(close)}?" if close else f"the exercises are {', '.join(EXERCISES)}"
            raise ValueError(f"{where}: unknown exercise {name!r} in [points] ({hint})")
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{where}: {name} = {value!r} in [points]: the points must be a positive whole number")
    return dict(table)


# ---------------------------------------------------------------------------------------- the table
def notebook_of(report: dict) -> str | None:
    """The course notebook a report is of: by its file's name, else (a graded file) by its exercises."""
    stem = course_notebook(Path(report["notebook"]))
    if stem is None and "error" not in report and report.get("exercises"):
        stem = EXERCISES[report["exercises"][0]["name"]].notebook
    return stem


def student_of(report: dict) -> str:
    return report.get("student") or Path(report["notebook"]).stem


def gradebook_table(reports: list[dict]) -> tuple[dict[str, int], dict[str, dict[str, int]]]:
    """({notebook: max_points} of the notebooks graded, in the course's order; {student: {notebook: best points}},
    students sorted, case aside). A notebook only ever unreadable counts its registry points as max_points."""
    maximum: dict[str, int | None] = {}
    grades: dict[str, dict[str, int]] = {}
    for report in reports:
        stem, earned = notebook_of(report), grades.setdefault(student_of(report), {})
        if stem is None:
            continue
        if "error" in report:
            maximum.setdefault(stem, None)
            continue
        if maximum.get(stem) is None:
            maximum[stem] = report["max_points"]
        earned[stem] = max(earned[stem], report["points"]) if stem in earned else report["points"]
    order = list(dict.fromkeys(e.notebook for e in EXERCISES.values()))
    notebooks = {stem: maximum[stem] if maximum[stem] is not None else sum(e.points for e in exercises_in(stem))
                 for stem in sorted(maximum, key=order.index)}
    return notebooks, dict(sorted(grades.items(), key=lambda item: (item[0].casefold(), item[0])))


# ---------------------------------------------------------------------------------------- writing
def gradebook_rows(reports: list[dict], layout: str, provenance: str) -> list[list[str | int]]:
    """The rows of the gradebook file, its header first (see the module's docstring for each layout)."""
    if layout not in LAYOUTS:
        raise ValueError(f"unknown gradebook layout {layout!r}: one of {', '.join(LAYOUTS)}")
    notebooks, grades = gradebook_table(reports)

    def cells(earned: dict[str, int]) -> list[str | int]:
        return [earned.get(stem, NO_GRADE[layout]) for stem in notebooks] + [sum(earned.values())]

    if layout == "canvas":
        blank = [""] * (len(CANVAS_STUDENT_COLUMNS) - 2)
        return [CANVAS_STUDENT_COLUMNS + list(notebooks) + [CANVAS_TOTAL],
                [CANVAS_POINTS_ROW, *blank, f"graded by {provenance}", *notebooks.values(), "(read only)"],
                *([student, "", "", student, "", *cells(earned)] for student, earned in grades.items())]
    return [[MOODLE_USER, *notebooks, MOODLE_TOTAL, MOODLE_PROVENANCE],
            *([student, *cells(earned), provenance] for student, earned in grades.items())]


def write_gradebook(reports: list[dict], path: Path, layout: str, provenance: str) -> None:
    """Write the gradebook of these reports to path, whole or not at all, in an LMS's layout (LAYOUTS)."""
    text = io.StringIO()
    csv.writer(text, lineterminator="\r\n").writerows(gradebook_rows(reports, layout, provenance))
    write_atomically(path, BYTE_ORDER_MARK + text.getvalue())
