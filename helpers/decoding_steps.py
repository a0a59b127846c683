"""One decoding step, two ways: re-run the decoder over the whole prefix, or compute only the new position
from a KV cache. greedy_decode and beam_search (decoding.py) step through either.

    RecomputeDecoder(model, memory, src_mask)   step(tokens) -> the logits of the next token; reorder(index)
    KVCacheDecoder(model, memory, src_mask)     the same, with the keys and values of earlier positions cached
    start_decoding(model, src, ...)             check the decoding arguments, encode src once, make the stepper

Everything here runs without gradients (torch.no_grad); KVCacheDecoder needs the model in eval mode,
since it computes the eval-mode model (no dropout).
"""

from __future__ import annotations

import math
import numbers

import torch
from torch import nn

from .multi_head import masked_attention_weights
from .transformer import Transformer
from .validation import positive_int


class RecomputeDecoder:
    """One decoding step by re-running the whole decoder over every token fed so far.

    RecomputeDecoder(model, memory, src_mask): memory (batch, L_src, d_model) = model.encode(src, src_mask),
    src_mask (batch, 1, 1, L_src) = model.make_src_mask(src).
    step(tokens): tokens (batch,) the next input token of each row -> logits (batch, V) of the token after it,
    read from the last position of model.decode(prefix, memory, src_mask, model.make_tgt_mask(prefix)).
    reorder(index): keep rows index (batch',) of the prefix (beam search follows its best hypotheses).
    See KVCacheDecoder for the cost of a step.
    """

    @torch.no_grad()
    def __init__(self, model: Transformer, memory: torch.Tensor, src_mask: torch.Tensor):
        self.model, self.memory, self.src_mask = model, memory, src_mask
        self.tokens = torch.empty(memory.shape[0], 0, dtype=torch.long, device=memory.device)  # (batch, t)

    @torch.no_grad()
    def step(self, tokens: torch.Tensor) -> torch.Tensor:
        self.tokens = torch.cat([self.tokens, tokens.reshape(-1, 1)], dim=1)  # (batch, t)
        logits = self.model.decode(self.tokens, self.memory, self.src_mask, self.model.make_tgt_mask(self.tokens))
        return logits[:, -1]  # (batch, V)

    def reorder(self, index: torch.Tensor) -> None:
        self.tokens = self.tokens[index]


