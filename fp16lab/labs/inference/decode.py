"""Decoding a language model token by token: a memory-bandwidth problem, measured.

Why: each decode step of a KV-cache transformer multiplies a handful of vectors (one per
sequence in the batch) by every weight matrix, so at small batches it does about one
multiply-add per weight it reads. Its speed is set by how fast the weights (and the KV cache)
stream from memory, not by Tensor Core FLOP/s: halving the bytes (BF16/FP16 instead of FP32)
nearly doubles the tokens per second. This module counts the bytes and measures the rate:

- :func:`decode_bytes`: bytes one decode step of :class:`fp16lab.gpt.GPT` reads (weights, KV
  cache, embedding rows), per step and per token;
- :func:`copy_bandwidth`: the memory bandwidth of a device-to-device copy (counting the bytes
  read *and* written), the practical ceiling to compare against;
- :func:`decode_benchmark`: tokens per second of greedy decoding with a static KV cache, eager or
  replayed from a CUDA graph, with bytes per token, achieved GB/s and the fraction of a given
  bandwidth.

The GPT itself lives in :mod:`fp16lab.gpt` (not changed here): its ``decode_step`` attends over the
whole static cache (``max_len`` positions, masked), so every step reads the full cache whatever
the position: static shapes are what make CUDA graphs possible, and the bytes counted here say so.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import pandas as pd
import torch

from fp16lab.checks import (
    boolean,
    distinct,
    instance,
    non_negative_int,
    one_of,
    positive_float,
    positive_int,
    sequence_of,
)
from fp16lab.device import free_memory, is_oom, model_device, resolve_device
from fp16lab.gpt import GPT, GPTConfig, flops_per_token
from fp16lab.labs.inference.graphs import capture_cuda_graph
from fp16lab.precision import autocast, precision_context
from fp16lab.timing import Timing, time_cuda_events, time_fn

__all__ = ["DecodeBytes", "decode_bytes", "CopyBandwidth", "copy_bandwidth", "GRAPH_MODES", "decode_benchmark",
           "DATASHEET_GB_S", "datasheet_bandwidth"]

GRAPH_MODES = ("eager", "cuda_graph")
_HALF = {"bf16": torch.bfloat16, "fp16": torch.float16}


# Memory bandwidth in GB/s (cited, not measured), keyed by the peak rows of fp16lab.hardware.PEAK_TFLOPS.
# Each row names where the figure is printed. NVIDIA prints the bandwidth for its data-center parts and in
# the GeForce architecture whitepapers; for laptop and mainstream GeForce parts its spec pages give only the
# bus width, so those rows are bus width x the per-pin data rate of the shipping memory (marked "computed").
DATASHEET_GB_S: dict[str, float] = {
    # NVIDIA H200 product page, H200 SXM column: 4.8TB/s. https://www.nvidia.com/en-us/data-center/h200/
    "H200": 4800.0,
    # NVIDIA H100 product page / datasheet: H100 SXM 3.35TB/s, H100 NVL 3.9TB/s; H100 PCIe (80 GB HBM2e)
    # 2TB/s in the H100 datasheet's PCIe column. https://www.nvidia.com/en-us/data-center/h100/
    "H100 SXM": 3350.0, "H100 NVL": 3900.0, "H100 PCIe": 2000.0,
    # NVIDIA A100 datasheet: 40GB (SXM and PCIe) 1,555GB/s; 80GB SXM 2,039GB/s, 80GB PCIe 1,935GB/s
    # (those two in _A100_80GB_GB_S). https://www.nvidia.com/en-us/data-center/a100/
    "A100": 1555.0,
    # NVIDIA A10 datasheet: 600GB/s. https://www.nvidia.com/en-us/data-center/products/a10-gpu/
    "A10": 600.0,
    # NVIDIA L40S datasheet: 864GB/s. https://www.nvidia.com/en-us/data-center/l40s/
    "L40S": 864.0,
    # NVIDIA L4 datasheet: 300GB/s. https://www.nvidia.com/en-us/data-center/l4/
    "L4": 300.0,
    # NVIDIA Ada GPU architecture whitepaper, appendix: RTX 4090, 384-bit GDDR6X at 21 Gbps, 1008 GB/sec.
    # The 4090 D keeps the 4090's memory: 24GB GDDR6X on 384 bits (NVIDIA's China product page, as reported
    # at launch, e.g. https://evertiq.com/news/54972), 21 Gbps, so the same 1008 GB/s.
    # https://images.nvidia.com/aem-dam/Solutions/geforce/ada/nvidia-ada-gpu-architecture.pdf
    "RTX 4090D": 1008.0, "RTX 4090": 1008.0,
    # Computed: NVIDIA's laptop GPU comparison page (https://www.nvidia.com/de-de/geforce/gaming-laptops/compare/)
    # gives 16 GB GDDR6 on 256 bits (4090 Laptop) and 8 GB GDDR6 on 128 bits (4060 Laptop); x 18 Gbps = 576,
    # x 16 Gbps = 256 (the memory speeds third-party spec databases list; a laptop maker may clock it otherwise).
    "RTX 4090 Laptop": 576.0, "RTX 4060 Laptop": 256.0,
    # NVIDIA Ampere GA102 GPU architecture whitepaper: RTX 3090, 384-bit GDDR6X at 19.5 Gbps, 936 GB/sec.
    # https://www.nvidia.com/content/PDF/nvidia-ampere-ga-102-gpu-architecture-whitepaper-v2.pdf
    "RTX 3090": 936.0,
    # Computed: NVIDIA RTX 3060 family page (https://www.nvidia.com/en-us/geforce/graphics-cards/30-series/rtx-3060-3060ti/)
    # gives 12 GB on 192 bits (8 GB on 128 bits); x 15 Gbps GDDR6 = 360 (8 GB: 240, in _RTX_3060_8GB_GB_S).
    "RTX 3060": 360.0,
    # NVIDIA T4 datasheet: 320+ GB/s. https://www.nvidia.com/en-us/data-center/tesla-t4/
    "T4": 320.0,
    # NVIDIA V100 datasheet, SXM2 column (the row the peak table keys): 900GB/s.
    # https://www.nvidia.com/en-us/data-center/v100/
    "V100": 900.0,
}
_A100_80GB_GB_S = {"sxm": 2039.0, "pcie": 1935.0}
_RTX_3060_8GB_GB_S = 240.0


def datasheet_bandwidth(gpu_name: str, memory_gib: float | None = None) -> float | None:
    """The datasheet memory bandwidth (GB/s, cited) of a GPU by name, or None for a chip not in the table.

    Why: a decode step's speed limit is its bytes over this figure; the copy measured by
    :func:`copy_bandwidth` reaches part of it. ``memory_gib`` tells an 80 GB A100 from a 40 GB one
    (and the 80 GB PCIe card from the SXM one, by name), and an 8 GB RTX 3060 from the 12 GB one.
    """
    from fp16lab.hardware import peak_for

    if not isinstance(gpu_name, str) or not gpu_name.strip():
        raise ValueError(f"gpu_name must be a GPU name such as 'NVIDIA H200', got {gpu_name!r}")
    if memory_gib is not None:
        memory_gib = positive_float("memory_gib", memory_gib)  # a finite number of GiB > 0
    peak = peak_for(gpu_name)
    if peak is None:
        return None
    if peak.gpu == "A100" and memory_gib is not None and memory_gib > 60:
        return _A100_80GB_GB_S["pcie" if "pcie" in gpu_name.lower() else "sxm"]
    if peak.gpu == "RTX 3060" and memory_gib is not None and memory_gib < 10:
        return _RTX_3060_8GB_GB_S
    return DATASHEET_GB_S.get(peak.gpu)


def _itemsize(dtype: torch.dtype) -> int:
    return torch.empty((), dtype=dtype).element_size()


def _dtype(name: str, value: object) -> torch.dtype:
    if not isinstance(value, torch.dtype) or not value.is_floating_point:
        raise ValueError(f"{name} must be a floating torch.dtype such as torch.bfloat16, got {value!r}")
    return value


@dataclass(frozen=True)
class DecodeBytes:
    """Bytes one decode step reads, by part; ``per_token`` divides the step by the batch.

    ``weights``: every weight a step multiplies by or normalises with (all blocks, the final
    LayerNorm and the whole output head, read once per step whatever the batch); under autocast
    each matmul weight counts three times (read in FP32, written and read again as a 16-bit copy).
    ``kv_cache``: K and V of every layer, all ``max_len`` positions of every sequence.
    ``lookups``: the embedding rows of the batch's tokens and their position, and the mask row.
    """

    weights: int
    kv_cache: int
    lookups: int
    batch: int

    @property
    def per_step(self) -> int:
        """All bytes read by one step (one new token for each of ``batch`` sequences)."""
        return self.weights + self.kv_cache + self.lookups

    @property
    def per_token(self) -> float:
        """Bytes read per generated token: :attr:`per_step` / batch."""
        return self.per_step / self.batch

    def as_dict(self) -> dict[str, float]:
        """The parts, the step total and the per-token bytes."""
        return {**asdict(self), "per_step": self.per_step, "per_token": self.per_token}


def decode_bytes(
    cfg: GPTConfig,
    batch: int = 1,
    *,
    max_len: int | None = None,
    weight_dtype: torch.dtype = torch.bfloat16,
    cache_dtype: torch.dtype | None = None,
    autocast_dtype: torch.dtype | None = None,
) -> DecodeBytes:
    """The bytes one ``GPT.decode_step`` reads for ``batch`` sequences with a cache of ``max_len``.

    Counts, with ``d`` = d_model, ``L`` layers, ``r`` = mlp_ratio, ``V`` = padded vocabulary:
    matmul weights ``L·(4 + 2r)·d²`` plus the head ``V·d`` (and their biases), LayerNorms
    ``(4L + 2)·d``, all in ``weight_dtype``; the KV cache ``2·L·batch·max_len·d`` in
    ``cache_dtype``; the lookups ``batch·d + d`` embedding values and a ``max_len``-byte mask row.
    Writes (the new K and V, the activations) are not counted. Defaults: ``batch=1``,
    ``max_len=cfg.seq_len``, BF16 weights, ``cache_dtype`` = the weights' (under autocast: the
    autocast dtype), ``autocast_dtype=None``.
    """
    instance("cfg", cfg, GPTConfig, "a GPTConfig")
    batch = positive_int("batch", batch)
    T = cfg.seq_len if max_len is None else positive_int("max_len", max_len)
    if T > cfg.seq_len:
        raise ValueError(f"max_len must be <= seq_len={cfg.seq_len}, got {max_len!r}")
    w = _itemsize(_dtype("weight_dtype", weight_dtype))
    if autocast_dtype is not None and autocast_dtype not in _HALF.values():
        raise ValueError(f"autocast_dtype must be None, torch.bfloat16 or torch.float16, got {autocast_dtype!r}")
    if autocast_dtype is not None and weight_dtype != torch.float32:
        raise ValueError(f"autocast_dtype={autocast_dtype} is for FP32 weights (each matmul casts them); "
                         f"weight_dtype is {weight_dtype}: pass autocast_dtype=None for cast weights")
    low = None if autocast_dtype is None else _itemsize(autocast_dtype)
    default_cache = weight_dtype if autocast_dtype is None else autocast_dtype
    c = _itemsize(_dtype("cache_dtype", cache_dtype) if cache_dtype is not None else default_cache)
    d, L, r, V = cfg.d_model, cfg.n_layers, cfg.mlp_ratio, cfg.padded_vocab
    matmul = L * (4 + 2 * r) * d * d + V * d
    if cfg.bias:
        matmul += L * (4 + r) * d + L * d + V  # qkv, attn proj, fc, mlp proj biases; head bias
    norms = (4 * L + 2) * d
    per_matmul_value = w if low is None else w + 2 * low
    weights = matmul * per_matmul_value + norms * w
    kv = 2 * L * batch * T * d * c
    lookups = (batch * d + d) * w + T
    return DecodeBytes(weights=weights, kv_cache=kv, lookups=lookups, batch=batch)


@dataclass(frozen=True)
class CopyBandwidth:
    """A device-to-device copy's speed: ``gb_s`` counts bytes read plus bytes written."""

    nbytes: int
    seconds: float
    iqr_s: float
    device: str
    method: str

    @property
    def gb_s(self) -> float:
        """(bytes read + bytes written) / seconds / 1e9: ``2 · nbytes`` moved per copy."""
        return 2 * self.nbytes / self.seconds / 1e9

    def as_dict(self) -> dict[str, Any]:
        """Fields plus ``gb_s`` and a note saying what is counted."""
        return {**asdict(self), "gb_s": self.gb_s, "counted": "bytes read + bytes written"}


