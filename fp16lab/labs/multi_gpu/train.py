"""Train on several processes with torchrun: DDP or FSDP2, in FP32, FP16 or BF16 (lesson 10's script).

One process per GPU on NCCL (``LOCAL_RANK`` picks the GPU), or CPU processes on gloo::

    torchrun --standalone --nproc_per_node=2 -m fp16lab.labs.multi_gpu.train \\
        --precision bf16 --steps 50 --out run.json

Two machines (run this on each, NODE = 0 on one and 1 on the other; HOST is machine 0)::

    torchrun --nnodes=2 --node_rank=NODE --nproc_per_node=2 --rdzv-backend=c10d \\
        --rdzv-endpoint=HOST:29400 -m fp16lab.labs.multi_gpu.train --precision bf16 --steps 50 --out run.json

The multi-GPU reference run (every GPU of the machine, NCCL; ``python -m fp16lab distributed``
builds and prints this command, then runs it)::

    torchrun --standalone --nproc_per_node=NUM_GPUS -m fp16lab.labs.multi_gpu.train \\
        --precision bf16 --preset small --steps 50 --out results/multi_gpu_ddp_bf16.json

What it does, in the order a reader meets it below: ``--precision fp16`` trains under autocast
with one ``torch.amp.GradScaler`` per rank, ``bf16`` under autocast alone; ``--fsdp`` shards with
FSDP2 (``fully_shard``) and a ``MixedPrecisionPolicy`` instead of autocast (FP16 keeps the same
``torch.amp.GradScaler``: FSDP2's gradients are DTensors, whose inf check is reduced over the
ranks); ``--grad-dtype`` is the dtype gradients travel in (a DDP communication hook, or FSDP2's
``reduce_dtype``). Data come from ``fp16lab.data`` (generated here, never downloaded) through a
``DistributedSampler`` with ``set_epoch``. ``--ckpt DIR`` saves model, optimizer, GradScaler and
step with ``torch.distributed.checkpoint``; ``--resume`` continues from it exactly
(``--overflow-at STEP`` forces one overflow, so that a checkpoint can hold a backed-off scale). Rank 0
writes one JSON file (``--out``).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from collections.abc import Iterator, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from fp16lab.checks import instance, sequence_of
from fp16lab.device import synchronize
from fp16lab.hardware import gpu_facts
from fp16lab.labs.multi_gpu.model import tap_all_reduce
from fp16lab.train import amp_step, make_scaler

__all__ = ["DTYPES", "bf16_hook_support", "parse_args", "main"]

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
MODELS = ("gpt", "resnet50")
PRESETS = ("tiny", "small", "base")


def bf16_hook_support() -> str | None:
    """None when DDP accepts PyTorch's ``bf16_compress_hook`` here, else why not.

    DDP's ``_check_comm_hook`` refuses that hook (TypeError) unless torch was built with CUDA
    (or ROCm) and NCCL >= 2.10: a property of the torch build, not of the device the ranks use.
    """
    cuda_build = torch.version.cuda is not None or getattr(torch.version, "hip", None) is not None
    if not cuda_build:
        return "this torch is a CPU-only build; bf16_compress_hook needs a CUDA build with NCCL >= 2.10"
    if not (dist.is_available() and dist.is_nccl_available() and torch.cuda.nccl.version() >= (2, 10)):
        return "this torch build has no NCCL >= 2.10, which bf16_compress_hook needs"
    return None


# ----------------------------------------------------------------------------- arguments


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:
        """One line on rank 0 (every rank would print the same line), exit status 2."""
        if os.environ.get("RANK", "0") == "0":
            print(f"{self.prog}: error: {message}", file=sys.stderr, flush=True)
        sys.exit(2)


def positive_arg(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return int(text)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line; refused values end in one line naming the argument and the allowed values.

    ``argv``: the arguments as a list of str (default ``sys.argv[1:]``); a bare string is refused,
    argparse would read it letter by letter.
    """
    if argv is not None:
        argv = sequence_of("argv", argv, example="['--precision', 'bf16', '--steps', '10', '--out', 'r.json']",
                           allow_empty=True, item=lambda n, a: instance(n, a, str, "a command-line argument (str)"))
    p = _Parser(prog="fp16lab.labs.multi_gpu.train", description=__doc__,
                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--precision", required=True, choices=tuple(DTYPES), help="fp32 (true FP32), fp16 or bf16")
    p.add_argument("--steps", required=True, type=positive_arg, help="optimizer steps to reach (a resumed run counts on)")
    p.add_argument("--out", required=True, type=Path, help="JSON file rank 0 writes")
    p.add_argument("--model", choices=MODELS, default="gpt", help="the small GPT (default) or ResNet-50")
    p.add_argument("--preset", choices=PRESETS, default="tiny", help="GPT size (fp16lab.gpt presets; default tiny)")
    p.add_argument("--fsdp", action="store_true", help="FSDP2 fully_shard + MixedPrecisionPolicy instead of DDP")
    p.add_argument("--grad-dtype", choices=tuple(DTYPES), default="fp32",
                   help="dtype gradients travel in: DDP comm hook, or FSDP2 reduce_dtype (default fp32)")
    p.add_argument("--batch", type=positive_arg, default=8, help="global batch: samples per step over all ranks")
    p.add_argument("--samples", type=positive_arg, default=256, help="samples in the generated data set")
    p.add_argument("--lr", type=float, default=1e-3, help="AdamW learning rate (default 1e-3)")
    p.add_argument("--seed", type=int, default=0, help="seed of the data and the weights (default 0)")
    p.add_argument("--ckpt", type=Path, default=None, help="folder for torch.distributed.checkpoint (saved at the end)")
    p.add_argument("--resume", action="store_true", help="continue from --ckpt")
    p.add_argument("--save-weights", type=Path, default=None, help="rank 0 saves the final full weights here")
    p.add_argument("--overflow-at", type=int, default=None, metavar="STEP",
                   help="make step STEP's loss infinite on the last rank: a forced overflow, so an FP16 run's "
                        "GradScalers skip that step and back off (to checkpoint a backed-off scale)")
    p.add_argument("--cpu", action="store_true", help="CPU processes on gloo even where GPUs exist")
    p.add_argument("--timeout", type=positive_arg, default=300, help="seconds a collective may wait (default 300)")
    a = p.parse_args(argv)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if a.batch % world:
        p.error(f"argument --batch: {a.batch} is not divisible by the world size {world}")
    if a.samples < a.batch:
        p.error(f"argument --samples: {a.samples} is fewer than one global batch (--batch {a.batch})")
    if a.resume and a.ckpt is None:
        p.error("argument --resume: needs --ckpt DIR (the checkpoint to continue from)")
    if a.resume and not (a.ckpt / ".metadata").is_file():
        p.error(f"argument --resume: no checkpoint in {str(a.ckpt)!r} (no .metadata file)")
    if a.overflow_at is not None and (a.overflow_at < 0 or a.precision != "fp16"):
        p.error(f"argument --overflow-at: needs --precision fp16 and a step >= 0, got {a.overflow_at!r} with "
                f"--precision {a.precision}")
    if not a.lr > 0:
        p.error(f"argument --lr: must be positive, got {a.lr!r}")
    if not a.fsdp and a.grad_dtype == "bf16" and (why := bf16_hook_support()):
        p.error(f"argument --grad-dtype: 'bf16' is refused by DDP here: {why}; use --grad-dtype fp16")
    if a.fsdp and a.model == "resnet50":
        p.error("argument --fsdp: shards the GPT's blocks; use --model gpt (ResNet-50 runs with DDP)")
    return a


# ------------------------------------------------------------------------- process group


def setup(timeout: int, cpu: bool = False) -> tuple[torch.device, str]:
    """Join the process group torchrun describes (env:// ), or a world of one without torchrun."""
    cuda = not cpu and torch.cuda.is_available() and dist.is_nccl_available()
    backend = "nccl" if cuda else "gloo"
    if cuda:
        local = int(os.environ.get("LOCAL_RANK", "0"))
        if local >= torch.cuda.device_count():
            sys.exit(f"LOCAL_RANK {local} has no GPU: this machine has {torch.cuda.device_count()} "
                     "(--nproc_per_node must be at most that)")
        torch.cuda.set_device(local)
        device = torch.device("cuda", local)
    else:
        device = torch.device("cpu")
    limit = timedelta(seconds=timeout)
    if "RANK" in os.environ:  # started by torchrun: it did the rendezvous and set MASTER_ADDR/PORT
        dist.init_process_group(backend, timeout=limit, device_id=device if cuda else None)
    else:  # plain `python -m ...`: one process, no network
        dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1, timeout=limit)
    return device, backend


