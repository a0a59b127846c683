"""Checks for notebook 05: LayerNorm, PositionwiseFeedForward, EncoderLayer.forward, DecoderLayer.forward
and the whole Transformer (encode, decode, forward and the masks built from token ids).

Every check builds the student's class and the reference from helpers with the same (seeded)
weights, in eval mode and float64, and compares outputs. The parts an exercise does not ask for
are the reference's: the layer checks put the reference LayerNorm and feed-forward into the
student's layer, the Transformer check puts the reference layers into the student's model, so an
unfinished earlier exercise never fails a later check. When the output is wrong, it is compared
with the answers the common mistakes give (the unbiased variance, a missing ReLU, a missing
residual, the norm in the wrong place, the positional encoding left out, ...): each is a code in
the *_MISTAKES dictionaries with its hint, and the wrong_*() functions compute what each produces.
"""

from __future__ import annotations

import copy
import math
from typing import Any, Callable

import numpy as np
import torch
from torch import nn

from ..i18n import tr
from ..masking import causal_mask_torch, decoder_mask, padding_mask
from ..transformer import DecoderLayer, EncoderLayer, LayerNorm, PositionwiseFeedForward, Transformer
from .harness import Known, Mistake, as_numpy, call, exercise, expect_finite, expect_shape, first_difference, \
    generic, match_known, same, to_array

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


# ---------------------------------------------------------------------- layer normalisation
LN_D = 8


def _at_formula() -> str:
    """The {also} of the unbiased_variance hint when eps is also added outside the square root."""
    return tr("layer_norm:at_formula", ", and you add eps to that standard deviation instead of to the variance under "
              "the square root (the Annotated Transformer's exact formula)")


LAYER_NORM_MISTAKES = {
    "unbiased_variance": "you divide the sum of squared deviations by d_model - 1 (the unbiased variance, the default "
                         "of Tensor.std and Tensor.var){also}. LayerNorm uses the biased variance, the MEAN of the "
                         "squared deviations (divided by d_model), as nn.LayerNorm does. The Annotated Transformer "
                         "shipped this bug.",
    "eps_outside_sqrt": "eps is added to the standard deviation; it belongs inside the square root, added to the "
                        "variance (as nn.LayerNorm does): for a nearly constant vector the two differ a lot.",
    "no_eps": "there is no eps: a vector whose features are all equal has variance 0 and you divide by 0. Add eps to "
              "the variance inside the square root.",
    "divides_by_variance": "you divide by the variance; divide by the standard deviation, the square root of "
                           "(variance + eps).",
    "wrong_axis": "you normalised over {over}; LayerNorm normalises each position on its own, over its d_model "
                  "features: the LAST axis, keeping it for broadcasting.",
    "no_gain_bias": "{which} missing from the output: after normalising, multiply by the learned gain self.weight and "
                    "add the learned bias self.bias (one of each per feature).",
    "eps_hardcoded": "LayerNorm(d_model, eps=0.01) gives the output of eps=1e-5: use the eps stored in __init__, "
                     "self.eps.",
    **_setup_mistakes("LayerNorm", "layer_norm", "keep the given __init__, whose parameters are named weight and "
                                                 "bias as nn.LayerNorm's"),
}


def _layer_norm_input() -> torch.Tensor:
    """(2, 4, LN_D) float64: badly scaled rows, one almost constant (where eps matters), one constant (variance 0)."""
    gen = torch.Generator().manual_seed(3)
    x = 2.0 * torch.randn(2, 4, LN_D, generator=gen, dtype=torch.float64) + 0.5
    x[0, 1] = 0.25 + 1e-3 * x[0, 1]
    x[1, 2] = 0.7
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
        wrong: dict[Any, np.ndarray] = {
            Known("unbiased_variance", also=""): affine(_normalise(x, last, eps, unbiased=True)),
            Known("unbiased_variance", also=_at_formula()): affine(_normalise(x, last, eps, unbiased=True,
                                                                              eps_inside=False)),
            "eps_outside_sqrt": affine(_normalise(x, last, eps, eps_inside=False)),
            "no_eps": affine(_normalise(x, last, 0.0)),
            "divides_by_variance": affine(_normalise(x, last, eps, by_variance=True)),
            Known("no_gain_bias", which=tr("layer_norm:no_gain_no_bias",
                                           "the gain (self.weight) and the bias (self.bias) are")): _np(hat),
            Known("no_gain_bias", which=tr("layer_norm:no_bias", "the bias (self.bias) is")): _np(w * hat),
            Known("no_gain_bias", which=tr("layer_norm:no_gain", "the gain (self.weight) is")): _np(hat + b),
        }
        for dims, over in (((0,), tr("layer_norm:over_batch", "the batch axis (0)")),
                           ((1,), tr("layer_norm:over_sequence", "the sequence axis (1)")),
                           (tuple(range(x.dim())), tr("layer_norm:over_whole", "the whole tensor"))):
            wrong[Known("wrong_axis", over=over)] = affine(_normalise(x, dims, eps))
    return wrong


@exercise("layer_norm", notebook="05_transformer", defines="LayerNorm",
          off_limits=("helpers.transformer.LayerNorm", "torch.nn.LayerNorm", "torch.nn.functional.layer_norm",
                      "torch.layer_norm"),
          success="correct! The mean and the biased variance over the last axis, eps inside the square root, then "
                  "the gain and the bias: the same numbers as nn.LayerNorm.",
          mistakes=LAYER_NORM_MISTAKES)
def check_layer_norm(LayerNormClass: Any) -> str:
    """Check a student's LayerNorm class against nn.LayerNorm (through helpers.LayerNorm, equal to it)."""
    cls = _as_class(LayerNormClass)
    x = _layer_norm_input()
    for eps in (1e-5, 1e-2):
        reference = LayerNorm(LN_D, eps=eps)
        _randomise(reference, seed=8)
        reference.double().eval()
        student = call(cls, LN_D) if eps == 1e-5 else call(cls, LN_D, eps=eps)
        _fit(student, reference).double().eval()
        what = tr("layer_norm:what", "{call}(x) with x of shape {shape}",
                  call=f"LayerNorm({LN_D}{'' if eps == 1e-5 else f', eps={eps}'})", shape=tuple(x.shape))
        out = _run(student, x, what=what)
        expect_shape(out, tuple(x.shape), what, tr("layer_norm:shape_hint", "LayerNorm keeps the shape of its input."))
        with torch.no_grad():
            expected = _np(reference(x))
        if same(out, expected):
            continue
        if eps != 1e-5:
            with torch.no_grad():
                default = LayerNorm(LN_D).double()
                default.load_state_dict(reference.state_dict())
                if same(out, _np(default(x))):
                    raise Known("eps_hardcoded")
        match_known(out, wrong_layer_norms(reference, x))
        expect_finite(out, what)
        raise Mistake(tr("layer_norm:differs", "{what} differs from nn.LayerNorm: {difference}.", what=what,
                         difference=first_difference(out, expected)))
    return ""


