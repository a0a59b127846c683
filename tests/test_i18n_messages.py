"""What helpers shows a student speaks the language set by helpers.set_language: the checks' verdicts
and hints, the plots' labels and the training messages come from i18n/es/messages.po in Spanish, and
stay exactly the English of the code in English. A stale translation (its English changed in the code)
is never shown: the English is."""

from __future__ import annotations

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")

import helpers  # noqa: E402
from course_tools import pieces, po_files  # noqa: E402
from helpers import i18n  # noqa: E402
from helpers.checks import (check_causal_mask, check_create_position_matrix, check_layer_norm,  # noqa: E402
                            check_softmax, check_split_heads, check_transformer_lr)
from helpers.checks.harness import EXERCISES, GENERIC_MISTAKES  # noqa: E402
from helpers.checks.positional import POSITION_MISTAKES, wrong_position_matrices  # noqa: E402
from helpers.i18n import set_language, tr  # noqa: E402


@pytest.fixture(autouse=True)
def english_afterwards():
    """Every test starts and ends in English, whatever it sets."""
    set_language("en")
    yield
    set_language("en")


def one_line(text: str) -> str:
    """A message as a Verdict shows it: on one line, runs of whitespace as one space."""
    return " ".join(text.split())


def spanish(key: str) -> str:
    """The reviewed Spanish text of a key in i18n/es/messages.po."""
    msgid, translation = i18n.catalog("es")[key]
    assert translation and translation != msgid, f"{key} has no Spanish translation"
    return translation


def sin_cos_swapped(seq_length, embed_size):
    return wrong_position_matrices(seq_length, embed_size)["sin_cos_swapped"]


# ---------------------------------------------------------------------------------------------- (1)
def test_a_known_mistake_of_create_position_matrix_is_explained_in_spanish():
    set_language("es")
    verdict = check_create_position_matrix(sin_cos_swapped)
    assert not verdict and verdict.mistake == "sin_cos_swapped"
    assert verdict.message == one_line(spanish("create_position_matrix:sin_cos_swapped"))
    assert verdict.message.startswith("pusiste cos en las columnas pares")
    assert str(verdict) == f"❌ create_position_matrix: {verdict.message}"


def test_the_same_mistake_in_english_is_the_registry_hint_unchanged():
    verdict = check_create_position_matrix(sin_cos_swapped)
    assert verdict.mistake == "sin_cos_swapped"
    assert verdict.message == one_line(POSITION_MISTAKES["sin_cos_swapped"])


def test_a_correct_create_position_matrix_gets_the_spanish_success_line():
    set_language("es")
    verdict = check_create_position_matrix(helpers.positional_encoding)
    assert verdict
    success = spanish("create_position_matrix:success")
    checked = spanish("create_position_matrix:checked").format(sizes="10x16, 7x6, 50x512")
    assert verdict.message == one_line(f"{success} {checked}")
    set_language("en")
    assert check_create_position_matrix(helpers.positional_encoding).message == (
        "correct! Sine on the even columns, cosine on the odd ones. Matches the reference for sizes "
        "10x16, 7x6, 50x512.")


# ---------------------------------------------------------------------------------------------- (2)
def naive_softmax(x, axis=-1):
    e = np.exp(x)
    return e / e.sum(axis=axis, keepdims=True)


