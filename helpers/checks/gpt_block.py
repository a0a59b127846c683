"""The check of notebook 07's GPTBlock.forward: the pre-norm decoder-only block (masked self-attention, then the
feed-forward network), with the reference's attention, feed-forward and LayerNorm modules inside the student's
block. The block is notebook 05's pre-norm encoder layer given a causal mask, so the wrong forward passes are
those of that layer (layers.wrong_encoder_outputs), renamed and explained for a decoder-only block."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ..gpt import GPTBlock
from ..i18n import tr
from .harness import Known, exercise, graded
from .layers import LAYER_PARTS, _compare_layer, wrong_encoder_outputs
from .torch_compare import D_FF, D_MODEL, DROPOUT_P_MISTAKE, HEADS, P_TRAIN, TORCH_MISTAKES, _as_class, _np, \
    _setup_mistakes, _use_reference_parts, built_pair

GPT_BLOCK_MISTAKES = {
    "post_norm_instead_of_pre": "you wrote post-norm, LayerNorm(x + Sublayer(x)): a GPT block is pre-norm, "
                                "x + Sublayer(LayerNorm(x)): normalise each sub-layer's INPUT and add its output to "
                                "the un-normalised x.",
    "no_causal_mask": "the mask is not passed to the self-attention, so every position sees the tokens after it: "
                      "give mask to self_attn.",
    "mask_inverted": "{what}: the mask is inverted: True means MAY attend (an earlier position or itself). Pass it "
                     "as it is given.",
    "no_residual_attention": "missing residual around the self-attention: x = x + dropout1(self_attn(...)).",
    "no_residual_ff": "missing residual around the feed-forward: x = x + dropout2(ff(norm2(x))).",
    "no_residuals": "no residual connections: each sub-layer's (dropped-out) output is ADDED to x.",
    "residual_from_normed": "the residual adds the normalised copy of x: add the sub-layer's output to x itself, "
                            "x + Sublayer(norm(x)), so that the stream that runs through the blocks is never "
                            "normalised on the way.",
    "norms_swapped": "norm1 and norm2 are swapped: norm1 goes before the self-attention, norm2 before the "
                     "feed-forward.",
    "same_norm_twice": "{norm} serves both sub-layers: norm1 before the self-attention, norm2 before the "
                       "feed-forward, each with its own gain and bias.",
    "missing_norm": "a sub-layer reads x without {norm}: each sub-layer reads its normalised input, "
                    "x + Sublayer({norm}(x)).",
    "sublayers_out_of_order": "the sub-layers are in the wrong order: the self-attention first, then the "
                              "feed-forward.",
    "extra_final_norm": "your block normalises its output with {norm}: a pre-norm block returns the residual sum "
                        "itself; the last LayerNorm belongs to the model, after its last block (GPT.norm).",
    "future_leak": "{what}: changing the LAST position changes the outputs of earlier positions, so the block "
                   "sees the future: the self-attention needs the causal mask, as it is given.",
    "returns_input": "{what} returns its input unchanged: apply the two sub-layers to x.",
    "no_dropout": "{what}: in training mode your output is the one without {names}: apply dropout to each "
                  "sub-layer's output before the residual addition.",
    "dropout_on_residual_sum": "{what}: in training mode your dropout acts on the residual sum: apply it to the "
                               "sub-layer's output only, x + dropout(Sublayer(norm(x))).",
    **TORCH_MISTAKES, **DROPOUT_P_MISTAKE, **_setup_mistakes("GPTBlock", "gpt_block"),
}

# The codes of notebook 05's pre-norm encoder layer mistakes, as this exercise names them.
RENAMED = {"no_src_mask_pre_norm": "no_causal_mask", "no_residuals_pre_norm": "no_residuals",
           "norms_swapped_pre_norm": "norms_swapped", "missing_norm_pre_norm": "missing_norm"}


def wrong_block_outputs(block: GPTBlock, x: torch.Tensor, mask: torch.Tensor) -> dict[Any, np.ndarray]:
    """The outputs of the common wrong forward passes of a GPT block (eval mode): code (or Known) -> output."""
    out: dict[Any, np.ndarray] = {Known("returns_input"): _np(x)}
    for key, value in wrong_encoder_outputs(block, x, mask).items():
        code, fields = (key.code, key.fields) if isinstance(key, Known) else (key, {})
        fields = {} if code == "mask_inverted" else fields
        out[Known(RENAMED.get(code, code), **fields)] = value
    return out


def causal_case(length: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(x (2, length, D_MODEL) float64 with one position of large entries, the causal mask (1, 1, L, L))."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(2, length, D_MODEL, generator=gen, dtype=torch.float64)
    x[0, 1] *= 30.0
    return x, torch.ones(length, length, dtype=torch.bool).tril()[None, None]


@exercise("gpt_block", notebook="07_gpt", points=2, defines="GPTBlock", reference="helpers.gpt.GPTBlock",
          success="correct! GPTBlock.forward matches the reference: pre-norm masked self-attention, then the "
                  "feed-forward, each in a residual connection.",
          mistakes=GPT_BLOCK_MISTAKES,
          off_limits=("helpers.gpt.GPTBlock", "helpers.layers.EncoderLayer", "torch.nn.TransformerEncoderLayer",
                      "torch.nn.TransformerDecoderLayer"))
def check_gpt_block(GPTBlockClass: Any) -> str:
    """Check the forward pass of a student's GPTBlock class against helpers.gpt.GPTBlock: the output in eval mode
    (with the causal mask), the gradients of x, and the output in training mode with the reference's random
    numbers."""
    cls = _as_class(GPTBlockClass)
    for length, seed in graded([(6, 31), (3, 32)], lambda rng: (int(rng.integers(2, 9)), int(rng.integers(2 ** 31)))):
        student, reference = built_pair(cls, GPTBlock, seed, D_MODEL, HEADS, D_FF, dropout=P_TRAIN)
        _use_reference_parts(student, reference, LAYER_PARTS)
        x, mask = causal_case(length, seed)
        what = f"GPTBlock.forward(x, mask) with L={length}"
        _compare_layer(
            student, reference, (x, mask), ("x", "mask"), what,
            tr("gpt_block:shape_hint", "The block keeps the shape (batch, L, d_model)."),
            lambda: wrong_block_outputs(reference, x, mask),
            ((slice(None), -1), (slice(None), slice(None, -1)), "future_leak"),  # the last position changed
            lambda difference: tr("gpt_block:differs", "{what} differs from the reference: {difference}.",
                                  what=what, difference=difference),
            [lambda h, r=reference: r.self_attn(h, h, h, mask), reference.ff])
    return ""