# ---------------------------------------------------------------------- position-wise feed-forward
FF_D, FF_HIDDEN = 8, 24

FEED_FORWARD_MISTAKES = {
    "no_relu": "the ReLU between the two linear maps is missing: without it the two maps collapse into one linear "
               "map, and the network can only compute a linear function of each position. FFN(x) = "
               "max(0, x W_1 + b_1) W_2 + b_2.",
    "no_bias": "the {which} missing: FFN(x) = max(0, x W_1 + b_1) W_2 + b_2 adds b_1 before the ReLU and b_2 "
               "at the end (an nn.Linear applies its weight and its bias together).",
    "relu_on_output": "a ReLU is applied to the output too: only the hidden layer (d_ff wide) goes through the ReLU; "
                      "the output of the second linear map can be negative.",
    "wrong_activation": "the hidden layer goes through {name}; the paper's feed-forward network uses the ReLU, "
                        "max(0, .).",
    "no_dropout": "in training mode the output does not change when self.dropout is active: apply it to the hidden "
                  "activations, after the ReLU and before the second linear map (as PyTorch's layers do).",
    **_setup_mistakes("PositionwiseFeedForward", "feed_forward"),
}


def wrong_feed_forwards(ff: PositionwiseFeedForward, x: torch.Tensor) -> dict[Any, np.ndarray]:
    """What the common wrong feed-forward passes give for x (eval mode): mistake code (or Known) -> output."""
    l1, l2 = ff.linear1, ff.linear2
    with torch.no_grad():
        hidden = l1(x)
        return {
            "no_relu": _np(l2(hidden)),
            Known("no_bias", which=tr("feed_forward:no_biases", "biases b_1 and b_2 are")):
                _np(torch.relu(x @ l1.weight.T) @ l2.weight.T),
            Known("no_bias", which=tr("feed_forward:no_bias_1", "bias b_1 is")):
                _np(torch.relu(x @ l1.weight.T) @ l2.weight.T + l2.bias),
            Known("no_bias", which=tr("feed_forward:no_bias_2", "bias b_2 is")): _np(torch.relu(hidden) @ l2.weight.T),
            "relu_on_output": _np(torch.relu(l2(torch.relu(hidden)))),
            Known("wrong_activation", name="GELU"): _np(l2(nn.functional.gelu(hidden))),
            Known("wrong_activation", name="tanh"): _np(l2(torch.tanh(hidden))),
            Known("wrong_activation", name=tr("feed_forward:a_sigmoid", "a sigmoid")): _np(l2(torch.sigmoid(hidden))),
        }


@exercise("feed_forward", notebook="05_transformer", defines="PositionwiseFeedForward",
          off_limits=("helpers.transformer.PositionwiseFeedForward",),
          success="correct! Linear, ReLU, (dropout), linear: the same two maps at every position.",
          mistakes=FEED_FORWARD_MISTAKES)
def check_feed_forward(FeedForwardClass: Any) -> str:
    """Check the forward pass of a student's PositionwiseFeedForward class against helpers.PositionwiseFeedForward."""
    cls = _as_class(FeedForwardClass)
    gen = torch.Generator().manual_seed(6)
    x = torch.randn(2, 5, FF_D, generator=gen, dtype=torch.float64)
    with torch.random.fork_rng(devices=[]):
        reference = PositionwiseFeedForward(FF_D, FF_HIDDEN, dropout=0.1)
        student = call(cls, FF_D, FF_HIDDEN, dropout=0.1)
    _randomise(reference, seed=9)
    reference.double().eval()
    student = _fit(student, reference).double().eval()
    what = tr("feed_forward:what", "{call}(x) with x of shape {shape}",
              call=f"PositionwiseFeedForward({FF_D}, {FF_HIDDEN})", shape=tuple(x.shape))
    out = _run(student, x, what=what)
    expect_shape(out, tuple(x.shape), what,
                 tr("feed_forward:shape_hint", "The output has the input's shape (batch, L, d_model)."))
    expect_finite(out, what)
    with torch.no_grad():
        expected = _np(reference(x))
    if not same(out, expected):
        match_known(out, wrong_feed_forwards(reference, x))
        raise Mistake(tr("harness:differs", "{what} differs from the reference: {difference}.", what=what,
                         difference=first_difference(out, expected)))
    for module in student.modules():
        if isinstance(module, nn.Dropout):
            module.p = 0.5
    with torch.random.fork_rng(devices=[]), torch.no_grad():
        torch.manual_seed(0)
        train_out = to_array(call(student.train(), x), what)
    if same(train_out, expected, atol=1e-12):
        raise Known("no_dropout")
    return ""


# ---------------------------------------------------------------------- encoder and decoder layers
LAYER_PARTS = ("self_attn", "cross_attn", "ff", "norm1", "norm2", "norm3")  # not this exercise's: the reference's


def _layer_setup_mistakes(cls_name: str, exercise_name: str) -> dict[str, str]:
    return {**_setup_mistakes(cls_name, exercise_name),
            "norm_first_not_stored": f"{cls_name}(..., norm_first={{norm_first}}) must store "
                                     "self.norm_first = norm_first."}


def _build_pair(student_cls: type, reference_cls: type, norm_first: bool, seed: int):
    """The reference layer (seeded, float64, eval) and the student's with the same weights; the student's layer
    gets copies of the reference's attention, feed-forward and LayerNorm modules, so that only its forward
    is checked."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        student = call(student_cls, D_MODEL, HEADS, D_FF, dropout=0.1, norm_first=norm_first)
        reference = reference_cls(D_MODEL, HEADS, D_FF, dropout=0.1, norm_first=norm_first)
    _randomise(reference, seed)
    reference.double().eval()
    _fit(student, reference)
    _use_reference_parts(student, reference, LAYER_PARTS)
    student.double().eval()
    if getattr(student, "norm_first", norm_first) != norm_first:
        raise Known("norm_first_not_stored", norm_first=norm_first)
    return student, reference


def _match_layer(out: np.ndarray, wrong_outputs: dict[str, np.ndarray]) -> None:
    for code, wrong in wrong_outputs.items():
        if same(out, wrong):
            raise Known(code)


def _dropout_used(cls: type, reference_cls: type, run: Callable[[nn.Module], torch.Tensor], what: str,
                  names: tuple[str, ...]) -> None:
    """In training mode, with only the residual dropouts active, the output must become random."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        layer = call(cls, D_MODEL, HEADS, D_FF, dropout=0.1, norm_first=False)
        _use_reference_parts(layer, reference_cls(D_MODEL, HEADS, D_FF, dropout=0.1), LAYER_PARTS)
        layer.double()
        for module in layer.modules():
            if isinstance(module, nn.Dropout):
                module.p = 0.0
        for name in names:
            getattr(layer, name).p = 0.5
        with torch.no_grad():
            eval_out = to_array(call(run, layer.eval()), what)
            train_out = to_array(call(run, layer.train()), what)
    if same(eval_out, train_out, atol=1e-12):
        raise Known("no_dropout", what=what, names=", ".join(names))


