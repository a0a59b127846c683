"""The checks of notebook 07's sampling exercises: temperature_probs, top_k_filter, top_p_filter and sample_next,
each against the reference of helpers/sampling.py and against the answers of the common mistakes (wrong_*)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ..i18n import tr
from ..sampling import sample_next as reference_sample_next
from ..sampling import temperature_probs as reference_temperature_probs
from ..sampling import top_k_filter as reference_top_k_filter
from ..sampling import top_p_filter as reference_top_p_filter
from .harness import Known, Mistake, call, compare, exercise, generic, graded, match_known, to_array

NOTEBOOK = "07_gpt"


def _logits(seed: int, rows: int = 3, vocab: int = 8) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return 2.0 * torch.randn(rows, vocab, generator=gen, dtype=torch.float64)


def named(wrong: dict[Any, torch.Tensor], what: str) -> dict[Known, np.ndarray]:
    """The wrong answers as arrays, each keyed by a Known that carries what, the call its message names."""
    return {Known(key.code, **{"what": what, **key.fields}) if isinstance(key, Known) else Known(key, what=what):
            value.numpy() for key, value in wrong.items()}


def _check(out: np.ndarray, expected: torch.Tensor, wrong: dict, what: str) -> None:
    """The student's answer out, compared with expected, else matched with the wrong answers."""
    if out.shape != tuple(expected.shape):
        raise generic("wrong_shape", what=what, actual=out.shape, expected=tuple(expected.shape),
                      hint=tr("sampling:shape_hint", " The result has the shape of its input: one row per sequence, "
                              "one column per token of the vocabulary."))
    compare(out, expected.numpy(), named(wrong, what), what)


# ---------------------------------------------------------------------- temperature
TEMPERATURE_MISTAKES = {
    "softmax_before_temperature": "{what}: you divide the probabilities by the temperature (softmax first): the "
                                  "temperature divides the LOGITS, then one softmax turns them into probabilities, "
                                  "softmax(logits / temperature).",
    "multiplied_by_temperature": "{what}: you multiply the logits by the temperature: divide them by it, so that a "
                                 "temperature below 1 sharpens the distribution and above 1 flattens it.",
    "temperature_ignored": "{what} returns softmax(logits), the same for every temperature: divide the logits by "
                           "the temperature before the softmax.",
    "wrong_axis": "{what}: the softmax runs over the wrong axis: each ROW (the last axis, the vocabulary) must sum "
                  "to 1, dim=-1.",
    "returns_logits": "{what} returns logits / temperature, not probabilities: apply the softmax to them.",
    "log_probabilities": "{what} returns log-probabilities: return the probabilities themselves, torch.softmax "
                         "rather than torch.log_softmax.",
}


def wrong_temperature_probs(logits: torch.Tensor, temperature: float) -> dict[Any, torch.Tensor]:
    """The answers of the common wrong temperatures: mistake code (or Known) -> probabilities."""
    soft = torch.softmax(logits, dim=-1)
    return {
        "softmax_before_temperature": torch.softmax(soft / temperature, dim=-1),
        Known("softmax_before_temperature"): soft / temperature,
        "multiplied_by_temperature": torch.softmax(logits * temperature, dim=-1),
        "temperature_ignored": soft,
        **{Known("wrong_axis", axis=axis): torch.softmax(logits / temperature, dim=axis)
           for axis in range(logits.dim() - 1)},
        "returns_logits": logits / temperature,
        "log_probabilities": torch.log_softmax(logits / temperature, dim=-1),
    }


@exercise("temperature_probs", notebook=NOTEBOOK, defines="temperature_probs",
          reference="helpers.sampling.temperature_probs",
          success="correct! Divide the logits, then one softmax.", mistakes=TEMPERATURE_MISTAKES,
          off_limits=("helpers.sampling.temperature_probs", "helpers.sampling.sample_next"))
def check_temperature_probs(fn: Any) -> str:
    """Check temperature_probs(logits, temperature) at three temperatures on a batch of three rows, then on a
    (2, 3, V) batch: the softmax runs over the last axis, whatever the axes before it."""
    for logits, temperature in graded([(_logits(1), 0.5), (_logits(2), 2.0), (_logits(3), 0.8)], lambda rng: (
            _logits(int(rng.integers(2 ** 31))), float(rng.uniform(0.3, 3.0)))) + [
                (_logits(10, rows=6).reshape(2, 3, -1), 0.7)]:
        what = f"temperature_probs(logits of shape {tuple(logits.shape)}, temperature={temperature:g})"
        out = to_array(call(fn, logits.clone(), temperature), what)
        _check(out, reference_temperature_probs(logits, temperature), wrong_temperature_probs(logits, temperature),
               what)
    return tr("temperature_probs:checked", "Checked at four temperatures, on logits of shapes (3, V) and (2, 3, V).")


