"""The instructor's report: one self-contained HTML page of a grading run (``tfs-grade FOLDER --report FILE.html``).

    write_report(reports, Path("report.html"), roots=[Path("submissions")])   the grader's reports (tfs-grade --json)
    write_report(reports, Path("informe.html"), language="es")

The page (templates/report.html.j2) links nothing outside itself: when and by which version of the course it was
graded; the run's counts; per exercise, its points and how many students passed, failed or did not try it; the
mistakes with their hints; a student-by-exercise table with each student's points; the signs of copying
(course_tools/copies.py: signs, not verdicts); the files not graded and why, and those skipped. A student is
report["student"], set by the grader (course_tools/students.py); a report without one is named by its path without
the course notebook's name (``alice/01_positional_encoding.ipynb`` and ``alice_02_attention.ipynb`` are ``alice``).
"""

from __future__ import annotations

import functools
import html
import math
import os
import re
from collections import Counter, defaultdict
from datetime import datetime
from itertools import groupby
from pathlib import Path

import jinja2
from markupsafe import Markup

from helpers.checks import EXERCISES
from helpers.checks.harness import GENERIC_MISTAKES
from helpers import i18n
from helpers.i18n import LANGUAGES, number
from helpers.notebook_io import write_atomically

from .copies import MIN_NODES, copy_signs
from .verdicts import STATUSES, notebook_language
from .versions import provenance

# Each status: (cell background, ink). The ink draws the cell's symbol, the legend's and the bars: ink on the
# background and on white contrast at least 4.5:1 (WCAG AA; tests/test_report.py measures it).
COLOURS = {"pass": ("#e3f1e4", "#1e6b24"), "fail": ("#fbe3e4", "#b3141b"), "todo": ("#f2f2f2", "#6b6b6b")}
BAR_WIDTH = 320  # pixels of a full bar
CHART_BARS = 15  # the most frequent mistakes drawn; the table under the chart lists them all
CHAR_WIDTH = 7.9  # pixels of one character of the chart's 13 px monospace labels
TEMPLATES = jinja2.Environment(loader=jinja2.FileSystemLoader(Path(__file__).parent / "templates"), autoescape=True,
                               trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
# A hint's or a message's `code spans` as <code>, the rest HTML-escaped.
TEMPLATES.filters["code_spans"] = lambda text: Markup(re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(text)))


def report_language(reports: list[dict]) -> str:
    """The language most of the graded notebooks set ("en" when none)."""
    found = Counter(notebook_language(Path(r["notebook"])) for r in reports if "error" not in r)
    language = found.most_common(1)[0][0] if found else "en"
    return language if language in LANGUAGES else "en"


def skipped_files(roots: list[Path]) -> list[Path]:
    """The files under the graded folders that the grader does not read: not ``.ipynb``, and not hidden (nor in a
    hidden folder such as ``.ipynb_checkpoints``)."""
    return sorted(p for root in map(Path, roots) if root.is_dir() for p in root.rglob("*")
                  if p.is_file() and p.suffix != ".ipynb"
                  and not any(part.startswith(".") for part in p.relative_to(root).parts))


def _base(roots: list[Path] | None, reports: list[dict]) -> Path | None:
    """The folder paths are shown relative to: the graded folder (the one holding all of them when several)."""
    folders = [r.parent if r.is_file() or r.suffix == ".ipynb" else r for r in map(Path, roots)] if roots else \
        [Path(r["notebook"]).parent for r in reports]
    try:
        return Path(os.path.commonpath([str(folder.resolve()) for folder in folders])) if folders else None
    except ValueError:  # paths on different drives
        return None


def _relative(path: str | Path, base: Path | None) -> str:
    try:
        return Path(path).resolve().relative_to(base).as_posix() if base else str(path)
    except ValueError:
        return str(path)


def _stem(report: dict) -> str | None:
    """The course notebook a graded report is (from its exercises)."""
    return next((EXERCISES[e["name"]].notebook for e in report["exercises"] if e["name"] in EXERCISES), None)


def _student(relative: str, stem: str | None) -> str:
    """Who a file belongs to when its report does not say: its relative path without the course notebook's name."""
    name = relative.removesuffix(".ipynb")
    folder, _, file = name.rpartition("/")
    if stem and stem in file:
        file = file.replace(stem, "", 1).strip("_- .")
        name = "/".join(part for part in (folder, file) if part)
    return name or relative


def weight(e: dict) -> int:
    """The points an exercise is worth: its report's max_points, else the registry's."""
    return e.get("max_points", EXERCISES[e["name"]].points if e["name"] in EXERCISES else 1)


