"""The instructor's report (course_tools/report.py, `tfs-grade FOLDER --report`): one self-contained page.
tests/test_browser.py opens it in Chromium, and runs `tfs-grade FOLDER --report` end to end."""

import json
import os
import re
from datetime import datetime
from pathlib import Path

import pytest

import helpers.i18n as i18n
from course_tools.grade import grade_all
from course_tools.copies import MIN_NODES
from course_tools.report import COLOURS, render, skipped_files, write_report
from helpers.checks import EXERCISES

NB01 = "01_positional_encoding"
POINTS = {name: EXERCISES[name].points for name in ("create_position_matrix", "rotation_matrix", "apply_rope")}
# alice's report as the grader writes it (points and max_points); bob's as an older grader did (the registry's).
REPORTS = [
    {"notebook": f"subs/alice/{NB01}.ipynb", "student": "alice", "passed": 1, "total": 3, "exercises": [
        {"name": "create_position_matrix", "status": "pass", "mistake": None, "message": "correct!",
         "points": POINTS["create_position_matrix"], "max_points": POINTS["create_position_matrix"]},
        {"name": "rotation_matrix", "status": "fail", "mistake": "i_for_2i", "message": "alice's i for 2i",
         "points": 0, "max_points": POINTS["rotation_matrix"]},
        {"name": "apply_rope", "status": "todo", "mistake": None, "message": "not implemented yet", "points": 0,
         "max_points": POINTS["apply_rope"]}]},
    {"notebook": f"subs/bob/{NB01}.ipynb", "student": "bob", "passed": 0, "total": 3, "exercises": [
        {"name": "create_position_matrix", "status": "fail", "mistake": "sin_cos_swapped", "message": "bob swapped"},
        {"name": "rotation_matrix", "status": "fail", "mistake": "i_for_2i", "message": "bob's i for 2i"},
        {"name": "apply_rope", "status": "fail", "mistake": None, "message": "differs at [0, 1]"}]},
    {"notebook": "subs/carol/oops.ipynb", "student": "carol",
     "error": "cannot read subs/carol/oops.ipynb: it is JSON but not a Jupyter notebook (no list of cells)"},
]
WHEN = datetime(2026, 3, 14, 9, 26)


def hint_text(exercise: str, code: str) -> str:
    """A hint as the page shows it: {fields} as …, `code spans` without their backticks."""
    return re.sub(r"\{\w+\}", "…", EXERCISES[exercise].mistakes[code]).replace("`", "")


def section(page: str, ident: str) -> str:
    start = page.index(f'id="{ident}"')
    return page[start:page.index("</table>", start)]


def test_the_page_is_self_contained():
    page = render(REPORTS, language="en", now=WHEN)
    links = re.findall(r"""\b(?:src|href)\s*=\s*["']?([^"'\s>]*)""", page, re.IGNORECASE)
    links += re.findall(r"""url\(\s*["']?([^"')]*)""", page, re.IGNORECASE)
    assert links and all(link.startswith(("data:", "#")) for link in links), links
    assert "<script" not in page and "<link" not in page and "@import" not in page and "<img" not in page
    anchors = set(re.findall(r'\bid="([^"]+)"', page))
    assert {link[1:] for link in links if link.startswith("#")} <= anchors, "every in-page link has its target"


def test_a_self_containment_check_that_rejects_a_relative_image():
    page = render(REPORTS, language="en", now=WHEN).replace("</body>", '<img src="chart.png"></body>')
    links = re.findall(r"""\b(?:src|href)\s*=\s*["']?([^"'\s>]*)""", page, re.IGNORECASE)
    assert "chart.png" in links and not all(link.startswith(("data:", "#")) for link in links)


def test_the_header_says_when_what_and_how_well():
    page = render(REPORTS, language="en", roots=[Path("subs")], now=WHEN)
    assert "2026-03-14 09:26" in page and str(Path("subs").resolve()) in page
    summary = page[page.index('id="summary"'):page.index("</p>", page.index('id="summary"'))]
    assert "1 of 6 exercises passed (17%)" in summary
    assert "2 notebooks graded · 2 students · 1 file could not be graded · 0 files skipped (not .ipynb)" in summary


