"""Posterior families: one class per structure, all with the same user-facing API
(``mean``, ``variance()``, ``sample()``, and for small models ``precision()`` and
``covariance()``).

=====================  ==========================================  ==========================
class                  structure                                   estimators
=====================  ==========================================  ==========================
``LowRankGaussian``    precision ``U U^T + diag(d)``               SLANG, VOGN (rank 0)
``DiagonalGaussian``   precision ``diag(d)``                       Vadam, Vprop
``SoftplusGaussian``   std ``softplus(rho)``                       Bayes by Backprop
``KroneckerGaussian``  per-layer eigenvalue-corrected Kronecker    noisy K-FAC, noisy EK-FAC
``DropoutPosterior``   dropout-masked weight vectors (not Gaussian)  MC dropout
=====================  ==========================================  ==========================
"""

from .diagonal import DiagonalGaussian
from .dropout import DropoutPosterior
from .kronecker import KroneckerGaussian
from .lowrank import LowRankGaussian
from .softplus import SoftplusGaussian

__all__ = ["LowRankGaussian", "DiagonalGaussian", "SoftplusGaussian", "KroneckerGaussian", "DropoutPosterior"]
