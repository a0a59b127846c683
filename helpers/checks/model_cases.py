"""The cases and the known wrong answers of the check of notebook 05's Transformer (model.py): the token ids,
the reference model, and what the usual wrong encode, decode and forward passes give (wrong_encodings,
wrong_decodes, wrong_forwards)."""

from __future__ import annotations

import copy
import math
from typing import Any, Callable

import numpy as np
import torch
from torch import nn

from ..i18n import number, tr
from ..masking import padding_mask
from ..transformer import Transformer
from .harness import Known, call
from .torch_compare import D_FF, D_MODEL, HEADS, TORCH_MISTAKES, _fit, _randomise, _setup_mistakes, seeded_outputs

TRAIN_SEED = 27

# ---------------------------------------------------------------------- the whole Transformer
SRC_VOCAB, TGT_VOCAB, MODEL_LAYERS, MAX_LEN = 13, 11, 2, 32
PAD = 2  # not 0, so that a mask built with `src != 0` is wrong

TRANSFORMER_MISTAKES = {
    "mask_not_boolean": "{which} returns a tensor of dtype {dtype}: a mask is boolean, True = may attend "
                        "(compare the token ids with pad_id).",
    "mask_inverted": "{which} is inverted: True must mark what a query MAY attend to (real tokens, earlier "
                     "positions), False what is blocked.",
    "tgt_mask_no_padding": "make_tgt_mask is only the causal mask: combine it (logical and) with the padding mask of "
                           "the target ids, so that no position attends to target padding.",
    "no_causal_mask": "position i sees the target tokens after it: the decoder's self-attention needs the causal "
                      "mask. make_tgt_mask combines the causal mask with the target's padding mask, and decode gives "
                      "that mask, as it is, to every decoder layer.",
    "tgt_mask_upper_triangle": "make_tgt_mask(tgt) keeps the UPPER triangle: query i may attend to the keys j <= i, "
                               "the LOWER triangle, diagonal included (combined with the target's padding mask).",
    "tgt_padding_on_queries": "make_tgt_mask(tgt) puts the target's padding on the query axis, (batch, 1, L_tgt, 1): "
                              "padding blocks KEYS, so the padding mask is (batch, 1, 1, L_tgt), combined with the "
                              "causal (L_tgt, L_tgt) mask.",
    "wrong_embedding_scale": "the {side} embeddings are multiplied by {scale}: the scale is sqrt(d_model) = "
                             "{sqrt_d_model} (section 3.4 of the paper), whatever the vocabulary size.",
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
    "src_mask_not_in_encoder": "real source tokens attend to padding (more padding changes their memory): the "
                               "encoder's self-attention needs the source padding mask: give src_mask, as it is, to "
                               "every encoder layer.",
    "src_mask_not_in_cross_attention": "the decoder reads the source's padding (the logits change with the memory "
                                       "at padded source positions): every decoder layer's cross-attention needs "
                                       "src_mask, as it is, as its memory mask, and the memory as encode returns it.",
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
    "pad_id_hardcoded": "{which} compares the ids with 0, but the padding id is self.pad_id, the one the model was "
                        "built with (here {pad_id}): compare the ids with self.pad_id.",
    "tgt_mask_diagonal_blocked": "make_tgt_mask(tgt) blocks the diagonal: query i may attend to the keys j <= i, "
                                 "itself included (torch.tril with its default diagonal=0).",
    "tgt_mask_one_future": "make_tgt_mask(tgt) lets query i see key i + 1: query i may attend to the keys j <= i "
                           "and to none after it (torch.tril with its default diagonal=0).",
    "tgt_mask_or": "make_tgt_mask(tgt) combines the causal mask and the padding mask with | (or): a key may be "
                   "attended to only when both allow it, so combine them with & (and).",
    "masks_swapped": "the two masks reach the decoder layers swapped: each decoder layer takes (x, memory, tgt_mask, "
                     "memory_mask), the causal target mask for its self-attention and the source padding mask for "
                     "its cross-attention, and decode takes (tgt, memory, src_mask, tgt_mask).",
    "same_layer_repeated": "the {stack} applies its first layer N times: each of the N layers has its own weights, so "
                           "run every layer of self.{stack}.layers once, in order.",
    "mask_wrong_device": "{which} builds its mask on another device than the ids ({detail}): create every new tensor "
                         "on the ids' device (`torch.ones(..., device=tgt.device)`), or training on a GPU fails.",
    "embeddings_not_shared": "with share_embeddings=True the source embedding, the target embedding and the final "
                             "projection must be ONE parameter: self.tgt_embed = self.src_embed and "
                             "self.generator.weight = self.src_embed.weight (equal copies would be trained apart).",
    "train_mode_differs": "in training mode (the reference's random numbers) {what} differs from the reference: "
                          "{difference}. Apply the dropouts as the reference does: self.positional on each side "
                          "(it adds the encoding, then drops), the layers' own, in the order encode, then decode.",
    **TORCH_MISTAKES,
    **_setup_mistakes("Transformer", "transformer"),
}


