"""Running a parsed command line: the one place a refused input becomes exit status 2.

Below every command line of the package (``python -m fp16lab`` and the module aliases), so it
imports no other fp16lab module.
"""

from __future__ import annotations

import argparse
import sys

__all__ = ["run_parsed"]


def run_parsed(args: argparse.Namespace) -> int:
    """Run ``args.func(args)``; a refused input (ValueError, FileNotFoundError) is exit 2 with the reason."""
    try:
        return int(args.func(args))
    except (ValueError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
