"""Checks for notebook 05: the forward pass of EncoderLayer and DecoderLayer, and greedy decoding.

Each layer check builds the student's class and the reference with the same (seeded) weights,
in eval mode and float64, and compares outputs for the paper's post-norm and for pre-norm. When
the output is wrong, it is compared with the answers the common mistakes give (a missing
residual, the norm in the wrong place, the mask left out, K and V taken from the decoder, ...)
and the hint of the matching mistake is shown.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import torch
from torch import nn

from ..masking import decoder_mask, padding_mask
from ..decoding import greedy_decode as reference_greedy_decode
from ..transformer import DecoderLayer, EncoderLayer, Transformer
from .harness import (Known, Mistake, as_numpy, call, compare, exercise, expect_finite, expect_shape,  # noqa: F401
                      first_difference, match_known, output_and_weights, same, to_array)

D_MODEL, HEADS, D_FF = 16, 4, 32


def _as_class(obj: Any, what: str) -> type:
    if isinstance(obj, nn.Module):
        return type(obj)
    if isinstance(obj, type):
        return obj
    snake = {"EncoderLayer": "encoder_layer", "DecoderLayer": "decoder_layer"}.get(what, what.lower())
    raise Mistake(f"pass your {what} class itself, check_{snake}({what}), got {type(obj).__name__}.")


def _randomise(module: nn.Module, seed: int) -> None:
    """Seeded weights everywhere, LayerNorms included (their default 1 and 0 would hide a swapped norm)."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in module.named_parameters():
            if "norm" in name and name.endswith("weight"):
                p.copy_(1.0 + 0.3 * torch.randn(p.shape, generator=gen, dtype=p.dtype))
            else:
                p.copy_(0.3 * torch.randn(p.shape, generator=gen, dtype=p.dtype))


