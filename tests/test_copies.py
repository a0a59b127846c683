"""Signs of copying (course_tools/copies.py): answers equal, once normalised, to the public solution or to another
student's. Each test writes the answers a class would hand in into copies of the student notebooks (no grading)."""

import ast
import hashlib

import pytest

from conftest import solution_source, with_answers

from course_tools.copies import MIN_NODES, copy_signs, normal_form

NB02, NB04 = "02_attention", "04_masking"
SDPA = "scaled_dot_product_attention"
SOLUTION = solution_source(NB02, SDPA)

# The solution with every name of the student's own changed, comments, blank lines and the docstring changed.
RENAMED = '''def scaled_dot_product_attention(q, k, v, m=None):
    # my own work, honestly

    dk = q.shape[-1]   # the key size
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(dk)
    if m is not None:

        s = np.where(m, s, -np.inf)
    w = helpers.softmax(s, axis=-1)
    return w @ v, w
'''
# An honest answer of another student, and a friend's copy of it: renamed, a docstring added, formatted otherwise.
HONEST = '''def scaled_dot_product_attention(Q, K, V, mask=None):
    kt = K.swapaxes(-2, -1)
    d = K.shape[-1]
    scores = np.matmul(Q, kt) / np.sqrt(d)
    if mask is not None:
        scores = np.where(mask, scores, -1e9)
    weights = helpers.softmax(scores)
    return np.matmul(weights, V), weights
'''
FRIEND = '''def scaled_dot_product_attention(query, key, value, mask = None):
    """Attention, as in the paper."""
    transposed = key.swapaxes(-2,
                              -1)
    size = key.shape[-1]
    s = np.matmul(query, transposed) / np.sqrt(size)  # scale
    if mask is not None: s = np.where(mask, s, -1e9)
    p = helpers.softmax(s)
    return (np.matmul(p, value), p)
'''
# The same lines as HONEST with its two independent first lines swapped: another tree, not a sign (fine).
FIRST_LINES = "    kt = K.swapaxes(-2, -1)\n    d = K.shape[-1]\n"
REORDERED = HONEST.replace(FIRST_LINES, "".join(reversed(FIRST_LINES.splitlines(keepends=True))))
# HONEST with torch for np: the libraries' names are kept, so it differs from HONEST.
TORCH = HONEST.replace("np.", "torch.")
STUB = '''def scaled_dot_product_attention(Q, K, V, mask=None):
    """softmax(Q K^T / sqrt(d_k)) V."""
    # Your Code Here
    raise NotImplementedError()
'''
BROKEN = "def scaled_dot_product_attention(Q, K, V, mask=None):\n    return Q @ K.T /\n"


def hand_in(tmp_path, answers: dict[str, str], notebook=NB02, defines=SDPA) -> list[dict]:
    """A report dict per student (as the grader writes it) of a notebook holding that student's answer."""
    reports = []
    for student, source in answers.items():
        path = with_answers(tmp_path / student, notebook, {defines: source})
        sha256 = hashlib.sha256(path.read_bytes()).hexdigest()
        reports.append({"notebook": str(path), "student": student, "sha256": sha256, "exercises": [], "passed": 0,
                        "total": 0})
    return reports


def signs_of(signs: list[dict], exercise=SDPA) -> dict:
    return next((s for s in signs if s["exercise"] == exercise), {"solution": [], "groups": []})


def test_names_comments_blank_lines_and_docstrings_do_not_matter():
    assert normal_form(RENAMED, SDPA) == normal_form(SOLUTION, SDPA)
    assert normal_form(FRIEND, SDPA) == normal_form(HONEST, SDPA)


def test_order_libraries_and_attributes_do_matter():
    form = normal_form(HONEST, SDPA)
    assert normal_form(REORDERED, SDPA) != form, "reordered independent lines: another answer (not a sign)"
    assert normal_form(TORCH, SDPA) != form, "np and torch are kept"
    assert normal_form(HONEST.replace(".swapaxes(", ".transpose("), SDPA) != form, "attribute names are kept"
    assert normal_form(HONEST, SDPA) != normal_form(SOLUTION, SDPA)


def test_the_students_own_helper_functions_are_renamed_too():
    mine = ("def halve(t):\n    return t / 2\n\n\n"
            "def softmax(x, axis=-1):\n    y = halve(x)\n    return [y for _ in x]\n")
    theirs = mine.replace("halve", "half_of").replace("y", "z").replace("_ in", "row in")
    assert normal_form(mine, "softmax") == normal_form(theirs, "softmax")
    assert normal_form(mine, "softmax") != normal_form(mine.replace("t / 2", "t / 3"), "softmax")


