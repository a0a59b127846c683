"""Use the student's own code from an earlier notebook, once its checks pass.

A later notebook (for example the one that trains the Transformer) should run what the student
built, not our reference, as soon as the student's version is right, and fall back to the
reference while it is not, so that one unfinished exercise never blocks the rest of the course.

    load_definitions(path)                the imports, functions and classes of a saved notebook
    student_or_reference(path, parts)     per part, the student's version if its check passes, else ours
    notebook_parts(notebook)              the parts of a notebook's exercises: (check, reference), from the registry
    your_attention_and_encoding(folder)   the student's MultiHeadAttention (notebook 03) and create_position_matrix
                                          (notebook 01) where their checks pass: notebook 05 builds its model on them
                                          (the saved notebooks are found by helpers.earlier_notebooks: in this
                                          folder, or in Colab in the student's Google Drive)
    your_recipe(path, **own)              the training Recipe of notebook 06: every part of the model (positional
                                          encoding, attention, LayerNorm, feed-forward, layers, Transformer), the
                                          schedule, the loss and the training step, each the student's wherever its
                                          check passes
    yours_or_reference(obj)               obj when its exercise's check passes, else the reference

Each exercise's check, notebook and reference come from the exercise registry (helpers.checks): nothing
here names a reference itself. Checks are asked with ``check.verdict_of``, which never raises (not even
under nbgrader) and records nothing: they grade another notebook's exercises.

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
import linecache
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from .checks import EXERCISES, Exercise, exercises_in
from .earlier_notebooks import find_notebooks
from .i18n import tr
from .notebook_io import code_cells, normalized, python_lines, read_json_notebook

PRELUDE = "import math\nimport numpy as np\nimport torch\nfrom torch import nn\nimport torch.nn.functional as F\n"
KEPT = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)

# What the model of notebooks 05 and 06 is built from besides notebook 05's own classes (notebooks 01 and 03).
EARLIER_PARTS = ("create_position_matrix", "MultiHeadAttention")
# Each part of notebook 05's model -> the keyword that hands it to the reference Transformer (helpers.transformer).
TRANSFORMER_PARTS = {"create_position_matrix": "encoding", "MultiHeadAttention": "attention", "LayerNorm": "layer_norm",
                     "PositionwiseFeedForward": "feed_forward", "EncoderLayer": "encoder_layer",
                     "DecoderLayer": "decoder_layer"}
OWN_STEPS = ("transformer_lr", "LabelSmoothingLoss", "train_step")  # what notebook 06 hands to your_recipe


@dataclass
class Definitions:
    """What load_definitions found: the namespace, the source of each definition, the cells it skipped."""

    namespace: dict[str, Any]
    sources: dict[str, str] = field(default_factory=dict)  # name -> the source of its def/class statement
    skipped: list[str] = field(default_factory=list)  # why a cell (or a definition) could not be used


def load_definitions(path: str | Path, refuse: Callable[[ast.stmt, str], str | None] | None = None) -> Definitions:
    """Execute the imports and the def/class statements of a saved notebook, in cell order, in a fresh namespace.

    A cell that is not valid Python, or a definition that fails to execute, is skipped and named in
    ``skipped``; the rest still loads. refuse(node, source), when given, is asked about each statement
    before it runs: a reason (a str) skips it and is named in ``skipped``. The notebook is read as the
    JSON it is (helpers.notebook_io), without nbformat.
    """
    path = Path(path)
    if path.suffix != ".ipynb":
        raise ValueError(f"path must name a .ipynb notebook, got {str(path)!r}")
    cells = code_cells(read_json_notebook(path))
    namespace: dict[str, Any] = {"__name__": f"notebook_{path.stem}"}
    exec(compile(PRELUDE, "<prelude>", "exec"), namespace)
    found = Definitions(namespace)
    for index, cell_source in cells:
        source = python_lines(cell_source)
        try:
            tree = ast.parse(source)
        except SyntaxError as error:
            found.skipped.append(f"cell {index}: not valid Python ({error.msg}, line {error.lineno})")
            continue
        filename = cell_filename(path, index, source)
        for node in tree.body:
            if not isinstance(node, KEPT):
                continue
            code = ast.get_source_segment(source, node) or ""
            reason = refuse(node, code) if refuse is not None else None
            if reason:
                found.skipped.append(f"cell {index}: {reason}")
                continue
            try:
                exec(compile(ast.Module([node], []), filename, "exec"), namespace)
            except Exception as error:  # noqa: BLE001 - a student's broken import or class body
                found.skipped.append(f"cell {index}: {type(error).__name__}: {error}")
                continue
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                found.sources[node.name] = code
    return found


def cell_filename(path: Path, index: int, source: str) -> str:
    """The file name the code of one cell is compiled under, its source registered with linecache, as a
    kernel does: so inspect and the checks read the student's definitions (a stub is recognised by its
    source). A hash of the source keeps two versions of a cell apart."""
    digest = hashlib.sha256(source.encode("utf-8")).hexdigest()[:12]
    filename = f"<{path.name}, cell {index}, {digest}>"
    lines = [line + "\n" for line in source.split("\n")]
    linecache.cache[filename] = (len(source), None, lines, filename)  # no time stamp: checkcache keeps it
    return filename


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
            digest.update(f"{name}\n{normalized(self.sources[name])}\n".encode("utf-8"))
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

    @classmethod
    def joined(cls, *choices: "Choice") -> "Choice":
        """One Choice of the parts of several, in their order (a later one wins a name they share)."""
        joined = cls({}, {}, {}, {})
        for choice in choices:
            for mine, theirs in ((joined.objects, choice.objects), (joined.origin, choice.origin),
                                 (joined.reasons, choice.reasons), (joined.sources, choice.sources)):
                mine.update(theirs)
        return joined


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
        verdict = verdict_quietly(check, found.namespace[name])
        if verdict:
            objects[name], origin[name], sources[name] = found.namespace[name], "yours", found.sources[name]
            reasons[name] = tr("student_code:passes_from", "its check passes, from {file}", file=path.name)
        else:
            reasons[name] = not_yet(verdict)
            found.namespace[name] = reference
    return Choice(objects, origin, reasons, sources, found.namespace)


def verdict_quietly(check: Callable, answer: Any):
    """check.verdict_of(answer) (never raises, records nothing), torch's and numpy's random state left as it was."""
    with _same_random_state():
        return check.verdict_of(answer)


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


def not_yet(verdict) -> str:
    """Why the student's version is not used, in a few words: not written yet, or the hint's first sentence."""
    if verdict.status == "todo":
        return tr("student_code:not_written", "not written yet")
    first = verdict.message.split(". ")[0].rstrip(".")
    return tr("student_code:does_not_pass", "its check does not pass yet ({first})", first=first)


def exercise_defining(name: str) -> Exercise:
    """The exercise of the registry whose answer defines name (a function or class the student writes)."""
    found = next((ex for ex in EXERCISES.values() if ex.defines == name), None)
    if found is None:
        raise ValueError(f"defines must name what an exercise defines (e.g. 'greedy_decode'), got {name!r}")
    return found


def notebook_parts(notebook: str) -> dict[str, tuple[Callable, Any]]:
    """{name the student defines: (its check, its reference)} for each exercise of a notebook, in the
    notebook's order, read from the exercise registry; e.g. notebook_parts("05_transformer")."""
    parts = {ex.defines: (ex.check, ex.reference_object()) for ex in exercises_in(notebook)}
    if not parts:
        raise ValueError(f"notebook must name a notebook with exercises, e.g. '05_transformer', got {notebook!r}")
    return parts


