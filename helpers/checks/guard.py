"""What the student's code may not call while its check runs (the exercise's own reference, the
built-ins its notebook names as off limits), and what an answer may not reach (the checking code).

Each exercise declares ``off_limits`` (harness.Exercise) as dotted names:

    "helpers.positional.positional_encoding"      a function of the course's reference
    "helpers.transformer.LayerNorm"               a class: any of its methods (so a subclass is caught too)
    "torch.nn.functional.layer_norm"              a torch function, however it is reached
    "torch.nn.functional.cross_entropy:label_smoothing"   that function called with label_smoothing set
    "torch.nn.CrossEntropyLoss:label_smoothing"   that class built with label_smoothing set
    "torch.ops.aten.*layer_norm*"                 every aten operator whose name matches the pattern

``harness.call()`` runs every call of the student's code inside ``forbidden(exercise)``. Inside it:

- a profile function (``sys.setprofile``, also in the threads the code starts) sees every Python
  function that starts and every built-in that is called. It records the code of each off-limits
  function or method, recognised by its code object (so an alias, ``from helpers import ...``, a
  copy made with ``types.FunctionType(f.__code__, ...)`` or a subclass are caught) or by its file,
  qualified name and first line (a fresh copy of the module, through ``runpy`` or ``importlib``),
  a built-in named like an off-limits aten operator (``torch.native_layer_norm``), and a ``torch.ops``
  call of one (so that taking the torch modes below off their stack does not get round them);
- a ``torch.overrides.TorchFunctionMode`` refuses the torch functions (``F.layer_norm``,
  ``torch.softmax``, ``Tensor.softmax``, ``torch.ops.aten.layer_norm``, keyword arguments such as
  ``label_smoothing=``), and a ``torch.utils._python_dispatch.TorchDispatchMode`` the aten operators
  behind them, whatever route reached them (``F.group_norm``, ``torch.special.softmax``,
  ``log_softmax(...).exp()``, ``aten._scaled_dot_product_attention_math``).

A block opened inside another (by an answer, say) refuses the names of both.
A use is recorded even when the student's code catches the error a refusal raises (the profile
function records without raising): ``used()`` lists what was called, and the harness turns it into a
``fail`` with the code ``used_off_limits``. Each use is also announced as the audit event
``tfs.off_limits`` (course_tools/verdicts.py keeps its own record of them). The check's own
reference computations run outside ``call()`` and are not affected.

``machinery_used(statement)`` is the static reading of an answer: the first name in it that reaches
into the checking code (a check, ``Verdict``, ``helpers.checks``, a function's ``__code__``, ``exec``,
...). The grader refuses such a statement before it runs; ``static_tampering(answer, defines)`` reads
the same statement in a notebook's kernel, so that its check cell gives the grader's verdict.
"""

from __future__ import annotations

import ast
import contextlib
import fnmatch
import importlib
import inspect
import linecache
import sys
import threading
from dataclasses import dataclass, field
from typing import Any, Iterator

from ..i18n import tr

MARKER = "__tfs_off_limits__:"  # the start of the message of the error an off-limits call raises
TAMPERING = "tampering"  # the mistake code of an answer that reaches into the checking code
_USED: list[str] = []  # the off-limits names called inside the current forbidden() block
_LOCK = threading.RLock()
_AUDIT = sys.audit  # captured: an answer that replaces sys.audit does not silence the record


class OffLimitsUsed(RuntimeError):
    """Raised when the student's code calls something off limits while its check runs."""


def _record(name: str) -> None:
    with _LOCK:
        if name not in _USED:
            _USED.append(name)
    _AUDIT("tfs.off_limits", name)


def used() -> list[str]:
    """The off-limits names called inside the current forbidden() block, in order."""
    return list(_USED)


def off_limits_name(error: BaseException) -> str | None:
    """The off-limits name an error raised by a forbidden call carries, or None."""
    text = str(error)
    return text[len(MARKER):] if text.startswith(MARKER) else None