# ---------------------------------------------------------------------- top-k
TOP_K_MISTAKES = {
    "keeps_k_plus_one": "{what} keeps k + 1 tokens: the threshold is the k-th largest logit, topk(logits, k).values"
                        "[..., -1:], not the (k + 1)-th.",
    "drops_kth": "{what} removes the k-th largest logit itself (k - 1 tokens kept): remove only the logits SMALLER "
                 "than the k-th largest (<, not <=).",
    "drops_ties": "{what}: in row {row} several logits tie with the k-th largest, and you keep only k of them, "
                  "chosen by their place in the row: keep every logit that is at least the k-th largest, so that "
                  "equal logits are treated alike.",
    "keeps_smallest": "{what} keeps the k SMALLEST logits: keep the largest ones (torch.topk's default, "
                      "largest=True).",
    "removed_not_minus_inf": "{what}: the removed tokens hold {value}, not -inf: set them to float('-inf'), so that "
                             "the softmax gives them probability exactly 0, whatever the other logits are.",
    "returns_probabilities": "{what} returns probabilities: return the filtered LOGITS (the softmax comes later).",
}


def tie_logits() -> torch.Tensor:
    """Three rows of 8 logits; row 1 has three logits tied at its largest value, row 2 two tied at the second."""
    return torch.tensor([[0.5, 2.0, -1.0, 3.5, 1.0, -0.5, 2.5, 0.0],
                         [1.0, 4.0, 0.0, 4.0, -2.0, 4.0, 3.0, 0.5],
                         [-1.0, -3.0, -0.5, -2.0, -0.5, 0.5, -4.0, -1.5]], dtype=torch.float64)


def wrong_top_k(logits: torch.Tensor, k: int) -> dict[Any, torch.Tensor]:
    """The answers of the common wrong top-k filters: mistake code (or Known) -> logits."""
    minus_inf = float("-inf")
    ranked = torch.sort(logits, dim=-1, descending=True).values
    wrong: dict[Any, torch.Tensor] = {
        "keeps_k_plus_one": logits.masked_fill(logits < ranked[..., k:k + 1], minus_inf) if k < logits.shape[-1]
        else logits,
        "drops_kth": logits.masked_fill(logits <= ranked[..., k - 1:k], minus_inf),
        "keeps_smallest": logits.masked_fill(logits > torch.sort(logits, dim=-1).values[..., k - 1:k], minus_inf),
        "returns_probabilities": torch.softmax(reference_top_k_filter(logits, k), dim=-1),
    }
    index = torch.topk(logits, k, dim=-1).indices
    tied = ((logits >= ranked[..., k - 1:k]).sum(dim=-1) > k).flatten().nonzero()  # rows with ties at the k-th
    if len(tied):
        wrong[Known("drops_ties", row=int(tied[0]))] = torch.full_like(logits, minus_inf).scatter(
            -1, index, logits.gather(-1, index))
    return wrong


def _top_k_behaviour(out: np.ndarray, logits: torch.Tensor, k: int, what: str) -> None:
    """The mistakes recognised by what the answer does rather than by one exact wrong answer."""
    expected = reference_top_k_filter(logits, k).numpy().reshape(-1, logits.shape[-1])
    out = out.reshape(expected.shape)
    removed = np.isneginf(expected)
    if np.array_equal(out[~removed], expected[~removed]) and removed.any() and np.all(np.isfinite(out[removed])):
        raise Known("removed_not_minus_inf", what=what, value=f"{out[removed][0]:g}")
    for row in range(out.shape[0]):
        kept = np.isfinite(out[row])
        ties = int((~removed[row]).sum())
        if ties > k and kept.sum() == k and np.all(out[row][kept] == expected[row][kept]):
            raise Known("drops_ties", what=what, row=row)


@exercise("top_k_filter", notebook=NOTEBOOK, points=2, defines="top_k_filter",
          reference="helpers.sampling.top_k_filter",
          success="correct! The k largest logits stay, ties at the k-th included.", mistakes=TOP_K_MISTAKES,
          off_limits=("helpers.sampling.top_k_filter", "helpers.sampling.sample_next"))
def check_top_k_filter(fn: Any) -> str:
    """Check top_k_filter(logits, k) for k = 1, 2, 3 and 5 on rows with ties and without, and on one row of shape
    (V,)."""
    for logits, k in graded([(tie_logits(), 2), (tie_logits(), 1), (tie_logits(), 3), (_logits(4), 5)],
                            lambda rng: (_logits(int(rng.integers(2 ** 31))), int(rng.integers(1, 8)))) + [
                                (tie_logits()[1], 2)]:
        what = f"top_k_filter(logits of shape {tuple(logits.shape)}, k={k})"
        expected = reference_top_k_filter(logits, k)
        out = to_array(call(fn, logits.clone(), k), what)
        if out.shape == tuple(expected.shape) and not np.array_equal(out, expected.numpy()):
            match_known(out, named({key: value for key, value in wrong_top_k(logits, k).items()
                                    if not torch.equal(value, expected)}, what))  # with k = 1 some are right
            _top_k_behaviour(out, logits, k, what)
        _check(out, expected, {}, what)
    return tr("top_k_filter:checked", "Checked with k = 1, 2, 3 and 5, with ties, and on one row of shape (V,).")


