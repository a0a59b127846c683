"""Greedy decoding with and without the KV cache, beam search, predict and exact_match (no training)."""

import itertools
import math

import pytest
import torch

from helpers import beam_search, greedy_decode
from helpers.decoding import KVCacheDecoder, RecomputeDecoder, exact_match, length_penalty, predict
from helpers.training import TrainConfig, build_model
from helpers.transformer import Transformer

START, VOCAB, MAX_LEN = 1, 16, 12


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """These models are tiny: one thread is faster, and does not wait on a busy second core."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def random_model(seed, norm_first=False, num_layers=2, tgt_vocab=VOCAB, dtype=torch.float32):
    """A small Transformer in eval mode with seeded weights of std 0.3 (LayerNorm gains near 1), which
    decodes varied sequences (Xavier's initial weights give nearly the same token at every step)."""
    torch.manual_seed(seed)
    model = Transformer(12, tgt_vocab, d_model=16, num_heads=2, num_layers=num_layers, d_ff=32, max_len=24,
                        norm_first=norm_first)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name and name.endswith("weight"):
                p.copy_(1.0 + 0.3 * torch.randn(p.shape, generator=gen))
            else:
                p.copy_(0.3 * torch.randn(p.shape, generator=gen))
    return model.to(dtype).eval()


def padded_sources(batch=16, length=9):
    """Source ids (batch, length), row i padded (id 0) over its last i % 6 positions."""
    src = torch.randint(3, 12, (batch, length), generator=torch.Generator().manual_seed(0))
    for i in range(batch):
        src[i, length - i % 6:] = 0
    return src


def end_steps(out, end_id):
    """The step (1-based) at which each row first produces end_id, None where it never does."""
    return [row.index(end_id) + 1 if end_id in row else None for row in out.tolist()]


def varied_end_token(model, src):
    """The token that, used as end_id, makes the rows end at the most different steps."""
    free = greedy_decode(model, src, MAX_LEN, START, -1)  # end_id -1 is never produced: MAX_LEN tokens

    def spread(token):
        steps = end_steps(free, token)
        return len({s for s in steps if s is not None}), None in steps
    return max((t for t in range(VOCAB) if t != START), key=spread)


def cut(row, end_id):
    row = row.tolist()
    return row[:row.index(end_id) + 1] if end_id in row else row


# ---------------------------------------------------------------------- the KV cache
@pytest.mark.parametrize("norm_first", [False, True], ids=["post-norm", "pre-norm"])
@pytest.mark.parametrize("num_layers", [1, 2])
@pytest.mark.parametrize("seed", [3, 5, 6])
def test_cached_greedy_is_token_identical(seed, num_layers, norm_first):
    model, src = random_model(seed, norm_first, num_layers), padded_sources()
    end_id = varied_end_token(model, src)
    slow = greedy_decode(model, src, MAX_LEN, START, end_id)
    fast = greedy_decode(model, src, MAX_LEN, START, end_id, use_cache=True)
    steps = end_steps(slow, end_id)
    assert len({s for s in steps if s is not None}) >= 3 and None in steps  # rows end at different steps, or not
    assert torch.equal(fast, slow)


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-norm", "pre-norm"])
def test_cached_step_logits_equal_the_full_decode(norm_first):
    """Step by step, teacher-forced with tokens that include padding ids in the middle of a row: the
    cached step's logits are the last position's logits of model.decode over the whole prefix."""
    model, src = random_model(1, norm_first), padded_sources(batch=5)
    src_mask = model.make_src_mask(src)
    feed = torch.randint(0, VOCAB, (5, 10), generator=torch.Generator().manual_seed(2))
    feed[:, 0] = START
    feed[1, 3] = feed[2, 5:7] = feed[4, 1] = model.pad_id  # hidden as keys from the later positions
    with torch.no_grad():
        memory = model.encode(src, src_mask)
        cached, recompute = KVCacheDecoder(model, memory, src_mask), RecomputeDecoder(model, memory, src_mask)
        for t in range(feed.shape[1]):
            prefix = feed[:, :t + 1]
            full = model.decode(prefix, memory, src_mask, model.make_tgt_mask(prefix))[:, -1]  # (batch, V)
            torch.testing.assert_close(cached.step(feed[:, t]), full, rtol=1e-5, atol=1e-5)
            assert torch.equal(recompute.step(feed[:, t]), full)


def test_cache_computes_one_position_per_step_and_memory_once():
    model, src = random_model(5), padded_sources(batch=4)
    rows_seen = {"self_q": [], "cross_k": []}
    layer = model.decoder.layers[1]
    hooks = [layer.self_attn.w_q.register_forward_hook(lambda m, i, o: rows_seen["self_q"].append(i[0].shape[1])),
             layer.cross_attn.w_k.register_forward_hook(lambda m, i, o: rows_seen["cross_k"].append(i[0].shape[1]))]
    greedy_decode(model, src, 6, START, -1, use_cache=True)
    assert rows_seen == {"self_q": [1] * 6, "cross_k": [src.shape[1]]}  # one new position; memory's K once
    rows_seen["self_q"].clear()
    rows_seen["cross_k"].clear()
    greedy_decode(model, src, 6, START, -1)
    assert rows_seen == {"self_q": [1, 2, 3, 4, 5, 6], "cross_k": [src.shape[1]] * 6}  # the whole prefix, again
    for hook in hooks:
        hook.remove()


def test_cache_uses_the_final_norm_of_a_pre_norm_decoder():
    model, src = random_model(3, norm_first=True), padded_sources(batch=4)
    with torch.no_grad():
        model.decoder.norm.weight.mul_(3.0)  # a final norm left out would now change the logits a lot
        src_mask = model.make_src_mask(src)
        memory = model.encode(src, src_mask)
        start = torch.full((4,), START)
        torch.testing.assert_close(KVCacheDecoder(model, memory, src_mask).step(start),
                                   RecomputeDecoder(model, memory, src_mask).step(start), rtol=1e-5, atol=1e-5)


def test_cache_needs_eval_mode():
    model = random_model(3).train()
    with pytest.raises(ValueError, match="eval"):
        greedy_decode(model, padded_sources(batch=2), 4, START, 2, use_cache=True)


# ---------------------------------------------------------------------- beam search
def reference_beam_search(model, src, beam_size, max_len, start_id, end_id, alpha):
    """The same search written plainly for ONE source (1, L_src), re-running the model on every
    hypothesis: -> (best hypothesis as a tuple of ids, its penalised score)."""
    live, open_places, best = [((), 0.0)], beam_size, ((), -math.inf)
    with torch.no_grad():
        for t in range(1, max_len + 1):
            extensions = []
            for prefix, log_p in live:
                tgt = torch.tensor([[start_id, *prefix]])
                next_log_p = torch.log_softmax(model(src, tgt)[0, -1], dim=-1)
                extensions += [(prefix + (token,), log_p + float(lp)) for token, lp in enumerate(next_log_p)]
            extensions.sort(key=lambda e: -e[1])
            live = []
            for hypothesis, log_p in extensions[:open_places]:
                if hypothesis[-1] == end_id or t == max_len:
                    score = log_p / ((5 + t) / 6) ** alpha
                    best = (hypothesis, score) if score > best[1] else best
                else:
                    live.append((hypothesis, log_p))
            open_places -= sum(h[-1] == end_id for h, _ in extensions[:open_places])
            if not live:
                break
    return best


def teacher_forced_log_p(model, src, hypotheses, start_id):
    """log P(Y | X) of each row's hypothesis (a list of ids; src row i for hypothesis i), in one forward pass.

    Shorter hypotheses are filled up with start_id: the causal mask keeps it from their positions."""
    length = max(len(y) for y in hypotheses)
    tgt = torch.full((len(hypotheses), 1 + length), start_id)
    for i, y in enumerate(hypotheses):
        tgt[i, 1:1 + len(y)] = torch.tensor(y)
    with torch.no_grad():
        log_p = torch.log_softmax(model(src, tgt[:, :-1]), dim=-1).gather(2, tgt[:, 1:, None])[..., 0]  # (n, length)
    return [float(log_p[i, :len(y)].sum()) for i, y in enumerate(hypotheses)]


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-norm", "pre-norm"])
@pytest.mark.parametrize("seed", [3, 5, 6])
@pytest.mark.parametrize("use_cache", [False, True], ids=["recompute", "cache"])
def test_beam_one_is_greedy(seed, norm_first, use_cache):
    model, src = random_model(seed, norm_first), padded_sources()
    end_id = varied_end_token(model, src)
    greedy = greedy_decode(model, src, MAX_LEN, START, end_id, use_cache=use_cache)
    beam = beam_search(model, src, 1, MAX_LEN, START, end_id, use_cache=use_cache)
    assert beam.shape == greedy.shape
    assert [cut(row, end_id) for row in beam] == [cut(row, end_id) for row in greedy]


@pytest.mark.parametrize("beam_size,alpha,seed", [(2, 0.6, 3), (3, 0.0, 5), (4, 0.6, 6), (4, 1.5, 3)])
def test_batched_beam_search_equals_the_plain_one(beam_size, alpha, seed):
    model, src = random_model(seed, dtype=torch.float64), padded_sources(batch=6)
    end_id = varied_end_token(model, src)
    ids, scores = beam_search(model, src, beam_size, 8, START, end_id, alpha, return_scores=True)
    for i in range(src.shape[0]):
        hypothesis, score = reference_beam_search(model, src[i:i + 1], beam_size, 8, START, end_id, alpha)
        assert cut(ids[i], end_id) == list(hypothesis)
        assert float(scores[i]) == pytest.approx(score, abs=1e-9)


def test_beam_search_without_pruning_finds_the_best_sequence():
    """With a beam wider than every set of prefixes (5 tokens, 3 steps), beam search is exhaustive: it
    returns the sequence of highest log P / lp among all of them. A larger alpha never picks a shorter one."""
    model, src, end_id = random_model(3, tgt_vocab=5, dtype=torch.float64), padded_sources(batch=6), 2
    everything = [y for n in (1, 2, 3) for y in itertools.product(range(5), repeat=n)
                  if all(token != end_id for token in y[:-1]) and (y[-1] == end_id or n == 3)]
    log_p = [teacher_forced_log_p(model, src[i:i + 1].expand(len(everything), -1), everything, START)
             for i in range(src.shape[0])]
    chosen_lengths = []
    for alpha in (0.0, 0.6, 3.0):
        ids = beam_search(model, src, 125, 3, START, end_id, alpha)
        for i in range(src.shape[0]):
            best = max(zip(everything, log_p[i]), key=lambda e: e[1] / length_penalty(len(e[0]), alpha))[0]
            assert cut(ids[i], end_id) == list(best)
        chosen_lengths.append([len(cut(row, end_id)) for row in ids])
    assert len({tuple(lengths) for lengths in chosen_lengths}) == 3  # each alpha picks other lengths
    assert all(list(row) == sorted(row) for row in zip(*chosen_lengths))  # never shorter with a larger alpha


@pytest.mark.parametrize("use_cache", [False, True], ids=["recompute", "cache"])
def test_beam_scores_are_penalised_log_probabilities(use_cache):
    model, src = random_model(6), padded_sources(batch=8)
    end_id = varied_end_token(model, src)
    ids, scores = beam_search(model, src, 4, MAX_LEN, START, end_id, alpha=0.6, use_cache=use_cache,
                              return_scores=True)
    hypotheses = [cut(row, end_id) for row in ids]
    assert min(len(y) for y in hypotheses) < MAX_LEN  # some hypotheses end with end_id before MAX_LEN
    log_p = teacher_forced_log_p(model, src, hypotheses, START)
    expected = [lp / ((5 + len(y)) / 6) ** 0.6 for lp, y in zip(log_p, hypotheses)]
    torch.testing.assert_close(scores, torch.tensor(expected), rtol=1e-5, atol=1e-5)


def test_beam_rows_are_padded_after_end():
    model, src = random_model(5), padded_sources()
    end_id = varied_end_token(model, src)
    ids = beam_search(model, src, 4, MAX_LEN, START, end_id)
    lengths = [len(cut(row, end_id)) for row in ids]
    assert ids.shape == (src.shape[0], max(lengths)) and len(set(lengths)) > 1
    for row, n in zip(ids.tolist(), lengths):
        assert row[n:] == [model.pad_id] * (len(row) - n)


@pytest.mark.parametrize("seed", [3, 5])
def test_beam_search_with_the_cache_is_token_identical(seed):
    model, src = random_model(seed, norm_first=seed == 5), padded_sources()
    end_id = varied_end_token(model, src)
    slow, slow_scores = beam_search(model, src, 3, MAX_LEN, START, end_id, return_scores=True)
    fast, fast_scores = beam_search(model, src, 3, MAX_LEN, START, end_id, use_cache=True, return_scores=True)
    assert torch.equal(fast, slow)
    torch.testing.assert_close(fast_scores, slow_scores, rtol=1e-5, atol=1e-5)


def test_length_penalty_is_gnmt():
    assert length_penalty(1, 0.6) == 1.0 and length_penalty(7, 0.0) == 1.0
    assert length_penalty(11, 0.6) == pytest.approx((16 / 6) ** 0.6)


# ---------------------------------------------------------------------- arguments
BEAM_ARGS = dict(beam_size=2, max_len=5, start_id=START, end_id=2, alpha=0.6)


@pytest.mark.parametrize("change,name", [
    (dict(beam_size=0), "beam_size"), (dict(beam_size=1.5), "beam_size"), (dict(beam_size=True), "beam_size"),
    (dict(max_len=0), "max_len"), (dict(max_len=25), "max_len"), (dict(max_len=2.0), "max_len"),
    (dict(alpha=-0.1), "alpha"), (dict(alpha=float("nan")), "alpha"), (dict(alpha="0.6"), "alpha"),
    (dict(start_id=VOCAB), "start_id"), (dict(start_id=-1), "start_id"), (dict(start_id=1.0), "start_id"),
    (dict(end_id=VOCAB), "end_id"), (dict(end_id=-1), "end_id"), (dict(end_id=None), "end_id"),
])
def test_beam_search_rejects_bad_arguments(change, name):
    with pytest.raises(ValueError, match=name):
        beam_search(random_model(3), padded_sources(batch=2), **{**BEAM_ARGS, **change})


@pytest.mark.parametrize("args,kwargs,name", [
    ((0, START, 2), {}, "max_len"), ((25, START, 2), {}, "max_len"), ((5, VOCAB, 2), {}, "start_id"),
    ((5, START, "2"), {}, "end_id"), ((5, START, 2.0), {}, "end_id"), ((5, START, 2), {"use_cache": 1}, "use_cache"),
])
def test_greedy_decode_rejects_bad_arguments(args, kwargs, name):
    with pytest.raises(ValueError, match=name):
        greedy_decode(random_model(3), padded_sources(batch=2), *args, **kwargs)


def test_decoding_rejects_bad_sources_and_models():
    model = random_model(3)
    with pytest.raises(ValueError, match="src"):
        greedy_decode(model, torch.zeros(2, 3, 4, dtype=torch.long), 5, START, 2)
    with pytest.raises(ValueError, match="src"):
        beam_search(model, torch.full((2, 3), 12), 2, 5, START, 2)  # id 12 is outside the source vocabulary
    with pytest.raises(ValueError, match="model"):
        beam_search("model", padded_sources(batch=2), 2, 5, START, 2)


# ---------------------------------------------------------------------- whole strings
def test_predict_with_beam_search():
    model = build_model(TrainConfig(d_model=16, num_heads=2, num_layers=1, d_ff=32)).eval()
    texts = ["21 November 2026", "1/2/2003", "sábado 21 de noviembre de 2026"]
    greedy = predict(model, texts)
    assert predict(model, texts, method="beam", beam_size=1) == greedy
    assert predict(model, texts, use_cache=True) == greedy
    beam = predict(model, texts, method="beam", use_cache=True)
    assert len(beam) == 3 and all(isinstance(p, str) and len(p) <= 11 for p in beam)
    pairs = [(t, "2026-11-21") for t in texts]
    assert exact_match(model, pairs, method="beam", beam_size=1) == exact_match(model, pairs)
    with pytest.raises(ValueError, match="method"):
        predict(model, texts, method="sample")
