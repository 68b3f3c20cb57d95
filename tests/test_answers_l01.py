"""Lesson 01's exercise checks accept the right answer and reject the typical wrong ones."""

import pytest
import torch

from fp16lab.course.answers import WrongAnswer, l01
from fp16lab.numerics import cast_stats

RANGES = {"pixel values": 256, "ImageNet labels": 1000, "positions in a 4096-token context": 4096,
          "GPT-2 token ids": 50257}
RIGHT = {"pixel values": "fp16", "ImageNet labels": "fp16", "positions in a 4096-token context": "fp32",
         "GPT-2 token ids": "fp32"}


def _smallest(count):
    """The right answer, by PyTorch's own round trip."""
    ints = torch.arange(count, dtype=torch.float64)
    return next(f for f, d in (("fp16", torch.float16), ("bf16", torch.bfloat16), ("fp32", torch.float32))
                if torch.equal(ints.to(d).double(), ints))


def test_storage(capsys):
    assert {k: _smallest(n) for k, n in RANGES.items()} == RIGHT
    l01.check_storage(dict(RIGHT), _smallest)
    assert "✓" in capsys.readouterr().out
    def fits_range(n):                                                         # 50256 < 65504, so fp16?
        return "fp16" if n - 1 <= 65504 else "fp32"

    def no_implicit_bit(n):
        return "fp16" if n - 1 <= 2**10 else ("bf16" if n - 1 <= 2**7 else "fp32")

    def largest_only(n):                                                       # only the largest value checked
        return next(f for f, d in (("fp16", torch.float16), ("bf16", torch.bfloat16), ("fp32", torch.float32))
                    if float(torch.tensor(float(n - 1)).to(d)) == n - 1)

    for rule, hint in ((fits_range, "range is not precision"), (no_implicit_bit, "implicit leading 1"),
                       (largest_only, "not only the largest"), (lambda n: "fp32", "larger than needed"),
                       (lambda n: _smallest(n + 1), r"smallest_exact\(2049\) also tests count itself"),  # arange(count + 1)
                       (lambda n: _smallest(n - 1), r"smallest_exact\(2050\) leaves out count - 1"),     # arange(count - 1)
                       (lambda n: ["fp16"], "must return the string"), (lambda n: n / "x", "raised TypeError")):
        with pytest.raises(WrongAnswer, match=hint):
            l01.check_storage(dict(RIGHT), rule)
    bf16_range = {**RIGHT, "positions in a 4096-token context": "bf16", "GPT-2 token ids": "bf16"}
    with pytest.raises(WrongAnswer, match="range is not precision"):
        l01.check_storage(bf16_range, _smallest)
    with pytest.raises(WrongAnswer, match=r"\['ImageNet labels', 'pixel values'\] fit a smaller"):
        l01.check_storage({k: "fp32" for k in RANGES}, _smallest)
    with pytest.raises(WrongAnswer, match="one entry per name"):
        l01.check_storage({"pixel values": "fp16"}, _smallest)
    with pytest.raises(WrongAnswer, match="the strings"):                   # lists as values: a hint, no TypeError
        l01.check_storage({k: [v] for k, v in RIGHT.items()}, _smallest)
    with pytest.raises(WrongAnswer, match="a function smallest_exact"):
        l01.check_storage(dict(RIGHT), None)


def _grads():
    """Parameter-like and activation-like gradients, the latter with ReLU zeros and a tail that flushes at any scale."""
    g = torch.Generator().manual_seed(0)
    params = [torch.randn(1000, generator=g) * 1e-3]
    acts = torch.exp2(torch.empty(4000).uniform_(-40, -4, generator=g))  # many flush at S = 1, none at the max
    acts[:2000] = 0                                           # ReLU's zeros
    acts[2000:2040] = 2.0**-70                                # 2 % of the non-zeros: lost at every safe scale
    return params, [acts]


