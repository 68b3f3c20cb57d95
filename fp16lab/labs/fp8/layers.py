"""FP8 training with ``torchao.float8``: is it installed, which layers to convert, and converting them.

Why: ``torchao.float8.convert_to_float8_training`` swaps ``nn.Linear`` modules for ``Float8Linear``
(its three matmuls, forward and both gradients, run in FP8 with dynamic scales). Not every
linear layer should go: the output head is the most precision-sensitive matmul, FP8 kernels need
both dimensions to be multiples of 16, and for small layers the extra casts (an amax reduction,
a scale, a cast of each operand) cost more than the faster matmul saves. :class:`Fp8Filter` is
that decision as a ``module_filter_fn`` (torchao's argument), and :func:`fp8_plan` shows it
layer by layer before anything is converted.

torchao is an optional dependency (``pip install -e '.[fp8]'``): :func:`torchao_status` says
whether it imports here; nothing else in :mod:`fp16lab` needs it.
"""

from __future__ import annotations

import contextlib
import inspect
import io
import logging
import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from torch import nn

from fp16lab.checks import instance, one_of, positive_int, sequence_of
from fp16lab.labs.runtime.i18n import tr

__all__ = ["RECIPES", "TorchaoStatus", "torchao_status", "summarize_import_noise", "Fp8Filter", "fp8_plan", "to_fp8_training",
           "float8_layers", "recipe_table"]  # fmt: skip

#: torchao's named float8 training recipes (``Float8LinearRecipeName``), fastest first.
RECIPES = ("tensorwise", "rowwise", "rowwise_with_gw_hp")
INSTALL_COMMAND, INSTALL_OR = "pip install -e '.[fp8]'", "pip install 'torchao>=0.10'"
INSTALL_HINT = f"{INSTALL_COMMAND}  (or: {INSTALL_OR})"


@dataclass(frozen=True)
class TorchaoStatus:
    """Whether ``torchao.float8`` imports here, its version, if not why, and what its import printed (summarised).

    ``str()`` is in the reader's language (``FP16LAB_LANG``); ``reason`` is the import's own error, as it was raised.
    """

    available: bool
    version: str | None
    reason: str
    import_notes: str = ""

    def __str__(self) -> str:
        if self.available:
            text = tr("torchao {version}: torchao.float8 imports (float8 training available)", version=self.version)
        else:
            text = tr("torchao not available ({reason}); install it with: {command}  (or: {alternative})",
                      reason=self.reason, command=INSTALL_COMMAND, alternative=INSTALL_OR)
        return text + (f"\n{self.import_notes}" if self.import_notes else "")


_IMPORT_NOTES: list[str] = []  # what the first import of torchao printed, summarised once


def summarize_import_noise(records: "list[logging.LogRecord]", caught: "list[warnings.WarningMessage]",
                           stderr: str) -> str:
    """One labelled line for what an import printed: optional extensions not loaded, warnings, other stderr.

    In the reader's language (``FP16LAB_LANG``); what torchao itself said is quoted as it was.
    """
    records = sequence_of("records", records, example="[] (logging.LogRecord entries)", allow_empty=True,
                          item=lambda n, r: instance(n, r, logging.LogRecord, "a logging.LogRecord"))
    caught = sequence_of("caught", caught, example="[] (warnings.catch_warnings(record=True) entries)", allow_empty=True,
                         item=lambda n, w: instance(n, w, warnings.WarningMessage, "a warnings.WarningMessage"))
    instance("stderr", stderr, str, "the captured stderr text (str)")
    parts = []
    failed = [re.sub(r"\..*$", "", Path(m.group(1)).name)
              for r in records if (m := re.search(r"Failed to load (\S+?):", r.getMessage()))]
    if failed:
        parts.append(tr("{n} optional C++ extension(s) not loaded ({names}: kernels for MX formats and sm_90a CUTLASS, "
                        "unused by float8 training)", n=len(failed), names=", ".join(failed)))
    others = [r for r in records if "Failed to load" not in r.getMessage()]
    if others:
        parts.append(tr("{n} log message(s) ({first!r}...)", n=len(others), first=others[0].getMessage()[:80]))
    kinds = sorted({w.category.__name__ for w in caught})
    if caught:
        parts.append(tr("{n} warning(s) from torchao's own source ({kinds}), harmless", n=len(caught),
                        kinds=", ".join(kinds)))
    if stderr.strip():
        parts.append(tr("other output: {first!r}", first=stderr.strip().splitlines()[0][:80]))
    return tr("torchao import notes (captured, not errors): {notes}", notes=tr("; ").join(parts)) if parts else ""


