"""Quantiles of the regressors' predictive distributions.

Two predictives occur: a Gaussian per point (the linearised predictive, Bayesian linear
regression) and a mixture of Gaussians per point, ``sum_c w_c N(f_c, sd_c^2)`` (the sampled
predictive: one component per weight sample with weight ``1 / C``, with the learned noise;
and a mixture of several estimators' predictives, :mod:`skbayes.ensemble`). A Gaussian's
quantiles are closed-form; a mixture's are the root of its distribution function
``F(x) = sum_c w_c Phi((x - f_c) / sd_c)``, which :func:`mixture_quantiles` finds by Newton's
method safeguarded by bisection (Press et al., *Numerical Recipes*, ``rtsafe``), started at
the quantile of the Gaussian of the mixture's mean and variance and kept inside the bracket

    [min_c (f_c + sd_c z_p),  max_c (f_c + sd_c z_p)],    z_p = Phi^{-1}(p),

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


def mixture_quantiles(f: Tensor, sd: Tensor | float, q: np.ndarray, weights: Tensor | None = None) -> Tensor:
    """Quantiles of Gaussian mixtures, one mixture per point.

    The mixture of a point is ``sum_c w_c N(f_c, sd_c^2)``: uniform weights ``1 / C`` and
    one standard deviation per output for the sampled predictive (one component per
    weight sample), weighted components with their own standard deviations for a mixture
    of several estimators' predictives. The bracket
    ``[min_c (f_c + sd_c z_p), max_c (f_c + sd_c z_p)]`` holds the one root of
    ``F(x) = p`` (at its left end every component's distribution function is at most
    ``p``, at its right end at least ``p``).

    Parameters
    ----------
    f : Tensor of shape (C, n) or (C, n, k)
        The components' means: ``C`` per point (and output).
    sd : float or Tensor broadcastable to ``f``
        The components' standard deviations, positive: a number, one per output
        (shape ``(k,)``), or one per component and point.
    q : ndarray of shape (P,)
        Probabilities in (0, 1).
    weights : Tensor of shape (C,), default=None
        The components' weights, non-negative and summing to one; ``None`` for
        uniform weights.

    Returns
    -------
    x : Tensor of shape ``f.shape[1:] + (P,)``
        ``F^{-1}(q)`` of each point's mixture, to ``QUANTILE_TOL`` times its smallest
        component standard deviation. One probability at a time, so that the
        temporaries are a few arrays of the shape of ``f``, whatever the number of
        probabilities.
    """
    f = f.double()
    sd_t = torch.as_tensor(sd, dtype=f.dtype, device=f.device)
    if weights is None:

        def average(t: Tensor) -> Tensor:
            return t.mean(0)

    else:
        w = torch.as_tensor(weights, dtype=f.dtype, device=f.device).reshape((-1,) + (1,) * (f.ndim - 1))

        def average(t: Tensor) -> Tensor:
            return (t * w).sum(0)

    mean = average(f)
    std = torch.sqrt(average((f - mean).square_() + sd_t * sd_t))  # the mixture's moments
    tol = QUANTILE_TOL * (sd_t.amin(0) if sd_t.ndim == f.ndim else sd_t)
    qs = np.asarray(q).reshape(-1)
    return torch.stack([_mixture_quantile(f, sd_t, float(p), average, mean, std, tol) for p in qs], -1)


def _mixture_quantile(
    f: Tensor, sd: Tensor, p: float, average: Callable[[Tensor], Tensor], mean: Tensor, std: Tensor, tol: Tensor
) -> Tensor:
    """The ``p`` quantile of each mixture of :func:`mixture_quantiles` (``average`` sums over
    the components with their weights), from the quantile of the Gaussian of the mixture's
    mean and standard deviation (clipped into the bracket)."""
    z = float(norm.ppf(p))
    ends = f + sd * z
    lo, hi = ends.amin(0), ends.amax(0)
    del ends
    x = torch.minimum(torch.maximum(mean + std * z, lo), hi)
    for _ in range(QUANTILE_MAX_ITER):
        u = (x[None] - f).div_(sd)  # (C, n, k)
        F = average(torch.special.ndtr(u)).sub_(p)
        dens = average(u.square_().mul_(-0.5).exp_().div_(sd)).div_(math.sqrt(2.0 * math.pi))
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
