"""The check of notebook 05's Transformer: the masks built from token ids (pad_id 2, so that `ids != 0` is wrong,
and on the ids' device), encode, decode and forward against the reference and its known wrong passes
(model_cases.py), with the reference's layers, final norms and positional encoding inside the student's model."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from ..i18n import tr
from ..masking import causal_mask_torch, decoder_mask, padding_mask
from ..transformer import Transformer
from .harness import Known, Mistake, as_numpy, call, exercise, first_difference, generic, graded, match_known, same
from .model_cases import PAD, TGT_VOCAB, TRAIN_SEED, TRANSFORMER_MISTAKES, _decode, _model_inputs, _reference_model, \
    _side, _student_model, wrong_decodes, wrong_encodings, wrong_forwards
from .layer_norm import compare_output
from .torch_compare import D_MODEL, _as_class, _np, _run, protect_inputs, reference_output, student_output


def _compare_mask(student: nn.Module, method: str, ids: torch.Tensor, expected: torch.Tensor,
                  wrong: dict[Any, torch.Tensor], hint: str) -> None:
    """student.method(ids) (on a copy: a change of the ids is reported) is right when it is boolean and broadcasts
    to the reference's shape with the same values."""
    which, given = f"{method}({method[5:8]})", ids.clone()
    result = call(getattr(student, method), given)
    protect_inputs((ids,), (given,), (method[5:8],), which)
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
    for key, other in {Known("mask_inverted", which=which): ~expected, **wrong}.items():
        if np.array_equal(full, np.broadcast_to(other.numpy(), target)):
            raise key
    index = tuple(int(i) for i in np.argwhere(full != right)[0])
    raise Mistake(tr("transformer:mask_differs", "{which} differs from the reference mask: at index {index} you have "
                     "{got}, the reference has {expected}.", which=which, index=index, got=bool(full[index]),
                     expected=bool(right[index])))


def _check_masks(student: nn.Module, reference: Transformer, src: torch.Tensor, tgt: torch.Tensor) -> None:
    _compare_mask(student, "make_src_mask", src, reference.make_src_mask(src),
                  {Known("pad_id_hardcoded", which="make_src_mask(src)", pad_id=PAD): padding_mask(src, 0)},
                  tr("transformer:src_mask_shape", "The source mask has shape (batch, 1, 1, L_src): one row per "
                     "sentence, broadcast over the heads and the queries."))
    causal, padding = causal_mask_torch(tgt.shape[1]), padding_mask(tgt, PAD)
    _compare_mask(student, "make_tgt_mask", tgt, reference.make_tgt_mask(tgt),
                  {Known("tgt_mask_no_padding"): causal[None, None],
                   Known("no_causal_mask"): padding,
                   Known("tgt_mask_upper_triangle"): padding & causal.T,
                   Known("tgt_mask_upper_triangle"): padding & ~causal,
                   Known("tgt_padding_on_queries"): (tgt != PAD)[:, None, :, None] & causal,
                   Known("tgt_mask_diagonal_blocked"): padding & torch.tril(causal, diagonal=-1),
                   Known("tgt_mask_one_future"): padding & torch.tril(torch.ones_like(causal), diagonal=1),
                   Known("tgt_mask_or"): padding | causal,
                   Known("pad_id_hardcoded", which="make_tgt_mask(tgt)", pad_id=PAD): decoder_mask(tgt, 0)},
                  tr("transformer:tgt_mask_shape", "The target mask has shape (batch, 1, L_tgt, L_tgt): the causal "
                     "(L_tgt, L_tgt) mask combined with the target's padding mask (batch, 1, 1, L_tgt)."))