def _build_pair(student_cls: type, reference_cls: type, norm_first: bool, seed: int, what: str):
    """The reference layer (seeded, float64, eval) and the student's with the same weights."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        student = call(student_cls, D_MODEL, HEADS, D_FF, dropout=0.1, norm_first=norm_first)
        reference = reference_cls(D_MODEL, HEADS, D_FF, dropout=0.1, norm_first=norm_first)
    if not isinstance(student, nn.Module):
        raise Mistake(f"{what}(...) did not build an nn.Module (got {type(student).__name__}).")
    _randomise(reference, seed)
    reference.double().eval()
    try:
        student.load_state_dict(reference.state_dict())
    except Exception as error:  # noqa: BLE001 - any mismatch gets the same explanation
        raise Mistake(f"the weights of the reference {what} do not fit yours: keep the sub-modules of the given "
                      f"__init__ unchanged ({str(error).splitlines()[0]})") from None
    student.double().eval()
    if getattr(student, "norm_first", norm_first) != norm_first:
        raise Mistake(f"{what}(..., norm_first={norm_first}) must store self.norm_first = norm_first.")
    return student, reference


def _run(layer: nn.Module, *args: Any, what: str) -> np.ndarray:
    with torch.no_grad():
        return to_array(call(layer, *args), what)


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().cpu().numpy().astype(np.float64)


# ---------------------------------------------------------------------- encoder layer
def wrong_encoder_outputs(layer: EncoderLayer, x: torch.Tensor, mask: torch.Tensor | None) -> dict[str, np.ndarray]:
    """The outputs of the common wrong forward passes of an EncoderLayer (eval mode), with their hints."""
    n1, n2, ff = layer.norm1, layer.norm2, layer.ff

    def attn(q: torch.Tensor, m: torch.Tensor | None = mask) -> torch.Tensor:
        return layer.self_attn(q, q, q, m)

    with torch.no_grad():
        post = {
            "missing residual around self-attention: the first sub-layer must add its input, "
            "norm1(x + dropout1(self_attn(x, x, x, src_mask))).": n2(n1(attn(x)) + ff(n1(attn(x)))),
            "missing residual around the feed-forward: the second sub-layer must add its input, "
            "norm2(x + dropout2(ff(x))).": n2(ff(n1(x + attn(x)))),
            "no residual connections at all: each sub-layer's output must be added to its input "
            "before the LayerNorm, LayerNorm(x + Sublayer(x)).": n2(ff(n1(attn(x)))),
            "you wrote pre-norm (the norm before the sub-layer), but norm_first=False asks for the paper's "
            "post-norm: x = norm1(x + dropout1(self_attn(x, x, x, src_mask))).":
                (lambda h: h + ff(n2(h)))(x + attn(n1(x))),
            "the norm is applied to the sub-layer's output before the addition; the paper normalises the SUM: "
            "LayerNorm(x + Sublayer(x)).": (lambda h: h + n2(ff(h)))(x + n1(attn(x))),
            "norm1 and norm2 are swapped: norm1 belongs to the self-attention sub-layer, norm2 to the feed-forward.":
                (lambda h: n1(h + ff(h)))(n2(x + attn(x))),
            "the feed-forward sub-layer is missing: after self-attention comes x = norm2(x + dropout2(ff(x))).":
                n1(x + attn(x)),
            "src_mask is not passed to self-attention, so real tokens attend to padding: "
            "self_attn(x, x, x, src_mask).": (lambda h: n2(h + ff(h)))(n1(x + attn(x, None))),
        }
        pre = {
            "you wrote post-norm, but norm_first=True asks for pre-norm: x = x + dropout1(self_attn(norm1(x), ...)), "
            "then x = x + dropout2(ff(norm2(x))).": (lambda h: n2(h + ff(h)))(n1(x + attn(x))),
            "in pre-norm the residual adds the input x itself, not its normalised copy: "
            "x = x + dropout1(self_attn(h, h, h, src_mask)) with h = norm1(x).":
                (lambda h: (lambda g: g + ff(g))(n2(h)))(n1(x) + attn(n1(x))),
            "missing residual connections in the pre-norm branch: x = x + dropout1(...), x = x + dropout2(...).":
                ff(n2(attn(n1(x)))),
            "src_mask is not passed to self-attention in the pre-norm branch.":
                (lambda h: h + ff(n2(h)))(x + attn(n1(x), None)),
            "norm1 and norm2 are swapped in the pre-norm branch: norm1 goes before self-attention, norm2 before "
            "the feed-forward.": (lambda h: h + ff(n1(h)))(x + attn(n2(x))),
        }
    chosen = pre if layer.norm_first else post
    return {hint: _np(out) for hint, out in chosen.items()}


@exercise("encoder_layer", notebook="05_transformer", defines="EncoderLayer",
          success="correct! EncoderLayer.forward matches the reference, post-norm and pre-norm.")
def check_encoder_layer(EncoderLayerClass: Any) -> str:
    """Check the forward pass of a student's EncoderLayer class against helpers.EncoderLayer."""
    cls = _as_class(EncoderLayerClass, "EncoderLayer")
    gen = torch.Generator().manual_seed(5)
    x = torch.randn(2, 6, D_MODEL, generator=gen, dtype=torch.float64)
    tokens = torch.tensor([[5, 6, 7, 8, 9, 4], [3, 4, 5, 6, 0, 0]])
    mask = padding_mask(tokens, 0)  # (2, 1, 1, 6): the second sentence ends in two pads
    for norm_first in (False, True):
        name = "pre-norm" if norm_first else "post-norm"
        student, reference = _build_pair(cls, EncoderLayer, norm_first, seed=11 + norm_first, what="EncoderLayer")
        what = f"EncoderLayer(norm_first={norm_first}).forward(x, src_mask)"
        out = _run(student, x, mask, what=what)
        expect_shape(out, tuple(x.shape), what, "The layer keeps the shape (batch, L_src, d_model).")
        expect_finite(out, what)
        with torch.no_grad():
            expected = _np(reference(x, mask))
        if same(out, expected):
            continue
        if same(out, _np(x)):
            raise Mistake(f"{what} returns its input unchanged: apply the two sub-layers to x.")
        for hint, wrong in wrong_encoder_outputs(reference, x, mask).items():
            if same(out, wrong):
                raise Mistake(f"({name}) {hint}")
        _padding_leak(student, x, mask, what)
        raise Mistake(f"{what} ({name}) differs from the reference: {first_difference(out, expected)}.")
    _dropout_used(cls, lambda layer: layer(x, mask), "EncoderLayer", ("dropout1", "dropout2"))
    return ""


