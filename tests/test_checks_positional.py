"""The checks of notebook 01 must accept right answers and name each common wrong one."""

import sys

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


def exponent_doubled(seq_length, embed_size):  # i already steps over the even columns, and 2*i doubles it again
    m = np.zeros((seq_length, embed_size))
    for pos in range(seq_length):
        for i in range(0, embed_size, 2):
            m[pos, i] = np.sin(pos / 10000 ** (2 * i / embed_size))
            m[pos, i + 1] = np.cos(pos / 10000 ** (2 * i / embed_size))
    return m


def sin_on_both(seq_length, embed_size):
    m = np.zeros((seq_length, embed_size))
    for pos in range(seq_length):
        for i in range(0, embed_size, 2):
            m[pos, i] = np.sin(pos / 10000 ** (i / embed_size))
            m[pos, i + 1] = np.sin(pos / 10000 ** (i / embed_size))
    return m


def integer_division(seq_length, embed_size):  # i // embed_size is 0 for every column
    m = np.zeros((seq_length, embed_size))
    for pos in range(seq_length):
        for i in range(0, embed_size, 2):
            m[pos, i] = np.sin(pos / 10000 ** (i // embed_size))
            m[pos, i + 1] = np.cos(pos / 10000 ** (i // embed_size))
    return m


def float32_torch(seq_length, embed_size):  # right, in torch's default dtype
    pos = torch.arange(seq_length, dtype=torch.float32)[:, None]
    freq = 10000 ** (-torch.arange(0, embed_size, 2, dtype=torch.float32) / embed_size)
    m = torch.zeros(seq_length, embed_size)
    m[:, 0::2], m[:, 1::2] = torch.sin(pos * freq), torch.cos(pos * freq)
    return m


def test_a_float32_answer_is_right(capsys):
    verdict, line = run(helpers.check_create_position_matrix, float32_torch, capsys)
    assert verdict, line


POSITION_WRONG = [  # a student's wrong implementation -> the mistake code the check must report
    (exponent_doubled, "exponent_doubled"),
    (swapped, "sin_cos_swapped"),
    (concatenated, "concatenated"),
    (i_not_2i, "i_for_2i"),
    (starts_at_one, "positions_from_1"),
    (base_1000, "wrong_base"),
    (own_column_index, "cos_own_index"),
    (multiplied, "multiplied"),
    (sin_on_both, "same_function_twice"),
    (integer_division, "exponent_zero"),
    (known("column_index_doubled"), "column_index_doubled"),
    (lambda s, e: reference_loop(s, e).T, "rows_columns_swapped"),
    (lambda s, e: np.zeros((s, e)), "all_zeros"),
    (lambda s, e: np.where(np.arange(e) < 2, reference_loop(s, e), 0.5), "later_columns_wrong"),
    (lambda s, e: reference_loop(s, e)[:, : e // 2], "wrong_shape"),
    (lambda s, e: reference_loop(e, s), "wrong_shape"),  # (embed_size, seq_length), but not the transpose
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
     (lambda s, e: "abc", "fail", "not_numbers"),
    (lambda s, e: reference_loop(s, e) + 1j, "fail", "complex_values"),
    (lambda s, e: reference_loop(s, e).astype(str), "fail", "not_numbers"),
    (lambda s, e: sys.exit(1), "fail", "raised_error"),
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


def rotation_from_blocks(k, d_model, block, base=10000):
    """Block i (rows and columns 2i, 2i+1) is block(cos b, sin b) with b = k / base^(2i / d_model)."""
    R = np.zeros((d_model, d_model))
    for i in range(d_model // 2):
        b = k / base ** (2 * i / d_model)
        R[2 * i:2 * i + 2, 2 * i:2 * i + 2] = block(np.cos(b), np.sin(b))
    return R


def rotation_exponent_doubled(k, d_model):
    R = np.zeros((d_model, d_model))
    for i in range(0, d_model, 2):  # i already steps over the even rows
        b = k / 10000 ** (2 * i / d_model)
        R[i:i + 2, i:i + 2] = [[np.cos(b), -np.sin(b)], [np.sin(b), np.cos(b)]]
    return R


ROTATION_WRONG = [
    (lambda k, d: student_rotation(k, d).T, "blocks_transposed"),
    (rotation_exponent_doubled, "exponent_doubled"),
    (lambda k, d: rotation_from_blocks(k, d, lambda c, s: [[c, -s], [s, c]], base=1e-4), "multiplied"),
    (lambda k, d: student_rotation(1, d), "k_ignored"),
    (lambda k, d: rotation_from_blocks(k, d, lambda c, s: [[s, -c], [c, s]]), "sin_cos_swapped"),
    (lambda k, d: rotation_from_blocks(k, d, lambda c, s: [[c, s], [s, c]]), "sign_missing"),
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


# ------------------------------------------------------------------------------------ apply_rope
def student_rope(x, positions):
    """A right answer, written the way a student would."""
    d = x.shape[-1]
    w = 1.0 / 10000 ** (np.arange(0, d, 2) / d)
    angles = np.asarray(positions)[:, None] * w[None, :]
    x_even, x_odd = x[..., 0::2], x[..., 1::2]
    out = np.zeros(x.shape)
    out[..., 0::2] = x_even * np.cos(angles) - x_odd * np.sin(angles)
    out[..., 1::2] = x_even * np.sin(angles) + x_odd * np.cos(angles)
    return out


def rope_with_rotation_matrices(x, positions):
    """Another right answer: each row times the transposed matrix of exercise 2."""
    out = np.zeros(x.shape)
    for row, pos in enumerate(positions):
        out[..., row, :] = x[..., row, :] @ helpers.rotation_matrix(int(pos), x.shape[-1]).T
    return out


@pytest.mark.parametrize(
    "fn",
    [student_rope, helpers.apply_rope, rope_with_rotation_matrices,
     lambda x, p: student_rope(x, p).astype(np.float32),
     lambda x, p: torch.tensor(student_rope(x, p))],
)
def test_rope_check_accepts_right_answers(fn, capsys):
    verdict, line = run(helpers.check_apply_rope, fn, capsys)
    assert verdict and verdict.status == "pass" and verdict.mistake is None and line.startswith("✅")


def rope_parts(x, positions, d=None):
    d = x.shape[-1] if d is None else d
    return np.asarray(positions)[:, None], np.arange(0, d, 2), x[..., 0::2], x[..., 1::2]


def rope_wrong_way(x, positions):
    """Exercise 2's matrix used as it is: x @ R_pos."""
    out = np.zeros(x.shape)
    for row, pos in enumerate(positions):
        out[..., row, :] = x[..., row, :] @ helpers.rotation_matrix(int(pos), x.shape[-1])
    return out


def rope_halves(x, positions):
    """The rotate_half pairing of GPT-NeoX: dimension j with j + d/2."""
    d = x.shape[-1]
    angles = np.asarray(positions)[:, None] / 10000 ** (np.arange(0, d, 2) / d)
    cos, sin = np.concatenate([np.cos(angles)] * 2, -1), np.concatenate([np.sin(angles)] * 2, -1)
    rotate_half = np.concatenate([-x[..., d // 2:], x[..., : d // 2]], -1)
    return x * cos + rotate_half * sin


def rope_row_index(x, positions):
    return student_rope(x, np.arange(x.shape[-2]))


def rope_i_for_2i(x, positions):
    d = x.shape[-1]
    pos, two_i, x_even, x_odd = rope_parts(x, positions)
    angles = pos / 10000 ** ((two_i / 2) / d)
    out = np.zeros(x.shape)
    out[..., 0::2] = x_even * np.cos(angles) - x_odd * np.sin(angles)
    out[..., 1::2] = x_even * np.sin(angles) + x_odd * np.cos(angles)
    return out


def rope_column_frequencies(x, positions):
    """One angle per column, pos / 10000^(j/d), and the pairs rotated with the two angles of their columns."""
    d = x.shape[-1]
    angles = np.asarray(positions)[:, None] / 10000 ** (np.arange(d) / d)  # (L, d)
    out = np.zeros(x.shape)
    out[..., 0::2] = x[..., 0::2] * np.cos(angles[:, 0::2]) - x[..., 1::2] * np.sin(angles[:, 0::2])
    out[..., 1::2] = x[..., 0::2] * np.sin(angles[:, 1::2]) + x[..., 1::2] * np.cos(angles[:, 1::2])
    return out


def rope_added(x, positions):
    return x + helpers.positional_encoding(int(max(positions)) + 1, x.shape[-1])[positions]


def rope_two_axes_only(x, positions):
    """Right for (L, d), but slices axis 1 instead of the last axis."""
    d = x.shape[-1]
    angles = np.asarray(positions)[:, None] / 10000 ** (np.arange(0, d, 2) / d)
    out = np.zeros(x.shape)
    out[:, 0::2] = x[:, 0::2] * np.cos(angles) - x[:, 1::2] * np.sin(angles)
    out[:, 1::2] = x[:, 0::2] * np.sin(angles) + x[:, 1::2] * np.cos(angles)
    return out


def rope_in_place(x, positions):
    """Writes into x through views: the odd columns are then computed from the new even ones."""
    pos, two_i, x_even, x_odd = rope_parts(x, positions)
    angles = pos / 10000 ** (two_i / x.shape[-1])
    x[..., 0::2] = x_even * np.cos(angles) - x_odd * np.sin(angles)
    x[..., 1::2] = x_even * np.sin(angles) + x_odd * np.cos(angles)
    return x


def rope_overwrites_before_use(x, positions):
    """Into a new array, but the odd columns read the even ones it has just rotated."""
    pos, two_i, _, _ = rope_parts(x, positions)
    angles = pos / 10000 ** (two_i / x.shape[-1])
    out = np.array(x, dtype=float)
    out[..., 0::2] = out[..., 0::2] * np.cos(angles) - out[..., 1::2] * np.sin(angles)
    out[..., 1::2] = out[..., 0::2] * np.sin(angles) + out[..., 1::2] * np.cos(angles)
    return out


def rope_sin_cos_exchanged(x, positions):
    pos, two_i, x_even, x_odd = rope_parts(x, positions)
    angles = pos / 10000 ** (two_i / x.shape[-1])
    out = np.zeros(x.shape)
    out[..., 0::2] = x_even * np.sin(angles) - x_odd * np.cos(angles)
    out[..., 1::2] = x_even * np.cos(angles) + x_odd * np.sin(angles)
    return out


def rope_minus_forgotten(x, positions):
    pos, two_i, x_even, x_odd = rope_parts(x, positions)
    angles = pos / 10000 ** (two_i / x.shape[-1])
    out = np.zeros(x.shape)
    out[..., 0::2] = x_even * np.cos(angles) + x_odd * np.sin(angles)
    out[..., 1::2] = x_even * np.sin(angles) + x_odd * np.cos(angles)
    return out


_TABLE = {}


def rope_table_of_64(x, positions):
    """Right for positions below 64: the angles come from a table computed once for 64 positions."""
    d = x.shape[-1]
    if d not in _TABLE:
        _TABLE[d] = np.arange(64)[:, None] / 10000 ** (np.arange(0, d, 2) / d)
    angles = _TABLE[d][np.asarray(positions)]
    out = np.array(x, dtype=float)
    out[..., 0::2] = x[..., 0::2] * np.cos(angles) - x[..., 1::2] * np.sin(angles)
    out[..., 1::2] = x[..., 0::2] * np.sin(angles) + x[..., 1::2] * np.cos(angles)
    return out


def test_a_rope_table_of_64_positions_is_not_told_about_leading_axes(capsys):
    """Regression (issue 18): a table cached for 64 positions fails on position 100 of the batched case; it was
    told it is "right for (L, d) but not for leading axes". It gets its own error, where it happened."""
    verdict, line = run(helpers.check_apply_rope, rope_table_of_64, capsys)
    assert verdict.mistake == "raised_error" and "IndexError" in line, line
    verdict, line = run(helpers.check_apply_rope, lambda x, p: student_rope(x, np.asarray(p) % 64), capsys)
    assert verdict.mistake is None and "differs from the reference" in line, line


def rope_right_but_in_place(x, positions):
    x[...] = student_rope(x, positions)
    return x


ROPE_WRONG = [
    (rope_wrong_way, "rotated_wrong_way"),
    (lambda x, p: student_rope(x, -np.asarray(p)), "rotated_wrong_way"),
    (rope_halves, "halves_layout"),
    (rope_row_index, "no_positions"),
    (lambda x, p: x, "unchanged"),
    (rope_added, "added_encoding"),
    (rope_i_for_2i, "i_for_2i"),
    (rope_column_frequencies, "column_frequencies"),
    (rope_two_axes_only, "leading_axes"),
    (lambda x, p: student_rope(x, p) if x.ndim == 2 else student_rope(x, p)[0], "leading_axes"),
    (rope_in_place, "changed_input"),
    (rope_right_but_in_place, "changed_input"),
    (rope_overwrites_before_use, "overwritten_before_use"),
    (lambda x, p: student_rope(x, np.asarray(p) + 1), "positions_from_1"),
    (rope_sin_cos_exchanged, "sin_cos_swapped"),
    (rope_minus_forgotten, "sign_missing"),
    (lambda x, p: student_rope(x, p) + 1e-3, None),  # not a known mistake: the first difference is named
    (lambda x, p: student_rope(x, p)[..., :-2], "wrong_shape"),
    (lambda x, p: None, "returned_none"),
]


@pytest.mark.parametrize("fn, code", ROPE_WRONG)
def test_rope_check_names_the_mistake(fn, code, capsys):
    verdict, line = run(helpers.check_apply_rope, fn, capsys)
    assert not verdict and verdict.status == "fail" and line.startswith("❌")
    assert verdict.mistake == code, line


def test_rope_wrong_answers_are_distinct():
    from helpers.checks.positional import wrong_ropes

    x = np.random.default_rng(0).normal(size=(5, 8))
    answers = list(wrong_ropes(x, np.array([3, 7, 0, 12, 5])).values())
    for a in range(len(answers)):
        for b in range(a + 1, len(answers)):
            assert not np.allclose(answers[a], answers[b])


def test_rope_check_of_the_stub_is_todo(capsys):
    def stub(x, positions):
        d = x.shape[-1]  # noqa: F841 - the line the stub keeps
        # Your Code Here
        raise NotImplementedError()

    verdict, line = run(helpers.check_apply_rope, stub, capsys)
    assert verdict.status == "todo" and line.startswith("📝")


@pytest.mark.parametrize("name, cases", [("create_position_matrix", POSITION_WRONG),
                                         ("rotation_matrix", ROTATION_WRONG),
                                         ("apply_rope", ROPE_WRONG)])
def test_every_declared_mistake_is_tested(name, cases):
    assert set(EXERCISES[name].mistakes) <= {code for _, code in cases}


def test_hints_do_not_write_out_the_solution_code():
    """A fail message names the mistake and the rule; it never shows the answer's code."""
    for name in ("create_position_matrix", "rotation_matrix", "apply_rope"):
        for code, hint in EXERCISES[name].mistakes.items():
            for fragment in ("np.", "range(", "[:, ", "[..., ", "10000 **", "= np.zeros"):
                assert fragment not in hint, f"{name}.{code} shows code: {fragment!r}"


def test_notebook_01_exercises_in_order():
    assert [e.name for e in EXERCISES.values() if e.notebook == "01_positional_encoding"] == [
        "create_position_matrix", "rotation_matrix", "apply_rope"]
