"""The fitted posteriors (``estimator.posterior_``): one class per structure, all with the
same user-facing API (``mean``, ``variance()``, ``sample()``, and for small models
``precision()`` and ``covariance()``). Each lives in the module named after its method, as
the public estimators (``skbayes/<method>.py``) and their training families
(``skbayes/_families/<method>.py``) do.

=====================  ===========  ============================================  =========================
class                  module       structure                                     estimators
=====================  ===========  ============================================  =========================
``LowRankGaussian``    ``slang``    precision ``U U^T + diag(d)``                 SLANG, VOGN (rank 0)
``DiagonalGaussian``   ``vadam``    precision ``diag(d)``                         Vadam, Vprop
``SoftplusGaussian``   ``bbb``      std ``softplus(rho)``                         Bayes by Backprop
``KroneckerGaussian``  ``kfac``     per-layer eigenvalue-corrected Kronecker      noisy K-FAC, noisy EK-FAC
``DropoutPosterior``   ``dropout``  dropout-masked weight vectors (not Gaussian)  MC dropout
=====================  ===========  ============================================  =========================
"""

from .bbb import SoftplusGaussian
from .dropout import DropoutPosterior
from .kfac import KroneckerGaussian
from .slang import LowRankGaussian
from .vadam import DiagonalGaussian

__all__ = ["LowRankGaussian", "DiagonalGaussian", "SoftplusGaussian", "KroneckerGaussian", "DropoutPosterior"]
