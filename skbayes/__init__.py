"""skbayes: scikit-learn compatible Bayesian neural networks trained by
natural-gradient variational inference on PyTorch, with the baselines the
papers compare against (Vadam/Vprop, Bayes by Backprop, MC dropout)."""

from ._registry import EstimatorInfo, all_estimators
from .bbb import BBBClassifier, BBBRegressor
from .dropout import MCDropoutClassifier, MCDropoutRegressor
from .kfac import NoisyEKFACClassifier, NoisyEKFACRegressor, NoisyKFACClassifier, NoisyKFACRegressor
from .linear_model import BayesianLinearRegression
from .posteriors import DiagonalGaussian, DropoutPosterior, KroneckerGaussian, LowRankGaussian, SoftplusGaussian
from .slang import SLANGClassifier, SLANGRegressor
from .vadam import VadamClassifier, VadamRegressor
from .vogn import VOGNClassifier, VOGNRegressor

__version__ = "0.1.0.dev0"

__all__ = [
    "SLANGRegressor",
    "SLANGClassifier",
    "NoisyKFACRegressor",
    "NoisyKFACClassifier",
    "NoisyEKFACRegressor",
    "NoisyEKFACClassifier",
    "VOGNRegressor",
    "VOGNClassifier",
    "VadamRegressor",
    "VadamClassifier",
    "BBBRegressor",
    "BBBClassifier",
    "MCDropoutRegressor",
    "MCDropoutClassifier",
    "BayesianLinearRegression",
    "LowRankGaussian",
    "DiagonalGaussian",
    "SoftplusGaussian",
    "KroneckerGaussian",
    "DropoutPosterior",
    "all_estimators",
    "EstimatorInfo",
    "__version__",
]
