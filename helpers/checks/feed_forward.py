"""The check of notebook 05's PositionwiseFeedForward: linear, ReLU, dropout, linear."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from ..i18n import tr
from ..transformer import PositionwiseFeedForward
from .harness import Known, Mistake, exercise, graded, match_known
from .layer_norm import compare_in_training, compare_output
from .torch_compare import DROPOUT_P_MISTAKE, P_TRAIN, TORCH_MISTAKES, _as_class, _np, _setup_mistakes, built_pair, \
    seeded_outputs, student_output

FF_D, FF_HIDDEN = 8, 24
TRAIN_SEED = 7

FEED_FORWARD_MISTAKES = {
    "no_relu": "the ReLU between the two linear maps is missing: without it the two maps collapse into one linear "
               "map, and the network can only compute a linear function of each position. FFN(x) = "
               "max(0, x W_1 + b_1) W_2 + b_2.",
    "no_bias": "{missing} FFN(x) = max(0, x W_1 + b_1) W_2 + b_2 adds b_1 before the ReLU and b_2 at the end (an "
               "nn.Linear applies its weight and its bias together).",
    "no_second_linear": "the output is the hidden layer, d_ff wide: after the ReLU and the dropout comes the second "
                        "linear map, self.linear2, which brings each position back to d_model numbers.",
    "linears_swapped": "the two linear maps are exchanged: self.linear1 (d_model to d_ff) comes first, then the ReLU "
                       "and the dropout, then self.linear2 (d_ff back to d_model).",
    "relu_on_output": "a ReLU is applied to the output too: only the hidden layer (d_ff wide) goes through the ReLU; "
                      "the output of the second linear map can be negative.",
    "relu_moved_to_output": "the ReLU is applied to the output of the second linear map instead of the hidden layer: "
                            "FFN(x) = max(0, x W_1 + b_1) W_2 + b_2, the ReLU between the two maps; the output can "
                            "be negative.",
    "wrong_activation": "the hidden layer goes through {name}; the paper's feed-forward network uses the ReLU, "
                        "max(0, .).",
    "no_dropout": "in training mode your output is the one without dropout: apply self.dropout to the hidden "
                  "activations, after the ReLU and before the second linear map (as PyTorch's layers do).",
    "dropout_on_input": "in training mode your dropout acts on the input x: apply self.dropout to the hidden "
                        "activations instead, after the ReLU and before the second linear map.",
    "dropout_on_output": "in training mode your dropout acts on the output: apply self.dropout to the hidden "
                         "activations instead, after the ReLU and before the second linear map.",
    "dropout_twice": "in training mode your output is what self.dropout applied TWICE gives ({where}): apply it "
                     "once, to the hidden activations after the ReLU and before the second linear map.",
    **TORCH_MISTAKES, **DROPOUT_P_MISTAKE,
    **_setup_mistakes("PositionwiseFeedForward", "feed_forward"),
}


def wrong_feed_forwards(ff: PositionwiseFeedForward, x: torch.Tensor) -> dict[Any, np.ndarray]:
    """What the common wrong feed-forward passes give for x (eval mode): mistake code (or Known) -> output."""
    l1, l2 = ff.linear1, ff.linear2
    with torch.no_grad():
        hidden, unbiased = l1(x), torch.relu(x @ l1.weight.T)
        wrong = {
            "no_relu": _np(l2(hidden)),
            Known("no_bias", missing=tr("feed_forward:no_biases", "The biases b_1 and b_2 are missing.")):
                _np(unbiased @ l2.weight.T),
            Known("no_bias", missing=tr("feed_forward:no_bias_1", "The bias b_1 is missing.")):
                _np(unbiased @ l2.weight.T + l2.bias),
            Known("no_bias", missing=tr("feed_forward:no_bias_2", "The bias b_2 is missing.")):
                _np(torch.relu(hidden) @ l2.weight.T),
            "relu_on_output": _np(torch.relu(l2(torch.relu(hidden)))),
            "relu_moved_to_output": _np(torch.relu(l2(hidden))),
        }
        for name, activation in (("GELU", nn.functional.gelu), ("tanh", torch.tanh),
                                 (tr("feed_forward:a_sigmoid", "a sigmoid"), torch.sigmoid),
                                 (tr("feed_forward:a_leaky_relu", "a leaky ReLU"), nn.functional.leaky_relu),
                                 ("SiLU", nn.functional.silu), ("ELU", nn.functional.elu),
                                 (tr("feed_forward:a_softmax", "a softmax"), lambda h: torch.softmax(h, dim=-1))):
            wrong[Known("wrong_activation", name=name)] = _np(l2(activation(hidden)))
    return wrong


def wrong_shapes(ff: PositionwiseFeedForward, x: torch.Tensor) -> dict[Any, np.ndarray]:
    """The wrong answers whose output or crash depends on the sizes: the hidden layer returned (d_ff wide), and, for a
    module whose d_ff equals d_model, the two linear maps exchanged (eval mode)."""
    l1, l2 = ff.linear1, ff.linear2
    with torch.no_grad():
        wrong = {"no_second_linear": _np(torch.relu(l1(x)))}
        if l1.in_features == l1.out_features:
            wrong["linears_swapped"] = _np(l1(torch.relu(l2(x))))
    return wrong


def _check_swapped(cls: type, error: Mistake, x: torch.Tensor, seed: int) -> None:
    """After a crash: a student whose linear maps are exchanged runs when d_ff == d_model; name it when the output
    is what that gives, else report the crash itself."""
    if error.code != "raised_error":
        raise error
    d_model = x.shape[-1]
    try:
        student, reference = built_pair(cls, PositionwiseFeedForward, seed, d_model, d_model, dropout=P_TRAIN)
        out = student_output(student, (x,), ("x",), "PositionwiseFeedForward")
    except (Mistake, Known):
        raise error from None
    match_known(out, {key: value for key, value in wrong_shapes(reference, x).items() if key == "linears_swapped"})
    raise error


def wrong_training_feed_forwards(ff: PositionwiseFeedForward, x: torch.Tensor, seed: int) -> dict[Any, np.ndarray]:
    """What the misplaced, missing or hard-coded dropouts give in training mode, with the random numbers of seed."""
    l1, l2, drop = ff.linear1, ff.linear2, ff.dropout
    fixed = nn.Dropout(0.1)
    return seeded_outputs({
        "no_dropout": lambda: l2(torch.relu(l1(x))),
        "dropout_on_input": lambda: l2(torch.relu(l1(drop(x)))),
        "dropout_on_output": lambda: drop(l2(torch.relu(l1(x)))),
        Known("dropout_p_hardcoded", what="PositionwiseFeedForward", p=drop.p): lambda: l2(fixed(torch.relu(l1(x)))),
        Known("dropout_twice", where=tr("feed_forward:before_and_after_relu", "before and after the ReLU")):
            lambda: l2(drop(torch.relu(drop(l1(x))))),
        Known("dropout_twice", where=tr("feed_forward:hidden_and_output", "on the hidden activations and on the "
                                        "output")): lambda: drop(l2(drop(torch.relu(l1(x))))),
        Known("dropout_twice", where=tr("feed_forward:input_and_hidden", "on the input and on the hidden "
                                        "activations")): lambda: l2(drop(torch.relu(l1(drop(x))))),
    }, seed)


def _feed_forward_input() -> torch.Tensor:
    """(2, 5, FF_D) float64, one position of large entries and one that mixes +1000 and -1000."""
    gen = torch.Generator().manual_seed(6)
    x = torch.randn(2, 5, FF_D, generator=gen, dtype=torch.float64)
    x[0, 3] *= 300.0
    x[1, 1, :2] = torch.tensor([1000.0, -1000.0], dtype=torch.float64)
    return x


def _drawn_case(rng: np.random.Generator) -> tuple[int, int, torch.Tensor, int, int]:
    """(d_model, hidden size, x, weight seed, dropout seed) of drawn sizes and seeds (when grading)."""
    d_model, hidden = int(rng.integers(2, 12)), int(rng.integers(2, 24))
    gen = torch.Generator().manual_seed(int(rng.integers(2 ** 31)))
    x = torch.randn(int(rng.integers(1, 4)), int(rng.integers(1, 6)), d_model, generator=gen, dtype=torch.float64)
    return d_model, hidden, x, int(rng.integers(2 ** 31)), int(rng.integers(2 ** 31))


@exercise("feed_forward", notebook="05_transformer", points=1, defines="PositionwiseFeedForward",
          reference="helpers.transformer.PositionwiseFeedForward",
          success="correct! Linear, ReLU, (dropout), linear: the same two maps at every position.",
          mistakes=FEED_FORWARD_MISTAKES, off_limits=("helpers.transformer.PositionwiseFeedForward",))
def check_feed_forward(FeedForwardClass: Any) -> str:
    """Check a student's PositionwiseFeedForward class against helpers.PositionwiseFeedForward: the output in eval
    mode, its gradients, and the output in training mode with the reference's random numbers (dropout P_TRAIN)."""
    cls = _as_class(FeedForwardClass)
    cases = graded([(FF_D, FF_HIDDEN, _feed_forward_input(), 9, TRAIN_SEED)], _drawn_case)
    for d_model, hidden, x, weight_seed, train_seed in cases:
        student, reference = built_pair(cls, PositionwiseFeedForward, weight_seed, d_model, hidden, dropout=P_TRAIN)
        what = tr("feed_forward:what", "{call}(x) with x of shape {shape}",
                  call=f"PositionwiseFeedForward({d_model}, {hidden}, dropout={P_TRAIN})", shape=tuple(x.shape))
        try:
            compare_output(student, reference, (x,), ("x",), what, tuple(x.shape),
                           tr("feed_forward:shape_hint", "The output has the input's shape (batch, L, d_model)."),
                           lambda out: match_known(out, wrong_feed_forwards(reference, x)), grads={0: "x"},
                           before=lambda out: match_known(out, wrong_shapes(reference, x)))
        except Mistake as error:
            _check_swapped(cls, error, x, weight_seed)
        compare_in_training(student, reference, (x,), ("x",), what, train_seed,
                            lambda: wrong_training_feed_forwards(reference, x, train_seed),
                            lambda difference: tr("feed_forward:train_differs", "in training mode (dropout={p}, the "
                                                  "reference's random numbers) {what} differs from the reference: "
                                                  "{difference}. Apply self.dropout once, to the hidden activations "
                                                  "after the ReLU.", p=P_TRAIN, what=what, difference=difference))
    return ""
