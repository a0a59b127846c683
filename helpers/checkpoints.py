"""Train once, load after: the checkpoint cache of notebook 06's model.

The cache lives in ``<repository>/.cache/checkpoints`` (git-ignored), or in the folder named by the
environment variable ``TFS_CACHE_DIR``. A checkpoint's name is a hash of everything that decides its
weights: the training configuration (seed included), the data set and the source code of the
modules that build and train the model, and the fingerprint of the student's own code when notebook
06 trains it (a Recipe from helpers.student_code.your_recipe). Change any of them and the model is trained again; pass
``retrain=True`` (or set ``TFS_RETRAIN=1``) to retrain anyway.

    train_or_load(config, data, recipe)   the trained model: from the cache, or trained now and saved
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

import torch

from .dates import DateDataset
from .training import REFERENCE, History, Recipe, ShuffledBatches, TrainConfig, build_model, default_device, train_model
from .transformer import Transformer


# The modules whose code decides the trained weights (decoding and this cache do not).
_CODE_MODULES = ("transformer.py", "multi_head.py", "positional.py", "masking.py", "dates.py", "schedule.py", "loss.py",
                 "training.py")


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
    here = Path(__file__).resolve().parent
    for name in _CODE_MODULES:
        path = here / name
        h.update(path.read_bytes() if path.exists() else name.encode())
    return h.hexdigest()[:16]


def checkpoint_path(config: TrainConfig, data: DateDataset, recipe: Recipe = REFERENCE) -> Path:
    return cache_dir() / f"dates-{checkpoint_key(config, data, recipe)}.pt"


@dataclass
class TrainResult:
    model: Transformer
    history: History
    trained: bool  # False when the weights were loaded from the cache
    path: Path

    def describe(self) -> str:
        """Whether the model was trained or loaded, where it is saved, and how long training took."""
        from .i18n import tr

        h = self.history
        if self.trained:
            return tr("checkpoints:trained", "Trained for {steps} steps in {seconds:.0f} s on {device} ({threads} "
                      "threads); saved to {path}.", steps=len(h.loss), seconds=h.seconds, device=h.device,
                      threads=h.threads, path=self.path)
        return tr("checkpoints:loaded", "Loaded the trained weights from {path} (training took {seconds:.0f} s on "
                  "{device}). Pass retrain=True to train again.", path=self.path, seconds=h.seconds, device=h.device)


def train_or_load(config: TrainConfig, data: DateDataset, recipe: Recipe = REFERENCE, retrain: bool = False,
                  device: str | None = None, progress: bool = True) -> TrainResult:
    """Load the checkpoint of (config, data, code) from the cache, or train and save it.

    recipe names the model class, the schedule and the loss that train (the reference by default).
    retrain=True, or the environment variable TFS_RETRAIN=1, trains even when a checkpoint exists.
    """
    device = device or default_device()
    if not isinstance(recipe, Recipe):
        raise ValueError(f"recipe must be a helpers.training.Recipe, got {type(recipe).__name__}")
    path = checkpoint_path(config, data, recipe)
    retrain = retrain or os.environ.get("TFS_RETRAIN", "") not in ("", "0")
    model = build_model(config, recipe)
    if path.exists() and not retrain:
        try:
            saved = torch.load(path, map_location=device, weights_only=True)
            model.load_state_dict(saved["model"])
            history = History(**saved["history"])
            return TrainResult(model.to(device).eval(), history, False, path)
        except Exception:  # a corrupt or outdated file: train again
            pass
    batches = ShuffledBatches(data.train, config.batch_size, seed=config.seed)
    history = train_model(model, batches, config, device=device, progress=progress, recipe=recipe)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        torch.save({"model": model.state_dict(), "history": history.to_dict(), "config": config.to_dict()}, tmp)
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only checkout still trains; it just cannot cache
    return TrainResult(model, history, True, path)


__all__ = ["TrainResult", "cache_dir", "checkpoint_key", "checkpoint_path", "train_or_load"]
