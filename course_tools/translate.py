"""Translations of the course, kept in step with the English source.

    tfs-translate extract [--language L]   update editions/L/po/*.po from the English sources
    tfs-translate build   [--language L]   write editions/L/solutions/ and editions/L/notebooks/ from the .po files
    tfs-translate check   [--language L]   exit 1 while a piece is missing or stale, or editions/L/ is out of date
    tfs-translate review  [--language L]   list the pieces to review, with the English change

Without --language, each command runs for every edition in turn (es, pt, vi: every folder of editions/).

The English solution notebooks and the English text in the code of ``helpers`` are the only
source. A translator edits gettext files, never a notebook's JSON:

* ``editions/<language>/po/<notebook>.po``: one entry per piece of a solution notebook, keyed by the
  cell's id (msgctxt). A piece is a markdown cell, or a code cell that has comments or displayed
  strings (translate those; the code that computes stays as it is).
* ``editions/<language>/po/messages.po``: the messages of ``helpers`` (checks, hints, plots, training),
  keyed by ``<exercise>:<mistake code>`` for the registry's hints and by the key of each
  ``helpers.i18n.tr("key", "English")`` call for the rest.

The edition is the list of notebooks in ``editions/<language>/EDITION``, one file stem per line: only
those are built into ``editions/<language>/solutions`` and ``notebooks`` and checked. A notebook joins
the edition once its .po file is translated; from then on a missing or stale piece of it fails
``check``. The .po files of the other notebooks are kept in step by ``extract`` all the same, so that
translators can work on them.
``messages.po`` must be complete for the messages the edition shows: the hints and success lines of
its exercises, the generic hints, and every ``tr()`` message of helpers and course_tools.

Each entry records the English text it translates (its msgid). ``extract`` adds entries for new
English pieces (empty, so ``check`` reports them missing) and, when an English piece changed,
replaces the msgid, keeps the old English as the previous msgid and marks the entry fuzzy (stale)
until a translator reviews it and removes the flag. ``check`` also reports an entry whose msgid
is not the current English (the English changed and ``extract`` was not run).
"""

from __future__ import annotations

import argparse
import ast
import copy
import difflib
import functools
import hashlib
import io
import re
import sys
import tokenize
from dataclasses import dataclass
from pathlib import Path

import nbformat

from helpers.i18n import LANGUAGE_NAMES

ROOT = Path(__file__).resolve().parent.parent
EDITIONS = ROOT / "editions"
# {language: its name in English} for every edition: every folder of editions/ that helpers.i18n knows.
LANGUAGES = {code: names[0] for code, names in LANGUAGE_NAMES.items()
             if code != "en" and (EDITIONS / code / "EDITION").exists()}


def edition_dir(language: str) -> Path:
    """editions/<language>/ of the repository at ROOT (tests point ROOT at a temporary copy)."""
    return ROOT / "editions" / language
WORDS = re.compile(r"[A-Za-z]{3,}")


