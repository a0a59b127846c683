"""Train once, load after: the checkpoint cache of notebook 06's model.

The cache lives in ``<repository>/.cache/checkpoints`` (git-ignored), or in the folder named by the
environment variable ``TFS_CACHE_DIR``. A checkpoint's name is a hash of everything that decides its
weights: the training configuration (seed included), the data set and the source code of the
modules that build and train the model, and the fingerprint of the student's own code when notebook
06 trains it (a Recipe from helpers.student_code.your_recipe). Change any of them and the model is trained again; pass
``retrain=True`` (or set ``TFS_RETRAIN=1``) to retrain anyway.

A checkpoint stores a SHA-256 of its weights (every tensor's name, dtype, shape and bytes; torch does
not verify its archive's CRC). Loading recomputes it, and loads only when every tensor matches a freshly
built model's by name and shape, into that fresh model; otherwise the model is trained again from a fresh
seeded model, and one line says why. Saving writes a temporary file and renames it (os.replace), so an
interrupted save leaves no half file.

    train_or_load(config, data, recipe)   the trained model: from the cache, or trained now and saved
    weights_sha256(state_dict)            the digest stored with a checkpoint
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

import torch

from .dates import DateDataset
from .notebook_io import normalized, write_atomically
from .training import REFERENCE, History, Recipe, ShuffledBatches, TrainConfig, build_model, default_device, train_model
from .transformer import Transformer


# The validation curve of notebook 06: the exact match on the first VALID_DATES validation dates, measured
# every VALID_EVERY steps while training (it changes no weight; it is stored with the history).
VALID_DATES, VALID_EVERY = 500, 50

# The modules whose code decides the trained weights (decoding and this cache do not).
_CODE_MODULES = ("transformer.py", "layers.py", "multi_head.py", "positional.py", "masking.py", "dates.py",
                 "schedule.py", "loss.py", "training.py")


def cache_dir() -> Path:
    """$TFS_CACHE_DIR, else <repository>/.cache/checkpoints, else ~/.cache/transformers-from-scratch."""
    if os.environ.get("TFS_CACHE_DIR"):
        return Path(os.environ["TFS_CACHE_DIR"]).expanduser()
    root = Path(__file__).resolve().parent.parent
    if (root / "pyproject.toml").exists() and os.access(root, os.W_OK):
        return root / ".cache" / "checkpoints"
    return Path.home() / ".cache" / "transformers-from-scratch"


def checkpoint_key(config: TrainConfig, data: DateDataset, recipe: Recipe = REFERENCE) -> str:
    """A hash of the configuration, the data and the code: equal keys mean equal training runs."""
    h = hashlib.sha256(json.dumps(config.to_dict(), sort_keys=True).encode())
    h.update(recipe.fingerprint.encode())  # the student's code in use; "" for the reference
    h.update(data.fingerprint().encode())
    h.update(f"valid {VALID_DATES} every {VALID_EVERY}".encode())  # what the stored history measured
    here = Path(__file__).resolve().parent
    for name in _CODE_MODULES:
        path = here / name
        h.update(normalized(path.read_text(encoding="utf-8")).encode() if path.exists() else name.encode())
    return h.hexdigest()[:16]


def thread_count(threads: int) -> str:
    """"1 thread" or "N threads", in the student's language."""
    from .i18n import number, tr

    if threads == 1:
        return tr("checkpoints:one_thread", "1 thread")
    return tr("checkpoints:threads", "{count} threads", count=number(threads))


def checkpoint_path(config: TrainConfig, data: DateDataset, recipe: Recipe = REFERENCE) -> Path:
    return cache_dir() / f"dates-{checkpoint_key(config, data, recipe)}.pt"


@dataclass
class TrainResult:
    model: Transformer
    history: History
    trained: bool  # False when the weights were loaded from the cache
    path: Path
    why_retrained: str | None = None  # why a checkpoint on disk was not used (None: there was none, or it loaded)

    def describe(self) -> str:
        """Whether the model was trained or loaded, where it is saved, and how long training took."""
        from .i18n import number, tr

        h = self.history
        if self.trained:
            return tr("checkpoints:trained", "Trained for {steps} steps in {seconds} s on {device} ({threads}); "
                      "saved to {path}.", steps=len(h.loss), seconds=number(h.seconds, 0), device=h.device,
                      threads=thread_count(h.threads), path=self.path)
        return tr("checkpoints:loaded", "Loaded the trained weights from {path} (training took {seconds} s on "
                  "{device}).", path=self.path.name, seconds=number(h.seconds, 0), device=h.device)


def weights_sha256(state_dict: dict) -> str:
    """A SHA-256 of a state dict: every tensor's name, dtype, shape and bytes, in name order."""
    h = hashlib.sha256()
    for name in sorted(state_dict):
        tensor = state_dict[name]
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"state_dict[{name!r}] is a {type(tensor).__name__}, not a tensor")
        flat = tensor.detach().cpu().contiguous().reshape(-1)
        h.update(f"{name}\x00{tensor.dtype}\x00{tuple(tensor.shape)}\x00".encode())
        h.update(flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b"")
    return h.hexdigest()