# ---------------------------------------------------------------------------------------- static reading
# What no answer needs and the grading machinery is reached through. An answer's own names
# (a local `check_even`, `self.__dict__`, a field called `record`) are not in these sets.
MACHINERY_NAMES = {"Verdict", "EXERCISES", "harness", "guard", "course_tools", "exec", "eval", "compile",
                   "__import__"}
MACHINERY_ATTRIBUTES = {"checks", "harness", "guard", "Verdict", "EXERCISES", "silenced", "__code__", "__globals__",
                        "__closure__", "__builtins__", "f_globals", "f_locals", "f_back", "tb_frame", "gi_frame"}
MACHINERY_MODULES = ("helpers.checks", "course_tools", "importlib", "ctypes", "gc")


def check_names() -> set[str]:
    """The names of the registry's checks (check_create_position_matrix, ...), as helpers exports them."""
    from .harness import EXERCISES

    return {exercise.check_name for exercise in EXERCISES.values()}


def machinery_used(node: ast.AST, checks: set[str] | None = None) -> str | None:
    """The first name in node (a statement of the student's) that reaches into the grading machinery, or None.

    checks: the names of the registry's checks (default: read from the registry)."""
    checks = check_names() if checks is None else checks
    names, attributes = MACHINERY_NAMES | checks, MACHINERY_ATTRIBUTES | checks
    own = {child.id for child in ast.walk(node) if isinstance(child, ast.Name) and isinstance(child.ctx, ast.Store)}
    own |= {child.arg for child in ast.walk(node) if isinstance(child, ast.arg)}  # the answer's own variables
    for child in ast.walk(node):
        if isinstance(child, ast.Name) and child.id in names and child.id not in own:
            return child.id
        if isinstance(child, ast.Attribute):
            if child.attr in attributes:
                return f".{child.attr}"
            if child.attr == "modules" and isinstance(child.value, ast.Name) and child.value.id == "sys":
                return "sys.modules"
        if isinstance(child, ast.Import):
            for alias in child.names:
                if alias.name.startswith(MACHINERY_MODULES):
                    return alias.name
        if isinstance(child, ast.ImportFrom):
            module = child.module or ""
            imported = {alias.name for alias in child.names}
            if module.startswith(MACHINERY_MODULES) or (module == "helpers" and imported & {"checks", "harness",
                                                                                              "guard"}):
                return module
            if imported & (MACHINERY_NAMES - {"harness", "guard"}):
                return sorted(imported & MACHINERY_NAMES)[0]
    return None


def tampering_message(reached: str) -> str:
    """The one-line verdict message of an answer that reaches into the checking code through `reached`."""
    return tr("grader:tampering", "your answer uses `{reached}`, which reaches into the course's checking code; "
              "an answer may only compute its result.", reached=reached.lstrip("."))


_STATIC_CACHE: dict[tuple[str, int, str], str | None] = {}


def _source_file(answer: Any) -> str | None:
    """The file (a notebook cell, in a kernel) in which the function or class `answer` was defined."""
    target = getattr(answer, "__func__", answer)  # a bound method: its function
    if not (inspect.isfunction(target) or inspect.isclass(target)):
        target = type(target)  # an instance of the student's class
    if inspect.isfunction(target):
        return target.__code__.co_filename
    functions = _functions_of(target) if inspect.isclass(target) else []
    return functions[0].__code__.co_filename if functions else None


def static_tampering(answer: Any, defines: str) -> str | None:
    """What the statement defining `answer` (named `defines`, read from its cell's source) uses to reach
    into the checking code (machinery_used), or None: also None when the source cannot be found."""
    target = getattr(answer, "__func__", answer)
    named = getattr(target, "__name__", None) or getattr(type(target), "__name__", None)
    filename = _source_file(answer) if defines in (named, getattr(type(target), "__name__", None)) else None
    if not filename:
        return None
    lines = linecache.getlines(filename)
    key = (filename, len(lines), defines)
    if key not in _STATIC_CACHE:
        reached = None
        try:
            tree = ast.parse("".join(lines))
        except (SyntaxError, ValueError):
            tree = None
        for node in tree.body if tree is not None else []:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == defines:
                reached = machinery_used(node)
        _STATIC_CACHE[key] = reached
    return _STATIC_CACHE[key]


