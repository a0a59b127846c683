"""Training notebook 07's GPTs: the date task as one sequence, and a language model on Python's own source.

    DATE_VOCAB, encode_date_pairs(pairs)      "<source><sep><target></s>" as one sequence of one vocabulary
    predict_dates(model, sources)             greedy decoding after "<source><sep>", with the KV cache
    SequenceBatches / TextBatches             endless seeded batches (inputs, labels) of each task
    GPTConfig                                 everything that decides the trained weights
    train_gpt(model, batches, config)         Adam(0.9, 0.98, 1e-9) + scheduled_lr, the loss on the labels that
                                              are not <pad>; optional samples of text while training
    train_or_load_gpt(config, task, ...)      trained once, then loaded from .cache/checkpoints (as notebook 06)
    your_gpt_parts(folder)                    the student's MultiHeadAttention, LayerNorm, PositionwiseFeedForward
                                              where their checks pass (notebooks 03 and 05), else the references
    describe_parts(origin)                    one line per part: yours or the reference, in the student's language
    with_your_block(parts, fingerprint, cls)  those parts and the student's GPTBlock, once its check passes
"""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import torch
from torch import nn

from .checkpoints import cache_dir, thread_count, weights_sha256
from .dates import EOS, PAD, SOURCE_CHARS, UNK, Vocabulary
from .gpt import GPT
from .loss import LabelSmoothingLoss
from .notebook_io import normalized, write_atomically
from .sampling import generate
from .schedule import scheduled_lr

SEP = "<sep>"
DATE_VOCAB = Vocabulary(SOURCE_CHARS, [PAD, UNK, SEP, EOS])  # the source characters (digits and "-" among them)
TARGET_LENGTH = 11  # ten characters and </s>, as notebook 06's decoder writes


def encode_date_pairs(pairs: Sequence[tuple[str, str]]) -> tuple[torch.Tensor, torch.Tensor]:
    """(inputs, labels), each (N, L): the sequence source, <sep>, target, </s>, right-padded; inputs is it
    without its last token, labels without its first, and <pad> (not scored) wherever the label is not
    part of the target: only the 11 tokens after <sep> are learned, as notebook 06's decoder learns them."""
    rows = [DATE_VOCAB.encode(s) + [DATE_VOCAB.stoi[SEP]] + DATE_VOCAB.encode(t) + [DATE_VOCAB.eos_id]
            for s, t in pairs]
    length = max(len(r) for r in rows)
    seq = torch.full((len(rows), length), DATE_VOCAB.pad_id, dtype=torch.long)
    labels = torch.full((len(rows), length - 1), DATE_VOCAB.pad_id, dtype=torch.long)
    for i, row in enumerate(rows):
        seq[i, :len(row)] = torch.tensor(row)
        labels[i, len(row) - 1 - TARGET_LENGTH:len(row) - 1] = torch.tensor(row[-TARGET_LENGTH:])
    return seq[:, :-1], labels


@torch.no_grad()
def predict_dates(model: GPT, sources: Sequence[str], batch_size: int = 500) -> list[str]:
    """The model's greedy answer for each written date: the 11 tokens after "<source><sep>", decoded up to </s>.
    Prompts of equal length are decoded together, so no prompt needs padding."""
    prompts = [DATE_VOCAB.encode(s) + [DATE_VOCAB.stoi[SEP]] for s in sources]
    answers: list[str] = [""] * len(prompts)
    device = next(model.parameters()).device
    by_length: dict[int, list[int]] = {}
    for i, prompt in enumerate(prompts):
        by_length.setdefault(len(prompt), []).append(i)
    for rows in by_length.values():
        for start in range(0, len(rows), batch_size):
            chunk = rows[start:start + batch_size]
            ids = torch.tensor([prompts[i] for i in chunk], device=device)
            out = generate(model, ids, TARGET_LENGTH, temperature=0)[:, ids.shape[1]:]
            for i, row in zip(chunk, out.tolist()):
                answers[i] = DATE_VOCAB.decode(row)
    return answers


class SequenceBatches:
    """Endless batches (inputs, labels) of randomly drawn rows, each batch cut to its longest row (seeded)."""

    def __init__(self, inputs: torch.Tensor, labels: torch.Tensor, batch_size: int, seed: int = 0):
        self.inputs, self.labels, self.batch_size = inputs, labels, batch_size
        self.lengths = (inputs != DATE_VOCAB.pad_id).sum(dim=1)
        self.generator = torch.Generator().manual_seed(seed)

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        while True:
            for idx in torch.split(torch.randperm(len(self.inputs), generator=self.generator), self.batch_size):
                length = int(self.lengths[idx].max())
                yield self.inputs[idx, :length], self.labels[idx, :length]


