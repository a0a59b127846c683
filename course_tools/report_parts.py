"""The parts of the instructor's report (course_tools/report.py) that are not its data: the page's fixed words,
its pictures (inline SVG bars and the chart of mistakes) and its style sheet."""

from __future__ import annotations

import html
import math
from collections import Counter

from helpers.i18n import number, tr

STATUSES = ("pass", "fail", "todo")
# Each status: (cell background, ink). The ink draws the cell's symbol, the legend's and the bars: ink on the
# background and on white contrast at least 4.5:1 (WCAG AA; tests/test_report.py measures it).
COLOURS = {"pass": ("#e3f1e4", "#1e6b24"), "fail": ("#fbe3e4", "#b3141b"), "todo": ("#f2f2f2", "#6b6b6b")}
BAR_WIDTH = 320  # pixels of a full bar
CHART_BARS = 15  # the most frequent mistakes drawn; the table under the chart lists them all
CHAR_WIDTH = 7.9  # pixels of one character of the chart's 13 px monospace labels


def plural(n: int, language: str, one: str, other: str, **fields) -> str:
    """The template one or other (each with an {n} field), as language chooses for n: English and Spanish
    say one for 1, Brazilian Portuguese for 0 and 1, Vietnamese never."""
    singular = {"pt": n in (0, 1), "vi": False}.get(language, n == 1)
    return (one if singular else other).format(n=number(n, in_language=language), **fields)


def words(language: str) -> dict[str, str]:
    """The page's fixed words in language (not yet HTML-escaped)."""
    return {
        "title": tr("report:title", "Grading report", in_language=language),
        "written": tr("report:written", "Written", in_language=language),
        "folders": tr("report:folders", "Graded", in_language=language),
        "exercises": tr("report:exercises", "Exercises", in_language=language),
        "exercise": tr("report:exercise", "exercise", in_language=language),
        "pass": tr("report:pass", "passed", in_language=language),
        "fail": tr("report:fail", "failed", in_language=language),
        "todo": tr("report:todo", "did not try", in_language=language),
        "none": tr("report:no_notebook", "no notebook handed in", in_language=language),
        "fail_legend": tr("report:fail_legend", "failed: the number is the mistake's, in the list of mistakes",
                          in_language=language),
        "mistakes": tr("report:mistakes", "Mistakes found", in_language=language),
        "mistake": tr("report:mistake", "mistake", in_language=language),
        "count": tr("report:count", "students", in_language=language),
        "hint": tr("report:hint", "what the students read", in_language=language),
        "chart_caption": tr("report:chart_caption", "How many students made each mistake, the most frequent first. "
                            "The numbers are those of the table below and of the ✗ in the table of students.",
                            in_language=language),
        "no_mistakes": tr("report:no_mistakes", "No exercise failed.", in_language=language),
        "unrecognised": tr("report:unrecognised", "(unrecognised)", in_language=language),
        "students": tr("report:students", "Students", in_language=language),
        "student": tr("report:student", "student", in_language=language),
        "sorted": tr("report:sorted", "The most exercises passed first.", in_language=language),
        "messages": tr("report:messages", "What each failed check told the student", in_language=language),
        "message": tr("report:message", "the check's message", in_language=language),
        "score": tr("report:score", "exercises passed", in_language=language),
        "ungraded": tr("report:ungraded", "Files that could not be graded", in_language=language),
        "none_ungraded": tr("report:none_ungraded", "None: every notebook was graded.", in_language=language),
        "skipped": tr("report:skipped", "Files skipped (not .ipynb)", in_language=language),
        "none_skipped": tr("report:none_skipped", "None: the graded folders hold notebooks only.",
                           in_language=language),
    }


def stacked_bar(counts: Counter, total: int, words: dict) -> str:
    """An inline SVG bar split into pass, fail and todo, in the statuses' inks."""
    x, parts = 0.0, []
    for status in STATUSES:
        width = BAR_WIDTH * counts.get(status, 0) / total if total else 0
        if width:
            parts.append(f'<rect x="{x:.1f}" y="0" width="{width:.1f}" height="14" fill="{COLOURS[status][1]}">'
                         f'<title>{html.escape(words[status])}: {counts.get(status, 0)}</title></rect>')
        x += width
    return f'<svg class="bar" role="img" width="{BAR_WIDTH}" height="14">{"".join(parts)}</svg>'


def _ticks(top: int) -> list[int]:
    """Whole-number ticks from 0 to at least top, at most 9 of them, a step of 1, 2 or 5 times a power of 10."""
    step = next(m * 10 ** k for k in range(9) for m in (1, 2, 5) if top <= 8 * m * 10 ** k)
    return list(range(0, math.ceil(top / step) * step + 1, step))