def _padding_leak(layer: nn.Module, x: torch.Tensor, mask: torch.Tensor, what: str) -> None:
    """Changing a padded position must not change the outputs of the real positions."""
    changed = x.clone()
    changed[1, -2:] += 3.0
    with torch.no_grad():
        a, b = layer(x, mask), layer(changed, mask)
    if not torch.allclose(a[1, :-2], b[1, :-2], atol=1e-9):
        raise Mistake(f"{what}: changing the PADDED tokens changes the output of the real ones, so src_mask "
                      "is not applied: pass it to self-attention.")


def _dropout_used(cls: type, run: Callable[[nn.Module], torch.Tensor], what: str, names: tuple[str, ...]) -> None:
    """In training mode, with only the residual dropouts active, the output must become random."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        layer = cls(D_MODEL, HEADS, D_FF, dropout=0.1, norm_first=False).double()
        for module in layer.modules():
            if isinstance(module, nn.Dropout):
                module.p = 0.0
        for name in names:
            getattr(layer, name).p = 0.5
        with torch.no_grad():
            eval_out = run(layer.eval())
            train_out = run(layer.train())
    if torch.allclose(eval_out, train_out):
        raise Mistake(f"{what}: in training mode the output does not change when {', '.join(names)} are active: "
                      "apply dropout to each sub-layer's output before the residual addition, e.g. "
                      "x + self.dropout1(sublayer_output).")


# ---------------------------------------------------------------------- decoder layer
def wrong_decoder_outputs(layer: DecoderLayer, x: torch.Tensor, memory: torch.Tensor, tgt_mask: torch.Tensor,
                          memory_mask: torch.Tensor) -> dict[str, np.ndarray]:
    """The outputs of the common wrong forward passes of a DecoderLayer (eval mode), with their hints.

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

    hints_post: dict[str, Callable[[], torch.Tensor]] = {
        "the causal mask is left out: masked self-attention must get tgt_mask, self_attn(x, x, x, tgt_mask), "
        "or position i sees the tokens after it.": lambda: post(n1(x + sa(x, None))),
        "in cross-attention K and V come from the decoder: the queries come from the decoder (x) but the keys "
        "and values from the encoder output, cross_attn(x, memory, memory, memory_mask).":
            lambda: post(n1(x + sa(x)), lambda h: ca(h, h)),
        "in cross-attention the queries come from memory: it is cross_attn(x, memory, memory, memory_mask), "
        "the decoder asks (Q) and the encoder answers (K, V).":
            lambda: (lambda h1: (lambda h2: n3(h2 + ff(h2)))(n2(h1 + layer.cross_attn(memory, h1, h1, memory_mask))))(
                n1(x + sa(x))),
        "memory_mask is not passed to cross-attention, so the decoder attends to the source's padding.":
            lambda: post(n1(x + sa(x)), lambda h: ca(h, memory, None)),
        "the two masks are swapped: tgt_mask goes to the masked self-attention, memory_mask to cross-attention.":
            lambda: post(n1(x + sa(x, memory_mask)), lambda h: ca(h, memory, tgt_mask)),
        "cross-attention reads the layer's input x instead of the output of the first sub-layer.":
            lambda: (lambda h1: (lambda h2: n3(h2 + ff(h2)))(n2(h1 + ca(x))))(n1(x + sa(x))),
        "the sub-layers are in the wrong order: masked self-attention first, then cross-attention, then the "
        "feed-forward.": lambda: (lambda h1: (lambda h2: n3(h2 + ff(h2)))(n2(h1 + sa(h1))))(n1(x + ca(x))),
        "missing residual around masked self-attention: norm1(x + dropout1(self_attn(x, x, x, tgt_mask))).":
            lambda: post(n1(sa(x))),
        "missing residual around cross-attention: norm2(x + dropout2(cross_attn(x, memory, memory, memory_mask))).":
            lambda: (lambda h2: n3(h2 + ff(h2)))(n2(ca(n1(x + sa(x))))),
        "missing residual around the feed-forward: norm3(x + dropout3(ff(x))).":
            lambda: (lambda h1: n3(ff(n2(h1 + ca(h1)))))(n1(x + sa(x))),
        "no residual connections at all: each sub-layer's output is added to its input before the LayerNorm.":
            lambda: n3(ff(n2(ca(n1(sa(x)))))),
        "you wrote pre-norm (the norm before each sub-layer), but norm_first=False asks for the paper's post-norm: "
        "x = norm1(x + dropout1(self_attn(x, x, x, tgt_mask))), and so on.":
            lambda: (lambda h1: (lambda h2: h2 + ff(n3(h2)))(h1 + ca(n2(h1))))(x + sa(n1(x))),
        "the norm is applied to each sub-layer's output before the addition; the paper normalises the SUM: "
        "LayerNorm(x + Sublayer(x)).":
            lambda: (lambda h1: (lambda h2: h2 + n3(ff(h2)))(h1 + n2(ca(h1))))(x + n1(sa(x))),
        "the norms are mixed up: norm1 follows masked self-attention, norm2 cross-attention, norm3 the feed-forward.":
            lambda: (lambda h1: (lambda h2: n1(h2 + ff(h2)))(n3(h1 + ca(h1))))(n2(x + sa(x))),
        "the feed-forward sub-layer is missing: the third sub-layer is x = norm3(x + dropout3(ff(x))).":
            lambda: (lambda h1: n2(h1 + ca(h1)))(n1(x + sa(x))),
    }
    hints_pre: dict[str, Callable[[], torch.Tensor]] = {
        "you wrote post-norm, but norm_first=True asks for pre-norm: x = x + dropout1(self_attn(h, h, h, tgt_mask)) "
        "with h = norm1(x), and so on.": lambda: post(n1(x + sa(x))),
        "the causal mask is left out in the pre-norm branch: self_attn(h, h, h, tgt_mask).":
            lambda: (lambda h1: (lambda h2: h2 + ff(n3(h2)))(h1 + ca(n2(h1)))) (x + sa(n1(x), None)),
        "in cross-attention K and V come from the decoder (pre-norm branch): use memory for the keys and values, "
        "cross_attn(norm2(x), memory, memory, memory_mask).":
            lambda: (lambda h1: (lambda h2: h2 + ff(n3(h2)))(h1 + ca(n2(h1), n2(h1))))(x + sa(n1(x))),
        "in pre-norm the residual adds the input x itself, not its normalised copy.":
            lambda: (lambda h1: (lambda h2: n3(h2) + ff(n3(h2)))(n2(h1) + ca(n2(h1))))(n1(x) + sa(n1(x))),
        "missing residual connections in the pre-norm branch: x = x + dropout(...) after each sub-layer.":
            lambda: ff(n3(ca(n2(sa(n1(x)))))),
        "memory_mask is not passed to cross-attention in the pre-norm branch.":
            lambda: (lambda h1: (lambda h2: h2 + ff(n3(h2)))(h1 + ca(n2(h1), memory, None)))(x + sa(n1(x))),
        "the norms are mixed up in the pre-norm branch: norm1 before self-attention, norm2 before "
        "cross-attention, norm3 before the feed-forward.":
            lambda: (lambda h1: (lambda h2: h2 + ff(n1(h2)))(h1 + ca(n3(h1))))(x + sa(n2(x))),
    }
    chosen = hints_pre if layer.norm_first else hints_post
    out = {}
    with torch.no_grad():
        for hint, make in chosen.items():
            try:
                out[hint] = _np(make())
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
          success="correct! DecoderLayer.forward matches the reference: masked self-attention, "
                                 "cross-attention and feed-forward, post-norm and pre-norm.")