# ---------------------------------------------------------------------- top-p
TOP_P_MISTAKES = {
    "excludes_crossing_token": "{what}: you drop the token whose probability takes the total across p, so the "
                               "tokens you keep add up to less than p (or to nothing, when the most likely token "
                               "alone is above p). Keep a token when the tokens ranked BEFORE it add up to less than "
                               "p: the cumulative sum minus the token's own probability.",
    "not_renormalised": "{what}: the kept probabilities do not sum to 1: divide them by their sum.",
    "unsorted_cumsum": "{what}: the cumulative sum runs in the vocabulary's order: sort the probabilities from the "
                       "largest down first (descending=True), then put the decisions back in the vocabulary's "
                       "order.",
    "ascending_sort": "{what} keeps the LEAST likely tokens: sort the probabilities in descending order.",
    "order_not_restored": "{what}: the kept probabilities are not at their own tokens' places in the vocabulary: "
                          "put each back where the sort took it from, scatter(-1, order, ...) with the order the "
                          "sort returned (a gather with that order moves them elsewhere).",
}


def _nucleus(probs: torch.Tensor, p: float, *, crossing: bool = True, normalise: bool = True, sort: str = "desc",
             restore: bool = True) -> torch.Tensor:
    """top_p_filter with one bug: the crossing token dropped, no renormalisation, another sort, order not restored."""
    if sort == "none":
        ordered, order = probs, torch.arange(probs.shape[-1]).expand_as(probs)
    else:
        ordered, order = probs.sort(dim=-1, descending=sort == "desc")
    total = ordered.cumsum(dim=-1)
    keep = (total - ordered < p) if crossing else (total < p)
    kept = ordered * keep
    if restore:
        kept = torch.zeros_like(probs).scatter(-1, order, kept)
    return kept / kept.sum(dim=-1, keepdim=True) if normalise else kept


def wrong_top_p(probs: torch.Tensor, p: float) -> dict[Any, torch.Tensor]:
    """The answers of the common wrong nucleus filters: mistake code (or Known) -> probabilities."""
    return {
        "excludes_crossing_token": _nucleus(probs, p, crossing=False),
        Known("excludes_crossing_token"): _nucleus(probs, p, crossing=False, normalise=False),
        "not_renormalised": _nucleus(probs, p, normalise=False),
        "unsorted_cumsum": _nucleus(probs, p, sort="none"),
        "ascending_sort": _nucleus(probs, p, sort="asc"),
        "order_not_restored": _nucleus(probs, p, restore=False),
        Known("order_not_restored"): _gathered(probs, p),
    }


def _gathered(probs: torch.Tensor, p: float) -> torch.Tensor:
    """top_p_filter whose decisions, made in sorted order, are put back with gather(-1, order), not scatter."""
    ordered, order = probs.sort(dim=-1, descending=True)
    kept = probs * ((ordered.cumsum(dim=-1) - ordered) < p).gather(-1, order)
    return kept / kept.sum(dim=-1, keepdim=True)


@exercise("top_p_filter", notebook=NOTEBOOK, points=3, defines="top_p_filter",
          reference="helpers.sampling.top_p_filter",
          success="correct! The nucleus keeps the token that crosses p.", mistakes=TOP_P_MISTAKES,
          off_limits=("helpers.sampling.top_p_filter", "helpers.sampling.sample_next"))
def check_top_p_filter(fn: Any) -> str:
    """Check top_p_filter(probs, p) at p = 0.5, 0.9, 0.95 and at a p below the largest probability of each row."""
    for seed, p in graded([(5, 0.5), (6, 0.9), (7, 0.95), (8, 0.05)], lambda rng: (
            int(rng.integers(2 ** 31)), float(rng.uniform(0.1, 0.95)))):
        probs = torch.softmax(_logits(seed), dim=-1)
        what = f"top_p_filter(probs of shape {tuple(probs.shape)}, p={p:g})"
        expected = reference_top_p_filter(probs, p)
        wrong = {key: value for key, value in wrong_top_p(probs, p).items()
                 if not torch.allclose(value, expected, equal_nan=True)}
        out = to_array(call(fn, probs.clone(), p), what)
        if out.shape == tuple(expected.shape) and np.array_equal(out > 0, expected.numpy() > 0) and not np.allclose(
                out.sum(axis=-1), 1.0):  # the right tokens kept, scaled otherwise than by their sum
            raise Known("not_renormalised", what=what)
        _check(out, expected, wrong, what)
    return tr("top_p_filter:checked", "Checked at four values of p.")


