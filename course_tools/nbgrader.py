"""The nbgrader cell metadata of the solution notebooks, derived from the exercise registry.

Nothing here is typed by hand: for every exercise of ``helpers.checks.EXERCISES`` the notebook
named by ``exercise.notebook`` must hold

* one **answer cell**: the code cell that starts with ``def NAME(`` or ``class NAME(`` (NAME is
  ``exercise.defines``) and holds the ``# BEGIN SOLUTION`` / ``# END SOLUTION`` markers. It becomes
  an nbgrader "autograded answer" cell, grade_id ``<name>_answer``;
* one **check cell**: the code cell that calls ``check_<name>(`` (``exercise.check_name``), after the
  answer cell. It becomes an nbgrader "autograder test" cell, grade_id ``<name>``, worth
  ``exercise.points``.

Every other cell carries no nbgrader metadata, and no other cell may hold a solution marker
(nbgrader refuses a solution region outside a solution cell). nbgrader adds ``checksum`` and
``cell_type`` itself when it generates an assignment; they are not written here.

    expected_metadata(notebook, stem)   {cell index: metadata} and the problems found locating the cells
    stamp(notebook, stem)               write that metadata into the notebook; True if anything changed
    metadata_problems(notebook, stem)   what differs from the registry (empty when all is right)
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


def _exercises(stem: str) -> list:
    from helpers.checks import exercises_in  # imported late: it brings torch and matplotlib

    return exercises_in(stem)


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


def _defines(source: str, name: str) -> bool:
    return source.startswith((f"def {name}(", f"class {name}("))


def _calls(source: str, function: str) -> bool:
    return re.search(rf"(?<![\w.]){re.escape(function)}\(", source) is not None


def expected_metadata(notebook: nbformat.NotebookNode, stem: str,
                      where: str = "notebook") -> tuple[dict[int, dict], list[str]]:
    """The nbgrader metadata each cell should carry (by cell index), and the problems that prevent it."""
    expected: dict[int, dict] = {}
    problems: list[str] = []
    cells = notebook.cells
    code = [(i, c) for i, c in enumerate(cells) if c.cell_type == "code"]
    for exercise in _exercises(stem):
        answers = [i for i, c in code if _defines(c.source, exercise.defines) and has_marker(c.source)]
        checks = [i for i, c in code if _calls(c.source, exercise.check_name)]
        if len(answers) != 1:
            found = f"cells {answers}" if answers else "no cell"
            problems.append(f"{where}: exercise {exercise.name!r} needs exactly one answer cell, a code cell that "
                            f"starts with `def {exercise.defines}(` or `class {exercise.defines}(` and holds "
                            f"`# BEGIN SOLUTION` / `# END SOLUTION`; found {found}.")
        if len(checks) != 1:
            found = f"cells {checks}" if checks else "no cell"
            problems.append(f"{where}: exercise {exercise.name!r} needs exactly one check cell, a code cell that "
                            f"calls `{exercise.check_name}(`; found {found}.")
        if len(answers) == 1 and len(checks) == 1 and checks[0] < answers[0]:
            problems.append(f"{where}, cell {checks[0]}: the check cell of {exercise.name!r} comes before its "
                            f"answer cell (cell {answers[0]}).")
        for indices, metadata in ((answers, answer_cell_metadata(exercise)), (checks, check_cell_metadata(exercise))):
            if len(indices) == 1:
                index = indices[0]
                if index in expected:
                    problems.append(f"{where}, cell {index}: is both {expected[index]['grade_id']!r} and "
                                    f"{metadata['grade_id']!r}; an answer and its check need separate cells.")
                else:
                    expected[index] = metadata
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


__all__ = ["KEY", "MetadataError", "SCHEMA_VERSION", "answer_cell_metadata", "check_cell_metadata", "expected_metadata",
           "has_marker", "metadata_problems", "stamp"]
