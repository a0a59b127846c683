"""The check of notebook 05's DecoderLayer.forward, post-norm and pre-norm, with the reference's attention,
feed-forward and LayerNorm modules inside the student's layer (what it shares with EncoderLayer's: layers.py)."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import torch
from torch import nn

from ..i18n import tr
from ..masking import decoder_mask, padding_mask
from ..transformer import DecoderLayer
from .harness import Known, Mistake, exercise, expect_finite, expect_shape, first_difference, graded, same
from .layers import _DROPOUT_ON_SUM, _MASK_INVERTED, _MISSING_NORM, _NO_DROPOUT, _build_pair, _compare_in_training, \
    _layer_setup_mistakes, _match_layer
from .torch_compare import D_MODEL, _as_class, _np, compare_gradients, reference_gradients, reference_output, \
    same_in_eval_mode, student_output

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
    "missing_norm_pre_norm": _MISSING_NORM,
    "mask_inverted": _MASK_INVERTED,
    "memory_normalised": "in the pre-norm branch you normalise memory with norm2 before cross-attention: norm2 "
                         "normalises only the decoder's stream (the queries); memory, the encoder's output, already "
                         "went through the encoder's final LayerNorm: pass it as it is, as the keys and values.",
    # found by behaviour
    "future_leak": "{what}: changing the LAST target token changes the outputs of earlier positions, so the decoder "
                   "can see the future: the masked self-attention needs tgt_mask, as it is given (True = may "
                   "attend).",
    "no_dropout": _NO_DROPOUT,
    "dropout_on_residual_sum": _DROPOUT_ON_SUM,
    **_layer_setup_mistakes("DecoderLayer", "decoder_layer"),
}


def wrong_decoder_outputs(layer: DecoderLayer, x: torch.Tensor, memory: torch.Tensor, tgt_mask: torch.Tensor,
                          memory_mask: torch.Tensor) -> dict[Any, np.ndarray]:
    """The outputs of the common wrong forward passes of a DecoderLayer (eval mode): code (or Known) -> output.

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

    padding_only = tgt_mask[..., -1:, :]  # the last query row of the causal mask hides nothing: the padding alone
    inverted = {Known("mask_inverted", which="tgt_mask"): (~tgt_mask, memory_mask),
                Known("mask_inverted", which="memory_mask"): (tgt_mask, ~memory_mask),
                Known("mask_inverted", which=tr("decoder_layer:both_masks", "each mask")): (~tgt_mask, ~memory_mask)}

    post_norm: dict[Any, Callable[[], torch.Tensor]] = {
        "no_causal_mask": lambda: post(n1(x + sa(x, None))),
        Known("no_causal_mask"): lambda: post(n1(x + sa(x, padding_only))),
        "kv_from_decoder": lambda: post(n1(x + sa(x)), lambda h: ca(h, h)),
        "q_from_memory": lambda: (lambda h1: last(n2(h1 + layer.cross_attn(memory, h1, h1, memory_mask))))(
            n1(x + sa(x))),
        "no_memory_mask": lambda: post(n1(x + sa(x)), lambda h: ca(h, memory, None)),
        "masks_swapped": lambda: post(n1(x + sa(x, memory_mask)), lambda h: ca(h, memory, tgt_mask)),
        "cross_attn_reads_input": lambda: (lambda h1: last(n2(h1 + ca(x))))(n1(x + sa(x))),
        "sublayers_out_of_order": lambda: (lambda h1: last(n2(h1 + sa(h1))))(n1(x + ca(x))),
        Known("sublayers_out_of_order"): lambda: (lambda h1: (lambda h2: n3(h2 + ca(h2)))(n2(h1 + ff(h1))))(
            n1(x + sa(x))),
        "no_residual_self_attention": lambda: post(n1(sa(x))),
        "no_residual_cross_attention": lambda: last(n2(ca(n1(x + sa(x))))),
        "no_residual_ff": lambda: (lambda h1: n3(ff(n2(h1 + ca(h1)))))(n1(x + sa(x))),
        "no_residuals": lambda: n3(ff(n2(ca(n1(sa(x)))))),
        "pre_norm_instead_of_post": lambda: pre(x + sa(n1(x))),
        "norm_before_residual": lambda: (lambda h1: (lambda h2: h2 + n3(ff(h2)))(h1 + n2(ca(h1))))(x + n1(sa(x))),
        "norms_mixed_up": lambda: (lambda h1: (lambda h2: n1(h2 + ff(h2)))(n3(h1 + ca(h1))))(n2(x + sa(x))),
        "no_feed_forward": lambda: (lambda h1: n2(h1 + ca(h1)))(n1(x + sa(x))),
    }
    pre_norm: dict[Any, Callable[[], torch.Tensor]] = {
        "post_norm_instead_of_pre": lambda: post(n1(x + sa(x))),
        "no_causal_mask_pre_norm": lambda: pre(x + sa(n1(x), None)),
        Known("no_causal_mask_pre_norm"): lambda: pre(x + sa(n1(x), padding_only)),
        Known("missing_norm_pre_norm", norm="norm1"): lambda: pre(x + sa(x)),
        Known("missing_norm_pre_norm", norm="norm2"): lambda: (lambda h1: (lambda h2: h2 + ff(n3(h2)))(h1 + ca(h1)))(
            x + sa(n1(x))),
        Known("missing_norm_pre_norm", norm="norm3"): lambda: (lambda h1: (lambda h2: h2 + ff(h2))(h1 + ca(n2(h1))))(
            x + sa(n1(x))),
        "kv_from_decoder_pre_norm": lambda: pre(x + sa(n1(x)), lambda h: ca(h, h)),
        "residual_from_normed": lambda: (lambda h1: (lambda h2: n3(h2) + ff(n3(h2)))(n2(h1) + ca(n2(h1))))(
            n1(x) + sa(n1(x))),
        "no_residuals_pre_norm": lambda: ff(n3(ca(n2(sa(n1(x)))))),
        "no_memory_mask_pre_norm": lambda: pre(x + sa(n1(x)), lambda h: ca(h, memory, None)),
        "norms_mixed_up_pre_norm": lambda: (lambda h1: (lambda h2: h2 + ff(n1(h2)))(h1 + ca(n3(h1))))(x + sa(n2(x))),
        "memory_normalised": lambda: pre(x + sa(n1(x)), lambda h: ca(h, n2(memory))),
    }
    for key, (own, cross) in inverted.items():
        post_norm[key] = lambda own=own, cross=cross: post(n1(x + sa(x, own)), lambda h: ca(h, memory, cross))
        pre_norm[key] = lambda own=own, cross=cross: pre(x + sa(n1(x), own), lambda h: ca(h, memory, cross))
    out = {}
    with torch.no_grad():
        for key, make in (pre_norm if layer.norm_first else post_norm).items():
            try:
                out[key] = _np(make())
            except Exception:  # noqa: BLE001 - a mistake that cannot run at these shapes
                continue
    return out


