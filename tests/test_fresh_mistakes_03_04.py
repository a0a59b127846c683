"""Fresh wrong answers to the exercises of notebooks 03 and 04 (issue 33), written as a class of students writes
them, before the checks were read: each with the mistake code a fair check should name, or None where no specific
name is deserved (then "differs at ..." is the honest answer).

No wrong answer may pass, none may get a wrong name, and each that expects a code gets it.
"""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from conftest import define, solution_source
from torch import nn

import helpers

NAMESPACE = {"np": np, "math": math, "torch": torch, "nn": nn, "F": F, "helpers": helpers}


def answer(source: str):
    """The function or class that source defines, run as a notebook cell runs (its source readable)."""
    namespace = define(source, dict(NAMESPACE))
    name = source.split("(", 1)[0].split()[-1]
    return namespace[name]


def module_answer(*replacements):
    """Notebook 03's MultiHeadAttention with each (old, new) replacement made in forward's solution."""
    source = solution_source("03_multi_head_attention", "MultiHeadAttention")
    for old, new in replacements:
        assert old in source, f"the solution no longer contains {old!r}"
        source = source.replace(old, new)
    return answer(source)


# ---------------------------------------------------------------------------------------------------- split_heads
SPLIT = [
    ("a single reshape to (batch, h, L, d_k)", """
def split_heads(x, num_heads):
    b, L, d = x.shape
    return x.reshape(b, num_heads, L, d // num_heads)
""", "reshape_without_transpose"),
    ("reshape to (batch, L, h, d_k), no transpose", """
def split_heads(x, num_heads):
    b, L, d = x.shape
    return x.reshape(b, L, num_heads, d // num_heads)
""", "axes_not_swapped"),
    ("reshape to (batch, L, d_k, h): heads take every h-th column", """
def split_heads(x, num_heads):
    b, L, d = x.shape
    return x.reshape(b, L, d // num_heads, num_heads).transpose(0, 3, 1, 2)
""", "heads_interleaved"),
    ("the last two axes of each head exchanged: (batch, h, d_k, L)", """
def split_heads(x, num_heads):
    b, L, d = x.shape
    return x.reshape(b, L, num_heads, d // num_heads).transpose(0, 2, 3, 1)
""", "head_transposed"),
    ("the heads stacked on the batch axis: (batch * h, L, d_k)", """
def split_heads(x, num_heads):
    b, L, d = x.shape
    heads = x.reshape(b, L, num_heads, d // num_heads).transpose(0, 2, 1, 3)
    return heads.reshape(b * num_heads, L, d // num_heads)
""", "heads_on_batch_axis"),
    ("eight heads whatever num_heads says", """
def split_heads(x, num_heads):
    b, L, d = x.shape
    return x.reshape(b, L, 8, d // 8).transpose(0, 2, 1, 3)
""", None),
    ("a loop over heads stacked on a new first axis: (h, batch, L, d_k)", """
def split_heads(x, num_heads):
    d_k = x.shape[-1] // num_heads
    return np.stack([x[:, :, i * d_k:(i + 1) * d_k] for i in range(num_heads)])
""", "heads_before_batch"),
    ("a loop over heads, returned as a list", """
def split_heads(x, num_heads):
    d_k = x.shape[-1] // num_heads
    return [x[:, :, i * d_k:(i + 1) * d_k] for i in range(num_heads)]
""", "heads_before_batch"),
    ("the loop's slices one column too wide", """
def split_heads(x, num_heads):
    d_k = x.shape[-1] // num_heads
    return np.stack([x[:, :, i * d_k:(i + 1) * d_k + 1] for i in range(num_heads)], axis=1)
""", None),
    ("the batch and L axes swapped instead of L and h", """
def split_heads(x, num_heads):
    b, L, d = x.shape
    return x.reshape(b, L, num_heads, d // num_heads).transpose(1, 2, 0, 3)
""", None),
    ("the caller's array reshaped in place", """
def split_heads(x, num_heads):
    b, L, d = x.shape
    x.shape = (b, L, num_heads, d // num_heads)
    return x.transpose(0, 2, 1, 3)
""", "changed_input"),
]

