"""helpers/ and course_tools/ stand on the public ground of the libraries they use: no private name of another
package (one that starts with an underscore), so that a new release of Python, torch or nbclient cannot break
the course by changing what it never promised (threading._start_new_thread went away in Python 3.13).

Read from the syntax trees, so nothing is imported or run:

- an import of a private module or name of another package: `import torch._dynamo`, `import _thread`,
  `from torch.utils._python_dispatch import TorchDispatchMode`, `from threading import _start_new_thread`;
- an attribute with a leading underscore taken from another package's module, class or function (`sys._getframe`,
  `torch._C._nn`), or from any other object unless our own code defines that name (`client._async_handle_timeout`
  on an nbclient client: ours defines no `_async_handle_timeout`; `model._ids(...)` on our Transformer is fine);
- the same through getattr, setattr, hasattr and delattr with a written name, and importlib.import_module with a
  written module name.

Allowed: dunder names (`__globals__`, `__code__`), `os._exit` (the documented way to end a child process at once)
and the public methods of named tuples (`_replace`, `_asdict`, `_fields`, `_make`). Names inside strings are data
(an off-limits entry of the exercise registry may name torch's internals); they are not looked at.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from conftest import ROOT

OURS = {"helpers", "course_tools"}  # the packages of this repository
PACKAGES = ("helpers", "course_tools")
ALLOWED = {"os._exit"}
PUBLIC_UNDERSCORED = {"_replace", "_asdict", "_fields", "_make", "_field_defaults"}  # collections.namedtuple's API
NAME_FUNCTIONS = {"getattr", "setattr", "hasattr", "delattr"}


def private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_part(dotted: str) -> str | None:
    return next((part for part in dotted.split(".") if private(part)), None)


def own_names(trees: list[ast.AST]) -> set[str]:
    """The names our code defines: functions, classes, assigned names, and attributes set on self or cls."""
    names = set()
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif (isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store)
                  and isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
                names.add(node.attr)
    return names


def _imported(tree: ast.AST) -> dict[str, str]:
    """Each name an import binds in the module -> the dotted name it stands for ("" for our own packages)."""
    bound = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                top = alias.name.split(".")[0]
                bound[alias.asname or top] = "" if top in OURS else (alias.name if alias.asname else top)
        elif isinstance(node, ast.ImportFrom):
            ours = node.level > 0 or (node.module or "").split(".")[0] in OURS
            for alias in node.names:
                bound[alias.asname or alias.name] = "" if ours else f"{node.module}.{alias.name}"
    return bound


def _root(node: ast.expr) -> ast.expr:
    while isinstance(node, (ast.Attribute, ast.Call, ast.Subscript)):
        node = node.value if not isinstance(node, ast.Call) else node.func
    return node


def _dotted(node: ast.expr) -> str:
    """`a.b.c` for a chain of names and attributes, else the last attribute alone."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


def violations(source: str, ours: set[str], where: str = "<source>") -> list[str]:
    """Every use of another package's private name in source, as 'where:line: what'."""
    tree = ast.parse(source)
    bound = _imported(tree)
    found = []

    def foreign_attribute(owner: ast.expr, attr: str, line: int, shown: str) -> None:
        if not private(attr) or attr in PUBLIC_UNDERSCORED:
            return
        inner = owner
        while isinstance(inner, ast.Attribute):  # torch._C._nn: reported once, at its first private name
            if private(inner.attr) and inner.attr not in PUBLIC_UNDERSCORED:
                return
            inner = inner.value
        root = _root(owner)
        origin = bound.get(root.id) if isinstance(root, ast.Name) else None
        if origin == "":  # one of our own modules, or a name imported from one
            return
        if origin is not None:  # another package's module, class or function
            if shown not in ALLOWED:
                found.append(f"{where}:{line}: {shown} (a private name of {origin.split('.')[0]})")
        elif attr not in ours:  # some object: private unless our code defines the name
            found.append(f"{where}:{line}: {shown} (no name of ours: another package's private attribute)")

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] not in OURS and private_part(alias.name):
                    found.append(f"{where}:{node.lineno}: import {alias.name} (a private module)")
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] not in OURS:
            if private_part(node.module or ""):
                found.append(f"{where}:{node.lineno}: from {node.module} import ... (a private module)")
            for alias in node.names:
                if private(alias.name):
                    found.append(f"{where}:{node.lineno}: from {node.module} import {alias.name} (a private name)")
        elif isinstance(node, ast.Attribute):
            foreign_attribute(node.value, node.attr, node.lineno, _dotted(node))
        elif isinstance(node, ast.Call) and node.args:
            name = _dotted(node.func)
            text = next((a.value for a in node.args[1:2] if isinstance(a, ast.Constant) and isinstance(a.value, str)),
                        None)
            if name in NAME_FUNCTIONS and text is not None:
                foreign_attribute(node.args[0], text, node.lineno, f"{name}({_dotted(node.args[0])}, {text!r})")
            module = node.args[0]
            if (name in ("importlib.import_module", "import_module", "__import__") and isinstance(module, ast.Constant)
                    and isinstance(module.value, str) and module.value.split(".")[0] not in OURS
                    and private_part(module.value)):
                found.append(f"{where}:{node.lineno}: {name}({module.value!r}) (a private module)")
    return found


