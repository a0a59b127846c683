"""The checks of notebook 06's transformer_lr and LabelSmoothingLoss accept the reference and right answers
written the way a student would, name each known mistake by its code, report stubs as todo, and never raise."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import helpers
from helpers.checks import EXERCISES, check_label_smoothing_loss, check_transformer_lr, exercises_in
from helpers.checks.training import LOSS_CASES, LR_CASES, _loss_inputs, wrong_losses, wrong_rates

from conftest import verdict


def test_registered_in_notebook_order():
    assert [e.name for e in exercises_in("06_training")] == ["transformer_lr", "label_smoothing_loss", "train_step",
                                                             "greedy_decode"]


# ---------------------------------------------------------------------- transformer_lr
def lr_right(step, d_model, warmup):
    return d_model ** -0.5 * min(step ** -0.5, step * warmup ** -1.5)


def lr_math(step, d_model, warmup):
    return min(1 / math.sqrt(step), step / warmup ** 1.5) / math.sqrt(d_model)


def lr_numpy(step, d_model, warmup):
    return np.power(d_model, -0.5) * np.minimum(np.power(step, -0.5), step * np.power(warmup, -1.5))


LR_WRONG = {
    "warmup_exponent": lambda step, d_model, warmup: d_model ** -0.5 * min(step ** -0.5, step * warmup ** -0.5),
    "no_d_model_factor": lambda step, d_model, warmup: min(step ** -0.5, step * warmup ** -1.5),
    # A student who thinks the steps count from 0 "fixes" it by adding 1.
    "steps_from_zero": lambda step, d_model, warmup: lr_right(step + 1, d_model, warmup),
    "max_instead_of_min": lambda step, d_model, warmup: d_model ** -0.5 * max(step ** -0.5, step * warmup ** -1.5),
    "no_warmup": lambda step, d_model, warmup: d_model ** -0.5 * step ** -0.5,
    "power_precedence": lambda step, d_model, warmup: d_model ** -1/2 * min(step ** -1/2, step * warmup ** -3/2),
    "d_model_warmup_swapped": lambda step, d_model, warmup: warmup ** -0.5 * min(step ** -0.5, step * d_model ** -1.5),
    "d_model_factor_inverted": lambda step, d_model, warmup: math.sqrt(d_model) * min(1 / math.sqrt(step),
                                                                                    step / warmup ** 1.5),
    "warmup_without_step": lambda step, d_model, warmup: d_model ** -0.5 * min(step ** -0.5, warmup ** -1.5),
    # a one-element array: np.minimum of [a] and [b]
    "not_a_number": lambda step, d_model, warmup: np.power(d_model, -0.5) * np.minimum([step ** -0.5],
                                                                                      [step * warmup ** -1.5]),
}


@pytest.mark.parametrize("candidate", [lambda s, d, w: str(lr_right(s, d, w)), lambda s, d, w: lr_right(s, d, w) + 1j,
                                       lambda s, d, w: torch.tensor([lr_right(s, d, w)]),
                                       lambda s, d, w: np.array(lr_right(s, d, w), dtype=object),
                                       lambda s, d, w: torch.tensor(lr_right(s, d, w))],
                         ids=["string", "complex", "tensor_of_one", "object_array", "tensor"])
def test_lr_odd_types_fail_clearly(candidate):
    v = verdict(check_transformer_lr, candidate)
    assert not v and v.mistake == "not_a_number" and "Python float" in v.message, v


@pytest.mark.parametrize("candidate", [helpers.transformer_lr, lr_right, lr_math, lr_numpy,
                                       lambda s, d, w: np.float32(lr_right(s, d, w))],
                         ids=["reference", "powers", "sqrt", "numpy", "numpy_float32"])
def test_lr_right_answers_pass(candidate, capsys):
    v = verdict(check_transformer_lr, candidate, capsys)
    assert v and v.status == "pass", v


@pytest.mark.parametrize("code", list(LR_WRONG))
def test_lr_wrong_answer_gets_its_code(code):
    v = verdict(check_transformer_lr, LR_WRONG[code])
    assert not v and v.status == "fail" and v.mistake == code, v
    assert "{" not in v.message


def test_lr_power_precedence_in_one_place_is_named_too():
    v = verdict(check_transformer_lr, lambda s, d, w: d ** -0.5 * min(s ** -0.5, s * w ** -3/2))
    assert v.mistake == "power_precedence", v


def test_lr_every_declared_mistake_is_caught():
    assert {verdict(check_transformer_lr, f).mistake for f in LR_WRONG.values()} == set(
        EXERCISES["transformer_lr"].mistakes)


def test_lr_wrong_rates_all_differ_from_the_reference():
    expected = np.array([helpers.transformer_lr(s, d, w) for s, d, w in LR_CASES])
    for wrong in wrong_rates().values():
        assert not np.allclose(wrong, expected, rtol=1e-3, atol=0)


def test_lr_unknown_mistake_names_a_value():
    v = verdict(check_transformer_lr, lambda s, d, w: 2 * lr_right(s, d, w))
    assert not v and v.mistake is None and "reference gives" in v.message, v


# ---------------------------------------------------------------------- LabelSmoothingLoss
class GivenLoss(nn.Module):
    """The notebook's LabelSmoothingLoss: the given __init__; each test adds a forward."""

    def __init__(self, smoothing=0.1, pad_id=0):
        super().__init__()
        self.smoothing = smoothing
        self.pad_id = pad_id