# -------------------------------------------------------------------------------------------------- combine_heads
COMBINE = [
    ("a single reshape, no transpose", """
def combine_heads(x):
    b, h, L, d_k = x.shape
    return x.reshape(b, L, h * d_k)
""", "reshape_without_transpose"),
    ("transposed to (batch, L, d_k, h) before merging: features interleaved", """
def combine_heads(x):
    b, h, L, d_k = x.shape
    return x.transpose(0, 2, 3, 1).reshape(b, L, h * d_k)
""", "heads_interleaved"),
    ("concatenated along the token axis", """
def combine_heads(x):
    return np.concatenate([x[:, i] for i in range(x.shape[1])], axis=1)
""", None),
    ("heads concatenated in reverse order", """
def combine_heads(x):
    return np.concatenate([x[:, i] for i in reversed(range(x.shape[1]))], axis=-1)
""", "heads_reversed"),
    ("heads summed", """
def combine_heads(x):
    return x.sum(axis=1)
""", "heads_reduced"),
    ("heads averaged", """
def combine_heads(x):
    return x.mean(axis=1)
""", "heads_reduced"),
    ("axes exchanged, not merged: (batch, L, h, d_k)", """
def combine_heads(x):
    return x.transpose(0, 2, 1, 3)
""", "not_reshaped"),
    ("d_model hard-coded to 512", """
def combine_heads(x):
    b, h, L, d_k = x.shape
    return x.transpose(0, 2, 1, 3).reshape(b, L, 512)
""", None),
    ("merged in Fortran order", """
def combine_heads(x):
    b, h, L, d_k = x.shape
    return x.transpose(0, 2, 1, 3).reshape(b, L, h * d_k, order="F")
""", "heads_interleaved"),
    ("batch and tokens merged: (batch * L, d_model)", """
def combine_heads(x):
    b, h, L, d_k = x.shape
    return x.transpose(0, 2, 1, 3).reshape(b * L, h * d_k)
""", None),
]

# ------------------------------------------------------------------------------------------- multi_head_attention
MHA_HEAD = "def multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, num_heads, mask=None):\n"


def mha_source(q="x_q @ w_q", k="x_kv @ w_k", v="x_kv @ w_v",
 attend="helpers.scaled_dot_product_attention(q, k, v, mask)",
               out="helpers.combine_heads(heads) @ w_o", returned="out, weights", split="helpers.split_heads"):
    return (MHA_HEAD + f"    q = {split}({q}, num_heads)\n    k = {split}({k}, num_heads)\n"
            f"    v = {split}({v}, num_heads)\n    heads, weights = {attend}\n    out = {out}\n    return {returned}\n")


def own_attention(scale="math.sqrt(q.shape[-1])", fill="np.where(mask, scores, -1e9)", axis="-1", after=""):
    return (MHA_HEAD + "    def split(t):\n        b, L, d = t.shape\n"
            "        return t.reshape(b, L, num_heads, d // num_heads).transpose(0, 2, 1, 3)\n"
            "    q, k, v = split(x_q @ w_q), split(x_kv @ w_k), split(x_kv @ w_v)\n"
            f"    scores = q @ k.swapaxes(-1, -2) / {scale}\n"
            f"    if mask is not None:\n        scores = {fill}\n"
            f"    weights = helpers.softmax(scores, axis={axis})\n{after}"
            "    heads = weights @ v\n    b, h, L, d_k = heads.shape\n"
            "    return heads.transpose(0, 2, 1, 3).reshape(b, L, h * d_k) @ w_o, weights\n")


MHA = [
    ("keys and values from x_q", mha_source(k="x_q @ w_k", v="x_q @ w_v"), "kv_from_x_q"),
    ("queries from x_kv", mha_source(q="x_kv @ w_q"), "q_from_x_kv"),
    ("no output projection", mha_source(out="helpers.combine_heads(heads)"), "no_output_projection"),
    ("w_k and w_v exchanged", mha_source(k="x_kv @ w_v", v="x_kv @ w_k"), "k_v_swapped"),
    ("weights transposed, as nn.Linear stores them", mha_source(q="x_q @ w_q.T", k="x_kv @ w_k.T", v="x_kv @ w_v.T",
                                                              out="helpers.combine_heads(heads) @ w_o.T"),
     "weights_transposed"),
    ("the mask not passed on", mha_source(attend="helpers.scaled_dot_product_attention(q, k, v)"), "mask_ignored"),
    ("the mask inverted", mha_source(attend="helpers.scaled_dot_product_attention(q, k, v, None if mask is None "
                                            "else ~mask)"), "mask_inverted"),
    ("the output only, not the weights", mha_source(returned="out"), "not_a_pair"),
    ("the weights averaged over the heads", mha_source(returned="out, weights.mean(axis=1)"),
     "weights_averaged_over_heads"),
    ("one head of full width", MHA_HEAD + "    heads, weights = helpers.scaled_dot_product_attention("
                                          "x_q @ w_q, x_kv @ w_k, x_kv @ w_v, mask)\n    return heads @ w_o, weights\n",
     "single_head"),
    ("split by a single reshape", MHA_HEAD + "    def split(t, n):\n        b, L, d = t.shape\n"
                                             "        return t.reshape(b, n, L, d // n)\n"
     + mha_source(split="split").split("\n", 1)[1], "reshape_without_transpose"),
    ("combined by a single reshape", mha_source(out="heads.reshape(x_q.shape) @ w_o"), "combine_without_transpose"),
    ("own attention scaled by sqrt(d_model)", own_attention(scale="math.sqrt(x_q.shape[-1])"),
     "scaled_by_sqrt_d_model"),
    ("own attention not scaled", own_attention(scale="1"), "not_scaled"),
    ("own attention, softmax over the queries", own_attention(axis="-2"), "softmax_wrong_axis"),
    ("own attention, blocked scores set to 0", own_attention(fill="np.where(mask, scores, 0.0)"), "masked_with_zero"),
    ("own attention, mask applied after the softmax", own_attention(fill="scores", after="    if mask is not None:\n"
                                                                   "        weights = weights * mask\n"),
     "mask_after_softmax"),
]