def _check(*args, within_rule=lambda share: share <= 0.001):
    """check_static_scale with the right within_rule unless a test passes another."""
    l01.check_static_scale(*args, within_rule=within_rule)


def _right_scale(grads):
    largest = max(t.abs().max().item() for t in grads)
    right = 1.0
    while (2 * right) * largest <= 65504:
        right *= 2
    return right


def test_static_scale(capsys):
    params, acts = _grads()
    every = params + acts
    right = _right_scale(every)
    stats = cast_stats(every, "fp16", scale=right)
    lost = stats.underflow / stats.nonzero                   # PyTorch-free oracle: counted by cast_stats' categories
    assert lost > l01.FLUSH_LIMIT
    _check(right, lost, False, params, acts)
    assert "✓" in capsys.readouterr().out
    cases = [
        ((2 * right, lost, False), "doubled once too often"),              # stopped after the first overflow
        ((65504 / max(t.abs().max().item() for t in every), lost, False), "a power of two"),  # not rounded
        ((right / 2, lost, False), "keep doubling"),
        ((right, 100 * lost, False), "not a percentage"),                   # units
        ((right, stats.underflow_fraction, False), "non-zero gradients, not by all"),  # denominator
        ((right, cast_stats(every, "fp16").underflow_share_of_nonzero, False), "with no scale"),  # forgot the scale
        ((right, lost, True), "do not type it"),                             # hard-coded: "GradScaler handles it"
        ((right, lost, "no"), "True or False"),
    ]
    for args, hint in cases:
        with pytest.raises(WrongAnswer, match=hint):
            _check(*args, params, acts)
    np = pytest.importorskip("numpy")                                      # numpy and 0-d tensor routes pass
    _check(np.int64(right), torch.tensor(lost), np.bool_(False), params, acts)
    assert "✓" in capsys.readouterr().out
    with pytest.raises(WrongAnswer, match="multiplying after casting"):    # scaled after the fp16 cast
        flushed = sum((((g.half().float() * right) == 0) & (g != 0)).sum().item() for g in every)
        _check(right, flushed / sum((g != 0).sum().item() for g in every), False, params, acts)
    with pytest.raises(WrongAnswer, match="before the fp16 cast"):  # cast first: the flushed are not counted (params flush none here)
        after = [(g.half().float() * right) for g in every]
        _check(right, cast_stats(after, "fp16").underflow_share_of_nonzero, False, params, acts)
    with pytest.raises(WrongAnswer, match="param_grads as well"):           # activations only
        big = [torch.full((4,), 1.0)]
        _check(_right_scale(acts), lost, False, big, acts)
    with pytest.raises(WrongAnswer, match="cannot run here: param_grads is missing"):
        _check(right, lost, False, [], acts)
    with pytest.raises(WrongAnswer, match="a subnormal is stored"):             # subnormals counted as lost
        assert stats.subnormal > 0
        _check(right, (stats.underflow + stats.subnormal) / stats.nonzero, False, params, acts)


def test_static_scale_parameters_only():
    params, acts = _grads()
    with pytest.raises(WrongAnswer, match="an activation gradient overflows"):  # max_scale from param_grads alone
        _check(_right_scale(params), 0.0, False, params, acts)
    big = [params[0] * 100]                                                     # now the largest gradient
    big[0][:7] = 2.0**-70                                                       # and some that always flush
    right = _right_scale(big + acts)
    assert right == _right_scale(big)
    only = cast_stats(big, "fp16", scale=right).underflow_share_of_nonzero
    assert only > 0
    with pytest.raises(WrongAnswer, match="activation_grads as well as param_grads"):
        _check(right, only, False, big, acts)
    plain_big = [params[0] * 100]                                               # none of them flush: lost is 0
    right = _right_scale(plain_big + acts)
    with pytest.raises(WrongAnswer, match=r"lost_at_max is 0.*activation_grads as well as param_grads"):
        _check(right, cast_stats(plain_big, "fp16", scale=right).underflow_share_of_nonzero, False,
                               plain_big, acts)


