"""The check of notebook 03's torch exercise (MultiHeadAttention.forward): it accepts the solution of the
notebook and the reference, names each usual mistake with its own code only when the answer is that mistake,
and never raises, whatever the student's class does.

Each wrong answer is the solution's source with one student-style change, so the tests exercise what a
student would write. Tests assert mistake codes, never hint words.
"""

import math

import pytest
import torch
from conftest import define, solution_source
from torch import nn

import helpers
from helpers.checks import EXERCISES, check_multi_head_attention_module
from helpers.checks.harness import Verdict

NAME = "multi_head_attention_module"


def solution() -> str:
    return solution_source("03_multi_head_attention", "MultiHeadAttention")


def build(source: str) -> type:
    namespace = {"math": math, "torch": torch, "nn": nn, "helpers": helpers}
    define(source, namespace)
    return namespace["MultiHeadAttention"]


def changed(old, new) -> type:
    """The solution with every occurrence of old replaced by new (or of each old by its new, for tuples)."""
    source = solution()
    for o, n in zip(*((old, new) if isinstance(old, tuple) else ((old,), (new,)))):
        assert o in source, f"the solution no longer contains {o!r}"
        source = source.replace(o, n)
    return build(source)


def run(candidate, capsys=None) -> Verdict:
    verdict = check_multi_head_attention_module(candidate)
    assert isinstance(verdict, Verdict) and "\n" not in str(verdict)
    if capsys is not None:
        assert capsys.readouterr().out == ""
    assert verdict.mistake != "check_error", verdict
    assert "{" not in verdict.message, verdict
    return verdict


# The solution stores its weights only when asked, in two lines.
STORE = ("if self.store_attention_weights:  # only when asked: a plot needs them, training does not\n"
         "            self.attention_weights = weights.detach()")

# (code, old, new): one student-style change of the solution's forward per usual mistake.
EDITS = [
    ("no_scaling", " / math.sqrt(self.d_k)", ""),
    ("scaled_by_sqrt_d_model", "math.sqrt(self.d_k)", "math.sqrt(self.d_model)"),
    ("mask_inverted", "masked_fill(~mask", "masked_fill(mask"),
    ("mask_ignored", "if mask is not None:", "if False:"),
    ("softmax_wrong_axis", "torch.softmax(scores, dim=-1)", "torch.softmax(scores, dim=-2)"),
    ("split_without_transpose", "x.view(batch, x.shape[1], self.num_heads, self.d_k).transpose(1, 2)",
     "x.reshape(batch, self.num_heads, x.shape[1], self.d_k)"),
    ("combine_without_transpose", "heads.transpose(1, 2).reshape(", "heads.reshape("),
    ("no_output_projection", "return self.w_o(concat)", "return concat"),
    ("fully_masked_nan", ("torch.finfo(scores.dtype).min", "weights = weights.masked_fill(~mask, 0.0)"),
     ("float('-inf')", "pass")),
    ("fully_masked_uniform", "weights = weights.masked_fill(~mask, 0.0)", "pass"),
    ("dropout_missing", "self.dropout(weights) @ v", "weights @ v"),
    ("weights_after_dropout", STORE + "\n        heads = self.dropout(weights) @ v",
     "weights = self.dropout(weights)\n        " + STORE + "\n        heads = weights @ v"),
    ("weights_not_detached", "self.attention_weights = weights.detach()", "self.attention_weights = weights"),
    ("weights_not_stored", "self.attention_weights = weights.detach()", "pass"),
    ("weights_stored_unasked", STORE, "self.attention_weights = weights.detach()"),  # the flag ignored
    ("returned_tuple", "return self.w_o(concat)", "return self.w_o(concat), weights"),
    ("changed_input", "scores = scores.masked_fill(~mask", "mask.logical_not_(); mask.logical_not_(); "
     "query.data.add_(0); mask[..., 0] = False; scores = scores.masked_fill(~mask"),
    ("gradient_blocked", "split(self.w_q(query))", "split(self.w_q(query.detach()))"),
    ("scaled_by_d_k", "math.sqrt(self.d_k)", "self.d_k"),
    ("mask_after_softmax", ("scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)",
                            "weights = weights.masked_fill(~mask, 0.0)"), ("pass", "weights = weights * mask")),
    ("wrong_projection", "split(self.w_k(key))", "split(self.w_q(key))"),
    ("w_o_weight_used", "return self.w_o(concat)", "return concat @ self.w_o.weight.T"),
    ("heads_on_batch_axis", "self.attention_weights = weights.detach()",
     "self.attention_weights = weights.detach().reshape(-1, *weights.shape[2:])"),
    ("in_place_on_input", "batch, length_q, _ = query.shape", "batch, length_q, _ = query.shape\n        key *= 1.0"),
    ("view_not_contiguous", "heads.transpose(1, 2).reshape(", "heads.transpose(1, 2).view("),
]


def test_the_solution_and_the_reference_pass(capsys):
    for candidate in (build(solution()), helpers.MultiHeadAttention):
        verdict = run(candidate, capsys)
        assert verdict and verdict.status == "pass", verdict
        assert str(verdict).startswith("✅ multi_head_attention_module: ")


