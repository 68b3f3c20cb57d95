"""One rule for calling a paired comparison: faster, slower, or a tie inside the spread.

Why one home: the lessons time two arms in the same rounds (or train them on the same seeds), and every lab
that judges such pairs must judge them the same way, or two lessons would call the same data differently.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

__all__ = ["PairedVerdict", "paired_verdict"]


@dataclass(frozen=True)
class PairedVerdict:
    """Paired values (one per round or seed): their median, spread and the verdict against ``null``.

    ``spread`` is the largest distance of any value from the median (NaN for one value); the verdict
    is ``above`` or ``below`` only when the median is farther from ``null`` than the spread (then every
    value lies on that side), else ``"tie (inside the spread)"``; one value gives no verdict.
    """

    median: float
    spread: float
    n: int
    verdict: str

    def __str__(self) -> str:
        if self.n < 2:
            return f"{self.median:.4g} ({self.verdict})"
        return f"{self.median:.4g} ± {self.spread:.2g} over {self.n} pairs: {self.verdict}"


def paired_verdict(values: "pd.Series | Sequence[float]", *, null: float, above: str, below: str) -> PairedVerdict:
    """The verdict on paired values: per-round ratios of two cases (``null=1``) or per-seed differences (``null=0``).

    Why: the same round (or seed) in both arms shares its drift (or its initialisation and batches);
    the pairs' own spread is the noise a difference must beat. ``above``/``below`` name the verdict
    when the median lies beyond the spread above/below ``null`` (e.g. "faster"/"slower",
    "worse"/"better"); inside it, ``"tie (inside the spread)"``; a single value: ``"one run: no
    spread, no verdict"``. NaN values are refused.
    """
    if isinstance(values, (str, bytes)) or not isinstance(values, (pd.Series, Sequence)):
        raise ValueError(f"values must be a pandas Series or a list of numbers, got {values!r:.80}")
    try:
        vals = [float(v) for v in values]
    except (TypeError, ValueError):
        raise ValueError(f"values must be numbers, got {list(values)!r:.80}") from None
    if not vals or not all(math.isfinite(v) for v in vals):
        raise ValueError(f"values must be a non-empty list of finite numbers, got {vals!r:.80}")
    if isinstance(null, bool) or not isinstance(null, (int, float)) or not math.isfinite(null):
        raise ValueError(f"null must be a finite number (1 for ratios, 0 for differences), got {null!r}")
    for name, word in (("above", above), ("below", below)):
        if not isinstance(word, str) or not word.strip():
            raise ValueError(f"{name} must be a non-empty word such as 'faster', got {word!r}")
    med = float(pd.Series(vals).median())
    if len(vals) < 2:
        return PairedVerdict(med, math.nan, 1, "one run: no spread, no verdict")
    spread = max(abs(v - med) for v in vals)
    verdict = "tie (inside the spread)" if abs(med - null) <= spread else (above if med > null else below)
    return PairedVerdict(med, spread, len(vals), verdict)
