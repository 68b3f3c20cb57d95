"""Lesson 10's exercise checks: each computes the answer itself and shows only the verdict or a hint."""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from fp16lab.course.answers import verdict
from fp16lab.course.i18n import tr

__all__ = ["TEN_GBE_BYTES_PER_S", "check_ddp_by_hand", "check_wire_dtype", "check_flushed", "check_fsdp_choice"]

TEN_GBE_BYTES_PER_S = 10e9 / 8  # 10 Gbit/s Ethernet line rate, in bytes (cited: IEEE 802.3ae)


def _need(ok: object, hint: str) -> None:
    """An intermediate condition: the hint when it fails, nothing printed when it holds."""
    if not ok:
        raise AssertionError(hint)


def _grad(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    model.zero_grad()
    F.cross_entropy(model(x), y).backward()
    return model[0].weight.grad.clone()  # type: ignore[index]


def check_ddp_by_hand(half_grads: Any, avg_grad: Any, model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> None:
    """Exercise 1: two halves' gradients, and their mean equals the whole batch's gradient."""
    _need(isinstance(half_grads, (list, tuple)) and len(half_grads) == 2, tr("half_grads: one gradient per half"))
    halves = list(zip(x.chunk(2), y.chunk(2), strict=True))
    for g, (xs, ys) in zip(half_grads, halves, strict=True):
        _need(torch.is_tensor(g) and torch.allclose(g, _grad(model, xs, ys), atol=1e-7),
                tr("each entry of half_grads is the gradient of one half's mean loss"))
    full = _grad(model, x, y)
    verdict(torch.is_tensor(avg_grad) and avg_grad.shape == full.shape
            and torch.allclose(avg_grad, full, rtol=1e-5, atol=1e-7),
            tr("average the halves' gradients: DDP divides the sum by the number of ranks"))


def _ring_seconds(params: float, wire_bytes: int, n: int, bandwidth: float) -> float:
    return 2 * (n - 1) / n * params * wire_bytes / bandwidth


def check_wire_dtype(choice: Any, grad_seconds: Any, *, params: float, bf16_measured: bool) -> None:
    """Exercise 2: BF16 training on two boxes over 10 GbE: which gradient dtype, and its time per step."""
    _need(choice in ("fp32", "fp16", "bf16"), tr("choice is one of 'fp32', 'fp16', 'bf16'"))
    _need(choice != "fp32", tr("FP32 gradients put twice the bytes on a link that is already the bottleneck"))
    _need(choice != "fp16", tr("BF16 training has no loss scale: FP16 on the wire flushes small gradients "
                              "to zero (exercise 3) and can overflow large ones; BF16 keeps FP32's range"))
    want = _ring_seconds(params, 2, 2, TEN_GBE_BYTES_PER_S)
    _need(isinstance(grad_seconds, (int, float)) and not isinstance(grad_seconds, bool),
          tr("grad_seconds is a number of seconds"))
    assert isinstance(grad_seconds, (int, float))
    _need(not math.isclose(float(grad_seconds) * 8, want, rel_tol=0.02),
          tr("10 GbE carries 10 Gbit/s: divide by its bytes per second, an eighth of that"))
    _need(not math.isclose(float(grad_seconds), want * 2, rel_tol=0.02),
          tr("a BF16 gradient is 2 bytes on the wire, not 4"))
    verdict(math.isclose(float(grad_seconds), want, rel_tol=0.02),
            tr("grad_seconds: section 8's ring all-reduce time for two ranks, with your dtype's bytes per parameter"))
    if not bf16_measured:
        print(tr("(this torch build cannot run bf16_compress_hook; on a CUDA build it can)"))


def check_flushed(flushed: Any, flushed_scaled: Any, g: torch.Tensor, world: int = 8) -> None:
    """Exercise 3: the fraction of a bucket that FP16 compression turns into 0, without and with the scale."""
    def zeros(scale: float) -> float:
        wire = (g * scale).to(torch.float16).div_(world)
        return float(((wire == 0) & (g != 0)).float().mean())

    for value, name in ((flushed, "flushed"), (flushed_scaled, "flushed_scaled")):
        _need(isinstance(value, (int, float)) and 0 <= float(value) <= 1, tr("{name} is a fraction between 0 and 1", name=name))
    _need(abs(float(flushed) - zeros(1.0)) < 1e-9, tr("cast g_ex to float16, then divide by 8, and count the zeros"))
    verdict(abs(float(flushed_scaled) - zeros(2.0**16)) < 1e-9, tr("multiply by the scale 2**16 before the cast"))


def check_fsdp_choice(use_fsdp: Any, gib_per_gpu: Any, *, ddp_bytes_per_param: float,
                      fsdp_bytes_per_param: float, params: float = 1.3e9) -> None:
    """Exercise 4: DDP or FSDP2 for 1.3B parameters on two 24 GB cards, from the measured bytes per parameter."""
    _need(isinstance(use_fsdp, bool), tr("use_fsdp is True or False"))
    ddp_gib = float(ddp_bytes_per_param) * params / 2**30
    _need(use_fsdp is bool(ddp_gib > 0.5 * 24e9 / 2**30),
          tr("compare DDP's bytes per GPU with half the card: is the other half left for gradients and activations?"))
    want = float(fsdp_bytes_per_param if use_fsdp else ddp_bytes_per_param) * params / 2**30
    ok = isinstance(gib_per_gpu, (int, float)) and not isinstance(gib_per_gpu, bool)
    ok = ok and math.isclose(float(gib_per_gpu), want, rel_tol=0.02)
    verdict(ok, tr("gib_per_gpu: section 7's measured held bytes per parameter (of the setup you chose) for 1.3 "
                   "billion parameters, in GiB (2**30 bytes)"))
