"""Wrong answers to the exercises of notebook 07, written fresh the way a class writes them (before the checks
were read), each with the mistake code a fair check should name, or None where only "differs ..." is honest.
No wrong answer may pass, none may get a wrong name, and each one that expects a code must get it."""

import pytest
import torch
from torch import nn

from helpers import (LayerNorm, MultiHeadAttention, PositionwiseFeedForward, check_gpt_block, check_sample_next,
                     check_temperature_probs, check_top_k_filter, check_top_p_filter, sampling)

from conftest import assert_fresh, assert_named_share

pytestmark = pytest.mark.guarded  # the off-limits guard on, as in a notebook

# ---------------------------------------------------------------------------------------------- GPTBlock


def block_class(forward):
    """The notebook's GPTBlock (its given __init__), with a student's forward."""
    class GPTBlock(nn.Module):
        def __init__(self, d_model, num_heads, d_ff, dropout=0.1):
            super().__init__()
            self.self_attn = MultiHeadAttention(d_model, num_heads, dropout)
            self.ff = PositionwiseFeedForward(d_model, d_ff, dropout)
            self.norm1 = LayerNorm(d_model)
            self.norm2 = LayerNorm(d_model)
            self.dropout1 = nn.Dropout(dropout)
            self.dropout2 = nn.Dropout(dropout)

    GPTBlock.forward = forward
    return GPTBlock


def gb_post_norm(self, x, mask=None):
    x = self.norm1(x + self.dropout1(self.self_attn(x, x, x, mask)))
    return self.norm2(x + self.dropout2(self.ff(x)))


def gb_no_mask(self, x, mask=None):
    h = self.norm1(x)
    x = x + self.dropout1(self.self_attn(h, h, h))
    return x + self.dropout2(self.ff(self.norm2(x)))


def gb_mask_inverted(self, x, mask=None):
    h = self.norm1(x)
    x = x + self.dropout1(self.self_attn(h, h, h, ~mask))  # "PyTorch's masks mark the blocked positions"
    return x + self.dropout2(self.ff(self.norm2(x)))


def gb_no_attention_residual(self, x, mask=None):
    h = self.norm1(x)
    x = self.dropout1(self.self_attn(h, h, h, mask))
    return x + self.dropout2(self.ff(self.norm2(x)))


def gb_residual_on_normalised(self, x, mask=None):
    x = self.norm1(x)
    x = x + self.dropout1(self.self_attn(x, x, x, mask))
    x = self.norm2(x)
    return x + self.dropout2(self.ff(x))


def gb_norms_swapped(self, x, mask=None):
    h = self.norm2(x)
    x = x + self.dropout1(self.self_attn(h, h, h, mask))
    return x + self.dropout2(self.ff(self.norm1(x)))


def gb_one_norm_twice(self, x, mask=None):
    h = self.norm1(x)
    x = x + self.dropout1(self.self_attn(h, h, h, mask))
    return x + self.dropout2(self.ff(self.norm1(x)))  # "the LayerNorm is the same operation"


def gb_final_norm(self, x, mask=None):
    h = self.norm1(x)
    x = x + self.dropout1(self.self_attn(h, h, h, mask))
    x = x + self.dropout2(self.ff(self.norm2(x)))
    return self.norm2(x)  # "the encoder layer ends with a LayerNorm"


def gb_dropout_on_sum(self, x, mask=None):
    h = self.norm1(x)
    x = self.dropout1(x + self.self_attn(h, h, h, mask))
    return self.dropout2(x + self.ff(self.norm2(x)))


# ------------------------------------------------------------------------------------- temperature_probs


def tp_softmax_first(logits, temperature):
    return torch.softmax(logits, dim=-1) / temperature


def tp_multiplied(logits, temperature):
    return torch.softmax(logits * temperature, dim=-1)


def tp_wrong_axis(logits, temperature):
    return torch.softmax(logits / temperature, dim=0)


def tp_dim_one(logits, temperature):
    return torch.softmax(logits / temperature, dim=1)  # "dim 1 is the columns": right for a matrix only


def tp_log_probs(logits, temperature):
    return torch.log_softmax(logits / temperature, dim=-1)


def tp_logits(logits, temperature):
    return logits / temperature


def tp_in_place(logits, temperature):
    logits /= temperature
    return torch.softmax(logits, dim=-1)


# ------------------------------------------------------------------------------------------ top_k_filter


def tk_k_plus_one(logits, k):
    kth = torch.sort(logits, dim=-1, descending=True).values[..., k:k + 1]  # index k is the (k+1)-th
    return logits.masked_fill(logits < kth, float("-inf"))


def tk_removes_kth(logits, k):
    kth = torch.topk(logits, k, dim=-1).values[..., -1:]
    return logits.masked_fill(logits <= kth, float("-inf"))


def tk_by_place(logits, k):
    keep = torch.zeros_like(logits, dtype=torch.bool).scatter(-1, torch.topk(logits, k, dim=-1).indices, True)
    return logits.masked_fill(~keep, float("-inf"))


