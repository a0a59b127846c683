"""Translations of the course, kept in step with the English source.

    tfs-translate extract [--language L]   update editions/L/po/*.po from the English sources
    tfs-translate build   [--language L]   write editions/L/solutions/, editions/L/notebooks/ and README.L.md
    tfs-translate check   [--language L]   exit 1 while a piece is missing or stale, or editions/L/ is out of date
    tfs-translate review  [--language L]   list the pieces to review, with the English change

Without --language, each command runs for every edition in turn. The English sources are the only source;
translators edit the .po files (docs/course-authors.md, "The editions"). What is translated is in course_tools.pieces
(the READMEs: course_tools.readmes), the .po files themselves in course_tools.po_files.
"""

from __future__ import annotations

import argparse
import copy
import difflib
import sys
from pathlib import Path

import nbformat
import polib

from course_tools import readmes
from course_tools.colab import stamp_colab, student_notebook_path, without_urls
from course_tools.console import utf8_output
from course_tools.make_student import generate, read_notebook, render
from course_tools.pieces import (LANGUAGES, code_skeleton, edition, english_solutions, needs_translation, required,
                                 sources)
from course_tools.po_files import (edition_dir, load_po, po_name, po_path, shown, template_fields, translations,
                                   validate_po_files)
from helpers.notebook_io import write_atomically


def extract(language: str) -> int:
    """Bring every .po file of language in step with the English pieces: a new piece empty (missing), an entry
    whose English changed fuzzy (stale, with the old English as its previous msgid), unless only the course's URLs
    changed (course_tools.colab.without_urls: build stamps them)."""
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
            elif without_urls(entry.msgid) == without_urls(piece.english):
                entry.msgid = piece.english  # only the course's URL changed: build stamps it, the entry stays reviewed
            elif entry.msgid != piece.english:
                entry.previous_msgid, entry.msgid = entry.msgid, piece.english
                if "fuzzy" not in entry.flags:
                    entry.flags.append("fuzzy")
                stale += 1
            entry.comment = piece.note
            entries.append(entry)
        removed = len(set(old) - {p.key for p in pieces})
        po.clear()
        po.extend(entries)
        text = str(po) + "\n"
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            write_atomically(path, text)
            print(f"{shown(path)}: {len(entries)} pieces; {added} new, {stale} changed in English "
                  f"(marked fuzzy), {removed} removed")
    return readmes.extract(language)  # readme.po


def problems(language: str) -> list[tuple[str, str, str, str | None]]:
    """(po file, key, kind, the previous English or None) for every piece to review. kind: "missing",
    "stale" (the English changed), "code changed" (a code cell's translation computes something else:
    only comments and displayed strings may differ) or "fields changed" (a message's {fields} differ).
    A .po file that is not strictly valid raises PoError (see po_file_problems)."""
    validate_po_files(language)
    out = []
    for stem, pieces in (required(language) | readmes.sources()).items():
        entries = {e.msgctxt: e for e in load_po(po_path(language, stem)) if not e.obsolete}
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
            elif stem == readmes.STEM and readmes.commands_changed(piece.english, entry.msgstr):
                out.append((stem, piece.key, "code changed", None))
    return out


def translated_solution(path: Path, language: str, existing: nbformat.NotebookNode | None) -> nbformat.NotebookNode:
    """The solution notebook at path in language: each piece replaced by its reviewed translation
    (missing or stale ones stay English), the outputs of existing kept for the cells whose source is unchanged,
    and the course's URLs stamped (course_tools.colab: the Colab link opens the edition's own notebook)."""
    notebook = copy.deepcopy(read_notebook(path)[1])
    found = translations(language, path.stem)
    previous = {c.get("id"): c for c in existing.cells} if existing is not None else {}
    for cell in notebook.cells:
        key = cell.get("id")
        if key in found and needs_translation(cell):
            cell.source = found[key]
    stamp_colab(notebook, student_notebook_path(path.name, language))
    for cell in notebook.cells:
        key = cell.get("id")
        if cell.cell_type == "code":
            old = previous.get(key)
            kept = old is not None and old.source == cell.source
            cell.outputs, cell.execution_count = (old.outputs, old.execution_count) if kept else ([], None)
    notebook.metadata["tfs"] = {"language": language, "generated_from": f"solutions/{path.name}"}
    return notebook


def _compared(notebook: nbformat.NotebookNode) -> tuple:
    """What build compares: each cell's id, type and source, and the notebook's tfs metadata."""
    return [(c.get("id"), c.cell_type, c.source) for c in notebook.cells], notebook.metadata.get("tfs")


def build(language: str, check: bool = False) -> int:
    """Write <language>/solutions (then the student notebooks <language>/notebooks) once every .po file is valid;
    with check, write nothing and report the notebooks that differ from what the English and the .po files give."""
    validate_po_files(language)
    readme_drift = readmes.build(language, check)  # README.<language>.md
    stems, folder = edition(language), edition_dir(language)
    out_dir, notebooks = folder / "solutions", folder / "notebooks"
    changed = []  # (target, its text): everything is computed before anything is written
    for path in english_solutions():
        target = out_dir / path.name
        if path.stem in stems:
            existing = read_notebook(target)[1] if target.exists() else None
            notebook = translated_solution(path, language, existing)
            if existing is None or _compared(existing) != _compared(notebook):
                changed.append((target, render(notebook)))
    extra = sorted(p for p in out_dir.glob("*.ipynb") if p.stem not in stems)  # notebooks that left the edition
    if check:
        code = 0
        if stems:
            for target in [t for t, _ in changed] + extra:
                print(f"{shown(target)} differs from what solutions/{target.name} and "
                      f"{po_name(language, target.stem)} give. Run `make translations` and commit the result.",
                      file=sys.stderr)
            code = generate(out_dir, notebooks, check=True)
        return 1 if changed or extra or code or readme_drift else 0
    for path in extra:
        path.unlink()
        (notebooks / path.name).unlink(missing_ok=True)
        print(f"removed {shown(path)}: not in editions/{language}/EDITION")
    for target, text in changed:
        write_atomically(target, text)
        print(f"wrote {shown(target)} (run `make outputs-{language}` to store its outputs)")
    return generate(out_dir, notebooks) if stems else 0


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
    current = {(stem, p.key): p.english for stem, pieces in (required(language) | readmes.sources()).items()
               for p in pieces}
    for stem, key, kind, previous in found:
        print(f"=== {po_name(language, stem)}, {key}: {kind}")
        if kind == "stale" and previous is not None:
            diff = difflib.unified_diff(previous.splitlines(), current[(stem, key)].splitlines(),
                                        "English translated", "English now", lineterm="", n=1)
            print("\n".join(diff))
    print(f"{len(found)} pieces to review.")
    return 1 if found else 0


def main(argv: list[str] | None = None) -> int:
    utf8_output()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["extract", "build", "check", "review"])
    parser.add_argument("--language", choices=sorted(LANGUAGES),
                        help="one edition (default: every edition, one after the other)")
    args = parser.parse_args(argv)
    command = {"extract": extract, "build": build, "check": check_command, "review": review_command}[args.command]
    languages = [args.language] if args.language else sorted(LANGUAGES)
    if args.command in ("extract", "build"):  # every edition's .po files valid before any file is written
        try:
            for language in languages:
                validate_po_files(language, syntax_only=args.command == "extract")
        except ValueError as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
    status = 0
    for language in languages:
        try:
            status = max(status, command(language))
        except ValueError as error:
            print(f"error: {error}", file=sys.stderr)
            status = 2
    return status


if __name__ == "__main__":
    sys.exit(main())