def copy_bandwidth(
    device: "torch.device | str | None" = None, *, nbytes: int = 2**29, repeats: int = 20, min_run_time: float = 0.2
) -> CopyBandwidth:
    """Time ``dst.copy_(src)`` of ``nbytes`` on ``device``: the memory bandwidth a kernel can reach.

    The copy reads ``nbytes`` and writes ``nbytes``; :attr:`CopyBandwidth.gb_s` counts both
    (a datasheet's bandwidth is the sum of both directions too). Make ``nbytes`` much larger
    than the last-level cache. CUDA: median of ``repeats`` CUDA-event timings; elsewhere
    :func:`fp16lab.timing.time_fn`. Defaults: the best device, 512 MiB, 20 repeats,
    ``min_run_time=0.2`` s (CPU). The buffers are freed afterwards.
    """
    dev = resolve_device(device)
    nbytes = positive_int("nbytes", nbytes)
    repeats = positive_int("repeats", repeats)
    min_run_time = positive_float("min_run_time", min_run_time)
    try:
        src = torch.ones(nbytes, dtype=torch.uint8, device=dev)
        dst = torch.empty_like(src)
    except RuntimeError as exc:  # out of memory (torch.OutOfMemoryError is a RuntimeError) or too large
        free_memory(dev)
        raise ValueError(f"nbytes={nbytes!r}: two buffers of that size do not fit on {str(dev)!r} "
                         f"({type(exc).__name__}); use a smaller nbytes") from None
    t = _time_copy(src, dst, repeats, min_run_time)
    del src, dst
    free_memory(dev)
    return CopyBandwidth(nbytes, t.median_s, t.iqr_s, str(dev), t.method)


