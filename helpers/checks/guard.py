"""What an answer may not name: the checking code. Speed bumps, not walls, on public ground only.

``machinery_used(statement)`` is the static reading of an answer that names the checking code (a check,
``Verdict``, ``helpers.checks``, ``torch.overrides``, ``sys.modules``, ...): the grader refuses such a
statement before it runs, and ``static_tampering(answer, defines)`` reads the same statement in a
notebook's kernel, so that its check cell gives the grader's verdict. General tools an honest answer may
use (``eval``, ``exec``, ``gc``, ``importlib``, ``ctypes``, ``__code__``) are never refused. What an
exercise declares off limits (its reference, the built-ins it replaces) is refused by off_limits.py.
"""

from __future__ import annotations

import ast
from typing import Any

from ..i18n import tr
from .source import answer_files, source_tree, target_of

TAMPERING = "tampering"  # the mistake code of an answer that reaches into the checking code
CHECK_NAMES: set[str] = set()  # the names of the registry's checks: harness.exercise() adds each one

# What no answer needs and the checking code is reached through. An answer's own names
# (a local `check_even`, `self.__dict__`, a field called `record`) are not in these sets.
MACHINERY_NAMES = {"Verdict", "EXERCISES", "harness", "guard", "course_tools", "TorchFunctionMode",
                   "__torch_function__"}
MACHINERY_ATTRIBUTES = {"checks", "harness", "guard", "Verdict", "EXERCISES", "silenced", "verdict_of",
                        "TorchFunctionMode", "__torch_function__", "__globals__", "__closure__", "f_globals",
                        "f_locals", "f_back", "tb_frame", "gi_frame"}
MACHINERY_MODULES = ("helpers.checks", "course_tools", "torch.overrides")
MACHINERY_CHAINS = {"sys.modules", "torch.overrides"}


def check_names() -> set[str]:
    """The names of the registry's checks (check_create_position_matrix, ...), as helpers exports them."""
    return set(CHECK_NAMES)


def machinery_used(node: ast.AST, checks: set[str] | None = None) -> str | None:
    """The first name in node (a statement of the student's) that reaches into the checking code, or None.

    checks: the names of the registry's checks (default: check_names())."""
    checks = check_names() if checks is None else checks
    own = {child.id for child in ast.walk(node) if isinstance(child, ast.Name) and isinstance(child.ctx, ast.Store)}
    own |= {child.arg for child in ast.walk(node) if isinstance(child, ast.arg)}  # the answer's own variables
    names, attributes = (MACHINERY_NAMES | checks) - own, MACHINERY_ATTRIBUTES | checks
    for child in ast.walk(node):
        if isinstance(child, ast.Name) and child.id in names:
            return child.id
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) and child.name == "__torch_function__":
            return child.name
        if isinstance(child, ast.Attribute):
            if child.attr in attributes:
                return f".{child.attr}"
            if isinstance(child.value, ast.Name) and f"{child.value.id}.{child.attr}" in MACHINERY_CHAINS:
                return f"{child.value.id}.{child.attr}"
        for alias in child.names if isinstance(child, ast.Import) else []:
            if alias.name.startswith(MACHINERY_MODULES):
                return alias.name
        if isinstance(child, ast.ImportFrom):
            module, imported = child.module or "", {alias.name for alias in child.names}
            if module.startswith(MACHINERY_MODULES) or (module == "helpers" and imported & {"checks", "harness",
                                                                                              "guard"}):
                return module
            if imported & (MACHINERY_NAMES | checks) - {"harness", "guard"}:
                return sorted(imported & (MACHINERY_NAMES | checks) - {"harness", "guard"})[0]
    return None


def tampering_message(reached: str) -> str:
    """The one-line verdict message of an answer that reaches into the checking code through `reached`."""
    return tr("grader:tampering", "your answer uses `{reached}`, which reaches into the course's checking code; "
              "an answer may only compute its result.", reached=reached.lstrip("."))


def static_tampering(answer: Any, defines: str) -> str | None:
    """What the statement defining `answer` (named `defines`, read from its cell's source) uses to reach
    into the checking code (machinery_used), or None: also None when the source cannot be found."""
    if getattr(target_of(answer), "__name__", None) != defines:
        return None
    for filename in sorted(answer_files(answer)):
        tree = source_tree(filename)
        for node in tree.body if tree is not None else []:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == defines:
                reached = machinery_used(node)
                if reached:
                    return reached
    return None