def earned(e: dict) -> int:
    """The points an exercise earned: its report's points, else its weight on a pass."""
    return e.get("points", weight(e) if e["status"] == "pass" else 0)


def _students(graded: list[dict], base: Path | None, names: list[str]) -> list[dict]:
    """A row per student (per file, for one with two files of one course notebook), the most exercises passed first:
    student, cells (their exercise of each of names, or None), failed ((file, exercise) of each failed check),
    linked (whether a cell failed), passed and total, points and max_points."""
    groups: dict[str, list[tuple[str, dict]]] = defaultdict(list)
    for report in graded:
        groups[report["student"]].append((_relative(report["notebook"], base), report))
    rows = []
    for student, files in groups.items():
        stems = [_stem(report) for _, report in files]
        one_each = len(set(stems)) == len(stems)
        for name, reports in [(student, files)] if one_each else [(file, [(file, r)]) for file, r in files]:
            by_name = {e["name"]: e for _, r in reports for e in r["exercises"]}
            failed = sorted(((f, e) for f, r in reports for e in r["exercises"] if e["status"] == "fail"),
                            key=lambda pair: names.index(pair[1]["name"]))
            rows.append({"student": name, "cells": [by_name.get(n) for n in names], "failed": failed,
                         "linked": any(e["status"] == "fail" for e in by_name.values()),
                         "passed": sum(r["passed"] for _, r in reports), "total": sum(r["total"] for _, r in reports),
                         "points": sum(earned(e) for _, r in reports for e in r["exercises"]),
                         "max_points": sum(weight(e) for _, r in reports for e in r["exercises"])})
    return sorted(rows, key=lambda row: (-row["passed"], row["student"]))


def _exercise_order(reports: list[dict]) -> list[str]:
    """The exercises that occur in the reports, in course order (the registry's)."""
    seen = {e["name"] for r in reports if "error" not in r for e in r["exercises"]}
    return [name for name in EXERCISES if name in seen] + sorted(seen - set(EXERCISES))


def plural(n: int, language: str, one: str, other: str, **fields) -> str:
    """The template one or other (each with an {n} field), as language chooses for n: English and Spanish
    say one for 1, Brazilian Portuguese for 0 and 1, Vietnamese never."""
    singular = {"pt": n in (0, 1), "vi": False}.get(language, n == 1)
    return (one if singular else other).format(n=number(n, in_language=language), **fields)


def words(language: str) -> dict[str, str]:
    """The page's fixed words in language (not yet HTML-escaped)."""
    tr = functools.partial(i18n.tr, in_language=language)
    return {
        "title": tr("report:title", "Grading report"),
        "written": tr("report:written", "Written"),
        "folders": tr("report:folders", "Folders and files graded"),
        "exercises": tr("report:exercises", "Exercises"),
        "exercise": tr("report:exercise", "exercise"),
        "pass": tr("report:pass", "passed"),
        "fail": tr("report:fail", "failed"),
        "todo": tr("report:todo", "did not try"),
        "none": tr("report:no_notebook", "no notebook handed in"),
        "fail_legend": tr("report:fail_legend", "failed: the number is the mistake's, in the list of mistakes"),
        "mistakes": tr("report:mistakes", "Mistakes found"),
        "mistake": tr("report:mistake", "mistake"),
        "count": tr("report:count", "students"),
        "hint": tr("report:hint", "what the students read"),
        "chart_caption": tr("report:chart_caption", "How many students made each mistake, the most frequent first. "
                            "The numbers are those of the table below and of the ✗ in the table of students."),
        "no_mistakes": tr("report:no_mistakes", "No exercise failed."),
        "unrecognised": tr("report:unrecognised", "(unrecognised)"),
        "students": tr("report:students", "Students"),
        "student": tr("report:student", "student"),
        "sorted": tr("report:sorted", "The most exercises passed first."),
        "messages": tr("report:messages", "What each failed check told the student"),
        "message": tr("report:message", "the check's message"),
        "score": tr("report:score", "exercises passed"),
        "ungraded": tr("report:ungraded", "Files that could not be graded"),
        "none_ungraded": tr("report:none_ungraded", "None: every notebook was graded."),
        "skipped": tr("report:skipped", "Files skipped (not .ipynb)"),
        "none_skipped": tr("report:none_skipped", "None: the graded folders hold notebooks only."),
        "weight": tr("report:weight", "points"),
        "points": tr("report:points", "points earned"),
        "copies": tr("report:copies", "Signs of copying"),
        "copies_note": tr("report:copies_note", "A sign is not a verdict: students who studied together, or from "
                          "the same example, write alike. Talk with them before drawing any conclusion. Two answers "
                          "are the same when their syntax is, once comments, docstrings, blank lines and the names "
                          "the students chose are set aside; attribute and library names count."),
        "same_as": tr("report:same_as", "same answer as"),
        "the_solution": tr("report:the_solution", "the public solution"),
        "one_another": tr("report:one_another", "one another"),
        "size": tr("report:size", "size (syntax nodes)"),
        "no_copies": tr("report:no_copies", "No sign found."),
    }


