"""Turning a trained Transformer into answers: greedy decoding, predictions, exact-match accuracy.

    greedy_decode(model, src, max_len, start_id, end_id)   one token at a time, always the most likely
    predict(model, texts)                                   written dates -> the model's ISO strings
    exact_match(model, pairs)                               the fraction of whole strings that are right
"""

from __future__ import annotations

from typing import Sequence

import torch

from .dates import TARGET_LENGTH, TARGET_VOCAB, decode_targets, encode_sources
from .transformer import Transformer


def greedy_decode(model: Transformer, src: torch.Tensor, max_len: int, start_id: int, end_id: int) -> torch.Tensor:
    """Generate up to max_len tokens per source, each time the most likely next token.

    src (batch, L_src) ids -> (batch, n) ids with n <= max_len, WITHOUT the start token. Decoding
    stops early once every row has produced end_id; what a row generates after its end_id is
    meaningless (decode_targets cuts it). Call it in eval mode.
    """
    with torch.no_grad():
        src_mask = model.make_src_mask(src)
        memory = model.encode(src, src_mask)  # (batch, L_src, d_model), computed once
        ys = torch.full((src.shape[0], 1), start_id, dtype=torch.long, device=src.device)
        for _ in range(max_len):
            logits = model.decode(ys, memory, src_mask, model.make_tgt_mask(ys))  # (batch, len, V)
            next_token = logits[:, -1].argmax(dim=-1, keepdim=True)  # (batch, 1)
            ys = torch.cat([ys, next_token], dim=1)
            if (ys == end_id).any(dim=1).all():
                break
        return ys[:, 1:]


def predict(model: Transformer, texts: Sequence[str], batch_size: int = 500, device: str | None = None) -> list[str]:
    """Written dates -> the model's ISO strings (greedy decoding, eval mode)."""
    if isinstance(texts, str):
        texts = [texts]
    device = device or next(model.parameters()).device
    model.eval()
    out: list[str] = []
    for start in range(0, len(texts), batch_size):
        src = encode_sources(texts[start:start + batch_size]).to(device)
        ids = greedy_decode(model, src, TARGET_LENGTH + 1, TARGET_VOCAB.bos_id, TARGET_VOCAB.eos_id)
        out.extend(decode_targets(ids.cpu()))
    return out


def exact_match(model: Transformer, pairs: Sequence[tuple[str, str]], batch_size: int = 500) -> float:
    """The fraction of pairs whose whole predicted string equals the target."""
    predictions = predict(model, [s for s, _ in pairs], batch_size)
    return sum(p == t for p, (_, t) in zip(predictions, pairs)) / max(len(pairs), 1)


__all__ = ["exact_match", "greedy_decode", "predict"]