class TextBatches:
    """Endless batches of batch_size windows of context + 1 tokens from ids, at seeded random places:
    (inputs, labels) = (window[:-1], window[1:]), each (batch_size, context)."""

    def __init__(self, ids: torch.Tensor, context: int, batch_size: int, seed: int = 0):
        self.ids, self.context, self.batch_size = ids, context, batch_size
        self.generator = torch.Generator().manual_seed(seed)

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        offsets = torch.arange(self.context + 1)
        while True:
            starts = torch.randint(0, len(self.ids) - self.context - 1, (self.batch_size,), generator=self.generator)
            windows = self.ids[starts[:, None] + offsets]  # (batch, context + 1)
            yield windows[:, :-1], windows[:, 1:]


@dataclass(frozen=True)
class GPTConfig:
    """Everything that decides a trained GPT (with its data and the code). The schedule is notebook 06's:
    lr_factor x the paper's warm-up formula, with a linear cool-down over the last `cooldown` of the steps;
    schedule="constant" starts at that formula's peak, lr_factor / sqrt(d_model * warmup), keeps it, and
    cools down the same way (no warm-up); schedule="warmup_constant" rises linearly to that peak over the
    `warmup` steps, then is "constant" (the two differ in the warm-up steps only)."""

    d_model: int = 64
    num_heads: int = 4
    num_layers: int = 4
    d_ff: int = 256
    dropout: float = 0.0
    norm_first: bool = True
    tie_weights: bool = True
    max_len: int = 64
    batch_size: int = 128
    steps: int = 600
    warmup: int = 200
    lr_factor: float = 0.5
    cooldown: float = 0.4
    label_smoothing: float = 0.1
    schedule: str = "warmup"  # "constant": the peak rate from the first step; "warmup_constant": warm-up, then it
    seed: int = 0

    def __post_init__(self) -> None:
        if self.schedule not in SCHEDULES:
            raise ValueError(f"schedule must be one of {', '.join(map(repr, SCHEDULES))}, got {self.schedule!r}")

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class GPTHistory:
    """Per step the loss and the learning rate; the samples written while training (step, text); the
    training time (samples excluded)."""

    loss: list[float] = field(default_factory=list)
    lr: list[float] = field(default_factory=list)
    samples: list[tuple[int, str]] = field(default_factory=list)
    seconds: float = 0.0  # wall time
    cpu_seconds: float = 0.0  # processor time of this process (all its threads)
    device: str = "cpu"
    threads: int = 1


def build_gpt(config: GPTConfig, vocab_size: int, parts: dict[str, Any] | None = None) -> GPT:
    """A GPT of the configuration's size, initialised from config.seed; parts: attention=, layer_norm=, ..."""
    torch.manual_seed(config.seed)
    return GPT(vocab_size, config.d_model, config.num_heads, config.num_layers, config.d_ff, config.dropout,
               config.max_len, config.norm_first, config.tie_weights, **(parts or {}))


def peak_rate(step: int, d_model: int, warmup: int) -> float:
    """The warm-up formula's highest rate, (d_model * warmup)^-0.5, at every step."""
    return (d_model * warmup) ** -0.5


def warmup_then_peak(step: int, d_model: int, warmup: int) -> float:
    """A linear rise to the warm-up formula's peak over the warm-up steps (the formula itself there), then the peak."""
    return (d_model * warmup) ** -0.5 * min(1.0, step / warmup)


SCHEDULES = {"warmup": None, "constant": peak_rate, "warmup_constant": warmup_then_peak}  # None: transformer_lr