# ---------------------------------------------------------------------------------------------- pieces
def _tokens(source: str) -> list[tokenize.TokenInfo] | None:
    lines = "\n".join("" if line.startswith(("%", "!")) else line for line in source.splitlines())  # magics
    try:
        return list(tokenize.generate_tokens(io.StringIO(lines + "\n").readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return None


def needs_translation(cell) -> bool:
    """A markdown cell always; a code cell that has a comment or a string with a word in it."""
    if cell.cell_type == "markdown":
        return True
    if cell.cell_type != "code":
        return False
    tokens = _tokens(cell.source)
    if tokens is None:
        return True
    return any(t.type == tokenize.COMMENT or (t.type == tokenize.STRING and WORDS.search(t.string)) for t in tokens)


def code_skeleton(source: str) -> list[str]:
    """The code of a cell with comments removed and each string reduced to what computes: a plain
    string to "S", an f-string to the sorted list of its {expressions}. Two cells with equal skeletons
    compute the same thing, whatever their comments and displayed strings say."""
    tokens = _tokens(source)
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
            out.append("F" + repr(sorted(fields)) if "f" in prefix else "S")  # a quoted label in {...} is text
        else:
            out.append(t.string)
    return out


@dataclass
class Piece:
    """One translatable piece: its key (msgctxt), its English text (msgid) and a note for the translator."""

    key: str
    english: str
    note: str


def _unchanged_since_read(function):
    """function(path), computed again only when the file's bytes have changed (check and review read the same
    English files for every edition)."""
    cache: dict[Path, tuple[bytes, object]] = {}

    @functools.wraps(function)
    def cached(path: Path):
        try:
            stamp = hashlib.blake2b(Path(path).read_bytes()).digest()
        except OSError:  # function says what is wrong with it
            return function(path)
        if path not in cache or cache[path][0] != stamp:
            cache[path] = (stamp, function(path))
        value = cache[path][1]
        return list(value) if isinstance(value, list) else value

    return cached


@_unchanged_since_read
def notebook_pieces(path: Path) -> list[Piece]:
    from course_tools.make_student import read_notebook

    notebook = read_notebook(path)[1]
    pieces, seen = [], set()
    for index, cell in enumerate(notebook.cells):
        if not needs_translation(cell):
            continue
        key = cell.get("id") or f"cell-{index}"
        if key in seen:
            raise ValueError(f"{path}: two cells have the id {key!r}; cell ids must be unique")
        seen.add(key)
        note = ("markdown cell" if cell.cell_type == "markdown"
                else "code cell: translate the comments and the displayed strings only; keep every line of code")
        pieces.append(Piece(key, cell.source, f"{note} ({index + 1} of {len(notebook.cells)})"))
    return pieces


@_unchanged_since_read
def _tr_calls(path: Path) -> list[Piece]:
    """Every tr("key", "English", ...) call with literal key and text in one source file."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "tr"
                and len(node.args) >= 2 and all(isinstance(a, ast.Constant) and isinstance(a.value, str)
                                                for a in node.args[:2])):
            fields = sorted(k.arg for k in node.keywords if k.arg and k.arg != "in_language")
            note = f"{path.relative_to(ROOT)}" + (f"; keep the fields {{{'}, {'.join(fields)}}}" if fields else "")
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
        for path in sorted((ROOT / folder).rglob("*.py")):
            pieces.extend(_tr_calls(path))
    by_key: dict[str, Piece] = {}
    for piece in pieces:
        if piece.key in by_key and by_key[piece.key].english != piece.english:
            raise ValueError(f"message key {piece.key!r} has two English texts: {by_key[piece.key].english!r} and "
                             f"{piece.english!r}")
        by_key[piece.key] = piece
    return list(by_key.values())


def sources() -> dict[str, list[Piece]]:
    """{po file stem: its pieces}: one per English solution notebook, and "messages"."""
    out = {path.stem: notebook_pieces(path) for path in sorted((ROOT / "solutions").glob("*.ipynb"))}
    out["messages"] = message_pieces()
    return out


def edition(language: str) -> list[str]:
    """The notebooks (file stems) of the language's edition: editions/<language>/EDITION, one per line."""
    path = edition_dir(language) / "EDITION"
    stems = [line.strip() for line in path.read_text(encoding="utf-8").splitlines()
             if line.strip() and not line.startswith("#")] if path.exists() else []
    known = {p.stem for p in (ROOT / "solutions").glob("*.ipynb")}
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


# ---------------------------------------------------------------------------------------------- po files
def po_path(language: str, stem: str) -> Path:
    return edition_dir(language) / "po" / f"{stem}.po"


def po_name(language: str, stem: str) -> str:
    """The .po file's path as the messages show it: editions/<language>/po/<stem>.po."""
    return f"editions/{language}/po/{stem}.po"


def _load(path: Path):
    import polib

    if path.exists():
        return polib.pofile(str(path), wrapwidth=0)
    po = polib.POFile(wrapwidth=0)
    po.metadata = {"Project-Id-Version": "transformers-from-scratch", "Language": path.parent.parent.name,
                   "MIME-Version": "1.0", "Content-Type": "text/plain; charset=UTF-8",
                   "Content-Transfer-Encoding": "8bit"}
    return po


def extract(language: str) -> int:
    """Bring every .po file of language in step with the English pieces; report what changed."""
    import polib

    from course_tools.make_student import write_atomic

    validate_po_files(language, syntax_only=True)
    for stem, pieces in sources().items():
        path = po_path(language, stem)
        po = _load(path)
        old = {e.msgctxt: e for e in po if not e.obsolete}
        entries, added, stale = [], 0, 0
        for piece in pieces:
            entry = old.get(piece.key)
            if entry is None:
                entry = polib.POEntry(msgctxt=piece.key, msgid=piece.english, msgstr="")
                added += 1
            elif entry.msgid != piece.english:
                entry.previous_msgid = entry.msgid
                entry.msgid = piece.english
                if "fuzzy" not in entry.flags:
                    entry.flags.append("fuzzy")
                stale += 1
            entry.comment = piece.note
            entries.append(entry)
        removed = len(set(old) - {p.key for p in pieces})
        po.clear()
        po.extend(entries)
        text = str(po)
        if not path.exists() or path.read_text(encoding="utf-8") != text + "\n":
            write_atomic(path, text + "\n")
            print(f"{path.relative_to(ROOT)}: {len(entries)} pieces; {added} new, {stale} changed in English "
                  f"(marked fuzzy), {removed} removed")
    return 0


def problems(language: str) -> list[tuple[str, str, str, str | None]]:
    """(po file, key, kind, the previous English or None) for every piece to review. kind: "missing",
    "stale" (the English changed), "code changed" (a code cell's translation computes something else:
    only comments and displayed strings may differ) or "fields changed" (a message's {fields} differ).
    A .po file that is not strictly valid raises PoError (see po_file_problems)."""
    validate_po_files(language)
    out = []
    for stem, pieces in required(language).items():
        po = _load(po_path(language, stem))
        entries = {e.msgctxt: e for e in po if not e.obsolete}
        for piece in pieces:
            entry = entries.get(piece.key)
            if entry is None or not entry.msgstr:
                out.append((stem, piece.key, "missing", None))
            elif "fuzzy" in entry.flags or entry.msgid != piece.english:
                previous = entry.previous_msgid if entry.msgid == piece.english else entry.msgid
                out.append((stem, piece.key, "stale", previous))
            elif piece.note.startswith("code cell") and code_skeleton(entry.msgstr) != code_skeleton(piece.english):
                out.append((stem, piece.key, "code changed", None))
            elif stem == "messages" and _fields(entry.msgstr) != _fields(piece.english):
                out.append((stem, piece.key, "fields changed", None))
    return out


def _fields(template: str) -> list[str]:
    """The {fields} of a str.format template, sorted (a translation may reorder them, not change them)."""
    return sorted(re.findall(r"(?<!\{)\{([^{}]*)\}(?!\})", template))


def translations(language: str, stem: str) -> dict[str, str]:
    """{key: translation} of the reviewed entries of one .po file."""
    po = _load(po_path(language, stem))
    return {e.msgctxt: e.msgstr for e in po if e.msgstr and not e.obsolete and "fuzzy" not in e.flags}


# ---------------------------------------------------------------------------------------------- strict .po
class PoError(ValueError):
    """A .po file that is not strictly valid: each problem as `file:line: what`."""


_PO_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_PO_KEYWORD = re.compile(r"(msgctxt|msgid|msgid_plural|msgstr(?:\[\d+\])?)[ \t]+(.*)$")
_PO_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\", "a": "\a", "b": "\b", "f": "\f", "v": "\v"}


def _po_string(text: str) -> str | None:
    """The value of one quoted .po string (the whole of text), or None when text is not exactly one."""
    text = text.strip()
    if not _PO_STRING.fullmatch(text):
        return None
    body, out, i = text[1:-1], [], 0
    while i < len(body):
        if body[i] == "\\":
            if body[i + 1] not in _PO_ESCAPES:
                return None
            out.append(_PO_ESCAPES[body[i + 1]])
            i += 2
        else:
            out.append(body[i])
            i += 1
    return "".join(out)


@dataclass
class _PoEntry:
    line: int  # where the entry starts
    fields: dict  # keyword -> value
    lines: dict  # keyword -> line number
    flags: set


@_unchanged_since_read
def _parse_po(path: Path) -> tuple[list[_PoEntry], list[str]]:
    """Parse a .po file strictly (polib accepts a string without its closing quote and garbles it):
    the entries, and `file:line: problem` for every line that is not comment, keyword + string,
    continuation string or blank."""
    name = str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)
    entries, errors = [], []
    entry, keyword = None, None

    def close():
        nonlocal entry, keyword
        if entry is not None and entry.fields:
            entries.append(entry)
        entry, keyword = None, None

    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        return [], [f"{name}: cannot be read ({error})"]
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            close()
            continue
        if entry is None:
            entry = _PoEntry(number, {}, {}, set())
        if line.startswith("#~"):  # an obsolete entry: its strings must still be well formed
            rest = line[2:].strip()
            match = _PO_KEYWORD.match(rest)
            value = match.group(2) if match else rest
            if value and _po_string(value) is None:
                errors.append(f"{name}:{number}: a malformed string in an obsolete entry: {raw[:80]}")
            continue
        if line.startswith("#|"):  # the previous msgid
            rest = line[2:].strip()
            match = _PO_KEYWORD.match(rest)
            value = match.group(2) if match else rest
            if _po_string(value) is None:
                errors.append(f"{name}:{number}: a malformed string in a previous msgid (#|): {raw[:80]}")
            continue
        if line.startswith("#,"):
            entry.flags.update(f.strip() for f in line[2:].split(","))
            continue
        if line.startswith("#"):
            continue
        match = _PO_KEYWORD.match(line)
        if match:
            keyword, value = match.group(1), _po_string(match.group(2))
            if keyword in entry.fields:
                errors.append(f"{name}:{number}: a second {keyword} in one entry (a blank line missing?)")
            if value is None:
                errors.append(f"{name}:{number}: {keyword} is not followed by one well-formed string "
                              f'(a missing closing quote, or an unescaped " inside?): {raw[:80]}')
                value = ""
            entry.fields[keyword], entry.lines[keyword] = value, number
            continue
        if line.startswith('"'):
            value = _po_string(line)
            if keyword is None:
                errors.append(f"{name}:{number}: a string outside any msgid/msgstr: {raw[:80]}")
            elif value is None:
                errors.append(f"{name}:{number}: a malformed string (a missing closing quote, or an unescaped \" "
                              f"inside?): {raw[:80]}")
            else:
                entry.fields[keyword] += value
            continue
        errors.append(f"{name}:{number}: a stray line (neither a comment, a keyword with its string, nor a "
                      f"string): {raw[:80]}")
    close()
    return entries, errors


_CODE_SPAN = re.compile(r"`[^`\n]+`")


def _broken_code_span(msgid: str, msgstr: str) -> str | None:
    """Why the translation breaks a markdown code span, or None: its backticks must pair up as the
    English's do (an odd count leaves a span open), and every code span of the English must appear in it
    (code is not translated; a translator may add spans, such as `forward`)."""
    if msgstr.count("`") % 2 != msgid.count("`") % 2:
        return f"{msgstr.count('`')} backticks against the English's {msgid.count('`')}: a code span is left open"
    lost = sorted(set(_CODE_SPAN.findall(msgid)) - set(_CODE_SPAN.findall(msgstr)))
    if lost:
        return f"the code span {lost[0]} of the English is missing or broken"
    return None


def po_file_problems(path: Path, syntax_only: bool = False) -> list[str]:
    """Every problem of one .po file as `file:line: what`: syntax first; then, for each translated
    entry that is not fuzzy, the same {fields} as its msgid (messages.po) and unbroken code spans."""
    entries, errors = _parse_po(path)
    errors = list(errors)  # _parse_po's answer is kept for the next call
    if errors or syntax_only:
        return errors
    name = str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)
    for entry in entries:
        if "msgid" not in entry.fields or "msgstr" not in entry.fields:
            errors.append(f"{name}:{entry.line}: an entry needs a msgid and a msgstr")
            continue
        msgid, msgstr = entry.fields["msgid"], entry.fields["msgstr"]
        if not msgid or not msgstr or "fuzzy" in entry.flags:
            continue
        line = entry.lines["msgstr"]
        if path.stem == "messages" and _fields(msgstr) != _fields(msgid):
            errors.append(f"{name}:{line}: the msgstr has the fields {_fields(msgstr)}, the msgid "
                          f"{_fields(msgid)} ({entry.fields.get('msgctxt', '')}): keep every {{field}} of the English")
        broken = _broken_code_span(msgid, msgstr)
        if broken:
            errors.append(f"{name}:{line}: the msgstr ({entry.fields.get('msgctxt', '')}) breaks a markdown code "
                          f"span: {broken}")
    return errors


