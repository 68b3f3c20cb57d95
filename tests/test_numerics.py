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
    ulp,
)

DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}
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
    int_dtype = torch.int32 if info.bits == 32 else torch.int16
    one = torch.tensor([1], dtype=int_dtype).view(dtype)
    assert one.item() == info.smallest_subnormal
    # half of it rounds (to even) to zero, 0.75 of it rounds up to it
    assert torch.tensor(info.smallest_subnormal / 2, dtype=torch.float64).to(dtype).item() == 0
    assert torch.tensor(info.smallest_subnormal * 0.75, dtype=torch.float64).to(dtype).item() == info.smallest_subnormal


@pytest.mark.parametrize("name", FORMATS)
def test_max_is_largest_finite_and_eps_is_gap_above_one(name: str) -> None:
    info = format_info(name)
    dtype = DTYPES[name]
    top = torch.tensor(info.max, dtype=dtype)
    assert torch.isfinite(top) and torch.isinf(torch.nextafter(top, torch.tensor(math.inf, dtype=dtype)))
    one = torch.tensor(1.0, dtype=dtype)
    assert (torch.nextafter(one, torch.tensor(2.0, dtype=dtype)) - one).item() == info.eps


def test_formats_table() -> None:
    table = formats_table()
    assert list(table.index) == ["fp16", "bf16", "fp32"]
    for name in FORMATS:
        fi = torch.finfo(DTYPES[name])
        assert table.loc[name, "max"] == fi.max
        assert table.loc[name, "eps"] == fi.eps
        assert table.loc[name, "smallest_normal"] == fi.smallest_normal
    assert {"exponent_bits", "mantissa_bits", "smallest_subnormal"} <= set(table.columns)
    assert list(formats_table(["bf16"]).index) == ["bf16"]
    with pytest.raises(ValueError, match="empty"):
        formats_table([])


@pytest.mark.parametrize(
    "given,expected",
    [
        (torch.float16, "fp16"),
        (torch.bfloat16, "bf16"),
        (torch.float32, "fp32"),
        ("fp16", "fp16"),
        ("float16", "fp16"),
        ("BF16", "bf16"),
        (" bfloat16 ", "bf16"),
        ("fp32", "fp32"),
        ("float32", "fp32"),
    ],
)
def test_parse_format_accepts(given: object, expected: str) -> None:
    assert parse_format(given) == expected  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [torch.float64, torch.int8, "fp8", "half", "", 16, None])
def test_parse_format_rejects_with_allowed_list(bad: object) -> None:
    with pytest.raises(ValueError) as err:
        parse_format(bad)  # type: ignore[arg-type]
    msg = str(err.value)
    assert repr(bad) in msg
    for name in FORMAT_NAMES:
        assert repr(name) in msg
    assert "torch.float16" in msg


@pytest.mark.parametrize("fn", [format_info, lambda f: bit_view(1.0, f), lambda f: ulp(1.0, f),
                                lambda f: cast_stats([torch.ones(2)], f)])
def test_every_helper_rejects_unknown_format(fn) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match="allowed"):
        fn("fp64")


# ---------------------------------------------------------------- bit view


@pytest.mark.parametrize("name", FORMATS)
def test_bit_view_round_trip_random(name: str) -> None:
    dtype = DTYPES[name]
    values = random_values(1500, seed=FORMATS.index(name), lo=-140.0, hi=127.0)
    stored = torch.from_numpy(values).to(dtype).to(torch.float64).tolist()
    for v, s in zip(values.tolist(), stored, strict=True):
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


@pytest.mark.parametrize("bad", ["1.0", None, True, torch.ones(2), [1.0]])
def test_bit_view_rejects_non_numbers(bad: object) -> None:
    with pytest.raises(ValueError):
        bit_view(bad, "fp16")  # type: ignore[arg-type]


# ---------------------------------------------------------------- ulp


@pytest.mark.parametrize("name", ["fp16", "fp32"])
def test_ulp_matches_numpy_nextafter(name: str) -> None:
    t = NP[name]
    info = format_info(name)
    values = random_values(3000, seed=11, lo=-30.0, hi=15.9 if name == "fp16" else 120.0)
    with np.errstate(over="ignore"):
        stored = values.astype(t)
    stored = stored[np.isfinite(stored) & (np.abs(stored) < info.max)]
    up = np.abs(stored)
    expected = np.nextafter(up, t(np.inf)).astype(np.float64) - up.astype(np.float64)
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
        assert ulp(info.max, name) == math.ldexp(1.0, info.max_exponent - info.mantissa_bits)
        assert math.isnan(ulp(math.inf, name)) and math.isnan(ulp(math.nan, name))
    assert math.isnan(ulp(1e6, "fp16"))  # overflows fp16
    assert ulp(-3.0, "fp32") == ulp(3.0, "fp32")
    with pytest.raises(ValueError):
        ulp("2", "fp16")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        ulp(torch.tensor([True]), "fp16")


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
    allx = np.concatenate(parts) * np.float32(scale)
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
        (3.0, "iterable"),
    ],
)
def test_cast_stats_bad_tensors(tensors: object, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        cast_stats(tensors, "fp16")  # type: ignore[arg-type]


@pytest.mark.parametrize("scale", [0.0, -1.0, math.inf, math.nan, "8", None])
def test_cast_stats_bad_scale(scale: object) -> None:
    with pytest.raises(ValueError, match="scale"):
        cast_stats([torch.ones(2)], "fp16", scale=scale)  # type: ignore[arg-type]
