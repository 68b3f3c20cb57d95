"""Rounding proved against torch's own casts, tie by tie: every midpoint of every low-precision format.

For each format torch has (fp16, bf16, float8_e4m3fn, float8_e5m2) the test lists every finite
value the format holds (from its bit patterns), and rounds the midpoint between each pair of
neighbours (a tie), the float32 numbers just above and below it (near ties), the subnormals and
the ties around them, and the overflow boundary. ``round_to_format`` must equal ``x.to(dtype)``
on all of them, sign of zero included. fp32 is checked the same way against torch's float64 ->
float32 cast.

Why the inputs are float32: torch casts float64 to these formats through float32 (two roundings:
``2**-25 * (1 + 2**-40)`` becomes the tie ``2**-25`` and then 0, where one rounding gives
``2**-24``), so only float32-exact inputs make its cast a single rounding, the oracle we want.
Every midpoint of these formats is float32-exact.
"""

from __future__ import annotations

import pytest
import torch

from fp16lab.numerics import cast_stats, round_to_format

LOW = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp8_e4m3": torch.float8_e4m3fn,
       "fp8_e5m2": torch.float8_e5m2}
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA"))]


def every_positive_value(dtype: torch.dtype) -> torch.Tensor:
    """Every finite positive value of ``dtype``, ascending, as float64 (decoded by torch from the bits)."""
    bits = torch.finfo(dtype).bits
    pattern = torch.arange(2 ** (bits - 1), dtype=torch.int32)  # sign bit clear
    if bits == 16:
        values = pattern.to(torch.int16).view(dtype)
    else:
        values = pattern.to(torch.uint8).view(dtype)
    v = values.float().double()
    return v[torch.isfinite(v) & (v > 0)].sort().values


def ties_and_neighbours(dtype: torch.dtype) -> dict[str, torch.Tensor]:
    """float32 test points of ``dtype``: its values, its ties, the float32 numbers either side of each tie."""
    v = every_positive_value(dtype)
    top_tie = v[-1] + (v[-1] - v[-2]) / 2  # the midpoint above the largest value
    ties = torch.cat([v[:1] / 2, (v[:-1] + v[1:]) / 2, top_tie.reshape(1)])  # from 0 to beyond the max
    ties32 = ties.float()
    assert torch.equal(ties32.double(), ties), "every tie of these formats is float32-exact"
    inf = torch.tensor(float("inf"))
    near = torch.cat([torch.nextafter(ties32, inf), torch.nextafter(ties32, -inf)])
    beyond = torch.tensor([2 * v[-1].item(), torch.finfo(torch.float32).max, float("inf")])
    points = {"values": v.float(), "ties": ties32, "near ties": near, "beyond the maximum": beyond.float()}
    return {k: torch.cat([p, -p]) for k, p in points.items()}


# torch < 2.12 casts a number beyond ±448 (inf included) to NaN in float8_e4m3fn; 2.12 and later
# saturate to ±448, as round_to_format and cast_stats do (fp16lab.numerics documents it).
E4M3_NAN_ON_OVERFLOW = tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2]) < (2, 12)