# ------------------------------------------------------------------------- model and data


def build(args: argparse.Namespace, device: torch.device) -> tuple[nn.Module, torch.utils.data.Dataset, int]:
    """The model (same weights on every rank: same seed), its generated data, tokens per sample."""
    torch.manual_seed(args.seed)
    if args.model == "gpt":
        from fp16lab.data import SyntheticLanguage
        from fp16lab.gpt import GPT, preset

        cfg = preset(args.preset)
        lang = SyntheticLanguage(vocab=cfg.vocab_size, seed=args.seed)
        x, y = lang.batch(args.samples, cfg.seq_len, generator=torch.Generator().manual_seed(args.seed))
        return GPT(cfg).to(device), torch.utils.data.TensorDataset(x, y), cfg.seq_len
    import torchvision

    from fp16lab.data import ShapesDataset

    model: nn.Module = torchvision.models.resnet50(num_classes=10)
    if device.type == "cuda":  # SyncBatchNorm: statistics over the global batch (it refuses CPU tensors)
        model = nn.SyncBatchNorm.convert_sync_batchnorm(model)
    ds = ShapesDataset(args.samples, image_size=64, seed=args.seed)
    return model.to(device).to(memory_format=torch.channels_last), ds, 1


def loss_of(model: nn.Module, batch: Sequence[torch.Tensor], device: torch.device) -> torch.Tensor:
    """Cross-entropy of one batch (FP32 arithmetic on the logits, whatever they came in)."""
    x, y = (t.to(device, non_blocking=True) for t in batch)
    if x.dim() == 4:
        x = x.contiguous(memory_format=torch.channels_last)
    logits = model(x)
    return F.cross_entropy(logits.float().flatten(0, -2), y.flatten())


