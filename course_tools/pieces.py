"""What a translation translates: the pieces of the English sources, and the notebooks of each edition.

A piece is a markdown cell, a code cell with comments or displayed strings (code_skeleton: what such a cell
computes, which a translation must keep), or a message of ``helpers`` and ``course_tools`` (message_pieces).
The repository read is course_tools.po_files.ROOT.
"""

from __future__ import annotations

import ast
import io
import itertools
import re
import tokenize
from dataclasses import dataclass
from pathlib import Path

from course_tools import po_files
from helpers.i18n import LANGUAGE_NAMES
from helpers.notebook_io import cached_by_content, cell_source, python_lines, read_json_notebook

# {language: its name in English} for every edition: every folder of editions/ that helpers.i18n knows.
LANGUAGES = {code: names[0] for code, names in LANGUAGE_NAMES.items()
             if code != "en" and (po_files.edition_dir(code) / "EDITION").exists()}
WORDS = re.compile(r"[A-Za-z]{3,}")


@dataclass
class Piece:
    """One translatable piece: its key (msgctxt), its English text (msgid) and a note for the translator."""

    key: str
    english: str
    note: str


FSTRING_START, FSTRING_END = getattr(tokenize, "FSTRING_START", None), getattr(tokenize, "FSTRING_END", None)


def python_tokens(source: str) -> list[tokenize.TokenInfo] | None:
    """The tokens of a cell's source (its IPython magics blanked), or None when it does not tokenize.

    Each f-string is one STRING token, as Python 3.11 gives it (3.12 and later split it into
    FSTRING_START, its text and {fields}, FSTRING_END: those are joined back here)."""
    text = python_lines(source) + "\n"
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return None
    offsets = [0, *itertools.accumulate(len(line) for line in text.splitlines(keepends=True))]
    joined, depth, start = [], 0, None
    for token in tokens:
        if token.type == FSTRING_START:
            depth += 1
            start = token if depth == 1 else start
        elif token.type == FSTRING_END:
            depth -= 1
            if depth == 0:
                begin = offsets[start.start[0] - 1] + start.start[1]
                end = offsets[token.end[0] - 1] + token.end[1]
                joined.append(tokenize.TokenInfo(tokenize.STRING, text[begin:end], start.start, token.end, start.line))
        elif depth == 0:
            joined.append(token)
    return joined


def needs_translation(cell: dict) -> bool:
    """A markdown cell always; a code cell that has a comment or a string with a word in it."""
    if cell.get("cell_type") != "code":
        return cell.get("cell_type") == "markdown"
    tokens = python_tokens(cell_source(cell))
    return tokens is None or any(t.type == tokenize.COMMENT or (t.type == tokenize.STRING and WORDS.search(t.string))
                                 for t in tokens)


def code_skeleton(source: str) -> list[str]:
    """The code of a cell with comments removed and each string reduced to what computes: a plain
    string to "S", an f-string to the sorted list of its {expressions}. Two cells with equal skeletons
    compute the same thing, whatever their comments and displayed strings say."""
    tokens = python_tokens(source)
    if tokens is None:
        return [source]
    out = []
    for t in tokens:
        if t.type in (tokenize.COMMENT, tokenize.NL, tokenize.ENCODING):
            continue
        if t.type == tokenize.STRING:
            prefix = t.string[:t.string.index(t.string.lstrip("rbfuRBFU")[0])].lower()
            body = t.string[len(prefix):]
            other = "'" if body[0] == '"' else '"'
            # each {field}'s expression, a label quoted inside it read as text (an apostrophe of the displayed
            # text outside the braces pairs with nothing), its format spec and conversion left out
            fields = [re.match(r"[^:!]*", re.sub(f"{other}[^{other}]*{other}", "S", field)).group(0)
                      for field in re.findall(r"\{([^{}]*)\}", body)]
            out.append("F" + repr(sorted(fields)) if "f" in prefix else "S")
        else:
            out.append(t.string)
    return out


