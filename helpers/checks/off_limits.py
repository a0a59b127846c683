"""What an exercise declares off limits (its reference, the built-ins its notebook names), refused on
public ground only: the answer's syntax tree, and torch's ``torch.overrides.TorchFunctionMode``.

Each exercise declares ``off_limits`` (harness.Exercise) as dotted names:

    "helpers.positional.positional_encoding"      a function of the course's reference
    "helpers.transformer.LayerNorm"               a class (its methods, a subclass of it)
    "torch.nn.functional.layer_norm"              a torch function
    "torch.nn.functional.cross_entropy:label_smoothing"   that function called with label_smoothing set
    "torch.nn.CrossEntropyLoss:label_smoothing"   that class built with label_smoothing set
    "torch.ops.aten.*layer_norm*"                 every torch operator or function whose name matches

``off_limits_reached(answer, names)`` reads the answer's source (and that of the student's own functions
and classes it names): every name and attribute chain is resolved against the function's globals, closure,
own imports and the builtins, and an off-limits object, an alias, a method or a subclass of one is reported.
``forbidden(exercise)`` is the block in which the harness calls the answer: a TorchFunctionMode refuses the
off-limits torch functions, Tensor methods and ``torch.ops`` calls however they were reached, and records
them even when the answer catches the error. What neither sees (a fresh copy of a module made with
``runpy``, a C function of torch reached by its private name) is not refused.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import fnmatch
import functools
import inspect
import pkgutil
from typing import Any, Iterator

from torch.overrides import TorchFunctionMode

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

    def operator_label(self, func: Any) -> str | None:
        """How to name a torch function or operator whose name matches a refused pattern, or None: its name is
        `layer_norm` for torch.ops.aten.layer_norm (str() "aten.layer_norm.default") and torch.layer_norm."""
        text = str(func)
        op = text.split(".")[1] if text.startswith("aten.") else getattr(func, "__name__", None)
        if not (isinstance(op, str) and any(fnmatch.fnmatchcase(op, pattern) for pattern in self.patterns)):
            return None
        if text.startswith("aten."):
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


_limits = functools.cache(_Limits)  # names -> its _Limits, resolved once


def _resolve(dotted: str) -> Any:
    """The module or object a dotted name names (its longest importable prefix, then attributes), or None."""
    try:
        return pkgutil.resolve_name(dotted)
    except Exception:  # noqa: BLE001 - a name that does not exist here, a module that does not import
        return None


def _of_torch(obj: Any) -> bool:
    """Whether obj is one of torch's functions or operators."""
    owner = getattr(obj, "__objclass__", None)  # a method of torch.Tensor
    modules = (getattr(obj, "__module__", None), getattr(owner, "__module__", None), type(obj).__module__)
    return str(obj).startswith("aten.") or any(isinstance(m, str) and m.split(".")[0] == "torch" for m in modules)


def _chain(node: ast.AST) -> tuple[str, list[str]] | None:
    """(root name, attributes) of an expression `a.b.c`, or None when it is not a plain chain."""
    attributes = []
    while isinstance(node, ast.Attribute):
        attributes.append(node.attr)
        node = node.value
    return (node.id, attributes[::-1]) if isinstance(node, ast.Name) else None


def _namespace(function: Any) -> dict[str, Any]:
    """The names a function's code can reach: builtins, then its globals, then its closure."""
    space = {**vars(builtins), **getattr(function, "__globals__", {})}
    cells = getattr(function, "__closure__", None) or ()
    for name, cell in zip(function.__code__.co_freevars, cells):
        with contextlib.suppress(ValueError):  # an empty cell
            space[name] = cell.cell_contents
    return space


def _imported(node: ast.AST) -> dict[str, Any]:
    """The names that the imports inside node bind, resolved (the modules imported, as the answer would)."""
    found: dict[str, Any] = {}
    for child in ast.walk(node):
        if isinstance(child, ast.Import):
            for alias in child.names:
                bound = alias.asname or alias.name.split(".")[0]
                found[bound] = _resolve(alias.name if alias.asname else bound)
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
    return (inspect.isfunction(obj) or inspect.isclass(obj)) and home is not None and obj.__module__ == home


def _used_in(function: Any, limits: _Limits, seen: set[int], home: str | None) -> str | None:
    """The first off-limits object the source of function names, following the student's own functions."""
    seen.add(id(function))
    space = _namespace(function)
    defaults = list(function.__defaults__ or ()) + list((function.__kwdefaults__ or {}).values())
    name = next(filter(None, map(limits.refused, defaults)), None)
    if name:
        return name
    for node in function_nodes(function):
        local = {c.id for c in ast.walk(node) if isinstance(c, ast.Name) and isinstance(c.ctx, ast.Store)}
        local |= {c.arg for c in ast.walk(node) if isinstance(c, ast.arg)}
        names = {key: value for key, value in space.items() if key not in local} | _imported(node)
        for child in ast.walk(node):
            chain = _chain(child) if isinstance(child, (ast.Name, ast.Attribute)) else None
            if chain is None or chain[0] not in names:
                continue
            for obj in _reachable(names[chain[0]], chain[1]):
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
    for call in ast.walk(tree) if entry else ():
        if isinstance(call, ast.Call) and call.func is chain and any(
                given.arg == entry[1] and not (isinstance(given.value, ast.Constant) and not given.value.value)
                for given in call.keywords):
            return entry[0]
    return None


def off_limits_reached(answer: Any, names: tuple[str, ...]) -> str | None:
    """The first off-limits name (of `names`, declared by the exercise) that the answer's source uses,
    or that its class is a subclass of; None when it uses none or its source cannot be read."""
    if not names:
        return None
    limits = _limits(tuple(names))
    target = target_of(answer)
    name = limits.refused(target) if inspect.isclass(target) else None
    home, seen = getattr(target, "__module__", None), set()
    for function in answer_functions(answer):
        name = name or _used_in(function, limits, seen, home)
    return name


# ---------------------------------------------------------------------------------------- off limits, run
def _kwarg_set(func: Any, keyword: str, args: tuple, kwargs: dict) -> bool:
    """Whether a call func(*args, **kwargs) gives keyword a value other than its default."""
    try:
        signature = inspect.signature(func)
        bound = signature.bind_partial(*args, **kwargs).arguments
        value, default = bound.get(keyword), signature.parameters[keyword].default if keyword in bound else None
    except (TypeError, ValueError):
        value, default = kwargs.get(keyword), None
    try:
        return bool(value != default) and not (default is None and not value)
    except Exception:  # noqa: BLE001 - a tensor compared with a float, say
        return True


class Refuse(TorchFunctionMode):
    """Refuses the off-limits torch functions, Tensor methods and operators called inside it."""

    def __init__(self, limits: _Limits):
        super().__init__()
        self.limits, self.used = limits, []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        entry = self.limits.torch.get(func)
        if entry is not None and (entry[1] is None or _kwarg_set(func, entry[1], args, kwargs)):
            name = entry[0]
        else:
            name = self.limits.operator_label(func) if self.limits.patterns else None
        if name:
            if name not in self.used:
                self.used.append(name)
            raise OffLimitsUsed(name)
        return func(*args, **kwargs)


@contextlib.contextmanager
def forbidden(exercise: Any) -> Iterator[list[str]]:
    """While inside, the off-limits torch functions and operators of `exercise` (None, or an exercise without
    any: nothing) are refused; the list yielded holds those the code tried, even if it caught the error."""
    limits = _limits(tuple(getattr(exercise, "off_limits", ()) or ()))
    if not (limits.torch or limits.patterns):
        yield []
        return
    with Refuse(limits) as mode:
        yield mode.used
