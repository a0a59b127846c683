"""What every torch check of notebook 05 shares: the student's class built with the reference's (seeded)
weights, both modules run alike on copies of the inputs, and their outputs and gradients compared.

In training mode both modules draw their dropout masks from the same seeded generator, in the order
they call their dropouts, so a right module gives the reference's numbers exactly, and a missing,
misplaced or hard-coded dropout gives other ones. TORCH_MISTAKES are the codes every torch check shares.
"""

from __future__ import annotations

import contextlib
import copy
from typing import Any, Callable

import numpy as np
import torch
from torch import nn

from ..i18n import tr
from .harness import Known, Mistake, call, same, to_array

D_MODEL, HEADS, D_FF = 16, 4, 32
P_TRAIN = 0.3  # the dropout of the training-mode comparisons: not the default 0.1, so that a hard-coded 0.1 shows

TORCH_MISTAKES = {
    "changed_input": "{what} changes its input {name} in place: the caller's tensor must stay as it was. Build new "
                     "tensors (`x = x + y`, not `x += y`, `x[...] = ...` or `x.zero_()`).",
    "wrong_gradients": "{what} gives the right output but the wrong gradients. {detail} The backward pass must "
                       "follow every step of the forward. Look for a `.detach()`, a round trip through numpy "
                       "(`.numpy()`, `.item()`, `.tolist()`, `torch.tensor(...)` of a result) and in-place operations "
                       "on tensors that autograd still needs.",
    "dropout_in_eval_mode": "{what} gives different outputs on two calls in eval mode: dropout is still applied after "
                            ".eval(). Use the nn.Dropout modules of __init__ (they follow .train() and .eval()), or "
                            "F.dropout(..., training=self.training).",
}
DROPOUT_P_MISTAKE = {
    "dropout_p_hardcoded": "in training mode {what} drops with p=0.1, but it was built with dropout={p}: use the "
                           "dropout modules of __init__, built with the given probability, not a fixed 0.1.",
}


def _setup_mistakes(cls_name: str, exercise_name: str, keep: str = "keep the sub-modules of the given __init__ "
                                                                     "unchanged") -> dict[str, str]:
    """The mistakes in how the student's class is passed or built, the same for every class exercise."""
    return {
        "not_a_class": f"pass your {cls_name} class itself, check_{exercise_name}({cls_name}), got {{kind}}.",
        "not_a_module": f"{cls_name}(...) did not build an nn.Module (got {{kind}}): keep "
                        f"`class {cls_name}(nn.Module)` and its super().__init__().",
        "weights_do_not_fit": f"the weights of the reference {cls_name} do not fit yours: {keep} ({{error}})",
    }


def _as_class(obj: Any) -> type:
    if isinstance(obj, (nn.Module, type)):
        return obj if isinstance(obj, type) else type(obj)
    raise Known("not_a_class", kind=type(obj).__name__)


def _randomise(module: nn.Module, seed: int) -> None:
    """Seeded weights everywhere, LayerNorms included (their default 1 and 0 would hide a swapped norm)."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in module.named_parameters():
            centre = 1.0 if "norm" in name and name.endswith("weight") else 0.0
            p.copy_(centre + 0.3 * torch.randn(p.shape, generator=gen, dtype=p.dtype))


def _fit(student: Any, reference: nn.Module) -> nn.Module:
    """Load the reference's weights into the student's module, or explain why they do not fit."""
    if not isinstance(student, nn.Module):
        raise Known("not_a_module", kind=type(student).__name__)
    try:
        student.load_state_dict(reference.state_dict())
    except Exception as error:  # noqa: BLE001 - any mismatch gets the same explanation
        theirs, ours = set(student.state_dict()), set(reference.state_dict())
        labelled = ((tr("transformer:missing_keys", "missing"), ours - theirs),
                    (tr("transformer:unexpected_keys", "unexpected"), theirs - ours))
        detail = "; ".join(f"{label} {', '.join(sorted(keys)[:3])}{', ...' if len(keys) > 3 else ''}"
                           for label, keys in labelled if keys)
        raise Known("weights_do_not_fit", error=detail or str(error).splitlines()[0]) from None
    return student


def built_pair(student_cls: type, reference_cls: type, seed: int, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
    """(student, reference): both classes built with the same arguments (global random state kept), the reference
    given seeded weights, the student its weights, both float64 in eval mode."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        student = call(student_cls, *args, **kwargs)
        reference = reference_cls(*args, **kwargs)
    _randomise(reference, seed)
    return _fit(student, reference).double().eval(), reference.double().eval()


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().cpu().numpy().astype(np.float64)


def _run(module: Callable, *args: Any, what: str) -> np.ndarray:
    with torch.no_grad():
        return to_array(call(module, *args), what)


def _use_reference_parts(student: nn.Module, reference: nn.Module, names: tuple[str, ...]) -> None:
    """Put copies of the reference's sub-modules (same weights) into the student's module."""
    for name in names:
        if hasattr(reference, name):
            setattr(student, name, copy.deepcopy(getattr(reference, name)))


# ---------------------------------------------------------------------- running both modules alike
def _copies(args: tuple) -> tuple:
    return tuple(a.detach().clone() if isinstance(a, torch.Tensor) else a for a in args)


def protect_inputs(originals: tuple, given: tuple, names: tuple[str, ...], what: str) -> None:
    """Raise changed_input when the student's call changed one of the tensors it was given."""
    for original, mine, name in zip(originals, given, names):
        if isinstance(original, torch.Tensor) and not (
                mine.shape == original.shape and torch.equal(mine.detach(), original)):
            raise Known("changed_input", what=what, name=name)


