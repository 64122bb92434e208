"""Posterior families."""

from .diagonal import DiagonalGaussian
from .lowrank import LowRankGaussian, slang_precision_update

__all__ = ["DiagonalGaussian", "LowRankGaussian", "slang_precision_update"]