def loss_class(forward):
    return type("LabelSmoothingLoss", (GivenLoss,), {"forward": forward})


def smoothed_target(self, logits, target, right=None, other=None):
    V = logits.shape[-1]
    eps = self.smoothing
    dist = torch.full_like(logits, eps / V if other is None else other)
    dist.scatter_(-1, target.unsqueeze(-1), 1 - eps + eps / V if right is None else right)
    return dist


def right_scatter(self, logits, target):
    dist = smoothed_target(self, logits, target)
    loss = -(dist * torch.log_softmax(logits, dim=-1)).sum(dim=-1)
    mask = target != self.pad_id
    return loss[mask].sum() / mask.sum().clamp(min=1)


def right_guarded(self, logits, target):
    """No clamp: a batch of pads only returns a zero that keeps the graph."""
    mask = target != self.pad_id
    loss = per_position(self, logits, target)
    if not mask.any():
        return logits.sum() * 0
    return loss[mask].mean()


def right_gather(self, logits, target):
    log_probs = F.log_softmax(logits, dim=-1)
    nll = -log_probs.gather(-1, target.unsqueeze(-1)).squeeze(-1)
    smooth = -log_probs.mean(dim=-1)
    loss = (1 - self.smoothing) * nll + self.smoothing * smooth
    mask = (target != self.pad_id).float()
    return (loss * mask).sum() / mask.sum().clamp(min=1)


def per_position(self, logits, target, **kw):
    return -(smoothed_target(self, logits, target, **kw) * torch.log_softmax(logits, dim=-1)).sum(dim=-1)


def masked_mean(self, loss, target):
    mask = target != self.pad_id
    return loss[mask].mean()


def annotated_target(self, logits, target):
    """The Annotated Transformer's smoothed target: eps / (V - 2) on the other tokens, 0 in the pad column."""
    dist = torch.full_like(logits, self.smoothing / (logits.shape[-1] - 2))
    dist.scatter_(-1, target.unsqueeze(-1), 1 - self.smoothing)
    dist[..., self.pad_id] = 0
    return dist


def per_position_detached(self, logits, target):
    """log-probabilities as logits minus a DETACHED logsumexp: the right value, the wrong gradient."""
    log_probs = logits - logits.logsumexp(-1, keepdim=True).detach()
    return -(smoothed_target(self, logits, target) * log_probs).sum(-1)


def shifted_in_place(self, logits, target):
    """Subtracts the row maximum in place (for stability): the caller's logits change."""
    logits -= logits.max(-1, keepdim=True).values
    return right_gather(self, logits, target)


LOSS_WRONG = [
    ("padding_not_ignored", lambda self, logits, target: per_position(self, logits, target).mean()),
    ("smoothing_mass_wrong", lambda self, logits, target: masked_mean(self, per_position(
        self, logits, target, right=1 - self.smoothing, other=self.smoothing / (logits.shape[-1] - 1)), target)),
    ("smoothing_mass_wrong", lambda self, logits, target: masked_mean(self, per_position(
        self, logits, target, right=1 - self.smoothing), target)),
    ("not_averaged_over_real_tokens", lambda self, logits, target: per_position(self, logits, target)[
        target != self.pad_id].sum()),
    ("not_averaged_over_real_tokens", lambda self, logits, target: (per_position(self, logits, target)
                                                                    * (target != self.pad_id)).mean()),
    ("no_smoothing", lambda self, logits, target: F.cross_entropy(logits.transpose(1, 2), target,
                                                                  ignore_index=self.pad_id)),
    ("probabilities_not_log", lambda self, logits, target: masked_mean(self, -(smoothed_target(
        self, logits, target) * torch.softmax(logits, dim=-1)).sum(-1), target)),
    ("averaged_over_vocabulary", lambda self, logits, target: -(smoothed_target(self, logits, target)
                                                               * torch.log_softmax(logits, dim=-1))[
        target != self.pad_id].mean()),
    ("kl_divergence", lambda self, logits, target: F.kl_div(torch.log_softmax(logits, -1), smoothed_target(
        self, logits, target), reduction="none").sum(-1)[target != self.pad_id].mean()),
    ("not_differentiable", lambda self, logits, target: right_gather(self, logits, target).item()),
    ("not_differentiable", lambda self, logits, target: right_gather(self, logits, target).detach()),
    ("log_of_softmax", lambda self, logits, target: masked_mean(self, -(smoothed_target(self, logits, target)
                                                                       * torch.log(torch.softmax(logits, -1))).sum(-1),
                                                                target)),
    ("annotated_smoothing", lambda self, logits, target: F.kl_div(
        F.log_softmax(logits, -1)[target != self.pad_id], annotated_target(self, logits, target)[target != self.pad_id],
        reduction="sum")),  # the Annotated Transformer's LabelSmoothing and KLDivLoss(reduction="sum")
    ("annotated_smoothing", lambda self, logits, target: masked_mean(self, -(annotated_target(self, logits, target)
                                                                            * F.log_softmax(logits, -1)).sum(-1),
                                                                     target)),
    ("wrong_gradients", lambda self, logits, target: masked_mean(self, per_position_detached(self, logits, target),
                                                                 target)),
    ("changed_input", shifted_in_place),
    ("not_averaged_over_real_tokens", lambda self, logits, target: torch.stack([  # each sentence's mean, then theirs
        per_position(self, logits, target)[i][target[i] != self.pad_id].mean() for i in range(len(target))]).mean()),
    ("pad_id_hardcoded", lambda self, logits, target: per_position(self, logits, target)[target != 0].mean()),
    ("softmax_wrong_axis", lambda self, logits, target: masked_mean(self, -(smoothed_target(self, logits, target)
                                                                           * torch.log_softmax(logits, dim=1)).sum(-1),
                                                                    target)),
    ("sign_flipped", lambda self, logits, target: masked_mean(self, (smoothed_target(self, logits, target)
                                                                     * torch.log_softmax(logits, -1)).sum(-1), target)),
    # right on every batch with a real token, 0 / 0 = nan on a batch of pads only
    ("all_pad_batch", lambda self, logits, target: per_position(self, logits, target)[target != self.pad_id].sum()
     / (target != self.pad_id).sum()),
    ("all_pad_batch", lambda self, logits, target: masked_mean(self, per_position(self, logits, target), target)),
]