_NO_DROPOUT = ("{what}: in training mode the output does not change when {names} are active: apply dropout to each "
               "sub-layer's output before the residual addition.")


# ---------------------------------------------------------------------- encoder layer
ENCODER_MISTAKES = {
    # post-norm (norm_first=False)
    "no_residual_attention": "missing residual around self-attention: add the sub-layer's input x to its (dropped-out) "
                             "output before norm1, LayerNorm(x + Sublayer(x)).",
    "no_residual_ff": "missing residual around the feed-forward: add the sub-layer's input to its (dropped-out) "
                      "output before norm2.",
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
    # found by behaviour
    "returns_input": "{what} returns its input unchanged: apply the two sub-layers to x.",
    "padding_leak": "{what}: changing the PADDED tokens changes the output of the real ones, so src_mask is not "
                    "applied: pass it to self-attention.",
    "no_dropout": _NO_DROPOUT,
    **_layer_setup_mistakes("EncoderLayer", "encoder_layer"),
}


def wrong_encoder_outputs(layer: EncoderLayer, x: torch.Tensor, mask: torch.Tensor | None) -> dict[str, np.ndarray]:
    """The outputs of the common wrong forward passes of an EncoderLayer (eval mode): code -> output.

    The post-norm mistakes for a layer with norm_first=False, the pre-norm ones for norm_first=True.
    """
    n1, n2, ff = layer.norm1, layer.norm2, layer.ff

    def attn(q: torch.Tensor, m: torch.Tensor | None = mask) -> torch.Tensor:
        return layer.self_attn(q, q, q, m)

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
            }
        else:
            wrong = {
                "post_norm_instead_of_pre": (lambda h: n2(h + ff(h)))(n1(x + attn(x))),
                "residual_from_normed": (lambda h: (lambda g: g + ff(g))(n2(h)))(n1(x) + attn(n1(x))),
                "no_residuals_pre_norm": ff(n2(attn(n1(x)))),
                "no_src_mask_pre_norm": (lambda h: h + ff(n2(h)))(x + attn(n1(x), None)),
                "norms_swapped_pre_norm": (lambda h: h + ff(n1(h)))(x + attn(n2(x))),
            }
    return {code: _np(out) for code, out in wrong.items()}


@exercise("encoder_layer", notebook="05_transformer", defines="EncoderLayer",
          off_limits=("helpers.transformer.EncoderLayer", "torch.nn.TransformerEncoderLayer"),
          success="correct! EncoderLayer.forward matches the reference, post-norm and pre-norm.",
          mistakes=ENCODER_MISTAKES)
def check_encoder_layer(EncoderLayerClass: Any) -> str:
    """Check the forward pass of a student's EncoderLayer class against helpers.EncoderLayer."""
    cls = _as_class(EncoderLayerClass)
    gen = torch.Generator().manual_seed(5)
    x = torch.randn(2, 6, D_MODEL, generator=gen, dtype=torch.float64)
    tokens = torch.tensor([[5, 6, 7, 8, 9, 4], [3, 4, 5, 6, 0, 0]])
    mask = padding_mask(tokens, 0)  # (2, 1, 1, 6): the second sentence ends in two pads
    for norm_first in (False, True):
        name = "pre-norm" if norm_first else "post-norm"
        student, reference = _build_pair(cls, EncoderLayer, norm_first, seed=11 + norm_first)
        what = f"EncoderLayer(norm_first={norm_first}).forward(x, src_mask)"
        out = _run(student, x, mask, what=what)
        expect_shape(out, tuple(x.shape), what,
                     tr("encoder_layer:shape_hint", "The layer keeps the shape (batch, L_src, d_model)."))
        expect_finite(out, what)
        with torch.no_grad():
            expected = _np(reference(x, mask))
        if same(out, expected):
            continue
        if same(out, _np(x)):
            raise Known("returns_input", what=what)
        _match_layer(out, wrong_encoder_outputs(reference, x, mask))
        _padding_leak(student, x, mask, what)
        raise Mistake(tr("encoder_layer:differs", "{what} ({name}) differs from the reference: {difference}.",
                         what=what, name=name, difference=first_difference(out, expected)))
    _dropout_used(cls, EncoderLayer, lambda layer: layer(x, mask), "EncoderLayer", ("dropout1", "dropout2"))
    return ""


def _padding_leak(layer: nn.Module, x: torch.Tensor, mask: torch.Tensor, what: str) -> None:
    """Changing a padded position must not change the outputs of the real positions."""
    changed = x.clone()
    changed[1, -2:] += 3.0
    a = _run(layer, x, mask, what=what)
    b = _run(layer, changed, mask, what=what)
    if not np.allclose(a[1, :-2], b[1, :-2], rtol=0, atol=1e-9):
        raise Known("padding_leak", what=what)


