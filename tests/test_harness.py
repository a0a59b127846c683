"""The check harness: the registry, verdicts, the grade log, and nbgrader's autograding mode."""

import sys

import numpy as np
import pytest

import helpers
from helpers.checks import EXERCISES, exercises_in
from helpers.checks.harness import (CheckFailed, Exercise, Known, Verdict, exercise, hint_fields,
                                    same)

from conftest import ROOT


def swapped(seq_length, embed_size):
    return helpers.positional_encoding(seq_length, embed_size)[:, [i ^ 1 for i in range(embed_size)]]


def test_a_verdict_displays_as_its_one_line_and_is_truthy_only_on_a_pass():
    good = helpers.check_create_position_matrix(helpers.positional_encoding)
    bad = helpers.check_create_position_matrix(swapped)
    assert good and not bad
    assert repr(good) == str(good) and str(good).startswith("✅ create_position_matrix: correct!")
    assert str(bad).startswith("❌ create_position_matrix: you put cos on the even columns")
    assert bad.to_dict() == {"name": "create_position_matrix", "status": "fail", "mistake": "sin_cos_swapped",
                             "message": bad.message}


def test_ipython_shows_the_verdict_line_and_nothing_else():
    from IPython.lib.pretty import pretty
    verdict = helpers.check_create_position_matrix(swapped)
    assert pretty(verdict) == str(verdict)


def test_a_check_writes_no_log_for_the_grader(tmp_path, monkeypatch):
    """The grader computes its own verdicts (course_tools/verdicts.py): a kernel's checks write nothing a
    student's cell could imitate, even where the old HELPERS_GRADE_LOG variable is set."""
    log = tmp_path / "log.jsonl"
    monkeypatch.setenv("HELPERS_GRADE_LOG", str(log))
    helpers.check_create_position_matrix(swapped)
    helpers.check_rotation_matrix(helpers.rotation_matrix)
    assert not log.exists()


def test_under_nbgrader_a_failing_or_unfinished_check_raises_its_hint(monkeypatch, capsys):
    from helpers.checks import harness

    monkeypatch.setattr(harness, "NBGRADER", True)  # what NBGRADER_EXECUTION set at import gives
    with pytest.raises(CheckFailed, match="you put cos on the even columns"):
        helpers.check_create_position_matrix(swapped)

    def stub(seq_length, embed_size):
        raise NotImplementedError()

    with pytest.raises(CheckFailed, match="not implemented yet"):
        helpers.check_create_position_matrix(stub)
    capsys.readouterr()
    # a pass is printed, not returned: nbgrader reads a cell's value as a partial score (and warns when it is no number)
    assert helpers.check_create_position_matrix(helpers.positional_encoding) is None
    out, err = capsys.readouterr()
    assert out.startswith("✅ create_position_matrix: correct!") and out.count("\n") == 1
    assert err == ""  # nothing on stderr: nbgrader would give the cell 0 points
    writes = []  # in one write: a kernel may flush between two, and the check cell then has two outputs
    monkeypatch.setattr(sys, "stdout", type("Writes", (), {"write": lambda self, s: writes.append(s)})())
    helpers.check_create_position_matrix(helpers.positional_encoding)
    assert len(writes) == 1 and writes[0].endswith("\n")
    verdict = helpers.check_create_position_matrix.verdict_of(swapped)  # the same verdict, never raised
    assert (verdict.status, verdict.mistake) == ("fail", "sin_cos_swapped")
    assert helpers.check_create_position_matrix.verdict_of(stub).status == "todo"


def test_the_nbgrader_mode_and_the_grading_seed_are_read_once_at_import(monkeypatch):
    """An answer that sets or pops NBGRADER_EXECUTION after the checks were imported changes nothing."""
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    assert not helpers.check_create_position_matrix(swapped)  # no CheckFailed: the mode was read at import
    monkeypatch.setenv("TFS_GRADING_SEED", "7")
    from helpers.checks import harness
    assert harness.grading_rng() is None and harness.GRADING_SEED is None


def test_every_exercise_names_its_reference_in_helpers():
    assert len(EXERCISES) == 26  # 21 in notebooks 01-06, 5 in notebook 07
    for e in EXERCISES.values():
        assert e.reference.startswith("helpers.") and e.reference in e.off_limits, e
        reference = e.reference_object()
        assert reference.__name__ == e.reference.rsplit(".", 1)[1] and callable(reference)


