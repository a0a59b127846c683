"""Bad input to the public API: a ValueError (a TypeError for a wrong type) that names the argument and
says what was expected, never a bare error from torch or a silent wrong answer (issue 19, item 7)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from helpers.checkpoints import train_or_load
from helpers.dates import DateDataset, encode_sources
from helpers.decoding import exact_match, greedy_decode, predict
from helpers.loss import LabelSmoothingLoss
from helpers.schedule import scheduled_lr, transformer_lr
from helpers.training import TrainConfig, build_model
from helpers.transformer import DecoderLayer, LayerNorm, PositionwiseFeedForward, Transformer

TINY = TrainConfig(d_model=16, num_heads=2, num_layers=1, d_ff=32, batch_size=8, steps=4, warmup=2)
PAIRS = [("21 November 2026", "2026-11-21"), ("1/2/2003", "2003-02-01")]


def _model():
    torch.manual_seed(0)
    return build_model(TINY).eval()


def _transformer():
    torch.manual_seed(0)
    return Transformer(11, 13, d_model=16, num_heads=2, num_layers=1, d_ff=32, dropout=0.0)


def _ids(batch, length, vocab=11, dtype=torch.long):
    return torch.randint(1, vocab, (batch, length)).to(dtype)


def _decoder_layer(memory):
    torch.manual_seed(0)
    return DecoderLayer(16, 2, 32, dropout=0.0)(torch.randn(2, 5, 16), memory)


def _short_decode(model, src, max_len, start_id, end_id):
    """A decode_fn that drops the last row of its batch."""
    return greedy_decode(model, src, max_len, start_id, end_id)[:-1]


def _loss(target, vocab=7):
    return LabelSmoothingLoss(0.1, pad_id=0)(torch.randn(2, 3, vocab), target)


# (id, the call, the exception, a regular expression its message must match: the argument and what was expected)
CASES = [
    ("LayerNorm_integer_input", lambda: LayerNorm(4)(torch.ones(2, 4, dtype=torch.long)),
     ValueError, r"^x must be a floating-point tensor .*got dtype torch.int64"),
    ("PositionwiseFeedForward_numpy", lambda: PositionwiseFeedForward(4, 8)(np.ones((2, 3, 4), dtype=np.float32)),
     TypeError, r"^x must be a torch.Tensor of shape \(batch, L, d_model=4\), got ndarray"),
    ("DecoderLayer_memory_batch", lambda: _decoder_layer(torch.randn(3, 7, 16)),
     ValueError, r"^memory must have shape \(batch=2, L_src, d_model=16\) .*got \(3, 7, 16\)"),
    ("DecoderLayer_memory_width", lambda: _decoder_layer(torch.randn(2, 7, 8)),
     ValueError, r"^memory must have shape \(batch=2, L_src, d_model=16\) .*got \(2, 7, 8\)"),
    ("Transformer_batch_sizes_differ", lambda: _transformer()(_ids(2, 5), _ids(3, 4, 13)),
     ValueError, r"^src and tgt must have the same batch size, got 2 and 3"),
    ("Transformer_boolean_src", lambda: _transformer()(_ids(2, 5, dtype=torch.bool), _ids(2, 4, 13)),
     ValueError, r"^src must hold integer token ids, got dtype torch.bool"),
    ("Transformer_boolean_tgt", lambda: _transformer()(_ids(2, 5), _ids(2, 4, 13, dtype=torch.bool)),
     ValueError, r"^tgt must hold integer token ids, got dtype torch.bool"),
    ("Transformer_empty_tgt", lambda: _transformer()(_ids(2, 5), _ids(2, 0, 13)),
     ValueError, r"^tgt must hold at least one token per row .*got shape \(2, 0\)"),
    ("transformer_lr_negative_step", lambda: transformer_lr(-5, 512, 4000),
     ValueError, r"^step must be a step number >= 0 .*got -5"),
    ("transformer_lr_float_step", lambda: transformer_lr(1.5, 512, 4000),
     TypeError, r"^step must be an integer step number, got 1.5 \(float\)"),
    ("transformer_lr_string_step", lambda: transformer_lr("10", 512, 4000),
     TypeError, r"^step must be an integer step number, got '10' \(str\)"),
    ("transformer_lr_None_step", lambda: transformer_lr(None, 512, 4000),
     TypeError, r"^step must be an integer step number, got None \(NoneType\)"),
    ("scheduled_lr_negative_step", lambda: scheduled_lr(-5, TINY),
     ValueError, r"^step must be a step number >= 0 .*got -5"),
    ("scheduled_lr_string_step", lambda: scheduled_lr("x", TINY),
     TypeError, r"^step must be an integer step number, got 'x' \(str\)"),
    ("scheduled_lr_dict_config", lambda: scheduled_lr(10, TINY.to_dict()),
     TypeError, r"^config must be a helpers.TrainConfig .*got dict"),
    ("scheduled_lr_formula_42", lambda: scheduled_lr(10, TINY, formula=42),
     TypeError, r"^formula must be a function formula\(step, d_model, warmup\) .*got 42 \(int\)"),
    ("LabelSmoothingLoss_float_pad_id", lambda: LabelSmoothingLoss(0.1, pad_id=1.5),
     TypeError, r"^pad_id must be an integer token id, got 1.5 \(float\)"),
    ("LabelSmoothingLoss_string_pad_id", lambda: LabelSmoothingLoss(0.1, pad_id="x"),
     TypeError, r"^pad_id must be an integer token id, got 'x' \(str\)"),
    ("LabelSmoothingLoss_target_equal_to_V", lambda: _loss(torch.tensor([[1, 7, 2], [3, 0, 0]])),
     ValueError, r"^target must hold token ids in \[0, V=7\) \(or pad_id=0\), got ids from 0 to 7"),
    ("LabelSmoothingLoss_negative_target", lambda: _loss(torch.tensor([[1, -2, 2], [3, 0, 0]])),
     ValueError, r"^target must hold token ids in \[0, V=7\) \(or pad_id=0\), got ids from -2 to 3"),
    ("LabelSmoothingLoss_float_target", lambda: _loss(torch.ones(2, 3)),
     ValueError, r"^target must hold integer token ids, got dtype torch.float32"),
    ("predict_decode_fn_fewer_rows", lambda: predict(_model(), [s for s, _ in PAIRS], decode_fn=_short_decode),
     ValueError, r"^decode_fn must return one row of ids per input: it returned 1 rows for 2 inputs"),
    ("exact_match_decode_fn_fewer_rows", lambda: exact_match(_model(), PAIRS, decode_fn=_short_decode),
     ValueError, r"^decode_fn must return one row of ids per input: it returned 1 rows for 2 inputs"),
    ("exact_match_pair_of_length_1", lambda: exact_match(_model(), [("21 November 2026",)]),
     ValueError, r"^pairs must hold \(written date, ISO date\) pairs; pairs\[0\] has 1 element"),
    ("exact_match_pair_of_length_3", lambda: exact_match(_model(), [PAIRS[0], ("a", "b", "c")]),
     ValueError, r"^pairs must hold \(written date, ISO date\) pairs; pairs\[1\] has 3 elements"),
    ("DateDataset_train_None", lambda: DateDataset(train=None, valid=PAIRS, test=PAIRS, seed=0),
     TypeError, r"^train must be a list of \(written date, ISO date\) pairs, got NoneType"),
    ("DateDataset_one_element_pairs", lambda: DateDataset(train=[("x",)], valid=PAIRS, test=PAIRS, seed=0),
     ValueError, r"^train must hold \(written date, ISO date\) pairs; train\[0\] has 1 element"),
    ("encode_sources_a_string", lambda: encode_sources("21 November 2026"),
     TypeError, r"^texts must be a list of strings, got one str: wrap it in a list, \[text\]"),
    ("TrainConfig_norm_first_no", lambda: TrainConfig(norm_first="no"),
     TypeError, r"^norm_first must be True or False, got 'no' \(str\)"),
    ("train_or_load_config_x", lambda: train_or_load(config="x", data=None),
     TypeError, r"^config must be a helpers.TrainConfig, got str"),
    ("PositionwiseFeedForward_integer_input",
     lambda: PositionwiseFeedForward(4, 8)(torch.ones(2, 3, 4, dtype=torch.long)),
     ValueError, r"^x must be a floating-point tensor, got dtype torch.int64: convert it with x.float\(\)"),
    ("DecoderLayer_integer_memory", lambda: _decoder_layer(torch.ones(2, 7, 16, dtype=torch.long)),
     ValueError, r"^memory must be a floating-point tensor, got dtype torch.int64"),
    ("Transformer_numpy_src", lambda: _transformer()(_ids(2, 5).numpy(), _ids(2, 4, 13)),
     TypeError, r"^src must be a torch.Tensor of token ids of shape \(batch, L_src\), got ndarray"),
    # Beyond the issue's list: the same checks from the other side.
    ("Transformer_empty_src", lambda: _transformer()(_ids(2, 0), _ids(2, 4, 13)),
     ValueError, r"^src must hold at least one token per row .*got shape \(2, 0\)"),
    ("DateDataset_valid_None", lambda: DateDataset(train=PAIRS, valid=None, test=PAIRS, seed=0),
     TypeError, r"^valid must be a list of \(written date, ISO date\) pairs, got NoneType"),
]


@pytest.mark.parametrize("call, error, message", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_bad_input_names_the_argument_and_what_was_expected(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_the_issue_lists_32_bad_inputs_and_each_has_its_case():
    assert len(CASES) >= 32 and len({c[0] for c in CASES}) == len(CASES)


@pytest.mark.parametrize("step", [0, 1, np.int64(7), torch.tensor(3).item()])
def test_good_steps_still_work(step):
    assert transformer_lr(step, 512, 4000) > 0 and scheduled_lr(step, TINY) > 0


def test_good_inputs_still_work():
    """The checks reject only what is wrong: the pad id inside a target, a pad_id outside [0, V)."""
    assert torch.isfinite(_loss(torch.tensor([[1, 6, 2], [3, 0, 0]])))
    loss = LabelSmoothingLoss(0.1, pad_id=-100)(torch.randn(1, 2, 5), torch.tensor([[1, -100]]))
    assert torch.isfinite(loss)
    assert len(predict(_model(), ["21 November 2026"])) == 1 and 0 <= exact_match(_model(), PAIRS) <= 1
    assert TrainConfig(norm_first=True).norm_first is True
    assert encode_sources(("a", "bc")).shape == (2, 2)
