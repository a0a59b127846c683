"""`make checkpoints` (course_tools.pretrain) runs what a notebook 06's train_or_load calls need, and nothing more."""

import ast
from pathlib import Path

import nbformat

from conftest import ROOT

from course_tools.pretrain import training_code


def _notebook(tmp_path, *cells):
    path = tmp_path / "06_training.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells]), path)
    return path


def test_the_training_code_is_the_calls_and_what_they_read(tmp_path):
    path = _notebook(tmp_path, "%matplotlib inline\nimport helpers\nimport matplotlib.pyplot as plt",
                     "data = helpers.make_date_dataset(seed=0)\nprint(data)\nunused = 1",
                     "size = 64\nconfig = helpers.TrainConfig(d_model=size)\nplt.plot([1, 2])",
                     "def train_step(model):\n    return 0.0",
                     "recipe = helpers.your_recipe('05_transformer.ipynb', train_step=train_step)",
                     "result = helpers.train_or_load(config, data, recipe=recipe)\nprint(result.describe())",
                     "later = helpers.train_or_load(config, data)\nafter = 2")
    code = training_code(path)
    assert code.splitlines() == [
        "import helpers", "import matplotlib.pyplot as plt", "data = helpers.make_date_dataset(seed=0)", "size = 64",
        "config = helpers.TrainConfig(d_model=size)", "def train_step(model):", "    return 0.0",
        "recipe = helpers.your_recipe('05_transformer.ipynb', train_step=train_step)",
        "result = helpers.train_or_load(config, data, recipe=recipe)", "later = helpers.train_or_load(config, data)"]


def test_every_train_or_load_call_of_the_solutions_notebook_06_is_kept_without_prints_or_plots():
    path = ROOT / "solutions" / "06_training.ipynb"
    code = training_code(path)
    calls = sum("train_or_load" in line for line in code.splitlines())
    source = "\n".join(c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code")
    assert calls == source.count("train_or_load(") >= 3
    statements = ast.parse(code).body
    assert not [ast.unparse(s) for s in statements if isinstance(s, ast.Expr)], "no print, plot or check is run"


def test_every_training_call_of_the_solutions_notebook_07_is_kept_without_prints_or_plots():
    """Notebook 07 trains its GPTs by helpers.gpt_training.train_or_load_gpt and loads notebook 06's model by
    helpers.train_or_load: make checkpoints runs every one of those calls, and no print, plot or check."""
    path = ROOT / "solutions" / "07_gpt.ipynb"
    code = training_code(path)
    source = "\n".join(c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code")
    for call in ("train_or_load(", "train_or_load_gpt("):
        kept = sum(line.count(f".{call}") for line in code.splitlines())
        assert kept == source.count(f".{call}") >= 1, call
    statements = ast.parse(code).body
    assert not [ast.unparse(s) for s in statements if isinstance(s, ast.Expr)], "no print, plot or check is run"


def test_pretrain_runs_the_gpt_calls_quietly_and_reports_each(tmp_path, monkeypatch):
    """pretrain() calls train_or_load_gpt with progress=False and says, per call, whether it trained or loaded."""
    import types

    from helpers import gpt_training

    from course_tools.pretrain import pretrain

    calls = []

    def fake(config, task, *args, **kwargs):
        calls.append((config, task, kwargs.get("progress")))
        return types.SimpleNamespace(trained=task == "b", path=tmp_path / f"gpt-{task}.pt",
                                     history=types.SimpleNamespace(seconds=3.0))

    monkeypatch.setattr(gpt_training, "train_or_load_gpt", fake)
    path = tmp_path / "07_gpt.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in (
        "from helpers import gpt_training", "config = 1\nprint('not run')",
        "a = gpt_training.train_or_load_gpt(config, 'a', progress=True)",
        "for task in ('b',):\n    gpt_training.train_or_load_gpt(config, task)")]), path)
    assert pretrain(path) == ["loaded gpt-a.pt (3 s of training)", "trained gpt-b.pt (3 s of training)"]
    assert calls == [(1, "a", False), (1, "b", False)]


def test_pretrain_reads_the_students_definitions_as_the_notebooks_kernel_does(tmp_path, monkeypatch):
    """The checkpoint key fingerprints the source of the student's functions and classes: pretrain keeps each
    statement's text as written and registers it with linecache, so inspect reads there what it reads in the
    notebook's kernel, and the key pretrain trains is the key the notebook loads."""
    import types

    import helpers
    from course_tools.pretrain import pretrain
    from helpers.student_code import source_of

    step = "def train_step(model):\n    # the student's comment, kept\n    return   0.0"
    path = _notebook(tmp_path, "import helpers", step, "result = helpers.train_or_load(None, None, own=train_step)")
    assert step in training_code(path)
    seen = []

    def train_or_load(config, data, own=None, progress=True):
        seen.append(source_of(own))
        return types.SimpleNamespace(trained=False, path=tmp_path / "dates-x.pt",
                                     history=types.SimpleNamespace(seconds=0.0))

    monkeypatch.setattr(helpers, "train_or_load", train_or_load)
    assert pretrain(path) == ["loaded dates-x.pt (0 s of training)"]
    assert seen == [step + "\n"]


def test_a_process_that_needs_a_checkpoint_another_is_training_waits_for_it(tmp_path, monkeypatch):
    """In a --jobs run, a call claims its checkpoint while it runs; a second call for the same checkpoint starts
    only once the first has let go of it, and the claim is gone after both."""
    import threading

    from helpers import gpt_training

    from course_tools import pretrain

    monkeypatch.setattr(pretrain, "CLAIMS", tmp_path)
    monkeypatch.setattr(gpt_training, "checkpoint_path", lambda config, task, data_key, fingerprint: Path(
        f"gpt-{task}-{fingerprint}.pt"))

    def train_or_load_gpt(config, task, data_key, batches, vocab_size, parts=None, fingerprint="", progress=True):
        pass

    call = ((None, "dates", "data", None, 5), {"fingerprint": "f"})
    events = []

    def second_process():
        with pretrain.claimed(train_or_load_gpt, *call):
            events.append("second trains")

    with pretrain.claimed(train_or_load_gpt, *call):
        assert [p.name for p in tmp_path.iterdir()] == ["gpt-dates-f.pt"]
        second = threading.Thread(target=second_process)
        second.start()
        second.join(timeout=1)
        assert second.is_alive()  # waiting: it cannot go on while the claim is held
        events.append("first done")
    second.join(timeout=60)
    assert events == ["first done", "second trains"] and not list(tmp_path.iterdir())


def test_each_process_that_trains_uses_one_thread(monkeypatch):
    """The stored outputs are those of models trained on one thread, whatever OMP_NUM_THREADS says."""
    import torch

    from course_tools import pretrain

    threads = torch.get_num_threads()
    monkeypatch.setattr(pretrain, "CLAIMS", None)
    try:
        torch.set_num_threads(2)
        pretrain.one_thread()
        assert torch.get_num_threads() == 1 and pretrain.CLAIMS is None
    finally:
        torch.set_num_threads(threads)
