"""Use the student's own code from an earlier notebook, once its checks pass.

A later notebook (for example the one that trains the Transformer) should run what the student
built, not our reference, as soon as the student's version is right, and fall back to the
reference while it is not, so that one unfinished exercise never blocks the rest of the course.

    load_definitions(path)                the imports, functions and classes of a saved notebook
    student_or_reference(path, parts)     per part, the student's version if its check passes, else ours
    notebook_parts(notebook)              the parts of a notebook's exercises, read from the exercise registry
    your_attention_and_encoding(folder)   the student's MultiHeadAttention (notebook 03) and create_position_matrix
                                          (notebook 01) where their checks pass: notebook 05 builds its model on them
    reference_transformer_with(...)       the reference Transformer with the student's passing parts put inside it
    your_recipe(path, **own)              the training Recipe of notebook 06: every part of the model (positional
                                          encoding, attention, LayerNorm, feed-forward, layers, Transformer), the
                                          schedule, the loss and the training step, each the student's wherever its
                                          check passes

A part that falls back to the reference also replaces the student's version inside the loaded
namespace, so the student's later classes are built on the reference (a student's EncoderLayer
whose LayerNorm is not right yet trains with the reference LayerNorm).

Only ``import`` statements and ``def``/``class`` statements are taken from the notebook's code
cells (in order, as the student saved them): no other statement runs, so loading a notebook
never trains a model or draws a plot. The same idea as the notebook-import helpers of
rasbt/LLMs-from-scratch, which test their chapters' code this way.
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import inspect
import json
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from .checks.harness import EXERCISES, silenced
from .i18n import tr

PRELUDE = "import math\nimport numpy as np\nimport torch\nfrom torch import nn\nimport torch.nn.functional as F\n"
KEPT = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


@dataclass
class Definitions:
    """What load_definitions found: the namespace, the source of each definition, the cells it skipped."""

    namespace: dict[str, Any]
    sources: dict[str, str] = field(default_factory=dict)  # name -> the source of its def/class statement
    skipped: list[str] = field(default_factory=list)  # why a cell (or a definition) could not be used


def _python_lines(source: str) -> str:
    """A cell's source without IPython's magics and shell escapes (%matplotlib, !pip, ...)."""
    return "\n".join("" if line.startswith(("%", "!")) else line for line in source.splitlines())


def _code_cells(path: Path) -> list[tuple[int, str]]:
    """(index, source) of each code cell of the notebook at path, read as the JSON it is.

    json rather than nbformat: importing nbformat takes two seconds (its schema validator builds
    grammars at import), and reading a saved notebook's cells needs none of it.
    """
    try:
        notebook = json.loads(path.read_text(encoding="utf-8"))
        cells = notebook["cells"]
        return [(index, "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"])
                for index, cell in enumerate(cells) if cell.get("cell_type") == "code"]
    except (OSError, ValueError) as error:
        raise ValueError(f"cannot read the notebook {path}: {error}") from None
    except (KeyError, TypeError, AttributeError):
        raise ValueError(f"cannot read the notebook {path}: it is not a Jupyter notebook (format 4)") from None


def load_definitions(path: str | Path, refuse: Callable[[ast.stmt, str], str | None] | None = None) -> Definitions:
    """Execute the imports and the def/class statements of a saved notebook, in cell order, in a fresh namespace.

    A cell that is not valid Python, or a definition that fails to execute, is skipped and named in
    ``skipped``; the rest still loads. refuse(node, source), when given, is asked about each statement
    before it runs: a reason (a str) skips it and is named in ``skipped``.
    """
    path = Path(path)
    if path.suffix != ".ipynb":
        raise ValueError(f"path must name a .ipynb notebook, got {str(path)!r}")
    cells = _code_cells(path)
    namespace: dict[str, Any] = {"__name__": f"notebook_{path.stem}"}
    exec(compile(PRELUDE, "<prelude>", "exec"), namespace)
    found = Definitions(namespace)
    for index, cell_source in cells:
        source = _python_lines(cell_source)
        try:
            tree = ast.parse(source)
        except SyntaxError as error:
            found.skipped.append(f"cell {index}: not valid Python ({error.msg}, line {error.lineno})")
            continue
        for node in tree.body:
            if not isinstance(node, KEPT):
                continue
            code = ast.get_source_segment(source, node) or ""
            reason = refuse(node, code) if refuse is not None else None
            if reason:
                found.skipped.append(f"cell {index}: {reason}")
                continue
            try:
                exec(compile(ast.Module([node], []), f"{path.name}, cell {index}", "exec"), namespace)
            except Exception as error:  # noqa: BLE001 - a student's broken import or class body
                found.skipped.append(f"cell {index}: {type(error).__name__}: {error}")
                continue
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                found.sources[node.name] = code
    return found


def normalized(source: str) -> str:
    """The code of source without its comments, docstrings and layout: equal for equal code.

    So two notebooks whose code differs only in comments, docstrings or spacing (the English and
    the Spanish edition, say) share one trained checkpoint.
    """
    try:
        tree = ast.parse(textwrap.dedent(source))
    except SyntaxError:
        return source
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Module)) and body
                and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)):
            node.body = body[1:] or [ast.Pass()]
    return ast.unparse(tree)


def source_of(obj: Any) -> str:
    """The source of a function, or of every method of a class, defined in a notebook or a module."""
    try:
        if inspect.isclass(obj):
            methods = [value for _, value in sorted(vars(obj).items()) if inspect.isfunction(value)]
            body = "\n".join(textwrap.indent(textwrap.dedent(inspect.getsource(m)), "    ") for m in methods)
            return f"class {obj.__name__}:\n" + (body or "    pass\n")  # valid Python, so normalized() parses it
        return inspect.getsource(obj)
    except (OSError, TypeError):  # no source to read (a built-in, or code typed at a prompt)
        code = getattr(obj, "__code__", None)
        return repr(code.co_code) if code is not None else repr(obj)


@dataclass
class Choice:
    """Which version of each part is used: the student's (their check passed) or the reference."""

    objects: dict[str, Any]  # name -> the class or function to use
    origin: dict[str, str]  # name -> "yours" or "reference"
    reasons: dict[str, str]  # name -> the verdict line, or why the student's version was not used
    sources: dict[str, str]  # name -> the student's source, for the parts that are theirs
    namespace: dict[str, Any] = field(default_factory=dict, repr=False)  # the loaded notebook, references swapped in

    def fingerprint(self) -> str:
        """A short hash of the student's code in use: equal fingerprints mean the same code (comments,
        docstrings and layout aside)."""
        digest = hashlib.sha256()
        for name in sorted(self.sources):
            digest.update(f"{name}\n{normalized(self.sources[name])}\n".encode())
        return digest.hexdigest()[:16]

    def describe(self) -> str:
        """One line per part: whose version runs, and why."""
        lines = []
        for name, origin in self.origin.items():
            if origin == "yours":
                lines.append(tr("student_code:your_version", "{name}: your version ({reason})", name=name,
                                reason=self.reasons[name]))
            else:
                lines.append(tr("student_code:reference_version", "{name}: the reference version ({reason})",
                                name=name, reason=self.reasons[name]))
        return "\n".join(lines)


