"""The check harness: the registry, verdicts, the grade log, and nbgrader's autograding mode."""


import numpy as np
import pytest

import helpers
from helpers.checks import EXERCISES, exercises_in
from helpers.checks.harness import (GENERIC_MISTAKES, CheckFailed, Exercise, Known, Verdict, exercise, hint_fields,
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
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    with pytest.raises(CheckFailed, match="you put cos on the even columns"):
        helpers.check_create_position_matrix(swapped)

    def stub(seq_length, embed_size):
        raise NotImplementedError()

    with pytest.raises(CheckFailed, match="not implemented yet"):
        helpers.check_create_position_matrix(stub)
    assert helpers.check_create_position_matrix(helpers.positional_encoding)  # a pass still returns its verdict
    assert capsys.readouterr() == ("", "")  # nothing on stderr: nbgrader would give the cell 0 points


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
            assert code.isidentifier() and code == code.lower() and code not in GENERIC_MISTAKES
            assert len(hint) > 20, (e.name, code)
            e.hint(code, **{f: "X" for f in hint_fields(hint)})  # every template can be filled


def test_declaring_an_exercise_twice_or_a_bad_code_is_refused():
    with pytest.raises(ValueError, match="declared twice"):
        exercise("softmax", notebook="02_attention", defines="softmax")(lambda f: None)
    with pytest.raises(ValueError, match="mistake code"):
        exercise("new_one", notebook="x", defines="y", mistakes={"Bad Code": "..."})
    assert "new_one" not in EXERCISES


def test_an_undeclared_code_is_reported_as_a_bug_of_the_check_not_a_crash():
    def body(fn):
        raise Known("no_such_code")

    check = exercise("harness_selftest", notebook="zz_none", defines="f")(body)
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
