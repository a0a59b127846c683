"""The check of notebook 05's LayerNorm (mean and biased variance over the last axis, eps inside the square root,
then the gain and the bias), and how every check of a module of notebook 05 compares it with the reference's:
compare_output (eval mode, gradients) and compare_in_training (the same random numbers)."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import torch
from torch import nn

from ..i18n import tr
from ..transformer import LayerNorm
from .harness import Known, Mistake, exercise, expect_finite, expect_shape, first_difference, graded, match_known, \
    same
from .torch_compare import TORCH_MISTAKES, _as_class, _np, _setup_mistakes, built_pair, compare_gradients, \
    reference_gradients, reference_output, same_in_eval_mode, student_output

LN_D = 8


LAYER_NORM_MISTAKES = {
    "unbiased_variance": "you divide the sum of squared deviations by d_model - 1 (the unbiased variance, the default "
                         "of Tensor.std and Tensor.var). {also} LayerNorm uses the biased variance, the MEAN of the "
                         "squared deviations (divided by d_model), as nn.LayerNorm does. The Annotated Transformer "
                         "shipped this bug.",
    "eps_outside_sqrt": "{added} is added to the standard deviation; eps belongs inside the square root, added to "
                        "the variance (as nn.LayerNorm does): for a nearly constant vector the two differ a lot.",
    "no_eps": "there is no eps: a vector whose features are all equal has variance 0 and you divide by 0. Add eps to "
              "the variance inside the square root.",
    "divides_by_variance": "you divide by the variance; divide by the standard deviation, the square root of "
                           "(variance + eps).",
    "wrong_axis": "you normalised over {over}; LayerNorm normalises each position on its own, over its d_model "
                  "features: the LAST axis, keeping it for broadcasting.",
    "no_gain_bias": "{missing} After normalising, multiply by the learned gain self.weight and add the learned bias "
                    "self.bias (one of each per feature).",
    "not_centred": "the numerator is x itself: LayerNorm subtracts the mean before dividing, (x - mean) / "
                   "sqrt(variance + eps).",
    "no_keepdim": "the mean and the variance lose their axis (no keepdim=True), so they do not broadcast against x "
                  "as one number per position: reduce the last axis with keepdim=True, which gives them the shape "
                  "(..., 1).",
    "eps_hardcoded": "LayerNorm(d_model, eps=0.01) gives the output of eps=1e-5: use the eps stored in __init__, "
                     "self.eps.",
    "gain_bias_swapped": "the gain and the bias are exchanged: multiply the normalised vector by the gain "
                         "self.weight, then add the bias self.bias.",
    "rms_norm": "you wrote RMSNorm: x divided by the root of the mean of x squared. LayerNorm first subtracts the "
                "mean, then divides by the standard deviation, sqrt(variance + eps), then applies the gain and the "
                "bias.",
    **TORCH_MISTAKES,
    **_setup_mistakes("LayerNorm", "layer_norm", "keep the given __init__, whose parameters are named weight and "
                                                 "bias as nn.LayerNorm's"),
}


def compare_in_training(student: nn.Module, reference: nn.Module, args: tuple, names: tuple[str, ...], what: str,
                        seed: int, wrong: Callable[[], dict], differs: Callable[[str], str]) -> None:
    """The student's module and the reference in training mode, with the random numbers of seed, must agree; else
    the known mistake of wrong() it matches, else the Mistake differs(first difference)."""
    student.train()
    reference.train()
    try:
        out = student_output(student, args, names, what, seed=seed)
        expected = reference_output(reference, args, seed=seed)
        if not same(out, expected):
            match_known(out, wrong())
            raise Mistake(differs(first_difference(out, expected)))
    finally:
        student.eval()
        reference.eval()


def compare_output(fn: Callable, reference: Callable, args: tuple, names: tuple[str, ...], what: str, shape: tuple,
                   hint: str, known: Callable[[np.ndarray], None], *, differs: Callable[[str], str] | None = None,
                   grads: dict[int, str] | None = None, before: Callable[[np.ndarray], None] = lambda out: None,
                   finite_first: bool = True) -> None:
    """The student's fn(*args) against reference(*args) in eval mode: before(out), the shape, finite values (first
    or last), the reference's numbers; else no dropout in eval mode, then known(out) raises the mistake it
    recognises, else the Mistake differs(first difference). Then the gradients of grads, when given (fn a module)."""
    out = student_output(fn, args, names, what)
    before(out)
    expect_shape(out, shape, what, hint)
    if finite_first:
        expect_finite(out, what)
    expected = reference_output(reference, args)
    if not same(out, expected):
        same_in_eval_mode(fn, args, names, what, out)
        known(out)
        expect_finite(out, what)
        difference = first_difference(out, expected)
        raise Mistake(differs(difference) if differs else tr("harness:differs", "{what} differs from the reference: "
                                                             "{difference}.", what=what, difference=difference))
    if grads is not None:
        compare_gradients(fn, fn, args, grads, reference_gradients(reference, reference, args, grads), what)


def _layer_norm_input() -> torch.Tensor:
    """(2, 4, LN_D) float64: badly scaled rows, one almost constant (where eps matters), one constant (variance 0),
    one of large entries far from 0 and one that mixes +1000 and -1000 with small entries."""
    gen = torch.Generator().manual_seed(3)
    x = 2.0 * torch.randn(2, 4, LN_D, generator=gen, dtype=torch.float64) + 0.5
    x[0, 1] = 0.25 + 1e-3 * x[0, 1]
    x[1, 2] = 0.7
    x[0, 3] = 3e4 + 500.0 * x[0, 3]
    x[1, 0, :2] = torch.tensor([1000.0, -1000.0], dtype=torch.float64)
    return x


def _normalise(x: torch.Tensor, dims: tuple[int, ...], eps: float, *, unbiased: bool = False,
               eps_inside: bool = True, by_variance: bool = False) -> torch.Tensor:
    """(x - mean) / sqrt(var + eps) over dims, or one of its wrong variants."""
    mean = x.mean(dim=dims, keepdim=True)
    var = x.var(dim=dims, correction=1 if unbiased else 0, keepdim=True)
    if by_variance:
        return (x - mean) / (var + eps)
    return (x - mean) / (torch.sqrt(var + eps) if eps_inside else torch.sqrt(var) + eps)


def wrong_layer_norms(norm: LayerNorm, x: torch.Tensor) -> dict[Any, np.ndarray]:
    """What the common wrong LayerNorm forwards give for x: mistake code (or Known with fields) -> output."""
    w, b, eps, last = norm.weight, norm.bias, norm.eps, (x.dim() - 1,)

    def affine(h: torch.Tensor) -> np.ndarray:
        return _np(w * h + b)

    with torch.no_grad():
        hat = _normalise(x, last, eps)
        wrong: dict[Any, np.ndarray] = {} if eps == 1e-5 else {"eps_hardcoded": affine(_normalise(x, last, 1e-5))}
        wrong.update({
            Known("unbiased_variance", also=""): affine(_normalise(x, last, eps, unbiased=True)),
            Known("unbiased_variance", also=tr("layer_norm:at_formula", "You also add eps to that "
                                               "standard deviation instead of to the variance under the square "
                                               "root (the Annotated Transformer's exact formula).")):
                affine(_normalise(x, last, eps, unbiased=True, eps_inside=False)),
            Known("eps_outside_sqrt", added="eps"): affine(_normalise(x, last, eps, eps_inside=False)),
            Known("eps_outside_sqrt", added="sqrt(eps)"): affine(_normalise(x, last, eps ** 0.5, eps_inside=False)),
            "no_eps": affine(_normalise(x, last, 0.0)),
            "divides_by_variance": affine(_normalise(x, last, eps, by_variance=True)),
            Known("no_gain_bias", missing=tr("layer_norm:no_gain_no_bias", "The gain (self.weight) and the bias "
                                             "(self.bias) are missing from the output.")): _np(hat),
            Known("no_gain_bias", missing=tr("layer_norm:no_bias", "The bias (self.bias) is missing from the "
                                             "output.")): _np(w * hat),
            Known("no_gain_bias", missing=tr("layer_norm:no_gain", "The gain (self.weight) is missing from the "
                                             "output.")): _np(hat + b),
            "not_centred": affine(x / torch.sqrt(x.var(dim=last, correction=0, keepdim=True) + eps)),
            "gain_bias_swapped": _np(b * hat + w),
        })
        rms = x / torch.sqrt((x ** 2).mean(dim=-1, keepdim=True) + eps)
        for variant in (w * rms + b, w * rms, rms):
            wrong[Known("rms_norm")] = _np(variant)
        for dims, over in (((0,), tr("layer_norm:over_batch", "the batch axis (0)")),
                           ((1,), tr("layer_norm:over_sequence", "the sequence axis (1)")),
                           ((x.dim() - 2, x.dim() - 1), tr("layer_norm:over_last_two", "the last two axes")),
                           (tuple(range(x.dim())), tr("layer_norm:over_whole", "the whole tensor"))):
            wrong[Known("wrong_axis", over=over)] = affine(_normalise(x, dims, eps))
    return wrong


def wrong_without_keepdim(norm: LayerNorm, x: torch.Tensor) -> dict[Any, np.ndarray]:
    """For a square x (d_model, d_model), where a mean and a variance of shape (d_model,) still broadcast (along the
    wrong axis): what a LayerNorm without keepdim=True gives, its variance from the broadcast deviations or not."""
    w, b, eps = norm.weight, norm.bias, norm.eps
    with torch.no_grad():
        mean = x.mean(dim=-1)
        variants = (((x - mean) ** 2).mean(dim=-1), x.var(dim=-1, correction=0))
        return {Known("no_keepdim"): _np(w * (x - mean) / torch.sqrt(var + eps) + b) for var in variants}


def _check_keepdim(student: nn.Module, reference: LayerNorm, error: Mistake) -> None:
    """After a crash on (batch, L, d_model): a student whose statistics lost their axis runs on a square input; name
    the mistake when the output is what that gives, else report the crash itself."""
    if error.code != "raised_error" or reference.weight.shape[0] < 2:
        raise error
    d_model = reference.weight.shape[0]
    square = 2.0 * torch.randn(d_model, d_model, generator=torch.Generator().manual_seed(4), dtype=torch.float64) + 0.5
    try:
        out = student_output(student, (square,), ("x",), "LayerNorm")
    except Mistake:
        raise error from None
    for key, wrong in wrong_without_keepdim(reference, square).items():
        if out.shape == wrong.shape and same(out, wrong):
            raise key from None
    raise error


def _drawn_case(rng: np.random.Generator) -> tuple[int, torch.Tensor, float, int]:
    """(d_model, x, eps, weight seed) of drawn sizes and seeds (when grading)."""
    d_model = int(rng.integers(3, 24))
    gen = torch.Generator().manual_seed(int(rng.integers(2 ** 31)))
    x = 3.0 * torch.randn(int(rng.integers(1, 4)), int(rng.integers(1, 6)), d_model, generator=gen,
                          dtype=torch.float64) + 1.0
    return d_model, x, 1e-5, int(rng.integers(2 ** 31))


@exercise("layer_norm", notebook="05_transformer", points=2, defines="LayerNorm",
          reference="helpers.transformer.LayerNorm",
          success="correct! The mean and the biased variance over the last axis, eps inside the square root, then "
                  "the gain and the bias: the same numbers as nn.LayerNorm.",
          mistakes=LAYER_NORM_MISTAKES,
          off_limits=("helpers.transformer.LayerNorm", "torch.nn.LayerNorm", "torch.nn.functional.layer_norm",
                      "torch.layer_norm", "torch.ops.aten.*layer_norm*", "torch.ops.aten.*group_norm*",
                      "torch.ops.aten.*batch_norm*", "torch.ops.aten.*instance_norm*"))
def check_layer_norm(LayerNormClass: Any) -> str:
    """Check a student's LayerNorm class against nn.LayerNorm (through helpers.LayerNorm, equal to it)."""
    cls = _as_class(LayerNormClass)
    cases = graded([(LN_D, _layer_norm_input(), 1e-5, 8), (LN_D, _layer_norm_input(), 1e-2, 8)], _drawn_case)
    for d_model, x, eps, seed in cases:
        student, reference = built_pair(cls, LayerNorm, seed, d_model, **({} if eps == 1e-5 else {"eps": eps}))
        what = tr("layer_norm:what", "{call}(x) with x of shape {shape}",
                  call=f"LayerNorm({d_model}{'' if eps == 1e-5 else f', eps={eps}'})", shape=tuple(x.shape))
        try:
            compare_output(student, reference, (x,), ("x",), what, tuple(x.shape),
                           tr("layer_norm:shape_hint", "LayerNorm keeps the shape of its input."),
                           lambda out: match_known(out, wrong_layer_norms(reference, x)), grads={0: "x"},
                           finite_first=False, differs=lambda difference: tr(
                               "layer_norm:differs", "{what} differs from nn.LayerNorm: {difference}.", what=what,
                               difference=difference))
        except Mistake as error:
            _check_keepdim(student, reference, error)
    return ""
