"""The instructor's report: one self-contained HTML page of a grading run (``tfs-grade FOLDER --report FILE.html``).

    write_report(reports, Path("report.html"), roots=[Path("submissions")])   the grader's reports (tfs-grade --json)
    write_report(reports, Path("informe.html"), language="es")

The page has no external script, style sheet, font or image (the charts are inline SVG; its only links are
anchors inside the page), and prints as it shows. It holds:

1. when it was written, the folders graded, how many notebooks were graded, could not be graded or were
   skipped, and how many of all the exercises passed;
2. per exercise, grouped by notebook, how many students passed, failed or did not try it (todo): numbers and a bar;
3. the mistakes found, numbered, the most frequent first: a bar chart with an axis, and the hint each one gave;
4. a student-by-exercise table, the best score first: ✓ ✗ – in coloured cells, each ✗ with its mistake's number,
   and under a student's row the message each of their failed checks gave. A student's notebooks share a row: the
   file name without the course notebook's name is the student (``alice/01_positional_encoding.ipynb`` and
   ``alice_02_attention.ipynb`` are both ``alice``);
5. the files that could not be graded and why, and the files in the graded folders that are not notebooks.

Students and files are named by their paths relative to the graded folder. The page's words, the hints and the
reasons are in the edition's language: the one most graded notebooks set (``set_language("es")``), or ``language=``.
"""

from __future__ import annotations

import html
import os
import re
from collections import Counter, defaultdict
from datetime import datetime
from pathlib import Path

from helpers.checks import EXERCISES
from helpers.i18n import LANGUAGES, number, tr
from helpers.notebook_io import write_atomically

from .report_parts import COLOURS, STATUSES, STYLE, mistake_chart, plural, stacked_bar, words
from .verdicts import notebook_language

SYMBOLS = {"pass": "✓", "fail": "✗", "todo": "–"}
SKIP_PARTS = {".ipynb_checkpoints"}  # the grader skips these folders too


# ---------------------------------------------------------------------------------------- the run's facts
def report_language(reports: list[dict]) -> str:
    """The language most of the graded notebooks set ("en" when none)."""
    found = Counter(notebook_language(Path(r["notebook"])) for r in reports if "error" not in r)
    language = found.most_common(1)[0][0] if found else "en"
    return language if language in LANGUAGES else "en"


def skipped_files(roots: list[Path]) -> list[Path]:
    """The files under the graded folders that the grader does not read: not ``.ipynb`` (hidden files and
    ``.ipynb_checkpoints`` aside)."""
    found = []
    for root in (Path(r) for r in roots):
        if root.is_dir():
            found += [p for p in root.rglob("*") if p.is_file() and p.suffix != ".ipynb"
                      and not any(part.startswith(".") or part in SKIP_PARTS for part in p.relative_to(root).parts)]
    return sorted(found)


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
    """Who a file belongs to: its relative path without the course notebook's name and the extension."""
    name = relative.removesuffix(".ipynb")
    folder, _, file = name.rpartition("/")
    if stem and stem in file:
        file = file.replace(stem, "", 1).strip("_- .")
        name = "/".join(part for part in (folder, file) if part)
    return name or relative


def _students(graded: list[dict], base: Path | None) -> list[tuple[str, list[dict]]]:
    """(student, their reports), the most exercises passed first. A student with two files of one course
    notebook gets a row per file, named by the file."""
    groups: dict[str, list[tuple[str, dict]]] = defaultdict(list)
    for report in graded:
        relative = _relative(report["notebook"], base)
        groups[_student(relative, _stem(report))].append((relative, report))
    rows = []
    for student, files in groups.items():
        stems = [_stem(report) for _, report in files]
        if len(set(stems)) == len(stems):
            rows.append((student, [report for _, report in files]))
        else:
            rows += [(relative, [report]) for relative, report in files]
    return sorted(rows, key=lambda row: (-sum(r["passed"] for r in row[1]), row[0]))


def _exercise_order(reports: list[dict]) -> list[str]:
    """The exercises that occur in the reports, in course order (the registry's)."""
    seen = {e["name"] for r in reports if "error" not in r for e in r["exercises"]}
    return [name for name in EXERCISES if name in seen] + sorted(seen - set(EXERCISES))


def _by_notebook(names: list[str]) -> list[tuple[str, list[str]]]:
    """The exercises grouped by course notebook, in order."""
    groups: list[tuple[str, list[str]]] = []
    for name in names:
        stem = EXERCISES[name].notebook if name in EXERCISES else "?"
        if groups and groups[-1][0] == stem:
            groups[-1][1].append(name)
        else:
            groups.append((stem, [name]))
    return groups


