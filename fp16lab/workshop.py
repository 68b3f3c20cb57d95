"""Alias: ``python -m fp16lab.workshop`` is ``python -m fp16lab workshop`` (code: fp16lab.course.workshop)."""

import sys

from fp16lab.course.workshop import *  # noqa: F403 (the alias re-exports the module's public names)
from fp16lab.course.workshop import __all__, main  # noqa: F401

if __name__ == "__main__":
    sys.exit(main())