def _side(side: str) -> str:
    """The {side} of a hint, "source" or "target", in the student's language."""
    return (tr("transformer:side_source", "source") if side == "source"
            else tr("transformer:side_target", "target"))


def _model_inputs(l_src: int, l_tgt: int, seed: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """src (3, l_src) ids in 3..10 (so either embedding can read them), padded; tgt (3, l_tgt) starting with 1.
    Each holds a real token of id 0, so that a mask comparing the ids with 0 is told apart from one that ignores
    the padding."""
    gen = torch.Generator().manual_seed(10 * l_src + l_tgt if seed is None else seed)
    src = torch.randint(3, TGT_VOCAB, (3, l_src), generator=gen)
    src[0, 2] = 0
    src[1, -3:] = PAD
    src[2, -1:] = PAD
    tgt = torch.randint(3, TGT_VOCAB, (3, l_tgt), generator=gen)
    tgt[:, 0] = 1
    tgt[2, 2] = 0
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


def _embed(model: Transformer, ids: torch.Tensor, table: nn.Embedding, scale: str | float | None = "before",
           positional: bool = True) -> torch.Tensor:
    """The embeddings scaled by sqrt(d_model) "before" or "after" the positional encoding, not at all (None), or
    by another number."""
    x = table(ids)
    if scale == "before":
        x = x * math.sqrt(model.d_model)
    elif isinstance(scale, (int, float)):
        x = x * scale
    if positional:
        x = model.positional(x)
    if scale == "after":
        x = x * math.sqrt(model.d_model)
    return x


def _encode(model: Transformer, src: torch.Tensor, src_mask: torch.Tensor | None, *, table: str = "src",
            scale: str | float | None = "before", positional: bool = True, mask: bool | str = True,
            chain: bool = True, final_norm: bool = True, first_only: bool = False) -> torch.Tensor:
    """model.encode with the given bugs (mask: True, False or "inverted"; first_only: the first layer N times)."""
    x = _embed(model, src, getattr(model, f"{table}_embed"), scale, positional)
    given = ~src_mask if mask == "inverted" else src_mask if mask else None
    out = x
    for layer in model.encoder.layers:
        layer = model.encoder.layers[0] if first_only else layer
        out = layer(out if chain else x, given)
    return model.encoder.norm(out) if final_norm else out


def _decode(model: Transformer, tgt: torch.Tensor, memory: torch.Tensor, src_mask: torch.Tensor | None,
            tgt_mask: torch.Tensor | None, *, table: str = "tgt", scale: str | float | None = "before",
            positional: bool = True, self_mask: str = "given", cross_mask: bool | str = True, chain: bool = True,
            final_norm: bool = True, read_memory: bool = True, output: str = "logits",
            first_only: bool = False) -> torch.Tensor:
    """model.decode with the given bugs (self_mask "source": src_mask, and cross_mask "target": tgt_mask, the two
    masks swapped; cross_mask: True, False or "inverted"; output: "logits", "softmax", "log_softmax" or "hidden", the
    vectors before the generator; first_only: the first layer N times)."""
    y = _embed(model, tgt, getattr(model, f"{table}_embed"), scale, positional)
    own = {"given": tgt_mask, "none": None, "padding": padding_mask(tgt, model.pad_id), "source": src_mask,
           "inverted": None if tgt_mask is None else ~tgt_mask}[self_mask]
    cross = (~src_mask if cross_mask == "inverted" else tgt_mask if cross_mask == "target"
             else src_mask if cross_mask else None)
    out = y
    for layer in model.decoder.layers:
        layer = model.decoder.layers[0] if first_only else layer
        h = out if chain else y
        out = layer(h, memory if read_memory else h, own, cross)
    if final_norm:
        out = model.decoder.norm(out)
    if output == "hidden":
        return out
    logits = model.generator(out)
    if output == "softmax":
        return torch.softmax(logits, dim=-1)
    return torch.log_softmax(logits, dim=-1) if output == "log_softmax" else logits


def wrong_encodings(model: Transformer, src: torch.Tensor, src_mask: torch.Tensor) -> dict[Any, np.ndarray]:
    """What the common wrong encode(src, src_mask) give: mistake code (or Known with fields) -> memory."""
    make: dict[Any, Callable[[], torch.Tensor]] = {
        Known("no_sqrt_d_model", side=_side("source")): lambda: _encode(model, src, src_mask, scale=None),
        Known("sqrt_after_positional", side=_side("source")): lambda: _encode(model, src, src_mask, scale="after"),
        "no_positional_encoding_src": lambda: _encode(model, src, src_mask, positional=False),
        "src_mask_not_in_encoder": lambda: _encode(model, src, src_mask, mask=False),
        Known("layers_not_chained", stack="encoder"): lambda: _encode(model, src, src_mask, chain=False),
        Known("same_layer_repeated", stack="encoder"): lambda: _encode(model, src, src_mask, first_only=True),
        Known("embeddings_swapped", side=_side("source")): lambda: _encode(model, src, src_mask, table="tgt"),
        Known("mask_inverted", which=tr("transformer:src_mask_in_encoder", "the src_mask given to the encoder "
                                        "layers")): lambda: _encode(model, src, src_mask, mask="inverted"),
        **_scales(model, "source", model.src_vocab_size, lambda scale: _encode(model, src, src_mask, scale=scale)),
    }
    if model.norm_first:
        make[Known("no_final_norm", stack="encoder")] = lambda: _encode(model, src, src_mask, final_norm=False)
    return seeded_outputs(make)


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
        Known("same_layer_repeated", stack="decoder"): run(first_only=True),
        "masks_swapped": run(self_mask="source", cross_mask="target"),  # runs when L_src == L_tgt
        Known("embeddings_swapped", side=_side("target")): run(table="src"),
        Known("returns_probabilities"): run(output="softmax"),
        Known("returns_probabilities"): run(output="log_softmax"),
        "memory_not_used": run(read_memory=False),
        Known("mask_inverted", which=tr("transformer:src_mask_in_cross", "the src_mask given to cross-attention")):
            run(cross_mask="inverted"),
        Known("mask_inverted", which=tr("transformer:tgt_mask_in_decoder", "the tgt_mask given to the decoder "
                                        "layers")): run(self_mask="inverted"),
        **_scales(model, "target", model.tgt_vocab_size, lambda scale: run(scale=scale)()),
    }
    if model.norm_first:
        make[Known("no_final_norm", stack="decoder")] = run(final_norm=False)
    return seeded_outputs(make)


