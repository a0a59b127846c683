"""The checks of notebook 06's learning-rate schedule (transformer_lr) and label smoothing (LabelSmoothingLoss):
the student's values against the reference's and against those of the common wrong answers (wrong_rates,
wrong_losses); greedy decoding's check is in greedy.py."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import torch

from ..i18n import number, scientific, tr
from ..loss import LabelSmoothingLoss as reference_loss
from ..loss import loss_floor as reference_loss_floor
from ..schedule import transformer_lr as reference_transformer_lr
from .harness import Known, Mistake, call, exercise, expect_finite, generic, graded, is_close, to_array
from .torch_compare import TORCH_MISTAKES, protect_inputs

# ---------------------------------------------------------------------- the learning-rate schedule
LR_CASES = [(step, d_model, warmup) for d_model, warmup in ((512, 4000), (64, 200), (16, 10))
            for step in (1, 2, 3, warmup // 2, warmup - 1, warmup, warmup + 1, 2 * warmup, 7 * warmup, 25 * warmup)]

LR_MISTAKES = {
    "warmup_exponent": "during the warm-up your rate grows as step / sqrt(warmup): the warm-up branch is step times "
                       "warmup to the power -1.5, so that both branches meet at step = warmup.",
    "no_d_model_factor": "your rate lacks the factor d_model^-0.5 in front of the min: the whole schedule is scaled "
                         "by 1 / sqrt(d_model).",
    "steps_from_zero": "your rate at each step is the reference's at step + 1: the steps are counted from 1 (the first "
                       "update is step 1), so use step as it is given.",
    "max_instead_of_min": "your rate keeps growing after the warm-up: the schedule takes the SMALLER of step^-0.5 "
                          "and step * warmup^-1.5 (min, not max).",
    "no_warmup": "your rate is largest at step 1 and only decays: it lacks the warm-up branch step * warmup^-1.5, "
                 "which keeps the first steps small.",
    "power_precedence": "an exponent is off: in Python `x ** -1/2` is (x ** -1) / 2, not x ** (-1/2). Write the "
                        "exponents as -0.5 and -1.5, or in parentheses.",
    "d_model_factor_inverted": "your factor in front is sqrt(d_model); it is d_model^-0.5 = 1 / sqrt(d_model), which "
                               "makes the rate SMALLER for wider models.",
    "warmup_without_step": "during the warm-up your rate does not grow: the warm-up branch is step * warmup^-1.5, "
                           "the step times a constant, so that the rate rises linearly until step = warmup.",
    "d_model_warmup_swapped": "d_model and warmup are exchanged: the factor in front is d_model^-0.5, and the warm-up "
                              "branch is step * warmup^-1.5.",
    "not_a_number": "{what} returned {kind}: return one real number, a Python float (LambdaLR multiplies the "
                    "learning rate by it).",
}


def _rate(step: float, d_model: float, warmup: float, *, d: tuple = (-0.5, 1), s: tuple = (-0.5, 1),
          w: tuple = (-1.5, 1), pick: Any = min) -> float:
    """The schedule with one part changed: min, or a power x ** a / b, (a, b) for each of d_model, step, warmup."""
    return d_model ** d[0] / d[1] * pick(step ** s[0] / s[1], step * warmup ** w[0] / w[1])


def wrong_rates(cases: list[tuple[int, int, int]] = LR_CASES) -> dict[Any, np.ndarray]:
    """The rates the common wrong schedules give on cases: mistake code (or Known) -> (len(cases),) rates."""
    def rates(**changes: Any) -> np.ndarray:
        return np.array([_rate(s, d, w, **changes) for s, d, w in cases])

    wrong: dict[Any, np.ndarray] = {
        "warmup_exponent": rates(w=(-0.5, 1)),
        "no_d_model_factor": rates(d=(0.0, 1)),
        "steps_from_zero": np.array([_rate(s + 1, d, w) for s, d, w in cases]),
        "max_instead_of_min": rates(pick=max),
        "no_warmup": rates(pick=lambda decay, warm: decay),
        "d_model_warmup_swapped": np.array([_rate(s, w, d) for s, d, w in cases]),
        "d_model_factor_inverted": rates(d=(0.5, 1)),
        "warmup_without_step": np.array([d ** -0.5 * min(s ** -0.5, w ** -1.5) for s, d, w in cases]),
    }
    # `x ** -1/2` for one or more of the three powers (d_model ** -1/2, step ** -1/2, warmup ** -3/2).
    for d, s, w in itertools.product(((-0.5, 1), (-1.0, 2)), ((-0.5, 1), (-1.0, 2)), ((-1.5, 1), (-3.0, 2))):
        if 2 in (d[1], s[1], w[1]):
            wrong[Known("power_precedence")] = rates(d=d, s=s, w=w)
    return wrong


def _one_number(value: Any, what: str) -> float:
    """A rate as a float: a real Python or NumPy number (not an array or a tensor, even of one); else not_a_number."""
    kind = None
    if isinstance(value, (bool, np.bool_, str, bytes, complex, np.complexfloating)):
        kind = tr("transformer_lr:a_kind", "a {type} ({value})", type=type(value).__name__, value=repr(value))
    elif hasattr(value, "shape") and hasattr(value, "dtype"):  # an array or a tensor: a NumPy scalar is a number
        dtype = str(value.dtype)
        if (not isinstance(value, np.generic) or "complex" in dtype or "bool" in dtype
                or getattr(value.dtype, "kind", "") in ("O", "U", "S")):
            kind = tr("transformer_lr:an_array_kind", "a {type} of shape {shape} and dtype {dtype}",
                      type=type(value).__name__, shape=tuple(value.shape), dtype=dtype)
    elif value is not None and not isinstance(value, (int, float, np.integer, np.floating)):
        kind = tr("transformer_lr:a_type", "a {type}", type=type(value).__name__)
    if kind is not None:
        raise Known("not_a_number", what=what, kind=kind)
    out = to_array(value, what)
    return float(out.reshape(()))


def _same_rates(actual: np.ndarray, expected: np.ndarray) -> bool:
    """Relative comparison: the rates go down to 1e-7, below any absolute tolerance."""
    return actual.shape == expected.shape and bool(np.allclose(actual, expected, rtol=1e-6, atol=0.0))


@exercise("transformer_lr", notebook="06_training", points=1, defines="transformer_lr",
          reference="helpers.schedule.transformer_lr",
          success="correct! A linear warm-up, then a 1/sqrt(step) decay.", mistakes=LR_MISTAKES,
          off_limits=("helpers.schedule.transformer_lr", "helpers.schedule.scheduled_lr"))
def check_transformer_lr(transformer_lr_fn: Any) -> str:
    """Check a student's transformer_lr(step, d_model, warmup) against the reference on many values."""
    cases = graded(LR_CASES, lambda rng: (int(rng.integers(1, 3000)), 2 * int(rng.integers(4, 300)),
                                          int(rng.integers(2, 2000))))
    rates = []
    for step, d_model, warmup in cases:
        what = f"transformer_lr(step={step}, d_model={d_model}, warmup={warmup})"
        rates.append(_one_number(call(transformer_lr_fn, step, d_model, warmup), what))
    actual = np.array(rates)
    expected = np.array([reference_transformer_lr(s, d, w) for s, d, w in cases])
    if _same_rates(actual, expected):
        return tr("transformer_lr:checked", "Checked on {n} combinations of step, d_model and warmup, with steps "
                  "during the warm-up, at its end and after it.", n=len(cases))
    for key, wrong in wrong_rates(cases).items():
        if _same_rates(actual, wrong):
            raise key if isinstance(key, Known) else Known(key)
    expect_finite(actual, tr("transformer_lr:your_rates", "your rates"))
    i = int(np.argmax(np.abs(actual - expected) / expected))
    step, d_model, warmup = cases[i]
    raise Mistake(tr("transformer_lr:value_differs", "transformer_lr(step={step}, d_model={d_model}, warmup={warmup}) "
                     "is {actual}, the reference gives {expected}: lrate = d_model^-0.5 * min(step^-0.5, "
                     "step * warmup^-1.5).", step=step, d_model=d_model, warmup=warmup,
                     actual=scientific(float(actual[i]), 5), expected=scientific(float(expected[i]), 5)))


