"""The checks of notebook 01 must accept right answers and name each common wrong one."""

import numpy as np
import pytest
import torch

import helpers
from helpers.checks.positional import wrong_position_matrices, wrong_rotation_matrices


def reference_loop(seq_length, embed_size):
    m = np.zeros((seq_length, embed_size))
    for pos in range(seq_length):
        for i in range(0, embed_size, 2):
            m[pos, i] = np.sin(pos / 10000 ** (i / embed_size))
            m[pos, i + 1] = np.cos(pos / 10000 ** (i / embed_size))
    return m


def run(check, fn, capsys):
    result = check(fn)
    out = capsys.readouterr().out
    assert out.count("\n") == 1, f"a check prints exactly one line, got: {out!r}"
    return result, out


@pytest.mark.parametrize(
    "fn",
    [reference_loop,
     helpers.positional_encoding,
     lambda s, e: helpers.positional_encoding(s, e).astype(np.float32),  # float32 is fine
     lambda s, e: torch.tensor(helpers.positional_encoding(s, e)),  # so is a tensor
     lambda s, e: helpers.positional_encoding(s, e).tolist()],  # and a nested list
)
def test_right_answers_pass(fn, capsys):
    passed, out = run(helpers.check_create_position_matrix, fn, capsys)
    assert passed is True and out.startswith("✅")


def by_hint(keyword):
    """A wrong implementation: the variant whose hint contains keyword."""
    def fn(seq_length, embed_size):
        (answer,) = [a for h, a in wrong_position_matrices(seq_length, embed_size).items() if keyword in h]
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


@pytest.mark.parametrize(
    "fn,hint",
    [(swapped, "you put cos on the even columns"),
     (concatenated, "all the sines first"),
     (i_not_2i, "uses i where it should use 2i"),
     (starts_at_one, "positions start at 1"),
     (base_1000, "base looks like 1000 "),
     (own_column_index, "cosine columns use their own index"),
     (multiplied, "multiplied by 10000"),
     (by_hint("uses 2j"), "uses 2j"),
     (lambda s, e: reference_loop(s, e).T, "rows and columns are swapped"),
     (lambda s, e: np.zeros((s, e)), "all zeros"),
     (lambda s, e: reference_loop(s, e)[:, : e // 2], "has shape"),
     (lambda s, e: reference_loop(s, e) + 1e-3, "differs from the reference")],
)
def test_each_wrong_answer_gets_its_own_hint(fn, hint, capsys):
    passed, out = run(helpers.check_create_position_matrix, fn, capsys)
    assert passed is False and out.startswith("❌")
    assert hint in out


def test_hints_are_distinct():
    hints = list(wrong_position_matrices(10, 16))
    assert len(hints) == len(set(hints))
    answers = list(wrong_position_matrices(10, 16).values())
    for a in range(len(answers)):  # every known mistake is distinguishable from the others
        for b in range(a + 1, len(answers)):
            assert not np.allclose(answers[a], answers[b])


def stub(seq_length, embed_size):
    position_matrix = np.zeros((seq_length, embed_size))
    # Your Code Here
    raise NotImplementedError()


@pytest.mark.parametrize(
    "fn,status,text",
    [(stub, "📝", "not implemented yet"),
     (lambda s, e: None, "❌", "returned None"),
     (lambda s, e: "abc", "❌", "not an array of numbers"),
     (lambda s, e: np.float64(0.5), "❌", "has shape ()"),
     (lambda s, e: np.full((s, e), np.nan), "❌", "NaN"),
     (lambda s, e: [[1, 2], [3]], "❌", "not an array of numbers"),
     (lambda s, e: 1 / 0, "❌", "ZeroDivisionError"),
     (lambda s: None, "❌", "TypeError"),
     (42, "❌", "expected a function")],
)
def test_check_survives_any_return_value(fn, status, text, capsys):
    passed, out = run(helpers.check_create_position_matrix, fn, capsys)
    assert passed is False and out.startswith(status) and text in out


def student_rotation(k, d_model):
    R = np.zeros((d_model, d_model))
    for i in range(d_model // 2):
        b = k / 10000 ** (2 * i / d_model)
        R[2 * i:2 * i + 2, 2 * i:2 * i + 2] = [[np.cos(b), -np.sin(b)], [np.sin(b), np.cos(b)]]
    return R


def test_rotation_check_accepts_right_answers(capsys):
    for fn in (student_rotation, helpers.rotation_matrix, lambda k, d: torch.tensor(student_rotation(k, d))):
        passed, out = run(helpers.check_rotation_matrix, fn, capsys)
        assert passed is True and out.startswith("✅")


@pytest.mark.parametrize(
    "fn,hint",
    [(lambda k, d: student_rotation(k, d).T, "blocks are transposed"),
     (lambda k, d: student_rotation(-k, d), "same as rotating by -k"),
     (lambda k, d: wrong_rotation_matrices(k, d)[[h for h in wrong_rotation_matrices(k, d) if "k radians" in h][0]],
      "every block rotates by k radians"),
     (lambda k, d: wrong_rotation_matrices(k, d)[[h for h in wrong_rotation_matrices(k, d) if "use i" in h][0]],
      "use i where they should use 2i"),
     (lambda k, d: np.eye(d), "does not move PE(pos) to PE(pos + k)"),
     (lambda k, d: np.eye(d + 1), "has shape"),
     (lambda k, d: None, "returned None")],
)
def test_rotation_check_names_the_mistake(fn, hint, capsys):
    passed, out = run(helpers.check_rotation_matrix, fn, capsys)
    assert passed is False and hint in out
