"""Command line: ``python -m fp16lab <command>`` (also installed as ``fp16lab``).

Learners: ``doctor`` (is this machine ready?), ``lab`` (JupyterLab on your own copies of the
lessons), ``workspace`` (make or reset those copies), ``bench`` (the article's ResNet50 table
on your GPU), ``distributed`` (lesson 10's training script under torchrun on every GPU: the multi-GPU reference run). Authors and instructors: ``outputs`` (run and stamp lessons), ``workshop``
(student copies, agenda, proofs of the exercises), ``portability`` (every lesson under each
hardware profile: ``results/portability.json``), ``translations`` (the Chinese edition in
``notebooks/zh/``: made from the English lessons and the translations, checked to be in step).
``python -m fp16lab COMMAND --help`` for each.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Sequence

from fp16lab.course.command import run_parsed

__all__ = ["SUBCOMMANDS", "build_parser", "main", "run_parsed"]

SubParsers = argparse._SubParsersAction  # what add_subparsers() returns


def _doctor(args: argparse.Namespace) -> int:
    from fp16lab.course.env import report

    r = report(args.device_index)
    print(r)
    return 0 if r.ok else 1


def _add_doctor(sub: SubParsers[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("doctor", help="check this machine for the series (exit 1 on FAIL)",
                       description="Check this machine for the series: versions, GPU, what the chip "
                                   "supports, TF32 flags; OK/WARN/FAIL with a fix for each row. Exit 1 on FAIL.")
    p.add_argument("--device-index", type=int, default=0, help="CUDA GPU to report (default 0)")
    p.set_defaults(func=_doctor)


def _add_bench(sub: SubParsers[argparse.ArgumentParser]) -> None:
    from fp16lab.labs.benchmark import add_bench_parser

    add_bench_parser(sub)


def _add_distributed(sub: SubParsers[argparse.ArgumentParser]) -> None:
    from fp16lab.labs.multi_gpu.cli import add_distributed_parser

    add_distributed_parser(sub)


def _add_course(module: str) -> Callable[[SubParsers[argparse.ArgumentParser]], None]:
    def add(sub: SubParsers[argparse.ArgumentParser]) -> None:
        import importlib

        importlib.import_module(f"fp16lab.course.{module}").add_parser(sub)

    return add


# Each subcommand registers itself: (name, add_parser function), in the order --help lists them.
SUBCOMMANDS: list[tuple[str, Callable[[SubParsers[argparse.ArgumentParser]], None]]] = [
    ("doctor", _add_doctor),
    ("lab", _add_course("lab")),
    ("workspace", _add_course("workspace")),
    ("bench", _add_bench),
    ("distributed", _add_distributed),
    ("outputs", _add_course("outputs")),
    ("workshop", _add_course("workshop")),
    ("portability", _add_course("portability")),
    ("translations", _add_course("translations")),
]


_ROLE = re.compile(r":(?:func|mod|class|meth|attr|data|exc):`~?([^`]+)`")


def plain(text: str | None) -> str | None:
    """Docstring markup as a terminal shows it: ``:func:`x``` and double backticks become plain `x`."""
    if text is None:
        return None
    return _ROLE.sub(r"\1", text).replace("``", "`")


def _plain_help(parser: argparse.ArgumentParser) -> None:
    """Every description and help text of ``parser`` and its subcommands in plain text (recursively)."""
    parser.description = plain(parser.description)
    for action in parser._actions:
        action.help = plain(action.help)
        if isinstance(action, argparse._SubParsersAction):
            for choice in action._choices_actions:
                choice.help = plain(choice.help)
            for sub in action.choices.values():
                _plain_help(sub)


def build_parser() -> argparse.ArgumentParser:
    """The ``python -m fp16lab`` parser with every subcommand registered."""
    parser = argparse.ArgumentParser(prog="python -m fp16lab", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                title="commands")
    for _, add in SUBCOMMANDS:
        add(sub)
    _plain_help(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` and run the subcommand; a refused input is exit status 2 with the reason.

    Run by a Python that lacks fp16lab's dependencies (the system ``python`` in the clone, say), it
    says in one line which Python to use instead (exit status 1), not a traceback.
    """
    try:
        return run_parsed(build_parser().parse_args(argv))
    except ModuleNotFoundError as exc:
        top = (exc.name or "").split(".")[0]
        if top not in _DEPENDENCIES:
            raise
        print(_missing_dependency(top, argv), file=sys.stderr)
        return 1


# The packages fp16lab imports (pyproject.toml's dependencies, by import name).
_DEPENDENCIES = {"torch", "torchvision", "pandas", "numpy", "matplotlib", "seaborn", "tqdm", "ipywidgets",
                 "jupyterlab", "nbformat", "nbclient"}


def _missing_dependency(module: str, argv: Sequence[str] | None = None) -> str:
    """The one line for a Python without ``module``: run the command with the project's environment instead."""
    args = " ".join(sys.argv[1:] if argv is None else argv) or "doctor"
    venv = ".venv\\Scripts\\python" if sys.platform == "win32" else ".venv/bin/python"
    return (f"python -m fp16lab: this Python ({sys.executable}) has no {module!r}, which fp16lab needs: run "
            f"`{venv} -m fp16lab {args}` from the repository root (`make setup` makes .venv), or activate "
            "the environment you installed fp16lab into")


if __name__ == "__main__":
    sys.exit(main())
