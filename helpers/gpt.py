"""A decoder-only Transformer (GPT): the decoder of "Attention Is All You Need" without its cross-attention.

    ids (batch, L) -> token embedding + learned position embedding -> Dropout
                   -> N x GPTBlock (masked self-attention, feed-forward; pre-norm) -> final LayerNorm
                   -> the token embedding's matrix again (weight tying) -> logits (batch, L, vocab_size)

Without cross-attention, a decoder layer keeps two sub-layers: masked self-attention and the feed-forward
network. That is the encoder layer's structure (``layers.EncoderLayer``) with a causal mask, so ``GPTBlock``
is an ``EncoderLayer`` that puts its norm first by default, as GPT-2 (Radford et al., 2019) and most models
since do:

    x = x + Dropout(SelfAttention(LayerNorm(x), causal mask))
    x = x + Dropout(FeedForward(LayerNorm(x)))

``to_torch_block`` copies a block into PyTorch's ``nn.TransformerEncoderLayer(norm_first=True)``, which
computes the same function given the same causal mask (tests/test_gpt.py).

The parts are constructor arguments, the references by default, as in ``transformer.Transformer``:
attention(d_model, num_heads, dropout), layer_norm(d_model), feed_forward(d_model, d_ff, dropout), and
block(d_model, num_heads, d_ff, dropout), the class of the N blocks (None: GPTBlock built of the three).

    GPTBlock(d_model, num_heads, d_ff, dropout, norm_first=True)   one block; forward(x, mask)
    GPT(vocab_size, ...)                                           the model; forward(ids) -> logits
    to_torch_block(block)                                          the same weights in nn.TransformerEncoderLayer
"""

from __future__ import annotations

import functools
from typing import Callable

import torch
from torch import nn

from .layers import EncoderLayer, LayerNorm, PositionwiseFeedForward
from .masking import causal_mask_torch
from .multi_head import MultiHeadAttention
from .torch_copies import to_torch_encoder_layer
from .validation import integer_ids, positive_int, probability, shape_str, tensor


class GPTBlock(EncoderLayer):
    """One decoder-only block: masked self-attention then feed-forward, each in a residual connection.

    forward(x, mask=None): x (batch, L, d_model); mask bool, True = may attend, broadcastable to
    (batch, h, L, L): the causal mask (GPT.make_mask) -> (batch, L, d_model).
    Pre-norm by default (norm_first=True): x = x + dropout1(self_attn(norm1(x))), x = x + dropout2(ff(norm2(x))).
    norm_first=False gives the paper's post-norm placement (notebook 07 compares the two).
    """

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.1, norm_first: bool = True, *,
                 attention: Callable[..., nn.Module] = MultiHeadAttention,
                 layer_norm: Callable[..., nn.Module] = LayerNorm,
                 feed_forward: Callable[..., nn.Module] = PositionwiseFeedForward):
        super().__init__(d_model, num_heads, d_ff, dropout, norm_first, attention=attention, layer_norm=layer_norm,
                         feed_forward=feed_forward)


