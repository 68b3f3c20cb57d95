"""fp16lab: helpers for learning FP16 mixed-precision training in PyTorch.

Import what you need from the submodule that owns it, e.g.
``from fp16lab.env import report`` or ``from fp16lab.train import fit``.
Submodules, by job:

- ``env``: environment report, device choice, chip features, peak TFLOP/s table
- ``config``: quick mode (the one switch for problem sizes)
- ``precision``: fp32 / tf32 / fp16 / bf16 as a validated choice, autocast, TF32 flags
- ``numerics``: format facts, bit views, ULP spacing, cast statistics
- ``data``: learnable image data generated locally (nothing is downloaded)
- ``train``: the AMP training step and loop, history, checkpoints with the scaler
- ``align``: Tensor Core alignment: audit, padding, matmul sweeps
- ``debug``: dtype trace under autocast, first non-finite layer, peak memory, batch search
- ``bench``: training/inference throughput and peak memory, honestly timed
- ``timing``, ``results``: timing helpers; result files with their metadata

Course tooling (running and stamping lessons, student copies, the agenda, the learner's
workspace and lab) lives apart in the subpackage ``fp16lab.course``; learners do not need it.
``fp16lab.outputs`` and ``fp16lab.workshop`` remain as aliases of its modules for
``python -m fp16lab.outputs`` / ``python -m fp16lab.workshop``. The command line for everything
is ``python -m fp16lab --help``.
"""

__version__ = "0.1.0"

__all__ = [
    "__version__",
    "align",
    "bench",
    "config",
    "course",
    "data",
    "debug",
    "env",
    "numerics",
    "outputs",
    "precision",
    "results",
    "timing",
    "train",
    "workshop",
]
