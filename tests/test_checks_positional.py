"""The checks of notebook 01 must accept right answers and name each common wrong one."""

import numpy as np
import pytest
import torch

import helpers
from helpers.checks import EXERCISES
from helpers.checks.positional import wrong_position_matrices


def reference_loop(seq_length, embed_size):
    m = np.zeros((seq_length, embed_size))
    for pos in range(seq_length):
        for i in range(0, embed_size, 2):
            m[pos, i] = np.sin(pos / 10000 ** (i / embed_size))
            m[pos, i + 1] = np.cos(pos / 10000 ** (i / embed_size))
    return m


def run(check, fn, capsys):
    """Run a check: it prints nothing, and its verdict displays as one line."""
    verdict = check(fn)
    assert capsys.readouterr() == ("", ""), "a check writes nothing to stdout or stderr"
    line = str(verdict)
    assert "\n" not in line and line == repr(verdict)
    return verdict, line


@pytest.mark.parametrize(
    "fn",
    [reference_loop,
     helpers.positional_encoding,
     lambda s, e: helpers.positional_encoding(s, e).astype(np.float32),  # float32 is fine
     lambda s, e: torch.tensor(helpers.positional_encoding(s, e)),  # so is a tensor
     lambda s, e: helpers.positional_encoding(s, e).tolist()],  # and a nested list
)
def test_right_answers_pass(fn, capsys):
    verdict, line = run(helpers.check_create_position_matrix, fn, capsys)
    assert verdict and verdict.status == "pass" and verdict.mistake is None and line.startswith("✅")


def known(code):
    """A wrong implementation: the check's own wrong answer of that code."""
    def fn(seq_length, embed_size):
        (answer,) = [a for key, a in wrong_position_matrices(seq_length, embed_size).items() if key == code]
        return answer
    return fn


def swapped(seq_length, embed_size):  # written the way a student would, not taken from the check
    m = np.zeros((seq_length, embed_size))
    for pos in range(seq_length):
        for i in range(0, embed_size, 2):
            m[pos, i] = np.cos(pos / 10000 ** (i / embed_size))
            m[pos, i + 1] = np.sin(pos / 10000 ** (i / embed_size))
    return m


def concatenated(seq_length, embed_size):
    pos = np.arange(seq_length)[:, None]
    angles = pos / 10000 ** (np.arange(0, embed_size, 2) / embed_size)
    return np.concatenate([np.sin(angles), np.cos(angles)], axis=1)