def saturated(theirs: torch.Tensor, x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """torch's float8_e4m3fn cast as 2.12+ makes it: NaN from a non-NaN input becomes ±448 (older torch)."""
    if dtype != torch.float8_e4m3fn or not E4M3_NAN_ON_OVERFLOW:
        return theirs
    x = x.to(theirs.device).double()
    return torch.where(theirs.isnan() & ~x.isnan(), torch.copysign(torch.full_like(theirs, 448.0), x), theirs)


def assert_same(ours: torch.Tensor, theirs: torch.Tensor, x: torch.Tensor, what: str) -> None:
    """Equal values (inf and NaN included) and the same sign, zeros too; else name the first input that differs."""
    same = (ours == theirs) | (ours.isnan() & theirs.isnan())
    same &= torch.signbit(ours) == torch.signbit(theirs)
    if not bool(same.all()):
        i = int((~same).nonzero()[0])
        raise AssertionError(f"{what}: {x[i].item()!r} rounds to {ours[i].item()!r}, torch casts it to "
                             f"{theirs[i].item()!r} ({int((~same).sum())} of {x.numel()} differ)")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", list(LOW))
def test_round_to_format_equals_torchs_cast_on_every_tie(name: str, device: str) -> None:
    dtype = LOW[name]
    for what, x in ties_and_neighbours(dtype).items():
        x = x.to(device)
        theirs = saturated(x.to(dtype).double().cpu(), x.cpu(), dtype)
        assert_same(round_to_format(x, name).cpu(), theirs, x.cpu(), f"{name} {what}")


@pytest.mark.parametrize("name", list(LOW))
def test_the_ties_are_decided_both_ways(name: str) -> None:
    """Ties to even send about half the ties down and half up: the tie points above are real ties."""
    dtype = LOW[name]
    v = every_positive_value(dtype)
    ties = ((v[:-1] + v[1:]) / 2).float()
    cast = ties.to(dtype).double()
    down, up = (cast == v[:-1]).sum().item(), (cast == v[1:]).sum().item()
    assert down + up == ties.numel() and abs(down - up) <= 1


def test_the_hand_known_ties() -> None:
    """A few ties whose answer is known by hand, so the oracle above is itself checked."""
    cases = [
        ("fp16", 1 + 2**-11, 1.0),  # 1 and 1 + 2**-10: the even one is 1
        ("fp16", 1 + 3 * 2**-11, 1 + 2**-9),  # between 1 + 2**-10 (odd) and 1 + 2**-9 (even)
        ("fp16", 2**-25, 0.0),  # half the smallest subnormal: to zero
        ("fp16", 3 * 2**-25, 2**-23),  # between the subnormals 2**-24 (odd) and 2**-23 (even)
        ("fp16", 65520.0, float("inf")),  # the midpoint above 65504 overflows
        ("bf16", 1 + 2**-8, 1.0),
        ("fp8_e4m3", 464.0, 448.0),  # no 480 in e4m3fn: 448 (mantissa 110, even) wins the tie
        ("fp8_e4m3", 2**-10, 0.0),  # half of 2**-9, the smallest subnormal
        ("fp8_e5m2", 61440.0, float("inf")),  # above 57344 (mantissa 11, odd)
        ("fp8_e5m2", 1.125, 1.0),  # between 1 and 1.25
    ]
    for name, x, expected in cases:
        t = torch.tensor([x, -x], dtype=torch.float32)
        assert round_to_format(t, name).tolist() == [expected, -expected], (name, x)
        assert t.to(LOW[name]).double().tolist() == [expected, -expected], (name, x)


@pytest.mark.parametrize("device", DEVICES)
def test_fp32_rounding_equals_torchs_float64_cast_on_ties(device: str) -> None:
    gen = torch.Generator().manual_seed(5)
    patterns = torch.randint(1, 0x7F7FFFFF, (20000,), generator=gen, dtype=torch.int32)  # finite positive
    lo = patterns.view(torch.float32)
    hi = torch.nextafter(lo, torch.tensor(float("inf")))
    sub = torch.arange(0, 64, dtype=torch.float64) * 2.0**-149  # the smallest subnormals and zero
    ties = torch.cat([(lo.double() + hi.double()) / 2, sub + 2.0**-150])
    top = torch.tensor([torch.finfo(torch.float32).max + 2.0**103], dtype=torch.float64)  # the tie above max
    near = torch.cat([ties * (1 + 2**-45), ties * (1 - 2**-45), top * (1 - 2**-45)])
    x = torch.cat([ties, near, top, sub])
    x = torch.cat([x, -x]).to(device)
    assert_same(round_to_format(x, "fp32").cpu(), x.to(torch.float32).double().cpu(), x.cpu(), "fp32 ties")


# ------------------------------------------------------------------ cast_stats' categories


def torch_categories(y: torch.Tensor, dtype: torch.dtype) -> dict[str, torch.Tensor]:
    """Overflow, underflow and subnormal masks of the scaled values ``y``, read from torch's cast."""
    r = y.to(dtype).double() if dtype == torch.float32 else y.float().to(dtype).double()
    if dtype == torch.float8_e4m3fn:  # no inf: torch saturates at 448. Cast y / 256 instead, whose
        # significand rounds alike with room above: 448 is exceeded when it rounds past 448 / 256
        # (torch < 2.12 gives NaN instead of 448 there: not <= 448 either)
        over = ~((y.abs().float() / 256).to(dtype).double() * 256 <= 448)
    else:
        over = torch.isinf(r)
    tiny = torch.finfo(dtype).smallest_normal
    return {"overflow": over, "underflow": (r == 0) & (y != 0),
            "subnormal": (r != 0) & (r.abs() < tiny) & ~over}


def edge_points(name: str) -> torch.Tensor:
    """The ties around zero, the smallest normal and the maximum, and the numbers next to them (float64)."""
    if name != "fp32":
        t = ties_and_neighbours(LOW[name])
        return torch.cat([t["ties"], t["near ties"]]).double()
    ties = torch.tensor([2.0**-150, 2.0**-126 - 2.0**-150, torch.finfo(torch.float32).max + 2.0**103],
                        dtype=torch.float64)
    near = torch.cat([ties, ties * (1 + 2**-40), ties * (1 - 2**-40)])
    return torch.cat([near, -near])


@pytest.mark.parametrize("name", ["fp32", *LOW])
@pytest.mark.parametrize("scale", [1.0, 3.0, 2.0**-20, 2.0**30])
def test_cast_stats_counts_what_torchs_cast_does(name: str, scale: float) -> None:
    """cast_stats classifies by thresholds; torch's cast of every scaled value must agree, ties included."""
    dtype = LOW.get(name, torch.float32)
    gen = torch.Generator().manual_seed(31)
    n = 6000
    # 22-bit significands, so that 3 * x still fits float32's 24 bits and torch's cast rounds once
    sig = torch.randint(2**21, 2**22, (n,), generator=gen).double()
    exp = torch.randint(-160, 110, (n,), generator=gen).double()
    sign = torch.randint(0, 2, (n,), generator=gen).double() * 2 - 1
    x = sign * sig * torch.pow(2.0, exp - 21)
    x = torch.cat([x, edge_points(name) / scale, torch.zeros(3, dtype=torch.float64)])  # exact: 2**k scales
    y = x * scale  # cast_stats' own product: float64
    if dtype != torch.float32:  # keep what float32 holds exactly, or what is beyond every format's range
        keep = (y.float().double() == y) | (y.abs() >= 2.0**128) | (y.abs() < 2.0**-140)
        assert keep.float().mean() > (0.6 if scale == 3.0 else 0.95)
        x, y = x[keep], y[keep]
    s = cast_stats(x, name, scale=scale)
    want = torch_categories(y, dtype)
    assert s.overflow == int(want["overflow"].sum())
    assert s.underflow == int(want["underflow"].sum())
    assert s.subnormal == int(want["subnormal"].sum())
    assert s.zero == 3 and s.total == x.numel()
    assert min(s.overflow, s.underflow, s.subnormal, s.normal) > 0  # every category is exercised