def student_or_reference(path: str | Path, parts: dict[str, tuple[Callable, Any]],
                         given: dict[str, Any] | None = None) -> Choice:
    """For each part name -> (check, reference): the student's definition from the notebook at path
    when its check passes, else the reference. A missing or unreadable notebook falls back to the
    reference for every part.

    given: names set in the loaded namespace before any part is checked (notebook 05's classes read
    MultiHeadAttention and create_position_matrix from it: see your_attention_and_encoding).

    The parts are checked in the order given. A part that falls back to the reference replaces the
    student's version in the loaded namespace before the next part is checked, so later parts that
    use it (by its name) are checked, and run, with the reference.

    The checks run silenced: they neither log to the grader nor raise under nbgrader, since they
    grade another notebook's exercises.
    """
    if not parts:
        raise ValueError("parts must name at least one (check, reference) pair")
    path = Path(path)
    try:
        found = load_definitions(path)
    except ValueError as error:
        found = Definitions({}, skipped=[str(error)])
    found.namespace.update(given or {})
    objects, origin, reasons, sources = {}, {}, {}, {}
    for name, (check, reference) in parts.items():
        objects[name], origin[name] = reference, "reference"
        if name not in found.sources:
            if path.exists():
                reasons[name] = tr("student_code:defines_no", "{file} defines no {name}", file=path.name, name=name)
            else:
                reasons[name] = tr("student_code:no_notebook", "no {file} in this folder", file=path.name)
            found.namespace[name] = reference
            continue
        with silenced(), _same_random_state():
            verdict = check(found.namespace[name])
        if verdict:
            objects[name], origin[name], sources[name] = found.namespace[name], "yours", found.sources[name]
            reasons[name] = tr("student_code:passes_from", "its check passes, from {file}", file=path.name)
        else:
            reasons[name] = _not_yet(verdict)
            found.namespace[name] = reference
    return Choice(objects, origin, reasons, sources, found.namespace)


