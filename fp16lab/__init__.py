"""fp16lab: helpers for learning FP16 mixed-precision training in PyTorch.

Import what you need from the submodule that owns it, e.g.
``from fp16lab.env import report`` or ``from fp16lab.train import fit``.
Submodules, by job:

- ``device``: the bottom layer: parse/choose a device, synchronise, free memory, OOM types
- ``hardware``: the one seam for GPU facts: capability, memory, peaks, hardware profiles
- ``checks``: argument validators shared by every public entry point
- ``env``: the environment report (``python -m fp16lab doctor``) and measurement metadata
- ``config``: quick mode (the one switch for problem sizes), live-or-reference
- ``precision``: fp32 / tf32 / fp16 / bf16 as a validated choice, autocast, TF32 settings
- ``numerics``: storage formats (fp32, fp16, bf16, FP8 E4M3/E5M2): facts, exact rounding, bit views,
  ULP spacing, cast statistics (formats, not precisions: see its docstring)
- ``data``: learnable image data generated locally (nothing is downloaded)
- ``gpt``, ``lm_data``: a small GPT (KV-cache decoding, FLOPs per token) and a synthetic
  language with a known entropy floor, for the transformer lessons
- ``fp8``: FP8 on Ada/Hopper: tensorwise/rowwise scaling, which layers to convert, training with
  ``torchao.float8`` (optional extra), the raw ``torch._scaled_mm`` matmul and its TFLOP/s
- ``lm``, ``optim``: training and measuring that GPT per precision (excess loss, tokens/s,
  MFU, memory); AdamW for 16-bit weights (Kahan summation or an FP32 master copy)
- ``train``: the AMP training loop (``fit``): history, evaluation, checkpoints, divergence guard
- ``step``: one AMP optimizer step in the right order (``train_step``), evaluation
- ``checkpoint``: atomic checkpoints with the scaler, checked before loading; the history sidecar
- ``align``: Tensor Core alignment: audit, padding, matmul sweeps
- ``debug``: dtype trace under autocast, first non-finite layer, peak memory, batch search
- ``memory``: tensor-level memory accounting (in-place ops), allocator caps, OOM rows,
  fragmentation and ``expandable_segments`` (in a child process), memory snapshots as tables
- ``bench``: training/inference throughput and peak memory, honestly timed
- ``infer``, ``graphs``, ``islands``, ``decode``: inference in FP16/BF16 (cast or autocast,
  latency/throughput sweeps, accuracy against FP32), CUDA graphs and compile with their setup
  time, FP32 islands, and KV-cache decoding as a memory-bandwidth problem
- ``distributed``: several processes (gloo on CPUs, NCCL on GPUs): launching ranks with hard
  timeouts, DDP + AMP, 16-bit gradient hooks, FSDP2 mixed-precision policies
- ``timing``, ``results``: timing helpers; result files with their metadata

Course tooling (running and stamping lessons, student copies, the agenda, the learner's
workspace and lab) lives apart in the subpackage ``fp16lab.course``; learners do not need it.
``fp16lab.outputs`` and ``fp16lab.workshop`` remain as aliases of its modules for
``python -m fp16lab.outputs`` / ``python -m fp16lab.workshop``. The command line for everything
is ``python -m fp16lab --help``.
"""

__version__ = "0.1.0"

__all__ = [
    "__version__",
    "align",
    "bench",
    "checkpoint",
    "checks",
    "config",
    "data",
    "debug",
    "decode",
    "device",
    "distributed",
    "env",
    "fp8",
    "gpt",
    "graphs",
    "hardware",
    "infer",
    "islands",
    "lm",
    "lm_data",
    "memory",
    "numerics",
    "optim",
    "outputs",
    "precision",
    "results",
    "step",
    "timing",
    "train",
    "workshop",
]
