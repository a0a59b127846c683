"""Check for notebook 03's torch exercise: the forward of a MultiHeadAttention module.

The student's forward(query, key, value, mask=None) runs with the reference's weights, in eval and train mode
under a fixed seed; its output, stored attention_weights (both modules with store_attention_weights = True),
gradients and untouched inputs are compared with the reference (itself compared with nn.MultiheadAttention).
Last, with store_attention_weights = False, forward must store nothing.
"""

from __future__ import annotations

import math
import traceback
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..i18n import tr
from ..multi_head import MultiHeadAttention as Reference
from ..multi_head import to_nn_multihead_attention
from .harness import (Known, Mistake, call, compare, exercise, expect_shape, generic, graded, match_known, same,
                      to_array)
from .source import answer_files

MODULE_MISTAKES = {
    "not_a_class": "expected the class MultiHeadAttention itself, got {kind}. Pass the class, without ().",
    "projection_missing": "your module has no nn.Linear `{name}` of shape (d_model, d_model): keep the given "
                          "__init__ (w_q, w_k, w_v, w_o and dropout) and write only forward.",
    "returned_tuple": "forward returned a {kind}; it must return only the output (batch, L_q, d_model), as "
                      "helpers.MultiHeadAttention does, and keep the weights in self.attention_weights when "
                      "self.store_attention_weights is True.",
    "no_scaling": "the scores are not scaled: divide them by sqrt(d_k) = {sqrt_d_k}, with d_k = d_model / h.",
    "scaled_by_d_k": "you divided the scores by d_k = {d_k}: the scale is 1 / sqrt(d_k), so divide by "
                     "sqrt(d_k) = {sqrt_d_k}.",
    "scaled_by_sqrt_d_model": "you scaled by sqrt(d_model) = {sqrt_d_model}: each head uses its own "
                              "d_k = d_model / h = {d_k}, so the scale is 1 / sqrt(d_k).",
    "mask_inverted": "the mask is inverted: in this course True = may attend, so the scores to fill are those "
                     "where the mask is False, unlike nn.MultiheadAttention's masks (True = blocked).",
    "mask_ignored": "you ignored the mask: fill the scores where it is False before the softmax (it broadcasts "
                    "over the heads).",
    "softmax_wrong_axis": "the softmax runs over the wrong axis: each query's weights over the keys must sum "
                          "to 1, so normalise over the last axis (the L_k axis).",
    "split_without_transpose": "you split the heads with a view or reshape straight to (batch, h, L, d_k): that "
                               "silently mixes positions across heads. Reshape to (batch, L, h, d_k), then "
                               "exchange the L and h axes.",
    "combine_without_transpose": "you combined the heads with a reshape straight from (batch, h, L_q, d_k) to "
                                 "(batch, L_q, d_model): that mixes positions across heads. Exchange the h and L_q "
                                 "axes first, then merge the last two.",
    "no_output_projection": "you returned the concatenated heads without the output projection: pass them "
                            "through self.w_o.",
    "fully_masked_nan": "a query whose keys are all masked gives NaN: filling with -inf makes its softmax 0/0. "
                        "After the softmax, set the weights of the masked keys to exactly zero, which replaces that "
                        "NaN; or fill with the most negative finite float of the scores' dtype, which avoids it "
                        "(the zeros after the softmax are needed then too).",
    "fully_masked_uniform": "a query whose keys are all masked gets uniform weights (an average of every value) "
                            "instead of zeros: after the softmax, set the weights of the masked keys to zero.",
    "dropout_missing": "in training mode your output equals the output without dropout: apply self.dropout to the "
                       "attention weights, before multiplying them by v.",
    "dropout_on_output": "you applied dropout to the output; here it belongs on the attention weights, before "
                         "multiplying them by v (the layers of notebook 05 apply their own dropout to the output).",
    "weights_not_stored": "self.attention_weights is {value} after a forward with self.store_attention_weights "
                          "= True: when it is True, store the weights (batch, h, L_q, L_k) there, detached; the "
                          "plots read them.",
    "weights_stored_unasked": "self.attention_weights is set after a forward with self.store_attention_weights "
                              "= False: store the weights only when it is True (the given __init__ sets it to "
                              "False), so that training does not keep a (batch, h, L_q, L_k) tensor alive in "
                              "every layer.",
    "weights_after_dropout": "self.attention_weights holds the weights after dropout: store them before "
                             "dropout, as the plots expect.",
    "weights_not_detached": "self.attention_weights is still attached to the autograd graph: store "
                            "them detached, so that keeping them for the plots does not keep the graph alive.",
    "gradient_blocked": "no gradient reaches {name}: something in forward cuts the graph (.detach(), .data, "
                        "numpy, or torch.no_grad()).",
    "changed_input": "forward changed its input `{name}` in place; use out-of-place operations "
                      "(masked_fill, not masked_fill_).",
    "in_place_on_input": "forward changes one of its inputs in place{where}, which torch refuses for a tensor that "
                         "requires gradients (the inputs of a layer in a model do). Use out-of-place operations: "
                         "x = x * s, not x *= s or x.mul_(s).",
    "view_not_contiguous": "forward calls .view on a tensor whose numbers are not in memory order{where}: after "
                           "a transpose, view cannot regroup them. Use .reshape(...), or .contiguous().view(...).",
    "mask_after_softmax": "you applied the mask after the softmax only: the weights of a query no longer sum to 1, "
                          "since the blocked keys took their share first. Fill the blocked scores before the "
                          "softmax, then set the weights of blocked keys to zero.",
    "wrong_projection": "the queries, keys and values do not each go through their own projection: "
                        "q = self.w_q(query), k = self.w_k(key), v = self.w_v(value).",
    "w_o_weight_used": "you multiplied by self.w_o.weight instead of calling the layer: nn.Linear stores its weight "
                       "as (out, in) and adds a bias. Call self.w_o(concat), which computes "
                       "concat @ w_o.weight.T + w_o.bias.",
    "heads_on_batch_axis": "{what} has shape {shape}, which is (batch * h, L_q, L_k): the heads are stacked on the "
                           "batch axis. Store the weights as (batch, h, L_q, L_k) = {expected}.",
}