# ---------------------------------------------------------------------- decoder layer
DECODER_MISTAKES = {
    # post-norm (norm_first=False)
    "no_causal_mask": "the causal mask is left out: the masked self-attention must get tgt_mask, or position i sees "
                      "the tokens after it.",
    "kv_from_decoder": "in cross-attention K and V come from the decoder: the queries come from the decoder's stream, "
                       "the keys and values from the encoder output, memory.",
    "q_from_memory": "in cross-attention the queries come from memory: the decoder asks (the queries come from its "
                     "own stream) and the encoder output answers (the keys and values).",
    "no_memory_mask": "memory_mask is not passed to cross-attention, so the decoder attends to the source's padding.",
    "masks_swapped": "the two masks are swapped: tgt_mask goes to the masked self-attention, memory_mask to "
                     "cross-attention.",
    "cross_attn_reads_input": "cross-attention reads the layer's input x instead of the output of the first "
                              "sub-layer.",
    "sublayers_out_of_order": "the sub-layers are in the wrong order: masked self-attention first, then "
                              "cross-attention, then the feed-forward.",
    "no_residual_self_attention": "missing residual around masked self-attention: add the sub-layer's input before "
                                  "norm1.",
    "no_residual_cross_attention": "missing residual around cross-attention: add the sub-layer's input before norm2.",
    "no_residual_ff": "missing residual around the feed-forward: add the sub-layer's input before norm3.",
    "no_residuals": "no residual connections at all: each sub-layer's output is added to its input before the "
                    "LayerNorm.",
    "pre_norm_instead_of_post": "you wrote pre-norm (the norm before each sub-layer), but norm_first=False asks for "
                                "the paper's post-norm: each norm is applied to the SUM of its sub-layer's input and "
                                "output.",
    "norm_before_residual": "the norm is applied to each sub-layer's output before the addition; the paper "
                            "normalises the SUM: LayerNorm(x + Sublayer(x)).",
    "norms_mixed_up": "the norms are mixed up: norm1 follows masked self-attention, norm2 cross-attention, norm3 the "
                      "feed-forward.",
    "no_feed_forward": "the feed-forward sub-layer is missing: the third sub-layer is self.ff, with its residual, "
                       "dropout3 and norm3.",
    # pre-norm (norm_first=True)
    "post_norm_instead_of_pre": "you wrote post-norm, but norm_first=True asks for pre-norm: normalise each "
                                "sub-layer's INPUT, and add its output to the un-normalised x.",
    "no_causal_mask_pre_norm": "the causal mask is left out in the pre-norm branch: the masked self-attention must get "
                               "tgt_mask.",
    "kv_from_decoder_pre_norm": "in cross-attention K and V come from the decoder (pre-norm branch): the keys and "
                                "values are the encoder output, memory, as it is (only the query is normalised).",
    "residual_from_normed": "in pre-norm the residual adds the input x itself, not its normalised copy.",
    "no_residuals_pre_norm": "missing residual connections in the pre-norm branch: each sub-layer's (dropped-out) "
                             "output is added to x.",
    "no_memory_mask_pre_norm": "memory_mask is not passed to cross-attention in the pre-norm branch.",
    "norms_mixed_up_pre_norm": "the norms are mixed up in the pre-norm branch: norm1 before self-attention, norm2 "
                               "before cross-attention, norm3 before the feed-forward.",
    # found by behaviour
    "future_leak": "{what}: changing the LAST target token changes the outputs of earlier positions, so the decoder "
                   "can see the future: pass tgt_mask to the masked self-attention.",
    "no_dropout": _NO_DROPOUT,
    **_layer_setup_mistakes("DecoderLayer", "decoder_layer"),
}


def wrong_decoder_outputs(layer: DecoderLayer, x: torch.Tensor, memory: torch.Tensor, tgt_mask: torch.Tensor,
                          memory_mask: torch.Tensor) -> dict[str, np.ndarray]:
    """The outputs of the common wrong forward passes of a DecoderLayer (eval mode): code -> output.

    The post-norm mistakes for a layer with norm_first=False, the pre-norm ones for norm_first=True.
    Some mistakes (K and V from the decoder) only give an output when L_tgt == L_src: call it so.
    """
    n1, n2, n3, ff = layer.norm1, layer.norm2, layer.norm3, layer.ff

    def sa(q: torch.Tensor, m: torch.Tensor | None = tgt_mask) -> torch.Tensor:
        return layer.self_attn(q, q, q, m)

    def ca(q: torch.Tensor, kv: torch.Tensor = memory, m: torch.Tensor | None = memory_mask) -> torch.Tensor:
        return layer.cross_attn(q, kv, kv, m)

    def post(h1: torch.Tensor, cross: Callable = ca) -> torch.Tensor:  # the correct 2nd and 3rd sub-layers
        h2 = n2(h1 + cross(h1))
        return n3(h2 + ff(h2))

    def pre(h1: torch.Tensor, cross: Callable = ca) -> torch.Tensor:  # the correct pre-norm 2nd and 3rd sub-layers
        h2 = h1 + cross(n2(h1))
        return h2 + ff(n3(h2))

    def last(h2: torch.Tensor) -> torch.Tensor:  # the correct post-norm feed-forward sub-layer
        return n3(h2 + ff(h2))

    post_norm: dict[str, Callable[[], torch.Tensor]] = {
        "no_causal_mask": lambda: post(n1(x + sa(x, None))),
        "kv_from_decoder": lambda: post(n1(x + sa(x)), lambda h: ca(h, h)),
        "q_from_memory": lambda: (lambda h1: last(n2(h1 + layer.cross_attn(memory, h1, h1, memory_mask))))(
            n1(x + sa(x))),
        "no_memory_mask": lambda: post(n1(x + sa(x)), lambda h: ca(h, memory, None)),
        "masks_swapped": lambda: post(n1(x + sa(x, memory_mask)), lambda h: ca(h, memory, tgt_mask)),
        "cross_attn_reads_input": lambda: (lambda h1: last(n2(h1 + ca(x))))(n1(x + sa(x))),
        "sublayers_out_of_order": lambda: (lambda h1: last(n2(h1 + sa(h1))))(n1(x + ca(x))),
        "no_residual_self_attention": lambda: post(n1(sa(x))),
        "no_residual_cross_attention": lambda: last(n2(ca(n1(x + sa(x))))),
        "no_residual_ff": lambda: (lambda h1: n3(ff(n2(h1 + ca(h1)))))(n1(x + sa(x))),
        "no_residuals": lambda: n3(ff(n2(ca(n1(sa(x)))))),
        "pre_norm_instead_of_post": lambda: pre(x + sa(n1(x))),
        "norm_before_residual": lambda: (lambda h1: (lambda h2: h2 + n3(ff(h2)))(h1 + n2(ca(h1))))(x + n1(sa(x))),
        "norms_mixed_up": lambda: (lambda h1: (lambda h2: n1(h2 + ff(h2)))(n3(h1 + ca(h1))))(n2(x + sa(x))),
        "no_feed_forward": lambda: (lambda h1: n2(h1 + ca(h1)))(n1(x + sa(x))),
    }
    pre_norm: dict[str, Callable[[], torch.Tensor]] = {
        "post_norm_instead_of_pre": lambda: post(n1(x + sa(x))),
        "no_causal_mask_pre_norm": lambda: pre(x + sa(n1(x), None)),
        "kv_from_decoder_pre_norm": lambda: pre(x + sa(n1(x)), lambda h: ca(h, h)),
        "residual_from_normed": lambda: (lambda h1: (lambda h2: n3(h2) + ff(n3(h2)))(n2(h1) + ca(n2(h1))))(
            n1(x) + sa(n1(x))),
        "no_residuals_pre_norm": lambda: ff(n3(ca(n2(sa(n1(x)))))),
        "no_memory_mask_pre_norm": lambda: pre(x + sa(n1(x)), lambda h: ca(h, memory, None)),
        "norms_mixed_up_pre_norm": lambda: (lambda h1: (lambda h2: h2 + ff(n1(h2)))(h1 + ca(n3(h1))))(x + sa(n2(x))),
    }
    out = {}
    with torch.no_grad():
        for code, make in (pre_norm if layer.norm_first else post_norm).items():
            try:
                out[code] = _np(make())
            except Exception:  # noqa: BLE001 - a mistake that cannot run at these shapes
                continue
    return out


