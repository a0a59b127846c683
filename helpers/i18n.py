"""The language of what helpers shows a student: English, or an edition's language from
``editions/<language>/po/messages.po`` (Spanish "es", Brazilian Portuguese "pt", Vietnamese "vi").

    set_language("es")              checks, plots and training messages in Spanish from now on
    tr(key, english, **fields)      the text of one message in the current language, formatted
    number(value, decimals=0)       a number as the current language writes it (63,119,496 / 63 119 496)

Every student-facing sentence of ``helpers`` (a check's verdict and hints, a plot's title and axis
labels, what the training cell prints) goes through ``tr``. The English text is written in the
code, at the call, and is the source: ``tfs-translate`` extracts every ``tr("key", "English")``
call and every hint of the exercise registry into ``editions/<language>/po/messages.po``, keyed by
``key`` (for a hint: ``<exercise>:<mistake code>``), where a translator writes the translation.
A translation is used only while its entry still records the English text of the code (its
msgid): when the English changes, the old translation is stale, ``tfs-translate check`` fails,
and until it is reviewed the English text is shown.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

# Every language of the course, with its name in English (tools) and in itself (what a reader sees).
# Adding an edition adds a line here and one in NUMBER_FORMAT (docs/course-authors.md, "Adding a language").
LANGUAGE_NAMES = {"en": ("English", "English"), "es": ("Spanish", "Español"),
                  "pt": ("Portuguese (Brazil)", "Português (Brasil)"), "vi": ("Vietnamese", "Tiếng Việt")}
LANGUAGES = tuple(LANGUAGE_NAMES)
EDITIONS_DIR = Path(__file__).resolve().parent.parent / "editions"
_current = ["en"]
_catalogs: dict[str, dict[str, tuple[str, str]]] = {}


def set_language(language: str) -> None:
    """Show the checks', plots' and training messages in language: "en" (English), "es" (Spanish),
    "pt" (Brazilian Portuguese) or "vi" (Vietnamese)."""
    if language not in LANGUAGES:
        raise ValueError(f"language must be one of {', '.join(repr(x) for x in LANGUAGES)}, got {language!r}")
    _current[0] = language


def get_language() -> str:
    """The language set by set_language ("en" unless changed)."""
    return _current[0]


def catalog(language: str) -> dict[str, tuple[str, str]]:
    """{key: (English msgid, translation)} of the reviewed entries of editions/<language>/po/messages.po."""
    if language not in _catalogs:
        import polib

        path = EDITIONS_DIR / language / "po" / "messages.po"
        entries = polib.pofile(str(path), encoding="utf-8") if path.exists() else []
        _catalogs[language] = {e.msgctxt: (e.msgid, e.msgstr) for e in entries
                               if e.msgctxt and e.msgstr and not e.obsolete and "fuzzy" not in e.flags}
    return _catalogs[language]


def tr(key: str, english: str, /, *, in_language: str | None = None, **fields: Any) -> str:
    """The message `key` in the current language (or in_language), formatted with fields (str.format)
    when fields are given.

    english is the message's source text. A translation whose recorded English differs from it
    (stale) or that is missing falls back to english.
    """
    text = english
    language = in_language or _current[0]
    if language != "en":
        msgid, translation = catalog(language).get(key, ("", ""))
        if msgid == english:
            text = translation
    return text.format(**fields) if fields else text


# How each language writes numbers: (thousands separator, decimal mark, fewest integer digits grouped).
# English: 63,119,496 and 0.5. Spanish (Mexico, as the RAE recommends): a narrow no-break space from five
# digits on (2000, 60 000) and the decimal point. Brazilian Portuguese and Vietnamese: a point for the
# thousands and a comma for the decimals (2.000, 99,60).
NUMBER_FORMAT = {"en": (",", ".", 4), "es": ("\u202f", ".", 5), "pt": (".", ",", 4), "vi": (".", ",", 4)}


def number(value: float, decimals: int = 0, *, in_language: str | None = None) -> str:
    """value with `decimals` digits after the decimal mark, its thousands grouped as the current
    language (or in_language) writes them: number(63119496) is "63,119,496" in English, "63 119 496"
    in Spanish and "63.119.496" in Portuguese and Vietnamese; number(99.6, 2) is "99.60" in English and
    Spanish, "99,60" in Portuguese and Vietnamese; number(2000) is "2000" in Spanish."""
    if isinstance(decimals, bool) or not isinstance(decimals, int) or decimals < 0:
        raise ValueError(f"decimals must be a non-negative integer, got {decimals!r}")
    thousands, mark, fewest = NUMBER_FORMAT.get(in_language or _current[0], NUMBER_FORMAT["en"])
    text = f"{value:,.{decimals}f}"
    if len(f"{abs(value):.{decimals}f}".split(".")[0]) < fewest:
        text = f"{value:.{decimals}f}"
    return text.translate({ord(","): "\0", ord("."): "\1"}).replace("\0", thousands).replace("\1", mark)


def scientific(value: float, digits: int = 1, *, in_language: str | None = None) -> str:
    """value in scientific notation with `digits` digits after the current language's decimal mark:
    scientific(7.6e-06) is "7.6e-06" in English and Spanish, "7,6e-06" in Portuguese and Vietnamese;
    scientific(0) is "0.0e+00"."""
    if isinstance(digits, bool) or not isinstance(digits, int) or digits < 0:
        raise ValueError(f"digits must be a non-negative integer, got {digits!r}")
    mantissa, exponent = f"{value:.{digits}e}".split("e")
    return f"{number(float(mantissa), digits, in_language=in_language)}e{exponent}"


__all__ = ["EDITIONS_DIR", "LANGUAGES", "LANGUAGE_NAMES", "NUMBER_FORMAT", "catalog", "get_language", "number",
           "scientific", "set_language", "tr"]