# ---------------------------------------------------------------------------------------- the plan
@dataclass
class _Plan:
    """What one forbidden() block refuses, resolved from the declared names."""

    codes: dict[int, str] = field(default_factory=dict)  # id(code object) -> name
    keys: dict[str, dict[tuple[str, int], str]] = field(default_factory=dict)  # file -> (qualname, line) -> name
    conditional: dict[int, tuple[str, str, Any]] = field(default_factory=dict)  # id(code) -> (name, kwarg, default)
    builtins: dict[int, str] = field(default_factory=dict)  # id(built-in function) -> name
    torch: dict[Any, tuple[str, str | None]] = field(default_factory=dict)  # torch function -> (name, kwarg)
    aten: list[tuple[str, str]] = field(default_factory=list)  # (pattern, name)
    keep: list[Any] = field(default_factory=list)  # the code objects whose ids are keys above, kept alive

    def merged(self, other: "_Plan") -> "_Plan":
        keys = {f: dict(k) for f, k in self.keys.items()}
        for filename, entries in other.keys.items():
            keys.setdefault(filename, {}).update(entries)
        return _Plan({**self.codes, **other.codes}, keys, {**self.conditional, **other.conditional},
                     {**self.builtins, **other.builtins}, {**self.torch, **other.torch},
                     self.aten + other.aten, self.keep + other.keep)


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


def _functions_of(cls: type) -> list[Any]:
    """The plain functions a class defines itself (methods, static and class methods, property accessors)."""
    found = []
    for value in vars(cls).values():
        if isinstance(value, (staticmethod, classmethod)):
            value = value.__func__
        if isinstance(value, property):
            found += [f for f in (value.fget, value.fset, value.fdel) if inspect.isfunction(f)]
        elif inspect.isfunction(value):
            found.append(value)
    return found


def _add_code(plan: _Plan, function: Any, name: str) -> None:
    code = function.__code__
    plan.codes[id(code)] = name
    plan.keys.setdefault(code.co_filename, {})[(code.co_qualname, code.co_firstlineno)] = name
    plan.keep.append(code)


_PLANS: dict[tuple[str, ...], _Plan] = {}


def _plan(names: tuple[str, ...]) -> _Plan:
    """The plan of a tuple of declared names (resolved once; the objects named live as long as the process)."""
    if names in _PLANS:
        return _PLANS[names]
    plan = _Plan()
    for spec in names:
        dotted, _, kwarg = spec.partition(":")
        if dotted.startswith("torch.ops.aten."):
            plan.aten.append((dotted[len("torch.ops.aten."):], spec))
            continue
        obj = _resolve(dotted)
        if obj is None:
            continue
        if inspect.isclass(obj):
            init = vars(obj).get("__init__")
            if kwarg:
                if inspect.isfunction(init):
                    default = inspect.signature(init).parameters.get(kwarg)
                    plan.conditional[id(init.__code__)] = (spec, kwarg, getattr(default, "default", None))
                    plan.keep.append(init.__code__)
                continue
            for function in _functions_of(obj):
                _add_code(plan, function, spec)
        elif dotted.startswith("torch."):
            plan.torch[obj] = (spec, kwarg or None)  # the function mode; the profile function too, below
            if not kwarg and inspect.isfunction(obj):
                _add_code(plan, obj, spec)
            elif not kwarg and inspect.isbuiltin(obj):
                plan.builtins[id(obj)] = spec
                plan.keep.append(obj)
        elif inspect.isfunction(obj):
            _add_code(plan, obj, spec)
        elif inspect.isbuiltin(obj):
            plan.builtins[id(obj)] = spec
            plan.keep.append(obj)
    _PLANS[names] = plan
    return plan