@contextlib.contextmanager
def _same_random_state():
    """Run a check without changing torch's and numpy's global random state: loading another notebook's code
    leaves the caller's random numbers as they were (a seeded notebook cell draws the same numbers after it)."""
    import numpy as np
    import torch

    state = np.random.get_state()
    try:
        with torch.random.fork_rng(devices=[]):
            yield
    finally:
        np.random.set_state(state)


def _not_yet(verdict) -> str:
    """Why the student's version is not used, in a few words: not written yet, or the hint's first sentence."""
    if verdict.status == "todo":
        return tr("student_code:not_written", "not written yet")
    first = verdict.message.split(". ")[0].rstrip(".")
    return tr("student_code:does_not_pass", "its check does not pass yet ({first})", first=first)


def notebook_parts(notebook: str) -> dict[str, tuple[Callable, Any]]:
    """{name the student defines: (its check, the reference from helpers)} for each exercise of a notebook,
    in the notebook's order, read from the exercise registry; e.g. notebook_parts("05_transformer")."""
    import helpers

    parts = {ex.defines: (ex.check, getattr(helpers, ex.defines)) for ex in EXERCISES.values()
             if ex.notebook == notebook}
    if not parts:
        raise ValueError(f"notebook must name a notebook with exercises, e.g. '05_transformer', got {notebook!r}")
    return parts


def yours_or_reference(obj: Any, defines: str | None = None) -> tuple[Any, str]:
    """(obj, "your") when the check of the exercise that defines obj passes (silenced), else
    (the reference from helpers, "the reference"), these words in the student's language
    (helpers.set_language). defines defaults to obj.__name__."""
    import helpers

    name = defines or getattr(obj, "__name__", "")
    exercise = next((ex for ex in EXERCISES.values() if ex.defines == name), None)
    if exercise is None:
        raise ValueError(f"defines must name what an exercise defines (e.g. 'greedy_decode'), got {name!r}")
    with silenced(), _same_random_state():
        verdict = exercise.check(obj)
    if verdict:
        return obj, tr("student_code:whose_yours", "your")
    return getattr(helpers, name), tr("student_code:whose_reference", "the reference")


# The parts of notebooks 01 and 03 that the model of notebooks 05 and 06 is built from:
# name -> (the notebook that defines it, the exercise that checks it, the reference's name in helpers).
EARLIER_PARTS = {
    "create_position_matrix": ("01_positional_encoding.ipynb", "create_position_matrix", "positional_encoding"),
    "MultiHeadAttention": ("03_multi_head_attention.ipynb", "multi_head_attention_module", "MultiHeadAttention"),
}


def your_attention_and_encoding(folder: str | Path = ".") -> Choice:
    """The student's create_position_matrix (notebook 01) and MultiHeadAttention (notebook 03), each read
    from their saved notebook in folder and used when its check passes (silenced); the reference
    otherwise (helpers.positional_encoding, helpers.MultiHeadAttention). Notebook 05 builds its layers
    and its positional encoding on them, and notebook 06 trains them (your_recipe).
    """
    import helpers

    folder = Path(folder)
    objects, origin, reasons, sources = {}, {}, {}, {}
    for name, (notebook, exercise, reference) in EARLIER_PARTS.items():
        part = {name: (EXERCISES[exercise].check, getattr(helpers, reference))}
        one = student_or_reference(folder / notebook, part)
        for mine, theirs in ((objects, one.objects), (origin, one.origin), (reasons, one.reasons),
                             (sources, one.sources)):
            mine.update(theirs)
    return Choice(objects, origin, reasons, sources)