def yours_or_reference(obj: Any, defines: str | None = None) -> tuple[Any, str]:
    """(obj, "your") when the check of the exercise that defines obj passes, else (the exercise's reference,
    "the reference"), these words in the student's language (helpers.set_language). defines defaults to
    obj.__name__. The check runs quietly (check.verdict_of)."""
    exercise = exercise_defining(defines or getattr(obj, "__name__", ""))
    if verdict_quietly(exercise.check, obj):
        return obj, tr("student_code:whose_yours", "your")
    return exercise.reference_object(), tr("student_code:whose_reference", "the reference")


def your_attention_and_encoding(folder: str | Path = ".", paths: dict[str, Path] | None = None) -> Choice:
    """The student's create_position_matrix (notebook 01) and MultiHeadAttention (notebook 03), each read
    from their saved notebook in folder (in Colab, also their copy in Google Drive: find_notebooks) and used
    when its check passes; the exercise's reference otherwise (helpers.positional_encoding,
    helpers.MultiHeadAttention). Notebook 05 builds its layers and its positional encoding on them, and
    notebook 06 trains them (your_recipe). paths: {notebook stem: path}, already found (your_recipe's).
    """
    exercises = [exercise_defining(name) for name in EARLIER_PARTS]
    paths = paths or find_notebooks(folder, [exercise.notebook for exercise in exercises])
    return Choice.joined(*(student_or_reference(paths[ex.notebook], {ex.defines: (ex.check, ex.reference_object())})
                           for ex in exercises))


