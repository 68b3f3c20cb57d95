"""fp16lab.numerics against torch.finfo, torch casts and numpy float16/float32 as oracles."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from fp16lab.numerics import (
    FORMAT_NAMES,
    FORMATS,
    BitView,
    CastStats,
    bit_view,
    cast_stats,
    format_info,
    formats_table,
    parse_format,
    round_to_format,
    ulp,
)

DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32,
          "fp8_e4m3": torch.float8_e4m3fn, "fp8_e5m2": torch.float8_e5m2}
IEEE = ("fp32", "fp16", "bf16", "fp8_e5m2")  # formats with inf
NP = {"fp16": np.float16, "fp32": np.float32}
NP_UINT = {"fp16": np.uint16, "fp32": np.uint32}


def random_values(n: int, seed: int, lo: float = -30.0, hi: float = 20.0) -> np.ndarray:
    """Float32-exact values of random sign, log-uniform magnitude 2**lo .. 2**hi."""
    rng = np.random.default_rng(seed)
    mags = np.exp2(rng.uniform(lo, hi, n))
    signs = rng.choice([-1.0, 1.0], n)
    return (signs * mags).astype(np.float32)


# ---------------------------------------------------------------- formats


@pytest.mark.parametrize("name", FORMATS)
def test_format_info_matches_torch_finfo(name: str) -> None:
    info = format_info(name)
    fi = torch.finfo(DTYPES[name])
    assert info.dtype is DTYPES[name]
    assert info.bits == fi.bits
    assert info.max == fi.max
    assert -info.max == fi.min
    assert info.smallest_normal == fi.smallest_normal == fi.tiny
    assert info.eps == fi.eps
    assert 1 + info.exponent_bits + info.mantissa_bits == fi.bits


@pytest.mark.parametrize("name", ["fp16", "fp32"])
def test_format_info_matches_numpy_finfo(name: str) -> None:
    info = format_info(name)
    fi = np.finfo(NP[name])
    assert info.mantissa_bits == fi.nmant
    assert info.exponent_bits == fi.nexp
    assert info.smallest_subnormal == float(fi.smallest_subnormal)
    assert info.min_exponent == fi.minexp
    assert info.max_exponent == fi.maxexp - 1


@pytest.mark.parametrize("name", FORMATS)
def test_smallest_subnormal_is_the_lowest_bit_pattern(name: str) -> None:
    info = format_info(name)
    dtype = DTYPES[name]
    int_dtype = {32: torch.int32, 16: torch.int16, 8: torch.uint8}[info.bits]
    one = torch.tensor([1], dtype=int_dtype).view(dtype)
    assert one.item() == info.smallest_subnormal
    # half of it rounds (to even) to zero, 0.75 of it rounds up to it
    assert torch.tensor(info.smallest_subnormal / 2, dtype=torch.float64).to(dtype).item() == 0
    assert torch.tensor(info.smallest_subnormal * 0.75, dtype=torch.float64).to(dtype).item() == info.smallest_subnormal


@pytest.mark.parametrize("name", ["fp32", "fp16", "bf16"])
def test_max_is_largest_finite_and_eps_is_gap_above_one(name: str) -> None:
    info = format_info(name)
    dtype = DTYPES[name]
    top = torch.tensor(info.max, dtype=dtype)
    assert torch.isfinite(top) and torch.isinf(torch.nextafter(top, torch.tensor(math.inf, dtype=dtype)))
    one = torch.tensor(1.0, dtype=dtype)
    assert (torch.nextafter(one, torch.tensor(2.0, dtype=dtype)) - one).item() == info.eps


@pytest.mark.parametrize("name", ["fp8_e4m3", "fp8_e5m2"])
def test_fp8_every_bit_pattern_decodes_like_torch(name: str) -> None:
    """All 256 codes: torch decodes them (the oracle), our fields reconstruct the same value."""
    info = format_info(name)
    values = torch.arange(256, dtype=torch.int32).to(torch.uint8).view(info.dtype).double()
    finite = values[torch.isfinite(values)]
    assert finite.abs().max().item() == info.max == torch.finfo(info.dtype).max
    assert finite[finite > 0].min().item() == info.smallest_subnormal
    assert int(torch.isinf(values).sum()) == (2 if info.has_inf else 0)
    for code, v in enumerate(values.tolist()):
        s, e, m = code >> 7, (code >> info.mantissa_bits) & (2**info.exponent_bits - 1), code & (2**info.mantissa_bits - 1)
        bv = BitView(name, v, s, e, m)
        if math.isnan(v):
            assert bv.kind == "nan"
        else:
            assert bv.reconstruct() == v, (name, code)
            if not math.isinf(v) and v != 0:
                assert bit_view(v, name).bits == bv.bits, (name, code)  # round trip


def test_fp8_facts_are_the_cited_ones() -> None:
    e4, e5 = format_info("fp8_e4m3"), format_info("fp8_e5m2")
    assert (e4.exponent_bits, e4.mantissa_bits, e4.has_inf) == (4, 3, False)
    assert (e5.exponent_bits, e5.mantissa_bits, e5.has_inf) == (5, 2, True)
    assert e4.max == torch.finfo(torch.float8_e4m3fn).max and e5.max == torch.finfo(torch.float8_e5m2).max
    assert e4.max_exponent == 8 and e5.max_exponent == 15
    assert format_info(torch.float8_e4m3fn) is e4


@pytest.mark.parametrize("name", FORMATS)
def test_rounding_matches_torch_casts_from_float32(name: str) -> None:
    """In range, torch's float32 -> format cast rounds once too: the two must agree bit for bit."""
    info = format_info(name)
    hi = math.log2(info.max) - 0.01
    lo = math.log2(info.smallest_subnormal) - 2
    x = torch.from_numpy(random_values(4000, seed=21, lo=max(lo, -149.0), hi=min(hi, 127.0)))
    ours = round_to_format(x, name)
    theirs = x.to(info.dtype).double()
    assert torch.equal(ours, theirs)


