"""The check of notebook 05's Transformer: the masks built from token ids, encode, decode and forward, with the
reference's layers, final norms and positional encoding inside the student's model.

The masks are compared with the reference's (pad_id 2, so that `ids != 0` is wrong) and must be built on the ids'
device (meta tensors show it on a CPU); encode, decode and forward are compared in eval mode with the known
wrong passes (wrong_encodings, wrong_decodes, wrong_forwards), forward's gradients with the reference's, the
shared embeddings by identity, and forward in training mode with the reference's random numbers."""

from __future__ import annotations

import copy
import math
from typing import Any, Callable

import numpy as np
import torch
from torch import nn

from ..i18n import tr
from ..masking import causal_mask_torch, decoder_mask, padding_mask
from ..transformer import Transformer
from .harness import Known, Mistake, as_numpy, call, exercise, expect_finite, expect_shape, first_difference, \
    generic, match_known, same
from .torch_compare import D_FF, D_MODEL, HEADS, TORCH_MISTAKES, _as_class, _fit, _np, _randomise, _run, \
    _setup_mistakes, compare_gradients, reference_gradients, reference_output, protect_inputs, same_in_eval_mode, \
    student_output

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
    "pad_id_hardcoded": "{which} compares the ids with 0: the padding id is self.pad_id (here {pad_id}), whatever "
                        "the model was built with.",
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


def _ids(rows: list[list[int]]) -> torch.Tensor:
    return torch.tensor(rows, dtype=torch.long)


def _model_inputs(l_src: int, l_tgt: int) -> tuple[torch.Tensor, torch.Tensor]:
    """src (3, l_src) ids in 3..10 (so either embedding can read them), padded; tgt (3, l_tgt) starting with 1.
    Each holds a real token of id 0, so that a mask comparing the ids with 0 is told apart from one that ignores
    the padding."""
    gen = torch.Generator().manual_seed(10 * l_src + l_tgt)
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
            chain: bool = True, final_norm: bool = True) -> torch.Tensor:
    """model.encode with the given bugs (mask: True, False or "inverted")."""
    x = _embed(model, src, getattr(model, f"{table}_embed"), scale, positional)
    given = ~src_mask if mask == "inverted" else src_mask if mask else None
    out = x
    for layer in model.encoder.layers:
        out = layer(out if chain else x, given)
    return model.encoder.norm(out) if final_norm else out