class _ListHandler(logging.Handler):
    """Keeps log records in a list instead of printing them."""

    def __init__(self, records: "list[logging.LogRecord]") -> None:
        super().__init__(logging.DEBUG)
        self.records = records

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def _quiet_import() -> None:
    """Import torchao.float8 with its optional-extension logging, warnings and stderr captured, kept in _IMPORT_NOTES."""
    records: list[logging.LogRecord] = []
    handler = _ListHandler(records)
    ao_log, pytree_log = logging.getLogger("torchao"), logging.getLogger("torch.utils._pytree")
    propagate, level = ao_log.propagate, pytree_log.level
    ao_log.addHandler(handler)
    ao_log.propagate = False
    pytree_log.setLevel(logging.ERROR)  # torch 2.14's notice about an Enum torchao registers: harmless
    err = io.StringIO()
    try:
        with warnings.catch_warnings(record=True) as caught, contextlib.redirect_stderr(err):
            warnings.simplefilter("always")
            import torchao
            import torchao.float8  # noqa: F401
    finally:
        ao_log.removeHandler(handler)
        ao_log.propagate = propagate
        pytree_log.setLevel(level)
    if not _IMPORT_NOTES:
        _IMPORT_NOTES.append(summarize_import_noise(records, list(caught), err.getvalue()))


def torchao_status() -> TorchaoStatus:
    """Try ``import torchao.float8`` once per call; never raises; what the import printed comes back in one line.

    torchao logs a warning for each optional C++ extension it cannot load (MX-format and sm_90a
    CUTLASS kernels, built for one Python and torch) and its source emits a SyntaxWarning when
    first compiled: neither matters for float8 training, so they are captured and summarised.
    """
    try:
        _quiet_import()
        import torchao
    except Exception as err:  # ImportError, or a torchao built for another torch failing at import
        return TorchaoStatus(False, None, f"{type(err).__name__}: {str(err)[:120]}")
    return TorchaoStatus(True, str(getattr(torchao, "__version__", "unknown")), "",
                         _IMPORT_NOTES[0] if _IMPORT_NOTES else "")


def _require_torchao() -> Any:
    status = torchao_status()
    if not status.available:
        raise ValueError(f"FP8 training needs torchao, which is not available here ({status.reason}); "
                         f"install it with: {INSTALL_HINT}")
    import torchao.float8

    return torchao.float8


@dataclass(frozen=True)
class Fp8Filter:
    """Which ``nn.Linear`` layers to convert to FP8: a ``module_filter_fn`` for torchao.

    A layer is kept in high precision (BF16 under autocast) when its name is in ``skip`` (default
    ``("lm_head",)``: the output head), when ``in_features`` or ``out_features`` is not a multiple
    of ``multiple`` (default 16, what FP8 Tensor Core kernels need), or when either is below
    ``min_features`` (default 1024: for smaller layers the casts cost more than FP8 saves; lesson
    09 measures where that happens on your GPU). Call it as ``filter(module, fqn) -> bool``;
    :meth:`reason` says why a layer stays.
    """

    skip: tuple[str, ...] = ("lm_head",)
    multiple: int = 16
    min_features: int = 1024

    def __post_init__(self) -> None:
        if isinstance(self.skip, str) or not isinstance(self.skip, (tuple, list)):
            raise ValueError(f"skip must be a tuple of module names such as ('lm_head',), got {self.skip!r}")
        if not all(isinstance(s, str) for s in self.skip):
            raise ValueError(f"skip must hold module names (strings), got {self.skip!r}")
        object.__setattr__(self, "skip", tuple(self.skip))
        multiple = positive_int("multiple", self.multiple)
        if multiple % 16:
            raise ValueError(f"multiple must be a multiple of 16 (FP8 Tensor Core kernels need both dimensions "
                             f"divisible by 16), got {self.multiple!r}")
        object.__setattr__(self, "multiple", multiple)
        object.__setattr__(self, "min_features", positive_int("min_features", self.min_features, minimum=0))

    def reason(self, module: nn.Module, fqn: str) -> str:
        """Why ``module`` (named ``fqn``) stays in high precision; ``""`` when it is converted."""
        if not isinstance(module, nn.Linear):
            return f"not an nn.Linear ({type(module).__name__})"
        if fqn in self.skip:
            return "skipped by name (the output head is precision-sensitive)"
        dims = (module.in_features, module.out_features)
        if any(d % self.multiple for d in dims):
            return f"in/out features {dims} not multiples of {self.multiple}"
        if min(dims) < self.min_features:
            return f"small: min(in, out) = {min(dims)} < {self.min_features} (casts cost more than FP8 saves)"
        return ""

    def __call__(self, module: nn.Module, fqn: str) -> bool:
        return self.reason(module, fqn) == ""


def filter_fn_of(module_filter: object) -> Callable[[nn.Module, str], bool]:
    if module_filter is None:
        return Fp8Filter()
    if not callable(module_filter):
        raise ValueError(f"module_filter must be a function (module, fqn) -> bool such as Fp8Filter(), "
                         f"got {module_filter!r}")
    try:
        sig = inspect.signature(module_filter)
    except (TypeError, ValueError):  # a builtin without a signature: nothing to check
        return module_filter
    try:
        sig.bind(nn.Identity(), "")
    except TypeError:
        raise ValueError(f"module_filter must take two arguments (module, fqn) as torchao calls it, got "
                         f"{getattr(module_filter, '__qualname__', module_filter)!r}{sig}") from None
    return module_filter


