"""skbayes: scikit-learn compatible Bayesian neural networks trained by
natural-gradient variational inference on PyTorch."""

from .bbb import BBBClassifier, BBBRegressor
from .dropout import MCDropoutClassifier, MCDropoutRegressor
from .kfac import NoisyEKFACClassifier, NoisyEKFACRegressor, NoisyKFACClassifier, NoisyKFACRegressor
from .kronecker import KroneckerGaussian
from .linear_model import BayesianLinearRegression
from .posteriors import LowRankGaussian
from .slang import SLANGClassifier, SLANGRegressor

__version__ = "0.1.0.dev0"

__all__ = [
    "SLANGRegressor",
    "SLANGClassifier",
    "NoisyKFACRegressor",
    "NoisyKFACClassifier",
    "NoisyEKFACRegressor",
    "NoisyEKFACClassifier",
    "BBBRegressor",
    "BBBClassifier",
    "MCDropoutRegressor",
    "MCDropoutClassifier",
    "BayesianLinearRegression",
    "LowRankGaussian",
    "KroneckerGaussian",
    "__version__",
]
