"""Checks for notebook 01: create_position_matrix, rotation_matrix and apply_rope."""

from __future__ import annotations

import numpy as np

from ..positional import apply_rope, frequencies, positional_encoding, rotation_matrix
from ..i18n import tr
from .harness import (Known, Mistake, call, compare, distinct, exercise, expect_finite, expect_shape, graded,
                      match_known, same, to_array)

# (seq_length, embed_size) pairs the student's function is called with: the notebook's example,
# a non-square case that exposes swapped axes, and the paper's width.
SIZES = [(10, 16), (7, 6), (50, 512)]


POSITION_MISTAKES = {
    "sin_cos_swapped": "you put cos on the even columns and sin on the odd ones. The paper (and this course) puts "
                       "sin on column 2i and cos on column 2i+1; the swapped form is a valid variant, but not the "
                       "one asked for.",
    "concatenated": "you wrote all the sines first and then all the cosines (the concatenated layout). "
                    "Interleave them: sin on the even columns 2i, cos on the odd columns 2i+1.",
    "i_for_2i": "the exponent uses i where it should use 2i (the same as a base of 100): the angle is "
                "pos / 10000^(2i/d_model), where i counts the (sin, cos) pairs.",
    "column_index_doubled": "the exponent uses 2j with j the column index, which counts each pair twice: "
                            "columns 2i and 2i+1 share the angle pos / 10000^(2i/d_model).",
    "exponent_doubled": "the exponent is doubled: with i already stepping over the even columns (0, 2, 4, ...), "
                        "writing 2*i counts each pair twice. The angle of pair i (columns 2i and 2i+1) is "
                        "pos / 10000^(2i/d_model): use the column index itself, or count pairs and double once.",
    "cos_own_index": "the cosine columns use their own index in the exponent: column 2i+1 must use the same "
                     "angle as column 2i, pos / 10000^(2i/d_model), not pos / 10000^((2i+1)/d_model).",
    "same_function_twice": "you used {name} on both columns of each pair: sin goes on the even column 2i, cos on the "
                           "odd column 2i+1, both with the angle pos / 10000^(2i/d_model).",
    "exponent_zero": "every pair has the frequency of the first one (the angle is pos on every column): the exponent "
                     "2i/d_model came out as 0, which an integer division gives. Divide as real numbers, so that "
                     "the exponent grows from 0 towards 1.",
    "multiplied": "you multiplied by 10000^(2i/d_model) instead of dividing: the angle is pos / 10000^(2i/d_model).",
    "positions_from_1": "your positions start at 1: the first row is position 0, so it must be (0, 1, 0, 1, ...).",
    "wrong_base": "the base looks like {base} instead of 10000: the angle is pos / 10000^(2i/d_model).",
    "rows_columns_swapped": "{what} has shape {shape}: rows and columns are swapped. Rows are positions "
                            "(seq_length), columns are dimensions (embed_size).",
    "all_zeros": "{what} is all zeros: fill in the matrix before returning it.",
    "later_columns_wrong": "{what}: columns 0 and 1 are right but later columns are not (column 2 row 1 is "
                           "{got}, expected {expected}). Check the frequency 1 / 10000^(2i/d_model) of each pair.",
}


def wrong_position_matrices(seq_length: int, embed_size: int) -> dict:
    """The common wrong answers for create_position_matrix: mistake code -> the matrix it produces."""
    pos = np.arange(seq_length, dtype=np.float64)[:, None]
    two_i, column = np.arange(0, embed_size, 2.0), np.arange(embed_size, dtype=np.float64)
    angles = pos / 10000 ** (two_i / embed_size)

    def pairs(a: np.ndarray, even=np.sin, odd=np.cos) -> np.ndarray:  # even(a) on columns 2i, odd(a) on 2i+1
        out = np.zeros((a.shape[0], 2 * a.shape[1]))
        out[:, 0::2], out[:, 1::2] = even(a), odd(a)
        return out

    def by_column(exponent: np.ndarray) -> np.ndarray:  # column j with the angle pos / 10000^(exponent_j / d)
        a = pos / 10000 ** (exponent / embed_size)
        return np.where(column % 2 == 0, np.sin(a), np.cos(a))

    wrong = {
        "sin_cos_swapped": pairs(angles, np.cos, np.sin),
        "concatenated": np.concatenate([np.sin(angles), np.cos(angles)], axis=1),
        "i_for_2i": pairs(pos / 10000 ** (two_i / 2 / embed_size)),
        "column_index_doubled": by_column(2 * column),
        "cos_own_index": by_column(column),
        "multiplied": pairs(pos * 10000 ** (two_i / embed_size)),
        "exponent_doubled": pairs(pos / 10000 ** (2 * two_i / embed_size)),
        "positions_from_1": positional_encoding(seq_length + 1, embed_size)[1:],
        **{Known("same_function_twice", name=f.__name__): pairs(angles, f, f) for f in (np.sin, np.cos)},
        "exponent_zero": pairs(pos + 0 * two_i),
    }
    for base in (1000.0, 100000.0, np.e, 2.0):  # base 100 is the same as the i-for-2i mistake
        wrong[Known("wrong_base", base=f"{base:g}")] = positional_encoding(seq_length, embed_size, base=base)
    return wrong


