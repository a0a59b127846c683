"""Turning a trained Transformer into answers: greedy decoding, beam search, a KV cache, exact-match accuracy.

    greedy_decode(model, src, max_len, start_id, end_id, use_cache=False)   always the most likely next token
    beam_search(model, src, beam_size, max_len, start_id, end_id, alpha=0.6) the paper's beam search (beam 4,
                                                                              length penalty alpha = 0.6)
    RecomputeDecoder / KVCacheDecoder       one decoding step: re-run the decoder over the whole prefix, or
                                            compute only the new position from cached keys and values
                                            (in decoding_steps.py, imported here too)
    predict(model, texts, method="greedy")  written dates -> the model's ISO strings
    exact_match(model, pairs)               the fraction of whole strings that are right
    percent(count, total)                   count / total as "99.90%": 100.00% only when count == total

Everything here decodes without gradients (torch.no_grad); KVCacheDecoder (use_cache=True) needs the
model in eval mode, since it computes the eval-mode model (no dropout).
"""

from __future__ import annotations

import math
import numbers
from typing import Sequence

import torch

from .dates import TARGET_LENGTH, TARGET_VOCAB, decode_targets, encode_sources
from .decoding_steps import KVCacheDecoder, RecomputeDecoder, check_model, start_decoding, tgt_vocab_size
from .transformer import Transformer
from .validation import pairs as checked_pairs
from .validation import positive_int


# ---------------------------------------------------------------------- greedy decoding
def greedy_decode(model: Transformer, src: torch.Tensor, max_len: int, start_id: int, end_id: int,
                  use_cache: bool = False) -> torch.Tensor:
    """Generate up to max_len tokens per source, each time the most likely next token.

    src (batch, L_src) ids -> (batch, n) ids with n <= max_len, WITHOUT the start token. Decoding
    stops early once every row has produced end_id; what a row generates after its end_id is
    meaningless (decode_targets cuts it). An end_id outside the vocabulary (e.g. -1) is never
    produced: every row then gets max_len tokens. Call it in eval mode.

    use_cache=False re-runs the decoder over the whole prefix at every step (RecomputeDecoder);
    use_cache=True computes only the new position and reads the earlier ones from a KV cache
    (KVCacheDecoder: O(t) instead of O(t^2) work for the t-th token; the same tokens).
    """
    with torch.no_grad():
        decoder, max_len = start_decoding(model, src, max_len, start_id, end_id, use_cache)
        token = torch.full((src.shape[0],), start_id, dtype=torch.long, device=src.device)  # (batch,)
        generated, ended = [], torch.zeros_like(token, dtype=torch.bool)
        for _ in range(max_len):
            token = decoder.step(token).argmax(dim=-1)  # (batch,): the most likely next token
            generated.append(token)
            ended |= token == end_id
            if ended.all():
                break
        return torch.stack(generated, dim=1)  # (batch, n)


# ---------------------------------------------------------------------- beam search
def length_penalty(length: int | torch.Tensor, alpha: float) -> float | torch.Tensor:
    """GNMT's length penalty (Wu et al. 2016): lp(Y) = ((5 + |Y|) / 6) ** alpha; lp = 1 for |Y| = 1 or alpha = 0."""
    return ((5 + length) / 6) ** alpha