@pytest.mark.parametrize("candidate", [helpers.LabelSmoothingLoss, loss_class(right_scatter),
                                       loss_class(right_gather), loss_class(right_guarded)],
                         ids=["reference", "scatter", "log_softmax_gather", "guarded"])
def test_loss_right_answers_pass(candidate, capsys):
    v = verdict(check_label_smoothing_loss, candidate, capsys)
    assert v and v.status == "pass", v


@pytest.mark.parametrize("i", range(len(LOSS_WRONG)), ids=[f"{code}-{i}" for i, (code, _) in enumerate(LOSS_WRONG)])
def test_loss_wrong_answer_gets_its_code(i):
    code, forward = LOSS_WRONG[i]
    v = verdict(check_label_smoothing_loss, loss_class(forward))
    assert not v and v.status == "fail" and v.mistake == code, v
    assert "{" not in v.message


def test_loss_every_declared_mistake_is_caught():
    assert {verdict(check_label_smoothing_loss, loss_class(f)).mistake for _, f in LOSS_WRONG} == set(
        EXERCISES["label_smoothing_loss"].mistakes)


def test_loss_wrong_values_all_differ_from_the_reference():
    for seed, (eps, pad_id, v, rows) in enumerate(LOSS_CASES):
        logits, target = _loss_inputs(v, rows, seed)
        expected = float(helpers.LabelSmoothingLoss(eps, pad_id)(logits, target))
        for wrong in wrong_losses(logits, target, eps, pad_id).values():
            assert abs(wrong - expected) > 1e-4 * max(1.0, abs(expected))  # the check's tolerance is 1e-5


def test_loss_all_pad_batch_is_named_with_its_nan():
    v = verdict(check_label_smoothing_loss, loss_class(LOSS_WRONG[-1][1]))
    assert v.mistake == "all_pad_batch" and "nan" in v.message and "clamp(min=1)" in v.message, v


def test_loss_unknown_mistake_names_the_values():
    v = verdict(check_label_smoothing_loss, loss_class(lambda self, logits, target: 2 * right_gather(
        self, logits, target)))
    assert not v and v.mistake is None and "the reference returns" in v.message, v


# ---------------------------------------------------------------------- robustness
def stub(*args, **kwargs):
    raise NotImplementedError()


@pytest.mark.parametrize("check, candidate", [(check_transformer_lr, stub),
                                              (check_label_smoothing_loss, loss_class(stub))])
def test_stubs_are_reported_as_todo(check, candidate, capsys):
    v = verdict(check, candidate, capsys)
    assert not v and v.status == "todo" and str(v).startswith("📝"), v


@pytest.mark.parametrize("value", [None, "0.1", [1, 2], float("nan"), torch.zeros(3), torch.tensor([[1.0]]) * 7,
                                   lambda: 1 / 0, (1.0, 2.0), math.inf])
def test_odd_results_never_raise(value, capsys):
    def give(*args):
        return value() if callable(value) else value

    for check, candidate in ((check_transformer_lr, give), (check_label_smoothing_loss, loss_class(give)),
                             (check_transformer_lr, 3), (check_label_smoothing_loss, "LabelSmoothingLoss")):
        v = verdict(check, candidate, capsys)
        assert not v and v.status == "fail" and v.mistake != "check_error", v
        assert str(v).startswith("❌"), v


def test_checks_do_not_disturb_the_global_random_state():
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    assert check_transformer_lr(helpers.transformer_lr) and check_label_smoothing_loss(helpers.LabelSmoothingLoss)
    assert torch.equal(torch.rand(3), expected)