def validate_po_files(language: str, syntax_only: bool = False) -> None:
    """Raise PoError naming every problem of every .po file of language (nothing is written before this
    passes). syntax_only: only what polib would misread (extract rewrites the entries it checks)."""
    found = []
    for path in sorted((edition_dir(language) / "po").glob("*.po")):
        found.extend(po_file_problems(path, syntax_only))
    if found:
        raise PoError("\n".join(found) + f"\n{len(found)} problems in editions/{language}/po/*.po: "
                      "nothing was written.")


# ---------------------------------------------------------------------------------------------- notebooks
def translated_solution(path: Path, language: str, existing: nbformat.NotebookNode | None) -> nbformat.NotebookNode:
    """The solution notebook at path in language: each piece replaced by its reviewed translation
    (missing or stale ones stay English), the outputs of existing kept for the cells whose source is unchanged."""
    from course_tools.make_student import read_notebook

    english = read_notebook(path)[1]
    notebook = copy.deepcopy(english)
    found = translations(language, path.stem)
    previous = {c.get("id"): c for c in existing.cells} if existing is not None else {}
    for cell in notebook.cells:
        key = cell.get("id")
        if key in found and needs_translation(cell):
            cell.source = found[key]
        if cell.cell_type == "code":
            old = previous.get(key)
            if old is not None and old.source == cell.source:
                cell.outputs, cell.execution_count = old.outputs, old.execution_count
            else:
                cell.outputs, cell.execution_count = [], None
    notebook.metadata["tfs"] = {"language": language, "generated_from": f"solutions/{path.name}"}
    return notebook