def beam_search(model: Transformer, src: torch.Tensor, beam_size: int, max_len: int, start_id: int, end_id: int,
                alpha: float = 0.6, *, use_cache: bool = False, return_scores: bool = False):
    """Beam search with a length penalty, as in the paper (section 6.1: beam_size=4, alpha=0.6).

    src (batch, L_src) ids -> (batch, n) ids WITHOUT the start token: for each source the finished
    hypothesis Y with the highest score(Y) = log P(Y | X) / lp(Y), lp(Y) = ((5 + |Y|) / 6) ** alpha
    (GNMT), where |Y| counts the generated tokens including end_id. n is the length of the longest
    returned hypothesis; a row ends with its end_id (unless it reached max_len without one) and is
    padded after it with model.pad_id.
    return_scores=True also returns the scores, (batch,). Batched: every source keeps beam_size rows
    (batch * beam_size decoder rows); use_cache=True steps them with a KV cache (KVCacheDecoder).

    The search, for each source (the "shrinking beam" of Nematus and Marian):
      1. Start with one hypothesis, the start token, and beam_size open places.
      2. Extend every live hypothesis by every token and keep the `open` extensions with the highest
         log P(prefix | X) (no penalty while searching: they all have the same length).
      3. An extension that ends with end_id is finished: it is set aside and compared with the best
         finished one by its penalised score, and its place closes: `open` drops by one.
      4. Repeat until no hypothesis is live or max_len tokens are generated; the hypotheses still live
         after max_len tokens count as finished (|Y| = max_len).
    So beam_size hypotheses get finished (fewer only if the vocabulary is smaller than the beam), and
    beam_size=1 is greedy decoding, token for token: equal log-probabilities are ordered by their
    logits, then by token id, so the one place goes to the token argmax picks. Implementations that
    keep beam_size live hypotheses after some have finished (tensor2tensor, for one) can return a
    longer hypothesis than greedy decoding with beam 1.
    """
    if isinstance(beam_size, bool) or not isinstance(beam_size, numbers.Integral) or beam_size < 1:
        raise ValueError(f"beam_size must be a positive integer, got {beam_size!r}")
    if isinstance(alpha, bool) or not isinstance(alpha, numbers.Real) or not 0 <= alpha < math.inf:
        raise ValueError(f"alpha must be a finite number >= 0 (the paper's 0.6; 0 = no length penalty), got {alpha!r}")
    if not isinstance(return_scores, bool):
        raise ValueError(f"return_scores must be True or False, got {return_scores!r}")
    check_model(model)
    vocab = tgt_vocab_size(model)
    if isinstance(end_id, bool) or not isinstance(end_id, numbers.Integral) or not 0 <= end_id < vocab:
        raise ValueError(f"end_id must be a token id in [0, tgt_vocab_size={vocab}), got {end_id!r}")
    k = int(beam_size)
    with torch.no_grad():
        decoder, max_len = start_decoding(model, src, max_len, start_id, end_id, use_cache, repeats=k)
        batch, device, pad_id = src.shape[0], src.device, model.pad_id
        dtype = model.generator.weight.dtype  # of the logits: float64 models search in float64
        rank = torch.arange(k, device=device)  # (k,)
        rows = torch.arange(batch, device=device)[:, None] * k  # (batch, 1): the first row of each source
        tokens = torch.full((batch * k,), start_id, dtype=torch.long, device=device)  # the next decoder input
        history = torch.full((batch, k, max_len), pad_id, dtype=torch.long, device=device)  # tokens generated
        log_p = torch.full((batch, k), -math.inf, dtype=dtype, device=device)  # log P(prefix | X); -inf = empty place
        log_p[:, 0] = 0.0  # one hypothesis to start with: the start token
        open_places = torch.full((batch,), k, dtype=torch.long, device=device)  # beam_size - finished
        best_score = torch.full((batch,), -math.inf, dtype=dtype, device=device)
        best = torch.full((batch, max_len), pad_id, dtype=torch.long, device=device)
        best_length = torch.zeros(batch, dtype=torch.long, device=device)

        def set_aside(finished: torch.Tensor, scores: torch.Tensor, candidates: torch.Tensor, length: int):
            """Keep, per source, the best of the finished candidates (batch, k) if it beats the best so far."""
            penalised = torch.where(finished, scores / length_penalty(length, alpha), -math.inf)  # (batch, k)
            step_best, which = penalised.max(dim=1)  # the first of equal scores: the more likely prefix
            better = step_best > best_score
            best_score[better] = step_best[better]
            best[better] = candidates[torch.arange(batch, device=device), which][better]
            best_length[better] = length

        for t in range(1, max_len + 1):
            logits = decoder.step(tokens).reshape(batch, k, -1)  # (batch, k, V)
            vocab = logits.shape[-1]
            extended = (log_p[:, :, None] + torch.log_softmax(logits.to(log_p.dtype), dim=-1)).reshape(batch, -1)
            # Order by extended log P, ties by the logits, then by position (stable sorts): argmax's order.
            by_logit = logits.reshape(batch, -1).argsort(dim=1, descending=True, stable=True)
            order = by_logit.gather(1, extended.gather(1, by_logit).argsort(dim=1, descending=True, stable=True))
            top = order[:, :k]  # (batch, k): the k best extensions, of which `open_places` are kept
            scores = extended.gather(1, top)
            origin, token = top // vocab, top % vocab  # which hypothesis, extended by which token
            candidates = history.gather(1, origin[:, :, None].expand(-1, -1, max_len))  # (batch, k, max_len)
            candidates[:, :, t - 1] = token
            kept = (rank < open_places[:, None]) & (scores > -math.inf)
            finished = kept & (token == end_id)
            live = kept & ~finished
            set_aside(finished, scores, candidates, t)
            open_places -= finished.sum(dim=1)
            if t == max_len or not live.any():
                set_aside(live, scores, candidates, t)  # out of length: the live hypotheses end here
                break
            # The live hypotheses move to the first places, in order; the other places are empty (-inf).
            places = (~live).long().argsort(dim=1, stable=True)  # (batch, k)
            log_p = torch.where(rank < live.sum(dim=1, keepdim=True), scores.gather(1, places), -math.inf)
            history = candidates.gather(1, places[:, :, None].expand(-1, -1, max_len))
            decoder.reorder((rows + origin.gather(1, places)).reshape(-1))
            tokens = token.gather(1, places).reshape(-1)
        out = best[:, :max(int(best_length.max()), 1)]
        return (out, best_score) if return_scores else out


