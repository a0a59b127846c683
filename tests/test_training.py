"""Schedule, label smoothing, greedy decoding, a tiny overfit and the checkpoint cache (no full training)."""

import math

import pytest
import torch
import torch.nn.functional as F

from helpers.dates import TARGET_VOCAB, make_date_dataset
from helpers.checkpoints import checkpoint_key, checkpoint_path, train_or_load
from helpers.decoding import exact_match, greedy_decode, predict
from helpers.loss import LabelSmoothingLoss, loss_floor
from helpers.schedule import transformer_lr
from helpers.training import ShuffledBatches, TrainConfig, build_model, train_model
from helpers.transformer import Transformer

TINY = TrainConfig(d_model=16, num_heads=2, num_layers=1, d_ff=32, batch_size=32, steps=4, warmup=2)


@pytest.fixture(scope="module")
def tiny_data():
    return make_date_dataset(n_train=256, n_valid=16, n_test=32, seed=0)


def test_schedule_matches_the_paper():
    assert transformer_lr(1, 512, 4000) == pytest.approx(512 ** -0.5 * 4000 ** -1.5)
    peak = transformer_lr(4000, 512, 4000)
    assert peak == pytest.approx(512 ** -0.5 * 4000 ** -0.5)
    assert transformer_lr(3999, 512, 4000) < peak and transformer_lr(4001, 512, 4000) < peak
    assert transformer_lr(16000, 512, 4000) == pytest.approx(peak / 2)  # 1/sqrt(step) after warm-up
    assert transformer_lr(2000, 512, 4000) == pytest.approx(peak / 2)  # linear before it
    assert transformer_lr(0, 64, 100) == transformer_lr(1, 64, 100)
    assert transformer_lr(100, 64, 100, factor=2.0) == pytest.approx(2 * transformer_lr(100, 64, 100))
    with pytest.raises(ValueError, match="warmup"):
        transformer_lr(1, 64, 0)


@pytest.mark.parametrize("smoothing", [0.0, 0.1, 0.3])
def test_label_smoothing_equals_pytorch(smoothing):
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(3, 5, 7, generator=gen)
    target = torch.randint(1, 7, (3, 5), generator=gen)
    target[1, 3:] = 0
    ours = LabelSmoothingLoss(smoothing, pad_id=0)(logits, target)
    theirs = F.cross_entropy(logits.reshape(-1, 7), target.reshape(-1), label_smoothing=smoothing, ignore_index=0)
    torch.testing.assert_close(ours, theirs)


def test_loss_floor_is_reached_by_the_smoothed_target():
    eps, v = 0.1, 14
    probs = torch.full((1, 1, v), eps / v)
    probs[0, 0, 3] += 1 - eps
    loss = LabelSmoothingLoss(eps, pad_id=0)(probs.log(), torch.tensor([[3]]))
    assert float(loss) == pytest.approx(loss_floor(v, eps), rel=1e-5)
    assert loss_floor(v, 0.0) == 0.0 and 0.4 < loss_floor(v, eps) < 0.6
    with pytest.raises(ValueError, match="smoothing"):
        LabelSmoothingLoss(1.5)


def test_greedy_decode_equals_the_slow_way():
    torch.manual_seed(0)
    model = Transformer(10, 8, d_model=16, num_heads=2, num_layers=2, d_ff=32, max_len=20).eval()
    src = torch.randint(3, 10, (4, 6))
    src[0, -2:] = 0
    out = greedy_decode(model, src, 5, 1, -1)
    ys = torch.ones(4, 1, dtype=torch.long)
    with torch.no_grad():
        for _ in range(5):  # recompute everything from scratch with forward() each step
            ys = torch.cat([ys, model(src, ys)[:, -1].argmax(-1, keepdim=True)], dim=1)
    assert torch.equal(out, ys[:, 1:])
    first = int(out[0, 0])  # a token every row's decoding may stop on
    stopped = greedy_decode(model, src, 5, 1, first)
    assert stopped.shape[1] <= 5 and torch.equal(stopped[0, :1], out[0, :1])


def test_tiny_model_overfits_a_few_batches():
    data = make_date_dataset(n_train=64, n_valid=8, n_test=8, seed=1)
    config = TrainConfig(d_model=32, num_heads=2, num_layers=1, d_ff=64, dropout=0.0, batch_size=64, steps=60,
                         warmup=10, lr_factor=0.5)
    model = build_model(config)
    history = train_model(model, ShuffledBatches(data.train, 64), config, device="cpu", progress=False)
    assert len(history.loss) == 60 and len(history.lr) == 60
    assert history.loss[-1] < 0.6 * history.loss[0]
    assert history.lr[9] == pytest.approx(max(history.lr))  # the peak is at the end of warm-up