def batches(loader: torch.utils.data.DataLoader, start: int) -> Iterator[Sequence[torch.Tensor]]:
    """Batches from step ``start`` on: ``set_epoch`` reshuffles each epoch the same way on every
    rank, and a resumed run skips the batches its epoch already used."""
    per_epoch = len(loader)
    epoch, skip = divmod(start, per_epoch)
    while True:
        loader.sampler.set_epoch(epoch)  # type: ignore[attr-defined]
        for i, b in enumerate(loader):
            if i >= skip:
                yield b
        epoch, skip = epoch + 1, 0


# ------------------------------------------------------------------------ parallel wrappers


def wrap_ddp(model: nn.Module, device: torch.device, grad_dtype: str) -> nn.Module:
    """DDP with PyTorch's hook for ``grad_dtype``: allreduce_hook (FP32, DDP's default, in Python),
    fp16_compress_hook or bf16_compress_hook (cast each bucket, all-reduce, cast back)."""
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks as hooks
    from torch.nn.parallel import DistributedDataParallel

    ddp = DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
    hook = {"fp32": hooks.allreduce_hook, "fp16": hooks.fp16_compress_hook, "bf16": hooks.bf16_compress_hook}
    ddp.register_comm_hook(None, hook[grad_dtype])
    return ddp


def wrap_fsdp(model: nn.Module, device: torch.device, precision: str, grad_dtype: str) -> nn.Module:
    """FSDP2: each transformer block, then the whole model, with ``MixedPrecisionPolicy``.

    ``param_dtype`` is the dtype weights are gathered and computed in: every op, norms, softmax
    and the logits included (it is not autocast); ``reduce_dtype`` the gradients' dtype on the wire.
    """
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    mesh = init_device_mesh(device.type, (dist.get_world_size(),))
    policy = MixedPrecisionPolicy(param_dtype=DTYPES[precision], reduce_dtype=DTYPES[grad_dtype])
    for block in model.h:  # type: ignore[union-attr]
        fully_shard(block, mesh=mesh, mp_policy=policy)
    fully_shard(model, mesh=mesh, mp_policy=policy)  # the same module, now an FSDPModule
    return model


# ---------------------------------------------------------------------------- checkpoints


class TrainState:
    """Model, optimizer, GradScaler and step as one ``Stateful`` for ``torch.distributed.checkpoint``.

    ``get_state_dict``/``set_state_dict`` give the same keys for DDP and FSDP2 (sharded tensors
    stay sharded: every rank writes and reads its own shards)."""

    def __init__(self, model: nn.Module, opt: torch.optim.Optimizer, scaler: torch.amp.GradScaler) -> None:
        self.model, self.opt, self.scaler, self.step = model, opt, scaler, 0

    def state_dict(self) -> dict[str, Any]:
        from torch.distributed.checkpoint.state_dict import get_state_dict

        model_sd, optim_sd = get_state_dict(self.model, self.opt)
        return {"model": model_sd, "optim": optim_sd, "scaler": self.scaler.state_dict(), "step": self.step}

    def load_state_dict(self, sd: dict[str, Any]) -> None:
        from torch.distributed.checkpoint.state_dict import set_state_dict

        set_state_dict(self.model, self.opt, model_state_dict=sd["model"], optim_state_dict=sd["optim"])
        self.scaler.load_state_dict(sd["scaler"])
        self.step = int(sd["step"])


