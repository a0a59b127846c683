"""Use the student's own code from an earlier notebook, once its checks pass.

A later notebook (for example the one that trains the Transformer) should run what the student
built, not our reference, as soon as the student's version is right, and fall back to the
reference while it is not, so that one unfinished exercise never blocks the rest of the course.

    load_definitions(path)                the imports, functions and classes of a saved notebook
    student_or_reference(path, parts)     per part, the student's version if its check passes, else ours

Only ``import`` statements and ``def``/``class`` statements are taken from the notebook's code
cells (in order, as the student saved them): no other statement runs, so loading a notebook
never trains a model or draws a plot. The same idea as the notebook-import helpers of
rasbt/LLMs-from-scratch, which test their chapters' code this way.
"""

from __future__ import annotations

import ast
import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import nbformat

from .checks.harness import silenced

PRELUDE = "import math\nimport numpy as np\nimport torch\nfrom torch import nn\nimport torch.nn.functional as F\n"
KEPT = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


@dataclass
class Definitions:
    """What load_definitions found: the namespace, the source of each definition, the cells it skipped."""

    namespace: dict[str, Any]
    sources: dict[str, str] = field(default_factory=dict)  # name -> the source of its def/class statement
    skipped: list[str] = field(default_factory=list)  # why a cell (or a definition) could not be used


def _python_lines(source: str) -> str:
    """A cell's source without IPython's magics and shell escapes (%matplotlib, !pip, ...)."""
    return "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines())


def load_definitions(path: str | Path) -> Definitions:
    """Execute the imports and the def/class statements of a saved notebook, in cell order, in a fresh namespace.

    A cell that is not valid Python, or a definition that fails to execute, is skipped and named in
    ``skipped``; the rest still loads.
    """
    path = Path(path)
    if path.suffix != ".ipynb":
        raise ValueError(f"path must name a .ipynb notebook, got {str(path)!r}")
    try:
        notebook = nbformat.read(path, as_version=4)
    except (OSError, ValueError, nbformat.reader.NotJSONError) as error:
        raise ValueError(f"cannot read the notebook {path}: {error}") from None
    namespace: dict[str, Any] = {"__name__": f"notebook_{path.stem}"}
    exec(compile(PRELUDE, "<prelude>", "exec"), namespace)
    found = Definitions(namespace)
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type != "code":
            continue
        source = _python_lines(cell.source)
        try:
            tree = ast.parse(source)
        except SyntaxError as error:
            found.skipped.append(f"cell {index}: not valid Python ({error.msg}, line {error.lineno})")
            continue
        for node in tree.body:
            if not isinstance(node, KEPT):
                continue
            code = ast.get_source_segment(source, node) or ""
            try:
                exec(compile(ast.Module([node], []), f"{path.name}, cell {index}", "exec"), namespace)
            except Exception as error:  # noqa: BLE001 - a student's broken import or class body
                found.skipped.append(f"cell {index}: {type(error).__name__}: {error}")
                continue
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                found.sources[node.name] = code
    return found


@dataclass
class Choice:
    """Which version of each part is used: the student's (their check passed) or the reference."""

    objects: dict[str, Any]  # name -> the class or function to use
    origin: dict[str, str]  # name -> "yours" or "reference"
    reasons: dict[str, str]  # name -> the verdict line, or why the student's version was not used
    sources: dict[str, str]  # name -> the student's source, for the parts that are theirs

    def fingerprint(self) -> str:
        """A short hash of the student's code in use: equal fingerprints mean the same code."""
        digest = hashlib.sha256()
        for name in sorted(self.sources):
            digest.update(f"{name}\n{self.sources[name]}\n".encode())
        return digest.hexdigest()[:16]

    def describe(self) -> str:
        """One line per part: whose version runs, and why."""
        lines = []
        for name, origin in self.origin.items():
            who = "your" if origin == "yours" else "the reference"
            lines.append(f"{name}: {who} version ({self.reasons[name]})")
        return "\n".join(lines)


def student_or_reference(path: str | Path, parts: dict[str, tuple[Callable, Any]]) -> Choice:
    """For each part name -> (check, reference): the student's definition from the notebook at path
    when its check passes, else the reference. A missing or unreadable notebook falls back to the
    reference for every part.

    The checks run silenced: they neither log to the grader nor raise under nbgrader, since they
    grade another notebook's exercises.
    """
    if not parts:
        raise ValueError("parts must name at least one (check, reference) pair")
    try:
        found = load_definitions(path)
    except ValueError as error:
        found = Definitions({}, skipped=[str(error)])
    objects, origin, reasons, sources = {}, {}, {}, {}
    for name, (check, reference) in parts.items():
        objects[name], origin[name] = reference, "reference"
        if name not in found.sources:
            reasons[name] = f"{Path(path).name} defines no {name}"
            continue
        with silenced():
            verdict = check(found.namespace[name])
        if verdict:
            objects[name], origin[name], sources[name] = found.namespace[name], "yours", found.sources[name]
            reasons[name] = f"its check passes, from {Path(path).name}"
        else:
            reasons[name] = f"its check does not pass yet: {verdict.message}"
    return Choice(objects, origin, reasons, sources)


__all__ = ["Choice", "Definitions", "load_definitions", "student_or_reference"]