def _time_copy(src: torch.Tensor, dst: torch.Tensor, repeats: int, min_run_time: float) -> Timing:
    if src.device.type == "cuda":
        return time_cuda_events(lambda: dst.copy_(src), warmup=3, repeats=repeats)
    return time_fn(lambda: dst.copy_(src), warmup=2, min_run_time=min_run_time)


# --------------------------------------------------------------------------- the benchmark


@dataclass(frozen=True)
class _DecodePlan:
    batch_sizes: list[int]
    steps: int
    max_len: int
    graph: str
    autocast: torch.dtype | None
    cache_dtype: torch.dtype
    weight_dtype: torch.dtype
    device: torch.device
    bandwidth_gb_s: float | None
    min_run_time: float
    warmup: int
    label: str


def _plan(model: object, batch_sizes: object, steps: object, max_len: object, graph: object, autocast: object,
          bandwidth_gb_s: object, min_run_time: object, warmup: object, label: object) -> _DecodePlan:
    instance("model", model, GPT, "an fp16lab.gpt.GPT")
    assert isinstance(model, GPT)
    batches = distinct("batch_sizes", sequence_of("batch_sizes", batch_sizes, example="[1, 8]", item=positive_int))
    cfg = model.cfg
    T = cfg.seq_len if max_len is None else positive_int("max_len", max_len)
    if T > cfg.seq_len:
        raise ValueError(f"max_len must be <= the model's seq_len={cfg.seq_len}, got {max_len!r}")
    n = positive_int("steps", steps)
    if n > T:
        raise ValueError(f"steps must be <= max_len={T} (one cache position per step), got {steps!r}")
    g = one_of("graph", graph, GRAPH_MODES)
    dev = model_device(model)
    if g == "cuda_graph" and dev.type != "cuda":
        raise ValueError(f"graph='cuda_graph' needs the model on a CUDA GPU; it is on {str(dev)!r} (use 'eager')")
    ac = None if autocast is None else _HALF[one_of("autocast", autocast, tuple(_HALF))]
    w = model.wte.weight.dtype
    if ac is not None and w != torch.float32:
        raise ValueError(f"autocast={autocast!r} is for a model with FP32 weights; this one's are {w}")
    bw = None if bandwidth_gb_s is None else positive_float("bandwidth_gb_s", bandwidth_gb_s)
    if label is not None and (not isinstance(label, str) or not label.strip()):
        raise ValueError(f"label must be a non-empty string or None, got {label!r}")
    name = label or (f"{str(w).replace('torch.', '')} weights" + (f", {autocast} autocast" if ac else ""))
    return _DecodePlan(batches, n, T, g, ac, ac or w, w, dev, bw, positive_float("min_run_time", min_run_time),
                       non_negative_int("warmup", warmup), name)


