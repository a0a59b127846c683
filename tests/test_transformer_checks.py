"""The checks of notebook 05 accept the reference, catch the mistakes they claim to, and never raise."""

import pytest
import torch

from helpers.checks import EXERCISES, check_decoder_layer, check_encoder_layer, check_greedy_decode
from helpers.checks.transformer import END, MAX_LEN, _cut, _decoding_model, _decoding_source, _wrong_decodings
from helpers.training import greedy_decode
from helpers.transformer import DecoderLayer, EncoderLayer


def verdict(check, candidate, capsys):
    ok = check(candidate)
    out = capsys.readouterr().out.strip()
    assert "\n" not in out, "a check prints exactly one line"
    return ok, out


def test_registered_for_the_grader():
    assert EXERCISES["05_transformer"] == ["encoder_layer", "decoder_layer", "greedy_decode"]


# ---------------------------------------------------------------------- encoder layer
def encoder(post, pre=None):
    """An EncoderLayer whose forward is `post(self, x, mask)` (post-norm) and `pre(...)` (pre-norm)."""
    pre = pre or EncoderLayer.forward

    class Student(EncoderLayer):
        def forward(self, x, src_mask=None):
            return pre(self, x, src_mask) if self.norm_first else post(self, x, src_mask)
    return Student


def attn(s, x, m):
    return s.self_attn(x, x, x, m)


ENCODER_MISTAKES = {
    "missing residual around self-attention":
        encoder(lambda s, x, m: (lambda h: s.norm2(h + s.ff(h)))(s.norm1(attn(s, x, m)))),
    "missing residual around the feed-forward":
        encoder(lambda s, x, m: s.norm2(s.ff(s.norm1(x + attn(s, x, m))))),
    "you wrote pre-norm":
        encoder(lambda s, x, m: (lambda h: h + s.ff(s.norm2(h)))(x + attn(s, s.norm1(x), m))),
    "normalises the SUM":
        encoder(lambda s, x, m: (lambda h: h + s.norm2(s.ff(h)))(x + s.norm1(attn(s, x, m)))),
    "norm1 and norm2 are swapped":
        encoder(lambda s, x, m: (lambda h: s.norm1(h + s.ff(h)))(s.norm2(x + attn(s, x, m)))),
    "feed-forward sub-layer is missing": encoder(lambda s, x, m: s.norm1(x + attn(s, x, m))),
    "src_mask is not passed": encoder(lambda s, x, m: (lambda h: s.norm2(h + s.ff(h)))(s.norm1(x + attn(s, x, None)))),
    "you wrote post-norm, but norm_first=True":
        encoder(EncoderLayer.forward, lambda s, x, m: (lambda h: s.norm2(h + s.ff(h)))(s.norm1(x + attn(s, x, m)))),
    "residual adds the input x itself":
        encoder(EncoderLayer.forward, lambda s, x, m: (lambda g: g + s.ff(g))(
            s.norm2(s.norm1(x) + attn(s, s.norm1(x), m)))),  # x = norm(x); x = x + sublayer(x)
    "apply dropout to each sub-layer": encoder(
        lambda s, x, m: (lambda h: s.norm2(h + s.ff(h)))(s.norm1(x + attn(s, x, m))),
        lambda s, x, m: (lambda h: h + s.ff(s.norm2(h)))(x + attn(s, s.norm1(x), m))),
}


def test_encoder_reference_passes(capsys):
    ok, out = verdict(check_encoder_layer, EncoderLayer, capsys)
    assert ok and out.startswith("✅")


@pytest.mark.parametrize("hint", list(ENCODER_MISTAKES))
def test_encoder_mistakes_get_their_hint(hint, capsys):
    ok, out = verdict(check_encoder_layer, ENCODER_MISTAKES[hint], capsys)
    assert not ok and out.startswith("❌") and hint in out, out


def test_encoder_mask_leak_found_by_behaviour(capsys):
    # the mask is applied to the wrong sub-layer only: no listed mistake, but padding leaks
    leaky = encoder(lambda s, x, m: (lambda h: s.norm2(h + s.ff(h)))(s.norm1(x + 0.5 * attn(s, x, None)
                                                                             + 0.5 * attn(s, x, m))))
    ok, out = verdict(check_encoder_layer, leaky, capsys)
    assert not ok and "PADDED" in out