def test_fp8_e4m3_overflow_saturates_and_is_reported() -> None:
    for v in (465.0, 1e6, math.inf):
        b = bit_view(v, "fp8_e4m3")
        assert b.value == 448.0 and b.overflow and "no inf" in str(b)
    assert bit_view(464.0, "fp8_e4m3").value == 448.0 and not bit_view(464.0, "fp8_e4m3").overflow  # tie to even
    assert bit_view(-1e6, "fp8_e4m3").value == -448.0
    assert bit_view(61440.0, "fp8_e5m2").kind == "inf" and bit_view(61439.0, "fp8_e5m2").value == 57344.0
    assert math.isnan(ulp(1e6, "fp8_e4m3")) and ulp(448.0, "fp8_e4m3") == math.inf
    s = cast_stats(torch.tensor([1.0, 500.0, 1e-4, math.inf]), "fp8_e4m3")
    assert (s.normal, s.overflow, s.underflow, s.nonfinite) == (1, 1, 1, 1)


def test_formats_table() -> None:
    table = formats_table()
    assert list(table.index) == ["fp32", "fp16", "bf16", "fp8_e4m3", "fp8_e5m2"]
    for name in FORMATS:
        fi = torch.finfo(DTYPES[name])
        assert table.loc[name, "max"] == fi.max
        assert table.loc[name, "eps"] == fi.eps
        assert table.loc[name, "smallest_normal"] == fi.smallest_normal
    assert {"exponent_bits", "mantissa_bits", "smallest_subnormal"} <= set(table.columns)
    assert list(formats_table(["bf16"]).index) == ["bf16"]
    assert list(formats_table("fp16").index) == ["fp16"]  # a single format, not its letters
    assert list(table["has_inf"]) == [True, True, True, False, True]
    with pytest.raises(ValueError, match="empty"):
        formats_table([])
    with pytest.raises(ValueError, match="formats must be"):
        formats_table(16)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "given,expected",
    [
        (torch.float16, "fp16"),
        (torch.bfloat16, "bf16"),
        (torch.float32, "fp32"),
        (torch.float8_e4m3fn, "fp8_e4m3"),
        (torch.float8_e5m2, "fp8_e5m2"),
        ("fp16", "fp16"),
        ("BF16", "bf16"),
        (" bf16 ", "bf16"),
        ("fp32", "fp32"),
        ("FP8_E4M3", "fp8_e4m3"),
        ("fp8_e5m2", "fp8_e5m2"),
    ],
)
def test_parse_format_accepts(given: object, expected: str) -> None:
    assert parse_format(given) == expected  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [torch.float64, torch.int8, "fp8", "half", "float16", "bfloat16", "float32",
                                 "tf32", "float8_e4m3fn", "", 16, None, True])
