"""A raw FP8 matmul, whether this device has one, which PyTorch entry point runs it, and its TFLOP/s.

Why: FP8 Tensor Cores (sm_89 Ada, sm_90 Hopper) run at twice the FP32-accumulate BF16 rate on
paper. Recent PyTorch releases have a public operator for them, ``torch.nn.functional.scaled_mm(
mat_a, mat_b, scale_a, scale_recipe_a, scale_b, scale_recipe_b, ..., output_dtype=torch.bfloat16,
use_fast_accum=False)`` (the recipe an enum such as ``ScalingType.TensorWise`` or ``RowWise``);
:func:`scaled_mm_api` says whether the installed torch has it, else the private
``torch._scaled_mm`` is used (torchao's ``Float8Linear`` calls that one). Its schema has been the
same from torch 2.5 through 2.14 (checked on 2.11 and 2.14.1):
``_scaled_mm(a, b, scale_a, scale_b, bias=None, scale_result=None, out_dtype=None,
use_fast_accum=False)``, with ``a`` row-major ``(M, K)`` FP8, ``b`` column-major ``(K, N)`` FP8,
and the scales the *dequantisation* factors (``1 / scale``) in float32: 0-d for tensorwise,
``(M, 1)`` and ``(1, N)`` for rowwise (then ``out_dtype`` must be BF16 on CUDA). K and N must be
multiples of 16 on CUDA. ``use_fast_accum=True`` lets cuBLAS keep partial sums in the Tensor
Cores' reduced-precision accumulator instead of promoting them to FP32 at intervals (Hopper);
torchao uses it for the forward matmul only. PyTorch also has CPU kernels for it: correct, not fast;
before torch 2.12 the CPU kernel takes per-tensor scales only, so a rowwise product on such a CPU is
emulated exactly (float64 product of the FP8 operands, rounded once) and :func:`scaled_mm_path`
says so.
"""

from __future__ import annotations

import functools
import math
import numbers
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import pandas as pd
import torch

from fp16lab.checks import (
    boolean,
    non_negative_int,
    one_of,
    positive_float,
    positive_int,
    sequence_of,
    values_readable,
)
from fp16lab.device import parse_device, resolve_device
from fp16lab.hardware import gpu_facts
from fp16lab.labs.fp8.scaling import quantize
from fp16lab.labs.runtime.i18n import tr
from fp16lab.precision import tf32_flags
from fp16lab.timing import matmul_tflops, time_fn

__all__ = ["Fp8Support", "fp8_capable", "SCALINGS", "scaled_mm_api", "scaled_mm_path", "scaled_matmul",
           "fp8_matmul_tflops", "fp8_matmul_sweep"]  # fmt: skip

#: How ``scaled_matmul`` scales its operands: one scale per matrix, or per row of A and column of B.
SCALINGS = ("tensorwise", "rowwise")
_OUT_DTYPES = (torch.bfloat16, torch.float16, torch.float32)


@dataclass(frozen=True)
class Fp8Support:
    """Whether a device runs FP8 matmuls, and a sentence saying why (or why not).

    ``reason`` is English (the errors that quote it stay English); ``shown`` is the same sentence in the reader's
    language (``FP16LAB_LANG``) when :func:`fp8_capable` made it, and ``str()`` prints that one.
    """

    ok: bool
    reason: str
    shown: str = field(default="", compare=False, repr=False)

    @property
    def said(self) -> str:
        """The reason in the reader's language: ``shown``, else ``reason``."""
        return self.shown or self.reason

    def __str__(self) -> str:
        return tr("FP8: yes. {reason}", reason=self.said) if self.ok else tr("FP8: no. {reason}", reason=self.said)


def _support(ok: bool, reason: Callable[[str | None], str]) -> Fp8Support:
    """An :class:`Fp8Support` whose reason is ``reason(lang)``, one catalogue message: in English and as the reader reads it."""
    return Fp8Support(ok, reason("en"), reason(None))


@functools.cache
def _cpu_probe() -> bool:
    try:
        a = torch.ones(16, 16).to(torch.float8_e4m3fn)
        one = torch.tensor(1.0)
        _call(scaled_mm_api("cpu"), a, a.t(), one, one, torch.float32, False)
    except (RuntimeError, NotImplementedError):
        return False
    return True


