"""What the student's code may not call while its check runs: the exercise's own reference, and the
built-ins its notebook names as off limits.

Each exercise declares ``off_limits`` (harness.Exercise) as dotted names:

    "helpers.positional.positional_encoding"      a function of the course's reference
    "helpers.transformer.LayerNorm"               a class: constructing or calling it (or a subclass)
    "torch.nn.functional.layer_norm"              a torch function, however it is reached
    "torch.nn.functional.cross_entropy:label_smoothing"   that function called with label_smoothing set

``harness.call()`` runs every call of the student's code inside ``forbidden(exercise)``. Inside it:

- a Python function (the course's references, ``scipy.special.softmax``) has its code object swapped
  for one that records the use and raises, so every alias of it (``from helpers import ...``,
  ``import helpers as h``) is caught;
- a class has its ``__init__`` and ``forward`` swapped the same way, so a subclass
  (``class LayerNorm(helpers.LayerNorm): pass``) is caught too;
- a torch function (``F.layer_norm``, ``torch.softmax``, ``Tensor.softmax``) is caught by a
  ``torch.overrides.TorchFunctionMode``, which sees every call of the torch API with tensor arguments,
  also from inside ``nn`` modules.

A use is recorded even when the student's code catches the error it raises: ``used()`` lists what
was called, and the harness turns it into a ``fail`` with the code ``used_off_limits``. The check's
own reference computations run outside ``call()`` and are not affected.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import threading
from typing import Any, Iterator

MARKER = "__tfs_off_limits__:"  # the start of the message of the error an off-limits call raises
_USED: list[str] = []  # the off-limits names called inside the current forbidden() block
_LOCK = threading.RLock()


class OffLimitsUsed(RuntimeError):
    """Raised when the student's code calls something off limits while its check runs."""


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


def _raiser_code(name: str, signature_of: Any = None) -> Any:
    """A code object that records `name` as used and raises; it needs no globals of ours, so it can
    replace the code of a function living in any module."""
    source = (f"def _off_limits(*args, **kwargs):\n"
              f"    import sys\n"
              f"    guard = sys.modules.get({__name__!r})\n"
              f"    if guard is not None:\n"
              f"        guard._record({name!r})\n"
              f"    raise RuntimeError({MARKER + name!r})\n")
    namespace: dict[str, Any] = {}
    exec(compile(source, f"<off limits: {name}>", "exec"), namespace)
    return namespace["_off_limits"].__code__


def _record(name: str) -> None:
    with _LOCK:
        if name not in _USED:
            _USED.append(name)


def used() -> list[str]:
    """The off-limits names called inside the current forbidden() block, in order."""
    return list(_USED)


def off_limits_name(error: BaseException) -> str | None:
    """The off-limits name an error raised by a forbidden call carries, or None."""
    text = str(error)
    return text[len(MARKER):] if text.startswith(MARKER) else None


def _kwarg_set(func: Any, kwarg: str, args: tuple, kwargs: dict) -> bool:
    """Whether a call func(*args, **kwargs) gives kwarg a value other than its default."""
    try:
        signature = inspect.signature(func)
        bound = signature.bind_partial(*args, **kwargs)
    except (TypeError, ValueError):
        return kwarg in kwargs
    if kwarg not in bound.arguments:
        return False
    default = signature.parameters[kwarg].default
    value = bound.arguments[kwarg]
    try:
        return bool(value != default)
    except Exception:  # noqa: BLE001 - a tensor compared with a float, say
        return True


def _torch_mode(torch_names: dict[Any, tuple[str, str | None]]) -> Any:
    """A TorchFunctionMode that refuses the torch functions of torch_names ({function: (name, kwarg)})."""
    from torch.overrides import TorchFunctionMode

    class Refuse(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            entry = torch_names.get(func)
            if entry is not None:
                name, kwarg = entry
                if kwarg is None or _kwarg_set(func, kwarg, args, kwargs):
                    _record(name)
                    raise OffLimitsUsed(MARKER + name)
            return func(*args, **kwargs)

    return Refuse()


@contextlib.contextmanager
def forbidden(exercise: Any) -> Iterator[None]:
    """While inside, the off-limits names of `exercise` (None, or an exercise without any: nothing)
    cannot be used; what was tried is recorded in used()."""
    names = tuple(getattr(exercise, "off_limits", ()) or ())
    with _LOCK:
        _USED.clear()
    if not names:
        yield
        return
    restore: list[tuple[Any, str, Any]] = []  # (object, attribute, original value)
    torch_names: dict[Any, tuple[str, str | None]] = {}
    try:
        for spec in names:
            dotted, _, kwarg = spec.partition(":")
            obj = _resolve(dotted)
            if obj is None:
                continue
            module = getattr(obj, "__module__", "") or ""
            if dotted.startswith("torch.") and not inspect.isclass(obj):
                torch_names[obj] = (spec, kwarg or None)
            elif inspect.isclass(obj):
                for attr in ("__init__", "forward"):
                    original = obj.__dict__.get(attr)
                    if original is None or (kwarg and attr != "__init__"):
                        continue
                    if kwarg:
                        def checked_init(self, *args, _original=original, _spec=spec, _kwarg=kwarg, **kwargs):
                            if _kwarg_set(_original, _kwarg, (self, *args), kwargs):
                                _record(_spec)
                                raise OffLimitsUsed(MARKER + _spec)
                            return _original(self, *args, **kwargs)
                        replacement = checked_init
                    else:
                        replacement = _raising_function(spec)
                    restore.append((obj, attr, original))
                    setattr(obj, attr, replacement)
            elif inspect.isfunction(obj) and not obj.__code__.co_freevars and not module.startswith("torch"):
                restore.append((obj, "__code__", obj.__code__))
                obj.__code__ = _raiser_code(spec)
        mode = _torch_mode(torch_names) if torch_names else contextlib.nullcontext()
        with mode:
            yield
    finally:
        for obj, attr, original in reversed(restore):
            setattr(obj, attr, original)


def _raising_function(name: str) -> Any:
    def refused(*args: Any, **kwargs: Any) -> Any:
        _record(name)
        raise OffLimitsUsed(MARKER + name)

    return refused


__all__ = ["MARKER", "OffLimitsUsed", "forbidden", "off_limits_name", "used"]