def test_parse_format_rejects_with_allowed_list(bad: object) -> None:
    with pytest.raises(ValueError, match="allowed") as err:
        parse_format(bad)  # type: ignore[arg-type]
    msg = str(err.value)
    assert repr(bad) in msg and msg.startswith("fmt")
    for name in FORMAT_NAMES:
        assert repr(name) in msg
    assert "torch.float16" in msg


@pytest.mark.parametrize("bad,hint", [("float16", "'fp16'"), ("half", "'fp16'"), ("bfloat16", "'bf16'"),
                                      ("tf32", "not a storage format"), ("fp8", "two FP8 formats"),
                                      ("float8_e4m3fn", "'fp8_e4m3'")])
def test_dtype_names_get_a_hint(bad: str, hint: str) -> None:
    """One rule with fp16lab.precision: names are 'fp16'-style; dtype *names* are refused everywhere."""
    with pytest.raises(ValueError, match="did you mean") as err:
        parse_format(bad)
    assert hint in str(err.value)


def test_format_names_are_the_precision_names_where_both_exist() -> None:
    from fp16lab.precision import parse_precision

    for name in ("fp32", "fp16", "bf16"):
        assert parse_format(name) == parse_precision(name).value
    for bad in ("float16", torch.float16):  # a dtype is a format, never a precision
        with pytest.raises(ValueError, match="a precision name, not a dtype"):
            parse_precision(bad)  # type: ignore[arg-type]
    assert parse_format(torch.float16) == "fp16"


@pytest.mark.parametrize("fn", [format_info, lambda f: bit_view(1.0, f), lambda f: ulp(1.0, f),
                                lambda f: cast_stats([torch.ones(2)], f)])
def test_every_helper_rejects_unknown_format(fn) -> None:  # type: ignore[no-untyped-def]
    for bad in ("fp64", "float16", torch.float64, None):
        with pytest.raises(ValueError, match="allowed"):
            fn(bad)


# ---------------------------------------------------------------- bit view


@pytest.mark.parametrize("name", FORMATS)
def test_bit_view_round_trip_random(name: str) -> None:
    dtype = DTYPES[name]
    values = random_values(1500, seed=FORMATS.index(name), lo=-140.0, hi=127.0)
    stored = torch.from_numpy(values).to(dtype).to(torch.float64)
    if not format_info(name).has_inf:  # torch < 2.12 gives NaN on E4M3 overflow, >= 2.12 saturates
        stored = torch.where(torch.from_numpy(values).abs() > 464, torch.from_numpy(values).double().sign() * 448, stored)
    for v, s in zip(values.tolist(), stored.tolist(), strict=True):
        bv = bit_view(v, name)
        r = bv.reconstruct()
        if math.isnan(s):
            assert math.isnan(r)
        else:
            assert r == s, (name, v, bv)
            assert math.copysign(1.0, r) == math.copysign(1.0, s)
        assert len(bv.bits) == format_info(name).bits
        assert bv.value == r or math.isnan(r)


