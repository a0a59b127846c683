"""Checkpoints verified: a SHA-256 of the weights is stored and checked, tensors must match the model by
name and shape, anything else retrains from a fresh seeded model and says why; saving is atomic."""

import pytest
import torch

from helpers.checkpoints import _load_checkpoint, checkpoint_path, save_checkpoint, train_or_load, weights_sha256
from helpers.dates import make_date_dataset
from helpers.training import TrainConfig, build_model

TINY = TrainConfig(d_model=16, num_heads=2, num_layers=1, d_ff=32, batch_size=32, steps=3, warmup=2)


@pytest.fixture(scope="module")
def tiny_data():
    return make_date_dataset(n_train=128, n_valid=16, n_test=16, seed=0)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TFS_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("TFS_RETRAIN", raising=False)
    return tmp_path


@pytest.fixture(scope="module")
def clean(tiny_data, tmp_path_factory):
    """What training from a fresh seeded model gives (the reference every retrain must equal)."""
    with pytest.MonkeyPatch.context() as m:
        m.setenv("TFS_CACHE_DIR", str(tmp_path_factory.mktemp("clean")))
        return train_or_load(TINY, tiny_data, retrain=True, device="cpu", progress=False)


def _same_weights(a, b):
    return all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))


def _retrains_cleanly(tiny_data, clean, capsys, why):
    capsys.readouterr()
    result = train_or_load(TINY, tiny_data, device="cpu", progress=False)
    out = capsys.readouterr().out
    assert result.trained and why in result.why_retrained
    assert out.count("\n") == 1 and "was not used" in out and why in out and "Training again" in out
    assert result.history.loss == clean.history.loss, "retrained from a fresh seeded model, not from the garbage"
    assert _same_weights(result.model, clean.model)
    return result


def test_a_saved_checkpoint_carries_the_sha256_of_its_weights_and_loads(tiny_data, cache, clean):
    first = train_or_load(TINY, tiny_data, device="cpu", progress=False)
    saved = torch.load(first.path, weights_only=True)
    assert saved["sha256"] == weights_sha256(first.model.state_dict()) and len(saved["sha256"]) == 64
    second = train_or_load(TINY, tiny_data, device="cpu", progress=False)
    assert not second.trained and second.why_retrained is None and _same_weights(first.model, second.model)
    assert [p.name for p in cache.iterdir()] == [first.path.name], "no temporary file is left behind"


def test_a_flipped_byte_inside_the_stored_weights_retrains(tiny_data, cache, clean, capsys):
    path = train_or_load(TINY, tiny_data, device="cpu", progress=False).path
    raw = bytearray(path.read_bytes())
    weights = torch.load(path, weights_only=True)["model"]
    name = max(weights, key=lambda n: weights[n].numel())
    where = raw.find(weights[name].numpy().tobytes())
    assert where > 0, "the weights are stored uncompressed"
    raw[where + 100] ^= 0x01
    path.write_bytes(bytes(raw))
    torch.load(path, weights_only=True)  # torch itself does not notice
    _retrains_cleanly(tiny_data, clean, capsys, "SHA-256")
    assert train_or_load(TINY, tiny_data, device="cpu", progress=False).trained is False, "the retrain was saved"


def _forge(path, model, change):
    """A checkpoint of model's weights after change(weights), with a SHA-256 that matches (as an honest save)."""
    weights = {k: v.clone() for k, v in model.state_dict().items()}
    change(weights)
    torch.save({"model": weights, "sha256": weights_sha256(weights), "history": clean_history(),
                "config": TINY.to_dict()}, path)


def clean_history():
    return {"loss": [1.0], "lr": [0.1], "seconds": 0.0, "device": "cpu", "threads": 1}


def _wrong_shape(weights):
    for name in weights:
        weights[name].fill_(7.0) if weights[name].is_floating_point() else None
    last = sorted(weights)[-1]
    weights[last] = torch.zeros(*[s + 1 for s in weights[last].shape])


