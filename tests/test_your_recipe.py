"""Notebook 06 trains the student's own code: the recipe, its fingerprint, and the model built from it."""

import dataclasses
import json
import shutil

import nbformat
import pytest
import torch

import helpers
from helpers.checkpoints import checkpoint_key, train_or_load
from helpers.dates import make_date_dataset
from helpers.schedule import scheduled_lr
from helpers.student_code import normalized, source_of, your_recipe, yours_or_reference
from helpers.training import REFERENCE, Recipe, TrainConfig, build_model

from conftest import ROOT

SOLVED, PRISTINE = ROOT / "solutions" / "05_transformer.ipynb", ROOT / "notebooks" / "05_transformer.ipynb"
EARLIER = ["create_position_matrix", "MultiHeadAttention"]  # from notebooks 01 and 03
MODEL_PARTS = ["LayerNorm", "PositionwiseFeedForward", "EncoderLayer", "DecoderLayer", "Transformer"]
STEPS = ["transformer_lr", "LabelSmoothingLoss", "train_step"]
TINY = TrainConfig(d_model=16, num_heads=2, num_layers=1, d_ff=32, batch_size=32, steps=3, warmup=2, dropout=0.0)


def edited(tmp_path, old, new, name="05_transformer.ipynb", pristine=()):
    """A folder with the solved notebooks 01, 03 and 05 (those named in pristine: the student versions), one
    piece of code replaced in the notebook called name (a student's variant); returns the path of notebook 05."""
    tmp_path.mkdir(exist_ok=True)
    for notebook_name in ("01_positional_encoding.ipynb", "03_multi_head_attention.ipynb", "05_transformer.ipynb"):
        shutil.copy(ROOT / ("notebooks" if notebook_name in pristine else "solutions") / notebook_name, tmp_path)
    if old is not None:
        edit(tmp_path / name, old, new)
    return tmp_path / "05_transformer.ipynb"


def edit(path, old, new):
    """Replace old by new in the one code cell of the notebook at path that holds old."""
    notebook = nbformat.read(path, as_version=4)
    hits = [cell for cell in notebook.cells if cell.cell_type == "code" and old in cell.source]
    assert len(hits) == 1, f"{old!r} must occur in exactly one cell"
    hits[0].source = hits[0].source.replace(old, new)
    nbformat.write(notebook, path)


def attention_types(model):
    return {type(layer.self_attn) for layer in [*model.encoder.layers, *model.decoder.layers]} | {
        type(layer.cross_attn) for layer in model.decoder.layers}


# The student's attention of notebook 03 with a known mistake: the weights not scaled by 1/sqrt(d_k).
UNSCALED = ("scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_k)", "scores = q @ k.transpose(-2, -1)")


@pytest.fixture(scope="module")
def solved():
    return your_recipe(SOLVED)


def test_solved_notebooks_01_03_05_train_the_students_code(solved):
    """The positional encoding of notebook 01, the attention of notebook 03 and every class of notebook 05."""
    assert [solved.origin[name] for name in EARLIER + MODEL_PARTS] == ["yours"] * 7
    assert solved.model_class is not helpers.Transformer
    assert solved.model_class.__module__ == "notebook_05_transformer"
    assert solved.fingerprint and solved.describe().startswith("Training YOUR code: create_position_matrix, "
                                                               "MultiHeadAttention, LayerNorm,")
    model = build_model(TINY, solved)
    assert type(model) is solved.model_class
    assert type(model.encoder.layers[0].norm1).__module__ == "notebook_05_transformer"  # the student's LayerNorm
    assert {t.__module__ for t in attention_types(model)} == {"notebook_03_multi_head_attention"}
    assert model.positional.encoding.__module__ == "notebook_01_positional_encoding"
    assert torch.allclose(model.positional.pe, torch.from_numpy(helpers.positional_encoding(64, 16)).float())
    src = helpers.encode_sources(["21/11/2026"])
    assert model(src, helpers.encode_targets(["2026-11-21"])[:, :-1]).shape == (1, 11, len(helpers.TARGET_VOCAB))


def test_the_recipe_names_every_part(solved):
    assert list(solved.origin) == EARLIER + MODEL_PARTS + STEPS + ["greedy_decode"]
    assert all(solved.reasons[name] for name in solved.origin)


