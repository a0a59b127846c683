"""What a Spanish-speaking student reads is Spanish: no English sentence left in the outputs of the
Spanish solution notebooks, and numbers written the Spanish way (issue: the Spanish edition as a Mexican
instructor would write it)."""

import json
import re

import pytest

from conftest import ROOT

from helpers.i18n import number

# English words that never belong in Spanish prose. Code, data and names are removed before the search:
# code spans and calls, quoted text, and the English data the notebooks print on purpose (the example
# sentences of notebook 01, "the cat sat on the mat", and the English dates the model of notebook 06
# reads, "the 21st of November, 2026"), which is why "the", "and", "of" and "on" are not in the list.
ENGLISH = ["with", "is", "are", "was", "were", "has", "this", "that", "which", "from", "your", "correct",
           "expected", "differs", "reference", "pairs", "projections", "scores", "weights", "values", "output",
           "longer", "than", "training", "std", "checked", "matches", "not", "must", "got", "shape", "every",
           "each", "trained", "loaded", "steps", "exact", "match", "heads", "head"]
CODE = re.compile(r"`[^`]*`|\b\w+=\S*|\b\w+\(|\w+[._]\w+(?:[._]\w+)*|\[[^\]]*\]|'[^']*'|\"[^\"]*\"|<[^>]*>")
MONTHS = re.compile(r"\b(January|February|March|April|May|June|July|August|September|October|November|"
                    r"December|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)\b", re.IGNORECASE)


def spanish_outputs():
    for path in sorted((ROOT / "editions" / "es" / "solutions").glob("*.ipynb")):
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            for output in cell.get("outputs", []):
                text = output.get("text") or output.get("data", {}).get("text/plain", "")
                text = "".join(text) if isinstance(text, list) else text
                if text and not text.startswith("<Figure"):
                    yield path.name, cell.get("id"), text


def english_words(text: str) -> list[str]:
    prose = CODE.sub(" ", "\n".join(line for line in text.splitlines() if not MONTHS.search(line)))
    words = re.findall(r"[A-Za-z]+", prose)
    return [w for w in words if w in ENGLISH]


@pytest.mark.parametrize("notebook", sorted(p.name for p in (ROOT / "editions" / "es" / "solutions").glob("*.ipynb")))
def test_no_english_left_in_the_spanish_outputs(notebook):
    found = [(cell, english_words(text), text[:120]) for name, cell, text in spanish_outputs()
             if name == notebook and english_words(text)]
    assert not found, "\n".join(f"cell {cell}: {words} in {text!r}" for cell, words, text in found[:8])


def test_the_leftover_search_finds_english():
    assert english_words("the weights differ: expected 0.5, not 0.4") == ["weights", "expected", "not"]
    assert english_words("pesos de `nn.LayerNorm` y helpers.number(x)") == []


def test_numbers_follow_the_edition():
    assert number(63119496, in_language="en") == "63,119,496"
    assert number(63119496, in_language="es") == "63\u202f119\u202f496"
    assert number(99.6, 2, in_language="es") == "99.60"
    assert number(1234.5, 1, in_language="es") == "1234.5"  # the RAE groups from five digits on
    assert number(12345.5, 1, in_language="es") == "12\u202f345.5"
    assert number(512, in_language="es") == "512"
    for language in ("pt", "vi"):  # Brazil and Vietnam: a point for thousands, a comma for decimals
        assert number(63119496, in_language=language) == "63.119.496"
        assert number(99.6, 2, in_language=language) == "99,60"
        assert number(2000, in_language=language) == "2.000"
    with pytest.raises(ValueError, match="decimals"):
        number(1.0, -1)


@pytest.mark.parametrize("notebook", sorted(p.name for p in (ROOT / "editions" / "es" / "solutions").glob("*.ipynb")))
def test_spanish_outputs_group_thousands_the_spanish_way(notebook):
    """No "63,119,496" in the Spanish edition: numbers go through helpers.number ("63 119 496")."""
    english_grouping = re.compile(r"\b\d{1,3}(?:,\d{3})+\b")
    found = [(cell, english_grouping.search(text).group()) for name, cell, text in spanish_outputs()
             if name == notebook and english_grouping.search(text)]
    assert not found, found[:5]
