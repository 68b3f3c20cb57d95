"""Command line: ``python -m fp16lab doctor`` (and further subcommands)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

__all__ = ["main"]


def _doctor(args: argparse.Namespace) -> int:
    from fp16lab.env import report

    r = report(args.device_index)
    print(r)
    return 0 if r.ok else 1


def _add_doctor(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = sub.add_parser("doctor", help="check this machine for the series (exit 1 on FAIL)")
    p.add_argument("--device-index", type=int, default=0, help="CUDA GPU to report (default 0)")
    p.set_defaults(func=_doctor)


# Each subcommand registers itself here: (add_parser function).
SUBCOMMANDS: list[Callable[["argparse._SubParsersAction[argparse.ArgumentParser]"], None]] = [
    _add_doctor,
    lambda sub: __import__("fp16lab.bench", fromlist=["add_bench_parser"]).add_bench_parser(sub),
    lambda sub: __import__("fp16lab.distributed.cli", fromlist=["add_distributed_parser"]).add_distributed_parser(sub),
]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fp16lab", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    for add in SUBCOMMANDS:
        add(sub)
    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
