"""Checks for notebook 01: create_position_matrix and rotation_matrix."""

from __future__ import annotations

import numpy as np

from ..positional import positional_encoding, rotation_matrix
from .core import Mistake, call, diagnose, exercise_check, expect_finite, expect_shape, same, to_array

# (seq_length, embed_size) pairs the student's function is called with: the notebook's example,
# a non-square case that exposes swapped axes, and the paper's width.
SIZES = [(10, 16), (7, 6), (50, 512)]


def _interleave(sin_part: np.ndarray, cos_part: np.ndarray) -> np.ndarray:
    out = np.zeros((sin_part.shape[0], 2 * sin_part.shape[1]))
    out[:, 0::2], out[:, 1::2] = sin_part, cos_part
    return out


def wrong_position_matrices(seq_length: int, embed_size: int) -> dict[str, np.ndarray]:
    """The common wrong answers for create_position_matrix, each with the hint it deserves."""
    pos = np.arange(seq_length, dtype=np.float64)[:, None]
    two_i = np.arange(0, embed_size, 2, dtype=np.float64)
    angles = pos / 10000 ** (two_i / embed_size)
    column = np.arange(embed_size, dtype=np.float64)
    by_column = pos / 10000 ** (column / embed_size)  # each column j uses j/d, cos columns too
    wrong = {
        "you put cos on the even columns and sin on the odd ones. The paper (and this course) puts "
        "sin on column 2i and cos on column 2i+1; the swapped form is a valid variant, but not the one asked for.":
            _interleave(np.cos(angles), np.sin(angles)),
        "you wrote all the sines first and then all the cosines (the concatenated layout). "
        "Interleave them: sin on the even columns 2i, cos on the odd columns 2i+1.":
            np.concatenate([np.sin(angles), np.cos(angles)], axis=1),
        "the exponent uses i where it should use 2i (the same as a base of 100): the angle is pos / 10000^(2i/d_model), "
        "where i counts the (sin, cos) pairs.":
            _interleave(np.sin(pos / 10000 ** (two_i / 2 / embed_size)), np.cos(pos / 10000 ** (two_i / 2 / embed_size))),
        "the exponent uses 2j with j the column index, which counts each pair twice: "
        "columns 2i and 2i+1 share the angle pos / 10000^(2i/d_model).":
            np.where(column % 2 == 0, np.sin(pos / 10000 ** (2 * column / embed_size)),
                     np.cos(pos / 10000 ** (2 * column / embed_size))),
        "the cosine columns use their own index in the exponent: column 2i+1 must use the same "
        "angle as column 2i, pos / 10000^(2i/d_model), not pos / 10000^((2i+1)/d_model).":
            np.where(column % 2 == 0, np.sin(by_column), np.cos(by_column)),
        "you multiplied by 10000^(2i/d_model) instead of dividing: the angle is pos / 10000^(2i/d_model).":
            _interleave(np.sin(pos * 10000 ** (two_i / embed_size)), np.cos(pos * 10000 ** (two_i / embed_size))),
        "your positions start at 1: the first row is position 0, so it must be (0, 1, 0, 1, ...).":
            positional_encoding(seq_length + 1, embed_size)[1:],
    }
    for base in (1000.0, 100000.0, np.e, 2.0):  # base 100 is the same as the i-for-2i mistake
        wrong[f"the base looks like {base:g} instead of 10000: the angle is pos / 10000^(2i/d_model)."] = (
            positional_encoding(seq_length, embed_size, base=base))
    return wrong


@exercise_check("create_position_matrix", "correct! Sine on the even columns, cosine on the odd ones.")
def check_create_position_matrix(create_position_matrix) -> str:
    """Check a student's create_position_matrix(seq_length, embed_size) against the reference."""
    for seq_length, embed_size in SIZES:
        what = f"create_position_matrix({seq_length}, {embed_size})"
        result = to_array(call(create_position_matrix, seq_length, embed_size), what)
        if result.shape == (embed_size, seq_length) and seq_length != embed_size:
            raise Mistake(f"{what} has shape {result.shape}: rows and columns are swapped. "
                          "Rows are positions (seq_length), columns are dimensions (embed_size).")
        expect_shape(result, (seq_length, embed_size), what,
                     "Start from np.zeros((seq_length, embed_size)) and fill it in.")
        expect_finite(result, what)
        expected = positional_encoding(seq_length, embed_size)
        if same(result, expected):
            continue
        wrong = wrong_position_matrices(seq_length, embed_size)
        for hint, answer in wrong.items():
            if same(result, answer):
                raise Mistake(hint)
        if np.allclose(result, 0.0):
            raise Mistake(f"{what} is all zeros: fill in the matrix before returning it.")
        if same(result[:, :2], expected[:, :2]):
            raise Mistake(f"{what}: columns 0 and 1 are right but later columns are not "
                          f"(column 2 row 1 is {result[1, 2]:.6g}, expected {expected[1, 2]:.6g}). "
                          "Check the frequency 1 / 10000^(2i/d_model) of each pair.")
        diagnose(result, expected, {}, what)
    return "Matches the reference for sizes " + ", ".join(f"{s}x{d}" for s, d in SIZES) + "."


def wrong_rotation_matrices(k: int, d_model: int) -> dict[str, np.ndarray]:
    right = rotation_matrix(k, d_model)
    two_i = np.arange(0, d_model, 2)

    def blocks(angles: np.ndarray) -> np.ndarray:
        r = np.zeros((d_model, d_model))
        for i, a in enumerate(angles):
            r[2 * i:2 * i + 2, 2 * i:2 * i + 2] = [[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]]
        return r

    return {
        "your blocks are transposed (which is the same as rotating by -k): that is the column-vector "
        "form R @ PE(pos). Here PE(pos) is a row and the product is PE(pos) @ R, so each block is "
        "[[cos, -sin], [sin, cos]].": right.T,
        "every block rotates by k radians: block i must rotate by k * w_i, with w_i = 1 / 10000^(2i/d_model).":
            blocks(np.full(d_model // 2, float(k))),
        "the frequencies use i where they should use 2i: w_i = 1 / 10000^(2i/d_model).":
            blocks(k / 10000 ** (two_i / 2 / d_model)),
    }


@exercise_check("rotation_matrix", "correct! PE(pos + k) = PE(pos) @ R for every position.")
def check_rotation_matrix(rotation_matrix_fn) -> str:
    """Check a student's rotation_matrix(k, d_model) against the reference and the shift property."""
    for k, d_model in [(1, 8), (3, 16), (10, 64)]:
        what = f"rotation_matrix({k}, {d_model})"
        result = to_array(call(rotation_matrix_fn, k, d_model), what)
        expect_shape(result, (d_model, d_model), what, "R is square: d_model x d_model.")
        expect_finite(result, what)
        expected = rotation_matrix(k, d_model)
        if same(result, expected):
            continue
        for hint, answer in wrong_rotation_matrices(k, d_model).items():
            if same(result, answer):
                raise Mistake(hint)
        pe = positional_encoding(40, d_model)
        shifted = pe[:-k] @ result
        raise Mistake(f"{what} does not move PE(pos) to PE(pos + k): for pos = 0, PE(0) @ R gives "
                      f"{np.round(shifted[0, :4], 4).tolist()}... but PE({k}) is {np.round(pe[k, :4], 4).tolist()}...")
    return "Checked for k = 1, 3, 10."


__all__ = ["check_create_position_matrix", "check_rotation_matrix", "wrong_position_matrices",
           "wrong_rotation_matrices"]
