"""The check of notebook 05's EncoderLayer.forward, post-norm and pre-norm, with the reference's attention,
feed-forward and LayerNorm modules inside the student's layer, and what it shares with DecoderLayer's check
(decoder_layer.py): the comparison in eval mode, of the gradients and in training mode (_compare_layer)."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import torch
from torch import nn

from ..i18n import tr
from ..masking import padding_mask
from ..transformer import EncoderLayer
from .harness import Known, exercise, graded, same
from .layer_norm import compare_in_training, compare_output
from .torch_compare import D_FF, D_MODEL, DROPOUT_P_MISTAKE, HEADS, P_TRAIN, TORCH_MISTAKES, _as_class, _np, \
    _setup_mistakes, _use_reference_parts, built_pair, seeded_outputs, student_output

TRAIN_SEED = 17
LAYER_PARTS = ("self_attn", "cross_attn", "ff", "norm1", "norm2", "norm3")  # not this exercise's: the reference's


def _layer_setup_mistakes(cls_name: str, exercise_name: str) -> dict[str, str]:
    return {**TORCH_MISTAKES, **DROPOUT_P_MISTAKE, **_setup_mistakes(cls_name, exercise_name),
            "norm_first_not_stored": f"{cls_name}(..., norm_first={{norm_first}}) must store "
                                     "self.norm_first = norm_first."}


def _build_pair(student_cls: type, reference_cls: type, norm_first: bool, seed: int):
    """The reference layer (seeded, float64, eval) and the student's with the same weights; the student's layer
    gets copies of the reference's attention, feed-forward and LayerNorm modules, so that only its forward
    is checked."""
    student, reference = built_pair(student_cls, reference_cls, seed, D_MODEL, HEADS, D_FF, dropout=P_TRAIN,
                                    norm_first=norm_first)
    _use_reference_parts(student, reference, LAYER_PARTS)
    if getattr(student, "norm_first", norm_first) != norm_first:
        raise Known("norm_first_not_stored", norm_first=norm_first)
    return student, reference


def _stack(x: torch.Tensor, subs: tuple, norms: tuple, post: bool, *, residual: tuple = (True, True, True),
           from_normed: bool = False, norm_before_residual: bool = False, drops: tuple | None = None,
           on_sum: bool = False, after_norm: bool = False) -> torch.Tensor:
    """x through the sub-layers subs, each with its norm, post- or pre-norm, with the given bugs: no residual around
    some, the residual from the normalised input, the norm on the sub-layer's output before the residual; drops: the
    dropout after each sub-layer (on_sum: on the residual sum; after_norm: in post-norm, on the normalised sum)."""
    for f, norm, keep, drop in zip(subs, norms, residual, drops or (nn.Identity(),) * len(subs)):
        h = x if post else norm(x)
        y = norm(f(h)) if norm_before_residual else f(h)
        base = h if from_normed else x
        if after_norm and post:
            x = drop(norm(base + y))
            continue
        x = (drop(base + y) if on_sum else base + drop(y)) if keep else drop(y)
        if post and not norm_before_residual:
            x = norm(x)
    return x


def _second_reads_input(x: torch.Tensor, subs: tuple, norms: tuple, post: bool) -> torch.Tensor:
    """Two sub-layers in a row where the second reads the layer's input x instead of the first one's output."""
    first = _stack(x, subs[:1], norms[:1], post)
    second = subs[1](x if post else norms[1](x))
    return norms[1](first + second) if post else first + second


def wrong_training_outputs(layer: nn.Module, x: torch.Tensor, sublayers: list[Callable], what: str,
                           seed: int) -> dict[Any, np.ndarray]:
    """What the missing, misplaced and hard-coded dropouts give in training mode, with the random numbers of seed."""
    names = [f"dropout{i + 1}" for i in range(len(sublayers))]
    drops = tuple(getattr(layer, name) for name in names)
    norms = tuple(getattr(layer, f"norm{i + 1}") for i in range(len(sublayers)))

    def run(some: tuple, on_sum: bool = False) -> Callable[[], torch.Tensor]:
        return lambda: _stack(x, sublayers, norms, not layer.norm_first, drops=some, on_sum=on_sum)

    make: dict[Any, Callable[[], torch.Tensor]] = {
        Known("no_dropout", what=what, names=", ".join(names)): run((nn.Identity(),) * len(drops)),
        Known("dropout_on_residual_sum", what=what): run(drops, on_sum=True),
        Known("dropout_after_norm", what=what): lambda: _stack(x, sublayers, norms, not layer.norm_first, drops=drops,
                                                               after_norm=True),
        Known("dropout_p_hardcoded", what=what, p=drops[0].p): run(tuple(nn.Dropout(0.1) for _ in drops)),
    }
    for i, name in enumerate(names):
        make[Known("no_dropout", what=what, names=name)] = run(drops[:i] + (nn.Identity(),) + drops[i + 1:])
    return seeded_outputs(make, seed)


def leak_probe(d_model: int, dtype: torch.dtype) -> torch.Tensor:
    """What the leak probes add to the changed positions: a shift AND a ramp across the features. A constant
    shift alone would be removed by a pre-norm layer's LayerNorm before any sub-layer reads it, so a pre-norm
    layer that leaks would go unseen; the ramp changes the normalised vector too."""
    return 3.0 + 3.0 * torch.linspace(-1.0, 1.0, d_model, dtype=dtype)


def _compare_layer(student: nn.Module, reference: nn.Module, args: tuple, names: tuple[str, ...], what: str,
                   hint: str, wrong: Callable[[], dict], leak: tuple, differs: Callable[[str], str],
                   sublayers: list[Callable]) -> None:
    """An encoder or decoder layer against the reference: in eval mode (else the known wrong outputs of wrong(),
    a Known without {what} getting it, then the leak probe (changed, kept, code): x changed at `changed` by
    leak_probe must keep the output at `kept`, whatever the norm placement), the gradients of x (and memory),
    then in training mode with the reference's numbers."""
    def known(out: np.ndarray) -> None:
        for key, wrong_out in wrong().items():
            if same(out, wrong_out):
                raise Known(key.code, **{"what": what, **key.fields}) if isinstance(key, Known) else Known(key)
        changed, kept, code = leak
        x = args[0].clone()
        x[changed] += leak_probe(x.shape[-1], x.dtype)
        if not np.allclose(out[kept], student_output(student, (x, *args[1:]), names, what)[kept], rtol=0, atol=1e-9):
            raise Known(code, what=what)

    compare_output(student, reference, args, names, what, tuple(args[0].shape), hint, known, differs=differs,
                   grads={i: name for i, name in enumerate(names) if name in ("x", "memory")})
    dropouts = ", ".join(f"dropout{i + 1}" for i in range(len(sublayers)))
    compare_in_training(student, reference, args, names, what, TRAIN_SEED,
                        lambda: wrong_training_outputs(reference, args[0], sublayers, what, TRAIN_SEED),
                        lambda difference: tr("layers:train_differs", "in training mode (dropout={p}, the reference's "
                                              "random numbers) {what} differs from the reference: {difference}. Apply "
                                              "each of {names} once, to its sub-layer's output, before the residual "
                                              "addition.", p=P_TRAIN, what=what, difference=difference,
                                              names=dropouts))


