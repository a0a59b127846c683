"""The grader's verdicts process made hard to fool: its audit hook, its snapshot of the checking code
and the signature of its verdicts. course_tools/verdicts.py calls protect() before any student code runs.

    protect(key, fd, language, compute=..., finish=..., main=...)

1. Imports every module of ``helpers`` and what the checks need, so that no file of ``helpers/`` or
   ``course_tools/`` has to be read or compiled again; forgets their lines in ``linecache``.
2. Takes a snapshot of the checking code: every module, class, function (code, defaults, closure) and
   module-level table of ``helpers`` and ``course_tools``, the instances of their classes these hold
   (the exercise registry), and the namespaces (and classes) of ``builtins``, ``numpy``, ``torch`` and
   the standard modules the checks use (SHARED).
3. Installs one audit hook (``sys.addaudithook``: it cannot be removed, listed or replaced). The key
   lives only in its closure, as an OpenSSL HMAC object (the key cannot be read back from it), and the
   hook never calls code an answer could have replaced, so no student code runs while its frame does;
   reading the frame of a traceback that passes through the hook is refused. The hook refuses (see
   REFUSED and the conditions in ``hook``) and records, per exercise, what no answer needs.
4. Makes ``signal.signal`` refuse (a Python signal handler runs in whatever frame is executing).

The hook answers three events of verdicts.py's own: ``tfs.exercise`` (the check of an exercise starts;
the snapshot is compared), ``tfs.off_limits`` (the guard saw an off-limits call, helpers/checks/guard.py)
and ``tfs.verdicts`` (sign, write to fd, exit 0; exit 3 when the write fails: the hook never returns once it
signed). The first and the last are accepted only from verdicts.py's ``compute`` and ``_finish``, called
from the very call of its ``main`` that called protect() (the same frame), with nothing else on the stack.
"""

from __future__ import annotations

import _thread
import importlib
import linecache
import os
import pathlib
import pkgutil
import signal
import sys
import types
from pathlib import Path
from typing import Any, Callable

PROTECTED = ("helpers", "course_tools")  # the course's code: snapshot whole, never recompiled or read again
LIBRARIES = ("helpers.", "course_tools.", "torch.", "numpy.")  # functions whose code may not be changed
SHARED = ("builtins", "math", "warnings", "contextlib", "functools", "inspect", "traceback", "linecache",
          "dataclasses", "string", "json", "json.encoder", "re", "os", "posixpath", "types", "typing", "fnmatch",
          "threading", "ast", "copy", "numbers", "collections", "operator", "abc", "enum", "hmac", "signal",
          "scipy.special")
SHARED_PREFIXES = ("numpy", "torch.nn.modules")
SHARED_TORCH = ("torch", "torch._tensor", "torch.functional", "torch.overrides", "torch.random", "torch._ops",
                "torch.utils._python_dispatch", "torch.types", "torch.nn", "torch.nn.functional", "torch.nn.init",
                "torch.nn.parameter", "torch.autograd", "torch.autograd.grad_mode", "torch.autograd.function")
# Module-level tables that change while checks run (what the guard recorded, caches, the language).
RUNTIME_STATE = {("helpers.checks.guard", "_USED"), ("helpers.checks.guard", "_STATIC_CACHE"),
                 ("helpers.checks.harness", "_RUNNING"), ("helpers.checks.harness", "_SILENCED"),
                 ("helpers.i18n", "_catalogs"), ("helpers.i18n", "_current")}
REFUSED = {"os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork", "os.forkpty", "os.kill", "os.killpg",
           "os.link", "subprocess.Popen", "pty.spawn", "sys._current_frames", "sys.settrace", "sys.addaudithook",
           "gc.get_objects", "gc.get_referrers", "gc.get_referents", "cpython.PyInterpreterState_New",
           "cpython._PySys_ClearAuditHooks", "tfs.refused"}
WATCHED = REFUSED | {"sys.setprofile", "object.__setattr__", "object.__delattr__", "function.__new__", "code.__new__",
                     "exec", "compile", "open", "tfs.exercise", "tfs.off_limits", "tfs.verdicts"}
ALL = "*"  # the phase in which the definitions load: what is refused then counts for every exercise


# What torch changes in a namespace of the snapshot by itself: torch._dynamo, which torch imports the first
# time an operator runs on a "meta" tensor (the Transformer's check) or an optimizer steps, re-wraps
# torch.manual_seed (a function whose __wrapped__ is the one of the snapshot is accepted there).
REWRAPPED = {"torch": frozenset({"manual_seed"})}


