"""The checks of notebook 06: the learning-rate schedule (``transformer_lr``), label smoothing
(``LabelSmoothingLoss``) and greedy decoding (``greedy_decode``).

The schedule's check compares the rates of many (step, d_model, warmup) values with the reference and
with the rates the common wrong formulas give (wrong_rates); the loss's check compares the loss of two
padded batches with the reference and with the common wrong losses (wrong_losses).

The decoding check decodes six sources with a small seeded Transformer whose rows end at different steps,
and compares the tokens up to each row's end token with the reference. When they differ, it
compares them with what the common wrong loops produce (the first position read instead of the
last, no source mask, no causal mask, stopping when the first row ends, ...): each is a code in
GREEDY_MISTAKES with its hint, and wrong_decodings() computes the tokens each of them gives.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ..decoding import greedy_decode as reference_greedy_decode
from ..i18n import tr
from ..loss import LabelSmoothingLoss as reference_loss
from ..loss import loss_floor as reference_loss_floor
from ..masking import padding_mask
from ..schedule import transformer_lr as reference_transformer_lr
from ..transformer import Transformer
from .harness import Known, Mistake, call, exercise, expect_finite, generic, is_close, to_array
from .torch_compare import TORCH_MISTAKES, protect_inputs

D_MODEL, D_FF = 16, 32


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


def _rate(step: float, d_model: float, warmup: float, *, d_exp: float = -0.5, s_exp: float = -0.5,
          w_exp: float = -1.5, pick: Any = min, d_div: float = 1, s_div: float = 1, w_div: float = 1) -> float:
    """The schedule with one part changed: an exponent, min or max, or `x ** a / b` in place of `x ** (a / b)`."""
    return d_model ** d_exp / d_div * pick(step ** s_exp / s_div, step * warmup ** w_exp / w_div)


def wrong_rates(cases: list[tuple[int, int, int]] = LR_CASES) -> dict[Any, np.ndarray]:
    """The rates the common wrong schedules give on cases: mistake code (or Known) -> (len(cases),) rates."""
    def rates(**changes: Any) -> np.ndarray:
        return np.array([_rate(s, d, w, **changes) for s, d, w in cases])

    wrong: dict[Any, np.ndarray] = {
        "warmup_exponent": rates(w_exp=-0.5),
        "no_d_model_factor": rates(d_exp=0.0),
        "steps_from_zero": np.array([_rate(s + 1, d, w) for s, d, w in cases]),
        "max_instead_of_min": rates(pick=max),
        "no_warmup": rates(pick=lambda decay, warm: decay),
        "d_model_warmup_swapped": np.array([_rate(s, w, d) for s, d, w in cases]),
        "d_model_factor_inverted": rates(d_exp=0.5),
        "warmup_without_step": np.array([d ** -0.5 * min(s ** -0.5, w ** -1.5) for s, d, w in cases]),
    }
    # `x ** -1/2` for any of the three powers (d_model ** -1/2, step ** -1/2, warmup ** -3/2).
    for bits in range(1, 8):
        changes = {}
        if bits & 1:
            changes.update(d_exp=-1.0, d_div=2)
        if bits & 2:
            changes.update(s_exp=-1.0, s_div=2)
        if bits & 4:
            changes.update(w_exp=-3.0, w_div=2)
        wrong[Known("power_precedence")] = rates(**changes)
    return wrong


def _one_number(value: Any, what: str) -> float:
    """A rate as a float: a real Python or numpy number, or a 0-d array or tensor of one; else not_a_number."""
    kind = None
    if isinstance(value, (bool, np.bool_, str, bytes, complex, np.complexfloating)):
        kind = tr("transformer_lr:a_kind", "a {type} ({value})", type=type(value).__name__, value=repr(value))
    elif hasattr(value, "shape") and hasattr(value, "dtype"):  # an array or a tensor
        dtype = str(value.dtype)
        if (tuple(value.shape) != () or "complex" in dtype or "bool" in dtype
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


@exercise("transformer_lr", notebook="06_training", defines="transformer_lr",
          success="correct! A linear warm-up, then a 1/sqrt(step) decay.", mistakes=LR_MISTAKES,
          off_limits=("helpers.schedule.transformer_lr", "helpers.schedule.scheduled_lr"))
def check_transformer_lr(transformer_lr_fn: Any) -> str:
    """Check a student's transformer_lr(step, d_model, warmup) against the reference on many values."""
    rates = []
    for step, d_model, warmup in LR_CASES:
        what = f"transformer_lr(step={step}, d_model={d_model}, warmup={warmup})"
        rates.append(_one_number(call(transformer_lr_fn, step, d_model, warmup), what))
    actual = np.array(rates)
    expected = np.array([reference_transformer_lr(s, d, w) for s, d, w in LR_CASES])
    if _same_rates(actual, expected):
        return tr("transformer_lr:checked", "Checked on {n} (step, d_model, warmup) values, before, at and after the "
                  "warm-up.", n=len(LR_CASES))
    for key, wrong in wrong_rates().items():
        if _same_rates(actual, wrong):
            raise key if isinstance(key, Known) else Known(key)
    expect_finite(actual, tr("transformer_lr:your_rates", "your rates"))
    i = int(np.argmax(np.abs(actual - expected) / expected))
    step, d_model, warmup = LR_CASES[i]
    raise Mistake(tr("transformer_lr:value_differs", "transformer_lr(step={step}, d_model={d_model}, warmup={warmup}) "
                     "is {actual:.6g}, the reference gives {expected:.6g}: lrate = d_model^-0.5 * min(step^-0.5, "
                     "step * warmup^-1.5).", step=step, d_model=d_model, warmup=warmup, actual=actual[i],
                     expected=expected[i]))


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
    "changes_input": TORCH_MISTAKES["changes_input"],
    "wrong_gradients": TORCH_MISTAKES["wrong_gradients"],
}