_DROPOUT_ON_SUM = ("{what}: in training mode your dropout acts on the residual sum: apply it to the sub-layer's "
                   "output only, before adding the sub-layer's input, x + dropout(Sublayer(x)).")
_DROPOUT_AFTER_NORM = ("{what}: in training mode your dropout acts on the normalised sum: apply it to the "
                       "sub-layer's output, before the residual addition and the norm, "
                       "norm(x + dropout(Sublayer(x))).")
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
    "ff_reads_input": "the feed-forward reads the layer's input x instead of the output of the self-attention "
                      "sub-layer: each sub-layer reads what the one before it returns.",
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
    "dropout_after_norm": _DROPOUT_AFTER_NORM,
    **_layer_setup_mistakes("EncoderLayer", "encoder_layer"),
}


def wrong_encoder_outputs(layer: EncoderLayer, x: torch.Tensor, mask: torch.Tensor | None) -> dict[Any, np.ndarray]:
    """The outputs of the common wrong forward passes of an EncoderLayer (eval mode): code (or Known) -> output.

    The post-norm mistakes for a layer with norm_first=False, the pre-norm ones for norm_first=True.
    """
    n1, n2, ff, identity = layer.norm1, layer.norm2, layer.ff, nn.Identity()

    def attn(m: torch.Tensor | None = mask) -> Callable:
        return lambda h: layer.self_attn(h, h, h, m)

    def run(subs: tuple = (attn(), ff), norms: tuple = (n1, n2), post: bool = not layer.norm_first,
            **bugs: Any) -> Callable[[], torch.Tensor]:
        return lambda: _stack(x, subs, norms, post, **bugs)

    pre = "_pre_norm" if layer.norm_first else ""  # the codes of mistakes made in both branches, told apart
    make: dict[Any, Callable[[], torch.Tensor]] = {
        "no_residual_attention": run(residual=(False, True)),
        "no_residual_ff": run(residual=(True, False)),
        f"no_residuals{pre}": run(residual=(False, False)),
        f"no_src_mask{pre}": run(subs=(attn(None), ff)),
        f"norms_swapped{pre}": run(norms=(n2, n1)),
        "sublayers_out_of_order": run(subs=(ff, attn())),
        Known("sublayers_out_of_order"): run(subs=(ff, attn()), norms=(n2, n1)),  # each norm with its sub-layer
        "ff_reads_input": lambda: _second_reads_input(x, (attn(), ff), (n1, n2), not layer.norm_first),
        Known("same_norm_twice", norm="norm1"): run(norms=(n1, n1)),
        Known("same_norm_twice", norm="norm2"): run(norms=(n2, n2)),
        Known("mask_inverted", which=tr("encoder_layer:src_mask", "src_mask")):
            run(subs=(attn(None if mask is None else ~mask), ff)),
    }
    if not layer.norm_first:
        make.update({"pre_norm_instead_of_post": run(post=False), "no_feed_forward": run(subs=(attn(),)),
                     "norm_before_residual": run(norm_before_residual=True)})
    else:
        make.update({
            "post_norm_instead_of_pre": run(post=True),
            "residual_from_normed": run(from_normed=True),
            Known("missing_norm_pre_norm", norm="norm1"): run(norms=(identity, n2)),
            Known("missing_norm_pre_norm", norm="norm2"): run(norms=(n1, identity)),
            Known("extra_final_norm", norm="norm2"): lambda: n2(run()()),
            Known("extra_final_norm", norm="norm1"): lambda: n1(run()()),
        })
    return seeded_outputs(make)