def held_parts(recipe, parts: dict[str, Any]) -> set[str]:
    """The names of parts (name -> class, or the encoding function) that a tiny model of recipe actually holds."""
    import torch

    with torch.random.fork_rng(devices=[]):
        model = recipe.new_model(5, 5, d_model=8, num_heads=2, num_layers=1, d_ff=8, dropout=0.0, max_len=4,
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
    from the same folder (your_attention_and_encoding; in Colab, any of the three missing there is looked
    for in the student's Google Drive: helpers.earlier_notebooks), and notebook 05's classes are loaded and
    checked with the student's create_position_matrix and MultiHeadAttention where those pass.
    own: this notebook's own parts by name, transformer_lr=..., LabelSmoothingLoss=... and
    train_step=..., each checked and used when it passes.

    The model is the student's Transformer when its check passes; otherwise the reference Transformer
    with every part of the student's that passes handed to it (Recipe.model_parts: their layers, or
    their attention, LayerNorm and feed-forward inside the reference layers, and their positional
    encoding). A part whose check passes but which the model does not hold is reported as the
    reference's. The recipe also names the decoding: the reference's greedy decoding (with a KV cache)
    measures the validation dates during training; the student's greedy_decode comes later.
    """
    from .training import Recipe

    unknown = [name for name in own if name not in OWN_STEPS]
    if unknown:
        raise ValueError(f"own parts must be transformer_lr=, LabelSmoothingLoss= and train_step=, got {unknown[0]}=")
    model_notebook = Path(model_notebook)
    stems = [exercise_defining(name).notebook for name in EARLIER_PARTS] + [model_notebook.stem]
    paths = find_notebooks(model_notebook.parent, stems)
    earlier = your_attention_and_encoding(paths=paths)
    model_notebook = paths[model_notebook.stem] if model_notebook.suffix == ".ipynb" else model_notebook
    model = student_or_reference(model_notebook, notebook_parts("05_transformer"), given=earlier.objects)
    choice = Choice.joined(earlier, model)
    origin, reasons, sources = choice.origin, choice.reasons, choice.sources
    yours = {name: choice.objects[name] for name in origin if origin[name] == "yours"}
    if "Transformer" in yours:
        model_class, model_parts = yours["Transformer"], {}
    else:
        model_class = model.objects["Transformer"]  # the reference
        model_parts = {TRANSFORMER_PARTS[name]: part for name, part in yours.items()}
        for name in ("EncoderLayer", "DecoderLayer"):
            if name in yours:
                reasons[name] = tr("student_code:layer_in_reference",
                                   "its check passes; it trains inside the reference Transformer")
    parts = {name: part for name, part in yours.items() if name != "Transformer"}
    held = held_parts(Recipe(model_class=model_class, model_parts=model_parts), parts) if parts else set()
    for name in parts:
        if name not in held:
            origin[name] = "reference"
            reasons[name] = tr("student_code:not_used", "its check passes, but your notebook 05 classes do not use it")
            sources.pop(name, None)
    own_parts = notebook_parts("06_training")
    steps = {name: own_parts[name][1] for name in OWN_STEPS}  # the references, replaced by the student's that pass
    for name in OWN_STEPS:
        if name not in own:
            origin[name], reasons[name] = "reference", tr("student_code:not_given", "not given to your_recipe")
            continue
        verdict = verdict_quietly(own_parts[name][0], own[name])
        if verdict:
            steps[name], origin[name] = own[name], "yours"
            reasons[name] = tr("student_code:passes_here", "its check passes, in this notebook")
            sources[name] = source_of(own[name])
        else:
            origin[name], reasons[name] = "reference", not_yet(verdict)
    origin["greedy_decode"] = "reference"
    reasons["greedy_decode"] = tr("student_code:decoding", "the reference (with a KV cache) measures the validation "
                                  "dates while training; your greedy_decode (exercise 4) decodes after training, once "
                                  "its check passes")
    return Recipe(model_class=model_class, model_parts=model_parts, transformer_lr=steps["transformer_lr"],
                  loss_class=steps["LabelSmoothingLoss"], train_step=steps["train_step"],
                  fingerprint=Choice({}, {}, {}, sources).fingerprint() if sources else "", origin=origin,
                  reasons=reasons)


__all__ = ["EARLIER_PARTS", "OWN_STEPS", "TRANSFORMER_PARTS", "Choice", "Definitions", "exercise_defining",
           "held_parts", "load_definitions", "normalized", "not_yet", "notebook_parts", "source_of",
           "student_or_reference", "verdict_quietly", "your_attention_and_encoding", "your_recipe",
           "yours_or_reference"]
