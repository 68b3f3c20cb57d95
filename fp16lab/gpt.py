"""A small, readable GPT for the transformer lessons (07 training, 08 inference, 09 FP8).

Why: one decoder-only transformer whose every part is visible: pre-LayerNorm blocks, causal
attention through ``F.scaled_dot_product_attention`` (flash, memory-efficient, cuDNN or math
kernels by dtype and device), a GELU MLP, learned positions, a head optionally tied to the
embedding and padded (lesson 03), and a KV-cache decode path with static shapes (CUDA graphs).
Module names read well in ``first_nonfinite`` and ``pad_layers``: ``wte``, ``wpe``,
``h.{i}.ln1``, ``h.{i}.attn.{qkv,proj}``, ``h.{i}.ln2``, ``h.{i}.mlp.{fc,act,proj}``, ``ln_f``, ``lm_head``.

FLOPs per token (:func:`flops_per_token`, the PaLM paper's MFU convention): training
``6·N + 12·L·T·d``, forward only ``2·N + 4·L·T·d``; ``N`` counts the weights used in matmuls
(attention, MLP, head; not embedding lookups, LayerNorms, biases), ``L`` layers, ``T`` the
context, ``d`` the width. Attention's ``QKᵀ`` and ``PV`` count in full (no causal discount).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from fp16lab.checks import boolean, instance, positive_float, positive_int

__all__ = ["GPTConfig", "GPT", "PRESETS", "preset", "lm_loss", "param_count", "matmul_params",
           "flops_per_token", "kv_cache_bytes"]  # fmt: skip


@dataclass(frozen=True)
class GPTConfig:
    """The shape of a :class:`GPT`. Defaults (a tiny model that trains on a CPU): ``vocab_size=64,
    d_model=64, n_layers=2, n_heads=4, seq_len=64, mlp_ratio=4, dropout=0.0, bias=False,
    tie_weights=True, vocab_multiple=1`` (embedding and head get ``padded_vocab`` rows, the next
    multiple of ``vocab_multiple``; logits are sliced back to ``vocab_size``).
    """

    vocab_size: int = 64
    d_model: int = 64
    n_layers: int = 2
    n_heads: int = 4
    seq_len: int = 64
    mlp_ratio: int = 4
    dropout: float = 0.0
    bias: bool = False
    tie_weights: bool = True
    vocab_multiple: int = 1

    def __post_init__(self) -> None:
        for name in ("vocab_size", "d_model", "n_layers", "n_heads", "seq_len", "mlp_ratio", "vocab_multiple"):
            positive_int(name, getattr(self, name))
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model must be a multiple of n_heads={self.n_heads}, got {self.d_model!r}")
        if positive_float("dropout", self.dropout, allow_zero=True) >= 1.0:
            raise ValueError(f"dropout must be a number in [0, 1), got {self.dropout!r}")
        boolean("bias", self.bias)
        boolean("tie_weights", self.tie_weights)

    @property
    def head_dim(self) -> int:
        """Width of one attention head (``d_model // n_heads``)."""
        return self.d_model // self.n_heads

    @property
    def padded_vocab(self) -> int:
        """Rows of the embedding and the head: ``vocab_size`` rounded up to ``vocab_multiple``."""
        m = self.vocab_multiple
        return -(-self.vocab_size // m) * m


# Named shapes. "tiny": CPU quick mode; "small": precision curves on a GPU in seconds;
# "base" (~150M) and "large" (~540M, the probe that reached 54 % MFU on an H200) are
# compute-bound (d_model >= 1024); "1b": the inference lesson's decode model.
PRESETS: dict[str, GPTConfig] = {
    "tiny": GPTConfig(),
    "small": GPTConfig(vocab_size=4096, d_model=512, n_layers=4, n_heads=8, seq_len=512),
    "base": GPTConfig(vocab_size=50257, d_model=1024, n_layers=8, n_heads=16, seq_len=1024, vocab_multiple=64),
    "large": GPTConfig(vocab_size=32768, d_model=2048, n_layers=8, n_heads=16, seq_len=2048, tie_weights=False),
    "1b": GPTConfig(vocab_size=32768, d_model=2048, n_layers=20, n_heads=16, seq_len=2048, tie_weights=False),
}


def preset(name: str, **overrides: object) -> GPTConfig:
    """The :data:`PRESETS` entry ``name`` with ``overrides`` applied (validated like any config)."""
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; allowed: {', '.join(map(repr, PRESETS))}")
    return replace(PRESETS[name], **overrides)  # type: ignore[arg-type]


def matmul_params(cfg: GPTConfig) -> int:
    """``N`` of the FLOP count: weights used in matmuls per token (blocks and the unpadded head)."""
    d, L = cfg.d_model, cfg.n_layers
    return L * (4 * d * d + 2 * cfg.mlp_ratio * d * d) + d * cfg.vocab_size


def param_count(cfg: GPTConfig) -> int:
    """Total parameters of ``GPT(cfg)`` (tied weights once, padded rows included)."""
    d, L, r, V = cfg.d_model, cfg.n_layers, cfg.mlp_ratio, cfg.padded_vocab
    per_block = 4 * d * d + 2 * r * d * d + 2 * 2 * d  # qkv, proj, fc, proj; two LayerNorms
    if cfg.bias:
        per_block += 3 * d + d + r * d + d
    head = (0 if cfg.tie_weights else V * d) + (V if cfg.bias else 0)
    return V * d + cfg.seq_len * d + L * per_block + 2 * d + head


def flops_per_token(cfg: GPTConfig, *, training: bool = True, seq_len: int | None = None) -> int:
    """Model FLOPs per token: ``6·N + 12·L·T·d`` (training) or ``2·N + 4·L·T·d`` (forward).

    Defaults: ``training=True``, ``seq_len=cfg.seq_len`` (``T``). See the module docstring
    for what ``N`` counts.
    """
    T = cfg.seq_len if seq_len is None else positive_int("seq_len", seq_len)
    k = 3 if boolean("training", training) else 1
    return k * (2 * matmul_params(cfg) + 4 * cfg.n_layers * T * cfg.d_model)


def kv_cache_bytes(cfg: GPTConfig, batch: int, max_len: int | None = None, dtype: torch.dtype = torch.bfloat16) -> int:
    """Bytes of the KV cache :meth:`GPT.setup_cache` allocates (K and V, every layer)."""
    T = cfg.seq_len if max_len is None else positive_int("max_len", max_len)
    itemsize = torch.empty((), dtype=dtype).element_size()
    return 2 * cfg.n_layers * positive_int("batch", batch) * T * cfg.d_model * itemsize


def lm_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean next-token cross-entropy in FP32 (nats), for ``(B, T, V)`` logits and ``(B, T)`` targets."""
    return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), targets.reshape(-1))


class Attention(nn.Module):
    """Causal multi-head self-attention through SDPA, with an optional KV cache."""

    k_cache: torch.Tensor | None
    v_cache: torch.Tensor | None

    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.n_heads, self.head_dim, self.dropout = cfg.n_heads, cfg.head_dim, cfg.dropout
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model, bias=cfg.bias)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model, bias=cfg.bias)
        # KV cache: buffers (not parameters, not saved), so compile/CUDA graphs treat them as static
        self.register_buffer("k_cache", None, persistent=False)
        self.register_buffer("v_cache", None, persistent=False)

    def forward(self, x: torch.Tensor, input_pos: torch.Tensor | None = None,
                mask: torch.Tensor | None = None) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.n_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        if input_pos is None:  # training / plain forward: causal attention over this sequence
            p = self.dropout if self.training else 0.0
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=p)
        else:  # cached: write K, V at input_pos, attend over the whole (masked) cache
            kc, vc = self.k_cache, self.v_cache
            assert kc is not None and vc is not None and mask is not None
            kc[:, :, input_pos] = k.to(kc.dtype)
            vc[:, :, input_pos] = v.to(vc.dtype)
            y = F.scaled_dot_product_attention(q, kc, vc, attn_mask=mask)
        return self.proj(y.transpose(1, 2).reshape(B, T, C))


class MLP(nn.Module):
    """Linear → GELU → Linear, ``mlp_ratio`` times wider inside."""

    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.fc = nn.Linear(cfg.d_model, cfg.mlp_ratio * cfg.d_model, bias=cfg.bias)
        self.act = nn.GELU()
        self.proj = nn.Linear(cfg.mlp_ratio * cfg.d_model, cfg.d_model, bias=cfg.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(self.act(self.fc(x)))


class Block(nn.Module):
    """Pre-LayerNorm transformer block: ``x + attn(ln1(x))``, then ``x + mlp(ln2(x))``."""

    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.ln1, self.attn = nn.LayerNorm(cfg.d_model), Attention(cfg)
        self.ln2, self.mlp = nn.LayerNorm(cfg.d_model), MLP(cfg)
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor, input_pos: torch.Tensor | None = None,
                mask: torch.Tensor | None = None) -> torch.Tensor:
        x = x + self.drop(self.attn(self.ln1(x), input_pos, mask))
        return x + self.drop(self.mlp(self.ln2(x)))


class GPT(nn.Module):
    """A decoder-only transformer. ``GPT(cfg)(idx)`` → logits; ``GPT(cfg)(idx, targets)`` → (logits, loss).

    Init as GPT-2: normal(0, 0.02), residual projections scaled by ``1/sqrt(2·n_layers)``.
    Set ``model.checkpointing = True`` to recompute each block in backward (activation
    checkpointing: less memory, about one more forward pass of compute).
    """

    causal_mask: torch.Tensor | None

    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.cfg = instance("cfg", cfg, GPTConfig, "a GPTConfig")
        self.checkpointing = False
        self.wte = nn.Embedding(cfg.padded_vocab, cfg.d_model)
        self.wpe = nn.Embedding(cfg.seq_len, cfg.d_model)
        self.drop = nn.Dropout(cfg.dropout)
        self.h = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        self.ln_f = nn.LayerNorm(cfg.d_model)
        self.lm_head = nn.Linear(cfg.d_model, cfg.padded_vocab, bias=cfg.bias)
        if cfg.tie_weights:
            self.lm_head.weight = self.wte.weight
        self.register_buffer("causal_mask", None, persistent=False)
        self.apply(self._init)
        for name, p in self.named_parameters():
            if name.endswith("proj.weight"):
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * cfg.n_layers))

    @staticmethod
    def _init(m: nn.Module) -> None:
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, 0.0, 0.02)
        if isinstance(m, nn.Linear) and m.bias is not None:
            nn.init.zeros_(m.bias)

    def param_count(self) -> int:
        """Number of parameters (tied weights counted once)."""
        return sum(p.numel() for p in self.parameters())

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None, *,
                input_pos: torch.Tensor | None = None) -> "torch.Tensor | tuple[torch.Tensor, torch.Tensor]":
        """Logits ``(B, T, vocab_size)`` for token ids ``idx`` ``(B, T)``; with ``targets``, also the loss.

        ``input_pos`` (int64 ``(T,)``, the positions of ``idx``) uses and fills the KV cache
        made by :meth:`setup_cache`; without it the cache is ignored.
        """
        T = idx.shape[1]
        if input_pos is None:
            if T > self.cfg.seq_len:
                raise ValueError(f"idx has {T} positions; this model's seq_len is {self.cfg.seq_len}")
            pos, mask = torch.arange(T, device=idx.device), None
        else:
            if self.causal_mask is None:
                raise ValueError("input_pos needs a KV cache: call model.setup_cache(batch_size) first")
            pos, mask = input_pos, self.causal_mask[input_pos].view(1, 1, T, -1)
        x = self.drop(self.wte(idx) + self.wpe(pos))
        for block in self.h:
            if self.checkpointing and self.training and torch.is_grad_enabled():
                x = checkpoint(block, x, input_pos, mask, use_reentrant=False)
            else:
                x = block(x, input_pos, mask)
        logits = self.lm_head(self.ln_f(x))
        if self.cfg.padded_vocab != self.cfg.vocab_size:
            logits = logits[..., : self.cfg.vocab_size]
        return logits if targets is None else (logits, lm_loss(logits, targets))

    # ------------------------------------------------------------------ KV-cache decoding

    def setup_cache(self, batch_size: int, max_len: int | None = None, dtype: torch.dtype | None = None) -> None:
        """Allocate K/V caches ``(batch_size, n_heads, max_len, head_dim)`` per layer, on the model's device.

        Defaults: ``max_len=cfg.seq_len``, ``dtype`` = the weights' dtype. Shapes never change
        afterwards, so :meth:`decode_step` can be captured in a CUDA graph or compiled
        (``torch.compile(model.decode_step, mode="reduce-overhead")``).
        """
        max_len = self.cfg.seq_len if max_len is None else positive_int("max_len", max_len)
        if max_len > self.cfg.seq_len:
            raise ValueError(f"max_len must be <= seq_len={self.cfg.seq_len}, got {max_len!r}")
        w = self.wte.weight
        dtype = w.dtype if dtype is None else dtype
        shape = (positive_int("batch_size", batch_size), self.cfg.n_heads, max_len, self.cfg.head_dim)
        for attn in self._attentions():
            attn.k_cache = torch.zeros(shape, dtype=dtype, device=w.device)
            attn.v_cache = torch.zeros(shape, dtype=dtype, device=w.device)
        self.causal_mask = torch.ones(max_len, max_len, dtype=torch.bool, device=w.device).tril()

    def drop_cache(self) -> None:
        """Free the KV caches made by :meth:`setup_cache`."""
        for attn in self._attentions():
            attn.k_cache = attn.v_cache = None
        self.causal_mask = None

    def _attentions(self) -> list[Attention]:
        return [m for m in self.modules() if isinstance(m, Attention)]

    def decode_step(self, token: torch.Tensor, input_pos: torch.Tensor) -> torch.Tensor:
        """Logits ``(B, 1, vocab)`` of the next token after ``token`` ``(B, 1)`` at position ``input_pos`` ``(1,)``."""
        return self(token, input_pos=input_pos)

    @torch.no_grad()
    def generate(self, idx: torch.Tensor, max_new_tokens: int, *, temperature: float = 0.0,
                 generator: torch.Generator | None = None, step=None) -> torch.Tensor:
        """Continue ``idx`` ``(B, T0)`` by ``max_new_tokens`` tokens with the KV cache; returns ``(B, T0 + new)``.

        Defaults: ``temperature=0.0`` (greedy), ``generator=None``, ``step=self.decode_step``
        (pass a compiled or graphed version of it). Sets up a cache of ``T0 + max_new_tokens``
        positions when none of the right batch size and length exists.
        """
        positive_int("max_new_tokens", max_new_tokens)
        positive_float("temperature", temperature, allow_zero=True)
        B, T0 = idx.shape
        total = T0 + max_new_tokens
        k = self._attentions()[0].k_cache
        if k is None or k.shape[0] != B or k.shape[2] < total:
            self.setup_cache(B, total)
        step = self.decode_step if step is None else step
        logits = self(idx, input_pos=torch.arange(T0, device=idx.device))[:, -1:]
        out = [idx]
        for t in range(T0, total):
            if temperature > 0:
                probs = torch.softmax(logits[:, -1].float() / temperature, -1)
                nxt = torch.multinomial(probs, 1, generator=generator)
            else:
                nxt = logits[:, -1].argmax(-1, keepdim=True)
            out.append(nxt)
            if t + 1 < total:
                logits = step(nxt, torch.tensor([t], device=idx.device))
        return torch.cat(out, 1)
