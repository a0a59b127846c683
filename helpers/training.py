"""Training the Transformer of notebook 05: schedule, loss, batches, loop, decoding, accuracy, cache.

    transformer_lr(step, d_model, warmup)   the paper's learning rate (section 5.3)
    LabelSmoothingLoss(smoothing, pad_id)   cross-entropy against a smoothed target (section 5.4)
    LengthBucketedBatches(pairs, ...)       endless batches of similar source lengths
    train_model(model, batches, config)     Adam(0.9, 0.98, 1e-9) + the schedule, with a progress bar
    greedy_decode(model, src, ...)          one token at a time, always the most likely one
    predict / exact_match                   written dates -> ISO strings -> accuracy
    train_or_load(config, data)             train once, then load the weights from the .cache/ folder

The checkpoint cache lives in ``<repository>/.cache/checkpoints`` (git-ignored), or in the folder
named by the environment variable ``TFS_CACHE_DIR``. A checkpoint's name is a hash of everything
that decides its weights: the training configuration (seed included), the data set and the source
code of the modules that build and train the model. Change any of them and the model is trained
again; pass ``retrain=True`` (or set ``TFS_RETRAIN=1``) to retrain anyway.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Iterator, Sequence

import torch
from torch import nn

from .dates import (SOURCE_VOCAB, TARGET_LENGTH, TARGET_VOCAB, DateDataset, decode_targets, encode_sources,
                    encode_targets)
from .transformer import Transformer
from .validation import positive_float, positive_int, probability


# ---------------------------------------------------------------------- device
def default_device() -> str:
    """"cuda" when a GPU is present, else "cpu"."""
    return "cuda" if torch.cuda.is_available() else "cpu"


# ---------------------------------------------------------------------- schedule
def transformer_lr(step: int, d_model: int, warmup: int, factor: float = 1.0) -> float:
    """lrate = factor * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)   (paper, section 5.3).

    It rises linearly for `warmup` steps, peaks at factor / sqrt(d_model * warmup), then decays
    as 1/sqrt(step). Steps count from 1 (step 0 is treated as step 1).
    """
    d_model = positive_int(d_model, "d_model")
    warmup = positive_int(warmup, "warmup")
    factor = positive_float(factor, "factor")
    step = max(int(step), 1)
    return factor * d_model ** -0.5 * min(step ** -0.5, step * warmup ** -1.5)


def scheduled_lr(step: int, config: "TrainConfig") -> float:
    """The learning rate of a training step: the paper's schedule, then (with config.cooldown > 0)
    a linear fall to zero over the last cooldown * steps steps.

    The paper trained 100,000 steps and stopped while the rate was still 1/sqrt(step)-sized; a
    short run ends far better when the rate is brought down at the end (the weights settle
    instead of jumping around the minimum).
    """
    rate = transformer_lr(step, config.d_model, config.warmup, config.lr_factor)
    cooldown_steps = int(round(config.cooldown * config.steps))
    if cooldown_steps > 0:
        rate *= min(1.0, max(config.steps - step + 1, 0) / cooldown_steps)
    return rate


# ---------------------------------------------------------------------- loss
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
        self.pad_id = int(pad_id)

    def forward(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        if logits.dim() != 3 or target.shape != logits.shape[:2]:
            raise ValueError(f"logits must have shape (batch, L, V) and target (batch, L), got "
                             f"{tuple(logits.shape)} and {tuple(target.shape)}")
        log_probs = torch.log_softmax(logits.float(), dim=-1)  # (batch, L, V)
        nll = -log_probs.gather(-1, target.unsqueeze(-1)).squeeze(-1)  # (batch, L)
        uniform = -log_probs.mean(dim=-1)  # cross-entropy with the uniform distribution
        loss = (1.0 - self.smoothing) * nll + self.smoothing * uniform
        keep = target != self.pad_id
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


# ---------------------------------------------------------------------- configuration
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
    seed: int = 0

    def to_dict(self) -> dict:
        return asdict(self)

    def peak_lr(self) -> float:
        return transformer_lr(self.warmup, self.d_model, self.warmup, self.lr_factor)


# Notebook 05 trains exactly this (benchmarks/bench_time_to_accuracy.py measures it too).
NOTEBOOK_CONFIG = TrainConfig(d_model=64, num_heads=4, num_layers=2, d_ff=256, dropout=0.0, norm_first=False,
                              batch_size=128, steps=1200, warmup=200, lr_factor=0.5, cooldown=0.4,
                              label_smoothing=0.1, seed=0)
NOTEBOOK_DATA = dict(n_train=60_000, n_valid=1_000, n_test=2_000, seed=0)


def build_model(config: TrainConfig, src_vocab_size: int = len(SOURCE_VOCAB),
                tgt_vocab_size: int = len(TARGET_VOCAB), max_len: int = 64) -> Transformer:
    """A Transformer of the configuration's size, initialised from config.seed."""
    torch.manual_seed(config.seed)
    return Transformer(src_vocab_size, tgt_vocab_size, d_model=config.d_model, num_heads=config.num_heads,
                       num_layers=config.num_layers, d_ff=config.d_ff, dropout=config.dropout, max_len=max_len,
                       pad_id=SOURCE_VOCAB.pad_id, norm_first=config.norm_first)