def test_a_wrong_attention_is_replaced_by_the_reference_inside_the_students_layers(tmp_path, solved):
    recipe = your_recipe(edited(tmp_path, *UNSCALED, name="03_multi_head_attention.ipynb"))
    assert recipe.origin["MultiHeadAttention"] == "reference"
    assert "not scaled" in recipe.reasons["MultiHeadAttention"]
    assert [recipe.origin[name] for name in ["create_position_matrix"] + MODEL_PARTS] == ["yours"] * 6
    model = build_model(TINY, recipe)
    assert type(model.encoder.layers[0]).__module__ == "notebook_05_transformer"
    assert attention_types(model) == {helpers.MultiHeadAttention}
    assert recipe.fingerprint != solved.fingerprint, "another attention trains afresh"


def test_notebook_05_builds_its_layers_on_the_attention_of_the_cell_at_its_top():
    code = [cell for cell in nbformat.read(SOLVED, as_version=4).cells if cell.cell_type == "code"]
    top = next(cell.source for cell in code if "your_attention_and_encoding" in cell.source)
    assert "from helpers import MultiHeadAttention" in top  # what the grader and your_recipe load before yours
    assert 'MultiHeadAttention = earlier.objects["MultiHeadAttention"]' in top
    layers = [cell.source for cell in code if cell.source.startswith(("class EncoderLayer", "class DecoderLayer"))]
    assert len(layers) == 2 and all("= MultiHeadAttention(d_model" in source for source in layers)
    assert not any("helpers.MultiHeadAttention(" in source for source in layers)
    model = next(cell.source for cell in code if cell.source.startswith("class Transformer"))
    assert "helpers.PositionalEncoding(d_model, max_len, dropout, create_position_matrix)" in model


def test_your_attention_and_encoding_reads_notebooks_01_and_03(tmp_path):
    solved = helpers.your_attention_and_encoding(ROOT / "solutions")
    assert solved.origin == {"create_position_matrix": "yours", "MultiHeadAttention": "yours"}
    assert solved.describe().splitlines()[1] == ("MultiHeadAttention: your version (its check passes, from "
                                                 "03_multi_head_attention.ipynb)")
    missing = helpers.your_attention_and_encoding(tmp_path)
    assert missing.objects == {"create_position_matrix": helpers.positional_encoding,
                               "MultiHeadAttention": helpers.MultiHeadAttention}
    assert "no 01_positional_encoding.ipynb in this folder" in missing.describe()


def test_without_notebook_05_the_reference_model_holds_the_attention_and_encoding_of_01_and_03(tmp_path):
    recipe = your_recipe(edited(tmp_path, None, None, pristine=("05_transformer.ipynb",)))
    assert [recipe.origin[name] for name in EARLIER] == ["yours", "yours"]
    assert {recipe.origin[name] for name in MODEL_PARTS} == {"reference"} and recipe.fingerprint
    assert recipe.model_class is helpers.Transformer and set(recipe.model_parts) == {"encoding", "attention"}
    model = build_model(TINY, recipe)
    assert isinstance(model, helpers.Transformer) and type(model.encoder.layers[0]) is helpers.EncoderLayer
    assert {t.__module__ for t in attention_types(model)} == {"notebook_03_multi_head_attention"}
    assert model.positional.encoding.__module__ == "notebook_01_positional_encoding"


def test_a_passing_part_that_notebook_05_does_not_use_is_not_called_yours(tmp_path):
    """A notebook 05 saved before its layers read MultiHeadAttention and create_position_matrix (the reference
    hard-coded): the recipe says the reference trains, and fingerprints nothing of notebooks 01 and 03."""
    mine = "self.self_attn = MultiHeadAttention(d_model, num_heads, dropout)  # notebook 03's: see the top\n"
    path = edited(tmp_path, mine + "        self.ff",
                  "self.self_attn = helpers.MultiHeadAttention(d_model, num_heads, dropout)\n        self.ff")
    edit(path, mine + "        self.cross_attn = MultiHeadAttention(",
         "self.self_attn = helpers.MultiHeadAttention(d_model, num_heads, dropout)\n"
         "        self.cross_attn = helpers.MultiHeadAttention(")
    edit(path, "self.positional = helpers.PositionalEncoding(d_model, max_len, dropout, create_position_matrix)",
         "self.positional = helpers.PositionalEncoding(d_model, max_len, dropout)")
    recipe = your_recipe(path)
    assert recipe.origin["Transformer"] == "yours"
    for name in EARLIER:
        assert recipe.origin[name] == "reference" and "do not use it" in recipe.reasons[name]
    other = tmp_path / "unsolved_01_03"
    other.mkdir()
    shutil.copy(path, other)
    for name in ("01_positional_encoding.ipynb", "03_multi_head_attention.ipynb"):
        shutil.copy(ROOT / "notebooks" / name, other)
    assert your_recipe(other / "05_transformer.ipynb").fingerprint == recipe.fingerprint
    assert attention_types(build_model(TINY, recipe)) == {helpers.MultiHeadAttention}