# ---------------------------------------------------------------------------------- MultiHeadAttention.forward
FILL = "scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)  # finite: no 0/0"
SECOND = "weights = weights.masked_fill(~mask, 0.0)  # a fully masked row: zeros, not uniform"
SCALE = "scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_k)"
STORE = "self.attention_weights = weights.detach()"
DROP = "heads = self.dropout(weights) @ v"
CONCAT = "concat = heads.transpose(1, 2).reshape(batch, length_q, self.d_model)"

MODULE = [
    ("not scaled", [(SCALE, "scores = q @ k.transpose(-2, -1)")], "no_scaling"),
    ("scaled by sqrt(d_model)", [(SCALE, "scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_model)")],
     "scaled_by_sqrt_d_model"),
    ("scaled by d_k", [(SCALE, "scores = q @ k.transpose(-2, -1) / self.d_k")], "scaled_by_d_k"),
    ("no second fill: a fully masked row is uniform", [(SECOND, "pass")], "fully_masked_uniform"),
    ("-inf and no second fill: a fully masked row is NaN",
     [(FILL, "scores = scores.masked_fill(~mask, float('-inf'))"), (SECOND, "pass")], "fully_masked_nan"),
    ("the mask inverted", [(FILL, "scores = scores.masked_fill(mask, torch.finfo(scores.dtype).min)"),
                           (SECOND, "weights = weights.masked_fill(mask, 0.0)")], "mask_inverted"),
    ("the mask ignored", [(FILL, "pass"), (SECOND, "pass")], "mask_ignored"),
    ("the mask multiplied after the softmax, no fill before", [(FILL, "pass"), (SECOND, "weights = weights * mask")],
     "mask_after_softmax"),
    ("softmax over the queries", [("torch.softmax(scores, dim=-1)", "torch.softmax(scores, dim=-2)")],
     "softmax_wrong_axis"),
    ("weights stored after dropout", [(STORE, "pass"), (DROP, "weights = self.dropout(weights)\n        "
                                                             "self.attention_weights = weights.detach()\n"
                                                             "        heads = weights @ v")], "weights_after_dropout"),
    ("weights stored without detach", [(STORE, "self.attention_weights = weights")], "weights_not_detached"),
    ("weights stored on every call, store_attention_weights ignored",
     [("if self.store_attention_weights:  # only when asked: a plot needs them, training does not\n"
       "            " + STORE, STORE)], "weights_stored_unasked"),
    ("weights stored only when store_attention_weights is False",
     [("if self.store_attention_weights:", "if not self.store_attention_weights:")], "weights_not_stored"),
    ("no dropout", [(DROP, "heads = weights @ v")], "dropout_missing"),
    ("dropout on the output instead of the weights", [(DROP, "heads = weights @ v"),
                                                       ("return self.w_o(concat)",
                                                        "return self.dropout(self.w_o(concat))")], "dropout_on_output"),
    ("dropout on the scores, before the softmax", [("weights = torch.softmax(scores, dim=-1)",
                                                    "weights = torch.softmax(self.dropout(scores), dim=-1)"),
                                                   (DROP, "heads = weights @ v")], None),
    ("no output projection", [("return self.w_o(concat)", "return concat")], "no_output_projection"),
    ("keys projected with w_q", [("k = split(self.w_k(key))", "k = split(self.w_q(key))")], "wrong_projection"),
    ("values projected with w_k", [("v = split(self.w_v(value))", "v = split(self.w_k(value))")], "wrong_projection"),
    ("split by a single view, no transpose",
     [("x.view(batch, x.shape[1], self.num_heads, self.d_k).transpose(1, 2)",
       "x.view(batch, self.num_heads, x.shape[1], self.d_k)")], "split_without_transpose"),
    ("combined by a single reshape, no transpose", [(CONCAT, "concat = heads.reshape(batch, length_q, self.d_model)")],
     "combine_without_transpose"),
    ("transposed then view: crashes on a non-contiguous tensor",
     [(CONCAT, "concat = heads.transpose(1, 2).view(batch, length_q, self.d_model)")], "view_not_contiguous"),
    ("the mask unsqueezed in place", [("batch, length_q, _ = query.shape",
                                       "batch, length_q, _ = query.shape\n        if mask is not None:\n"
                                       "            mask.unsqueeze_(1)")], "changed_input"),
    ("the query scaled in place", [(SCALE, "query /= 1.0\n        scores = q @ k.transpose(-2, -1) / "
                                          "math.sqrt(self.d_k)"),
                                   ("batch, length_q, _ = query.shape",
                                    "batch, length_q, _ = query.shape\n        query.mul_(1.0 / math.sqrt(self.d_k))")],
     "in_place_on_input"),
    ("returns (output, weights)", [("return self.w_o(concat)", "return self.w_o(concat), weights")], "returned_tuple"),
    ("the heads stacked on the batch axis, weights stored that way",
     [("def split(x):  # (batch, L, d_model) -> (batch, L, h, d_k) -> (batch, h, L, d_k)\n"
       "            return x.view(batch, x.shape[1], self.num_heads, self.d_k).transpose(1, 2)",
       "def split(x):  # (batch * h, L, d_k)\n"
       "            return x.view(batch, x.shape[1], self.num_heads, self.d_k).transpose(1, 2)"
       ".reshape(batch * self.num_heads, x.shape[1], self.d_k)"),
      ("if mask is not None:\n            scores",
       "if mask is not None:\n            mask = mask.expand(batch, self.num_heads, length_q, k.shape[1])"
       ".reshape(batch * self.num_heads, length_q, k.shape[1])\n            scores"),
      (CONCAT, "concat = heads.view(batch, self.num_heads, length_q, self.d_k).transpose(1, 2)"
               ".reshape(batch, length_q, self.d_model)")], "heads_on_batch_axis"),
    ("the output projection applied as a matrix, without its transpose and bias",
     [("return self.w_o(concat)", "return concat @ self.w_o.weight")], "w_o_weight_used"),
    ("the same projection w_q for all three", [("k = split(self.w_k(key))", "k = split(self.w_q(key))"),
                                                ("v = split(self.w_v(value))", "v = split(self.w_q(value))")],
     "wrong_projection"),
    ("key split with the query's length (cross-attention crashes)",
     [("x.view(batch, x.shape[1],", "x.view(batch, length_q,")], None),
]