def test_callback_can_stop_training(tiny_data):
    calls = []
    model = build_model(TINY)
    config = TrainConfig(**{**TINY.to_dict(), "steps": 10})
    history = train_model(model, ShuffledBatches(tiny_data.train, 32), config, device="cpu", progress=False,
                          callback=lambda step, m: calls.append(step) or step >= 4, callback_every=2)
    assert calls == [2, 4] and len(history.loss) == 4


def test_the_validation_exact_match_is_recorded_and_changes_no_weight(tiny_data):
    config = TrainConfig(**{**TINY.to_dict(), "steps": 6})
    plain = build_model(config)
    train_model(plain, ShuffledBatches(tiny_data.train, 32), config, device="cpu", progress=False)
    measured = build_model(config)
    history = train_model(measured, ShuffledBatches(tiny_data.train, 32), config, device="cpu", progress=False,
                          valid=tiny_data.valid[:8], valid_every=2)
    assert history.valid_step == [2, 4, 6] and len(history.valid_exact_match) == 3
    assert all(0.0 <= share <= 1.0 for share in history.valid_exact_match)
    for a, b in zip(plain.state_dict().values(), measured.state_dict().values()):
        assert torch.equal(a, b)  # evaluation in eval mode, without gradients: the same weights
    assert build_model(config).training and not measured.training


def test_train_or_load_stores_the_validation_curve(tiny_data, tmp_path, monkeypatch):
    from helpers.checkpoints import VALID_EVERY

    monkeypatch.setenv("TFS_CACHE_DIR", str(tmp_path))
    config = TrainConfig(**{**TINY.to_dict(), "steps": VALID_EVERY})
    first = train_or_load(config, tiny_data, device="cpu", progress=False)
    again = train_or_load(config, tiny_data, device="cpu", progress=False)
    assert first.history.valid_step == again.history.valid_step == [VALID_EVERY]
    assert again.history.valid_exact_match == first.history.valid_exact_match


def test_percent_never_rounds_to_100_while_answers_are_wrong():
    from helpers.decoding import percent

    assert percent(1998, 2000) == "99.90%" and percent(2000, 2000) == "100.00%" and percent(0, 7) == "0.00%"
    assert percent(19_999, 20_000) == "99.99%" and percent(1, 30_000) == "0.01%"
    for bad in ((3, 2), (1, 0), (-1, 5), (1.5, 2), (True, 2)):
        with pytest.raises(ValueError):
            percent(*bad)


def test_the_positional_encoding_is_computed_by_the_function_given():
    from helpers.positional import PositionalEncoding, positional_encoding

    def loops(seq_length, embed_size):  # a student's create_position_matrix, as nested lists
        return [[(math.sin if column % 2 == 0 else math.cos)(pos / 10000 ** ((column - column % 2) / embed_size))
                 for column in range(embed_size)] for pos in range(seq_length)]

    assert PositionalEncoding(8, 10, 0.0).encoding is positional_encoding
    given = PositionalEncoding(8, 10, 0.0, encoding=lambda n, d: torch.from_numpy(positional_encoding(n, d)))
    torch.testing.assert_close(given.pe, PositionalEncoding(8, 10, 0.0).pe)
    torch.testing.assert_close(PositionalEncoding(8, 10, 0.0, encoding=loops).pe, given.pe)
    with pytest.raises(ValueError, match="shape"):
        PositionalEncoding(8, 10, 0.0, encoding=lambda n, d: positional_encoding(d, n))
    with pytest.raises(TypeError, match="function"):
        PositionalEncoding(8, 10, 0.0, encoding="sinusoidal")


def test_predict_and_exact_match_run(tiny_data):
    model = build_model(TINY).eval()
    out = predict(model, ["21 November 2026", "1/2/2003"])
    assert len(out) == 2 and all(isinstance(p, str) and len(p) <= 11 for p in out)
    assert 0.0 <= exact_match(model, tiny_data.test[:8]) <= 1.0


