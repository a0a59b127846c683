"""Every edition (Spanish, Brazilian Portuguese, Vietnamese: each folder of editions/) is generated from the
English one and cannot fall behind it silently."""

from __future__ import annotations

import json
import shutil

import nbformat
import pytest

from course_tools import po_files, translate
from helpers.checks import EXERCISES
from helpers.i18n import LANGUAGE_NAMES, tr

from conftest import ROOT, run_grader

LANGUAGES = sorted(translate.LANGUAGES)  # every edition: es, pt, vi
ENGLISH_ALL = sorted((ROOT / "solutions").glob("*.ipynb"))
# What each edition calls an exercise heading and the first hint (the headings its notebooks use).
EXERCISE_HEADING = {"es": "## Ejercicio ", "pt": "## Exercício ", "vi": "## Bài tập "}
FIRST_HINT = {"es": "<summary>Pista 1: la idea</summary>", "pt": "<summary>Dica 1: a ideia</summary>",
              "vi": "<summary>Gợi ý 1: ý tưởng</summary>"}


def solutions(language):
    return [ROOT / "editions" / language / "solutions" / f"{stem}.ipynb" for stem in translate.edition(language)]


def pairs():
    """(language, English solution, the edition's solution) for every notebook of every edition."""
    return [(language, ROOT / "solutions" / path.name, path) for language in LANGUAGES for path in solutions(language)]


def test_every_edition_holds_all_seven_notebooks_and_only_generated_notebooks():
    """The READMEs promise the whole course in every language."""
    assert {"es", "pt", "vi"} <= set(LANGUAGES)
    for language in LANGUAGES:
        edition = translate.edition(language)
        assert edition == [p.stem for p in ENGLISH_ALL] and len(edition) == 7, language
        for folder in ("solutions", "notebooks"):
            found = sorted(p.stem for p in (ROOT / "editions" / language / folder).glob("*.ipynb"))
            assert found == edition, (language, folder)


@pytest.mark.parametrize("language", LANGUAGES)
def test_every_piece_is_translated_and_reviewed(language):
    problems = translate.problems(language)
    assert not problems, "pieces to translate or review (run `make review-translations`):\n" + "\n".join(
        f"{translate.po_name(language, stem)} {key}: {kind}" for stem, key, kind, _ in problems[:30])


@pytest.mark.parametrize("language", LANGUAGES)
def test_the_edition_is_what_the_english_and_the_po_files_give(language, capsys):
    assert translate.build(language, check=True) == 0, capsys.readouterr().err


def test_check_passes_and_counts_the_pieces_of_every_edition(capsys):
    assert translate.main(["check"]) == 0
    out = capsys.readouterr().out
    for language in LANGUAGES:
        assert f"{LANGUAGE_NAMES[language][0]} edition ({', '.join(translate.edition(language))}):" in out
    assert out.count("translated and up to date") == len(LANGUAGES)


@pytest.mark.parametrize("language, english, translated", pairs(), ids=lambda p: getattr(p, "stem", p))
def test_the_code_computes_the_same_as_the_english(language, english, translated):
    """Cell for cell: the same ids, types and nbgrader metadata, and code that differs only in its
    comments and displayed strings (an f-string keeps its {expressions})."""
    en, ed = nbformat.read(english, as_version=4), nbformat.read(translated, as_version=4)
    assert [(c.id, c.cell_type) for c in en.cells] == [(c.id, c.cell_type) for c in ed.cells]
    for a, b in zip(en.cells, ed.cells):
        assert a.metadata.get("nbgrader") == b.metadata.get("nbgrader"), a.id
        if a.cell_type == "code":
            assert translate.code_skeleton(a.source) == translate.code_skeleton(b.source), a.id
        else:
            assert a.source != b.source or not a.source.strip(), f"{translated} cell {a.id} is not translated"
    assert ed.metadata["tfs"] == {"language": language, "generated_from": f"solutions/{english.name}"}


@pytest.mark.parametrize("language, english, translated", pairs(), ids=lambda p: getattr(p, "stem", p))
def test_the_notebooks_speak_their_language(language, english, translated):
    notebook = nbformat.read(translated, as_version=4)
    text = "\n".join(c.source for c in notebook.cells)
    assert f'helpers.set_language("{language}")' in text
    english = nbformat.read(english, as_version=4)
    exercises = sum(c.source.count("## Exercise ") for c in english.cells)
    assert sum(c.source.count(EXERCISE_HEADING[language]) for c in notebook.cells) == exercises
    assert text.count(FIRST_HINT[language]) == exercises
    assert "<summary>Hint" not in text and "slide" not in text.lower()
    for cell in notebook.cells:  # the checks answer in the edition's language in the stored outputs
        for output in cell.get("outputs", []):
            shown = output.get("text", "") + output.get("data", {}).get("text/plain", "")
            if shown.startswith("✅"):
                name = shown[2:].split(":")[0]
                assert tr(f"{name}:success", EXERCISES[name].success, in_language=language) in shown


