"""Training the Transformer of notebook 06: the configuration, the batches and the loop.

    TrainConfig(...)                       everything that decides the trained weights
    Recipe(...)                            which classes and functions train: the reference, or the student's
    build_model(config, recipe)            a seeded Transformer of the configuration's size
    ShuffledBatches(pairs, ...)            endless batches of randomly drawn pairs
    train_model(model, batches, config)    Adam(0.9, 0.98, 1e-9) + the schedule, with a progress bar; with valid=
                                           pairs, the exact match on them every valid_every steps

The schedule is in ``schedule.py``, the loss in ``loss.py``, decoding in ``decoding.py`` and the
train-once cache in ``checkpoints.py``.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Iterator, Sequence

import torch
from torch import nn

from .dates import SOURCE_VOCAB, TARGET_VOCAB, encode_sources, encode_targets
from .loss import LabelSmoothingLoss
from .schedule import scheduled_lr, transformer_lr
from .transformer import Transformer
from .validation import flag, positive_float, positive_int, probability


# ---------------------------------------------------------------------- device
def default_device() -> str:
    """"cuda" when a GPU is present, else "cpu"."""
    return "cuda" if torch.cuda.is_available() else "cpu"


@dataclass(frozen=True)
class TrainConfig:
    """Everything that decides the trained weights (with the data set and the code)."""

    d_model: int = 64
    num_heads: int = 4
    num_layers: int = 2
    d_ff: int = 256
    dropout: float = 0.1
    norm_first: bool = False
    batch_size: int = 128
    steps: int = 1500
    warmup: int = 200
    lr_factor: float = 1.0
    cooldown: float = 0.0
    label_smoothing: float = 0.1
    positional_encoding: bool = True  # False: the ablation of notebook 06, the encoding replaced by zeros
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("d_model", "num_heads", "num_layers", "d_ff", "batch_size", "steps", "warmup"):
            positive_int(getattr(self, name), name)
        if self.d_model % self.num_heads:
            raise ValueError(f"d_model={self.d_model} must be divisible by num_heads={self.num_heads} "
                             f"(each head gets d_k = d_model / num_heads)")
        flag(self.norm_first, "norm_first")
        probability(self.dropout, "dropout")
        probability(self.label_smoothing, "label_smoothing")
        positive_float(self.lr_factor, "lr_factor")
        cooldown = self.cooldown
        if isinstance(cooldown, bool) or not isinstance(cooldown, (int, float)) or not 0 <= cooldown <= 1:
            raise ValueError(f"cooldown must be a fraction of the steps in [0, 1], got {self.cooldown!r}")
        if not isinstance(self.positional_encoding, bool):
            raise ValueError(f"positional_encoding must be True or False, got {self.positional_encoding!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise ValueError(f"seed must be an integer, got {self.seed!r}")

    def to_dict(self) -> dict:
        return asdict(self)

    def peak_lr(self) -> float:
        return transformer_lr(self.warmup, self.d_model, self.warmup, self.lr_factor)


# Notebook 06 trains exactly this (benchmarks/bench_time_to_accuracy.py measures it too).
NOTEBOOK_CONFIG = TrainConfig(d_model=64, num_heads=4, num_layers=2, d_ff=256, dropout=0.0, norm_first=False,
                              batch_size=128, steps=600, warmup=200, lr_factor=0.5, cooldown=0.4,
                              label_smoothing=0.1, seed=0)
NOTEBOOK_DATA = dict(n_train=60_000, n_valid=1_000, n_test=2_000, seed=0)


def train_step(model: nn.Module, src: torch.Tensor, tgt: torch.Tensor, optimizer, scheduler, loss_fn) -> float:
    """One training step with teacher forcing; return the batch's loss as a Python float.

    src: (batch, L_src) token ids, tgt: (batch, L_tgt) with <s> first. The decoder reads tgt[:, :-1]
    and is scored on predicting tgt[:, 1:]; then zero_grad, backward, the optimiser's step and the
    scheduler's step, in that order. Notebook 06's exercise train_step writes the same ten lines.
    """
    model.train()
    logits = model(src, tgt[:, :-1])  # (batch, L_tgt - 1, V)
    loss = loss_fn(logits, tgt[:, 1:])
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    scheduler.step()
    return loss.item()


@dataclass(frozen=True)
class Recipe:
    """The code that trains: the model class (and the parts handed to it), the schedule, the loss and the step.

    The reference by default; notebook 06 passes the student's own classes and functions once their
    checks pass (helpers.student_code.your_recipe). model_parts are keyword arguments of model_class
    (the reference Transformer's attention=, layer_norm=, encoding=, ...): new_model builds with them.
    fingerprint identifies the student's code in use ("" for the reference alone), so the checkpoint
    cache trains afresh when that code changes. transformer_lr(step, d_model, warmup) is the paper's
    formula; lr_factor and the cool-down are applied around it (scheduled_lr).
    """

    model_class: type = Transformer
    model_parts: dict[str, Any] = field(default_factory=dict)  # keyword -> the student's part, for model_class
    transformer_lr: Callable[[int, int, int], float] = transformer_lr
    loss_class: type = LabelSmoothingLoss
    train_step: Callable[..., float] = train_step
    fingerprint: str = ""
    origin: dict[str, str] = field(default_factory=dict)  # part name -> "yours" or "reference"
    reasons: dict[str, str] = field(default_factory=dict)  # part name -> why

    def new_model(self, *args: Any, **kwargs: Any) -> nn.Module:
        """model_class(*args, **kwargs) with the recipe's model_parts."""
        return self.model_class(*args, **kwargs, **self.model_parts)

    def describe(self) -> str:
        """Whose code trains: one summary line, then one line per part and why (in the student's language)."""
        from .i18n import tr

        yours = [name for name, who in self.origin.items() if who == "yours"]
        theirs = [name for name, who in self.origin.items() if who != "yours"]
        if not yours and theirs:
            lines = [tr("training:reference_code_parts", "Training the reference code from helpers: {parts}.",
                        parts=", ".join(theirs))]
        elif not yours:
            lines = [tr("training:reference_code", "Training the reference code from helpers.")]
        elif theirs:
            lines = [tr("training:your_code_and_helpers", "Training YOUR code: {yours}; from helpers: {theirs}.",
                        yours=", ".join(yours), theirs=", ".join(theirs))]
        else:
            lines = [tr("training:your_code", "Training YOUR code: {yours}.", yours=", ".join(yours))]
        marks = {"yours": tr("training:mark_yours", "yours"), "reference": tr("training:mark_reference", "reference")}
        width = max(len(mark) for mark in marks.values())
        for name, who in self.origin.items():
            mark = (marks["yours"] if who == "yours" else marks["reference"]).ljust(width)
            lines.append(f"  {mark}  {name}: {self.reasons.get(name, '')}".rstrip())
        return "\n".join(lines)


REFERENCE = Recipe()


def build_model(config: TrainConfig, recipe: Recipe = REFERENCE, src_vocab_size: int = len(SOURCE_VOCAB),
                tgt_vocab_size: int = len(TARGET_VOCAB), max_len: int = 64) -> Transformer:
    """A Transformer (recipe.new_model) of the configuration's size, initialised from config.seed.

    With config.positional_encoding=False the positional encoding is replaced by zeros: the model
    then sees its inputs as a bag of tokens (the ablation of notebook 06).
    """
    torch.manual_seed(config.seed)
    model = recipe.new_model(src_vocab_size, tgt_vocab_size, d_model=config.d_model, num_heads=config.num_heads,
                             num_layers=config.num_layers, d_ff=config.d_ff, dropout=config.dropout,
                             max_len=max_len, pad_id=SOURCE_VOCAB.pad_id, norm_first=config.norm_first)
    if not config.positional_encoding:
        model.positional.pe.zero_()
    return model


class ShuffledBatches:
    """Endless training batches (src (B, L_src), tgt (B, 12)) of randomly drawn pairs.

    Each epoch shuffles the pairs (seeded) and cuts them into batches of batch_size; each source
    batch is trimmed to its longest source. Sorting the pairs by length first (bucketing) would
    pad less, but a bucket then holds one or two date formats only, and the model learns far more
    slowly from such batches: with the same schedule, bucketing reached 97-98% exact match after
    700 steps where random batches reached 99.9% after 600 (measured on the held-out dates).
    """

    def __init__(self, pairs: Sequence[tuple[str, str]], batch_size: int, seed: int = 0):
        self.batch_size = positive_int(batch_size, "batch_size")
        if not pairs:
            raise ValueError("pairs must hold at least one (source, target) pair")
        self.src = encode_sources([s for s, _ in pairs])  # (N, L_max)
        self.tgt = encode_targets([t for _, t in pairs])  # (N, 12)
        self.lengths = (self.src != SOURCE_VOCAB.pad_id).sum(dim=1)
        self.generator = torch.Generator().manual_seed(seed)

    def epoch(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        batches = []
        for idx in torch.split(torch.randperm(len(self.src), generator=self.generator), self.batch_size):
            length = int(self.lengths[idx].max())
            batches.append((self.src[idx, :length], self.tgt[idx]))
        return batches

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        while True:
            yield from self.epoch()


# ---------------------------------------------------------------------- training loop
@dataclass
class History:
    """What train_model records: per step the loss and the learning rate, the exact match on the validation
    pairs every few steps (valid_step[i] is the step after which valid_exact_match[i] was measured), and the
    wall time of the training steps (the validation excluded)."""

    loss: list[float] = field(default_factory=list)
    lr: list[float] = field(default_factory=list)
    seconds: float = 0.0
    device: str = "cpu"
    threads: int = 1
    valid_step: list[int] = field(default_factory=list)
    valid_exact_match: list[float] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


def make_optimizer(model: nn.Module, config: TrainConfig, recipe: Recipe = REFERENCE):
    """Adam with the paper's betas (0.9, 0.98) and eps 1e-9, and scheduled_lr as a LambdaLR."""
    optimizer = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda i: scheduled_lr(i + 1, config, recipe.transformer_lr))
    return optimizer, schedule


def train_model(model: Transformer, batches: Iterator, config: TrainConfig, device: str | None = None,
                progress: bool = True, callback: Callable[[int, Transformer], bool] | None = None,
                callback_every: int = 100, recipe: Recipe = REFERENCE,
                valid: Sequence[tuple[str, str]] | None = None, valid_every: int = 100) -> History:
    """Train for config.steps steps with teacher forcing; return the History.

    Each step is recipe.train_step (the reference train_step, or the student's): the decoder reads
    tgt[:, :-1] (<s> and the first characters) and is scored on predicting tgt[:, 1:] (the characters
    and </s>). valid, if given, is a list of (source, target) pairs whose exact match (greedy decoding
    with a KV cache) is recorded after every valid_every steps, in eval mode and without gradients, so
    it changes nothing in training. callback(step, model), if given, runs every callback_every steps;
    returning True stops training early. Neither is counted in history.seconds.
    """
    from .decoding import exact_match

    device = device or default_device()
    valid_every = positive_int(valid_every, "valid_every")
    model.to(device).train()
    optimizer, schedule = make_optimizer(model, config, recipe)
    loss_fn = recipe.loss_class(config.label_smoothing, TARGET_VOCAB.pad_id)
    history = History(device=str(device), threads=torch.get_num_threads())
    iterator = iter(batches)
    bar = None
    if progress:
        from tqdm import tqdm

        from .i18n import tr
        bar = tqdm(total=config.steps, desc=tr("training:progress", "training"),
                   unit=tr("training:progress_unit", "step"), mininterval=2.0, ncols=90)
    elapsed, start = 0.0, time.perf_counter()
    for step in range(1, config.steps + 1):
        src, tgt = next(iterator)
        src, tgt = src.to(device), tgt.to(device)
        history.lr.append(schedule.get_last_lr()[0])
        history.loss.append(float(recipe.train_step(model, src, tgt, optimizer, schedule, loss_fn)))
        if bar is not None:
            bar.update(1)
            if step % 50 == 0:
                bar.set_postfix(loss=f"{history.loss[-1]:.3f}", refresh=False)
        measure = valid is not None and step % valid_every == 0
        ask = callback is not None and step % callback_every == 0
        if measure or ask:
            elapsed += time.perf_counter() - start
            stop = False
            if measure:
                history.valid_step.append(step)
                history.valid_exact_match.append(exact_match(model, valid, use_cache=True))
            if ask:
                stop = callback(step, model)
            model.train()
            start = time.perf_counter()
            if stop:
                break
    elapsed += time.perf_counter() - start
    if bar is not None:
        bar.close()
    history.seconds = elapsed
    model.eval()
    return history


__all__ = ["NOTEBOOK_CONFIG", "NOTEBOOK_DATA", "REFERENCE", "History", "Recipe", "ShuffledBatches", "TrainConfig",
           "build_model",
           "default_device", "make_optimizer", "train_model", "train_step"]