def _import_everything() -> None:
    """Every module of helpers and course_tools, and what the checks import on their first call; every module
    of theirs gets its __warningregistry__ now (a warning would add it to the namespace)."""
    import helpers
    from helpers.checks import EXERCISES, guard

    for info in pkgutil.walk_packages(helpers.__path__, "helpers."):
        importlib.import_module(info.name)
    for name in ("course_tools.verdicts", "course_tools.sandbox"):
        importlib.import_module(name)
    for exercise in EXERCISES.values():  # resolves every off-limits name (imports scipy.special, ...)
        guard._plan(exercise.off_limits)
    guard._mode_classes()
    for name, module in list(sys.modules.items()):
        if _own(name) and module is not None:
            vars(module).setdefault("__warningregistry__", {})


def _protected_paths() -> tuple[tuple[str, ...], frozenset]:
    """(the folders of the course's code, as prefixes of file names), {(device, inode) of each file in them}."""
    import course_tools
    import helpers

    folders = [Path(helpers.__file__).parent, Path(course_tools.__file__).parent]
    prefixes, inodes = set(), set()
    for folder in folders:
        prefixes |= {str(folder) + os.sep, str(folder.resolve()) + os.sep}
        for root, _, files in os.walk(folder):
            for name in files:
                try:
                    status = os.stat(os.path.join(root, name))
                except OSError:
                    continue
                inodes.add((status.st_dev, status.st_ino))
    return tuple(sorted(prefixes)), frozenset(inodes)


# ---------------------------------------------------------------------------------------- the snapshot
def _own(name: Any) -> bool:
    return type(name) is str and (name in PROTECTED or name.startswith(tuple(p + "." for p in PROTECTED)))


def snapshot() -> tuple:
    """(kind, object, saved, label, rewrapped keys) entries: what compare() checks is still the same object,
    item by item.

    kinds: "dict" (a dict or a class's namespace, the same items in the same order), "grown" (a shared
    module's namespace: its first items the same, more allowed), "list", "set", "function" (code,
    defaults, keyword defaults, closure cells), "vars" (an instance still has the same __dict__)."""
    entries: list[tuple] = []
    seen: set[int] = set()
    skip = {id(vars(sys.modules[m])[n]) for m, n in RUNTIME_STATE if m in sys.modules and n in vars(sys.modules[m])}
    skip |= {id(vars(module)["__warningregistry__"]) for name, module in sys.modules.items()
             if _own(name) and module is not None and "__warningregistry__" in vars(module)}

    def walk(obj: Any, label: str, depth: int = 0) -> None:
        if id(obj) in seen or id(obj) in skip or depth > 8:
            return
        seen.add(id(obj))
        kind = type(obj)
        if kind is dict:
            entries.append(("dict", obj, tuple(obj.items()), label, _NONE))
            for key, value in obj.items():
                walk(value, f"{label}[{key!r}]", depth + 1)
        elif kind is list:
            entries.append(("list", obj, tuple(obj), label, _NONE))
            for value in obj:
                walk(value, f"{label}[]", depth + 1)
        elif kind is set:
            entries.append(("set", obj, tuple(obj), label, _NONE))
        elif kind is tuple or kind is frozenset:
            for value in obj:
                walk(value, label, depth + 1)
        elif kind in (staticmethod, classmethod):
            walk(obj.__func__, label, depth + 1)
        elif kind is property:
            for accessor in (obj.fget, obj.fset, obj.fdel):
                walk(accessor, label, depth + 1)
        elif kind is types.FunctionType:
            if not _own(obj.__module__):
                return
            cells = tuple(_cell(cell) for cell in obj.__closure__ or ())
            entries.append(("function", obj, (obj.__code__, obj.__defaults__, obj.__kwdefaults__, cells), label, _NONE))
            for value in cells + (obj.__defaults__ or ()) + ((obj.__kwdefaults__,) if obj.__kwdefaults__ else ()):
                walk(value, f"{label}.<closure>", depth + 1)
        elif isinstance(obj, type):
            if _own(obj.__module__) and obj.__flags__ & (1 << 9):  # a class of the course (a heap type)
                entries.append(("dict", vars(obj), tuple(vars(obj).items()), label, _NONE))
                for key, value in vars(obj).items():
                    walk(value, f"{label}.{key}", depth + 1)
        elif _own(type(obj).__module__) and hasattr(obj, "__dict__"):  # an instance of a class of the course
            entries.append(("vars", obj, vars(obj), label, _NONE))
            walk(vars(obj), label, depth + 1)

    for name, module in sorted(sys.modules.items()):
        if _own(name) and module is not None:
            entries.append(("dict", vars(module), tuple(vars(module).items()), name, _NONE))
            for key, value in vars(module).items():
                if not isinstance(value, types.ModuleType):
                    walk(value, f"{name}.{key}")
    for name, module in sorted(sys.modules.items()):
        shared = name in SHARED or name in SHARED_TORCH or name.startswith(tuple(p + "." for p in SHARED_PREFIXES)) \
            or name in SHARED_PREFIXES
        if not shared or module is None:
            continue
        entries.append(("grown", vars(module), tuple(vars(module).items()), name, REWRAPPED.get(name, _NONE)))
        for key, value in list(vars(module).items()):
            if isinstance(value, type) and value.__module__ == name and value.__flags__ & (1 << 9):
                entries.append(("dict", vars(value), tuple(vars(value).items()), f"{name}.{key}", _NONE))
    return tuple(sorted(entries, key=lambda entry: entry[0] == "vars"))  # the instances last (see compare)