def test_registry_lists_every_exercise_once_in_notebook_order():
    assert list(EXERCISES) == [e.name for stem in sorted({e.notebook for e in EXERCISES.values()})
                               for e in exercises_in(stem)]
    for e in EXERCISES.values():
        assert (ROOT / "solutions" / f"{e.notebook}.ipynb").exists(), e
        assert getattr(helpers, e.check_name) is e.check, f"helpers.{e.check_name} is the check of {e.name}"
        assert e.check.exercise is e and e.points >= 1
    assert exercises_in("01_positional_encoding.ipynb") == exercises_in("01_positional_encoding")


def test_every_mistake_code_is_a_stable_identifier_with_a_hint():
    for e in EXERCISES.values():
        assert e.mistakes, f"{e.name} names no known mistake"
        for code, hint in e.mistakes.items():
            assert code.isidentifier() and code == code.lower()
            assert len(hint) > 20, (e.name, code)
            e.hint(code, **{f: "X" for f in hint_fields(hint)})  # every template can be filled


def test_declaring_an_exercise_twice_or_a_bad_code_is_refused():
    with pytest.raises(ValueError, match="declared twice"):
        exercise("softmax", notebook="02_attention", defines="softmax", reference="helpers.softmax")(lambda f: None)
    with pytest.raises(ValueError, match="mistake code"):
        exercise("new_one", notebook="x", defines="y", reference="helpers.x", mistakes={"Bad Code": "..."})
    assert "new_one" not in EXERCISES


def test_an_undeclared_code_is_reported_as_a_bug_of_the_check_not_a_crash():
    def body(fn):
        raise Known("no_such_code")

    check = exercise("harness_selftest", notebook="zz_none", defines="f", reference="helpers.f")(body)
    try:
        verdict = check(lambda: None)
        assert not verdict and verdict.mistake == "check_error" and "no_such_code" in verdict.message
    finally:
        EXERCISES.pop("harness_selftest")


def test_same_compares_nan_and_pairs():
    a = np.array([1.0, np.nan])
    assert same(a, a.copy()) and not same(a, np.array([1.0, 2.0]))
    assert same((a, a), (a.copy(), a.copy())) and not same((a, a), (a, np.zeros(2)))
    assert not same(a, (a, a))


def test_a_verdict_is_one_line_whatever_the_message():
    assert str(Verdict("x", "fail", "two\nlines")) == "❌ x: two lines"
    assert isinstance(EXERCISES["softmax"], Exercise)


# ----------------------------------------------------------------------------- issue 18: types and SystemExit
def _right_softmax(x, axis=-1):
    shifted = np.exp(x - x.max(axis=axis, keepdims=True))
    return shifted / shifted.sum(axis=axis, keepdims=True)


@pytest.mark.parametrize("wrong, code", [
    (lambda x, axis=-1: _right_softmax(x, axis) + 1j, "complex_values"),
    (lambda x, axis=-1: _right_softmax(x, axis).astype(str), "not_numbers"),
    (lambda x, axis=-1: _right_softmax(x, axis).astype(str).astype(object), "not_numbers"),
    (lambda x, axis=-1: _right_softmax(x, axis).astype(object), "not_numbers"),  # the right floats, as objects
    (lambda x, axis=-1: np.array(_right_softmax(x, axis).tolist(), dtype=object), "not_numbers"),
], ids=["plus_1j", "strings", "object_strings", "object_floats", "object_lists"])
def test_complex_and_text_answers_fail_with_their_own_code(wrong, code):
    from helpers.checks import check_softmax
    verdict = check_softmax(wrong)
    assert verdict.status == "fail" and verdict.mistake == code, verdict
    assert "\n" not in str(verdict) and "{" not in verdict.message


def test_sys_exit_in_student_code_is_a_one_line_fail_and_keyboard_interrupt_still_stops():
    import sys

    from helpers.checks import check_softmax

    def exits(x, axis=-1):
        sys.exit(3)

    verdict = check_softmax(exits)
    assert verdict.status == "fail" and verdict.mistake == "raised_error" and "SystemExit" in verdict.message, verdict
    assert "\n" not in str(verdict)

    def interrupted(x, axis=-1):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        check_softmax(interrupted)


