"""The grader end to end on wrong answers: one grader run over a folder of submissions in which every
exercise of every course notebook holds a different wrong answer. Each submission is small (the course
notebook's imports cell, then each exercise's cell and its check cell, as in test_forging.py): the whole
notebooks are graded in test_grade.py. A cell added after the last check cell must not run.

Each must be reported as `fail` with its mistake code, in the CSV, whose rows and mistake counts are
tested on the same run. The checks themselves are tested in-process, against many more wrong
answers, in tests/test_checks_*.py: this file proves the whole path notebook -> kernel -> check -> report.
"""

import csv

import nbformat
import pytest

from helpers.checks import exercises_in

from conftest import SOLUTIONS, run_grader, solution_source
from test_forging import small_notebook

STEMS = [path.stem for path in SOLUTIONS]


def create_position_matrix(even_column, odd_column):
    """create_position_matrix as a student writes it, with the two assignments given."""
    return f"""def create_position_matrix(seq_length, embed_size):
    position_matrix = np.zeros((seq_length, embed_size))
    for pos in range(seq_length):
        for i in range(0, embed_size, 2):
            {even_column}
            {odd_column}
    return position_matrix
"""


def broken(name, right_line, wrong_line, notebook="05_transformer"):
    """The solution of a notebook's `name` (notebook 05's by default) with some of its lines replaced by a mistake."""
    source = solution_source(notebook, name)
    assert right_line in source, f"{right_line!r} is no longer in the solution of {name}"
    return source.replace(right_line, wrong_line, 1)


# notebook -> {cell's function or class: (its exercise, the mistake code expected, the student's wrong code)}
WRONG = {
    "01_positional_encoding": {
        "create_position_matrix": ("create_position_matrix", "sin_cos_swapped", create_position_matrix(
            "position_matrix[pos, i] = np.cos(pos / 10000 ** (i / embed_size))",
            "position_matrix[pos, i + 1] = np.sin(pos / 10000 ** (i / embed_size))")),
        "rotation_matrix": ("rotation_matrix", "blocks_transposed", """def rotation_matrix(k, d_model):
    R = np.zeros((d_model, d_model))
    for i in range(d_model // 2):
        b = k / 10000 ** (2 * i / d_model)
        R[2 * i, 2 * i], R[2 * i, 2 * i + 1] = np.cos(b), np.sin(b)
        R[2 * i + 1, 2 * i], R[2 * i + 1, 2 * i + 1] = -np.sin(b), np.cos(b)
    return R
"""),
        "apply_rope": ("apply_rope", "halves_layout", """def apply_rope(x, positions):
    d = x.shape[-1]
    angles = np.asarray(positions)[:, None] / 10000 ** (np.arange(0, d, 2) / d)
    cos, sin = np.concatenate([np.cos(angles)] * 2, -1), np.concatenate([np.sin(angles)] * 2, -1)
    rotate_half = np.concatenate([-x[..., d // 2:], x[..., :d // 2]], -1)
    return x * cos + rotate_half * sin
"""),
    },
    "02_attention": {
        "softmax": ("softmax", "softmax_overflows",
                    "def softmax(x, axis=-1):\n    e = np.exp(x)\n    return e / e.sum(axis=axis, keepdims=True)\n"),
        "scaled_dot_product_attention": ("scaled_dot_product_attention", "not_scaled",
                                         "def scaled_dot_product_attention(Q, K, V, mask=None):\n"
                                         "    s = Q @ np.swapaxes(K, -1, -2)\n"
                                         "    if mask is not None:\n"
                                         "        s = np.where(mask, s, -np.inf)\n"
                                         "    w = helpers.softmax(s)\n"
                                         "    return w @ V, w\n"),
    },
    "03_multi_head_attention": {
        "split_heads": ("split_heads", "reshape_without_transpose",
                        "def split_heads(x, num_heads):\n    b, l, d = x.shape\n"
                        "    return x.reshape(b, num_heads, l, d // num_heads)\n"),
        "combine_heads": ("combine_heads", "reshape_without_transpose",
                          "def combine_heads(x):\n    b, h, l, d = x.shape\n    return x.reshape(b, l, h * d)\n"),
        "multi_head_attention": ("multi_head_attention", "no_output_projection",
                                 "def multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, num_heads, mask=None):\n"
                                 "    q = helpers.split_heads(x_q @ w_q, num_heads)\n"
                                 "    k = helpers.split_heads(x_kv @ w_k, num_heads)\n"
                                 "    v = helpers.split_heads(x_kv @ w_v, num_heads)\n"
                                 "    heads, weights = helpers.scaled_dot_product_attention(q, k, v, mask)\n"
                                 "    return helpers.combine_heads(heads), weights\n"),
        "MultiHeadAttention": ("multi_head_attention_module", "no_scaling", broken(
            "MultiHeadAttention", "scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_k)",
            "scores = q @ k.transpose(-2, -1)", notebook="03_multi_head_attention")),
    },
    "04_masking": {
        "causal_mask": ("causal_mask", "diagonal_masked",
                        "def causal_mask(size):\n    return np.tril(np.ones((size, size), dtype=bool), k=-1)\n"),
        "padding_mask": ("padding_mask", "inverted",
                         "def padding_mask(tokens, pad_id):\n    return (tokens == pad_id)[:, None, None, :]\n"),
        "masked_softmax": ("masked_softmax", "nan_on_empty_rows",
                           "def masked_softmax(scores, mask):\n"
                           "    return helpers.softmax(np.where(mask, scores, -np.inf))\n"),
    },
}
TRANSFORMER = [  # cell, exercise, code, right line, wrong line
    ("LayerNorm", "layer_norm", "unbiased_variance",
     "var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)",
     "var = x.var(dim=-1, keepdim=True)"),
    ("PositionwiseFeedForward", "feed_forward", "no_relu",
     "return self.linear2(self.dropout(torch.relu(self.linear1(x))))",
     "return self.linear2(self.dropout(self.linear1(x)))"),
    ("EncoderLayer", "encoder_layer", "no_residual_attention",
     "x = self.norm1(x + self.dropout1(self.self_attn(x, x, x, src_mask)))",
     "x = self.norm1(self.dropout1(self.self_attn(x, x, x, src_mask)))"),
    ("DecoderLayer", "decoder_layer", "kv_from_decoder",
     "x = self.norm2(x + self.dropout2(self.cross_attn(x, memory, memory, memory_mask)))",
     "x = self.norm2(x + self.dropout2(self.cross_attn(x, x, x, memory_mask)))"),
    ("Transformer", "transformer", "no_sqrt_d_model",
     "x = self.positional(self.src_embed(src) * math.sqrt(self.d_model))",
     "x = self.positional(self.src_embed(src))"),
]
WRONG["05_transformer"] = {cell: (exercise, code, broken(cell, right, wrong))
                           for cell, exercise, code, right, wrong in TRANSFORMER}
