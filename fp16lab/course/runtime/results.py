"""The lessons' import path for :mod:`fp16lab.labs.runtime.results` (result files with their metadata, measure here or show the committed reference): a re-export."""

from fp16lab.labs.runtime.results import *  # noqa: F403
from fp16lab.labs.runtime.results import __all__  # noqa: F401
