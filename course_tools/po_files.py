"""The gettext files of the translations: where they are (under ROOT, the repository: the tests point it at a
temporary copy), reading them with polib, and their strict validation. polib accepts a string without its
closing quote and garbles it, so every file is parsed strictly first (parse_po), and nothing is written while
any file has a problem.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import polib

from helpers.notebook_io import cached_by_content

ROOT = Path(__file__).resolve().parent.parent


def edition_dir(language: str) -> Path:
    """editions/<language>/ of the repository at ROOT (tests point ROOT at a temporary copy)."""
    return ROOT / "editions" / language


def shown(path: Path) -> str:
    """path as the messages show it: relative to ROOT where it lies inside."""
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def po_path(language: str, stem: str) -> Path:
    return edition_dir(language) / "po" / f"{stem}.po"


def po_name(language: str, stem: str) -> str:
    """The .po file's path as the messages show it: editions/<language>/po/<stem>.po."""
    return f"editions/{language}/po/{stem}.po"


def load_po(path: Path):
    """The .po file at path (polib, no line wrapping); a new one with the course's header when it is absent."""
    if path.exists():
        return polib.pofile(str(path), wrapwidth=0, encoding="utf-8")
    po = polib.POFile(wrapwidth=0, encoding="utf-8")
    po.metadata = {"Project-Id-Version": "transformers-from-scratch", "Language": path.parent.parent.name,
                   "MIME-Version": "1.0", "Content-Type": "text/plain; charset=UTF-8",
                   "Content-Transfer-Encoding": "8bit"}
    return po


def translations(language: str, stem: str) -> dict[str, str]:
    """{key: translation} of the reviewed entries of one .po file."""
    po = load_po(po_path(language, stem))
    return {e.msgctxt: e.msgstr for e in po if e.msgstr and not e.obsolete and "fuzzy" not in e.flags}


def template_fields(template: str) -> list[str]:
    """The {fields} of a str.format template, sorted (a translation may reorder them, not change them)."""
    return sorted(re.findall(r"(?<!\{)\{([^{}]*)\}(?!\})", template))


class PoError(ValueError):
    """A .po file that is not strictly valid: each problem as `file:line: what`."""


PO_STRING = re.compile(r'"(?:[^"\\]|\\[ntr"\\abfv])*"')
PO_KEYWORD = re.compile(r"(msgctxt|msgid|msgid_plural|msgstr(?:\[\d+\])?)[ \t]+(.*)$")
PO_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\", "a": "\a", "b": "\b", "f": "\f", "v": "\v"}


def po_string(text: str) -> str | None:
    """The value of one quoted .po string (the whole of text), or None when text is not exactly one."""
    text = text.strip()
    return re.sub(r"\\(.)", lambda m: PO_ESCAPES[m[1]], text[1:-1]) if PO_STRING.fullmatch(text) else None


@dataclass
class PoEntry:
    line: int  # where the entry starts
    fields: dict  # keyword -> value
    lines: dict  # keyword -> line number
    flags: set


@cached_by_content
def parse_po(path: Path) -> tuple[list[PoEntry], list[str]]:
    """The entries of a .po file, and `file:line: problem` for every line that is not comment, keyword + string,
    continuation string or blank."""
    name = shown(path)
    entries, errors = [], []
    entry, keyword = None, None
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        return [], [f"{name}: cannot be read ({error})"]
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            entry, keyword = None, None
            continue
        if entry is None:
            entry = PoEntry(number, {}, {}, set())
            entries.append(entry)
        if line.startswith(("#~", "#|")):  # an obsolete entry, or the previous msgid: still well formed
            rest = line[2:].strip()
            match = PO_KEYWORD.match(rest)
            value = match.group(2) if match else rest
            if (value or line[1] == "|") and po_string(value) is None:
                where = "an obsolete entry" if line[1] == "~" else "a previous msgid (#|)"
                errors.append(f"{name}:{number}: a malformed string in {where}: {raw[:80]}")
            continue
        if line.startswith("#,"):
            entry.flags.update(f.strip() for f in line[2:].split(","))
            continue
        if line.startswith("#"):
            continue
        match = PO_KEYWORD.match(line)
        if match:
            keyword, value = match.group(1), po_string(match.group(2))
            if keyword in entry.fields:
                errors.append(f"{name}:{number}: a second {keyword} in one entry (a blank line missing?)")
            if value is None:
                errors.append(f"{name}:{number}: {keyword} is not followed by one well-formed string "
                              f'(a missing closing quote, or an unescaped " inside?): {raw[:80]}')
                value = ""
            entry.fields[keyword], entry.lines[keyword] = value, number
            continue
        if line.startswith('"'):
            value = po_string(line)
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
    return [e for e in entries if e.fields], errors


CODE_SPAN = re.compile(r"`[^`\n]+`")


def broken_code_span(msgid: str, msgstr: str) -> str | None:
    """Why the translation breaks a markdown code span, or None: its backticks must pair up as the
    English's do (an odd count leaves a span open), and every code span of the English must appear in it
    (code is not translated; a translator may add spans, such as `forward`)."""
    if msgstr.count("`") % 2 != msgid.count("`") % 2:
        return f"{msgstr.count('`')} backticks against the English's {msgid.count('`')}: a code span is left open"
    lost = sorted(set(CODE_SPAN.findall(msgid)) - set(CODE_SPAN.findall(msgstr)))
    return f"the code span {lost[0]} of the English is missing or broken" if lost else None


def po_file_problems(path: Path, syntax_only: bool = False) -> list[str]:
    """Every problem of one .po file as `file:line: what`: syntax first; then, for each translated
    entry that is not fuzzy, the same {fields} as its msgid (messages.po) and unbroken code spans."""
    entries, errors = parse_po(path)
    errors = list(errors)  # parse_po's answer is kept for the next call
    if errors or syntax_only:
        return errors
    name = shown(path)
    for entry in entries:
        if "msgid" not in entry.fields or "msgstr" not in entry.fields:
            errors.append(f"{name}:{entry.line}: an entry needs a msgid and a msgstr")
            continue
        msgid, msgstr = entry.fields["msgid"], entry.fields["msgstr"]
        if not msgid or not msgstr or "fuzzy" in entry.flags:
            continue
        line = entry.lines["msgstr"]
        if path.stem == "messages" and template_fields(msgstr) != template_fields(msgid):
            errors.append(f"{name}:{line}: the msgstr has the fields {template_fields(msgstr)}, the msgid "
                          f"{template_fields(msgid)} ({entry.fields.get('msgctxt', '')}): keep every {{field}} of "
                          f"the English")
        broken = broken_code_span(msgid, msgstr)
        if broken:
            errors.append(f"{name}:{line}: the msgstr ({entry.fields.get('msgctxt', '')}) breaks a markdown code "
                          f"span: {broken}")
    return errors


def validate_po_files(language: str, syntax_only: bool = False) -> None:
    """Raise PoError naming every problem of every .po file of language (nothing is written before this
    passes). syntax_only: only what polib would misread (extract rewrites the entries it checks)."""
    found = [problem for path in sorted((edition_dir(language) / "po").glob("*.po"))
             for problem in po_file_problems(path, syntax_only)]
    if found:
        raise PoError("\n".join(found) + f"\n{len(found)} problems in editions/{language}/po/*.po: "
                      "nothing was written.")

