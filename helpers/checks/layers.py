"""The check of notebook 05's EncoderLayer.forward, post-norm and pre-norm, with the reference's attention,
feed-forward and LayerNorm modules inside the student's layer, and what it shares with the check of
DecoderLayer.forward (decoder_layer.py).

Each check compares, with the reference's weights: the output in eval mode (then the known wrong forwards of
wrong_encoder_outputs / wrong_decoder_outputs and the behaviour probes: padding or future leaks), the gradients
of x (and memory) and of the parameters, and the output in training mode with the reference's random numbers
(dropout P_TRAIN; wrong_training_outputs gives what missing, misplaced and hard-coded dropouts produce)."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import torch
from torch import nn

from ..i18n import tr
from ..masking import padding_mask
from ..transformer import EncoderLayer
from .harness import (Known, Mistake, call, exercise, expect_finite, expect_shape, first_difference, graded,
                      match_known, same)
from .torch_compare import D_FF, D_MODEL, DROPOUT_P_MISTAKE, HEADS, P_TRAIN, TORCH_MISTAKES, _as_class, _fit, _np, \
    _randomise, _setup_mistakes, _use_reference_parts, compare_gradients, reference_gradients, reference_output, \
    same_in_eval_mode, seeded_outputs, student_output

TRAIN_SEED = 17

# ---------------------------------------------------------------------- encoder and decoder layers
LAYER_PARTS = ("self_attn", "cross_attn", "ff", "norm1", "norm2", "norm3")  # not this exercise's: the reference's


def _layer_setup_mistakes(cls_name: str, exercise_name: str) -> dict[str, str]:
    return {**TORCH_MISTAKES, **DROPOUT_P_MISTAKE, **_setup_mistakes(cls_name, exercise_name),
            "norm_first_not_stored": f"{cls_name}(..., norm_first={{norm_first}}) must store "
                                     "self.norm_first = norm_first."}


def _build_pair(student_cls: type, reference_cls: type, norm_first: bool, seed: int):
    """The reference layer (seeded, float64, eval) and the student's with the same weights; the student's layer
    gets copies of the reference's attention, feed-forward and LayerNorm modules, so that only its forward
    is checked."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        student = call(student_cls, D_MODEL, HEADS, D_FF, dropout=P_TRAIN, norm_first=norm_first)
        reference = reference_cls(D_MODEL, HEADS, D_FF, dropout=P_TRAIN, norm_first=norm_first)
    _randomise(reference, seed)
    reference.double().eval()
    _fit(student, reference)
    _use_reference_parts(student, reference, LAYER_PARTS)
    student.double().eval()
    if getattr(student, "norm_first", norm_first) != norm_first:
        raise Known("norm_first_not_stored", norm_first=norm_first)
    return student, reference


def _match_layer(out: np.ndarray, wrong_outputs: dict[Any, np.ndarray], what: str) -> None:
    """Raise the known mistake whose output out equals; a Known without {what} gets it."""
    for key, wrong in wrong_outputs.items():
        if same(out, wrong):
            if isinstance(key, Known):
                raise Known(key.code, **{"what": what, **key.fields})
            raise Known(key)


def _sublayers(layer: nn.Module, x: torch.Tensor, sublayers: list[Callable], drops: list[Callable],
               on_sum: bool = False) -> torch.Tensor:
    """The layer's forward (the reference's norms, post- or pre-norm) with the given dropouts after each sub-layer;
    on_sum: the dropout acts on the residual sum instead of the sub-layer's output."""
    norms = [getattr(layer, f"norm{i + 1}") for i in range(len(sublayers))]
    for f, norm, drop in zip(sublayers, norms, drops):
        y = f(norm(x)) if layer.norm_first else f(x)
        x = drop(x + y) if on_sum else x + drop(y)
        if not layer.norm_first:
            x = norm(x)
    return x


def wrong_training_outputs(layer: nn.Module, x: torch.Tensor, sublayers: list[Callable], what: str,
                           seed: int) -> dict[Any, np.ndarray]:
    """What the missing, misplaced and hard-coded dropouts give in training mode, with the random numbers of seed."""
    names = [f"dropout{i + 1}" for i in range(len(sublayers))]
    drops = [getattr(layer, name) for name in names]
    fixed = [nn.Dropout(0.1) for _ in drops]
    identity = nn.Identity()
    make: dict[Any, Callable[[], torch.Tensor]] = {
        Known("no_dropout", what=what, names=", ".join(names)): lambda: _sublayers(layer, x, sublayers,
                                                                                   [identity] * len(drops)),
        Known("dropout_on_residual_sum", what=what): lambda: _sublayers(layer, x, sublayers, drops, on_sum=True),
        Known("dropout_p_hardcoded", what=what, p=drops[0].p): lambda: _sublayers(layer, x, sublayers, fixed),
    }
    for i, name in enumerate(names):
        some = [identity if k == i else drop for k, drop in enumerate(drops)]
        make[Known("no_dropout", what=what, names=name)] = lambda some=some: _sublayers(layer, x, sublayers, some)
    return seeded_outputs(make, seed)


