"""The modules of helpers import each other without a circle (issue 18, item 7: schedule.py and
training.py imported each other). Module-level imports count, those under `if TYPE_CHECKING:` too;
an import inside a function body is deferred and does not count."""

from __future__ import annotations

import ast

from conftest import ROOT

HELPERS = ROOT / "helpers"


def _module(path):
    return ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


def _imports(path) -> set[str]:
    """The helpers modules that path imports at module level."""
    package = _module(path) if path.name == "__init__.py" else _module(path).rpartition(".")[0]
    found = set()

    def visit(statements):
        for node in statements:
            if isinstance(node, ast.If):  # `if TYPE_CHECKING:` and friends
                visit(node.body + node.orelse)
            elif isinstance(node, ast.Try):
                visit(node.body + node.handlers + node.orelse + node.finalbody)
            elif isinstance(node, ast.ExceptHandler):
                visit(node.body)
            elif isinstance(node, ast.ImportFrom):
                base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
                name = ".".join(base + ([node.module] if node.module else []))
                found.add(name)
                found.update(f"{name}.{alias.name}" for alias in node.names)
            elif isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)

    visit(ast.parse(path.read_text(encoding="utf-8")).body)
    return found


def test_no_import_circle_in_helpers():
    modules = {_module(p): p for p in HELPERS.rglob("*.py")}
    graph = {name: sorted(m for m in _imports(path) if m in modules and m != name) for name, path in modules.items()}
    packages = {name for name, path in modules.items() if path.name == "__init__.py"}

    def cycle_from(start):
        stack, seen = [(start, [start])], set()
        while stack:
            node, trail = stack.pop()
            for nxt in graph[node]:
                if nxt in packages:  # importing a package's own submodule from it is how packages work
                    continue
                if nxt == start:
                    return trail + [start]
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append((nxt, trail + [nxt]))
        return None

    circles = [cycle_from(name) for name in sorted(graph) if name not in packages]
    assert not [c for c in circles if c], "import circles: " + "; ".join(" -> ".join(c) for c in circles if c)


def test_schedule_does_not_import_training():
    assert "helpers.training" not in _imports(HELPERS / "schedule.py")