class GPT(nn.Module):
    """A decoder-only language model: token ids in, next-token logits out.

    forward(ids): ids (batch, L) token ids, L <= max_len -> logits (batch, L, vocab_size); logits[:, t]
    predicts the token after ids[:, :t+1] (the causal mask is built here: make_mask).
    hidden(ids) -> the last block's output after the final norm, (batch, L, d_model).

    Positions are learned (a second embedding table, max_len x d_model, as in GPT-2): the blocks then use
    the attention of notebook 03 unchanged. RoPE would rotate the queries and keys inside the attention,
    between the projections and the scores, so it needs a different attention module.
    tie_weights=True: the output layer reuses the token embedding matrix (logits = h E^T, no bias), as
    GPT-2 and the paper (section 3.4) do; False gives it a matrix of its own.
    norm_first=False: post-norm blocks and no final norm (the paper's placement).
    """

    def __init__(self, vocab_size: int, d_model: int = 64, num_heads: int = 4, num_layers: int = 4, d_ff: int = 256,
                 dropout: float = 0.0, max_len: int = 128, norm_first: bool = True, tie_weights: bool = True, *,
                 attention: Callable[..., nn.Module] = MultiHeadAttention,
                 layer_norm: Callable[..., nn.Module] = LayerNorm,
                 feed_forward: Callable[..., nn.Module] = PositionwiseFeedForward,
                 block: Callable[..., nn.Module] | None = None):
        super().__init__()
        self.vocab_size = positive_int(vocab_size, "vocab_size")
        self.d_model = positive_int(d_model, "d_model")
        self.num_heads = positive_int(num_heads, "num_heads")
        if self.d_model % self.num_heads:
            raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
        self.num_layers = positive_int(num_layers, "num_layers")
        self.d_ff = positive_int(d_ff, "d_ff")
        self.max_len = positive_int(max_len, "max_len")
        self.dropout_p = probability(dropout, "dropout")
        self.norm_first, self.tie_weights = bool(norm_first), bool(tie_weights)
        self.token_embed = nn.Embedding(self.vocab_size, self.d_model)
        self.position_embed = nn.Embedding(self.max_len, self.d_model)
        self.dropout = nn.Dropout(self.dropout_p)
        block = block or functools.partial(GPTBlock, norm_first=self.norm_first, attention=attention,
                                           layer_norm=layer_norm, feed_forward=feed_forward)
        self.blocks = nn.ModuleList(block(d_model, num_heads, d_ff, dropout) for _ in range(self.num_layers))
        self.norm = layer_norm(self.d_model) if self.norm_first else nn.Identity()
        self.lm_head = nn.Linear(self.d_model, self.vocab_size, bias=False)
        self.reset_parameters()
        if self.tie_weights:
            self.lm_head.weight = self.token_embed.weight  # one matrix: in, and out

    def reset_parameters(self) -> None:
        """Xavier-uniform for every matrix (as helpers.Transformer), then both embeddings from N(0, 0.02^2)
        (as GPT-2): the first logits are then close to zero, every token about equally likely."""
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)
        nn.init.normal_(self.token_embed.weight, std=0.02)
        nn.init.normal_(self.position_embed.weight, std=0.02)

    def check_ids(self, ids: torch.Tensor, start: int = 0) -> torch.Tensor:
        """ids must be (batch, L) integer token ids of this vocabulary, with start + L <= max_len."""
        tensor(ids, "ids", "of token ids of shape (batch, L)")
        if ids.dim() != 2 or ids.shape[1] == 0:
            raise ValueError(f"ids must be token ids of shape (batch, L) with L >= 1, got {shape_str(ids.shape)}")
        integer_ids(ids, "ids")
        if start + ids.shape[1] > self.max_len:
            raise ValueError(f"the sequence would hold {start + ids.shape[1]} tokens, more than max_len={self.max_len}")
        if int(ids.min()) < 0 or int(ids.max()) >= self.vocab_size:
            raise ValueError(f"ids must hold token ids in [0, vocab_size={self.vocab_size}), got ids from "
                             f"{int(ids.min())} to {int(ids.max())}")
        return ids

    def make_mask(self, length: int, device: torch.device | str = "cpu") -> torch.Tensor:
        """bool (1, 1, L, L): position i may attend to the positions j <= i."""
        return causal_mask_torch(length, device=device)[None, None]

    def embed(self, ids: torch.Tensor, start: int = 0) -> torch.Tensor:
        """The blocks' input for ids at positions start, start + 1, ...: (batch, L, d_model)."""
        positions = torch.arange(start, start + ids.shape[1], device=ids.device)
        return self.dropout(self.token_embed(ids) + self.position_embed(positions))

    def hidden(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.embed(self.check_ids(ids))  # (batch, L, d_model)
        mask = self.make_mask(ids.shape[1], ids.device)  # (1, 1, L, L)
        for block in self.blocks:
            x = block(x, mask)
        return self.norm(x)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.lm_head(self.hidden(ids))  # (batch, L, vocab_size)


def to_torch_block(block: GPTBlock) -> nn.TransformerEncoderLayer:
    """An nn.TransformerEncoderLayer (batch_first, ReLU, the block's norm placement) with copies of its weights.

    Pass it the causal mask in PyTorch's convention: src_mask = ~causal (True = blocked), is_causal=True."""
    return to_torch_encoder_layer(block)


def count_parameters(model: nn.Module) -> int:
    """The number of distinct parameters (a tied matrix counted once)."""
    return sum(p.numel() for p in model.parameters())


__all__ = ["GPT", "GPTBlock", "count_parameters", "to_torch_block"]