# ---------------------------------------------------------------------- decoder layer
def decoder(post, pre=None):
    pre = pre or DecoderLayer.forward

    class Student(DecoderLayer):
        def forward(self, x, memory, tgt_mask=None, memory_mask=None):
            f = pre if self.norm_first else post
            return f(self, x, memory, tgt_mask, memory_mask)
    return Student


def post_decoder(self_kv=False, causal=True, q_from_memory=False, mem_mask=True, order_swapped=False,
                 res=(True, True, True), pre_norm=False):
    def forward(s, x, memory, tgt_mask, memory_mask):
        if pre_norm:
            h = s.norm1(x)
            x = x + s.self_attn(h, h, h, tgt_mask)
            x = x + s.cross_attn(s.norm2(x), memory, memory, memory_mask)
            return x + s.ff(s.norm3(x))
        sa = lambda y: s.self_attn(y, y, y, tgt_mask if causal else None)  # noqa: E731
        kv = lambda y: y if self_kv else memory  # noqa: E731
        ca = lambda y: (s.cross_attn(memory, y, y, memory_mask) if q_from_memory else  # noqa: E731
                        s.cross_attn(y, kv(y), kv(y), memory_mask if mem_mask else None))
        first, second = (ca, sa) if order_swapped else (sa, ca)
        x = s.norm1((x if res[0] else 0) + first(x))
        x = s.norm2((x if res[1] else 0) + second(x))
        return s.norm3((x if res[2] else 0) + s.ff(x))
    return forward


DECODER_MISTAKES = {
    "the causal mask is left out": decoder(post_decoder(causal=False)),
    "K and V come from the decoder": decoder(post_decoder(self_kv=True)),
    "the queries come from memory": decoder(post_decoder(q_from_memory=True)),
    "memory_mask is not passed": decoder(post_decoder(mem_mask=False)),
    "sub-layers are in the wrong order": decoder(post_decoder(order_swapped=True)),
    "missing residual around masked self-attention": decoder(post_decoder(res=(False, True, True))),
    "missing residual around cross-attention": decoder(post_decoder(res=(True, False, True))),
    "missing residual around the feed-forward": decoder(post_decoder(res=(True, True, False))),
    "you wrote pre-norm": decoder(post_decoder(pre_norm=True)),
    "you wrote post-norm, but norm_first=True": decoder(DecoderLayer.forward, post_decoder()),
    "causal mask is left out in the pre-norm branch": decoder(
        DecoderLayer.forward,
        lambda s, x, m, t, mm: (lambda h1: (lambda h2: h2 + s.ff(s.norm3(h2)))(
            h1 + s.cross_attn(s.norm2(h1), m, m, mm)))(x + s.self_attn(s.norm1(x), s.norm1(x), s.norm1(x), None))),
    "dropout": decoder(post_decoder(), post_decoder(pre_norm=True)),
}


def test_decoder_reference_passes(capsys):
    ok, out = verdict(check_decoder_layer, DecoderLayer, capsys)
    assert ok and out.startswith("✅")


@pytest.mark.parametrize("hint", list(DECODER_MISTAKES))
def test_decoder_mistakes_get_their_hint(hint, capsys):
    ok, out = verdict(check_decoder_layer, DECODER_MISTAKES[hint], capsys)
    assert not ok and out.startswith("❌") and hint in out, out


def test_decoder_future_leak_found_by_behaviour(capsys):
    leaky = decoder(lambda s, x, m, t, mm: DecoderLayer.forward(s, x, m, t, mm)
                    + 0.1 * x.flip(1).cumsum(1).flip(1))  # every position sees the ones after it
    ok, out = verdict(check_decoder_layer, leaky, capsys)
    assert not ok and "LAST target token" in out


# ---------------------------------------------------------------------- greedy decoding
def decode_with(first_only=False, keep_start=False, no_mask=False, feed_back=True, steps=None):
    def fn(model, src, max_len, start_id, end_id):
        mask = model.make_src_mask(src)
        memory = model.encode(src, mask)
        ys = torch.full((src.shape[0], 1), start_id, dtype=torch.long)
        for _ in range(steps or max_len):
            inp = ys if feed_back else ys[:, :1]
            logits = model.decode(inp, memory, None if no_mask else mask)
            ys = torch.cat([ys, (logits[:, 0] if first_only else logits[:, -1]).argmax(-1, keepdim=True)], 1)
        return ys if keep_start else ys[:, 1:]
    return fn