def test_the_edits_cover_every_declared_code_but_the_setup_ones():
    setup = {"not_a_class", "projection_missing", "dropout_on_output"}
    assert {code for code, *_ in EDITS} | setup == set(EXERCISES[NAME].mistakes)


@pytest.mark.parametrize("code, old, new", EDITS, ids=[e[0] for e in EDITS])
def test_each_usual_mistake_gets_its_code(code, old, new, capsys):
    verdict = run(changed(old, new), capsys)
    assert not verdict and verdict.mistake == code, verdict


def test_minus_inf_then_zeros_is_right():
    """-inf before the softmax gives NaN in a fully masked row, but zeroing the blocked weights afterwards
    removes it (forward and backward): a correct answer, not the fully_masked_nan mistake."""
    assert run(changed("torch.finfo(scores.dtype).min", "float('-inf')"))


def test_dropout_on_the_output():
    source = solution().replace("self.dropout(weights) @ v", "weights @ v").replace(
        "return self.w_o(concat)", "return self.dropout(self.w_o(concat))")
    verdict = run(build(source))
    assert verdict.mistake == "dropout_on_output", verdict


def test_setup_mistakes():
    assert run(helpers.MultiHeadAttention(8, 2)).mistake == "not_a_class"
    source = solution().replace("self.w_o = nn.Linear(d_model, d_model)", "self.out = nn.Linear(d_model, d_model)")
    assert run(build(source)).mistake == "projection_missing"


def test_a_stub_is_todo_and_crashes_are_one_line():
    source = solution()
    body = source.split("def forward(self, query, key, value, mask=None):\n")[1]
    stub = source.replace(body, "        # Your Code Here\n        raise NotImplementedError()\n")
    assert run(build(stub)).status == "todo"
    crash = changed("return self.w_o(concat)", "return self.w_o(concat[:, :, :, 0])")
    verdict = run(crash)
    assert verdict.mistake == "raised_error" and "IndexError" in verdict.message
    none = changed("return self.w_o(concat)", "return None")
    assert run(none).mistake == "returned_none"


@pytest.mark.parametrize("old, new", [
    ("math.sqrt(self.d_k)", "math.sqrt(self.d_k + 1)"),  # an unrelated scale
    ("torch.softmax(scores, dim=-1)", "torch.softmax(scores * 1.5, dim=-1)"),
    ("return self.w_o(concat)", "return self.w_o(concat) + 1"),
    ("heads = self.dropout(weights) @ v", "heads = self.dropout(weights) @ v + 0.01"),
], ids=["odd_scale", "sharpened_softmax", "shifted_output", "shifted_heads"])
def test_codes_do_not_fire_for_unrelated_wrong_answers(old, new):
    verdict = run(changed(old, new))
    assert not verdict and verdict.mistake is None, verdict


def test_the_check_declares_what_is_off_limits():
    off = EXERCISES[NAME].off_limits
    assert "helpers.multi_head.MultiHeadAttention" in off and "torch.nn.MultiheadAttention" in off
    assert "torch.nn.functional.scaled_dot_product_attention" in off


def test_the_solution_can_replace_the_reference_in_a_layer():
    """Same attributes as the reference: a layer of notebook 05 built with the student's class gives the
    reference layer's output once the weights are copied, and its attention_weights feed the plots."""
    cls = build(solution())
    torch.manual_seed(0)
    layer = helpers.EncoderLayer(16, 4, 32, 0.0).eval()
    mine = helpers.EncoderLayer(16, 4, 32, 0.0).eval()
    mine.self_attn = cls(16, 4, 0.0)
    mine.load_state_dict(layer.state_dict())
    x = torch.randn(2, 5, 16)
    mask = torch.ones(2, 1, 1, 5, dtype=torch.bool)
    mask[1, ..., -2:] = False
    torch.testing.assert_close(mine(x, mask), layer(x, mask))
    assert mine.self_attn.attention_weights is None and layer.self_attn.attention_weights is None  # not asked
    mine.self_attn.store_attention_weights = layer.self_attn.store_attention_weights = True
    torch.testing.assert_close(mine(x, mask), layer(x, mask))
    assert mine.self_attn.attention_weights.shape == (2, 4, 5, 5)
    torch.testing.assert_close(mine.self_attn.attention_weights, layer.self_attn.attention_weights)
    for name in ("d_model", "num_heads", "d_k", "w_q", "w_k", "w_v", "w_o", "dropout", "store_attention_weights"):
        assert hasattr(mine.self_attn, name), name


def test_a_crash_in_backward_is_one_line():
    wrong = changed("heads = self.dropout(weights) @ v", "heads = self.dropout(weights) @ v\n        weights.mul_(1)")
    verdict = run(wrong)
    assert verdict.mistake == "raised_error" and "backward" in verdict.message, verdict


@pytest.mark.parametrize("returned", ["None", "concat.detach().numpy()", "[1, 2]", "torch.tensor(0.0)",
                                      "self.w_o(concat) * float('nan')", "'output'"])
def test_any_return_value_gets_a_verdict(returned):
    verdict = run(changed("return self.w_o(concat)", f"return {returned}"))
    assert not verdict and verdict.status == "fail", verdict