@exercise("create_position_matrix", notebook="01_positional_encoding", points=2, defines="create_position_matrix",
          reference="helpers.positional.positional_encoding",
          off_limits=("helpers.positional.positional_encoding", "helpers.positional.PositionalEncoding",
                      "helpers.positional.rotation_matrix", "helpers.positional.apply_rope"),
          success="correct! Sine on the even columns, cosine on the odd ones.", mistakes=POSITION_MISTAKES)
def check_create_position_matrix(create_position_matrix) -> str:
    """Check a student's create_position_matrix(seq_length, embed_size) against the reference."""
    sizes = graded(SIZES, lambda rng: (int(rng.integers(3, 40)), 2 * int(rng.integers(2, 40))))
    for seq_length, embed_size in sizes:
        what = f"create_position_matrix({seq_length}, {embed_size})"
        result = to_array(call(create_position_matrix, seq_length, embed_size), what)
        expected = positional_encoding(seq_length, embed_size)
        if result.shape == (embed_size, seq_length) != (seq_length, embed_size) and same(result, expected.T):
            raise Known("rows_columns_swapped", what=what, shape=result.shape)
        expect_shape(result, (seq_length, embed_size), what,
                     tr("create_position_matrix:shape_hint", "One row per position (seq_length rows), one column "
                        "per dimension (embed_size columns)."))
        expect_finite(result, what)
        if same(result, expected):
            continue
        match_known(result, wrong_position_matrices(seq_length, embed_size))
        if np.allclose(result, 0.0):
            raise Known("all_zeros", what=what)
        if same(result[:, :2], expected[:, :2]):
            got, want = distinct(result[1, 2], expected[1, 2])
            raise Known("later_columns_wrong", what=what, got=got, expected=want)
        compare(result, expected, {}, what)
    return tr("create_position_matrix:checked", "Matches the reference for sizes {sizes}.",
              sizes=", ".join(f"{s}x{d}" for s, d in sizes))


ROTATION_MISTAKES = {
    "blocks_transposed": "your blocks are transposed (which is the same as rotating by -k): that is the "
                         "column-vector form R @ PE(pos). Here PE(pos) is a row and the product is PE(pos) @ R, "
                         "so the minus sign sits on the sine above the diagonal: row 2i, column 2i+1 holds "
                         "-sin(k w_i), row 2i+1, column 2i holds +sin(k w_i).",
    "same_angle_every_block": "every block rotates by k radians: block i must rotate by k * w_i, with "
                              "w_i = 1 / 10000^(2i/d_model).",
    "i_for_2i": "the frequencies use i where they should use 2i: w_i = 1 / 10000^(2i/d_model).",
    "exponent_doubled": "the exponent is twice what it should be (the same as a base of 10000^2): block i (rows "
                        "2i and 2i+1) turns by k * w_i with w_i = 1 / 10000^(2i/d_model); if your loop already "
                        "steps over the even rows 0, 2, 4, ..., its index is 2i already.",
    "multiplied": "you multiplied by 10000^(2i/d_model) instead of dividing: block i turns by k * w_i, with "
                  "w_i = 1 / 10000^(2i/d_model).",
    "k_ignored": "your matrix is R_1 whatever k: block i must turn by k * w_i, the angle of k positions, not by "
                 "w_i alone.",
    "sin_cos_swapped": "sin and cos are exchanged in your blocks: cos(k w_i) goes on the diagonal of block i, the "
                       "sines off it (-sin(k w_i) in row 2i, column 2i+1, and +sin(k w_i) in row 2i+1, column 2i).",
    "sign_missing": "your blocks have no minus sign: with +sin(k w_i) on both sides of the diagonal the matrix does "
                    "not rotate (it changes the length of a pair). Block i needs -sin(k w_i) in row 2i, column 2i+1.",
    "does_not_shift": "{what} does not move PE(pos) to PE(pos + k): for pos = 0, PE(0) @ R gives {got}... "
                      "but PE({k}) is {expected}...",
}