@pytest.mark.parametrize("language", LANGUAGES)
def test_the_student_notebooks_are_generated(language):
    for path in (ROOT / "editions" / language / "notebooks").glob("*.ipynb"):
        notebook = nbformat.read(path, as_version=4)
        assert notebook.metadata["tfs"]["generated_from"] == f"editions/{language}/solutions/{path.name}"
        assert "tfs-translate build" in notebook.metadata["tfs"]["note"], path.name
        assert all(not c.get("outputs") for c in notebook.cells if c.cell_type == "code")


def _copy_of_the_repository(tmp_path):
    for folder in ("solutions", "editions", "helpers", "course_tools"):
        shutil.copytree(ROOT / folder, tmp_path / folder, ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path


def test_an_english_change_without_its_counterparts_fails_in_every_edition(tmp_path, monkeypatch, capsys):
    """Change one English cell in a temporary copy: check fails and names the piece in every edition; review
    lists it per edition with the diff; extract keeps each old translation, marked fuzzy, until reviewed."""
    import polib

    root = _copy_of_the_repository(tmp_path)
    monkeypatch.setattr(po_files, "ROOT", root)
    stem = ENGLISH_ALL[0].stem
    path = root / "solutions" / f"{stem}.ipynb"
    notebook = nbformat.read(path, as_version=4)
    cell = next(c for c in notebook.cells if c.cell_type == "markdown" and c.source.startswith("## 1."))
    cell.source = cell.source.replace("## 1.", "## 1. (changed)", 1)
    nbformat.write(notebook, path)
    assert translate.main(["check"]) == 1
    err = capsys.readouterr().err
    for language in LANGUAGES:
        assert f"{translate.po_name(language, stem)}: {cell.id}: stale" in err
    assert err.count(": stale") == len(LANGUAGES) and ": missing" not in err

    assert translate.main(["extract"]) == 0
    assert translate.main(["review"]) == 1
    out = capsys.readouterr().out
    for language in LANGUAGES:
        assert f"=== {translate.po_name(language, stem)}, {cell.id}: stale" in out
        entry = next(e for e in polib.pofile(str(translate.po_path(language, stem))) if e.msgctxt == cell.id)
        assert "fuzzy" in entry.flags and entry.msgid == cell.source and entry.msgstr
    assert out.count("+## 1. (changed)") == len(LANGUAGES)


@pytest.mark.parametrize("language", LANGUAGES)
def test_a_new_english_piece_is_missing_and_a_code_change_in_a_translation_is_caught(tmp_path, monkeypatch, capsys,
                                                                                     language):
    import polib

    root = _copy_of_the_repository(tmp_path)
    monkeypatch.setattr(po_files, "ROOT", root)
    path = root / "solutions" / "01_positional_encoding.ipynb"
    notebook = nbformat.read(path, as_version=4)
    new = nbformat.v4.new_markdown_cell("A new paragraph.")
    new.id = "new-paragraph"
    notebook.cells.append(new)
    nbformat.write(notebook, path)
    po_file = translate.po_path(language, "01_positional_encoding")
    po = polib.pofile(str(po_file), wrapwidth=0)
    code = next(e for e in po if e.comment.startswith("code cell") and "np.zeros" in e.msgstr)
    code.msgstr = code.msgstr.replace("np.zeros", "np.ones", 1)
    po.save()
    assert translate.main(["check", "--language", language]) == 1
    err = capsys.readouterr().err
    assert f"{translate.po_name(language, '01_positional_encoding')}: new-paragraph: missing" in err
    assert f"{translate.po_name(language, '01_positional_encoding')}: {code.msgctxt}: code changed" in err


def test_a_notebook_outside_the_edition_is_not_required_and_joining_it_requires_every_piece(tmp_path, monkeypatch,
                                                                                           capsys):
    """In a temporary copy, take the last notebook out of an edition and empty its .po file: check passes
    without it; put it back in EDITION and check fails, naming its untranslated pieces."""
    import polib

    language = LANGUAGES[0]
    root = _copy_of_the_repository(tmp_path)
    monkeypatch.setattr(po_files, "ROOT", root)
    edition = translate.edition(language)
    outside = edition[-1]
    po = polib.pofile(str(translate.po_path(language, outside)), wrapwidth=0)
    for entry in po:
        entry.msgstr = ""
    po.save()
    for folder in ("solutions", "notebooks"):
        (root / "editions" / language / folder / f"{outside}.ipynb").unlink()
    edition_file = root / "editions" / language / "EDITION"
    edition_file.write_text("\n".join(edition[:-1]) + "\n", encoding="utf-8")
    assert translate.main(["check", "--language", language]) == 0, capsys.readouterr().err
    capsys.readouterr()
    edition_file.write_text("\n".join(edition) + "\n", encoding="utf-8")
    assert translate.main(["check", "--language", language]) == 1
    err = capsys.readouterr().err
    assert f"{translate.po_name(language, outside)}:" in err and ": missing" in err


@pytest.mark.parametrize("language", LANGUAGES)
def test_a_message_whose_translation_loses_a_field_is_caught(tmp_path, monkeypatch, capsys, language):
    """A translated message must keep the {fields} of its English: dropping one fails check (exit 2, file:line;
    tests/test_translate_strict.py holds the other strict checks of the .po files)."""
    import polib

    root = _copy_of_the_repository(tmp_path)
    monkeypatch.setattr(po_files, "ROOT", root)
    po_file = translate.po_path(language, "messages")
    po = polib.pofile(str(po_file), wrapwidth=0)
    entry = next(e for e in po if "{" in e.msgid and "{" in e.msgstr and not e.obsolete)
    field = entry.msgstr[entry.msgstr.index("{"):entry.msgstr.index("}") + 1]
    entry.msgstr = entry.msgstr.replace(field, "", 1)
    po.save()
    assert translate.main(["check", "--language", language]) == 2
    err = capsys.readouterr().err
    assert f"{translate.po_name(language, 'messages')}:" in err and f"({entry.msgctxt}): keep every {{field}}" in err


@pytest.mark.parametrize("language", LANGUAGES)
def test_a_check_message_is_translated_through_the_same_catalog(language):
    hint = EXERCISES["create_position_matrix"].mistakes["sin_cos_swapped"]
    translated = tr("create_position_matrix:sin_cos_swapped", hint, in_language=language)
    assert translated != hint and "cos" in translated
    assert tr("create_position_matrix:sin_cos_swapped", hint + " (changed)", in_language=language) == \
        hint + " (changed)", "a stale translation falls back to the English"


def _swap_sin_and_cos(source: str) -> str:
    swapped = source.replace("np.sin(", "SIN(").replace("np.cos(", "np.sin(").replace("SIN(", "np.cos(")
    assert swapped != source
    return swapped


def test_the_grader_reports_the_same_code_in_every_edition_with_a_message_in_its_language(tmp_path):
    folders = {"en": ROOT / "solutions"} | {language: ROOT / "editions" / language / "solutions"
                                            for language in LANGUAGES}
    for language, folder in folders.items():
        notebook = nbformat.read(folder / "01_positional_encoding.ipynb", as_version=4)
        cell = next(c for c in notebook.cells if c.metadata.get("nbgrader", {}).get("grade_id")
                    == "create_position_matrix_answer")
        cell.source = _swap_sin_and_cos(cell.source)
        code = [c for c in notebook.cells if c.cell_type == "code"]  # its imports cell (which sets the
        check = next(c for c in code if c.source.startswith("check_create_position_matrix("))  # language),
        notebook.cells = [code[0], cell, check]  # the answer and its check cell: the rest cannot change the verdict
        target = tmp_path / language / "01_positional_encoding.ipynb"
        target.parent.mkdir()
        nbformat.write(notebook, target)
    status, out, _ = run_grader("--json", "--jobs", "2", *(tmp_path / language for language in folders))
    assert status == 1
    reports = json.loads(out)
    reports = reports if isinstance(reports, list) else [reports]
    found = {}
    for report in reports:
        language = next(language for language in folders if f"/{language}/" in report["notebook"])
        found[language] = {e["name"]: e for e in report["exercises"]}["create_position_matrix"]
    assert sorted(found) == sorted(folders)
    hint = EXERCISES["create_position_matrix"].mistakes["sin_cos_swapped"]
    for language, verdict in found.items():
        assert verdict["mistake"] == "sin_cos_swapped", language
        assert tr("create_position_matrix:sin_cos_swapped", hint, in_language=language) in verdict["message"]
        assert language == "en" or hint not in verdict["message"], language


def _outline_times(text: str, heading: str) -> dict[str, str]:
    section = text[text.index(heading):]
    rows = [line.split("|") for line in section.splitlines() if line.startswith("| 0")]
    return {row[1].strip(): row[-2].strip() for row in rows}


# Each edition's README: its two-commands heading and its outline heading; the translators' commands: docs/.
AUTHORS_PAGE = ROOT / "docs" / "course-authors.md"
README_HEADINGS = {"es": ("## Dos comandos", "## Temario"), "pt": ("## Dois comandos", "## Programa"),
                   "vi": ("## Hai lệnh", "## Nội dung khóa học")}


@pytest.mark.parametrize("language", LANGUAGES)
def test_each_edition_has_a_readme_with_the_two_commands_the_outline_and_the_links(language):
    english = (ROOT / "README.md").read_text(encoding="utf-8")
    readme = (ROOT / f"README.{language}.md").read_text(encoding="utf-8")
    assert f"(README.{language}.md)" in english.split("\n## ")[0]
    assert "`python course.py es` (`pt`, `vi`)" in english, "the English README names every edition's command"
    assert "(README.md)" in readme.split("\n## ")[0]
    commands_heading, outline_heading = README_HEADINGS[language]
    commands = readme[readme.index(commands_heading):readme.index(outline_heading)]
    assert f"python course.py {language}" in commands and "python course.py test" in commands
    assert (ROOT / "editions" / language / "EDITION").exists(), "python course.py <language> opens an EDITION"
    assert _outline_times(readme, outline_heading) == _outline_times(english, "## Course outline")
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    authors = AUTHORS_PAGE.read_text(encoding="utf-8")
    for target in ("translations", "review-translations", "check-translations"):
        assert f"\n{target}:" in makefile and f"make {target}" in authors
    assert "\nlab-%:" in makefile and "\noutputs-%:" in makefile and f"make outputs-{language}" in authors
    for stem in translate.edition(language):
        assert f"editions/{language}/notebooks/{stem}.ipynb" in readme


def _date_language(text: str) -> str:
    """The language a written date is in, from its words: "vi", "pt", "es", or "en" (digits only count as "en")."""
    from helpers import dates

    words = set(text.lower().replace(",", " ").replace(".", " ").split())
    if "tháng" in words or "ngày" in text.lower():
        return "vi"
    if words & set(dates.MONTHS_PT) - set(dates.MONTHS_ES):
        return "pt"
    if words & set(dates.MONTHS_ES) - set(dates.MONTHS_PT) or words & set(dates.DAYS_ES) - {"sábado", "domingo"}:
        return "es"
    return "en"


def _my_date_and_examples(path):
    cell = next(c for c in nbformat.read(path, as_version=4).cells if c.source.startswith("MY_DATE = "))
    namespace = {}
    exec(cell.source.split("for text")[0], namespace)  # the two assignments only
    return namespace["MY_DATE"], namespace["examples"]


@pytest.mark.parametrize("language", ["en", *LANGUAGES])
def test_the_students_date_and_the_first_example_are_in_the_editions_language(language):
    """Notebook 06 invites the reader to write a date of their own: in each edition the date it starts from, and the
    first example, are written in the edition's language."""
    folder = ROOT / "solutions" if language == "en" else ROOT / "editions" / language / "solutions"
    mine, shown = _my_date_and_examples(folder / "06_training.ipynb")
    assert _date_language(mine) == language and _date_language(shown[0]) == language, (mine, shown[:3])


def test_an_apostrophe_of_the_displayed_text_leaves_the_fields_whole():
    """An apostrophe outside the braces ("RNN's") pairs with nothing: each {field} keeps its expression, and a
    label quoted inside a field is text, as a translation may change it; the expressions themselves may not."""
    english = '''print(f"the RNN's cost: {c['recurrent']:,}, the projections' {x:.2f} {y!r}")'''
    spanish = '''print(f"el costo de la RNN: {c['recurrente']:,}, el de las proyecciones {x:.2f} {y!r}")'''
    assert translate.code_skeleton(english) == translate.code_skeleton(spanish) == [
        "print", "(", "F['c[S]', 'x', 'y']", ")", "\n", ""]
    assert translate.code_skeleton(english) != translate.code_skeleton(spanish.replace("{x:.2f}", "{z:.2f}"))


@pytest.mark.parametrize("language, value, digits, expected", [
    ("en", 7.6e-06, 1, "7.6e-06"), ("es", 7.6e-06, 1, "7.6e-06"), ("pt", 7.6e-06, 1, "7,6e-06"),
    ("vi", 1.1e-05, 2, "1,10e-05"), ("en", 9.96e-3, 1, "1.0e-02"), ("en", 0.0, 1, "0.0e+00")])
def test_scientific_writes_the_decimal_mark_of_each_language(language, value, digits, expected):
    from helpers.i18n import scientific
    assert scientific(value, digits, in_language=language) == expected


def test_scientific_names_a_wrong_digits():
    from helpers.i18n import scientific
    with pytest.raises(ValueError, match="digits"):
        scientific(1.0, -1)
