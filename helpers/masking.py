"""Attention masks: which keys each query may look at.

Convention of the whole course (the same as ``torch.nn.functional.scaled_dot_product_attention``):
a mask is BOOLEAN, ``True`` = may attend, ``False`` = blocked, and it broadcasts to the score
matrix of shape (batch, h, L_q, L_k).

    causal_mask(L)            (L, L)             numpy; lower triangle incl. diagonal is True
    causal_mask_torch(L)      (L, L)             the same as a torch.bool tensor
    padding_mask(tokens, id)  (batch, 1, 1, L)   True for real tokens, False for padding
    decoder_mask(tokens, id)  (batch, 1, L, L)   padding_mask & causal_mask (decoder self-attention)

``nn.MultiheadAttention`` uses the OPPOSITE convention (``True`` = blocked, for both ``attn_mask``
and ``key_padding_mask``): ``to_nn_multihead_mask`` converts. ``to_additive_mask`` gives the float
form (0 where allowed, -inf where blocked) that is added to the scores before the softmax.

``padding_mask`` and ``decoder_mask`` return numpy arrays for numpy input and torch tensors (on the
same device) for torch input.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from .validation import positive_int, shape_str


def causal_mask(size: int) -> np.ndarray:
    """The look-ahead mask of a sequence of ``size`` tokens: bool array of shape (L, L).

    Entry [i, j] is True when query position i may attend to key position j, i.e. when j <= i:
    the lower triangle including the diagonal. Everything above the diagonal (the future) is False.
    """
    size = positive_int(size, "size")
    return np.tril(np.ones((size, size), dtype=bool))


def causal_mask_torch(size: int, device: Any = None) -> torch.Tensor:
    """``causal_mask(size)`` as a torch.bool tensor of shape (L, L) on ``device``."""
    size = positive_int(size, "size")
    return torch.ones(size, size, dtype=torch.bool, device=device).tril()


def _tokens_2d(tokens: Any, name: str = "tokens"):
    if isinstance(tokens, torch.Tensor):
        if tokens.dim() != 2:
            raise ValueError(f"{name} must have shape (batch, L) of token ids, got {shape_str(tokens.shape)}")
        return tokens
    array = np.asarray(tokens)
    if array.ndim != 2:
        raise ValueError(f"{name} must have shape (batch, L) of token ids, got {shape_str(array.shape)}")
    return array


def _pad_id(pad_id: Any) -> int:
    if isinstance(pad_id, (bool, np.bool_)) or not isinstance(pad_id, (int, np.integer)):
        raise ValueError(f"pad_id must be an integer token id, got {pad_id!r} ({type(pad_id).__name__})")
    return int(pad_id)


def padding_mask(tokens: Any, pad_id: int) -> Any:
    """True for real tokens, False for padding: shape (batch, 1, 1, L) from ``tokens`` (batch, L).

    The two singleton axes broadcast over the h heads and the L_q query rows, so every query
    ignores the padded KEYS. numpy in -> numpy out; torch in -> torch.bool out, same device.
    """
    tokens = _tokens_2d(tokens)
    return (tokens != _pad_id(pad_id))[:, None, None, :]


def decoder_mask(tokens: Any, pad_id: int) -> Any:
    """The decoder self-attention mask, shape (batch, 1, L, L): padding_mask & causal_mask.

    Query i may attend to key j when j <= i and token j is not padding.
    numpy in -> numpy out; torch in -> torch.bool out, same device.
    """
    tokens = _tokens_2d(tokens)
    length = tokens.shape[1]
    if isinstance(tokens, torch.Tensor):
        return padding_mask(tokens, pad_id) & causal_mask_torch(length, tokens.device)
    return padding_mask(tokens, pad_id) & causal_mask(length)


def to_additive_mask(mask: Any, blocked: float = -np.inf) -> Any:
    """Boolean mask (True = attend) -> float mask to ADD to the scores: 0 where allowed, ``blocked`` elsewhere.

    With blocked = -inf a fully masked row becomes NaN after the softmax; with a large finite
    negative number it becomes a uniform average. Boolean masks avoid both (see masked_softmax).
    """
    if isinstance(mask, torch.Tensor):
        if mask.dtype != torch.bool:
            raise ValueError(f"mask must be a boolean tensor (True = may attend), got dtype {mask.dtype}")
        zeros = torch.zeros(mask.shape, dtype=torch.get_default_dtype(), device=mask.device)
        return zeros.masked_fill(~mask, blocked)
    mask = np.asarray(mask)
    if mask.dtype != bool:
        raise ValueError(f"mask must be a boolean array (True = may attend), got dtype {mask.dtype}")
    return np.where(mask, 0.0, blocked)


def to_nn_multihead_mask(mask: Any) -> Any:
    """Convert this course's convention (True = may attend) to nn.MultiheadAttention's (True = blocked).

    It is just the logical NOT; the shapes nn.MultiheadAttention accepts are its own business:
    attn_mask (L_q, L_k) or (batch * h, L_q, L_k), key_padding_mask (batch, L_k).
    """
    if isinstance(mask, torch.Tensor):
        if mask.dtype != torch.bool:
            raise ValueError(f"mask must be a boolean tensor (True = may attend), got dtype {mask.dtype}")
        return ~mask
    mask = np.asarray(mask)
    if mask.dtype != bool:
        raise ValueError(f"mask must be a boolean array (True = may attend), got dtype {mask.dtype}")
    return ~mask


__all__ = ["causal_mask", "causal_mask_torch", "padding_mask", "decoder_mask", "to_additive_mask",
           "to_nn_multihead_mask"]
