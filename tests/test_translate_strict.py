"""Nothing half-written: `tfs-translate` validates every .po file strictly before it writes anything,
reports `file:line` and exits 2 (polib alone accepts a string without its closing quote and garbles it)."""

from __future__ import annotations

import shutil

import pytest

from course_tools import po_files, translate

from conftest import ROOT

LANGUAGE = "es"


@pytest.fixture
def root(tmp_path, monkeypatch):
    """A temporary copy of the repository's English solutions and editions/ (as tests/test_i18n.py makes)."""
    for folder in ("solutions", "editions", "helpers", "course_tools"):
        shutil.copytree(ROOT / folder, tmp_path / folder, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(po_files, "ROOT", tmp_path)
    return tmp_path


def _snapshot(root):
    return {p: p.read_bytes() for p in sorted((root / "editions").rglob("*.ipynb"))}  # the built notebooks


def _edit_line(path, find, change):
    """Apply change to the first line of path that starts with find; return its 1-based number."""
    lines = path.read_text(encoding="utf-8").split("\n")
    number = next(i for i, line in enumerate(lines) if line.startswith(find))
    lines[number] = change(lines[number])
    path.write_text("\n".join(lines), encoding="utf-8")
    return number + 1


def _run(command, capsys):
    capsys.readouterr()
    status = translate.main([command])
    return status, capsys.readouterr()


@pytest.mark.parametrize("command", ["build", "check", "extract"])
def test_a_string_missing_its_closing_quote_in_es_leaves_every_edition_untouched(root, capsys, command):
    po = root / "editions" / LANGUAGE / "po" / "03_multi_head_attention.po"
    before = _snapshot(root)
    english = root / "solutions" / "01_positional_encoding.ipynb"  # an English change: extract would mark it fuzzy
    english.write_text(english.read_text(encoding="utf-8").replace("Positional", "Positional (changed)", 1),
                       encoding="utf-8")
    # every other .po file, the other editions' too: none is written while one edition's has an error
    po_before = {p: p.read_bytes() for p in (root / "editions").glob("*/po/*.po") if p != po}
    line = _edit_line(po, 'msgstr "', lambda text: text.rstrip('"') if text != 'msgstr ""' else 'msgstr "abc')
    status, out = _run(command, capsys)
    assert status == 2
    assert f"editions/{LANGUAGE}/po/03_multi_head_attention.po:{line}: msgstr is not followed by one well-formed " \
        "string" in out.err
    assert "Traceback" not in out.err and "nothing was written" in out.err
    assert _snapshot(root) == before, "editions/ is untouched"
    assert {p: p.read_bytes() for p in po_before} == po_before, "no .po file of any edition is rewritten"


def test_a_continuation_line_missing_its_closing_quote_is_caught(root, capsys):
    po = root / "editions" / LANGUAGE / "po" / "03_multi_head_attention.po"
    before = _snapshot(root)
    line = _edit_line(po, '"', lambda text: text[:-1])
    status, out = _run("build", capsys)
    assert status == 2 and f"03_multi_head_attention.po:{line}: a malformed string" in out.err
    assert _snapshot(root) == before


def test_a_stray_line_is_file_and_line_not_a_traceback(root, capsys):
    po = root / "editions" / LANGUAGE / "po" / "02_attention.po"
    before = _snapshot(root)
    line = _edit_line(po, "msgctxt", lambda text: "oops, a stray line\n" + text)
    status, out = _run("build", capsys)
    assert status == 2 and "Traceback" not in out.err
    assert f"editions/{LANGUAGE}/po/02_attention.po:{line}: a stray line" in out.err
    assert _snapshot(root) == before


def test_a_message_with_other_fields_than_its_english_is_refused(root, capsys):
    po = root / "editions" / LANGUAGE / "po" / "messages.po"
    before = _snapshot(root)
    line = _edit_line(po, 'msgstr "{what} devolvió None', lambda text: text.replace("{what}", "{qué}"))
    status, out = _run("build", capsys)
    assert status == 2
    assert f"editions/{LANGUAGE}/po/messages.po:{line}: the msgstr has the fields ['qué'], the msgid ['what']" \
        in out.err
    assert _snapshot(root) == before


def test_a_broken_code_span_is_refused(root, capsys):
    po = root / "editions" / LANGUAGE / "po" / "messages.po"
    before = _snapshot(root)
    line = _edit_line(po, 'msgstr "{what} devolvió None', lambda text: text.replace("`return`", "`return"))
    status, out = _run("build", capsys)
    assert status == 2 and f"editions/{LANGUAGE}/po/messages.po:{line}: the msgstr (generic:returned_none) breaks a " \
                           "markdown code span" in out.err
    assert _snapshot(root) == before


def test_the_committed_po_files_are_strictly_valid():
    for path in sorted(ROOT.glob("editions/*/po/*.po")):  # every edition
        assert po_files.po_file_problems(path) == [], path.name


def test_the_strict_parser_reads_what_polib_reads():
    """Same entries, same text: the strict pass is no second dialect of the format."""
    import polib

    for path in sorted(ROOT.glob("editions/*/po/*.po")):  # every edition
        entries, errors = po_files.parse_po(path)
        assert not errors
        ours = {e.fields.get("msgctxt"): (e.fields["msgid"], e.fields["msgstr"]) for e in entries
                if "msgid" in e.fields}
        theirs = {e.msgctxt: (e.msgid, e.msgstr) for e in polib.pofile(str(path), wrapwidth=0) if not e.obsolete}
        theirs[None] = ours[None]  # the header entry
        assert ours == theirs, path.name


def test_a_solution_notebook_that_is_not_json_is_one_line_per_edition_and_leaves_editions_untouched(root, capsys):
    before = _snapshot(root)
    path = root / "solutions" / "04_masking.ipynb"
    path.write_text(path.read_text(encoding="utf-8")[:500], encoding="utf-8")
    status, out = _run("build", capsys)
    assert status == 2 and "Traceback" not in out.err
    assert out.err.startswith(f"error: {path}:") and "not JSON" in out.err and len(set(out.err.splitlines())) == 1
    assert _snapshot(root) == before
