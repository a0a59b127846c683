"""The translated READMEs: README.<language>.md is generated from README.md and editions/<language>/po/readme.po.

README.md is cut into parts (readme_parts): each heading, paragraph, list item and table row is a piece to
translate, and so is each fenced block that has comments (its commands must stay as they are) or no language
(text a reader is shown, such as a check's output); blank lines, table rules, HTML comments and blocks without
comments are copied as they are. A piece's key is its section and its place there ("course-outline:row 3").
`tfs-translate extract` (course_tools.translate) keeps readme.po in step: an entry whose English moved keeps its
translation, one whose English changed turns fuzzy; `tfs-translate build` writes README.<language>.md, and
`tfs-translate check` fails while it differs from what README.md and readme.po give. Where README.md is absent
(a partial copy of the repository, as some tests make), there is nothing to translate.
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import polib

from course_tools import po_files
from course_tools.pieces import Piece
from course_tools.po_files import load_po, po_name, po_path, shown, translations
from helpers.notebook_io import write_atomically

STEM = "readme"  # editions/<language>/po/readme.po
LIST_ITEM = re.compile(r"\s*(?:[-*+]|\d+\.)\s")
TABLE_RULE = re.compile(r"\|[\s:|-]+\|")
SHELL_COMMENT = re.compile(r"(?:^|\s)#.*$")
NOTES = {
    "heading": "a heading: keep its #",
    "paragraph": "a paragraph",
    "item": "a list item: keep its marker",
    "row": "a table row: keep the | between cells, the code spans and the time as they are",
    "block": "a fenced block: translate the comments only; keep every command",
    "text": "a fenced block of text a reader is shown: write it as the edition shows it",
}


@dataclass
class Part:
    """A run of README lines: a piece to translate (key, kind) or, with key None, lines copied as they are."""

    text: str
    kind: str
    key: str | None = None


def english_path() -> Path:
    return po_files.ROOT / "README.md"


def readme_path(language: str) -> Path:
    return po_files.ROOT / f"README.{language}.md"


def slug(heading: str) -> str:
    """A heading as a section's name in the keys: "## Course outline" -> "course-outline"."""
    return re.sub(r"[^a-z0-9]+", "-", heading.lstrip("#").strip().lower()).strip("-") or "section"


def starts_a_part(line: str) -> bool:
    """A line that ends the paragraph or list item before it."""
    return (not line.strip() or line.startswith(("#", "|", "```", "<!--")) or bool(LIST_ITEM.match(line)))


def comments_of(block: list[str]) -> bool:
    return any(SHELL_COMMENT.search(line) for line in block)


def readme_parts(text: str) -> list[Part]:
    """README text as parts, in order; joining their texts with newlines gives the text back."""
    lines, parts, index = text.split("\n"), [], 0
    section, counts = "top", Counter()

    def add(chunk: list[str], kind: str, translated: bool) -> None:
        key = None
        if translated:
            counts[(section, kind)] += 1
            key = f"{section}:{kind} {counts[(section, kind)]}" if kind != "heading" else f"{section}:heading"
        parts.append(Part("\n".join(chunk), kind, key))

    while index < len(lines):
        line = lines[index]
        end = index + 1
        if line.startswith("```"):
            while end < len(lines) and not lines[end].startswith("```"):
                end += 1
            end = min(end + 1, len(lines))
            body = lines[index + 1:end - 1]
            kind = "block" if line[3:].strip() else "text"
            add(lines[index:end], kind, kind == "text" or comments_of(body))
        elif line.startswith("<!--"):
            while end <= len(lines) and "-->" not in lines[end - 1]:
                end += 1
            add(lines[index:end], "comment", False)
        elif not line.strip():
            add([line], "blank", False)
        elif line.startswith("#"):
            section = slug(line)
            add([line], "heading", True)
        elif line.startswith("|"):
            add([line], "row", not TABLE_RULE.fullmatch(line.strip()))
        else:
            kind = "item" if LIST_ITEM.match(line) else "paragraph"
            while end < len(lines) and not starts_a_part(lines[end]):
                end += 1
            add(lines[index:end], kind, True)
        index = end
    return parts