def test_a_stub_or_code_that_does_not_parse_has_no_normal_form():
    assert normal_form(STUB, SDPA) is None
    assert normal_form(BROKEN, SDPA) is None
    assert normal_form("x = 1\n", SDPA) is None, "a cell that does not define the exercise's function"


def test_the_class_hands_in_copies_and_honest_answers(tmp_path):
    reports = hand_in(tmp_path, {"ana": RENAMED, "ben": HONEST, "cy": FRIEND, "dee": REORDERED, "eli": TORCH,
                                 "fay": STUB, "gus": STUB, "hal": BROKEN, "ivy": BROKEN, "jo": SOLUTION,
                                 "kit": TORCH.replace("mask", "m"), "lou": HONEST})
    found = signs_of(copy_signs(reports))
    assert found["solution"] == ["ana", "jo"], "the public solution, renamed or not"
    assert [g["students"] for g in found["groups"]] == [["ben", "cy", "lou"], ["eli", "kit"]], \
        "the largest group first; stubs and syntax errors are never signs"
    assert found["groups"][0]["nodes"] >= MIN_NODES and found["solution_nodes"] >= MIN_NODES


def test_no_sign_in_an_honest_class(tmp_path):
    reports = hand_in(tmp_path, {"ben": HONEST, "dee": REORDERED, "eli": TORCH, "fay": STUB, "gus": STUB})
    assert copy_signs(reports) == []


def test_short_answers_are_not_compared(tmp_path):
    """A one-line causal_mask is the same in most honest classes: fewer than MIN_NODES nodes written, no sign."""
    one_line = "def causal_mask(size):\n    return np.tril(np.ones((size, size), dtype=bool))\n"
    renamed = one_line.replace("size", "n")
    reports = hand_in(tmp_path, {"ana": one_line, "ben": renamed}, notebook=NB04, defines="causal_mask")
    assert copy_signs(reports) == []
    assert signs_of(copy_signs(reports, min_nodes=1), "causal_mask")["solution"] == ["ana", "ben"]


def test_one_students_two_files_are_not_a_group(tmp_path):
    reports = hand_in(tmp_path, {"ben": HONEST, "ben_old": HONEST})
    reports[1]["student"] = "ben"
    assert copy_signs(reports) == []


def test_files_gone_changed_or_not_graded_are_skipped(tmp_path):
    reports = hand_in(tmp_path, {"ben": HONEST, "cy": FRIEND, "dee": HONEST, "eli": HONEST})
    reports[2]["sha256"] = "0" * 64  # dee's file changed since it was graded
    reports[3]["notebook"] = str(tmp_path / "gone.ipynb")
    reports.append({"notebook": str(tmp_path / "x.ipynb"), "student": "zed", "error": "cannot read it"})
    assert [g["students"] for g in signs_of(copy_signs(reports))["groups"]] == [["ben", "cy"]]


def test_a_report_without_a_student_is_named_by_its_file(tmp_path):
    reports = hand_in(tmp_path, {"ben": HONEST, "cy": FRIEND})
    del reports[0]["student"]
    assert signs_of(copy_signs(reports))["groups"][0]["students"] == sorted([reports[0]["notebook"], "cy"])


@pytest.mark.parametrize("cell", ["%%time\n" + RENAMED,
                                  "import math\n\n" + RENAMED + "\nprint(1)\nscaled_dot_product_attention\n"])
def test_the_answer_cell_may_hold_a_magic_imports_and_displays(cell):
    """Only the cell's definitions and assignments are the answer: a magic, an import or a display is not."""
    assert normal_form(cell, SDPA) == normal_form(SOLUTION, SDPA)


def test_the_size_counts_what_the_student_wrote_not_the_cell_handed_out(tmp_path):
    """LayerNorm's cell hands out __init__: the size of an answer is the nodes of its forward's body only."""
    solution = solution_source("05_transformer", "LayerNorm")
    forward = next(node for node in ast.walk(ast.parse(solution))
                   if isinstance(node, ast.FunctionDef) and node.name == "forward")
    written = sum(len(list(ast.walk(statement))) for statement in forward.body)
    reports = hand_in(tmp_path, {"ana": solution}, notebook="05_transformer", defines="LayerNorm")
    assert signs_of(copy_signs(reports, min_nodes=1), "layer_norm")["solution_nodes"] == written
