"""Quantiles of the regressors' predictive distributions.

Two predictives occur: a Gaussian per point (the linearised predictive, Bayesian linear
regression) and a uniform mixture of Gaussians per point, ``(1/S) sum_s N(f_s, sd^2)``
(the sampled predictive: one component per weight sample, with the learned noise). A
Gaussian's quantiles are closed-form; a mixture's are the root of its distribution function
``F(x) = (1/S) sum_s Phi((x - f_s) / sd)``, which :func:`mixture_quantiles` finds by Newton's
method safeguarded by bisection (Press et al., *Numerical Recipes*, ``rtsafe``), started at
the quantile of the Gaussian of the mixture's mean and variance and kept inside the bracket

    [min_s f_s + sd z_p,  max_s f_s + sd z_p],    z_p = Phi^{-1}(p),

inside which ``F(x) = p`` has its one root: at the left end every component's distribution
function is at most ``p``, at the right end at least ``p``.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from numpy.typing import ArrayLike
from scipy.stats import norm
from torch import Tensor


def check_quantiles(quantiles: Any) -> np.ndarray:
    """``quantiles`` as a 1-D float64 array of probabilities in (0, 1), or a ValueError."""
    if isinstance(quantiles, (bool, np.bool_)):
        raise ValueError(f"quantiles must be probabilities in (0, 1), got {quantiles!r}.")
    try:
        q = np.asarray(quantiles, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"quantiles must be probabilities in (0, 1), got {quantiles!r}.") from None
    if q.ndim > 1 or q.size == 0 or not np.all((q > 0.0) & (q < 1.0)):
        raise ValueError(f"quantiles must be a number or a 1-D list of probabilities in (0, 1), got {quantiles!r}.")
    return q.reshape(-1)


def check_level(level: Any) -> float:
    """``level`` as a float in (0, 1), or a ValueError."""
    if isinstance(level, (bool, np.bool_)) or not isinstance(level, numbers.Real) or not 0.0 < float(level) < 1.0:
        raise ValueError(f"level must be a number in (0, 1), got {level!r}.")
    return float(level)


def interval_probabilities(level: float) -> np.ndarray:
    """The two probabilities ``(1 - level) / 2`` and ``(1 + level) / 2`` of a central interval."""
    return np.array([0.5 * (1.0 - level), 0.5 * (1.0 + level)])


def gaussian_quantiles(mean: np.ndarray, std: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Quantiles ``mean + std Phi^{-1}(q)`` of Gaussians, shape ``mean.shape + (len(q),)``."""
    return np.asarray(mean)[..., None] + np.asarray(std)[..., None] * norm.ppf(q)


#: Relative tolerance of :func:`mixture_quantiles` (in units of the components' ``sd``).
QUANTILE_TOL = 1e-10

#: Iterations of :func:`mixture_quantiles` at most (bisection alone halves the bracket each time).
QUANTILE_MAX_ITER = 200


def mixture_quantiles(f: Tensor, sd: Tensor | float, q: np.ndarray) -> Tensor:
    """Quantiles of uniform Gaussian mixtures, one mixture per point.

    Parameters
    ----------
    f : Tensor of shape (S, n, k)
        The components' means: ``S`` per point and output.
    sd : float or Tensor of shape (k,)
        The components' standard deviation (one per output), positive.
    q : ndarray of shape (P,)
        Probabilities in (0, 1).

    Returns
    -------
    x : Tensor of shape (n, k, P)
        ``F^{-1}(q)`` of each point's mixture ``(1/S) sum_s N(f_s, sd^2)``, to
        ``QUANTILE_TOL * sd``. One probability at a time, so that the temporaries are
        a few arrays of the shape of ``f``, whatever the number of probabilities.
    """
    f = f.double()
    sd_t = torch.as_tensor(sd, dtype=f.dtype, device=f.device).reshape(-1)  # (k,) or (1,)
    fmin, fmax = f.amin(0), f.amax(0)  # (n, k)
    mean, std = f.mean(0), torch.sqrt(f.var(0, unbiased=False) + sd_t * sd_t)  # the mixture's moments
    qs = np.asarray(q).reshape(-1)
    return torch.stack([_mixture_quantile(f, sd_t, float(p), fmin, fmax, mean, std) for p in qs], -1)