LOSS_CASES = [  # (smoothing, pad_id, V, target rows): rows with different numbers of pads
    (0.1, 0, 7, [[3, 5, 1, 2, 4], [6, 2, 2, 0, 0], [1, 4, 0, 0, 0]]),
    (0.3, 2, 5, [[4, 0, 1, 2], [3, 3, 2, 2]]),
    (0.2, 1, 6, [[2, 5, 3, 1], [4, 0, 1, 1]]),  # large logits: log(softmax(...)) gives log(0)
]
LOGIT_SCALES = (2.0, 2.0, 200.0)  # the standard deviation of the logits of each case


def _loss_inputs(v: int, rows: list[list[int]], seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    target = torch.tensor(rows)
    gen = torch.Generator().manual_seed(seed)
    logits = LOGIT_SCALES[seed] * torch.randn(*target.shape, v, generator=gen)
    return logits, target


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
        "no_smoothing": _mean(*_smoothed_terms(logits, target, 0.0, pad_id)),
        "probabilities_not_log": _mean(*_smoothed_terms(logits, target, eps, pad_id, log=False)),
        Known("averaged_over_vocabulary"): masked / n / v,
        Known("averaged_over_vocabulary"): loss.mean() / v,
        "kl_divergence": masked / n - floor,
        "sign_flipped": -masked / n,
    }
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


@exercise("label_smoothing_loss", notebook="06_training", defines="LabelSmoothingLoss",
          success="correct! Cross-entropy against the smoothed target, over the real tokens.", mistakes=LOSS_MISTAKES,
          off_limits=("helpers.loss.LabelSmoothingLoss", "torch.nn.functional.cross_entropy:label_smoothing",
                      "torch.nn.CrossEntropyLoss:label_smoothing", "torch._C._nn.cross_entropy_loss:label_smoothing"))
def check_label_smoothing_loss(loss_class: Any) -> str:
    """Check a student's LabelSmoothingLoss(smoothing, pad_id)(logits, target) against the reference."""
    for seed, (eps, pad_id, v, rows) in enumerate(LOSS_CASES):
        logits, target = _loss_inputs(v, rows, seed)
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
        if LOGIT_SCALES[seed] > 10 and not np.all(np.isfinite(out)):
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
            _compare_loss_gradients(result, student_logits, reference_value, reference_logits, what)
            continue
        for key, wrong in wrong_losses(logits, target, eps, pad_id).items():
            if is_close(value, wrong, 1e-5):
                raise key if isinstance(key, Known) else Known(key)
        raise Mistake(tr("label_smoothing_loss:value_differs", "{what} is {value:.6g}, the reference gives "
                         "{expected:.6g} (vocabulary V={v}, targets {rows}, pads {pad_id}). The loss is the mean, over "
                         "the non-pad positions, of minus the sum over the vocabulary of smoothed target * "
                         "log_softmax(logits).", what=what, value=value, expected=expected, v=v, rows=rows,
                         pad_id=pad_id))
    return tr("label_smoothing_loss:checked", "Checked with {n} smoothings, pad ids and vocabularies, on batches "
              "with pads.", n=len(LOSS_CASES))


