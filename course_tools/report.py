"""The instructor's report: one self-contained HTML page of a grading run (``tfs-grade ... --report FILE.html``).

    write_report(reports, Path("report.html"))               the grader's reports, as tfs-grade --json gives them
    write_report(reports, Path("informe.html"), language="es")

The page holds, with no external script, style sheet or image (the charts are inline SVG):

1. per exercise, how many notebooks passed, failed or did not try it (todo), as numbers and a bar;
2. the mistakes found, most frequent first, in a bar chart, each with the hint students read;
3. a student-by-exercise table, each cell coloured by status, the mistake code in each failed cell;
4. the notebooks that could not be graded, and why.

Its words, and the hints, are in the edition's language: the language the graded notebooks set
(``set_language("es")``), or ``language=``.
"""

from __future__ import annotations

import html
import os
import tempfile
from collections import Counter
from pathlib import Path

from helpers.checks import EXERCISES
from helpers.i18n import LANGUAGES, tr

from .verdicts import notebook_language

STATUS_COLOURS = {"pass": "#2e7d32", "fail": "#c62828", "todo": "#9e9e9e"}
BAR_WIDTH = 360  # pixels of the longest bar


def report_language(reports: list[dict]) -> str:
    """The language most of the graded notebooks set ("en" when none)."""
    found = Counter(notebook_language(Path(r["notebook"])) for r in reports if "error" not in r)
    language = found.most_common(1)[0][0] if found else "en"
    return language if language in LANGUAGES else "en"


def _exercise_order(reports: list[dict]) -> list[str]:
    """The exercises that occur in the reports, in course order (the registry's)."""
    seen = {e["name"] for r in reports if "error" not in r for e in r["exercises"]}
    return [name for name in EXERCISES if name in seen] + sorted(seen - set(EXERCISES))


def _hint(exercise: str, code: str, language: str) -> str:
    """The hint students read for a mistake code, in language (the template, its {fields} unfilled)."""
    declared = EXERCISES.get(exercise)
    if declared is not None and code in declared.mistakes:
        return tr(f"{exercise}:{code}", declared.mistakes[code], in_language=language)
    from helpers.checks.harness import GENERIC_MISTAKES

    if code in GENERIC_MISTAKES:
        return tr(f"generic:{code}", GENERIC_MISTAKES[code], in_language=language)
    return ""


def _stacked_bar(counts: dict[str, int], total: int) -> str:
    """An inline SVG bar split into pass, fail and todo."""
    x, parts = 0.0, []
    for status in ("pass", "fail", "todo"):
        width = BAR_WIDTH * counts.get(status, 0) / total if total else 0
        if width:
            parts.append(f'<rect x="{x:.1f}" y="0" width="{width:.1f}" height="14" fill="{STATUS_COLOURS[status]}">'
                         f'<title>{status}: {counts.get(status, 0)}</title></rect>')
        x += width
    return (f'<svg class="bar" role="img" width="{BAR_WIDTH}" height="14" viewBox="0 0 {BAR_WIDTH} 14" '
            f'xmlns="http://www.w3.org/2000/svg">{"".join(parts)}</svg>')


def _mistake_chart(mistakes: list[tuple[str, str, int]]) -> str:
    """An inline SVG bar chart: one labelled bar per (exercise, mistake code), the most frequent first."""
    row, label_width = 22, 330
    top = max(n for _, _, n in mistakes)
    height = row * len(mistakes) + 4
    bars = []
    for i, (exercise, code, n) in enumerate(mistakes):
        y = i * row + 2
        width = max(2.0, BAR_WIDTH * n / top)
        label = html.escape(f"{exercise} · {code}")
        bars.append(f'<text x="{label_width - 6}" y="{y + 14}" text-anchor="end" font-size="12">{label}</text>'
                    f'<rect x="{label_width}" y="{y + 2}" width="{width:.1f}" height="15" fill="#c62828"/>'
                    f'<text x="{label_width + width + 4:.1f}" y="{y + 14}" font-size="12">{n}</text>')
    total_width = label_width + BAR_WIDTH + 40
    return (f'<svg id="mistake-chart" role="img" width="{total_width}" height="{height}" '
            f'viewBox="0 0 {total_width} {height}" xmlns="http://www.w3.org/2000/svg" '
            f'font-family="sans-serif">{"".join(bars)}</svg>')


STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 2em; }
table { border-collapse: collapse; margin: 0.5em 0; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: left; font-size: 0.9em; vertical-align: top; }
td.num { text-align: right; }
td.pass { background: #c8e6c9; } td.fail { background: #ffcdd2; } td.todo { background: #eeeeee; }
td.none { background: #fff; }
.code { font-family: monospace; }
.legend span { display: inline-block; padding: 1px 8px; margin-right: 6px; }
"""


def _words(language: str) -> dict[str, str]:
    """The page's words in language, HTML-escaped."""
    words = {
        "title": tr("report:title", "Grading report", in_language=language),
        "summary": tr("report:summary", "{graded} notebooks graded, {failed} could not be graded.",
                      in_language=language),
        "exercises": tr("report:exercises", "Exercises", in_language=language),
        "exercise": tr("report:exercise", "exercise", in_language=language),
        "pass": tr("report:pass", "passed", in_language=language),
        "fail": tr("report:fail", "failed", in_language=language),
        "todo": tr("report:todo", "did not try", in_language=language),
        "mistakes": tr("report:mistakes", "Mistakes found", in_language=language),
        "mistake": tr("report:mistake", "mistake", in_language=language),
        "count": tr("report:count", "count", in_language=language),
        "hint": tr("report:hint", "what the students read", in_language=language),
        "no_mistakes": tr("report:no_mistakes", "No exercise failed.", in_language=language),
        "students": tr("report:students", "Students", in_language=language),
        "notebook": tr("report:notebook", "notebook", in_language=language),
        "score": tr("report:score", "exercises passed", in_language=language),
        "ungraded": tr("report:ungraded", "Notebooks that could not be graded", in_language=language),
        "none_ungraded": tr("report:none_ungraded", "None: every notebook was graded.", in_language=language),
    }
    return {key: html.escape(text) for key, text in words.items()}


def render(reports: list[dict], language: str | None = None) -> str:
    """The report page, as one HTML string."""
    language = language if language in LANGUAGES else report_language(reports)
    w = _words(language)
    graded = [r for r in reports if "error" not in r]
    failed_to_grade = [r for r in reports if "error" in r]
    names = _exercise_order(reports)
    per_exercise = {name: Counter() for name in names}
    mistakes: Counter = Counter()
    for report in graded:
        for e in report["exercises"]:
            per_exercise[e["name"]][e["status"]] += 1
            if e["status"] == "fail":
                mistakes[(e["name"], e.get("mistake") or "(unrecognised)")] += 1
    order = {name: i for i, name in enumerate(names)}
    ranked = sorted(mistakes.items(), key=lambda item: (-item[1], order.get(item[0][0], 0), item[0][1]))
    summary = w["summary"].format(graded=len(graded), failed=len(failed_to_grade))

    parts = [f'<!DOCTYPE html><html lang="{language}"><head><meta charset="utf-8">',
             f"<title>{w['title']}</title><style>{STYLE}</style></head><body>",
             f"<h1>{w['title']}</h1>", f"<p>{summary}</p>"]

    parts.append(f"<h2>{w['exercises']}</h2>")
    parts.append('<p class="legend">' + "".join(
        f'<span style="background:{STATUS_COLOURS[s]};color:#fff">{w[s]}</span>' for s in ("pass", "fail", "todo"))
        + "</p>")
    parts.append(f'<table id="exercises"><tr><th>{w["exercise"]}</th><th>{w["pass"]}</th><th>{w["fail"]}</th>'
                 f'<th>{w["todo"]}</th><th></th></tr>')
    for name in names:
        counts = per_exercise[name]
        parts.append(f'<tr><td class="code">{html.escape(name)}</td>'
                     + "".join(f'<td class="num">{counts.get(s, 0)}</td>' for s in ("pass", "fail", "todo"))
                     + f"<td>{_stacked_bar(counts, sum(counts.values()))}</td></tr>")
    parts.append("</table>")

    parts.append(f"<h2>{w['mistakes']}</h2>")
    if ranked:
        parts.append(_mistake_chart([(ex, code, n) for (ex, code), n in ranked]))
        parts.append(f'<table id="hints"><tr><th>{w["exercise"]}</th><th>{w["mistake"]}</th><th>{w["count"]}</th>'
                     f'<th>{w["hint"]}</th></tr>')
        for (exercise, code), n in ranked:
            parts.append(f'<tr><td class="code">{html.escape(exercise)}</td><td class="code">{html.escape(code)}</td>'
                         f'<td class="num">{n}</td><td>{html.escape(_hint(exercise, code, language))}</td></tr>')
        parts.append("</table>")
    else:
        parts.append(f"<p>{w['no_mistakes']}</p>")

    parts.append(f"<h2>{w['students']}</h2>")
    parts.append(f'<table id="students"><tr><th>{w["notebook"]}</th>'
                 + "".join(f'<th class="code">{html.escape(name)}</th>' for name in names)
                 + f'<th>{w["score"]}</th></tr>')
    for report in graded:
        by_name = {e["name"]: e for e in report["exercises"]}
        cells = []
        for name in names:
            e = by_name.get(name)
            if e is None:
                cells.append('<td class="none"></td>')
                continue
            text = html.escape(e.get("mistake") or "") or w["fail"] if e["status"] == "fail" else w[e["status"]]
            cells.append(f'<td class="{e["status"]}" title="{html.escape(e.get("message") or "")}">{text}</td>')
        parts.append(f'<tr><td class="code">{html.escape(report["notebook"])}</td>{"".join(cells)}'
                     f'<td class="num">{report["passed"]}/{report["total"]}</td></tr>')
    parts.append("</table>")

    parts.append(f"<h2>{w['ungraded']}</h2>")
    if failed_to_grade:
        parts.append('<table id="ungraded">' + "".join(
            f'<tr><td class="code">{html.escape(r["notebook"])}</td><td>{html.escape(r["error"])}</td></tr>'
            for r in failed_to_grade) + "</table>")
    else:
        parts.append(f"<p>{w['none_ungraded']}</p>")
    parts.append("</body></html>\n")
    return "\n".join(parts)


def write_report(reports: list[dict], path: Path, language: str | None = None) -> None:
    """Write the report page to path, whole or not at all (a temporary file beside it, then a rename)."""
    path = Path(path)
    text = render(reports, language)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


__all__ = ["render", "report_language", "write_report"]