def _mixture_quantile(f: Tensor, sd: Tensor, p: float, fmin: Tensor, fmax: Tensor, mean: Tensor, std: Tensor) -> Tensor:
    """The ``p`` quantile ``(n, k)`` of each mixture of :func:`mixture_quantiles`, from the
    quantile of the Gaussian of the mixture's mean and standard deviation (clipped into the
    bracket)."""
    z = float(norm.ppf(p))
    lo, hi = fmin + sd * z, fmax + sd * z
    x = torch.minimum(torch.maximum(mean + std * z, lo), hi)
    tol = QUANTILE_TOL * sd
    scale = 1.0 / (math.sqrt(2.0 * math.pi) * sd)
    for _ in range(QUANTILE_MAX_ITER):
        u = (x[None] - f).div_(sd)  # (S, n, k)
        F = torch.special.ndtr(u).mean(0).sub_(p)
        dens = u.square_().mul_(-0.5).exp_().mean(0).mul_(scale)
        below = F < 0.0
        lo = torch.where(below, x, lo)
        hi = torch.where(below, hi, x)
        new = x - F / dens
        outside = ~((new >= lo) & (new <= hi))  # also NaN: a vanishing density between separated components
        new = torch.where(outside, 0.5 * (lo + hi), new)
        converged = bool((((new - x).abs() <= tol) | ((hi - lo) <= tol)).all())
        x = new
        if converged:
            break
    return x


class PredictIntervalMixin:
    """``predict_interval`` for a regressor with ``predict_quantiles(X, quantiles)``."""

    predict_quantiles: Callable[..., np.ndarray]

    def predict_interval(self, X: ArrayLike, level: float = 0.9) -> tuple[np.ndarray, np.ndarray]:
        """Central prediction intervals of the posterior predictive distribution.

        The ``(1 - level) / 2`` and ``(1 + level) / 2`` quantiles of
        :meth:`predict_quantiles`.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Inputs.

        level : float, default=0.9
            Probability of each interval, in (0, 1).

        Returns
        -------
        lower : ndarray of shape (n_samples,) or (n_samples, n_targets)
            Lower ends.

        upper : ndarray of shape (n_samples,) or (n_samples, n_targets)
            Upper ends.
        """
        y_q = self.predict_quantiles(X, interval_probabilities(check_level(level)))
        return y_q[..., 0], y_q[..., 1]


def gaussian_mixture_quantiles(means: np.ndarray, sds: np.ndarray, weights: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Quantiles of weighted Gaussian mixtures with their own standard deviations.

    The mixture of a point is ``sum_c weights[c] N(means[c], sds[c]^2)``; the bracket
    ``[min_c (means_c + sds_c z_p), max_c (means_c + sds_c z_p)]`` holds the one root of
    ``F(x) = p`` (at its left end every component's distribution function is at most ``p``,
    at its right end at least ``p``), and the root is found as in :func:`mixture_quantiles`.

    Parameters
    ----------
    means : ndarray of shape (C, ...)
        The components' means, ``C`` per point.
    sds : ndarray broadcastable to ``means``
        The components' standard deviations, positive.
    weights : ndarray of shape (C,)
        The components' weights, non-negative, summing to one.
    q : ndarray of shape (P,)
        Probabilities in (0, 1).

    Returns
    -------
    x : ndarray of shape ``means.shape[1:] + (P,)``
        ``F^{-1}(q)`` of each point's mixture, to ``QUANTILE_TOL`` times its smallest
        component standard deviation.
    """
    mu = np.asarray(means, dtype=np.float64)
    sd = np.broadcast_to(np.asarray(sds, dtype=np.float64), mu.shape)
    w = np.asarray(weights, dtype=np.float64).reshape((-1,) + (1,) * (mu.ndim - 1))
    mean = (w * mu).sum(0)
    std = np.sqrt((w * (sd * sd + (mu - mean) ** 2)).sum(0))  # the mixture's moments
    tol = QUANTILE_TOL * sd.min(0)
    out = []
    for p in np.asarray(q, dtype=np.float64).reshape(-1):
        z = float(norm.ppf(p))
        ends = mu + sd * z
        lo, hi = ends.min(0), ends.max(0)
        x = np.clip(mean + std * z, lo, hi)
        for _ in range(QUANTILE_MAX_ITER):
            u = (x[None] - mu) / sd
            F = (w * norm.cdf(u)).sum(0) - p
            dens = (w * norm.pdf(u) / sd).sum(0)
            below = F < 0.0
            lo, hi = np.where(below, x, lo), np.where(below, hi, x)
            with np.errstate(divide="ignore", invalid="ignore"):
                new = x - F / dens
            outside = ~((new >= lo) & (new <= hi))  # also NaN: a vanishing density between components
            new = np.where(outside, 0.5 * (lo + hi), new)
            converged = bool(np.all((np.abs(new - x) <= tol) | ((hi - lo) <= tol)))
            x = new
            if converged:
                break
        out.append(x)
    return np.stack(out, -1)