def _differs(value: Any, default: Any) -> bool:
    try:
        return bool(value != default)
    except Exception:  # noqa: BLE001 - a tensor compared with a float, say
        return True


# Positional places of keyword arguments of torch built-ins (inspect.signature cannot read them).
_BUILTIN_ARGUMENTS = {"cross_entropy_loss": {"label_smoothing": (5, 0.0)}}


def _kwarg_set(func: Any, kwarg: str, args: tuple, kwargs: dict) -> bool:
    """Whether a call func(*args, **kwargs) gives kwarg a value other than its default."""
    try:
        signature = inspect.signature(func)
        bound = signature.bind_partial(*args, **kwargs)
    except (TypeError, ValueError):
        place, default = _BUILTIN_ARGUMENTS.get(getattr(func, "__name__", ""), {}).get(kwarg, (None, None))
        if kwarg in kwargs:
            return _differs(kwargs[kwarg], default)
        return place is not None and len(args) > place and _differs(args[place], default)
    if kwarg not in bound.arguments:
        return False
    return _differs(bound.arguments[kwarg], signature.parameters[kwarg].default)


# ---------------------------------------------------------------------------------------- refusing
def _refuse(name: str) -> None:
    _record(name)
    raise OffLimitsUsed(MARKER + name)


def _profiler(plan: _Plan) -> Any:
    """The profile function of a plan: records the start of an off-limits Python function, the call of an
    off-limits built-in (or of one named like an off-limits aten operator: torch.native_layer_norm), a
    call through torch.ops of an off-limits aten operator.
    It records without raising (a profile function that raises is switched off), so it keeps watching."""
    import torch

    codes, keys, conditional, builtin_ids = plan.codes, plan.keys, plan.conditional, plan.builtins
    op_calls = {id(torch._ops.OpOverload.__call__.__code__), id(torch._ops.OpOverloadPacket.__call__.__code__)}
    patterns = [pattern for pattern, _ in plan.aten]
    named: dict[str, bool] = {}  # built-in name -> whether an aten pattern matches it

    def aten_named(name: str) -> bool:
        if name not in named:
            named[name] = any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns)
        return named[name]

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            code = frame.f_code
            name = codes.get(id(code))
            if name is None and code.co_filename in keys:
                name = keys[code.co_filename].get((code.co_qualname, code.co_firstlineno))
            if name is None and id(code) in conditional:
                spec, kwarg, default = conditional[id(code)]
                if _differs(frame.f_locals.get(kwarg, default), default):
                    name = spec
            if name is None and patterns and id(code) in op_calls:
                op = _op_name(frame.f_locals.get("self"))
                if op and aten_named(op):
                    name = f"torch.ops.aten.{op}"
            if name is not None:
                _record(name)
        elif event == "c_call":
            if id(arg) in builtin_ids:
                _record(builtin_ids[id(arg)])
            if patterns:
                name = getattr(arg, "__name__", None)
                if type(name) is str and aten_named(name):
                    _record(f"torch.ops.aten.{name}")

    profile.plan = plan  # type: ignore[attr-defined]  # a block opened inside this one adds to it
    return profile


def _op_name(func: Any) -> str | None:
    """The name of the aten operator func is (an OpOverload or OpOverloadPacket of torch.ops.aten), or None."""
    packet = getattr(func, "overloadpacket", func)
    qualified = getattr(packet, "_qualified_op_name", "")
    return qualified[len("aten::"):] if qualified.startswith("aten::") else None


def _aten_match(plan: _Plan, func: Any) -> str | None:
    """The name to report when func is an aten operator the plan refuses ("torch.ops.aten.native_layer_norm"),
    or None."""
    name = _op_name(func)
    if name and any(fnmatch.fnmatchcase(name, pattern) for pattern, _ in plan.aten):
        return f"torch.ops.aten.{name}"
    return None


_MODE_CLASSES: list[Any] = []  # (function mode class, dispatch mode class), made once


