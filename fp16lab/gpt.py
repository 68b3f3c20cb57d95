"""A small, readable GPT for the transformer lessons (07 training, 08 inference, 09 FP8).

Why: one decoder-only transformer whose every part is visible: pre-LayerNorm blocks, causal
attention through ``F.scaled_dot_product_attention`` (flash, memory-efficient, cuDNN or math
kernels by dtype and device), a GELU MLP, learned positions, a head optionally tied to the
embedding and padded (lesson 03), and a KV-cache decode path with static shapes (CUDA graphs).
Module names read well in ``first_nonfinite`` and ``pad_layers``: ``wte``, ``wpe``,
``h.{i}.ln1``, ``h.{i}.attn.{qkv,proj}``, ``h.{i}.ln2``, ``h.{i}.mlp.{fc,act,proj}``, ``ln_f``, ``lm_head``.

FLOPs per token (:func:`flops_per_token`): training ``6·N + 12·L·T·d``, forward only
``2·N + 4·L·T·d`` by default (the PaLM paper's MFU convention: attention's ``QKᵀ`` and ``PV``
over the full T×T square, what the math kernel computes and what published MFU figures count);
``causal=True`` counts only the T(T+1)/2 query-key pairs a causal mask keeps (what flash and
cuDNN attention compute): ``6·N + 6·L·(T+1)·d``. ``N`` counts the weights used in matmuls
(attention, MLP, head; not embedding lookups, LayerNorms, biases), ``L`` layers, ``T`` the
context, ``d`` the width. :func:`attention_flops` is the attention term alone, for one call.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from typing import cast

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from fp16lab.checks import boolean, instance, integer_tensor, positive_float, positive_int, values_readable

__all__ = ["GPTConfig", "GPT", "PRESETS", "preset", "lm_loss", "param_count", "matmul_params",
           "flops_per_token", "attention_flops", "kv_cache_bytes"]  # fmt: skip


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
            object.__setattr__(self, name, positive_int(name, getattr(self, name)))  # numpy ints stored as int
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model must be a multiple of n_heads={self.n_heads}, got {self.d_model!r}")
        if positive_float("dropout", self.dropout, allow_zero=True) >= 1.0:
            raise ValueError(f"dropout must be a number in [0, 1), got {self.dropout!r}")
        object.__setattr__(self, "dropout", float(self.dropout))
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
    if not isinstance(name, str) or name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; allowed: {', '.join(map(repr, PRESETS))}")
    allowed = [f.name for f in fields(GPTConfig) if f.init]
    unknown = [k for k in overrides if k not in allowed]
    if unknown:
        raise ValueError(f"preset {name!r}: unknown field(s) {', '.join(unknown)}; allowed: {', '.join(allowed)}")
    return replace(PRESETS[name], **overrides)  # type: ignore[arg-type]


def _config(cfg: object) -> GPTConfig:
    return cast(GPTConfig, instance("cfg", cfg, GPTConfig, "a GPTConfig (e.g. fp16lab.gpt.preset('tiny'); a GPT's is model.cfg)"))


def _seq_len(name: str, value: object, cfg: GPTConfig) -> int:
    """``value`` (None: ``cfg.seq_len``) as a context length the model can run: 1 .. ``cfg.seq_len``."""
    if value is None:
        return cfg.seq_len
    T = positive_int(name, value)
    if T > cfg.seq_len:
        raise ValueError(f"{name} must be <= seq_len={cfg.seq_len} (the model's longest context), got {value!r}")
    return T


def _float_dtype(name: str, dtype: object) -> torch.dtype:
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise ValueError(f"{name} must be a floating-point torch.dtype (e.g. torch.bfloat16), got {dtype!r}")
    return dtype


def matmul_params(cfg: GPTConfig) -> int:
    """``N`` of the FLOP count: weights used in matmuls per token (blocks and the unpadded head)."""
    _config(cfg)
    d, L = cfg.d_model, cfg.n_layers
    return L * (4 * d * d + 2 * cfg.mlp_ratio * d * d) + d * cfg.vocab_size


def param_count(cfg: GPTConfig) -> int:
    """Total parameters of ``GPT(cfg)`` (tied weights once, padded rows included)."""
    _config(cfg)
    d, L, r, V = cfg.d_model, cfg.n_layers, cfg.mlp_ratio, cfg.padded_vocab
    per_block = 4 * d * d + 2 * r * d * d + 2 * 2 * d  # qkv, proj, fc, proj; two LayerNorms
    if cfg.bias:
        per_block += 3 * d + d + r * d + d
    head = (0 if cfg.tie_weights else V * d) + (V if cfg.bias else 0)
    return V * d + cfg.seq_len * d + L * per_block + 2 * d + head


def attention_flops(batch: int, heads: int, seq_len: int, head_dim: int, *, causal: bool = True,
                    training: bool = True) -> int:
    """FLOPs of one attention call's two products, ``QKᵀ`` and ``PV``: 2·2·head_dim per query-key pair.

    Why: a kernel's TFLOP/s must count the work it is asked for. ``causal=True`` (default) counts
    the T(T+1)/2 pairs a causal mask keeps, per batch row and head; False the full T×T square.
    ``training=True`` (default) adds the backward's four products (×3 in all).
    """
    B, H = positive_int("batch", batch), positive_int("heads", heads)
    T, hd = positive_int("seq_len", seq_len), positive_int("head_dim", head_dim)
    pairs = T * (T + 1) // 2 if boolean("causal", causal) else T * T
    return (3 if boolean("training", training) else 1) * 4 * B * H * pairs * hd


def flops_per_token(cfg: GPTConfig, *, training: bool = True, seq_len: int | None = None,
                    causal: bool = False) -> int:
    """Model FLOPs per token: ``6·N + 12·L·T·d`` (training) or ``2·N + 4·L·T·d`` (forward).

    Defaults: ``training=True``, ``seq_len=cfg.seq_len`` (``T``), ``causal=False`` (attention
    over the full T×T square, the PaLM MFU convention; True: only the pairs a causal mask keeps,
    ``12·L·d·(T+1)/2``). See the module docstring for what ``N`` counts. ``seq_len`` is at most
    ``cfg.seq_len`` (the longest context the model runs).
    """
    T = _seq_len("seq_len", seq_len, _config(cfg))
    k = 3 if boolean("training", training) else 1
    attention = attention_flops(1, 1, T, cfg.d_model, causal=boolean("causal", causal), training=training)
    return k * 2 * matmul_params(cfg) + cfg.n_layers * attention // T


def kv_cache_bytes(cfg: GPTConfig, batch: int, max_len: int | None = None, dtype: torch.dtype = torch.bfloat16) -> int:
    """Bytes of the KV cache :meth:`GPT.setup_cache` allocates (K and V, every layer).

    Defaults: ``max_len=cfg.seq_len`` (at most that), ``dtype=torch.bfloat16`` (a floating-point dtype).
    """
    T = _seq_len("max_len", max_len, _config(cfg))
    itemsize = torch.empty((), dtype=_float_dtype("dtype", dtype)).element_size()
    return 2 * cfg.n_layers * positive_int("batch", batch) * T * cfg.d_model * itemsize


def lm_loss(logits: torch.Tensor, targets: torch.Tensor, *, ignore_index: int | None = None) -> torch.Tensor:
    """Mean next-token cross-entropy in FP32 (nats), for ``(B, T, V)`` logits and ``(B, T)`` targets.

    ``targets`` are int64 (or uint8) ids in ``[0, V)``, shaped like ``logits`` without its last
    dimension; at least one token. ``ignore_index`` (default None: every target counts) is an id
    outside ``[0, V)`` marking padding that the mean leaves out (Hugging Face labels use -100); at
    least one target must remain. Ids are checked where that is free (a CPU tensor, eager).
    """
    if not isinstance(logits, torch.Tensor) or not logits.is_floating_point() or logits.dim() < 2:
        raise ValueError(f"logits must be a floating-point tensor (batch, seq_len, vocab), got "
                         f"{type(logits).__name__ if not isinstance(logits, torch.Tensor) else (logits.dtype, tuple(logits.shape))}")
    vocab = logits.shape[-1]
    if ignore_index is not None and (isinstance(ignore_index, bool) or not isinstance(ignore_index, int)
                                     or 0 <= ignore_index < vocab):
        raise ValueError(f"ignore_index must be None or an int outside the vocabulary 0 .. {vocab - 1} "
                         f"(e.g. -100), got {ignore_index!r}")
    integer_tensor("targets", targets, dtypes=(torch.int64, torch.uint8), high=None if ignore_index is not None else vocab)
    if targets.shape != logits.shape[:-1]:
        raise ValueError(f"targets must have the shape of logits without its last dimension, {tuple(logits.shape[:-1])}; "
                         f"got {tuple(targets.shape)}")
    if targets.numel() == 0:
        raise ValueError(f"targets is empty (shape {tuple(targets.shape)}): the mean loss of no tokens is undefined")
    if ignore_index is not None and values_readable(targets):
        kept = targets[targets != ignore_index]
        if kept.numel() == 0:
            raise ValueError(f"every target equals ignore_index={ignore_index}: the mean loss of no tokens is undefined")
        integer_tensor("targets", kept, high=vocab)
    # None keeps torch's default (-100), whose targets were refused above where the ids are readable
    return F.cross_entropy(logits.float().reshape(-1, vocab), targets.reshape(-1),
                           ignore_index=-100 if ignore_index is None else ignore_index)


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
        made by :meth:`setup_cache`; without it the cache is ignored. ``idx`` holds int64 (or
        int32) ids in ``[0, vocab_size)`` on the model's device; ids and positions are range-checked
        where that is free (CPU tensors, eager mode), so a GPU step never waits for the check.
        """
        pos, mask = self._positions(idx, input_pos)
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

    def _positions(self, idx: torch.Tensor, input_pos: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Check ``idx`` (and ``input_pos``) against the model and its cache; the positions and the cache mask."""
        cfg = self.cfg
        integer_tensor("idx", idx, dims=2, dtypes=(torch.int64, torch.int32), high=cfg.vocab_size,
                       shape="(batch, seq_len)")
        device = self.wte.weight.device
        if idx.device != device:
            raise ValueError(f"idx is on {idx.device}, the model on {device}: move one of them (idx.to({str(device)!r}))")
        B, T = idx.shape
        if input_pos is None:
            if T > cfg.seq_len:
                raise ValueError(f"idx has {T} positions; this model's seq_len is {cfg.seq_len}")
            return torch.arange(T, device=idx.device), None
        if self.causal_mask is None:
            raise ValueError("input_pos needs a KV cache: call model.setup_cache(batch_size) first")
        first: Attention = self.h[0].attn  # type: ignore[assignment]  # every layer's cache has this shape
        cache = first.k_cache
        assert cache is not None
        integer_tensor("input_pos", input_pos, dims=1, dtypes=(torch.int64, torch.int32), high=cache.shape[2],
                       shape=f"({T},): one position per token of idx")
        if input_pos.shape[0] != T or B != cache.shape[0]:
            raise ValueError(f"input_pos {tuple(input_pos.shape)} and idx {tuple(idx.shape)} must match the KV cache: "
                             f"idx (batch={cache.shape[0]}, T), input_pos (T,); call setup_cache(batch_size) for another batch")
        return input_pos, self.causal_mask[input_pos].view(1, 1, T, -1)

    # ------------------------------------------------------------------ KV-cache decoding

    def setup_cache(self, batch_size: int, max_len: int | None = None, dtype: torch.dtype | None = None) -> None:
        """Allocate K/V caches ``(batch_size, n_heads, max_len, head_dim)`` per layer, on the model's device.

        Defaults: ``max_len=cfg.seq_len`` (at most that), ``dtype`` = the weights' dtype (a
        floating-point dtype). Shapes never change
        afterwards, so :meth:`decode_step` can be captured in a CUDA graph or compiled
        (``torch.compile(model.decode_step, mode="reduce-overhead")``).
        """
        max_len = _seq_len("max_len", max_len, self.cfg)
        w = self.wte.weight
        dtype = w.dtype if dtype is None else _float_dtype("dtype", dtype)
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
        positions when none of the right batch size and length exists. ``idx``: int64 ids in
        ``[0, vocab_size)``, at least one per row; ``T0 + max_new_tokens`` at most ``seq_len``.
        """
        self._check_generate(idx, max_new_tokens, temperature, generator, step)
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
                z = logits[:, -1].float()  # max subtracted first: a tiny temperature cannot make inf - inf
                probs = torch.softmax((z - z.amax(-1, keepdim=True)) / temperature, -1)
                nxt = torch.multinomial(probs, 1, generator=generator)
            else:
                nxt = logits[:, -1].argmax(-1, keepdim=True)
            out.append(nxt)
            if t + 1 < total:
                logits = step(nxt, torch.tensor([t], device=idx.device))
        return torch.cat(out, 1)

    def _check_generate(self, idx: object, max_new_tokens: object, temperature: object, generator: object,
                        step: object) -> None:
        """Every argument of :meth:`generate`, before a cache is touched (the prompt's ids on any device)."""
        integer_tensor("idx", idx, dims=2, dtypes=(torch.int64, torch.int32), high=self.cfg.vocab_size,
                       shape="(batch, prompt_len)", check_values=True)
        assert isinstance(idx, torch.Tensor)
        new = positive_int("max_new_tokens", max_new_tokens)
        positive_float("temperature", temperature, allow_zero=True)
        if idx.shape[0] == 0 or idx.shape[1] == 0:
            raise ValueError(f"idx must hold at least one prompt token per row, got shape {tuple(idx.shape)}")
        if idx.shape[1] >= self.cfg.seq_len:
            raise ValueError(f"idx has {idx.shape[1]} prompt tokens; with seq_len={self.cfg.seq_len} at most "
                             f"{self.cfg.seq_len - 1} leave room for a new one")
        if idx.shape[1] + new > self.cfg.seq_len:
            raise ValueError(f"max_new_tokens must be <= seq_len - prompt length = {self.cfg.seq_len} - {idx.shape[1]}"
                             f" = {self.cfg.seq_len - idx.shape[1]}, got {max_new_tokens!r}")
        if generator is not None and not isinstance(generator, torch.Generator):
            raise ValueError(f"generator must be None or a torch.Generator, got {generator!r}")
        if generator is not None and generator.device.type != idx.device.type:
            raise ValueError(f"generator lives on {generator.device}, idx on {idx.device}: make it there")
        if step is not None and not callable(step):
            raise ValueError(f"step must be None or a function like model.decode_step, got {step!r}")
        if idx.device != self.wte.weight.device:
            raise ValueError(f"idx is on {idx.device}, the model on {self.wte.weight.device}")