def _compare_in_training(student: nn.Module, reference: nn.Module, args: tuple, names: tuple[str, ...], what: str,
                         sublayers: list[Callable]) -> None:
    """The student's layer and the reference in training mode, with the same random numbers, must agree."""
    student.train()
    reference.train()
    try:
        out = student_output(student, args, names, what, seed=TRAIN_SEED)
        expected = reference_output(reference, args, seed=TRAIN_SEED)
        if same(out, expected):
            return
        match_known(out, wrong_training_outputs(reference, args[0], sublayers, what, TRAIN_SEED))
        raise Mistake(tr("layers:train_differs", "in training mode (dropout={p}, the reference's random numbers) "
                         "{what} differs from the reference: {difference}. Apply each of {names} once, to its "
                         "sub-layer's output, before the residual addition.", p=P_TRAIN, what=what,
                         difference=first_difference(out, expected),
                         names=", ".join(f"dropout{i + 1}" for i in range(len(sublayers)))))
    finally:
        student.eval()
        reference.eval()


_DROPOUT_ON_SUM = ("{what}: in training mode your dropout acts on the residual sum: apply it to the sub-layer's "
                   "output only, before adding the sub-layer's input, x + dropout(Sublayer(x)).")
_MASK_INVERTED = ("{what}: {which} is inverted: True means MAY attend (a real token, an earlier position), False "
                  "blocked. Pass the mask as it is given, without negating it.")
_MISSING_NORM = ("in the pre-norm branch a sub-layer reads x without {norm}: each sub-layer reads its normalised "
                 "input, x + Sublayer({norm}(x)).")
_NO_DROPOUT = ("{what}: in training mode your output is the one without {names}: apply dropout to each "
               "sub-layer's output before the residual addition.")


# ---------------------------------------------------------------------- encoder layer
ENCODER_MISTAKES = {
    # post-norm (norm_first=False)
    "no_residual_attention": "missing residual around self-attention: add the sub-layer's input x to its (dropped-out) "
                             "output, x + Sublayer(x) (and, in post-norm, normalise that sum with norm1).",
    "no_residual_ff": "missing residual around the feed-forward: add the sub-layer's input to its (dropped-out) "
                      "output, x + Sublayer(x) (and, in post-norm, normalise that sum with norm2).",
    "sublayers_out_of_order": "the sub-layers are in the wrong order: self-attention first, then the feed-forward.",
    "same_norm_twice": "{norm} serves both sub-layers: each has its own LayerNorm, with its own gain and bias: norm1 "
                       "for self-attention, norm2 for the feed-forward.",
    "mask_inverted": _MASK_INVERTED,
    "no_residuals": "no residual connections at all: each sub-layer's output must be added to its input before the "
                    "LayerNorm, LayerNorm(x + Sublayer(x)).",
    "pre_norm_instead_of_post": "you wrote pre-norm (the norm before the sub-layer), but norm_first=False asks for the "
                                "paper's post-norm: the norm is applied to the SUM of the sub-layer's input and "
                                "output.",
    "norm_before_residual": "the norm is applied to the sub-layer's output before the addition; the paper normalises "
                            "the SUM: LayerNorm(x + Sublayer(x)).",
    "norms_swapped": "norm1 and norm2 are swapped: norm1 belongs to the self-attention sub-layer, norm2 to the "
                     "feed-forward.",
    "no_feed_forward": "the feed-forward sub-layer is missing: after self-attention comes the feed-forward network "
                       "self.ff, with its own residual, dropout2 and norm2.",
    "no_src_mask": "src_mask is not passed to self-attention, so real tokens attend to padding: give it to the "
                   "attention as its mask.",
    # pre-norm (norm_first=True)
    "post_norm_instead_of_pre": "you wrote post-norm, but norm_first=True asks for pre-norm: normalise each "
                                "sub-layer's INPUT, and add the sub-layer's output to the un-normalised x.",
    "residual_from_normed": "in pre-norm the residual adds the input x itself, not its normalised copy.",
    "no_residuals_pre_norm": "missing residual connections in the pre-norm branch: each sub-layer's (dropped-out) "
                             "output is added to x.",
    "no_src_mask_pre_norm": "src_mask is not passed to self-attention in the pre-norm branch, so real tokens attend to "
                            "padding.",
    "norms_swapped_pre_norm": "norm1 and norm2 are swapped in the pre-norm branch: norm1 goes before self-attention, "
                              "norm2 before the feed-forward.",
    "missing_norm_pre_norm": _MISSING_NORM,
    "extra_final_norm": "your pre-norm layer normalises its output with {norm}: in pre-norm the layer returns the "
                        "residual sum itself; the last LayerNorm belongs to the stack, after its last layer (the "
                        "Transformer's encoder.norm).",
    # found by behaviour
    "returns_input": "{what} returns its input unchanged: apply the two sub-layers to x.",
    "padding_leak": "{what}: changing the PADDED tokens changes the output of the real ones, so real tokens attend "
                    "to padding: self-attention needs src_mask, as it is given (True = may attend).",
    "no_dropout": _NO_DROPOUT,
    "dropout_on_residual_sum": _DROPOUT_ON_SUM,
    **_layer_setup_mistakes("EncoderLayer", "encoder_layer"),
}