_EMPTY = object()
_NONE: frozenset = frozenset()


def _cell(cell: Any) -> Any:
    try:
        return cell.cell_contents
    except ValueError:
        return _EMPTY


def _comparer() -> Callable[[tuple], str | None]:
    """compare(entries): the label of the first entry that changed (with the key), or None. It calls only
    built-ins captured here and methods of exact built-in types, so no code an answer replaced runs in it."""
    _tuple, _len, _type, _range, _vars, _str = tuple, len, type, range, vars, str
    _value_error, _exception, _empty, _none, _function = ValueError, Exception, _EMPTY, _NONE, types.FunctionType

    def cell_value(cell: Any) -> Any:
        try:
            return cell.cell_contents
        except _value_error:
            return _empty

    def rewrapped(new: Any, old: Any) -> bool:
        return _type(new) is _function and new.__dict__.get("__wrapped__") is old

    def same_items(now: tuple, saved: tuple, grown: bool, keys: frozenset = _none) -> int:
        """The index of the first item that differs (-1: none); keys: those whose value may be re-wrapped."""
        if _len(now) < _len(saved) or (not grown and _len(now) != _len(saved)):
            return _len(saved) if _len(now) >= _len(saved) else _len(now)
        for i in _range(_len(saved)):
            a, b = now[i], saved[i]
            if _type(a) is _tuple and _type(b) is _tuple and _len(a) == 2 and _len(b) == 2:
                if a[0] is not b[0] or (a[1] is not b[1] and not (a[0] in keys and rewrapped(a[1], b[1]))):
                    return i
            elif a is not b:
                return i
        return -1

    def compare(entries: tuple) -> str | None:
        for kind, obj, saved, label, keys in entries:
            try:
                if kind == "dict" or kind == "grown":
                    now = _tuple(obj.items())
                    index = same_items(now, saved, kind == "grown", keys)
                    if index >= 0:
                        item = saved[index] if index < _len(saved) else now[index]
                        return label + "." + (item[0] if _type(item[0]) is _str else "?")
                elif kind == "list" or kind == "set":
                    if same_items(_tuple(obj), saved, False) >= 0:
                        return label
                elif kind == "function":
                    now = (obj.__code__, obj.__defaults__, obj.__kwdefaults__)
                    cells = _tuple([cell_value(cell) for cell in obj.__closure__ or ()])
                    if same_items(now, saved[:3], False) >= 0 or same_items(cells, saved[3], False) >= 0:
                        return label
                elif kind == "vars":  # last: the classes' namespaces are known to be unchanged by now
                    if _vars(obj) is not saved:
                        return label
            except _exception:  # noqa: BLE001 - anything odd about it counts as a change
                return label
        return None

    return compare