def train_gpt(model: GPT, batches: Iterator, config: GPTConfig, device: str = "cpu", progress: bool = True,
              sample: Callable[[GPT], str] | None = None, sample_every: int = 100) -> GPTHistory:
    """Train for config.steps steps; the loss (label smoothing, <pad> labels not scored) of each step is recorded.
    sample(model), if given, writes a text every sample_every steps (in eval mode, not counted in the time)."""
    model.to(device).train()
    optimizer = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)
    formula = SCHEDULES[config.schedule]  # None: the paper's warm-up formula
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda i: scheduled_lr(i + 1, config, formula))
    loss_fn = LabelSmoothingLoss(config.label_smoothing, DATE_VOCAB.pad_id)
    history = GPTHistory(device=str(device), threads=torch.get_num_threads())
    bar = None
    if progress:
        from tqdm import tqdm

        from .i18n import tr
        bar = tqdm(total=config.steps, desc=tr("training:progress", "training"),
                   unit=tr("training:progress_unit", "step"), mininterval=2.0, ncols=90)
    iterator, elapsed, start, cpu_start = iter(batches), 0.0, time.perf_counter(), time.process_time()
    for step in range(1, config.steps + 1):
        inputs, labels = (t.to(device) for t in next(iterator))
        history.lr.append(schedule.get_last_lr()[0])
        loss = loss_fn(model(inputs), labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        schedule.step()
        history.loss.append(loss.item())
        if bar is not None:
            bar.update(1)
        if sample is not None and (step % sample_every == 0 or step == 1):
            elapsed += time.perf_counter() - start
            history.cpu_seconds += time.process_time() - cpu_start
            model.eval()
            history.samples.append((step, sample(model)))
            model.train()
            start, cpu_start = time.perf_counter(), time.process_time()
    history.seconds = elapsed + time.perf_counter() - start
    history.cpu_seconds += time.process_time() - cpu_start
    if bar is not None:
        bar.close()
    return history


@dataclass
class GPTResult:
    model: GPT
    history: GPTHistory
    trained: bool
    path: Path

    def describe(self) -> str:
        """Whether the model was trained or loaded, and how long training took."""
        from .i18n import number, tr

        h = self.history
        if self.trained:
            return tr("gpt_training:trained", "Trained for {steps} steps in {seconds} s on {device} ({threads}); "
                      "saved to {path}.", steps=len(h.loss), seconds=number(h.seconds, 0), device=h.device,
                      threads=thread_count(h.threads), path=self.path.name)
        return tr("gpt_training:loaded", "Loaded the trained weights from {path} (training took {seconds} s on "
                  "{device}, {threads}).", path=self.path.name, seconds=number(h.seconds, 0), device=h.device,
                  threads=thread_count(h.threads))


CODE_MODULES = ("gpt.py", "layers.py", "multi_head.py", "masking.py", "loss.py", "schedule.py")


def code_key() -> str:
    """A hash of the code that decides the weights: the modules of the model, the loss and the schedule, and
    this module's data encoding, batches, configuration and training loop (not its decoding or reporting)."""
    h = hashlib.sha256()
    here = Path(__file__).resolve().parent
    for name in CODE_MODULES:
        h.update(normalized((here / name).read_text(encoding="utf-8")).encode())
    for obj in (encode_date_pairs, SequenceBatches, TextBatches, GPTConfig, build_gpt, peak_rate, warmup_then_peak,
                train_gpt):
        h.update(normalized(inspect.getsource(obj)).encode())
    return h.hexdigest()


def checkpoint_path(config: GPTConfig, task: str, data_key: str, fingerprint: str = "") -> Path:
    """<cache>/gpt-<task>-<hash of the configuration, the data, the code and the student's code in use>.pt"""
    h = hashlib.sha256(json.dumps(config.to_dict(), sort_keys=True).encode())
    h.update(f"{task}\n{data_key}\n{fingerprint}\n{code_key()}".encode())
    return cache_dir() / f"gpt-{task}-{h.hexdigest()[:16]}.pt"


def load_gpt(path: Path, fresh: GPT) -> GPTHistory | None:
    """The history, with the weights loaded into fresh, when the file's SHA-256 and every tensor's name and
    shape match; None otherwise (nothing is loaded)."""
    try:
        saved = torch.load(path, map_location="cpu", weights_only=True)
        weights = saved["model"]
        if weights_sha256(weights) != saved["sha256"]:
            return None
        expected = fresh.state_dict()
        if set(expected) != set(weights) or any(weights[k].shape != v.shape for k, v in expected.items()):
            return None
        history = GPTHistory(**{**saved["history"], "samples": [tuple(s) for s in saved["history"]["samples"]]})
    except Exception:  # noqa: BLE001 - any unreadable or foreign file: train again
        return None
    fresh.load_state_dict(weights)
    return history


def train_or_load_gpt(config: GPTConfig, task: str, data_key: str, batches: Callable[[], Iterator], vocab_size: int,
                      parts: dict[str, Any] | None = None, fingerprint: str = "", retrain: bool = False,
                      device: str = "cpu", progress: bool = True, sample: Callable[[GPT], str] | None = None,
                      sample_every: int = 100) -> GPTResult:
    """The GPT of (config, task, data, code) from the cache, or trained now (batches() gives its batches) and saved."""
    path = checkpoint_path(config, task, data_key, fingerprint)
    retrain = retrain or os.environ.get("TFS_RETRAIN", "") not in ("", "0")
    model = build_gpt(config, vocab_size, parts)
    if path.exists() and not retrain:
        history = load_gpt(path, model)
        if history is not None:
            return GPTResult(model.to(device).eval(), history, False, path)
        model = build_gpt(config, vocab_size, parts)
    history = train_gpt(model, batches(), config, device, progress, sample, sample_every)
    model.eval()
    weights = {name: tensor.detach().cpu() for name, tensor in model.state_dict().items()}
    saved = {"model": weights, "sha256": weights_sha256(weights), "history": asdict(history),
             "config": config.to_dict()}
    try:
        write_atomically(path, writer=lambda temporary: torch.save(saved, temporary))
    except OSError:
        pass  # a read-only checkout still trains; it just cannot cache
    return GPTResult(model, history, True, path)


@torch.no_grad()
def text_loss(model: GPT, ids: torch.Tensor, context: int, windows: int = 64) -> float:
    """The mean cross-entropy (nats per character) of the model on `windows` evenly spaced windows of ids."""
    model.eval()
    starts = torch.linspace(0, len(ids) - context - 1, windows).long()
    batch = ids[starts[:, None] + torch.arange(context + 1)]
    logits = model(batch[:, :-1])
    return nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch[:, 1:].reshape(-1)).item()


