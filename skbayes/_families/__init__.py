"""Posterior families: one module per method, each a :class:`~.base.PosteriorFamily`.

The posterior classes themselves live in :mod:`skbayes.posteriors`; a family says
how its method starts and updates one.
"""

from .base import PosteriorFamily, StepContext, StepResult
from .bbb import BBBFamily
from .dropout import DropoutFamily
from .kfac import EKFACFamily, KFACFamily
from .slang import SLANGFamily
from .vadam import VadamFamily

__all__ = [
    "PosteriorFamily",
    "StepContext",
    "StepResult",
    "SLANGFamily",
    "VadamFamily",
    "BBBFamily",
    "DropoutFamily",
    "KFACFamily",
    "EKFACFamily",
]
