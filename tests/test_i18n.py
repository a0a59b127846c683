"""The Spanish edition is generated from the English one and cannot fall behind it silently."""

from __future__ import annotations

import json
import shutil

import nbformat
import pytest

from course_tools import translate
from helpers.checks import EXERCISES
from helpers.i18n import tr

from conftest import ROOT, run_grader

LANGUAGE = "es"
EDITION = translate.edition(LANGUAGE)  # the notebooks of the Spanish edition: i18n/es/EDITION
ENGLISH = [ROOT / "solutions" / f"{stem}.ipynb" for stem in EDITION]
SPANISH = [ROOT / LANGUAGE / "solutions" / p.name for p in ENGLISH]
STUDENT = [ROOT / LANGUAGE / "notebooks" / p.name for p in ENGLISH]
ENGLISH_ALL = sorted((ROOT / "solutions").glob("*.ipynb"))


def test_the_edition_holds_all_six_notebooks_and_only_generated_notebooks():
    """README.md and README.es.md promise the whole course in Spanish."""
    assert EDITION == [p.stem for p in ENGLISH_ALL] and len(EDITION) == 6
    assert sorted(p.name for p in (ROOT / LANGUAGE / "solutions").glob("*.ipynb")) == sorted(p.name for p in SPANISH)
    assert sorted(p.name for p in (ROOT / LANGUAGE / "notebooks").glob("*.ipynb")) == sorted(p.name for p in STUDENT)


def test_every_spanish_piece_is_translated_and_reviewed():
    problems = translate.problems(LANGUAGE)
    assert not problems, "pieces to translate or review (run `make review-translations`):\n" + "\n".join(
        f"i18n/{LANGUAGE}/{stem}.po {key}: {kind}" for stem, key, kind, _ in problems[:30])


def test_the_spanish_notebooks_are_what_the_english_and_the_po_files_give(capsys):
    assert translate.build(LANGUAGE, check=True) == 0, capsys.readouterr().err


def test_check_passes_and_counts_the_pieces(capsys):
    assert translate.main(["check"]) == 0
    out = capsys.readouterr().out
    assert f"Spanish edition ({', '.join(EDITION)}):" in out and "translated and up to date" in out


@pytest.mark.parametrize("english, spanish", list(zip(ENGLISH, SPANISH)), ids=lambda p: p.stem)
def test_spanish_code_computes_the_same_as_the_english(english, spanish):
    """Cell for cell: the same ids, types and nbgrader metadata, and code that differs only in its
    comments and displayed strings (an f-string keeps its {expressions})."""
    en, es = nbformat.read(english, as_version=4), nbformat.read(spanish, as_version=4)
    assert [(c.id, c.cell_type) for c in en.cells] == [(c.id, c.cell_type) for c in es.cells]
    for a, b in zip(en.cells, es.cells):
        assert a.metadata.get("nbgrader") == b.metadata.get("nbgrader"), a.id
        if a.cell_type == "code":
            assert translate.code_skeleton(a.source) == translate.code_skeleton(b.source), a.id
        else:
            assert a.source != b.source or not a.source.strip(), f"{spanish.name} cell {a.id} is not translated"
    assert es.metadata["tfs"] == {"language": LANGUAGE, "generated_from": f"solutions/{english.name}"}


@pytest.mark.parametrize("spanish", SPANISH, ids=lambda p: p.stem)
def test_spanish_notebooks_speak_spanish(spanish):
    notebook = nbformat.read(spanish, as_version=4)
    text = "\n".join(c.source for c in notebook.cells)
    assert 'helpers.set_language("es")' in text
    english = nbformat.read(ROOT / "solutions" / spanish.name, as_version=4)
    exercises = sum(c.source.count("## Exercise ") for c in english.cells)
    assert sum(c.source.count("## Ejercicio ") for c in notebook.cells) == exercises
    assert text.count("<summary>Pista 1: la idea</summary>") == exercises
    assert "<summary>Hint" not in text and "slide" not in text.lower()
    for cell in notebook.cells:  # the checks answer in Spanish in the stored outputs
        for output in cell.get("outputs", []):
            shown = output.get("text", "") + output.get("data", {}).get("text/plain", "")
            if shown.startswith("✅"):
                name = shown[2:].split(":")[0]
                assert tr(f"{name}:success", EXERCISES[name].success, in_language=LANGUAGE) in shown


def test_the_spanish_student_notebooks_are_generated():
    for path in STUDENT:
        notebook = nbformat.read(path, as_version=4)
        assert notebook.metadata["tfs"]["generated_from"] == f"{LANGUAGE}/solutions/{path.name}", path.name
        assert "tfs-translate build" in notebook.metadata["tfs"]["note"], path.name
        assert all(not c.get("outputs") for c in notebook.cells if c.cell_type == "code")