def split_without_transpose(x, num_heads):
    batch, length, d_model = x.shape
    return x.reshape(batch, num_heads, length, d_model // num_heads)


def causal_without_diagonal(size):
    return np.tril(np.ones((size, size), dtype=bool), k=-1)


# one check of each check module: (check, the wrong answer, the key of the hint it gives, its fields)
KNOWN = [
    (check_softmax, naive_softmax, "softmax:softmax_overflows", {}),
    (check_split_heads, split_without_transpose, "split_heads:reshape_without_transpose", {}),
    (check_causal_mask, causal_without_diagonal, "causal_mask:diagonal_masked", {}),
    (check_layer_norm, 42, "layer_norm:not_a_class", {"kind": "int"}),
]


@pytest.mark.parametrize("check, answer, key, fields", KNOWN, ids=[k for _, _, k, _ in KNOWN])
def test_each_check_module_speaks_the_language_set(check, answer, key, fields):
    exercise, code = key.split(":")
    english = EXERCISES[exercise].hint(code, **fields)
    verdict = check(answer)
    assert verdict.mistake == code and verdict.message == one_line(english)
    set_language("es")
    verdict = check(answer)
    expected = spanish(key).format(**fields) if fields else spanish(key)
    assert verdict.mistake == code and verdict.message == one_line(expected)
    assert verdict.message != one_line(english)


def test_a_free_form_mistake_and_a_generic_one_in_both_languages():
    rates = helpers.transformer_lr

    def doubled(step, d_model, warmup):
        return 2 * rates(step, d_model, warmup)

    english = check_transformer_lr(doubled)
    assert english.mistake is None
    assert english.message.startswith("transformer_lr(step=1, d_model=512, warmup=4000) is ")
    assert "the reference gives" in english.message
    set_language("es")
    verdict = check_transformer_lr(doubled)
    assert verdict.message.startswith("transformer_lr(step=1, d_model=512, warmup=4000) vale ")
    assert "la referencia da" in verdict.message and "lrate = d_model^-0.5" in verdict.message
    nothing = check_transformer_lr(lambda step, d_model, warmup: None)
    assert nothing.mistake == "returned_none"
    assert nothing.message == spanish("generic:returned_none").format(
        what="transformer_lr(step=1, d_model=512, warmup=4000)")
    set_language("en")
    assert check_transformer_lr(lambda step, d_model, warmup: None).message == GENERIC_MISTAKES[
        "returned_none"].format(what="transformer_lr(step=1, d_model=512, warmup=4000)")


def test_a_pass_with_an_extra_sentence_is_spanish_throughout():
    set_language("es")
    verdict = check_transformer_lr(helpers.transformer_lr)
    assert verdict
    assert verdict.message == one_line(f"{spanish('transformer_lr:success')} "
                                       f"{spanish('transformer_lr:checked').format(n=30)}")
    set_language("en")
    assert check_transformer_lr(helpers.transformer_lr).message == (
        "correct! A linear warm-up, then a 1/sqrt(step) decay. Checked on 30 combinations of step, d_model and "
        "warmup, with steps during the warm-up, at its end and after it.")


def test_plots_and_the_training_summary_in_both_languages():
    import matplotlib.pyplot as plt

    from helpers.plots import plot_attention
    from helpers.training import Recipe

    weights = np.full((2, 2), 0.5)
    try:
        assert plot_attention(weights).get_title() == "Attention weights"
        set_language("es")
        ax = plot_attention(weights)
        assert (ax.get_title(), ax.get_xlabel(), ax.get_ylabel()) == ("Pesos de atención", "clave", "consulta")
        assert plot_attention(weights, title="").get_title() == ""
    finally:
        plt.close("all")
    mixed = Recipe(origin={"LayerNorm": "yours", "Transformer": "reference"},
                   reasons={"LayerNorm": "ok", "Transformer": "no"})
    lines = mixed.describe().splitlines()
    assert lines[0] == "Se entrena TU código: LayerNorm; de helpers: Transformer."
    assert lines[1].index("LayerNorm") == lines[2].index("Transformer")  # the part names stay aligned
    set_language("en")
    assert mixed.describe().splitlines() == ["Training YOUR code: LayerNorm; from helpers: Transformer.",
                                             "  yours      LayerNorm: ok", "  reference  Transformer: no"]


# ---------------------------------------------------------------------------------------------- (3)
def test_a_stale_translation_falls_back_to_the_english(monkeypatch):
    key = "create_position_matrix:sin_cos_swapped"
    stale = dict(i18n.catalog("es"))
    stale[key] = ("the English this entry translated before the code changed", stale[key][1])
    monkeypatch.setitem(i18n._catalogs, "es", stale)
    set_language("es")
    verdict = check_create_position_matrix(sin_cos_swapped)
    assert verdict.mistake == "sin_cos_swapped"
    assert verdict.message == one_line(POSITION_MISTAKES["sin_cos_swapped"])
    assert check_create_position_matrix(helpers.positional_encoding).message.startswith("¡correcto!")  # the rest
    assert tr(key, POSITION_MISTAKES[key.split(":")[1]]) == POSITION_MISTAKES["sin_cos_swapped"]


def test_a_missing_translation_falls_back_to_the_english(monkeypatch):
    monkeypatch.setitem(i18n._catalogs, "es", {})
    set_language("es")
    assert check_create_position_matrix(sin_cos_swapped).message == one_line(POSITION_MISTAKES["sin_cos_swapped"])


# ---------------------------------------------------------------------------------------------- (4)
def test_an_unknown_language_is_refused_naming_the_argument():
    with pytest.raises(ValueError, match=r"language must be one of 'en', 'es', 'pt', 'vi', got 'fr'"):
        set_language("fr")
    assert i18n.get_language() == "en"


# ---------------------------------------------------------------------------------------------- the catalog
def test_every_message_of_helpers_has_a_reviewed_spanish_translation_with_the_same_fields():
    """All of them, not only those of the notebooks already in the Spanish edition."""
    po = {e.msgctxt: e for e in po_files.load_po(po_files.po_path("es", "messages")) if not e.obsolete}
    problems = []
    for piece in pieces.message_pieces():
        entry = po.get(piece.key)
        if entry is None or not entry.msgstr:
            problems.append(f"{piece.key}: missing")
        elif "fuzzy" in entry.flags or entry.msgid != piece.english:
            problems.append(f"{piece.key}: stale")
        elif po_files.template_fields(entry.msgstr) != po_files.template_fields(piece.english):
            problems.append(f"{piece.key}: fields changed")
    assert not problems, "\n".join(problems)