def check_decoder_layer(DecoderLayerClass: Any) -> str:
    """Check the forward pass of a student's DecoderLayer class against helpers.DecoderLayer."""
    cls = _as_class(DecoderLayerClass, "DecoderLayer")
    for norm_first in (False, True):
        name = "pre-norm" if norm_first else "post-norm"
        student, reference = _build_pair(cls, DecoderLayer, norm_first, seed=21 + norm_first, what="DecoderLayer")
        # First L_tgt == L_src, so that every mistake still runs and can be recognised; then L_tgt != L_src.
        for l_tgt, l_src in ((6, 6), (4, 7)):
            x, memory, tgt_mask, memory_mask = _decoder_inputs(l_tgt, l_src, seed=l_tgt * 10 + l_src)
            what = (f"DecoderLayer(norm_first={norm_first}).forward(x, memory, tgt_mask, memory_mask) "
                    f"with L_tgt={l_tgt}, L_src={l_src}")
            out = _run(student, x, memory, tgt_mask, memory_mask, what=what)
            expect_shape(out, tuple(x.shape), what, "The output has the decoder's shape (batch, L_tgt, d_model).")
            expect_finite(out, what)
            with torch.no_grad():
                expected = _np(reference(x, memory, tgt_mask, memory_mask))
            if same(out, expected):
                continue
            for hint, wrong in wrong_decoder_outputs(reference, x, memory, tgt_mask, memory_mask).items():
                if same(out, wrong):
                    raise Mistake(f"({name}) {hint}")
            _future_leak(student, x, memory, tgt_mask, memory_mask, what)
            raise Mistake(f"{what} ({name}) differs from the reference: {first_difference(out, expected)}.")
    x, memory, tgt_mask, memory_mask = _decoder_inputs(4, 7, seed=47)
    _dropout_used(cls, lambda layer: layer(x, memory, tgt_mask, memory_mask), "DecoderLayer",
                  ("dropout1", "dropout2", "dropout3"))
    return ""