DROPOUT = 0.5
_STATIC = ("helpers.multi_head.MultiHeadAttention", "torch.nn.MultiheadAttention",
           "torch.nn.functional.scaled_dot_product_attention", "torch.nn.functional.multi_head_attention_forward")
_LINEARS = ("w_q", "w_k", "w_v", "w_o")


def _case(gen: torch.Generator, device: str | torch.device, h: int, d_k: int, batch: int, l_q: int, l_k: int,
          masked: bool = True) -> dict:
    """A float64 cross-attention case drawn from gen, on device; its mask fully masks query 1 of batch 0."""
    query, key, value = (torch.randn(batch, length, h * d_k, generator=gen, dtype=torch.float64).to(device)
                         for length in (l_q, l_k, l_k))
    mask = None
    if masked:
        mask = torch.rand(batch, 1, l_q, l_k, generator=gen) > 0.4
        mask[..., 0], mask[..., -1] = True, False
        mask[0, :, 1, :] = False  # a query that may attend to nothing
        mask = mask.to(device)
    return dict(d_model=h * d_k, h=h, query=query, key=key, value=value, mask=mask)


def module_cases(device: str | torch.device = "cpu") -> list[dict]:
    """Cross-attention cases (L_q != L_k): no mask with h = 2, then h = 4 with a mask and a fully masked query."""
    gen = torch.Generator().manual_seed(60)
    return [_case(gen, device, 2, 4, 2, 3, 5, masked=False), _case(gen, device, 4, 4, 3, 4, 6)]


