"""Each wrong implementation named in the issues grades `fail` through `python -m helpers.grade`,
with its own hint. (The checks themselves are tested against many more in tests/test_checks_*.py;
this file proves the whole path: notebook -> kernel -> check -> grader report.)"""

import pytest

from conftest import grade, solution_source, with_answer


def student_answer(even_column, odd_column):
    """create_position_matrix as a student writes it, with the two assignments given."""
    return f"""def create_position_matrix(seq_length, embed_size):
    position_matrix = np.zeros((seq_length, embed_size))
    for pos in range(seq_length):
        for i in range(0, embed_size, 2):
            {even_column}
            {odd_column}
    return position_matrix
"""


POSITIONAL = {  # hint -> the wrong implementations named in issue #2
    "cos on the even columns": student_answer(
        "position_matrix[pos, i] = np.cos(pos / 10000 ** (i / embed_size))",
        "position_matrix[pos, i + 1] = np.sin(pos / 10000 ** (i / embed_size))"),
    "all the sines first": student_answer(
        "position_matrix[pos, i // 2] = np.sin(pos / 10000 ** (i / embed_size))",
        "position_matrix[pos, embed_size // 2 + i // 2] = np.cos(pos / 10000 ** (i / embed_size))"),
    "uses i where it should use 2i": student_answer(
        "position_matrix[pos, i] = np.sin(pos / 10000 ** (i / 2 / embed_size))",
        "position_matrix[pos, i + 1] = np.cos(pos / 10000 ** (i / 2 / embed_size))"),
    "base looks like 1000 ": student_answer(
        "position_matrix[pos, i] = np.sin(pos / 1000 ** (i / embed_size))",
        "position_matrix[pos, i + 1] = np.cos(pos / 1000 ** (i / embed_size))"),
    "positions start at 1": student_answer(
        "position_matrix[pos, i] = np.sin((pos + 1) / 10000 ** (i / embed_size))",
        "position_matrix[pos, i + 1] = np.cos((pos + 1) / 10000 ** (i / embed_size))"),
}

CASES = [("01_positional_encoding", "create_position_matrix", code, hint) for hint, code in POSITIONAL.items()]
CASES += [  # notebook, exercise, the student's wrong code, the hint it must get (issue #3)
    ("02_attention", "softmax", "def softmax(x, axis=-1):\n    e = np.exp(x)\n    return e / e.sum(axis=axis, keepdims=True)", "overflows"),
    ("02_attention", "scaled_dot_product_attention", "def scaled_dot_product_attention(Q, K, V, mask=None):\n    s = Q @ np.swapaxes(K, -1, -2)\n    if mask is not None:\n        s = np.where(mask, s, -np.inf)\n    w = helpers.softmax(s)\n    return w @ V, w", "forgot to divide"),
    ("02_attention", "scaled_dot_product_attention", "def scaled_dot_product_attention(Q, K, V, mask=None):\n    s = Q @ np.swapaxes(K, -1, -2) / Q.shape[-1]\n    if mask is not None:\n        s = np.where(mask, s, -np.inf)\n    w = helpers.softmax(s)\n    return w @ V, w", "instead of sqrt(d_k)"),
    ("02_attention", "scaled_dot_product_attention", "def scaled_dot_product_attention(Q, K, V, mask=None):\n    s = Q @ np.swapaxes(K, -1, -2) / math.sqrt(Q.shape[-1])\n    if mask is not None:\n        s = np.where(mask, s, -np.inf)\n    w = helpers.softmax(s, axis=-2)\n    return w @ V, w", "wrong axis"),
    ("02_attention", "scaled_dot_product_attention", "def scaled_dot_product_attention(Q, K, V, mask=None):\n    s = Q @ K / math.sqrt(Q.shape[-1])\n    if mask is not None:\n        s = np.where(mask, s, -np.inf)\n    w = helpers.softmax(s)\n    return w @ V, w", "K is not transposed"),
    ("02_attention", "scaled_dot_product_attention", "def scaled_dot_product_attention(Q, K, V, mask=None):\n    s = Q @ np.swapaxes(K, -1, -2) / math.sqrt(Q.shape[-1])\n    w = helpers.softmax(s)\n    if mask is not None:\n        w = w * mask\n    return w @ V, w", "after the softmax"),
    ("03_multi_head_attention", "split_heads", "def split_heads(x, num_heads):\n    b, l, d = x.shape\n    return x.reshape(b, num_heads, l, d // num_heads)", "silently mixes positions"),
    ("03_multi_head_attention", "combine_heads", "def combine_heads(x):\n    b, h, l, d = x.shape\n    return x.reshape(b, l, h * d)", "silently mixes positions"),
    ("04_masking", "causal_mask", "def causal_mask(size):\n    return np.tril(np.ones((size, size), dtype=bool), k=-1)", "off by one"),
    ("04_masking", "causal_mask", "def causal_mask(size):\n    return np.triu(np.ones((size, size), dtype=bool))", "swapped"),
    ("04_masking", "padding_mask", "def padding_mask(tokens, pad_id):\n    return (tokens == pad_id)[:, None, None, :]", "pads are marked True"),
    ("04_masking", "masked_softmax", "def masked_softmax(scores, mask):\n    return helpers.softmax(np.where(mask, scores, -np.inf))", "gives NaN"),
]




