"""Notebook 07's reference GPT: its block equals PyTorch's own pre-norm encoder layer with a causal mask, the model
never looks ahead, the KV cache gives the same tokens, weight tying saves one matrix, the sampling references do
what their docstrings say, the training text is read the same way every time; and the block's check names each
known mistake (wrong answers written as students write them)."""

import shutil

import nbformat
import pytest
import torch
from torch import nn

from helpers import gpt_training
from helpers.checks.gpt_block import GPT_BLOCK_MISTAKES, check_gpt_block
from helpers.gpt import GPT, GPTBlock, count_parameters, to_torch_block
from helpers.layers import LayerNorm, PositionwiseFeedForward
from helpers.multi_head import MultiHeadAttention
from helpers.sampling import GPTCache, generate, sample_next, temperature_probs, top_k_filter, top_p_filter
from helpers.stdlib_text import STDLIB_FILES, TEXT_VOCAB, read_stdlib_text

from conftest import define, verdict


def small_gpt(**kwargs):
    torch.manual_seed(0)
    return GPT(30, d_model=16, num_heads=4, num_layers=2, d_ff=32, max_len=24, **kwargs).eval()


@pytest.mark.parametrize("norm_first", [True, False])
def test_block_equals_torch_encoder_layer_with_causal_mask(norm_first):
    torch.manual_seed(1)
    block = GPTBlock(16, 4, 32, dropout=0.0, norm_first=norm_first).double().eval()
    x = torch.randn(3, 7, 16, dtype=torch.float64)
    causal = torch.ones(7, 7, dtype=torch.bool).tril()
    theirs = to_torch_block(block)
    assert isinstance(theirs, nn.TransformerEncoderLayer) and theirs.norm_first == norm_first
    ours = block(x, causal[None, None])
    torch.testing.assert_close(ours, theirs(x, src_mask=~causal, is_causal=True), rtol=0, atol=1e-12)
    torch.testing.assert_close(ours, theirs(x, src_mask=nn.Transformer.generate_square_subsequent_mask(
        7, dtype=torch.float64)), rtol=0, atol=1e-12)


def test_gpt_never_looks_ahead():
    model = small_gpt()
    ids = torch.randint(0, 30, (2, 10))
    changed = ids.clone()
    changed[:, 6:] = (changed[:, 6:] + 5) % 30
    torch.testing.assert_close(model(ids)[:, :6], model(changed)[:, :6])
    assert not torch.allclose(model(ids)[:, 6:], model(changed)[:, 6:])


@pytest.mark.parametrize("norm_first", [True, False])
def test_kv_cache_gives_the_same_logits_and_tokens(norm_first):
    model = small_gpt(norm_first=norm_first)
    ids = torch.randint(0, 30, (3, 5))
    cache = GPTCache(model)
    torch.testing.assert_close(cache.step(ids), model(ids)[:, -1], rtol=1e-5, atol=1e-5)
    longer = torch.cat([ids, torch.randint(0, 30, (3, 1))], dim=1)
    torch.testing.assert_close(cache.step(longer[:, -1:]), model(longer)[:, -1], rtol=1e-5, atol=1e-5)
    assert cache.nbytes() == 6 * cache.bytes_per_token() * 3  # 6 tokens, 3 rows
    for settings in (dict(temperature=0), dict(temperature=0.8, top_k=5, top_p=0.9)):
        with_cache = generate(model, ids, 8, torch.Generator().manual_seed(3), use_cache=True, **settings)
        without = generate(model, ids, 8, torch.Generator().manual_seed(3), use_cache=False, **settings)
        assert torch.equal(with_cache, without) and with_cache.shape == (3, 13)


def test_weight_tying_saves_one_embedding_matrix():
    tied, untied = small_gpt(), small_gpt(tie_weights=False)
    assert tied.lm_head.weight is tied.token_embed.weight
    assert count_parameters(untied) - count_parameters(tied) == 30 * 16


