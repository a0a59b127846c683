"""What a student of an edition reads is in the edition's language: no English sentence left in the outputs
of its solution notebooks or in its translated helpers messages (editions/<language>/po/messages.po), and
numbers written the edition's way (issue: the Spanish edition as a Mexican instructor would write it).

Each edition joins by adding its word list to ENGLISH (and, while some English code still prints a number
ungrouped, the cell to PENDING_UNGROUPED)."""

import json
import re

import polib
import pytest

from conftest import ROOT

from helpers.i18n import NUMBER_FORMAT, number

# English words that never belong in the prose of an edition, one list per edition language. Code, data and
# names are removed before the search: code spans and calls, quoted text, {fields}, and the English data the
# notebooks print on purpose (the example sentences of notebook 01, "the cat sat on the mat", and the English
# dates the model of notebook 06 reads, "the 21st of November, 2026"), which is why "the", "and", "of" and "on"
# are not in the lists. A word of the edition's own language must not be in its list ("no" is Spanish).
# The Portuguese glossary keeps "scores", "values" and "cross-attention" in English, the Vietnamese one "head" and
# "cross-attention", as their classes say them.
_COMMON = ["with", "is", "are", "was", "were", "has", "this", "that", "which", "from", "your", "correct",
           "expected", "differs", "reference", "pairs", "projection", "projections", "scores", "weights", "values",
           "output", "longer", "than", "training", "train", "valid", "std", "checked", "matches", "not", "must",
           "got", "shape", "every", "each", "trained", "loaded", "steps", "exact", "match", "heads", "head",
           "noun", "verb", "adjective", "masculine", "feminine", "seeks", "recurrent", "convolution", "The",
           "cross", "should", "instead", "missing", "wrong", "only"]
ENGLISH = {"es": _COMMON, "pt": [w for w in _COMMON if w not in ("scores", "values", "cross")],
           "vi": [w for w in _COMMON if w not in ("head", "heads", "cross")]}
EDITIONS = sorted(ENGLISH)

CODE = re.compile(r"`[^`]*`|\{[^}]*\}|\b\w+\(|\b\w+=|\w+[._]\w+(?:[._]\w+)*|\[[^\]]*\]|'[^']*'|\"[^\"]*\"|<[^>]*>")
MONTHS = re.compile(r"\b(January|February|March|April|May|June|July|August|September|October|November|"
                    r"December|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)\b", re.IGNORECASE)

# A number of five digits or more written without grouping ("60000", "60611.5"), outside a formula: not a
# base or a factor ("10000^(2/512)", "10000 * 2*pi"), not part of a name, a decimal tail (after a decimal point,
# or the comma of Portuguese and Vietnamese: "1,036633") or a hex address.
UNGROUPED = re.compile(r"(?<![\w.,^/])\d{5,}(?:[.,]\d+)?(?![\w^]|\s*\*)")
# Cells whose English code prints an ungrouped number the translation cannot reach (only comments and the
# text of displayed strings are translated): (language, notebook, cell id) -> what the English code must do.
# Remove an entry once its cell groups its numbers (a test fails while an entry is no longer needed).
PENDING_UNGROUPED: dict[tuple[str, str, str], str] = {}
# Cells of notebook 07 that print Python's standard library, the text its language model reads, or what the
# model writes after it: English (and code) on purpose, in every edition.
PYTHON_TEXT = {"07_gpt.ipynb": {"lm-text", "lm-samples", "gen-compare", "closing"}}


def solution_notebooks(language: str) -> list[str]:
    return sorted(p.name for p in (ROOT / "editions" / language / "solutions").glob("*.ipynb"))


CASES = [(language, notebook) for language in EDITIONS for notebook in solution_notebooks(language)]


def outputs(language: str, notebook: str):
    """(cell id, text) of every text output of an edition's solution notebook (figures left out)."""
    path = ROOT / "editions" / language / "solutions" / notebook
    for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
        for output in cell.get("outputs", []):
            text = output.get("text") or output.get("data", {}).get("text/plain", "")
            if output.get("output_type") == "error":
                text = f"{output.get('ename', '')}: {output.get('evalue', '')}"
            text = "".join(text) if isinstance(text, list) else text
            if text and not text.startswith("<Figure") and cell.get("id") not in PYTHON_TEXT.get(notebook, ()):
                yield cell.get("id"), text


def english_words(text: str, language: str = "es") -> list[str]:
    prose = CODE.sub(" ", "\n".join(line for line in text.splitlines() if not MONTHS.search(line)))
    words = re.findall(r"[A-Za-z]+", prose)
    return [w for w in words if w in ENGLISH[language]]


def ungrouped_numbers(text: str) -> list[str]:
    """The ungrouped long numbers of text, outside quoted data ('0123456789-' in a vocabulary's repr)."""
    return UNGROUPED.findall(re.sub(r"'[^'\n]*'|\"[^\"\n]*\"", " ", text))


