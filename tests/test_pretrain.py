"""`make checkpoints` (course_tools.pretrain) runs what a notebook 06's train_or_load calls need, and nothing more."""

import ast

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