def test_pristine_notebooks_train_the_reference():
    recipe = your_recipe(PRISTINE)
    assert set(recipe.origin.values()) == {"reference"} and recipe.fingerprint == ""
    assert recipe.model_class is helpers.Transformer
    assert "not written yet" in recipe.describe()


def test_a_failing_layer_norm_is_replaced_inside_the_students_layers(tmp_path):
    path = edited(tmp_path, "var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)",
                  "var = x.var(dim=-1, keepdim=True)")  # the unbiased variance: a known mistake
    recipe = your_recipe(path)
    assert recipe.origin["LayerNorm"] == "reference" and "unbiased" in recipe.reasons["LayerNorm"].lower()
    assert recipe.origin["EncoderLayer"] == "yours" and recipe.origin["Transformer"] == "yours"
    model = build_model(TINY, recipe)
    assert type(model.encoder.layers[0].norm1) is helpers.LayerNorm
    assert type(model.encoder.layers[0]).__module__ == "notebook_05_transformer"


def test_without_the_students_transformer_their_layers_train_in_the_reference(tmp_path):
    path = edited(tmp_path, "x = self.positional(self.src_embed(src) * math.sqrt(self.d_model))",
                  "x = self.positional(self.src_embed(src))")  # no sqrt(d_model)
    recipe = your_recipe(path)
    assert recipe.origin["Transformer"] == "reference" and recipe.fingerprint != ""
    assert {recipe.origin[name] for name in EARLIER + ["LayerNorm", "EncoderLayer", "DecoderLayer"]} == {"yours"}
    assert "inside the reference Transformer" in recipe.reasons["EncoderLayer"]
    assert recipe.model_class is helpers.Transformer  # handed the student's parts, no subclass
    assert set(recipe.model_parts) == {"encoding", "attention", "layer_norm", "feed_forward", "encoder_layer",
                                       "decoder_layer"}
    model = build_model(TINY, recipe)
    assert type(model) is helpers.Transformer
    assert list(model.state_dict()) == list(build_model(TINY).state_dict()), "the reference's parameter names"
    assert type(model.encoder.layers[0]).__module__ == "notebook_05_transformer"
    assert type(model.decoder.layers[0]).__module__ == "notebook_05_transformer"
    assert type(model.encoder.layers[0].norm1).__module__ == "notebook_05_transformer"
    assert {t.__module__ for t in attention_types(model)} == {"notebook_03_multi_head_attention"}
    assert model.positional.encoding.__module__ == "notebook_01_positional_encoding"
    src = torch.randint(3, 10, (2, 5))
    assert model(src, src).shape[:2] == (2, 5)


def test_the_students_train_step_is_used_when_its_check_passes():
    from helpers.training import train_step

    def my_step(model, src, tgt, optimizer, scheduler, loss_fn):
        model.train()
        loss = loss_fn(model(src, tgt[:, :-1]), tgt[:, 1:])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        scheduler.step()
        return loss.item()

    def broken(model, src, tgt, optimizer, scheduler, loss_fn):
        return 0.0

    assert your_recipe(PRISTINE).train_step is train_step
    recipe = your_recipe(PRISTINE, train_step=my_step)
    assert recipe.train_step is my_step and recipe.origin["train_step"] == "yours" and recipe.fingerprint
    recipe = your_recipe(PRISTINE, train_step=broken)
    assert recipe.train_step is train_step and recipe.origin["train_step"] == "reference"