def test_counts_per_exercise_grouped_by_notebook():
    page = render(REPORTS, language="en", now=WHEN)
    table = section(page, "exercises")
    assert f'<th colspan="6" class="code">{NB01}</th>' in table and "<th>points</th>" in table
    rows = re.findall(r'<tr><td class="code">(\w+)</td><td class="num weight">(\d+)</td><td class="num">(\d+)</td>'
                      r'<td class="num">(\d+)</td><td class="num">(\d+)</td>', table)
    assert rows == [("create_position_matrix", str(POINTS["create_position_matrix"]), "1", "1", "0"),
                    ("rotation_matrix", str(POINTS["rotation_matrix"]), "0", "2", "0"),
                    ("apply_rope", str(POINTS["apply_rope"]), "0", "1", "1")], "each exercise's weight, then counts"
    assert table.count('<svg class="bar"') == 3 and table.count("<rect") == 5


def test_mistakes_numbered_most_frequent_first_with_their_hints():
    page = render(REPORTS, language="en", now=WHEN)
    chart = page[page.index('<svg id="mistake-chart"'):page.index("</svg>", page.index('<svg id="mistake-chart"'))]
    labels = re.findall(r'class="label">([^<]+)<', chart)
    assert labels == ["1. rotation_matrix · i_for_2i", "2. create_position_matrix · sin_cos_swapped",
                      "3. apply_rope · (unrecognised)"]
    assert chart.count('class="mistake-bar"') == 3 and ">students</text>" in chart, "bars and the axis's title"
    hints = section(page, "hints")
    assert hints.count('<tr id="mistake-') == 3
    assert hint_text("rotation_matrix", "i_for_2i") in hints
    assert hint_text("create_position_matrix", "sin_cos_swapped") in hints
    assert "failed without naming a known mistake" in hints


def test_a_hint_with_fields_and_code_spans_reads_as_text():
    declared = {(name, code): text for name, e in EXERCISES.items() for code, text in e.mistakes.items()}
    (exercise, code), text = next(((key, t) for key, t in declared.items() if "{" in t and "`" in t))
    report = {"notebook": f"x/{EXERCISES[exercise].notebook}.ipynb", "passed": 0, "total": 1, "exercises": [
        {"name": exercise, "status": "fail", "mistake": code, "message": "m"}]}
    hints = section(render([report], language="en", now=WHEN), "hints")
    assert "{" not in hints and "`" not in hints and "<code>" in hints and "…" in hints


def test_the_student_table_sorted_by_score_with_symbols_and_mistake_numbers():
    page = render(REPORTS, language="en", roots=[Path("subs")], now=WHEN)
    students = section(page, "students")
    names = re.findall(r'<tr class="student"><td class="code sticky">(?:<a [^>]+>)?([^<]+)<', students)
    assert names == ["alice", "bob"], "relative to the graded folder, the most exercises passed first"
    assert str(Path("subs").resolve()) not in students
    assert '<td class="cell pass" title="correct!">✓</td>' in students
    assert '<td class="cell todo" title="not implemented yet">–</td>' in students
    assert ('<td class="cell fail" title="sin_cos_swapped: bob swapped"><a href="#mistake-2">✗<sup>2</sup></a>'
            in students)
    assert '<th colspan="3" class="nb">01 positional encoding</th>' in students
    most = sum(POINTS.values())
    assert re.search(rf'<td class="num score">1/3 · {POINTS["create_position_matrix"]}/{most}</td></tr>.*'
                     rf'<td class="num score">0/3 · 0/{most}</td></tr>', students, re.DOTALL), "passed · points"
    assert "exercises passed · points earned</th>" in students


def test_each_failed_checks_message_is_printed_not_only_hovered():
    messages = section(render(REPORTS, language="en", now=WHEN), "messages")
    for text in ("alice&#x27;s i for 2i", "bob swapped", "bob&#x27;s i for 2i", "differs at [0, 1]"):
        assert f"<td>{text}</td>" in messages