# ---------------------------------------------------------------------- whole strings
def predict(model: Transformer, texts: Sequence[str], batch_size: int = 500, device: str | None = None,
            method: str = "greedy", beam_size: int = 4, alpha: float = 0.6, use_cache: bool = False,
            decode_fn=None) -> list[str]:
    """Written dates -> the model's ISO strings, in eval mode.

    method="greedy" (greedy_decode) or "beam" (beam_search with beam_size and alpha; beam_size=1 is greedy).
    decode_fn(model, src, max_len, start_id, end_id), if given, decodes instead of greedy_decode (notebook
    06 passes the student's own greedy_decode once its check passes).
    """
    if method not in ("greedy", "beam"):
        raise ValueError(f"method must be 'greedy' or 'beam', got {method!r}")
    if decode_fn is not None and (method != "greedy" or not callable(decode_fn)):
        raise ValueError("decode_fn must be a function (model, src, max_len, start_id, end_id), used with "
                         f"method='greedy'; got {decode_fn!r} with method={method!r}")
    if isinstance(texts, str):
        texts = [texts]
    batch_size = positive_int(batch_size, "batch_size")
    device = device or next(model.parameters()).device
    model.eval()
    out: list[str] = []
    bos, eos = TARGET_VOCAB.bos_id, TARGET_VOCAB.eos_id
    for start in range(0, len(texts), batch_size):
        src = encode_sources(texts[start:start + batch_size]).to(device)
        if decode_fn is not None:
            ids = decode_fn(model, src, TARGET_LENGTH + 1, bos, eos)
            if not isinstance(ids, torch.Tensor) or ids.dim() != 2 or ids.shape[0] != src.shape[0]:
                got = f"{ids.shape[0]} rows" if isinstance(ids, torch.Tensor) and ids.dim() == 2 else \
                    f"a {type(ids).__name__}" + (f" of shape {tuple(ids.shape)}" if hasattr(ids, "shape") else "")
                raise ValueError(f"decode_fn must return one row of ids per input: it returned {got} for "
                                 f"{src.shape[0]} inputs (a tensor of shape (batch, L) was expected)")
        elif method == "greedy":
            ids = greedy_decode(model, src, TARGET_LENGTH + 1, bos, eos, use_cache=use_cache)
        else:
            ids = beam_search(model, src, beam_size, TARGET_LENGTH + 1, bos, eos, alpha, use_cache=use_cache)
        out.extend(decode_targets(ids.cpu()))
    return out


def exact_match(model: Transformer, pairs: Sequence[tuple[str, str]], batch_size: int = 500, **decoding) -> float:
    """The fraction of pairs whose whole predicted string equals the target.

    decoding: predict's method, beam_size, alpha, use_cache, decode_fn (default: greedy decoding).
    """
    pairs = checked_pairs(pairs, "pairs")
    predictions = predict(model, [s for s, _ in pairs], batch_size, **decoding)
    return sum(p == t for p, (_, t) in zip(predictions, pairs)) / max(len(pairs), 1)


def percent(count: int, total: int) -> str:
    """count / total as a percentage with two decimals, "99.90%" (the decimal mark of the current language).

    Never rounded to 100.00% while count < total, nor to 0.00% while count > 0: a share of right answers
    reads 100% only when every answer is right (1,999 of 2,000 is "99.95%"; 19,999 of 20,000 is "99.99%").
    """
    from .i18n import number

    for value, name in ((count, "count"), (total, "total")):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
            raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
    if not 0 <= count <= total or total == 0:
        raise ValueError(f"count must be between 0 and total (total > 0), got count={count}, total={total}")
    value = round(100 * count / total, 2)
    if 0 < count < total:
        value = min(max(value, 0.01), 99.99)
    return f"{number(value, 2)}%"


__all__ = ["KVCacheDecoder", "RecomputeDecoder", "beam_search", "exact_match", "greedy_decode", "length_penalty",
           "percent", "predict"]