def test_gpt_takes_its_parts_as_arguments():
    class MyNorm(LayerNorm):
        pass

    model = GPT(10, 16, 4, 2, 32, attention=MultiHeadAttention, layer_norm=MyNorm, feed_forward=PositionwiseFeedForward)
    assert isinstance(model.blocks[0].norm1, MyNorm) and isinstance(model.norm, MyNorm)


def test_sampling_references():
    logits = torch.tensor([[1.0, 3.0, 3.0, 0.0, 2.0]])
    assert torch.isfinite(top_k_filter(logits, 1)).sum() == 2  # the tie at the top is kept whole
    assert torch.isfinite(top_k_filter(logits, 3)).sum() == 3
    probs = torch.tensor([[0.1, 0.5, 0.3, 0.1]])
    assert top_p_filter(probs, 0.6)[0].tolist() == pytest.approx([0, 0.625, 0.375, 0])  # 0.5 + 0.3 crosses 0.6
    assert top_p_filter(probs, 0.2)[0].tolist() == pytest.approx([0, 1, 0, 0])  # the most likely token always stays
    torch.testing.assert_close(temperature_probs(logits, 1.0), torch.softmax(logits, -1))
    assert temperature_probs(logits, 1e-3)[0, 3].item() == 0.0
    assert sample_next(logits, temperature=0).tolist() == [1]
    draws = [sample_next(logits, torch.Generator().manual_seed(5), 1.0, 2).item() for _ in range(3)]
    assert len(set(draws)) == 1 and draws[0] in (1, 2)


def test_stdlib_text_is_read_in_a_fixed_order():
    assert list(STDLIB_FILES) == sorted(STDLIB_FILES)
    first, second = read_stdlib_text(), read_stdlib_text()
    assert first.sha256 == second.sha256 and [n for n, _ in first.sizes] == list(STDLIB_FILES)
    ids = first.ids()
    assert len(ids) == len(first.text) and TEXT_VOCAB.decode(ids[:200].tolist()) == first.text[:200]


def test_date_sequences_score_only_the_answer():
    inputs, labels = gpt_training.encode_date_pairs([("21/11/2026", "2026-11-21"), ("Nov 3, 1999", "1999-11-03")])
    vocab = gpt_training.DATE_VOCAB
    for row in range(2):
        scored = labels[row][labels[row] != vocab.pad_id].tolist()
        assert len(scored) == 11 and scored[-1] == vocab.eos_id
        where = (labels[row] != vocab.pad_id).nonzero()[0].item()
        assert inputs[row, where].item() == vocab.stoi[gpt_training.SEP]  # the first scored label follows <sep>


# ---------------------------------------------------------------------- the block's check
INIT = '''
class GPTBlock(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, dropout=0.1):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.ff = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.norm1 = LayerNorm(d_model)
        self.norm2 = LayerNorm(d_model)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)

    def forward(self, x, mask=None):
'''

RIGHT = {
    "two_lines": """
        x = x + self.dropout1(self.self_attn(self.norm1(x), self.norm1(x), self.norm1(x), mask))
        return x + self.dropout2(self.ff(self.norm2(x)))
""",
    "named": """
        h = self.norm1(x)
        attended = self.self_attn(h, h, h, mask)
        x = x + self.dropout1(attended)
        h = self.norm2(x)
        return x + self.dropout2(self.ff(h))
""",
}