def test_a_students_notebooks_share_a_row():
    def one(path, name, status):
        return {"notebook": path, "passed": int(status == "pass"), "total": 1,
                "exercises": [{"name": name, "status": status, "mistake": None, "message": ""}]}

    reports = [one("c/ana/01_positional_encoding.ipynb", "create_position_matrix", "pass"),
               one("c/ana_02_attention.ipynb", "softmax", "pass"),
               one("c/ben_01_positional_encoding.ipynb", "create_position_matrix", "todo"),
               one("c/ben_old_01_positional_encoding.ipynb", "create_position_matrix", "todo"),
               one("c/cy/01_positional_encoding.ipynb", "create_position_matrix", "todo"),
               one("c/cy/cy_01_positional_encoding.ipynb", "create_position_matrix", "pass")]
    students = section(render(reports, language="en", roots=[Path("c")], now=WHEN), "students")
    names = re.findall(r'<tr class="student"><td class="code sticky">([^<]+)<', students)
    assert names == ["ana", "cy/cy", "ben", "ben_old", "cy"]
    assert '<td class="cell none"></td>' in students, "ben handed in no notebook 02"


def test_the_student_is_the_graders_not_guessed_from_the_path():
    def one(path, student, name):
        return {"notebook": path, "student": student, "passed": 1, "total": 1,
                "exercises": [{"name": name, "status": "pass", "mistake": None, "message": ""}]}

    reports = [one("c/group-3/01_positional_encoding.ipynb", "ana", "create_position_matrix"),
               one("c/zz_02_attention.ipynb", "ana", "softmax"), one("c/ben_02_attention.ipynb", "ben", "softmax")]
    students = section(render(reports, language="en", roots=[Path("c")], now=WHEN), "students")
    assert re.findall(r'<tr class="student"><td class="code sticky">([^<]+)<', students) == ["ana", "ben"]


def test_points_are_the_reports_else_the_registrys():
    """An instructor's weights (max_points in the reports) are shown; a report without them gets the registry's."""
    weighted = {"notebook": "c/ana/02_attention.ipynb", "student": "ana", "passed": 1, "total": 2, "exercises": [
        {"name": "softmax", "status": "pass", "mistake": None, "message": "", "points": 7, "max_points": 7},
        {"name": "scaled_dot_product_attention", "status": "fail", "mistake": None, "message": "", "points": 0,
         "max_points": 5}]}
    plain = {"notebook": "c/ben/02_attention.ipynb", "student": "ben", "passed": 1, "total": 2, "exercises": [
        {"name": "softmax", "status": "fail", "mistake": None, "message": ""},
        {"name": "scaled_dot_product_attention", "status": "pass", "mistake": None, "message": ""}]}
    page = render([weighted, weighted | {"notebook": "c/cy/02_attention.ipynb", "student": "cy"}, plain],
                  language="en", now=WHEN)
    assert '<td class="code">softmax</td><td class="num weight">7</td>' in section(page, "exercises"), "most reports"
    students = section(page, "students")
    assert '<td class="num score">1/2 · 7/12</td>' in students
    sdpa = EXERCISES["scaled_dot_product_attention"].points
    assert f'<td class="num score">1/2 · {sdpa}/{EXERCISES["softmax"].points + sdpa}</td>' in students


def test_the_header_says_which_version_graded(tmp_path, monkeypatch):
    page = render(REPORTS, language="en", now=WHEN, graded_by="course 9.9.9, commit abc")
    assert "2026-03-14 09:26 · <span id=\"graded-by\">graded by course 9.9.9, commit abc</span>" in page
    import course_tools.report as report

    monkeypatch.setattr(report, "provenance", lambda: "course 1.2.3")
    assert "graded by course 1.2.3<" in render(REPORTS, language="en", now=WHEN), "provenance() by default"
    write_report(REPORTS, tmp_path / "a.html", "en", [Path("subs")])  # callable as it always was
    write_report(REPORTS, tmp_path / "b.html", graded_by="course 4.5.6")
    assert "graded by course 1.2.3<" in (tmp_path / "a.html").read_text(encoding="utf-8")
    assert "graded by course 4.5.6<" in (tmp_path / "b.html").read_text(encoding="utf-8")


def test_the_signs_of_copying_are_listed_as_signs(tmp_path):
    from test_copies import FRIEND, HONEST, RENAMED, STUB, TORCH, hand_in

    reports = hand_in(tmp_path, {"ana": RENAMED, "ben": HONEST, "cy": FRIEND, "dee": STUB, "eli": STUB, "fay": TORCH})
    page = render(reports, language="en", roots=[tmp_path], now=WHEN)
    signs = section(page, "signs")
    assert ('<td rowspan="2" class="code">scaled_dot_product_attention</td><td>the public solution</td>'
            '<td class="code">ana</td>') in signs
    assert '<td>one another</td><td class="code">ben, cy</td>' in signs and "dee" not in signs and "fay" not in signs
    note = page[page.index('id="copies"'):page.index('id="signs"')]
    assert "A sign is not a verdict" in note and f"at least {MIN_NODES} syntax nodes" in note
    honest = render(hand_in(tmp_path / "honest", {"ben": HONEST, "fay": TORCH}), language="en", now=WHEN)
    assert 'id="signs"' not in honest and "No sign found." in honest and "A sign is not a verdict" in honest