def fp8_capable(device: "torch.device | str") -> Fp8Support:
    """Can ``device`` run ``torch._scaled_mm``? CUDA: sm_89+ (profile-aware); CPU: if torch has the kernel.

    A GPU below sm_89 (T4 sm_75, A100 sm_80, RTX 3060 sm_86) has no FP8 Tensor Cores: the answer
    says so, and lessons show the committed reference instead of measuring.
    """
    dev = parse_device(device)
    if dev.type == "cuda":
        facts = gpu_facts(dev)
        if facts is None:
            return _support(False, lambda lang: tr("no CUDA GPU is visible here", lang=lang))
        label, sm = facts.label, facts.sm
        if facts.supports("fp8"):
            return _support(True, lambda lang: tr("{label} is {sm}: FP8 Tensor Cores (sm_89 Ada and newer)", lang=lang,
                                                  label=label, sm=sm))
        return _support(False, lambda lang: tr("{label} is {sm}; FP8 Tensor Cores need sm_89 (Ada) or newer (Hopper is "
                                               "sm_90): this GPU cannot run FP8 matmuls", lang=lang, label=label, sm=sm))
    if dev.type == "cpu":
        if _cpu_probe() and _cpu_rowwise_kernel():
            return _support(True, lambda lang: tr("PyTorch's CPU kernel runs FP8 matmuls: right numerics, no speed-up",
                                                  lang=lang))
        if _cpu_probe():
            return _support(True, lambda lang: tr("PyTorch's CPU kernel runs FP8 matmuls: right numerics, no speed-up; "
                                                  "rowwise scales are emulated (its kernel is per-tensor only)",
                                                  lang=lang))
        return _support(False, lambda lang: tr("torch {version} has no CPU kernel for torch._scaled_mm", lang=lang,
                                               version=torch.__version__))
    kind = dev.type
    return _support(False, lambda lang: tr("PyTorch has no FP8 matmul on {kind!r}", lang=lang, kind=kind))


def _check_operands(a: object, b: object) -> tuple[torch.Tensor, torch.Tensor]:
    for name, t in (("a", a), ("b", b)):
        if not isinstance(t, torch.Tensor) or t.dim() != 2 or not t.is_floating_point():
            raise ValueError(f"{name} must be a 2-D floating-point tensor, got "
                             f"{t.dtype if isinstance(t, torch.Tensor) else type(t).__name__}"
                             f"{tuple(t.shape) if isinstance(t, torch.Tensor) else ''}")
    assert isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"a is {tuple(a.shape)} and b is {tuple(b.shape)}: a's columns must equal b's rows")
    if a.device != b.device:
        raise ValueError(f"a is on {a.device} and b on {b.device}: put both on one device")
    for name, t in (("a", a), ("b", b)):
        if t.numel() == 0:
            raise ValueError(f"{name} is empty, shape {tuple(t.shape)}: an FP8 product needs at least one value to scale by")
        if values_readable(t) and not bool(torch.isfinite(t).all()):
            raise ValueError(f"{name} holds {int((~torch.isfinite(t)).sum())} inf/NaN values; amax scaling needs finite "
                             "values (find where they come from with fp16lab.debug.first_nonfinite)")
    return a, b