def wrong_forwards(model: Transformer, src: torch.Tensor, tgt: torch.Tensor) -> dict[Any, np.ndarray]:
    """What the common wrong forward(src, tgt) give (the masks or the memory passed wrongly): code -> logits."""
    src_mask, tgt_mask = model.make_src_mask(src), model.make_tgt_mask(tgt)
    embedded = _embed(model, src, model.src_embed)
    return seeded_outputs({
        "src_mask_not_in_encoder": lambda: model.decode(tgt, _encode(model, src, src_mask, mask=False), src_mask,
                                                        tgt_mask),
        "src_mask_not_in_cross_attention": lambda: model.decode(tgt, model.encode(src, src_mask), None, tgt_mask),
        "memory_not_used": lambda: model.decode(tgt, embedded, src_mask, tgt_mask),
        "masks_swapped": lambda: model.decode(tgt, model.encode(src, src_mask), tgt_mask, src_mask),
        Known("memory_not_used"): lambda: model.decode(tgt, model.src_embed(src), src_mask, tgt_mask),
        Known("mask_inverted", which=tr("transformer:src_mask_in_cross", "the src_mask given to cross-attention")):
            lambda: model.decode(tgt, model.encode(src, src_mask), ~src_mask, tgt_mask),
        Known("mask_inverted", which=tr("transformer:src_mask_in_forward", "the src_mask forward gives to encode "
                                        "and decode")):
            lambda: model.decode(tgt, model.encode(src, ~src_mask), ~src_mask, tgt_mask),
    })


def _scales(model: Transformer, side: str, vocab: int, run: Callable[[float], torch.Tensor]) -> dict:
    """The embeddings scaled by another number than sqrt(d_model): Known(wrong_embedding_scale) -> the function
    that computes it."""
    d_model, heads = model.d_model, model.num_heads
    root = math.sqrt(d_model)
    shown = number(root) if root.is_integer() else number(root, 2)  # 4, or 5.66 in the language's notation
    scales = {f"sqrt({vocab})": math.sqrt(vocab), f"d_model = {d_model}": d_model,
              f"sqrt(d_k) = sqrt({d_model // heads})": math.sqrt(d_model // heads),
              f"1 / sqrt(d_model) = 1 / {shown}": 1 / root}
    return {Known("wrong_embedding_scale", side=_side(side), scale=label, sqrt_d_model=shown):
            (lambda value=value: run(value)) for label, value in scales.items()}