def _compare_loss_gradients(result: torch.Tensor, logits: torch.Tensor, reference_value: torch.Tensor,
                            reference_logits: torch.Tensor, what: str) -> None:
    """The gradient of the loss with respect to the logits must be the reference's."""
    reference_value.backward()
    try:
        call(result.backward)
    except Mistake as error:
        raise Known("wrong_gradients", what=what, of="", detail=tr(
            "torch:backward_raised", " (backward() raised {error})", error=str(error)[-100:])) from None
    expected = reference_logits.grad
    got = torch.zeros_like(expected) if logits.grad is None else logits.grad
    if not torch.allclose(got, expected, rtol=1e-4, atol=1e-6 * (1 + float(expected.abs().max()))):
        raise Known("wrong_gradients", what=what, of=tr("torch:of", " of {name}", name="logits"), detail="")


# ---------------------------------------------------------------------- greedy decoding
START, END, MAX_LEN = 1, 2, 8

GREEDY_MISTAKES = {
    "keeps_start_token": "{what}: every row starts with the start token {start}: return only the tokens the model "
                         "generated, without the start token you fed in first.",
    "more_than_max_len": "{what} returns {n} tokens per row, more than max_len={max_len}: generate at most max_len "
                         "tokens.",
    "not_token_ids": "{what} returns non-integer values: return token ids (the index of the largest logit), not "
                     "probabilities.",
    # With a causal decoder these two bugs give the same tokens, so one hint names both.
    "first_position": "every step repeats the first step's prediction: feed the decoder everything generated so far, "
                      "and read the next token from the LAST position of the logits, not the first one.",
    "no_src_mask": "decode gets no source mask, so cross-attention looks at the source's padding: pass the mask "
                   "built from src to every decode call.",
    "no_causal_mask": "the decoder runs without the causal mask: each earlier position of the tokens generated so far "
                      "then also sees the tokens after it, which it never did in training, and from the second layer "
                      "on this changes the prediction. Pass the causal target mask of those tokens to decode.",
    "stops_at_first_end": "decoding stops as soon as the FIRST sentence of the batch has produced end_id, so the other "
                          "rows are cut short: stop only once EVERY row contains end_id.",
    "stops_too_early": "{what} stops too early: keep generating until every row has produced end_id or max_len "
                       "tokens are generated.",
}


def _decoding_model() -> Transformer:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(108)
        model = Transformer(12, 9, d_model=D_MODEL, num_heads=2, num_layers=2, d_ff=D_FF, dropout=0.1, max_len=32)
    # Make </s> (id 2) likely enough that rows 0 and 3 end after 3 tokens, row 5 after 7, and the others never.
    # Two layers, so that decoding without the causal mask changes the tokens.
    with torch.no_grad():
        model.generator.bias[END] += 1.5
    return model.eval()


def _decoding_source() -> torch.Tensor:
    gen = torch.Generator().manual_seed(4)
    src = torch.randint(3, 12, (6, 7), generator=gen)
    src[1, -3:] = 0
    src[4, -1:] = 0
    return src


def _cut(row: np.ndarray) -> list[int]:
    """A generated row up to and including its first </s>."""
    out = []
    for token in row.tolist():
        out.append(int(token))
        if token == END:
            break
    return out


def _cuts(tokens: np.ndarray) -> list[list[int]]:
    return [_cut(row) for row in np.asarray(tokens).astype(np.int64)]