def _check_mask_devices(student: nn.Module, src: torch.Tensor, tgt: torch.Tensor) -> None:
    """The masks of ids on another device (meta: no data, any machine) must be on that device too."""
    for method, ids in (("make_src_mask", src), ("make_tgt_mask", tgt)):
        which = f"{method}({method[5:8]})"
        try:
            mask = call(getattr(student, method), ids.to("meta"))
        except Mistake as error:
            if "device" in str(error):  # the error alone, cut at a word, never in the middle of a code span
                detail = str(error).split(" raised ", 1)[-1].split(" (at line")[0].strip()
                if len(detail) > 120:
                    detail = detail[:117].rsplit(" ", 1)[0] + " ..."
                raise Known("mask_wrong_device", which=which, detail=detail.replace("`", "'")) from None
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

    def known(out: np.ndarray) -> None:
        match_known(out, wrong_encodings(reference, src, src_mask))
        longer = torch.cat([src, torch.full((src.shape[0], 2), PAD)], dim=1)  # more padding must change nothing
        padded = _run(student.encode, longer, reference.make_src_mask(longer), what=what)
        real = src_mask[:, 0, 0, :].numpy()
        if padded.shape[:2] == longer.shape and not np.allclose(padded[:, :length][real], out[real], rtol=0,
                                                                atol=1e-9):
            raise Known("src_mask_not_in_encoder")

    compare_output(student.encode, reference.encode, (src, src_mask), ("src", "src_mask"), what,
                   (src.shape[0], length, D_MODEL),
                   tr("transformer:encode_shape", "encode returns the memory, (batch, L_src, d_model)."), known)


def _check_decode(student: nn.Module, reference: Transformer, src: torch.Tensor, tgt: torch.Tensor,
                  label: str) -> None:
    src_mask, tgt_mask = reference.make_src_mask(src), reference.make_tgt_mask(tgt)
    with torch.no_grad():
        memory = reference.encode(src, src_mask)
    args = (tgt, memory, src_mask, tgt_mask)
    batch, length = tgt.shape
    vocab = reference.tgt_vocab_size
    what = tr("transformer:what_decode", "Transformer({label}).decode(tgt, memory, src_mask, tgt_mask) with "
              "L_src={l_src}, L_tgt={l_tgt}", label=label, l_src=src.shape[1], l_tgt=length)

    def no_generator(out: np.ndarray) -> None:
        if out.shape == (batch, length, D_MODEL) != (batch, length, vocab):
            with torch.no_grad():
                hidden = [_np(_decode(reference, *args, final_norm=final, output="hidden")) for final in (True, False)]
            if any(same(out, h) for h in hidden):  # the decoder's vectors, with or without the final norm
                raise Known("no_generator")

    def known(out: np.ndarray) -> None:
        match_known(out, wrong_decodes(reference, *args))
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

    compare_output(student.decode, reference.decode, args, ("tgt", "memory", "src_mask", "tgt_mask"), what,
                   (batch, length, vocab),
                   tr("transformer:decode_shape", "decode returns logits, (batch, L_tgt, tgt_vocab_size)."), known,
                   before=no_generator)


def _check_forward(student: nn.Module, reference: Transformer, src: torch.Tensor, tgt: torch.Tensor,
                   label: str) -> None:
    what = tr("transformer:what_forward", "Transformer({label})(src, tgt) with L_src={l_src}, L_tgt={l_tgt}",
              label=label, l_src=src.shape[1], l_tgt=tgt.shape[1])

    def known(out: np.ndarray) -> None:
        match_known(out, wrong_forwards(reference, src, tgt))
        other = src.clone()
        other[:, 0] = 3 + (other[:, 0] - 2) % (TGT_VOCAB - 3)  # another real first token in every sentence
        if same(_run(student, other, tgt, what=what), out, atol=1e-12):
            raise Known("memory_not_used")

    compare_output(student, reference, (src, tgt), ("src", "tgt"), what, (*tgt.shape, reference.tgt_vocab_size),
                   tr("transformer:forward_shape", "forward returns logits, (batch, L_tgt, tgt_vocab_size), one row "
                      "per target position: it does not shift tgt (the training loop passes the decoder's input)."),
                   known, grads={}, differs=lambda difference: tr(
                       "transformer:forward_differs", "{what} differs from the reference: {difference}. Look at the "
                       "masks and the memory that forward hands to encode and decode.", what=what,
                       difference=difference))


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


@exercise("transformer", notebook="05_transformer", points=5, defines="Transformer",
          reference="helpers.transformer.Transformer",
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
        for l_src, l_tgt, seed in graded([(6, 6, None), (7, 5, None)], lambda rng: (
                int(rng.integers(4, 10)), int(rng.integers(3, 9)), int(rng.integers(2 ** 31)))):
            src, tgt = _model_inputs(l_src, l_tgt, seed)
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
