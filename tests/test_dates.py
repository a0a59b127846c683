"""The date-normalisation data set: deterministic, split by date, unambiguous, within its vocabulary."""

import datetime as dt
import re

import pytest
import torch

from helpers.dates import (FORMAT_NAMES, FORMATS, SOURCE_CHARS, SOURCE_VOCAB, TARGET_VOCAB, decode_targets,
                           encode_sources, encode_targets, format_date, make_date_dataset)
from helpers.training import ShuffledBatches

EXAMPLE = dt.date(2026, 11, 21)  # a Saturday


@pytest.fixture(scope="module")
def small():
    return make_date_dataset(n_train=3000, n_valid=300, n_test=500, seed=0)


def test_every_format_writes_its_example():
    for index, name in enumerate(FORMAT_NAMES):
        assert format_date(EXAMPLE, index) == name
        assert format_date(EXAMPLE, name) == name


def test_the_issue_examples_are_formats():
    for text in ["21 November 2026", "Nov 21, 2026", "saturday, november 21, 2026", "21/11/2026",
                 "21 de noviembre de 2026", "sábado 21 de noviembre de 2026"]:
        assert text in FORMAT_NAMES


def test_weekdays_and_padding():
    assert format_date(dt.date(2024, 2, 28), "sábado 21 de noviembre de 2026") == "miércoles 28 de febrero de 2024"
    assert format_date(dt.date(2024, 3, 4), "21/11/2026") == "4/3/2024"
    assert format_date(dt.date(2024, 3, 4), "21/11/2026", zero_pad=True) == "04/03/2024"
    assert format_date(dt.date(2024, 3, 2), "November 21st, 2026") == "March 2nd, 2024"
    assert format_date(dt.date(2024, 3, 13), "21st November 2026") == "13th March 2024"
    assert format_date(dt.date(1905, 1, 1), "2026-11-21") == "1905-01-01"


def test_numeric_formats_are_day_first():
    date = dt.date(2030, 2, 7)
    for name in ("21/11/2026", "21.11.2026", "21-11-2026", "21 11 2026"):
        text = format_date(date, name)
        day, month, year = (int(x) for x in re.split(r"[/. -]", text))
        assert (day, month, year) == (7, 2, 2030)


def test_deterministic_from_the_seed(small):
    again = make_date_dataset(n_train=3000, n_valid=300, n_test=500, seed=0)
    other = make_date_dataset(n_train=3000, n_valid=300, n_test=500, seed=1)
    assert again.train == small.train and again.test == small.test
    assert again.fingerprint() == small.fingerprint() != other.fingerprint()


def test_split_is_by_date(small):
    train = {t for _, t in small.train}
    valid = {t for _, t in small.valid}
    test = {t for _, t in small.test}
    assert len(test) == 500 and len(valid) == 300
    assert not train & test and not train & valid and not valid & test


def test_targets_are_iso_dates_of_the_sources(small):
    for source, target in small.test[:200] + small.train[:200]:
        date = dt.date.fromisoformat(target)
        assert any(source in (format_date(date, i), format_date(date, i, True)) for i in range(len(FORMATS)))


def test_sources_stay_in_the_vocabulary(small):
    used = set("".join(s for s, _ in small.train))
    assert used <= set(SOURCE_CHARS)
    assert len(SOURCE_VOCAB) == 83 and len(TARGET_VOCAB) == 14


def test_every_language_of_the_course_writes_dates_and_every_weekday_and_month_fits_the_vocabulary():
    """The model reads the dates of every edition: English, Spanish, Brazilian Portuguese, Vietnamese."""
    assert {language for _, language, _ in FORMATS} == {"en", "es", "pt", "vi", "numeric"}
    days = [dt.date(2026, month, day) for month in range(1, 13) for day in (1, 2, 3, 4, 5, 6, 7)]
    for index in range(len(FORMATS)):
        for date in days:
            assert set(format_date(date, index)) <= set(SOURCE_CHARS), format_date(date, index)
    assert format_date(dt.date(2026, 11, 21), "sábado, 21 de novembro de 2026") == "sábado, 21 de novembro de 2026"
    assert format_date(dt.date(2026, 3, 2), "Thứ Bảy, ngày 21 tháng 11 năm 2026") == "Thứ Hai, ngày 2 tháng 3 năm 2026"


