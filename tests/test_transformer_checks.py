"""The checks of notebook 05 accept the reference, name each known mistake by its code, and never raise."""

import functools

import pytest
import torch

from helpers.checks import EXERCISES, Verdict, check_decoder_layer, check_encoder_layer, check_greedy_decode, \
    exercises_in
from helpers.checks.transformer import END, MAX_LEN, _cuts, _decoding_model, _decoding_source, wrong_decodings
from helpers.decoding import greedy_decode
from helpers.transformer import DecoderLayer, EncoderLayer

CHECKS = {"encoder_layer": check_encoder_layer, "decoder_layer": check_decoder_layer,
          "greedy_decode": check_greedy_decode}


def verdict(check, candidate, capsys=None):
    result = check(candidate)
    assert isinstance(result, Verdict) and "\n" not in str(result), "a check returns one verdict line"
    if capsys is not None:
        assert capsys.readouterr().out == "", "a check prints nothing"
    return result


def test_registered_for_the_grader():
    assert [e.name for e in exercises_in("05_transformer")] == ["encoder_layer", "decoder_layer", "greedy_decode"]


# ---------------------------------------------------------------------- encoder layer
def encoder(post, pre=None):
    """A student's EncoderLayer whose forward is `post(self, x, mask)` (post-norm) and `pre(...)` (pre-norm)."""
    pre = pre or EncoderLayer.forward

    class Student(EncoderLayer):
        def forward(self, x, src_mask=None):
            return pre(self, x, src_mask) if self.norm_first else post(self, x, src_mask)
    return Student


def attn(s, x, m):
    return s.self_attn(x, x, x, m)


def post_encoder(s, x, m):  # right, without dropout
    x = s.norm1(x + attn(s, x, m))
    return s.norm2(x + s.ff(x))


def pre_encoder(s, x, m):  # right, without dropout
    x = x + attn(s, s.norm1(x), m)
    return x + s.ff(s.norm2(x))


class NotAModule:
    def __init__(self, *args, **kwargs):
        pass


class OtherSubmodules(torch.nn.Module):
    def __init__(self, *args, **kwargs):
        super().__init__()
        self.lin = torch.nn.Linear(2, 2)

    def forward(self, x, *masks):
        return x