def _hint(exercise: str, code: str, language: str) -> str:
    """The hint students read for a mistake code, in language (its {fields} shown as …)."""
    tr = functools.partial(i18n.tr, in_language=language)
    declared = EXERCISES[exercise].mistakes if exercise in EXERCISES else {}
    if code in declared:
        text = tr(f"{exercise}:{code}", declared[code])
    elif code in GENERIC_MISTAKES:
        text = tr(f"generic:{code}", GENERIC_MISTAKES[code])
    else:
        text = tr("report:unrecognised_hint", "the check failed without naming a known mistake: what it told "
                  "each student is in the last table.")
    return re.sub(r"\{\w+\}", "…", text)


def why_not_graded(report: dict, language: str) -> str:
    """Why the grader could not grade a file, in language (the grader's English sentence when unknown)."""
    tr = functools.partial(i18n.tr, in_language=language)
    error, path = report["error"], report["notebook"]
    rest = next((error[len(p):] for p in (f"cannot read {path}: ", f"cannot grade {path}: ") if error.startswith(p)),
                None)
    if rest is None:
        return error
    detail = re.fullmatch(r"(not JSON|not a Jupyter notebook of format 4) \((.*)\)", rest)
    if rest == "no .ipynb file in this folder":
        return tr("report:reason_empty_folder", "no .ipynb file in this folder")
    if rest.startswith("it is JSON but not a Jupyter notebook"):
        return tr("report:reason_not_notebook", "it is JSON, but not a Jupyter notebook (it has no list of cells)")
    if detail and detail[1] == "not JSON":
        return tr("report:reason_not_json", "it is not JSON, so not a notebook ({detail})", detail=detail[2])
    if detail:
        return tr("report:reason_old_format", "not a Jupyter notebook of format 4 ({detail})", detail=detail[2])
    if rest.startswith("the folder cannot be read"):
        return tr("report:reason_folder_unreadable", "the folder cannot be read ({detail})",
                  detail=rest.partition("(")[2].rstrip(")"))
    if rest.startswith("a link to "):
        return tr("report:reason_dangling_link", "a link to {target}, which does not exist",
                  target=rest.removeprefix("a link to ").removesuffix(", which does not exist"))
    if rest.startswith("its name contains no course notebook's name"):
        return tr("report:reason_not_course", "none of the course's notebooks: its name contains no course "
                  "notebook's name (such as 01_positional_encoding) and none of its cells calls a check")
    return tr("report:reason_unreadable", "the file cannot be read ({detail})", detail=rest)


def _chart(ranked: list[tuple[str, str, int]], w: dict, language: str) -> dict:
    """The chart of mistakes: a numbered bar per (exercise, code, count), at most CHART_BARS, on a whole-number
    axis (at most 9 ticks, a step of 1, 2 or 5 times a power of 10) wide enough for the longest label."""
    caption = w["chart_caption"]
    if len(ranked) > CHART_BARS:
        tr = functools.partial(i18n.tr, in_language=language)
        caption += " " + plural(len(ranked) - CHART_BARS, language,
                                 tr("report:chart_more_one", "{n} more mistake appears only in the table."),
                                 tr("report:chart_more_other", "{n} more mistakes appear only in the table."))
        ranked = ranked[:CHART_BARS]
    bars = [(f"{i}. {exercise} · {code}", n) for i, (exercise, code, n) in enumerate(ranked, 1)]
    top = max(n for _, n in bars)
    step = next(m * 10 ** k for k in range(9) for m in (1, 2, 5) if top <= 8 * m * 10 ** k)
    ticks = list(range(0, math.ceil(top / step) * step + 1, step))
    left, axis = int(CHAR_WIDTH * max(len(label) for label, _ in bars)) + 16, 4 + 24 * len(bars) + 4
    return {"caption": caption, "bars": bars, "ticks": ticks, "scale": BAR_WIDTH / ticks[-1], "left": left,
            "axis": axis, "width": left + BAR_WIDTH + 40, "height": axis + 44}


