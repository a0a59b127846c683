"""What a translation translates: the pieces of the English sources, and the notebooks of each edition.

    notebook_pieces(path)   one Piece per markdown cell, and per code cell with comments or displayed strings
    message_pieces()        the registry's success lines and hints, the generic hints, every tr() message
    sources()               {po file stem: its pieces} for every English solution notebook, and "messages"
    edition(language)       the notebooks of the language's edition (editions/<language>/EDITION)
    required(language)      the pieces that edition needs translated
    code_skeleton(source)   what a code cell computes, its comments and displayed strings aside

The English solution notebooks and the English text in the code of ``helpers`` and ``course_tools`` are
the only source; the repository is course_tools.po_files.ROOT.
"""

from __future__ import annotations

import ast
import io
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
    if FSTRING_START is None:
        return tokens
    lines = text.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
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
    kind = cell.get("cell_type")
    if kind == "markdown":
        return True
    if kind != "code":
        return False
    tokens = python_tokens(cell_source(cell))
    if tokens is None:
        return True
    return any(t.type == tokenize.COMMENT or (t.type == tokenize.STRING and WORDS.search(t.string)) for t in tokens)


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
            quote = body[0]
            other = "'" if quote == '"' else '"'
            body = re.sub(f"{other}[^{other}]*{other}", "S", body)  # a label quoted inside {...} is text
            fields = re.findall(r"\{([^{}:!]*)", body)
            out.append("F" + repr(sorted(fields)) if "f" in prefix else "S")
        else:
            out.append(t.string)
    return out


@cached_by_content
def notebook_pieces(path: Path) -> list[Piece]:
    """The pieces of one solution notebook, keyed by cell id, in cell order."""
    cells = read_json_notebook(path)["cells"]
    pieces, seen = [], set()
    for index, cell in enumerate(cells):
        if not needs_translation(cell):
            continue
        key = cell.get("id") or f"cell-{index}"
        if key in seen:
            raise ValueError(f"{path}: two cells have the id {key!r}; cell ids must be unique")
        seen.add(key)
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

    pieces = []
    for code, template in GENERIC_MISTAKES.items():
        pieces.append(Piece(f"generic:{code}", template, "a hint any check may give; keep the {fields}"))
    for ex in EXERCISES.values():
        pieces.append(Piece(f"{ex.name}:success", ex.success, f"the start of the pass line of {ex.name}"))
        for code, template in ex.mistakes.items():
            note = f"hint of mistake {code} of {ex.name}; keep the {{fields}}"
            pieces.append(Piece(f"{ex.name}:{code}", template, note))
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
    known = {p.stem for p in english_solutions()}
    unknown = [stem for stem in stems if stem not in known]
    if unknown:
        raise ValueError(f"editions/{language}/EDITION names {', '.join(unknown)}, which have no solution notebook")
    return stems


def required(language: str) -> dict[str, list[Piece]]:
    """The pieces the edition needs translated: its notebooks' pieces, and the messages it shows."""
    from helpers.checks.harness import EXERCISES

    stems = edition(language)
    everything = sources()
    needed = {stem: everything[stem] for stem in stems}
    exercises = {e.name for e in EXERCISES.values()}
    shown = {e.name for e in EXERCISES.values() if e.notebook in stems}
    needed["messages"] = [p for p in everything["messages"]
                          if p.key.split(":")[0] not in exercises or p.key.split(":")[0] in shown]
    return needed


__all__ = ["LANGUAGES", "Piece", "code_skeleton", "edition", "english_solutions", "message_pieces",
           "needs_translation", "notebook_pieces", "python_tokens", "required", "sources", "tr_calls"]
