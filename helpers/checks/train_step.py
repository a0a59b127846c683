"""The check of notebook 06's train_step: two steps of a tiny seeded Transformer with the student's step and
with the reference's (Adam, a rate that changes every step); the losses and the parameters after each step are
compared, and a mistake is named only when the parameters equal those of one of the WRONG_STEPS."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import torch

from ..i18n import tr
from ..loss import LabelSmoothingLoss
from ..training import train_step as reference_train_step
from ..transformer import Transformer
from .harness import Known, Mistake, call, exercise, generic, graded

VOCAB, PAD, D_MODEL, HEADS, D_FF, BATCH, L_SRC, L_TGT = 11, 0, 16, 2, 32, 4, 7, 6

TRAIN_STEP_MISTAKES = {
    "loss_tensor": "your train_step returned a {kind}: return the loss as a Python number with `.item()`, so that "
                   "the loop does not keep every step's graph alive.",
    "no_zero_grad": "your first step is right but the second is not: the gradients are never zeroed, and "
                    "`backward()` adds to what `.grad` holds, so the second step's gradients are added to the first "
                    "step's. Call `optimizer.zero_grad()` before `backward()`.",
    "zero_grad_after_backward": "your parameters do not move: `optimizer.zero_grad()` runs after `loss.backward()` and "
                                "wipes the gradients before the optimizer's step. Zero them before `backward()`.",
    "no_shift": "the decoder reads the very token it must predict (no shift): feed it `tgt[:, :-1]` and score its "
                "output against `tgt[:, 1:]`.",
    "scheduler_first": "you step the scheduler before the optimizer, so every update uses the next step's rate: "
                       "call `optimizer.step()` first, then `scheduler.step()`.",
    "no_scheduler_step": "your learning rate never changes: call `scheduler.step()` after `optimizer.step()`.",
    "eval_mode": "your step trains the model in evaluation mode (dropout off): call `model.train()` first.",
    "shift_reversed": "the shift goes the wrong way: the decoder reads `tgt[:, :-1]` (everything but the last token) "
                      "and its output is scored against `tgt[:, 1:]` (everything but the start token), the next "
                      "token at each position.",
    "gradient_clipped": "your step clips the gradients: the paper does not, and neither does this course's step "
                        "(the rest of your step is right). Remove the clipping.",
    "no_gradient": "no gradient reaches the model's parameters: your loss is cut from the computation graph (by "
                   "`.detach()`, `.item()`, `torch.tensor(...)` or `torch.no_grad()` between the model's output and "
                   "`backward()`), and `requires_grad_()` on the loss does not reconnect it. Compute the loss from the "
                   "logits the model returns and call `backward()` on that tensor.",
    "no_optimizer_step": "your parameters do not move: the gradients are computed, but `optimizer.step()` is never "
                         "called. Call it after `loss.backward()`, before `scheduler.step()`.",
    "per_sentence_mean": "your loss is the mean of each sentence's mean loss, so the tokens of a short sentence weigh "
                         "more than those of a long one. Call loss_fn once on the whole batch: it averages over "
                         "every real (non-pad) target token.",
}


SHIFTS = {"right": (slice(None, -1), slice(1, None)), "none": (slice(None), slice(None)),
          "trimmed": (slice(None, -1), slice(None, -1)), "reversed": (slice(1, None), slice(None, -1))}


def _step(shift: str = "right", zero: str = "before", order: tuple[str, ...] = ("optimizer", "scheduler"),
          train: bool = True, clip: float | None = None, per_sentence: bool = False) -> Callable:
    """The right step with one change: the shift (the decoder's input and the loss's target), zero_grad "before"
    backward, "after" it or "never", the order of the steps (or one left out), eval mode, clip_grad_norm_, or the
    loss averaged per sentence, then over the batch."""
    read, score = SHIFTS[shift]

    def step(model, src, tgt, optimizer, scheduler, loss_fn):
        if train:
            model.train()
        logits, targets = model(src, tgt[:, read]), tgt[:, score]
        if per_sentence:
            loss = torch.stack([loss_fn(logits[i:i + 1], targets[i:i + 1]) for i in range(len(logits))]).mean()
        else:
            loss = loss_fn(logits, targets)
        if zero == "before":
            optimizer.zero_grad()
        loss.backward()
        if zero == "after":
            optimizer.zero_grad()
        if clip is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        for name in order:
            {"optimizer": optimizer, "scheduler": scheduler}[name].step()
        return loss.item()
    return step


WRONG_STEPS: dict[str, list[Callable]] = {
    "no_zero_grad": [_step(zero="never")],
    "zero_grad_after_backward": [_step(zero="after")],
    "no_shift": [_step(shift="none"), _step(shift="trimmed")],
    "scheduler_first": [_step(order=("scheduler", "optimizer"))],
    "no_scheduler_step": [_step(order=("optimizer",))],
    "eval_mode": [_step(train=False)],
    "shift_reversed": [_step(shift="reversed")],
    "gradient_clipped": [_step(clip=norm) for norm in (1.0, 0.5, 0.1, 5.0, 0.01)],  # the most common first
    "per_sentence_mean": [_step(per_sentence=True)],
}
# Parameters that never move come from three mistakes, told apart by what the check saw (see _run): no gradient
# reached the model (wrong_no_gradient), no optimizer step (wrong_no_optimizer_step), or zero_grad after backward.


def wrong_no_gradient(model, src, tgt, optimizer, scheduler, loss_fn):
    """The loss cut from the graph and "repaired": no gradient reaches the model (named no_gradient)."""
    model.train()
    loss = loss_fn(model(src, tgt[:, :-1]).detach(), tgt[:, 1:]).requires_grad_()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    scheduler.step()
    return loss.item()


def wrong_no_optimizer_step(model, src, tgt, optimizer, scheduler, loss_fn):
    """optimizer.step() left out (named no_optimizer_step)."""
    return _step(order=("scheduler",))(model, src, tgt, optimizer, scheduler, loss_fn)


def _batches(seed: int = 6, batch: int = BATCH, l_src: int = L_SRC, l_tgt: int = L_TGT) -> list[tuple]:
    """Two seeded batches (src (batch, l_src), tgt (batch, l_tgt)) of token ids with some padding."""
    generator = torch.Generator().manual_seed(seed)
    batches = []
    for _ in range(2):
        src = torch.randint(3, VOCAB, (batch, l_src), generator=generator)
        tgt = torch.randint(3, VOCAB, (batch, l_tgt), generator=generator)
        src[1, 5:] = PAD
        tgt[:, 0] = 1  # <s>
        tgt[0, max(2, l_tgt - 2):] = PAD  # targets of different lengths: the per-token and per-sentence means differ
        if batch > 2:
            tgt[2, max(2, l_tgt - 1):] = PAD
        batches.append((src, tgt))
    return batches


def _drawn_batches(rng: np.random.Generator) -> list[tuple]:
    """Two batches of drawn sizes and seed (when grading)."""
    return _batches(int(rng.integers(2 ** 31)), int(rng.integers(2, 6)), int(rng.integers(6, 10)),
                    int(rng.integers(3, 9)))


class _WatchedLoss(LabelSmoothingLoss):
    """The loss, noting whether the logits it was given still carry the graph back to the model."""

    def __init__(self, smoothing: float, pad_id: int, seen: dict) -> None:
        super().__init__(smoothing, pad_id)
        self.seen = seen

    def forward(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        if isinstance(logits, torch.Tensor) and not logits.requires_grad:
            self.seen["detached_logits"] = True
        return super().forward(logits, target)


def _run(step: Callable, student: bool, batches: list, seen: dict | None = None) -> tuple[list[Any],
                                                                                         list[list[torch.Tensor]]]:
    """Two steps of step on a fresh tiny model: the returned values and the parameters after each step. With seen
    (a dict), it also notes what happened: "detached_logits" (the loss got logits without a graph), "gradient"
    (a gradient reached a parameter), "optimizer_step" (optimizer.step() ran)."""
    torch.manual_seed(0)
    model = Transformer(VOCAB, VOCAB, d_model=D_MODEL, num_heads=HEADS, num_layers=1, d_ff=D_FF, dropout=0.1,
                        max_len=16, pad_id=PAD).eval()
    optimizer = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda i: 1e-2 * (i + 1))
    loss_fn = LabelSmoothingLoss(0.1, PAD)
    if seen is not None:
        loss_fn = _WatchedLoss(0.1, PAD, seen)
        for p in model.parameters():
            p.register_hook(lambda grad: seen.__setitem__("gradient", True))
        optimizer.register_step_post_hook(lambda *_: seen.__setitem__("optimizer_step", True))
    args = (optimizer, scheduler, loss_fn)
    returned, params = [], []
    for n, (src, tgt) in enumerate(batches):
        torch.manual_seed(100 + n)  # the same dropout masks for every step function
        returned.append(call(step, model, src, tgt, *args) if student else step(model, src, tgt, *args))
        params.append([p.detach().clone() for p in model.parameters()])
    return returned, params


def _same(a: list[torch.Tensor], b: list[torch.Tensor]) -> bool:
    return len(a) == len(b) and all(x.shape == y.shape and torch.allclose(x, y, rtol=1e-4, atol=1e-6)
                                    for x, y in zip(a, b))


@exercise("train_step", notebook="06_training", points=2, defines="train_step",
          reference="helpers.training.train_step",
          success="correct! Teacher forcing, zero_grad, backward, the optimizer's step, then the scheduler's.",
          mistakes=TRAIN_STEP_MISTAKES,
          off_limits=("helpers.training.train_step", "helpers.training.train_model"))
def check_train_step(train_step: Any) -> str:
    """Check a student's train_step(model, src, tgt, optimizer, scheduler, loss_fn) -> float against the reference."""
    for batches in graded([_batches()], _drawn_batches):
        seen: dict = {}
        try:
            returned, params = _run(train_step, True, batches, seen)
        except Mistake:
            if seen.get("detached_logits") and not seen.get("gradient"):
                raise Known("no_gradient") from None
            raise
        expected_losses, expected = _run(reference_train_step, False, batches)
        if any(value is None for value in returned):
            raise generic("returned_none", what="train_step")
        right = [_same(p, e) for p, e in zip(params, expected)]
        if not all(right):
            if all(_same(p, w) for p, w in zip(params, _run(wrong_no_optimizer_step, False, batches)[1])):
                # The parameters never moved: no gradient, no optimizer step, or the gradients wiped before it.
                raise Known("no_gradient" if not seen.get("gradient") else "no_optimizer_step"
                            if not seen.get("optimizer_step") else "zero_grad_after_backward")
            for code, steps in WRONG_STEPS.items():
                if any(all(_same(p, w) for p, w in zip(params, _run(wrong, False, batches)[1])) for wrong in steps):
                    raise Known(code)
            first = tr("train_step:after_first", "after the first step") if not right[0] else \
                tr("train_step:after_second", "after the second step")
            raise Mistake(tr("train_step:params_differ", "your parameters differ from the reference's {when}: the "
                             "step is model.train(), the forward pass on (src, tgt[:, :-1]), the loss against "
                             "tgt[:, 1:], zero_grad, backward, optimizer.step(), scheduler.step().", when=first))
        for value in returned:
            if not isinstance(value, (int, float)) or isinstance(value, bool):
                raise Known("loss_tensor", kind=type(value).__name__)
        if not all(abs(float(v) - e) <= 1e-5 * max(1.0, abs(e)) for v, e in zip(returned, expected_losses)):
            raise Mistake(tr("train_step:loss_differs", "your parameters are right, but the losses you return are "
                             "{actual}, the reference's {expected}: return this batch's loss, computed before the "
                             "update.", actual=[round(float(v), 5) for v in returned],
                             expected=[round(e, 5) for e in expected_losses]))
    return tr("train_step:checked", "Checked the parameters after one and two steps of a tiny Transformer.")
