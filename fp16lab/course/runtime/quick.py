"""The lessons' import path for :mod:`fp16lab.labs.runtime.quick` (quick mode, the one switch for problem sizes): a re-export."""

from fp16lab.labs.runtime.quick import *  # noqa: F403
from fp16lab.labs.runtime.quick import __all__  # noqa: F401