def your_gpt_parts(folder: str | Path = ".") -> tuple[dict[str, Any], dict[str, str], str]:
    """(parts, origin, fingerprint): attention=, layer_norm=, feed_forward= for the GPT blocks, the student's own
    (their MultiHeadAttention of notebook 03, LayerNorm and PositionwiseFeedForward of notebook 05, read from
    their saved notebooks in folder) where their checks pass, the references otherwise; origin: class name ->
    "yours" or "reference"; fingerprint: a hash of the student's code in use ("" for the references alone)."""
    from .student_code import (Choice, find_notebooks, notebook_parts, student_or_reference,
                               your_attention_and_encoding)

    paths = find_notebooks(Path(folder), ["01_positional_encoding", "03_multi_head_attention", "05_transformer"])
    earlier = your_attention_and_encoding(paths=paths)
    later = student_or_reference(paths["05_transformer"], notebook_parts("05_transformer"), given=earlier.objects)
    choice = Choice.joined(earlier, later)
    names = {"MultiHeadAttention": "attention", "LayerNorm": "layer_norm", "PositionwiseFeedForward": "feed_forward"}
    parts = {keyword: choice.objects[name] for name, keyword in names.items()}
    origin = {name: choice.origin[name] for name in names}
    sources = {name: source for name, source in choice.sources.items() if name in names and origin[name] == "yours"}
    fingerprint = Choice({}, {}, {}, sources).fingerprint() if sources else ""
    return parts, origin, fingerprint


def describe_parts(origin: dict[str, str]) -> str:
    """One line per part of origin (class name -> "yours" or "reference"): whose code it is, in the student's
    language."""
    from .i18n import tr

    marks = {"yours": tr("training:mark_yours", "yours"), "reference": tr("training:mark_reference", "reference")}
    width = max(len(mark) for mark in marks.values())
    return "\n".join(f"{marks[whose]:>{width}}  {name}" for name, whose in origin.items())


def with_your_block(parts: dict[str, Any], fingerprint: str, block: Any) -> tuple[dict[str, Any], str]:
    """(parts, fingerprint) for a GPT of pre-norm blocks: block (the student's GPTBlock class of notebook 07) added
    as block= when its check passes, and its source added to the fingerprint; parts and fingerprint unchanged
    otherwise (the GPT then builds helpers.gpt.GPTBlock on the parts)."""
    from .checks import gpt_block  # registers the exercise
    from .student_code import Choice, source_of, verdict_quietly

    if not verdict_quietly(gpt_block.check_gpt_block, block):
        return dict(parts), fingerprint
    own = Choice({}, {}, {}, {"GPTBlock": source_of(block)}).fingerprint()
    return {**parts, "block": block}, hashlib.sha256(f"{fingerprint}\n{own}".encode()).hexdigest()[:16]


def replace(config: GPTConfig, **changes: Any) -> GPTConfig:
    return dataclasses.replace(config, **changes)


__all__ = ["DATE_VOCAB", "SEP", "TARGET_LENGTH", "GPTConfig", "GPTHistory", "GPTResult", "SequenceBatches",
           "SCHEDULES", "TextBatches", "build_gpt", "checkpoint_path", "describe_parts",
           "encode_date_pairs", "load_gpt", "predict_dates",
           "replace", "text_loss", "train_gpt", "train_or_load_gpt", "with_your_block", "your_gpt_parts"]
