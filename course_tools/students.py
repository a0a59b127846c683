"""Who handed in a notebook: the student of each graded file, by a rule the instructor may change.

    student_of(Path("submissions/alice/01_positional_encoding.ipynb"), [Path("submissions")])   -> "alice"
    student_of(Path("submissions/bob_02_attention.ipynb"), [Path("submissions")])               -> "bob"
    student_of(path, roots, pattern=r"(?P<student>[^/]+)/ps1/")   # tfs-grade --student-pattern

The default rule is nbgrader's layout (``submitted/<student>/...``): the first folder of the file's path under the
graded folder; a file directly in the graded folder is its name without the course notebook's name
(``bob_02_attention.ipynb`` is ``bob``), or, when that leaves nothing, the name of the nearest folder holding
it that is not named after a course notebook (``tfs-grade submitted/alice/ submitted/bob/``, or nbgrader's
``submitted/*/01_positional_encoding/``, name their students). A pattern is a regular expression searched in
that relative path (``/``-separated): its group ``student`` (or, without one, the whole match) names the student.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from .results import course_notebook

PATTERN_HELP = "a regular expression searched in each file's path under the graded folder (with / between " \
               "folders); its group (?P<student>...), or the whole match, names the student"


def graded_folder(path: Path, roots: list[Path]) -> Path | None:
    """The folder path's relative path is taken from: the deepest root folder holding it (a file given as an
    argument: its own folder)."""
    path = Path(path).resolve()
    holding = [root for root in (Path(r).resolve() for r in roots) if root != path and path.is_relative_to(root)]
    return max(holding, key=lambda root: len(root.parts)) if holding else path.parent


def relative_name(path: Path, roots: list[Path]) -> str:
    """path under its graded folder, with / between folders ("alice/01_positional_encoding.ipynb")."""
    return Path(path).resolve().relative_to(graded_folder(path, roots)).as_posix()


def compile_pattern(pattern: str) -> re.Pattern:
    """The --student-pattern, compiled; a ValueError naming the option when it is no regular expression."""
    try:
        return re.compile(pattern)
    except re.error as error:
        raise ValueError(f"--student-pattern {pattern!r} is not a regular expression: {error}") from None


def student_of(path: Path, roots: list[Path], pattern: str | re.Pattern | None = None) -> str:
    """The student a graded file belongs to (see the module's docstring); the relative path itself when the
    pattern does not match it, so that no file is merged with another student's."""
    relative = relative_name(path, roots)
    if pattern is not None:
        found = (compile_pattern(pattern) if isinstance(pattern, str) else pattern).search(relative)
        if not found:
            return relative
        named = found.groupdict().get("student")
        return (named if named is not None else found.group(0)) or relative
    folder, _, file = relative.partition("/")
    if file:
        return folder
    name = relative.removesuffix(".ipynb")
    stem = course_notebook(Path(relative))
    named = name.replace(stem, "", 1).strip("_- .") if stem else name
    return named or holding_folder(Path(path)) or name


def holding_folder(path: Path) -> str | None:
    """The name of the nearest folder holding path that is not named after a course notebook (an nbgrader
    assignment folder): a file named only for its notebook, in a folder graded on its own (tfs-grade
    submitted/alice/ submitted/bob/, or submitted/*/01_positional_encoding/), belongs to that folder's student."""
    for folder in Path(path).resolve().parents:
        if folder.name and course_notebook(Path(folder.name + ".ipynb")) is None:
            return folder.name
    return None


def common_folder(paths: list[Path]) -> Path | None:
    """The deepest folder holding every path (None for paths on different drives)."""
    try:
        return Path(os.path.commonpath([str(Path(p).resolve()) for p in paths])) if paths else None
    except ValueError:
        return None
