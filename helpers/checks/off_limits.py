"""What an exercise declares off limits (its reference, the built-ins its notebook names), refused on
public ground only: the answer's syntax tree, and torch's ``torch.overrides.TorchFunctionMode``.

Each exercise declares ``off_limits`` (harness.Exercise) as dotted names:

    "helpers.positional.positional_encoding"      a function of the course's reference
    "helpers.transformer.LayerNorm"               a class (its methods, a subclass of it)
    "torch.nn.functional.layer_norm"              a torch function
    "torch.nn.functional.cross_entropy:label_smoothing"   that function called with label_smoothing set
    "torch.nn.CrossEntropyLoss:label_smoothing"   that class built with label_smoothing set
    "torch.ops.aten.*layer_norm*"                 every torch operator or function whose name matches

``off_limits_reached(answer, names)`` reads the answer's source: every name and attribute chain
(``helpers.positional_encoding``, ``F.layer_norm``, ``torch.ops.aten.layer_norm``) is resolved against the
function's globals, its closure, its own imports and the builtins, and an off-limits object, an alias of it,
a method of an off-limits class or a subclass of one is reported; so are the student's own functions and
classes that the answer names, read the same way. ``forbidden(exercise)`` is the block in which the harness
calls the answer: a TorchFunctionMode refuses the off-limits torch functions, Tensor methods and
``torch.ops`` calls however they were reached (``getattr(F, "layer" + "_norm")``, ``F.group_norm``), and
records them even when the answer catches the error. What neither sees (a fresh copy of a module made
with ``runpy``, a C function of torch reached by its private name) is not refused.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import fnmatch
import importlib
import inspect
from typing import Any, Iterator

from .source import answer_functions, function_nodes, functions_of, target_of


class OffLimitsUsed(RuntimeError):
    """Raised when the student's code calls something off limits while its check runs."""


class _Limits:
    """The objects a tuple of declared names refuses, resolved once."""

    def __init__(self, names: tuple[str, ...]):
        self.objects: dict[int, str] = {}  # id(function or class) -> name
        self.classes: list[tuple[type, str]] = []  # off-limits classes: their subclasses are refused too
        self.conditional: dict[int, tuple[str, str]] = {}  # id(function or class) -> (name, keyword)
        self.torch: dict[Any, tuple[str, str | None]] = {}  # torch function -> (name, keyword or None)
        self.patterns: list[str] = []  # torch operator name patterns ("*layer_norm*")
        self.keep: list[Any] = []  # the objects whose ids are keys above, kept alive
        for spec in names:
            dotted, _, keyword = spec.partition(":")
            if dotted.startswith("torch.ops.aten."):
                self.patterns.append(dotted[len("torch.ops.aten."):])
                continue
            obj = _resolve(dotted)
            if obj is None:
                continue
            self.keep.append(obj)
            if keyword:
                self.conditional[id(obj)] = (spec, keyword)
            else:
                self.objects[id(obj)] = spec
                if inspect.isclass(obj):
                    self.classes.append((obj, spec))
                    for function in functions_of(obj):
                        self.objects[id(function)] = spec
                        self.keep.append(function)
            if dotted.startswith("torch.") and not inspect.isclass(obj):
                self.torch[obj] = (spec, keyword or None)

    def operator(self, name: str | None) -> str | None:
        """The operator's name when it matches a refused pattern."""
        if name and any(fnmatch.fnmatchcase(name, pattern) for pattern in self.patterns):
            return name
        return None

    def operator_label(self, func: Any) -> str | None:
        """How to name a torch function or operator whose name matches a refused pattern, or None."""
        op = self.operator(operator_name(func))
        if op is None:
            return None
        if str(func).startswith("aten."):
            return f"torch.ops.aten.{op}"
        module = getattr(func, "__module__", None)
        public = isinstance(module, str) and module.startswith("torch") and "._" not in module
        return f"{module if public else 'torch'}.{op}"

    def refused(self, obj: Any) -> str | None:
        """The off-limits name obj is (or is a method or subclass of), or None."""
        try:
            name = self.objects.get(id(obj))
            if name is None and inspect.isclass(obj):
                name = next((spec for cls, spec in self.classes if issubclass(obj, cls)), None)
            if name is None and self.patterns and _of_torch(obj):
                name = self.operator_label(obj)
        except Exception:  # noqa: BLE001 - an odd object that cannot be compared: not off limits
            return None
        return name


