"""Label smoothing: cross-entropy against a softened target.

The paper (section 5.4) only says it smooths with eps_ls = 0.1. The form used here, eps / V on every token and
1 - eps + eps / V on the right one, is that of Szegedy et al. (2016), which PyTorch's ``label_smoothing=``
implements; the paper's own code (tensor2tensor) spreads eps over the V - 1 wrong tokens, and the Annotated
Transformer over V - 2, with the pad column zeroed.

    LabelSmoothingLoss(smoothing, pad_id)   (batch, L, V) logits, (batch, L) ids -> mean over real tokens
    loss_floor(vocab_size, smoothing)       the lowest value that loss can reach
"""

from __future__ import annotations

import math

import torch
from torch import nn

from .validation import integer_ids, positive_int, probability, tensor, token_id


class LabelSmoothingLoss(nn.Module):
    """Cross-entropy against a smoothed target: (1 - eps) on the right token, eps spread evenly.

    forward(logits, target): logits (batch, L, V), target (batch, L) ids -> mean loss over the
    target tokens that are not ``pad_id``. The smoothed target puts eps / V on every token and
    1 - eps + eps / V on the right one, which is exactly
    ``F.cross_entropy(..., label_smoothing=eps, ignore_index=pad_id)``.
    """

    def __init__(self, smoothing: float = 0.1, pad_id: int = 0):
        super().__init__()
        self.smoothing = probability(smoothing, "smoothing")
        self.pad_id = token_id(pad_id, "pad_id")

    def forward(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        tensor(logits, "logits", "of shape (batch, L, V)")
        tensor(target, "target", "of token ids, shape (batch, L)")
        if logits.dim() != 3 or target.shape != logits.shape[:2]:
            raise ValueError(f"logits must have shape (batch, L, V) and target (batch, L), got "
                             f"{tuple(logits.shape)} and {tuple(target.shape)}")
        integer_ids(target, "target")
        vocab_size = logits.shape[-1]
        real = target[target != self.pad_id]
        if real.numel() and (int(real.min()) < 0 or int(real.max()) >= vocab_size):
            raise ValueError(f"target must hold token ids in [0, V={vocab_size}) (or pad_id={self.pad_id}), got ids "
                             f"from {int(target.min())} to {int(target.max())}")
        keep = target != self.pad_id  # (batch, L): the positions that count
        target = target.masked_fill(~keep, 0)  # a pad id outside [0, V) is gathered harmlessly, then dropped
        log_probs = torch.log_softmax(logits.float(), dim=-1)  # (batch, L, V)
        nll = -log_probs.gather(-1, target.unsqueeze(-1)).squeeze(-1)  # (batch, L)
        uniform = -log_probs.mean(dim=-1)  # cross-entropy with the uniform distribution
        loss = (1.0 - self.smoothing) * nll + self.smoothing * uniform
        return loss[keep].sum() / keep.sum().clamp(min=1)


def loss_floor(vocab_size: int, smoothing: float = 0.1) -> float:
    """The smallest value LabelSmoothingLoss can reach: the entropy of the smoothed target.

    A perfect model still pays it, so a label-smoothed loss curve levels off above zero.
    """
    vocab_size = positive_int(vocab_size, "vocab_size")
    eps = probability(smoothing, "smoothing")
    if eps == 0:
        return 0.0
    right, other = 1 - eps + eps / vocab_size, eps / vocab_size
    return -(right * math.log(right) + (vocab_size - 1) * other * math.log(other))


__all__ = ["LabelSmoothingLoss", "loss_floor"]