def _decoder_inputs(l_tgt: int, l_src: int, seed: int):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(2, l_tgt, D_MODEL, generator=gen, dtype=torch.float64)
    memory = torch.randn(2, l_src, D_MODEL, generator=gen, dtype=torch.float64)
    tgt_ids = torch.randint(3, 9, (2, l_tgt), generator=gen)
    tgt_ids[1, -1] = 0  # one padded target position
    src_ids = torch.randint(3, 9, (2, l_src), generator=gen)
    src_ids[1, -2:] = 0  # two padded source positions
    return x, memory, decoder_mask(tgt_ids, 0), padding_mask(src_ids, 0)


@exercise("decoder_layer", notebook="05_transformer", defines="DecoderLayer",
          off_limits=("helpers.transformer.DecoderLayer", "torch.nn.TransformerDecoderLayer"),
          success="correct! DecoderLayer.forward matches the reference: masked self-attention, "
                  "cross-attention and feed-forward, post-norm and pre-norm.",
          mistakes=DECODER_MISTAKES)
def check_decoder_layer(DecoderLayerClass: Any) -> str:
    """Check the forward pass of a student's DecoderLayer class against helpers.DecoderLayer."""
    cls = _as_class(DecoderLayerClass)
    for norm_first in (False, True):
        name = "pre-norm" if norm_first else "post-norm"
        student, reference = _build_pair(cls, DecoderLayer, norm_first, seed=21 + norm_first)
        # First L_tgt == L_src, so that every mistake still runs and can be recognised; then L_tgt != L_src.
        for l_tgt, l_src in ((6, 6), (4, 7)):
            x, memory, tgt_mask, memory_mask = _decoder_inputs(l_tgt, l_src, seed=l_tgt * 10 + l_src)
            what = (f"DecoderLayer(norm_first={norm_first}).forward(x, memory, tgt_mask, memory_mask) "
                    f"with L_tgt={l_tgt}, L_src={l_src}")
            out = _run(student, x, memory, tgt_mask, memory_mask, what=what)
            expect_shape(out, tuple(x.shape), what,
                         tr("decoder_layer:shape_hint", "The output has the decoder's shape (batch, L_tgt, d_model)."))
            expect_finite(out, what)
            with torch.no_grad():
                expected = _np(reference(x, memory, tgt_mask, memory_mask))
            if same(out, expected):
                continue
            _match_layer(out, wrong_decoder_outputs(reference, x, memory, tgt_mask, memory_mask))
            _future_leak(student, x, memory, tgt_mask, memory_mask, what)
            raise Mistake(tr("decoder_layer:differs", "{what} ({name}) differs from the reference: {difference}.",
                             what=what, name=name, difference=first_difference(out, expected)))
    x, memory, tgt_mask, memory_mask = _decoder_inputs(4, 7, seed=47)
    _dropout_used(cls, DecoderLayer, lambda layer: layer(x, memory, tgt_mask, memory_mask), "DecoderLayer",
                  ("dropout1", "dropout2", "dropout3"))
    return ""


def _future_leak(layer: nn.Module, x: torch.Tensor, memory: torch.Tensor, tgt_mask: torch.Tensor,
                 memory_mask: torch.Tensor, what: str) -> None:
    """Changing the last target position must not change the outputs of the earlier ones."""
    changed = x.clone()
    changed[:, -1] += 3.0
    a = _run(layer, x, memory, tgt_mask, memory_mask, what=what)
    b = _run(layer, changed, memory, tgt_mask, memory_mask, what=what)
    if not np.allclose(a[:, :-1], b[:, :-1], rtol=0, atol=1e-9):
        raise Known("future_leak", what=what)


# ---------------------------------------------------------------------- the whole Transformer
SRC_VOCAB, TGT_VOCAB, MODEL_LAYERS, MAX_LEN, PAD = 13, 11, 2, 32, 0

TRANSFORMER_MISTAKES = {
    "mask_not_boolean": "{which} returns a tensor of dtype {dtype}: a mask is boolean, True = may attend "
                        "(compare the token ids with pad_id).",
    "mask_inverted": "{which} is inverted: True must mark what a query MAY attend to (real tokens, earlier "
                     "positions), False what is blocked.",
    "tgt_mask_no_padding": "make_tgt_mask is only the causal mask: combine it (logical and) with the padding mask of "
                           "the target ids, so that no position attends to target padding.",
    "no_causal_mask": "the decoder's self-attention does not get the causal mask, so position i sees the target "
                      "tokens after it: make_tgt_mask combines the causal mask with the target's padding mask, and "
                      "decode gives that mask to every decoder layer.",
    "no_sqrt_d_model": "the {side} embeddings are not multiplied by sqrt(d_model): scale the embedding vectors by "
                       "sqrt(d_model) before the positional encoding is added (section 3.4 of the paper).",
    "sqrt_after_positional": "on the {side} side the sum of the embedding and the positional encoding is multiplied "
                             "by sqrt(d_model): only the embedding is scaled, then the positional encoding is added.",
    "no_positional_encoding_src": "the source gets no positional encoding: pass the scaled embeddings through "
                                  "self.positional (it adds the encoding, then applies dropout), or the encoder cannot "
                                  "tell the positions apart.",
    "no_positional_encoding_tgt": "the target gets no positional encoding: pass the scaled target embeddings through "
                                  "self.positional too, or the decoder cannot tell the positions apart.",
    "embeddings_swapped": "the {side} ids go through the other side's embedding: source ids through self.src_embed, "
                          "target ids through self.tgt_embed.",
    "src_mask_not_in_encoder": "the encoder's self-attention does not get the source padding mask, so real source "
                               "tokens attend to padding: give src_mask to every encoder layer.",
    "src_mask_not_in_cross_attention": "cross-attention does not get the source padding mask, so the decoder reads "
                                       "the source's padding: every decoder layer needs src_mask as its memory mask.",
    "memory_not_used": "the decoder does not read the encoder's output: every decoder layer must get the memory "
                       "(the output of encode) for its cross-attention, so that the output depends on the source.",
    "layers_not_chained": "the {stack} layers are not chained: each layer must read the output of the one before "
                          "it, and the last layer's output is the result (each layer reading the embeddings gives "
                          "the last layer's answer alone).",
    "no_final_norm": "with norm_first=True the {stack} output must go through the stack's final LayerNorm, "
                     "self.{stack}.norm (an nn.Identity in post-norm, so it is safe to apply it always).",
    "no_generator": "decode returns the decoder's vectors (last axis d_model); it must end with the final linear "
                    "layer, self.generator, which gives one logit per target token.",
    "returns_probabilities": "decode returns (log-)probabilities: return the logits, the output of self.generator "
                             "without a softmax (the loss and the argmax of decoding work on logits).",
    "no_dropout": "in training mode the output does not change when the dropout after the {side} positional "
                  "encoding is active: add the encoding with self.positional, which applies that dropout.",
    **_setup_mistakes("Transformer", "transformer"),
}


