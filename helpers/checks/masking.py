"""Checks for notebook 04: causal_mask, padding_mask and masked_softmax (numpy). Convention checked: boolean masks,
True = may attend; a fully masked row of weights is all zeros."""

from __future__ import annotations

import ast
import functools
from typing import Any, Callable

import numpy as np

from ..attention import masked_softmax, softmax
from ..masking import causal_mask, padding_mask
from ..i18n import tr
from .harness import Known, Mistake, as_numpy, call, compare, exercise, expect_shape, generic, graded, to_array
from .source import answer_functions, function_nodes

INVERTED = ("here True means MAY attend (the convention of F.scaled_dot_product_attention); True = blocked is "
            "nn.MultiheadAttention's convention.")
NOT_BOOLEAN = ("{what} has dtype {dtype} with 0/1 values: a mask is a BOOLEAN array (dtype bool, True and False), "
               "since logical not and masked_fill need booleans.")


def to_bool_array(value: Any, what: str) -> np.ndarray:
    """A returned mask as a numpy bool array; else the known mistake not_boolean, or a generic not_an_array (a
    torch tensor or a list too: the exercise asks for a NumPy array)."""
    if value is not None and not isinstance(value, np.ndarray):
        raise generic("not_an_array", what=what, kind=type(value).__name__,
                      expected=tr("masking:numpy_boolean_array", "a boolean NumPy array (True = may attend)"))
    array = as_numpy(value, what)
    if array.dtype != bool:
        if array.dtype.kind in "iuf" and array.size and np.isin(array, (0, 1)).all():
            raise Known("not_boolean", what=what, dtype=array.dtype)
        kinds = {"U": tr("masking:array_of_strings", "numpy array of strings"),
                 "S": tr("masking:array_of_bytes", "numpy array of bytes"),
                 "O": tr("masking:array_of_objects", "numpy array of objects")}
        kind = kinds.get(array.dtype.kind) or tr("masking:array_of_dtype", "numpy array of dtype {dtype}",
                                                 dtype=array.dtype)
        raise generic("not_an_array", what=what, kind=kind,
                      expected=tr("masking:boolean_array", "a boolean array (True = may attend)"))
    return array


# ----------------------------------------------------------------------------- causal_mask
CAUSAL_MISTAKES = {
    "diagonal_masked": "the diagonal is masked (off by one): each token may attend to ITSELF and to the earlier "
                       "ones, so the diagonal stays True.",
    "triangles_swapped": "the upper and lower triangles are swapped: query i (row) may attend to keys j <= i "
                         "(columns), which is the LOWER triangle.",
    "inverted": "your mask is inverted (True on the future, strictly above the diagonal): " + INVERTED,
    "all_true": "you returned a mask full of True: nothing is hidden. Only the lower triangle, diagonal "
               "included, is True.",
    "not_boolean": NOT_BOOLEAN,
    "one_future_key": "your mask lets each query see one key ahead (query i sees key i + 1): the diagonal is "
                      "shifted up by one. Query i may attend to keys j <= i only; a mask that shows the next token "
                      "lets the decoder copy the word it has to predict.",
}


def wrong_causal_masks(size: int) -> dict:
    """The usual wrong causal masks: mistake code -> the mask it produces."""
    ones = np.ones((size, size), dtype=bool)
    return {"diagonal_masked": np.tril(ones, k=-1), "triangles_swapped": np.triu(ones), "inverted": np.triu(ones, k=1),
            "all_true": ones, "one_future_key": np.tril(ones, k=1)}


@exercise("causal_mask", notebook="04_masking", points=1, defines="causal_mask",
          reference="helpers.masking.causal_mask",
          off_limits=("helpers.masking.causal_mask", "helpers.masking.causal_mask_torch",
                      "helpers.masking.decoder_mask"),
          success="correct! Lower triangle including the diagonal: no query sees its future.",
          mistakes=CAUSAL_MISTAKES)