def _step_fn(model: GPT, tok: torch.Tensor, pos: torch.Tensor, plan: _DecodePlan) -> Callable[[], None]:
    """One greedy step that feeds itself: next token into ``tok``, position + 1 (mod max_len) into ``pos``."""
    precision = {torch.float16: "fp16", torch.bfloat16: "bf16"}.get(plan.autocast, "fp32")  # type: ignore[arg-type]

    def step() -> None:
        # cache_enabled=False: no weight-cast cache, required inside CUDA graphs
        with autocast(precision, plan.device, cache_enabled=False):
            logits = model.decode_step(tok, pos)
        tok.copy_(logits[:, -1].argmax(-1, keepdim=True))
        pos.copy_(torch.remainder(pos + 1, plan.max_len))

    return step


def _attention_kernels(device: torch.device) -> contextlib.AbstractContextManager[Any]:
    """On CUDA, SDPA restricted to the memory-efficient kernel (math as fallback): it takes the cache's
    boolean mask in FP32, FP16 and BF16 on every supported GPU and is safe to capture in a CUDA graph
    (cuDNN's attention has had bugs under graph capture). Elsewhere, PyTorch's own choice."""
    if device.type != "cuda":
        return contextlib.nullcontext()
    from torch.nn.attention import SDPBackend, sdpa_kernel

    return sdpa_kernel([SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH])