def _side(side: str) -> str:
    """The {side} of a hint, "source" or "target", in the student's language."""
    return (tr("transformer:side_source", "source") if side == "source"
            else tr("transformer:side_target", "target"))


def _ids(rows: list[list[int]]) -> torch.Tensor:
    return torch.tensor(rows, dtype=torch.long)


def _model_inputs(l_src: int, l_tgt: int) -> tuple[torch.Tensor, torch.Tensor]:
    """src (3, l_src) ids in 3..10 (so either embedding can read them), padded; tgt (3, l_tgt) starting with 1."""
    gen = torch.Generator().manual_seed(10 * l_src + l_tgt)
    src = torch.randint(3, TGT_VOCAB, (3, l_src), generator=gen)
    src[1, -3:] = PAD
    src[2, -1:] = PAD
    tgt = torch.randint(3, TGT_VOCAB, (3, l_tgt), generator=gen)
    tgt[:, 0] = 1
    tgt[1, -2:] = PAD
    return src, tgt


def _reference_model(norm_first: bool, shared: bool, seed: int) -> Transformer:
    vocab = (SRC_VOCAB, SRC_VOCAB) if shared else (SRC_VOCAB, TGT_VOCAB)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Transformer(*vocab, d_model=D_MODEL, num_heads=HEADS, num_layers=MODEL_LAYERS, d_ff=D_FF,
                            dropout=0.1, max_len=MAX_LEN, share_embeddings=shared, pad_id=PAD, norm_first=norm_first)
    _randomise(model, seed)
    return model.double().eval()


def _student_model(cls: type, reference: Transformer) -> nn.Module:
    """The student's Transformer with the reference's weights, and copies of the reference's layers, final norms
    and positional encoding inside it (those are other exercises, or given)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        student = call(cls, reference.src_vocab_size, reference.tgt_vocab_size, d_model=D_MODEL, num_heads=HEADS,
                       num_layers=MODEL_LAYERS, d_ff=D_FF, dropout=0.1, max_len=MAX_LEN,
                       share_embeddings=reference.share_embeddings, pad_id=PAD, norm_first=reference.norm_first)
    _fit(student, reference)
    for stack in ("encoder", "decoder"):
        mine, ours = getattr(student, stack), getattr(reference, stack)
        for i, layer in enumerate(ours.layers):
            mine.layers[i] = copy.deepcopy(layer)
        mine.norm = copy.deepcopy(ours.norm)
    student.positional = copy.deepcopy(reference.positional)
    return student.double().eval()


def _embed(model: Transformer, ids: torch.Tensor, table: nn.Embedding, scale: str | None = "before",
           positional: bool = True) -> torch.Tensor:
    x = table(ids)
    if scale == "before":
        x = x * math.sqrt(model.d_model)
    if positional:
        x = model.positional(x)
    if scale == "after":
        x = x * math.sqrt(model.d_model)
    return x


def _encode(model: Transformer, src: torch.Tensor, src_mask: torch.Tensor | None, *, table: str = "src",
            scale: str | None = "before", positional: bool = True, mask: bool = True, chain: bool = True,
            final_norm: bool = True) -> torch.Tensor:
    """model.encode with the given bugs."""
    x = _embed(model, src, getattr(model, f"{table}_embed"), scale, positional)
    out = x
    for layer in model.encoder.layers:
        out = layer(out if chain else x, src_mask if mask else None)
    return model.encoder.norm(out) if final_norm else out


def _decode(model: Transformer, tgt: torch.Tensor, memory: torch.Tensor, src_mask: torch.Tensor | None,
            tgt_mask: torch.Tensor | None, *, table: str = "tgt", scale: str | None = "before",
            positional: bool = True, self_mask: str = "given", cross_mask: bool = True, chain: bool = True,
            final_norm: bool = True, read_memory: bool = True, output: str = "logits") -> torch.Tensor:
    """model.decode with the given bugs."""
    y = _embed(model, tgt, getattr(model, f"{table}_embed"), scale, positional)
    own = {"given": tgt_mask, "none": None, "padding": padding_mask(tgt, model.pad_id)}[self_mask]
    out = y
    for layer in model.decoder.layers:
        h = out if chain else y
        out = layer(h, memory if read_memory else h, own, src_mask if cross_mask else None)
    if final_norm:
        out = model.decoder.norm(out)
    logits = model.generator(out)
    if output == "softmax":
        return torch.softmax(logits, dim=-1)
    return torch.log_softmax(logits, dim=-1) if output == "log_softmax" else logits


def _outputs(make: dict[Any, Callable[[], torch.Tensor]]) -> dict[Any, np.ndarray]:
    out = {}
    with torch.no_grad():
        for key, run in make.items():
            try:
                out[key] = _np(run())
            except Exception:  # noqa: BLE001 - a mistake that cannot run at these shapes
                continue
    return out


def wrong_encodings(model: Transformer, src: torch.Tensor, src_mask: torch.Tensor) -> dict[Any, np.ndarray]:
    """What the common wrong encode(src, src_mask) give: mistake code (or Known with fields) -> memory."""
    make: dict[Any, Callable[[], torch.Tensor]] = {
        Known("no_sqrt_d_model", side=_side("source")): lambda: _encode(model, src, src_mask, scale=None),
        Known("sqrt_after_positional", side=_side("source")): lambda: _encode(model, src, src_mask, scale="after"),
        "no_positional_encoding_src": lambda: _encode(model, src, src_mask, positional=False),
        "src_mask_not_in_encoder": lambda: _encode(model, src, src_mask, mask=False),
        Known("layers_not_chained", stack="encoder"): lambda: _encode(model, src, src_mask, chain=False),
        Known("embeddings_swapped", side=_side("source")): lambda: _encode(model, src, src_mask, table="tgt"),
    }
    if model.norm_first:
        make[Known("no_final_norm", stack="encoder")] = lambda: _encode(model, src, src_mask, final_norm=False)
    return _outputs(make)


def wrong_decodes(model: Transformer, tgt: torch.Tensor, memory: torch.Tensor, src_mask: torch.Tensor,
                  tgt_mask: torch.Tensor) -> dict[Any, np.ndarray]:
    """What the common wrong decode(tgt, memory, src_mask, tgt_mask) give: mistake code (or Known) -> logits."""
    def run(**bugs: Any) -> Callable[[], torch.Tensor]:
        return lambda: _decode(model, tgt, memory, src_mask, tgt_mask, **bugs)

    make: dict[Any, Callable[[], torch.Tensor]] = {  # each Known(...) is its own key, so a code may come twice
        Known("no_sqrt_d_model", side=_side("target")): run(scale=None),
        Known("sqrt_after_positional", side=_side("target")): run(scale="after"),
        "no_positional_encoding_tgt": run(positional=False),
        "src_mask_not_in_cross_attention": run(cross_mask=False),
        Known("no_causal_mask"): run(self_mask="none"),
        Known("no_causal_mask"): run(self_mask="padding"),
        Known("layers_not_chained", stack="decoder"): run(chain=False),
        Known("embeddings_swapped", side=_side("target")): run(table="src"),
        Known("returns_probabilities"): run(output="softmax"),
        Known("returns_probabilities"): run(output="log_softmax"),
        "memory_not_used": run(read_memory=False),
    }
    if model.norm_first:
        make[Known("no_final_norm", stack="decoder")] = run(final_norm=False)
    return _outputs(make)


def wrong_forwards(model: Transformer, src: torch.Tensor, tgt: torch.Tensor) -> dict[Any, np.ndarray]:
    """What the common wrong forward(src, tgt) give (the masks or the memory passed wrongly): code -> logits."""
    src_mask, tgt_mask = model.make_src_mask(src), model.make_tgt_mask(tgt)
    embedded = _embed(model, src, model.src_embed)
    return _outputs({
        "src_mask_not_in_encoder": lambda: model.decode(tgt, _encode(model, src, src_mask, mask=False), src_mask,
                                                        tgt_mask),
        "src_mask_not_in_cross_attention": lambda: model.decode(tgt, model.encode(src, src_mask), None, tgt_mask),
        "memory_not_used": lambda: model.decode(tgt, embedded, src_mask, tgt_mask),
        Known("memory_not_used"): lambda: model.decode(tgt, model.src_embed(src), src_mask, tgt_mask),
    })


def _compare_mask(result: Any, expected: torch.Tensor, which: str, wrong: dict[Any, torch.Tensor], hint: str) -> None:
    """A mask is right when it is boolean and broadcasts to the reference's shape with the same values."""
    mask = as_numpy(result, which)
    if mask.dtype != np.bool_:
        raise Known("mask_not_boolean", which=which, dtype=str(getattr(result, "dtype", mask.dtype)))
    target = tuple(expected.shape)
    try:
        full = np.broadcast_to(mask, target)
    except ValueError:
        raise generic("wrong_shape", what=which, actual=mask.shape, expected=target, hint=f" {hint}") from None
    right = expected.numpy()
    if np.array_equal(full, right):
        return
    if np.array_equal(full, ~right):
        raise Known("mask_inverted", which=which)
    for key, other in wrong.items():
        if np.array_equal(full, np.broadcast_to(other.numpy(), target)):
            raise key
    index = tuple(int(i) for i in np.argwhere(full != right)[0])
    raise Mistake(tr("transformer:mask_differs", "{which} differs from the reference mask: at index {index} you have "
                     "{got}, the reference has {expected}.", which=which, index=index, got=bool(full[index]),
                     expected=bool(right[index])))