def _decoder_inputs(l_tgt: int, l_src: int, seed: int):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(2, l_tgt, D_MODEL, generator=gen, dtype=torch.float64)
    memory = torch.randn(2, l_src, D_MODEL, generator=gen, dtype=torch.float64)
    memory[0, 1] *= 30.0  # one source position of large entries
    tgt_ids = torch.randint(3, 9, (2, l_tgt), generator=gen)
    tgt_ids[1, -1] = 0  # one padded target position
    src_ids = torch.randint(3, 9, (2, l_src), generator=gen)
    src_ids[1, -2:] = 0  # two padded source positions
    return x, memory, decoder_mask(tgt_ids, 0), padding_mask(src_ids, 0)


@exercise("decoder_layer", notebook="05_transformer", defines="DecoderLayer",
          reference="helpers.transformer.DecoderLayer",
          success="correct! DecoderLayer.forward matches the reference: masked self-attention, "
                  "cross-attention and feed-forward, post-norm and pre-norm.",
          mistakes=DECODER_MISTAKES,
          off_limits=("helpers.transformer.DecoderLayer", "torch.nn.TransformerDecoderLayer"))
def check_decoder_layer(DecoderLayerClass: Any) -> str:
    """Check the forward pass of a student's DecoderLayer class against helpers.DecoderLayer: the output in eval mode,
    its gradients, and the output in training mode with the reference's random numbers, post-norm and pre-norm."""
    cls = _as_class(DecoderLayerClass)
    names = ("x", "memory", "tgt_mask", "memory_mask")
    for norm_first in (False, True):
        name = "pre-norm" if norm_first else "post-norm"
        student, reference = _build_pair(cls, DecoderLayer, norm_first, seed=21 + norm_first)
        # First L_tgt == L_src, so that every mistake still runs and can be recognised; then L_tgt != L_src.
        for l_tgt, l_src, seed in graded([(6, 6, 66), (4, 7, 47)], lambda rng: (
                int(rng.integers(2, 9)), int(rng.integers(3, 10)), int(rng.integers(2 ** 31)))):
            args = _decoder_inputs(l_tgt, l_src, seed=seed)
            x, memory, tgt_mask, memory_mask = args
            what = (f"DecoderLayer(norm_first={norm_first}).forward(x, memory, tgt_mask, memory_mask) "
                    f"with L_tgt={l_tgt}, L_src={l_src}")
            out = student_output(student, args, names, what)
            expect_shape(out, tuple(x.shape), what,
                         tr("decoder_layer:shape_hint", "The output has the decoder's shape (batch, L_tgt, d_model)."))
            expect_finite(out, what)
            expected = reference_output(reference, args)
            if not same(out, expected):
                same_in_eval_mode(student, args, names, what, out)
                _match_layer(out, wrong_decoder_outputs(reference, x, memory, tgt_mask, memory_mask), what)
                _future_leak(student, x, memory, tgt_mask, memory_mask, what)
                raise Mistake(tr("decoder_layer:differs", "{what} ({name}) differs from the reference: {difference}.",
                                 what=what, name=name, difference=first_difference(out, expected)))
            grads = {0: "x", 1: "memory"}
            compare_gradients(student, student, args, grads, reference_gradients(reference, reference, args, grads),
                              what)
        _compare_in_training(student, reference, args, names, what, [
            lambda h, r=reference: r.self_attn(h, h, h, tgt_mask),
            lambda h, r=reference: r.cross_attn(h, memory, memory, memory_mask), reference.ff])
    return ""


def _future_leak(layer: nn.Module, x: torch.Tensor, memory: torch.Tensor, tgt_mask: torch.Tensor,
                 memory_mask: torch.Tensor, what: str) -> None:
    """Changing the last target position must not change the outputs of the earlier ones."""
    changed = x.clone()
    changed[:, -1] += 3.0
    names = ("x", "memory", "tgt_mask", "memory_mask")
    a = student_output(layer, (x, memory, tgt_mask, memory_mask), names, what)
    b = student_output(layer, (changed, memory, tgt_mask, memory_mask), names, what)
    if not np.allclose(a[:, :-1], b[:, :-1], rtol=0, atol=1e-9):
        raise Known("future_leak", what=what)


__all__ = ["DECODER_MISTAKES", "check_decoder_layer", "wrong_decoder_outputs"]