def _blocks(k: int, d_model: int, block) -> np.ndarray:
    """The (d_model, d_model) matrix with block(c, s) at rows and columns 2i, 2i+1, where c and s are the cosine
    and the sine of k * w_i."""
    matrix = np.zeros((d_model, d_model))
    for i, angle in enumerate(k * frequencies(d_model)):
        matrix[2 * i:2 * i + 2, 2 * i:2 * i + 2] = block(np.cos(angle), np.sin(angle))
    return matrix


def wrong_rotation_matrices(k: int, d_model: int) -> dict:
    """The common wrong answers for rotation_matrix: mistake code -> the matrix it produces."""
    return {
        "blocks_transposed": rotation_matrix(k, d_model).T,
        "same_angle_every_block": rotation_matrix(k, d_model, base=1.0),  # every w_i = 1
        "i_for_2i": rotation_matrix(k, d_model, base=100.0),  # 10000^(i/d) = 100^(2i/d)
        "exponent_doubled": rotation_matrix(k, d_model, base=1e8),  # 10000^(4i/d) = (10000^2)^(2i/d)
        "multiplied": rotation_matrix(k, d_model, base=1e-4),  # 1 / (1/10000)^(2i/d) = 10000^(2i/d)
        "k_ignored": rotation_matrix(1, d_model) if k != 1 else None,
        "sin_cos_swapped": _blocks(k, d_model, lambda c, s: [[s, -c], [c, s]]),
        "sign_missing": _blocks(k, d_model, lambda c, s: [[c, s], [s, c]]),
    }


@exercise("rotation_matrix", notebook="01_positional_encoding", points=3, defines="rotation_matrix",
          reference="helpers.positional.rotation_matrix",
          off_limits=("helpers.positional.rotation_matrix", "helpers.positional.apply_rope"),
          success="correct! PE(pos + k) = PE(pos) @ R for every position.", mistakes=ROTATION_MISTAKES)
def check_rotation_matrix(rotation_matrix_fn) -> str:
    """Check a student's rotation_matrix(k, d_model) against the reference and the shift property."""
    cases = graded([(1, 8), (3, 16), (10, 64)], lambda rng: (int(rng.integers(1, 30)), 2 * int(rng.integers(2, 33))))
    for k, d_model in cases:
        what = f"rotation_matrix({k}, {d_model})"
        result = to_array(call(rotation_matrix_fn, k, d_model), what)
        expect_shape(result, (d_model, d_model), what,
                     tr("rotation_matrix:shape_hint", "R is square: d_model x d_model."))
        expect_finite(result, what)
        expected = rotation_matrix(k, d_model)
        if same(result, expected):
            continue
        match_known(result, wrong_rotation_matrices(k, d_model))
        pe = positional_encoding(k + 1, d_model)
        raise Known("does_not_shift", what=what, k=k, got=np.round((pe[0] @ result)[:4], 4).tolist(),
                    expected=np.round(pe[k, :4], 4).tolist())
    return tr("rotation_matrix:checked", "Checked for k = {ks}.", ks=", ".join(str(k) for k, _ in cases))