def _decode(model: Transformer, tgt: torch.Tensor, memory: torch.Tensor, src_mask: torch.Tensor | None,
            tgt_mask: torch.Tensor | None, *, table: str = "tgt", scale: str | float | None = "before",
            positional: bool = True, self_mask: str = "given", cross_mask: bool | str = True, chain: bool = True,
            final_norm: bool = True, read_memory: bool = True, output: str = "logits") -> torch.Tensor:
    """model.decode with the given bugs (cross_mask: True, False or "inverted"; output: "logits", "softmax",
    "log_softmax" or "hidden", the vectors before the generator)."""
    y = _embed(model, tgt, getattr(model, f"{table}_embed"), scale, positional)
    own = {"given": tgt_mask, "none": None, "padding": padding_mask(tgt, model.pad_id),
           "inverted": None if tgt_mask is None else ~tgt_mask}[self_mask]
    cross = ~src_mask if cross_mask == "inverted" else src_mask if cross_mask else None
    out = y
    for layer in model.decoder.layers:
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
        Known("mask_inverted", which=tr("transformer:src_mask_in_encoder", "the src_mask given to the encoder "
                                        "layers")): lambda: _encode(model, src, src_mask, mask="inverted"),
        **_scales(model, "source", model.src_vocab_size, lambda scale: _encode(model, src, src_mask, scale=scale)),
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
        Known("mask_inverted", which=tr("transformer:src_mask_in_cross", "the src_mask given to cross-attention")):
            run(cross_mask="inverted"),
        Known("mask_inverted", which=tr("transformer:tgt_mask_in_decoder", "the tgt_mask given to the decoder "
                                        "layers")): run(self_mask="inverted"),
        **_scales(model, "target", model.tgt_vocab_size, lambda scale: run(scale=scale)()),
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
    scales = {f"sqrt({vocab})": math.sqrt(vocab), f"d_model = {d_model}": d_model,
              f"sqrt(d_k) = sqrt({d_model // heads})": math.sqrt(d_model // heads)}
    return {Known("wrong_embedding_scale", side=_side(side), scale=label, sqrt_d_model=f"{math.sqrt(d_model):.3g}"):
            (lambda value=value: run(value)) for label, value in scales.items()}


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


def _mask_of(method: Callable, ids: torch.Tensor, name: str) -> Any:
    """The student's mask of a copy of ids; a change of the ids is reported."""
    given = ids.clone()
    mask = call(method, given)
    protect_inputs((ids,), (given,), (name,), f"{method.__name__}({name})")
    return mask


def _check_masks(student: nn.Module, reference: Transformer, src: torch.Tensor, tgt: torch.Tensor) -> None:
    _compare_mask(_mask_of(student.make_src_mask, src, "src"), reference.make_src_mask(src), "make_src_mask(src)",
                  {Known("pad_id_hardcoded", which="make_src_mask(src)", pad_id=PAD): padding_mask(src, 0)},
                  tr("transformer:src_mask_shape", "The source mask has shape (batch, 1, 1, L_src): one row per "
                     "sentence, broadcast over the heads and the queries."))
    length = tgt.shape[1]
    _compare_mask(_mask_of(student.make_tgt_mask, tgt, "tgt"), reference.make_tgt_mask(tgt), "make_tgt_mask(tgt)",
                  {Known("tgt_mask_no_padding"): causal_mask_torch(length)[None, None],
                   Known("no_causal_mask"): padding_mask(tgt, PAD),
                   Known("tgt_mask_upper_triangle"): padding_mask(tgt, PAD) & causal_mask_torch(length).T,
                   Known("tgt_mask_upper_triangle"): padding_mask(tgt, PAD) & ~causal_mask_torch(length),
                   Known("tgt_padding_on_queries"): (tgt != PAD)[:, None, :, None] & causal_mask_torch(length),
                   Known("pad_id_hardcoded", which="make_tgt_mask(tgt)", pad_id=PAD): decoder_mask(tgt, 0)},
                  tr("transformer:tgt_mask_shape", "The target mask has shape (batch, 1, L_tgt, L_tgt): the causal "
                     "(L_tgt, L_tgt) mask combined with the target's padding mask (batch, 1, 1, L_tgt)."))


def _error_only(message: str) -> str:
    """"RuntimeError: ..." out of a raised_error message, without the line it came from, cut at a word (at most
    about 120 characters), never in the middle of a code span."""
    error = message.split(" raised ", 1)[-1].split(" (at line")[0].strip()
    if len(error) > 120:
        error = error[:117].rsplit(" ", 1)[0] + " ..."
    return error.replace("`", "'")


def _check_mask_devices(student: nn.Module, src: torch.Tensor, tgt: torch.Tensor) -> None:
    """The masks of ids on another device (meta: no data, any machine) must be on that device too."""
    for method, ids in (("make_src_mask", src), ("make_tgt_mask", tgt)):
        which = f"{method}({method[5:8]})"
        try:
            mask = call(getattr(student, method), ids.to("meta"))
        except Mistake as error:
            if "device" in str(error):
                raise Known("mask_wrong_device", which=which, detail=_error_only(str(error))) from None
            continue  # code that needs the ids' values (meta tensors have none) cannot be checked this way
        device = getattr(mask, "device", None)
        if device is not None and device.type != "meta":
            raise Known("mask_wrong_device", which=which, detail=tr(
                "transformer:mask_on", "ids on {ids}, mask on {mask}", ids="meta", mask=device.type))


def _check_encode(student: nn.Module, reference: Transformer, src: torch.Tensor, label: str) -> None:
    src_mask = reference.make_src_mask(src)
    length = src.shape[1]
    what = tr("transformer:what_encode", "Transformer({label}).encode(src, src_mask) with L_src={length}",
              label=label, length=length)
    out = student_output(student.encode, (src, src_mask), ("src", "src_mask"), what)
    expect_shape(out, (src.shape[0], length, D_MODEL), what,
                 tr("transformer:encode_shape", "encode returns the memory, (batch, L_src, d_model)."))
    expect_finite(out, what)
    with torch.no_grad():
        expected = _np(reference.encode(src, src_mask))
    if same(out, expected):
        return
    same_in_eval_mode(student.encode, (src, src_mask), ("src", "src_mask"), what, out)
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
    out = student_output(student.decode, (tgt, memory, src_mask, tgt_mask), ("tgt", "memory", "src_mask", "tgt_mask"),
                         what)
    if out.shape == (batch, length, D_MODEL) != (batch, length, vocab):
        with torch.no_grad():
            hidden = [_np(_decode(reference, tgt, memory, src_mask, tgt_mask, final_norm=final, output="hidden"))
                      for final in (True, False)]
        if any(same(out, h) for h in hidden):  # the decoder's vectors, with or without the final norm
            raise Known("no_generator")
    expect_shape(out, (batch, length, vocab), what,
                 tr("transformer:decode_shape", "decode returns logits, (batch, L_tgt, tgt_vocab_size)."))
    expect_finite(out, what)
    with torch.no_grad():
        expected = _np(reference.decode(tgt, memory, src_mask, tgt_mask))
    if same(out, expected):
        return
    same_in_eval_mode(student.decode, (tgt, memory, src_mask, tgt_mask), ("tgt", "memory", "src_mask", "tgt_mask"),
                      what, out)
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
    out = student_output(student, (src, tgt), ("src", "tgt"), what)
    expect_shape(out, (batch, length, reference.tgt_vocab_size), what,
                 tr("transformer:forward_shape", "forward returns logits, (batch, L_tgt, tgt_vocab_size), one row per "
                    "target position: it does not shift tgt (the training loop passes the decoder's input)."))
    expect_finite(out, what)
    expected = reference_output(reference, (src, tgt))
    if same(out, expected):
        compare_gradients(student, student, (src, tgt), {}, reference_gradients(reference, reference, (src, tgt), {}),
                          what)
        return
    same_in_eval_mode(student, (src, tgt), ("src", "tgt"), what, out)
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


def _compare_in_training(cls: type) -> None:
    """forward(src, tgt) in training mode, with the reference's random numbers, must give the reference's logits."""
    reference = _reference_model(True, False, seed=61)
    student = _student_model(cls, reference)
    src, tgt = _model_inputs(7, 5)
    what = tr("transformer:what_forward", "Transformer({label})(src, tgt) with L_src={l_src}, L_tgt={l_tgt}",
              label="norm_first=True", l_src=src.shape[1], l_tgt=tgt.shape[1])
    out = student_output(student.train(), (src, tgt), ("src", "tgt"), what, seed=TRAIN_SEED)
    expected = reference_output(reference.train(), (src, tgt), seed=TRAIN_SEED)
    student.eval()
    reference.eval()
    if not same(out, expected):
        raise Known("train_mode_differs", what=what, difference=first_difference(out, expected))


@exercise("transformer", notebook="05_transformer", defines="Transformer",
          success="correct! The masks from the token ids, the scaled embeddings plus the positional encoding on both "
                  "sides, N layers each, the memory and the source mask in every cross-attention, the final "
                  "projection: the same logits as the reference, post-norm, pre-norm and with shared embeddings.",
          mistakes=TRANSFORMER_MISTAKES, off_limits=("helpers.transformer.Transformer", "torch.nn.Transformer"))
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
                _check_mask_devices(student, src, tgt)
            _check_encode(student, reference, src, label)
            _check_decode(student, reference, src, tgt, label)
            _check_forward(student, reference, src, tgt, label)
    reference = _reference_model(False, True, seed=41)
    src, tgt = _model_inputs(7, 5)
    student = _student_model(cls, reference)
    src_weight, tgt_weight, out_weight = (getattr(getattr(student, name, None), "weight", None)
                                          for name in ("src_embed", "tgt_embed", "generator"))
    if not (src_weight is tgt_weight is out_weight):
        raise Known("embeddings_not_shared")
    _check_forward(student, reference, src, tgt, "share_embeddings=True")
    _check_embedding_dropout(cls)
    _compare_in_training(cls)
    return tr("transformer:checked", "(Checked with the reference layers inside your model, so that only this "
              "exercise's code is tested.)")


__all__ = ["TRANSFORMER_MISTAKES", "check_transformer", "wrong_decodes", "wrong_encodings", "wrong_forwards"]
