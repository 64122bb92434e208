"""Posterior families."""

from .lowrank import LowRankGaussian, slang_precision_update

__all__ = ["LowRankGaussian", "slang_precision_update"]