WRONG = {
    "post_norm_instead_of_pre": """
        x = self.norm1(x + self.dropout1(self.self_attn(x, x, x, mask)))
        return self.norm2(x + self.dropout2(self.ff(x)))
""",
    "no_causal_mask": """
        h = self.norm1(x)
        x = x + self.dropout1(self.self_attn(h, h, h))
        return x + self.dropout2(self.ff(self.norm2(x)))
""",
    "mask_inverted": """
        h = self.norm1(x)
        x = x + self.dropout1(self.self_attn(h, h, h, ~mask))
        return x + self.dropout2(self.ff(self.norm2(x)))
""",
    "no_residual_attention": """
        h = self.norm1(x)
        x = self.dropout1(self.self_attn(h, h, h, mask))
        return x + self.dropout2(self.ff(self.norm2(x)))
""",
    "no_residual_ff": """
        h = self.norm1(x)
        x = x + self.dropout1(self.self_attn(h, h, h, mask))
        return self.dropout2(self.ff(self.norm2(x)))
""",
    "no_residuals": """
        h = self.norm1(x)
        x = self.dropout1(self.self_attn(h, h, h, mask))
        return self.dropout2(self.ff(self.norm2(x)))
""",
    "residual_from_normed": """
        x = self.norm1(x)
        x = x + self.dropout1(self.self_attn(x, x, x, mask))
        x = self.norm2(x)
        return x + self.dropout2(self.ff(x))
""",
    "norms_swapped": """
        h = self.norm2(x)
        x = x + self.dropout1(self.self_attn(h, h, h, mask))
        return x + self.dropout2(self.ff(self.norm1(x)))
""",
    "same_norm_twice": """
        h = self.norm1(x)
        x = x + self.dropout1(self.self_attn(h, h, h, mask))
        return x + self.dropout2(self.ff(self.norm1(x)))
""",
    "missing_norm": """
        x = x + self.dropout1(self.self_attn(x, x, x, mask))
        return x + self.dropout2(self.ff(self.norm2(x)))
""",
    "sublayers_out_of_order": """
        x = x + self.dropout1(self.ff(self.norm1(x)))
        h = self.norm2(x)
        return x + self.dropout2(self.self_attn(h, h, h, mask))
""",
    "extra_final_norm": """
        h = self.norm1(x)
        x = x + self.dropout1(self.self_attn(h, h, h, mask))
        x = x + self.dropout2(self.ff(self.norm2(x)))
        return self.norm2(x)
""",
    "returns_input": """
        return x
""",
    "no_dropout": """
        h = self.norm1(x)
        x = x + self.self_attn(h, h, h, mask)
        return x + self.ff(self.norm2(x))
""",
    "dropout_on_residual_sum": """
        h = self.norm1(x)
        x = self.dropout1(x + self.self_attn(h, h, h, mask))
        return self.dropout2(x + self.ff(self.norm2(x)))
""",
    "future_leak": """
        h = self.norm1(x)
        x = x + self.dropout1(self.self_attn(h, h, h, mask.transpose(-2, -1)))  # rows and columns confused
        return x + self.dropout2(self.ff(self.norm2(x)))
""",
    "changed_input": """
        h = self.norm1(x)
        x += self.dropout1(self.self_attn(h, h, h, mask))
        return x + self.dropout2(self.ff(self.norm2(x)))
""",
    "wrong_gradients": """
        h = self.norm1(x)
        x = x + self.dropout1(self.self_attn(h, h, h, mask))
        return (x + self.dropout2(self.ff(self.norm2(x)))).detach()
""",
    "dropout_p_hardcoded": """
        h = self.norm1(x)
        x = x + F.dropout(self.self_attn(h, h, h, mask), 0.1, self.training)
        return x + F.dropout(self.ff(self.norm2(x)), 0.1, self.training)
""",
    "dropout_in_eval_mode": """
        h = self.norm1(x)
        x = x + F.dropout(self.self_attn(h, h, h, mask), self.dropout1.p, True)
        return x + F.dropout(self.ff(self.norm2(x)), self.dropout2.p, True)
""",
}


def block_class(body, init=INIT):
    namespace = {"nn": nn, "torch": torch, "F": torch.nn.functional, "MultiHeadAttention": MultiHeadAttention,
                 "PositionwiseFeedForward": PositionwiseFeedForward, "LayerNorm": LayerNorm}
    return define(init + body, namespace)["GPTBlock"]


@pytest.mark.parametrize("name", sorted(RIGHT))
def test_block_right_answers_pass(name, capsys):
    v = verdict(check_gpt_block, block_class(RIGHT[name]), capsys)
    assert v, v


@pytest.mark.parametrize("code", sorted(WRONG))
def test_block_wrong_answer_gets_its_code(code):
    v = verdict(check_gpt_block, block_class(WRONG[code]))
    assert not v and v.mistake == code, v