def _mode_classes() -> tuple[Any, Any]:
    if not _MODE_CLASSES:
        from torch.overrides import TorchFunctionMode
        from torch.utils._python_dispatch import TorchDispatchMode

        class RefuseFunctions(TorchFunctionMode):
            def __init__(self, plan: _Plan):
                super().__init__()
                self.plan = plan

            def __torch_function__(self, func, types, args=(), kwargs=None):
                kwargs = kwargs or {}
                entry = self.plan.torch.get(func)
                if entry is not None and (entry[1] is None or _kwarg_set(func, entry[1], args, kwargs)):
                    _refuse(entry[0])
                spec = _aten_match(self.plan, func) if self.plan.aten else None
                if spec is not None:
                    _refuse(spec)
                return func(*args, **kwargs)

        class RefuseOperators(TorchDispatchMode):
            def __init__(self, plan: _Plan):
                super().__init__()
                self.plan = plan

            @classmethod
            def _should_skip_dynamo(cls) -> bool:  # no torch._dynamo (3 s to import) for a plain mode
                return False

            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                spec = _aten_match(self.plan, func)
                if spec is not None:
                    _refuse(spec)
                return func(*args, **(kwargs or {}))

        _MODE_CLASSES.extend((RefuseFunctions, RefuseOperators))
    return _MODE_CLASSES[0], _MODE_CLASSES[1]


def _torch_modes(plan: _Plan) -> list[Any]:
    """A TorchFunctionMode refusing the plan's torch functions and aten operators called from Python, and a
    TorchDispatchMode refusing the plan's aten operators however they are reached (when it names any)."""
    if not (plan.torch or plan.aten):
        return []
    functions, operators = _mode_classes()
    return [functions(plan)] + ([operators(plan)] if plan.aten else [])


@contextlib.contextmanager
def _threads_profiled(profile: Any) -> Iterator[None]:
    """Threads started inside the block (through threading or _thread) run under `profile` too."""
    import _thread

    originals = {name: getattr(_thread, name) for name in ("start_new_thread", "start_new") if hasattr(_thread, name)}
    start = originals["start_new_thread"]

    def start_profiled(function: Any, args: tuple, kwargs: dict | None = None) -> int:
        def run(*a: Any, **k: Any) -> Any:
            sys.setprofile(profile)
            return function(*a, **k)

        return start(run, args, kwargs or {})

    previous_hook = threading.getprofile()
    threading_start = threading._start_new_thread  # type: ignore[attr-defined]
    try:
        for name in originals:
            setattr(_thread, name, start_profiled)
        threading._start_new_thread = start_profiled  # type: ignore[attr-defined]
        threading.setprofile(profile)
        yield
    finally:
        threading.setprofile(previous_hook)
        threading._start_new_thread = threading_start  # type: ignore[attr-defined]
        for name, original in originals.items():
            setattr(_thread, name, original)


@contextlib.contextmanager
def forbidden(exercise: Any) -> Iterator[None]:
    """While inside, the off-limits names of `exercise` (None, or an exercise without any: nothing)
    cannot be used; what was tried is recorded in used(). A block opened inside another refuses the
    names of both (an answer cannot open one to lift the outer block's refusals)."""
    names = tuple(getattr(exercise, "off_limits", ()) or ())
    previous = sys.getprofile()
    outer = getattr(previous, "plan", None)  # the block this one is opened in: its refusals stay
    if not isinstance(outer, _Plan):
        with _LOCK:
            _USED.clear()
    if not names:
        yield
        return
    plan = outer.merged(_plan(names)) if isinstance(outer, _Plan) else _plan(names)
    profile = _profiler(plan)
    with contextlib.ExitStack() as stack:
        for mode in _torch_modes(plan):
            stack.enter_context(mode)
        stack.enter_context(_threads_profiled(profile))
        sys.setprofile(profile)
        try:
            yield
        finally:
            sys.setprofile(previous if callable(previous) else None)  # cProfile's profiler cannot be put back


__all__ = ["MARKER", "OffLimitsUsed", "TAMPERING", "forbidden", "machinery_used", "off_limits_name",
           "static_tampering", "tampering_message", "used"]