def test_static_scale_rule_as_a_function(capsys):
    params, acts = _grads()
    every = params + acts
    right = _right_scale(every)
    stats = cast_stats(every, "fp16", scale=right)
    lost = stats.underflow / stats.nonzero
    def good(share):
        return share <= 0.001

    _check(right, lost, False, params, acts, within_rule=good)
    assert "✓" in capsys.readouterr().out
    np = pytest.importorskip("numpy")
    _check(right, lost, np.bool_(False), params, acts, within_rule=lambda s: np.bool_(s <= 0.001))
    assert "✓" in capsys.readouterr().out
    wrong = [
        (lambda s: False, "same answer for every share"),                       # a typed verdict
        (lambda s: s <= 0.1, "0.001 as a fraction, not 0.1"),                   # units: a percentage
        (lambda s: s <= 0.01, "more than the rule's 0.1 %"),                    # a 1 % rule
        (lambda s: s < 0.001, "exactly 0.001"),                                 # the limit left out
        (lambda s: s > 0.001, "other way round"),                               # inverted
        (lambda s: s <= 0.0005, r"rejects a share of 0.0007, which"),           # too strict
        (lambda s: "yes", "must return True or False"),
        (lambda s: s / "x", r"within_rule\(0.0\) raised TypeError"),
    ]
    for rule, hint in wrong:
        with pytest.raises(WrongAnswer, match=hint):
            _check(right, lost, False, params, acts, within_rule=rule)
    with pytest.raises(WrongAnswer, match="a function within_rule"):
        _check(right, lost, False, params, acts, within_rule="share <= 0.001")
    with pytest.raises(WrongAnswer, match="a function within_rule"):          # the rule left out: False typed
        l01.check_static_scale(right, lost, False, params, acts)
    with pytest.raises(WrongAnswer, match="do not type it"):                    # verdict typed against the rule
        _check(right, lost, True, params, acts, within_rule=good)


def _fake(lo, hi, seed):
    g = torch.Generator().manual_seed(seed)
    exps = torch.empty(20_000, dtype=torch.float64).uniform_(lo, hi, generator=g)
    signs = torch.randint(0, 2, (20_000,), generator=g) * 2 - 1
    return (signs * torch.exp2(exps)).float()


def _rule(check):
    """A decide(grads) built from one per-scale test ``check(stats)``, over S = 2^0 .. 2^40."""
    def decide(grads):
        return "fp16" if any(check(cast_stats(grads, "fp16", scale=2.0**k)) for k in range(41)) else "bf16"
    return decide


def _oracle(grads):
    """The rule computed with plain PyTorch: scale in float64, round to fp16, count inf and flushed non-zeros."""
    x = grads.double()
    nz = x != 0
    for k in range(41):
        y = (x * 2.0**k).half()
        if not torch.isinf(y).any() and ((y == 0) & nz).sum() <= 0.001 * nz.sum():
            return "fp16"
    return "bf16"


RIGHT_RULE = _rule(lambda s: s.overflow == 0 and s.underflow <= 0.001 * s.nonzero)


def test_the_hidden_cases_follow_the_rule_by_pytorchs_own_cast():
    for name, grads in l01._cases().items():
        assert RIGHT_RULE(grads) == _oracle(grads), name
    assert {RIGHT_RULE(g) for g in l01._cases().values()} == {"fp16", "bf16"}