GREEDY_MISTAKES = {
    "starts with the start token": decode_with(keep_start=True),
    "FIRST position": decode_with(first_only=True),
    "everything generated so far": decode_with(feed_back=False),
    "decode gets no src_mask": decode_with(no_mask=True),
    "more than max_len": decode_with(steps=MAX_LEN + 2),
    "stops too early": decode_with(steps=2),
}


def test_decoding_scenario_is_informative():
    """Some rows end early and some do not, and every listed mistake changes the result."""
    model, src = _decoding_model(), _decoding_source()
    full = greedy_decode(model, src, MAX_LEN, 1, -1).numpy()
    cut = [_cut(r) for r in full]
    assert 0 < sum(c[-1] == END for c in cut) < len(cut)
    for wrong in _wrong_decodings(model, src).values():
        assert [_cut(r) for r in wrong] != cut


def test_greedy_reference_and_no_early_stop_pass(capsys):
    assert verdict(check_greedy_decode, greedy_decode, capsys)[0]
    assert verdict(check_greedy_decode, decode_with(), capsys)[0]  # never stopping early is fine


@pytest.mark.parametrize("hint", list(GREEDY_MISTAKES))
def test_greedy_mistakes_get_their_hint(hint, capsys):
    ok, out = verdict(check_greedy_decode, GREEDY_MISTAKES[hint], capsys)
    assert not ok and out.startswith("❌") and hint in out, out


# ---------------------------------------------------------------------- robustness
def stub(*args, **kwargs):
    raise NotImplementedError()


class StubEncoder(EncoderLayer):
    def forward(self, x, src_mask=None):
        raise NotImplementedError()


class StubDecoder(DecoderLayer):
    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        raise NotImplementedError()


@pytest.mark.parametrize("check, candidate", [(check_encoder_layer, StubEncoder), (check_decoder_layer, StubDecoder),
                                              (check_greedy_decode, stub)])
def test_stubs_are_reported_as_todo(check, candidate, capsys):
    ok, out = verdict(check, candidate, capsys)
    assert not ok and out.startswith("📝") and "not implemented" in out


def returning(value):
    class E(EncoderLayer):
        def forward(self, x, src_mask=None):
            return value(x) if callable(value) else value

    class D(DecoderLayer):
        def forward(self, x, memory, tgt_mask=None, memory_mask=None):
            return value(x) if callable(value) else value
    return E, D


@pytest.mark.parametrize("value", [None, [1, 2], torch.tensor(3.0), lambda x: x * float("nan"), lambda x: x,
                                   lambda x: x[:, :1], lambda x: 1 / 0, lambda x: (x, x)])
def test_odd_results_never_raise(value, capsys):
    enc, dec = returning(value)
    for check, candidate in ((check_encoder_layer, enc), (check_decoder_layer, dec),
                             (check_greedy_decode, lambda *a: value(torch.zeros(6, 3)) if callable(value) else value)):
        ok, out = verdict(check, candidate, capsys)
        assert not ok and out.startswith(("❌", "📝")), out


@pytest.mark.parametrize("candidate", [None, 3, "EncoderLayer", EncoderLayer(16, 4, 32)])
def test_wrong_kind_of_argument(candidate, capsys):
    ok, out = verdict(check_encoder_layer, candidate, capsys)
    assert ok == isinstance(candidate, EncoderLayer)  # an instance is accepted: its class is checked


def test_a_class_with_other_submodules_is_explained(capsys):
    class Other(torch.nn.Module):
        def __init__(self, *args, **kwargs):
            super().__init__()
            self.lin = torch.nn.Linear(2, 2)

        def forward(self, x, src_mask=None):
            return x
    ok, out = verdict(check_encoder_layer, Other, capsys)
    assert not ok and "keep the sub-modules" in out


def test_checks_do_not_disturb_the_global_random_state(capsys):
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    check_encoder_layer(EncoderLayer)
    check_decoder_layer(DecoderLayer)
    check_greedy_decode(greedy_decode)
    capsys.readouterr()
    assert torch.equal(torch.rand(3), expected)