# -------------------------------------------------------------------------------------------------- causal_mask
CAUSAL = [
    ("upper triangle", "def causal_mask(size):\n    return np.triu(np.ones((size, size), dtype=bool))\n",
     "triangles_swapped"),
    ("one future token allowed", "def causal_mask(size):\n    return np.tril(np.ones((size, size), dtype=bool), k=1)\n",
     "one_future_key"),
    ("diagonal excluded", "def causal_mask(size):\n    return np.tril(np.ones((size, size), dtype=bool), k=-1)\n",
     "diagonal_masked"),
    ("the future marked True (inverted)",
     "def causal_mask(size):\n    return np.triu(np.ones((size, size), dtype=bool), k=1)\n", "inverted"),
    ("floats, not booleans", "def causal_mask(size):\n    return np.tril(np.ones((size, size)))\n", "not_boolean"),
    ("integers, not booleans", "def causal_mask(size):\n    return np.tril(np.ones((size, size), dtype=int))\n",
     "not_boolean"),
    ("a torch tensor", "def causal_mask(size):\n    return torch.tril(torch.ones(size, size, dtype=torch.bool))\n",
     "not_an_array"),
    ("nested lists from a loop",
     "def causal_mask(size):\n    return [[j <= i for j in range(size)] for i in range(size)]\n", "not_an_array"),
    ("a loop with j < i", "def causal_mask(size):\n    m = np.zeros((size, size), dtype=bool)\n"
                          "    for i in range(size):\n        for j in range(size):\n"
                          "            m[i, j] = j < i\n    return m\n", "diagonal_masked"),
    ("a loop with j <= i + 1", "def causal_mask(size):\n    m = np.zeros((size, size), dtype=bool)\n"
                               "    for i in range(size):\n        m[i, :i + 2] = True\n    return m\n",
                                "one_future_key"),
    ("a batch axis added: (1, size, size)",
     "def causal_mask(size):\n    return np.tril(np.ones((size, size), dtype=bool))[None]\n", None),
    ("size + 1 rows and columns",
     "def causal_mask(size):\n    return np.tril(np.ones((size + 1, size + 1), dtype=bool))\n", None),
    ("the size hard-coded to 5", "def causal_mask(size):\n    return np.tril(np.ones((5, 5), dtype=bool))\n", None),
]