# ---------------------------------------------------------------------- sample_next
SAMPLE_MISTAKES = {
    "no_generator": "{what} does not draw with the generator it is given (the global random state changes its "
                    "tokens, or a generator seeded otherwise leaves them as they were): draw with "
                    "torch.multinomial(probs, 1, generator=generator), so that a seeded generator gives the same "
                    "text every time.",
    "greedy_always": "{what} always returns the most likely token: sample from the probabilities with "
                     "torch.multinomial; only temperature == 0 means the argmax.",
    "top_p_before_temperature": "{what}: the nucleus is taken before the temperature: divide by the temperature "
                                "first, then take the nucleus of those probabilities (the nucleus depends on the "
                                "temperature; top-k does not).",
    "no_greedy_at_zero": "{what} with temperature=0 does not return the argmax of each row: temperature 0 is greedy "
                         "decoding (and logits / 0 would be infinite).",
    "filters_ignored": "{what}: the top-k or top-p filter is not applied: a token outside it was drawn.",
}


def _draws(fn: Any, logits: torch.Tensor, seed: int, global_seed: int, *args: Any) -> np.ndarray:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(global_seed)
        generator = torch.Generator().manual_seed(seed)
        return to_array(call(fn, logits.clone(), generator, *args), "sample_next")


@exercise("sample_next", notebook=NOTEBOOK, points=2, defines="sample_next",
          reference="helpers.sampling.sample_next",
          success="correct! The same draws as the reference, from the seeded generator.", mistakes=SAMPLE_MISTAKES,
          off_limits=("helpers.sampling.sample_next", "helpers.sampling.generate"))
def check_sample_next(fn: Any) -> str:
    """Check sample_next(logits, generator, temperature, top_k, top_p) on 400 rows: the same draws as the reference
    from the same seeded generator, for four settings, and greedy decoding at temperature 0."""
    logits = _logits(9, rows=400, vocab=8).float()
    for temperature, top_k, top_p in [(1.0, None, None), (0.7, 3, None), (1.5, None, 0.8), (0.5, 4, 0.9),
                                      (0, None, None)]:
        args = (temperature, top_k, top_p)
        what = f"sample_next(logits, generator, temperature={temperature}, top_k={top_k}, top_p={top_p})"
        try:
            out = _draws(fn, logits, 10, 11, *args)
        except Mistake as error:  # logits / 0 gives NaN, and torch.multinomial refuses it
            if temperature == 0 and error.code == "raised_error":
                raise Known("no_greedy_at_zero", what=what) from None
            raise
        with torch.random.fork_rng(devices=[]):
            expected = reference_sample_next(logits, torch.Generator().manual_seed(10), *args).numpy()
        if out.shape != expected.shape:
            raise generic("wrong_shape", what=what, actual=out.shape, expected=expected.shape,
                          hint=tr("sample_next:shape_hint", " One token id per row."))
        if np.array_equal(out, expected):
            continue
        if temperature == 0:
            raise Known("no_greedy_at_zero", what=what)
        if np.array_equal(out, logits.argmax(-1).numpy()):
            raise Known("greedy_always", what=what)
        if not np.array_equal(out, _draws(fn, logits, 10, 12, *args)) or np.array_equal(
                out, _draws(fn, logits, 13, 11, *args)):
            raise Known("no_generator", what=what)
        if top_p is not None:
            with torch.random.fork_rng(devices=[]):
                swapped = torch.softmax(logits, -1) if top_k is None else torch.softmax(
                    reference_top_k_filter(logits, top_k), -1)
                swapped = torch.log(reference_top_p_filter(swapped, top_p))
                early = reference_sample_next(swapped, torch.Generator().manual_seed(10), temperature).numpy()
            if np.array_equal(out, early):
                raise Known("top_p_before_temperature", what=what)
        allowed = torch.ones_like(logits, dtype=torch.bool)
        if top_k is not None:
            allowed &= torch.isfinite(reference_top_k_filter(logits, top_k))
        if top_p is not None:
            allowed &= reference_top_p_filter(reference_temperature_probs(logits, temperature), top_p) > 0
        drawn = torch.as_tensor(out).long().clamp(0, logits.shape[-1] - 1)
        if not bool(allowed.gather(-1, drawn[:, None]).all()):
            raise Known("filters_ignored", what=what)
        raise Mistake(tr("sample_next:differs", "{what} draws other tokens than the reference from the same "
                         "generator: apply top-k, then the temperature, then top-p, and draw once with "
                         "torch.multinomial(probs, 1, generator=generator).", what=what))
    return tr("sample_next:checked", "Checked on 400 rows with five settings.")