def test_the_new_words_go_through_the_catalog(tmp_path, monkeypatch):
    from test_copies import FRIEND, HONEST, RENAMED, hand_in

    keys = ("weight", "points", "copies", "copies_note", "copies_short", "no_copies", "graded_by", "same_as",
            "the_solution", "one_another", "size")
    fields = {"graded_by": "{version}", "copies_short": "{n}"}
    catalog = {f"report:{k}": (msgid, f"ES-{k}" + fields.get(k, "")) for k, msgid in _english_of(keys).items()}
    monkeypatch.setitem(i18n._catalogs, "es", catalog)
    page = render(REPORTS, language="es", now=WHEN, graded_by="course 1.0")
    assert all(f"ES-{k}" in page for k in ("weight", "points", "copies", "copies_note", "no_copies"))
    assert "ES-graded_bycourse 1.0" in page and f"ES-copies_short{MIN_NODES}" in page
    signs = render(hand_in(tmp_path, {"ana": RENAMED, "ben": HONEST, "cy": FRIEND}), language="es", now=WHEN)
    assert all(f"ES-{k}" in signs for k in ("same_as", "the_solution", "one_another", "size"))


def test_the_files_not_graded_and_the_files_skipped(tmp_path):
    folder = tmp_path / "subs"
    (folder / "ana" / ".ipynb_checkpoints").mkdir(parents=True)
    (folder / "ana" / ".ipynb_checkpoints" / "x-checkpoint.json").write_text("{}", encoding="utf-8")
    (folder / ".DS_Store").write_text("", encoding="utf-8")
    (folder / "ana" / "notes.txt").write_text("", encoding="utf-8")
    (folder / "stray.json").write_text("{}", encoding="utf-8")
    assert [p.relative_to(folder).as_posix() for p in skipped_files([folder])] == ["ana/notes.txt", "stray.json"]
    broken = folder / "ana" / f"{NB01}.ipynb"
    broken.write_text("[]", encoding="utf-8")
    page = render([{"notebook": str(broken), "error": f"cannot read {broken}: it is JSON but not a Jupyter notebook "
                                                      "(no list of cells)"}], language="en", roots=[folder], now=WHEN)
    ungraded = section(page, "ungraded")
    assert f'<td class="code">ana/{NB01}.ipynb</td>' in ungraded and str(folder) not in ungraded
    assert "it is JSON, but not a Jupyter notebook" in ungraded
    skipped = page[page.index('id="skipped"'):page.index("</ul>", page.index('id="skipped"'))]
    assert '<li class="code">ana/notes.txt</li><li class="code">stray.json</li>' in skipped


def test_every_reason_the_grader_gives_is_known_to_the_report(tmp_path, monkeypatch):
    """Each file the grader cannot grade gets a reason through tr() (here a fake Spanish catalog), not the
    grader's English sentence."""
    (tmp_path / "empty").mkdir()
    files = {"not_json.ipynb": "{", "no_cells.ipynb": "[]", "binary.ipynb": b"\xff\xfe\x00",
             "old.ipynb": json.dumps({"cells": [], "nbformat": 3, "metadata": {}}),
             "unknown.ipynb": json.dumps({"cells": [{"cell_type": "code", "source": "x = 1", "metadata": {}, "id": "a",
                                                     "outputs": [], "execution_count": None}],
                                          "metadata": {}, "nbformat": 4, "nbformat_minor": 5})}
    for name, text in files.items():
        (tmp_path / name).write_bytes(text if isinstance(text, bytes) else text.encode())
    (tmp_path / "link.ipynb").symlink_to(tmp_path / "nowhere.ipynb")
    locked = tmp_path / "locked"
    (locked / "sub").mkdir(parents=True)
    scandir = os.scandir
    monkeypatch.setattr(os, "scandir", lambda path=".": (_ for _ in ()).throw(
        PermissionError(13, "Permission denied", str(path))) if Path(path) == locked / "sub" else scandir(path))
    reports = grade_all(sorted(tmp_path.glob("*.ipynb")) + [tmp_path / "empty", locked])
    monkeypatch.undo()
    assert all("error" in r for r in reports), reports
    keys = ("reason_empty_folder", "reason_not_notebook", "reason_not_json", "reason_old_format",
            "reason_not_course", "reason_unreadable", "reason_dangling_link", "reason_folder_unreadable")
    catalog = {f"report:{k}": (msgid, f"RAZÓN-{k}") for k, msgid in _english_of(keys).items()}
    monkeypatch.setitem(i18n._catalogs, "es", catalog)
    ungraded = section(render(reports, language="es", roots=[tmp_path], now=WHEN), "ungraded")
    reasons = re.findall(r'</td><td>([^<]*)</td></tr>', ungraded)
    assert len(reasons) == len(files) + 3 and all(r.startswith("RAZÓN-") for r in reasons), reasons
    assert len(set(reasons)) == 8, "each kind of file its own reason"