@cached_by_content
def notebook_pieces(path: Path) -> list[Piece]:
    """The pieces of one solution notebook, keyed by cell id, in cell order."""
    cells = read_json_notebook(path)["cells"]
    pieces = []
    for index, cell in enumerate(cells):
        if not needs_translation(cell):
            continue
        key = cell.get("id") or f"cell-{index}"
        if any(piece.key == key for piece in pieces):
            raise ValueError(f"{path}: two cells have the id {key!r}; cell ids must be unique")
        note = ("markdown cell" if cell.get("cell_type") == "markdown"
                else "code cell: translate the comments and the displayed strings only; keep every line of code")
        pieces.append(Piece(key, cell_source(cell), f"{note} ({index + 1} of {len(cells)})"))
    return pieces


@cached_by_content
def tr_calls(path: Path) -> list[Piece]:
    """Every tr("key", "English", ...) call with literal key and text in one source file."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "tr"
                and len(node.args) >= 2 and all(isinstance(a, ast.Constant) and isinstance(a.value, str)
                                                for a in node.args[:2])):
            fields = sorted(k.arg for k in node.keywords if k.arg and k.arg != "in_language")
            note = po_files.shown(path) + (f"; keep the fields {{{'}, {'.join(fields)}}}" if fields else "")
            found.append(Piece(node.args[0].value, node.args[1].value, note))
    return found


def message_pieces() -> list[Piece]:
    """The registry's success lines and hints, the generic hints, and every tr() call of helpers and course_tools."""
    from helpers.checks.harness import EXERCISES, GENERIC_MISTAKES

    pieces = [Piece(f"generic:{code}", template, "a hint any check may give; keep the {fields}")
              for code, template in GENERIC_MISTAKES.items()]
    for ex in EXERCISES.values():
        pieces.append(Piece(f"{ex.name}:success", ex.success, f"the start of the pass line of {ex.name}"))
        pieces += [Piece(f"{ex.name}:{code}", template, f"hint of mistake {code} of {ex.name}; keep the {{fields}}")
                   for code, template in ex.mistakes.items()]
    for folder in ("helpers", "course_tools"):
        for path in sorted((po_files.ROOT / folder).rglob("*.py")):
            pieces.extend(tr_calls(path))
    by_key: dict[str, Piece] = {}
    for piece in pieces:
        if piece.key in by_key and by_key[piece.key].english != piece.english:
            raise ValueError(f"message key {piece.key!r} has two English texts: {by_key[piece.key].english!r} and "
                             f"{piece.english!r}")
        by_key[piece.key] = piece
    return list(by_key.values())


def english_solutions() -> list[Path]:
    """The English solution notebooks, in name order."""
    return sorted((po_files.ROOT / "solutions").glob("*.ipynb"))


def sources() -> dict[str, list[Piece]]:
    """{po file stem: its pieces}: one per English solution notebook, and "messages"."""
    out = {path.stem: notebook_pieces(path) for path in english_solutions()}
    out["messages"] = message_pieces()
    return out


def edition(language: str) -> list[str]:
    """The notebooks (file stems) of the language's edition: editions/<language>/EDITION, one per line."""
    path = po_files.edition_dir(language) / "EDITION"
    stems = [line.strip() for line in path.read_text(encoding="utf-8").splitlines()
             if line.strip() and not line.startswith("#")] if path.exists() else []
    unknown = [stem for stem in stems if stem not in {p.stem for p in english_solutions()}]
    if unknown:
        raise ValueError(f"editions/{language}/EDITION names {', '.join(unknown)}, which have no solution notebook")
    return stems


def required(language: str) -> dict[str, list[Piece]]:
    """The pieces the edition needs translated: its notebooks' pieces, and the messages it shows."""
    from helpers.checks.harness import EXERCISES

    stems = edition(language)
    everything = sources()
    needed = {stem: everything[stem] for stem in stems}
    hidden = {e.name for e in EXERCISES.values() if e.notebook not in stems}  # exercises of other notebooks
    needed["messages"] = [p for p in everything["messages"] if p.key.split(":")[0] not in hidden]
    return needed