def test_block_setup_mistakes():
    assert verdict(check_gpt_block, 42).mistake == "not_a_class"
    renamed = INIT.replace("self.ff =", "self.mlp =").replace("self.ff(", "self.mlp(")
    v = verdict(check_gpt_block, block_class(RIGHT["named"].replace("self.ff(", "self.mlp("), init=renamed))
    assert v.mistake == "weights_do_not_fit", v
    not_module = INIT.replace("class GPTBlock(nn.Module)", "class GPTBlock").replace("super().__init__()", "pass")
    v = verdict(check_gpt_block, block_class("        return x\n", init=not_module))
    assert v.mistake == "not_a_module", v


def test_block_every_declared_mistake_is_tested():
    assert set(GPT_BLOCK_MISTAKES) == set(WRONG) | {"not_a_class", "not_a_module", "weights_do_not_fit"}


def test_generate_reads_the_last_max_len_tokens_beyond_the_context():
    model = small_gpt()  # max_len 24
    ids = torch.randint(0, 30, (2, 5))
    with_cache = generate(model, ids, 40, torch.Generator().manual_seed(1), temperature=0.9)
    without = generate(model, ids, 40, torch.Generator().manual_seed(1), temperature=0.9, use_cache=False)
    assert with_cache.shape == (2, 45) and torch.equal(with_cache, without)
    greedy = generate(model, ids, 40, temperature=0)
    last = model(greedy[:, -25:-1])[:, -1].argmax(-1)  # the last token, from the 24 tokens before it
    assert torch.equal(greedy[:, -1], last)


# ---------------------------------------------------------------------- the student's parts in the trained GPTs
PART_CLASSES = {"attention": "MultiHeadAttention", "layer_norm": "LayerNorm", "feed_forward": "PositionwiseFeedForward"}


def test_without_earlier_notebooks_the_parts_are_the_references(tmp_path):
    parts, origin, fingerprint = gpt_training.your_gpt_parts(tmp_path)
    assert set(origin.values()) == {"reference"} and fingerprint == ""
    assert parts == {"attention": MultiHeadAttention, "layer_norm": LayerNorm, "feed_forward": PositionwiseFeedForward}


def test_whose_part_is_said_in_the_students_language():
    from helpers.i18n import get_language, set_language, tr

    origin = {"MultiHeadAttention": "yours", "LayerNorm": "reference"}
    assert gpt_training.describe_parts(origin).splitlines() == ["    yours  MultiHeadAttention",
                                                                "reference  LayerNorm"]
    before = get_language()
    try:
        set_language("es")
        yours = tr("training:mark_yours", "yours")
        assert yours != "yours" and gpt_training.describe_parts(origin).splitlines()[0].strip() == \
            f"{yours}  MultiHeadAttention"
    finally:
        set_language(before)


def test_the_students_passing_parts_build_the_trained_gpt_and_key_its_checkpoint(tmp_path, monkeypatch, root):
    for stem in ("01_positional_encoding", "03_multi_head_attention", "05_transformer"):
        shutil.copy(root / "solutions" / f"{stem}.ipynb", tmp_path)
    parts, origin, fingerprint = gpt_training.your_gpt_parts(tmp_path)
    assert origin == {name: "yours" for name in PART_CLASSES.values()} and fingerprint
    assert all(parts[keyword].__name__ == name and parts[keyword] is not reference
               for (keyword, name), reference in zip(PART_CLASSES.items(),
                                                     (MultiHeadAttention, LayerNorm, PositionwiseFeedForward)))
    monkeypatch.setenv("TFS_CACHE_DIR", str(tmp_path / "cache"))
    config = gpt_training.GPTConfig(d_model=8, num_heads=2, num_layers=1, d_ff=16, max_len=16, batch_size=4, steps=2,
                                    warmup=1)
    ids = torch.randint(0, 30, (200,), generator=torch.Generator().manual_seed(0))

    def train(**kwargs):
        return gpt_training.train_or_load_gpt(config, "test", "data", lambda: gpt_training.TextBatches(ids, 16, 4),
                                              30, progress=False, **kwargs)

    first = train(parts=parts, fingerprint=fingerprint)
    block = first.model.blocks[0]
    assert first.trained and type(block.self_attn) is parts["attention"] and type(block.ff) is parts["feed_forward"]
    assert type(block.norm1) is parts["layer_norm"] and type(first.model.norm) is parts["layer_norm"]
    again = train(parts=parts, fingerprint=fingerprint)
    assert not again.trained and again.path == first.path
    references = train()  # the references alone: another key, trained afresh
    assert references.trained and references.path != first.path
    assert type(references.model.blocks[0].self_attn) is MultiHeadAttention