@pytest.mark.parametrize("name", ["fp16", "fp32"])
def test_bit_view_bits_match_numpy(name: str) -> None:
    values = random_values(1500, seed=7, lo=-30.0, hi=17.0)
    with np.errstate(over="ignore"):
        as_np = values.astype(NP[name])
    raw = as_np.view(NP_UINT[name])
    for v, r in zip(values.tolist(), raw.tolist(), strict=True):
        bv = bit_view(v, name)
        assert int(bv.bits, 2) == r, (name, v)


def test_bit_view_rounds_float64_once() -> None:
    """Regression: a float64 input used to be rounded twice (to float32, then to fp16)."""
    assert bit_view(1 + 2**-11 + 2**-40).value == 1.0009765625
    assert bit_view(1 + 2**-11 + 2**-40, torch.float16).value == float(np.float64(1 + 2**-11 + 2**-40).astype(np.float16))
    assert bit_view(1 + 2**-8 + 2**-40, "bf16").value == 1 + 2**-7
    assert bit_view(1 + 2**-4 + 2**-40, "fp8_e4m3").value == 1 + 2**-3
    assert bit_view(1 + 2**-24 + 2**-60, "fp32").value == float(np.float32(1 + 2**-24 + 2**-60))
    t = torch.tensor(1 + 2**-11 + 2**-40, dtype=torch.float64)
    assert bit_view(t).value == 1.0009765625  # a float64 tensor too
    assert ulp(2048 + 1 + 2**-30, "fp16") == 2.0 and bit_view(2049 + 2**-30).value == 2050.0