def tk_keeps_smallest(logits, k):
    kth = torch.topk(logits, k, dim=-1, largest=False).values[..., -1:]
    return logits.masked_fill(logits > kth, float("-inf"))


def tk_zero(logits, k):
    kth = torch.topk(logits, k, dim=-1).values[..., -1:]
    return logits.masked_fill(logits < kth, 0.0)


def tk_in_place(logits, k):
    kth = torch.topk(logits, k, dim=-1).values[..., -1:]
    logits[logits < kth] = float("-inf")
    return logits


def tk_matrix_only(logits, k):
    kth = torch.topk(logits, k, dim=1).values[:, -1:]  # right for a matrix only, not for (..., V)
    return logits.masked_fill(logits < kth, float("-inf"))


def tk_large_negative(logits, k):
    kth = torch.topk(logits, k, dim=-1).values[..., -1:]
    return logits.masked_fill(logits < kth, -1e9)


# ------------------------------------------------------------------------------------------ top_p_filter


def pp_crossing_dropped(probs, p):
    sorted_probs, order = torch.sort(probs, dim=-1, descending=True)
    keep = torch.zeros_like(probs, dtype=torch.bool).scatter(-1, order, torch.cumsum(sorted_probs, -1) < p)
    kept = probs * keep
    return kept / kept.sum(dim=-1, keepdim=True)


def pp_not_renormalised(probs, p):
    sorted_probs, order = torch.sort(probs, dim=-1, descending=True)
    before = torch.cumsum(sorted_probs, dim=-1) - sorted_probs
    keep = torch.zeros_like(probs, dtype=torch.bool).scatter(-1, order, before < p)
    return probs * keep


def pp_cumsum_unsorted(probs, p):
    before = torch.cumsum(probs, dim=-1) - probs
    kept = probs * (before < p)
    return kept / kept.sum(dim=-1, keepdim=True)


def pp_ascending(probs, p):
    sorted_probs, order = torch.sort(probs, dim=-1)
    before = torch.cumsum(sorted_probs, dim=-1) - sorted_probs
    keep = torch.zeros_like(probs, dtype=torch.bool).scatter(-1, order, before < p)
    kept = probs * keep
    return kept / kept.sum(dim=-1, keepdim=True)


def pp_sorted_order(probs, p):
    sorted_probs, _ = torch.sort(probs, dim=-1, descending=True)
    before = torch.cumsum(sorted_probs, dim=-1) - sorted_probs
    kept = sorted_probs * (before < p)
    return kept / kept.sum(dim=-1, keepdim=True)


def pp_gather(probs, p):
    sorted_probs, order = torch.sort(probs, dim=-1, descending=True)
    before = torch.cumsum(sorted_probs, dim=-1) - sorted_probs
    keep = (before < p).gather(-1, order)  # gather in place of scatter: the wrong permutation
    kept = probs * keep
    return kept / kept.sum(dim=-1, keepdim=True)


def pp_divided_by_p(probs, p):
    sorted_probs, order = torch.sort(probs, dim=-1, descending=True)
    before = torch.cumsum(sorted_probs, dim=-1) - sorted_probs
    keep = torch.zeros_like(probs, dtype=torch.bool).scatter(-1, order, before < p)
    return probs * keep / p  # "the kept tokens add up to p"


# ------------------------------------------------------------------------------------------- sample_next


def draw(probs, generator):
    return torch.multinomial(probs.reshape(-1, probs.shape[-1]), 1, generator=generator).reshape(probs.shape[:-1])


def filtered(logits, temperature, top_k, top_p):
    if top_k is not None:
        logits = sampling.top_k_filter(logits, top_k)
    probs = sampling.temperature_probs(logits, temperature)
    return probs if top_p is None else sampling.top_p_filter(probs, top_p)


def sn_no_generator(logits, generator, temperature=1.0, top_k=None, top_p=None):
    if temperature == 0:
        return logits.argmax(dim=-1)
    probs = filtered(logits, temperature, top_k, top_p)
    return torch.multinomial(probs.reshape(-1, probs.shape[-1]), 1).reshape(probs.shape[:-1])


def sn_fresh_generator(logits, generator, temperature=1.0, top_k=None, top_p=None):
    if temperature == 0:
        return logits.argmax(dim=-1)
    return draw(filtered(logits, temperature, top_k, top_p), torch.Generator().manual_seed(0))


def sn_always_argmax(logits, generator, temperature=1.0, top_k=None, top_p=None):
    return filtered(logits, temperature or 1.0, top_k, top_p).argmax(dim=-1)


def sn_top_p_before_temperature(logits, generator, temperature=1.0, top_k=None, top_p=None):
    if temperature == 0:
        return logits.argmax(dim=-1)
    if top_k is not None:
        logits = sampling.top_k_filter(logits, top_k)
    if top_p is not None:  # the nucleus of the distribution at T = 1, then the temperature
        keep = sampling.top_p_filter(torch.softmax(logits, dim=-1), top_p) > 0
        logits = logits.masked_fill(~keep, float("-inf"))
    return draw(sampling.temperature_probs(logits, temperature), generator)