WRONG["06_training"] = {
    "greedy_decode": ("greedy_decode", "first_position", broken(
        "greedy_decode", "next_token = logits[:, -1].argmax(dim=-1, keepdim=True)",
        "next_token = logits[:, 0].argmax(dim=-1, keepdim=True)", notebook="06_training")),
    "transformer_lr": ("transformer_lr", "warmup_exponent", broken(
        "transformer_lr", "step * warmup ** -1.5", "step * warmup ** -0.5", notebook="06_training")),
    "LabelSmoothingLoss": ("label_smoothing_loss", "padding_not_ignored", broken(
        "LabelSmoothingLoss",
        "return loss[keep].sum() / keep.sum().clamp(min=1)  # at least 1: a batch of pads only gives 0",
        "return loss.mean()", notebook="06_training")),
    "train_step": ("train_step", "no_scheduler_step", broken(
        "train_step", "    scheduler.step()\n", "", notebook="06_training")),
}
GPT = [  # cell, exercise, code, right line, wrong line
    ("GPTBlock", "gpt_block", "no_residual_attention",
     "x = x + self.dropout1(self.self_attn(h, h, h, mask))", "x = self.dropout1(self.self_attn(h, h, h, mask))"),
    ("temperature_probs", "temperature_probs", "softmax_before_temperature",
     "return torch.softmax(logits / temperature, dim=-1)", "return torch.softmax(logits, dim=-1) / temperature"),
    ("top_k_filter", "top_k_filter", "keeps_k_plus_one", "torch.topk(logits, k, dim=-1)",
     "torch.topk(logits, k + 1, dim=-1)"),
    ("top_p_filter", "top_p_filter", "excludes_crossing_token", "before < p)", "before + sorted_probs < p)"),
    ("sample_next", "sample_next", "no_generator", "torch.multinomial(flat, 1, generator=generator)",
     "torch.multinomial(flat, 1)"),
]
# The block's parts come from a cell of notebook 07 that a small submission does not hold: the references here.
GPT_PARTS = "from helpers import LayerNorm, MultiHeadAttention, PositionwiseFeedForward\n\n\n"
WRONG["07_gpt"] = {cell: (exercise, code, (GPT_PARTS if cell == "GPTBlock" else "")
                          + broken(cell, right, wrong, notebook="07_gpt"))
                   for cell, exercise, code, right, wrong in GPT}

STUDENTS = {stem: f"student{number}" for number, stem in enumerate(STEMS, start=1)}
AFTER_THE_LAST_CHECK = "import os\nos._exit(1)"  # a cell after the last check cell: the grader would note its death
UNREADABLE = "late/carol_04_masking.ipynb"  # a corrupt submission: reported, and the others still graded