ROPE_MISTAKES = {
    "rotated_wrong_way": "your pairs turn the wrong way, by -pos * w_i (exercise 2's matrix R_pos, used as it is, "
                         "turns them that way; RoFormer's rotation is its transpose). RoFormer turns the pair "
                         "(x_2i, x_2i+1) counter-clockwise: into (x_2i cos a - x_2i+1 sin a, "
                         "x_2i sin a + x_2i+1 cos a), with a = pos * w_i.",
    "halves_layout": "you paired dimension j with dimension j + d/2 (the concatenated-halves layout of GPT-NeoX and "
                     "of LLaMA in Hugging Face). This course uses the interleaved layout: dimension 2i is paired "
                     "with dimension 2i+1, as in the positional encoding of this notebook.",
    "no_positions": "the rows turn by their index 0, 1, ..., L-1, not by the positions you were given: the row r "
                    "must turn by positions[r] * w_i (the positions need not start at 0 or follow each other).",
    "unchanged": "your function returned x unchanged: every pair (x_2i, x_2i+1) must turn by the angle pos * w_i.",
    "added_encoding": "you added the positional encoding to x. RoPE does not add anything: it turns each pair of "
                      "dimensions of x by an angle, which keeps the length of every row.",
    "i_for_2i": "the frequencies use i where they should use 2i: w_i = 1 / 10000^(2i/d), the frequencies of the "
                "positional encoding, with i counting the pairs.",
    "column_frequencies": "each column turns with its own frequency: both dimensions of the pair (2i, 2i+1) must "
                          "use the same angle pos * w_i, with w_i = 1 / 10000^(2i/d).",
    "leading_axes": "your function is right for x of shape (L, d) but not for x of shape {shape}: the positions "
                    "run along the second-to-last axis and the pairs along the last one, whatever axes come before.",
    "overwritten_before_use": "your second line reads the even entries you had just rotated: both new values of a "
                              "pair are computed from the OLD pair (x_2i, x_2i+1). Keep the old values (or compute "
                              "both results) before writing either.",
    "positions_from_1": "your rows turn by (pos + 1) * w_i: the row at position pos turns by pos * w_i, so a row "
                        "at position 0 is left as it is.",
    "sin_cos_swapped": "sin and cos are exchanged in your formula: the new x_2i is x_2i cos a - x_2i+1 sin a and the "
                       "new x_2i+1 is x_2i sin a + x_2i+1 cos a, with a = pos * w_i.",
    "sign_missing": "your pairs do not turn: with a plus sign in both new values, the length of a pair changes. The "
                    "new x_2i is x_2i cos a - x_2i+1 sin a (with a minus sign), the new x_2i+1 is "
                    "x_2i sin a + x_2i+1 cos a.",
    "changed_input": "your function changed the array x it was given: a slice of a NumPy array is a view, so "
                      "writing into it writes into x. Build the result in a new array.",
}


def _rotate_pairs(x: np.ndarray, first: np.ndarray, second: np.ndarray, angles: np.ndarray,
                  later: np.ndarray | None = None, overwrite: bool = False) -> np.ndarray:
    """x with columns (first[i], second[i]) turned counter-clockwise by angles[..., i]; the second columns by
    `later` where given, and from the already rotated first columns with `overwrite`."""
    out = np.array(x, dtype=np.float64)
    a, b = x[..., first], x[..., second]
    later = angles if later is None else later
    out[..., first] = a * np.cos(angles) - b * np.sin(angles)
    out[..., second] = (out[..., first] if overwrite else a) * np.sin(later) + b * np.cos(later)
    return out


