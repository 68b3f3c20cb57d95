"""fp16lab: helpers for learning FP16 mixed-precision training in PyTorch.

Import what you need from the submodule that owns it, e.g.
``from fp16lab.env import report`` or ``from fp16lab.config import pick``.
"""

__version__ = "0.1.0"

__all__ = [
    "__version__",
    "config",
    "env",
    "precision",
    "results",
    "timing",
]
