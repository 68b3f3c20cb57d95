"""A synthetic language generated locally, with learnable structure and a KNOWN entropy floor.

Why: a language model's loss means something only against the best loss possible. Here the
best loss is known exactly, so "excess loss over the floor" measures what training (and its
precision) left on the table. Nothing is downloaded.

The language is a sparse Markov chain of order ``order`` over ``vocab`` tokens:

- every sequence starts with ``order`` copies of the start token ``0`` (visible to the
  model, so the chain's state is always known from the tokens seen so far);
- the next token depends on the last ``order`` tokens (the context) only: a hash of the
  context picks ``branching`` distinct successors (an arithmetic progression modulo
  ``vocab`` with a context-dependent start and stride, so they never collide) and the
  ``j``-th successor has probability ``p_j ∝ exp(-j / temperature)``.

Every context uses the same probabilities (only *which* tokens follow differs), so every
token after the start has conditional entropy exactly ``H(p) = -Σ p_j log p_j`` given its
history, whatever the context: that is :attr:`SyntheticLanguage.entropy_floor` (nats per
token). A model reaches it only by learning, for each context, which tokens follow (a
table of ``vocab**order`` contexts): with ``order >= 2`` that needs attention to earlier
positions, not just the current token.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from fp16lab.checks import instance, integer_tensor, positive_float, positive_int
from fp16lab.device import parse_device, resolve_device

__all__ = ["SyntheticLanguage"]

_MASK31 = 0x7FFFFFFF
# Odd multipliers below 2**31: products of two values below 2**31 stay below 2**62 (no int64 overflow).
_M1, _M2, _M3 = 0x2C1B3C6D, 0x297A2D39, 0x5BD1E995 & _MASK31
_TABLE_MAX = 1 << 20  # up to this many contexts, successors come from a precomputed table


def _mix(h: torch.Tensor) -> torch.Tensor:
    """A 31-bit integer finaliser (xor-shift-multiply rounds) on int64 tensors."""
    h = h ^ (h >> 16)
    h = (h * _M1) & _MASK31
    h = h ^ (h >> 15)
    h = (h * _M2) & _MASK31
    return h ^ (h >> 16)


@dataclass(frozen=True)
class SyntheticLanguage:
    """A sparse order-``order`` Markov language whose per-token entropy is known exactly.

    Defaults: ``vocab=64``, ``order=2``, ``branching=4`` successors per context,
    ``temperature=1.0``, ``seed=0``. ``branching`` must be at most ``vocab - 1``.
    """

    vocab: int = 64
    order: int = 2
    branching: int = 4
    temperature: float = 1.0
    seed: int = 0
    probs: torch.Tensor = field(init=False, repr=False, compare=False)
    _tables: dict = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for name, low in (("vocab", 3), ("order", 1), ("branching", 1), ("seed", 0)):
            object.__setattr__(self, name, positive_int(name, getattr(self, name), minimum=low))  # numpy ints as int
        if self.branching > self.vocab - 1:
            raise ValueError(f"branching must be <= vocab - 1 = {self.vocab - 1}, got {self.branching!r}")
        t = positive_float("temperature", self.temperature)
        logits = -torch.arange(self.branching, dtype=torch.float64) / t
        object.__setattr__(self, "probs", torch.softmax(logits, 0))
        object.__setattr__(self, "_tables", {})

    def _table(self, device: torch.device) -> torch.Tensor | None:
        """All contexts' successors ``(vocab**order, branching)``, cached per device; None when too many."""
        if self.contexts > _TABLE_MAX:
            return None
        key = str(device)
        if key not in self._tables:
            idx = torch.arange(self.contexts, device=device)
            digits = torch.stack([(idx // self.vocab**k) % self.vocab for k in reversed(range(self.order))], -1)
            self._tables[key] = self._successors(digits)
        return self._tables[key]

    @property
    def entropy_floor(self) -> float:
        """Exact entropy of every token after the start, in nats: the lowest loss any model can reach."""
        p = self.probs
        return float(-(p * p.log()).sum())

    @property
    def contexts(self) -> int:
        """How many contexts the chain has (``vocab ** order``): the table a model must learn."""
        return self.vocab**self.order

    def successors(self, context: torch.Tensor) -> torch.Tensor:
        """The ``branching`` possible next tokens of each context, most likely first.

        ``context``: integer tensor ``(..., order)``; returns ``(..., branching)`` int64.
        """
        integer_tensor("context", context, high=self.vocab, shape=f"(..., {self.order})")
        if context.shape[-1:] != (self.order,):
            raise ValueError(f"context must have shape (..., {self.order}), got {tuple(context.shape)}")
        return self._successors(context)

    def _successors(self, context: torch.Tensor) -> torch.Tensor:
        h = torch.full(context.shape[:-1], self.seed + 1, dtype=torch.int64, device=context.device)
        for i in range(self.order):
            h = _mix(((h * _M3) & _MASK31) ^ (context[..., i].long() + 1))
        start = h % self.vocab
        stride = 1 + _mix(h ^ 0x5555) % max(1, (self.vocab - 1) // max(1, self.branching - 1))
        j = torch.arange(self.branching, device=context.device)
        return (start.unsqueeze(-1) + j * stride.unsqueeze(-1)) % self.vocab

    def sample(
        self, n: int, length: int, *, device: "torch.device | str" = "cpu", generator: torch.Generator | None = None
    ) -> torch.Tensor:
        """``n`` raw sequences of ``length`` tokens (int64), each starting with ``order`` start tokens (0).

        Defaults: ``device="cpu"`` (a device this machine has), ``generator=None`` (one given must
        live on ``device``). :meth:`batch` turns these into model inputs and targets.
        """
        n, length = positive_int("n", n), positive_int("length", length, minimum=self.order + 1)
        device = resolve_device(parse_device(device))  # None is not a device here: the default is the CPU
        if generator is not None:
            instance("generator", generator, torch.Generator, "None or a torch.Generator")
            if generator.device.type != device.type:
                raise ValueError(f"generator lives on {generator.device}, the samples on {device}: make it there")
        cdf = torch.cumsum(self.probs, 0).to(device=device, dtype=torch.float32)
        cdf[-1] = 2.0  # guard: u < 1 always lands inside
        out = torch.zeros(n, length, dtype=torch.int64, device=device)
        u = torch.rand(n, length - self.order, device=device, generator=generator)
        j = torch.searchsorted(cdf, u).clamp_max(self.branching - 1)  # which successor, for every step at once
        table = self._table(out.device)
        ctx = torch.zeros(n, dtype=torch.int64, device=device)  # context index: the start tokens are all 0
        for t in range(self.order, length):
            if table is not None:
                succ = table[ctx]
            else:
                succ = self._successors(out[:, t - self.order : t])
            out[:, t] = succ.gather(1, j[:, t - self.order : t - self.order + 1]).squeeze(1)
            ctx = (ctx * self.vocab + out[:, t]) % self.contexts
        return out

    def batch(
        self,
        batch: int,
        seq_len: int,
        device: "torch.device | str" = "cpu",
        generator: torch.Generator | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """A training batch ``(inputs, targets)``, both ``(batch, seq_len)`` int64; targets = inputs shifted by one.

        ``inputs[:, 0]`` is the start token; every target has conditional entropy exactly
        :attr:`entropy_floor` given the inputs up to it. Defaults: ``device="cpu"``,
        ``generator=None`` (torch's global RNG; a generator must live on ``device``).
        Sampling is sequential in time: for long runs draw one large batch up front and
        slice it, so that generation is not timed together with training.
        """
        batch, seq_len = positive_int("batch", batch), positive_int("seq_len", seq_len)
        seq = self.sample(batch, seq_len + self.order, device=device, generator=generator)
        return seq[:, self.order - 1 : -1], seq[:, self.order :]

    def nll(self, inputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """The true model's loss on each target (nats, float64, ``(batch, seq_len)``): the floor on this data.

        ``inputs``/``targets`` as :meth:`batch` returns them (``inputs[:, 0]`` is the start
        token). ``inf`` marks a target the language cannot produce from its context (an id outside
        ``[0, vocab)`` included); ``inputs`` must hold ids in ``[0, vocab)``.
        """
        integer_tensor("inputs", inputs, dims=2, high=self.vocab, shape="(batch, seq_len)", check_values=True)
        integer_tensor("targets", targets, dims=2, shape="(batch, seq_len)")
        if inputs.shape != targets.shape:
            raise ValueError(
                f"inputs and targets must both be (batch, seq_len), got {tuple(inputs.shape)} and {tuple(targets.shape)}"
            )
        start = inputs.new_zeros(inputs.shape[0], self.order - 1)  # the start tokens before inputs[:, 0]
        ctx = torch.cat([start, inputs], 1).unfold(1, self.order, 1)  # (B, T, order): context of each target
        hit = self.successors(ctx) == targets.unsqueeze(-1)
        p = (hit.to(torch.float64) * self.probs.to(inputs.device)).sum(-1)
        return -p.log()