def broken(name, right_line, wrong_line):
    """The solution of notebook 05's `name` with some of its lines replaced by a mistake."""
    source = solution_source("05_transformer", name)
    assert right_line in source, f"{right_line!r} is no longer in the solution of {name}"
    return source.replace(right_line, wrong_line, 1)


TRANSFORMER = [  # cell, exercise, right line, wrong line, hint (issue #4)
    ("EncoderLayer", "encoder_layer",
     "x = self.norm1(x + self.dropout1(self.self_attn(x, x, x, src_mask)))",
     "x = self.norm1(self.dropout1(self.self_attn(x, x, x, src_mask)))", "missing residual around self-attention"),
    ("EncoderLayer", "encoder_layer",
     "x = self.norm1(x + self.dropout1(self.self_attn(x, x, x, src_mask)))\n"
     "            x = self.norm2(x + self.dropout2(self.ff(x)))",
     "x = x + self.norm1(self.dropout1(self.self_attn(x, x, x, src_mask)))\n"
     "            x = x + self.norm2(self.dropout2(self.ff(x)))", "normalises the SUM"),
    ("DecoderLayer", "decoder_layer",
     "x = self.norm1(x + self.dropout1(self.self_attn(x, x, x, tgt_mask)))",
     "x = self.norm1(x + self.dropout1(self.self_attn(x, x, x)))", "the causal mask is left out"),
    ("DecoderLayer", "decoder_layer",
     "x = self.norm2(x + self.dropout2(self.cross_attn(x, memory, memory, memory_mask)))",
     "x = self.norm2(x + self.dropout2(self.cross_attn(x, x, x, memory_mask)))", "K and V come from the decoder"),
    ("greedy_decode", "greedy_decode",
     "next_token = logits[:, -1].argmax(dim=-1, keepdim=True)",
     "next_token = logits[:, 0].argmax(dim=-1, keepdim=True)", "FIRST position"),
]
CASES += [("05_transformer", cell, broken(cell, right, wrong), hint, exercise)
          for cell, exercise, right, wrong, hint in TRANSFORMER]


@pytest.mark.parametrize("case", CASES, ids=[f"{c[1]}: {c[3]}" for c in CASES])
def test_wrong_answer_grades_fail_with_its_hint(tmp_path, case):
    notebook, cell, code, hint, *named = case
    exercise = named[0] if named else cell  # the exercise's name, when it is not the cell's function name
    status, report = grade(with_answer(tmp_path, notebook, cell, code))
    assert status == 1
    verdicts = {e["name"]: e for e in report["exercises"]}
    assert verdicts[exercise]["status"] == "fail" and hint in verdicts[exercise]["message"], verdicts[exercise]
    others = [e["status"] for name, e in verdicts.items() if name != exercise]
    assert set(others) <= {"todo"}, "the other exercises of a pristine notebook stay todo"