def _sources_of(notebook: nbformat.NotebookNode) -> list[tuple[str, str, str]]:
    return [(c.get("id"), c.cell_type, c.source) for c in notebook.cells]


def build(language: str, check: bool = False) -> int:
    """Write <language>/solutions (then the student notebooks <language>/notebooks); with check, write
    nothing and report the notebooks whose cells differ from what the English and the .po files give.
    Every .po file is validated first (PoError, nothing written); every notebook is written through a
    temporary file and a rename."""
    from course_tools.make_student import generate, read_notebook, render, write_atomic

    validate_po_files(language)
    out_dir = edition_dir(language) / "solutions"
    stale, writes = [], []
    stems = edition(language)
    extra = sorted(p for p in out_dir.glob("*.ipynb") if p.stem not in stems)
    for path in sorted((ROOT / "solutions").glob("*.ipynb")):  # everything is computed before anything is written
        if path.stem not in stems:
            continue
        target = out_dir / path.name
        existing = read_notebook(target)[1] if target.exists() else None
        notebook = translated_solution(path, language, existing)
        if existing is not None and _sources_of(existing) == _sources_of(notebook) \
                and existing.metadata.get("tfs") == notebook.metadata["tfs"]:
            continue
        if check:
            stale.append(target)
        else:
            writes.append((target, render(notebook)))
    for path in extra:  # a notebook that left the edition
        if check:
            stale.append(path)
        else:
            path.unlink()
            (edition_dir(language) / "notebooks" / path.name).unlink(missing_ok=True)
            print(f"removed {path.relative_to(ROOT)}: not in editions/{language}/EDITION")
    for target, text in writes:
        write_atomic(target, text)
        print(f"wrote {target.relative_to(ROOT)} (run `make outputs-{language}` to store its outputs)")
    if not stems:
        return 1 if stale else 0
    if check:
        for target in stale:
            print(f"{target.relative_to(ROOT)} differs from what solutions/{target.name} and "
                  f"{po_name(language, target.stem)} give. Run `make translations` and commit the result.",
                  file=sys.stderr)
        code = generate(out_dir, edition_dir(language) / "notebooks", check=True)
        return 1 if stale or code else 0
    return generate(out_dir, edition_dir(language) / "notebooks")