def _english_of(keys) -> dict[str, str]:
    """The English text of report:<key> tr() calls in course_tools/report.py (templates, as written)."""
    import ast

    source = (Path(__file__).resolve().parent.parent / "course_tools" / "report.py").read_text(encoding="utf-8")
    found = {}
    for node in ast.walk(ast.parse(source)):
        if (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "tr" and len(node.args) >= 2
                and all(isinstance(a, ast.Constant) for a in node.args[:2])):
            found[node.args[0].value.removeprefix("report:")] = node.args[1].value
    return {k: found[k] for k in keys}


def test_counts_take_the_plural_the_language_needs(monkeypatch):
    one = render([REPORTS[2]], language="en", now=WHEN)
    assert "0 notebooks graded · 0 students · 1 file could not be graded" in one
    keys = ("graded_one", "graded_other", "ungraded_one", "ungraded_other", "students_one", "students_other")
    fake = {"graded_one": "{n} notebook calificado", "graded_other": "{n} notebooks calificados",
            "ungraded_one": "{n} no se pudo calificar", "ungraded_other": "{n} no se pudieron calificar",
            "students_one": "{n} estudiante", "students_other": "{n} estudiantes"}
    monkeypatch.setitem(i18n._catalogs, "es", {f"report:{k}": (e, fake[k]) for k, e in _english_of(keys).items()})
    page = render(REPORTS, language="es", now=WHEN)
    assert "2 notebooks calificados · 2 estudiantes · 1 no se pudo calificar" in page
    assert "1 no se pudieron" not in page


def test_the_palette_is_readable():
    """Each status's ink on its cell and on white: at least 4.5:1 (WCAG AA)."""
    def luminance(colour):
        channels = [int(colour[i:i + 2], 16) / 255 for i in (1, 3, 5)]
        r, g, b = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
        return 0.2126 * r + 0.7152 * g + 0.0722 * b

    def contrast(a, b):
        high, low = sorted((luminance(a), luminance(b)), reverse=True)
        return (high + 0.05) / (low + 0.05)

    for status, (background, ink) in COLOURS.items():
        assert contrast(ink, background) >= 4.5 and contrast(ink, "#ffffff") >= 4.5, status


def test_the_page_speaks_the_language_of_the_edition():
    page = render(REPORTS, language="es", now=WHEN)
    assert 'lang="es"' in page and "Reporte de calificaciones" in page
    assert "pusiste cos en las columnas pares" in page


def test_written_whole_or_not_at_all(tmp_path, monkeypatch):
    target = tmp_path / "report.html"
    target.write_text("the previous report", encoding="utf-8")
    import course_tools.report as report

    def broken(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(report.os, "replace", broken)
    with pytest.raises(RuntimeError):
        write_report(REPORTS, target)
    assert target.read_text(encoding="utf-8") == "the previous report"
    assert list(tmp_path.iterdir()) == [target], "no temporary file left behind"
    monkeypatch.undo()
    write_report(REPORTS, target)
    assert target.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    umask = os.umask(0o022)
    try:
        write_report(REPORTS, target)
    finally:
        os.umask(umask)
    assert target.stat().st_mode & 0o777 == 0o644, "readable by others, as the umask allows (not mkstemp's 0600)"
