"""Feedback to hand back: one self-contained HTML page per student (``tfs-grade FOLDER --feedback DIR``).

    write_feedback(reports, Path("feedback"), provenance())   the grader's reports -> feedback/alice.html, ...

A page (templates/feedback.html.j2) is in the language most of the student's notebooks set, and links nothing
outside itself: per notebook handed in, each exercise with its status (✅ ❌ 📝), its points earned of possible and
the one line its check printed (never the mistake's code, which is for instructors, nor the solution); the grader's
notes (a cell that ran too long); the notebooks that could not be graded and why; the total points; which version
of the course graded, and when.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections import defaultdict
from datetime import datetime
from pathlib import Path

from helpers import i18n
from helpers.checks import EXERCISES
from helpers.checks.harness import SYMBOLS
from helpers.i18n import LANGUAGES, number
from helpers.notebook_io import write_atomically

from .report import COLOURS, TEMPLATES, why_not_graded, plural, report_language

# Names Windows keeps for devices, whatever the extension (CON.html is the console too).
RESERVED = {"CON", "PRN", "AUX", "NUL", "CONIN$", "CONOUT$"} | {f"{d}{i}" for d in ("COM", "LPT")
                                                                 for i in (*"123456789", "¹", "²", "³")}
NOT_IN_NAMES = re.compile(r'[<>:"/\\|?*\x00-\x1f\x7f]')
LONGEST = 100  # characters of a page's name before its suffix (far under every file system's limit)


def safe_name(student: str) -> str:
    """A file name for student's page that every file system accepts (Windows included): no <>:"/\\|?* nor control
    characters, no leading or trailing dot or space (nor a hidden file), no device name such as CON, at most
    LONGEST characters."""
    name = NOT_IN_NAMES.sub("_", unicodedata.normalize("NFC", student))[:LONGEST].strip(". ")
    if not name:
        return "student"
    return f"_{name}" if name.split(".")[0].rstrip(" ").upper() in RESERVED else name


def page_names(students: list[str]) -> dict[str, str]:
    """{student: page file name}, distinct even where a file system ignores case or Unicode normalisation: a
    second student whose safe name is taken gets "-2", a third "-3"."""
    taken, names = set(), {}
    for student in students:
        base, n = safe_name(student), 1
        while (name := base if n == 1 else f"{base}-{n}").casefold() in taken:
            n += 1
        taken.add(name.casefold())
        names[student] = f"{name}.html"
    return names


def words(language: str) -> dict[str, str]:
    """The page's fixed words in language (not yet HTML-escaped)."""
    tr = functools.partial(i18n.tr, in_language=language)
    return {
        "title": tr("feedback:title", "Feedback on your notebooks"),
        "pass": tr("feedback:pass", "passed"),
        "fail": tr("feedback:fail", "not passed yet"),
        "todo": tr("feedback:todo", "not tried yet"),
        "notes": tr("feedback:notes", "Notes from the grader"),
        "ungraded": tr("feedback:ungraded", "Notebooks that could not be graded"),
        "ungraded_help": tr("feedback:ungraded_help", "These files earned no points: check that each one opens in "
                            "Jupyter, and ask your instructor."),
        "nothing": tr("feedback:nothing", "No notebook of yours was graded."),
    }


def _max_points(exercise: dict) -> int:
    """An exercise's possible points (the registry's weight when the report predates points)."""
    known = EXERCISES[exercise["name"]].points if exercise["name"] in EXERCISES else 0
    return exercise.get("max_points", known)


def _points(exercise: dict) -> int:
    return exercise.get("points", _max_points(exercise) if exercise["status"] == "pass" else 0)


def _exercise(exercise: dict, language: str) -> dict:
    """What the page shows of one exercise: its status and symbol, name, check's message and points."""
    tr = functools.partial(i18n.tr, in_language=language)
    points = plural(_max_points(exercise), language, tr("feedback:points_one", "{earned} / {n} point"),
                    tr("feedback:points_other", "{earned} / {n} points"),
                    earned=number(_points(exercise), in_language=language))
    return {"status": exercise["status"], "symbol": SYMBOLS[exercise["status"]], "name": exercise["name"],
            "message": exercise["message"], "points": points}


def render(student: str, reports: list[dict], provenance: str, now: datetime | None = None,
           language: str | None = None) -> str:
    """One student's page, as one HTML string, from the reports of their notebooks (graded or not). Its language:
    the one most of their graded notebooks set; language (else English) when none was graded."""
    graded = [r for r in reports if "error" not in r]
    language = report_language(reports) if graded or language not in LANGUAGES else language
    tr = functools.partial(i18n.tr, in_language=language)
    notebooks = [{"name": Path(r["notebook"]).name, "notes": r.get("notes", []),
                  "exercises": [_exercise(e, language) for e in r["exercises"]]} for r in graded]
    earned = sum(_points(e) for r in graded for e in r["exercises"])
    possible = sum(_max_points(e) for r in graded for e in r["exercises"])
    passed = sum(e["status"] == "pass" for r in graded for e in r["exercises"])
    exercises = sum(len(r["exercises"]) for r in graded)
    total = plural(possible, language, tr("feedback:total_one", "{earned} of {n} point"),
                   tr("feedback:total_other", "{earned} of {n} points"), earned=number(earned, in_language=language))
    rate = plural(exercises, language, tr("feedback:passed_one", "{passed} of {n} exercise passed"),
                  tr("feedback:passed_other", "{passed} of {n} exercises passed"),
                  passed=number(passed, in_language=language))
    when = f"{now or datetime.now():%Y-%m-%d %H:%M}"
    return TEMPLATES.get_template("feedback.html.j2").render(
        language=language, w=words(language), student=student, colours=COLOURS, symbols=SYMBOLS,
        notebooks=notebooks, total=total, rate=rate,
        ungraded=[(Path(r["notebook"]).name, why_not_graded(r, language)) for r in reports if "error" in r],
        graded_by=tr("feedback:graded_by", "Graded by {provenance} on {date}.", provenance=provenance, date=when))


def write_feedback(reports: list[dict], folder: Path, provenance: str,
                   now: datetime | None = None) -> list[Path]:
    """Write one page per student (report["student"]; the file's name when a report has none) into folder, made
    with its parents, each page whole or not at all; the pages' paths, in the order of the students' names. A
    student none of whose notebooks could be graded reads the class's language. A ValueError, and nothing written,
    when folder is a file."""
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"the feedback folder {folder} is a file, not a folder")
    by_student: dict[str, list[dict]] = defaultdict(list)
    for report in reports:
        by_student[report.get("student") or Path(report["notebook"]).stem].append(report)
    names = page_names(sorted(by_student))
    language = report_language(reports)
    pages = {folder / names[s]: render(s, by_student[s], provenance, now, language) for s in sorted(by_student)}
    folder.mkdir(parents=True, exist_ok=True)
    for path, page in pages.items():
        write_atomically(path, page)
    return list(pages)