def wrong_encoder_outputs(layer: EncoderLayer, x: torch.Tensor, mask: torch.Tensor | None) -> dict[Any, np.ndarray]:
    """The outputs of the common wrong forward passes of an EncoderLayer (eval mode): code (or Known) -> output.

    The post-norm mistakes for a layer with norm_first=False, the pre-norm ones for norm_first=True.
    """
    n1, n2, ff = layer.norm1, layer.norm2, layer.ff

    def attn(q: torch.Tensor, m: torch.Tensor | None = mask) -> torch.Tensor:
        return layer.self_attn(q, q, q, m)

    inverted = None if mask is None else ~mask
    which = tr("encoder_layer:src_mask", "src_mask")
    with torch.no_grad():
        if not layer.norm_first:
            wrong = {
                "no_residual_attention": n2(n1(attn(x)) + ff(n1(attn(x)))),
                "no_residual_ff": n2(ff(n1(x + attn(x)))),
                "no_residuals": n2(ff(n1(attn(x)))),
                "pre_norm_instead_of_post": (lambda h: h + ff(n2(h)))(x + attn(n1(x))),
                "norm_before_residual": (lambda h: h + n2(ff(h)))(x + n1(attn(x))),
                "norms_swapped": (lambda h: n1(h + ff(h)))(n2(x + attn(x))),
                "no_feed_forward": n1(x + attn(x)),
                "no_src_mask": (lambda h: n2(h + ff(h)))(n1(x + attn(x, None))),
                "sublayers_out_of_order": (lambda h: n2(h + attn(h)))(n1(x + ff(x))),
                Known("same_norm_twice", norm="norm1"): (lambda h: n1(h + ff(h)))(n1(x + attn(x))),
                Known("same_norm_twice", norm="norm2"): (lambda h: n2(h + ff(h)))(n2(x + attn(x))),
                Known("mask_inverted", which=which): (lambda h: n2(h + ff(h)))(n1(x + attn(x, inverted))),
            }
        else:
            wrong = {
                "post_norm_instead_of_pre": (lambda h: n2(h + ff(h)))(n1(x + attn(x))),
                "residual_from_normed": (lambda h: (lambda g: g + ff(g))(n2(h)))(n1(x) + attn(n1(x))),
                "no_residuals_pre_norm": ff(n2(attn(n1(x)))),
                "no_src_mask_pre_norm": (lambda h: h + ff(n2(h)))(x + attn(n1(x), None)),
                "norms_swapped_pre_norm": (lambda h: h + ff(n1(h)))(x + attn(n2(x))),
                "no_residual_attention": (lambda h: h + ff(n2(h)))(attn(n1(x))),
                "no_residual_ff": ff(n2(x + attn(n1(x)))),
                "sublayers_out_of_order": (lambda h: h + attn(n2(h)))(x + ff(n1(x))),
                Known("same_norm_twice", norm="norm1"): (lambda h: h + ff(n1(h)))(x + attn(n1(x))),
                Known("same_norm_twice", norm="norm2"): (lambda h: h + ff(n2(h)))(x + attn(n2(x))),
                Known("missing_norm_pre_norm", norm="norm1"): (lambda h: h + ff(n2(h)))(x + attn(x)),
                Known("missing_norm_pre_norm", norm="norm2"): (lambda h: h + ff(h))(x + attn(n1(x))),
                Known("extra_final_norm", norm="norm2"): n2((lambda h: h + ff(n2(h)))(x + attn(n1(x)))),
                Known("extra_final_norm", norm="norm1"): n1((lambda h: h + ff(n2(h)))(x + attn(n1(x)))),
                Known("mask_inverted", which=which): (lambda h: h + ff(n2(h)))(x + attn(n1(x), inverted)),
            }
    return {key: _np(out) for key, out in wrong.items()}