def _check_masks(student: nn.Module, reference: Transformer, src: torch.Tensor, tgt: torch.Tensor) -> None:
    _compare_mask(call(student.make_src_mask, src), reference.make_src_mask(src), "make_src_mask(src)", {},
                  tr("transformer:src_mask_shape", "The source mask has shape (batch, 1, 1, L_src): one row per "
                     "sentence, broadcast over the heads and the queries."))
    length = tgt.shape[1]
    _compare_mask(call(student.make_tgt_mask, tgt), reference.make_tgt_mask(tgt), "make_tgt_mask(tgt)",
                  {Known("tgt_mask_no_padding"): causal_mask_torch(length)[None, None],
                   Known("no_causal_mask"): padding_mask(tgt, PAD)},
                  tr("transformer:tgt_mask_shape", "The target mask has shape (batch, 1, L_tgt, L_tgt): the causal "
                     "(L_tgt, L_tgt) mask combined with the target's padding mask (batch, 1, 1, L_tgt)."))


def _check_encode(student: nn.Module, reference: Transformer, src: torch.Tensor, label: str) -> None:
    src_mask = reference.make_src_mask(src)
    length = src.shape[1]
    what = tr("transformer:what_encode", "Transformer({label}).encode(src, src_mask) with L_src={length}",
              label=label, length=length)
    out = _run(student.encode, src, src_mask, what=what)
    expect_shape(out, (src.shape[0], length, D_MODEL), what,
                 tr("transformer:encode_shape", "encode returns the memory, (batch, L_src, d_model)."))
    expect_finite(out, what)
    with torch.no_grad():
        expected = _np(reference.encode(src, src_mask))
    if same(out, expected):
        return
    match_known(out, wrong_encodings(reference, src, src_mask))
    longer = torch.cat([src, torch.full((src.shape[0], 2), PAD)], dim=1)  # more padding must change nothing
    padded = _run(student.encode, longer, reference.make_src_mask(longer), what=what)
    real = src_mask[:, 0, 0, :].numpy()
    if padded.shape[:2] == longer.shape and not np.allclose(padded[:, :length][real], out[real], rtol=0, atol=1e-9):
        raise Known("src_mask_not_in_encoder")
    raise Mistake(tr("harness:differs", "{what} differs from the reference: {difference}.", what=what,
                     difference=first_difference(out, expected)))