# ---------------------------------------------------------------------- batches
class LengthBucketedBatches:
    """Endless training batches (src (B, L_src), tgt (B, 12)) in which the sources have similar lengths.

    Each epoch shuffles the pairs (seeded), sorts them by source length (a stable sort, so equal
    lengths stay shuffled), cuts batches of batch_size and shuffles the batch order. Similar
    lengths mean little padding: the steps are faster and every batch still mixes formats.
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
        perm = torch.randperm(len(self.src), generator=self.generator)
        order = perm[torch.sort(self.lengths[perm], stable=True).indices]
        chunks = list(torch.split(order, self.batch_size))
        batches = []
        for i in torch.randperm(len(chunks), generator=self.generator).tolist():
            idx = chunks[i]
            length = int(self.lengths[idx].max())
            batches.append((self.src[idx, :length], self.tgt[idx]))
        return batches

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        while True:
            yield from self.epoch()


# ---------------------------------------------------------------------- training loop
@dataclass
class History:
    """What train_model records: per step the loss and the learning rate, plus the wall time."""

    loss: list[float] = field(default_factory=list)
    lr: list[float] = field(default_factory=list)
    seconds: float = 0.0
    device: str = "cpu"
    threads: int = 1

    def to_dict(self) -> dict:
        return asdict(self)


def make_optimizer(model: nn.Module, config: TrainConfig):
    """Adam with the paper's betas (0.9, 0.98) and eps 1e-9, and scheduled_lr as a LambdaLR."""
    optimizer = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda i: scheduled_lr(i + 1, config))
    return optimizer, schedule


def train_model(model: Transformer, batches: Iterator, config: TrainConfig, device: str | None = None,
                progress: bool = True, callback: Callable[[int, Transformer], bool] | None = None,
                callback_every: int = 100) -> History:
    """Train for config.steps steps with teacher forcing; return the History.

    Each step: the decoder reads tgt[:, :-1] (<s> and the first characters) and is scored on
    predicting tgt[:, 1:] (the characters and </s>). callback(step, model), if given, runs every
    callback_every steps outside the timed part; returning True stops training early.
    """
    device = device or default_device()
    model.to(device).train()
    optimizer, schedule = make_optimizer(model, config)
    loss_fn = LabelSmoothingLoss(config.label_smoothing, TARGET_VOCAB.pad_id)
    history = History(device=str(device), threads=torch.get_num_threads())
    iterator = iter(batches)
    bar = None
    if progress:
        from tqdm import tqdm
        bar = tqdm(total=config.steps, desc="training", unit="step", mininterval=2.0, ncols=90)
    elapsed, start = 0.0, time.perf_counter()
    for step in range(1, config.steps + 1):
        src, tgt = next(iterator)
        src, tgt = src.to(device), tgt.to(device)
        logits = model(src, tgt[:, :-1])  # (batch, 11, V)
        loss = loss_fn(logits, tgt[:, 1:])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        history.lr.append(schedule.get_last_lr()[0])
        schedule.step()
        history.loss.append(loss.item())
        if bar is not None:
            bar.update(1)
            if step % 50 == 0:
                bar.set_postfix(loss=f"{history.loss[-1]:.3f}", refresh=False)
        if callback is not None and step % callback_every == 0:
            elapsed += time.perf_counter() - start
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


