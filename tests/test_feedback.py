"""The students' feedback pages (course_tools/feedback.py, `tfs-grade FOLDER --feedback DIR`), from report dicts built
here. tests/test_browser.py runs `tfs-grade FOLDER --feedback` end to end and opens the pages in Chromium."""

import re
from datetime import datetime
from pathlib import Path

import nbformat
import pytest

import helpers.i18n as i18n
from conftest import solution_source
from course_tools.feedback import RESERVED, page_names, render, safe_name, write_feedback

NB01 = "01_positional_encoding"
WHEN = datetime(2026, 3, 14, 9, 26)
PROVENANCE = "course 0.2.0, commit 4e020db5a1b2"
FORBIDDEN = set('<>:"/\\|?*')


def notebook(path: Path, language: str | None = None) -> str:
    """A small notebook at path that sets language (none: English); its path as a report names it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    cells = [nbformat.v4.new_code_cell(f'set_language("{language}")')] if language else []
    nbformat.write(nbformat.v4.new_notebook(cells=cells), path)
    return str(path)


def graded(path: str, student: str, statuses: tuple[str, str, str], **extra) -> dict:
    """A report of notebook 01: each exercise's status, a message naming its student, the registry's points."""
    exercises = []
    for name, status, weight in zip(("create_position_matrix", "rotation_matrix", "apply_rope"), statuses, (2, 3, 3)):
        exercises.append({"name": name, "status": status, "mistake": "sin_cos_swapped" if status == "fail" else None,
                          "message": f"{student}'s {name} message, see `np.sin`", "max_points": weight,
                          "points": weight if status == "pass" else 0})
    return {"notebook": path, "student": student, "sha256": "0" * 64, "isolated": True, "exercises": exercises,
            "passed": statuses.count("pass"), "total": 3, "points": sum(e["points"] for e in exercises),
            "max_points": 8, **extra}


@pytest.fixture
def reports(tmp_path):
    """alice (English): one notebook graded (a time-out note) and one unreadable; bruno (Spanish): one notebook."""
    subs = tmp_path / "submissions"
    return [
        graded(notebook(subs / "alice" / f"{NB01}.ipynb"), "alice", ("pass", "fail", "todo"),
               notes=["cell 7 ran longer than 600 seconds and was interrupted; the cells after it still ran."]),
        {"notebook": str(subs / "alice" / "02_attention.ipynb"), "student": "alice",
         "error": f"cannot read {subs / 'alice' / '02_attention.ipynb'}: not JSON (Expecting value: line 1 column 1)"},
        graded(notebook(subs / "bruno" / f"{NB01}.ipynb", "es"), "bruno", ("fail", "pass", "pass")),
    ]


def test_one_page_per_student_in_a_folder_made_with_its_parents(tmp_path, reports):
    folder = tmp_path / "out" / "feedback"
    pages = write_feedback(reports, folder, PROVENANCE, now=WHEN)
    assert pages == [folder / "alice.html", folder / "bruno.html"]
    assert sorted(folder.iterdir()) == pages, "one page per student, no temporary file left"


def test_each_page_is_in_the_language_most_of_the_students_notebooks_set(tmp_path, reports):
    alice, bruno = (p.read_text(encoding="utf-8") for p in write_feedback(reports, tmp_path / "fb", PROVENANCE))
    assert '<html lang="en">' in alice and "Feedback on your notebooks" in alice
    spanish = i18n.tr("feedback:title", "Feedback on your notebooks", in_language="es")
    assert spanish != "Feedback on your notebooks", "the Spanish words are translated"
    assert '<html lang="es">' in bruno and spanish in bruno and "Feedback on your notebooks" not in bruno
    assert i18n.tr("feedback:pass", "passed", in_language="es") in bruno


def test_two_notebooks_of_one_student_in_spanish_and_one_in_english_give_a_spanish_page(tmp_path):
    paths = [notebook(tmp_path / f"{stem}.ipynb", language) for stem, language in
             (("01_positional_encoding", "es"), ("02_attention", "es"), ("03_multi_head", None))]
    page = render("eva", [graded(path, "eva", ("pass",) * 3) for path in paths], PROVENANCE, WHEN)
    assert '<html lang="es">' in page


def test_every_exercise_with_its_status_points_and_message_but_no_code_nor_solution(tmp_path, reports):
    page = render("alice", reports[:2], PROVENANCE, WHEN)
    for name, symbol, points in (("create_position_matrix", "✅", "2 / 2 points"), ("rotation_matrix", "❌",
                                 "0 / 3 points"), ("apply_rope", "📝", "0 / 3 points")):
        item = page[page.index(f'data-exercise="{name}"'):]
        item = item[:item.index("</li>")]
        assert symbol in item and points in item, item
        assert f"alice&#x27;s {name} message, see <code>np.sin</code>" in item, "the message, HTML-escaped"
    assert "sin_cos_swapped" not in page, "the mistake's code is for instructors"
    for name in ("create_position_matrix", "rotation_matrix", "apply_rope"):
        body = [line.strip() for line in solution_source(NB01, name).splitlines()[1:] if len(line.strip()) > 12]
        assert body and not [line for line in body if line in page], f"no line of the solution of {name}"


def test_the_total_the_notes_the_provenance_and_the_date(reports):
    page = render("alice", reports[:2], PROVENANCE, WHEN)
    assert re.search(r'id="total"><strong>2 of 8 points</strong><br>1 of 3 exercises passed<', page)
    assert "cell 7 ran longer than 600 seconds" in page and "Notes from the grader" in page
    assert f"Graded by {PROVENANCE} on 2026-03-14 09:26." in page


def test_one_point_is_singular():
    report = graded("nowhere/01_positional_encoding.ipynb", "fay", ("pass", "todo", "todo"))
    report["exercises"][0]["max_points"] = report["exercises"][0]["points"] = 1
    page = render("fay", [report], PROVENANCE, WHEN)
    assert "1 / 1 point<" in page and "1 of 7 points" in page


def test_a_report_without_points_gets_the_registrys_weights():
    report = graded("nowhere/01_positional_encoding.ipynb", "gus", ("pass", "pass", "fail"))
    for e in report["exercises"]:
        del e["points"], e["max_points"]
    page = render("gus", [report], PROVENANCE, WHEN)
    assert "5 of 8 points" in page and "3 / 3 points" in page


def test_an_unreadable_notebook_is_listed_with_its_reason_in_the_pages_language(tmp_path, reports):
    page = render("alice", reports[:2], PROVENANCE, WHEN)
    ungraded = page[page.index('id="ungraded"'):]
    assert "02_attention.ipynb" in ungraded and "it is not JSON, so not a notebook (Expecting value" in ungraded
    assert str(tmp_path) not in page, "file names, not the instructor's paths"
    spanish = render("bruno", [reports[2], {**reports[1], "student": "bruno"}], PROVENANCE, WHEN)
    assert i18n.tr("report:reason_not_json", "it is not JSON, so not a notebook ({detail})", in_language="es",
                   detail="Expecting value: line 1 column 1") in spanish


def test_a_student_with_nothing_graded_gets_a_page_that_says_so(reports):
    page = render("alice", reports[1:2], PROVENANCE, WHEN)
    assert '<p class="summary" id="total">No notebook of yours was graded.</p>' in page and "02_attention" in page
    assert "0 of 0" not in page


def test_the_page_is_self_contained_and_fits_a_phone(reports):
    page = render("alice", reports[:2], PROVENANCE, WHEN)
    assert not re.search(r"https?:|\bsrc\s*=|\bhref\s*=|<link|<script|@import|url\(", page, re.IGNORECASE)
    assert '<meta name="viewport" content="width=device-width, initial-scale=1">' in page and "<style>" in page


def test_a_student_name_is_escaped_in_the_page():
    page = render("<b>zoe</b>", [], PROVENANCE, WHEN)
    assert "<b>zoe" not in page and "&lt;b&gt;zoe&lt;/b&gt;" in page


@pytest.mark.parametrize("student, expected", [
    ("alice", "alice"), ('a<b>c:d"e/f\\g|h?i*j', "a_b_c_d_e_f_g_h_i_j"), ("tab\there", "tab_here"),
    ("dots... ", "dots"), (".hidden", "hidden"), ("CON", "_CON"), ("con.txt", "_con.txt"), ("LPT1", "_LPT1"),
    ("com²", "_com²"), ("CONSOLE", "CONSOLE"), ("", "student"), ("...", "student"), ("José", "José"),
    ("x" * 300, "x" * 100)])
def test_a_page_name_is_safe_on_every_file_system(student, expected):
    name = safe_name(student)
    assert name == expected
    assert not FORBIDDEN & set(name) and not name.endswith((".", " ")) and name.split(".")[0].upper() not in RESERVED


def test_students_whose_safe_names_collide_get_distinct_pages(tmp_path):
    students = ["Ana", "ana", "ana-2", "a/b", "a:b", "Jos\u00e9", "Jose\u0301"]  # é composed, and e + accent
    names = page_names(students)
    assert len({name.casefold() for name in names.values()}) == len(students), names
    assert names["Ana"] == "Ana.html" and names["ana"] == "ana-2.html" and names["ana-2"] == "ana-2-2.html"
    reports = [{"notebook": str(tmp_path / f"{i}.ipynb"), "student": s, "error": "cannot read it: gone"}
               for i, s in enumerate(students)]
    pages = write_feedback(reports, tmp_path / "fb", PROVENANCE, now=WHEN)
    assert len(set(pages)) == len(students) and all(page.exists() for page in pages)
    assert [p.name for p in pages] == [page_names(sorted(students))[s] for s in sorted(students)]


def test_a_report_without_a_student_is_named_by_its_file(tmp_path):
    report = graded(notebook(tmp_path / "hal_01.ipynb"), "", ("pass", "pass", "pass"))
    del report["student"]
    assert [p.name for p in write_feedback([report], tmp_path / "fb", PROVENANCE)] == ["hal_01.html"]


def test_nothing_is_written_when_the_folder_is_a_file(tmp_path, reports):
    target = tmp_path / "feedback"
    target.write_text("my notes", encoding="utf-8")
    with pytest.raises(ValueError, match="is a file, not a folder"):
        write_feedback(reports, target, PROVENANCE)
    assert target.read_text(encoding="utf-8") == "my notes" and sorted(p.name for p in tmp_path.iterdir()) == [
        "feedback", "submissions"]


def test_a_student_with_nothing_graded_reads_the_classs_language(tmp_path, reports):
    spanish = graded(notebook(tmp_path / "ines" / f"{NB01}.ipynb", "es"), "ines", ("pass", "pass", "pass"))
    others = [{**reports[1], "student": "dora"}, spanish, {**reports[2], "student": "bruno"}]
    dora = write_feedback(others, tmp_path / "fb", PROVENANCE)[1].read_text(encoding="utf-8")
    assert '<html lang="es">' in dora
    assert '<html lang="en">' in render("dora", others[:1], PROVENANCE, WHEN), "English when nothing says otherwise"
