"""The instructor's report (course_tools/report.py, `tfs-grade --report`): one self-contained page."""

import re

import pytest

from course_tools.report import render, write_report

REPORTS = [
    {"notebook": "subs/alice/01_positional_encoding.ipynb", "passed": 1, "total": 3, "exercises": [
        {"name": "create_position_matrix", "status": "pass", "mistake": None, "message": "correct!"},
        {"name": "rotation_matrix", "status": "fail", "mistake": "transposed", "message": "transposed"},
        {"name": "apply_rope", "status": "todo", "mistake": None, "message": "not implemented yet"}]},
    {"notebook": "subs/bob/01_positional_encoding.ipynb", "passed": 0, "total": 3, "exercises": [
        {"name": "create_position_matrix", "status": "fail", "mistake": "sin_cos_swapped", "message": "swapped"},
        {"name": "rotation_matrix", "status": "fail", "mistake": "transposed", "message": "transposed"},
        {"name": "apply_rope", "status": "fail", "mistake": None, "message": "differs"}]},
    {"notebook": "subs/carol/oops.ipynb", "error": "cannot read subs/carol/oops.ipynb: it is JSON but not a notebook"},
]


def test_the_page_is_self_contained():
    page = render(REPORTS, language="en")
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", page), "no external script, style or image"
    assert "<script" not in page and "<link" not in page
    assert page.count("<svg") == 3 + 1, "a bar per exercise, and the chart of mistakes"


def test_counts_per_exercise_and_mistakes_most_frequent_first():
    page = render(REPORTS, language="en")
    rows = re.findall(r'<tr><td class="code">(\w+)</td><td class="num">(\d+)</td><td class="num">(\d+)</td>'
                      r'<td class="num">(\d+)</td>', page)
    assert rows == [("create_position_matrix", "1", "1", "0"), ("rotation_matrix", "0", "2", "0"),
                    ("apply_rope", "0", "1", "1")]
    chart = page[page.index('<svg id="mistake-chart"'):]
    assert chart.index("rotation_matrix · transposed") < chart.index("create_position_matrix · sin_cos_swapped")
    assert "you put cos on the even columns" in page, "each mistake with the hint students read"
    assert "(unrecognised)" in page


def test_the_student_table_and_the_notebooks_not_graded():
    page = render(REPORTS, language="en")
    students = page[page.index('<table id="students"'):page.index("</table>", page.index('<table id="students"'))]
    assert students.count("<tr>") == 3, "a header and one row per graded notebook"
    assert '<td class="fail" title="swapped">sin_cos_swapped</td>' in students
    assert 'id="ungraded"' in page and "it is JSON but not a notebook" in page


def test_the_page_speaks_the_language_of_the_edition():
    page = render(REPORTS, language="es")
    assert 'lang="es"' in page and "Reporte de calificaciones" in page
    assert "pusiste cos en las columnas pares" in page


def test_written_whole_or_not_at_all(tmp_path, monkeypatch):
    target = tmp_path / "report.html"
    target.write_text("the previous report")
    import course_tools.report as report

    def broken(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(report.os, "replace", broken)
    with pytest.raises(RuntimeError):
        write_report(REPORTS, target)
    assert target.read_text() == "the previous report"
    assert list(tmp_path.iterdir()) == [target], "no temporary file left behind"
    monkeypatch.undo()
    write_report(REPORTS, target)
    assert target.read_text().startswith("<!DOCTYPE html>")