@pytest.mark.parametrize("name,np_type", [("fp16", np.float16), ("fp32", np.float32)])
def test_rounding_from_float64_matches_numpy(name: str, np_type: type) -> None:
    """numpy's float64 -> float16/float32 casts round once: the oracle for float64 inputs."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal(5000) * np.exp2(rng.uniform(-30, 15, 5000))
    x = x + x * rng.uniform(-2**-12, 2**-12, 5000)  # bits beyond float32's 24
    with np.errstate(over="ignore"):
        expected = x.astype(np_type).astype(np.float64)
    got = round_to_format(torch.from_numpy(x), name).numpy()
    np.testing.assert_array_equal(got, expected)


def test_bit_view_from_tensor_matches_number() -> None:
    for v in (0.1, -3.0, 65519.0, 1e-7):
        a = bit_view(torch.tensor(v, dtype=torch.float32), "fp16")
        b = bit_view(float(np.float32(v)), "fp16")
        assert a.bits == b.bits


def test_bit_view_kinds_and_fields() -> None:
    one = bit_view(1.0, "fp16")
    assert (one.sign, one.exponent, one.mantissa, one.kind) == (0, 15, 0, "normal")
    assert bit_view(-2.0, torch.bfloat16).bits == "1" + "10000000" + "0000000"
    assert bit_view(0.0, "fp32").kind == "zero"
    neg0 = bit_view(-0.0, "fp16")
    assert neg0.kind == "zero" and neg0.sign == 1 and math.copysign(1.0, neg0.reconstruct()) == -1.0
    assert bit_view(1e-7, "fp16").kind == "subnormal"
    assert bit_view(1e-7, "bf16").kind == "normal"
    assert bit_view(70000.0, "fp16").kind == "inf"
    assert bit_view(70000.0, "fp16").reconstruct() == math.inf
    assert bit_view(-math.inf, "bf16").reconstruct() == -math.inf
    assert bit_view(math.nan, "fp32").kind == "nan"
    assert bit_view(65519.0, "fp16").value == 65504.0  # rounds down to max
    assert bit_view(65520.0, "fp16").kind == "inf"  # rounds up to inf


def test_bit_view_renders() -> None:
    bv = bit_view(3.140625, "fp16")
    assert isinstance(bv, BitView)
    text = str(bv)
    assert bv.exponent_bits in text and bv.mantissa_bits in text and "3.140625" in text
    page = bv._repr_html_()
    assert page.count("<td") == 16 and "exponent 5" in page and "mantissa 10" in page
    assert "BitView(" in repr(bv)
    for special in (math.inf, math.nan, 1e-7, 0.0):
        assert str(bit_view(special, "fp16"))
        assert bit_view(special, "fp16")._repr_html_()


@pytest.mark.parametrize("bad", ["1.0", None, True, torch.ones(2), [1.0], torch.tensor(True), 1j])
def test_bit_view_rejects_non_numbers(bad: object) -> None:
    with pytest.raises(ValueError, match="value"):
        bit_view(bad, "fp16")  # type: ignore[arg-type]


def test_round_to_format_rejects_non_float_tensors() -> None:
    for bad in (1.0, torch.arange(3), np.ones(2)):
        with pytest.raises(ValueError, match="x must be"):
            round_to_format(bad, "fp16")  # type: ignore[arg-type]


# ---------------------------------------------------------------- ulp


@pytest.mark.parametrize("name", ["fp16", "fp32"])
def test_ulp_matches_numpy_nextafter(name: str) -> None:
    t = NP[name]
    info = format_info(name)
    values = random_values(3000, seed=11, lo=-30.0, hi=15.9 if name == "fp16" else 120.0)
    with np.errstate(over="ignore"):
        stored = values.astype(t)
    stored = stored[np.isfinite(stored)]
    stored = np.concatenate([stored, t([info.max, -info.max, 0.0])])
    up = np.abs(stored)
    with np.errstate(over="ignore"):
        expected = np.spacing(up).astype(np.float64)  # numpy's own definition, inf at the max
    got = ulp(stored.astype(np.float64), name)
    assert isinstance(got, np.ndarray)
    np.testing.assert_array_equal(got, expected)
    for v, e in list(zip(stored.tolist(), expected.tolist(), strict=True))[:300]:
        assert ulp(v, name) == e


def test_ulp_bf16_matches_torch_nextafter() -> None:
    x = torch.from_numpy(random_values(3000, seed=3, lo=-130.0, hi=127.0)).to(torch.bfloat16).abs()
    x = x[torch.isfinite(x) & (x < torch.finfo(torch.bfloat16).max)]
    expected = torch.nextafter(x, torch.full_like(x, math.inf)).double() - x.double()
    got = ulp(x, "bf16")
    assert isinstance(got, torch.Tensor) and got.dtype == torch.float64
    assert torch.equal(got, expected)


def test_ulp_special_cases() -> None:
    assert ulp(2048, "fp16") == 2.0
    assert ulp(1.0, "fp16") == format_info("fp16").eps
    for name in FORMATS:
        info = format_info(name)
        assert ulp(0.0, name) == info.smallest_subnormal
        assert ulp(info.smallest_normal / 3, name) == info.smallest_subnormal
        below_max = info.max - math.ldexp(1.0, info.max_exponent - info.mantissa_bits)
        assert ulp(info.max, name) == math.inf  # no larger finite number (numpy.spacing agrees)
        assert ulp(below_max, name) == math.ldexp(1.0, info.max_exponent - info.mantissa_bits)
        assert math.isnan(ulp(math.inf, name)) and math.isnan(ulp(math.nan, name))
    assert math.isnan(ulp(1e6, "fp16"))  # overflows fp16
    assert ulp(65504, "fp16") == math.inf and ulp(65519, "fp16") == math.inf  # 65519 rounds to the max
    assert ulp(65503, "fp16") == math.inf  # rounds to 65504 too
    assert ulp(-3.0, "fp32") == ulp(3.0, "fp32")
    for bad in ("2", None, [1.0], torch.tensor([True]), np.array(["a"])):
        with pytest.raises(ValueError, match="x must be"):
            ulp(bad, "fp16")  # type: ignore[arg-type]


# ---------------------------------------------------------------- cast_stats


def numpy_oracle(x: np.ndarray) -> dict[str, int]:
    """Categories of float32 values cast to numpy float16."""
    with np.errstate(over="ignore"):
        y = x.astype(np.float16)
    finite = np.isfinite(x)
    zero = x == 0
    out = {
        "nonfinite": int((~finite).sum()),
        "zero": int(zero.sum()),
        "underflow": int(((y == 0) & ~zero).sum()),
        "overflow": int((np.isinf(y) & finite).sum()),
        "subnormal": int(((y != 0) & (np.abs(y) < np.finfo(np.float16).smallest_normal) & finite).sum()),
    }
    out["normal"] = x.size - sum(out.values())
    return out


@pytest.mark.parametrize("scale", [1.0, 1024.0, 2.0**16])
def test_cast_stats_matches_numpy_float16(scale: float) -> None:
    parts = [random_values(4000, seed=s, lo=-40.0, hi=14.0) for s in range(3)]
    parts[1][:50] = 0.0
    parts[2][:5] = np.inf
    parts[2][5:8] = np.nan
    stats = cast_stats([torch.from_numpy(p) for p in parts], "fp16", scale=scale)
    allx = np.concatenate(parts) * np.float32(scale)  # exact: power-of-two scales, in range
    expected = numpy_oracle(allx.astype(np.float32))
    assert stats.total == allx.size
    for k, v in expected.items():
        assert getattr(stats, k) == v, k
    assert stats.zero == 50 and stats.nonfinite == 8
    assert stats.nonzero == allx.size - 58
    assert stats.underflow_share_of_nonzero == stats.underflow / stats.nonzero
    assert math.isclose(sum(stats.fraction(c) for c in expected), 1.0)
    assert stats.lost_fraction == pytest.approx((stats.underflow + stats.overflow) / stats.total)


def test_cast_stats_loss_scale_moves_values_into_range() -> None:
    g = torch.from_numpy(random_values(20000, seed=5, lo=-34.0, hi=-6.0))
    plain = cast_stats([g], "fp16")
    scaled = cast_stats([g], torch.float16, scale=2.0**16)
    assert plain.underflow > 0 and plain.subnormal > 0
    assert scaled.underflow < plain.underflow and scaled.overflow == 0
    assert cast_stats([g], "bf16").underflow == 0  # bf16 has fp32's range
    assert cast_stats(g, "fp16").as_dict() == plain.as_dict()  # a bare tensor works too
    assert cast_stats([g * 2.0**16], "fp16").as_dict()["underflow"] == scaled.underflow


def test_cast_stats_finite_values_pushed_out_of_range_are_overflow_not_nonfinite() -> None:
    """Regression: a finite value whose scaled float32 product is inf was counted as nonfinite."""
    x = torch.tensor([1e38, 3e38, 1.0, -2e38, math.inf, math.nan])
    s = cast_stats(x, "fp16", scale=2.0**16)
    assert s.nonfinite == 2  # only what was inf/NaN before scaling
    assert s.overflow == 4  # 1.0 * 65536 > 65504 too
    assert cast_stats(x, "bf16", scale=2.0**16).overflow == 3  # bf16 holds 65536
    assert cast_stats(x.double(), "fp32", scale=1e10).overflow == 3
    assert cast_stats(x, "fp16", scale=1.0).nonfinite == 2


def test_cast_stats_rounds_float64_once() -> None:
    x = torch.tensor([2.0**-25 + 2.0**-60], dtype=torch.float64)  # just above half the smallest subnormal
    s = cast_stats(x, "fp16")
    assert s.subnormal == 1 and s.underflow == 0  # through float32 it would tie and flush to zero
    assert cast_stats(torch.tensor([2.0**-25]), "fp16").underflow == 1  # the tie rounds to even: zero


def test_cast_stats_inputs_of_other_dtypes_and_empty_members() -> None:
    x = torch.tensor([1e-9, 1.0, 1e5], dtype=torch.float64)
    s = cast_stats([x, torch.empty(0), x.to(torch.bfloat16)], "fp16")
    assert isinstance(s, CastStats)
    assert s.total == 6 and s.underflow == 2 and s.overflow == 2 and s.normal == 2


def test_cast_stats_renders() -> None:
    s = cast_stats([torch.tensor([0.0, 1e-9, 1e-6, 1.0])], "fp16", scale=2.0)
    frame = s.to_frame()
    assert list(frame.index) == ["normal", "subnormal", "zero", "underflow", "overflow", "nonfinite"]
    assert frame["count"].sum() == 4 and frame.loc["underflow", "count"] == 1
    assert "underflow" in str(s) and "<table" in s._repr_html_()
    assert s.nonzero == 3 and s.underflow_share_of_nonzero == 1 / 3
    assert math.isnan(cast_stats([torch.zeros(3)], "fp16").underflow_share_of_nonzero)
    with pytest.raises(ValueError, match="allowed"):
        s.fraction("lost")


@pytest.mark.parametrize(
    "tensors,match",
    [
        ([], "empty"),
        ((t for t in []), "empty"),
        ([torch.empty(0)], "no elements"),
        ([torch.ones(2), None], "None"),
        ([torch.arange(4)], "int64"),
        ([torch.ones(2, dtype=torch.bool)], "torch.bool"),
        ([np.ones(3)], "ndarray"),
        (3.0, r"tensors must be a list, got 3.0 \(float\): pass a list"),
        ("grads", r"tensors must be a list, got 'grads' \(str\): pass a list"),
        (None, "tensors must be a list, got None"),
        ([], "tensors is empty"),
    ],
)
def test_cast_stats_bad_tensors(tensors: object, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        cast_stats(tensors, "fp16")  # type: ignore[arg-type]


@pytest.mark.parametrize("scale", [0.0, -1.0, math.inf, math.nan, "8", None, True, torch.tensor(2.0)])
def test_cast_stats_bad_scale(scale: object) -> None:
    with pytest.raises(ValueError, match="scale"):
        cast_stats([torch.ones(2)], "fp16", scale=scale)  # type: ignore[arg-type]


def test_helpers_take_tensors_of_every_floating_dtype_including_fp8() -> None:
    t = torch.tensor([1.0, 300.0, 0.001, 0.0, -448.0]).to(torch.float8_e4m3fn)
    s = cast_stats(t, "fp16")
    assert (s.total, s.zero, s.nonfinite, s.overflow) == (5, 1, 0, 0)
    assert cast_stats(t, "fp8_e4m3", scale=2.0).overflow == 2  # 2 * 288 and 2 * 448 leave E4M3's range
    assert bit_view(t[1], "fp16").value == t[1].float().item()
    assert torch.equal(ulp(t, "bf16"), ulp(t.double(), "bf16"))
    for dt in (torch.float64, torch.float32, torch.bfloat16, torch.float16, torch.float8_e5m2):
        x = torch.tensor([0.5, -3.0, 1e-3]).to(dt)
        assert cast_stats(x, "fp32").total == 3 and round_to_format(x, "fp16").dtype == torch.float64
    assert bit_view(np.float32(0.1), "fp32").value == float(np.float32(0.1))
    assert bit_view(np.int64(3), torch.bfloat16).value == 3.0
    np.testing.assert_array_equal(ulp(np.array([1, 2, 3], dtype=np.float16), "fp16"), [2**-10, 2**-9, 2**-9])


@pytest.mark.parametrize("formats", [["fp16", "fp16"], ["fp16", torch.float16], ["bf16", "fp32", torch.bfloat16]])
def test_formats_table_refuses_a_format_listed_twice(formats):
    with pytest.raises(ValueError, match=r"formats lists '(fp16|bf16)' twice"):
        formats_table(formats)
