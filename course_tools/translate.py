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

This module holds the four commands; what is translated (the pieces, the editions) is in
``course_tools.pieces``, the .po files themselves (reading, strict validation) in ``course_tools.po_files``.
"""

from __future__ import annotations

import argparse
import copy
import difflib
import sys
from pathlib import Path

import nbformat

from course_tools import po_files
from course_tools.make_student import generate, read_notebook, render
from course_tools.pieces import (LANGUAGES, code_skeleton, edition, english_solutions, message_pieces,
                                 needs_translation, required, sources)
from course_tools.po_files import (PoError, edition_dir, load_po, po_file_problems, po_name, po_path, template_fields,
                                   translations, validate_po_files)
from helpers.notebook_io import write_atomically


def extract(language: str) -> int:
    """Bring every .po file of language in step with the English pieces; report what changed."""
    import polib

    validate_po_files(language, syntax_only=True)
    for stem, pieces in sources().items():
        path = po_path(language, stem)
        po = load_po(path)
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
            write_atomically(path, text + "\n")
            print(f"{po_files.shown(path)}: {len(entries)} pieces; {added} new, {stale} changed in English "
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
        po = load_po(po_path(language, stem))
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
            elif stem == "messages" and template_fields(entry.msgstr) != template_fields(piece.english):
                out.append((stem, piece.key, "fields changed", None))
    return out


def translated_solution(path: Path, language: str, existing: nbformat.NotebookNode | None) -> nbformat.NotebookNode:
    """The solution notebook at path in language: each piece replaced by its reviewed translation
    (missing or stale ones stay English), the outputs of existing kept for the cells whose source is unchanged."""
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
    validate_po_files(language)
    out_dir = edition_dir(language) / "solutions"
    stale, writes = [], []
    stems = edition(language)
    extra = sorted(p for p in out_dir.glob("*.ipynb") if p.stem not in stems)
    for path in english_solutions():  # everything is computed before anything is written
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
            print(f"removed {po_files.shown(path)}: not in editions/{language}/EDITION")
    for target, text in writes:
        write_atomically(target, text)
        print(f"wrote {po_files.shown(target)} (run `make outputs-{language}` to store its outputs)")
    if not stems:
        return 1 if stale else 0
    if check:
        for target in stale:
            print(f"{po_files.shown(target)} differs from what solutions/{target.name} and "
                  f"{po_name(language, target.stem)} give. Run `make translations` and commit the result.",
                  file=sys.stderr)
        code = generate(out_dir, edition_dir(language) / "notebooks", check=True)
        return 1 if stale or code else 0
    return generate(out_dir, edition_dir(language) / "notebooks")


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


__all__ = ["LANGUAGES", "PoError", "build", "check_command", "code_skeleton", "edition", "extract", "main",
           "message_pieces", "po_file_problems", "po_name", "po_path", "problems", "required", "review_command",
           "sources", "translated_solution", "translations"]


if __name__ == "__main__":
    sys.exit(main())
