"""The check of notebook 05's DecoderLayer.forward, post-norm and pre-norm, with the reference's attention,
feed-forward and LayerNorm modules inside the student's layer (what it shares with EncoderLayer's: layers.py)."""

from __future__ import annotations

import itertools
from typing import Any, Callable

import numpy as np
import torch
from torch import nn

from ..i18n import tr
from ..masking import decoder_mask, padding_mask
from ..transformer import DecoderLayer
from .harness import Known, exercise, graded
from .layers import _DROPOUT_AFTER_NORM, _DROPOUT_ON_SUM, _MASK_INVERTED, _MISSING_NORM, _NO_DROPOUT, _build_pair, \
    _compare_layer, _layer_setup_mistakes, _stack
from .torch_compare import D_MODEL, _as_class, seeded_outputs

DECODER_MISTAKES = {
    # post-norm (norm_first=False)
    "no_causal_mask": "the causal mask is left out: the masked self-attention must get tgt_mask, or position i sees "
                      "the tokens after it.",
    "kv_from_decoder": "in cross-attention K and V come from the decoder: the queries come from the decoder's stream, "
                       "the keys and values from the encoder output, memory.",
    "values_from_decoder": "in cross-attention the values come from the decoder's stream: the keys AND the values "
                           "are memory, the encoder's output; only the queries come from the decoder.",
    "keys_from_decoder": "in cross-attention the keys come from the decoder's stream: the keys AND the values are "
                         "memory, the encoder's output; only the queries come from the decoder.",
    "cross_attn_is_self_attn": "the cross-attention sub-layer calls self.self_attn: it has its own module with its own "
                               "weights, self.cross_attn.",
    "same_norm_twice": "{norm} serves more than one sub-layer: each has its own LayerNorm, with its own gain and bias: "
                       "norm1 for masked self-attention, norm2 for cross-attention, norm3 for the feed-forward.",
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
                   "can see the future. The masked self-attention must get tgt_mask, as it is given (True = may "
                   "attend), and the cross-attention must take its keys and values from memory alone.",
    "no_dropout": _NO_DROPOUT,
    "dropout_on_residual_sum": _DROPOUT_ON_SUM,
    "dropout_after_norm": _DROPOUT_AFTER_NORM,
    **_layer_setup_mistakes("DecoderLayer", "decoder_layer"),
}


def wrong_decoder_outputs(layer: DecoderLayer, x: torch.Tensor, memory: torch.Tensor, tgt_mask: torch.Tensor,
                          memory_mask: torch.Tensor) -> dict[Any, np.ndarray]:
    """The outputs of the common wrong forward passes of a DecoderLayer (eval mode): code (or Known) -> output.

    The post-norm mistakes for a layer with norm_first=False, the pre-norm ones for norm_first=True.
    Some mistakes (K and V from the decoder) only give an output when L_tgt == L_src: call it so.
    """
    n1, n2, n3, ff, identity = layer.norm1, layer.norm2, layer.norm3, layer.ff, nn.Identity()

    def sa(m: torch.Tensor | None = tgt_mask) -> Callable:
        return lambda h: layer.self_attn(h, h, h, m)

    def ca(q: Callable = lambda h: h, kv: Callable = lambda h: memory, m: torch.Tensor | None = memory_mask):
        return lambda h: layer.cross_attn(q(h), kv(h), kv(h), m)

    def run(subs: tuple = (sa(), ca(), ff), norms: tuple = (n1, n2, n3), post: bool = not layer.norm_first,
            **bugs: Any) -> Callable[[], torch.Tensor]:
        return lambda: _stack(x, subs, norms, post, **bugs)

    padding_only = tgt_mask[..., -1:, :]  # the last query row of the causal mask hides nothing: the padding alone
    pre = "_pre_norm" if layer.norm_first else ""  # the codes of mistakes made in both branches, told apart
    make: dict[Any, Callable[[], torch.Tensor]] = {
        f"no_causal_mask{pre}": run(subs=(sa(None), ca(), ff)),
        Known(f"no_causal_mask{pre}"): run(subs=(sa(padding_only), ca(), ff)),
        f"kv_from_decoder{pre}": run(subs=(sa(), ca(kv=lambda h: h), ff)),
        f"no_memory_mask{pre}": run(subs=(sa(), ca(m=None), ff)),
        f"no_residuals{pre}": run(residual=(False, False, False)),
        f"norms_mixed_up{pre}": run(norms=(n2, n3, n1)),
        # K and V not both memory (they run when L_tgt == L_src): the decoder's stream is h, as the queries see it
        "values_from_decoder": run(subs=(sa(), lambda h: layer.cross_attn(h, memory, h, memory_mask), ff)),
        "keys_from_decoder": run(subs=(sa(), lambda h: layer.cross_attn(h, h, memory, memory_mask), ff)),
        Known(f"kv_from_decoder{pre}"): run(subs=(sa(), ca(kv=lambda h: h, m=tgt_mask), ff)),
        Known(f"kv_from_decoder{pre}"): run(subs=(sa(), ca(kv=lambda h: h, m=None), ff)),
        "cross_attn_is_self_attn": run(subs=(sa(), lambda h: layer.self_attn(h, memory, memory, memory_mask), ff)),
        # the sub-layers reordered, each with its own norm
        "sublayers_out_of_order": run(subs=(ca(), sa(), ff), norms=(n2, n1, n3)),
        Known("sublayers_out_of_order"): run(subs=(sa(), ff, ca()), norms=(n1, n3, n2)),
    }
    names = {id(n1): "norm1", id(n2): "norm2", id(n3): "norm3"}
    for norms in itertools.product((n1, n2, n3), repeat=3):  # one norm for two or three sub-layers
        used = [names[id(n)] for n in norms]
        twice = [name for name in dict.fromkeys(used) if used.count(name) > 1]
        if twice:
            make[Known("same_norm_twice", norm=twice[0])] = run(norms=norms)
    if not layer.norm_first:
        make.update({
            "q_from_memory": run(subs=(sa(), ca(q=lambda h: memory, kv=lambda h: h), ff)),
            "masks_swapped": run(subs=(sa(memory_mask), ca(m=tgt_mask), ff)),
            "cross_attn_reads_input": run(subs=(sa(), ca(q=lambda h: x), ff)),
            Known("sublayers_out_of_order"): run(subs=(ca(), sa(), ff)),
            Known("sublayers_out_of_order"): run(subs=(sa(), ff, ca())),
            "no_residual_self_attention": run(residual=(False, True, True)),
            "no_residual_cross_attention": run(residual=(True, False, True)),
            "no_residual_ff": run(residual=(True, True, False)),
            "pre_norm_instead_of_post": run(post=False),
            "norm_before_residual": run(norm_before_residual=True),
            "no_feed_forward": run(subs=(sa(), ca())),
        })
    else:
        make.update({
            "post_norm_instead_of_pre": run(post=True),
            Known("missing_norm_pre_norm", norm="norm1"): run(norms=(identity, n2, n3)),
            Known("missing_norm_pre_norm", norm="norm2"): run(norms=(n1, identity, n3)),
            Known("missing_norm_pre_norm", norm="norm3"): run(norms=(n1, n2, identity)),
            "residual_from_normed": run(from_normed=True),
            "memory_normalised": run(subs=(sa(), ca(kv=lambda h: n2(memory)), ff)),
        })
    for which, own, cross in (("tgt_mask", ~tgt_mask, memory_mask), ("memory_mask", tgt_mask, ~memory_mask),
                              (tr("decoder_layer:both_masks", "each mask"), ~tgt_mask, ~memory_mask)):
        make[Known("mask_inverted", which=which)] = run(subs=(sa(own), ca(m=cross), ff))
    return seeded_outputs(make)


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


