"""Choosing the next token of a language model, and generating text with a KV cache (notebook 07).

    temperature_probs(logits, temperature)   softmax(logits / temperature) over the last axis
    top_k_filter(logits, k)                  the logits below the k-th largest set to -inf (ties at the k-th kept)
    top_p_filter(probs, p)                   the nucleus: the most likely tokens until their total reaches p,
                                             renormalised; the others get probability 0
    sample_next(logits, generator, ...)      top-k, then temperature, then top-p, then one draw per row from the
                                             seeded generator; temperature=0 is greedy decoding (the argmax)
    GPTCache(model)                          the keys and values of every token fed so far, per block
    generate(model, ids, max_new_tokens, ...)  prompt in, prompt + new tokens out (with the cache by default)

Every function works on the last axis, for any number of leading axes (one row per sequence).
The order of sample_next is Hugging Face's (temperature, then top-k, then top-p; top-k does not depend on
the temperature, since dividing by a positive number keeps the order of the logits).
"""

from __future__ import annotations

import math
import numbers

import torch
from torch import nn

from .decoding_steps import to_heads
from .multi_head import masked_attention_weights
from .validation import positive_int


def temperature_probs(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """softmax(logits / temperature) over the last axis: (..., V) -> (..., V), each row summing to 1.

    temperature > 0; below 1 it sharpens the distribution, above 1 it flattens it, and towards 0 it
    puts all the probability on the largest logit (greedy decoding)."""
    return torch.softmax(logits / temperature, dim=-1)


def top_k_filter(logits: torch.Tensor, k: int) -> torch.Tensor:
    """A copy of logits (..., V) where every logit smaller than the row's k-th largest is -inf.

    A logit equal to the k-th largest is kept, so a row keeps more than k tokens only when several tie
    there (Hugging Face's TopKLogitsWarper and nanoGPT do the same)."""
    kth = torch.topk(logits, k, dim=-1).values[..., -1:]  # (..., 1): the k-th largest of each row
    return logits.masked_fill(logits < kth, float("-inf"))


def top_p_filter(probs: torch.Tensor, p: float) -> torch.Tensor:
    """The nucleus of each row of probs (..., V): keep the most likely tokens until their total reaches p.

    Token i is kept when the tokens MORE likely than it add up to less than p: the token whose
    probability takes the total across p is kept, the most likely token always is. The kept
    probabilities are divided by their sum; the others become 0. p in (0, 1]; p = 1 keeps every token."""
    sorted_probs, order = probs.sort(dim=-1, descending=True)  # (..., V)
    before = sorted_probs.cumsum(dim=-1) - sorted_probs  # the total of the tokens ranked before each one
    keep_sorted = before < p
    keep = torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)  # back to the vocabulary's order
    kept = probs * keep
    return kept / kept.sum(dim=-1, keepdim=True)


def sample_next(logits: torch.Tensor, generator: torch.Generator | None = None, temperature: float = 1.0,
                top_k: int | None = None, top_p: float | None = None) -> torch.Tensor:
    """One token id per row of logits (..., V) -> (...,): greedy when temperature == 0, else drawn with
    torch.multinomial from the generator after top-k, temperature and top-p (None: that filter is off)."""
    if isinstance(temperature, bool) or not isinstance(temperature, numbers.Real) or not temperature >= 0:
        raise ValueError(f"temperature must be a number >= 0 (0: greedy decoding), got {temperature!r}")
    if temperature == 0:
        return logits.argmax(dim=-1)
    if top_k is not None:
        logits = top_k_filter(logits, positive_int(top_k, "top_k"))
    probs = temperature_probs(logits, temperature)
    if top_p is not None:
        if isinstance(top_p, bool) or not isinstance(top_p, numbers.Real) or not 0 < top_p <= 1:
            raise ValueError(f"top_p must be a probability in (0, 1], got {top_p!r}")
        probs = top_p_filter(probs, top_p)
    flat = probs.reshape(-1, probs.shape[-1])
    return torch.multinomial(flat, 1, generator=generator).reshape(probs.shape[:-1])


