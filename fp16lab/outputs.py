"""Alias: ``python -m fp16lab.outputs`` is ``python -m fp16lab outputs`` (code: fp16lab.course.outputs)."""

import sys

from fp16lab.course.outputs import *  # noqa: F403 (the alias re-exports the module's public names)
from fp16lab.course.outputs import __all__, main  # noqa: F401

if __name__ == "__main__":
    sys.exit(main())