def _missing(weights):
    for name in weights:
        weights[name].fill_(7.0) if weights[name].is_floating_point() else None
    del weights[sorted(weights)[0]]


def _nan(weights):
    name = sorted(weights)[0]
    weights[name] = torch.full_like(weights[name], float("nan"))


@pytest.mark.parametrize("change, why", [(_wrong_shape, "has shape"), (_missing, "missing:"),
                                         (_nan, "NaN or infinite")], ids=["wrong_shape", "missing", "nan"])
def test_garbage_tensors_or_wrong_shapes_retrain_without_partly_copying(tiny_data, cache, clean, capsys, change, why):
    _forge(checkpoint_path(TINY, tiny_data), build_model(TINY), change)
    _retrains_cleanly(tiny_data, clean, capsys, why)


def test_a_rejected_checkpoint_copies_nothing_into_the_model(tiny_data, cache):
    path = checkpoint_path(TINY, tiny_data)
    _forge(path, build_model(TINY), _wrong_shape)
    fresh = build_model(TINY)
    before = {k: v.clone() for k, v in fresh.state_dict().items()}
    history, why = _load_checkpoint(path, fresh)
    assert history is None and "has shape" in why
    assert all(torch.equal(before[k], v) for k, v in fresh.state_dict().items())


@pytest.mark.parametrize("content, why", [(b"not a checkpoint", "cannot be read"), (None, "SHA-256")],
                         ids=["not_torch", "no_digest"])
def test_a_foreign_file_retrains(tiny_data, cache, clean, capsys, content, why):
    path = checkpoint_path(TINY, tiny_data)
    path.parent.mkdir(parents=True, exist_ok=True)
    if content is None:  # the format of before this change: no digest
        torch.save({"model": build_model(TINY).state_dict(), "history": clean_history()}, path)
    else:
        path.write_bytes(content)
    _retrains_cleanly(tiny_data, clean, capsys, why)


def test_the_reason_speaks_spanish(tiny_data, cache, clean, capsys):
    from helpers.i18n import set_language

    checkpoint_path(TINY, tiny_data).parent.mkdir(parents=True, exist_ok=True)
    checkpoint_path(TINY, tiny_data).write_bytes(b"garbage")
    set_language("es")
    try:
        train_or_load(TINY, tiny_data, device="cpu", progress=False)
    finally:
        set_language("en")
    out = capsys.readouterr().out
    assert "No se usó" in out and "was not used" not in out


def test_an_interrupted_save_leaves_no_half_file(tiny_data, cache, clean, monkeypatch):
    import helpers.notebook_io as notebook_io

    path = checkpoint_path(TINY, tiny_data)

    def interrupted(src, dst):
        raise KeyboardInterrupt

    monkeypatch.setattr(notebook_io.os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        save_checkpoint(path, clean.model, clean.history, TINY)
    assert list(cache.iterdir()) == []


@pytest.mark.parametrize("argument, error", [("config", TypeError), ("data", TypeError), ("recipe", ValueError)])
def test_train_or_load_names_a_wrong_argument(tiny_data, argument, error):
    arguments = {"config": TINY, "data": tiny_data, argument: "x"}
    with pytest.raises(error, match=f"^{argument} must be a helpers"):
        train_or_load(**arguments)


def test_the_code_key_ignores_comments_docstrings_and_blank_lines_only():
    from helpers.notebook_io import normalized as code_text
    source = 'def f(x):\n    """Return x + 1 (é)."""\n    return x + 1  # one more\n'
    edited = 'def f(x):\n    """Return x plus one, a longer docstring\n    over two lines."""\n\n    return x + 1\n'
    changed = 'def f(x):\n    """Return x + 1 (é)."""\n    return x + 2  # one more\n'
    assert code_text(source) == code_text(edited) == "def f(x):\n    return x + 1"
    assert code_text(changed) != code_text(source)
    assert code_text('x = "# not a comment"\n') == 'x = "# not a comment"'
