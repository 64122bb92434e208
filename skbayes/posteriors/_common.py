"""What every posterior family exposes to users (numpy in, numpy out)."""

import math

import numpy as np
import torch
from sklearn.utils import check_random_state

#: Largest parameter count for which dense ``precision()``/``covariance()`` are allowed.
MAX_DENSE_SIZE = 5000


def is_scalar_precision(prior_precision) -> bool:
    """True for a number, False for a per-parameter precision tensor."""
    return not (isinstance(prior_precision, torch.Tensor) and prior_precision.dim() > 0)


def vector_prior_kl(prior_precision, mean, variance, logdet_precision):
    """``KL(q || N(0, diag(lam)^{-1}))`` of a Gaussian ``q`` with marginal ``variance`` and
    precision log-determinant ``logdet_precision``, for a per-parameter ``lam`` (D,)::

        0.5 (sum_i lam_i (var_i + mu_i^2) - D - sum_i log lam_i + log det P)
    """
    lam = prior_precision
    D = mean.shape[0]
    quad = (lam * (variance + mean * mean)).sum()
    return float(0.5 * (quad - D - torch.log(lam).sum() + logdet_precision))


class PosteriorMixin:
    """Shared user-facing API; families implement the ``*_t`` tensor methods."""

    @property
    def mean(self):
        """Posterior mean, flat, in ``module_.parameters()`` order."""
        return self.mean_t.detach().cpu().numpy().copy()

    def is_finite(self):
        """True when every stored tensor is finite."""
        # A sum is non-finite iff an entry is (or it overflows, which is divergence too):
        # one reduction per tensor instead of a full boolean mask.
        return all(math.isfinite(float(t.sum())) for t in self._tensors())

    @property
    def n_params(self):
        return int(self.mean_t.shape[0])

    def variance(self):
        """Marginal posterior variances, shape ``(D,)``."""
        return self.variance_t().detach().cpu().numpy()

    def sample(self, n_samples=1, random_state=None):
        """Draw weight vectors from the posterior, shape ``(n_samples, D)``.

        Parameters
        ----------
        n_samples : int, default=1
        random_state : int, RandomState instance or None, default=None
            Seeds the draw; ``None`` draws a fresh seed from numpy's global state.
        """
        seed = int(check_random_state(random_state).randint(np.iinfo(np.int32).max))
        gen = torch.Generator(device=self.mean_t.device).manual_seed(seed)
        with torch.no_grad():
            return self.sample_t(int(n_samples), generator=gen).cpu().numpy()

    def _check_dense(self, max_size):
        D = self.n_params
        if D > max_size:
            raise ValueError(
                f"The posterior has {D} parameters; dense {D}x{D} matrices are only formed for "
                f"at most max_size={max_size} parameters. Use the structured factors, variance() "
                "or sample() instead, or pass a larger max_size."
            )

    def precision(self, max_size=MAX_DENSE_SIZE):
        """Dense posterior precision matrix ``(D, D)`` (small models only)."""
        self._check_dense(max_size)
        with torch.no_grad():
            return self.precision_t().cpu().numpy()

    def covariance(self, max_size=MAX_DENSE_SIZE):
        """Dense posterior covariance matrix ``(D, D)`` (small models only)."""
        self._check_dense(max_size)
        with torch.no_grad():
            P = self.precision_t()
            return torch.cholesky_inverse(torch.linalg.cholesky(P)).cpu().numpy()