def _one_batch(model: GPT, batch: int, plan: _DecodePlan) -> dict[str, Any]:
    with _attention_kernels(plan.device):
        return _time_batch(model, batch, plan)


def _time_batch(model: GPT, batch: int, plan: _DecodePlan) -> dict[str, Any]:
    model.setup_cache(batch, plan.max_len, dtype=plan.cache_dtype)
    tok = torch.zeros(batch, 1, dtype=torch.long, device=plan.device)
    pos = torch.zeros(1, dtype=torch.long, device=plan.device)
    step = _step_fn(model, tok, pos, plan)
    capture_s = math.nan
    if plan.graph == "cuda_graph":
        captured = capture_cuda_graph(step, warmup=3, device=plan.device)
        capture_s, one = captured.capture_s, captured.replay
    else:
        one = step

    def run() -> None:  # greedy-decode plan.steps tokens for every sequence, from token 0 at position 0
        tok.zero_()
        pos.zero_()
        with torch.inference_mode():
            for _ in range(plan.steps):
                one()

    t = time_fn(run, warmup=plan.warmup, min_run_time=plan.min_run_time)
    return _decode_row(model.cfg, batch, plan, t.median_s, t.iqr_s, capture_s)


def _decode_row(cfg: GPTConfig, batch: int, plan: _DecodePlan, seconds: float, iqr_s: float,
                capture_s: float) -> dict[str, Any]:
    step_s = seconds / plan.steps
    b = decode_bytes(cfg, batch, max_len=plan.max_len, weight_dtype=plan.weight_dtype,
                     cache_dtype=plan.cache_dtype, autocast_dtype=plan.autocast)
    gb_s = b.per_step / step_s / 1e9
    flops = flops_per_token(cfg, training=False, seq_len=plan.max_len)
    return {"label": plan.label, "batch": batch, "status": "ok", "graph": plan.graph, "max_len": plan.max_len,
            "ms_per_step": step_s * 1e3, "iqr_ms_per_step": iqr_s / plan.steps * 1e3,
            "tokens_per_s": batch / step_s, "weights_gb": b.weights / 1e9, "kv_cache_gb": b.kv_cache / 1e9,
            "bytes_per_step": b.per_step, "bytes_per_token": b.per_token, "achieved_gb_s": gb_s,
            "fraction_of_copy": gb_s / plan.bandwidth_gb_s if plan.bandwidth_gb_s else math.nan,
            "achieved_tflops": flops * batch / step_s / 1e12, "flops_per_byte": flops * batch / b.per_step,
            "capture_s": capture_s}