def _future_leak(layer: nn.Module, x: torch.Tensor, memory: torch.Tensor, tgt_mask: torch.Tensor,
                 memory_mask: torch.Tensor, what: str) -> None:
    """Changing the last target position must not change the outputs of the earlier ones."""
    changed = x.clone()
    changed[:, -1] += 3.0
    with torch.no_grad():
        a = layer(x, memory, tgt_mask, memory_mask)
        b = layer(changed, memory, tgt_mask, memory_mask)
    if not torch.allclose(a[:, :-1], b[:, :-1], atol=1e-9):
        raise Mistake(f"{what}: changing the LAST target token changes the outputs of earlier positions, so the "
                      "decoder can see the future: pass tgt_mask to the masked self-attention.")


# ---------------------------------------------------------------------- greedy decoding
START, END, MAX_LEN = 1, 2, 8


def _decoding_model() -> Transformer:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(5)
        model = Transformer(12, 9, d_model=D_MODEL, num_heads=2, num_layers=2, d_ff=D_FF, dropout=0.1, max_len=32)
    with torch.no_grad():  # make </s> (id 2) likely enough that some rows end early and some do not
        model.generator.bias[END] += 1.0
    return model.eval()


def _decoding_source() -> torch.Tensor:
    gen = torch.Generator().manual_seed(4)
    src = torch.randint(3, 12, (6, 7), generator=gen)
    src[1, -3:] = 0
    src[4, -1:] = 0
    return src


def _cut(row: np.ndarray) -> list[int]:
    """A generated row up to and including its first </s>."""
    out = []
    for token in row.tolist():
        out.append(int(token))
        if token == END:
            break
    return out