# ---------------------------------------------------------------------- label smoothing
LOSS_MISTAKES = {
    "padding_not_ignored": "the padded target positions count in your loss: average only over the positions whose "
                           "target is not pad_id, as if the pads were not there.",
    "smoothing_mass_wrong": "your smoothed target spreads the mass differently: this course uses the form of "
                            "Szegedy et al. (2016), which PyTorch's label_smoothing= implements: eps / V on EVERY "
                            "token, so the right token gets 1 - eps + eps / V. (The paper only gives eps = 0.1; its "
                            "code, tensor2tensor, spreads eps over the V - 1 wrong tokens instead.)",
    "not_averaged_over_real_tokens": "your loss is not the mean over the real (non-pad) target tokens: divide the "
                                     "sum of their losses by how many there are, not by the number of all positions "
                                     "or sentences (and do not return the sum).",
    "no_smoothing": "your loss is the plain cross-entropy: the target must be smoothed, with eps / V on every token "
                    "and 1 - eps + eps / V on the right one.",
    "probabilities_not_log": "your loss uses the probabilities where it needs their logarithm: cross-entropy is "
                             "minus the sum of target * log_softmax(logits).",
    "averaged_over_vocabulary": "your loss is divided by the vocabulary size: each position's cross-entropy SUMS "
                                "target * log-probability over the V tokens; the mean is over the real positions only.",
    "kl_divergence": "your loss is the KL divergence between the smoothed target and the model, which is the "
                     "cross-entropy minus the target's entropy: return the cross-entropy itself (the same gradient, "
                     "but the value is what F.cross_entropy with label_smoothing gives).",
    "not_differentiable": "the value is right, but it is {kind}: training calls backward() on it, so return the "
                          "tensor itself, computed from logits (no .item(), no detach, no torch.no_grad()).",
    "log_of_softmax": "{what} is {value} for large logits: the softmax of a logit far below the largest is 0 and its "
                      "log is -inf. Use torch.log_softmax(logits, dim=-1), which computes the log-probabilities in "
                      "one stable step (without overflow).",
    "annotated_smoothing": "you smooth as the Annotated Transformer does (eps / (V - 2) on the other tokens, 0 in the "
                           "pad column): this course uses the form of Szegedy et al. (2016), which PyTorch's "
                           "label_smoothing= implements, eps / V on EVERY token and 1 - eps + eps / V on the right "
                           "one, and the mean cross-entropy over the real tokens.",
    "sign_flipped": "your loss is negative, minus the right value: the cross-entropy is MINUS the sum of the smoothed "
                    "target times log_softmax(logits), a positive number that training makes smaller.",
    "pad_id_hardcoded": "your loss leaves out the positions whose target is 0, not those whose target is "
                        "self.pad_id: here the pad id is {pad_id}. Compare the target with self.pad_id.",
    "softmax_wrong_axis": "your log-softmax normalises over the wrong axis: the probabilities of one position sum to "
                          "1 over the vocabulary, the last axis of logits (dim=-1).",
    "changed_input": TORCH_MISTAKES["changed_input"],
    "wrong_gradients": TORCH_MISTAKES["wrong_gradients"],
    "all_pad_batch": "{what} gives {value} on a batch whose every target is the pad id; it must give 0. Such a "
                     "batch has no real position to average: the sum of their losses is 0, their count is 0, and "
                     "0 / 0 is nan. Divide by the count clamped to at least 1 (`.clamp(min=1)`).",
}