# ---------------------------------------------------------------------------------------- hints and reasons
def _hint(exercise: str, code: str, language: str) -> str:
    """The hint students read for a mistake code, in language (its {fields} shown as …)."""
    declared = EXERCISES.get(exercise)
    if declared is not None and code in declared.mistakes:
        text = tr(f"{exercise}:{code}", declared.mistakes[code], in_language=language)
    else:
        from helpers.checks.harness import GENERIC_MISTAKES

        if code in GENERIC_MISTAKES:
            text = tr(f"generic:{code}", GENERIC_MISTAKES[code], in_language=language)
        else:
            text = tr("report:unrecognised_hint", "the check failed without naming a known mistake: what it told "
                      "each student is in the last table.", in_language=language)
    return re.sub(r"\{\w+\}", "…", text)


def _reason(report: dict, language: str) -> str:
    """Why the grader could not grade a file, in language (the grader's English sentence when unknown)."""
    error, path = report["error"], report["notebook"]
    rest = next((error[len(p):] for p in (f"cannot read {path}: ", f"cannot grade {path}: ") if error.startswith(p)),
                None)
    if rest is None:
        return error
    detail = re.fullmatch(r"(not JSON|not a Jupyter notebook of format 4) \((.*)\)", rest)
    if rest == "no .ipynb file in this folder":
        return tr("report:reason_empty_folder", "no .ipynb file in this folder", in_language=language)
    if rest.startswith("it is JSON but not a Jupyter notebook"):
        return tr("report:reason_not_notebook", "it is JSON, but not a Jupyter notebook (it has no list of cells)",
                  in_language=language)
    if detail and detail[1] == "not JSON":
        return tr("report:reason_not_json", "it is not JSON, so not a notebook ({detail})", in_language=language,
                  detail=detail[2])
    if detail:
        return tr("report:reason_old_format", "not a Jupyter notebook of format 4 ({detail})", in_language=language,
                  detail=detail[2])
    if rest.startswith("the folder cannot be read"):
        return tr("report:reason_folder_unreadable", "the folder cannot be read ({detail})", in_language=language,
                  detail=rest.partition("(")[2].rstrip(")"))
    if rest.startswith("a link to "):
        return tr("report:reason_dangling_link", "a link to {target}, which does not exist", in_language=language,
                  target=rest.removeprefix("a link to ").removesuffix(", which does not exist"))
    if rest.startswith("its name contains no course notebook's name"):
        return tr("report:reason_not_course", "none of the course's notebooks: its name contains no course "
                  "notebook's name (such as 01_positional_encoding) and none of its cells calls a check",
                  in_language=language)
    return tr("report:reason_unreadable", "the file cannot be read ({detail})", in_language=language, detail=rest)


