"""The check of notebook 06's greedy_decode: six sources decoded by a small seeded Transformer, whose rows end at
different steps, compared up to each row's end token with the reference, then with what the common wrong loops
give (wrong_decodings)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ..decoding import greedy_decode as reference_greedy_decode
from ..i18n import tr
from ..masking import padding_mask
from ..transformer import Transformer
from .harness import Known, Mistake, call, exercise, expect_finite, generic, graded, to_array
from .torch_compare import D_FF, D_MODEL

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
    "no_early_stop": "{what} returns {n} tokens per row, although every row had produced end_id after {m}: stop the "
                     "loop as soon as every row contains end_id (the steps after that are wasted work).",
}


def _decoding_model(end_bias: float = 1.5) -> Transformer:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(108)
        model = Transformer(12, 9, d_model=D_MODEL, num_heads=2, num_layers=2, d_ff=D_FF, dropout=0.1, max_len=32)
    # Make </s> (id 2) likely enough that, on _decoding_source(), rows 0 and 3 end after 3 tokens, row 5 after 7,
    # and the others never; with end_bias=1.8 and _decoding_source(9), rows end after 1, 2, 3 and 5 tokens, and
    # some write other tokens after their end (a loop that never stops early returns more). Two layers, so that
    # decoding without the causal mask changes the tokens.
    with torch.no_grad():
        model.generator.bias[END] += end_bias
    return model.eval()


CASES = ((1.5, 4), (1.8, 9))  # (end_bias, source seed)


def _decoding_source(seed: int = 4) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    src = torch.randint(3, 12, (6, 7), generator=gen)
    src[1, -3:] = 0
    src[4, -1:] = 0
    return src


def _drawn_source(rng: np.random.Generator) -> torch.Tensor:
    """Sources of drawn sizes and ids, some padded (when grading)."""
    gen = torch.Generator().manual_seed(int(rng.integers(2 ** 31)))
    src = torch.randint(3, 12, (int(rng.integers(2, 7)), int(rng.integers(3, 10))), generator=gen)
    src[0, -1:] = 0
    return src


def _cuts(tokens: np.ndarray) -> list[list[int]]:
    """Each generated row up to and including its first </s>."""
    rows = [[int(t) for t in row] for row in np.asarray(tokens).astype(np.int64)]
    return [row[:row.index(END) + 1] if END in row else row for row in rows]


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
        if stop != "never" and ((ys == END).any(dim=1).all() or (stop == "first_row" and ys[0, -1] == END)):
            break
    return ys[:, 1:].numpy()


def wrong_no_early_stop(model: Transformer, src: torch.Tensor) -> np.ndarray:
    """The loop that always runs max_len steps (named no_early_stop when every row ends sooner)."""
    with torch.no_grad():
        return _greedy_loop(model, src, stop="never")


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


@exercise("greedy_decode", notebook="06_training", points=3, defines="greedy_decode",
          reference="helpers.decoding.greedy_decode",
          success="correct! One token at a time, always the most likely one.", mistakes=GREEDY_MISTAKES,
          off_limits=("helpers.decoding.greedy_decode", "helpers.decoding.beam_search"))
def check_greedy_decode(greedy_decode_fn: Any) -> str:
    """Check a student's greedy_decode(model, src, max_len, start_id, end_id) against the reference."""
    for end_bias, src in graded([(bias, _decoding_source(seed)) for bias, seed in CASES],
                                lambda rng: (CASES[0][0], _drawn_source(rng))):
        model, batch = _decoding_model(end_bias), src.shape[0]
        what = f"greedy_decode(model, src, max_len={MAX_LEN}, start_id={START}, end_id={END})"
        with torch.no_grad():
            expected = reference_greedy_decode(model, src, MAX_LEN, START, END).numpy()
            result = call(greedy_decode_fn, model, src.clone(), MAX_LEN, START, END)  # a copy: src stays as it is
        if result is not None and not isinstance(result, torch.Tensor):
            raise generic("not_an_array", what=what, kind=type(result).__name__,
                          expected=tr("greedy_decode:a_tensor", "a tensor of token ids"))
        out = to_array(result, what)
        if out.ndim != 2 or out.shape[0] != batch:
            raise generic("wrong_shape", what=what, actual=out.shape,
                          expected=tr("greedy_decode:expected_shape", "(batch={batch}, n) with n <= max_len",
                                      batch=batch),
                          hint=tr("greedy_decode:shape_hint", "One row of generated token ids per source."))
        expect_finite(out, what)
        if not np.all(out == np.round(out)):
            raise Known("not_token_ids", what=what)
        reference = _cuts(expected)
        if out.shape[1] and np.all(out[:, 0] == START) and (out.shape[1] == MAX_LEN + 1
                                                            or _cuts(out[:, 1:]) == reference):
            raise Known("keeps_start_token", what=what, start=START)
        if out.shape[1] > MAX_LEN:
            raise Known("more_than_max_len", what=what, n=out.shape[1], max_len=MAX_LEN)
        mine = _cuts(out)
        if mine == reference:
            if out.shape[1] > expected.shape[1]:
                raise Known("no_early_stop", what=what, n=out.shape[1], m=expected.shape[1])
            continue
        for key, wrong in wrong_decodings(model, src).items():
            if mine == _cuts(wrong):
                raise key if isinstance(key, Known) else Known(key)
        if any(len(m) < len(r) and (not m or m[-1] != END) for m, r in zip(mine, reference)):
            raise Known("stops_too_early", what=what)
        row = next(i for i, (m, r) in enumerate(zip(mine, reference)) if m != r)
        raise Mistake(tr("greedy_decode:row_differs", "{what}: row {row} is {mine}, the reference decodes "
                         "{reference}. At each step take the argmax of the last position's logits and append it to "
                         "the decoder input.", what=what, row=row, mine=mine[row], reference=reference[row]))
    return tr("greedy_decode:checked", "Checked on {n} batches of {batch} sources whose rows end after different "
              "numbers of tokens.", n=len(CASES), batch=_decoding_source().shape[0])