# ------------------------------------------------------------------------------------------------- padding_mask
PADDING = [
    ("inverted: True on padding",
     "def padding_mask(tokens, pad_id):\n    return (tokens == pad_id)[:, None, None, :]\n",
     "inverted"),
    ("compared with 0, not pad_id", "def padding_mask(tokens, pad_id):\n    return (tokens != 0)[:, None, None, :]\n",
     "compared_with_zero"),
    ("no axes added: (batch, L)", "def padding_mask(tokens, pad_id):\n    return tokens != pad_id\n",
     "missing_singleton_axes"),
    ("axes added after: (batch, L, 1, 1)",
     "def padding_mask(tokens, pad_id):\n    return (tokens != pad_id)[:, :, None, None]\n", "wrong_axis_order"),
    ("the queries masked: (batch, 1, L, 1)",
     "def padding_mask(tokens, pad_id):\n    return (tokens != pad_id)[:, None, :, None]\n", "mask_on_queries"),
    ("one axis only: (batch, 1, L)", "def padding_mask(tokens, pad_id):\n    return (tokens != pad_id)[:, None, :]\n",
     "missing_singleton_axes"),
    ("axes in front: (1, 1, batch, L)",
     "def padding_mask(tokens, pad_id):\n    return (tokens != pad_id)[None, None]\n", "wrong_axis_order"),
    ("integers, not booleans",
     "def padding_mask(tokens, pad_id):\n    return (tokens != pad_id).astype(int)[:, None, None, :]\n", "not_boolean"),
    ("a torch tensor",
     "def padding_mask(tokens, pad_id):\n    return (torch.as_tensor(tokens) != pad_id)[:, None, None, :]\n",
     "not_an_array"),
    ("tokens greater than pad_id",
     "def padding_mask(tokens, pad_id):\n    return (tokens > pad_id)[:, None, None, :]\n",
     "greater_than_pad"),
    ("the tokens changed in place", "def padding_mask(tokens, pad_id):\n    tokens[tokens != pad_id] = pad_id + 1\n"
                                    "    return (tokens != pad_id)[:, None, None, :]\n", "changed_input"),
    ("a list of rows from a loop", "def padding_mask(tokens, pad_id):\n"
                                   "    return [[[[t != pad_id for t in row]]] for row in tokens]\n", "not_an_array"),
]