LOSS_CASES = [  # (smoothing, pad_id, V, target rows): rows with different numbers of pads
    (0.1, 0, 7, [[3, 5, 1, 2, 4], [6, 2, 2, 0, 0], [1, 4, 0, 0, 0]]),
    (0.3, 2, 5, [[4, 0, 1, 2], [3, 3, 2, 2]]),
    (0.2, 1, 6, [[2, 5, 3, 1], [4, 0, 1, 1]]),  # large logits: log(softmax(...)) gives log(0)
]
LOGIT_SCALES = (2.0, 2.0, 200.0)  # the standard deviation of the logits of each case
ALL_PAD_CASE = (0.1, 1, 5, [[1, 1, 1], [1, 1, 1]])  # (smoothing, pad_id, V, target rows): nothing but pads


def _loss_inputs(v: int, rows: list[list[int]], seed: int, scale: float | None = None) -> tuple[torch.Tensor,
                                                                                                 torch.Tensor]:
    """(logits, target) of a case: logits of standard deviation scale (default LOGIT_SCALES[seed])."""
    target = torch.tensor(rows)
    gen = torch.Generator().manual_seed(seed)
    logits = (LOGIT_SCALES[seed] if scale is None else scale) * torch.randn(*target.shape, v, generator=gen)
    return logits, target


def _drawn_loss_case(rng: np.random.Generator) -> tuple:
    """(smoothing, pad_id, V, target rows, logit scale, seed) of drawn sizes and seed (when grading)."""
    v, pad_id, length = int(rng.integers(4, 12)), int(rng.integers(0, 3)), int(rng.integers(2, 7))
    rows = []
    for _ in range(int(rng.integers(1, 4))):
        real = int(rng.integers(1, length + 1))
        tokens = rng.choice([t for t in range(v) if t != pad_id], real)
        rows.append([int(t) for t in tokens] + [pad_id] * (length - real))
    return round(float(rng.uniform(0.05, 0.4)), 3), pad_id, v, rows, 2.0, int(rng.integers(2 ** 31))


