"""Training and measuring a language model in each precision: curves, tokens/s, MFU, memory.

Why: the transformer lessons (07 transformers, 09 FP8) compare precisions on the same GPT and
the same synthetic language; these helpers keep that comparison identical everywhere.

- :func:`lm_batches`: a pool of training batches drawn once, up front (generation is not timed);
- :func:`train_lm`: :func:`fp16lab.train.fit` on a language with warm-up + cosine LR, held-out
  loss and *excess loss* over the language's entropy floor;
- :func:`lm_throughput`: tokens/s, model TFLOP/s, MFU and peak memory of training steps;
- :func:`saved_activation_bytes`: bytes autograd keeps for backward (activations), on any device;
- :func:`state_bytes`: bytes of weights, gradients and optimizer state, by kind and dtype;
- :func:`sdpa_kernel_ran`: which SDPA kernel PyTorch dispatched to;
- :func:`sdpa_default_kernel`: which one it picks first on a given GPU (or the CPU), by rule.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from typing import Any

import pandas as pd
import torch
from torch import nn

from fp16lab.checks import (
    boolean,
    function,
    instance,
    integer_tensor,
    non_negative_int,
    optimizer_holds,
    positive_float,
    positive_int,
)
from fp16lab.data import SyntheticLanguage
from fp16lab.device import model_device, parse_device, resolve_device, synchronize
from fp16lab.gpt import GPT, flops_per_token, lm_loss
from fp16lab.precision import autocast, parse_precision, precision_context
from fp16lab.timing import time_windows
from fp16lab.train import Callback, Evaluate, History, ProgressBar, Schedule, amp_step, fit, make_scaler

__all__ = ["lm_batches", "train_lm", "lm_throughput", "saved_activation_bytes", "state_bytes", "sdpa_kernel_ran",
           "sdpa_default_kernel"]

Batches = list[tuple[torch.Tensor, torch.Tensor]]


def _gpt(model: object) -> GPT:
    inner = getattr(model, "_orig_mod", model)  # a torch.compile'd GPT
    if not isinstance(inner, GPT):
        raise ValueError(f"model must be a fp16lab.gpt.GPT (or a torch.compile of one), got {type(model).__name__}")
    return inner


def _optimizer(model: nn.Module, optimizer: object, *, every: bool = True,
               only_model: bool = False) -> "torch.optim.Optimizer | None":
    """None, or an optimizer built on ``model`` (checks.optimizer_holds: the check fit uses too)."""
    if optimizer is not None and not isinstance(optimizer, torch.optim.Optimizer):
        raise ValueError(f"optimizer must be None or a torch.optim.Optimizer over the model's parameters, got {optimizer!r}")
    if optimizer is not None:
        optimizer_holds(model, optimizer, every=every, only_model=only_model)
    return optimizer


def lm_batches(
    lang: SyntheticLanguage, n: int, batch: int, seq_len: int, device: "torch.device | str" = "cpu", seed: int = 0
) -> Batches:
    """``n`` batches ``(inputs, targets)`` of ``(batch, seq_len)`` tokens drawn from ``lang`` on ``device``.

    Defaults: ``device="cpu"`` (a device this machine has), ``seed=0`` (the same seed gives the same batches).
    """
    instance("lang", lang, SyntheticLanguage, "a fp16lab.data.SyntheticLanguage")
    n, batch = positive_int("n", n), positive_int("batch", batch)
    seq_len, seed = positive_int("seq_len", seq_len), non_negative_int("seed", seed)
    dev = resolve_device(parse_device(device))  # None is not a device here: the default is the CPU
    g = torch.Generator(device=dev).manual_seed(seed)
    x, y = lang.batch(n * batch, seq_len, device=dev, generator=g)
    return list(zip(x.split(batch), y.split(batch), strict=True))


def warmup_cosine(steps: int, warmup: int, final: float = 0.1) -> Callable[[int], float]:
    """LR multiplier: linear warm-up over ``warmup`` steps, then cosine down to ``final``."""

    def factor(i: int) -> float:
        if i < warmup:
            return (i + 1) / warmup
        t = min(1.0, (i - warmup) / max(1, steps - warmup))
        return final + (1 - final) * 0.5 * (1 + math.cos(math.pi * t))

    return factor


@torch.no_grad()
def _eval_loss(model: nn.Module, data: Batches, precision: str) -> float:
    was = model.training
    model.eval()
    dev = model_device(model)
    total = torch.zeros((), device=dev)
    with autocast(precision, dev):
        for x, y in data:
            total += lm_loss(model(x), y).float()
    model.train(was)
    return float(total) / len(data)


def train_lm(
    model: nn.Module,
    lang: SyntheticLanguage,
    *,
    steps: int,
    batch: int,
    precision: str = "bf16",
    optimizer: torch.optim.Optimizer | None = None,
    lr: float = 3e-3,
    warmup: int | None = None,
    eval_batches: int = 4,
    eval_every: int | None = None,
    seed: int = 0,
    progress: bool = True,
    desc: str | None = None,
) -> History:
    """Train ``model`` (a GPT) on ``lang`` for ``steps`` steps; return fit's History plus excess loss.

    Defaults: ``precision="bf16"`` (autocast; fp32, tf32, fp16 as in ``fit``; a model whose
    weights are already 16-bit runs in its own dtype with ``precision="fp32"``: "bf16-true"),
    ``optimizer`` AdamW(lr, weight_decay=0, fused on CUDA), ``lr=3e-3`` (the peak: warm-up over
    ``warmup`` = steps // 10 steps, then cosine down to a tenth; a given optimizer's own lr is
    the peak instead), ``eval_batches=4`` held-out
    batches (seed ``seed + 1``) evaluated every ``eval_every`` (default steps // 10) steps and at
    the end, ``seed=0`` for the training batches. ``lang.vocab`` must fit the model's
    ``vocab_size``; ``warmup`` at most ``steps``. Columns added: ``excess`` (training loss minus
    the floor), ``eval_loss``, ``eval_excess``. The same seed gives the same batches to every run.
    """
    gpt = _gpt(model)
    instance("lang", lang, SyntheticLanguage, "a fp16lab.data.SyntheticLanguage")
    steps, batch = positive_int("steps", steps), positive_int("batch", batch)
    positive_float("lr", lr)
    non_negative_int("seed", seed)
    p = parse_precision(precision).value
    warmup = max(1, steps // 10) if warmup is None else positive_int("warmup", warmup)
    if warmup > steps:
        raise ValueError(f"warmup must be <= steps={steps} (the LR would never reach its peak), got {warmup!r}")
    eval_every = max(1, steps // 10) if eval_every is None else positive_int("eval_every", eval_every)
    positive_int("eval_batches", eval_batches)
    _optimizer(model, optimizer)
    boolean("progress", progress)
    if desc is not None and not isinstance(desc, str):
        raise ValueError(f"desc must be a str or None, got {desc!r}")
    if lang.vocab > gpt.cfg.vocab_size:
        raise ValueError(f"lang has vocab={lang.vocab} tokens but the model's vocab_size is {gpt.cfg.vocab_size}: "
                         "build the GPT with vocab_size >= lang.vocab")
    dev = model_device(model)
    T = gpt.cfg.seq_len
    if optimizer is None:
        optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0, fused=dev.type == "cuda")
    sched = torch.optim.lr_scheduler.LambdaLR(optimizer, warmup_cosine(steps, warmup))
    data = lm_batches(lang, steps, batch, T, dev, seed)
    held_out = lm_batches(lang, positive_int("eval_batches", eval_batches), batch, T, dev, seed + 1)
    floor = lang.entropy_floor

    def evaluate(m: nn.Module) -> dict[str, float]:
        loss = _eval_loss(m, held_out, p)
        return {"eval_loss": loss, "eval_excess": loss - floor}

    callbacks: list[Callback] = [Schedule(sched), Evaluate(fn=evaluate, every=eval_every)]
    if progress:
        callbacks.append(ProgressBar(desc))
    hist = fit(model, data, optimizer, precision=p, steps=steps, loss_fn=lm_loss, callbacks=callbacks)
    hist.insert(hist.columns.get_loc("loss") + 1, "excess", hist["loss"] - floor)
    hist.attrs["entropy_floor"] = floor
    return hist


def _time_steps(step: Callable[[], None], steps: int, dev: torch.device) -> tuple[float, float]:
    """Seconds for ``steps`` calls of ``step`` (one window of :func:`fp16lab.timing.time_windows`: CUDA
    events on a GPU) and the peak GiB allocated (NaN off CUDA)."""
    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats(dev)

    def window() -> None:
        for _ in range(steps):
            step()

    (seconds,) = time_windows(window, dev, 1)
    return seconds, torch.cuda.max_memory_allocated(dev) / 2**30 if dev.type == "cuda" else math.nan


def lm_throughput(
    model: nn.Module,
    batch: int,
    *,
    precision: str = "bf16",
    compile: bool = False,
    steps: int = 10,
    warmup: int = 3,
    optimizer: torch.optim.Optimizer | None = None,
    peak_tflops: float | None = None,
) -> dict[str, Any]:
    """Time ``steps`` full training steps (forward, backward, optimizer) of a GPT on random tokens.

    Defaults: ``precision="bf16"`` (autocast; fp16 with a GradScaler; fp32/tf32 set the TF32
    flags), ``compile=False`` (True: ``torch.compile`` of the model's forward and loss; the first
    step's time is reported as ``compile_s``), ``steps=10`` timed after ``warmup=3``, ``optimizer`` AdamW with
    ``fused=True`` on CUDA, ``peak_tflops=None`` (given: ``mfu`` = achieved model TFLOP/s over
    it). FLOPs from :func:`fp16lab.gpt.flops_per_token`. Returns a dict: precision, compiled,
    batch, seq_len, params, ms_per_step, tokens_per_s, model_tflops, mfu, peak_mem_gib
    (CUDA only, else NaN), compile_s. Errors (an OOM) propagate: catch them to make a row.
    """
    gpt = _gpt(model)
    p = parse_precision(precision)
    batch, steps, warmup = positive_int("batch", batch), positive_int("steps", steps), positive_int("warmup", warmup)
    boolean("compile", compile)
    if peak_tflops is not None:
        positive_float("peak_tflops", peak_tflops)
    _optimizer(model, optimizer)
    dev = model_device(model)
    T = gpt.cfg.seq_len
    g = torch.Generator(device=dev).manual_seed(0)
    x = torch.randint(0, gpt.cfg.vocab_size, (batch, T), device=dev, generator=g)
    y = torch.randint(0, gpt.cfg.vocab_size, (batch, T), device=dev, generator=g)
    opt = optimizer or torch.optim.AdamW(model.parameters(), lr=1e-4, fused=dev.type == "cuda")
    scaler = make_scaler(p, dev)

    def loss_of(inputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return lm_loss(model(inputs), targets)

    run = torch.compile(loss_of) if compile else loss_of  # compiled: the FP32 loss fuses into the graph
    model.train()

    batch_xy = [(x, y)]

    def step() -> None:
        amp_step(lambda xy: run(*xy), batch_xy, opt, scaler, precision=p, device=dev)

    with precision_context(p):
        t0 = time.perf_counter()
        step()
        synchronize(dev)
        first_s = time.perf_counter() - t0
        for _ in range(warmup - 1):
            step()
        synchronize(dev)
        seconds, peak = _time_steps(step, steps, dev)
    tokens_per_s = steps * batch * T / seconds
    tflops = flops_per_token(gpt.cfg) * tokens_per_s / 1e12
    return {
        "precision": p.value, "compiled": compile, "batch": batch, "seq_len": T, "params": gpt.param_count(),
        "ms_per_step": 1e3 * seconds / steps, "tokens_per_s": tokens_per_s, "model_tflops": tflops,
        "mfu": tflops / peak_tflops if peak_tflops else math.nan, "peak_mem_gib": peak,
        "compile_s": first_s if compile else 0.0,
    }


def saved_activation_bytes(model: nn.Module, inputs: torch.Tensor, targets: torch.Tensor,
                           precision: str = "fp32") -> int:
    """Bytes autograd saves for backward in one forward + loss of ``model`` (activations), any device.

    Counted through ``torch.autograd.graph.saved_tensors_hooks``, each storage once; the
    parameters themselves are left out (they are not activations), autocast's 16-bit copies of
    the weights are included. Default ``precision="fp32"``. Runs one backward to free the graph.
    """
    instance("model", model, nn.Module, "a torch.nn.Module (a GPT)")
    integer_tensor("inputs", inputs, dims=2, shape="(batch, seq_len)")
    instance("targets", targets, torch.Tensor, "a tensor of target ids")
    p = parse_precision(precision)
    dev = model_device(model)
    params = {q.untyped_storage().data_ptr() for q in model.parameters()}
    seen: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        s = t.untyped_storage()
        if s.data_ptr() not in params:
            seen[s.data_ptr()] = s.nbytes()
        return t

    with precision_context(p), torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        with autocast(p, dev):
            loss = lm_loss(model(inputs), targets)
    loss.backward()
    model.zero_grad(set_to_none=True)
    return sum(seen.values())


def state_bytes(model: nn.Module, optimizer: torch.optim.Optimizer | None = None) -> pd.DataFrame:
    """Bytes held by weights, gradients and optimizer state, one row per (kind, dtype), plus bytes/param.

    Shared tensors (tied weights) count once. The optimizer's scalar step counters are left out.
    """
    instance("model", model, nn.Module, "a torch.nn.Module")
    _optimizer(model, optimizer, every=False, only_model=True)  # another model's state must not count
    n_params = sum(q.numel() for q in model.parameters())
    rows: list[dict[str, Any]] = []
    seen: set[int] = set()

    def add(kind: str, t: torch.Tensor | None) -> None:
        if t is None or t.dim() == 0:
            return
        key = t.untyped_storage().data_ptr()
        if key in seen:
            return
        seen.add(key)
        rows.append({"kind": kind, "dtype": str(t.dtype).replace("torch.", ""), "bytes": t.numel() * t.element_size()})

    for q in model.parameters():
        add("weights", q)
    for q in model.parameters():
        add("gradients", q.grad)
    if optimizer is not None:
        for st in optimizer.state.values():
            for name, t in st.items():
                if isinstance(t, torch.Tensor):
                    add(f"optimizer: {name}", t)
    frame = pd.DataFrame(rows, columns=["kind", "dtype", "bytes"]).groupby(["kind", "dtype"], sort=False, as_index=False).sum()
    frame["bytes_per_param"] = frame["bytes"] / n_params
    return frame


_SDPA_KERNELS = {
    "_scaled_dot_product_flash_attention_for_cpu": "flash (CPU)",
    "_scaled_dot_product_flash_attention": "flash",
    "_scaled_dot_product_efficient_attention": "memory-efficient",
    "_scaled_dot_product_cudnn_attention": "cuDNN",
}


def sdpa_kernel_ran(fn: Callable[[], object]) -> str:
    """Which SDPA kernel ``fn()`` dispatched to: "flash", "memory-efficient", "cuDNN", "flash (CPU)" or "math".

    Read from the ATen operators that reach the dispatcher (a ``TorchDispatchMode``, the
    mechanism of ``torch.utils.flop_counter``): the fused kernels are operators of their own,
    while the math path decomposes into ``bmm`` and softmax. Returns "none" when neither ran;
    several fused kernels are joined with " + ".
    """
    from torch.utils._python_dispatch import TorchDispatchMode

    function("fn", fn, "a function of no arguments that runs attention", n_args=0)
    seen: list[str] = []

    class _Names(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen.append(func.overloadpacket.__name__)
            return func(*args, **(kwargs or {}))

    with _Names():
        fn()
    found = list(dict.fromkeys(_SDPA_KERNELS[n] for n in seen if n in _SDPA_KERNELS))
    if found:
        return " + ".join(found)
    return "math" if "bmm" in seen or "_safe_softmax" in seen else "none"


_SDPA_DTYPES = (torch.float16, torch.bfloat16, torch.float32)


def _cudnn_preferred(capability: tuple[int, int], cudnn_version: int | None) -> bool:
    """torch's ``check_prefer_cudnn_attention``: cuDNN newer than 9.15 on sm_9x/sm_10x, unless deprioritized."""
    off = os.environ.get("TORCH_CUDNN_SDPA_DEPRIORITIZED", "").strip().lower() in ("1", "true", "yes", "on")
    return not off and cudnn_version is not None and cudnn_version > 91500 and capability[0] in (9, 10)


def sdpa_default_kernel(capability: tuple[int, int] | None, dtype: torch.dtype, *,
                        cudnn_version: int | None = -1) -> str:
    """The SDPA kernel PyTorch tries first for dense causal attention (no mask, head width 8..128).

    Why: the default differs by chip, so a lesson can say what a learner's card runs without
    running it. The rule of torch's ``select_sdp_backend`` (``sdp_utils.cpp``,
    ``check_prefer_cudnn_attention``, as of torch 2.14 built for CUDA 13): cuDNN attention first
    on sm_9x and sm_10x (Hopper, data-center Blackwell) when cuDNN is newer than 9.15 and
    ``TORCH_CUDNN_SDPA_DEPRIORITIZED`` is unset; else flash (FP16/BF16, sm_80 to sm_121),
    memory-efficient (sm_50 and newer; BF16 from sm_80), math. ``capability=None`` is the CPU:
    "flash (CPU)". ``cudnn_version`` defaults to the installed cuDNN's (None: none).
    """
    if dtype not in _SDPA_DTYPES:
        raise ValueError(f"dtype must be torch.float16, torch.bfloat16 or torch.float32, got {dtype!r}")
    if capability is None:
        return "flash (CPU)"
    ok = (isinstance(capability, tuple) and len(capability) == 2
          and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in capability))
    if not ok:
        raise ValueError(f"capability must be None (the CPU) or a (major, minor) tuple such as (8, 9), got {capability!r}")
    if cudnn_version is not None:
        instance("cudnn_version", cudnn_version, int, "an int such as 91500 (cuDNN 9.15), -1 (the installed "
                 "cuDNN's, default) or None (no cuDNN)")
    if cudnn_version == -1:
        cudnn_version = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    half = dtype in (torch.float16, torch.bfloat16)
    if half and capability >= (8, 0) and _cudnn_preferred(capability, cudnn_version):
        return "cuDNN"
    if half and (8, 0) <= capability <= (12, 1):
        return "flash"
    if capability >= (5, 0) and (dtype != torch.bfloat16 or capability >= (8, 0)):
        return "memory-efficient"
    return "math"