def decode_benchmark(
    model: GPT,
    batch_sizes: Sequence[int] = (1,),
    *,
    steps: int = 32,
    max_len: int | None = None,
    graph: str = "eager",
    autocast: str | None = None,
    bandwidth_gb_s: float | None = None,
    min_run_time: float = 0.2,
    warmup: int = 1,
    label: str | None = None,
    progress: bool = False,
) -> pd.DataFrame:
    """Tokens per second of greedy KV-cache decoding of ``model`` for each batch size.

    The model decodes in the dtype of its weights (cast it first), or under
    ``autocast="bf16"``/``"fp16"`` with FP32 weights; the cache has the compute dtype. Each
    timed call decodes ``steps`` tokens per sequence from position 0 (each step feeds its
    argmax back; the attention reads the whole ``max_len`` cache), replayed from a CUDA graph
    of one step with ``graph="cuda_graph"``. Each row: ms per step, tokens/s, the bytes of
    :func:`decode_bytes` per step and per token, achieved GB/s and, given ``bandwidth_gb_s``
    (e.g. :func:`copy_bandwidth`'s), the fraction of it; achieved TFLOP/s and FLOPs per byte
    (forward FLOPs of :func:`fp16lab.gpt.flops_per_token` at ``max_len``). On CUDA the attention
    runs SDPA's memory-efficient kernel (math as fallback). Out-of-memory becomes a row. The
    model's cache is dropped afterwards.

    Defaults: batch 1, ``steps=32``, ``max_len=cfg.seq_len``, eager, no autocast, no bandwidth,
    ``min_run_time=0.2`` s, ``warmup=1`` call, label from the dtypes, no progress bar.
    """
    plan = _plan(model, batch_sizes, steps, max_len, graph, autocast, bandwidth_gb_s, min_run_time, warmup, label)
    items: Any = plan.batch_sizes
    if boolean("progress", progress):
        from tqdm.auto import tqdm

        items = tqdm(plan.batch_sizes, desc=plan.label)
    rows = []
    true_fp32 = plan.weight_dtype == torch.float32 and plan.autocast is None
    for b in items:
        try:
            with precision_context("fp32") if true_fp32 else contextlib.nullcontext():  # FP32 = TF32 off
                rows.append(_one_batch(model, b, plan))
        except Exception as exc:
            if not is_oom(exc):
                raise
            rows.append({"label": plan.label, "batch": b, "status": "out of memory", "graph": plan.graph,
                         "max_len": plan.max_len})
        finally:
            model.drop_cache()
            free_memory(plan.device)
    return pd.DataFrame(rows)