def test_the_fingerprint_follows_the_code_not_its_comments(tmp_path, solved):
    commented = your_recipe(edited(tmp_path, "mean = x.mean(dim=-1, keepdim=True)",
                                   "mean = x.mean(dim=-1, keepdim=True)  # un comentario en español"))
    assert commented.fingerprint == solved.fingerprint
    other = your_recipe(edited(tmp_path, "mean = x.mean(dim=-1, keepdim=True)", "mean = x.mean(-1, keepdim=True)"))
    assert other.origin["LayerNorm"] == "yours" and other.fingerprint != solved.fingerprint
    attention = your_recipe(edited(tmp_path / "attention", "weights = torch.softmax(scores, dim=-1)",
                                   "weights = scores.softmax(-1)", name="03_multi_head_attention.ipynb"))
    encoding = your_recipe(edited(tmp_path / "encoding", "angle = pos / 10000 ** (2 * i / embed_size)",
                                  "angle = pos / 10000.0 ** (2 * i / embed_size)", name="01_positional_encoding.ipynb"))
    assert attention.origin["MultiHeadAttention"] == encoding.origin["create_position_matrix"] == "yours"
    data = make_date_dataset(n_train=64, n_valid=8, n_test=8)
    keys = {checkpoint_key(TINY, data, r) for r in (REFERENCE, solved, other, attention, encoding)}
    assert len(keys) == 5, "a changed implementation (of notebook 01, 03 or 05) must train afresh"


def test_normalized_drops_docstrings_comments_and_layout():
    a = 'def f(x):\n    """Doc."""\n    # note\n    return x  + 1\n'
    b = 'def f(x):\n    """Otra documentación."""\n    return x + 1  # nota\n'
    assert normalized(a) == normalized(b) != normalized(a.replace("+ 1", "+ 2"))


def test_a_class_from_this_notebook_is_fingerprinted_without_its_docstrings_and_comments(tmp_path):
    """The loss class written in notebook 06 (English or Spanish comments) gives one fingerprint: source_of
    turns a class into parseable code, so normalized() can drop what does not compute."""
    import importlib.util

    def load(name, text):
        path = tmp_path / f"{name}.py"
        path.write_text(text, encoding="utf-8")
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module.Loss

    english = load("english", 'class Loss:\n    """Doc."""\n\n    def forward(self, x):\n'
                              '        """Mean."""\n        return x.mean()  # the mean\n')
    spanish = load("spanish", 'class Loss:\n    """Documentación."""\n\n    def forward(self, x):\n'
                              '        """La media."""\n        return x.mean()  # la media\n')
    other = load("other", 'class Loss:\n    def forward(self, x):\n        return x.sum()\n')
    assert normalized(source_of(english)) == normalized(source_of(spanish)) != normalized(source_of(other))
    assert normalized(source_of(english)).startswith("class Loss:")


def test_the_students_schedule_and_loss_are_used_when_their_checks_pass():
    def transformer_lr(step, d_model, warmup):
        return d_model ** -0.5 * min(step ** -0.5, step * warmup ** -1.5)

    def wrong_lr(step, d_model, warmup):
        return d_model ** -0.5 * min(step ** -0.5, step * warmup ** -0.5)

    recipe = your_recipe(PRISTINE, transformer_lr=transformer_lr, LabelSmoothingLoss=helpers.LabelSmoothingLoss)
    assert recipe.transformer_lr is transformer_lr and recipe.origin["transformer_lr"] == "yours"
    assert recipe.fingerprint, "the student's schedule is part of the cache key"
    config = TrainConfig(steps=600, warmup=200, lr_factor=0.5, cooldown=0.4)
    for step in (1, 200, 500, 600):
        assert scheduled_lr(step, config, transformer_lr) == pytest.approx(scheduled_lr(step, config))
    wrong = your_recipe(PRISTINE, transformer_lr=wrong_lr)
    assert wrong.transformer_lr is helpers.transformer_lr and wrong.origin["transformer_lr"] == "reference"
    with pytest.raises(ValueError, match="own parts"):
        your_recipe(PRISTINE, greedy=transformer_lr)


