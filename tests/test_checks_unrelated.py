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
