"""Every notebook follows the course's layout: numbered sections, exercises with a time budget, the
things off limits in each, and two collapsed hints (the idea, then the structure with the expressions
left to the student: no line of the solution), and no reference to material a student does not have."""

import re

import nbformat
import pytest

from helpers.checks import exercises_in

from conftest import ROOT, SOLUTIONS

NOTEBOOKS = [path.stem for path in SOLUTIONS]
CONTROL_ONLY = re.compile(r"(else|try|finally):|break|continue|pass")  # a line with no expression to give away


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
                            r"<details><summary>Hint 2: the structure</summary>.*`[^`]+`.*</details>",
                            hints.source, re.S), f"{exercise.name}: two hints, the idea then a code fragment"
        assert re.search(rf"## Exercise {number}: `{exercise.defines}(\.\w+)?`", task.source), exercise.name
        budget = r"\*About \d+( to \d+)? lines?( in [a-z ]+)?\. About \d+ minutes\. Difficulty: [a-z]+"
        assert re.search(budget, task.source), f"{exercise.name}: *About N lines. About M minutes. Difficulty: X.*"
        minutes = int(re.search(r"About (\d+) minutes", task.source).group(1))
        assert exercise.points == max(1, minutes // 5), f"{exercise.name}: a point per 5 minutes of its time budget"
        hint2 = hints.source[hints.source.index("Hint 2"):]
        for line in solution_lines(cells[answer].source):
            assert line not in hint2, f"{exercise.name}: hint 2 gives a line of the solution: {line!r}"


def solution_lines(source):
    """The lines between every # BEGIN SOLUTION and its # END SOLUTION, stripped, without their comments
    (and without the lines that hold no expression, such as `else:`)."""
    lines = []
    for region in source.split("# BEGIN SOLUTION")[1:]:
        for line in region.split("# END SOLUTION")[0].splitlines():
            code = line.split("  #")[0].strip()
            if code and not code.startswith("#") and not CONTROL_ONLY.fullmatch(code):
                lines.append(code)
    return lines


def spellings(dotted):
    """How a notebook writes an off-limits name of the registry: "helpers.positional.positional_encoding" as
    `helpers.positional_encoding`, "torch.nn.functional.layer_norm" as `F.layer_norm`, ...; and the keyword of a
    "function:keyword" entry ("label_smoothing" of "torch.nn.functional.cross_entropy:label_smoothing")."""
    name, _, keyword = dotted.partition(":")
    last = name.rsplit(".", 1)[-1]
    short = {"helpers.": f"helpers.{last}", "torch.nn.functional.": f"F.{last}", "torch.Tensor.": f"Tensor.{last}",
             "torch.nn.": f"nn.{last}"}
    forms = {name} | {form for prefix, form in short.items() if name.startswith(prefix)}
    return sorted(forms), keyword


# The registry's families of torch operators (torch.ops.aten.*softmax*, ...), and how the notebooks name them.
KERNEL_FAMILIES = {"softmax": "other softmax of torch", "scaled_dot_product": "kernels behind it",
                   "_norm": "other normalisations of torch"}


@pytest.mark.parametrize("notebook_name", NOTEBOOKS)
def test_each_exercise_names_everything_off_limits_in_it(notebook_name):
    """Every name of an exercise's @exercise(off_limits=...) appears in its task cell, in backticks, in a sentence
    that starts "Off limits in this exercise" (the registry is the source: a name added there must be named here)."""
    cells = _cells(notebook_name)
    for exercise in exercises_in(notebook_name):
        answer = next(i for i, c in enumerate(cells) if c.cell_type == "code"
                      and c.source.startswith((f"def {exercise.defines}(", f"class {exercise.defines}(")))
        task = cells[answer - 2].source
        if exercise.off_limits:
            assert "Off limits in this exercise (the check refuses" in task, exercise.name
        for dotted in exercise.off_limits:
            if "*" in dotted:  # a family of torch's internal operators, named by what they compute
                phrase = next(words for part, words in KERNEL_FAMILIES.items() if part in dotted)
                assert phrase in " ".join(task.split()), f"{exercise.name}: say {dotted} is off limits ({phrase!r})"
                continue
            forms, keyword = spellings(dotted)
            assert any(f"`{form}`" in task for form in forms), f"{exercise.name}: name {' or '.join(forms)}"
            assert not keyword or f"`{keyword}=`" in task, f"{exercise.name}: name the argument {keyword}="


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


def test_stored_outputs_name_no_folder_of_the_machine_that_ran_them():
    """A stored output shows no path into the author's checkout or checkpoint cache, wherever the notebooks were
    executed (notebook 07 shows, on purpose, the folder of the Python standard library its text is read from)."""
    folders = re.compile(re.escape(str(ROOT)) + r"|[/\\]\.cache[/\\]|[/\\](dates|gpt-[a-z]+)-[0-9a-f]{16}\.pt")
    assert folders.search("Loaded the trained weights from /home/a/course/.cache/checkpoints/dates-0123456789abcdef.pt")
    assert not folders.search("Loaded the trained weights from dates-0123456789abcdef.pt (training took 107 s on cpu).")
    for path in sorted(ROOT.glob("solutions/*.ipynb")) + sorted(ROOT.glob("editions/*/solutions/*.ipynb")):
        for cell in nbformat.read(path, as_version=4).cells:
            for output in cell.get("outputs", []):
                text = output.get("text", "") + str(output.get("data", {}).get("text/plain", ""))
                assert not folders.search(text), f"{path.relative_to(ROOT)}: {text[:200]}"
