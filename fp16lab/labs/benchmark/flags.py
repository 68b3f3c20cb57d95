"""How an option of the benchmark appears on the command line, kept on the option's own dataclass field.

Each field of :class:`~fp16lab.labs.benchmark.options.BenchOptions` and
:class:`~fp16lab.labs.benchmark.configs.BenchSettings` that ``python -m fp16lab bench`` exposes carries a
:class:`Flag` in its metadata (``field(default=..., metadata=flag(...))``);
:func:`fp16lab.labs.benchmark.cli.add_bench_parser` builds its arguments from those fields, so the option
list is spelled once, in the dataclasses.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Flag", "flag"]


@dataclass(frozen=True)
class Flag:
    """One command-line flag: its spelling, its place in ``--help``, its help text and argparse's other
    keywords (``type``, ``nargs``, ``choices``...); its value lands on the field's name (``dest``) unless
    ``negates``: then it is an ``--no-...`` switch whose value is the field's opposite."""

    spelling: str
    order: int
    help: str
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    negates: bool = False

    def dest(self, name: str) -> str:
        """Where argparse puts the value of the field ``name``."""
        return self.spelling.lstrip("-").replace("-", "_") if self.negates else name


def flag(spelling: str, order: int, help: str, *, negates: bool = False, **kwargs: Any) -> dict[str, Flag]:
    """A field's metadata that puts it on the command line (``kwargs`` go to ``add_argument``)."""
    return {"flag": Flag(spelling, order, help, kwargs, negates)}
