"""The README is a front door (at most 150 lines, every page of docs/ linked, every link resolving), and the
translated READMEs are generated from it through each edition's readme.po (course_tools/readmes.py), so they
cannot drift: `tfs-translate check` fails while one is stale."""

from __future__ import annotations

import re
import shutil

import polib
import pytest

from course_tools import po_files, readmes, translate

from conftest import ROOT

LANGUAGES = sorted(translate.LANGUAGES)
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
LINK = re.compile(r"\]\(([^)\s]+)\)")


def test_the_readme_has_at_most_150_lines_and_links_every_docs_page():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 150
    assert DOCS, "docs/ holds the pages the README sends its readers to"
    for page in DOCS:
        assert f"](docs/{page.name})" in text, f"README.md does not link docs/{page.name}"


def test_the_outline_states_its_total_and_the_commands_the_readme_names_exist():
    """The rows' times (each against its notebook's header: tests/test_notebooks.py) add up to the total it
    states; every `make X` it names is a Makefile target, and each `python ...` command's file or module exists."""
    text = README.read_text(encoding="utf-8")
    total = sum(int(m) for m in re.findall(r"^\| \d\d \|.*\| (\d+) min \|$", text, re.M))
    assert f"about {total}\nminutes" in text or f"about {total} minutes" in text
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    for target in set(re.findall(r"`make ([a-z-]+)", text)):
        pattern = re.sub(r"-(es|pt|vi)$", "-%", target)
        assert f"\n{target}:" in makefile or f"\n{pattern}:" in makefile, f"make {target}"
    for module in re.findall(r"`python -m ([\w.]+)`", text):
        assert (ROOT / module.replace(".", "/")).with_suffix(".py").exists() or (
            ROOT / module.replace(".", "/") / "__main__.py").exists(), module
    assert "python course.py" in text and (ROOT / "course.py").exists()


@pytest.mark.parametrize("page", [README, *[ROOT / f"README.{language}.md" for language in LANGUAGES], *DOCS],
                         ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_relative_link_resolves(page):
    for target in LINK.findall(page.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        path = (page.parent / target.split("#")[0]).resolve()
        assert path.exists(), f"{page.relative_to(ROOT)} links {target}, which does not exist"


def test_the_parts_give_the_readme_back_and_key_the_outline_rows():
    text = README.read_text(encoding="utf-8")
    parts = readmes.readme_parts(text)
    assert "\n".join(p.text for p in parts) == text
    keys = [p.key for p in parts if p.key]
    assert len(keys) == len(set(keys))
    rows = [p for p in parts if p.kind == "row" and p.key and p.text.startswith("| 0")]
    assert [p.key for p in rows] == [f"course-outline:row {n}" for n in range(2, 9)]


@pytest.mark.parametrize("language", LANGUAGES)
def test_each_generated_readme_says_so_and_is_in_step(language, capsys):
    readme = (ROOT / f"README.{language}.md").read_text(encoding="utf-8")
    assert readme.splitlines()[0] == readmes.generated_notice(language)
    assert "README.md" in readme.splitlines()[0] and f"editions/{language}/po/readme.po" in readme.splitlines()[0]
    assert readmes.build(language, check=True) == 0, capsys.readouterr().err
    assert [p for p in translate.problems(language) if p[0] == readmes.STEM] == []


@pytest.fixture
def copy(tmp_path, monkeypatch):
    """A temporary copy of what the READMEs are made from: README.md, the generated READMEs and editions/*/po."""
    for path in [README, *ROOT.glob("README.*.md")]:
        shutil.copy(path, tmp_path / path.name)
    for language in LANGUAGES:
        shutil.copytree(ROOT / "editions" / language / "po", tmp_path / "editions" / language / "po")
    monkeypatch.setattr(po_files, "ROOT", tmp_path)
    return tmp_path


def _entries(language):
    return {e.msgctxt: e for e in polib.pofile(str(po_files.po_path(language, readmes.STEM)), wrapwidth=0)}


def test_a_changed_paragraph_turns_fuzzy_a_moved_one_keeps_its_translation_and_build_follows(copy, capsys):
    language = LANGUAGES[0]
    before = _entries(language)
    text = (copy / "README.md").read_text(encoding="utf-8")
    links = before["links:item 1"].msgid
    changed = text.replace("## Links\n\n" + links, "## Links\n\n- A new first link.\n" + links)
    (copy / "README.md").write_text(changed.replace("Seven Jupyter notebooks", "Seven notebooks"), encoding="utf-8")
    assert readmes.build(language, check=True) == 1
    assert f"README.{language}.md differs from what README.md and editions/{language}/po/readme.po give" in \
        capsys.readouterr().err
    kinds = {key: kind for stem, key, kind, _ in translate.problems(language) if stem == readmes.STEM}
    assert kinds == {"transformers-from-scratch:paragraph 2": "stale", "links:item 1": "stale",
                     "links:item 2": "stale", "links:item 3": "stale", "links:item 4": "missing"}

    assert readmes.extract(language) == 0
    after = _entries(language)
    assert "fuzzy" in after["transformers-from-scratch:paragraph 2"].flags
    assert after["transformers-from-scratch:paragraph 2"].previous_msgid == before[
        "transformers-from-scratch:paragraph 2"].msgid
    assert after["links:item 2"].msgstr == before["links:item 1"].msgstr, "the moved item keeps its translation"
    assert "fuzzy" not in after["links:item 2"].flags and after["links:item 1"].msgstr == ""
    assert after["links:item 4"].msgstr == before["links:item 3"].msgstr
    problems = {key: kind for stem, key, kind, _ in translate.problems(language) if stem == readmes.STEM}
    assert problems == {"transformers-from-scratch:paragraph 2": "stale", "links:item 1": "missing"}

    assert readmes.build(language) == 0
    built = (copy / f"README.{language}.md").read_text(encoding="utf-8")
    assert "- A new first link." in built and "Seven notebooks" in built, "missing and stale pieces stay English"
    assert after["links:item 4"].msgstr in built and readmes.build(language, check=True) == 0


def test_a_translated_block_that_changes_a_command_is_caught(copy):
    language = LANGUAGES[0]
    po = polib.pofile(str(po_files.po_path(language, readmes.STEM)), wrapwidth=0)
    (block,) = [e for e in po if e.msgctxt == "two-commands:block 1"]
    assert readmes.commands(block.msgstr) == readmes.commands(block.msgid), "only the comments are translated"
    block.msgstr = block.msgstr.replace("course.py test", "course.py unit", 1)
    po.save()
    found = [(key, kind) for stem, key, kind, _ in translate.problems(language) if stem == readmes.STEM]
    assert found == [("two-commands:block 1", "code changed")]


def test_tfs_translate_check_fails_while_a_readme_is_stale(copy, capsys):
    """The same through the command line: check exits 1 naming README.<language>.md, build writes it again."""
    language = LANGUAGES[0]
    target = copy / f"README.{language}.md"
    target.write_text(target.read_text(encoding="utf-8") + "\nan edit by hand\n", encoding="utf-8")
    assert translate.main(["check", "--language", language]) == 1
    assert f"README.{language}.md differs" in capsys.readouterr().err
    assert translate.main(["build", "--language", language]) == 0
    assert "an edit by hand" not in target.read_text(encoding="utf-8")
    assert translate.main(["check", "--language", language]) == 0
