"""The language of what helpers shows a student: English, or Spanish from ``i18n/es/messages.po``.

    set_language("es")              checks, plots and training messages in Spanish from now on
    tr(key, english, **fields)      the text of one message in the current language, formatted
    number(value, decimals=0)       a number as the current language writes it (63,119,496 / 63 119 496)

Every student-facing sentence of ``helpers`` (a check's verdict and hints, a plot's title and axis
labels, what the training cell prints) goes through ``tr``. The English text is written in the
code, at the call, and is the source: ``tfs-translate`` extracts every ``tr("key", "English")``
call and every hint of the exercise registry into ``i18n/<language>/messages.po``, keyed by
``key`` (for a hint: ``<exercise>:<mistake code>``), where a translator writes the translation.
A translation is used only while its entry still records the English text of the code (its
msgid): when the English changes, the old translation is stale, ``tfs-translate check`` fails,
and until it is reviewed the English text is shown.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

LANGUAGES = ("en", "es")
CATALOG_DIR = Path(__file__).resolve().parent.parent / "i18n"
_current = ["en"]
_catalogs: dict[str, dict[str, tuple[str, str]]] = {}


def set_language(language: str) -> None:
    """Show the checks', plots' and training messages in language: "en" (English) or "es" (Spanish)."""
    if language not in LANGUAGES:
        raise ValueError(f"language must be one of {', '.join(repr(x) for x in LANGUAGES)}, got {language!r}")
    _current[0] = language


def get_language() -> str:
    """The language set by set_language ("en" unless changed)."""
    return _current[0]


def catalog(language: str) -> dict[str, tuple[str, str]]:
    """{key: (English msgid, translation)} of the reviewed entries of i18n/<language>/messages.po."""
    if language not in _catalogs:
        import polib

        path = CATALOG_DIR / language / "messages.po"
        entries = polib.pofile(str(path)) if path.exists() else []
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


# How each language groups thousands and marks decimals: (thousands separator, decimal mark).
# Spanish (Mexico) groups with a narrow no-break space and keeps the decimal point (60 000, 0.5).
NUMBER_FORMAT = {"en": (",", "."), "es": ("\u202f", ".")}


def number(value: float, decimals: int = 0, *, in_language: str | None = None) -> str:
    """value with `decimals` digits after the decimal mark, its thousands grouped as the current
    language (or in_language) writes them: number(63119496) is "63,119,496" in English and
    "63 119 496" in Spanish; number(99.6, 2) is "99.60" in both."""
    if isinstance(decimals, bool) or not isinstance(decimals, int) or decimals < 0:
        raise ValueError(f"decimals must be a non-negative integer, got {decimals!r}")
    thousands, mark = NUMBER_FORMAT.get(in_language or _current[0], NUMBER_FORMAT["en"])
    text = f"{value:,.{decimals}f}"
    return text.translate({ord(","): "\0", ord("."): "\1"}).replace("\0", thousands).replace("\1", mark)


__all__ = ["LANGUAGES", "NUMBER_FORMAT", "catalog", "get_language", "number", "set_language", "tr"]