@exercise("encoder_layer", notebook="05_transformer", defines="EncoderLayer",
          reference="helpers.transformer.EncoderLayer",
          success="correct! EncoderLayer.forward matches the reference, post-norm and pre-norm.",
          mistakes=ENCODER_MISTAKES,
          off_limits=("helpers.transformer.EncoderLayer", "torch.nn.TransformerEncoderLayer"))
def check_encoder_layer(EncoderLayerClass: Any) -> str:
    """Check the forward pass of a student's EncoderLayer class against helpers.EncoderLayer: the output in eval mode,
    its gradients, and the output in training mode with the reference's random numbers, post-norm and pre-norm."""
    cls = _as_class(EncoderLayerClass)
    gen = torch.Generator().manual_seed(5)
    x = torch.randn(2, 6, D_MODEL, generator=gen, dtype=torch.float64)
    x[0, 2] *= 40.0  # one position of large entries
    tokens = torch.tensor([[5, 6, 7, 8, 9, 4], [3, 4, 5, 6, 0, 0]])
    for x, mask, seed in graded([(x, padding_mask(tokens, 0), 11)], _drawn_encoder_case):  # mask: pads at the end
        _check_encoder_case(cls, x, mask, seed)
    return ""


def _drawn_encoder_case(rng: np.random.Generator) -> tuple[torch.Tensor, torch.Tensor, int]:
    """(x, src_mask, weight seed) of drawn sizes and seeds (when grading); the second sentence ends in two pads."""
    gen = torch.Generator().manual_seed(int(rng.integers(2 ** 31)))
    batch, length = int(rng.integers(2, 4)), int(rng.integers(4, 10))
    tokens = torch.randint(3, 9, (batch, length), generator=gen)
    tokens[1, -2:] = 0
    x = torch.randn(batch, length, D_MODEL, generator=gen, dtype=torch.float64)
    return x, padding_mask(tokens, 0), int(rng.integers(2 ** 31))


def _check_encoder_case(cls: type, x: torch.Tensor, mask: torch.Tensor, seed: int) -> None:
    args, names = (x, mask), ("x", "src_mask")
    for norm_first in (False, True):
        name = "pre-norm" if norm_first else "post-norm"
        student, reference = _build_pair(cls, EncoderLayer, norm_first, seed=seed + norm_first)
        what = f"EncoderLayer(norm_first={norm_first}).forward(x, src_mask)"
        out = student_output(student, args, names, what)
        expect_shape(out, tuple(x.shape), what,
                     tr("encoder_layer:shape_hint", "The layer keeps the shape (batch, L_src, d_model)."))
        expect_finite(out, what)
        expected = reference_output(reference, args)
        if not same(out, expected):
            same_in_eval_mode(student, args, names, what, out)
            if same(out, _np(x)):
                raise Known("returns_input", what=what)
            _match_layer(out, wrong_encoder_outputs(reference, x, mask), what)
            _padding_leak(student, x, mask, what)
            raise Mistake(tr("encoder_layer:differs", "{what} ({name}) differs from the reference: {difference}.",
                             what=what, name=name, difference=first_difference(out, expected)))
        compare_gradients(student, student, args, {0: "x"}, reference_gradients(reference, reference, args, {0: "x"}),
                          what)
        _compare_in_training(student, reference, args, names, what,
                             [lambda h, r=reference: r.self_attn(h, h, h, mask), reference.ff])


def _padding_leak(layer: nn.Module, x: torch.Tensor, mask: torch.Tensor, what: str) -> None:
    """Changing a padded position must not change the outputs of the real positions."""
    changed = x.clone()
    changed[1, -2:] += 3.0
    a = student_output(layer, (x, mask), ("x", "src_mask"), what)
    b = student_output(layer, (changed, mask), ("x", "src_mask"), what)
    if not np.allclose(a[1, :-2], b[1, :-2], rtol=0, atol=1e-9):
        raise Known("padding_leak", what=what)


__all__ = ["ENCODER_MISTAKES", "check_encoder_layer", "wrong_encoder_outputs", "wrong_training_outputs"]
