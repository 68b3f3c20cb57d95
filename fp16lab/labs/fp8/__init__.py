"""FP8 (E4M3/E5M2) on Ada and Hopper: scaling, ``torchao.float8`` training, and the raw FP8 matmul.

Why: FP8 Tensor Cores run at twice the FP32-accumulate FP16/BF16 rate on sm_89 (Ada: the RTX
4090D) and sm_90 (Hopper); using them takes a scale per tensor or per row, a choice of layers,
and a library that does the casts (``torchao``, an optional dependency: ``pip install -e '.[fp8]'``).
Lesson 09 (``notebooks/09_fp8.ipynb``) uses all of it. The formats themselves (layouts, rounding,
``bit_view``, ``ulp``, ``cast_stats``) live in :mod:`fp16lab.numerics`.

- :mod:`~fp16lab.labs.fp8.scaling`: ``amax_scale``, ``quantize`` (tensorwise or rowwise), ``quantization_error``,
  ``scaling_table``;
- :mod:`~fp16lab.labs.fp8.layers`: ``torchao_status``, ``Fp8Filter`` (which layers to convert), ``fp8_plan``,
  ``to_fp8_training``, ``float8_layers``, ``recipe_table``;
- :mod:`~fp16lab.labs.fp8.matmul`: ``fp8_capable``, ``scaled_mm_api`` / ``scaled_mm_path`` (which operator runs),
  ``scaled_matmul`` (``F.scaled_mm`` or ``torch._scaled_mm``),
  ``fp8_matmul_tflops``, ``fp8_matmul_sweep``;
- :mod:`~fp16lab.labs.fp8.training`: ``fp8_measure`` (measure here or show the reference), ``fp8_curves``,
  ``fp8_throughput``, ``linear_speed``, ``break_even_width``.
"""

from fp16lab.labs.fp8.layers import (
    RECIPES,
    Fp8Filter,
    TorchaoStatus,
    float8_layers,
    fp8_plan,
    recipe_table,
    summarize_import_noise,
    to_fp8_training,
    torchao_status,
)
from fp16lab.labs.fp8.matmul import (
    SCALINGS,
    Fp8Support,
    fp8_capable,
    fp8_matmul_sweep,
    fp8_matmul_tflops,
    scaled_matmul,
    scaled_mm_api,
    scaled_mm_path,
)
from fp16lab.labs.fp8.scaling import (
    FP8_FORMATS,
    GRANULARITIES,
    Quantized,
    amax_scale,
    quantization_error,
    quantize,
    scaling_table,
)
from fp16lab.labs.fp8.training import break_even_width, fp8_curves, fp8_measure, fp8_throughput, linear_speed

__all__ = [
    "FP8_FORMATS",
    "GRANULARITIES",
    "Quantized",
    "amax_scale",
    "quantize",
    "quantization_error",
    "scaling_table",
    "RECIPES",
    "TorchaoStatus",
    "torchao_status",
    "Fp8Filter",
    "fp8_plan",
    "to_fp8_training",
    "float8_layers",
    "recipe_table",
    "SCALINGS",
    "Fp8Support",
    "fp8_capable",
    "scaled_matmul",
    "scaled_mm_api",
    "scaled_mm_path",
    "fp8_matmul_tflops",
    "fp8_matmul_sweep",
    "fp8_measure",
    "fp8_curves",
    "fp8_throughput",
    "linear_speed",
    "break_even_width",
    "summarize_import_noise",
]