def _drawn_case(rng: np.random.Generator, device: str | torch.device) -> dict:
    gen = torch.Generator().manual_seed(int(rng.integers(2 ** 31)))
    return _case(gen, device, *(int(n) for n in rng.integers(2, 6, size=5)))


def _label(case: dict) -> str:
    mask = "" if case["mask"] is None else tr("multi_head_attention_module:with_mask", ", mask {shape} with a fully "
                                              "masked query row", shape=tuple(case["mask"].shape))
    return (f"MultiHeadAttention(d_model={case['d_model']}, num_heads={case['h']})(query "
            f"{tuple(case['query'].shape)}, key/value {tuple(case['key'].shape)}{mask})")


def attend(m: nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, mask: torch.Tensor | None, *,
           scale: str = "d_k", mask_inverted: bool = False, ignore_mask: bool = False, softmax_dim: int = -1,
           split_transposed: bool = True, combine_transposed: bool = True, fill: str = "finite_then_zero",
           dropout: str = "weights", use_w_o: bool = True, projections: tuple[str, str, str] = ("w_q", "w_k", "w_v"),
           w_o: str = "layer") -> tuple[torch.Tensor, torch.Tensor]:
    """(output, weights before dropout) of m's forward: the reference's with the defaults, each option a mistake."""
    batch, l_q, d_model = query.shape
    h, d_k = m.num_heads, d_model // m.num_heads

    def split(x: torch.Tensor) -> torch.Tensor:
        if split_transposed:
            return x.reshape(batch, x.shape[1], h, d_k).transpose(1, 2)  # (batch, h, L, d_k)
        return x.reshape(batch, h, x.shape[1], d_k)

    q, k, v = (split(getattr(m, name)(x)) for name, x in zip(projections, (query, key, value)))
    divisor = {"d_k": math.sqrt(d_k), "d_model": math.sqrt(d_model), "none": 1.0, "d_k_itself": d_k}[scale]
    scores = q @ k.transpose(-2, -1) / divisor  # (batch, h, L_q, L_k)
    weights = torch.softmax(scores, dim=softmax_dim)
    if mask is not None and not ignore_mask:
        blocked = mask if mask_inverted else ~mask
        filler = float("-inf") if fill == "neg_inf" else torch.finfo(scores.dtype).min
        if fill != "after_softmax":
            weights = torch.softmax(scores.masked_fill(blocked, filler), dim=softmax_dim)
        if fill in ("finite_then_zero", "after_softmax"):
            weights = weights.masked_fill(blocked, 0.0)
    p = m.dropout.p
    dropped = F.dropout(weights, p, m.training) if dropout == "weights" else weights
    heads = dropped @ v  # (batch, h, L_q, d_k)
    concat = (heads.transpose(1, 2) if combine_transposed else heads).reshape(batch, l_q, d_model)
    out = {"layer": m.w_o(concat), "weight": concat @ m.w_o.weight, "weight.T": concat @ m.w_o.weight.T,
           "none": concat}["layer" if use_w_o and w_o == "layer" else w_o if use_w_o else "none"]
    if dropout == "output":
        out = F.dropout(out, p, m.training)
    return out, weights


