"""Honest naming in the checks of notebooks 01-04: a mistake code fires only when the answer IS that
mistake. Wrong answers unrelated to every known mistake (a constant offset, a scaled result, a
result with one entry changed) get no declared code: the message says where the answer differs."""

import numpy as np
import pytest

import helpers
from helpers.checks import EXERCISES
from helpers.checks.harness import GENERIC_MISTAKES

# Codes that describe WHERE an answer differs, established by the check itself, not a guessed cause:
# "PE(0) @ R is not PE(k)", "the weights are right but the output is not", "columns 0 and 1 right, later
# ones not", "the rows do not sum to 1". Unrelated wrong answers may get these.
LOCATING = {"does_not_shift", "output_not_weights_at_v", "output_wrong_weights_right", "later_columns_wrong",
            "rows_do_not_sum_to_one"}


def offset(reference, amount=1e-3):
    def wrong(*args, **kwargs):
        return np.asarray(reference(*args, **kwargs), dtype=np.float64) + amount
    return wrong


def scaled(reference, factor=1.01):
    def wrong(*args, **kwargs):
        return np.asarray(reference(*args, **kwargs), dtype=np.float64) * factor
    return wrong


def one_entry_changed(reference):
    def wrong(*args, **kwargs):
        out = np.array(reference(*args, **kwargs), dtype=np.float64)
        out.reshape(-1)[out.size // 2] += 0.25
        return out
    return wrong


def pair_offset(reference):
    def wrong(*args, **kwargs):
        output, weights = reference(*args, **kwargs)
        return np.asarray(output) + 1e-3, np.asarray(weights)
    return wrong


UNRELATED = [
    ("create_position_matrix", helpers.check_create_position_matrix, offset(helpers.positional_encoding)),
    ("create_position_matrix", helpers.check_create_position_matrix, one_entry_changed(helpers.positional_encoding)),
    ("rotation_matrix", helpers.check_rotation_matrix, offset(helpers.rotation_matrix)),
    ("apply_rope", helpers.check_apply_rope, scaled(helpers.apply_rope)),
    ("softmax", helpers.check_softmax, scaled(helpers.softmax)),
    ("softmax", helpers.check_softmax, one_entry_changed(helpers.softmax)),
    ("scaled_dot_product_attention", helpers.check_scaled_dot_product_attention,
     pair_offset(helpers.scaled_dot_product_attention)),
    ("split_heads", helpers.check_split_heads, offset(helpers.split_heads)),
    ("combine_heads", helpers.check_combine_heads, scaled(helpers.combine_heads)),
    ("multi_head_attention", helpers.check_multi_head_attention, pair_offset(helpers.multi_head_attention)),
    ("masked_softmax", helpers.check_masked_softmax, one_entry_changed(helpers.masked_softmax)),
]


@pytest.mark.parametrize("name, check, wrong", UNRELATED, ids=[f"{n}-{i}" for i, (n, _, _) in enumerate(UNRELATED)])
def test_an_unrelated_wrong_answer_gets_no_mistake_code(name, check, wrong):
    verdict = check(wrong)
    assert verdict.status == "fail", verdict
    assert verdict.mistake is None or verdict.mistake in GENERIC_MISTAKES or verdict.mistake in LOCATING, (
        f"named {verdict.mistake} without the evidence: {verdict}")
    assert verdict.mistake in LOCATING or verdict.mistake not in EXERCISES[name].mistakes


# ----------------------------------------------------------------------------- structured unrelated answers (issue 18)
# Wrong answers that share the SHAPE or the look of a known mistake without being it: each code must wait for
# its evidence (the answer equal to the known wrong one), not fire on a shape.
def mha_head_0_only(*args, **kwargs):  # the weights of one head, not their average over heads
    output, weights = helpers.multi_head_attention(*args, **kwargs)
    return output, weights[:, 0]


def mha_queries_as_keys(x_q, x_kv, w_q, w_k, w_v, w_o, num_heads, mask=None):  # (L_q, L_q) weights, but not x_q's keys
    q = helpers.split_heads(x_q @ w_q, num_heads)
    weights = helpers.softmax(q @ np.swapaxes(q, -1, -2) / np.sqrt(q.shape[-1]))
    return helpers.combine_heads(weights @ q) @ w_o, weights


def split_reshape_then_transpose(x, num_heads):  # (batch, L, h, d_k) in shape, other values
    b, length, d = x.shape
    return x.reshape(b, num_heads, length, d // num_heads).transpose(0, 2, 1, 3)


def combine_transposed_plus_one(x):  # (batch, L, h, d_k) in shape, other values
    return x.transpose(0, 2, 1, 3) + 1.0


def position_matrix_transposed_plus_offset(seq_length, embed_size):  # (embed_size, seq_length), other values
    return helpers.positional_encoding(seq_length, embed_size).T + 1e-3


def attention_weights_transposed_and_scaled(Q, K, V, mask=None):
    output, weights = helpers.scaled_dot_product_attention(Q, K, V, mask)
    return output, np.swapaxes(weights, -1, -2) * 0.9


def padding_on_queries_one_flipped(tokens, pad_id):  # (batch, 1, L, 1) in shape, one value wrong
    mask = (tokens != pad_id)[:, None, :, None].copy()
    mask[0, 0, 0, 0] = ~mask[0, 0, 0, 0]
    return mask


STRUCTURED = [
    ("multi_head_attention", helpers.check_multi_head_attention, mha_head_0_only),
    ("multi_head_attention", helpers.check_multi_head_attention, mha_queries_as_keys),
    ("split_heads", helpers.check_split_heads, split_reshape_then_transpose),
    ("combine_heads", helpers.check_combine_heads, combine_transposed_plus_one),
    ("create_position_matrix", helpers.check_create_position_matrix, position_matrix_transposed_plus_offset),
    ("scaled_dot_product_attention", helpers.check_scaled_dot_product_attention,
     attention_weights_transposed_and_scaled),
    ("padding_mask", helpers.check_padding_mask, padding_on_queries_one_flipped),
]


@pytest.mark.parametrize("name, check, wrong", STRUCTURED, ids=[w.__name__ for _, _, w in STRUCTURED])
def test_a_look_alike_of_a_known_mistake_gets_no_mistake_code(name, check, wrong):
    verdict = check(wrong)
    assert verdict.status == "fail", verdict
    assert verdict.mistake in LOCATING or verdict.mistake not in EXERCISES[name].mistakes, (
        f"named {verdict.mistake} without the evidence: {verdict}")