class GPTCache:
    """The keys and values of every token fed so far, for each block of a GPT: (batch, h, t, d_k) each.

    step(ids): ids (batch, n) the next n tokens (the whole prompt first, then one at a time) -> the logits
    of the token after the last one, (batch, V). Each call computes only the new positions: the earlier
    keys and values never change, because the causal mask keeps earlier positions from seeing later ones.
    The model must be in eval mode (the cached step computes the model without dropout).
    Memory: 2 x num_layers x d_model numbers per token and per row (bytes_per_token).
    """

    def __init__(self, model: nn.Module):
        if model.training:
            raise ValueError("model must be in eval mode for the KV cache: call model.eval() first")
        self.model = model
        self.kv: list[tuple[torch.Tensor, torch.Tensor] | None] = [None] * len(model.blocks)
        self.length = 0  # tokens fed so far, t

    def bytes_per_token(self) -> int:
        """What one more token adds to the cache, per row: keys and values of d_model numbers, in every block."""
        weight = self.model.token_embed.weight
        return 2 * len(self.model.blocks) * self.model.d_model * weight.element_size()

    def nbytes(self) -> int:
        """The bytes the cache holds now."""
        return sum(k.nbytes + v.nbytes for k, v in filter(None, self.kv))

    @torch.no_grad()
    def step(self, ids: torch.Tensor) -> torch.Tensor:
        model, start, n = self.model, self.length, ids.shape[1]
        x = model.embed(model.check_ids(ids, start), start)  # (batch, n, d_model)
        # query i (position start + i) may attend to the keys at positions 0 .. start + i
        mask = torch.ones(n, start + n, dtype=torch.bool, device=ids.device).tril(start)[None, None]
        for i, block in enumerate(model.blocks):
            if getattr(block, "norm_first", model.norm_first):  # a student's GPTBlock is pre-norm and may not say so
                x = x + self.attention(i, block.self_attn, block.norm1(x), mask)
                x = x + block.ff(block.norm2(x))
            else:
                x = block.norm1(x + self.attention(i, block.self_attn, x, mask))
                x = block.norm2(x + block.ff(x))
        self.length += n
        return model.lm_head(model.norm(x[:, -1]))  # (batch, V)

    def attention(self, i: int, attn: nn.Module, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        k, v = to_heads(attn, attn.w_k(x)), to_heads(attn, attn.w_v(x))  # (batch, h, n, d_k)
        if self.kv[i] is not None:
            k, v = torch.cat([self.kv[i][0], k], dim=2), torch.cat([self.kv[i][1], v], dim=2)  # (batch, h, t, d_k)
        self.kv[i] = (k, v)
        q = to_heads(attn, attn.w_q(x))  # (batch, h, n, d_k)
        weights = masked_attention_weights(q @ k.transpose(-2, -1) / math.sqrt(attn.d_k), mask)  # (batch, h, n, t)
        heads = (weights @ v).transpose(1, 2)  # (batch, n, h, d_k)
        return attn.w_o(heads.reshape(x.shape[0], x.shape[1], attn.d_model))


@torch.no_grad()
def generate(model: nn.Module, ids: torch.Tensor, max_new_tokens: int, generator: torch.Generator | None = None,
             temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None, use_cache: bool = True,
             sample=sample_next) -> torch.Tensor:
    """ids (batch, L) a prompt per row -> (batch, L + max_new_tokens): the prompt and the tokens chosen after it.

    Each new token is sample(logits of the last position, generator, temperature, top_k, top_p)
    (temperature=0: greedy). With use_cache the prompt goes through the model once and each new token
    alone (GPTCache); without it the whole sequence is run again at every step. Once the text is longer
    than the model's max_len, the model reads its last max_len tokens only (run again at every step: the
    cached keys hold the positions they were computed at)."""
    max_new_tokens = positive_int(max_new_tokens, "max_new_tokens")
    was_training = model.training
    model.eval()
    cache = GPTCache(model) if use_cache else None
    out, fresh = ids, ids
    try:
        for _ in range(max_new_tokens):
            if cache is not None and cache.length + fresh.shape[1] <= model.max_len:
                logits = cache.step(fresh)  # (batch, V)
            else:
                cache = None
                logits = model(out[:, -model.max_len:])[:, -1]  # (batch, V)
            fresh = sample(logits, generator, temperature, top_k, top_p).reshape(-1, 1).to(ids.dtype)
            out = torch.cat([out, fresh], dim=1)
    finally:
        model.train(was_training)
    return out


__all__ = ["GPTCache", "generate", "sample_next", "temperature_probs", "top_k_filter", "top_p_filter"]