def _smoothed_terms(logits: torch.Tensor, target: torch.Tensor, eps: float, pad_id: int, *, right: float | None = None,
                    other: float | None = None, log: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """(per-position cross-entropy (batch, L), keep mask): target mass `right` on the right token, `other` elsewhere."""
    v = logits.shape[-1]
    right = 1 - eps + eps / v if right is None else right
    other = eps / v if other is None else other
    smoothed = torch.full_like(logits, other).scatter(-1, target.unsqueeze(-1), right)
    scores = torch.log_softmax(logits, -1) if log else torch.softmax(logits, -1)
    return -(smoothed * scores).sum(-1), target != pad_id


def wrong_losses(logits: torch.Tensor, target: torch.Tensor, eps: float, pad_id: int) -> dict[Any, float]:
    """The values the common wrong losses give: mistake code (or Known) -> loss."""
    v = logits.shape[-1]
    loss, keep = _smoothed_terms(logits, target, eps, pad_id)
    n = keep.sum()
    floor = reference_loss_floor(v, eps) if eps > 0 else 0.0
    masked = (loss * keep).sum()
    wrong = {
        "padding_not_ignored": loss.mean(),
        Known("smoothing_mass_wrong"): _mean(*_smoothed_terms(logits, target, eps, pad_id, right=1 - eps,
                                                              other=eps / (v - 1))),
        Known("smoothing_mass_wrong"): _mean(*_smoothed_terms(logits, target, eps, pad_id, right=1 - eps)),
        Known("not_averaged_over_real_tokens"): masked,
        Known("not_averaged_over_real_tokens"): masked / keep.numel(),
        Known("not_averaged_over_real_tokens"): masked / target.shape[0],
        # the mean loss of each sentence, then the mean over the sentences
        Known("not_averaged_over_real_tokens"): ((loss * keep).sum(1) / keep.sum(1).clamp(min=1)).mean(),
        "no_smoothing": _mean(*_smoothed_terms(logits, target, 0.0, pad_id)),
        "probabilities_not_log": _mean(*_smoothed_terms(logits, target, eps, pad_id, log=False)),
        Known("averaged_over_vocabulary"): masked / n / v,
        Known("averaged_over_vocabulary"): loss.mean() / v,
        "kl_divergence": masked / n - floor,
        "sign_flipped": -masked / n,
    }
    if pad_id != 0:  # the positions whose target is 0 left out, in place of the pads
        wrong[Known("pad_id_hardcoded", pad_id=pad_id)] = _mean(loss, target != 0)
    for axis in range(logits.dim() - 1):  # the log-softmax over the batch or the positions axis
        scores = torch.log_softmax(logits, axis)
        smoothed = torch.full_like(logits, eps / v).scatter(-1, target.unsqueeze(-1), 1 - eps + eps / v)
        wrong[Known("softmax_wrong_axis")] = _mean(-(smoothed * scores).sum(-1), keep)
    # The Annotated Transformer: eps / (V - 2) on the other tokens, 1 - eps on the right one, 0 in the pad column;
    # as a cross-entropy or a KL divergence, averaged over the real tokens or summed.
    annotated = torch.full_like(logits, eps / (v - 2)).scatter(-1, target.unsqueeze(-1), 1 - eps)
    annotated[..., pad_id] = 0
    cross = -(annotated * torch.log_softmax(logits, -1)).sum(-1) * keep
    entropy = -(annotated * torch.log(annotated.clamp(min=1e-30))).sum(-1) * keep
    for total in (cross.sum(), cross.sum() - entropy.sum()):
        wrong[Known("annotated_smoothing")] = total / n
        wrong[Known("annotated_smoothing")] = total
    return {key: float(value) for key, value in wrong.items()}


def _mean(loss: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    return loss[keep].sum() / keep.sum()


@exercise("label_smoothing_loss", notebook="06_training", points=3, defines="LabelSmoothingLoss",
          reference="helpers.loss.LabelSmoothingLoss",
          success="correct! Cross-entropy against the smoothed target, over the real tokens.", mistakes=LOSS_MISTAKES,
          off_limits=("helpers.loss.LabelSmoothingLoss", "torch.nn.functional.cross_entropy:label_smoothing",
                      "torch.nn.CrossEntropyLoss:label_smoothing"))
def check_label_smoothing_loss(loss_class: Any) -> str:
    """Check a student's LabelSmoothingLoss(smoothing, pad_id)(logits, target) against the reference."""
    cases = graded([(eps, pad_id, v, rows, LOGIT_SCALES[seed], seed)
                    for seed, (eps, pad_id, v, rows) in enumerate(LOSS_CASES)], _drawn_loss_case)
    for eps, pad_id, v, rows, scale, seed in cases:
        logits, target = _loss_inputs(v, rows, seed, scale)
        what = f"LabelSmoothingLoss(smoothing={eps}, pad_id={pad_id})(logits, target)"
        loss_fn = call(loss_class, smoothing=eps, pad_id=pad_id)
        student_logits = logits.clone().requires_grad_(True)
        given = (student_logits.clone(), target.clone())  # not leaves: an in-place change is reported, not an error
        result = call(loss_fn, *given)
        protect_inputs((logits, target), given, ("logits", "target"), what)
        out = to_array(result, what)
        if out.size != 1:
            raise generic("wrong_shape", what=what, actual=out.shape,
                          expected=tr("training:one_number", "() (one number)"),
                          hint=tr("label_smoothing_loss:shape_hint", " Return the mean loss over the non-pad target "
                                  "tokens."))
        if scale > 10 and not np.all(np.isfinite(out)):
            raise Known("log_of_softmax", what=what, value=float(out.reshape(-1)[0]))
        expect_finite(out, what)
        value = float(out.reshape(()))
        reference_logits = logits.clone().requires_grad_(True)
        reference_value = reference_loss(eps, pad_id)(reference_logits, target)
        expected = float(reference_value)
        if is_close(value, expected, 1e-5):
            if not (isinstance(result, torch.Tensor) and result.requires_grad):
                kind = (tr("label_smoothing_loss:no_gradient", "a tensor without a gradient")
                        if isinstance(result, torch.Tensor)
                        else tr("label_smoothing_loss:a_type", "a {type}", type=type(result).__name__))
                raise Known("not_differentiable", kind=kind)
            reference_value.backward()  # the gradient with respect to the logits must be the reference's
            try:
                call(result.backward)
            except Mistake as error:
                raise Known("wrong_gradients", what=what, detail=tr(
                    "torch:backward_failed", "Its backward() raised {error}.", error=str(error)[-100:])) from None
            grad = reference_logits.grad
            got = torch.zeros_like(grad) if student_logits.grad is None else student_logits.grad
            if not torch.allclose(got, grad, rtol=1e-4, atol=1e-6 * (1 + float(grad.abs().max()))):
                raise Known("wrong_gradients", what=what, detail=tr(
                    "torch:gradient_differs", "The gradient of {name} differs from the reference's.", name="logits"))
            continue
        for key, wrong in wrong_losses(logits, target, eps, pad_id).items():
            if is_close(value, wrong, 1e-5):
                raise key if isinstance(key, Known) else Known(key)
        raise Mistake(tr("label_smoothing_loss:value_differs", "{what} returns {value}, and the reference returns "
                         "{expected}, with V = {v} tokens, the targets {rows} and the pad id {pad_id}. The loss is "
                         "minus the sum, over the vocabulary, of the smoothed target times log_softmax(logits), "
                         "averaged over the positions whose target is not the pad id.", what=what,
                         value=_shown(value), expected=_shown(expected), v=v, rows=rows, pad_id=pad_id))
    _check_all_pad(loss_class)
    return tr("label_smoothing_loss:checked", "Checked with {n} smoothings, pad ids and vocabularies, on batches "
              "with pads, and on a batch of pads only.", n=len(cases))


def _shown(value: float) -> str:
    """A loss in a sentence: six significant digits, in the language's notation (nan and inf as they are)."""
    if not np.isfinite(value):
        return str(value)
    if value == 0:
        return number(0)
    magnitude = int(np.floor(np.log10(abs(value))))
    if not -4 <= magnitude <= 6:
        return scientific(value, 5)
    return number(value, max(0, 5 - magnitude))


def _check_all_pad(loss_class: Any) -> None:
    """A batch whose every target is the pad id has no position to average: its loss must be 0, not 0 / 0 (nan)."""
    eps, pad_id, v, rows = ALL_PAD_CASE
    logits, target = _loss_inputs(v, rows, 0)
    what = f"LabelSmoothingLoss(smoothing={eps}, pad_id={pad_id})(logits, target)"
    result = call(call(loss_class, smoothing=eps, pad_id=pad_id), logits.clone(), target.clone())
    out = to_array(result, what)
    if out.size != 1:
        raise generic("wrong_shape", what=what, actual=out.shape, expected=tr("training:one_number", "() (one number)"),
                      hint=tr("label_smoothing_loss:shape_hint", " Return the mean loss over the non-pad target "
                              "tokens."))
    value = float(out.reshape(()))
    if not np.isfinite(value) or abs(value) > 1e-6:
        raise Known("all_pad_batch", what=what, value=_shown(value))