# ---------------------------------------------------------------------------------------- the page
def _markup(text: str) -> str:
    """text HTML-escaped, its `code spans` as <code>."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(text))


def _header(w: dict, language: str, graded: list[dict], ungraded: list[dict], skipped: list[Path],
            roots: list[Path] | None, students: int, now: datetime) -> list[str]:
    passed, total = sum(r["passed"] for r in graded), sum(r["total"] for r in graded)
    counts = [
        plural(len(graded), language, tr("report:graded_one", "{n} notebook graded", in_language=language),
                tr("report:graded_other", "{n} notebooks graded", in_language=language)),
        plural(students, language, tr("report:students_one", "{n} student", in_language=language),
                tr("report:students_other", "{n} students", in_language=language)),
        plural(len(ungraded), language, tr("report:ungraded_one", "{n} file could not be graded",
                                            in_language=language),
                tr("report:ungraded_other", "{n} files could not be graded", in_language=language)),
        plural(len(skipped), language, tr("report:skipped_one", "{n} file skipped (not .ipynb)",
                                           in_language=language),
                tr("report:skipped_other", "{n} files skipped (not .ipynb)", in_language=language)),
    ]
    rate = plural(total, language, tr("report:rate_one", "{passed} of {n} exercise passed ({percent}%)",
                                       in_language=language),
                   tr("report:rate_other", "{passed} of {n} exercises passed ({percent}%)", in_language=language),
                   passed=number(passed, in_language=language),
                   percent=number(100 * passed / total if total else 0, in_language=language))
    lines = [f"<h1>{html.escape(w['title'])}</h1>",
             f'<p class="meta">{html.escape(w["written"])}: {now:%Y-%m-%d %H:%M}</p>']
    if roots:
        lines.append(f'<p class="meta">{html.escape(w["folders"])}: '
                     + ", ".join(f'<span class="code">{html.escape(str(Path(r).resolve()))}</span>' for r in roots)
                     + "</p>")
    lines.append(f'<p class="summary" id="summary"><strong>{html.escape(rate)}</strong><br>'
                 + html.escape(" · ".join(counts)) + "</p>")
    return lines


def _exercise_table(w: dict, names: list[str], per_exercise: dict[str, Counter]) -> list[str]:
    lines = [f'<table id="exercises"><tr><th>{html.escape(w["exercise"])}</th>'
             + "".join(f'<th><span class="swatch {s}"></span>{html.escape(w[s])}</th>' for s in STATUSES)
             + "<th></th></tr>"]
    for stem, group in _by_notebook(names):
        lines.append(f'<tr class="group"><th colspan="5" class="code">{html.escape(stem)}</th></tr>')
        for name in group:
            counts = per_exercise[name]
            lines.append(f'<tr><td class="code">{html.escape(name)}</td>'
                         + "".join(f'<td class="num">{counts.get(s, 0)}</td>' for s in STATUSES)
                         + f"<td>{stacked_bar(counts, sum(counts.values()), w)}</td></tr>")
    return lines + ["</table>"]


def _legend(w: dict, with_none: bool) -> str:
    items = [f'<span><span class="chip pass">{SYMBOLS["pass"]}</span>{html.escape(w["pass"])}</span>',
             f'<span><span class="chip fail">{SYMBOLS["fail"]}<sup>3</sup></span>'
             f'{html.escape(w["fail_legend"])}</span>',
             f'<span><span class="chip todo">{SYMBOLS["todo"]}</span>{html.escape(w["todo"])}</span>']
    if with_none:
        items.append(f'<span><span class="chip none">&nbsp;</span>{html.escape(w["none"])}</span>')
    return '<div class="legend">' + "".join(items) + "</div>"


def _student_table(w: dict, names: list[str], rows: list[tuple[str, list[dict]]],
                   numbers: dict[tuple[str, str], int]) -> list[str]:
    """The grid: a row per student, a column per exercise grouped by notebook, a symbol per cell."""
    head = [f'<tr><th rowspan="2" class="sticky">{html.escape(w["student"])}</th>'
            + "".join(f'<th colspan="{len(g)}" class="nb">{html.escape(stem.replace("_", " "))}</th>'
                      for stem, g in _by_notebook(names))
            + f'<th rowspan="2" class="score">{html.escape(w["score"])}</th></tr>',
            "<tr>" + "".join(f'<th class="ex"><span>{html.escape(n)}</span></th>' for n in names) + "</tr>"]
    lines = ['<div class="scroll"><table id="students">', *head]
    for i, (student, reports) in enumerate(rows):
        by_name = {e["name"]: e for r in reports for e in r["exercises"]}
        cells = []
        for name in names:
            e = by_name.get(name)
            if e is None:
                cells.append('<td class="cell none"></td>')
            elif e["status"] == "fail":
                code = e.get("mistake") or w["unrecognised"]
                n, title = numbers[(name, code)], html.escape(f'{code}: {e.get("message") or ""}')
                cells.append(f'<td class="cell fail" title="{title}"><a href="#mistake-{n}">'
                             f'{SYMBOLS["fail"]}<sup>{n}</sup></a></td>')
            else:
                cells.append(f'<td class="cell {e["status"]}" title="{html.escape(e.get("message") or "")}">'
                             f'{SYMBOLS[e["status"]]}</td>')
        passed, total = sum(r["passed"] for r in reports), sum(r["total"] for r in reports)
        name = html.escape(student)
        if any(e["status"] == "fail" for e in by_name.values()):
            name = f'<a href="#messages-{i}">{name}</a>'
        lines.append(f'<tr class="student"><td class="code sticky">{name}</td>{"".join(cells)}'
                     f'<td class="num">{passed}/{total}</td></tr>')
    return lines + ["</table></div>"]


def _messages_table(w: dict, names: list[str], rows: list[tuple[str, list[dict]]],
                    numbers: dict[tuple[str, str], int], base: Path | None) -> list[str]:
    """What each failed check told each student, in the order of the grid, with the notebook file."""
    order = {name: i for i, name in enumerate(names)}
    lines = [f'<table id="messages"><tr><th>{html.escape(w["student"])}</th><th>{html.escape(w["exercise"])}</th>'
             f'<th>{html.escape(w["mistake"])}</th><th>{html.escape(w["message"])}</th></tr>']
    for i, (student, reports) in enumerate(rows):
        failed = sorted(((r, e) for r in reports for e in r["exercises"] if e["status"] == "fail"),
                        key=lambda pair: order[pair[1]["name"]])
        for j, (report, e) in enumerate(failed):
            code = e.get("mistake") or w["unrecognised"]
            n = numbers[(e["name"], code)]
            first = (f'<td rowspan="{len(failed)}" class="code" id="messages-{i}">{html.escape(student)}</td>'
                     if j == 0 else "")
            lines.append(f'<tr>{first}<td class="code" title="{html.escape(_relative(report["notebook"], base))}">'
                         f'{html.escape(e["name"])}</td><td class="code mistake"><a href="#mistake-{n}">{n}</a> '
                         f'{html.escape(code)}</td><td>{_markup(e.get("message") or "")}</td></tr>')
    return lines + ["</table>"]


def render(reports: list[dict], language: str | None = None, roots: list[Path] | None = None,
           now: datetime | None = None) -> str:
    """The report page, as one HTML string. roots: the files and folders graded (tfs-grade's arguments): the
    page names them, shows paths relative to them and lists the files in them it skipped."""
    language = language if language in LANGUAGES else report_language(reports)
    w = words(language)
    graded = [r for r in reports if "error" not in r]
    ungraded = [r for r in reports if "error" in r]
    skipped = skipped_files(roots or [])
    base = _base(roots, reports)
    names = _exercise_order(reports)
    rows = _students(graded, base)
    per_exercise = {name: Counter() for name in names}
    mistakes: Counter = Counter()
    for report in graded:
        for e in report["exercises"]:
            per_exercise[e["name"]][e["status"]] += 1
            if e["status"] == "fail":
                mistakes[(e["name"], e.get("mistake") or w["unrecognised"])] += 1
    order = {name: i for i, name in enumerate(names)}
    ranked = [(ex, code, n) for (ex, code), n in
              sorted(mistakes.items(), key=lambda item: (-item[1], order.get(item[0][0], 0), item[0][1]))]
    numbers = {(ex, code): i for i, (ex, code, _) in enumerate(ranked, 1)}

    parts = [f'<!DOCTYPE html><html lang="{language}"><head><meta charset="utf-8">',
             f"<title>{html.escape(w['title'])}</title><style>{STYLE}</style></head><body>",
             *_header(w, language, graded, ungraded, skipped, roots, len(rows), now or datetime.now()),
             f"<h2>{html.escape(w['exercises'])}</h2>", *_exercise_table(w, names, per_exercise),
             f"<h2>{html.escape(w['mistakes'])}</h2>"]
    if ranked:
        parts.append(mistake_chart(ranked, w, language))
        parts.append(f'<table id="hints"><tr><th>#</th><th>{html.escape(w["exercise"])}</th>'
                     f'<th>{html.escape(w["mistake"])}</th><th>{html.escape(w["count"])}</th>'
                     f'<th>{html.escape(w["hint"])}</th></tr>')
        for i, (exercise, code, n) in enumerate(ranked, 1):
            parts.append(f'<tr id="mistake-{i}"><td class="num">{i}</td><td class="code">{html.escape(exercise)}</td>'
                         f'<td class="code">{html.escape(code)}</td><td class="num">{n}</td>'
                         f"<td>{_markup(_hint(exercise, code, language))}</td></tr>")
        parts.append("</table>")
    else:
        parts.append(f"<p>{html.escape(w['no_mistakes'])}</p>")

    parts += [f"<h2>{html.escape(w['students'])}</h2>", f'<p class="meta">{html.escape(w["sorted"])}</p>',
              _legend(w, any(len({e["name"] for r in reports for e in r["exercises"]}) < len(names)
                             for _, reports in rows)),
              *_student_table(w, names, rows, numbers)]
    if ranked:
        parts += [f"<h2>{html.escape(w['messages'])}</h2>", *_messages_table(w, names, rows, numbers, base)]

    parts.append(f"<h2>{html.escape(w['ungraded'])}</h2>")
    if ungraded:
        parts.append('<table id="ungraded">' + "".join(
            f'<tr><td class="code">{html.escape(_relative(r["notebook"], base))}</td>'
            f"<td>{html.escape(_reason(r, language))}</td></tr>" for r in ungraded) + "</table>")
    else:
        parts.append(f"<p>{html.escape(w['none_ungraded'])}</p>")
    if roots:
        parts.append(f"<h2>{html.escape(w['skipped'])}</h2>")
        parts.append('<ul id="skipped">' + "".join(f'<li class="code">{html.escape(_relative(p, base))}</li>'
                                                   for p in skipped) + "</ul>" if skipped
                     else f"<p>{html.escape(w['none_skipped'])}</p>")
    parts.append("</body></html>\n")
    return "\n".join(parts)


def write_report(reports: list[dict], path: Path, language: str | None = None,
                 roots: list[Path] | None = None) -> None:
    """Write the report page to path, whole or not at all (helpers.notebook_io.write_atomically), readable as any
    new file of the user's (the umask decides)."""
    text = render(reports, language, roots)
    umask = os.umask(0)
    os.umask(umask)

    def write(temporary: Path) -> None:
        temporary.write_text(text, encoding="utf-8")
        os.chmod(temporary, 0o666 & ~umask)  # as any new file, not mkstemp's owner-only 0600

    write_atomically(Path(path), writer=write)


__all__ = ["COLOURS", "render", "report_language", "skipped_files", "write_report"]
