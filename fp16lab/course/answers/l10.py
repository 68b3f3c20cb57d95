"""Lesson 10's exercise checks: each computes the answer itself and shows only the verdict or a hint."""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from fp16lab.course.answers import cannot_check, require, verdict
from fp16lab.labs.runtime.i18n import tr

__all__ = ["TEN_GBE_BYTES_PER_S", "check_ddp_by_hand", "check_wire_dtype", "check_flushed", "check_fsdp_choice",
           "check_fsdp_job"]

TEN_GBE_BYTES_PER_S = 10e9 / 8  # 10 Gbit/s Ethernet line rate, in bytes (cited: IEEE 802.3ae)


def _grad(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    model.zero_grad()
    F.cross_entropy(model(x), y).backward()
    return model[0].weight.grad.clone()  # type: ignore[index]


def check_ddp_by_hand(half_grads: Any, avg_grad: Any, model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> None:
    """Exercise 1: two halves' gradients, and their mean equals the whole batch's gradient."""
    require(isinstance(half_grads, (list, tuple)) and len(half_grads) == 2, tr("half_grads: one gradient per half"))
    halves = list(zip(x.chunk(2), y.chunk(2), strict=True))
    for g, (xs, ys) in zip(half_grads, halves, strict=True):
        want = _grad(model, xs, ys)
        require(torch.is_tensor(g) and g.shape == want.shape and g.dtype == want.dtype,
                tr("each entry of half_grads is ex_model[0].weight.grad of one half: same shape and dtype (FP32) "
                   "as that weight"))
        require(torch.allclose(g, want, atol=1e-7), tr("each entry of half_grads is the gradient of one half's mean loss"))
    full = _grad(model, x, y)
    require(torch.is_tensor(avg_grad) and avg_grad.shape == full.shape and avg_grad.dtype == full.dtype,
            tr("avg_grad is one tensor shaped like ex_model[0].weight, in FP32"))
    # The mean of two FP32 tensors is rounded once (halving is exact), so every way of computing it from half_grads
    # lands within an ulp of this, on CPU and GPU alike. The whole batch's gradient, recomputed, equals it only up to
    # its matmuls' different summation order (differences of several ulps where terms cancel): it would pass a
    # rounding tolerance, but it shows nothing about the halves.
    mean = (half_grads[0].to(avg_grad.device) + half_grads[1].to(avg_grad.device)) / 2
    from_halves = torch.allclose(avg_grad, mean, rtol=2.0**-22, atol=1e-12)
    require(from_halves or not torch.allclose(avg_grad, full.to(avg_grad.device), rtol=1e-5, atol=1e-7),
            tr("avg_grad is the whole batch's gradient computed again, equal to the halves' mean only up to "
               "rounding: build it from the two entries of half_grads, as DDP's all-reduce does"))
    verdict(from_halves, tr("average the halves' gradients: DDP divides the sum by the number of ranks"))


def _ring_seconds(params: float, wire_bytes: int, n: int, bandwidth: float) -> float:
    return 2 * (n - 1) / n * params * wire_bytes / bandwidth


def check_wire_dtype(choice: Any, grad_seconds: Any, *, params: float, bf16_measured: bool, ranks: int = 4) -> None:
    """Exercise 2: BF16 training on two boxes of two GPUs (``ranks`` = 4, one ring) over 10 GbE: which gradient
    dtype, and the seconds per step it puts on the link (each hop of the ring carries what one rank sends)."""
    require(choice in ("fp32", "fp16", "bf16"), tr("choice is one of 'fp32', 'fp16', 'bf16'"))
    require(choice != "fp32", tr("FP32 gradients put twice the bytes on a link that is already the bottleneck"))
    require(choice != "fp16", tr("BF16 training has no loss scale: FP16 on the wire flushes small gradients "
                              "to zero (exercise 3) and can overflow large ones; BF16 keeps FP32's range"))
    want = _ring_seconds(params, 2, ranks, TEN_GBE_BYTES_PER_S)
    grad_seconds = _scalar(grad_seconds)
    require(_number(grad_seconds), tr("grad_seconds is a number of seconds"))
    got = float(grad_seconds)
    close = lambda a, b: math.isclose(a, b, rel_tol=0.02)  # noqa: E731
    require(not close(got / 1e3, want), tr("grad_seconds is in seconds: you gave milliseconds (section 8's table prints ms)"))
    require(not close(got * 2**30 / 1e9, want),
            tr("10 GbE's 1.25 GB/s is decimal, 1.25e9 bytes per second, not 1.25 GiB/s (2**30)"))
    require(not close(got * 8, want), tr("10 GbE carries 10 Gbit/s: divide by its bytes per second, an eighth of that"))
    require(not close(got, want * 2), tr("a BF16 gradient is 2 bytes on the wire, not 4"))
    # Two ranks (the boxes counted instead of the GPUs) and a forgotten ring factor give the same number: 2(2-1)/2 = 1.
    require(not close(got, _ring_seconds(params, 2, 2, TEN_GBE_BYTES_PER_S)),
            tr("count the GPUs, not the boxes: the ring joins all {ranks} ranks, and each sends 2(N-1)/N times the "
               "payload (for two ranks that factor is 1, so it looks as if it could be left out)", ranks=ranks))
    require(not close(got, want / 2),
            tr("an all-reduce sends the payload around the ring twice (a reduce-scatter, then an all-gather): "
               "2(N-1)/N, not (N-1)/N"))
    verdict(close(got, want),
            tr("grad_seconds: section 8's ring all-reduce time for every rank in the ring, with your dtype's bytes "
               "per parameter"))
    if not bf16_measured:
        print(tr("(this torch build cannot run bf16_compress_hook; on a CUDA build it can)"))


def check_flushed(flushed: Any, flushed_scaled: Any, g: torch.Tensor, world: int = 8) -> None:
    """Exercise 3: the fraction of a bucket that FP16 compression turns into 0, without and with the scale.

    The hook runs ``buffer.to(torch.float16).div_(world_size)``: the cast rounds once, the division in float16
    rounds again. Each plausible mistake (another order, the division in FP32 or left out, the scale applied
    after the cast, bfloat16, a guessed 0) gives its own fraction on the exercise's data and its own hint."""
    def frac(wire: torch.Tensor) -> float:
        return float(((wire == 0) & (g != 0)).float().mean())

    def hook(scale: float) -> float:  # what fp16_compress_hook does to the (scaled) bucket
        return frac((g * scale).to(torch.float16).div_(world))

    flushed, flushed_scaled = _scalar(flushed), _scalar(flushed_scaled)
    for value, name in ((flushed, "flushed"), (flushed_scaled, "flushed_scaled")):
        require(_number(value) and 0 <= float(value) <= 1, tr("{name} is a fraction between 0 and 1", name=name))
    same = lambda a, b: abs(float(a) - b) < 1e-9  # noqa: E731  (counts of 4096 values: exact fractions)
    generic = tr("cast g_ex to float16, then divide by 8 in float16, and count the values that became 0 (for "
                 "flushed_scaled, multiply g_ex by 2**16 first)")
    for value, scale in ((flushed, 1.0), (flushed_scaled, 2.0**16)):
        if same(value, hook(scale)):
            continue
        require(not same(value, 0.0),
                tr("0 is what a bfloat16 cast gives (FP32's range), or a guess: fp16_compress_hook casts to float16, "
                   "whose window, scaled or not, still has a lower end; compute the fraction"))
        wrong = [
            (frac((g * scale).to(torch.float16).float() / world),
             tr("div_(world_size) runs on the FP16 bucket: divide by 8 in float16, after the cast (dividing in FP32, "
                "or not at all, counts only what the cast itself flushed)")),
            (frac(((g * scale) / world).to(torch.float16)),
             tr("the hook casts first and divides after, in float16: two roundings; dividing first rounds once")),
            (frac((g * scale).to(torch.float16).div_(world).div_(scale)) if scale != 1.0 else math.nan,
             tr("count the zeros on the wire, after the division: unscale_ divides by the scale later, on the "
                "gradients cast back to FP32")),
            (frac(g.to(torch.float16) * scale / world) if scale != 1.0 else math.nan,
             tr("the gradients reach the bucket already scaled (GradScaler scaled the loss): multiply by 2**16 "
                "before the cast, not after")),
            (hook(1.0) if scale != 1.0 else math.nan, tr("multiply by the scale 2**16 before the cast")),
        ]
        for fraction, hint in wrong:
            require(not same(value, fraction), hint)
        require(False, generic)
    verdict(True, generic)


def _scalar(value: Any) -> Any:
    """A 0-d tensor or a NumPy scalar as the Python number it holds, so that either form of an answer counts."""
    if torch.is_tensor(value) and value.numel() == 1 and value.dim() == 0:
        return value.item()
    if type(value).__module__ == "numpy" and hasattr(value, "item") and getattr(value, "shape", None) == ():
        return value.item()
    return value


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(float(value))


def check_fsdp_choice(use_fsdp: Any, gib_per_gpu: Any, traffic_ratio: Any, *, ddp_bytes_per_param: float,
                      fsdp_bytes_per_param: float, params: float = 1.3e9) -> None:
    """Exercise 4: DDP or FSDP2 for 1.3B parameters on two 24 GB cards, from the measured bytes per parameter,
    and what FSDP2 (``fsdp_bf16_fp32``: BF16 weights, FP32 reduction) sends per step compared with DDP training
    in BF16 with BF16 gradients (``--grad-dtype bf16``). Every parameter counts as a block's (gathered twice)."""
    use_fsdp, gib_per_gpu, traffic_ratio = _scalar(use_fsdp), _scalar(gib_per_gpu), _scalar(traffic_ratio)
    require(isinstance(use_fsdp, bool), tr("use_fsdp is True or False"))
    ddp_gib = float(ddp_bytes_per_param) * params / 2**30
    require(use_fsdp is bool(ddp_gib > 0.5 * 24e9 / 2**30),
          tr("compare DDP's bytes per GPU with half the card: is the other half left for gradients and activations?"))
    chosen, other = ((fsdp_bytes_per_param, ddp_bytes_per_param) if use_fsdp else
                     (ddp_bytes_per_param, fsdp_bytes_per_param))
    want = float(chosen) * params / 2**30
    require(_number(gib_per_gpu), tr("gib_per_gpu is a number of GiB"))
    got = float(gib_per_gpu)
    close = lambda a, b: math.isclose(a, b, rel_tol=0.02)  # noqa: E731
    if not close(got, want):
        require(not close(got, float(other) * params / 2**30),
                tr("that is the other setup's held bytes: use the row of the setup you chose"))
        require(not close(got, want / 2),
                tr("held_bytes_per_param is already per rank (FSDP2's 1/N is in it): do not divide by the number "
                   "of GPUs again"))
        require(not close(got, want * 2**30 / 1e9), tr("gib_per_gpu is in GiB: divide the bytes by 2**30, not 1e9"))
        require(not any(close(got, (float(chosen) + extra) * params / 2**30) for extra in (2.0, 4.0)),
                tr("between steps means weights and Adam state (held_bytes_per_param): the gradients come on top "
                   "and are not part of this number"))
        require(False, tr("gib_per_gpu: section 7's measured held bytes per parameter (of the setup you chose) for 1.3 "
                          "billion parameters, in GiB (2**30 bytes)"))
    require(_number(traffic_ratio), tr("traffic_ratio is a number: FSDP2's bytes per step divided by DDP's"))
    # Bytes each rank sends per parameter (ring, N ranks): all-reduce 2(N-1)/N x payload; all-gather and
    # reduce-scatter (N-1)/N x payload each. FSDP2: BF16 all-gather in forward and again in backward, FP32
    # reduce-scatter; DDP: a BF16 all-reduce (bf16_compress_hook). Right: 4 / 2 = 2.
    n, bf16, fp32 = 2, 2.0, 4.0
    once, twice = (n - 1) / n, 2 * (n - 1) / n
    fsdp_sent, ddp_sent = once * (2 * bf16 + fp32), twice * bf16
    r = float(traffic_ratio)
    require(not close(r, 1.5),
            tr("1.5 counts one all-gather, or every collective in one dtype (ZeRO's 1.5x): fsdp_bf16_fp32 "
               "all-gathers the 2-byte BF16 weights twice per step (for forward, and again for backward: "
               "reshard_after_forward frees them in between) and reduce-scatters 4-byte FP32 gradients"))
    require(not close(r, fsdp_sent / (twice * fp32)),
            tr("the DDP to compare trains in BF16 with --grad-dtype bf16: its hook all-reduces 2-byte BF16 "
               "gradients, not ddp_fp32's 4"))
    require(not close(r, ddp_sent / fsdp_sent), tr("traffic_ratio is FSDP2's bytes divided by DDP's, not the reverse"))
    require(not close(r, fsdp_sent / (once * bf16)),
            tr("a ring all-reduce sends its payload twice, 2(N-1)/N; an all-gather or a reduce-scatter sends it "
               "once, (N-1)/N"))
    verdict(close(r, fsdp_sent / ddp_sent),
            tr("traffic_ratio: section 8's rule for each collective, with the bytes per parameter each one moves"))


def _why_failed(log: str) -> str:
    """The learner-facing reason a run failed: a known mistake's hint, else the log's last error line."""
    if "Attempting to unscale FP16 gradients" in log:
        return tr("keep the FP32 weights: MixedPrecisionPolicy(param_dtype=torch.float16) casts for compute; "
                  "model.half() makes the master weights and the gradients FP16, and GradScaler refuses those")
    if "environment variable RANK expected" in log or "MASTER_ADDR" in log:
        return _torchrun_hint()
    lines = [ln.strip() for ln in log.splitlines()
             if ("Error" in ln or "Signal" in ln) and "ChildFailedError" not in ln and not ln.startswith("File ")]
    return tr("the script failed under torchrun: {line}", line=(lines[-1] if lines else "no error line in its output")[:300])


def _aborted_at_exit(job_run: subprocess.CompletedProcess, job_dir: Path, script: Path | None) -> bool:
    """A rank killed by SIGABRT after the run wrote its results, with no error from the script itself.

    Why: a gloo thread still alive at interpreter exit can abort a finished process ("terminate called
    without an active exception"; see fp16lab/labs/multi_gpu/train.py), and torchrun then fails the whole
    run. The check then judges what the run wrote, as it would for a clean exit.
    """
    log = f"{job_run.stdout or ''}\n{job_run.stderr or ''}"
    result = job_dir / "result.json"
    return (script is not None and "SIGABRT" in log and f'{script.name}", line' not in log and result.is_file()
            and result.stat().st_mtime >= script.stat().st_mtime)


def _torchrun_hint() -> str:  # one hint, two places
    return tr("start the script with torchrun (python -m torch.distributed.run --standalone --nproc_per_node=2 ...): "
              "it sets RANK, WORLD_SIZE and the rendezvous")


def _dcp_hint() -> str:  # one hint, two places
    return tr("save with torch.distributed.checkpoint (dcp.save) into job_dir / \"ckpt\" on every rank: torch.save "
              "on rank 0 writes no sharded checkpoint")


def _checkpoint_tensors(folder: Path) -> dict[str, Any]:
    """The tensors a DCP checkpoint folder declares: name -> TensorStorageMetadata (dtype, chunks)."""
    from torch.distributed.checkpoint import FileSystemReader
    from torch.distributed.checkpoint.metadata import TensorStorageMetadata

    meta = FileSystemReader(str(folder)).read_metadata()
    return {k: v for k, v in meta.state_dict_metadata.items() if isinstance(v, TensorStorageMetadata)}


def check_fsdp_job(job_run: Any, job_dir: Path) -> None:
    """Exercise 5: the learner's own FSDP2 + MixedPrecisionPolicy + DCP script ran under torchrun on 2 ranks.

    Reads rank 0's ``result.json`` and the checkpoint's own metadata (written by every rank), so it
    checks what the run did, not what the script says it did.
    """
    if not isinstance(job_dir, Path) or not job_dir.is_dir():
        cannot_check(f"job_dir must be the lesson's folder for this exercise (a pathlib.Path that exists), got {job_dir!r}")
    require(isinstance(job_run, subprocess.CompletedProcess),
            tr("job_run is what subprocess.run returned when it launched your script with torchrun"))
    cmd = " ".join(map(str, job_run.args)) if isinstance(job_run.args, (list, tuple)) else str(job_run.args)
    require("torch.distributed.run" in cmd or "torchrun" in cmd, _torchrun_hint())
    script = next((Path(a) for a in (job_run.args if isinstance(job_run.args, (list, tuple)) else [])
                   if str(a).endswith(".py") and Path(a).is_file()), None)
    source = script.read_text(encoding="utf-8", errors="replace") if script else ""
    if job_run.returncode != 0 and not _aborted_at_exit(job_run, job_dir, script):
        if "torch.save" in source and "dcp.save" not in source:
            require(False, _dcp_hint())
        require(False, _why_failed(f"{job_run.stdout or ''}\n{job_run.stderr or ''}"))
    out = job_dir / "result.json"
    require(out.is_file(), tr("no result.json in job_dir: rank 0 writes it at the end of the script"))
    res = json.loads(out.read_text())
    require(res.get("world_size") == 2 and res.get("backend") == "gloo",
            tr("two ranks on gloo: --nproc_per_node=2, and init_process_group(\"gloo\") (the CPU backend)"))
    require(res.get("compute_dtype") == "torch.float16",
            tr("pass mp_policy=MixedPrecisionPolicy(param_dtype=torch.float16) to every fully_shard call: without it "
               "FSDP2 computes in the weights' own FP32"))
    calls = _script_calls(source)
    require("autocast" not in calls,
            tr("no torch.autocast here: the 16-bit compute comes from MixedPrecisionPolicy(param_dtype=torch.float16), "
               "which also gathers the weights in FP16; autocast would gather FP32 and cast per op"))
    reduce = _policy_reduce_dtypes(source)
    require(bool(reduce) and "None" not in reduce,
            tr("give MixedPrecisionPolicy reduce_dtype=torch.float32: left out, it falls back to param_dtype and "
               "the gradients are reduced in FP16"))
    sixteen = [d for d in reduce if d in _SIXTEEN_BIT]
    require(not sixteen, tr("reduce_dtype=torch.{dtype} sums the ranks' gradients in 16 bits, which round away small "
                            "contributions: give MixedPrecisionPolicy reduce_dtype=torch.float32",
                            dtype=sixteen[0] if sixteen else ""))
    require(len(calls.get("fully_shard", [])) >= 2,
            tr("call fully_shard on each Linear first (a loop), then on the whole model: one call on the model "
               "makes one all-gather of everything, no per-layer sharding units"))
    ckpt = job_dir / "ckpt"
    require((ckpt / ".metadata").is_file(), _dcp_hint())
    tensors = _checkpoint_tensors(ckpt)
    weights = {k: v for k, v in tensors.items() if k.startswith("model.")}
    require(bool(weights), tr("the checkpoint holds no model weights: save get_state_dict(model, opt)'s model part under \"model\""))
    require(all(len(v.chunks) == 2 for v in weights.values()),
            tr("shard every Linear and then the whole model with fully_shard: each rank should save its half of "
               "every weight, not a full copy"))
    require(all(v.properties.dtype == torch.float32 for v in weights.values()),
            tr("keep the FP32 weights: MixedPrecisionPolicy(param_dtype=torch.float16) casts for compute; "
               "model.half() makes the master weights FP16"))
    require(_has_scaler(ckpt),
            tr("put scaler.state_dict() into what dcp.save writes (under \"scaler\"): a resumed FP16 run must "
               "continue at the saved loss scale"))
    verdict("load" in calls and "load_state_dict" in calls and "set_state_dict" in calls
            and res.get("reloaded_equal") is True and res.get("scale") == 2.0**16,
            tr("load the checkpoint back with dcp.load, then set_state_dict and scaler.load_state_dict: the weights "
               "and the scale afterwards must equal those saved"))


_SIXTEEN_BIT = ("float16", "half", "bfloat16")  # torch's names (and aliases) of the 16-bit float dtypes
_POLICY_FIELDS = ("param_dtype", "reduce_dtype", "output_dtype", "cast_forward_inputs")  # MixedPrecisionPolicy's order


def _policy_reduce_dtypes(source: str) -> list[str]:
    """Each MixedPrecisionPolicy(...) call's reduce_dtype, as far as the source proves it: a dtype's name ("float32",
    "float", "bfloat16", ...), "None" where it is left out or None, "?" where the source does not say (``**kwargs``,
    a name assigned elsewhere or more than once, a computed value). Keyword or positional (the second field), given
    directly or through a variable assigned once (``rd = torch.float32``); an imported alias of the class counts.
    """
    import ast

    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    aliases = _import_aliases(tree)
    assigned: dict[str, list[ast.AST]] = {}
    for node in ast.walk(tree):
        pairs: list[tuple[ast.AST, ast.AST]] = []
        if isinstance(node, ast.Assign):
            pairs = [(t, node.value) for t in node.targets]
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            pairs = [(node.target, node.value)]
        while pairs:
            target, value = pairs.pop()
            if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple) and len(target.elts) == len(value.elts):
                pairs.extend(zip(target.elts, value.elts, strict=True))  # a, b = torch.float16, torch.float32
            elif isinstance(target, ast.Name):
                assigned.setdefault(target.id, []).append(value)
            elif isinstance(target, (ast.Tuple, ast.List)):  # unpacked from something the source does not spell out
                for elt in ast.walk(target):
                    if isinstance(elt, ast.Name):
                        assigned.setdefault(elt.id, []).append(ast.Constant(value=...))

    def dtype(node: ast.AST, depth: int = 0) -> str:
        if isinstance(node, ast.Constant):
            return "None" if node.value is None else "?"
        if isinstance(node, ast.Attribute):
            return node.attr
        if isinstance(node, ast.Name) and depth < 8 and len(assigned.get(node.id, [])) == 1:
            return dtype(assigned[node.id][0], depth + 1)
        if isinstance(node, ast.Name) and node.id not in assigned and node.id in aliases:
            return aliases[node.id]  # from torch import float16 (as f16)
        return "?"

    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _call_name(node.func, aliases) == "MixedPrecisionPolicy":
            given = {k.arg: k.value for k in node.keywords if k.arg}
            given.update({f: a for f, a in zip(_POLICY_FIELDS, node.args, strict=False)})
            if "reduce_dtype" in given and not any(isinstance(a, ast.Starred) for a in node.args[:2]):
                found.append(dtype(given["reduce_dtype"]))
            elif any(k.arg is None for k in node.keywords) or any(isinstance(a, ast.Starred) for a in node.args):
                found.append("?")  # MixedPrecisionPolicy(**kw) or (*args): the source does not say
            else:
                found.append("None")
    return found


def _import_aliases(tree: Any) -> dict[str, str]:
    """The names ``from m import Name (as Alias)`` binds: Alias (or Name) -> Name, so that a renamed import still
    counts as what it is."""
    import ast

    return {a.asname or a.name: a.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
            for a in node.names}


def _call_name(func: Any, aliases: dict[str, str]) -> str:
    import ast

    if isinstance(func, ast.Attribute):
        return func.attr
    return aliases.get(func.id, func.id) if isinstance(func, ast.Name) else ""


def _script_calls(source: str) -> dict[str, list[dict[str, str]]]:
    """The functions the learner's script calls, by their last name, with each call's keyword arguments' last names.

    A call inside a loop counts twice: what the check needs to know is whether the code runs it more than once.
    """
    import ast

    try:
        tree = ast.parse(source)
    except SyntaxError:
        return {}
    found: dict[str, list[dict[str, str]]] = {}
    aliases = _import_aliases(tree)

    def last(node: ast.AST) -> str:
        return node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""

    def visit(node: ast.AST, in_loop: bool) -> None:
        if isinstance(node, ast.Call) and _call_name(node.func, aliases):
            kws = {k.arg: last(k.value) for k in node.keywords if k.arg}
            found.setdefault(_call_name(node.func, aliases), []).extend([kws] * (2 if in_loop else 1))
        for child in ast.iter_child_nodes(node):
            visit(child, in_loop or isinstance(node, (ast.For, ast.While, ast.comprehension)))

    visit(tree, False)
    for node in ast.walk(tree):  # a comprehension's element runs once per item too
        if isinstance(node, (ast.ListComp, ast.GeneratorExp, ast.SetComp)):
            visit(node.elt, True)
    return found


def _has_scaler(folder: Path) -> bool:
    """Whether the checkpoint declares any entry under ``scaler`` (tensor or bytes)."""
    from torch.distributed.checkpoint import FileSystemReader

    return any(k.startswith("scaler.") for k in FileSystemReader(str(folder)).read_metadata().state_dict_metadata)