def _load_checkpoint(path: Path, fresh: torch.nn.Module) -> tuple[History | None, str | None]:
    """Load path into fresh (a freshly built model): (history, None), or (None, why not). Nothing is
    copied into fresh unless the digest and every tensor's name and shape match."""
    from .i18n import tr

    try:
        saved = torch.load(path, map_location="cpu", weights_only=True)
    except Exception:  # a truncated or garbled archive, or no torch file at all
        return None, tr("checkpoints:unreadable", "the file cannot be read as a checkpoint")
    if not isinstance(saved, dict) or not isinstance(saved.get("model"), dict) or "sha256" not in saved:
        return None, tr("checkpoints:no_digest", "it holds no weights with their SHA-256 (an older or foreign file)")
    weights = saved["model"]
    try:
        digest = weights_sha256(weights)
    except TypeError as error:
        return None, tr("checkpoints:not_tensors", "its weights are not all tensors ({error})", error=error)
    if digest != saved["sha256"]:
        return None, tr("checkpoints:digest_mismatch", "its weights do not match their stored SHA-256 (the file "
                        "was altered or damaged)")
    expected = fresh.state_dict()
    missing = sorted(set(expected) - set(weights))
    extra = sorted(set(weights) - set(expected))
    if missing or extra:
        return None, tr("checkpoints:names_differ", "its tensors are not the model's (missing: {missing}; "
                        "unexpected: {extra})", missing=", ".join(missing[:3]) or "-",
                        extra=", ".join(extra[:3]) or "-")
    for name, tensor in expected.items():
        if weights[name].shape != tensor.shape or weights[name].dtype != tensor.dtype:
            return None, tr("checkpoints:shape_differs", "tensor {name} has shape {got}, the model needs {expected}",
                            name=name, got=tuple(weights[name].shape), expected=tuple(tensor.shape))
        if tensor.is_floating_point() and not torch.isfinite(weights[name]).all():
            return None, tr("checkpoints:not_finite", "tensor {name} holds NaN or infinite values", name=name)
    try:
        history = History(**saved["history"])
    except Exception:
        return None, tr("checkpoints:no_history", "its training history is missing or damaged")
    fresh.load_state_dict(weights)  # every name and shape was checked: this copies all or nothing
    return history, None


def save_checkpoint(path: Path, model: torch.nn.Module, history: History, config: TrainConfig) -> None:
    """Save weights, their SHA-256, the history and the configuration atomically (notebook_io.write_atomically)."""
    weights = {name: tensor.detach().cpu() for name, tensor in model.state_dict().items()}
    saved = {"model": weights, "sha256": weights_sha256(weights), "history": history.to_dict(),
             "config": config.to_dict()}
    write_atomically(path, writer=lambda temporary: torch.save(saved, temporary))


def train_or_load(config: TrainConfig, data: DateDataset, recipe: Recipe = REFERENCE, retrain: bool = False,
                  device: str | None = None, progress: bool = True) -> TrainResult:
    """Load the checkpoint of (config, data, code) from the cache, or train and save it.

    recipe names the model class, the schedule, the loss and the training step (the reference by default).
    While training, the exact match on the first VALID_DATES validation dates is recorded every
    VALID_EVERY steps (history.valid_step, history.valid_exact_match).
    retrain=True, or the environment variable TFS_RETRAIN=1, trains even when a checkpoint exists.
    A checkpoint that fails its SHA-256 or whose tensors do not match the model by name and shape is
    not used: the model is trained again from a fresh seeded model, and one line says why.
    """
    from .i18n import tr

    if not isinstance(config, TrainConfig):
        raise TypeError(f"config must be a helpers.TrainConfig, got {type(config).__name__}")
    if not isinstance(data, DateDataset):
        raise TypeError(f"data must be a helpers.DateDataset (from helpers.make_date_dataset), "
                        f"got {type(data).__name__}")
    if not isinstance(recipe, Recipe):
        raise ValueError(f"recipe must be a helpers.training.Recipe, got {type(recipe).__name__}")  # as before
    device = device or default_device()
    path = checkpoint_path(config, data, recipe)
    retrain = retrain or os.environ.get("TFS_RETRAIN", "") not in ("", "0")
    why = None
    if path.exists() and not retrain:
        model = build_model(config, recipe)
        history, why = _load_checkpoint(path, model)
        if why is None:
            return TrainResult(model.to(device).eval(), history, False, path)
        print(tr("checkpoints:retraining", "The checkpoint {path} was not used: {why}. Training again from a "
                 "fresh model.", path=path, why=why))
    model = build_model(config, recipe)  # fresh and seeded, whatever a rejected checkpoint held
    batches = ShuffledBatches(data.train, config.batch_size, seed=config.seed)
    history = train_model(model, batches, config, device=device, progress=progress, recipe=recipe,
                          valid=data.valid[:VALID_DATES], valid_every=VALID_EVERY)
    try:
        save_checkpoint(path, model, history, config)
    except OSError:
        pass  # a read-only checkout still trains; it just cannot cache
    return TrainResult(model, history, True, path, why)


__all__ = ["VALID_DATES", "VALID_EVERY", "TrainResult", "cache_dir", "checkpoint_key", "checkpoint_path",
           "save_checkpoint", "thread_count", "train_or_load", "weights_sha256"]