def _greedy_loop(model: Transformer, src: torch.Tensor, *, position: int = -1, with_src_mask: bool = True,
                 tgt_mask: str = "causal", stop: str = "every_row") -> np.ndarray:
    """The reference loop with one bug: which position is read, which masks decode gets, when it stops."""
    src_mask = model.make_src_mask(src)
    memory = model.encode(src, src_mask)
    ys = torch.full((src.shape[0], 1), START, dtype=torch.long)
    for _ in range(MAX_LEN):
        mask = {"causal": model.make_tgt_mask(ys),
                "all_true": torch.ones(ys.shape[0], 1, ys.shape[1], ys.shape[1], dtype=torch.bool),
                "padding_only": padding_mask(ys, model.pad_id)}[tgt_mask]
        logits = model.decode(ys, memory, src_mask if with_src_mask else None, mask)
        ys = torch.cat([ys, logits[:, position].argmax(dim=-1, keepdim=True)], dim=1)
        if (ys == END).any(dim=1).all() or (stop == "first_row" and ys[0, -1] == END):
            break
    return ys[:, 1:].numpy()


def wrong_decodings(model: Transformer, src: torch.Tensor) -> dict[Any, np.ndarray]:
    """The tokens the common wrong decoding loops give: mistake code (or Known) -> (batch, n) token ids."""
    with torch.no_grad():
        return {
            "first_position": _greedy_loop(model, src, position=0),
            "no_src_mask": _greedy_loop(model, src, with_src_mask=False),
            Known("no_causal_mask"): _greedy_loop(model, src, tgt_mask="all_true"),
            Known("no_causal_mask"): _greedy_loop(model, src, tgt_mask="padding_only"),
            "stops_at_first_end": _greedy_loop(model, src, stop="first_row"),
        }


@exercise("greedy_decode", notebook="06_training", defines="greedy_decode",
          success="correct! One token at a time, always the most likely one.", mistakes=GREEDY_MISTAKES,
          off_limits=("helpers.decoding.greedy_decode", "helpers.decoding.beam_search"))
def check_greedy_decode(greedy_decode_fn: Any) -> str:
    """Check a student's greedy_decode(model, src, max_len, start_id, end_id) against the reference."""
    model, src = _decoding_model(), _decoding_source()
    batch = src.shape[0]
    what = f"greedy_decode(model, src, max_len={MAX_LEN}, start_id={START}, end_id={END})"
    with torch.no_grad():
        expected = reference_greedy_decode(model, src, MAX_LEN, START, END).numpy()
        result = call(greedy_decode_fn, model, src.clone(), MAX_LEN, START, END)  # a copy: src stays as it is
    out = to_array(result, what)
    if out.ndim != 2 or out.shape[0] != batch:
        raise generic("wrong_shape", what=what, actual=out.shape,
                      expected=tr("greedy_decode:expected_shape", "(batch={batch}, n) with n <= max_len", batch=batch),
                      hint=tr("greedy_decode:shape_hint", "One row of generated token ids per source."))
    expect_finite(out, what)
    if not np.all(out == np.round(out)):
        raise Known("not_token_ids", what=what)
    reference = _cuts(expected)
    if out.shape[1] and np.all(out[:, 0] == START) and (out.shape[1] == MAX_LEN + 1 or _cuts(out[:, 1:]) == reference):
        raise Known("keeps_start_token", what=what, start=START)
    if out.shape[1] > MAX_LEN:
        raise Known("more_than_max_len", what=what, n=out.shape[1], max_len=MAX_LEN)
    mine = _cuts(out)
    if mine == reference:
        return tr("greedy_decode:checked", "Checked on {batch} sources, some ending early.", batch=batch)
    for key, wrong in wrong_decodings(model, src).items():
        if mine == _cuts(wrong):
            raise key if isinstance(key, Known) else Known(key)
    if any(len(m) < len(r) and (not m or m[-1] != END) for m, r in zip(mine, reference)):
        raise Known("stops_too_early", what=what)
    row = next(i for i, (m, r) in enumerate(zip(mine, reference)) if m != r)
    raise Mistake(tr("greedy_decode:row_differs", "{what}: row {row} is {mine}, the reference decodes {reference}. "
                     "At each step take the argmax of the last position's logits and append it to the decoder input.",
                     what=what, row=row, mine=mine[row], reference=reference[row]))


__all__ = ["END", "GREEDY_MISTAKES", "LOSS_CASES", "LOSS_MISTAKES", "LR_CASES", "LR_MISTAKES", "MAX_LEN", "START",
           "check_greedy_decode", "check_label_smoothing_loss", "check_transformer_lr", "wrong_decodings",
           "wrong_losses", "wrong_rates"]