def sources() -> dict[str, list[Piece]]:
    """{"readme": README.md's pieces}, as course_tools.pieces.sources gives the notebooks'; {} without README.md."""
    path = english_path()
    if not path.exists():
        return {}
    parts = readme_parts(path.read_text(encoding="utf-8"))
    return {STEM: [Piece(p.key, p.text, f"README.md, {NOTES[p.kind]}") for p in parts if p.key]}


def commands(block: str) -> list[str]:
    """A fenced block's lines without their comments: what a translation of it must keep."""
    return [SHELL_COMMENT.sub("", line).rstrip() for line in block.split("\n")]


def commands_changed(english: str, translation: str) -> bool:
    """True when a translated fenced block (with a language) runs other commands than its English."""
    return english.startswith("```") and english[3:].split("\n")[0].strip() != "" and \
        commands(english) != commands(translation)


def extract(language: str) -> int:
    """Bring editions/<language>/po/readme.po in step with README.md: an entry keeps its translation when its
    English is found again (moved to another place), turns fuzzy when the English at its place changed (the old
    English kept as its previous msgid), and a new piece gets an empty entry."""
    pieces = sources().get(STEM)
    if pieces is None:
        return 0
    path = po_path(language, STEM)
    po = load_po(path)
    old = [e for e in po if not e.obsolete]
    by_key = {e.msgctxt: e for e in old}
    free = {id(e): e for e in old}  # the entries no piece has taken yet
    chosen = {}
    for piece in pieces:  # first the English found again, at its place or elsewhere
        here = by_key.get(piece.key)
        if here is not None and id(here) in free and here.msgid == piece.english:
            match = here
        else:
            match = next((e for e in free.values() if e.msgid == piece.english and e.msgstr
                          and "fuzzy" not in e.flags), None)
        if match is not None:
            chosen[piece.key] = free.pop(id(match))
    added = stale = 0
    entries = []
    for piece in pieces:
        entry = chosen.get(piece.key)
        here = by_key.get(piece.key)
        if entry is None and here is not None and id(here) in free:  # the English at this place changed
            entry = free.pop(id(here))
            entry.previous_msgid, entry.msgid = entry.msgid, piece.english
            if "fuzzy" not in entry.flags:
                entry.flags.append("fuzzy")
            stale += 1
        elif entry is None:
            entry = polib.POEntry(msgctxt=piece.key, msgid=piece.english, msgstr="")
            added += 1
        entry.msgctxt, entry.comment = piece.key, piece.note
        entries.append(entry)
    po.clear()
    po.extend(entries)
    text = str(po) + "\n"
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        write_atomically(path, text)
        print(f"{shown(path)}: {len(entries)} pieces; {added} new, {stale} changed in English (marked fuzzy), "
              f"{len(free)} removed")
    return 0


def generated_notice(language: str) -> str:
    return (f"<!-- Generated from README.md and {po_name(language, STEM)} by `make translations` "
            f"(course_tools/readmes.py): edit those, not this file. -->")


def translated_readme(language: str) -> str:
    """README.<language>.md: the generated notice, then README.md with each piece replaced by its reviewed
    translation (a missing or stale one stays English)."""
    found = translations(language, STEM)
    parts = readme_parts(english_path().read_text(encoding="utf-8"))
    return generated_notice(language) + "\n" + "\n".join(found.get(p.key, p.text) if p.key else p.text
                                                         for p in parts)


def build(language: str, check: bool = False) -> int:
    """Write README.<language>.md; with check, write nothing and return 1 (saying so) when it is out of date."""
    if not english_path().exists():
        return 0
    target, text = readme_path(language), translated_readme(language)
    if target.exists() and target.read_text(encoding="utf-8") == text:
        return 0
    if check:
        print(f"{shown(target)} differs from what README.md and {po_name(language, STEM)} give. Run "
              f"`make translations` and commit the result.", file=sys.stderr)
        return 1
    write_atomically(target, text)
    print(f"wrote {shown(target)}")
    return 0
