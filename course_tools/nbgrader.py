"""The nbgrader cell metadata of the solution notebooks, derived from the exercise registry (nothing typed by hand).

For every exercise of ``helpers.checks.EXERCISES``, its notebook holds one **answer cell** (the code cell that
starts with ``def NAME(`` or ``class NAME(``, NAME being ``exercise.defines``, and holds the ``# BEGIN SOLUTION`` /
``# END SOLUTION`` markers: an "autograded answer" cell, grade_id ``<name>_answer``), and after it one **check
cell** (the code cell that calls ``exercise.check_name``: an "autograder test" cell, grade_id ``<name>``, worth
``exercise.points``). No other cell carries nbgrader metadata or a solution marker. nbgrader adds ``checksum``
and ``cell_type`` itself.
"""

from __future__ import annotations

import re
from typing import Any

import nbformat

SCHEMA_VERSION = 3
KEY = "nbgrader"
MARKER_TEXT = ("BEGIN SOLUTION", "END SOLUTION")  # nbgrader opens/closes a region on any line containing these


class MetadataError(ValueError):
    """The registry's cells cannot be located in a notebook (missing, duplicated or misplaced)."""


def answer_cell_metadata(exercise: Any) -> dict:
    """nbgrader's "autograded answer" cell: the student writes here."""
    return {"schema_version": SCHEMA_VERSION, "grade": False, "solution": True, "locked": False,
            "grade_id": f"{exercise.name}_answer"}


def check_cell_metadata(exercise: Any) -> dict:
    """nbgrader's "autograder test" cell: the check call, worth the exercise's points."""
    return {"schema_version": SCHEMA_VERSION, "grade": True, "solution": False, "locked": True,
            "points": exercise.points, "grade_id": exercise.name}


def has_marker(source: str) -> bool:
    return any(text in source for text in MARKER_TEXT)


def expected_metadata(notebook: nbformat.NotebookNode, stem: str,
                      where: str = "notebook") -> tuple[dict[int, dict], list[str]]:
    """The nbgrader metadata each cell should carry (by cell index), and the problems that prevent it."""
    from helpers.checks import exercises_in  # imported late: it brings torch and matplotlib

    expected: dict[int, dict] = {}
    problems: list[str] = []
    cells = notebook.cells
    code = [(i, c) for i, c in enumerate(cells) if c.cell_type == "code"]
    for exercise in exercises_in(stem):
        starts = (f"def {exercise.defines}(", f"class {exercise.defines}(")
        answers = [i for i, c in code if c.source.startswith(starts) and has_marker(c.source)]
        checks = [i for i, c in code if re.search(rf"(?<![\w.]){re.escape(exercise.check_name)}\(", c.source)]
        needs = {"answer": f"starts with `def {exercise.defines}(` or `class {exercise.defines}(` and holds "
                           "`# BEGIN SOLUTION` / `# END SOLUTION`", "check": f"calls `{exercise.check_name}(`"}
        for kind, found in (("answer", answers), ("check", checks)):
            if len(found) != 1:
                problems.append(f"{where}: exercise {exercise.name!r} needs exactly one {kind} cell, a code cell that "
                                f"{needs[kind]}; found {f'cells {found}' if found else 'no cell'}.")
        if len(answers) == 1 and len(checks) == 1 and checks[0] < answers[0]:
            problems.append(f"{where}, cell {checks[0]}: the check cell of {exercise.name!r} comes before its "
                            f"answer cell (cell {answers[0]}).")
        for indices, metadata in ((answers, answer_cell_metadata(exercise)), (checks, check_cell_metadata(exercise))):
            if len(indices) == 1 and indices[0] in expected:
                problems.append(f"{where}, cell {indices[0]}: is both {expected[indices[0]]['grade_id']!r} and "
                                f"{metadata['grade_id']!r}; an answer and its check need separate cells.")
            elif len(indices) == 1:
                expected[indices[0]] = metadata
    for index, cell in enumerate(cells):
        if has_marker(cell.source) and not expected.get(index, {}).get("solution"):
            problems.append(f"{where}, cell {index}: holds a solution marker but is no exercise's answer cell "
                            "(nbgrader refuses solution regions outside solution cells).")
    return expected, problems


def stamp(notebook: nbformat.NotebookNode, stem: str, where: str = "notebook") -> bool:
    """Write the registry's nbgrader metadata into notebook (in place); True when anything changed.

    Raises MetadataError when a cell of the registry cannot be located."""
    expected, problems = expected_metadata(notebook, stem, where)
    if problems:
        raise MetadataError("\n".join(problems))
    changed = False
    for index, cell in enumerate(notebook.cells):
        want = expected.get(index)
        if want is None:
            if KEY in cell.metadata:
                del cell.metadata[KEY]
                changed = True
        elif cell.metadata.get(KEY) != want:
            cell.metadata[KEY] = nbformat.from_dict(want)
            changed = True
    return changed


def metadata_problems(notebook: nbformat.NotebookNode, stem: str, where: str = "notebook") -> list[str]:
    """Every way the notebook's nbgrader metadata differs from the registry; empty when it matches."""
    expected, problems = expected_metadata(notebook, stem, where)
    for index, cell in enumerate(notebook.cells):
        want, have = expected.get(index), cell.metadata.get(KEY)
        if want is None and have is not None:
            problems.append(f"{where}, cell {index}: carries nbgrader metadata {dict(have)} but is no exercise's "
                            "answer or check cell.")
        elif want is not None and have != want:
            problems.append(f"{where}, cell {index}: nbgrader metadata is {dict(have) if have else None}, "
                            f"the registry gives {want}.")
    return problems
