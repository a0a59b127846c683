"""The leak probes of helpers/checks/layers.py see a leak whatever the norm placement: a pre-norm layer whose
attention lets a padded key or a later position in is named (padding_leak, future_leak), where a constant shift of
the changed position, which the pre-norm LayerNorm removes before any sub-layer reads it, saw nothing; a right
layer passes. (The other cases of the encoder and decoder layer checks are in tests/test_transformer_checks.py.)"""

import pytest
import torch

from helpers.checks import check_decoder_layer, check_encoder_layer
from helpers.checks.gpt_block import check_gpt_block
from helpers.checks.layers import leak_probe
from helpers.gpt import GPTBlock
from helpers.layers import LayerNorm
from helpers.transformer import DecoderLayer, EncoderLayer

from conftest import verdict


def last_key_open(mask):
    """The mask with its last key open to every query: the student's attention reads a position it must not."""
    opened = mask.clone().expand(*mask.shape[:-2], mask.shape[-2], mask.shape[-1]).clone()
    opened[..., -1] = True
    return opened


class PreNormEncoderLeak(EncoderLayer):
    """Right in post-norm; in pre-norm its self-attention reads the padded last key."""

    def forward(self, x, src_mask=None):
        if not self.norm_first:
            return super().forward(x, src_mask)
        h = self.norm1(x)
        x = x + self.dropout1(self.self_attn(h, h, h, last_key_open(src_mask)))
        return x + self.dropout2(self.ff(self.norm2(x)))


class PreNormDecoderLeak(DecoderLayer):
    """Right in post-norm; in pre-norm its masked self-attention reads the last target position."""

    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        if not self.norm_first:
            return super().forward(x, memory, tgt_mask, memory_mask)
        h = self.norm1(x)
        x = x + self.dropout1(self.self_attn(h, h, h, last_key_open(tgt_mask)))
        h = self.norm2(x)
        x = x + self.dropout2(self.cross_attn(h, memory, memory, memory_mask))
        return x + self.dropout3(self.ff(self.norm3(x)))


class BlockLeak(GPTBlock):
    """A pre-norm GPT block whose self-attention reads the last position from every position."""

    def forward(self, x, mask=None):
        h = self.norm1(x)
        x = x + self.dropout1(self.self_attn(h, h, h, last_key_open(mask)))
        return x + self.dropout2(self.ff(self.norm2(x)))


class RightBlock(GPTBlock):
    def forward(self, x, mask=None):
        h = self.norm1(x)
        x = x + self.dropout1(self.self_attn(h, h, h, mask))
        return x + self.dropout2(self.ff(self.norm2(x)))


def test_a_constant_shift_is_invisible_to_a_pre_norm_layer_and_the_probe_is_not():
    """Why the probe is not a constant: LayerNorm(x + 3) == LayerNorm(x), while LayerNorm(x + probe) differs."""
    norm = LayerNorm(8).double()
    x = torch.randn(2, 8, dtype=torch.float64)
    torch.testing.assert_close(norm(x + 3.0), norm(x))
    assert not torch.allclose(norm(x + leak_probe(8, x.dtype)), norm(x))


@pytest.mark.parametrize("check, leaky, code", [
    (check_encoder_layer, PreNormEncoderLeak, "padding_leak"),
    (check_decoder_layer, PreNormDecoderLeak, "future_leak"),
    (check_gpt_block, BlockLeak, "future_leak"),
], ids=["encoder_layer", "decoder_layer", "gpt_block"])
def test_a_pre_norm_leak_is_named(check, leaky, code):
    v = verdict(check, leaky)
    assert not v and v.mistake == code, v


@pytest.mark.parametrize("check, right", [(check_encoder_layer, EncoderLayer), (check_decoder_layer, DecoderLayer),
                                          (check_gpt_block, RightBlock)], ids=["encoder_layer", "decoder_layer",
                                                                               "gpt_block"])
def test_a_right_layer_passes(check, right, capsys):
    class Student(right):  # a subclass: the check refuses the reference class itself
        pass

    Student.__name__ = right.__name__
    v = verdict(check, Student, capsys)
    assert v, v