def test_every_exercise_has_a_wrong_answer():
    assert set(WRONG) == set(STEMS)
    for stem, answers in WRONG.items():
        assert sorted(exercise for exercise, _, _ in answers.values()) == sorted(e.name for e in exercises_in(stem))


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """One grader run (human output, --csv) over a submissions folder: (exit status, stdout, stderr, CSV rows)."""
    folder = tmp_path_factory.mktemp("submissions")
    for stem, answers in WRONG.items():  # e.g. submissions/student1/student1_01_positional_encoding.ipynb
        small_notebook(folder / STUDENTS[stem], f"{STUDENTS[stem]}_{stem}.ipynb", stem,
                       {exercise: source for exercise, _, source in answers.values()})
    first = folder / STUDENTS[STEMS[0]] / f"{STUDENTS[STEMS[0]]}_{STEMS[0]}.ipynb"
    notebook = nbformat.read(first, as_version=4)  # an experiment after the last check cell is not run
    notebook.cells.append(nbformat.v4.new_code_cell(AFTER_THE_LAST_CHECK))
    nbformat.write(notebook, first)
    (folder / UNREADABLE).parent.mkdir()
    (folder / UNREADABLE).write_text("{not json", encoding="utf-8")
    checkpoints = folder / STUDENTS[STEMS[0]] / ".ipynb_checkpoints"  # Jupyter's autosave copies are not graded
    checkpoints.mkdir()
    (checkpoints / f"{STEMS[0]}-checkpoint.ipynb").write_text("{not json", encoding="utf-8")
    table = folder.parent / "grades.csv"
    status, out, err = run_grader(folder, "--csv", table, "--jobs", "2")
    assert "the kernel died" not in out, "the grader ran a cell after the last check cell"
    with open(table, newline="", encoding="utf-8") as rows:
        return status, out, err, list(csv.DictReader(rows))


def test_an_unreadable_submission_exits_2_and_the_others_are_graded(graded):
    status, out, err, rows = graded
    assert status == 2
    assert "cannot read" in err and UNREADABLE.split("/")[-1] in err
    errors = [r for r in rows if r["status"] == "error"]
    masking = [("04_masking", e.name) for e in exercises_in("04_masking")]
    assert [(r["notebook"], r["exercise"]) for r in errors] == masking
    assert all(r["student_file"].endswith(UNREADABLE) for r in errors)
    assert not any("checkpoint" in r["student_file"] for r in rows)


@pytest.mark.parametrize("stem", STEMS)
def test_each_wrong_answer_fails_with_its_mistake_code(graded, stem):
    rows = [r for r in graded[3] if r["notebook"] == stem and r["status"] != "error"]
    expected = sorted((exercise, "fail", code) for exercise, code, _ in WRONG[stem].values())
    assert sorted((r["exercise"], r["status"], r["mistake"]) for r in rows) == expected
    (student_file,) = {r["student_file"] for r in rows}
    assert student_file.endswith(f"{STUDENTS[stem]}/{STUDENTS[stem]}_{stem}.ipynb")


def test_csv_has_one_row_per_notebook_and_exercise(graded):
    rows = graded[3]
    assert list(rows[0]) == ["student_file", "notebook", "exercise", "status", "mistake", "student", "points",
                             "max_points", "graded_by"]
    per_notebook = {stem: len(exercises_in(stem)) for stem in STEMS}
    assert len(rows) == sum(per_notebook.values()) + per_notebook["04_masking"]  # the corrupt one has its rows too
    files = [r["student_file"] for r in rows]
    assert files == sorted(files), "the notebooks of a folder are graded in sorted order"


def test_reports_then_mistake_counts_on_stdout(graded):
    out = graded[1]
    failed = sum(len(answers) for answers in WRONG.values())
    assert out.index("Grading ") < out.index(f"Mistakes over {len(STEMS) + 1} notebooks ({failed} failed exercises):")
    assert "[sin_cos_swapped]" in out, "the human report names the mistake code"
    table = out[out.index("Mistakes over"):].splitlines()[2:]
    counted = sorted(tuple(line.split()) for line in table)
    expected = sorted((exercise, code, "1") for answers in WRONG.values() for exercise, code, _ in answers.values())
    assert counted == expected


def test_mistake_counts_are_sorted_by_count():
    from course_tools.grade import format_mistakes, mistake_counts

    def row(exercise, status, mistake=""):
        return {"student_file": "x", "notebook": "n", "exercise": exercise, "status": status, "mistake": mistake}

    rows = [row("softmax", "fail", "softmax_overflows"), row("create_position_matrix", "fail", "sin_cos_swapped"),
            row("create_position_matrix", "fail", "sin_cos_swapped"), row("softmax", "pass"), row("softmax", "todo"),
            row("rotation_matrix", "fail", ""), row("create_position_matrix", "error")]
    assert mistake_counts(rows) == [("create_position_matrix", "sin_cos_swapped", 2),
                                    ("rotation_matrix", "(unrecognised)", 1), ("softmax", "softmax_overflows", 1)]
    text = format_mistakes(mistake_counts(rows), 3)
    assert text.splitlines()[0] == "Mistakes over 3 notebooks (4 failed exercises):"
    assert "none" in format_mistakes([], 2)