class KVCacheDecoder:
    """One decoding step that computes only the new position, reading the earlier ones from a KV cache.

    KVCacheDecoder(model, memory, src_mask): same arguments and methods as RecomputeDecoder, same logits
    (up to rounding). The model must be in eval mode: the step computes the eval-mode model (dropout off).

    What is cached, for each of the N decoder layers:
      - self-attention: the keys and values of every token fed so far, (batch, h, t, d_k) each. A new
        token adds one row to each; the rows of the earlier tokens never change, because the causal
        mask keeps every earlier position from seeing the new one.
      - cross-attention: the keys and values of memory, (batch, h, L_src, d_k) each, computed once,
        here, since memory does not change while decoding.
    step(tokens) then runs each layer on ONE position: (batch, 1, d_model).

    Cost of step t (the decoder input holds t tokens), in multiply-adds, with d = d_model and V the
    target vocabulary, for each of the N layers:

                                re-running the prefix (RecomputeDecoder)    with the cache (KVCacheDecoder)
      self-attention            4 t d^2 (projections) + 2 t^2 d (scores,    4 d^2 + 2 t d
                                weights times V)
      cross-attention           2 t d^2 + 2 L_src d^2 (K, V of memory,      2 d^2 + 2 L_src d
                                again) + 2 t L_src d
      feed-forward              2 t d d_ff                                  2 d d_ff
    and once per step the output projection: t d V (every position, of which only the last is read)
    against d V. The memory's keys and values cost 2 L_src d^2 per layer once per sentence with the cache.

    So a new token costs O(t^2) without the cache (2 t^2 d, and t times every matrix product) and O(t)
    with it (only the 2 t d of reading the cached keys and values grows). Summed over n generated
    tokens (t = 1..n), each term linear in t costs n (n + 1) / 2 times its coefficient without the
    cache against n times with it, (n + 1) / 2 times more; the attention's 2 t^2 d against 2 t d costs
    (2 n + 1) / 3 times more, the memory's keys and values n times more. So the cache saves at least
    a factor (n + 1) / 2 of the multiply-adds: 6 for a date (n = 11), 32.5 for n = 64. The measured
    speed-up is smaller (benchmarks/bench_decoding.py): with few rows a cached step is bound by
    reading every weight matrix once and by the fixed cost of each operation, not by multiply-adds.
    What the cache costs is memory: 2 t d numbers per layer and per row for the self-attention,
    2 L_src d for the cross-attention.
    """

    @torch.no_grad()
    def __init__(self, model: Transformer, memory: torch.Tensor, src_mask: torch.Tensor):
        if model.training:
            raise ValueError("model must be in eval mode for use_cache=True (the cached step computes the model "
                             "without dropout): call model.eval() first")
        self.model, self.src_mask = model, src_mask
        self.pad_id = model.pad_id
        self.position = 0  # tokens fed so far, t
        self.not_pad = torch.empty(memory.shape[0], 1, 1, 0, dtype=torch.bool, device=memory.device)
        self.self_kv: list[tuple[torch.Tensor, torch.Tensor] | None] = [None] * len(model.decoder.layers)
        self.cross_kv = [(to_heads(layer.cross_attn, layer.cross_attn.w_k(memory)),  # (batch, h, L_src, d_k)
                          to_heads(layer.cross_attn, layer.cross_attn.w_v(memory)))
                         for layer in model.decoder.layers]

    @torch.no_grad()
    def step(self, tokens: torch.Tensor) -> torch.Tensor:
        model = self.model
        tokens = tokens.reshape(-1, 1)  # (batch, 1)
        if self.position >= model.positional.pe.shape[0]:
            raise ValueError(f"the decoder input would exceed the positional encoding's max_len="
                             f"{model.positional.pe.shape[0]}")
        # Key padding, as model.make_tgt_mask: a pad token fed earlier is hidden from later queries.
        self.not_pad = torch.cat([self.not_pad, (tokens != self.pad_id)[:, None, None, :]], dim=-1)  # (b, 1, 1, t)
        x = model.tgt_embed(tokens) * math.sqrt(model.d_model)  # (batch, 1, d_model)
        x = x + model.positional.pe[self.position].to(x.dtype)  # the encoding of this position only
        self.position += 1
        for i, layer in enumerate(model.decoder.layers):
            x = self._layer_step(i, layer, x)
        norm = getattr(model.decoder, "norm", None)  # the final LayerNorm of a pre-norm decoder
        if norm is not None:
            x = norm(x)
        return model.generator(x)[:, -1]  # (batch, V)

    def reorder(self, index: torch.Tensor) -> None:
        """Keep rows index of the cache (the cross-attention rows are left: beam search reorders within a source)."""
        self.not_pad = self.not_pad[index]
        self.self_kv = [None if kv is None else (kv[0][index], kv[1][index]) for kv in self.self_kv]

    def _layer_step(self, i: int, layer: nn.Module, x: torch.Tensor) -> torch.Tensor:
        """DecoderLayer.forward for one new position x (batch, 1, d_model), post-norm or pre-norm."""
        if layer.norm_first:
            x = x + self._self_attention(i, layer.self_attn, layer.norm1(x))
            x = x + self._cross_attention(i, layer.cross_attn, layer.norm2(x))
            return x + layer.ff(layer.norm3(x))
        x = layer.norm1(x + self._self_attention(i, layer.self_attn, x))
        x = layer.norm2(x + self._cross_attention(i, layer.cross_attn, x))
        return layer.norm3(x + layer.ff(x))

    def _self_attention(self, i: int, attn: nn.Module, x: torch.Tensor) -> torch.Tensor:
        k_new, v_new = to_heads(attn, attn.w_k(x)), to_heads(attn, attn.w_v(x))  # (batch, h, 1, d_k)
        if self.self_kv[i] is not None:
            k_new = torch.cat([self.self_kv[i][0], k_new], dim=2)  # (batch, h, t, d_k)
            v_new = torch.cat([self.self_kv[i][1], v_new], dim=2)
        self.self_kv[i] = (k_new, v_new)
        return attend(attn, x, k_new, v_new, self.not_pad)

    def _cross_attention(self, i: int, attn: nn.Module, x: torch.Tensor) -> torch.Tensor:
        k, v = self.cross_kv[i]
        return attend(attn, x, k, v, self.src_mask)


