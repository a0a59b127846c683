"""Every notebook follows the course's layout: numbered sections, exercises with a time budget and
two collapsed hints (the idea, then a code fragment that is not the whole solution), and no
reference to material a student does not have."""

import re

import nbformat
import pytest

from helpers.checks import exercises_in

from conftest import ROOT, SOLUTIONS

NOTEBOOKS = [path.stem for path in SOLUTIONS]


def _cells(notebook_name):
    return nbformat.read(ROOT / "solutions" / f"{notebook_name}.ipynb", as_version=4).cells


@pytest.mark.parametrize("notebook_name", NOTEBOOKS)
def test_each_exercise_has_a_heading_a_time_budget_and_two_hints(notebook_name):
    cells = _cells(notebook_name)
    exercises = exercises_in(notebook_name)
    for number, exercise in enumerate(exercises, start=1):
        answer = next(i for i, c in enumerate(cells) if c.cell_type == "code"
                      and c.source.startswith((f"def {exercise.defines}(", f"class {exercise.defines}(")))
        hints, task = cells[answer - 1], cells[answer - 2]
        assert hints.cell_type == "markdown" and task.cell_type == "markdown"
        assert re.fullmatch(r"<details><summary>Hint 1: the idea</summary>.+</details>\s*"
                            r"<details><summary>Hint 2: the (code|structure)</summary>.*`[^`]+`.*</details>",
                            hints.source, re.S), f"{exercise.name}: two hints, the idea then a code fragment"
        assert re.search(rf"## Exercise {number}: `{exercise.defines}(\.\w+)?`", task.source), exercise.name
        budget = r"\*About \d+( to \d+)? lines?( in [a-z ]+)?\. About \d+ minutes\. Difficulty: [a-z]+"
        assert re.search(budget, task.source), f"{exercise.name}: *About N lines. About M minutes. Difficulty: X.*"
        solution = [line.strip() for line in cells[answer].source.split("# BEGIN SOLUTION")[1]
                    .split("# END SOLUTION")[0].splitlines() if line.strip()]
        assert not all(line in hints.source for line in solution), f"{exercise.name}: hint 2 gives the whole solution"


@pytest.mark.parametrize("notebook_name", NOTEBOOKS)
def test_sections_are_numbered_and_nothing_refers_to_missing_material(notebook_name):
    headings = [line for c in _cells(notebook_name) if c.cell_type == "markdown"
                for line in c.source.splitlines() if line.startswith("## ")]
    sections = [h for h in headings if not h.startswith(("## Exercise ", "## Summary"))]
    assert [int(re.match(r"## (\d+)\. \S", h).group(1)) for h in sections] == list(range(1, len(sections) + 1))
    assert headings[-1] == "## Summary"
    text = "\n".join(c.source for c in _cells(notebook_name)).lower()
    for word in ("slide", "source document", "thread", "openmp", "omp_"):
        assert word not in text, f"{notebook_name} mentions {word!r}"


def test_readme_outline_lists_every_notebook_with_its_time():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    rows = dict(re.findall(r"^\| \d\d \| `(\d\d_\w+)\.ipynb` \|.*\| (\d+) min \|$", readme, re.M))
    assert list(rows) == NOTEBOOKS, "the README's outline has one row per notebook, in order"
    for name in NOTEBOOKS:
        header = _cells(name)[0].source
        number = int(name[:2])
        assert f"notebook {number} of {len(NOTEBOOKS)}.** About {rows[name]} minutes" in header, name
