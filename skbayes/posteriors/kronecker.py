"""Block-diagonal (per layer) eigenvalue-corrected matrix-variate Gaussian: the posterior
of noisy K-FAC and noisy EK-FAC.

For a layer with weight matrix ``W`` (``n`` inputs including the bias, ``p`` outputs;
see :class:`skbayes._networks.KronLayer`)::

    Cov(vec W) = (Q_S kron Q_A) diag(vec s) (Q_S kron Q_A)^T

with ``Q_A``, ``Q_S`` eigenvectors of the Kronecker factors and ``s`` a per-entry
variance in that eigenbasis. Noisy K-FAC sets
``s = (lambda/N) / ((lam_A + pi sqrt(g_in)) (lam_S + sqrt(g_in)/pi)^T)``; noisy
EK-FAC sets ``s = (lambda/N) / (R + g_in)``.
"""

import math

import torch

from ._common import MAX_DENSE_SIZE, PosteriorMixin, is_scalar_precision, vector_prior_kl


class KroneckerGaussian(PosteriorMixin):
    """Block-diagonal (per layer) eigenvalue-corrected matrix-variate Gaussian.

    The posterior of noisy K-FAC and noisy EK-FAC (see the module docstring for
    the covariance of one block). Built by the estimators; users read it.

    Parameters
    ----------
    mean : torch.Tensor of shape (D,)
        Posterior mean.
    layers : list of KronLayer
        Where each layer's block lives in the flat parameter vector.
    blocks : list of tuple
        Per layer ``(Q_A, Q_S, s)``: the eigenbases and the variances in them.

    Attributes
    ----------
    mean : ndarray of shape (D,)
        Posterior mean in ``module_.parameters()`` order.
    factors : list of dict
        Per layer: ``name``, eigenbases ``Q_A`` (n, n) and ``Q_S`` (p, p), and
        ``scale`` (n, p), the variances in the eigenbasis (``s`` above).
    """

    family = "kronecker"

    def __init__(self, mean, layers, blocks):
        self.mean_t = mean
        self.layers = layers
        self.blocks = blocks  # list of (QA, QS, s)

    @property
    def factors(self):
        """Per-layer eigenbases and variances (numpy copies)."""
        return [
            {
                "name": l.name,
                "Q_A": QA.detach().cpu().numpy().copy(),
                "Q_S": QS.detach().cpu().numpy().copy(),
                "scale": s.detach().cpu().numpy().copy(),
            }
            for l, (QA, QS, s) in zip(self.layers, self.blocks)
        ]

    def _tensors(self):
        out = [self.mean_t]
        for b in self.blocks:
            out.extend(b)
        return out

    def sample_t(self, n, generator=None):
        noise = self.mean_t.new_zeros(n, self.mean_t.shape[0])
        for l, (QA, QS, s) in zip(self.layers, self.blocks):
            X = torch.randn(n, l.n, l.p, generator=generator, dtype=s.dtype, device=s.device)
            l.mat_to_flat(QA @ (X * torch.sqrt(s)) @ QS.T, noise)
        return self.mean_t[None] + noise

    def variance_t(self):
        var = torch.zeros_like(self.mean_t)
        for l, (QA, QS, s) in zip(self.layers, self.blocks):
            l.mat_to_flat((QA * QA) @ s @ (QS * QS).T, var)
        return var

    def _dense(self, inverse):
        D = self.mean_t.shape[0]
        out = torch.zeros(D, D, dtype=self.mean_t.dtype, device=self.mean_t.device)
        for l, (QA, QS, s) in zip(self.layers, self.blocks):
            Q = torch.kron(QS, QA)
            v = s.T.reshape(-1)  # vec(s), column-major
            v = 1.0 / v if inverse else v
            idx = l.vec_index(out.device)
            out[idx[:, None], idx[None, :]] = (Q * v) @ Q.T
        return out

    def precision_t(self):
        return self._dense(inverse=True)

    def covariance(self, max_size=MAX_DENSE_SIZE):
        """Dense posterior covariance matrix ``(D, D)`` (small models only).

        Parameters
        ----------
        max_size : int, default=5000
            Largest number of parameters for which the dense matrix is formed.

        Returns
        -------
        covariance : ndarray of shape (D, D)
            Block diagonal, one block per layer.
        """
        self._check_dense(max_size)
        with torch.no_grad():
            return self._dense(inverse=False).cpu().numpy()

    def logdet_covariance_t(self):
        """Log-determinant of the posterior covariance (the sum over layers' blocks).

        Returns
        -------
        logdet : Tensor of shape ()
            ``log det Sigma``.
        """
        return sum(torch.log(s).sum() for (_, _, s) in self.blocks)

    def kl_to_prior(self, prior_precision):
        if not is_scalar_precision(prior_precision):
            return vector_prior_kl(prior_precision, self.mean_t, self.variance_t(), -self.logdet_covariance_t())
        eta = 1.0 / float(prior_precision)
        D = self.mean_t.shape[0]
        tr = self.variance_t().sum()
        quad = (self.mean_t * self.mean_t).sum()
        logdet = self.logdet_covariance_t()
        return float(0.5 * ((tr + quad) / eta - D + D * math.log(eta) - logdet))
