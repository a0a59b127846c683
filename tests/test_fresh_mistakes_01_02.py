"""Wrong answers to the exercises of notebooks 01 and 02, written fresh (issue 33) the way a class writes them.

Each entry of FRESH is (exercise, what the student did, the wrong answer, the mistake code a fair check names,
or None where the evidence names no specific mistake and "differs at ..." is the honest answer). They were
written from the exercise texts and the solutions, before the checks were read.
"""

import math

import numpy as np
import pytest

import helpers

# ---------------------------------------------------------------- notebook 01, exercise 1: create_position_matrix


def pm_swapped(seq_length, embed_size):
    m = np.zeros((seq_length, embed_size))
    for pos in range(seq_length):
        for i in range(embed_size // 2):
            angle = pos / 10000 ** (2 * i / embed_size)
            m[pos, 2 * i] = np.cos(angle)
            m[pos, 2 * i + 1] = np.sin(angle)
    return m


def pm_concatenated(seq_length, embed_size):
    pos = np.arange(seq_length)[:, None]
    angles = pos / 10000 ** (2 * np.arange(embed_size // 2) / embed_size)
    return np.concatenate([np.sin(angles), np.cos(angles)], axis=1)


def pm_i_for_2i(seq_length, embed_size):
    m = np.zeros((seq_length, embed_size))
    for pos in range(seq_length):
        for i in range(embed_size // 2):
            angle = pos / 10000 ** (i / embed_size)
            m[pos, 2 * i] = np.sin(angle)
            m[pos, 2 * i + 1] = np.cos(angle)
    return m


def pm_exponent_doubled(seq_length, embed_size):
    m = np.zeros((seq_length, embed_size))
    for pos in range(seq_length):
        for i in range(0, embed_size, 2):
            m[pos, i] = np.sin(pos / 10000 ** (2 * i / embed_size))
            m[pos, i + 1] = np.cos(pos / 10000 ** (2 * i / embed_size))
    return m


def pm_cos_own_index(seq_length, embed_size):
    m = np.zeros((seq_length, embed_size))
    for pos in range(seq_length):
        for i in range(0, embed_size, 2):
            m[pos, i] = math.sin(pos / 10000 ** (i / embed_size))
            m[pos, i + 1] = math.cos(pos / 10000 ** ((i + 1) / embed_size))
    return m


def pm_vectorised_column_exponent(seq_length, embed_size):
    angles = np.arange(seq_length)[:, None] / 10000 ** (np.arange(embed_size) / embed_size)  # one per column
    m = np.zeros((seq_length, embed_size))
    m[:, 0::2] = np.sin(angles[:, 0::2])
    m[:, 1::2] = np.cos(angles[:, 1::2])
    return m


def pm_column_index_doubled(seq_length, embed_size):
    m = np.zeros((seq_length, embed_size))
    for pos in range(seq_length):
        for j in range(embed_size):
            angle = pos / 10000 ** (2 * j / embed_size)
            m[pos, j] = np.sin(angle) if j % 2 == 0 else np.cos(angle)
    return m


def pm_integer_division(seq_length, embed_size):
    m = np.zeros((seq_length, embed_size))
    for pos in range(seq_length):
        for i in range(embed_size // 2):
            angle = pos / 10000 ** (2 * i // embed_size)
            m[pos, 2 * i] = np.sin(angle)
            m[pos, 2 * i + 1] = np.cos(angle)
    return m


def pm_multiplied(seq_length, embed_size):
    m = np.zeros((seq_length, embed_size))
    for pos in range(seq_length):
        for i in range(embed_size // 2):
            angle = pos * 10000 ** (2 * i / embed_size)
            m[pos, 2 * i] = np.sin(angle)
            m[pos, 2 * i + 1] = np.cos(angle)
    return m


def pm_positions_from_1(seq_length, embed_size):
    m = np.zeros((seq_length, embed_size))
    for pos in range(1, seq_length + 1):
        for i in range(embed_size // 2):
            angle = pos / 10000 ** (2 * i / embed_size)
            m[pos - 1, 2 * i] = np.sin(angle)
            m[pos - 1, 2 * i + 1] = np.cos(angle)
    return m


def pm_base_1000(seq_length, embed_size):
    m = np.zeros((seq_length, embed_size))
    for pos in range(seq_length):
        for i in range(embed_size // 2):
            angle = pos / 1000 ** (2 * i / embed_size)
            m[pos, 2 * i] = np.sin(angle)
            m[pos, 2 * i + 1] = np.cos(angle)
    return m


def pm_transposed(seq_length, embed_size):
    m = np.zeros((embed_size, seq_length))  # one row per dimension
    for pos in range(seq_length):
        for i in range(embed_size // 2):
            angle = pos / 10000 ** (2 * i / embed_size)
            m[2 * i, pos], m[2 * i + 1, pos] = np.sin(angle), np.cos(angle)
    return m


def pm_sin_twice(seq_length, embed_size):
    m = np.zeros((seq_length, embed_size))
    for pos in range(seq_length):
        for i in range(embed_size // 2):
            angle = pos / 10000 ** (2 * i / embed_size)
            m[pos, 2 * i] = np.sin(angle)
            m[pos, 2 * i + 1] = np.sin(angle)
    return m


def pm_filled_other_array(seq_length, embed_size):
    position_matrix = np.zeros((seq_length, embed_size))
    pe = np.zeros((seq_length, embed_size))
    for pos in range(seq_length):
        for i in range(embed_size // 2):
            angle = pos / 10000 ** (2 * i / embed_size)
            pe[pos, 2 * i], pe[pos, 2 * i + 1] = np.sin(angle), np.cos(angle)
    return position_matrix


def pm_last_row_missing(seq_length, embed_size):
    m = np.zeros((seq_length, embed_size))
    for pos in range(seq_length - 1):
        for i in range(embed_size // 2):
            angle = pos / 10000 ** (2 * i / embed_size)
            m[pos, 2 * i], m[pos, 2 * i + 1] = np.sin(angle), np.cos(angle)
    return m


def pm_precedence(seq_length, embed_size):
    m = np.zeros((seq_length, embed_size))
    for pos in range(seq_length):
        for i in range(embed_size // 2):
            angle = pos / 10000 ** 2 * i / embed_size  # brackets around the exponent forgotten
            m[pos, 2 * i], m[pos, 2 * i + 1] = np.sin(angle), np.cos(angle)
    return m


# ---------------------------------------------------------------- notebook 01, exercise 2: rotation_matrix


def rotation_from_blocks(d_model, block):
    """Place block(i) at rows and columns 2i, 2i+1 (the wrong answers differ in their block only)."""
    R = np.zeros((d_model, d_model))
    for i in range(d_model // 2):
        R[2 * i:2 * i + 2, 2 * i:2 * i + 2] = block(i)
    return R


def rot_transposed(k, d_model):
    def block(i):
        b = k / 10000 ** (2 * i / d_model)
        return [[np.cos(b), np.sin(b)], [-np.sin(b), np.cos(b)]]
    return rotation_from_blocks(d_model, block)


def rot_same_angle(k, d_model):
    return rotation_from_blocks(d_model, lambda i: [[np.cos(k), -np.sin(k)], [np.sin(k), np.cos(k)]])


def rot_i_for_2i(k, d_model):
    def block(i):
        b = k / 10000 ** (i / d_model)
        return [[np.cos(b), -np.sin(b)], [np.sin(b), np.cos(b)]]
    return rotation_from_blocks(d_model, block)


def rot_integer_division(k, d_model):
    def block(i):
        b = k / 10000 ** (2 * i // d_model)
        return [[np.cos(b), -np.sin(b)], [np.sin(b), np.cos(b)]]
    return rotation_from_blocks(d_model, block)


def rot_k_forgotten(k, d_model):
    def block(i):
        b = 1 / 10000 ** (2 * i / d_model)
        return [[np.cos(b), -np.sin(b)], [np.sin(b), np.cos(b)]]
    return rotation_from_blocks(d_model, block)


def rot_no_minus(k, d_model):
    def block(i):
        b = k / 10000 ** (2 * i / d_model)
        return [[np.cos(b), np.sin(b)], [np.sin(b), np.cos(b)]]
    return rotation_from_blocks(d_model, block)


def rot_sin_cos_exchanged(k, d_model):
    def block(i):
        b = k / 10000 ** (2 * i / d_model)
        return [[np.sin(b), -np.cos(b)], [np.cos(b), np.sin(b)]]
    return rotation_from_blocks(d_model, block)


def rot_exponent_doubled(k, d_model):
    R = np.zeros((d_model, d_model))
    for i in range(0, d_model, 2):
        b = k / 10000 ** (2 * i / d_model)
        R[i, i], R[i, i + 1], R[i + 1, i], R[i + 1, i + 1] = np.cos(b), -np.sin(b), np.sin(b), np.cos(b)
    return R


def rot_identity(k, d_model):
    return np.eye(d_model)


def rot_blocks_at_i(k, d_model):
    R = np.zeros((d_model, d_model))
    for i in range(d_model // 2):
        b = k / 10000 ** (2 * i / d_model)
        R[i, i], R[i, i + 1], R[i + 1, i], R[i + 1, i + 1] = np.cos(b), -np.sin(b), np.sin(b), np.cos(b)
    return R


def rot_multiplied(k, d_model):
    def block(i):
        b = k * 10000 ** (2 * i / d_model)
        return [[np.cos(b), -np.sin(b)], [np.sin(b), np.cos(b)]]
    return rotation_from_blocks(d_model, block)


# ---------------------------------------------------------------- notebook 01, exercise 3: apply_rope


def rope_parts(x, positions, d=None):
    d = x.shape[-1] if d is None else d
    w = 1.0 / 10000 ** (np.arange(0, d, 2) / d)
    angles = np.asarray(positions)[:, None] * w[None, :]
    return np.cos(angles), np.sin(angles), x[..., 0::2], x[..., 1::2]


def rope_wrong_way(x, positions):
    cos, sin, x_even, x_odd = rope_parts(x, positions)
    out = np.zeros(x.shape)
    out[..., 0::2] = x_even * cos + x_odd * sin
    out[..., 1::2] = -x_even * sin + x_odd * cos
    return out


def rope_halves(x, positions):
    d = x.shape[-1]
    w = 1.0 / 10000 ** (np.arange(0, d, 2) / d)
    angles = np.asarray(positions)[:, None] * w
    cos, sin = np.cos(angles), np.sin(angles)
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return np.concatenate([x1 * cos - x2 * sin, x1 * sin + x2 * cos], axis=-1)


def rope_index_positions(x, positions):
    return rope_parts_apply(x, np.arange(x.shape[-2]))


def rope_parts_apply(x, positions):
    cos, sin, x_even, x_odd = rope_parts(x, positions)
    out = np.zeros(x.shape)
    out[..., 0::2] = x_even * cos - x_odd * sin
    out[..., 1::2] = x_even * sin + x_odd * cos
    return out


def rope_positions_from_1(x, positions):
    return rope_parts_apply(x, np.asarray(positions) + 1)


def rope_sin_cos_exchanged(x, positions):
    cos, sin, x_even, x_odd = rope_parts(x, positions)
    out = np.zeros(x.shape)
    out[..., 0::2] = x_even * sin - x_odd * cos
    out[..., 1::2] = x_even * cos + x_odd * sin
    return out


def rope_unchanged(x, positions):
    rotated = x.copy()
    cos, sin, x_even, x_odd = rope_parts(x, positions)
    new_even, new_odd = x_even * cos - x_odd * sin, x_even * sin + x_odd * cos  # noqa: F841 (never written)
    return rotated


def rope_added(x, positions):
    d = x.shape[-1]
    return x + helpers.positional_encoding(int(np.max(positions)) + 1, d)[np.asarray(positions)]


def rope_i_for_2i(x, positions):
    d = x.shape[-1]
    w = 1.0 / 10000 ** (np.arange(d // 2) / d)
    angles = np.asarray(positions)[:, None] * w
    out = np.zeros(x.shape)
    out[..., 0::2] = x[..., 0::2] * np.cos(angles) - x[..., 1::2] * np.sin(angles)
    out[..., 1::2] = x[..., 0::2] * np.sin(angles) + x[..., 1::2] * np.cos(angles)
    return out


def rope_column_frequencies(x, positions):
    d = x.shape[-1]
    angles = np.asarray(positions)[:, None] / 10000 ** (np.arange(d) / d)  # (L, d): one angle per column
    even, odd = angles[:, 0::2], angles[:, 1::2]
    out = np.zeros(x.shape)
    out[..., 0::2] = x[..., 0::2] * np.cos(even) - x[..., 1::2] * np.sin(even)
    out[..., 1::2] = x[..., 0::2] * np.sin(odd) + x[..., 1::2] * np.cos(odd)
    return out


def rope_alias_overwritten(x, positions):
    cos, sin, x_even, x_odd = rope_parts(x, positions)
    rotated = x  # not a copy: x_even and x_odd are views of it
    rotated[..., 0::2] = x_even * cos - x_odd * sin
    rotated[..., 1::2] = x_even * sin + x_odd * cos
    return rotated


def rope_in_place_with_copies(x, positions):
    cos, sin, x_even, x_odd = rope_parts(x, positions)
    x_even, x_odd = x_even.copy(), x_odd.copy()
    x[..., 0::2] = x_even * cos - x_odd * sin
    x[..., 1::2] = x_even * sin + x_odd * cos
    return x


def rope_two_dimensional_only(x, positions):
    d = x.shape[-1]
    w = 1.0 / 10000 ** (np.arange(0, d, 2) / d)
    angles = np.asarray(positions)[:, None] * w
    out = np.zeros(x.shape)
    out[:, 0::2] = x[:, 0::2] * np.cos(angles) - x[:, 1::2] * np.sin(angles)
    out[:, 1::2] = x[:, 0::2] * np.sin(angles) + x[:, 1::2] * np.cos(angles)
    return out


def rope_minus_forgotten(x, positions):
    cos, sin, x_even, x_odd = rope_parts(x, positions)
    out = np.zeros(x.shape)
    out[..., 0::2] = x_even * cos + x_odd * sin
    out[..., 1::2] = x_even * sin + x_odd * cos
    return out


def rope_exercise_2_matrix(x, positions):
    """Each row times exercise 2's R_pos, as it is (a row times R turns its pairs clockwise)."""
    d = x.shape[-1]
    out = np.zeros(x.shape)
    for r, pos in enumerate(np.asarray(positions)):
        R = np.zeros((d, d))
        for i in range(d // 2):
            b = pos / 10000 ** (2 * i / d)
            R[2 * i, 2 * i], R[2 * i, 2 * i + 1] = np.cos(b), -np.sin(b)
            R[2 * i + 1, 2 * i], R[2 * i + 1, 2 * i + 1] = np.sin(b), np.cos(b)
        out[..., r, :] = x[..., r, :] @ R
    return out


def rope_loop_row_index(x, positions):
    d = x.shape[-1]
    out = np.array(x, dtype=float)
    for r in range(x.shape[-2]):
        for i in range(d // 2):
            a = r / 10000 ** (2 * i / d)  # the row's index, not positions[r]
            e, o = x[..., r, 2 * i], x[..., r, 2 * i + 1]
            out[..., r, 2 * i], out[..., r, 2 * i + 1] = e * np.cos(a) - o * np.sin(a), e * np.sin(a) + o * np.cos(a)
    return out


# ---------------------------------------------------------------- notebook 02, exercise 1: softmax


def sm_naive(x, axis=-1):
    return np.exp(x) / np.exp(x).sum(axis=axis, keepdims=True)


def sm_max_of_whole_array(x, axis=-1):
    e = np.exp(x - np.max(x))
    return e / e.sum(axis=axis, keepdims=True)


def sm_sum_of_whole_array(x, axis=-1):
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / e.sum()


def sm_axis_ignored(x, axis=-1):
    e = np.exp(x - np.max(x, axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def sm_max_last_axis_sum_axis(x, axis=-1):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def sm_max_no_keepdims(x, axis=-1):
    e = np.exp(x - np.max(x, axis=axis))
    return e / np.sum(e, axis=axis, keepdims=True)


def sm_sum_no_keepdims(x, axis=-1):
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis)


def sm_min(x, axis=-1):
    e = np.exp(x - np.min(x, axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def sm_mean(x, axis=-1):
    e = np.exp(x - np.mean(x, axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def sm_log_softmax(x, axis=-1):
    shifted = x - np.max(x, axis=axis, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))


def sm_in_place(x, axis=-1):
    x -= np.max(x, axis=axis, keepdims=True)
    np.exp(x, out=x)
    x /= x.sum(axis=axis, keepdims=True)
    return x


def sm_divided_by_max(x, axis=-1):
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / e.max(axis=axis, keepdims=True)


def sm_not_normalised(x, axis=-1):
    return np.exp(x - np.max(x, axis=axis, keepdims=True))


def sm_max_axis_sum_last(x, axis=-1):
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


# ---------------------------------------------------------------- notebook 02, exercise 2: scaled_dot_product_attention


def stable_softmax(s):
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def attention(Q, K, V, mask=None, scale=None, fill=-np.inf, softmax=stable_softmax):
    scale = math.sqrt(Q.shape[-1]) if scale is None else scale
    scores = Q @ np.swapaxes(K, -1, -2) / scale
    if mask is not None:
        scores = np.where(mask, scores, fill)
    weights = softmax(scores)
    return weights @ V, weights


def sdpa_not_scaled(Q, K, V, mask=None):
    return attention(Q, K, V, mask, scale=1.0)


def sdpa_divided_by_d_k(Q, K, V, mask=None):
    return attention(Q, K, V, mask, scale=Q.shape[-1])


def sdpa_sqrt_l_k(Q, K, V, mask=None):
    return attention(Q, K, V, mask, scale=math.sqrt(K.shape[-2]))


def sdpa_d_k_axis_1(Q, K, V, mask=None):
    return attention(Q, K, V, mask, scale=math.sqrt(Q.shape[1]))


def sdpa_mask_multiplied(Q, K, V, mask=None):
    scores = Q @ np.swapaxes(K, -1, -2) / math.sqrt(Q.shape[-1])
    if mask is not None:
        scores = scores * mask
    weights = stable_softmax(scores)
    return weights @ V, weights


def sdpa_times_sqrt_d_k(Q, K, V, mask=None):
    return attention(Q, K, V, mask, scale=1 / math.sqrt(Q.shape[-1]))


def sdpa_weights_transposed(Q, K, V, mask=None):
    out, weights = attention(Q, K, V, mask)
    return out, np.swapaxes(weights, -1, -2)


def sdpa_sqrt_d_v(Q, K, V, mask=None):
    return attention(Q, K, V, mask, scale=math.sqrt(V.shape[-1]))


def sdpa_softmax_over_queries(Q, K, V, mask=None):
    scores = Q @ np.swapaxes(K, -1, -2) / math.sqrt(Q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    weights = helpers.softmax(scores, axis=-2)
    return weights @ V, weights


def sdpa_k_not_transposed(Q, K, V, mask=None):
    scores = Q @ K / math.sqrt(Q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    weights = stable_softmax(scores)
    return weights @ V, weights


def sdpa_k_dot_t(Q, K, V, mask=None):
    scores = Q @ K.T / math.sqrt(Q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    weights = stable_softmax(scores)
    return weights @ V, weights


def sdpa_mask_after_softmax(Q, K, V, mask=None):
    weights = stable_softmax(Q @ np.swapaxes(K, -1, -2) / math.sqrt(Q.shape[-1]))
    if mask is not None:
        weights = weights * mask
    return weights @ V, weights


def sdpa_mask_after_softmax_renormalised(Q, K, V, mask=None):
    weights = stable_softmax(Q @ np.swapaxes(K, -1, -2) / math.sqrt(Q.shape[-1]))
    if mask is not None:
        weights = weights * mask
        weights = weights / weights.sum(axis=-1, keepdims=True)
    return weights @ V, weights


def sdpa_mask_ignored(Q, K, V, mask=None):
    return attention(Q, K, V, None)


def sdpa_mask_inverted(Q, K, V, mask=None):
    return attention(Q, K, V, None if mask is None else ~np.asarray(mask, dtype=bool))


def sdpa_naive_softmax(Q, K, V, mask=None):
    return attention(Q, K, V, mask, softmax=lambda s: np.exp(s) / np.exp(s).sum(axis=-1, keepdims=True))


def sdpa_returns_swapped(Q, K, V, mask=None):
    out, weights = attention(Q, K, V, mask)
    return weights, out


def sdpa_output_scaled_again(Q, K, V, mask=None):
    out, weights = attention(Q, K, V, mask)
    return out / math.sqrt(Q.shape[-1]), weights


def sdpa_softmax_axis_0(Q, K, V, mask=None):
    scores = Q @ np.swapaxes(K, -1, -2) / math.sqrt(Q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    weights = helpers.softmax(scores, axis=0)
    return weights @ V, weights


def sdpa_fill_zero(Q, K, V, mask=None):
    return attention(Q, K, V, mask, fill=0.0)


def sdpa_boolean_index(Q, K, V, mask=None):
    scores = Q @ np.swapaxes(K, -1, -2) / math.sqrt(Q.shape[-1])
    if mask is not None:
        scores[mask == False] = -np.inf  # noqa: E712 (as a student writes it); fails for a broadcast mask
    weights = stable_softmax(scores)
    return weights @ V, weights


def sdpa_mask_added(Q, K, V, mask=None):
    scores = Q @ np.swapaxes(K, -1, -2) / math.sqrt(Q.shape[-1])
    if mask is not None:
        scores = scores + mask  # the boolean mask added as if it were an additive one
    weights = stable_softmax(scores)
    return weights @ V, weights


FRESH = [
    ("create_position_matrix", "sin on the odd columns, cos on the even", pm_swapped, "sin_cos_swapped"),
    ("create_position_matrix", "all sines, then all cosines", pm_concatenated, "concatenated"),
    ("create_position_matrix", "exponent i / d with i the pair", pm_i_for_2i, "i_for_2i"),
    ("create_position_matrix", "i steps by 2 and the exponent says 2i", pm_exponent_doubled, "exponent_doubled"),
    ("create_position_matrix", "cos column uses (i + 1) / d", pm_cos_own_index, "cos_own_index"),
    ("create_position_matrix", "vectorised, one exponent j / d per column", pm_vectorised_column_exponent,
     "cos_own_index"),
    ("create_position_matrix", "exponent 2j / d with j the column", pm_column_index_doubled, "column_index_doubled"),
    ("create_position_matrix", "2 * i // embed_size", pm_integer_division, "exponent_zero"),
    ("create_position_matrix", "pos * 10000^(2i/d)", pm_multiplied, "multiplied"),
    ("create_position_matrix", "positions 1 .. L", pm_positions_from_1, "positions_from_1"),
    ("create_position_matrix", "base 1000", pm_base_1000, "wrong_base"),
    ("create_position_matrix", "returned transposed", pm_transposed, "rows_columns_swapped"),
    ("create_position_matrix", "sin on both columns", pm_sin_twice, "same_function_twice"),
    ("create_position_matrix", "filled another array", pm_filled_other_array, "all_zeros"),
    ("create_position_matrix", "last row left at zero", pm_last_row_missing, None),
    ("create_position_matrix", "pos / 10000 ** 2 * i / d", pm_precedence, None),
    ("rotation_matrix", "blocks transposed", rot_transposed, "blocks_transposed"),
    ("rotation_matrix", "every block by k", rot_same_angle, "same_angle_every_block"),
    ("rotation_matrix", "exponent i / d", rot_i_for_2i, "i_for_2i"),
    ("rotation_matrix", "2 * i // d_model", rot_integer_division, "same_angle_every_block"),
    ("rotation_matrix", "k forgotten (R_1 for every k)", rot_k_forgotten, "k_ignored"),
    ("rotation_matrix", "minus sign forgotten", rot_no_minus, "sign_missing"),
    ("rotation_matrix", "sin and cos exchanged in the block", rot_sin_cos_exchanged, "sin_cos_swapped"),
    ("rotation_matrix", "i steps by 2 and the exponent says 2i", rot_exponent_doubled, "exponent_doubled"),
    ("rotation_matrix", "identity", rot_identity, None),
    ("rotation_matrix", "blocks at rows i, i+1", rot_blocks_at_i, None),
    ("rotation_matrix", "k * 10000^(2i/d)", rot_multiplied, "multiplied"),
    ("apply_rope", "turned the wrong way", rope_wrong_way, "rotated_wrong_way"),
    ("apply_rope", "halves layout", rope_halves, "halves_layout"),
    ("apply_rope", "row index instead of positions", rope_index_positions, "no_positions"),
    ("apply_rope", "positions + 1", rope_positions_from_1, "positions_from_1"),
    ("apply_rope", "sin and cos exchanged", rope_sin_cos_exchanged, "sin_cos_swapped"),
    ("apply_rope", "computed, returned x", rope_unchanged, "unchanged"),
    ("apply_rope", "added the encoding", rope_added, "added_encoding"),
    ("apply_rope", "exponent i / d", rope_i_for_2i, "i_for_2i"),
    ("apply_rope", "one frequency per column", rope_column_frequencies, "column_frequencies"),
    ("apply_rope", "wrote into x through views", rope_alias_overwritten, "changed_input"),
    ("apply_rope", "wrote into x, old values kept", rope_in_place_with_copies, "changed_input"),
    ("apply_rope", "x[:, 0::2]: 2-D only", rope_two_dimensional_only, "leading_axes"),
    ("apply_rope", "minus sign forgotten", rope_minus_forgotten, "sign_missing"),
    ("apply_rope", "exercise 2's R_pos as it is", rope_exercise_2_matrix, "rotated_wrong_way"),
    ("apply_rope", "loop, row index as position", rope_loop_row_index, "no_positions"),
    ("softmax", "exp / sum, no shift", sm_naive, "softmax_overflows"),
    ("softmax", "max of the whole array", sm_max_of_whole_array, "max_of_whole_array"),
    ("softmax", "sum of the whole array", sm_sum_of_whole_array, "sum_of_whole_array"),
    ("softmax", "axis -1 for both", sm_axis_ignored, "axis_ignored"),
    ("softmax", "max along -1, sum along axis", sm_max_last_axis_sum_axis, "axes_differ"),
    ("softmax", "max without keepdims", sm_max_no_keepdims, "max_without_keepdims"),
    ("softmax", "sum without keepdims", sm_sum_no_keepdims, "sum_without_keepdims"),
    ("softmax", "subtracted the minimum", sm_min, "subtracted_min"),
    ("softmax", "subtracted the mean", sm_mean, "subtracted_mean"),
    ("softmax", "log-softmax", sm_log_softmax, "log_softmax"),
    ("softmax", "computed in place in x", sm_in_place, "changed_input"),
    ("softmax", "divided by the max", sm_divided_by_max, "not_normalised"),
    ("softmax", "never divided", sm_not_normalised, "not_normalised"),
    ("softmax", "max along axis, sum along -1", sm_max_axis_sum_last, "axes_differ"),
    ("scaled_dot_product_attention", "not scaled", sdpa_not_scaled, "not_scaled"),
    ("scaled_dot_product_attention", "divided by d_k", sdpa_divided_by_d_k, "divided_by_d_k"),
    ("scaled_dot_product_attention", "sqrt of L_k", sdpa_sqrt_l_k, "scaled_by_sqrt_l_k"),
    ("scaled_dot_product_attention", "d_k = Q.shape[1]", sdpa_d_k_axis_1, "d_k_wrong_axis"),
    ("scaled_dot_product_attention", "scores * mask", sdpa_mask_multiplied, "scores_multiplied_by_mask"),
    ("scaled_dot_product_attention", "times sqrt(d_k)", sdpa_times_sqrt_d_k, "multiplied_by_sqrt_d_k"),
    ("scaled_dot_product_attention", "weights transposed", sdpa_weights_transposed, "weights_transposed"),
    ("scaled_dot_product_attention", "sqrt(d_v)", sdpa_sqrt_d_v, "scaled_by_sqrt_d_v"),
    ("scaled_dot_product_attention", "softmax over axis -2", sdpa_softmax_over_queries, "softmax_wrong_axis"),
    ("scaled_dot_product_attention", "Q @ K", sdpa_k_not_transposed, "k_not_transposed"),
    ("scaled_dot_product_attention", "K.T", sdpa_k_dot_t, "k_transposed_all_axes"),
    ("scaled_dot_product_attention", "mask after the softmax", sdpa_mask_after_softmax, "mask_after_softmax"),
    ("scaled_dot_product_attention", "mask after the softmax, renormalised", sdpa_mask_after_softmax_renormalised,
     "renormalised_after_softmax"),
    ("scaled_dot_product_attention", "mask ignored", sdpa_mask_ignored, "mask_ignored"),
    ("scaled_dot_product_attention", "mask inverted", sdpa_mask_inverted, "mask_inverted"),
    ("scaled_dot_product_attention", "naive softmax", sdpa_naive_softmax, "softmax_overflows"),
    ("scaled_dot_product_attention", "(weights, output)", sdpa_returns_swapped, "output_weights_swapped"),
    ("scaled_dot_product_attention", "output divided by sqrt(d_k) too", sdpa_output_scaled_again,
     "output_not_weights_at_v"),
    ("scaled_dot_product_attention", "softmax over axis 0", sdpa_softmax_axis_0, "softmax_wrong_axis"),
    ("scaled_dot_product_attention", "blocked scores set to 0", sdpa_fill_zero, "scores_multiplied_by_mask"),
    ("scaled_dot_product_attention", "scores[mask == False] = -inf", sdpa_boolean_index, None),
    ("scaled_dot_product_attention", "boolean mask added to the scores", sdpa_mask_added, "mask_added"),
]


# Codes that say where an answer differs, or that it crashed, without naming a mistake.
NOT_A_NAME = {"raised_error", "does_not_shift", "not_finite", "wrong_shape", "check_error", None}


VERDICTS = {}


def verdict_of(exercise, fn):
    """The check's verdict on fn, computed once."""
    if fn not in VERDICTS:
        VERDICTS[fn] = getattr(helpers, f"check_{exercise}")(fn)
    return VERDICTS[fn]


@pytest.mark.parametrize("exercise, what, fn, expected", FRESH, ids=[f"{e}-{w}" for e, w, _, _ in FRESH])
def test_fresh_wrong_answer(exercise, what, fn, expected):
    verdict = verdict_of(exercise, fn)
    assert verdict.status != "pass", f"{what}: a wrong answer passed"
    assert verdict.mistake == expected or verdict.mistake in NOT_A_NAME, (
        f"{what}: named {verdict.mistake!r}, expected {expected!r}")
    if expected is not None:
        assert verdict.mistake == expected, f"{what}: {verdict}"


def test_named_share():
    """At least 85% of the fresh wrong answers get a named hint (issue 33)."""
    named = sum(verdict_of(exercise, fn).mistake not in NOT_A_NAME for exercise, _, fn, _ in FRESH)
    assert named >= 0.85 * len(FRESH), f"{named} of {len(FRESH)} named"