def student_output(fn: Callable, args: tuple, names: tuple[str, ...], what: str, *,
                   seed: int | None = None) -> np.ndarray:
    """The student's fn(*args) as a float64 array, computed on copies of args without gradients (after
    torch.manual_seed(seed) when a seed is given); a change of an input tensor is reported."""
    given = _copies(args)
    with torch.no_grad(), torch.random.fork_rng(devices=[]):
        if seed is not None:
            torch.manual_seed(seed)
        result = call(fn, *given)
    protect_inputs(args, given, names, what)
    return to_array(result, what)


def seeded(make: Callable[[], torch.Tensor], seed: int | None = None) -> np.ndarray:
    """make() as a float64 array, without gradients, after torch.manual_seed(seed) (the global state kept)."""
    with torch.no_grad(), torch.random.fork_rng(devices=[]):
        if seed is not None:
            torch.manual_seed(seed)
        return _np(make())


def reference_output(fn: Callable, args: tuple, *, seed: int | None = None) -> np.ndarray:
    """The reference's fn(*args) on copies of args, the same way as student_output."""
    given = _copies(args)
    return seeded(lambda: fn(*given), seed)


def seeded_outputs(make: dict[Any, Callable[[], torch.Tensor]], seed: int | None = None) -> dict[Any, np.ndarray]:
    """{key: seeded(make[key], seed)}, leaving out the mistakes that cannot run at these shapes."""
    out = {}
    for key, run in make.items():
        with contextlib.suppress(Exception):  # a mistake that cannot run at these shapes
            out[key] = seeded(run, seed)
    return out


def same_in_eval_mode(fn: Callable, args: tuple, names: tuple[str, ...], what: str, out: np.ndarray) -> None:
    """A second call in eval mode, with other random numbers, must give the same output: else dropout is on."""
    again = student_output(fn, args, names, what, seed=12345)
    if again.shape == out.shape and not same(again, out, atol=1e-12):
        raise Known("dropout_in_eval_mode", what=what)


# ---------------------------------------------------------------------- gradients
def _backward(out: torch.Tensor) -> None:
    """The backward pass of a fixed random projection of out."""
    projection = torch.randn(tuple(out.shape), generator=torch.Generator().manual_seed(99), dtype=torch.float64)
    (out.double() * projection).sum().backward()


def _leaves(args: tuple, grad_args: dict[int, str]) -> tuple[list, dict[str, torch.Tensor]]:
    """(copies of args, {name: the copy of each float input of grad_args, a leaf that requires its gradient})."""
    given = list(_copies(args))
    return given, {name: given[i].requires_grad_(True) for i, name in grad_args.items()}


def _gradients(module: nn.Module, leaves: dict[str, torch.Tensor]) -> dict[str, torch.Tensor | None]:
    grads = {name: leaf.grad for name, leaf in leaves.items()}
    grads.update({name: p.grad for name, p in module.named_parameters()})
    module.zero_grad(set_to_none=True)
    return grads


def reference_gradients(fn: Callable, module: nn.Module, args: tuple, grad_args: dict[int, str]) -> dict:
    """The gradients of the float inputs grad_args ({position: name}) and of module's parameters, eval mode."""
    module.zero_grad(set_to_none=True)
    given, leaves = _leaves(args, grad_args)
    with torch.enable_grad(), torch.random.fork_rng(devices=[]):
        _backward(fn(*given))
    return _gradients(module, leaves)


def _short_error(message: str) -> str:
    """"ValueError: ..." out of a raised_error message, at most about 100 characters."""
    error = message.split(" raised ", 1)[-1].split(" (at line")[0]
    return error if len(error) <= 100 else error[:97] + "..."


def compare_gradients(fn: Callable, module: nn.Module, args: tuple, grad_args: dict[int, str], expected: dict,
                      what: str) -> None:
    """Raise wrong_gradients when the gradients of fn (the student's module or its method; module owns the
    parameters) differ from expected (reference_gradients). Its inputs are copies that are not leaves, so
    that an in-place change of an input is reported by the output check, not here."""
    module.zero_grad(set_to_none=True)
    given, leaves = _leaves(args, grad_args)
    for i, name in grad_args.items():
        given[i] = leaves[name].clone()
    with torch.enable_grad(), torch.random.fork_rng(devices=[]):
        try:
            out = call(fn, *given)
        except Mistake as error:
            if error.code != "raised_error":
                raise
            raise Known("wrong_gradients", what=what, detail=tr(
                "torch:raised_with_gradients", "With gradients on, it raised {error}.",
                error=_short_error(str(error)))) from None
        if not isinstance(out, torch.Tensor) or out.grad_fn is None:
            raise Known("wrong_gradients", what=what, detail=tr(
                "torch:no_grad_fn", "The output is not connected to the inputs and the weights: it has no grad_fn."))
        try:
            call(_backward, out)
        except Mistake as error:
            raise Known("wrong_gradients", what=what, detail=tr(
                "torch:backward_failed", "Its backward() raised {error}.", error=_short_error(str(error)))) from None
    mine = _gradients(module, leaves)
    for name, grad in expected.items():
        if grad is None:
            continue
        got = mine.get(name)
        got = torch.zeros_like(grad) if got is None else got.detach()
        scale = float(grad.abs().max()) + 1e-12
        if got.shape != grad.shape or not torch.allclose(got.double(), grad.double(), rtol=1e-5, atol=1e-7 * scale):
            detail = (tr("torch:gradient_differs", "The gradient of {name} differs from the reference's.", name=name)
                      if name in leaves else tr("torch:parameter_gradient_differs", "The gradient of the parameter "
                                                "{name} differs from the reference's.", name=name))
            raise Known("wrong_gradients", what=what, detail=detail)