@exercise("encoder_layer", notebook="05_transformer", points=3, defines="EncoderLayer",
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
        for norm_first in (False, True):
            name = "pre-norm" if norm_first else "post-norm"
            student, reference = _build_pair(cls, EncoderLayer, norm_first, seed=seed + norm_first)
            what = f"EncoderLayer(norm_first={norm_first}).forward(x, src_mask)"
            _compare_layer(
                student, reference, (x, mask), ("x", "src_mask"), what,
                tr("encoder_layer:shape_hint", "The layer keeps the shape (batch, L_src, d_model)."),
                lambda: {Known("returns_input"): _np(x), **wrong_encoder_outputs(reference, x, mask)},
                ((1, slice(-2, None)), (1, slice(None, -2)), "padding_leak"),  # the padded positions: the last two
                lambda difference: tr("encoder_layer:differs", "{what} ({name}) differs from the reference: "
                                      "{difference}.", what=what, name=name, difference=difference),
                [lambda h, r=reference: r.self_attn(h, h, h, mask), reference.ff])
    return ""


def _drawn_encoder_case(rng: np.random.Generator) -> tuple[torch.Tensor, torch.Tensor, int]:
    """(x, src_mask, weight seed) of drawn sizes and seeds (when grading); the second sentence ends in two pads."""
    gen = torch.Generator().manual_seed(int(rng.integers(2 ** 31)))
    batch, length = int(rng.integers(2, 4)), int(rng.integers(4, 10))
    tokens = torch.randint(3, 9, (batch, length), generator=gen)
    tokens[1, -2:] = 0
    x = torch.randn(batch, length, D_MODEL, generator=gen, dtype=torch.float64)
    return x, padding_mask(tokens, 0), int(rng.integers(2 ** 31))