def _copy_of_the_repository(tmp_path):
    for folder in ("solutions", "i18n", LANGUAGE, "helpers", "course_tools"):
        shutil.copytree(ROOT / folder, tmp_path / folder, ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path


def test_an_english_change_without_its_spanish_counterpart_fails(tmp_path, monkeypatch, capsys):
    """Change one English cell in a temporary copy: check fails and names the piece; review shows the diff;
    extract keeps the old translation, marked fuzzy, until a translator reviews it."""
    root = _copy_of_the_repository(tmp_path)
    monkeypatch.setattr(translate, "ROOT", root)
    stem = EDITION[0]
    path = root / "solutions" / f"{stem}.ipynb"
    notebook = nbformat.read(path, as_version=4)
    cell = next(c for c in notebook.cells if c.cell_type == "markdown" and c.source.startswith("## 1."))
    cell.source = cell.source.replace("## 1.", "## 1. (changed)", 1)
    nbformat.write(notebook, path)
    assert translate.main(["check"]) == 1
    err = capsys.readouterr().err
    assert f"i18n/{LANGUAGE}/{stem}.po: {cell.id}: stale" in err
    assert err.count(": stale") == 1 and ": missing" not in err

    assert translate.main(["extract"]) == 0
    assert translate.main(["review"]) == 1
    out = capsys.readouterr().out
    assert f"{stem}.po, {cell.id}: stale" in out and "+## 1. (changed)" in out
    import polib

    entry = next(e for e in polib.pofile(str(root / "i18n" / LANGUAGE / f"{stem}.po")) if e.msgctxt == cell.id)
    assert "fuzzy" in entry.flags and entry.msgid == cell.source and entry.msgstr


def test_a_new_english_piece_is_missing_and_a_code_change_in_spanish_is_caught(tmp_path, monkeypatch, capsys):
    root = _copy_of_the_repository(tmp_path)
    monkeypatch.setattr(translate, "ROOT", root)
    path = root / "solutions" / "01_positional_encoding.ipynb"
    notebook = nbformat.read(path, as_version=4)
    new = nbformat.v4.new_markdown_cell("A new paragraph.")
    new.id = "new-paragraph"
    notebook.cells.append(new)
    nbformat.write(notebook, path)
    import polib

    po_file = root / "i18n" / LANGUAGE / "01_positional_encoding.po"
    po = polib.pofile(str(po_file), wrapwidth=0)
    code = next(e for e in po if e.comment.startswith("code cell") and "np.zeros" in e.msgstr)
    code.msgstr = code.msgstr.replace("np.zeros", "np.ones", 1)
    po.save()
    assert translate.main(["check"]) == 1
    err = capsys.readouterr().err
    assert f"i18n/{LANGUAGE}/01_positional_encoding.po: new-paragraph: missing" in err
    assert f"i18n/{LANGUAGE}/01_positional_encoding.po: {code.msgctxt}: code changed" in err


def test_a_notebook_outside_the_edition_is_not_required_and_joining_it_requires_every_piece(tmp_path, monkeypatch,
                                                                                           capsys):
    """In a temporary copy, take the last notebook out of the edition and empty its .po file: check passes
    without it; put it back in EDITION and check fails, naming its untranslated pieces."""
    import polib

    root = _copy_of_the_repository(tmp_path)
    monkeypatch.setattr(translate, "ROOT", root)
    outside = EDITION[-1]
    po = polib.pofile(str(root / "i18n" / LANGUAGE / f"{outside}.po"), wrapwidth=0)
    for entry in po:
        entry.msgstr = ""
    po.save()
    for folder in ("solutions", "notebooks"):
        (root / LANGUAGE / folder / f"{outside}.ipynb").unlink()
    edition_file = root / "i18n" / LANGUAGE / "EDITION"
    edition_file.write_text("\n".join(EDITION[:-1]) + "\n")
    assert translate.main(["check"]) == 0, capsys.readouterr().err
    capsys.readouterr()
    edition_file.write_text("\n".join(EDITION) + "\n")
    assert translate.main(["check"]) == 1
    err = capsys.readouterr().err
    assert f"i18n/{LANGUAGE}/{outside}.po:" in err and ": missing" in err


def test_a_message_whose_translation_loses_a_field_is_caught(tmp_path, monkeypatch, capsys):
    """A Spanish message must keep the {fields} of its English: dropping one fails check (exit 2, file:line;
    tests/test_translate_strict.py holds the other strict checks of the .po files)."""
    import polib

    root = _copy_of_the_repository(tmp_path)
    monkeypatch.setattr(translate, "ROOT", root)
    po_file = root / "i18n" / LANGUAGE / "messages.po"
    po = polib.pofile(str(po_file), wrapwidth=0)
    entry = next(e for e in po if "{" in e.msgid and "{" in e.msgstr and not e.obsolete)
    field = entry.msgstr[entry.msgstr.index("{"):entry.msgstr.index("}") + 1]
    entry.msgstr = entry.msgstr.replace(field, "", 1)
    po.save()
    assert translate.main(["check"]) == 2
    err = capsys.readouterr().err
    assert f"i18n/{LANGUAGE}/messages.po:" in err and f"({entry.msgctxt}): keep every {{field}}" in err


def test_the_spanish_date_examples_and_the_students_date_start_in_spanish():
    """Notebook 06 in Spanish: MY_DATE and the first examples are Spanish dates; the English edition's are English."""
    from helpers import dates

    def examples(path):
        cell = next(c for c in nbformat.read(path, as_version=4).cells if c.source.startswith("MY_DATE = "))
        namespace = {}
        exec(cell.source.split("for text")[0], namespace)  # the two assignments only
        return namespace["MY_DATE"], namespace["examples"]

    def spanish(text):
        return any(month in text.lower() for month in dates.MONTHS_ES)

    mine, shown = examples(ROOT / LANGUAGE / "solutions" / "06_training.ipynb")
    assert spanish(mine) and all(spanish(e) for e in shown[:3]), shown
    mine, shown = examples(ROOT / "solutions" / "06_training.ipynb")
    assert not spanish(mine) and not spanish(shown[0]), shown


def test_a_check_message_is_translated_through_the_same_catalog():
    hint = EXERCISES["create_position_matrix"].mistakes["sin_cos_swapped"]
    spanish = tr("create_position_matrix:sin_cos_swapped", hint, in_language=LANGUAGE)
    assert spanish != hint and "cos" in spanish
    assert tr("create_position_matrix:sin_cos_swapped", hint + " (changed)", in_language=LANGUAGE) == \
        hint + " (changed)", "a stale translation falls back to the English"


def _swap_sin_and_cos(source: str) -> str:
    swapped = source.replace("np.sin(", "SIN(").replace("np.cos(", "np.sin(").replace("SIN(", "np.cos(")
    assert swapped != source
    return swapped


def test_the_grader_reports_the_same_code_for_spanish_with_a_spanish_message(tmp_path):
    for language, folder in (("en", ROOT / "solutions"), (LANGUAGE, ROOT / LANGUAGE / "solutions")):
        notebook = nbformat.read(folder / "01_positional_encoding.ipynb", as_version=4)
        cell = next(c for c in notebook.cells if c.metadata.get("nbgrader", {}).get("grade_id")
                    == "create_position_matrix_answer")
        cell.source = _swap_sin_and_cos(cell.source)
        target = tmp_path / language / "01_positional_encoding.ipynb"
        target.parent.mkdir()
        nbformat.write(notebook, target)
    status, out, _ = run_grader("--json", "--jobs", "2", tmp_path / "en", tmp_path / LANGUAGE)
    assert status == 1
    reports = json.loads(out)
    reports = reports if isinstance(reports, list) else [reports]
    found = {}
    for report in reports:
        language = "en" if "/en/" in report["notebook"] else LANGUAGE
        found[language] = {e["name"]: e for e in report["exercises"]}["create_position_matrix"]
    hint = EXERCISES["create_position_matrix"].mistakes["sin_cos_swapped"]
    assert found["en"]["mistake"] == found[LANGUAGE]["mistake"] == "sin_cos_swapped"
    assert hint in found["en"]["message"]
    assert tr("create_position_matrix:sin_cos_swapped", hint, in_language=LANGUAGE) in found[LANGUAGE]["message"]
    assert hint not in found[LANGUAGE]["message"]


def _outline_times(text: str, heading: str) -> dict[str, str]:
    section = text[text.index(heading):]
    rows = [line.split("|") for line in section.splitlines() if line.startswith("| 0")]
    return {row[1].strip(): row[-2].strip() for row in rows}


def test_the_spanish_readme_has_the_two_commands_the_outline_and_the_links():
    english, spanish = (ROOT / "README.md").read_text(), (ROOT / "README.es.md").read_text()
    assert "(README.es.md)" in english.split("\n## ")[0] and "make lab-es" in english
    assert "(README.md)" in spanish.split("\n## ")[0]
    commands = spanish[spanish.index("## Dos comandos"):spanish.index("## Temario")]
    assert "make lab-es" in commands and "make test" in commands
    assert _outline_times(spanish, "## Temario") == _outline_times(english, "## Course outline")
    for target in ("lab-es", "translations", "review-translations", "outputs-es", "check-translations"):
        assert f"\n{target}:" in (ROOT / "Makefile").read_text() and f"make {target}" in spanish
    for stem in EDITION:
        assert f"es/notebooks/{stem}.ipynb" in spanish