def test_the_notebooks_gpts_use_the_students_parts_and_the_norm_runs_the_references(root):
    """The date GPT and the language model are built on the student's parts; the three norm-placement runs compare
    where the LayerNorm goes, so they use the references (empty fingerprint): one cached run for every copy."""
    cells = [c.source for c in nbformat.read(root / "solutions" / "07_gpt.ipynb", as_version=4).cells
             if c.cell_type == "code"]
    assert any("parts, origin, fingerprint = gpt_training.your_gpt_parts(" in source for source in cells)
    assert any("gpt_parts, gpt_fingerprint = gpt_training.with_your_block(parts, fingerprint, GPTBlock)" in source
               for source in cells)
    calls = [source.split("train_or_load_gpt(", 1)[1] for source in cells if "train_or_load_gpt(" in source]
    assert len(calls) == 3  # the date GPT, the language model (with the student's block), the norm placements
    assert all("parts=gpt_parts" in call and "fingerprint=gpt_fingerprint" in call for call in calls[:2])
    assert "parts=None" in calls[2] and 'fingerprint=""' in calls[2]


def test_the_students_block_joins_the_parts_once_it_passes():
    parts = {"attention": MultiHeadAttention, "layer_norm": LayerNorm, "feed_forward": PositionwiseFeedForward}
    right, wrong = block_class(RIGHT["named"]), block_class(WRONG["post_norm_instead_of_pre"])
    assert gpt_training.with_your_block(parts, "abc", wrong) == (parts, "abc")
    with_block, fingerprint = gpt_training.with_your_block(parts, "abc", right)
    assert with_block == {**parts, "block": right} and fingerprint not in ("", "abc")
    assert gpt_training.with_your_block(parts, "", right)[1] != fingerprint  # the parts' fingerprint counts too
    assert gpt_training.with_your_block(parts, "abc", block_class(RIGHT["named"] + "        # a comment\n"))[1] == \
        fingerprint  # comments aside
    torch.manual_seed(0)
    model = GPT(30, 16, 4, 2, 32, max_len=24, **with_block).eval()
    assert type(model.blocks[0]) is right and not hasattr(model.blocks[0], "norm_first")
    ids = torch.randint(0, 30, (2, 5))
    assert torch.equal(generate(model, ids, 6, temperature=0), generate(model, ids, 6, temperature=0, use_cache=False))


def test_the_warm_up_control_differs_from_no_warm_up_in_the_warm_up_steps_only():
    from helpers.schedule import scheduled_lr

    constant = gpt_training.GPTConfig(steps=300, warmup=100, schedule="constant")
    control = gpt_training.replace(constant, schedule="warmup_constant")

    def rates(config):
        return [scheduled_lr(step, config, gpt_training.SCHEDULES[config.schedule]) for step in range(1, 301)]

    without, with_warmup = rates(constant), rates(control)
    assert with_warmup[100:] == without[100:] and with_warmup[99] == without[99] == pytest.approx(0.5 / 80)
    assert all(w < c for w, c in zip(with_warmup[:99], without[:99]))
    paper = gpt_training.replace(constant, schedule="warmup")
    assert rates(paper)[:100] == pytest.approx(with_warmup[:100])  # the paper's warm-up, then the peak kept
    with pytest.raises(ValueError, match="schedule"):
        gpt_training.GPTConfig(schedule="cosine")