def _quantized_operands(
    a: torch.Tensor, b: torch.Tensor, scaling: str
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(a FP8 row-major, b FP8 column-major, scale_a, scale_b): what ``torch._scaled_mm`` takes."""
    gran = "tensor" if scaling == "tensorwise" else "row"
    qa = quantize(a, "fp8_e4m3", gran)
    qb = quantize(b.t().contiguous(), "fp8_e4m3", gran)  # rows of b.T = columns of b
    scale_b = qb.inverse_scale if gran == "tensor" else qb.inverse_scale.t()
    return qa.data, qb.data.t(), qa.inverse_scale, scale_b


PUBLIC_API, PRIVATE_API = "torch.nn.functional.scaled_mm", "torch._scaled_mm"
EMULATED = "emulated: float64 product of the FP8 operands (this torch's CPU kernel takes per-tensor scales only)"


def _has_public_api() -> bool:
    f = torch.nn.functional
    return hasattr(f, "scaled_mm") and hasattr(f, "ScalingType")


_PROBE_ERRORS = (RuntimeError, NotImplementedError, TypeError, ValueError)


@functools.cache
def _api_for(kind: str, index: "int | None", rowwise: bool) -> str:
    if not _has_public_api():
        return PRIVATE_API
    dev = torch.device(kind, index) if index is not None else torch.device(kind)
    a = torch.ones(16, 16, device=dev).to(torch.float8_e4m3fn)
    sa, sb = (torch.ones(16, 1, device=dev), torch.ones(1, 16, device=dev)) if rowwise else (
        torch.tensor(1.0, device=dev), torch.tensor(1.0, device=dev))
    try:  # a release may ship the Python function before a backend has the kernel behind it
        _call(PUBLIC_API, a, a.t(), sa, sb, torch.bfloat16, False)
    except _PROBE_ERRORS:
        return PRIVATE_API
    return PUBLIC_API


def scaled_mm_api(device: "torch.device | str" = "cpu", scaling: str = "tensorwise") -> str:
    """The FP8 matmul entry point used on ``device``: public ``F.scaled_mm`` where it runs, else ``torch._scaled_mm``.

    Asked once per device and scaling (a 16×16 product); a GPU without FP8 gets ``torch._scaled_mm``'s name.
    Defaults: ``device="cpu"``, ``scaling="tensorwise"``; ``device`` must exist here (it is asked, not named).
    """
    rowwise = one_of("scaling", scaling, SCALINGS) == "rowwise"
    dev = resolve_device(device)
    return _api_for(dev.type, dev.index, rowwise)


def _call(api: str, fa: torch.Tensor, fb: torch.Tensor, sa: torch.Tensor, sb: torch.Tensor, out_dtype: torch.dtype,
          fast: bool) -> torch.Tensor:
    if api == PUBLIC_API:
        f = torch.nn.functional
        recipe = f.ScalingType.RowWise if sa.dim() == 2 else f.ScalingType.TensorWise
        return f.scaled_mm(fa, fb, sa, recipe, sb, recipe, output_dtype=out_dtype, use_fast_accum=fast)
    return torch._scaled_mm(fa, fb, scale_a=sa, scale_b=sb, out_dtype=out_dtype, use_fast_accum=fast)


@functools.cache
def _cpu_rowwise_kernel() -> bool:
    """Does this torch's CPU ``_scaled_mm`` take rowwise scales? (torch 2.11's asserts per-tensor only.) Asked once."""
    a = torch.ones(16, 16).to(torch.float8_e4m3fn)
    try:
        _call(scaled_mm_api("cpu", "rowwise"), a, a.t(), torch.ones(16, 1), torch.ones(1, 16), torch.float32, False)
    except _PROBE_ERRORS:
        return False
    return True


def scaled_mm_path(device: "torch.device | str", scaling: str = "tensorwise") -> str:
    """What computes a ``scaling`` FP8 product on ``device``: the public or private operator, or the CPU emulation.

    Default ``scaling="tensorwise"``; ``device`` must exist here (the answer comes from running a 16×16 product).
    """
    one_of("scaling", scaling, SCALINGS)
    dev = resolve_device(device)
    if dev.type == "cpu" and scaling == "rowwise" and not _cpu_rowwise_kernel():
        return EMULATED
    return scaled_mm_api(dev, scaling)


def _emulated(fa: torch.Tensor, fb: torch.Tensor, sa: torch.Tensor, sb: torch.Tensor,
              out_dtype: torch.dtype) -> torch.Tensor:
    return ((fa.double() * sa.double()) @ (fb.double() * sb.double())).to(out_dtype)


def _mm(fa: torch.Tensor, fb: torch.Tensor, sa: torch.Tensor, sb: torch.Tensor, out_dtype: torch.dtype,
        fast: bool) -> torch.Tensor:
    rowwise = sa.dim() == 2
    if fa.device.type == "cpu" and rowwise and not _cpu_rowwise_kernel():
        return _emulated(fa, fb, sa, sb, out_dtype)
    return _call(scaled_mm_api(fa.device, "rowwise" if rowwise else "tensorwise"), fa, fb, sa, sb, out_dtype, fast)


def scaled_matmul(
    a: torch.Tensor, b: torch.Tensor, *, scaling: str = "tensorwise", use_fast_accum: bool = False,
    out_dtype: torch.dtype = torch.bfloat16,
) -> torch.Tensor:
    """``a @ b`` computed in FP8 (E4M3 operands, scaled by their amax) with the operator :func:`scaled_mm_path` names.

    Defaults: ``scaling="tensorwise"`` (``"rowwise"``: a scale per row of ``a`` and per column of
    ``b``), ``use_fast_accum=False``, ``out_dtype=torch.bfloat16``. ``a`` is ``(M, K)`` and ``b``
    ``(K, N)`` in any floating dtype, on one device that runs FP8 (:func:`fp8_capable`).
    """
    a, b = _check_operands(a, b)
    one_of("scaling", scaling, SCALINGS)
    boolean("use_fast_accum", use_fast_accum)
    if out_dtype not in _OUT_DTYPES:
        raise ValueError(f"out_dtype must be one of {', '.join(map(str, _OUT_DTYPES))}, got {out_dtype!r}")
    support = fp8_capable(a.device)
    if not support.ok:
        raise ValueError(f"a and b are on {a.device}, which cannot run FP8 matmuls: {support.reason}")
    return _mm(*_quantized_operands(a, b, scaling), out_dtype, use_fast_accum)


def fp8_matmul_tflops(
    m: int, n: int, k: int, device: "torch.device | str" = "cuda", *, scaling: str = "tensorwise",
    use_fast_accum: bool = False, min_run_time: float = 0.2, seed: int = 0,
) -> dict[str, object]:
    """Achieved TFLOP/s of an FP8 ``(m×k) @ (k×n)`` (``torch._scaled_mm`` only; quantising is not timed).

    Defaults: ``device="cuda"``, ``scaling="tensorwise"``, ``use_fast_accum=False``,
    ``min_run_time=0.2`` s, ``seed=0``. Also reports ``rel_error``: ‖C_fp8 − C‖/‖C‖ against the
    FP32 product of the same (dequantised) FP8 operands, TF32 off, so it measures the
    accumulation and the BF16 output rounding, not the input quantisation; and ``path``, what ran
    (:func:`scaled_mm_path`: on a CPU without a rowwise kernel the timing is the emulation's).
    """
    m, n, k = positive_int("m", m), positive_int("n", n), positive_int("k", k)
    one_of("scaling", scaling, SCALINGS)
    boolean("use_fast_accum", use_fast_accum)
    positive_float("min_run_time", min_run_time)
    seed = non_negative_int("seed", seed)
    dev = _fp8_device(device)
    g = torch.Generator(device=dev).manual_seed(seed)
    a = torch.randn(m, k, device=dev, generator=g)
    b = torch.randn(k, n, device=dev, generator=g)
    fa, fb, sa, sb = _quantized_operands(a, b, scaling)
    del a, b
    t = time_fn(lambda: _mm(fa, fb, sa, sb, torch.bfloat16, use_fast_accum), min_run_time=min_run_time)
    out = _mm(fa, fb, sa, sb, torch.bfloat16, use_fast_accum).float()
    with tf32_flags(False):
        ref = (fa.float() * sa) @ (fb.float() * sb)
    err = float((out - ref).norm() / ref.norm())
    return {"m": m, "n": n, "k": k, "kind": f"fp8 {scaling}", "use_fast_accum": use_fast_accum,
            "seconds": t.median_s, "tflops": 2.0 * m * n * k / t.median_s / 1e12, "rel_error": err,
            "path": scaled_mm_path(dev, scaling)}


_DEFAULT_CONFIGS: tuple[tuple[str, bool], ...] = (
    ("tensorwise", False), ("tensorwise", True), ("rowwise", False), ("rowwise", True))


def _peaks(dev: torch.device) -> tuple[float, float]:
    facts = gpu_facts(dev) if dev.type == "cuda" else None
    peak = facts.peak if facts else None
    bf16 = float(peak.bf16) if peak and peak.bf16 else math.nan
    fp8 = float(peak.fp8) if peak and peak.fp8 else math.nan
    return bf16, fp8


def fp8_matmul_sweep(
    shapes: Iterable["int | tuple[int, int, int]"],
    device: "torch.device | str" = "cuda",
    *,
    configs: Sequence[tuple[str, bool]] = _DEFAULT_CONFIGS,
    min_run_time: float = 0.2,
    progress: bool = True,
) -> pd.DataFrame:
    """BF16 ``torch.matmul`` and FP8 ``torch._scaled_mm`` TFLOP/s for every shape, as lesson 03's sweep.

    ``shapes``: ints n (n×n×n) or (m, n, k). ``configs``: (scaling, use_fast_accum) pairs, default
    tensorwise and rowwise, each without and with fast accumulation. Columns: m, n, k, config
    (e.g. "fp8 tensorwise, fast accum"), kind ("bf16", "fp8 tensorwise", "fp8 rowwise"),
    use_fast_accum (False for BF16, which has no such option), seconds, tflops, rel_error (FP8
    only), vs_bf16 (speed-up over the BF16 row of the same shape), peak_tflops and pct_of_peak
    (the cited dense peak of this chip for that dtype; NaN off CUDA or when not in the table),
    path (the operator that ran, :func:`scaled_mm_path`: an emulated CPU row says so), error (a configuration this GPU refuses, e.g. rowwise on an older PyTorch: a row, not a raise).
    """
    from tqdm.auto import tqdm

    shape_list = sequence_of("shapes", shapes, example="[4096, (4096, 4096, 8192)]", item=_shape)
    cfgs = _configs(configs)
    positive_float("min_run_time", min_run_time)
    boolean("progress", progress)
    dev = _fp8_device(device)
    bf16_peak, fp8_peak = _peaks(dev)
    rows: list[dict[str, object]] = []
    for m, n, k in tqdm(shape_list, desc="FP8 matmul sweep", disable=not progress, leave=False):
        base = matmul_tflops(m, n, k, "bf16", dev, min_run_time=min_run_time)
        rows.append({"m": m, "n": n, "k": k, "kind": "bf16", "use_fast_accum": False, "seconds": base["seconds"],
                     "tflops": base["tflops"], "rel_error": math.nan, "vs_bf16": 1.0, "peak_tflops": bf16_peak,
                     "path": "torch.matmul", "error": ""})
        for scaling, fast in cfgs:
            try:
                r = fp8_matmul_tflops(m, n, k, dev, scaling=scaling, use_fast_accum=fast, min_run_time=min_run_time)
                r.update(vs_bf16=float(r["tflops"]) / float(base["tflops"]), peak_tflops=fp8_peak, error="")  # type: ignore[arg-type]
            except (RuntimeError, NotImplementedError) as err:
                r = {"m": m, "n": n, "k": k, "kind": f"fp8 {scaling}", "use_fast_accum": fast,
                     "path": scaled_mm_path(dev, scaling),
                     "error": f"{type(err).__name__}: {str(err).splitlines()[0][:100]}"}
            rows.append(r)
    frame = pd.DataFrame(rows)
    frame.insert(3, "config", frame.kind + frame.use_fast_accum.map({True: ", fast accum", False: ""}))
    frame["pct_of_peak"] = 100.0 * frame["tflops"] / frame["peak_tflops"]
    return frame


def _fp8_device(device: object) -> torch.device:
    """``device`` when it exists here and runs FP8 matmuls (:func:`fp8_capable`); checked after the other arguments."""
    dev = resolve_device(device)  # type: ignore[arg-type]
    support = fp8_capable(dev)
    if not support.ok:
        raise ValueError(f"device {str(dev)!r} cannot run FP8 matmuls: {support.reason}")
    return dev


def _configs(configs: object) -> list[tuple[str, bool]]:
    return sequence_of("configs", configs, example="[('tensorwise', False)]", item=_config)


def _config(name: str, c: object) -> tuple[str, bool]:
    """One ``(scaling, use_fast_accum)`` pair of ``configs``."""
    if not isinstance(c, (tuple, list)) or len(c) != 2:
        raise ValueError(f"{name} must be a (scaling, use_fast_accum) pair such as ('tensorwise', False), got {c!r}")
    return one_of(f"{name} scaling", c[0], SCALINGS), boolean(f"{name} use_fast_accum", c[1])


def _shape(name: str, s: object) -> tuple[int, int, int]:
    if isinstance(s, numbers.Integral) and not isinstance(s, bool):
        s = (s, s, s)
    if not isinstance(s, (tuple, list)) or len(s) != 3:
        raise ValueError(f"{name}: a shape is an int n (for n×n×n) or a tuple (m, n, k); got {s!r}")
    return positive_int(f"{name} m", s[0]), positive_int(f"{name} n", s[1]), positive_int(f"{name} k", s[2])