_LIMITS: dict[tuple[str, ...], _Limits] = {}


def _limits(names: tuple[str, ...]) -> _Limits:
    if names not in _LIMITS:
        _LIMITS[names] = _Limits(names)
    return _LIMITS[names]


def _resolve(dotted: str) -> Any:
    """The object a dotted name names (module attribute chain), or None when it does not exist here."""
    parts = dotted.split(".")
    for split in range(len(parts) - 1, 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:split]))
        except ImportError:
            continue
        try:
            for attr in parts[split:]:
                obj = getattr(obj, attr)
        except AttributeError:
            return None
        return obj
    return None


def _of_torch(obj: Any) -> bool:
    """Whether obj is one of torch's functions or operators."""
    owner = getattr(obj, "__objclass__", None)  # a method of torch.Tensor
    modules = (getattr(obj, "__module__", None), getattr(owner, "__module__", None), type(obj).__module__)
    return str(obj).startswith("aten.") or any(isinstance(m, str) and m.split(".")[0] == "torch" for m in modules)


def operator_name(func: Any) -> str | None:
    """The name of a torch operator or function: `layer_norm` for torch.ops.aten.layer_norm (read from
    str(), "aten.layer_norm.default") and for torch.layer_norm (its __name__)."""
    text = str(func)
    if text.startswith("aten."):
        return text.split(".")[1]
    name = getattr(func, "__name__", None)
    return name if isinstance(name, str) else None


def _chain(node: ast.AST) -> tuple[str, list[str]] | None:
    """(root name, attributes) of an expression `a.b.c`, or None when it is not a plain chain."""
    attributes = []
    while isinstance(node, ast.Attribute):
        attributes.append(node.attr)
        node = node.value
    return (node.id, attributes[::-1]) if isinstance(node, ast.Name) else None


def _namespace(function: Any) -> dict[str, Any]:
    """The names a function's code can reach: builtins, then its globals, then its closure."""
    space = dict(vars(builtins))
    space.update(getattr(function, "__globals__", {}))
    cells = getattr(function, "__closure__", None) or ()
    for name, cell in zip(function.__code__.co_freevars, cells):
        with contextlib.suppress(ValueError):  # an empty cell
            space[name] = cell.cell_contents
    return space


