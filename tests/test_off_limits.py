"""The off-limits guard itself (helpers/checks/guard.py), in the process that runs the check, as in a
notebook's check cell: every route to an exercise's reference or to the built-in it replaces is
refused with the one-line `used_off_limits` verdict (read from the answer's source, or refused by a
TorchFunctionMode while it runs), and right answers whose words only look like the
checking code's still pass. (The grader's side: tests/test_forging.py.)"""

import ast
import importlib.util
import sys
import textwrap
import types

import numpy as np
import pytest
import torch
from torch import nn

import helpers
import helpers.positional
from helpers.checks.guard import machinery_used

from conftest import solution_source

pytestmark = pytest.mark.guarded


def refused(verdict, name):
    """The verdict is the one-line used_off_limits fail naming `name`."""
    assert (verdict.status, verdict.mistake) == ("fail", "used_off_limits"), verdict
    assert name in verdict.message and "\n" not in str(verdict), verdict


# ---------------------------------------------------------------------------------------- notebook 01
def test_a_function_made_from_the_reference_s_code_at_definition_time():  # x4b
    def create_position_matrix(seq_length, embed_size, _f=types.FunctionType(
            helpers.positional_encoding.__code__, vars(helpers.positional), "pe", (10000.0,))):
        return _f(seq_length, embed_size)

    refused(helpers.check_create_position_matrix(create_position_matrix), "helpers.positional.positional_encoding")