def wrong_ropes(x: np.ndarray, positions: np.ndarray) -> dict:
    """The common wrong answers for apply_rope: mistake code -> the array it produces."""
    d, length = x.shape[-1], x.shape[-2]
    pos = np.asarray(positions, dtype=np.float64)[:, None]
    even, odd = np.arange(0, d, 2), np.arange(1, d, 2)
    w = 1.0 / 10000 ** (even / d)
    by_column = pos / 10000 ** (np.arange(d) / d)  # (L, d): column j with its own frequency
    return {
        "rotated_wrong_way": _rotate_pairs(x, even, odd, -pos * w),
        "halves_layout": _rotate_pairs(x, np.arange(d // 2), np.arange(d // 2, d), pos * w),
        "no_positions": _rotate_pairs(x, even, odd, np.arange(length)[:, None] * w),
        "unchanged": np.asarray(x, dtype=np.float64),
        "added_encoding": x + positional_encoding(int(pos.max()) + 1, d)[positions],
        "i_for_2i": _rotate_pairs(x, even, odd, pos / 10000 ** (even / 2 / d)),
        "column_frequencies": _rotate_pairs(x, even, odd, by_column[:, even], by_column[:, odd]),
        "overwritten_before_use": _rotate_pairs(x, even, odd, pos * w, overwrite=True),
        "positions_from_1": _rotate_pairs(x, even, odd, (pos + 1) * w),
        "sin_cos_swapped": _turned(x, pos * w, lambda a, b, c, s: (a * s - b * c, a * c + b * s)),
        "sign_missing": _turned(x, pos * w, lambda a, b, c, s: (a * c + b * s, a * s + b * c)),
    }


def _turned(x: np.ndarray, angles: np.ndarray, formula) -> np.ndarray:
    """x with each pair (x_2i, x_2i+1) replaced by formula(x_2i, x_2i+1, cos, sin) of its angle."""
    out = np.array(x, dtype=np.float64)
    out[..., 0::2], out[..., 1::2] = formula(x[..., 0::2], x[..., 1::2], np.cos(angles), np.sin(angles))
    return out


def _right_per_head(apply_rope_fn, x: np.ndarray, positions: np.ndarray) -> bool:
    """Whether the student's apply_rope is right on the first (L, d) head of a batched x, same positions."""
    head = x.reshape(-1, *x.shape[-2:])[0]
    try:
        return same(to_array(call(apply_rope_fn, head.copy(), positions.copy()), "apply_rope"),
                    apply_rope(head, positions))
    except Mistake:
        return False


# (shape of x, positions): a single head (L, d), positions neither from 0 nor consecutive; then a batch
# of heads (batch, h, L, d_k), the shape attention gives it.
ROPE_CASES = [((5, 8), [3, 7, 0, 12, 5]), ((2, 3, 6, 16), [0, 1, 2, 3, 10, 100])]


def _drawn_rope_case(rng: np.random.Generator) -> tuple:
    shape = (int(rng.integers(1, 4)), int(rng.integers(2, 9)), 2 * int(rng.integers(2, 9)))
    return shape, rng.integers(0, 60, size=shape[-2]).tolist(), rng.normal(size=shape)


@exercise("apply_rope", notebook="01_positional_encoding", points=3, defines="apply_rope",
          reference="helpers.positional.apply_rope",
          off_limits=("helpers.positional.apply_rope", "helpers.positional.rotation_matrix"),
          success="correct! Each pair (2i, 2i+1) turns by pos * w_i, in RoFormer's direction.",
          mistakes=ROPE_MISTAKES)
def check_apply_rope(apply_rope_fn) -> str:
    """Check a student's apply_rope(x, positions) against the reference, on one head and on a batch of heads."""
    rng = np.random.default_rng(2021)
    cases = [(shape, positions, rng.normal(size=shape)) for shape, positions in ROPE_CASES]
    cases = graded(cases, _drawn_rope_case)
    for number, (shape, positions, x) in enumerate(cases):
        positions = np.array(positions)
        given = x.copy()
        what = tr("apply_rope:what", "apply_rope(x of shape {shape}, positions={positions})", shape=shape,
                  positions=positions.tolist())
        expected = apply_rope(x, positions)
        try:
            result = to_array(call(apply_rope_fn, given, positions.copy()), what)
            expect_shape(result, shape, what,
                         tr("apply_rope:shape_hint", "RoPE returns an array of the same shape as x."))
            expect_finite(result, what)
        except Mistake as mistake:
            if number and mistake.code in ("raised_error", "wrong_shape") and _right_per_head(apply_rope_fn, x,
                                                                                           positions):
                raise Known("leading_axes", shape=shape) from None  # right on each (L, d) head, not on the batch
            raise
        if not np.array_equal(given, x):  # before the values: writing into x also makes them wrong
            raise Known("changed_input")
        if same(result, expected):
            continue
        match_known(result, wrong_ropes(x, positions))
        if number and _right_per_head(apply_rope_fn, x, positions):
            raise Known("leading_axes", shape=shape)
        compare(result, expected, {}, what)
    return tr("apply_rope:checked", "Matches the reference for x of shapes {shapes}.",
              shapes=tr("apply_rope:and", " and ").join(str(c[0]) for c in cases))