def _module(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except Exception:  # noqa: BLE001 - a module that does not import: the answer's crash, not ours
        return None


def _imported(node: ast.AST) -> dict[str, Any]:
    """The names that the imports inside node bind, resolved (the modules imported, as the answer would)."""
    found: dict[str, Any] = {}
    for child in ast.walk(node):
        if isinstance(child, ast.Import):
            for alias in child.names:
                bound = alias.asname or alias.name.split(".")[0]
                found[bound] = _module(alias.name if alias.asname else bound)
        elif isinstance(child, ast.ImportFrom) and child.module and not child.level:
            for alias in child.names:
                found[alias.asname or alias.name] = _resolve(f"{child.module}.{alias.name}")
    return found


def _reachable(value: Any, attributes: list[str]) -> list[Any]:
    """value, then each attribute of the chain in turn, as long as the objects are modules or classes
    (or torch's operator namespaces): reading them runs no code of the answer's."""
    found = [value]
    for attr in attributes:
        if not (inspect.ismodule(value) or inspect.isclass(value) or type(value).__module__.startswith("torch")):
            break
        try:
            value = getattr(value, attr)
        except Exception:  # noqa: BLE001 - a name that does not exist: the answer's crash, not ours
            break
        found.append(value)
    return found


def _own(obj: Any, home: str | None) -> bool:
    """Whether obj is a function or class the student wrote (defined in the answer's module, not a library)."""
    return (inspect.isfunction(obj) or inspect.isclass(obj)) and home is not None and \
        getattr(obj, "__module__", None) == home


def _used_in(function: Any, limits: _Limits, seen: set[int], home: str | None) -> str | None:
    """The first off-limits object the source of function names, following the student's own functions."""
    seen.add(id(function))
    space = _namespace(function)
    defaults = list(function.__defaults__ or ()) + list((function.__kwdefaults__ or {}).values())
    for value in defaults:
        name = limits.refused(value)
        if name:
            return name
    for node in function_nodes(function):
        local = {c.id for c in ast.walk(node) if isinstance(c, ast.Name) and isinstance(c.ctx, ast.Store)}
        local |= {c.arg for c in ast.walk(node) if isinstance(c, ast.arg)}
        imported = _imported(node)
        for child in ast.walk(node):
            chain = _chain(child) if isinstance(child, (ast.Name, ast.Attribute)) else None
            if chain is None:
                continue
            root, attributes = chain
            if root in imported:
                value = imported[root]
            elif root in local or root not in space:
                continue
            else:
                value = space[root]
            for obj in _reachable(value, attributes):
                name = limits.refused(obj) or _conditional(limits, obj, child, node)
                if name:
                    return name
                if _own(obj, home) and id(obj) not in seen:
                    for inner in ([obj] if inspect.isfunction(obj) else functions_of(obj)):
                        name = None if id(inner) in seen else _used_in(inner, limits, seen, home)
                        if name:
                            return name
    return None


def _conditional(limits: _Limits, obj: Any, chain: ast.AST, tree: ast.AST) -> str | None:
    """The name of an off-limits call `obj(..., keyword=value)` (value not a constant 0 / None / False)."""
    entry = limits.conditional.get(id(obj))
    if entry is None:
        return None
    spec, keyword = entry
    for call in ast.walk(tree):
        if isinstance(call, ast.Call) and call.func is chain:
            for given in call.keywords:
                if given.arg == keyword and not (isinstance(given.value, ast.Constant) and not given.value.value):
                    return spec
    return None


def off_limits_reached(answer: Any, names: tuple[str, ...]) -> str | None:
    """The first off-limits name (of `names`, declared by the exercise) that the answer's source uses,
    or that its class is a subclass of; None when it uses none or its source cannot be read."""
    if not names:
        return None
    limits = _limits(tuple(names))
    target = target_of(answer)
    name = limits.refused(target) if inspect.isclass(target) else None
    if name:
        return name
    home = getattr(target, "__module__", None)
    seen: set[int] = set()
    for function in answer_functions(answer):
        name = _used_in(function, limits, seen, home)
        if name:
            return name
    return None


# ---------------------------------------------------------------------------------------- off limits, run
_MODE: list[type] = []  # the TorchFunctionMode class, made once (torch is imported late)


def _kwarg_set(func: Any, keyword: str, args: tuple, kwargs: dict) -> bool:
    """Whether a call func(*args, **kwargs) gives keyword a value other than its default."""
    try:
        signature = inspect.signature(func)
        bound = signature.bind_partial(*args, **kwargs)
    except (TypeError, ValueError):
        return keyword in kwargs and _differs(kwargs[keyword], None)
    if keyword not in bound.arguments:
        return False
    return _differs(bound.arguments[keyword], signature.parameters[keyword].default)


def _differs(value: Any, default: Any) -> bool:
    try:
        return bool(value != default) and not (default is None and not value)
    except Exception:  # noqa: BLE001 - a tensor compared with a float, say
        return True


def _mode_class() -> type:
    if not _MODE:
        from torch.overrides import TorchFunctionMode

        class Refuse(TorchFunctionMode):
            """Refuses the off-limits torch functions, Tensor methods and operators called inside it."""

            def __init__(self, limits: _Limits):
                super().__init__()
                self.limits, self.used = limits, []

            def __torch_function__(self, func, types, args=(), kwargs=None):
                kwargs = kwargs or {}
                entry = self.limits.torch.get(func)
                name = None
                if entry is not None and (entry[1] is None or _kwarg_set(func, entry[1], args, kwargs)):
                    name = entry[0]
                elif self.limits.patterns:
                    name = self.limits.operator_label(func)
                if name:
                    if name not in self.used:
                        self.used.append(name)
                    raise OffLimitsUsed(name)
                return func(*args, **kwargs)

        _MODE.append(Refuse)
    return _MODE[0]


@contextlib.contextmanager
def forbidden(exercise: Any) -> Iterator[list[str]]:
    """While inside, the off-limits torch functions and operators of `exercise` (None, or an exercise without
    any: nothing) are refused; the list yielded holds those the code tried, even if it caught the error."""
    limits = _limits(tuple(getattr(exercise, "off_limits", ()) or ()))
    if not (limits.torch or limits.patterns):
        yield []
        return
    mode = _mode_class()(limits)
    with mode:
        yield mode.used


__all__ = ["OffLimitsUsed", "forbidden", "off_limits_reached", "operator_name"]