def test_decisions(capsys):
    a, b = _fake(-32, -6, 1), _fake(-44, 4, 2)
    best = max(2.0**k for k in range(41) if (a.double() * 2.0**k).abs().max() < 65520)
    ca, cb = RIGHT_RULE(a), RIGHT_RULE(b)
    assert (ca, cb) == (_oracle(a), _oracle(b)) == ("fp16", "bf16")
    l01.check_decisions(RIGHT_RULE, ca, cb, best, a, b)
    assert "✓" in capsys.readouterr().out
    wrong_rules = {
        "both conditions at once": _rule(lambda s: s.overflow == 0),                         # overflow alone
        "both conditions": _rule(lambda s: s.underflow <= 0.001 * s.nonzero),               # underflow alone
        "k is the exponent": lambda g: "fp16" if (lambda s: s.overflow == 0 and s.underflow <= 0.001 * s.nonzero)(
            cast_stats(g, "fp16")) else "bf16",                                             # only S = 1
        "0.001 as a fraction": _rule(lambda s: s.overflow == 0 and s.underflow_share_of_nonzero <= 0.1),  # units
        "against all values": _rule(lambda s: s.overflow == 0 and s.underflow_fraction <= 0.001),  # denominator
        "does not ask for none": _rule(lambda s: s.overflow == 0 and s.underflow == 0),     # stricter than the rule
        "not lost": _rule(lambda s: s.overflow == 0 and s.underflow + s.subnormal <= 0.001 * s.nonzero),  # subnormals
        "all the way up": lambda g: "fp16" if any(                                           # S only up to 2^20
            (lambda s: s.overflow == 0 and s.underflow <= 0.001 * s.nonzero)(cast_stats(g, "fp16", scale=2.0**k))
            for k in range(21)) else "bf16",
        "at most 0.1 %, so that share": _rule(lambda s: s.overflow == 0 and s.underflow < 0.001 * s.nonzero),  # < not <=
        "all the way up to 2\\^40": lambda g: "fp16" if any(                               # S only up to 2^39
            (lambda s: s.overflow == 0 and s.underflow <= 0.001 * s.nonzero)(cast_stats(g, "fp16", scale=2.0**k))
            for k in range(40)) else "bf16",
        "before the fp16 cast": (lambda g: "fp16" if any(  # scaled after the cast
            (lambda s: s.overflow == 0 and s.underflow <= 0.001 * s.nonzero)(
                cast_stats(g.half().float() * 2.0**k, "fp16")) for k in range(41)) else "bf16"),
    }
    for hint, rule in wrong_rules.items():
        with pytest.raises(WrongAnswer, match=hint):
            l01.check_decisions(rule, ca, cb, best, a, b)
    with pytest.raises(WrongAnswer, match="fixed one"):                            # decided by looking at the plots
        l01.check_decisions(lambda g: "fp16", "fp16", "bf16", best, a, b)
    with pytest.raises(WrongAnswer, match="same answer for every set"):
        l01.check_decisions(lambda g: "bf16", "fp16", "bf16", best, a, b)
    with pytest.raises(WrongAnswer, match="do not type it"):                       # hard-coded choices
        l01.check_decisions(RIGHT_RULE, "fp16", "fp16", best, a, b)
    with pytest.raises(WrongAnswer, match="a function decide"):
        l01.check_decisions(None, ca, cb, best, a, b)
    with pytest.raises(WrongAnswer, match="decide raised TypeError"):
        l01.check_decisions(lambda g: cast_stats(g, "fp16", 2 ** "k"), ca, cb, best, a, b)
    np = pytest.importorskip("numpy")                                      # numpy scalars pass
    l01.check_decisions(lambda g: np.str_(RIGHT_RULE(g)), ca, cb, np.float32(best), a, b)
    assert "✓" in capsys.readouterr().out
    with pytest.raises(WrongAnswer, match="doubled once too often"):
        l01.check_decisions(RIGHT_RULE, ca, cb, 2 * best, a, b)
    with pytest.raises(WrongAnswer, match="still overflows nothing"):
        l01.check_decisions(RIGHT_RULE, ca, cb, best / 2, a, b)
    with pytest.raises(WrongAnswer, match="cannot run here: grads_b"):
        l01.check_decisions(RIGHT_RULE, ca, cb, best, a, None)
