"""Posterior families: one module per method, each a :class:`~.base.PosteriorFamily`.

The posterior classes themselves live in :mod:`skbayes.posteriors`; a family says
how its method starts and updates one.
"""

from .base import PosteriorFamily, StepContext, StepResult
from .bbb import BBBFamily
from .dropout import DropoutFamily
from .kronecker import EKFACFamily, KFACFamily
from .meanfield import MeanFieldFamily
from .slang import SLANGFamily

__all__ = [
    "PosteriorFamily",
    "StepContext",
    "StepResult",
    "SLANGFamily",
    "MeanFieldFamily",
    "BBBFamily",
    "DropoutFamily",
    "KFACFamily",
    "EKFACFamily",
]