def mistake_chart(ranked: list[tuple[str, str, int]], words: dict, language: str) -> str:
    """An inline SVG bar chart: one bar per (exercise, mistake code), numbered, the most frequent first (at most
    CHART_BARS), with a whole-number axis and a caption."""
    caption = words["chart_caption"]
    if len(ranked) > CHART_BARS:
        caption += " " + plural(len(ranked) - CHART_BARS, language,
                                 tr("report:chart_more_one", "The {n} other mistake is in the table only.",
                                    in_language=language),
                                 tr("report:chart_more_other", "The {n} others are in the table only.",
                                    in_language=language))
        ranked = ranked[:CHART_BARS]
    labels = [f"{i}. {exercise} · {code}" for i, (exercise, code, _) in enumerate(ranked, 1)]
    left = int(CHAR_WIDTH * max(len(label) for label in labels)) + 16
    ticks = _ticks(max(n for _, _, n in ranked))
    scale = BAR_WIDTH / ticks[-1]
    row, top = 24, 4
    axis_y = top + row * len(ranked) + 4
    parts = []
    for i, (label, (_, _, n)) in enumerate(zip(labels, ranked)):
        y = top + i * row
        parts.append(f'<text x="{left - 8}" y="{y + 16}" text-anchor="end" class="label">{html.escape(label)}</text>'
                     f'<rect class="mistake-bar" x="{left}" y="{y + 3}" width="{max(2.0, n * scale):.1f}" height="17"'
                     f' fill="{COLOURS["fail"][1]}"/><text x="{left + n * scale + 5:.1f}" y="{y + 16}">{n}</text>')
    parts.append(f'<line x1="{left}" y1="{axis_y}" x2="{left + BAR_WIDTH}" y2="{axis_y}" stroke="#444"/>')
    for tick in ticks:
        x = left + tick * scale
        parts.append(f'<line x1="{x:.1f}" y1="{axis_y}" x2="{x:.1f}" y2="{axis_y + 5}" stroke="#444"/>'
                     f'<text x="{x:.1f}" y="{axis_y + 18}" text-anchor="middle">{tick}</text>')
    parts.append(f'<text x="{left + BAR_WIDTH / 2:.1f}" y="{axis_y + 36}" text-anchor="middle" class="axis">'
                 f'{html.escape(words["count"])}</text>')
    width, height = left + BAR_WIDTH + 40, axis_y + 44
    return (f'<figure><svg id="mistake-chart" role="img" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" font-size="13">{"".join(parts)}</svg>'
            f'<figcaption>{html.escape(caption)}</figcaption></figure>')


STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #1a1a1a; max-width: 1400px; }
h1 { font-size: 1.5em; margin-bottom: 0.3em; } h2 { font-size: 1.2em; margin-top: 1.8em; }
.meta { color: #444; margin: 0.2em 0; } .summary { font-size: 1.05em; margin: 0.6em 0; }
.summary strong { font-size: 1.2em; }
table { border-collapse: collapse; margin: 0.5em 0; }
th, td { border: 1px solid #c8c8c8; padding: 3px 8px; text-align: left; font-size: 0.9em; vertical-align: top; }
th { background: #f7f7f7; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.group th { background: #eef1f6; font-weight: 600; }
.code, code { font-family: ui-monospace, monospace; font-size: 0.95em; }
figure { margin: 0.5em 0; } figcaption { color: #444; font-size: 0.9em; }
#mistake-chart text { font-family: ui-monospace, monospace; fill: #1a1a1a; }
#mistake-chart text.axis { font-family: system-ui, sans-serif; }
.scroll { overflow-x: auto; max-width: 100%; }
#students th.ex { vertical-align: bottom; padding: 4px 2px; font-weight: normal; }
#students th.ex span { writing-mode: vertical-rl; transform: rotate(180deg); white-space: nowrap;
  font-family: ui-monospace, monospace; font-size: 0.9em; }
#students th.nb { text-align: center; font-size: 0.8em; font-weight: 600; min-width: 2em; }
#students td.cell { text-align: center; padding: 2px 4px; min-width: 1.6em; white-space: nowrap; font-weight: 600; }
#students td.cell a { color: inherit; text-decoration: none; }
#students td.cell sup { font-size: 0.75em; }
#students .sticky { position: sticky; left: 0; z-index: 1; background: #fff; }
#students th.sticky { background: #f7f7f7; }
#students th.score { max-width: 7em; }
#messages td { font-size: 0.85em; } #messages td.mistake { white-space: nowrap; }
#messages a, #students td.sticky a { color: inherit; }
.legend { display: flex; flex-wrap: wrap; gap: 0.4em 1.2em; margin: 0.5em 0; font-size: 0.9em; }
.chip { display: inline-block; min-width: 1.6em; text-align: center; border: 1px solid #c8c8c8; font-weight: 600;
  margin-right: 0.3em; }
td.none, .chip.none { background: #fff; }
.swatch { display: inline-block; width: 0.8em; height: 0.8em; margin-right: 0.3em; vertical-align: -0.05em; }
@media print { body { margin: 0; } .scroll { overflow: visible; } tr { break-inside: avoid; } }
* { -webkit-print-color-adjust: exact; print-color-adjust: exact; }
""" + "".join(f"td.{s}, .chip.{s} {{ background: {bg}; color: {ink}; }} .swatch.{s} {{ background: {ink}; }}\n"
             for s, (bg, ink) in COLOURS.items())


__all__ = ["BAR_WIDTH", "CHART_BARS", "COLOURS", "STATUSES", "STYLE", "mistake_chart", "plural", "stacked_bar",
           "words"]