def wrong_forwards(m: nn.Module, case: dict) -> dict[Any, dict]:
    """The usual wrong forwards: mistake code (or Known) -> the options of `attend` that produce it."""
    d_model, h = case["d_model"], case["h"]
    wrong: dict[Any, dict] = {
        Known("no_scaling", sqrt_d_k=f"{math.sqrt(d_model // h):.3g}"): dict(scale="none"),
        Known("scaled_by_sqrt_d_model", sqrt_d_model=f"{math.sqrt(d_model):.3g}", d_k=d_model // h):
            dict(scale="d_model"),
        Known("scaled_by_d_k", d_k=d_model // h, sqrt_d_k=f"{math.sqrt(d_model // h):.3g}"): dict(scale="d_k_itself"),
        "softmax_wrong_axis": dict(softmax_dim=-2),
        "split_without_transpose": dict(split_transposed=False),
        "combine_without_transpose": dict(combine_transposed=False),
        "no_output_projection": dict(use_w_o=False),
        "w_o_weight_used": dict(w_o="weight"),
        Known("w_o_weight_used"): dict(w_o="weight.T"),
    }
    for projections in (("w_q", "w_q", "w_v"), ("w_q", "w_k", "w_k"), ("w_q", "w_v", "w_k"), ("w_q", "w_q", "w_q"),
                        ("w_q", "w_k", "w_q"), ("w_q", "w_q", "w_k")):
        wrong[Known("wrong_projection")] = dict(projections=projections)
    if case["mask"] is not None:
        wrong.update({"mask_inverted": dict(mask_inverted=True), "mask_ignored": dict(ignore_mask=True),
                      "fully_masked_nan": dict(fill="neg_inf"), "fully_masked_uniform": dict(fill="finite"),
                      "mask_after_softmax": dict(fill="after_softmax")})
    if m.training:
        wrong.update({"dropout_missing": dict(dropout="none"), "dropout_on_output": dict(dropout="output")})
    return wrong


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().cpu().numpy().astype(np.float64)


def _build(cls: type, case: dict, seed: int, store: bool = True) -> tuple[nn.Module, Reference]:
    """The student's module (through call()) holding the weights of a seeded reference module, both with
    store_attention_weights = store."""
    torch.manual_seed(seed)
    reference = Reference(case["d_model"], case["h"], DROPOUT).double().to(case["query"].device)
    student = call(cls, case["d_model"], case["h"], DROPOUT)
    if not isinstance(student, nn.Module):
        raise Known("not_a_class", kind=type(student).__name__)
    for name in _LINEARS:
        linear = getattr(student, name, None)
        if not isinstance(linear, nn.Linear) or tuple(linear.weight.shape) != (case["d_model"],) * 2:
            raise Known("projection_missing", name=name)
    student = student.double().to(case["query"].device)
    with torch.no_grad():
        for name in _LINEARS:
            for kind in ("weight", "bias"):
                getattr(getattr(student, name), kind).copy_(getattr(getattr(reference, name), kind))
    student.store_attention_weights = reference.store_attention_weights = store
    return student, reference


def _forward(module: nn.Module, case: dict, seed: int, student: bool) -> tuple[list, torch.Tensor | None, Any]:
    """Fresh leaf copies of query, key, value (requiring grad) and of the mask, and the seeded forward on them."""
    tensors = [case[name].detach().clone().requires_grad_(True) for name in ("query", "key", "value")]
    mask = None if case["mask"] is None else case["mask"].clone()
    torch.manual_seed(seed)
    args = tensors + ([] if mask is None else [mask])
    return tensors, mask, call(module.forward, *args) if student else module(*args)  # forward: the message names it


def _student_forward(student: nn.Module, case: dict, seed: int) -> tuple[list, torch.Tensor | None, Any]:
    """_forward of the student's module; a crash that an in-place change of an input or a view of a tensor out of
    memory order explains is named."""
    tensors = [case[name].detach().clone().requires_grad_(True) for name in ("query", "key", "value")]
    mask = None if case["mask"] is None else case["mask"].clone()
    torch.manual_seed(seed)
    try:
        return tensors, mask, call(student.forward, *tensors, *([] if mask is None else [mask]))
    except Mistake as mistake:
        error = mistake.__context__
        if mistake.code != "raised_error" or not isinstance(error, RuntimeError):
            raise
        for name, given in zip(("query", "key", "value", "mask"), [*tensors, mask]):
            if given is not None and not torch.equal(given.detach(), case[name]):
                raise Known("changed_input", name=name) from None
        text, where = str(error), _where(error, student)
        if "in-place operation" in text and "leaf Variable" in text:
            raise Known("in_place_on_input", where=where) from None
        if "view size is not compatible" in text:
            raise Known("view_not_contiguous", where=where) from None
        raise


def _where(error: BaseException, answer: Any) -> str:
    """" (at line N: `code`)" of the last traceback frame in the answer's own code, or ""."""
    files = answer_files(type(answer))
    frame = next((f for f in reversed(traceback.extract_tb(error.__traceback__)) if f.filename in files), None)
    if frame is None or not (frame.line or "").strip():
        return ""
    return tr("harness:at_line_code", " (at line {line}: `{code}`)", line=frame.lineno, code=frame.line.strip())


def _check_nn_multihead(reference: Reference, case: dict, expected: torch.Tensor) -> None:
    """The reference equals nn.MultiheadAttention (mask converted: True = blocked) on every row that is
    not fully masked; a disagreement is a bug of the course, reported as one."""
    theirs = to_nn_multihead_attention(reference).eval()
    mask = case["mask"]
    nn_mask = None if mask is None else (~mask).expand(-1, case["h"], -1, -1).reshape(-1, *mask.shape[-2:])
    with torch.no_grad():
        out, _ = theirs(case["query"], case["key"], case["value"], attn_mask=nn_mask, need_weights=False)
    rows = torch.ones(out.shape[:2], dtype=torch.bool, device=out.device) if mask is None else mask.any(-1)[:, 0]
    if not torch.allclose(out[rows], expected[rows], rtol=1e-7, atol=1e-9):
        raise RuntimeError("helpers.MultiHeadAttention differs from nn.MultiheadAttention")


def _output(result: Any, what: str, expected_shape: tuple) -> np.ndarray:
    if isinstance(result, (tuple, list)):
        raise Known("returned_tuple", kind=tr("multi_head_attention_module:tuple_of", "{kind} of {n} values",
                                              kind=type(result).__name__, n=len(result)))
    if result is not None and not isinstance(result, torch.Tensor):
        raise generic("not_an_array", what=what, kind=type(result).__name__,
                      expected=tr("multi_head_attention_module:a_tensor", "a torch tensor"))
    output = to_array(result, what)
    expect_shape(output, expected_shape, what, tr("multi_head_attention_module:output_shape",
                                                  "The output is (batch, L_q, d_model)."))
    return output


def _check_weights(student: nn.Module, reference: Reference, wrong_weights: dict, what: str) -> None:
    stored = getattr(student, "attention_weights", None)
    if not isinstance(stored, torch.Tensor):
        raise Known("weights_not_stored", value=repr(stored) if stored is None else type(stored).__name__)
    if stored.requires_grad:
        raise Known("weights_not_detached")
    actual = _np(stored)
    expected = _np(reference.attention_weights)
    where = tr("multi_head_attention_module:stored", "{what}: self.attention_weights", what=what)
    batch, heads = expected.shape[:2]
    if actual.shape == (batch * heads, *expected.shape[2:]) and same(actual, expected.reshape(actual.shape)):
        raise Known("heads_on_batch_axis", what=where, shape=actual.shape, expected=expected.shape)
    expect_shape(actual, expected.shape, where, tr("multi_head_attention_module:weights_shape",
                                                   "The weights are (batch, h, L_q, L_k)."))
    compare(actual, expected, wrong_weights, where)


def _check_gradients(student: nn.Module, reference: Reference, tensors: list, ref_tensors: list) -> None:
    named = [(name, t, r) for name, t, r in zip(("query", "key", "value"), tensors, ref_tensors)]
    named += [(f"{layer}.{kind}", getattr(getattr(student, layer), kind), getattr(getattr(reference, layer), kind))
              for layer in _LINEARS for kind in ("weight", "bias")]
    for name, mine, theirs in named:
        expected = _np(theirs.grad)
        if mine.grad is None or (not mine.grad.any() and np.abs(expected).max() > 1e-9):
            raise Known("gradient_blocked", name=name)
        what = tr("multi_head_attention_module:gradient", "the gradient of {name}", name=name)
        compare(_np(mine.grad), expected, {}, what)


def _run_case(cls: type, case: dict, train: bool, seed: int) -> None:
    student, reference = _build(cls, case, seed)
    for module in (student, reference):
        nn.Module.train(module, train)
    what = _label(case) + (tr("multi_head_attention_module:train_mode", " in train mode (dropout {p})", p=DROPOUT)
                           if train else "")
    ref_tensors, ref_mask, expected = _forward(reference, case, seed, student=False)  # before the student's call
    if not train:
        _check_nn_multihead(reference, case, expected)
    tensors, mask, result = _student_forward(student, case, seed)
    for name, given in zip(("query", "key", "value", "mask"), [*tensors, mask]):
        if given is not None and not torch.equal(given.detach(), case[name]):
            raise Known("changed_input", name=name)
    output = _output(result, what, tuple(expected.shape))
    if not same(output, _np(expected)):
        wrong = {}
        for key, options in wrong_forwards(reference, case).items():
            torch.manual_seed(seed)
            with torch.no_grad():
                wrong[key] = _np(attend(reference, *ref_tensors, ref_mask, **options)[0])
        match_known(output, wrong)
        compare(output, _np(expected), {}, what)
    torch.manual_seed(seed)
    with torch.no_grad():
        dropped_weights = F.dropout(reference.attention_weights, DROPOUT, train)
    _check_weights(student, reference, {"weights_after_dropout": _np(dropped_weights)} if train else {}, what)
    gen = torch.Generator().manual_seed(61)  # a fixed direction: (output * projection).sum() tests every gradient
    projection = torch.randn(expected.shape, generator=gen, dtype=torch.float64).to(expected.device)
    (expected * projection).sum().backward()

    def backward() -> None:  # the student's graph: a crash in it is reported like one in forward
        (result * projection).sum().backward()

    call(backward)
    _check_gradients(student, reference, tensors, ref_tensors)


def _check_not_stored_unasked(cls: type, case: dict, seed: int) -> None:
    """With store_attention_weights = False (its default), a forward in train mode leaves attention_weights None."""
    student, _ = _build(cls, case, seed, store=False)
    student.attention_weights = None
    nn.Module.train(student, True)
    _student_forward(student, case, seed)
    if getattr(student, "attention_weights", None) is not None:
        raise Known("weights_stored_unasked")


@exercise("multi_head_attention_module", notebook="03_multi_head_attention", points=4, defines="MultiHeadAttention",
          reference="helpers.multi_head.MultiHeadAttention",
          success="correct! Your module equals nn.MultiheadAttention and the reference, in eval and train mode, "
                  "gradients included.",
          mistakes=MODULE_MISTAKES, off_limits=_STATIC + ("torch.ops.aten.*scaled_dot_product*",))
def check_multi_head_attention_module(MultiHeadAttentionClass: Any) -> str:
    """Check a student's MultiHeadAttention class (its forward) against the reference and nn.MultiheadAttention."""
    if isinstance(MultiHeadAttentionClass, nn.Module):
        raise Known("not_a_class", kind=type(MultiHeadAttentionClass).__name__)
    if not isinstance(MultiHeadAttentionClass, type):
        raise generic("not_callable", kind=type(MultiHeadAttentionClass).__name__)
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    for device in devices:
        for index, case in enumerate(graded(module_cases(device), lambda rng: _drawn_case(rng, device))):
            for train in (False, True):
                _run_case(MultiHeadAttentionClass, case, train, seed=70 + index)
    _check_not_stored_unasked(MultiHeadAttentionClass, module_cases("cpu")[1], seed=70)
    return tr("multi_head_attention_module:checked", "Checked h = 2 and h = 4 with L_q != L_k, a fully masked "
              "query row, and the gradients of the inputs and of the parameters.")
