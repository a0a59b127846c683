"""The check of notebook 05's PositionwiseFeedForward: linear, ReLU, dropout, linear."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from ..i18n import tr
from ..transformer import PositionwiseFeedForward
from .harness import Known, Mistake, call, exercise, expect_finite, expect_shape, first_difference, match_known, same, \
    to_array
from .torch_compare import _as_class, _fit, _np, _randomise, _run, _setup_mistakes

# ---------------------------------------------------------------------- position-wise feed-forward
FF_D, FF_HIDDEN = 8, 24

FEED_FORWARD_MISTAKES = {
    "no_relu": "the ReLU between the two linear maps is missing: without it the two maps collapse into one linear "
               "map, and the network can only compute a linear function of each position. FFN(x) = "
               "max(0, x W_1 + b_1) W_2 + b_2.",
    "no_bias": "the {which} missing: FFN(x) = max(0, x W_1 + b_1) W_2 + b_2 adds b_1 before the ReLU and b_2 "
               "at the end (an nn.Linear applies its weight and its bias together).",
    "relu_on_output": "a ReLU is applied to the output too: only the hidden layer (d_ff wide) goes through the ReLU; "
                      "the output of the second linear map can be negative.",
    "wrong_activation": "the hidden layer goes through {name}; the paper's feed-forward network uses the ReLU, "
                        "max(0, .).",
    "no_dropout": "in training mode the output does not change when self.dropout is active: apply it to the hidden "
                  "activations, after the ReLU and before the second linear map (as PyTorch's layers do).",
    **_setup_mistakes("PositionwiseFeedForward", "feed_forward"),
}


def wrong_feed_forwards(ff: PositionwiseFeedForward, x: torch.Tensor) -> dict[Any, np.ndarray]:
    """What the common wrong feed-forward passes give for x (eval mode): mistake code (or Known) -> output."""
    l1, l2 = ff.linear1, ff.linear2
    with torch.no_grad():
        hidden = l1(x)
        return {
            "no_relu": _np(l2(hidden)),
            Known("no_bias", which=tr("feed_forward:no_biases", "biases b_1 and b_2 are")):
                _np(torch.relu(x @ l1.weight.T) @ l2.weight.T),
            Known("no_bias", which=tr("feed_forward:no_bias_1", "bias b_1 is")):
                _np(torch.relu(x @ l1.weight.T) @ l2.weight.T + l2.bias),
            Known("no_bias", which=tr("feed_forward:no_bias_2", "bias b_2 is")): _np(torch.relu(hidden) @ l2.weight.T),
            "relu_on_output": _np(torch.relu(l2(torch.relu(hidden)))),
            Known("wrong_activation", name="GELU"): _np(l2(nn.functional.gelu(hidden))),
            Known("wrong_activation", name="tanh"): _np(l2(torch.tanh(hidden))),
            Known("wrong_activation", name=tr("feed_forward:a_sigmoid", "a sigmoid")): _np(l2(torch.sigmoid(hidden))),
        }


@exercise("feed_forward", notebook="05_transformer", defines="PositionwiseFeedForward",
          success="correct! Linear, ReLU, (dropout), linear: the same two maps at every position.",
          mistakes=FEED_FORWARD_MISTAKES)
def check_feed_forward(FeedForwardClass: Any) -> str:
    """Check the forward pass of a student's PositionwiseFeedForward class against helpers.PositionwiseFeedForward."""
    cls = _as_class(FeedForwardClass)
    gen = torch.Generator().manual_seed(6)
    x = torch.randn(2, 5, FF_D, generator=gen, dtype=torch.float64)
    with torch.random.fork_rng(devices=[]):
        reference = PositionwiseFeedForward(FF_D, FF_HIDDEN, dropout=0.1)
        student = call(cls, FF_D, FF_HIDDEN, dropout=0.1)
    _randomise(reference, seed=9)
    reference.double().eval()
    student = _fit(student, reference).double().eval()
    what = tr("feed_forward:what", "{call}(x) with x of shape {shape}",
              call=f"PositionwiseFeedForward({FF_D}, {FF_HIDDEN})", shape=tuple(x.shape))
    out = _run(student, x, what=what)
    expect_shape(out, tuple(x.shape), what,
                 tr("feed_forward:shape_hint", "The output has the input's shape (batch, L, d_model)."))
    expect_finite(out, what)
    with torch.no_grad():
        expected = _np(reference(x))
    if not same(out, expected):
        match_known(out, wrong_feed_forwards(reference, x))
        raise Mistake(tr("harness:differs", "{what} differs from the reference: {difference}.", what=what,
                         difference=first_difference(out, expected)))
    for module in student.modules():
        if isinstance(module, nn.Dropout):
            module.p = 0.5
    with torch.random.fork_rng(devices=[]), torch.no_grad():
        torch.manual_seed(0)
        train_out = to_array(call(student.train(), x), what)
    if same(train_out, expected, atol=1e-12):
        raise Known("no_dropout")
    return ""


__all__ = ["FEED_FORWARD_MISTAKES", "check_feed_forward", "wrong_feed_forwards"]