def sn_no_greedy(logits, generator, temperature=1.0, top_k=None, top_p=None):
    return draw(filtered(logits, temperature, top_k, top_p), generator)


def sn_no_top_k(logits, generator, temperature=1.0, top_k=None, top_p=None):
    if temperature == 0:
        return logits.argmax(dim=-1)
    return draw(filtered(logits, temperature, None, top_p), generator)


# (exercise, what the student did, the wrong answer, the code a fair check names or None)
FRESH = [
    ("gpt_block", "post-norm", block_class(gb_post_norm), "post_norm_instead_of_pre"),
    ("gpt_block", "the mask left out", block_class(gb_no_mask), "no_causal_mask"),
    ("gpt_block", "the mask inverted (~mask)", block_class(gb_mask_inverted), "mask_inverted"),
    ("gpt_block", "no residual around the attention", block_class(gb_no_attention_residual), "no_residual_attention"),
    ("gpt_block", "the residual added to the normalised x", block_class(gb_residual_on_normalised),
     "residual_from_normed"),
    ("gpt_block", "norm1 and norm2 swapped", block_class(gb_norms_swapped), "norms_swapped"),
    ("gpt_block", "norm1 for both sub-layers", block_class(gb_one_norm_twice), "same_norm_twice"),
    ("gpt_block", "a final norm2 on the output", block_class(gb_final_norm), "extra_final_norm"),
    ("gpt_block", "dropout on the residual sum", block_class(gb_dropout_on_sum), "dropout_on_residual_sum"),
    ("temperature_probs", "softmax, then divided by T", tp_softmax_first, "softmax_before_temperature"),
    ("temperature_probs", "logits multiplied by T", tp_multiplied, "multiplied_by_temperature"),
    ("temperature_probs", "softmax over dim=0", tp_wrong_axis, "wrong_axis"),
    ("temperature_probs", "softmax over dim=1 (a matrix only)", tp_dim_one, "wrong_axis"),
    ("temperature_probs", "log_softmax", tp_log_probs, "log_probabilities"),
    ("temperature_probs", "the divided logits returned", tp_logits, "returns_logits"),
    ("temperature_probs", "logits /= temperature (in place)", tp_in_place, "changed_input"),
    ("top_k_filter", "the (k+1)-th largest as threshold (index k)", tk_k_plus_one, "keeps_k_plus_one"),
    ("top_k_filter", "<= the k-th: the k-th removed", tk_removes_kth, "drops_kth"),
    ("top_k_filter", "exactly the k topk indices kept", tk_by_place, "drops_ties"),
    ("top_k_filter", "topk(largest=False), the k smallest kept", tk_keeps_smallest, "keeps_smallest"),
    ("top_k_filter", "0 in place of -inf", tk_zero, "removed_not_minus_inf"),
    ("top_k_filter", "logits[logits < kth] = -inf in place", tk_in_place, "changed_input"),
    ("top_k_filter", "-1e9 in place of -inf", tk_large_negative, "removed_not_minus_inf"),
    ("top_k_filter", "dim=1 and [:, -1:] (a matrix only)", tk_matrix_only, None),
    ("top_p_filter", "cumsum < p: the crossing token dropped", pp_crossing_dropped, "excludes_crossing_token"),
    ("top_p_filter", "no renormalisation", pp_not_renormalised, "not_renormalised"),
    ("top_p_filter", "cumsum in the vocabulary's order", pp_cumsum_unsorted, "unsorted_cumsum"),
    ("top_p_filter", "ascending sort", pp_ascending, "ascending_sort"),
    ("top_p_filter", "the result left in sorted order", pp_sorted_order, "order_not_restored"),
    ("top_p_filter", "gather in place of scatter", pp_gather, "order_not_restored"),
    ("top_p_filter", "the kept probabilities divided by p", pp_divided_by_p, "not_renormalised"),
    ("sample_next", "no generator passed", sn_no_generator, "no_generator"),
    ("sample_next", "a new generator seeded 0", sn_fresh_generator, "no_generator"),
    ("sample_next", "always the argmax", sn_always_argmax, "greedy_always"),
    ("sample_next", "top-p on the distribution at T = 1", sn_top_p_before_temperature, "top_p_before_temperature"),
    ("sample_next", "no greedy case at temperature 0", sn_no_greedy, "no_greedy_at_zero"),
    ("sample_next", "top_k ignored", sn_no_top_k, "filters_ignored"),
]

CHECKS = {"gpt_block": check_gpt_block, "temperature_probs": check_temperature_probs,
          "top_k_filter": check_top_k_filter, "top_p_filter": check_top_p_filter, "sample_next": check_sample_next}


@pytest.mark.parametrize("exercise, what, wrong, code", FRESH, ids=[f"{e}: {w}" for e, w, _, _ in FRESH])
def test_fresh_wrong_answer(exercise, what, wrong, code):
    assert_fresh(CHECKS[exercise], wrong, what, code)


def test_named_share():
    assert_named_share([code for _, _, _, code in FRESH])
