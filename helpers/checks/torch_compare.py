"""What every torch check of notebook 05 shares: the student's class built with the reference's (seeded)
weights, the reference's sub-modules put into it, and the comparison of the two modules' outputs,
gradients and inputs (see compare_outputs, compare_gradients, protect_inputs).
"""

from __future__ import annotations

import copy
from typing import Any, Callable

import numpy as np
import torch
from torch import nn

from ..i18n import tr
from .harness import Known, call, to_array

D_MODEL, HEADS, D_FF = 16, 4, 32


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
    if isinstance(obj, nn.Module):
        return type(obj)
    if isinstance(obj, type):
        return obj
    raise Known("not_a_class", kind=type(obj).__name__)


def _randomise(module: nn.Module, seed: int) -> None:
    """Seeded weights everywhere, LayerNorms included (their default 1 and 0 would hide a swapped norm)."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in module.named_parameters():
            if "norm" in name and name.endswith("weight"):
                p.copy_(1.0 + 0.3 * torch.randn(p.shape, generator=gen, dtype=p.dtype))
            else:
                p.copy_(0.3 * torch.randn(p.shape, generator=gen, dtype=p.dtype))


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