# ---------------------------------------------------------------------- decoding and accuracy
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


# ---------------------------------------------------------------------- the checkpoint cache
_CODE_MODULES = ("transformer.py", "multi_head.py", "positional.py", "masking.py", "training.py", "dates.py")


def cache_dir() -> Path:
    """$TFS_CACHE_DIR, else <repository>/.cache/checkpoints, else ~/.cache/transformers-from-scratch."""
    if os.environ.get("TFS_CACHE_DIR"):
        return Path(os.environ["TFS_CACHE_DIR"]).expanduser()
    root = Path(__file__).resolve().parent.parent
    if (root / "pyproject.toml").exists() and os.access(root, os.W_OK):
        return root / ".cache" / "checkpoints"
    return Path.home() / ".cache" / "transformers-from-scratch"


def checkpoint_key(config: TrainConfig, data: DateDataset) -> str:
    """A hash of the configuration, the data and the code: equal keys mean equal training runs."""
    h = hashlib.sha256(json.dumps(config.to_dict(), sort_keys=True).encode())
    h.update(data.fingerprint().encode())
    here = Path(__file__).resolve().parent
    for name in _CODE_MODULES:
        path = here / name
        h.update(path.read_bytes() if path.exists() else name.encode())
    return h.hexdigest()[:16]


def checkpoint_path(config: TrainConfig, data: DateDataset) -> Path:
    return cache_dir() / f"dates-{checkpoint_key(config, data)}.pt"


@dataclass
class TrainResult:
    model: Transformer
    history: History
    trained: bool  # False when the weights were loaded from the cache
    path: Path

    def describe(self) -> str:
        h = self.history
        if self.trained:
            return (f"Trained for {len(h.loss)} steps in {h.seconds:.0f} s on {h.device} "
                    f"({h.threads} threads); saved to {self.path}.")
        return (f"Loaded the trained weights from {self.path} (training took {h.seconds:.0f} s on {h.device}). "
                "Pass retrain=True to train again.")


def train_or_load(config: TrainConfig, data: DateDataset, retrain: bool = False, device: str | None = None,
                  progress: bool = True) -> TrainResult:
    """Load the checkpoint of (config, data, code) from the cache, or train and save it.

    retrain=True, or the environment variable TFS_RETRAIN=1, trains even when a checkpoint exists.
    """
    device = device or default_device()
    path = checkpoint_path(config, data)
    retrain = retrain or os.environ.get("TFS_RETRAIN", "") not in ("", "0")
    model = build_model(config)
    if path.exists() and not retrain:
        try:
            saved = torch.load(path, map_location=device, weights_only=True)
            model.load_state_dict(saved["model"])
            history = History(**saved["history"])
            return TrainResult(model.to(device).eval(), history, False, path)
        except Exception:  # a corrupt or outdated file: train again
            pass
    batches = LengthBucketedBatches(data.train, config.batch_size, seed=config.seed)
    history = train_model(model, batches, config, device=device, progress=progress)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        torch.save({"model": model.state_dict(), "history": history.to_dict(), "config": config.to_dict()}, tmp)
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only checkout still trains; it just cannot cache
    return TrainResult(model, history, True, path)


__all__ = ["NOTEBOOK_CONFIG", "NOTEBOOK_DATA", "History", "LabelSmoothingLoss", "LengthBucketedBatches", "TrainConfig", "TrainResult", "build_model",
           "cache_dir", "checkpoint_key", "checkpoint_path", "default_device", "exact_match", "greedy_decode",
           "loss_floor", "make_optimizer", "predict", "scheduled_lr", "train_model", "train_or_load", "transformer_lr"]