def reference_transformer_with(encoder_layer: type | None = None, decoder_layer: type | None = None, *,
                               attention: type | None = None, layer_norm: type | None = None,
                               feed_forward: type | None = None, encoding: Callable | None = None) -> type:
    """The reference Transformer with the given parts inside it (None: the reference's own).

    encoder_layer, decoder_layer: the classes of its N encoder and N decoder layers, each called as
    Layer(d_model, h, d_ff, dropout, norm_first). attention (called as Attention(d_model, h, dropout)),
    layer_norm (LayerNorm(d_model)) and feed_forward (FeedForward(d_model, d_ff, dropout)) replace the
    sub-modules of the reference layers (and layer_norm the final norms of a pre-norm model); a given
    layer class keeps its own. encoding(max_len, d_model) computes the positional encoding. Every
    parameter is then initialised as the reference initialises its own.
    """
    from torch import nn

    from .positional import PositionalEncoding
    from .transformer import DecoderLayer, EncoderLayer
    from .transformer import Transformer as Reference

    def fill(layer: nn.Module, sizes: tuple) -> nn.Module:
        """The reference layer with the given attention, LayerNorms and feed-forward network inside it."""
        d_model, num_heads, d_ff, dropout, _ = sizes
        for name in ("self_attn", "cross_attn"):
            if attention is not None and hasattr(layer, name):
                setattr(layer, name, attention(d_model, num_heads, dropout))
        for name in ("norm1", "norm2", "norm3"):
            if layer_norm is not None and hasattr(layer, name):
                setattr(layer, name, layer_norm(d_model))
        if feed_forward is not None:
            layer.ff = feed_forward(d_model, d_ff, dropout)
        return layer

    class Transformer(Reference):
        def __init__(self, *args: Any, **kwargs: Any):
            super().__init__(*args, **kwargs)
            sizes = (self.d_model, self.num_heads, self.d_ff, self.dropout_p, self.norm_first)
            for stack, given, reference in ((self.encoder, encoder_layer, EncoderLayer),
                                            (self.decoder, decoder_layer, DecoderLayer)):
                stack.layers = nn.ModuleList(given(*sizes) if given is not None else fill(reference(*sizes), sizes)
                                             for _ in range(self.num_layers))
                if layer_norm is not None and self.norm_first:
                    stack.norm = layer_norm(self.d_model)
            if encoding is not None:
                self.positional = PositionalEncoding(self.d_model, self.max_len, self.dropout_p, encoding)
            self._reset_parameters()
            if self.share_embeddings:
                self.generator.weight = self.src_embed.weight

    return Transformer


def _in_use(model_class: type, parts: dict[str, Any]) -> set[str]:
    """The names of parts (name -> class, or the encoding function) that a tiny model_class actually holds."""
    import torch

    with torch.random.fork_rng(devices=[]):
        model = model_class(5, 5, d_model=8, num_heads=2, num_layers=1, d_ff=8, dropout=0.0, max_len=4,
                            norm_first=True)
    held = {type(module) for module in model.modules()}
    found = {name for name, part in parts.items() if isinstance(part, type) and any(issubclass(t, part) for t in held)}
    if getattr(getattr(model, "positional", None), "encoding", None) is parts.get("create_position_matrix"):
        found.add("create_position_matrix")
    return found


