"""fp16lab.labs.multi_gpu.train under torchrun on CPU processes (gloo): one host, two "nodes", errors.

Every torchrun costs seconds (each process imports torch), so the runs start together in one
module fixture (the resume run waits for its checkpoint), and the tests read what they left.
PyTorch is the oracle: one process on the global batch for DDP, the uninterrupted run for resume.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from fp16lab.labs.multi_gpu import train

LIMIT = 120  # seconds any torchrun here may take before the test calls it a hang
OVERFLOW = ["--overflow-at", "1"]  # step 1 overflows on the last rank: every GradScaler backs off once
COMMON = ["--samples", "32", "--batch", "8", "--steps", "6"]  # 4 steps per epoch: 6 steps cross an epoch


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _torchrun(*launcher: str) -> list[str]:
    # --cpu: gloo processes on any machine (two ranks need no two GPUs; a 1-GPU machine would refuse LOCAL_RANK 1)
    return [sys.executable, "-m", "torch.distributed.run", *launcher, "-m", "fp16lab.labs.multi_gpu.train", "--cpu"]


Run = tuple[subprocess.Popen[bytes], float, Path]


def _start(cmd: list[str], log: Path) -> Run:
    # this checkout first, then whatever the environment already had on the path (a --target install, say)
    path = [str(Path(train.__file__).parents[3]), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path), "OMP_NUM_THREADS": "1"}
    with open(log, "wb") as out:
        return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env), time.monotonic(), log


def _finish(runs: dict[str, Run], then: dict[str, Callable[[], Run]]) -> dict[str, dict[str, object]]:
    """Wait for every run, polling, so that each one's own duration is recorded; when a run named in
    ``then`` ends well, start its follow-up. A run past LIMIT kills them all and fails."""
    ended: dict[str, float] = {}
    while len(ended) < len(runs):
        for name, (proc, t0, log) in list(runs.items()):
            if name in ended:
                continue
            if proc.poll() is not None:
                ended[name] = time.monotonic() - t0
                if name in then and proc.returncode == 0:
                    runs[f"{name}:then"] = then[name]()
            elif time.monotonic() - t0 > LIMIT:
                for p, _, _ in runs.values():
                    p.kill()
                pytest.fail(f"{name}: {' '.join(map(str, proc.args))} did not end within {LIMIT} s:\n"  # type: ignore[arg-type]
                            f"{log.read_text()[-3000:]}")
        time.sleep(0.1)
    return {name: {"rc": proc.returncode, "seconds": ended[name], "log": log.read_text()}
            for name, (proc, _, log) in runs.items()}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    d = tmp_path_factory.mktemp("torchrun")
    port, dead_port = _free_port(), _free_port()
    standalone = _torchrun("--standalone", "--nproc_per_node=2")
    nodes = [_torchrun("--nnodes=2", f"--node_rank={n}", "--nproc_per_node=1", "--rdzv-backend=c10d",
                       f"--rdzv-endpoint=127.0.0.1:{port}") for n in (0, 1)]
    started = {
        "ddp": _start([*standalone, "--precision", "fp16", *OVERFLOW, *COMMON, "--out", str(d / "ddp.json"),
                       "--save-weights", str(d / "ddp.pt")], d / "ddp.log"),
        "one": _start([*_torchrun("--standalone", "--nproc_per_node=1"), "--precision", "fp16", *OVERFLOW, *COMMON,
                       "--out", str(d / "one.json"), "--save-weights", str(d / "one.pt")], d / "one.log"),
        "first_half": _start([*standalone, "--precision", "fp16", *OVERFLOW, *COMMON[:-1], "3", "--ckpt", str(d / "ckpt"),
                              "--out", str(d / "first_half.json")], d / "first_half.log"),
        "node0": _start([*nodes[0], "--precision", "bf16", "--steps", "2", "--samples", "32", "--grad-dtype", "fp16",
                         "--out", str(d / "nodes.json")], d / "node0.log"),
        "node1": _start([*nodes[1], "--precision", "bf16", "--steps", "2", "--samples", "32", "--grad-dtype", "fp16",
                         "--out", str(d / "nodes.json")], d / "node1.log"),
        "bad_precision": _start([*_torchrun("--standalone", "--nproc_per_node=1"), "--precision", "fp8",
                                 "--steps", "1", "--out", str(d / "bad.json")], d / "bad.log"),
        "no_rendezvous": _start([*_torchrun("--nnodes=2", "--node_rank=1", "--nproc_per_node=1",
                                            "--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{dead_port}",
                                            "--rdzv-conf=is_host=false,read_timeout=5"),
                                 "--precision", "fp32", "--steps", "1", "--out", str(d / "never.json")],
                                d / "no_rendezvous.log"),
    }
    resume = [*standalone, "--precision", "fp16", *OVERFLOW, *COMMON, "--ckpt", str(d / "ckpt"), "--resume",
              "--out", str(d / "resumed.json"), "--save-weights", str(d / "resumed.pt")]
    # the second half continues from the first half's checkpoint
    return d, _finish(started, {"first_half": lambda: _start(resume, d / "resumed.log")})


def _ok(done: dict[str, dict[str, object]], name: str) -> None:
    assert done[name]["rc"] == 0, done[name]["log"]


def _flat(path: Path) -> torch.Tensor:
    weights = torch.load(path)
    return torch.cat([weights[k].reshape(-1) for k in sorted(weights)])


def test_two_processes_standalone_train_and_rank0_writes_the_json(runs):
    d, done = runs
    _ok(done, "ddp")
    r = json.loads((d / "ddp.json").read_text())
    assert (r["world_size"], r["nnodes"], r["backend"], r["device_type"]) == (2, 1, "gloo", "cpu")
    assert (r["precision"], r["parallel"], r["steps"], r["steps_run"]) == ("fp16", "ddp", 6, 6)
    assert len(r["peak_memory_bytes"]) == 2 and all(b > 0 for b in r["peak_memory_bytes"])
    assert r["bytes_reduced_per_step"] == r["params"] * 4 and r["wire_dtype"] == "float32"  # FP32 gradients
    # the GradScalers ran: the forced overflow of step 1 was skipped and backed off once, nothing else overflowed
    assert (r["fresh_scale"], r["start_scale"], r["overflow_at"]) == (2.0**16, 2.0**16, 1)
    assert r["loss_scale"] == 2.0**15 and r["skipped_steps"] == 1
    assert r["samples_per_s"] > 0 and r["torch"] == torch.__version__ and r["nccl"] is None
    assert 0 < r["final_loss"] < r["rank0_losses"][0]


def _initial_weights() -> torch.Tensor:
    from fp16lab.gpt import GPT, preset

    torch.manual_seed(0)  # the script's default --seed
    model = GPT(preset("tiny"))
    return torch.cat([p.detach().reshape(-1) for _, p in sorted(model.named_parameters())])


def test_ddp_on_two_processes_equals_one_process_on_the_global_batch(runs):
    d, done = runs
    _ok(done, "ddp")
    _ok(done, "one")
    ddp, one = _flat(d / "ddp.pt"), _flat(d / "one.pt")
    moved = float((one - _initial_weights()).norm() / one.norm())
    diff = float((ddp - one).norm() / one.norm())
    # FP16-AMP: each rank rounds its partial gradients to 16 bits, one process rounds the full batch's once
    assert diff <= 1e-2 * moved, (diff, moved)


def test_fp16_compressed_gradients_halve_the_bytes_across_two_nodes(runs):
    d, done = runs
    _ok(done, "node0")
    _ok(done, "node1")
    r = json.loads((d / "nodes.json").read_text())
    assert (r["world_size"], r["nnodes"], r["backend"]) == (2, 2, "gloo")
    assert r["wire_dtype"] == "float16" and r["bytes_reduced_per_step"] == r["params"] * 2


def test_resume_from_a_distributed_checkpoint_equals_the_uninterrupted_run(runs):
    d, done = runs
    _ok(done, "ddp")
    _ok(done, "first_half")
    _ok(done, "first_half:then")
    r = json.loads((d / "resumed.json").read_text())
    half = json.loads((d / "first_half.json").read_text())
    assert (r["start_step"], r["steps"], r["steps_run"]) == (3, 6, 3)
    assert half["skipped_steps"] == 1 and half["loss_scale"] == 2.0**15  # the checkpoint holds a backed-off scale
    assert r["start_scale"] == half["loss_scale"] != r["fresh_scale"]  # restored from it, not a fresh GradScaler
    assert r["loss_scale"] == json.loads((d / "ddp.json").read_text())["loss_scale"]
    assert torch.equal(_flat(d / "resumed.pt"), _flat(d / "ddp.pt"))


def test_a_bad_precision_is_one_clear_line(runs):
    _, done = runs
    bad = done["bad_precision"]
    assert bad["rc"] != 0 and bad["seconds"] < LIMIT
    lines = [ln for ln in str(bad["log"]).splitlines() if "--precision" in ln]
    assert lines == ["fp16lab.labs.multi_gpu.train: error: argument --precision: invalid choice: 'fp8' "
                     "(choose from 'fp32', 'fp16', 'bf16')"]


def test_an_unreachable_rendezvous_fails_within_its_timeout(runs):
    _, done = runs
    r = done["no_rendezvous"]
    assert r["rc"] != 0 and r["seconds"] < 90  # read_timeout=5 (alone: about 20 s), then the error
    last = str(r["log"]).strip().splitlines()[-1]
    assert last.startswith("torch.distributed.elastic.rendezvous.api.RendezvousConnectionError")


# ----------------------------------------------------------------- in this process, no torchrun


@pytest.mark.parametrize("argv, message", [
    (["--precision", "fp32", "--steps", "0", "--out", "x.json"], "--steps: must be a positive integer, got '0'"),
    (["--precision", "fp32", "--steps", "2", "--out", "x.json", "--batch", "3"],
     "--batch: 3 is not divisible by the world size 2"),
    (["--precision", "fp32", "--steps", "2", "--out", "x.json", "--resume"], "--resume: needs --ckpt DIR"),
    (["--precision", "fp32", "--steps", "2", "--out", "x.json", "--samples", "4"], "--samples: 4 is fewer than"),
    (["--precision", "float16", "--steps", "2", "--out", "x.json"], "invalid choice: 'float16'"),
    (["--precision", "bf16", "--steps", "2", "--out", "x.json", "--overflow-at", "1"],
     "--overflow-at: needs --precision fp16 and a step >= 0, got 1 with --precision bf16"),
    (["--precision", "fp16", "--steps", "2", "--out", "x.json", "--overflow-at", "-1"], "--overflow-at: needs"),
])
def test_bad_arguments_are_one_line_before_any_work(argv, message, monkeypatch, capsys):
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.delenv("RANK", raising=False)
    with pytest.raises(SystemExit, match=".") as exc:
        train.parse_args(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and message in err and err.count("\n") == 1, err


def test_the_bf16_hook_gate_is_the_rule_ddp_applies(monkeypatch):
    """On a CPU-only build DDP refuses bf16_compress_hook, and the gate says so; fp16's hook is fine."""
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    from torch.nn.parallel import DistributedDataParallel

    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        ddp = DistributedDataParallel(torch.nn.Linear(2, 2))
        if train.bf16_hook_support() is None:  # this build: the hook registers
            ddp.register_comm_hook(None, default_hooks.bf16_compress_hook)
        monkeypatch.setattr(torch.version, "cuda", None)
        monkeypatch.setattr(torch.version, "hip", None)
        assert "CPU-only build" in str(train.bf16_hook_support())
        ddp = DistributedDataParallel(torch.nn.Linear(2, 2))
        with pytest.raises(TypeError, match="BF16 all reduce communication hook required CUDA"):
            ddp.register_comm_hook(None, default_hooks.bf16_compress_hook)
        DistributedDataParallel(torch.nn.Linear(2, 2)).register_comm_hook(None, default_hooks.fp16_compress_hook)
    finally:
        dist.destroy_process_group()
    monkeypatch.setenv("WORLD_SIZE", "1")
    monkeypatch.setattr(torch.version, "cuda", None)
    with pytest.raises(SystemExit, match="^2$"):  # argparse refuses: exit status 2
        train.parse_args(["--precision", "bf16", "--steps", "1", "--out", "x.json", "--grad-dtype", "bf16"])


# ------------------------------------------------- python -m fp16lab distributed: the reference run


def test_the_reference_run_command_is_the_script_under_torchrun(tmp_path, monkeypatch, capsys):
    """Everything up to the point that needs GPUs: the commands, and the script accepts each one."""
    from fp16lab.__main__ import main
    from fp16lab.labs.multi_gpu.cli import REFERENCE_RUNS

    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
    assert main(["distributed", "--dry-run", "--out", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    names = [ln.split(":")[0] for ln in lines]
    want = [n for n in REFERENCE_RUNS if not (n == "ddp_bf16_grad_bf16" and train.bf16_hook_support())]
    assert names == want
    monkeypatch.setenv("WORLD_SIZE", "2")
    for line in lines:
        cmd = line.split(": ", 1)[1].split()
        assert cmd[:4] == ["torchrun", "--standalone", "--nproc_per_node=2", "-m"]
        args = train.parse_args(cmd[5:])  # the script accepts it
        assert args.out.parent == tmp_path and args.out.name.startswith("multi_gpu_")
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    with pytest.raises(SystemExit, match="--nproc 2 needs 2 GPUs"):
        main(["distributed", "--nproc", "2", "--dry-run"])