def _wrong_decodings(model: Transformer, src: torch.Tensor) -> dict[str, np.ndarray]:
    batch = src.shape[0]
    src_mask = model.make_src_mask(src)

    def run(first_only: bool = False, decode_without_mask: bool = False) -> np.ndarray:
        mask = None if decode_without_mask else src_mask
        memory = model.encode(src, src_mask)
        ys = torch.full((batch, 1), START, dtype=torch.long)
        generated = []
        for _ in range(MAX_LEN):
            logits = model.decode(ys, memory, mask, model.make_tgt_mask(ys))
            token = (logits[:, 0] if first_only else logits[:, -1]).argmax(-1, keepdim=True)
            generated.append(token)
            ys = torch.cat([ys, token], dim=1)
        return torch.cat(generated, dim=1).numpy()

    with torch.no_grad():
        return {
            # With a causal decoder these two mistakes give the same tokens, so one hint names both.
            "every step repeats the first step's prediction: feed the decoder everything generated so far (ys), "
            "and read the next token from the LAST position, logits[:, -1], not the FIRST position.":
                run(first_only=True),
            "decode gets no src_mask, so cross-attention looks at the source's padding: "
            "model.decode(ys, memory, src_mask, tgt_mask).": run(decode_without_mask=True),
        }


@exercise("greedy_decode", notebook="05_transformer", defines="greedy_decode",
          success="correct! One token at a time, always the most likely one.")
def check_greedy_decode(greedy_decode_fn: Any) -> str:
    """Check a student's greedy_decode(model, src, max_len, start_id, end_id) against the reference."""
    model, src = _decoding_model(), _decoding_source()
    what = f"greedy_decode(model, src, max_len={MAX_LEN}, start_id={START}, end_id={END})"
    with torch.no_grad():
        expected = reference_greedy_decode(model, src, MAX_LEN, START, END).numpy()
        result = call(greedy_decode_fn, model, src, MAX_LEN, START, END)
    out = to_array(result, what)
    if out.ndim != 2 or out.shape[0] != src.shape[0]:
        raise Mistake(f"{what} has shape {out.shape}, expected (batch={src.shape[0]}, n) with n <= max_len: "
                      "one row of generated token ids per source.")
    expect_finite(out, what)
    if out.shape[1] == MAX_LEN + 1 and np.all(out[:, 0] == START):
        raise Mistake(f"{what}: every row starts with the start token {START}: return the generated tokens "
                      "without it, ys[:, 1:].")
    if out.shape[1] > MAX_LEN:
        raise Mistake(f"{what} returns {out.shape[1]} tokens per row, more than max_len={MAX_LEN}: "
                      "generate at most max_len tokens.")
    if not np.all(out == np.round(out)):
        raise Mistake(f"{what} returns non-integer values: return token ids (the argmax), not probabilities.")
    mine = [_cut(row) for row in out.astype(np.int64)]
    reference = [_cut(row) for row in expected]
    if mine == reference:
        return f"Checked on {src.shape[0]} sources, some ending early."
    for hint, wrong in _wrong_decodings(model, src).items():
        if mine == [_cut(row) for row in wrong[:, :out.shape[1]]]:
            raise Mistake(hint)
    if any(len(m) < len(r) and (not m or m[-1] != END) for m, r in zip(mine, reference)):
        raise Mistake(f"{what} stops too early: keep generating until every row has produced end_id "
                      "or max_len tokens are generated.")
    row = next(i for i, (m, r) in enumerate(zip(mine, reference)) if m != r)
    raise Mistake(f"{what}: row {row} is {mine[row]}, the reference decodes {reference[row]}. At each step take "
                  "the argmax of the last position's logits and append it to the decoder input.")


__all__ = ["check_decoder_layer", "check_encoder_layer", "check_greedy_decode", "wrong_decoder_outputs",
           "wrong_encoder_outputs"]