def to_heads(attn: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """(batch, L, d_model) -> (batch, h, L, d_k)."""
    return x.view(x.shape[0], x.shape[1], attn.num_heads, attn.d_k).transpose(1, 2)


def attend(attn: nn.Module, x: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None):
    """MultiHeadAttention.forward for the query x (batch, 1, d_model) and ready keys and values (batch, h, L_k, d_k)."""
    q = to_heads(attn, attn.w_q(x))  # (batch, h, 1, d_k)
    scores = q @ k.transpose(-2, -1) / math.sqrt(attn.d_k)  # (batch, h, 1, L_k)
    weights = masked_attention_weights(scores, mask)  # as MultiHeadAttention: a fully masked row gets zero weights
    heads = weights @ v  # (batch, h, 1, d_k)
    return attn.w_o(heads.transpose(1, 2).reshape(x.shape[0], 1, attn.num_heads * attn.d_k))  # (batch, 1, d_model)


def check_model(model) -> None:
    if not isinstance(model, nn.Module) or not hasattr(model, "decode"):
        raise ValueError(f"model must be a Transformer (encode, decode, make_src_mask), got {type(model).__name__}")


def decoder_max_len(model: nn.Module) -> int:
    """The longest decoder input: the model's max_len (the rows of its positional encoding)."""
    return getattr(model, "max_len", None) or model.positional.pe.shape[0]


def tgt_vocab_size(model: nn.Module) -> int:
    """The target vocabulary: the output size of the model's final projection (the student's models too)."""
    return getattr(model, "tgt_vocab_size", None) or model.generator.out_features


def start_decoding(model: Transformer, src: torch.Tensor, max_len, start_id, end_id, use_cache, repeats: int = 1):
    """Check the arguments, encode src once; -> (the step decoder over repeats copies of each row, max_len)."""
    check_model(model)
    max_len = positive_int(max_len, "max_len")
    longest = decoder_max_len(model)
    if max_len > longest:
        raise ValueError(f"max_len must be at most the model's max_len={longest} (the decoder input holds the "
                         f"start token and max_len - 1 generated tokens), got {max_len}")
    vocab = tgt_vocab_size(model)
    if isinstance(start_id, bool) or not isinstance(start_id, numbers.Integral) or not 0 <= start_id < vocab:
        raise ValueError(f"start_id must be a token id in [0, tgt_vocab_size={vocab}), got {start_id!r}")
    if isinstance(end_id, bool) or not isinstance(end_id, numbers.Integral):
        raise ValueError(f"end_id must be an integer token id, got {end_id!r}")
    if not isinstance(use_cache, bool):
        raise ValueError(f"use_cache must be True or False, got {use_cache!r}")
    src_mask = model.make_src_mask(src)  # checks src: (batch, L_src) token ids
    memory = model.encode(src, src_mask)  # (batch, L_src, d_model), computed once
    if repeats > 1:  # beam search: beam_size copies of each source, rows b * beam_size + k
        memory, src_mask = memory.repeat_interleave(repeats, dim=0), src_mask.repeat_interleave(repeats, dim=0)
    return (KVCacheDecoder if use_cache else RecomputeDecoder)(model, memory, src_mask), max_len


__all__ = ["KVCacheDecoder", "RecomputeDecoder", "attend", "check_model", "decoder_max_len", "start_decoding",
           "tgt_vocab_size", "to_heads"]