def your_recipe(model_notebook: str | Path = "05_transformer.ipynb", **own: Any):
    """The training Recipe of notebook 06, built from the student's code wherever its check passes.

    model_notebook: the saved notebook 05, whose LayerNorm, PositionwiseFeedForward, EncoderLayer,
    DecoderLayer and Transformer are loaded (see student_or_reference); notebooks 01 and 03 are read
    from the same folder (your_attention_and_encoding), and notebook 05's classes are loaded and
    checked with the student's create_position_matrix and MultiHeadAttention where those pass.
    own: this notebook's own parts by name, transformer_lr=..., LabelSmoothingLoss=... and
    train_step=..., each checked (silenced) and used when it passes.

    The model class is the student's Transformer when its check passes; otherwise the reference
    Transformer with every part of the student's that passes put inside it (their layers, or their
    attention, LayerNorm and feed-forward inside the reference layers, and their positional
    encoding). A part whose check passes but which the student's classes do not use is reported as
    the reference's. The recipe also names the decoding: the reference's greedy decoding (with a
    KV cache) measures the validation dates during training; the student's greedy_decode comes later.
    """
    from .training import Recipe

    import helpers

    model_notebook = Path(model_notebook)
    earlier = your_attention_and_encoding(model_notebook.parent)
    choice = student_or_reference(model_notebook, notebook_parts("05_transformer"), given=earlier.objects)
    origin = {**earlier.origin, **choice.origin}
    reasons = {**earlier.reasons, **choice.reasons}
    sources = {**earlier.sources, **choice.sources}
    objects = {**earlier.objects, **choice.objects}
    yours = {name: objects[name] for name in origin if origin[name] == "yours"}
    if "Transformer" in yours:
        model_class = yours["Transformer"]
    elif yours:
        model_class = reference_transformer_with(
            yours.get("EncoderLayer"), yours.get("DecoderLayer"), attention=yours.get("MultiHeadAttention"),
            layer_norm=yours.get("LayerNorm"), feed_forward=yours.get("PositionwiseFeedForward"),
            encoding=yours.get("create_position_matrix"))
        for name in ("EncoderLayer", "DecoderLayer"):
            if name in yours:
                reasons[name] = tr("student_code:layer_in_reference",
                                   "its check passes; it trains inside the reference Transformer")
    else:
        model_class = helpers.Transformer
    parts = {name: part for name, part in yours.items() if name != "Transformer"}
    used = _in_use(model_class, parts) if parts else set()
    for name in yours:
        if name != "Transformer" and name not in used:
            origin[name] = "reference"
            reasons[name] = tr("student_code:not_used", "its check passes, but your notebook 05 classes do not use it")
            sources.pop(name, None)
    steps = {"transformer_lr": None, "LabelSmoothingLoss": None, "train_step": None}
    own_parts = notebook_parts("06_training")
    for name, obj in own.items():
        if name not in steps:
            raise ValueError(f"own parts must be transformer_lr=, LabelSmoothingLoss= and train_step=, got {name}=")
        check, reference = own_parts[name]
        with silenced(), _same_random_state():
            verdict = check(obj)
        if verdict:
            steps[name], origin[name] = obj, "yours"
            reasons[name] = tr("student_code:passes_here", "its check passes, in this notebook")
            sources[name] = source_of(obj)
        else:
            origin[name], reasons[name] = "reference", _not_yet(verdict)
    for name in steps:
        if name not in own:
            origin[name], reasons[name] = "reference", tr("student_code:not_given", "not given to your_recipe")
    origin["greedy_decode"] = "reference"
    reasons["greedy_decode"] = tr("student_code:decoding", "the reference (with a KV cache) measures the validation "
                                  "dates while training; your greedy_decode (exercise 4) decodes after training, once "
                                  "its check passes")
    digest = Choice({}, {}, {}, sources).fingerprint() if sources else ""
    recipe = Recipe(model_class=model_class,
                    transformer_lr=steps["transformer_lr"] or helpers.transformer_lr,
                    loss_class=steps["LabelSmoothingLoss"] or helpers.LabelSmoothingLoss,
                    train_step=steps["train_step"] or helpers.training.train_step,
                    fingerprint=digest, origin=origin, reasons=reasons)
    return recipe


__all__ = ["EARLIER_PARTS", "Choice", "Definitions", "load_definitions", "normalized", "notebook_parts",
           "reference_transformer_with", "source_of", "student_or_reference", "your_attention_and_encoding",
           "your_recipe", "yours_or_reference"]