def test_the_position_matrix_rebuilt_from_the_next_exercise_s_reference():  # x5: notebook 01 names it off limits
    def create_position_matrix(seq_length, embed_size):
        first = np.tile([0.0, 1.0], embed_size // 2)  # PE(0); PE(p) = PE(0) @ R_p
        return np.stack([first @ helpers.rotation_matrix(p, embed_size) for p in range(seq_length)])

    refused(helpers.check_create_position_matrix(create_position_matrix), "helpers.positional.rotation_matrix")


# ---------------------------------------------------------------------------------------- notebook 02
def as_tensor(x):
    return torch.as_tensor(np.asarray(x, dtype=np.float64))


@pytest.mark.parametrize("softmax, called", [
    (lambda x, axis=-1: torch.special.softmax(as_tensor(x), axis).numpy(), "softmax"),  # x16
    (lambda x, axis=-1: torch.log_softmax(as_tensor(x), axis).exp().numpy(), "torch.log_softmax"),  # x17
])
def test_other_softmaxes_of_torch(softmax, called):
    refused(helpers.check_softmax(softmax), called)


def test_the_math_kernel_of_torch_s_attention():  # x15
    def scaled_dot_product_attention(Q, K, V, mask=None):
        m = None if mask is None else torch.as_tensor(np.asarray(mask, dtype=bool))
        out, weights = torch.ops.aten._scaled_dot_product_attention_math(as_tensor(Q), as_tensor(K), as_tensor(V), m)
        return out.numpy(), weights.numpy()

    refused(helpers.check_scaled_dot_product_attention(scaled_dot_product_attention), "scaled_dot_product")


# ---------------------------------------------------------------------------------------- notebook 05
def layer_norm_class(forward):
    class LayerNorm(nn.Module):
        def __init__(self, d_model, eps=1e-5):
            super().__init__()
            self.eps = eps
            self.weight = nn.Parameter(torch.ones(d_model))
            self.bias = nn.Parameter(torch.zeros(d_model))

    LayerNorm.forward = forward
    return LayerNorm


@pytest.mark.parametrize("forward, called", [
    (lambda self, x: torch.native_layer_norm(x, x.shape[-1:], self.weight, self.bias, self.eps)[0],  # x8
     "native_layer_norm"),
    (lambda self, x: torch.ops.aten.layer_norm(x, list(x.shape[-1:]), self.weight, self.bias, self.eps),  # x9
     "torch.ops.aten.layer_norm"),
    (lambda self, x: torch.nn.functional.group_norm(x.reshape(-1, x.shape[-1]), 1, self.weight, self.bias,  # x10
                                                    self.eps).reshape(x.shape), "group_norm"),
])
def test_layer_norm_through_another_route_of_torch(forward, called):
    refused(helpers.check_layer_norm(layer_norm_class(forward)), called)


# ---------------------------------------------------------------------------------------- no false alarms
RIGHT = solution_source("01_positional_encoding", "create_position_matrix")
SIGNATURE, BODY = RIGHT.split("\n", 1)
LOOKALIKES = {  # right answers whose words look like the checking code's
    "local_check_name": SIGNATURE + "\n    check_even = embed_size % 2 == 0\n" + BODY,
    "record_attribute": "import collections\n\n" + SIGNATURE + (
        "\n    Rec = collections.namedtuple('Rec', 'record')\n    _ = Rec(1).record\n") + BODY,
    "dict_attribute": SIGNATURE + "\n    _ = {}.__class__.__dict__\n" + BODY,
    "local_guard": SIGNATURE + "\n    guard = embed_size > 0\n    assert guard\n" + BODY,
}


@pytest.mark.parametrize("case", sorted(LOOKALIKES))
def test_right_answers_that_look_like_the_checking_code_pass(case, tmp_path):
    """The grader's static reading passes them, and so does the check called as a check cell calls it
    (the check reads the answer's own source, as in a kernel)."""
    source = "import numpy as np\n\n" + LOOKALIKES[case]
    tree = ast.parse(source)
    assert all(machinery_used(node) is None for node in tree.body)
    path = tmp_path / f"answer_{case}.py"
    path.write_text(textwrap.dedent(source), encoding="utf-8")
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    try:
        verdict = helpers.check_create_position_matrix(module.create_position_matrix)
    finally:
        sys.modules.pop(path.stem, None)
    assert verdict.status == "pass", verdict


def test_under_nbgrader_an_off_limits_call_fails_the_check_cell(monkeypatch):
    """nbgrader's autograding (NBGRADER_EXECUTION set) runs the same checks: the cell raises, 0 points."""
    from helpers.checks.harness import CheckFailed

    from helpers.checks import harness

    monkeypatch.setattr(harness, "NBGRADER", True)  # what NBGRADER_EXECUTION set at import gives
    with pytest.raises(CheckFailed, match="helpers.positional.positional_encoding.*off limits"):
        helpers.check_create_position_matrix(lambda seq_length, embed_size: helpers.positional_encoding(
            seq_length, embed_size))


# ---------------------------------------------------------------------------------------- read from the source
PE = helpers.positional_encoding  # an alias at module level, as a notebook cell could make one


def test_an_alias_of_the_reference_in_the_answer_s_globals():
    def create_position_matrix(seq_length, embed_size):
        return PE(seq_length, embed_size)

    refused(helpers.check_create_position_matrix(create_position_matrix), "helpers.positional.positional_encoding")


def test_the_reference_imported_inside_the_answer():
    def create_position_matrix(seq_length, embed_size):
        from helpers.positional import positional_encoding as encode
        return encode(seq_length, embed_size)

    refused(helpers.check_create_position_matrix(create_position_matrix), "helpers.positional.positional_encoding")


def _my_helper(seq_length, embed_size):  # the student's own function, in another cell
    return helpers.positional.positional_encoding(seq_length, embed_size)


def test_the_reference_called_from_the_student_s_own_helper():
    def create_position_matrix(seq_length, embed_size):
        return _my_helper(seq_length, embed_size)

    refused(helpers.check_create_position_matrix(create_position_matrix), "helpers.positional.positional_encoding")


def test_a_subclass_of_the_reference_class():
    class LayerNorm(helpers.LayerNorm):
        pass

    refused(helpers.check_layer_norm(LayerNorm), "helpers.transformer.LayerNorm")


def test_a_torch_function_reached_by_a_computed_name_and_caught_is_refused_at_run_time():
    def forward(self, x):
        try:
            return getattr(torch.nn.functional, "layer" + "_norm")(x, x.shape[-1:], self.weight, self.bias, self.eps)
        except Exception:  # noqa: BLE001 - the answer hides the refusal: it is recorded all the same
            mean = x.mean(-1, keepdim=True)
            var = x.var(-1, keepdim=True, correction=0)
            return self.weight * (x - mean) / torch.sqrt(var + self.eps) + self.bias

    refused(helpers.check_layer_norm(layer_norm_class(forward)), "torch.nn.functional.layer_norm")


def test_label_smoothing_set_on_torch_s_loss_is_refused_but_plain_cross_entropy_is_not():
    class LabelSmoothingLoss(nn.Module):
        def __init__(self, smoothing=0.1, pad_id=0):
            super().__init__()
            self.smoothing, self.pad_id = smoothing, pad_id

        def forward(self, logits, target):
            v = logits.shape[-1]
            return torch.nn.functional.cross_entropy(logits.reshape(-1, v), target.reshape(-1),
                                                     ignore_index=self.pad_id, label_smoothing=self.smoothing)

    refused(helpers.check_label_smoothing_loss(LabelSmoothingLoss), "label_smoothing")


# ---------------------------------------------------------------------------------------- general tools pass
def test_a_layer_norm_that_calls_gc_collect_passes():
    import gc

    def forward(self, x):
        gc.collect()
        mean = x.mean(-1, keepdim=True)
        var = x.var(-1, keepdim=True, correction=0)
        return self.weight * (x - mean) / torch.sqrt(var + self.eps) + self.bias

    verdict = helpers.check_layer_norm(layer_norm_class(forward))
    assert verdict.status == "pass", verdict


def test_a_position_matrix_built_with_eval_exec_and_compile_passes():
    from conftest import define

    source = ("import numpy as np\n\n" + SIGNATURE + "\n    exec(compile('scale = 1.0', 'x', 'exec'))\n"
              "    base = eval('10000.0')\n    code = create_position_matrix.__code__\n"
              "    np_ = __import__('numpy')\n" + BODY)
    answer = define(source, {})["create_position_matrix"]
    assert machinery_used(ast.parse(source)) is None
    verdict = helpers.check_create_position_matrix(answer)
    assert verdict.status == "pass", verdict


@pytest.mark.parametrize("statement", ["import importlib", "import ctypes", "import gc", "x = f.__code__",
                                       "exec('1')", "eval('1')", "compile('1', 'x', 'eval')", "__import__('os')"])
def test_general_tools_are_not_tampering(statement):
    assert machinery_used(ast.parse(statement)) is None


@pytest.mark.parametrize("statement, reached", [
    ("import torch.overrides", "torch.overrides"),
    ("from torch.overrides import TorchFunctionMode", "torch.overrides"),
    ("m = torch.overrides.TorchFunctionMode", "torch.overrides|.TorchFunctionMode"),
    ("class M:\n    def __torch_function__(self, *a): pass", "__torch_function__"),
    ("import sys\nsys.modules['helpers']", "sys.modules"),
    ("from helpers.checks import harness", "helpers.checks"),
    ("check_softmax(f)", "check_softmax"),
    ("helpers.check_softmax.verdict_of(f)", ".check_softmax|.verdict_of"),
    ("import course_tools", "course_tools"),
])
def test_naming_the_checking_code_is_tampering(statement, reached):
    assert machinery_used(ast.parse(statement)) in reached.split("|")
