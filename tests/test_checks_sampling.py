"""The checks of notebook 07's sampling exercises accept right answers written the way a student would, name each
known mistake by its code (and only that one), report stubs as todo, and never raise."""

import numpy as np
import pytest
import torch

from helpers.checks.harness import exercises_in
from helpers.checks.sampling import (SAMPLE_MISTAKES, TEMPERATURE_MISTAKES, TOP_K_MISTAKES, TOP_P_MISTAKES,
                                     check_sample_next, check_temperature_probs, check_top_k_filter,
                                     check_top_p_filter, tie_logits, wrong_top_k, wrong_top_p)

from conftest import verdict


def test_registered_in_notebook_order():
    names = [e.name for e in exercises_in("07_gpt")]
    assert names[names.index("temperature_probs"):] == ["temperature_probs", "top_k_filter", "top_p_filter",
                                                         "sample_next"]


# ---------------------------------------------------------------------- temperature_probs
def temperature_right(logits, temperature):
    return torch.softmax(logits / temperature, dim=-1)


def temperature_by_hand(logits, temperature):
    scaled = logits / temperature
    e = torch.exp(scaled - scaled.max(dim=-1, keepdim=True).values)
    return e / e.sum(dim=-1, keepdim=True)


def temperature_numpy(logits, temperature):
    x = logits.numpy() / temperature
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


TEMPERATURE_WRONG = {
    "softmax_before_temperature": lambda logits, t: torch.softmax(torch.softmax(logits, dim=-1) / t, dim=-1),
    "multiplied_by_temperature": lambda logits, t: torch.softmax(logits * t, dim=-1),
    "temperature_ignored": lambda logits, t: torch.softmax(logits, dim=-1),
    "wrong_axis": lambda logits, t: torch.softmax(logits / t, dim=0),
    "returns_logits": lambda logits, t: logits / t,
    "log_probabilities": lambda logits, t: torch.log_softmax(logits / t, dim=-1),
}


def temperature_as_a_power(logits, temperature):  # p ** (1 / T), renormalised: the same distribution
    probs = torch.softmax(logits, dim=-1) ** (1 / temperature)
    return probs / probs.sum(dim=-1, keepdim=True)


@pytest.mark.parametrize("candidate", [temperature_right, temperature_by_hand, temperature_numpy,
                                       temperature_as_a_power])
def test_temperature_right_answers_pass(candidate, capsys):
    assert verdict(check_temperature_probs, candidate, capsys), verdict(check_temperature_probs, candidate)


@pytest.mark.parametrize("code", sorted(TEMPERATURE_WRONG))
def test_temperature_wrong_answer_gets_its_code(code):
    v = verdict(check_temperature_probs, TEMPERATURE_WRONG[code])
    assert not v and v.mistake == code, v


def test_temperature_probabilities_divided_is_softmax_first():
    v = verdict(check_temperature_probs, lambda logits, t: torch.softmax(logits, dim=-1) / t)
    assert v.mistake == "softmax_before_temperature", v


def test_temperature_every_declared_mistake_is_tested():
    assert set(TEMPERATURE_WRONG) == set(TEMPERATURE_MISTAKES)


def test_temperature_stub_is_todo():
    def temperature_probs(logits, temperature):
        # Your Code Here
        raise NotImplementedError()

    assert verdict(check_temperature_probs, temperature_probs).status == "todo"


# ---------------------------------------------------------------------- top_k_filter
def top_k_right(logits, k):
    v = torch.topk(logits, k).values
    return logits.masked_fill(logits < v[..., [-1]], float("-inf"))


def top_k_matrix_only(logits, k):  # right for (rows, V) only: the task says (..., V)
    v = torch.topk(logits, k).values
    return logits.masked_fill(logits < v[:, [-1]], float("-inf"))


def top_k_clone(logits, k):
    out = logits.clone()
    kth = torch.sort(logits, dim=-1, descending=True).values[..., k - 1].unsqueeze(-1)
    out[out < kth] = -float("inf")
    return out