@exercise("decoder_layer", notebook="05_transformer", points=3, defines="DecoderLayer",
          reference="helpers.transformer.DecoderLayer",
          success="correct! DecoderLayer.forward matches the reference: masked self-attention, "
                  "cross-attention and feed-forward, post-norm and pre-norm.",
          mistakes=DECODER_MISTAKES,
          off_limits=("helpers.transformer.DecoderLayer", "torch.nn.TransformerDecoderLayer"))
def check_decoder_layer(DecoderLayerClass: Any) -> str:
    """Check the forward pass of a student's DecoderLayer class against helpers.DecoderLayer: the output in eval mode,
    its gradients, and the output in training mode with the reference's random numbers, post-norm and pre-norm."""
    cls = _as_class(DecoderLayerClass)
    for norm_first in (False, True):
        name = "pre-norm" if norm_first else "post-norm"
        student, reference = _build_pair(cls, DecoderLayer, norm_first, seed=21 + norm_first)
        # First L_tgt == L_src, so that every mistake still runs and can be recognised; then L_tgt != L_src.
        for l_tgt, l_src, seed in graded([(6, 6, 66), (4, 7, 47)], lambda rng: (
                int(rng.integers(2, 9)), int(rng.integers(3, 10)), int(rng.integers(2 ** 31)))):
            x, memory, tgt_mask, memory_mask = args = _decoder_inputs(l_tgt, l_src, seed=seed)
            what = (f"DecoderLayer(norm_first={norm_first}).forward(x, memory, tgt_mask, memory_mask) "
                    f"with L_tgt={l_tgt}, L_src={l_src}")
            _compare_layer(
                student, reference, args, ("x", "memory", "tgt_mask", "memory_mask"), what,
                tr("decoder_layer:shape_hint", "The output has the decoder's shape (batch, L_tgt, d_model)."),
                lambda: wrong_decoder_outputs(reference, x, memory, tgt_mask, memory_mask),
                ((slice(None), -1), (slice(None), slice(None, -1)), "future_leak"),  # the last target position
                lambda difference: tr("decoder_layer:differs", "{what} ({name}) differs from the reference: "
                                      "{difference}.", what=what, name=name, difference=difference),
                [lambda h, r=reference: r.self_attn(h, h, h, tgt_mask),
                 lambda h, r=reference: r.cross_attn(h, memory, memory, memory_mask), reference.ff])
    return ""