def i_not_2i(seq_length, embed_size):
    m = np.zeros((seq_length, embed_size))
    for pos in range(seq_length):
        for i in range(embed_size // 2):
            m[pos, 2 * i] = np.sin(pos / 10000 ** (i / embed_size))
            m[pos, 2 * i + 1] = np.cos(pos / 10000 ** (i / embed_size))
    return m


def starts_at_one(seq_length, embed_size):
    return reference_loop(seq_length + 1, embed_size)[1:]


def base_1000(seq_length, embed_size):
    return helpers.positional_encoding(seq_length, embed_size, base=1000.0)


def own_column_index(seq_length, embed_size):
    m = np.zeros((seq_length, embed_size))
    for pos in range(seq_length):
        for j in range(embed_size):
            angle = pos / 10000 ** (j / embed_size)
            m[pos, j] = np.sin(angle) if j % 2 == 0 else np.cos(angle)
    return m


def multiplied(seq_length, embed_size):
    m = np.zeros((seq_length, embed_size))
    for pos in range(seq_length):
        for i in range(0, embed_size, 2):
            m[pos, i] = np.sin(pos * 10000 ** (i / embed_size))
            m[pos, i + 1] = np.cos(pos * 10000 ** (i / embed_size))
    return m


POSITION_WRONG = [  # a student's wrong implementation -> the mistake code the check must report
    (swapped, "sin_cos_swapped"),
    (concatenated, "concatenated"),
    (i_not_2i, "i_for_2i"),
    (starts_at_one, "positions_from_1"),
    (base_1000, "wrong_base"),
    (own_column_index, "cos_own_index"),
    (multiplied, "multiplied"),
    (known("column_index_doubled"), "column_index_doubled"),
    (lambda s, e: reference_loop(s, e).T, "rows_columns_swapped"),
    (lambda s, e: np.zeros((s, e)), "all_zeros"),
    (lambda s, e: np.where(np.arange(e) < 2, reference_loop(s, e), 0.5), "later_columns_wrong"),
    (lambda s, e: reference_loop(s, e)[:, : e // 2], "wrong_shape"),
    (lambda s, e: reference_loop(s, e) + 1e-3, None),  # not a known mistake: the first difference is named
]


@pytest.mark.parametrize("fn, code", POSITION_WRONG)
def test_each_wrong_answer_gets_its_own_mistake_code(fn, code, capsys):
    verdict, line = run(helpers.check_create_position_matrix, fn, capsys)
    assert not verdict and verdict.status == "fail" and line.startswith("❌")
    assert verdict.mistake == code, line
    if code is None:
        assert "differs from the reference" in line


def test_base_hint_names_the_base(capsys):
    verdict, line = run(helpers.check_create_position_matrix, base_1000, capsys)
    assert "looks like 1000 instead of 10000" in line


def test_wrong_answers_are_distinct():
    answers = list(wrong_position_matrices(10, 16).values())
    for a in range(len(answers)):  # every known mistake is distinguishable from the others
        for b in range(a + 1, len(answers)):
            assert not np.allclose(answers[a], answers[b])


def stub(seq_length, embed_size):
    # Your Code Here
    raise NotImplementedError()


@pytest.mark.parametrize(
    "fn, status, code",
    [(stub, "todo", None),
     (lambda s, e: None, "fail", "returned_none"),
     (lambda s, e: "abc", "fail", "not_an_array"),
     (lambda s, e: np.float64(0.5), "fail", "wrong_shape"),
     (lambda s, e: np.full((s, e), np.nan), "fail", "not_finite"),
     (lambda s, e: [[1, 2], [3]], "fail", "not_an_array"),
     (lambda s, e: 1 / 0, "fail", "raised_error"),
     (lambda s: None, "fail", "raised_error"),
     (42, "fail", "not_callable")],
)
def test_check_survives_any_return_value(fn, status, code, capsys):
    verdict, line = run(helpers.check_create_position_matrix, fn, capsys)
    assert not verdict and verdict.status == status and verdict.mistake == code
    assert line.startswith("📝" if status == "todo" else "❌")


def student_rotation(k, d_model):
    R = np.zeros((d_model, d_model))
    for i in range(d_model // 2):
        b = k / 10000 ** (2 * i / d_model)
        R[2 * i:2 * i + 2, 2 * i:2 * i + 2] = [[np.cos(b), -np.sin(b)], [np.sin(b), np.cos(b)]]
    return R


def test_rotation_check_accepts_right_answers(capsys):
    for fn in (student_rotation, helpers.rotation_matrix, lambda k, d: torch.tensor(student_rotation(k, d))):
        verdict, line = run(helpers.check_rotation_matrix, fn, capsys)
        assert verdict and line.startswith("✅")


def same_angle_every_block(k, d_model):
    R = np.zeros((d_model, d_model))
    for i in range(d_model // 2):
        R[2 * i:2 * i + 2, 2 * i:2 * i + 2] = [[np.cos(k), -np.sin(k)], [np.sin(k), np.cos(k)]]
    return R


def rotation_i_for_2i(k, d_model):
    R = np.zeros((d_model, d_model))
    for i in range(d_model // 2):
        b = k / 10000 ** (i / d_model)
        R[2 * i:2 * i + 2, 2 * i:2 * i + 2] = [[np.cos(b), -np.sin(b)], [np.sin(b), np.cos(b)]]
    return R


ROTATION_WRONG = [
    (lambda k, d: student_rotation(k, d).T, "blocks_transposed"),
    (lambda k, d: student_rotation(-k, d), "blocks_transposed"),  # rotating by -k is the same matrix
    (same_angle_every_block, "same_angle_every_block"),
    (rotation_i_for_2i, "i_for_2i"),
    (lambda k, d: np.eye(d), "does_not_shift"),
    (lambda k, d: np.eye(d + 1), "wrong_shape"),
    (lambda k, d: None, "returned_none"),
]


@pytest.mark.parametrize("fn, code", ROTATION_WRONG)
def test_rotation_check_names_the_mistake(fn, code, capsys):
    verdict, _ = run(helpers.check_rotation_matrix, fn, capsys)
    assert not verdict and verdict.mistake == code


@pytest.mark.parametrize("name, cases", [("create_position_matrix", POSITION_WRONG),
                                         ("rotation_matrix", ROTATION_WRONG)])
def test_every_declared_mistake_is_tested(name, cases):
    assert set(EXERCISES[name].mistakes) <= {code for _, code in cases}