def _check_decode(student: nn.Module, reference: Transformer, src: torch.Tensor, tgt: torch.Tensor,
                  label: str) -> None:
    src_mask, tgt_mask = reference.make_src_mask(src), reference.make_tgt_mask(tgt)
    with torch.no_grad():
        memory = reference.encode(src, src_mask)
    batch, length = tgt.shape
    vocab = reference.tgt_vocab_size
    what = tr("transformer:what_decode", "Transformer({label}).decode(tgt, memory, src_mask, tgt_mask) with "
              "L_src={l_src}, L_tgt={l_tgt}", label=label, l_src=src.shape[1], l_tgt=length)
    out = _run(student.decode, tgt, memory, src_mask, tgt_mask, what=what)
    if out.shape == (batch, length, D_MODEL):
        raise Known("no_generator")
    expect_shape(out, (batch, length, vocab), what,
                 tr("transformer:decode_shape", "decode returns logits, (batch, L_tgt, tgt_vocab_size)."))
    expect_finite(out, what)
    with torch.no_grad():
        expected = _np(reference.decode(tgt, memory, src_mask, tgt_mask))
    if same(out, expected):
        return
    match_known(out, wrong_decodes(reference, tgt, memory, src_mask, tgt_mask))
    if same(_run(student.decode, tgt, memory + 1.0, src_mask, tgt_mask, what=what), out, atol=1e-12):
        raise Known("memory_not_used")
    changed = tgt.clone()
    changed[[0, 2], -1] = 3 + (changed[[0, 2], -1] - 2) % (vocab - 3)  # another real token at the last position
    later = _run(student.decode, changed, memory, src_mask, reference.make_tgt_mask(changed), what=what)
    if not np.allclose(later[[0, 2], :-1], out[[0, 2], :-1], rtol=0, atol=1e-9):
        raise Known("no_causal_mask")
    padded = memory.clone()
    padded[~src_mask[:, 0, 0, :]] += 3.0  # other vectors where the source is padding
    if not np.allclose(_run(student.decode, tgt, padded, src_mask, tgt_mask, what=what), out, rtol=0, atol=1e-9):
        raise Known("src_mask_not_in_cross_attention")
    raise Mistake(tr("harness:differs", "{what} differs from the reference: {difference}.", what=what,
                     difference=first_difference(out, expected)))


def _check_forward(student: nn.Module, reference: Transformer, src: torch.Tensor, tgt: torch.Tensor,
                   label: str) -> None:
    batch, length = tgt.shape
    what = tr("transformer:what_forward", "Transformer({label})(src, tgt) with L_src={l_src}, L_tgt={l_tgt}",
              label=label, l_src=src.shape[1], l_tgt=length)
    out = _run(student, src, tgt, what=what)
    expect_shape(out, (batch, length, reference.tgt_vocab_size), what,
                 tr("transformer:forward_shape", "forward returns logits, (batch, L_tgt, tgt_vocab_size), one row per "
                    "target position: it does not shift tgt (the training loop passes the decoder's input)."))
    expect_finite(out, what)
    with torch.no_grad():
        expected = _np(reference(src, tgt))
    if same(out, expected):
        return
    match_known(out, wrong_forwards(reference, src, tgt))
    other = src.clone()
    other[:, 0] = 3 + (other[:, 0] - 2) % (TGT_VOCAB - 3)  # another real first token in every sentence
    if same(_run(student, other, tgt, what=what), out, atol=1e-12):
        raise Known("memory_not_used")
    raise Mistake(tr("transformer:forward_differs", "{what} differs from the reference: {difference}. Look at the "
                     "masks and the memory that forward hands to encode and decode.", what=what,
                     difference=first_difference(out, expected)))


def _check_embedding_dropout(cls: type) -> None:
    """In training mode, with only the dropout of the positional encoding active, encode and decode must change."""
    reference = _reference_model(False, False, seed=51)
    student = _student_model(cls, reference)
    for module in student.modules():
        if isinstance(module, nn.Dropout):
            module.p = 0.0
    student.positional.dropout.p = 0.5
    src, tgt = _model_inputs(7, 5)
    src_mask, tgt_mask = reference.make_src_mask(src), reference.make_tgt_mask(tgt)
    with torch.no_grad():
        memory = reference.encode(src, src_mask)
    runs = (("source", lambda: student.encode(src, src_mask)), ("target", lambda: student.decode(tgt, memory,
                                                                                                  src_mask, tgt_mask)))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        for side, run in runs:
            student.eval()
            method = f"Transformer.{'encode' if side == 'source' else 'decode'}"
            quiet = _run(run, what=tr("transformer:in_eval_mode", "{method} in eval mode", method=method))
            student.train()
            noisy = _run(run, what=tr("transformer:in_training_mode", "{method} in training mode", method=method))
            if same(quiet, noisy, atol=1e-12):
                raise Known("no_dropout", side=_side(side))
    student.eval()


@exercise("transformer", notebook="05_transformer", defines="Transformer",
          off_limits=("helpers.transformer.Transformer", "torch.nn.Transformer"),
          success="correct! The masks from the token ids, the scaled embeddings plus the positional encoding on both "
                  "sides, N layers each, the memory and the source mask in every cross-attention, the final "
                  "projection: the same logits as the reference, post-norm, pre-norm and with shared embeddings.",
          mistakes=TRANSFORMER_MISTAKES)
def check_transformer(TransformerClass: Any) -> str:
    """Check make_src_mask, make_tgt_mask, encode, decode and forward of a student's Transformer class."""
    cls = _as_class(TransformerClass)
    for norm_first in (False, True):
        label = f"norm_first={norm_first}"
        reference = _reference_model(norm_first, False, seed=31 + norm_first)
        student = _student_model(cls, reference)
        # First L_src == L_tgt, so that every mistake still runs and can be recognised; then L_src != L_tgt.
        for l_src, l_tgt in ((6, 6), (7, 5)):
            src, tgt = _model_inputs(l_src, l_tgt)
            if not norm_first:
                _check_masks(student, reference, src, tgt)
            _check_encode(student, reference, src, label)
            _check_decode(student, reference, src, tgt, label)
            _check_forward(student, reference, src, tgt, label)
    reference = _reference_model(False, True, seed=41)
    src, tgt = _model_inputs(7, 5)
    _check_forward(_student_model(cls, reference), reference, src, tgt, "share_embeddings=True")
    _check_embedding_dropout(cls)
    return tr("transformer:checked", "(Checked with the reference layers inside your model, so that only this "
              "exercise's code is tested.)")


__all__ = ["DECODER_MISTAKES", "ENCODER_MISTAKES", "FEED_FORWARD_MISTAKES", "LAYER_NORM_MISTAKES",
           "TRANSFORMER_MISTAKES", "check_decoder_layer", "check_encoder_layer", "check_feed_forward",
           "check_layer_norm", "check_transformer", "wrong_decodes", "wrong_decoder_outputs", "wrong_encoder_outputs",
           "wrong_encodings", "wrong_feed_forwards", "wrong_forwards", "wrong_layer_norms"]