def top_k_k_plus_one(logits, k):
    v = torch.topk(logits, k + 1).values
    return logits.masked_fill(logits < v[:, [-1]], float("-inf"))


def top_k_drops_kth(logits, k):
    v = torch.topk(logits, k).values
    return logits.masked_fill(logits <= v[:, [-1]], float("-inf"))


def top_k_drops_ties(logits, k):
    values, indices = torch.topk(logits, k)
    out = torch.full_like(logits, float("-inf"))
    return out.scatter(-1, indices, values)


def top_k_argsort(logits, k):  # keeps exactly k, tied logits chosen by argsort: the same mistake
    order = logits.argsort(dim=-1, descending=True, stable=True)
    out = torch.full_like(logits, float("-inf"))
    return out.scatter(-1, order[:, :k], logits.gather(-1, order[:, :k]))


def top_k_smallest(logits, k):
    v = torch.topk(logits, k, largest=False).values
    return logits.masked_fill(logits > v[:, [-1]], float("-inf"))


def top_k_zero(logits, k):
    v = torch.topk(logits, k).values
    return torch.where(logits < v[:, [-1]], torch.zeros_like(logits), logits)


def top_k_probs(logits, k):
    return torch.softmax(top_k_right(logits, k), dim=-1)


TOP_K_WRONG = {"keeps_k_plus_one": top_k_k_plus_one, "drops_kth": top_k_drops_kth, "drops_ties": top_k_drops_ties,
               "keeps_smallest": top_k_smallest, "removed_not_minus_inf": top_k_zero,
               "returns_probabilities": top_k_probs}


@pytest.mark.parametrize("candidate", [top_k_right, top_k_clone])
def test_top_k_right_answers_pass(candidate, capsys):
    assert verdict(check_top_k_filter, candidate, capsys), verdict(check_top_k_filter, candidate)


def test_a_top_k_for_matrices_only_fails_on_one_row():
    v = verdict(check_top_k_filter, top_k_matrix_only)
    assert not v and v.mistake == "raised_error" and "(8,)" in str(v), str(v)


@pytest.mark.parametrize("code", sorted(TOP_K_WRONG))
def test_top_k_wrong_answer_gets_its_code(code):
    v = verdict(check_top_k_filter, TOP_K_WRONG[code])
    assert not v and v.mistake == code, v


def test_top_k_ties_by_argsort_are_named():
    v = verdict(check_top_k_filter, top_k_argsort)
    assert v.mistake == "drops_ties", v


def test_top_k_in_place_is_a_changed_input():
    def top_k_filter(logits, k):
        v = torch.topk(logits, k).values
        logits[logits < v[:, [-1]]] = float("-inf")
        return logits

    assert verdict(check_top_k_filter, top_k_filter).mistake == "changed_input"


def test_top_k_every_declared_mistake_is_tested():
    assert set(TOP_K_WRONG) == set(TOP_K_MISTAKES)


def test_top_k_wrong_answers_differ_from_the_reference():
    logits = tie_logits()
    for code, wrong in wrong_top_k(logits, 2).items():
        assert not torch.equal(wrong, top_k_right(logits, 2)), code


# ---------------------------------------------------------------------- top_p_filter
def top_p_right(probs, p):
    sorted_probs, order = torch.sort(probs, dim=-1, descending=True)
    cumulative = torch.cumsum(sorted_probs, dim=-1)
    remove = cumulative - sorted_probs >= p
    sorted_probs[remove] = 0.0
    out = torch.zeros_like(probs).scatter(-1, order, sorted_probs)
    return out / out.sum(dim=-1, keepdim=True)


def top_p_hf_style(probs, p):  # Hugging Face's way: shift the removal mask right by one
    sorted_probs, order = torch.sort(probs, descending=True)
    remove = torch.cumsum(sorted_probs, dim=-1) > p
    remove[..., 1:] = remove[..., :-1].clone()
    remove[..., 0] = False
    out = probs.clone()
    out[remove.scatter(-1, order, remove)] = 0
    return out / out.sum(-1, keepdim=True)


