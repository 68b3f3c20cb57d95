"""Learnable data generated locally, never downloaded: images (shapes) and a synthetic language.

- :mod:`fp16lab.data.images`: :class:`ShapesDataset` (classify painted shapes), loaders, a small CNN
- :mod:`fp16lab.data.language`: :class:`SyntheticLanguage`, a Markov language with a known entropy floor
"""

from __future__ import annotations

from fp16lab.data.images import CLASS_NAMES, AugmentedShapes, ShapesDataset, make_loaders, small_cnn
from fp16lab.data.language import SyntheticLanguage

__all__ = ["CLASS_NAMES", "ShapesDataset", "AugmentedShapes", "make_loaders", "small_cnn", "SyntheticLanguage"]