# ---------------------------------------------------------------------------------------- the hook
def protect(key: bytes, fd: int, language: str, exercises: tuple[str, ...], *, compute: Callable, finish: Callable,
            main: Callable) -> None:
    """Make this process hard to fool before any student code runs (see the module's docstring). Call it from
    verdicts.main, which then runs compute() and finish(); key: the grader's key; fd: the grader's pipe;
    exercises: the names of those graded."""
    import _hashlib

    from helpers.checks import guard
    from helpers.checks.harness import GENERIC_MISTAKES, _translated
    from helpers.i18n import set_language, tr

    _import_everything()
    try:
        set_language(language)
    except ValueError:
        pass
    signer = _hashlib.hmac_new(key, digestmod="sha256")  # the key cannot be read back from it
    mark = "\x00"
    tampered_text = guard.tampering_message(mark).split(mark)
    off_limits_text = _translated("generic:used_off_limits", GENERIC_MISTAKES["used_off_limits"],
                                  call=tr("harness:your_function", "your function"), name=mark).split(mark)
    prefixes, inodes = _protected_paths()
    import helpers

    helpers_folder = Path(helpers.__file__).parent  # its reference code may be copied: calling a copy is off limits
    references = tuple({str(f) + os.sep for f in (helpers_folder, helpers_folder.resolve())})
    checking = tuple(p + "checks" + os.sep for p in references)
    for filename in list(linecache.cache):
        if filename.startswith(prefixes):
            del linecache.cache[filename]
    guard_file, this_file = guard.__file__, __file__
    base = []  # the code of every frame below main's: the stack the two events of ours must come from
    frame = main_frame = sys._getframe(1)  # and main's frame itself: a second call of main has another
    if frame.f_code is not main.__code__:
        raise RuntimeError("protect() must be called from verdicts.main")
    while frame is not None:
        base.append(frame.f_code)
        frame = frame.f_back
    stacks = {"tfs.exercise": (compute.__code__, *base), "tfs.verdicts": (finish.__code__, *base)}
    _refuse_signal_handlers()
    entries = snapshot()
    compare = _comparer()
    threads = _thread._count()

    # Everything the hooks' functions use is bound here, in their closure: no global or built-in name is
    # looked up while they run (an answer could have replaced it), and nothing an answer made is called.
    getframe, get_ident, stat, write, exit_now = sys._getframe, _thread.get_ident, os.stat, os.write, os._exit
    count_threads, _type, _str, _bytes, _int, _tuple, _len = _thread._count, type, str, bytes, int, tuple, len
    traceback_type, code_type, function_type = types.TracebackType, types.CodeType, types.FunctionType
    posix_path, pure_path, path_text = pathlib.PosixPath, pathlib.PurePosixPath, vars(pathlib.PurePath)["_str"]
    _permission_error, _os_error, _value_error, _attribute_error = PermissionError, OSError, ValueError, AttributeError
    _base_exception = BaseException
    refused_events, watched, libraries, everyone = frozenset(REFUSED), frozenset(WATCHED), LIBRARIES, ALL
    busy: set[int] = set()
    phase = [ALL]
    tampered: dict[str, str] = {}  # exercise (or ALL) -> the first thing refused or changed
    off_limits: dict[str, str] = {}  # exercise -> the first off-limits name used

    def note(reason: str) -> None:
        if phase[0] not in tampered:
            tampered[phase[0]] = reason

    def deny(reason: str, record: bool = True) -> None:
        if record:
            note(reason)
        raise _permission_error("the grader refuses " + reason + ": no answer needs it")

    def protected_file(name: Any) -> bool:
        if _type(name) is _bytes:
            name = name.decode("utf-8", "surrogateescape")
        return _type(name) is _str and name.startswith(prefixes)

    def reference_file(name: Any) -> bool:
        return _type(name) is _str and name.startswith(references) and not name.startswith(checking)

    def importing() -> bool:
        """Whether the file is read to run it again: by runpy, or by an import system's loader (get_data)."""
        frame, depth = getframe(2), 0
        while frame is not None and depth < 12:
            code = frame.f_code
            name, filename = code.co_name, code.co_filename
            if filename.endswith("runpy.py") or (name == "get_data" and "importlib" in filename):
                return True
            frame, depth = frame.f_back, depth + 1
        return False

    def right_stack(expected: tuple) -> bool:
        frame, index = getframe(2), 0  # the caller of sys.audit (0: this function, 1: the hook)
        while frame is not None:
            if index >= _len(expected) or frame.f_code is not expected[index]:
                return False
            if index == 1 and frame is not main_frame:  # main called again, after or from code of an answer
                return False
            frame, index = frame.f_back, index + 1
        return index == _len(expected)

    def changed() -> None:
        what = compare(entries)
        if what is not None:
            note(what + " (changed)")

    def sign(rows: Any) -> None:
        """Check the rows, apply what the hook recorded, sign them, write them, end the process."""
        if count_threads() > threads:
            if everyone not in tampered:
                tampered[everyone] = "threading (a thread still running)"
        final = []
        for row in rows if _type(rows) is _tuple else ():
            if _type(row) is not _tuple or _len(row) != 4:
                continue
            name, status, mistake, message = row
            if _type(name) is not _str or _type(status) is not _str or _type(message) is not _str or not (
                    mistake is None or _type(mistake) is _str):
                continue
            why = tampered.get(name, tampered.get(everyone))
            if why is not None:
                status, mistake, message = "fail", "tampering", tampered_text[0] + why + tampered_text[1]
            elif name in off_limits and status != "todo":  # a refused copy of the reference makes it fail
                status, mistake = "fail", "used_off_limits"
                message = off_limits_text[0] + off_limits[name] + off_limits_text[1]
            fields = (name, status, "" if mistake is None else mistake, message)
            final.append(b":".join([field.encode("utf-8").hex().encode() for field in fields]))
        payload = b";".join(final)
        mac = signer.copy()
        mac.update(payload)
        line = b"TFSV1 " + payload + b" " + mac.hexdigest().encode() + b"\n"
        try:
            while line:
                line = line[write(fd, line):]
        except _base_exception:  # the pipe was closed or replaced: end here, never back in code an answer reaches
            exit_now(3)
        exit_now(0)

    def hook(event: str, args: tuple) -> None:
        ident = get_ident()
        if ident in busy:
            return
        if event == "object.__getattr__":
            if _len(args) != 2 or _type(args[0]) is not traceback_type or _type(args[1]) is not _str \
                    or args[1] != "tb_frame":
                return
            busy.add(ident)
            try:
                if args[0].tb_frame.f_code.co_filename == this_file:
                    deny("reading the frames of the grader's audit hook", record=False)
            finally:
                busy.discard(ident)
            return
        if event not in watched and not event.startswith("ctypes."):
            return
        busy.add(ident)
        try:
            first = args[0] if _len(args) else None
            if event == "tfs.off_limits":
                if _type(first) is _str and phase[0] != everyone and phase[0] not in off_limits:
                    off_limits[phase[0]] = first
            elif event == "tfs.exercise" or event == "tfs.verdicts":
                if not right_stack(stacks[event]):
                    deny(event)
                changed()
                if event == "tfs.verdicts":
                    sign(first)
                phase[0] = first if _type(first) is _str else everyone
            elif event in refused_events or event.startswith("ctypes."):
                deny(first if event == "tfs.refused" and _type(first) is _str else event)
            elif event == "sys.setprofile":
                if getframe(1).f_code.co_filename != guard_file:
                    deny("sys.setprofile")
            elif event == "object.__setattr__" or event == "object.__delattr__":
                module = first.__module__ if _type(first) is function_type else None
                if _type(module) is _str and (module + ".").startswith(libraries) and _type(args[1]) is _str:
                    deny("changing " + module + "." + first.__name__ + "." + args[1])
            elif event == "function.__new__" or event == "exec":
                if _type(first) is code_type and protected_file(first.co_filename) and (
                        event == "exec" or not reference_file(first.co_filename)):
                    deny("a copy of the course's code")
            elif event == "code.__new__" or event == "compile":
                if _len(args) > 1 and protected_file(args[1]):
                    deny("compiling the course's code again")
            elif event == "open":
                if _type(first) is posix_path or _type(first) is pure_path:
                    try:
                        first = path_text.__get__(first, None)
                    except _attribute_error:
                        deny("opening a file through a path whose text is not known yet", record=False)
                if _type(first) is _int:
                    return
                if _type(first) is not _str and _type(first) is not _bytes:
                    deny("opening a file through an object that is not a str", record=False)
                try:
                    status = stat(first)
                except (_os_error, _value_error):
                    return
                if (status.st_dev, status.st_ino) in inodes:
                    if phase[0] != everyone and phase[0] not in off_limits and importing():
                        off_limits[phase[0]] = "a fresh copy of the course's code (runpy, importlib)"
                    deny("reading the course's code", record=False)
        finally:
            busy.discard(ident)

    sys.addaudithook(hook)
    del key, hook


def _refuse_signal_handlers() -> None:
    """signal.signal refuses (for the module and for any fresh copy of the built-in _signal module)."""
    import _imp
    import _signal

    audit = sys.audit

    def refused(*args: Any, **kwargs: Any) -> None:
        audit("tfs.refused", "signal.signal")

    signal.signal = refused  # type: ignore[assignment]
    _signal.signal = refused  # type: ignore[attr-defined]
    create = _imp.create_builtin

    def create_builtin(spec: Any) -> Any:
        if getattr(spec, "name", None) == "_signal":
            audit("tfs.refused", "a new _signal module")
        return create(spec)

    _imp.create_builtin = create_builtin  # type: ignore[attr-defined]