def fp8_plan(model: nn.Module, module_filter: "Callable[[nn.Module, str], bool] | None" = None) -> pd.DataFrame:
    """Every ``nn.Linear`` in ``model`` and whether ``module_filter`` (default ``Fp8Filter()``) converts it.

    Columns: layer, in_features, out_features, weight_params, fp8 (bool), reason (for an
    :class:`Fp8Filter`; else empty), flop_share (the layer's share of all linear-layer FLOPs
    per token, proportional to its weight count; a tied head counts once per use). Converts nothing.
    """
    instance("model", model, nn.Module, "an nn.Module")
    fn = filter_fn_of(module_filter)
    rows = []
    for name, mod in model.named_modules():
        if not isinstance(mod, nn.Linear):
            continue
        converted = bool(fn(mod, name))
        why = fn.reason(mod, name) if isinstance(fn, Fp8Filter) else ""
        rows.append({"layer": name, "in_features": mod.in_features, "out_features": mod.out_features,
                     "weight_params": mod.in_features * mod.out_features, "fp8": converted,
                     "reason": why if not converted else ""})
    if not rows:
        raise ValueError(f"model ({type(model).__name__}) has no nn.Linear layers: nothing to convert to FP8")
    frame = pd.DataFrame(rows)
    frame["flop_share"] = frame.weight_params / frame.weight_params.sum()
    return frame


def to_fp8_training(
    model: nn.Module, recipe: str = "tensorwise", module_filter: "Callable[[nn.Module, str], bool] | None" = None
) -> nn.Module:
    """Swap the linear layers ``module_filter`` selects (default ``Fp8Filter()``) for torchao's ``Float8Linear``.

    ``recipe`` (default ``"tensorwise"``) is one of :data:`RECIPES`, passed to
    ``Float8LinearConfig.from_recipe_name``. The model is changed in place and returned; weights
    (and their dtype) are kept, so the optimizer can be built before or after. Compile afterwards
    (``torch.compile``): eager FP8 spends more time casting than it saves. Raises ``ValueError``
    without torchao, or when the filter selects no layer.
    """
    instance("model", model, nn.Module, "an nn.Module")
    one_of("recipe", recipe, RECIPES)
    fn = filter_fn_of(module_filter)
    already = float8_layers(model)
    if already:
        raise ValueError(f"model already has torchao Float8Linear layers ({', '.join(already[:4]) or 'the model'}"
                         f"{', ...' if len(already) > 4 else ''}): convert a fresh model once")
    if not any(isinstance(m, nn.Linear) and fn(m, n) for n, m in model.named_modules()):
        raise ValueError("module_filter selects no nn.Linear layer of this model: nothing would run in FP8 "
                         "(see fp8_plan(model, module_filter) for the reasons)")
    f8 = _require_torchao()
    config = f8.Float8LinearConfig.from_recipe_name(recipe)
    return f8.convert_to_float8_training(model, config=config, module_filter_fn=fn)


def float8_layers(model: nn.Module) -> list[str]:
    """Names of the modules of ``model`` that are torchao ``Float8Linear`` (empty without torchao)."""
    instance("model", model, nn.Module, "an nn.Module")
    return [n for n, m in model.named_modules() if type(m).__name__ == "Float8Linear"]


def recipe_table() -> pd.DataFrame:
    """What each torchao recipe does, read from its ``Float8LinearConfig``: one row per recipe and operand.

    Columns: recipe, gemm (output, grad_input, grad_weight), operands (their dtype and scale
    granularity, or "high precision"), use_fast_accum. Needs torchao.
    """
    f8 = _require_torchao()
    rows = []
    for recipe in RECIPES:
        c = f8.Float8LinearConfig.from_recipe_name(recipe)
        gemms = {
            "output = input @ weight.T": (c.cast_config_input, c.cast_config_weight, c.gemm_config_output),
            "grad_input = grad_output @ weight": (c.cast_config_grad_output, c.cast_config_weight_for_grad_input,
                                                  c.gemm_config_grad_input),
            "grad_weight = grad_output.T @ input": (c.cast_config_grad_output_for_grad_weight,
                                                    c.cast_config_input_for_grad_weight, c.gemm_config_grad_weight),
        }
        for gemm, (left, right, gemm_cfg) in gemms.items():
            rows.append({"recipe": recipe, "gemm": gemm, "left operand": _describe_cast(left),
                         "right operand": _describe_cast(right), "use_fast_accum": bool(gemm_cfg.use_fast_accum),
                         "power-of-2 scales": bool(c.round_scales_to_power_of_2)})
    return pd.DataFrame(rows)


def _describe_cast(cast: Any) -> str:
    if cast.scaling_type.name == "DISABLED":
        return "high precision (BF16)"
    dtype = str(cast.target_dtype).replace("torch.float8_", "")
    granularity = {"AXISWISE": "rowwise"}.get(cast.scaling_granularity.name, cast.scaling_granularity.name.lower())
    return f"{dtype}, {granularity} scale"