class EncoderDropsNormFirst(EncoderLayer):
    def __init__(self, d_model, num_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__(d_model, num_heads, d_ff, dropout)


class DecoderDropsNormFirst(DecoderLayer):
    def __init__(self, d_model, num_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__(d_model, num_heads, d_ff, dropout)


ENCODER_WRONG = [
    ("no_residual_attention", encoder(lambda s, x, m: (lambda h: s.norm2(h + s.ff(h)))(s.norm1(attn(s, x, m))))),
    ("no_residual_ff", encoder(lambda s, x, m: s.norm2(s.ff(s.norm1(x + attn(s, x, m)))))),
    ("no_residuals", encoder(lambda s, x, m: s.norm2(s.ff(s.norm1(attn(s, x, m)))))),
    ("pre_norm_instead_of_post", encoder(pre_encoder)),
    ("norm_before_residual", encoder(lambda s, x, m: (lambda h: h + s.norm2(s.ff(h)))(x + s.norm1(attn(s, x, m))))),
    ("norms_swapped", encoder(lambda s, x, m: (lambda h: s.norm1(h + s.ff(h)))(s.norm2(x + attn(s, x, m))))),
    ("no_feed_forward", encoder(lambda s, x, m: s.norm1(x + attn(s, x, m)))),
    ("no_src_mask", encoder(lambda s, x, m: post_encoder(s, x, None))),
    ("post_norm_instead_of_pre", encoder(EncoderLayer.forward, post_encoder)),
    ("residual_from_normed", encoder(EncoderLayer.forward, lambda s, x, m: (lambda g: g + s.ff(g))(
        s.norm2(s.norm1(x) + attn(s, s.norm1(x), m))))),  # x = norm(x); x = x + sublayer(x)
    ("no_residuals_pre_norm", encoder(EncoderLayer.forward, lambda s, x, m: s.ff(s.norm2(attn(s, s.norm1(x), m))))),
    ("no_src_mask_pre_norm", encoder(EncoderLayer.forward, lambda s, x, m: pre_encoder(s, x, None))),
    ("norms_swapped_pre_norm", encoder(EncoderLayer.forward, lambda s, x, m: (lambda h: h + s.ff(s.norm1(h)))(
        x + attn(s, s.norm2(x), m)))),
    ("returns_input", encoder(lambda s, x, m: x)),
    # the mask reaches only half of the attention: no listed mistake, but padding leaks
    ("padding_leak", encoder(lambda s, x, m: (lambda h: s.norm2(h + s.ff(h)))(
        s.norm1(x + 0.5 * attn(s, x, None) + 0.5 * attn(s, x, m))))),
    ("no_dropout", encoder(post_encoder, pre_encoder)),
    ("not_a_class", None),
    ("not_a_class", 3),
    ("not_a_class", "EncoderLayer"),
    ("not_a_module", NotAModule),
    ("weights_do_not_fit", OtherSubmodules),
    ("norm_first_not_stored", EncoderDropsNormFirst),
]


# ---------------------------------------------------------------------- decoder layer
def decoder(post, pre=None):
    """A student's DecoderLayer whose forward is `post(self, x, memory, tgt_mask, memory_mask)` (post-norm)
    and `pre(...)` (pre-norm)."""
    pre = pre or DecoderLayer.forward

    class Student(DecoderLayer):
        def forward(self, x, memory, tgt_mask=None, memory_mask=None):
            f = pre if self.norm_first else post
            return f(self, x, memory, tgt_mask, memory_mask)
    return Student


def post_decoder(causal=True, kv_from_decoder=False, q_from_memory=False, memory_mask=True, masks_swapped=False,
                 cross_reads_input=False, order_swapped=False, residual=(True, True, True), norm_before_add=False,
                 norms=("norm1", "norm2", "norm3"), feed_forward=True):
    """A post-norm forward (no dropout) with the given bugs."""
    def forward(s, x, memory, tgt_mask, mem_mask):
        if masks_swapped:
            tgt_mask, mem_mask = mem_mask, tgt_mask
        n1, n2, n3 = (getattr(s, n) for n in norms)
        layer_input = x

        def self_attn(y):
            return s.self_attn(y, y, y, tgt_mask if causal else None)

        def cross_attn(y):
            if q_from_memory:
                return s.cross_attn(memory, y, y, mem_mask)
            q = layer_input if cross_reads_input else y
            kv = y if kv_from_decoder else memory
            return s.cross_attn(q, kv, kv, mem_mask if memory_mask else None)

        def sublayer(y, f, norm, keep):
            if norm_before_add:
                return y + norm(f(y))
            return norm((y if keep else 0) + f(y))

        first, second = (cross_attn, self_attn) if order_swapped else (self_attn, cross_attn)
        x = sublayer(x, first, n1, residual[0])
        x = sublayer(x, second, n2, residual[1])
        return sublayer(x, s.ff, n3, residual[2]) if feed_forward else x
    return forward


def pre_decoder(causal=True, kv_from_decoder=False, memory_mask=True, residual=True, residual_from_normed=False,
                norms=("norm1", "norm2", "norm3")):
    """A pre-norm forward (no dropout) with the given bugs."""
    def forward(s, x, memory, tgt_mask, mem_mask):
        n1, n2, n3 = (getattr(s, n) for n in norms)

        def sublayer(y, norm, f):
            h = norm(y)
            if residual_from_normed:
                return h + f(h)
            return y + f(h) if residual else f(h)

        x = sublayer(x, n1, lambda h: s.self_attn(h, h, h, tgt_mask if causal else None))
        x = sublayer(x, n2, lambda h: s.cross_attn(h, h if kv_from_decoder else memory,
                                                   h if kv_from_decoder else memory, mem_mask if memory_mask else None))
        return sublayer(x, n3, s.ff)
    return forward


def future_leak(s, x, memory, tgt_mask, mem_mask):  # every position sees the ones after it
    return DecoderLayer.forward(s, x, memory, tgt_mask, mem_mask) + 0.1 * x.flip(1).cumsum(1).flip(1)


DECODER_WRONG = [
    ("no_causal_mask", decoder(post_decoder(causal=False))),
    ("kv_from_decoder", decoder(post_decoder(kv_from_decoder=True))),
    ("q_from_memory", decoder(post_decoder(q_from_memory=True))),
    ("no_memory_mask", decoder(post_decoder(memory_mask=False))),
    ("masks_swapped", decoder(post_decoder(masks_swapped=True))),
    ("cross_attn_reads_input", decoder(post_decoder(cross_reads_input=True))),
    ("sublayers_out_of_order", decoder(post_decoder(order_swapped=True))),
    ("no_residual_self_attention", decoder(post_decoder(residual=(False, True, True)))),
    ("no_residual_cross_attention", decoder(post_decoder(residual=(True, False, True)))),
    ("no_residual_ff", decoder(post_decoder(residual=(True, True, False)))),
    ("no_residuals", decoder(post_decoder(residual=(False, False, False)))),
    ("pre_norm_instead_of_post", decoder(pre_decoder())),
    ("norm_before_residual", decoder(post_decoder(norm_before_add=True))),
    ("norms_mixed_up", decoder(post_decoder(norms=("norm2", "norm3", "norm1")))),
    ("no_feed_forward", decoder(post_decoder(feed_forward=False))),
    ("post_norm_instead_of_pre", decoder(DecoderLayer.forward, post_decoder())),
    ("no_causal_mask_pre_norm", decoder(DecoderLayer.forward, pre_decoder(causal=False))),
    ("kv_from_decoder_pre_norm", decoder(DecoderLayer.forward, pre_decoder(kv_from_decoder=True))),
    ("residual_from_normed", decoder(DecoderLayer.forward, pre_decoder(residual_from_normed=True))),
    ("no_residuals_pre_norm", decoder(DecoderLayer.forward, pre_decoder(residual=False))),
    ("no_memory_mask_pre_norm", decoder(DecoderLayer.forward, pre_decoder(memory_mask=False))),
    ("norms_mixed_up_pre_norm", decoder(DecoderLayer.forward, pre_decoder(norms=("norm2", "norm3", "norm1")))),
    ("future_leak", decoder(future_leak)),
    ("no_dropout", decoder(post_decoder(), pre_decoder())),
    ("not_a_class", None),
    ("not_a_class", "DecoderLayer"),
    ("not_a_module", NotAModule),
    ("weights_do_not_fit", OtherSubmodules),
    ("norm_first_not_stored", DecoderDropsNormFirst),
]


# ---------------------------------------------------------------------- greedy decoding
def decode_with(position=-1, feed_back=True, src_mask=True, tgt_mask="causal", stop="every_row", keep_start=False,
                steps=None, probabilities=False):
    """A student's greedy_decode with the given bugs."""
    def greedy(model, src, max_len, start_id, end_id):
        mask = model.make_src_mask(src)
        memory = model.encode(src, mask)
        ys = torch.full((src.shape[0], 1), start_id, dtype=torch.long)
        probs = []
        for _ in range(steps or max_len):
            inp = ys if feed_back else ys[:, :1]
            causal = {"causal": model.make_tgt_mask(inp),
                      "all_true": torch.ones(inp.shape[0], 1, inp.shape[1], inp.shape[1], dtype=torch.bool),
                      "padding_only": model.make_src_mask(inp)}[tgt_mask]
            logits = model.decode(inp, memory, mask if src_mask else None, causal)
            next_token = logits[:, position].argmax(-1, keepdim=True)
            probs.append(logits[:, position].softmax(-1).max(-1).values)
            ys = torch.cat([ys, next_token], 1)
            if stop == "every_row" and (ys == end_id).any(dim=1).all():
                break
            if stop == "first_row_next_token" and (next_token == end_id)[0]:
                break
            if stop == "first_row_ys" and ys[0, -1] == end_id:
                break
        if probabilities:
            return torch.stack(probs, 1)
        return ys if keep_start else ys[:, 1:]
    return greedy


def default_tgt_mask(model, src, max_len, start_id, end_id):
    """Right: decode builds the causal mask itself when tgt_mask is left out."""
    src_mask = model.make_src_mask(src)
    memory = model.encode(src, src_mask)
    ys = torch.full((src.shape[0], 1), start_id, dtype=torch.long)
    for _ in range(max_len):
        ys = torch.cat([ys, model.decode(ys, memory, src_mask)[:, -1].argmax(-1, keepdim=True)], 1)
    return ys[:, 1:]


GREEDY_WRONG = [
    ("keeps_start_token", decode_with(keep_start=True)),
    ("keeps_start_token", decode_with(keep_start=True, stop=None)),
    ("more_than_max_len", decode_with(steps=MAX_LEN + 2, stop=None)),
    ("not_token_ids", decode_with(probabilities=True)),
    ("first_position", decode_with(position=0)),
    ("first_position", decode_with(feed_back=False)),  # the same tokens, with a causal decoder
    ("no_src_mask", decode_with(src_mask=False)),
    ("no_causal_mask", decode_with(tgt_mask="all_true")),
    ("no_causal_mask", decode_with(tgt_mask="padding_only")),
    ("stops_at_first_end", decode_with(stop="first_row_next_token")),
    ("stops_at_first_end", decode_with(stop="first_row_ys")),
    ("stops_too_early", decode_with(steps=2)),
]

WRONG = {"encoder_layer": ENCODER_WRONG, "decoder_layer": DECODER_WRONG, "greedy_decode": GREEDY_WRONG}
CASES = [(name, i, code) for name, cases in WRONG.items() for i, (code, _) in enumerate(cases)]


@functools.lru_cache(maxsize=None)
def wrong_verdict(name, i):
    return verdict(CHECKS[name], WRONG[name][i][1])


# ---------------------------------------------------------------------- every known mistake, by its code
@pytest.mark.parametrize("candidate", [EncoderLayer, EncoderLayer(16, 4, 32)])  # an instance: its class is checked
def test_encoder_reference_passes(candidate, capsys):
    v = verdict(check_encoder_layer, candidate, capsys)
    assert v and v.status == "pass" and v.mistake is None, v


def test_decoder_reference_passes(capsys):
    v = verdict(check_decoder_layer, DecoderLayer, capsys)
    assert v and v.status == "pass", v


@pytest.mark.parametrize("candidate", [greedy_decode, decode_with(stop=None), default_tgt_mask],
                         ids=["reference", "never_stops_early", "decode_default_tgt_mask"])
def test_greedy_right_answers_pass(candidate, capsys):
    v = verdict(check_greedy_decode, candidate, capsys)
    assert v and v.status == "pass", v


@pytest.mark.parametrize("name, i, code", CASES, ids=[f"{name}-{code}-{i}" for name, i, code in CASES])
def test_wrong_answer_gets_its_code(name, i, code):
    v = wrong_verdict(name, i)
    assert not v and v.status == "fail" and v.mistake == code, v


@pytest.mark.parametrize("name", list(WRONG))
def test_every_declared_mistake_is_caught_by_a_wrong_answer(name):
    triggered = {wrong_verdict(name, i).mistake for i in range(len(WRONG[name]))}
    assert triggered == set(EXERCISES[name].mistakes)


@pytest.mark.parametrize("name", list(WRONG))
def test_hints_fill_in(name):
    for i in range(len(WRONG[name])):
        v = wrong_verdict(name, i)
        assert "{" not in v.message and v.mistake != "check_error", v


def test_decoding_scenario_is_informative():
    """Some rows end early (row 0 before another one), some never do, and every known mistake changes the result."""
    model, src = _decoding_model(), _decoding_source()
    assert model.num_layers >= 2  # with one layer, decoding without the causal mask gives the same tokens
    with torch.no_grad():
        cut = _cuts(greedy_decode(model, src, MAX_LEN, 1, END).numpy())
    ends = [row[-1] == END for row in cut]
    assert 0 < sum(ends) < len(cut) and ends[0]
    assert any(e and len(row) > len(cut[0]) for e, row in zip(ends, cut))
    for wrong in wrong_decodings(model, src).values():
        assert _cuts(wrong) != cut


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
    v = verdict(check, candidate, capsys)
    assert not v and v.status == "todo" and str(v).startswith("📝"), v


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
        v = verdict(check, candidate, capsys)
        assert not v and v.status in ("fail", "todo") and v.mistake != "check_error", v
        assert str(v).startswith(("❌", "📝")), v


def test_checks_do_not_disturb_the_global_random_state():
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    check_encoder_layer(EncoderLayer)
    check_decoder_layer(DecoderLayer)
    check_greedy_decode(greedy_decode)
    assert torch.equal(torch.rand(3), expected)