# ---------------------------------------------------------------------------------------------- commands
def check_command(language: str) -> int:
    found = problems(language)
    for stem, key, kind, _ in found:
        print(f"{po_name(language, stem)}: {key}: {kind}", file=sys.stderr)
    if found:
        print(f"{len(found)} {LANGUAGES[language]} pieces to translate or review: run `tfs-translate extract`, "
              f"edit the .po files (see `tfs-translate review`), remove each reviewed entry's fuzzy flag, then "
              f"`make translations`.", file=sys.stderr)
    drift = build(language, check=True)
    if not found and not drift:
        needed = required(language)
        notebooks = sum(len(p) for stem, p in needed.items() if stem != "messages")
        print(f"{LANGUAGES[language]} edition ({', '.join(edition(language)) or 'no notebook yet'}): "
              f"{notebooks} notebook pieces and {len(needed['messages'])} messages translated and up to date; "
              f"editions/{language}/ is up to date.")
    return 1 if found or drift else 0


def review_command(language: str) -> int:
    found = problems(language)
    current = {(stem, p.key): p.english for stem, pieces in required(language).items() for p in pieces}
    for stem, key, kind, previous in found:
        print(f"=== {po_name(language, stem)}, {key}: {kind}")
        if kind == "stale" and previous is not None:
            diff = difflib.unified_diff(previous.splitlines(), current[(stem, key)].splitlines(),
                                        "English translated", "English now", lineterm="", n=1)
            print("\n".join(diff))
    print(f"{len(found)} pieces to review.")
    return 1 if found else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["extract", "build", "check", "review"])
    parser.add_argument("--language", choices=sorted(LANGUAGES),
                        help="one edition (default: every edition, one after the other)")
    args = parser.parse_args(argv)
    command = {"extract": extract, "build": build, "check": check_command, "review": review_command}[args.command]
    status = 0
    for language in [args.language] if args.language else sorted(LANGUAGES):
        try:
            status = max(status, command(language))
        except ValueError as error:
            print(f"error: {error}", file=sys.stderr)
            status = 2
    return status


if __name__ == "__main__":
    sys.exit(main())