def _signs(graded: list[dict], w: dict) -> list[tuple[str, list[tuple[str, list[str], int]]]]:
    """The signs of copying of each exercise that has some: (whose answer it is the same as, students, size)."""
    return [(sign["exercise"], [(w["the_solution"], sign["solution"], sign["solution_nodes"])] * bool(sign["solution"])
             + [(w["one_another"], group["students"], group["nodes"]) for group in sign["groups"]])
            for sign in copy_signs(graded)]


def render(reports: list[dict], language: str | None = None, roots: list[Path] | None = None,
           now: datetime | None = None, graded_by: str | None = None) -> str:
    """The report page, as one HTML string. roots: the files and folders graded (tfs-grade's arguments): the
    page names them, shows paths relative to them and lists the files in them it skipped. graded_by: which version
    of the course graded (versions.provenance() when not given)."""
    language = language if language in LANGUAGES else report_language(reports)
    w = words(language)
    base = _base(roots, reports)
    graded = [r if r.get("student") else {**r, "student": _student(_relative(r["notebook"], base), _stem(r))}
              for r in reports if "error" not in r]
    ungraded = [r for r in reports if "error" in r]
    skipped = skipped_files(roots or [])
    names = _exercise_order(reports)
    order = {name: i for i, name in enumerate(names)}
    per_exercise = {name: Counter() for name in names}
    mistakes: Counter = Counter()
    for report in graded:
        for e in report["exercises"]:
            per_exercise[e["name"]][e["status"]] += 1
            if e["status"] == "fail":
                mistakes[(e["name"], e.get("mistake") or w["unrecognised"])] += 1
    ranked = [(ex, code, n) for (ex, code), n in
              sorted(mistakes.items(), key=lambda item: (-item[1], order.get(item[0][0], 0), item[0][1]))]
    rows = _students(graded, base, names)
    passed, total = sum(r["passed"] for r in graded), sum(r["total"] for r in graded)
    tr = functools.partial(i18n.tr, in_language=language)
    counts = [plural(n, language, one, other) for n, one, other in [
        (len(graded), tr("report:graded_one", "{n} notebook graded"),
         tr("report:graded_other", "{n} notebooks graded")),
        (len(rows), tr("report:students_one", "{n} student"), tr("report:students_other", "{n} students")),
        (len(ungraded), tr("report:ungraded_one", "{n} file could not be graded"),
         tr("report:ungraded_other", "{n} files could not be graded")),
        (len(skipped), tr("report:skipped_one", "{n} file skipped (not .ipynb)"),
         tr("report:skipped_other", "{n} files skipped (not .ipynb)"))]]
    rate = plural(total, language, tr("report:rate_one", "{passed} of {n} exercise passed ({percent}%)"),
                  tr("report:rate_other", "{passed} of {n} exercises passed ({percent}%)"),
                  passed=number(passed, in_language=language),
                  percent=number(100 * passed / total if total else 0, in_language=language))
    weights = {name: Counter(weight(e) for r in graded for e in r["exercises"] if e["name"] == name)
               .most_common(1)[0][0] for name in names}
    return TEMPLATES.get_template("report.html.j2").render(
        language=language, w=w, statuses=STATUSES, colours=COLOURS, bar_width=BAR_WIDTH,
        now=f"{now or datetime.now():%Y-%m-%d %H:%M}", roots=[str(Path(r).resolve()) for r in roots or []],
        graded_by=tr("report:graded_by", "graded by {version}", version=graded_by or provenance()),
        rate=rate, counts=counts, names=names, per_exercise=per_exercise, weights=weights,
        signs=_signs(graded, w),
        copies_short=tr(
            "report:copies_short", "Short answers are alike in most honest classes: an answer is compared only when "
            "the student wrote at least {n} syntax nodes of it (about four lines). Each sign gives its size.",
            n=number(MIN_NODES, in_language=language)),
        groups=[(stem, list(group)) for stem, group in
                groupby(names, key=lambda name: EXERCISES[name].notebook if name in EXERCISES else "?")],
        chart=_chart(ranked, w, language) if ranked else None,
        hints=[(ex, code, n, _hint(ex, code, language)) for ex, code, n in ranked],
        numbers={(ex, code): i for i, (ex, code, _) in enumerate(ranked, 1)},
        rows=rows, with_none=any(cell is None for row in rows for cell in row["cells"]),
        ungraded=[(_relative(r["notebook"], base), why_not_graded(r, language)) for r in ungraded],
        skipped=[_relative(p, base) for p in skipped])


def write_report(reports: list[dict], path: Path, language: str | None = None,
                 roots: list[Path] | None = None, graded_by: str | None = None) -> None:
    """Write the report page to path, whole or not at all (the mode a plain write gives, not mkstemp's 0600)."""
    write_atomically(Path(path), render(reports, language, roots, graded_by=graded_by))
