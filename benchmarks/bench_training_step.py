"""Benchmark 1: time of one training step (forward, backward, Adam, the scheduler) of our Transformer
against nn.Transformer of the same size, at notebook 06's configuration and at the paper's base size,
and of what notebook 06 trains once every check passes (common.solution_recipe: the solutions'
create_position_matrix of notebook 01, MultiHeadAttention of notebook 03, classes of notebook 05, and
loss and train_step of notebook 06).

    .venv/bin/python benchmarks/bench_training_step.py [--repeats 10] [--skip-base]

Both models get the same embeddings, positional encoding and output projection; only the
encoder-decoder core differs (ours: helpers.Encoder/Decoder on helpers.MultiHeadAttention;
theirs: nn.Transformer, post-norm, ReLU, batch_first, without the final LayerNorms it adds by
default, so both compute the paper's model). The steps are interleaved and the ratio is taken
within one run, so a busy machine slows both alike.
"""

from __future__ import annotations

import argparse
import math

from common import interleaved_medians, save, solution_recipe, table

import torch
from torch import nn

import helpers
from helpers.dates import SOURCE_VOCAB, TARGET_VOCAB
from helpers.loss import LabelSmoothingLoss
from helpers.training import train_step


class TorchTransformer(nn.Module):
    """Embeddings * sqrt(d_model) + PE -> nn.Transformer -> Linear, with the same masks as ours."""

    def __init__(self, src_vocab, tgt_vocab, d_model, num_heads, num_layers, d_ff, dropout, max_len, share):
        super().__init__()
        self.d_model = d_model
        self.src_embed = nn.Embedding(src_vocab, d_model)
        self.tgt_embed = self.src_embed if share else nn.Embedding(tgt_vocab, d_model)
        self.positional = helpers.PositionalEncoding(d_model, max_len, dropout)
        self.core = nn.Transformer(d_model, num_heads, num_layers, num_layers, d_ff, dropout, batch_first=True)
        self.core.encoder.norm = None  # the paper's post-norm model has no final norm
        self.core.decoder.norm = None
        self.generator = nn.Linear(d_model, tgt_vocab)
        if share:
            self.generator.weight = self.src_embed.weight

    def forward(self, src, tgt):
        pad_src, pad_tgt = src == 0, tgt == 0
        causal = torch.ones(tgt.shape[1], tgt.shape[1], dtype=torch.bool, device=tgt.device).triu(1)
        x = self.positional(self.src_embed(src) * math.sqrt(self.d_model))
        y = self.positional(self.tgt_embed(tgt) * math.sqrt(self.d_model))
        out = self.core(x, y, tgt_mask=causal, src_key_padding_mask=pad_src, tgt_key_padding_mask=pad_tgt,
                        memory_key_padding_mask=pad_src)
        return self.generator(out)


def make_step(model, src, tgt, step_fn=train_step, loss_class=LabelSmoothingLoss):
    """One call of step_fn (the reference train_step, or the solution's): teacher forcing, zero_grad, backward,
    Adam's step and a (constant) scheduler's step."""
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda i: 1.0)
    loss_fn = loss_class(0.1, 0)

    def step():
        step_fn(model, src, tgt, optimizer, scheduler, loss_fn)
    return step


CONFIGS = {
    "notebook 06 (d_model 64, 2+2 layers, batch 128, L_src 20, L_tgt 12)":
        dict(src_vocab=len(SOURCE_VOCAB), tgt_vocab=len(TARGET_VOCAB), d_model=64, num_heads=4, num_layers=2,
             d_ff=256, share=False, batch=128, l_src=20, l_tgt=12),
    "paper base (d_model 512, 6+6 layers, 37k shared vocab, batch 8, L 16)":
        dict(src_vocab=37000, tgt_vocab=37000, d_model=512, num_heads=8, num_layers=6, d_ff=2048, share=True,
             batch=8, l_src=16, l_tgt=17),
}


def run(repeats: int = 10, skip_base: bool = False) -> dict:
    device = helpers.default_device()
    recipe = solution_recipe()
    students = recipe.model_class
    rows = []
    for name, c in CONFIGS.items():
        if skip_base and c["d_model"] == 512:
            continue
        gen = torch.Generator().manual_seed(0)
        src = torch.randint(1, c["src_vocab"], (c["batch"], c["l_src"]), generator=gen).to(device)
        tgt = torch.randint(1, c["tgt_vocab"], (c["batch"], c["l_tgt"]), generator=gen).to(device)
        torch.manual_seed(0)
        ours = helpers.Transformer(c["src_vocab"], c["tgt_vocab"], d_model=c["d_model"], num_heads=c["num_heads"],
                                   num_layers=c["num_layers"], d_ff=c["d_ff"], dropout=0.1, max_len=64,
                                   share_embeddings=c["share"]).to(device)
        theirs = TorchTransformer(c["src_vocab"], c["tgt_vocab"], c["d_model"], c["num_heads"], c["num_layers"],
                                  c["d_ff"], 0.1, 64, c["share"]).to(device)
        torch.manual_seed(0)
        student = students(c["src_vocab"], c["tgt_vocab"], d_model=c["d_model"], num_heads=c["num_heads"],
                           num_layers=c["num_layers"], d_ff=c["d_ff"], dropout=0.1, max_len=64,
                           share_embeddings=c["share"]).to(device)
        n_ours, n_theirs = helpers.count_parameters(ours), helpers.count_parameters(theirs)
        reps = repeats if c["d_model"] < 512 else max(3, repeats // 2)
        medians = interleaved_medians({"ours": make_step(ours, src, tgt), "torch": make_step(theirs, src, tgt),
                                       "student": make_step(student, src, tgt, recipe.train_step, recipe.loss_class)},
                                      repeats=reps, warmup=2, device=device)
        rows.append({"configuration": name, "parameters": f"{n_ours:,}", "same_size": n_ours == n_theirs,
                     "ours_ms": round(medians["ours"] * 1000, 1), "torch_ms": round(medians["torch"] * 1000, 1),
                     "ratio": round(medians["ours"] / medians["torch"], 2),
                     "student_ms": round(medians["student"] * 1000, 1),
                     "student_ratio": round(medians["student"] / medians["ours"], 2),
                     "student_torch_ratio": round(medians["student"] / medians["torch"], 2), "repeats": reps,
                     "device": device})
    print("Training step (forward + backward + Adam), median of interleaved repeats")
    print(table(rows, [("configuration", "configuration"), ("parameters", "parameters"),
                       ("ours_ms", "ours ms"), ("torch_ms", "nn.Transformer ms"), ("ratio", "ours / torch"),
                       ("student_ms", "solutions ms"), ("student_ratio", "solutions / ours"),
                       ("student_torch_ratio", "solutions / torch")]))
    path = save("training_step", {"rows": rows})
    print(f"wrote {path}")
    return {"rows": rows}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--skip-base", action="store_true", help="only the notebook's configuration")
    args = parser.parse_args()
    run(args.repeats, args.skip_base)
