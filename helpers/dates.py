"""The date-normalisation task of notebook 06: a written date in, its ISO form out.

    "21 November 2026", "Nov 21, 2026", "saturday, november 21, 2026", "21/11/2026",
    "sábado 21 de noviembre de 2026", "sábado, 21 de novembro de 2026",
    "Thứ Bảy, ngày 21 tháng 11 năm 2026"   ->   "2026-11-21"

Everything is generated from a seed with the standard library (no download), character by
character (one token per character).

- Dates run from 1900-01-01 to 2099-12-31. The split is by DATE, not by string: the held-out
  test dates (and the validation dates) never appear in training, in any format.
- The written forms are English, Spanish, Brazilian Portuguese, Vietnamese and numeric: the
  languages of the course's editions. Numeric formats are day-first only (21/11/2026, 21.11.2026,
  21-11-2026), so every input has exactly one reading; month names (English, Spanish, Portuguese)
  and the Vietnamese "ngày ... tháng ..." (day ... month ...) make the other formats unambiguous.
- Source vocabulary (SOURCE_CHARS, 83 tokens): <pad>, <unk>, space , . / -, the digits, a-z,
  A-Z, the Spanish letters á é í ó ú ñ, the Portuguese ç and the Vietnamese à ă ả ậ ủ ư ứ of the
  weekday names and of "ngày" and "năm". Any other character becomes <unk>.
- Target vocabulary (TARGET_CHARS, 14 tokens): <pad>, <s>, </s>, the digits and "-".
  A target is always 10 characters ("YYYY-MM-DD") followed by </s>.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import random
from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence

import torch

from .i18n import tr
from .validation import pairs as _pairs
from .validation import positive_int
from .validation import texts as _texts

PAD, UNK = "<pad>", "<unk>"
BOS, EOS = "<s>", "</s>"
SOURCE_CHARS = " ,./-0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZáéíóúñçàăảậủưứ"
TARGET_CHARS = "0123456789-"
FIRST_DATE = dt.date(1900, 1, 1)
LAST_DATE = dt.date(2099, 12, 31)
TARGET_LENGTH = 10  # "YYYY-MM-DD"

MONTHS_EN = ["January", "February", "March", "April", "May", "June", "July", "August",
             "September", "October", "November", "December"]
DAYS_EN = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
MONTHS_ES = ["enero", "febrero", "marzo", "abril", "mayo", "junio", "julio", "agosto",
             "septiembre", "octubre", "noviembre", "diciembre"]
MONTHS_ES_SHORT = ["ene", "feb", "mar", "abr", "may", "jun", "jul", "ago", "sep", "oct", "nov", "dic"]
DAYS_ES = ["lunes", "martes", "miércoles", "jueves", "viernes", "sábado", "domingo"]
MONTHS_PT = ["janeiro", "fevereiro", "março", "abril", "maio", "junho", "julho", "agosto", "setembro", "outubro",
             "novembro", "dezembro"]
DAYS_PT = ["segunda-feira", "terça-feira", "quarta-feira", "quinta-feira", "sexta-feira", "sábado", "domingo"]
DAYS_VI = ["Thứ Hai", "Thứ Ba", "Thứ Tư", "Thứ Năm", "Thứ Sáu", "Thứ Bảy", "Chủ Nhật"]  # Monday .. Sunday


class Vocabulary:
    """Maps characters to token ids and back. Ids 0.. are the special tokens, then the characters.

    encode(text) -> list of ids (unknown characters -> <unk> when the vocabulary has one);
    decode(ids) -> text, stopping at </s> and skipping the special tokens.
    """

    def __init__(self, chars: str, specials: Sequence[str]):
        if len(set(chars)) != len(chars):
            raise ValueError("chars must not repeat a character")
        self.specials = list(specials)
        self.itos = self.specials + list(chars)
        self.stoi = {token: i for i, token in enumerate(self.itos)}
        self.pad_id = self.stoi[PAD]
        self.unk_id = self.stoi.get(UNK)
        self.bos_id = self.stoi.get(BOS)
        self.eos_id = self.stoi.get(EOS)

    def __len__(self) -> int:
        return len(self.itos)

    def __repr__(self) -> str:
        characters = "".join(self.itos[len(self.specials):])
        return f"Vocabulary({len(self)} tokens: {' '.join(self.specials)} + {characters!r})"

    def encode(self, text: str) -> list[int]:
        if not isinstance(text, str):
            raise ValueError(f"text must be a string, got {type(text).__name__}")
        ids = []
        for ch in text:
            if ch in self.stoi and ch not in self.specials:
                ids.append(self.stoi[ch])
            elif self.unk_id is not None:
                ids.append(self.unk_id)
            else:
                raise ValueError(f"text contains {ch!r}, which is not in this vocabulary")
        return ids

    def decode(self, ids: Iterable[int]) -> str:
        out = []
        for i in ids:
            i = int(i)
            if i == self.eos_id:
                break
            if 0 <= i < len(self.itos) and i >= len(self.specials):
                out.append(self.itos[i])
        return "".join(out)


SOURCE_VOCAB = Vocabulary(SOURCE_CHARS, [PAD, UNK])
TARGET_VOCAB = Vocabulary(TARGET_CHARS, [PAD, BOS, EOS])


def _ordinal(day: int) -> str:
    if 11 <= day % 100 <= 13:
        return f"{day}th"
    return f"{day}{ {1: 'st', 2: 'nd', 3: 'rd'}.get(day % 10, 'th')}"


def _formats() -> list[tuple[str, str, Callable[[dt.date, bool], str]]]:
    """(name, language, function(date, zero_pad) -> text) for every written form of a date."""
    def d(x: dt.date, z: bool) -> str:
        return f"{x.day:02d}" if z else str(x.day)

    def m(x: dt.date, z: bool) -> str:
        return f"{x.month:02d}" if z else str(x.month)

    me = lambda x: MONTHS_EN[x.month - 1]  # noqa: E731
    de = lambda x: DAYS_EN[x.weekday()]  # noqa: E731
    ms = lambda x: MONTHS_ES[x.month - 1]  # noqa: E731
    ds = lambda x: DAYS_ES[x.weekday()]  # noqa: E731
    mp = lambda x: MONTHS_PT[x.month - 1]  # noqa: E731
    dp = lambda x: DAYS_PT[x.weekday()]  # noqa: E731
    dv = lambda x: DAYS_VI[x.weekday()]  # noqa: E731
    y = lambda x: f"{x.year:04d}"  # noqa: E731
    return [
        ("21 November 2026", "en", lambda x, z: f"{d(x, z)} {me(x)} {y(x)}"),
        ("21 Nov 2026", "en", lambda x, z: f"{d(x, z)} {me(x)[:3]} {y(x)}"),
        ("21 NOV 2026", "en", lambda x, z: f"{d(x, z)} {me(x)[:3].upper()} {y(x)}"),
        ("21-Nov-2026", "en", lambda x, z: f"{d(x, z)}-{me(x)[:3]}-{y(x)}"),
        ("November 21, 2026", "en", lambda x, z: f"{me(x)} {d(x, z)}, {y(x)}"),
        ("Nov 21, 2026", "en", lambda x, z: f"{me(x)[:3]} {d(x, z)}, {y(x)}"),
        ("Nov. 21, 2026", "en", lambda x, z: f"{me(x)[:3]}. {d(x, z)}, {y(x)}"),
        ("November 21st, 2026", "en", lambda x, z: f"{me(x)} {_ordinal(x.day)}, {y(x)}"),
        ("21st November 2026", "en", lambda x, z: f"{_ordinal(x.day)} {me(x)} {y(x)}"),
        ("the 21st of November, 2026", "en", lambda x, z: f"the {_ordinal(x.day)} of {me(x)}, {y(x)}"),
        ("Saturday, November 21, 2026", "en", lambda x, z: f"{de(x)}, {me(x)} {d(x, z)}, {y(x)}"),
        ("saturday, november 21, 2026", "en", lambda x, z: f"{de(x)}, {me(x)} {d(x, z)}, {y(x)}".lower()),
        ("Saturday 21 November 2026", "en", lambda x, z: f"{de(x)} {d(x, z)} {me(x)} {y(x)}"),
        ("Sat, 21 Nov 2026", "en", lambda x, z: f"{de(x)[:3]}, {d(x, z)} {me(x)[:3]} {y(x)}"),
        ("november 21 2026", "en", lambda x, z: f"{me(x).lower()} {d(x, z)} {y(x)}"),
        ("21 de noviembre de 2026", "es", lambda x, z: f"{d(x, z)} de {ms(x)} de {y(x)}"),
        ("21 de Noviembre de 2026", "es", lambda x, z: f"{d(x, z)} de {ms(x).capitalize()} de {y(x)}"),
        ("sábado 21 de noviembre de 2026", "es", lambda x, z: f"{ds(x)} {d(x, z)} de {ms(x)} de {y(x)}"),
        ("Sábado, 21 de noviembre de 2026", "es", lambda x, z: f"{ds(x).capitalize()}, {d(x, z)} de {ms(x)} de {y(x)}"),
        ("21 nov 2026", "es", lambda x, z: f"{d(x, z)} {MONTHS_ES_SHORT[x.month - 1]} {y(x)}"),
        ("21 nov. 2026", "es", lambda x, z: f"{d(x, z)} {MONTHS_ES_SHORT[x.month - 1]}. {y(x)}"),
        ("21-nov-2026", "es", lambda x, z: f"{d(x, z)}-{MONTHS_ES_SHORT[x.month - 1]}-{y(x)}"),
        ("21 noviembre 2026", "es", lambda x, z: f"{d(x, z)} {ms(x)} {y(x)}"),
        ("21 de novembro de 2026", "pt", lambda x, z: f"{d(x, z)} de {mp(x)} de {y(x)}"),
        ("sábado, 21 de novembro de 2026", "pt", lambda x, z: f"{dp(x)}, {d(x, z)} de {mp(x)} de {y(x)}"),
        ("21 de nov. de 2026", "pt", lambda x, z: f"{d(x, z)} de {mp(x)[:3]}. de {y(x)}"),
        ("ngày 21 tháng 11 năm 2026", "vi", lambda x, z: f"ngày {d(x, z)} tháng {m(x, z)} năm {y(x)}"),
        ("Thứ Bảy, ngày 21 tháng 11 năm 2026", "vi",
         lambda x, z: f"{dv(x)}, ngày {d(x, z)} tháng {m(x, z)} năm {y(x)}"),
        ("21 tháng 11, 2026", "vi", lambda x, z: f"{d(x, z)} tháng {m(x, z)}, {y(x)}"),
        ("ngày 21/11/2026", "vi", lambda x, z: f"ngày {d(x, z)}/{m(x, z)}/{y(x)}"),
        ("21/11/2026", "numeric", lambda x, z: f"{d(x, z)}/{m(x, z)}/{y(x)}"),
        ("21.11.2026", "numeric", lambda x, z: f"{d(x, z)}.{m(x, z)}.{y(x)}"),
        ("21-11-2026", "numeric", lambda x, z: f"{d(x, z)}-{m(x, z)}-{y(x)}"),
        ("21 11 2026", "numeric", lambda x, z: f"{d(x, z)} {m(x, z)} {y(x)}"),
        ("2026-11-21", "numeric", lambda x, z: x.isoformat()),
    ]


FORMATS = _formats()
FORMAT_NAMES = [name for name, _, _ in FORMATS]


def format_date(date: dt.date, fmt: int | str, zero_pad: bool = False) -> str:
    """Write `date` in one of the FORMATS, chosen by index or by its example name.

    zero_pad writes days (and numeric months) below 10 with a leading zero: "01/02/2026".
    """
    if isinstance(fmt, str):
        if fmt not in FORMAT_NAMES:
            raise ValueError(f"fmt must be one of FORMAT_NAMES, got {fmt!r}")
        fmt = FORMAT_NAMES.index(fmt)
    if isinstance(fmt, bool) or not isinstance(fmt, int) or not 0 <= fmt < len(FORMATS):
        raise ValueError(f"fmt must be an index in [0, {len(FORMATS)}) or a format name, got {fmt!r}")
    if not isinstance(date, dt.date):
        raise ValueError(f"date must be a datetime.date, got {type(date).__name__}")
    return FORMATS[fmt][2](date, bool(zero_pad))


def format_of(source: str, target: str) -> str:
    """The name of the format (one of FORMAT_NAMES) in which source writes the ISO date target.

    format_of("21/11/2026", "2026-11-21") == "21/11/2026"; format_of("Nov 21, 2026", ...) == "Nov 21, 2026".
    """
    try:
        date = dt.date.fromisoformat(target)
    except (TypeError, ValueError):
        raise ValueError(f"target must be an ISO date 'YYYY-MM-DD', got {target!r}") from None
    for index, name in enumerate(FORMAT_NAMES):
        if source in (format_date(date, index), format_date(date, index, zero_pad=True)):
            return name
    raise ValueError(f"source {source!r} is not {target} written in any of the FORMATS")


def language_label(language: str) -> str:
    """How a table names the language of a form of FORMATS: its code ("en", "es", "pt", "vi") as it is, and
    "numeric" in the language of the messages (set_language): "numérico" in Spanish."""
    if language not in {lang for _, lang, _ in FORMATS}:
        raise ValueError(f"language must be one of the languages of FORMATS, got {language!r}")
    return tr("dates:numeric", "numeric") if language == "numeric" else language


def random_written_date(date: dt.date, rng: random.Random) -> str:
    """One written form of `date`: a random format, zero-padded half of the time."""
    return format_date(date, rng.randrange(len(FORMATS)), zero_pad=rng.random() < 0.5)


@dataclass
class DateDataset:
    """Pairs (written date, ISO date) split by date. Build it with make_date_dataset()."""

    train: list[tuple[str, str]]
    valid: list[tuple[str, str]]
    test: list[tuple[str, str]]
    seed: int
    test_dates: list[dt.date] = field(repr=False, default_factory=list)

    def __post_init__(self) -> None:
        for name in ("train", "valid", "test"):
            setattr(self, name, _pairs(getattr(self, name), name))

    def fingerprint(self) -> str:
        """A short hash of every pair, used to key the checkpoint cache."""
        h = hashlib.sha256()
        for split in (self.train, self.valid, self.test):
            for source, target in split:
                h.update(source.encode("utf-8") + b"\x00" + target.encode("utf-8") + b"\x01")
            h.update(b"\x02")
        return h.hexdigest()[:16]

    def __repr__(self) -> str:
        from .i18n import number  # the counts as the student's language writes them: 60,000 / 60 000

        return tr("dates:dataset_repr", "DateDataset(seed={seed}, train={train} pairs, valid={valid} pairs, "
                  "test={test} pairs)", seed=self.seed, train=number(len(self.train)),
                  valid=number(len(self.valid)), test=number(len(self.test)))


def make_date_dataset(n_train: int = 60_000, n_valid: int = 1_000, n_test: int = 2_000,
                      seed: int = 0) -> DateDataset:
    """Generate the data set deterministically from `seed` (standard library only).

    All dates from FIRST_DATE to LAST_DATE are shuffled; the first n_test become the held-out
    test set, the next n_valid the validation set, the rest the training dates. Each test and
    validation date is written once, in a random format; n_train training pairs are drawn from
    the training dates (with replacement), each in a random format.
    """
    n_train = positive_int(n_train, "n_train")
    n_valid = positive_int(n_valid, "n_valid")
    n_test = positive_int(n_test, "n_test")
    rng = random.Random(seed)
    first = FIRST_DATE.toordinal()
    days = list(range(first, LAST_DATE.toordinal() + 1))
    if n_test + n_valid >= len(days):
        raise ValueError(f"n_test + n_valid must leave training dates (there are {len(days)} dates)")
    rng.shuffle(days)
    test_days, valid_days, train_days = days[:n_test], days[n_test:n_test + n_valid], days[n_test + n_valid:]

    def pairs(ordinals: Sequence[int]) -> list[tuple[str, str]]:
        out = []
        for o in ordinals:
            date = dt.date.fromordinal(o)
            out.append((random_written_date(date, rng), date.isoformat()))
        return out

    test = pairs(test_days)
    valid = pairs(valid_days)
    train = pairs([rng.choice(train_days) for _ in range(n_train)])
    return DateDataset(train=train, valid=valid, test=test, seed=seed,
                       test_dates=[dt.date.fromordinal(o) for o in test_days])


def encode_sources(texts: Sequence[str], vocab: Vocabulary = SOURCE_VOCAB) -> torch.Tensor:
    """Written dates -> source ids (batch, L_src), right-padded with vocab.pad_id."""
    ids = [vocab.encode(t) for t in _texts(texts, "texts")]
    length = max([len(i) for i in ids] + [1])
    out = torch.full((len(ids), length), vocab.pad_id, dtype=torch.long)
    for row, seq in enumerate(ids):
        out[row, :len(seq)] = torch.tensor(seq, dtype=torch.long)
    return out


def encode_targets(texts: Sequence[str], vocab: Vocabulary = TARGET_VOCAB) -> torch.Tensor:
    """ISO dates -> target ids (batch, 1 + L + 1): <s>, the characters, </s>, right-padded.

    The decoder reads tgt[:, :-1] and learns to predict tgt[:, 1:] (teacher forcing).
    """
    ids = [[vocab.bos_id] + vocab.encode(t) + [vocab.eos_id] for t in _texts(texts, "texts")]
    length = max(len(i) for i in ids)
    out = torch.full((len(ids), length), vocab.pad_id, dtype=torch.long)
    for row, seq in enumerate(ids):
        out[row, :len(seq)] = torch.tensor(seq, dtype=torch.long)
    return out


def decode_targets(ids: torch.Tensor, vocab: Vocabulary = TARGET_VOCAB) -> list[str]:
    """Generated ids (batch, L), without the start token -> strings, each cut at </s>."""
    return [vocab.decode(row.tolist()) for row in ids]


__all__ = ["BOS", "EOS", "FIRST_DATE", "FORMATS", "FORMAT_NAMES", "LAST_DATE", "PAD", "SOURCE_CHARS",
           "SOURCE_VOCAB", "TARGET_CHARS", "TARGET_LENGTH", "TARGET_VOCAB", "UNK", "DateDataset", "Vocabulary",
           "decode_targets", "encode_sources", "encode_targets", "format_date", "format_of", "language_label",
           "make_date_dataset", "random_written_date"]