@pytest.mark.parametrize(("language", "notebook"), CASES)
def test_no_english_left_in_the_outputs(language, notebook):
    found = [(cell, english_words(text, language), text[:120]) for cell, text in outputs(language, notebook)
             if english_words(text, language)]
    assert not found, "\n".join(f"cell {cell}: {words} in {text!r}" for cell, words, text in found[:8])


@pytest.mark.parametrize("language", EDITIONS)
def test_no_english_left_in_the_translated_messages(language):
    """Every reviewed translation of messages.po: what the checks, plots and training cells show."""
    path = ROOT / "editions" / language / "po" / "messages.po"
    found = [(e.msgctxt, english_words(e.msgstr, language)) for e in polib.pofile(str(path))
             if e.msgstr and not e.obsolete and english_words(e.msgstr, language)]
    assert not found, "\n".join(f"{key}: {words}" for key, words in found[:10])


def test_the_leftover_search_finds_english():
    assert english_words("the weights differ: expected 0.5, not 0.4") == ["weights", "expected", "not"]
    assert english_words("pesos de `nn.LayerNorm` y helpers.number(x)") == []
    # a keyword's name is code (steps=600), but what follows it is read: the text of a repr is not hidden
    assert english_words("DateDataset(seed=0, train=60000 pairs, valid=1000 pairs)") == ["pairs", "pairs"]
    assert english_words("TrainConfig(steps=600, warmup=200), F.dropout(x, training=self.training)") == []
    assert english_words("train 60000, valid 1000") == ["train", "valid"]
    assert english_words("columnas: noun, verb, adjective, seeks masc.") == ["noun", "verb", "adjective", "seeks"]
    assert english_words("El {expected} de The Annotated Transformer y la cross-attention") == ["The", "cross"]
    assert english_words("the 21st of November, 2026 -> 2026-11-21 (expected)") == []  # English data, on purpose


def test_the_ungrouped_search_finds_long_numbers():
    assert ungrouped_numbers("entrenamiento=60000 pares, validación=1000 pares") == ["60000"]
    assert ungrouped_numbers("longitud de onda 60611.5  (10000 * 2*pi = 62831.9)") == ["60611.5", "62831.9"]
    assert ungrouped_numbers("10000^(2/512), 1/10000, 0.000012345, 0x7f12345678, 2026-11-21") == []
    assert ungrouped_numbers("Vocabulary(14 tokens: <pad> + '0123456789-')") == []
    assert ungrouped_numbers("razão 1,036633; taxa 0,00442; 60611,5") == ["60611,5"]
    assert ungrouped_numbers("60\u202f000 pares, 2000 fechas, 63\u202f119\u202f496 parámetros") == []


@pytest.mark.parametrize(("language", "notebook"), CASES)
def test_long_numbers_are_grouped_in_the_outputs(language, notebook):
    """Numbers of five digits or more that a cell shows are grouped as the edition writes them ("60 000" in
    Spanish, "60.000" in Portuguese): through helpers.number, or in the translated text of a displayed string."""
    found = [(cell, ungrouped_numbers(text)) for cell, text in outputs(language, notebook)
             if ungrouped_numbers(text) and (language, notebook, cell) not in PENDING_UNGROUPED]
    assert not found, found[:5]


def test_pending_ungrouped_cells_still_need_it():
    stale = [key for key in PENDING_UNGROUPED
             if not any(cell == key[2] and ungrouped_numbers(text) for cell, text in outputs(key[0], key[1]))]
    assert not stale, f"these cells group their numbers now: remove them from PENDING_UNGROUPED: {stale}"


def test_numbers_follow_the_edition():
    assert number(63119496, in_language="en") == "63,119,496"
    assert number(63119496, in_language="es") == "63\u202f119\u202f496"
    assert number(99.6, 2, in_language="es") == "99.60"
    assert number(2000, in_language="es") == "2000"  # the RAE groups from five digits on
    assert number(1234.5, 1, in_language="es") == "1234.5"
    assert number(12345.5, 1, in_language="es") == "12\u202f345.5"
    assert number(60000, in_language="es") == "60\u202f000"
    assert number(512, in_language="es") == "512"
    for language in ("pt", "vi"):  # Brazil and Vietnam: a point for thousands, a comma for decimals
        assert number(63119496, in_language=language) == "63.119.496"
        assert number(99.6, 2, in_language=language) == "99,60"
        assert number(2000, in_language=language) == "2.000"
    with pytest.raises(ValueError, match="decimals"):
        number(1.0, -1)


@pytest.mark.parametrize(("language", "notebook"), CASES)
def test_outputs_group_thousands_the_edition_way(language, notebook):
    """No "63,119,496" in an edition: numbers go through helpers.number ("63 119 496" in Spanish). Where the
    edition's decimal mark is a comma (Portuguese, Vietnamese: "0,500"), only two groups or more are English."""
    groups = "{2,}" if NUMBER_FORMAT[language][1] == "," else "+"
    english_grouping = re.compile(rf"\b\d{{1,3}}(?:,\d{{3}}){groups}\b")
    found = [(cell, english_grouping.search(text).group()) for cell, text in outputs(language, notebook)
             if english_grouping.search(text)]
    assert not found, found[:5]