def test_train_or_load_trains_the_recipes_model(tmp_path, monkeypatch, solved):
    monkeypatch.setenv("TFS_CACHE_DIR", str(tmp_path))
    data = make_date_dataset(n_train=64, n_valid=8, n_test=8)
    result = train_or_load(TINY, data, recipe=solved, device="cpu", progress=False)
    assert result.trained and type(result.model) is solved.model_class
    again = train_or_load(TINY, data, recipe=solved, device="cpu", progress=False)
    assert not again.trained and type(again.model) is solved.model_class
    for a, b in zip(result.model.state_dict().values(), again.model.state_dict().values()):
        assert torch.equal(a, b)
    assert helpers.predict(again.model, ["21/11/2026"], method="beam", use_cache=True)  # decoding works on it
    with pytest.raises(ValueError, match="recipe"):
        train_or_load(TINY, data, recipe="yours", device="cpu", progress=False)


def test_yours_or_reference_picks_by_the_check():
    assert yours_or_reference(helpers.greedy_decode) == (helpers.greedy_decode, "your")

    def greedy_decode(model, src, max_len, start_id, end_id):
        raise NotImplementedError()

    assert yours_or_reference(greedy_decode) == (helpers.greedy_decode, "the reference")
    with pytest.raises(ValueError, match="defines"):
        yours_or_reference(print)


def test_predict_rejects_a_decode_fn_with_beam_search():
    model = build_model(TINY).eval()
    with pytest.raises(ValueError, match="decode_fn"):
        helpers.predict(model, ["1/1/2000"], method="beam", decode_fn=helpers.greedy_decode)
    assert helpers.predict(model, ["1/1/2000"], decode_fn=helpers.greedy_decode) == helpers.predict(model, ["1/1/2000"])


def test_without_positional_encoding_the_encoder_reads_a_bag_of_characters():
    config = dataclasses.replace(TINY, positional_encoding=False)
    model = build_model(config).eval()
    assert torch.count_nonzero(model.positional.pe) == 0
    src = helpers.encode_sources(["21/11/2026", "12/11/2062"])
    tgt = helpers.encode_targets(["2026-11-21", "2026-11-21"])[:, :-1]
    with torch.no_grad():
        logits = model(src, tgt)
    torch.testing.assert_close(logits[0], logits[1])  # anagrams: the same output
    with pytest.raises(ValueError, match="positional_encoding"):
        TrainConfig(positional_encoding="no")
    assert checkpoint_key(config, make_date_dataset(64, 8, 8)) != checkpoint_key(TINY, make_date_dataset(64, 8, 8))


def test_format_of_names_the_written_form():
    assert helpers.format_of("21/11/2026", "2026-11-21") == "21/11/2026"
    assert helpers.format_of("sábado 21 de noviembre de 2026", "2026-11-21") == "sábado 21 de noviembre de 2026"
    assert helpers.format_of("Nov. 02, 2026", "2026-11-02") == "Nov. 21, 2026"
    data = make_date_dataset(n_train=64, n_valid=8, n_test=300)
    assert all(helpers.format_of(s, t) in helpers.FORMAT_NAMES for s, t in data.test)
    with pytest.raises(ValueError, match="source"):
        helpers.format_of("tomorrow", "2026-11-21")
    with pytest.raises(ValueError, match="target"):
        helpers.format_of("21/11/2026", "21.11.2026")


def test_recipe_describe_names_whose_code_trains():
    assert Recipe().describe().startswith("Training the reference code")
    mixed = Recipe(origin={"LayerNorm": "yours", "Transformer": "reference"}, reasons={"LayerNorm": "passes"})
    assert mixed.describe().splitlines()[0] == "Training YOUR code: LayerNorm; from helpers: Transformer."


def test_notebook_06_trains_with_your_recipe():
    notebook = json.loads((ROOT / "solutions" / "06_training.ipynb").read_text(encoding="utf-8"))
    code = "\n".join("".join(c["source"]) for c in notebook["cells"] if c["cell_type"] == "code")
    assert 'helpers.your_recipe("05_transformer.ipynb", transformer_lr=transformer_lr,' in code
    assert "helpers.train_or_load(config, data, recipe=recipe" in code
    outputs = [o for c in notebook["cells"] if c.get("id") == "recipe-code" for o in c["outputs"]]
    assert "Training YOUR code: create_position_matrix, MultiHeadAttention, LayerNorm, PositionwiseFeedForward, " \
           "EncoderLayer, DecoderLayer, Transformer, transformer_lr, LabelSmoothingLoss, train_step; from helpers: " \
           "greedy_decode." in "".join(outputs[0]["text"])