def top_p_excludes_crossing(probs, p):
    sorted_probs, order = torch.sort(probs, dim=-1, descending=True)
    keep = torch.cumsum(sorted_probs, dim=-1) <= p
    out = torch.zeros_like(probs).scatter(-1, order, sorted_probs * keep)
    return out / out.sum(dim=-1, keepdim=True)


def top_p_not_normalised(probs, p):
    sorted_probs, order = torch.sort(probs, dim=-1, descending=True)
    keep = torch.cumsum(sorted_probs, dim=-1) - sorted_probs < p
    return torch.zeros_like(probs).scatter(-1, order, sorted_probs * keep)


def top_p_unsorted(probs, p):
    keep = torch.cumsum(probs, dim=-1) - probs < p
    out = probs * keep
    return out / out.sum(dim=-1, keepdim=True)


def top_p_ascending(probs, p):
    sorted_probs, order = torch.sort(probs, dim=-1)
    keep = torch.cumsum(sorted_probs, dim=-1) - sorted_probs < p
    out = torch.zeros_like(probs).scatter(-1, order, sorted_probs * keep)
    return out / out.sum(dim=-1, keepdim=True)


def top_p_sorted_order(probs, p):
    sorted_probs, _ = torch.sort(probs, dim=-1, descending=True)
    keep = torch.cumsum(sorted_probs, dim=-1) - sorted_probs < p
    out = sorted_probs * keep
    return out / out.sum(dim=-1, keepdim=True)


def top_p_hf_style_without_the_shift(probs, p):  # removes the token whose cumulative sum crosses p
    sorted_probs, order = torch.sort(probs, descending=True)
    remove = torch.cumsum(sorted_probs, dim=-1) > p
    out = probs.clone()
    out[remove.scatter(-1, order, remove)] = 0
    return out / out.sum(-1, keepdim=True)


TOP_P_WRONG = {"excludes_crossing_token": top_p_excludes_crossing, "not_renormalised": top_p_not_normalised,
               "unsorted_cumsum": top_p_unsorted, "ascending_sort": top_p_ascending,
               "order_not_restored": top_p_sorted_order}


@pytest.mark.parametrize("candidate", [top_p_right, top_p_hf_style])
def test_top_p_right_answers_pass(candidate, capsys):
    assert verdict(check_top_p_filter, candidate, capsys), verdict(check_top_p_filter, candidate)


@pytest.mark.parametrize("code", sorted(TOP_P_WRONG))
def test_top_p_wrong_answer_gets_its_code(code):
    v = verdict(check_top_p_filter, TOP_P_WRONG[code])
    assert not v and v.mistake == code, v


def test_top_p_removal_without_the_shift_excludes_the_crossing_token():
    v = verdict(check_top_p_filter, top_p_hf_style_without_the_shift)
    assert v.mistake == "excludes_crossing_token", v


def test_top_p_every_declared_mistake_is_tested():
    assert set(TOP_P_WRONG) == set(TOP_P_MISTAKES)


def test_top_p_wrong_answers_differ_from_the_reference():
    probs = torch.softmax(torch.randn(3, 8, dtype=torch.float64), dim=-1)
    for code, wrong in wrong_top_p(probs, 0.6).items():
        assert not torch.allclose(wrong, top_p_right(probs, 0.6), equal_nan=True), code


# ---------------------------------------------------------------------- sample_next
def sample_right(logits, generator, temperature=1.0, top_k=None, top_p=None):
    if temperature == 0:
        return logits.argmax(dim=-1)
    if top_k is not None:
        logits = top_k_right(logits, top_k)
    probs = torch.softmax(logits / temperature, dim=-1)
    if top_p is not None:
        probs = top_p_right(probs, top_p)
    return torch.multinomial(probs, num_samples=1, generator=generator).squeeze(-1)


