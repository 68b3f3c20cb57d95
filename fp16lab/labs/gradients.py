"""Lesson 01's lab: a small MLP trained in true fp32 whose last step's gradients the lesson puts on fp16's line.

The lesson keeps its subject (where the gradients fall, what a loss scale does to them) in the notebook;
this module holds the machinery: the teacher/student data, the model, the hooks that record every Linear
layer's output gradient, and the training loop (:func:`train_student`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from fp16lab.checks import non_negative_int, positive_float, positive_int
from fp16lab.device import resolve_device
from fp16lab.precision import precision_context

__all__ = ["StudentRun", "train_student"]


@dataclass
class StudentRun:
    """What the lesson reads from one run: the losses and the last step's gradients."""

    model: nn.Sequential
    losses: list[float]
    param_grads: list[torch.Tensor]       # every parameter's gradient, in model.parameters() order
    activation_grads: list[torch.Tensor]  # each Linear output's gradient, in backward order (last layer first)
    classes: int


def train_student(hidden: int, batch: int, steps: int, device: torch.device | str | None = None, *,
                  dim_in: int = 32, classes: int = 10, seed: int = 0, lr: float = 3e-3) -> StudentRun:
    """Train a 4-layer ReLU MLP on a random teacher's labels in true fp32 (TF32 off), so its gradients are fp32's."""
    hidden, batch, steps = positive_int("hidden", hidden), positive_int("batch", batch), positive_int("steps", steps)
    dim_in, classes = positive_int("dim_in", dim_in), positive_int("classes", classes, minimum=2)
    seed = non_negative_int("seed", seed)
    lr = positive_float("lr", lr)
    dev = resolve_device(device)
    torch.manual_seed(seed)
    teacher = nn.Sequential(nn.Linear(dim_in, 64), nn.Tanh(), nn.Linear(64, classes)).to(dev)
    inputs = torch.randn(16 * batch, dim_in, device=dev)
    with torch.no_grad():
        labels = teacher(inputs).argmax(dim=1)
    model = nn.Sequential(
        nn.Linear(dim_in, hidden), nn.ReLU(),
        nn.Linear(hidden, hidden), nn.ReLU(),
        nn.Linear(hidden, hidden), nn.ReLU(),
        nn.Linear(hidden, classes),
    ).to(dev)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    activation_grads: list[torch.Tensor] = []

    def keep_output_grad(module: nn.Module, args: object, output: torch.Tensor) -> None:
        output.register_hook(lambda g: activation_grads.append(g.detach().clone()))

    for layer in model:
        if isinstance(layer, nn.Linear):
            layer.register_forward_hook(keep_output_grad)
    losses: list[float] = []
    with precision_context("fp32"):  # true fp32: TF32 off for matmuls
        for _ in range(steps):
            idx = torch.randint(0, inputs.shape[0], (batch,), device=dev)
            activation_grads.clear()
            loss = nn.functional.cross_entropy(model(inputs[idx]), labels[idx])
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
    param_grads = [p.grad for p in model.parameters() if p.grad is not None]
    return StudentRun(model, losses, param_grads, list(activation_grads), classes)