# ----------------------------------------------------------------------------------------------- masked_softmax
MS = "def masked_softmax(scores, mask):\n"
MASKED = [
    ("-inf fill then softmax: a fully masked row is NaN",
     MS + "    return helpers.softmax(np.where(mask, scores, -np.inf))\n", "nan_on_empty_rows"),
    ("-1e9 fill then softmax: a fully masked row is uniform",
     MS + "    return helpers.softmax(np.where(mask, scores, -1e9))\n", "uniform_on_empty_rows"),
    ("softmax then times the mask, not renormalised", MS + "    return helpers.softmax(scores) * mask\n",
     "mask_after_softmax"),
    ("softmax times the mask, renormalised: 0/0 on an empty row",
     MS + "    w = helpers.softmax(scores) * mask\n    return w / w.sum(axis=-1, keepdims=True)\n",
      "nan_on_empty_rows"),
    ("blocked scores set to 0", MS + "    return helpers.softmax(np.where(mask, scores, 0.0))\n",
     "scores_multiplied_by_mask"),
    ("-inf fill, softmax, NaN turned into 0 (0/0 computed along the way)",
     MS + "    with np.errstate(invalid='ignore'):\n"
          "        return np.nan_to_num(helpers.softmax(np.where(mask, scores, -np.inf)))\n", "zero_over_zero"),
    ("-inf fill, NaN replaced with np.where",
     MS + "    with np.errstate(invalid='ignore'):\n        w = helpers.softmax(np.where(mask, scores, -np.inf))\n"
          "    return np.where(np.isnan(w), 0.0, w)\n", "zero_over_zero"),
    ("the mask inverted", MS + "    filled = np.where(mask, -np.inf, scores)\n"
                               "    row_max = filled.max(axis=-1, keepdims=True)\n"
                               "    row_max = np.where(np.isfinite(row_max), row_max, 0.0)\n"
                               "    exps = np.exp(filled - row_max)\n    totals = exps.sum(axis=-1, keepdims=True)\n"
                               "    return exps / np.where(totals > 0, totals, 1.0)\n", "inverted"),
    ("the sum over the queries", MS + "    filled = np.where(mask, scores, -np.inf)\n"
                                      "    row_max = filled.max(axis=-1, keepdims=True)\n"
                                      "    row_max = np.where(np.isfinite(row_max), row_max, 0.0)\n"
                                      "    exps = np.exp(filled - row_max)\n"
                                      "    totals = exps.sum(axis=-2, keepdims=True)\n"
                                      "    return exps / np.where(totals > 0, totals, 1.0)\n", "sum_over_queries"),
    ("no maximum subtracted: overflows", MS + "    exps = np.where(mask, np.exp(scores), 0.0)\n"
                                              "    totals = exps.sum(axis=-1, keepdims=True)\n"
                                              "    return exps / np.where(totals > 0, totals, 1.0)\n", "overflows"),
    ("keepdims forgotten on the maximum", MS + "    filled = np.where(mask, scores, -np.inf)\n"
                                               "    row_max = filled.max(axis=-1)\n"
                                               "    row_max = np.where(np.isfinite(row_max), row_max, 0.0)\n"
                                               "    exps = np.exp(filled - row_max)\n"
                                               "    totals = exps.sum(axis=-1, keepdims=True)\n"
                                               "    return exps / np.where(totals > 0, totals, 1.0)\n",
     "max_without_keepdims"),
    ("the caller's scores changed in place",
     MS + "    scores[~np.broadcast_to(mask, scores.shape)] = -np.inf\n"
          "    row_max = scores.max(axis=-1, keepdims=True)\n"
          "    row_max = np.where(np.isfinite(row_max), row_max, 0.0)\n"
          "    exps = np.exp(scores - row_max)\n    totals = exps.sum(axis=-1, keepdims=True)\n"
          "    return exps / np.where(totals > 0, totals, 1.0)\n", "changed_input"),
    ("the maximum over all the scores, 0/0 on an empty row",
     MS + "    exps = np.exp(scores - scores.max()) * mask\n"
          "    return exps / exps.sum(axis=-1, keepdims=True)\n", "nan_on_empty_rows"),
]

FRESH = ([("split_heads", d, answer(s), c) for d, s, c in SPLIT]
         + [("combine_heads", d, answer(s), c) for d, s, c in COMBINE]
         + [("multi_head_attention", d, answer(s), c) for d, s, c in MHA]
         + [("multi_head_attention_module", d, module_answer(*r), c) for d, r, c in MODULE]
         + [("causal_mask", d, answer(s), c) for d, s, c in CAUSAL]
         + [("padding_mask", d, answer(s), c) for d, s, c in PADDING]
         + [("masked_softmax", d, answer(s), c) for d, s, c in MASKED])


def check(name):
    return getattr(helpers, f"check_{name}")


@pytest.mark.parametrize("name, description, wrong, code", FRESH, ids=[f"{n}: {d}" for n, d, _, _ in FRESH])
def test_fresh_wrong_answer(name, description, wrong, code):
    result = check(name)(wrong)
    assert result.status != "pass", f"passed: {description}"
    if code is None:
        assert result.mistake is None or result.mistake in GENERIC, f"named {result.mistake!r}: {description}"
    else:
        assert result.mistake == code, f"{result.mistake!r} instead of {code!r}: {description} ({result.message})"


GENERIC = {"wrong_shape", "raised_error"}  # generic codes: the shape, or the crash at the answer's line


def test_at_least_85_percent_get_a_named_hint():
    """The share of fresh wrong answers whose expected verdict is a named mistake (each is asserted above)."""
    named = sum(code is not None for *_, code in FRESH)
    assert named >= 0.85 * len(FRESH), f"{named} of {len(FRESH)}"