def _sources() -> dict[Path, str]:
    return {path: path.read_text(encoding="utf-8") for package in PACKAGES
            for path in sorted((ROOT / package).rglob("*.py"))}


def test_helpers_and_course_tools_use_no_private_name_of_another_package():
    sources = _sources()
    assert sources, "no module found in helpers/ or course_tools/"
    ours = own_names([ast.parse(text) for text in sources.values()])
    found = [v for path, text in sources.items() for v in violations(text, ours, str(path.relative_to(ROOT)))]
    assert not found, "private names of other packages (use a public API):\n" + "\n".join(found)


FLAGGED = {
    "import torch._dynamo": "import torch._dynamo",
    "import _thread": "import _thread",
    "from torch.utils._python_dispatch import TorchDispatchMode": "from torch.utils._python_dispatch import",
    "from threading import _start_new_thread": "from threading import _start_new_thread",
    "import threading\nthreading._start_new_thread(f, ())": "threading._start_new_thread",
    "import sys\nframe = sys._getframe(1)": "sys._getframe",
    "import torch\nf = torch._C._nn.cross_entropy_loss": "torch._C",
    "import torch as t\nt._dynamo.reset()": "t._dynamo",
    "import torch.nn.functional as F\nF._canonical_mask(m)": "F._canonical_mask",
    "from nbclient import NotebookClient\nNotebookClient._async_poll_kernel": "NotebookClient._async_poll_kernel",
    "def f(client):\n    client._async_handle_timeout = None": "client._async_handle_timeout",
    "import torch\ngetattr(torch, '_dynamo')": "getattr(torch, '_dynamo')",
    "import importlib\nimportlib.import_module('torch._dynamo')": "importlib.import_module('torch._dynamo')",
}
ALLOWED_SOURCES = [
    "import os\nos._exit(3)",
    "def f(g):\n    return g.__globals__, g.__code__",
    "from . import guard\nguard._plan(x)",
    "from helpers.checks import guard\nguard._mode_classes()",
    "import helpers.checks.guard as guard\nguard._USED.clear()",
    "def f(model):\n    return model._ids(1)",  # _ids: a name of ours
    "class A:\n    def f(self):\n        self._seen = 1\n        return self._seen",
    "def f(point):\n    return point._replace(x=1)._asdict()",
    "from __future__ import annotations",
    "names = ['torch._C._nn.cross_entropy_loss:label_smoothing']",  # a string is data
]
OUR_CODE = ALLOWED_SOURCES + ["class Transformer:\n    def _ids(self, ids, which):\n        return ids"]


@pytest.mark.parametrize("source", list(FLAGGED))
def test_a_private_name_of_another_package_is_found(source):
    found = violations(source, own_names([ast.parse(s) for s in OUR_CODE]))
    assert len(found) == 1 and FLAGGED[source] in found[0], found


@pytest.mark.parametrize("source", ALLOWED_SOURCES)
def test_public_names_dunders_os_exit_and_our_own_private_names_pass(source):
    assert violations(source, own_names([ast.parse(s) for s in OUR_CODE])) == []