def test_vocabulary_round_trip_and_unknown_characters():
    ids = SOURCE_VOCAB.encode("21 de Nov. 2026")
    assert SOURCE_VOCAB.decode(ids) == "21 de Nov. 2026"
    assert SOURCE_VOCAB.encode("21€")[-1] == SOURCE_VOCAB.unk_id
    with pytest.raises(ValueError, match="not in this vocabulary"):
        TARGET_VOCAB.encode("2026/11/21")


def test_encoding_shapes():
    src = encode_sources(["1/2/2026", "Saturday 21 November 2026"])
    assert src.shape == (2, 25) and src[0, 8:].eq(SOURCE_VOCAB.pad_id).all()
    tgt = encode_targets(["2026-11-21", "1999-01-02"])
    assert tgt.shape == (2, 12)
    assert tgt[:, 0].eq(TARGET_VOCAB.bos_id).all() and tgt[:, -1].eq(TARGET_VOCAB.eos_id).all()
    assert decode_targets(tgt[:, 1:]) == ["2026-11-21", "1999-01-02"]


def test_shuffled_batches_are_seeded_mixed_and_trimmed(small):
    a = ShuffledBatches(small.train, 128, seed=3).epoch()
    b = ShuffledBatches(small.train, 128, seed=3).epoch()
    c = ShuffledBatches(small.train, 128, seed=4).epoch()
    assert all(torch.equal(x[0], y[0]) for x, y in zip(a, b))
    assert not all(torch.equal(x[0], y[0]) for x, y in zip(a, c))
    assert sum(len(s) for s, _ in a) == len(small.train)
    for src, _ in a:  # trimmed to the batch's longest source, which has no padding at its end
        assert src[:, -1].ne(0).any()
    lengths = [(s != 0).sum(dim=1).float() for s, _ in a]
    assert min(float(x.std()) for x in lengths) > 1.0, "each batch mixes short and long formats"


@pytest.mark.parametrize("kwargs, name", [(dict(n_train=0), "n_train"), (dict(n_train=-1), "n_train"),
                                          (dict(n_test=-1), "n_test"),
                                          (dict(n_test=80000), "n_test")])
def test_bad_arguments(kwargs, name):
    with pytest.raises(ValueError, match=name):
        make_date_dataset(**kwargs)


def test_bad_format():
    with pytest.raises(ValueError, match="fmt"):
        format_date(EXAMPLE, 99)
    with pytest.raises(ValueError, match="date"):
        format_date("2026-11-21", 0)


def test_notebook_06_states_the_data_sets_counts():
    """Section 1 of notebook 06 counts the written forms, by language, and the source tokens as this module does."""
    import json
    from collections import Counter

    from conftest import ROOT

    cells = json.loads((ROOT / "solutions" / "06_training.ipynb").read_text(encoding="utf-8"))["cells"]
    prose = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    by_language = Counter(language for _, language, _ in FORMATS)
    names = {"en": "English", "es": "Spanish", "pt": "Portuguese", "vi": "Vietnamese", "numeric": "numeric"}
    counted = re.search(r"one of (\d+) written forms \(([^)]*)\)", re.sub(r"\s+", " ", prose))
    assert counted and int(counted.group(1)) == len(FORMATS)
    assert {names[k]: v for k, v in by_language.items()} == {
        word: int(n) for n, word in re.findall(r"(\d+) (\w+)", counted.group(2))}
    assert f"{len(FORMATS)} ways of writing a date" in prose
    assert f"Source vocabulary ({len(SOURCE_VOCAB)} tokens)" in prose
    assert not re.search(r"\b(28|75)\b (ways|written forms|formats|forms|tokens)", prose)
    for letter in SOURCE_CHARS[SOURCE_CHARS.index("Z") + 1:]:  # every accented letter is named
        assert f"`{letter}" in prose or f" {letter}`" in prose or f" {letter} " in prose, letter


def test_a_tables_language_column_names_the_numeric_forms_in_the_language_of_the_messages():
    from helpers.dates import language_label
    from helpers.i18n import set_language

    assert [language_label(code) for code in ("en", "es", "pt", "vi", "numeric")] == ["en", "es", "pt", "vi", "numeric"]
    try:
        for language, word in (("es", "numérico"), ("pt", "numérico"), ("vi", "dạng số")):
            set_language(language)
            assert language_label("numeric") == word and language_label("es") == "es"
    finally:
        set_language("en")
    with pytest.raises(ValueError, match="language must be one of"):
        language_label("fr")