def save(state: TrainState, folder: Path) -> None:
    """Every rank writes its part into ``folder`` (a collective)."""
    import warnings

    import torch.distributed.checkpoint as dcp

    with warnings.catch_warnings():  # replacing the previous save of a resumed run is the intent
        warnings.filterwarnings("ignore", message="Detected an existing checkpoint")
        dcp.save({"train": state}, checkpoint_id=str(folder))


def load(state: TrainState, folder: Path) -> None:
    """Every rank reads its part of ``folder`` back into the live objects (a collective)."""
    import torch.distributed.checkpoint as dcp

    dcp.load({"train": state}, checkpoint_id=str(folder))


# ------------------------------------------------------------------------------ measuring


def fsdp_reduce_bytes(model: nn.Module, grad_dtype: str) -> int:
    """What each rank hands to FSDP2's reduce-scatter per step: every (unsharded) gradient in ``reduce_dtype``."""
    return sum(p.numel() for p in model.parameters()) * DTYPES[grad_dtype].itemsize


def held_bytes(net: nn.Module, opt: torch.optim.Optimizer) -> int:
    """Bytes of weights and optimizer state this rank keeps (FSDP2: its shards only)."""
    tensors = [*net.parameters(), *(v for st in opt.state.values() for v in st.values() if torch.is_tensor(v))]
    local = [t.to_local() if hasattr(t, "to_local") else t for t in tensors]
    return sum(t.numel() * t.element_size() for t in local if t.numel() > 1)


def peak_memory(device: torch.device) -> tuple[int, str]:
    """This rank's peak: CUDA memory allocated by tensors, or the process's peak resident memory."""
    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device)), "cuda max_memory_allocated"
    scale = 1 if sys.platform == "darwin" else 1024  # ru_maxrss: bytes on macOS, KiB on Linux
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * scale, "cpu max resident set size"


# ---------------------------------------------------------------------------------- run