def test_cache_trains_then_loads(tiny_data, tmp_path, monkeypatch):
    monkeypatch.setenv("TFS_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("TFS_RETRAIN", raising=False)
    first = train_or_load(TINY, tiny_data, device="cpu", progress=False)
    assert first.trained and first.path.exists() and first.path.parent == tmp_path
    assert "Trained for 4 steps" in first.describe()
    second = train_or_load(TINY, tiny_data, device="cpu", progress=False)
    assert not second.trained and "Loaded" in second.describe()
    assert second.history.loss == first.history.loss
    for a, b in zip(first.model.state_dict().values(), second.model.state_dict().values()):
        assert torch.equal(a, b)
    assert train_or_load(TINY, tiny_data, retrain=True, device="cpu", progress=False).trained
    monkeypatch.setenv("TFS_RETRAIN", "1")
    assert train_or_load(TINY, tiny_data, device="cpu", progress=False).trained


def test_training_is_repeatable_at_a_fixed_thread_count(tiny_data, tmp_path, monkeypatch):
    monkeypatch.setenv("TFS_CACHE_DIR", str(tmp_path))
    a = train_or_load(TINY, tiny_data, retrain=True, device="cpu", progress=False)
    b = train_or_load(TINY, tiny_data, retrain=True, device="cpu", progress=False)
    assert a.history.loss == b.history.loss


def test_a_corrupt_checkpoint_is_retrained(tiny_data, tmp_path, monkeypatch):
    monkeypatch.setenv("TFS_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("TFS_RETRAIN", raising=False)
    path = checkpoint_path(TINY, tiny_data)
    path.write_bytes(b"not a checkpoint")
    assert train_or_load(TINY, tiny_data, device="cpu", progress=False).trained


def test_checkpoint_key_depends_on_config_and_data(tiny_data):
    other_data = make_date_dataset(n_train=256, n_valid=16, n_test=32, seed=1)
    key = checkpoint_key(TINY, tiny_data)
    assert key == checkpoint_key(TrainConfig(**TINY.to_dict()), tiny_data)
    assert key != checkpoint_key(TrainConfig(**{**TINY.to_dict(), "seed": 1}), tiny_data)
    assert key != checkpoint_key(TrainConfig(**{**TINY.to_dict(), "norm_first": True}), tiny_data)
    assert key != checkpoint_key(TINY, other_data)


def test_peak_learning_rate():
    config = TrainConfig(d_model=64, warmup=100, lr_factor=1.0)
    assert config.peak_lr() == pytest.approx(1 / math.sqrt(64 * 100))
    assert TARGET_VOCAB.pad_id == 0


def _call_in_notebook(source: str, prefix: str) -> str:
    start = source.index(prefix)
    depth = 0
    for end in range(start + len(prefix) - 1, len(source)):
        depth += {"(": 1, ")": -1}.get(source[end], 0)
        if depth == 0:
            return source[start:end + 1]
    raise AssertionError(f"unbalanced call {prefix}")


def test_notebook_trains_the_benchmarked_configuration():
    """benchmarks/bench_time_to_accuracy.py measures NOTEBOOK_CONFIG: it must be what notebook 06 trains."""
    import json
    from pathlib import Path

    import helpers
    from helpers.training import NOTEBOOK_CONFIG, NOTEBOOK_DATA

    path = Path(__file__).resolve().parent.parent / "solutions" / "06_training.ipynb"
    if not path.exists():
        pytest.skip("solutions/06_training.ipynb is not there")
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    source = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
    scope = {"helpers": helpers, "NORM_FIRST": False}
    assert eval(_call_in_notebook(source, "helpers.TrainConfig("), scope) == NOTEBOOK_CONFIG
    data_call = _call_in_notebook(source, "helpers.make_date_dataset(")
    assert eval(data_call.replace("helpers.make_date_dataset", "dict"), scope) == NOTEBOOK_DATA


@pytest.mark.parametrize("kwargs, argument", [
    (dict(d_model=30, num_heads=4), "num_heads"), (dict(steps=0), "steps"), (dict(batch_size=-1), "batch_size"),
    (dict(warmup=1.5), "warmup"), (dict(dropout=1.0), "dropout"), (dict(label_smoothing=-0.1), "label_smoothing"),
    (dict(cooldown=2.0), "cooldown"), (dict(lr_factor=0), "lr_factor"), (dict(seed=None), "seed"),
])
def test_bad_configuration_is_a_value_error_naming_the_argument(kwargs, argument):
    with pytest.raises(ValueError, match=argument):
        TrainConfig(**kwargs)


@pytest.mark.parametrize("smoothing", [1.5, 1.0, -0.1, "0.1"])
def test_bad_smoothing_is_a_value_error(smoothing):
    with pytest.raises(ValueError, match="smoothing"):
        LabelSmoothingLoss(smoothing=smoothing)


def test_notebook_06_trains_on_the_gpu_when_there_is_one(monkeypatch, root):
    """README: no GPU is needed, and notebook 06 uses one when present."""
    import torch

    from helpers.training import default_device

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert default_device() == "cuda"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert default_device() == "cpu"
    source = (root / "solutions" / "06_training.ipynb").read_text(encoding="utf-8")
    assert "device = helpers.default_device()" in source
