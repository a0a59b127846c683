"""Signs of copying, for the instructor's report: per exercise, the students whose answer is the public solution
(solutions/) and the groups of two or more students with the same answer. ``copy_signs(reports)`` reads each graded
file again from report["notebook"]; one gone or changed since it was graded (sha256) is skipped.

A sign, never a verdict: students who worked together or from one worked example write alike. Two answers are the
same when their syntax trees (``ast``) are, once normalised: comments, blank lines, formatting and docstrings do not
count, and the student's own names (arguments, locals, their own helper functions) are renamed in order of first
appearance; attribute names (``self.w_q``, ``.swapaxes``) and all other names (torch, np, F, nn, math, helpers) are
kept. Reordered independent lines make another answer. The answer is the last code cell defining the exercise's
``EXERCISES[name].defines`` (the definition a run in order keeps), less its imports and displays; a stub (``raise
NotImplementedError`` still in it) or a cell that does not parse is never a sign.

Short answers are alike in most honest classes (a one-line ``causal_mask``): an answer is compared only when the
student wrote at least MIN_NODES syntax nodes of it (its nodes less those of the cell handed out in notebooks/),
and each sign gives that size.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import json
import re
from collections import defaultdict
from pathlib import Path

from helpers.checks import EXERCISES
from helpers.notebook_io import code_cells, python_lines

from .results import course_notebook

MIN_NODES = 50  # about four lines: softmax (39 in the solution), split_heads (43) and shorter ones are left out
ROOT = Path(__file__).resolve().parent.parent
DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def answer_cell(notebook: dict, defines: str) -> str | None:
    """The source of the last code cell defining `defines` (a def or class at the cell's top level)."""
    starts = re.compile(rf"^(?:async\s+def|def|class)\s+{re.escape(defines)}\b", re.MULTILINE)
    return next((source for _, source in reversed(code_cells(notebook)) if starts.search(source)), None)


def _normalised(source: str, defines: str) -> ast.Module | None:
    """The answer's tree without imports, displays and docstrings, its own names renamed (see the module)."""
    try:
        tree = ast.parse(python_lines(source))
    except (SyntaxError, ValueError):
        return None
    tree.body = [s for s in tree.body if not isinstance(s, (ast.Expr, ast.Import, ast.ImportFrom))]
    if not any(isinstance(s, DEFINITIONS) and s.name == defines for s in tree.body):
        return None
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(node, DEFINITIONS) and body and isinstance(body[0], ast.Expr) \
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            node.body = body[1:] or [ast.Pass()]
    methods = {id(s) for node in ast.walk(tree) if isinstance(node, ast.ClassDef) for s in node.body}
    imported = {(a.asname or a.name).split(".")[0] for node in ast.walk(tree)
                if isinstance(node, (ast.Import, ast.ImportFrom)) for a in node.names}
    own = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.arg) or (isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load)):
            own.add(node.arg if isinstance(node, ast.arg) else node.id)
        elif isinstance(node, DEFINITIONS) and id(node) not in methods or isinstance(node, ast.ExceptHandler):
            own.add(node.name)
    canonical: dict[str, str] = {}
    rename = (own - imported - {defines, None}).__contains__

    def visit(node: ast.AST) -> None:  # depth first, in source order: the first appearance names a name
        field = "id" if isinstance(node, ast.Name) else "arg" if isinstance(node, ast.arg) else "name" \
            if isinstance(node, (*DEFINITIONS, ast.ExceptHandler)) and id(node) not in methods else None
        if field and rename(getattr(node, field)):
            setattr(node, field, canonical.setdefault(getattr(node, field), f"#{len(canonical)}"))
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return tree


def _stub_raises(tree: ast.AST) -> list[ast.stmt]:
    """The `raise NotImplementedError(...)` statements at the top of a function's body: the stub's."""
    found = []
    for node in ast.walk(tree):
        for statement in node.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else []:
            raised = statement.exc if isinstance(statement, ast.Raise) else None
            raised = raised.func if isinstance(raised, ast.Call) else raised
            if isinstance(raised, ast.Name) and raised.id == "NotImplementedError":
                found.append(statement)
    return found