def train(args: argparse.Namespace, device: torch.device) -> tuple[dict[str, Any], nn.Module]:
    """Build, wrap, (resume,) train, (save); return what rank 0 reports, and the wrapped model."""
    from torch.utils.data import DataLoader, DistributedSampler

    world, rank = dist.get_world_size(), dist.get_rank()
    model, data, tokens = build(args, device)
    n_params = sum(p.numel() for p in model.parameters())
    sampler: DistributedSampler[Any] = DistributedSampler(data, num_replicas=world, rank=rank, shuffle=True, seed=args.seed, drop_last=True)
    loader = DataLoader(data, batch_size=args.batch // world, sampler=sampler, drop_last=True)
    net = wrap_fsdp(model, device, args.precision, args.grad_dtype) if args.fsdp else wrap_ddp(model, device, args.grad_dtype)
    opt = torch.optim.AdamW(net.parameters(), lr=args.lr)
    scaler = make_scaler(args.precision, device)  # one per rank
    state = TrainState(net, opt, scaler)
    fresh_scale = scaler.get_scale() if scaler.is_enabled() else None  # what a new GradScaler starts at
    if args.resume:
        load(state, args.ckpt)
    start = state.step
    start_scale = scaler.get_scale() if scaler.is_enabled() else None  # after a resume: the checkpoint's
    cast = "fp32" if args.fsdp else args.precision  # FSDP2: the policy casts, not autocast
    losses, times, skipped = [], [], 0
    kept: list[torch.Tensor] = []  # the step's loss, to read after it

    forced = [False]  # this step's loss is made infinite (--overflow-at, on the last rank only)

    def keep_loss(batch: Any) -> torch.Tensor:
        loss = loss_of(net, batch, device)
        kept.append(loss * float("inf") if forced[0] else loss)
        return kept[-1]

    with tap_all_reduce() as calls:
        for step, batch in zip(range(start, args.steps), batches(loader, start), strict=False):
            before = scaler.get_scale() if scaler.is_enabled() else 1.0
            forced[0] = step == args.overflow_at and rank == world - 1
            kept.clear()
            synchronize(device)
            t0 = time.perf_counter()
            # scaler.step inside unscales first and skips the step if any rank's gradients hold inf/NaN
            amp_step(keep_loss, [batch], opt, scaler, precision=cast, device=device)
            synchronize(device)
            times.append(time.perf_counter() - t0)
            losses.append(kept[0].item())
            skipped += int(scaler.is_enabled() and scaler.get_scale() < before)
            state.step = step + 1
    if args.ckpt is not None:
        save(state, args.ckpt)
    done = len(times)
    mean_loss = torch.tensor([losses[-1] if losses else float("nan")], device=device)
    dist.all_reduce(mean_loss)  # every rank's last loss: their mean is the global batch's loss
    steady = sorted(times[1:] or times)
    wire = {c[1] for c in calls}
    return {
        "world_size": world, "nnodes": world // int(os.environ.get("LOCAL_WORLD_SIZE", world)),
        "backend": dist.get_backend(), "device_type": device.type, "precision": args.precision,
        "parallel": "fsdp2" if args.fsdp else "ddp", "grad_dtype": args.grad_dtype, "model": args.model,
        "preset": args.preset if args.model == "gpt" else None, "params": n_params,
        "sync_batchnorm": args.model == "resnet50" and device.type == "cuda",
        "global_batch": args.batch, "start_step": start, "steps": state.step, "steps_run": done,
        "final_loss": float(mean_loss) / world if done else None, "rank0_losses": losses, "skipped_steps": skipped,
        "loss_scale": scaler.get_scale() if scaler.is_enabled() else None, "fresh_scale": fresh_scale,
        "start_scale": start_scale, "overflow_at": args.overflow_at, "_held": held_bytes(net, opt),
        "step_ms_median": 1e3 * steady[len(steady) // 2] if steady else None,
        "samples_per_s": args.batch * len(steady) / sum(steady) if steady else None,
        "tokens_per_s": args.batch * tokens * len(steady) / sum(steady) if steady and args.model == "gpt" else None,
        "bytes_reduced_per_step": fsdp_reduce_bytes(model, args.grad_dtype) if args.fsdp else
        (sum(c[0] for c in calls) // done if done else None),
        "bytes_source": "computed: parameters x reduce_dtype (FSDP2 reduce-scatter input)" if args.fsdp
        else "tapped: tensors handed to torch.distributed.all_reduce by the DDP hook",
        "wire_dtype": DTYPES[args.grad_dtype].__repr__().replace("torch.", "") if args.fsdp else
        (wire.pop() if len(wire) == 1 else sorted(wire)),
    }, net


def finish(args: argparse.Namespace, device: torch.device, result: dict[str, Any]) -> None:
    """Gather every rank's peak memory and device; rank 0 writes the JSON file."""
    peak, kind = peak_memory(device)
    facts = gpu_facts(device) if device.type == "cuda" else None
    name = facts.real_name if facts else "cpu"
    per_rank: list[Any] = [None] * dist.get_world_size()
    mine = {"peak_memory_bytes": peak, "held_bytes": result.pop("_held"), "device": name, "host": os.uname().nodename}
    dist.all_gather_object(per_rank, mine)
    if dist.get_rank() != 0:
        return
    nccl = ".".join(map(str, torch.cuda.nccl.version())) if dist.get_backend() == "nccl" else None
    result.update(peak_memory_bytes=[r["peak_memory_bytes"] for r in per_rank], memory_kind=kind,
                  held_bytes=[r["held_bytes"] for r in per_rank],
                  devices=[r["device"] for r in per_rank], hosts=sorted({r["host"] for r in per_rank}),
                  torch=torch.__version__, cuda=torch.version.cuda, nccl=nccl,
                  command="torchrun ... -m fp16lab.labs.multi_gpu.train " + " ".join(sys.argv[1:]))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")


def full_weights(net: nn.Module) -> dict[str, torch.Tensor]:
    """Every weight, whole, on the CPU (FSDP2: ``full_tensor`` gathers the shards; a collective)."""
    out = {}
    for name, p in net.named_parameters():
        t = p.full_tensor() if hasattr(p, "full_tensor") else p
        out[name.removeprefix("module.")] = t.detach().float().cpu()
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """Parse, join the group, train, report; the process group is always destroyed."""
    args = parse_args(argv)
    device, _ = setup(args.timeout, args.cpu)
    try:
        result, net = train(args, device)
        if args.save_weights is not None:  # for comparisons: every rank takes part (FSDP2 gathers)
            weights = full_weights(net)
            if dist.get_rank() == 0:
                torch.save(weights, args.save_weights)
        finish(args, device, result)
        dist.barrier()  # leave together: a rank that tears down while another still talks can abort it
    finally:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    code = main()
    # Leave without running C++ destructors: a gloo thread still alive at interpreter exit can abort the
    # process ("terminate called without an active exception", SIGABRT) after the run has finished and
    # written its results, and torchrun then reports the whole run as failed.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