def check_causal_mask(causal_fn: Callable) -> str:
    """Check a student's causal_mask(size): bool (size, size), True on and below the diagonal."""
    sizes = graded([5, 1, 8], lambda rng: int(rng.integers(2, 40)))
    for size in sizes:
        what = f"causal_mask({size})"
        result = to_bool_array(call(causal_fn, size), what)
        expect_shape(result, (size, size), what,
                     tr("causal_mask:shape_hint", "The mask is (L, L): one row per query, one column per key."))
        expected = causal_mask(size)
        if np.array_equal(result, expected):
            continue
        for code, wrong in wrong_causal_masks(size).items():
            if np.array_equal(result, wrong):
                raise Known(code)
        index = tuple(int(i) for i in np.argwhere(result != expected)[0])
        raise Mistake(tr("causal_mask:differs", "{what} is {got} at {index} (query {query}, key {key_index}); expected "
                         "{expected}: query i may attend to key j exactly when j <= i.", what=what,
                         got=bool(result[index]), index=index, query=index[0], key_index=index[1],
                         expected=bool(expected[index])))
    if list(sizes) == [5, 1, 8]:  # the notebook's own run: the stored output's sentence
        return tr("causal_mask:checked", "Checked sizes 5, 1 and 8.")
    return tr("causal_mask:checked_drawn", "Checked sizes {sizes}.", sizes=", ".join(map(str, sizes)))


# ----------------------------------------------------------------------------- padding_mask
def padding_cases() -> list[tuple[np.ndarray, int]]:
    """(tokens, pad_id): the second uses pad_id = 1 and contains real tokens of id 0."""
    return [
        (np.array([[5, 7, 9, 0, 0], [3, 0, 0, 0, 0], [4, 6, 8, 2, 1]]), 0),
        (np.array([[0, 4, 1, 1], [2, 3, 5, 0]]), 1),
    ]