def answer_tree(source: str | None, defines: str) -> ast.Module | None:
    """The normalised answer (see the module); None for a stub, code that does not parse, or no `defines`."""
    tree = _normalised(source, defines) if source else None
    return None if tree is None or _stub_raises(tree) else tree


def normal_form(source: str, defines: str) -> str | None:
    """The normalised answer as text: two answers are the same when their normal forms are equal."""
    tree = answer_tree(source, defines)
    return tree and ast.dump(tree)


def _nodes(tree: ast.AST) -> int:
    return len(list(ast.walk(tree)))


def _cell_of(folder: str, name: str) -> str | None:
    """The cell of exercise name in the course's notebooks/ (the handout) or solutions/, None when missing."""
    exercise = EXERCISES[name]
    try:
        text = (ROOT / folder / f"{exercise.notebook}.ipynb").read_text(encoding="utf-8")
        return answer_cell(json.loads(text), exercise.defines)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


@functools.cache
def handed_out_nodes(name: str) -> int:
    """The nodes of the exercise's cell as notebooks/ hands it out, less its stub's raise: what no student wrote."""
    source = _cell_of("notebooks", name)
    tree = _normalised(source, EXERCISES[name].defines) if source else None
    return _nodes(tree) - sum(_nodes(raised) for raised in _stub_raises(tree)) if tree else 0


@functools.cache
def solution_answer(name: str) -> tuple[str, int] | None:
    """(normal form, nodes written) of the public solution of exercise name; None without solutions/."""
    source = _cell_of("solutions", name)
    tree = answer_tree(source, EXERCISES[name].defines)
    return (ast.dump(tree), _nodes(tree) - handed_out_nodes(name)) if tree else None


def graded_notebook(report: dict) -> dict | None:
    """The notebook a report graded, read again; None when it is gone, unreadable or changed since (sha256)."""
    try:
        data = Path(report["notebook"]).read_bytes()
        if report.get("sha256") not in (None, hashlib.sha256(data).hexdigest()):
            return None
        notebook = json.loads(data.decode("utf-8"))
        return notebook if code_cells(notebook) is not None else None
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def copy_signs(reports: list[dict], min_nodes: int = MIN_NODES) -> list[dict]:
    """Per exercise with a sign, in course order: {"exercise", "solution": the students whose answer is the
    solution (sorted), "solution_nodes": its size (None without solutions/), "groups": [{"students", "nodes"}]:
    two students or more with the same answer, other than the solution, the largest group first}. A student is
    report["student"] (the file's path when absent); answers of fewer than min_nodes written nodes are left out."""
    same: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    sizes: dict[str, int] = {}
    for report in reports:
        notebook = None if "error" in report else graded_notebook(report)
        if notebook is None:
            continue
        stems = {EXERCISES[e["name"]].notebook for e in report.get("exercises", []) if e["name"] in EXERCISES}
        stems = stems or {course_notebook(Path(report["notebook"]))}
        for name in (name for name, e in EXERCISES.items() if e.notebook in stems):
            tree = answer_tree(answer_cell(notebook, EXERCISES[name].defines), EXERCISES[name].defines)
            size = _nodes(tree) - handed_out_nodes(name) if tree else 0
            if size >= min_nodes:
                form = ast.dump(tree)
                sizes[form] = size
                same[name][form].add(report.get("student") or report["notebook"])
    signs = []
    for name in (name for name in EXERCISES if name in same):
        solution = solution_answer(name)
        copied = sorted(same[name].get(solution[0], ())) if solution else []
        groups = sorted(({"students": sorted(students), "nodes": sizes[form]} for form, students in
                         same[name].items() if len(students) >= 2 and (not solution or form != solution[0])),
                        key=lambda group: (-len(group["students"]), group["students"]))
        if copied or groups:
            signs.append({"exercise": name, "solution": copied, "solution_nodes": solution and solution[1],
                          "groups": groups})
    return signs