@pytest.mark.parametrize("right", [_right_softmax, lambda x, axis=-1: _right_softmax(x, axis).tolist()])
def test_real_answers_are_not_told_complex_or_not_numbers(right):
    from helpers.checks import check_softmax
    assert check_softmax(right).status == "pass"


def test_an_object_array_is_told_it_holds_objects():
    from helpers.checks import check_softmax
    verdict = check_softmax(lambda x, axis=-1: _right_softmax(x, axis).astype(object))
    assert "dtype object" in verdict.message and "text" not in verdict.message, verdict


# ----------------------------------------------------------------------------- issue 30: results, stubs, crashes
class _PretendsToBeAnArray:
    def __init__(self, value):
        self.value = value

    def __array__(self, dtype=None, copy=None):
        return np.asarray(self.value, dtype=dtype)


def test_an_object_that_only_converts_itself_to_an_array_is_refused():
    from helpers.checks import check_softmax
    verdict = check_softmax(lambda x, axis=-1: _PretendsToBeAnArray(_right_softmax(x, axis)))
    assert (verdict.status, verdict.mistake) == ("fail", "not_a_real_array"), verdict
    assert "_PretendsToBeAnArray" in verdict.message
    listed = check_softmax(lambda x, axis=-1: [_PretendsToBeAnArray(row) for row in _right_softmax(x, axis)])
    assert listed.mistake == "not_a_real_array", listed


def test_the_stub_is_recognised_by_its_source_not_by_the_exception():
    from helpers.checks import check_causal_mask

    def stub_after_code(size):
        mask = np.zeros((size, size), dtype=bool)
        # Your Code Here
        raise NotImplementedError()
        return mask

    def raises_it_elsewhere(size):
        if size > 0:
            raise NotImplementedError("my own")
        return np.ones((size, size), dtype=bool)

    assert check_causal_mask(stub_after_code).status == "todo"
    verdict = check_causal_mask(raises_it_elsewhere)
    assert (verdict.status, verdict.mistake) == ("fail", "raised_error") and "my own" in verdict.message, verdict


def test_a_torch_error_that_is_a_not_implemented_error_is_a_crash_at_the_student_s_line():
    import torch

    from helpers.checks import check_causal_mask

    def causal_mask(size):
        padding = torch.ones(size, size, dtype=torch.bool)
        return (torch.tril(torch.ones(size, size)) & padding).numpy()

    verdict = check_causal_mask(causal_mask)
    assert (verdict.status, verdict.mistake) == ("fail", "raised_error"), verdict
    assert "NotImplementedError" in verdict.message
    assert "torch.tril(torch.ones(size, size)) & padding" in verdict.message  # the student's line, not torch's


def test_a_crash_inside_numpy_or_torch_is_located_at_the_student_s_own_line():
    import torch

    from helpers.checks import check_layer_norm, check_softmax

    def softmax(x, axis=-1):
        shifted = x - x.max(axis=axis, keepdims=True)
        return np.exp(shifted) / np.exp(shifted).sum(axis=7, keepdims=True)

    verdict = check_softmax(softmax)
    assert verdict.mistake == "raised_error" and "np.exp(shifted).sum(axis=7" in verdict.message, verdict

    class LayerNorm(torch.nn.Module):
        def __init__(self, d_model, eps=1e-5):
            super().__init__()
            self.eps = eps
            self.weight = torch.nn.Parameter(torch.ones(d_model))
            self.bias = torch.nn.Parameter(torch.zeros(d_model))

        def forward(self, x):
            padded = torch.nn.functional.pad(x, (1,))
            return padded

    verdict = check_layer_norm(LayerNorm)
    assert verdict.mistake == "raised_error" and "torch.nn.functional.pad(x, (1,))" in verdict.message, verdict


def test_the_running_exercise_is_known_inside_a_check_only():
    from helpers.checks import check_softmax
    from helpers.checks.harness import current_exercise

    seen = []

    def softmax(x, axis=-1):
        seen.append(current_exercise().name)
        return _right_softmax(x, axis)

    assert check_softmax(softmax) and set(seen) == {"softmax"} and current_exercise() is None