def _drawn_padding_case(rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """Tokens of drawn sizes and ids, padded at the end of each row, with a drawn pad_id (when grading)."""
    batch, length, pad_id = int(rng.integers(1, 5)), int(rng.integers(2, 12)), int(rng.integers(0, 4))
    tokens = rng.integers(0, 20, size=(batch, length))
    tokens[tokens == pad_id] = pad_id + 4  # real tokens never equal pad_id ...
    for row, real in zip(tokens, rng.integers(1, length + 1, size=batch)):
        row[real:] = pad_id  # ... and the pads fill the end of each row
    return tokens, pad_id


PADDING_MISTAKES = {
    "inverted": "the pads are marked True: " + INVERTED + " Real tokens are True, pads False.",
    "not_boolean": NOT_BOOLEAN,
    "missing_singleton_axes": "{what} has shape {shape}, expected (batch, 1, 1, L) = {expected}: the mask needs "
                              "four axes, with two axes of size 1 between the batch axis and the tokens' axis, one "
                              "for the heads and one for the queries.",
    "mask_on_queries": "{what} has shape {shape}: your L axis stands where the scores (batch, h, L_q, L_k) have the "
                       "queries, so it would block query rows. The padding is on the KEYS, the LAST axis: "
                       "(batch, 1, 1, L) = {expected}.",
    "wrong_axis_order": "{what} has shape {shape}: the right values on axes in the wrong order. The mask is "
                        "(batch, 1, 1, L) = {expected}: batch first, the tokens' axis last (the keys), the two axes "
                        "of size 1 between them.",
    "greater_than_pad": "{what}: you kept the tokens whose id is GREATER than pad_id = {pad_id}, but a real token's "
                        "id can be smaller (here 0): a token is padding exactly when it EQUALS pad_id.",
    "compared_with_zero": "{what}: you compared with 0 instead of pad_id = {pad_id}: the padding token is the "
                          "one given as pad_id, which is not always 0.",
    "all_true": "{what} is True everywhere: the pads (tokens == pad_id) must be False.",
}


@exercise("padding_mask", notebook="04_masking", points=1, defines="padding_mask",
          reference="helpers.masking.padding_mask",
          off_limits=("helpers.masking.padding_mask", "helpers.masking.decoder_mask"),
          success="correct! True for real tokens, False for padding, shape (batch, 1, 1, L).",
          mistakes=PADDING_MISTAKES)
def check_padding_mask(padding_fn: Callable) -> str:
    """Check a student's padding_mask(tokens, pad_id): bool (batch, 1, 1, L), True for real tokens."""
    for tokens, pad_id in graded(padding_cases(), _drawn_padding_case):
        what = tr("padding_mask:what", "padding_mask(<tokens of shape {shape}>, pad_id={pad_id})", shape=tokens.shape,
                  pad_id=pad_id)
        result = to_bool_array(call(padding_fn, tokens.copy(), pad_id), what)
        expected = padding_mask(tokens, pad_id)
        batch, length = tokens.shape
        if result.size == expected.size and result.shape != expected.shape:  # the values on the wrong axes?
            flat, right, shape = result.reshape(batch, length), expected[:, 0, 0, :], result.shape
            code = None
            if len(shape) < 4 and (np.array_equal(flat, right) or np.array_equal(flat, ~right)):
                code = "missing_singleton_axes"
            elif len(shape) == 4 and np.array_equal(flat, right):
                code = "mask_on_queries" if shape == (batch, 1, length, 1) else "wrong_axis_order"
            if code:
                raise Known(code, what=what, shape=shape, expected=expected.shape)
        expect_shape(result, expected.shape, what,
                     tr("padding_mask:shape_hint",
                        "The mask is (batch, 1, 1, L): it broadcasts over heads and queries."))
        if np.array_equal(result, expected):
            continue
        for key, wrong in ((Known("inverted"), ~expected),
                           (Known("compared_with_zero", what=what, pad_id=pad_id), padding_mask(tokens, 0)),
                           (Known("greater_than_pad", what=what, pad_id=pad_id), (tokens > pad_id)[:, None, None, :]),
                           (Known("all_true", what=what), np.ones_like(expected))):
            if np.array_equal(result, wrong):
                raise key
        index = tuple(int(i) for i in np.argwhere(result != expected)[0])
        raise Mistake(tr("padding_mask:differs", "{what} differs from tokens != pad_id at {index}.", what=what,
                         index=index))
    return tr("padding_mask:checked", "Checked pad_id = 0 and pad_id = 1.")


# ----------------------------------------------------------------------------- masked_softmax
def masked_softmax_cases() -> list[tuple[str, np.ndarray, np.ndarray]]:
    """(description, scores, mask); the second has fully masked rows, the third a broadcast mask."""
    rng = np.random.default_rng(60)
    scores1 = rng.normal(scale=2.0, size=(5, 5))
    scores2 = rng.normal(scale=2.0, size=(2, 4, 5))
    mask2 = rng.random((2, 4, 5)) > 0.4
    mask2[..., 0], mask2[..., -1] = True, False
    mask2[0, 2, :] = False  # a query row with no key at all
    mask2[1, 0, :] = False
    scores3 = rng.normal(scale=2.0, size=(2, 3, 4, 6))
    mask3 = padding_mask(np.array([[7, 8, 9, 0, 0, 0], [1, 2, 3, 4, 5, 0]]), 0)  # (2, 1, 1, 6)
    scores4 = rng.normal(scale=400.0, size=(2, 6, 6))  # scores in the hundreds: exp overflows without the max
    return [
        (tr("masked_softmax:case_causal", "scores (5, 5), causal mask"), scores1, causal_mask(5)),
        (tr("masked_softmax:case_empty_rows", "scores (2, 4, 5), a mask with fully masked rows"), scores2, mask2),
        (tr("masked_softmax:case_padding", "scores (2, 3, 4, 6), padding mask (2, 1, 1, 6)"), scores3, mask3),
        (tr("masked_softmax:case_large", "large scores (2, 6, 6), causal mask"), scores4, causal_mask(6)),
    ]


MASKED_SOFTMAX_MISTAKES = {
    "nan_on_empty_rows": "a fully masked row gives NaN: on that row your answer computes 0/0, either as "
                         "-inf - (-inf) after filling every score with -inf, or as a division by a row sum of 0. A "
                         "row with no allowed key must get zero weights: never subtract an infinite maximum, and "
                         "never divide by a zero sum.",
    "uniform_on_empty_rows": "a fully masked row gets uniform weights (an average over keys it must not see): a "
                             "large negative fill like -1e9 is not enough. Set the weights of blocked keys to "
                             "exactly 0 after the softmax.",
    "inverted": "your mask is inverted: " + INVERTED + " Keep the scores where mask is True.",
    "scores_multiplied_by_mask": "your blocked keys get score 0 (the scores multiplied by the mask, or filled with "
                                 "0), not -inf, so they still receive weight. Blocked scores must be replaced by "
                                 "-inf.",
    "mask_after_softmax": "the mask is applied after the softmax without renormalising: the rows no longer sum to "
                          "1. Mask the scores BEFORE the softmax.",
    "mask_ignored": "you ignored the mask: blocked keys (mask == False) must get zero weight.",
    "softmax_wrong_axis": "the softmax runs over the wrong axis: each row (one query, all keys) must sum to 1, so "
                          "it runs over the last axis.",
    "overflows": "your softmax overflows on large scores: exp(1000) is inf and inf / inf is NaN. Subtract the "
                 "maximum of each row's ALLOWED scores before exponentiating (a fully masked row has none: give it "
                 "zeros).",
    "blocked_not_zero": "{what}: blocked keys must get EXACTLY zero weight (got up to {largest}): a finite "
                        "fill such as -100 leaves exp(-100), which is not 0.",
    "sum_over_queries": "each row's weights must sum to 1 over the KEYS (the last axis); you divided by sums taken "
                        "over the queries (axis -2). Take the maximum and the sum over the last axis, keeping it "
                        "with size 1.",
    "max_without_keepdims": "the maximum of each row lost its last axis: subtracting it then broadcasts along the "
                            "wrong axis, so each column gets another row's maximum. Take the maximum so that the "
                            "last axis stays, with size 1: (..., L_q, 1).",
    "zero_over_zero": "your weights are right, but on a fully masked row your answer computes 0/0 (NaN) and then "
                      "repairs it ({evidence}). The exercise asks for no 0/0 along the way: where a row has no "
                      "allowed key, subtract 0 instead of its infinite maximum, and divide by 1 instead of its sum "
                      "of 0.",
}

# Names in an answer's code that only serve to silence or repair a 0/0: np.errstate, np.seterr, np.nan_to_num,
# np.isnan (the reference needs none of them).
REPAIRS = ("errstate", "seterr", "nan_to_num", "isnan")


def repairs_named(answer: Callable) -> list[str]:
    """The names of REPAIRS that the answer's own code uses (read from its syntax tree), in order of appearance."""
    found = []
    for function in answer_functions(answer):
        for node in function_nodes(function):
            for child in ast.walk(node):
                name = getattr(child, "attr", None) or getattr(child, "id", "")  # np.isnan, or isnan imported
                if name in REPAIRS and name not in found:
                    found.append(name)
    return found


def zero_over_zero(masked_softmax_fn: Callable, scores: np.ndarray, mask: np.ndarray) -> str | None:
    """How the answer shows that it computes 0/0 on the fully masked rows of (scores, mask): numpy's invalid or
    divide error raised inside it, or a name of REPAIRS in its code; None when it shows neither."""
    @functools.wraps(masked_softmax_fn)
    def strict(*args: Any) -> Any:
        with np.errstate(divide="raise", invalid="raise"):
            try:
                masked_softmax_fn(*args)
            except FloatingPointError as error:
                return str(error)
        return None

    raised = call(strict, scores.copy(), mask.copy())
    if raised:
        return tr("masked_softmax:raised", "numpy reports: {error}", error=raised)
    names = repairs_named(masked_softmax_fn)
    if names:
        return tr("masked_softmax:names", "it calls {names}", names=", ".join(f"np.{n}" for n in names))
    return None


def wrong_masked_softmaxes(scores: np.ndarray, mask: np.ndarray) -> dict:
    """The usual wrong masked softmaxes: mistake code -> the weights it produces."""
    full = np.broadcast_to(mask, scores.shape)
    with np.errstate(all="ignore"):
        unshifted = np.where(full, np.exp(scores), 0.0)  # without subtracting the maximum: exp overflows to inf
        total = unshifted.sum(axis=-1, keepdims=True)
        return {
            "nan_on_empty_rows": softmax(np.where(full, scores, -np.inf)),
            "uniform_on_empty_rows": softmax(np.where(full, scores, -1e9)),
            "inverted": masked_softmax(scores, ~full),
            "scores_multiplied_by_mask": softmax(scores * full),
            "mask_after_softmax": softmax(scores) * full,
            "mask_ignored": softmax(scores),
            "softmax_wrong_axis": softmax(np.where(full, scores, -np.inf), axis=-2),
            "overflows": np.where(total > 0, unshifted / np.where(total > 0, total, 1.0), 0.0),
            "sum_over_queries": _shifted(scores, full, keepdims=True, sum_axis=-2),
            "max_without_keepdims": _shifted(scores, full, keepdims=False, sum_axis=-1),
        }


def _shifted(scores: np.ndarray, full: np.ndarray, keepdims: bool, sum_axis: int) -> np.ndarray | None:
    """The reference's steps with the maximum's axis dropped or the sum over another axis (None where the
    shapes do not broadcast)."""
    filled = np.where(full, scores, -np.inf)
    row_max = filled.max(axis=-1, keepdims=keepdims)
    try:
        exps = np.exp(filled - np.where(np.isfinite(row_max), row_max, 0.0))
    except ValueError:
        return None
    totals = exps.sum(axis=sum_axis, keepdims=True)
    return exps / np.where(totals > 0, totals, 1.0)


def _drawn_masked_softmax_case(rng: np.random.Generator) -> tuple[str, np.ndarray, np.ndarray]:
    """Scores and a mask of drawn sizes and values, one query row fully masked (when grading)."""
    batch, length_q, length_k = (int(n) for n in rng.integers(2, 8, size=3))
    scores = rng.normal(scale=3.0, size=(batch, length_q, length_k))
    mask = rng.random((batch, length_q, length_k)) > 0.4
    mask[..., 0], mask[..., -1] = True, False
    mask[int(rng.integers(batch)), int(rng.integers(length_q)), :] = False
    return f"scores {scores.shape}, mask {mask.shape}", scores, mask


@exercise("masked_softmax", notebook="04_masking", points=3, defines="masked_softmax",
          reference="helpers.attention.masked_softmax",
          off_limits=("helpers.attention.masked_softmax",
                      "helpers.attention.scaled_dot_product_attention", "helpers.multi_head.multi_head_attention",
                      "helpers.multi_head.MultiHeadAttention", "torch.nn.MultiheadAttention",
                      "torch.nn.functional.multi_head_attention_forward",
                      "torch.nn.functional.scaled_dot_product_attention", "torch.ops.aten.*scaled_dot_product*"),
          success="correct! Blocked keys get exactly 0, fully masked rows are all zeros, no NaN.",
          mistakes=MASKED_SOFTMAX_MISTAKES)
def check_masked_softmax(masked_softmax_fn: Callable) -> str:
    """Check a student's masked_softmax(scores, mask): softmax over keys, blocked keys 0, empty rows 0."""
    for description, scores, mask in graded(masked_softmax_cases(), _drawn_masked_softmax_case):
        what = f"masked_softmax(<{description}>)"
        result = to_array(call(masked_softmax_fn, scores.copy(), mask.copy()), what)
        expect_shape(result, scores.shape, what,
                     tr("masked_softmax:shape_hint", "The weights have the shape of the scores."))
        compare(result, masked_softmax(scores, mask), wrong_masked_softmaxes(scores, mask), what)
        blocked = ~np.broadcast_to(mask, scores.shape)
        if np.any(result[blocked] != 0.0):
            raise Known("blocked_not_zero", what=what, largest=f"{np.abs(result[blocked]).max():.2g}")
    _, scores, mask = masked_softmax_cases()[1]  # the case with fully masked rows
    evidence = zero_over_zero(masked_softmax_fn, scores, mask)
    if evidence:
        raise Known("zero_over_zero", evidence=evidence)
    return tr("masked_softmax:checked", "Checked a causal mask, fully masked rows, a broadcast padding mask and "
              "scores in the hundreds.")
