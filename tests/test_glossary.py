"""Each edition keeps its glossary: the forms its GLOSSARY.md rules out (the section "Not used", one form per
line as "- `form`: why") appear in none of its translations, the notebooks' and the messages' alike (every
.po file of the edition, README.<language>.md's readme.po among them)."""

import re
from pathlib import Path

import polib
import pytest

from conftest import ROOT

LANGUAGES = sorted(p.parent.name for p in (ROOT / "editions").glob("*/EDITION"))


def ruled_out(glossary: Path) -> list[str]:
    """The forms listed under the glossary's heading "Not used" (any heading level, up to the next heading)."""
    text = glossary.read_text(encoding="utf-8")
    section = re.search(r"^#+ Not used\b.*?$(.*?)(?=^#|\Z)", text, re.M | re.S)
    assert section, f"{glossary.relative_to(ROOT)} has no section '## Not used' (the forms the edition rules out)"
    forms = re.findall(r"^- `([^`]+)`", section.group(1), re.M)
    assert forms, f"{glossary.relative_to(ROOT)}: its section 'Not used' lists no form as - `form`: why"
    return forms


def used(form: str, text: str) -> bool:
    """Whether form appears in text as whole words, in any case."""
    return re.search(rf"(?<!\w){re.escape(form)}(?!\w)", text, re.I) is not None


@pytest.mark.parametrize("language", LANGUAGES)
def test_no_translation_uses_a_form_the_glossary_rules_out(language):
    forms = ruled_out(ROOT / "editions" / language / "GLOSSARY.md")
    found = []
    for path in sorted((ROOT / "editions" / language / "po").glob("*.po")):
        for entry in polib.pofile(str(path), encoding="utf-8"):
            if entry.obsolete or not entry.msgstr:
                continue
            found += [f"{path.relative_to(ROOT)}: {entry.msgctxt}: {form!r}" for form in forms
                      if used(form, entry.msgstr)]
    assert not found, "forms the glossary rules out:\n" + "\n".join(found)


def test_a_form_is_found_as_whole_words_only():
    assert used("sea cual sea", "Sea cual sea su forma")
    assert not used("escale", "a escalera") and used("escale", "escale os vetores")
    assert used("chia tỉ lệ", "rồi chia tỉ lệ embedding")
