"""The check of notebook 06's train_step: the reference passes, each declared mistake is named on a
student-style wrong answer, and no code fires for an unrelated wrong answer."""

import pytest
import torch

from helpers import check_train_step
from helpers.checks import EXERCISES
from helpers.checks import train_step as module
from helpers.training import train_step as reference


def student_step(model, src, tgt, optimizer, scheduler, loss_fn):
    model.train()
    logits = model(src, tgt[:, :-1])
    loss = loss_fn(logits, tgt[:, 1:])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    scheduler.step()
    return loss.item()


def returns_tensor(model, src, tgt, optimizer, scheduler, loss_fn):
    model.train()
    loss = loss_fn(model(src, tgt[:, :-1]), tgt[:, 1:])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    scheduler.step()
    return loss


def doubled_lr(model, src, tgt, optimizer, scheduler, loss_fn):  # unrelated wrong answer: loss scaled by 5
    model.train()
    loss = 5 * loss_fn(model(src, tgt[:, :-1]), tgt[:, 1:]) ** 2
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    scheduler.step()
    return loss.item()


def shift_the_other_way(model, src, tgt, optimizer, scheduler, loss_fn):
    model.train()
    optimizer.zero_grad()
    loss = loss_fn(model(src, tgt[:, 1:]), tgt[:, :-1])
    loss.backward()
    optimizer.step()
    scheduler.step()
    return loss.item()


def with_gradient_clipping(model, src, tgt, optimizer, scheduler, loss_fn):
    model.train()
    optimizer.zero_grad()
    loss = loss_fn(model(src, tgt[:, :-1]), tgt[:, 1:])
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
    optimizer.step()
    scheduler.step()
    return loss.item()


def detached_logits(model, src, tgt, optimizer, scheduler, loss_fn):  # backward() raises
    model.train()
    optimizer.zero_grad()
    loss = loss_fn(model(src, tgt[:, :-1]).detach(), tgt[:, 1:])
    loss.backward()
    optimizer.step()
    scheduler.step()
    return loss.item()


def loss_rebuilt(model, src, tgt, optimizer, scheduler, loss_fn):  # "repaired" with a new leaf tensor
    model.train()
    optimizer.zero_grad()
    loss = loss_fn(model(src, tgt[:, :-1]), tgt[:, 1:])
    loss = torch.tensor(loss.item(), requires_grad=True)
    loss.backward()
    optimizer.step()
    scheduler.step()
    return loss.item()


def per_sentence(model, src, tgt, optimizer, scheduler, loss_fn):
    model.train()
    optimizer.zero_grad()
    logits = model(src, tgt[:, :-1])
    loss = sum(loss_fn(logits[i].unsqueeze(0), tgt[i, 1:].unsqueeze(0)) for i in range(len(src))) / len(src)
    loss.backward()
    optimizer.step()
    scheduler.step()
    return loss.item()


def no_optimizer_step(model, src, tgt, optimizer, scheduler, loss_fn):
    model.train()
    optimizer.zero_grad()
    loss = loss_fn(model(src, tgt[:, :-1]), tgt[:, 1:])
    loss.backward()
    scheduler.step()
    return loss.item()


def stub(model, src, tgt, optimizer, scheduler, loss_fn):
    raise NotImplementedError()


def test_reference_and_student_style_pass():
    assert check_train_step(reference)
    assert check_train_step(student_step)


@pytest.mark.parametrize("code", sorted(module.WRONG_STEPS))
def test_each_wrong_step_is_named(code):
    for wrong in module.WRONG_STEPS[code][:2]:  # (the clipping's other norms are the same step)
        verdict = check_train_step(wrong)
        assert not verdict and verdict.mistake == code, (code, str(verdict))


@pytest.mark.parametrize("wrong, code", [(shift_the_other_way, "shift_reversed"),
                                         (with_gradient_clipping, "gradient_clipped"),
                                         (detached_logits, "no_gradient"), (loss_rebuilt, "no_gradient"),
                                         (module.wrong_no_gradient, "no_gradient"),
                                         (no_optimizer_step, "no_optimizer_step"),
                                         (module.wrong_no_optimizer_step, "no_optimizer_step"),
                                         (per_sentence, "per_sentence_mean")])
def test_student_style_steps_are_named(wrong, code):
    verdict = check_train_step(wrong)
    assert not verdict and verdict.mistake == code, str(verdict)


def test_loss_tensor_is_named():
    verdict = check_train_step(returns_tensor)
    assert not verdict and verdict.mistake == "loss_tensor"
    assert "Tensor" in str(verdict)


def test_every_declared_code_is_tested():
    assert set(EXERCISES["train_step"].mistakes) == set(module.WRONG_STEPS) | {"loss_tensor", "no_gradient",
                                                                                "no_optimizer_step"}


def test_unrelated_wrong_answer_names_no_mistake():
    verdict = check_train_step(doubled_lr)
    assert not verdict and verdict.mistake not in EXERCISES["train_step"].mistakes


def test_stub_and_none_and_crash_are_one_line():
    assert check_train_step(stub).status == "todo"
    verdict = check_train_step(lambda *args: None)
    assert not verdict and "\n" not in str(verdict)
    verdict = check_train_step(lambda *args: 1 / 0)
    assert not verdict and "\n" not in str(verdict)


def test_declared_in_notebook_06_with_off_limits():
    declared = EXERCISES["train_step"]
    assert declared.notebook == "06_training" and declared.defines == "train_step"
    assert "helpers.training.train_step" in declared.off_limits
