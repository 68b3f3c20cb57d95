"""AdamW for weights stored in BF16/FP16 ("bf16-true"), with three ways to apply the update.

Why: with 16-bit weights, ``w + update`` is rounded to 16 bits, and an update smaller than
half the spacing between neighbouring 16-bit numbers near ``w`` is lost entirely (BF16 has 8
significant bits: around 1.0 the spacing is 2**-7 ≈ 0.008, so a LayerNorm gain never moves
under an update of 1e-3). ``update`` chooses what happens to the rounding error:

- ``"nearest"``: round to nearest and forget the error (plain bf16-true training);
- ``"kahan"``: Kahan-compensated summation: a 16-bit buffer per weight keeps the part of
  each update that rounding dropped and adds it back next step (+2 bytes per parameter);
- ``"master"``: an FP32 master copy receives the update and the 16-bit weight is a rounded
  copy of it (+4 bytes per parameter: what AMP avoids by keeping FP32 weights).

Adam's moments are kept in FP32 in every mode, so the modes differ only in the weight
update. :attr:`AdamW16.rounded_away` is the share of weight elements whose nonzero update
left the stored weight unchanged in the last step.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
from torch import nn

from fp16lab.checks import one_of, positive_float

__all__ = ["AdamW16", "UPDATES"]

UPDATES = ("nearest", "kahan", "master")


class AdamW16(torch.optim.Optimizer):
    """AdamW (decoupled weight decay) for 16-bit weights; FP32 moments; ``update`` as in the module doc.

    Defaults: ``lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, update="kahan"``.
    ``params``: ``model.parameters()`` or param-group dicts; a group's own lr, betas, eps and
    weight_decay are checked like the defaults (also in :meth:`add_param_group`).
    """

    def __init__(
        self,
        params: Iterable[torch.Tensor] | Iterable[dict],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        update: str = "kahan",
    ) -> None:
        one_of("update", update, UPDATES)
        defaults = _hyperparameters(dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay), "")
        if isinstance(params, (torch.Tensor, nn.Module, str, dict)) or not isinstance(params, Iterable):
            raise ValueError("params must be an iterable of tensors or of param-group dicts (e.g. model.parameters()), "
                             f"got {type(params).__name__}")
        params = _param_list(params)
        super().__init__(params, defaults)
        self.update = update
        self.rounded_away = torch.zeros(())

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """torch's ``add_param_group`` after checking the group's own hyperparameters."""
        if isinstance(param_group, dict):
            _hyperparameters({k: v for k, v in param_group.items() if k != "params"}, "param group's ")
        super().add_param_group(param_group)

    @torch.no_grad()
    def step(self, closure=None):
        """One AdamW step; sets :attr:`rounded_away` (a 0-dim tensor, no host sync)."""
        if closure is not None and not callable(closure):
            raise ValueError(f"closure must be None or a function returning the loss, got {closure!r}")
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        lost, total = [], 0
        for group in self.param_groups:
            lr, (b1, b2), eps, wd = group["lr"], group["betas"], group["eps"], group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                st = self.state[p]
                if not st:
                    st["step"] = 0
                    st["exp_avg"] = torch.zeros_like(p, dtype=torch.float32)
                    st["exp_avg_sq"] = torch.zeros_like(p, dtype=torch.float32)
                    if self.update == "kahan":
                        st["compensation"] = torch.zeros_like(p)
                    elif self.update == "master":
                        st["master"] = p.detach().float().clone()
                st["step"] += 1
                t, g = st["step"], p.grad.float()
                st["exp_avg"].lerp_(g, 1 - b1)
                st["exp_avg_sq"].mul_(b2).addcmul_(g, g, value=1 - b2)
                denom = (st["exp_avg_sq"] / (1 - b2**t)).sqrt_().add_(eps)
                old = p.detach().clone()
                w = st["master"] if self.update == "master" else old.float()  # never an alias of p
                delta = st["exp_avg"] / denom * (-lr / (1 - b1**t)) - (lr * wd) * w
                if self.update == "nearest":
                    p.copy_(w + delta)
                elif self.update == "kahan":
                    y = delta + st["compensation"].float()  # this step's update plus what was dropped before
                    p.copy_(w + y)
                    st["compensation"].copy_(y - (p.float() - w))  # what rounding dropped this time
                else:
                    st["master"].add_(delta)
                    p.copy_(st["master"])
                lost.append(((p == old) & (delta != 0)).sum())
                total += p.numel()
        if lost:
            self.rounded_away = torch.stack(lost).sum() / total
        return loss


def _param_list(params: Iterable[Any]) -> list[Any]:
    """``params`` as a list, each entry a leaf floating-point tensor or a param-group dict with ``'params'``.

    Checked here so that a wrong entry is named, not refused from deep inside ``torch.optim``.
    """
    items = list(params)
    if not items:
        raise ValueError("params is empty: pass the parameters to train, e.g. AdamW16(model.parameters()) "
                         "(a model without parameters, or an iterator already used up, gives none)")
    for i, p in enumerate(items):
        if isinstance(p, dict):
            if "params" not in p:
                raise ValueError(f"params[{i}] is a param group without 'params': {sorted(p)!r}")
            continue
        if not isinstance(p, torch.Tensor):
            raise ValueError(f"params[{i}] must be a tensor (a parameter) or a param-group dict, got {type(p).__name__}")
        if not p.is_floating_point() or not p.is_leaf:
            why = f"dtype {p.dtype}" if not p.is_floating_point() else "a non-leaf tensor (computed from others)"
            raise ValueError(f"params[{i}] must be a leaf floating-point tensor (a model's parameter), got {why}")
    return items


def _hyperparameters(values: dict[str, Any], where: str) -> dict[str, Any]:
    """Check lr, eps, weight_decay (finite, >= 0) and betas (a pair in [0, 1)) where present; betas as floats."""
    out = dict(values)
    for name in ("lr", "eps", "weight_decay"):
        if name in values:
            positive_float(where + name, values[name], allow_zero=True)
    if "betas" in values:
        betas = values["betas"]
        ok = isinstance(betas, tuple) and len(betas) == 2
        try:
            ok = ok and all(positive_float("beta", b, allow_zero=True) < 1.0 for b in betas)
        except ValueError:
            ok = False
        if not ok:
            raise ValueError(f"{where}betas must be a pair (tuple) of numbers in [0, 1), got {betas!r}")
        out["betas"] = tuple(float(b) for b in betas)
    return out