def sample_no_generator(logits, generator, temperature=1.0, top_k=None, top_p=None):
    if temperature == 0:
        return logits.argmax(dim=-1)
    if top_k is not None:
        logits = top_k_right(logits, top_k)
    probs = torch.softmax(logits / temperature, dim=-1)
    if top_p is not None:
        probs = top_p_right(probs, top_p)
    return torch.multinomial(probs, num_samples=1).squeeze(-1)


def sample_greedy(logits, generator, temperature=1.0, top_k=None, top_p=None):
    return logits.argmax(dim=-1)


def sample_top_p_first(logits, generator, temperature=1.0, top_k=None, top_p=None):
    if temperature == 0:
        return logits.argmax(dim=-1)
    if top_k is not None:
        logits = top_k_right(logits, top_k)
    probs = torch.softmax(logits, dim=-1)
    if top_p is not None:
        probs = top_p_right(probs, top_p)
    probs = torch.softmax(torch.log(probs) / temperature, dim=-1)
    return torch.multinomial(probs, num_samples=1, generator=generator).squeeze(-1)


def sample_zero_not_greedy(logits, generator, temperature=1.0, top_k=None, top_p=None):
    if top_k is not None:
        logits = top_k_right(logits, top_k)
    probs = torch.softmax(logits / temperature, dim=-1)
    if top_p is not None:
        probs = top_p_right(probs, top_p)
    return torch.multinomial(probs, num_samples=1, generator=generator).squeeze(-1)


def sample_filters_ignored(logits, generator, temperature=1.0, top_k=None, top_p=None):
    if temperature == 0:
        return logits.argmax(dim=-1)
    probs = torch.softmax(logits / temperature, dim=-1)
    return torch.multinomial(probs, num_samples=1, generator=generator).squeeze(-1)


SAMPLE_WRONG = {"no_generator": sample_no_generator, "greedy_always": sample_greedy,
                "top_p_before_temperature": sample_top_p_first, "no_greedy_at_zero": sample_zero_not_greedy,
                "filters_ignored": sample_filters_ignored}


def test_sample_right_answer_passes(capsys):
    assert verdict(check_sample_next, sample_right, capsys), verdict(check_sample_next, sample_right)


@pytest.mark.parametrize("code", sorted(SAMPLE_WRONG))
def test_sample_wrong_answer_gets_its_code(code):
    v = verdict(check_sample_next, SAMPLE_WRONG[code])
    assert not v and v.mistake == code, v


def test_sample_every_declared_mistake_is_tested():
    assert set(SAMPLE_WRONG) == set(SAMPLE_MISTAKES)


@pytest.mark.parametrize("check", [check_temperature_probs, check_top_k_filter, check_top_p_filter,
                                   check_sample_next])
@pytest.mark.parametrize("candidate", [lambda *a: None, lambda *a: "text", lambda *a: 1 / 0, 42])
def test_odd_answers_fail_in_one_line(check, candidate):
    v = verdict(check, candidate)
    assert not v and "\n" not in str(v)


@pytest.mark.parametrize("check, candidate", [
    *[(check_temperature_probs, wrong) for wrong in TEMPERATURE_WRONG.values()],
    (check_temperature_probs, lambda logits, t: torch.softmax(logits, dim=-1) / t),
    *[(check_top_k_filter, wrong) for wrong in TOP_K_WRONG.values()], (check_top_k_filter, top_k_argsort),
    *[(check_top_p_filter, wrong) for wrong in TOP_P_WRONG.values()],
    (check_top_p_filter, top_p_hf_style_without_the_shift),
    *[(check_sample_next, wrong) for wrong in SAMPLE_WRONG.values()]])
def test_each_hint_names_the_call_it_tested(check, candidate):
    v = verdict(check, candidate)
    assert not v and "{" not in str(v) and "}" not in str(v), v
    assert check.__name__.removeprefix("check_") + "(" in str(v).split(":", 1)[1], v
