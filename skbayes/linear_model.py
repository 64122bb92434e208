"""Bayesian linear regression with a fixed Gaussian prior and homoscedastic or
heteroscedastic Gaussian noise (numpy / scipy only)."""

from __future__ import annotations

import hashlib
import math
import numbers
import warnings
from collections import namedtuple
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from scipy import linalg
from scipy.optimize import minimize_scalar
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from ._memory import memory_limit_bytes
from ._quantiles import PredictIntervalMixin, check_quantiles, gaussian_quantiles
from ._validation import check_sample_weight, validate_data
from .exceptions import MemoryLimitError, NonFiniteOutputError

__all__ = ["BayesianLinearRegression", "MemoryLimitError"]

_LOG_2PI = math.log(2.0 * math.pi)
_EPS = np.finfo(np.float64).eps

#: Largest working memory, in GiB, that one call of ``fit`` or ``sample_y`` may
#: ask for (``predict`` works in blocks; ``log_marginal_likelihood`` needs less
#: than the ``fit`` that preceded it). The estimate is checked before anything
#: large is allocated; above the limit (or above the machine's physical memory,
#: if smaller) :class:`~skbayes.exceptions.MemoryLimitError` is raised. Set
#: ``skbayes.linear_model.MEMORY_LIMIT_GIB`` to change it.
MEMORY_LIMIT_GIB = 8.0

# Rows of the query matrix processed at once by predict(return_std=True).
_PREDICT_CHUNK_BYTES = 64 * 2**20


#: Scales of X columns and y whose squares (and products) float64 represents comfortably.
_SCALE_RANGE = (1e-150, 1e150)


def _check_scales(X_scale: np.ndarray, y_scale: float) -> None:
    lo, hi = _SCALE_RANGE
    for what, scale in (("X", np.min(X_scale)), ("X", np.max(X_scale)), ("y", y_scale)):
        if not lo <= scale <= hi:
            raise ValueError(
                f"BayesianLinearRegression: the scale of {what} ({scale:.3g}) is outside [{lo:g}, {hi:g}], "
                f"where its square under- or overflows float64; rescale {what} (e.g. StandardScaler)."
            )


def _check_finite(what: str, values: np.ndarray) -> None:
    if not np.isfinite(values).all():
        raise NonFiniteOutputError(
            f"BayesianLinearRegression produced non-finite {what} for some of the inputs: they are "
            "likely far outside the range of the training data (their products with the "
            "coefficients overflow)."
        )


def _gib(nbytes: float) -> float:
    return nbytes / 2**30


def _memory_limit_bytes() -> float:
    """``MEMORY_LIMIT_GIB`` in bytes, capped by the physical memory when it can be queried
    (the limit every estimator shares, :func:`skbayes._memory.memory_limit_bytes`)."""
    return memory_limit_bytes()


def _check_memory(nbytes: float, what: str, detail: str) -> None:
    """Raise MemoryLimitError if ``nbytes`` (an estimate) exceeds the limit."""
    limit = _memory_limit_bytes()
    if nbytes <= limit:
        return
    raise MemoryLimitError(
        f"BayesianLinearRegression.{what} would need about {_gib(nbytes):.1f} GiB of memory: {detail}. "
        f"That is above the limit of {_gib(limit):.1f} GiB (skbayes.linear_model.MEMORY_LIMIT_GIB = "
        f"{MEMORY_LIMIT_GIB}, capped by the physical memory), so nothing was allocated. The exact posterior "
        "is a dense n_features x n_features matrix: use fewer features (feature selection, or a "
        "dimensionality reduction such as sklearn.decomposition.PCA or TruncatedSVD in a pipeline), or an "
        "estimator with a structured posterior, e.g. skbayes.SLANGRegressor(hidden_layer_sizes=()) "
        "(a linear model with a low-rank-plus-diagonal covariance), or raise "
        "skbayes.linear_model.MEMORY_LIMIT_GIB if the machine has the memory."
    )


def _solve_memory_bytes(n: int, d: int, restricted: bool, compute_sigma: bool) -> tuple[int, str]:
    """Peak bytes of :func:`_solve` (float64 arrays it allocates), and the route it takes."""
    n_eff = n - 1 if restricted else n
    primal = d <= n_eff
    words = n * d  # whitened design
    if primal:
        words += (3 if compute_sigma else 2) * d * d  # A and its factor; the inverse factor and sigma
    else:
        words += (n * d if restricted else 0) + 2 * n_eff * n_eff  # Householder update; K and its factor
        if compute_sigma:
            words += n_eff * d + 2 * d * d  # triangular solve; sigma and its symmetrisation
    return 8 * words, ("primal" if primal else "dual")


def _fit_memory_bytes(n: int, d: int, restricted: bool, learn_noise: bool) -> tuple[int, str]:
    """Peak bytes of a fit besides the validated input: the standardised copy of X kept by the
    estimator, then the larger of the thin SVD (learned noise) and the solve."""
    k = min(n, d)
    svd = 8 * (n * d + n * k + k * d + 5 * k * k) if learn_noise else 0  # LAPACK's copy, U, V^T, work
    solve, route = _solve_memory_bytes(n, d, restricted, compute_sigma=True)
    return 8 * n * d + max(svd, solve), route


def _check_fit_memory(shape: tuple[int, int], n_targets: int, restricted: bool, learn_noise: bool) -> None:
    """Raise :class:`MemoryLimitError` before ``fit`` allocates more than the limit for
    ``X`` of this shape and ``n_targets`` targets (see :func:`_fit_memory_bytes`)."""
    n_samples, n_features = shape
    nbytes, route = _fit_memory_bytes(n_samples, n_features, restricted, learn_noise)
    # every further target keeps its sigma_ (and its factor for sample_y)
    nbytes += (n_targets - 1) * 8 * (2 * n_features**2 + (0 if route == "primal" else n_samples * n_features))
    m = n_features if route == "primal" else n_samples - int(restricted)
    _check_memory(
        nbytes,
        "fit",
        f"X has shape ({n_samples}, {n_features}); the posterior covariance sigma_ alone is "
        + ("a " if n_targets == 1 else f"{n_targets} ")
        + f"({n_features}, {n_features}) float64 array{'' if n_targets == 1 else 's'} of "
        f"{_gib(8.0 * n_targets * n_features**2):.1f} GiB, "
        f"and the {route} solve factorises a ({m}, {m}) matrix",
    )


def _column_scales(Zc: np.ndarray, weights: np.ndarray, offset: float | np.ndarray | None) -> np.ndarray:
    """Scales used to standardise: the weighted root mean square of each column of ``Zc``.

    ``Zc`` are the data after subtracting ``offset`` (None without centring), ``weights``
    sum to one. A column whose spread is at the rounding level of its offset (a constant
    column) gets the magnitude of its offset instead, and an all-zero column gets 1, so
    that every scale is positive and proportional to the scale of the data.
    """
    if Zc.ndim == 1:
        s = math.sqrt(float(weights @ (Zc * Zc)))
        s = np.array([s])
        off = np.array([0.0 if offset is None else abs(float(offset))])
    else:
        s = np.sqrt(np.einsum("i,ij,ij->j", weights, Zc, Zc))
        off = np.zeros(Zc.shape[1]) if offset is None else np.abs(offset)
    n = Zc.shape[0]
    constant = s <= n * _EPS * off
    s = np.where(constant, off, s)
    s[~(s > 0)] = 1.0
    return s


# Result of one exact Gaussian solve at fixed hyper-parameters.
_Posterior = namedtuple("_Posterior", ["coef", "sigma", "log_evidence", "route", "chol", "design"])


def _check_positive(name: str, value: Any) -> float:
    """Return ``value`` as a float if it is a finite real number > 0, else raise."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a positive float, got {value!r}.")
    value = float(value)
    if not (np.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a positive float, got {value!r}.")
    return value


def _cholesky(M: np.ndarray, what: str) -> np.ndarray:
    try:
        return linalg.cholesky(M, lower=True, check_finite=False)
    except linalg.LinAlgError as exc:  # only when alpha is negligible next to the data term
        raise ValueError(
            f"The {what} matrix is not positive definite in floating point; the prior "
            "precision alpha is too small relative to the data term. Increase alpha or "
            "rescale the inputs."
        ) from exc


def _solve(
    Xc: np.ndarray,
    yc: np.ndarray,
    r: np.ndarray,
    alpha: float,
    restricted: bool,
    method: str = "auto",
    compute_sigma: bool = True,
) -> _Posterior:
    """Exact Gaussian posterior and log evidence at fixed hyper-parameters.

    Model: ``yc ~ N(Xc w, diag(1 / r))``, ``w ~ N(0, I / alpha)``.

    Parameters
    ----------
    Xc : ndarray of shape (n, d)
        (Centred) inputs.
    yc : ndarray of shape (n,)
        (Centred) targets.
    r : ndarray of shape (n,)
        Per-sample noise precisions (inverse variances).
    alpha : float
        Prior precision of the weights.
    restricted : bool
        Whether an intercept with a flat prior was integrated out (the data
        were centred with the ``r``-weighted means). Adds
        ``log(2 pi) / 2 - log(sum(r)) / 2`` to the log evidence.
    method : {"auto", "primal", "dual"}
        ``"primal"`` factorises the d x d posterior precision
        ``alpha I + Xc^T diag(r) Xc``; ``"dual"`` factorises the n' x n'
        matrix ``alpha I + Xw Xw^T`` (Woodbury), where ``Xw`` are the whitened
        rows ``diag(sqrt r) Xc``, with the direction ``sqrt(r)`` (orthogonal to
        every column after weighted centring) rotated out when ``restricted``,
        so ``n' = n - restricted``; ``"auto"`` takes the smaller one (primal
        when ``d <= n'``).
    compute_sigma : bool
        Whether to form the d x d posterior covariance.

    Returns
    -------
    _Posterior
        ``coef``, ``sigma`` (or None), ``log_evidence``, the ``route`` taken,
        its lower Cholesky factor ``chol`` and, for the dual route, the
        (rotated) whitened design ``design`` that was factorised.
    """
    n, d = Xc.shape
    sr = np.sqrt(r)
    Xw = Xc * sr[:, None]  # whitened inputs L^{-1/2} Xc
    yw = yc * sr
    n_eff = n - 1 if restricted else n
    if method == "auto":
        method = "primal" if d <= n_eff else "dual"
    if method == "dual" and restricted:
        Xw, yw = _drop_centred_direction(Xw, yw, sr)
    if method not in ("primal", "dual"):  # pragma: no cover - internal
        raise ValueError(f"unknown method {method!r}")
    # log|L + Xc Xc^T / alpha| = -sum(log r) + log|I_n + Xw Xw^T / alpha|
    logdet = -np.sum(np.log(r))
    solve = _solve_primal if method == "primal" else _solve_dual
    coef, sigma, logdet_w, quad, chol = solve(Xw, yw, alpha, compute_sigma)
    logdet += logdet_w
    log_evidence = -0.5 * (n * _LOG_2PI + logdet + quad)
    if restricted:
        log_evidence += 0.5 * _LOG_2PI - 0.5 * math.log(np.sum(r))
    return _Posterior(coef, sigma, float(log_evidence), method, chol, Xw if method == "dual" else None)


def _drop_centred_direction(Xw: np.ndarray, yw: np.ndarray, sr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rotate the direction ``sqrt(r)`` out of the whitened rows (``n`` rows to ``n - 1``).

    Centring with the r-weighted means makes ``sr = sqrt(r)`` orthogonal to the columns of
    ``Xw`` and to ``yw``. A Householder reflection H maps ``sr / |sr|`` to ``e_1``; the first
    row of ``H Xw`` and of ``H yw`` is then zero and is dropped, which leaves every quantity
    of :func:`_solve` unchanged but keeps ``alpha I + Xw Xw^T`` well conditioned. ``Xw`` must
    be a fresh array: it is updated in place.
    """
    u = sr / np.linalg.norm(sr)
    u[0] -= 1.0
    nu = np.linalg.norm(u)
    if nu > 0:
        u /= nu
        Xw -= np.outer(2.0 * u, u @ Xw)
        yw = yw - 2.0 * u * (u @ yw)
    return Xw[1:], yw[1:]


def _solve_primal(
    Xw: np.ndarray, yw: np.ndarray, alpha: float, compute_sigma: bool
) -> tuple[np.ndarray, np.ndarray | None, float, float, np.ndarray]:
    """:func:`_solve` through the ``d x d`` posterior precision ``A = alpha I + Xw^T Xw``.

    Returns ``(coef, sigma or None, log|I + Xw Xw^T / alpha|, y^T (L + Xc Xc^T / alpha)^{-1} y,
    chol)`` with ``chol`` the lower Cholesky factor of ``A``.
    """
    d = Xw.shape[1]
    A = Xw.T @ Xw
    A.flat[:: d + 1] += alpha
    chol = _cholesky(A, "posterior precision")
    del A
    coef = linalg.cho_solve((chol, True), Xw.T @ yw, check_finite=False)
    # |I_n + Xw Xw^T / alpha| = |A| / alpha^d
    logdet = 2.0 * np.sum(np.log(np.diag(chol))) - d * math.log(alpha)
    # y^T (L + Xc Xc^T / alpha)^{-1} y = |yw - Xw m|^2 + alpha |m|^2  (sum of squares)
    resid = yw - Xw @ coef
    quad = resid @ resid + alpha * (coef @ coef)
    sigma = None
    if compute_sigma:
        Linv = linalg.solve_triangular(chol, np.eye(d), lower=True, overwrite_b=True, check_finite=False)
        sigma = Linv.T @ Linv  # A^{-1} = L^{-T} L^{-1}
        del Linv
    return coef, sigma, logdet, quad, chol


def _solve_dual(
    Xw: np.ndarray, yw: np.ndarray, alpha: float, compute_sigma: bool
) -> tuple[np.ndarray, np.ndarray | None, float, float, np.ndarray]:
    """:func:`_solve` through the ``n' x n'`` Gram matrix ``K = alpha I + Xw Xw^T`` (Woodbury).

    Returns what :func:`_solve_primal` returns, with ``chol`` the lower Cholesky factor of ``K``.
    """
    m_, d = Xw.shape
    K = Xw @ Xw.T
    K.flat[:: m_ + 1] += alpha
    chol = _cholesky(K, "dual (Gram)")
    del K
    z = _solve_triangular(chol, yw, lower=True)
    a = _solve_triangular(chol.T, z, lower=False)
    coef = Xw.T @ a  # (alpha I + Xw^T Xw)^{-1} Xw^T yw = Xw^T (alpha I + Xw Xw^T)^{-1} yw
    logdet = 2.0 * np.sum(np.log(np.diag(chol))) - m_ * math.log(alpha)
    # y^T (L + Xc Xc^T / alpha)^{-1} y = alpha yw^T K^{-1} yw
    quad = alpha * (z @ z)
    sigma = None
    if compute_sigma:
        B = _solve_triangular(chol, Xw, lower=True)
        sigma = B.T @ B
        del B
        sigma *= -1.0
        sigma.flat[:: d + 1] += 1.0
        sigma /= alpha  # (I - Xw^T K^{-1} Xw) / alpha
        sigma = 0.5 * (sigma + sigma.T)
    return coef, sigma, logdet, quad, chol


def _solve_triangular(chol: np.ndarray, b: np.ndarray, lower: bool) -> np.ndarray:
    """``chol^{-1} b`` for a triangular ``chol``; also for ``chol`` of no rows (the dual route of one
    centred row), which older scipy releases refuse."""
    if chol.shape[0] == 0:
        return np.zeros_like(b)
    x: np.ndarray = linalg.solve_triangular(chol, b, lower=lower, check_finite=False)
    return x


def _cho_solve(chol: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``(chol chol^T)^{-1} b`` for a lower Cholesky factor ``chol``, also of no rows (see
    :func:`_solve_triangular`)."""
    if chol.shape[0] == 0:
        return np.zeros_like(b)
    x: np.ndarray = linalg.cho_solve((chol, True), b, check_finite=False)
    return x


def _weighted_evidence_correction(r: np.ndarray, sample_weight: np.ndarray) -> float:
    """``log p_w(y) - log N(yc | 0, diag(1 / r) + ...)``: the log evidence of the weighted
    likelihood ``prod_i N(y_i | x_i w, 1 / p_i)^{w_i}`` (``p_i = r_i / w_i`` the rows' noise
    precisions) minus that of the Gaussian with precisions ``r_i`` that :func:`_solve`
    computes. Per row, ``N(y | m, 1/p)^w = N(y | m, 1/(w p)) (2 pi / (w p))^{1/2} (p / (2 pi))^{w/2}``,
    whose log factor is ``((w - 1) (log p - log 2 pi) - log w) / 2``: zero for ``w = 1``.
    For integer weights the result is the evidence of the data with row ``i`` repeated
    ``w_i`` times."""
    p = r / sample_weight
    return 0.5 * float(np.sum((sample_weight - 1.0) * (np.log(p) - _LOG_2PI) - np.log(sample_weight)))


def _maximise_noise_precision(
    Xc: np.ndarray,
    yc: np.ndarray,
    alpha: float,
    restricted: bool,
    max_iter: int,
    tol: float,
    n_obs: float | None = None,
) -> tuple[float, int, bool]:
    """Noise precision maximising the exact log evidence, ``alpha`` held fixed.

    With the thin SVD ``Xc = U diag(s) V^T``, ``b = U^T yc`` and
    ``rho = |yc - U b|^2``, the negative log evidence as a function of the
    log noise variance ``t = log(1 / tau)`` is, up to a constant,

        (m t + sum_k log(1 + s_k^2 e^{-t} / alpha) + rho e^{-t}
             + sum_k b_k^2 / (e^t + s_k^2 / alpha)) / 2,

    with ``m = n`` (``n - 1`` when an intercept was integrated out); ``n_obs``
    replaces ``n`` there for sample weights (their sum, with ``Xc`` and ``yc`` the rows
    multiplied by ``sqrt(w_i)``: the weighted likelihood's evidence). When
    ``yc`` lies in the span of ``Xc`` (typically ``d >= n``) the evidence can
    increase all the way to zero noise; the result is then the lower end of
    the bracket (the largest noise precision searched): a noise variance of
    ``1e-12 |yc|^2 / n``, or the smallest one that keeps the condition number
    of the factorised matrix at most ``1e12``, whichever is larger. It costs
    O(min(n, d)) per evaluation. A grid over a bracket known to contain the
    maximiser is followed by bounded Brent refinement.

    Returns ``(tau, n_iter, converged)``.
    """
    n, d = Xc.shape
    try:
        U, s, _ = linalg.svd(Xc, full_matrices=False, check_finite=False)
    except linalg.LinAlgError:  # pragma: no cover - gesdd failure is rare
        U, s, _ = linalg.svd(Xc, full_matrices=False, check_finite=False, lapack_driver="gesvd")
    b = U.T @ yc
    rho = max(float(np.sum((yc - U @ b) ** 2)), 0.0)
    b2 = b**2
    lam = s**2 / alpha
    with np.errstate(divide="ignore"):
        loglam = np.log(lam)
    n_obs = n if n_obs is None else n_obs
    m = n_obs - (1 if restricted else 0)
    k = s.size

    def neg_log_evidence(t: float | np.ndarray) -> np.ndarray:
        # m t + sum_k log(1 + lam_k e^{-t}) written as (m - k) t + sum_k log(e^t + lam_k),
        # which has no cancellation when the noise variance e^t is far below lam_k.
        t = np.atleast_1d(np.asarray(t, dtype=np.float64))
        tt = t[None, :]
        val = (m - k) * t + rho * np.exp(-t)
        val = val + np.sum(np.logaddexp(tt, loglam[:, None]), axis=0)
        val = val + np.sum(b2[:, None] / (np.exp(tt) + lam[:, None]), axis=0)
        return 0.5 * val

    # The stationarity condition sum_j [c_j^2 - (u + lam_j)] / (u + lam_j)^2 = 0 has
    # no root with u > max_j c_j^2, so the maximising noise variance u is at most
    # |yc|^2. The lower end keeps the condition number of the matrix that _solve
    # factorises, (alpha + tau s_1^2) / (alpha + tau s_p^2) with p = min(d, m) (its
    # eigenvalues are alpha + tau s_j^2, j <= p), at most C = 1e12:
    # u >= (s_1^2 - C s_p^2) / ((C - 1) alpha), no constraint when s_1^2 <= C s_p^2.
    y2 = float(yc @ yc)
    scale = y2 if y2 > 0 else 1.0
    p = min(d, n - (1 if restricted else 0))
    cond_max = 1e12
    lo_cond = 0.0
    if p > 0 and s.size:
        s_1 = float(s[0] ** 2)
        s_p = float(s[p - 1] ** 2) if p <= s.size else 0.0
        lo_cond = max(s_1 - cond_max * s_p, 0.0) / ((cond_max - 1.0) * alpha)
    lo = max(1e-12 * scale / max(n_obs, 1), lo_cond)
    hi = max(scale, 1e2 * lo)
    t_lo, t_hi = math.log(lo), math.log(hi)
    n_grid = int(math.ceil((t_hi - t_lo) / 0.25)) + 1
    grid = np.linspace(t_hi, t_lo, n_grid)  # from large to small noise variance
    values = neg_log_evidence(grid)
    i = int(np.argmin(values))
    a_, b_ = grid[min(i + 1, n_grid - 1)], grid[max(i - 1, 0)]
    res = minimize_scalar(
        lambda t: float(neg_log_evidence(t)[0]),
        bounds=(a_, b_),
        method="bounded",
        options={"xatol": max(tol, 1e-12), "maxiter": max_iter},
    )
    t_best = float(res.x) if res.fun <= values[i] else float(grid[i])
    if i == n_grid - 1 and res.fun > values[i] - 1e-9 * (1.0 + abs(values[i])):
        # The evidence still increases at the low-noise end of the bracket (interpolation):
        # return that end, not whichever point of the flat tail rounding favours.
        t_best = t_lo
    return math.exp(-t_best), int(res.nit), bool(res.success)


class BayesianLinearRegression(PredictIntervalMixin, RegressorMixin, BaseEstimator):
    """Bayesian linear regression with a fixed prior precision on standardised data.

    Exact conjugate Gaussian inference for the model

        y = X w + b + noise,   w_j ~ N(0, y_scale^2 / (alpha X_scale_j^2)),
        noise ~ N(0, L),

    with independent weights. Equivalently, in the standardised problem
    (column ``j`` of ``X`` divided by ``X_scale_j``, ``y`` divided by
    ``y_scale``) the weights are ``N(0, alpha^{-1} I)``. ``X_scale`` and
    ``y_scale`` are the standard deviations of the training columns and
    targets (see ``alpha``), so predictions do not depend on the units of
    ``X`` or ``y``. The intercept ``b`` has a flat (improper) prior and is
    integrated out, and the noise covariance ``L`` is either homoscedastic,
    ``L = I / noise_precision``, or heteroscedastic with per-sample variances
    passed to :meth:`fit`, ``L = diag(noise_variance)``. The prior precision
    ``alpha`` is held fixed; the noise precision is either fixed or learned by
    maximising the log marginal likelihood (evidence). See the Notes section
    for the computations.

    Parameters
    ----------
    alpha : float, default=1.0
        Precision of the Gaussian prior over the weights of the *standardised*
        problem, held fixed; must be positive. Before solving, every column of
        ``X`` is divided by its scale ``X_scale_`` and ``y`` by ``y_scale_``:
        their standard deviations over the training data (weighted by the
        inverse noise variances when ``noise_variance`` is given, and by
        ``sample_weight``, and the root mean square about zero when
        ``fit_intercept=False``). ``alpha`` is
        therefore dimensionless: ``alpha=1`` says that a change of one
        standard deviation in any feature is a priori expected to move ``y``
        by about one standard deviation of ``y``. In the units of the data the
        prior precision of ``coef_[j]`` is
        ``alpha * X_scale_[j] ** 2 / y_scale_ ** 2``. Because the scales come
        from the training data, ``coef_``, ``sigma_``, ``noise_precision_`` and
        the predictive mean and standard deviation transform exactly with the
        units: multiplying column ``j`` of ``X`` by ``c`` divides ``coef_[j]`` by
        ``c`` and leaves every prediction unchanged; multiplying ``y`` by ``c``
        multiplies the predictive mean and standard deviation by ``c`` and
        divides ``noise_precision_`` by ``c ** 2``.

    noise_precision : float or "auto", default="auto"
        Precision (inverse variance) of the homoscedastic Gaussian noise, in
        the units of ``y`` (``1 / y_units ** 2``, not standardised).
        If a float, it is held fixed. If "auto", it is set to the value that
        maximises the exact log marginal likelihood of the training data with
        ``alpha`` fixed (a one-dimensional maximisation over the log noise
        precision, see Notes). When ``noise_variance`` is passed to
        :meth:`fit`, the per-sample variances define the noise completely,
        nothing is learned, and ``noise_precision`` must be "auto" or 1.0
        (any other value raises a ValueError).

    fit_intercept : bool, default=True
        Whether to fit an intercept. The intercept has a flat prior: X and y
        are centred with their noise-precision-weighted means (plain means for
        homoscedastic noise) and ``intercept_ = y_offset - X_offset_ @ coef_``,
        as in :class:`~sklearn.linear_model.BayesianRidge`. Like there, the
        posterior variance of the intercept is not included in the predictive
        standard deviation. If False, no intercept is used (data are expected
        to be centred).

    max_iter : int, default=300
        Maximum number of iterations of the bounded scalar optimiser used when
        ``noise_precision="auto"``.

    tol : float, default=1e-6
        Absolute tolerance on ``log(noise_precision_)`` for the evidence
        maximisation when ``noise_precision="auto"``.

    Attributes
    ----------
    coef_ : ndarray of shape (n_features,) or (n_targets, n_features)
        Posterior mean of the weights, in the units of the data (one row per
        target after a fit on a 2-D ``y``, as in scikit-learn's linear models).

    intercept_ : float or ndarray of shape (n_targets,)
        Independent term in the decision function (posterior mean of the
        intercept). Set to 0.0 if ``fit_intercept=False``.

    sigma_ : ndarray of shape (n_features, n_features) or (n_targets, n_features, n_features)
        Posterior covariance matrix of the weights, in the units of the data,
        ``(P + Xc^T L^{-1} Xc)^{-1}`` with ``Xc`` the centred inputs and
        ``P = alpha diag(X_scale_ ** 2) / y_scale_ ** 2`` the prior precision.

    alpha_ : float
        Prior precision of the weights of the standardised problem (equal to
        ``alpha``).

    noise_precision_ : float or ndarray of shape (n_targets,)
        Precision of the homoscedastic noise in the units of ``y`` (per target): the fixed
        ``noise_precision`` or the evidence-maximising value. NaN after a
        heteroscedastic fit (with ``noise_variance``), for which there is no
        single noise level.

    log_marginal_likelihood_value_ : float
        Log marginal likelihood (a density of the training targets in the
        units of ``y``) at ``alpha_`` and the fitted noise (summed over the
        targets, which are independent, after a fit on a 2-D ``y``). With
        ``fit_intercept=True`` this is the evidence with the flat-prior
        intercept integrated out (see Notes).

    n_iter_ : int
        Number of iterations of the evidence maximisation; 0 when the noise
        is fixed (a float ``noise_precision`` or per-sample ``noise_variance``). The
        largest over the targets after a fit on a 2-D ``y``.

    X_offset_ : ndarray of shape (n_features,)
        Noise-precision-weighted mean of the training inputs (times the sample
        weights, if given) subtracted before fitting if ``fit_intercept=True``;
        zeros otherwise.

    X_scale_ : ndarray of shape (n_features,)
        Scale of each input column that ``alpha`` refers to: the
        noise-precision-weighted standard deviation of the column (its root
        mean square if ``fit_intercept=False``). A constant column gets the
        magnitude of its value, an all-zero column 1.

    y_scale_ : float or ndarray of shape (n_targets,)
        Scale of the targets that ``alpha`` refers to, defined like
        ``X_scale_`` (per target).

    n_features_in_ : int
        Number of features seen during ``fit``.

    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Names of features seen during ``fit``. Defined only when `X`
        has feature names that are all strings.

    See Also
    --------
    sklearn.linear_model.BayesianRidge : Bayesian ridge regression, which also
        learns the prior precision (with Gamma hyper-priors).

    Notes
    -----
    **Standardisation.** Write ``Xc``, ``yc`` for the centred data,
    ``Xs = Xc diag(1 / X_scale_)`` and ``ys = yc / y_scale_`` for the
    standardised data and ``Ls = L / y_scale_ ** 2`` for the noise covariance
    in standardised units. Everything below is computed for ``(Xs, ys, Ls)``
    with the prior ``N(0, I / alpha)`` and mapped back exactly:
    ``coef_ = m * y_scale_ / X_scale_``, ``sigma_ = D S D`` with
    ``D = diag(y_scale_ / X_scale_)``, ``noise_precision_ = tau_s /
    y_scale_ ** 2``, and the log evidence of ``y`` is that of ``ys`` minus
    ``n' log(y_scale_)`` (the Jacobian; ``n' = n_samples - 1`` with an
    intercept, ``n_samples`` without). This is the same model as
    :class:`~sklearn.linear_model.BayesianRidge` fitted to the standardised
    data with ``lambda_ = alpha`` and ``alpha_ = noise_precision_ *
    y_scale_ ** 2``. The standardisation makes the numerical work (and the
    bracket of the noise search, below) independent of the units, so the
    results are invariant to rescaling to rounding error, not just in exact
    arithmetic. Because the scales are estimated from the training data the
    prior is data-dependent (an empirical-Bayes choice, as with
    ``GaussianProcessRegressor(normalize_y=True)``).

    **Posterior.** Write ``Xw = Ls^{-1/2} Xs`` and ``yw = Ls^{-1/2} ys``
    for the whitened data. The posterior over the standardised weights is
    ``N(m, S)`` with ``S = (alpha I + Xw^T Xw)^{-1}`` and ``m = S Xw^T yw``.
    When ``n_features <= n'`` the d x d matrix ``alpha I + Xw^T Xw`` is
    factorised by Cholesky (primal route); otherwise the n' x n' matrix
    ``alpha I + Xw Xw^T`` is (dual route, via the Woodbury and push-through
    identities ``m = Xw^T (alpha I + Xw Xw^T)^{-1} yw`` and
    ``S = (I - Xw^T (alpha I + Xw Xw^T)^{-1} Xw) / alpha``), so the cost is
    cubic in ``min(n_samples, n_features)``, plus ``O(n d^2)`` to form
    ``sigma_``. With an intercept, centring makes ``Ls^{-1/2} 1`` orthogonal
    to every column of ``Xw``; the dual route rotates that direction out (one
    Householder reflection) and works with ``n_samples - 1`` rows, so that the
    Gram matrix stays well conditioned even when ``alpha`` is negligible. No
    matrix is inverted explicitly; log-determinants come from the Cholesky
    factors.

    **Evidence.** The log evidence is ``log N(yc | 0, L + Xc P^{-1} Xc^T)``
    with ``P`` the prior precision of ``sigma_``. With ``fit_intercept=True``
    the intercept is integrated out under its flat prior, which adds
    ``log(2 pi) / 2 - log(sum_i 1 / L_ii) / 2``; this is the limit of
    ``log p(y) + log(2 pi s^2) / 2`` under a ``N(0, s^2)`` prior on the
    intercept as ``s -> inf``. It is invariant to shifting ``y`` and counts
    ``n_samples - 1`` residual degrees of freedom, so the learned noise
    precision satisfies the fixed point
    ``noise_precision_ = (n_samples - 1 - gamma) / SSE`` with
    ``gamma = n_features - trace(P sigma_)`` (``n_samples`` instead of
    ``n_samples - 1`` without intercept). scikit-learn's BayesianRidge uses
    ``n_samples`` in both cases.

    With ``noise_precision="auto"`` the evidence is maximised over the log
    noise variance using a thin SVD of ``Xs`` (each evaluation then costs
    O(min(n_samples, n_features))): a grid over a bracket that provably
    contains the maximiser, then bounded Brent refinement. The search is
    limited to noise variances of at least ``1e-12 y_scale_ ** 2`` and at
    least what keeps the condition number of the factorised matrix below 1e12
    (no limit from the latter unless the standardised inputs are that ill
    conditioned). When ``n_features >= n_samples`` and the prior is vague, the
    evidence can increase all the way to zero noise (interpolation); the
    result is then that lower end of the search, a large noise precision. The
    posterior at the selected value is then computed by Cholesky as above.

    **Memory.** ``sigma_`` is a dense n_features x n_features matrix. Before
    allocating anything large, :meth:`fit` (and :meth:`sample_y`) estimate
    their working memory and raise :class:`~skbayes.exceptions.MemoryLimitError`, naming the size
    and the shapes, if it exceeds ``skbayes.linear_model.MEMORY_LIMIT_GIB``
    (8 GiB by default) or the physical memory. :meth:`predict` works through
    the query points in blocks.

    **Several targets.** A 2-D ``y`` of shape ``(n_samples, n_targets)`` is
    fitted as ``n_targets`` independent models on the same inputs: the
    results for column ``j`` (``coef_[j]``, ``sigma_[j]``, ``noise_precision_[j]``,
    ...) are those of a fit on ``y[:, j]`` alone (the same computation; equal to
    rounding). ``X_offset_`` and
    ``X_scale_`` are shared; ``predict`` returns ``(n_samples, n_targets)`` arrays
    and ``sample_y`` ``(n_samples_X, n_targets, n_samples)``.

    **Edited attributes.** Every method derives from the public fitted
    attributes: after a hand edit of ``coef_``, ``sigma_``, ``intercept_``,
    ``noise_precision_``, ``alpha_``, ``X_offset_``, ``X_scale_`` or ``y_scale_``,
    :meth:`sample_y` draws from ``N(coef_, sigma_)`` as edited (not from the
    factorisation the fit kept) and :meth:`log_marginal_likelihood` uses the edited
    ``alpha_`` and ``noise_precision_``.

    The estimator keeps the standardised training data (like
    :class:`~sklearn.gaussian_process.GaussianProcessRegressor`) so that
    :meth:`log_marginal_likelihood` can be evaluated at other
    hyper-parameters and :meth:`sample_y` can draw exact posterior samples.

    References
    ----------
    C. M. Bishop, Pattern Recognition and Machine Learning, Springer, 2006,
    Sections 3.3 and 3.5.

    D. J. C. MacKay, Bayesian Interpolation, Neural Computation, Vol. 4,
    No. 3, 1992.

    S. Rossi, P. Michiardi, M. Filippone, Good Initializations of Variational
    Bayes for Deep Models, ICML 2019, Appendices B and C.

    Examples
    --------
    >>> import numpy as np
    >>> from skbayes.linear_model import BayesianLinearRegression
    >>> X = np.array([[0.0], [1.0], [2.0], [3.0]])
    >>> y = np.array([0.1, 0.9, 2.1, 2.9])
    >>> reg = BayesianLinearRegression(alpha=1e-2, noise_precision=100.0).fit(X, y)
    >>> reg.coef_.round(3), round(reg.intercept_, 3)
    (array([0.96]), 0.06)
    >>> y_mean, y_std = reg.predict([[4.0]], return_std=True)
    """

    def __init__(
        self,
        *,
        alpha: float = 1.0,
        noise_precision: float | str = "auto",
        fit_intercept: bool = True,
        max_iter: int = 300,
        tol: float = 1e-6,
    ) -> None:
        self.alpha = alpha
        self.noise_precision = noise_precision
        self.fit_intercept = fit_intercept
        self.max_iter = max_iter
        self.tol = tol

    def _check_params(self) -> tuple[float, float | str]:
        alpha = _check_positive("alpha", self.alpha)
        tau = self.noise_precision
        if isinstance(tau, str):
            if tau != "auto":
                raise ValueError(f"noise_precision must be 'auto' or a positive float, got {tau!r}.")
        else:
            try:
                tau = _check_positive("noise_precision", tau)
            except ValueError:
                raise ValueError(f"noise_precision must be 'auto' or a positive float, got {tau!r}.") from None
        if not isinstance(self.fit_intercept, (bool, np.bool_)):
            raise ValueError(f"fit_intercept must be a bool, got {self.fit_intercept!r}.")
        mi = self.max_iter
        if isinstance(mi, (bool, np.bool_)) or not isinstance(mi, numbers.Integral) or mi < 1:
            raise ValueError(f"max_iter must be an int >= 1, got {mi!r}.")
        tol = self.tol
        if isinstance(tol, (bool, np.bool_)) or not isinstance(tol, numbers.Real) or not tol >= 0:
            raise ValueError(f"tol must be a float >= 0, got {tol!r}.")
        return alpha, tau

    @staticmethod
    def _check_noise_variance(noise_variance: ArrayLike, n_samples: int) -> np.ndarray:
        v = np.asarray(noise_variance, dtype=np.float64)
        if v.ndim != 1 or v.shape[0] != n_samples:
            raise ValueError(
                f"noise_variance must be a 1-D array of shape (n_samples,) = ({n_samples},), got shape {v.shape}."
            )
        if not np.all(np.isfinite(v)):
            raise ValueError("noise_variance must be finite.")
        if not np.all(v > 0):
            raise ValueError(f"noise_variance must be strictly positive, got minimum {v.min()!r}.")
        return v

    def fit(
        self,
        X: ArrayLike,
        y: ArrayLike,
        noise_variance: ArrayLike | None = None,
        sample_weight: ArrayLike | None = None,
    ) -> BayesianLinearRegression:
        """Fit the model.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training data.

        y : array-like of shape (n_samples,) or (n_samples, n_targets)
            Target values. A 2-D ``y`` fits one independent model per column on the
            same inputs (each with its own scale, noise precision and posterior);
            the fitted attributes then get a leading ``n_targets`` axis.

        noise_variance : array-like of shape (n_samples,), default=None
            Known per-sample noise variances in the units of ``y``
            (heteroscedastic noise, ``L = diag(noise_variance)``). They are used
            as given: no noise level is learned, ``noise_precision`` must then
            be "auto" or 1.0 and ``noise_precision_`` is set to NaN. If None,
            the noise is homoscedastic with precision ``noise_precision``.

        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weights: row ``i``'s likelihood enters as
            ``N(y_i | x_i w + b, 1 / tau_i) ** w_i`` (weighted least squares, the
            noise precision ``tau_i`` multiplied by ``w_i`` in the posterior). The
            posterior, the standardisation (weighted means and scales), the
            evidence-maximising noise precision and the evidence are those of the
            data with row ``i`` repeated ``w_i`` times when the weights are integers;
            rows of weight zero are dropped (exactly as if removed). Multiplying
            every weight by ``c`` acts as ``c`` times the data, not as an invariance.
            None gives every row weight 1.

        Returns
        -------
        self : object
            Fitted estimator.

        Raises
        ------
        MemoryLimitError
            If the estimated working memory (dominated by the
            n_features x n_features posterior covariance) exceeds
            ``skbayes.linear_model.MEMORY_LIMIT_GIB``; raised before anything
            large is allocated.
        """
        alpha, tau = self._check_params()
        previous = {k: v for k, v in vars(self).items() if k in ("n_features_in_", "feature_names_in_")}
        X, y = validate_data(self, X, y, dtype=np.float64, y_numeric=True, multi_output=True)
        y = np.asarray(y, dtype=np.float64)
        hetero = noise_variance is not None
        X, y, r, sw = self._fit_rows(X, y, noise_variance, sample_weight, tau)
        n_obs = X.shape[0] if sw is None else float(np.sum(sw))
        restricted = bool(self.fit_intercept)
        n_targets = y.shape[1] if y.ndim == 2 else 1
        try:
            _check_fit_memory(X.shape, n_targets, restricted, learn_noise=not hetero and tau == "auto")
        except MemoryLimitError:  # leave the estimator as it was (validate_data set these)
            for k in ("n_features_in_", "feature_names_in_"):
                self.__dict__.pop(k, None)
            self.__dict__.update(previous)
            raise

        weights = r / np.sum(r)
        n_features = X.shape[1]
        X_offset = weights @ X if restricted else np.zeros(n_features)
        # Standardise (see Notes): Xs = (X - X_offset) / X_scale, ys = (y - y_offset) / y_scale,
        # per-sample noise precisions in units of ys. X's scales do not depend on the target.
        Xs = X - X_offset
        X_scale = _column_scales(Xs, weights, X_offset if restricted else None)
        _check_scales(X_scale, 1.0)
        Xs /= X_scale
        fits = [
            self._fit_target(
                Xs,
                np.ascontiguousarray(y[:, j]) if y.ndim == 2 else y,
                X_offset,
                X_scale,
                weights,
                r,
                sw,
                n_obs,
                alpha,
                tau,
                hetero,
            )
            for j in range(n_targets)
        ]
        self.alpha_ = alpha
        self.X_offset_ = X_offset
        self.X_scale_ = X_scale
        # Kept (standardised) for log_marginal_likelihood and sample_y.
        self._X_train = Xs
        self._sample_weight = sw  # of the kept rows (None without sample weights)
        self._heteroscedastic = hetero
        self._restricted = restricted
        self._store_fits(fits, multi=y.ndim == 2)
        self._fingerprints = [self._public_fingerprint(j) for j in self._target_indices()]
        return self

    def _fit_rows(
        self,
        X: np.ndarray,
        y: np.ndarray,
        noise_variance: ArrayLike | None,
        sample_weight: ArrayLike | None,
        tau: float | str,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
        """The rows ``fit`` uses and their likelihood precisions.

        Returns ``(X, y, r, sw)``: rows of zero sample weight dropped, ``r`` the rows'
        relative noise precisions (``1 / noise_variance``, times the sample weights), ``sw``
        the kept rows' sample weights (None without).
        """
        n_samples = X.shape[0]
        if noise_variance is not None:
            if tau != "auto" and tau != 1.0:
                raise ValueError(
                    "noise_precision must be 'auto' (or 1.0) when per-sample noise_variance is given: "
                    f"the variances are used as they are, got noise_precision={self.noise_precision!r}. "
                    "Rescale noise_variance instead."
                )
            r = 1.0 / self._check_noise_variance(noise_variance, n_samples)
        else:
            r = np.ones(n_samples)
        sw = None
        if sample_weight is not None:
            sw = check_sample_weight(sample_weight, X)
            keep = sw > 0
            if not keep.all():  # rows of weight zero have no influence: drop them
                X, y, r, sw = X[keep], y[keep], r[keep], sw[keep]
            r = r * sw  # the weighted likelihood's precisions
        return X, y, r, sw

    def _store_fits(self, fits: list[dict[str, Any]], multi: bool) -> None:
        """Set the public fitted attributes from the per-target fits of ``_fit_target``
        (stacked along a leading ``n_targets`` axis for a 2-D ``y``)."""
        public = ("coef_", "sigma_", "intercept_", "noise_precision_", "y_scale_", "n_iter_")
        if multi:
            for name in public:
                setattr(self, name, np.stack([f.pop(name) for f in fits]))
            self.n_iter_ = int(self.n_iter_.max())  # type: ignore[has-type,attr-defined]  # an array until here
            self.log_marginal_likelihood_value_ = float(sum(f.pop("lml") for f in fits))
            self._targets = fits
            self._route = fits[0]["_route"]
        else:
            fit = fits[0]
            for name in public:
                setattr(self, name, fit.pop(name))
            self.log_marginal_likelihood_value_ = fit.pop("lml")
            self.__dict__.update(fit)
            self.__dict__.pop("_targets", None)

    def _fit_target(
        self,
        Xs: np.ndarray,
        y: np.ndarray,
        X_offset: np.ndarray | None,
        X_scale: np.ndarray,
        weights: np.ndarray,
        r: np.ndarray,
        sw: np.ndarray | None,
        n_obs: float,
        alpha: float,
        tau: float | str,
        hetero: bool,
    ) -> dict[str, Any]:
        """Posterior of one target column on the standardised inputs ``Xs``: a dict of its
        public attributes (``coef_``, ...) and private state (``_chol``, ...)."""
        n_samples = Xs.shape[0]
        restricted = bool(self.fit_intercept)
        y_offset = float(weights @ y) if restricted else 0.0
        yc = y - y_offset
        y_scale = float(_column_scales(yc, weights, y_offset if restricted else None)[0])
        _check_scales(X_scale, y_scale)
        ys = yc / y_scale

        n_iter = 0
        if hetero:
            tau_ = float("nan")
            r_s = r * y_scale**2
        elif tau == "auto":
            if sw is None:
                tau_s, n_iter, converged = _maximise_noise_precision(Xs, ys, alpha, restricted, self.max_iter, self.tol)
            else:
                ssw = np.sqrt(sw)
                tau_s, n_iter, converged = _maximise_noise_precision(
                    Xs * ssw[:, None], ys * ssw, alpha, restricted, self.max_iter, self.tol, n_obs=n_obs
                )
            if not converged:
                warnings.warn(
                    f"The evidence maximisation over noise_precision did not converge in max_iter={self.max_iter} "
                    "iterations; increase max_iter.",
                    ConvergenceWarning,
                )
            r_s = np.full(n_samples, tau_s) if sw is None else tau_s * sw
            tau_ = tau_s / y_scale**2
        else:
            tau_ = tau
            r_s = np.full(n_samples, tau * y_scale**2) if sw is None else (tau * y_scale**2) * sw  # type: ignore[operator]  # a fixed precision here

        post = _solve(Xs, ys, r_s, alpha, restricted)
        log_evidence = post.log_evidence
        if sw is not None:
            log_evidence += _weighted_evidence_correction(r_s, sw)

        ratio = y_scale / X_scale  # standardised weights -> weights in data units
        coef = post.coef * ratio
        sigma = post.sigma
        sigma *= ratio[:, None]
        sigma *= ratio[None, :]
        return {
            "coef_": coef,
            "sigma_": sigma,
            "intercept_": float(y_offset - X_offset @ coef) if restricted else 0.0,
            "noise_precision_": float(tau_),
            "y_scale_": y_scale,
            "n_iter_": n_iter,
            "lml": log_evidence - self._log_jacobian(n_obs, restricted, y_scale),
            "_y_train": ys,
            "_precision_train": r_s,  # per-sample noise precisions at the fitted noise, units of ys
            "_coef_std": post.coef,
            "_y_offset": y_offset,
            "_y_scale": y_scale,
            "_route": post.route,
            "_chol": post.chol,
            "_dual_design": post.design,
        }

    @staticmethod
    def _log_jacobian(n_samples: float, restricted: bool, y_scale: float) -> float:
        """``log p(ys) - log p(y)``: the evidence of ``y`` is that of ``ys = yc / y_scale`` in
        ``n_samples - restricted`` dimensions (the flat-prior intercept removes one); with
        sample weights ``n_samples`` is their sum."""
        return (n_samples - int(restricted)) * math.log(y_scale)

    # --- the public fitted attributes and the private state derived from them -------------
    def _target_indices(self) -> list[int | None]:
        """``[None]`` for a 1-D target, else the target columns ``0 .. k - 1``."""
        return [None] if np.ndim(self.coef_) == 1 else list(range(np.shape(self.coef_)[0]))

    def _public(self, j: int | None) -> dict[str, np.ndarray]:
        """The public fitted attributes of target ``j`` (None: the single target)."""
        names = ("coef_", "sigma_", "intercept_", "noise_precision_", "y_scale_")
        values = {k: np.asarray(getattr(self, k), dtype=np.float64) for k in names}
        if j is not None:
            values = {k: v[j] for k, v in values.items()}
        values["alpha_"] = np.asarray(self.alpha_, dtype=np.float64)
        values["X_offset_"] = np.asarray(self.X_offset_, dtype=np.float64)
        values["X_scale_"] = np.asarray(self.X_scale_, dtype=np.float64)
        return values

    def _public_fingerprint(self, j: int | None) -> str:
        h = hashlib.blake2b(digest_size=16)
        for k, v in self._public(j).items():
            h.update(f"{k}{v.shape}".encode())
            h.update(np.ascontiguousarray(v).tobytes())
        return h.hexdigest()

    def _private_state(self, j: int | None) -> dict[str, Any] | None:
        """The fit's private state of target ``j`` when the public attributes are those the
        fit set, else None (they were edited: every method then derives from them)."""
        prints = self.__dict__.get("_fingerprints")
        idx = 0 if j is None else j
        try:
            if prints is None or len(prints) != len(self._target_indices()):
                return None
            if prints[idx] != self._public_fingerprint(j):
                return None
        except (AttributeError, ValueError, TypeError, IndexError):
            return None
        if j is None:
            keys = (
                "_y_train",
                "_precision_train",
                "_coef_std",
                "_y_offset",
                "_y_scale",
                "_route",
                "_chol",
                "_dual_design",
            )
            return {k: getattr(self, k) for k in keys}
        return self._targets[j]

    def _noise_precision(self, j: int | None) -> float | None:
        tau = float(np.asarray(self.noise_precision_, dtype=np.float64).reshape(-1)[0 if j is None else j])
        return None if math.isnan(tau) else tau  # NaN after a heteroscedastic fit: no noise term

    def predict(self, X: ArrayLike, return_std: bool = False) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
        """Predict using the linear model.

        In addition to the mean of the predictive distribution, also its
        standard deviation can be returned.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Samples.

        return_std : bool, default=False
            Whether to return the standard deviation of the posterior
            predictive distribution.

        Returns
        -------
        y_mean : ndarray of shape (n_samples,) or (n_samples, n_targets)
            Mean of predictive distribution of query points (one column per target
            when ``y`` was 2-D at fit time).

        y_std : ndarray of shape (n_samples,) or (n_samples, n_targets)
            Standard deviation of predictive distribution of query points,
            ``sqrt(x_c sigma_ x_c^T + 1 / noise_precision_)`` with
            ``x_c = x - X_offset_`` (per target: ``sigma_[j]``, ``noise_precision_[j]``).
            After a heteroscedastic fit the noise of
            a new point is unknown and the term ``1 / noise_precision_`` is
            left out (``noise_precision_`` is NaN): ``y_std`` is then the standard
            deviation of the noise-free regression function. Only returned when
            ``return_std`` is True.
        """
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=np.float64)
        targets = self._target_indices()
        coef = np.asarray(self.coef_, dtype=np.float64)
        with np.errstate(over="ignore", invalid="ignore"):
            y_mean = X @ (coef if targets == [None] else coef.T) + self.intercept_
        _check_finite("predictive means", y_mean)
        if not return_std:
            return y_mean
        n, d = X.shape
        var = np.empty(y_mean.shape)
        step = max(1, _PREDICT_CHUNK_BYTES // (16 * max(d, 1)))  # two (step, d) temporaries
        sigmas = [self.sigma_] if targets == [None] else list(self.sigma_)
        with np.errstate(over="ignore", invalid="ignore"):
            for start in range(0, n, step):
                Xc = X[start : start + step] - self.X_offset_
                for j, sigma in zip(targets, sigmas):
                    col = np.einsum("ij,ij->i", Xc @ sigma, Xc)
                    if j is None:
                        var[start : start + step] = col
                    else:
                        var[start : start + step, j] = col
        np.maximum(var, 0.0, out=var)
        for j in targets:
            tau = self._noise_precision(j)
            if tau is not None:
                if j is None:
                    var += 1.0 / tau
                else:
                    var[:, j] += 1.0 / tau
        _check_finite("predictive standard deviations", var)
        return y_mean, np.sqrt(var)

    def predict_quantiles(self, X: ArrayLike, quantiles: ArrayLike = (0.05, 0.5, 0.95)) -> np.ndarray:
        """Compute quantiles of the Gaussian posterior predictive distribution.

        ``y_mean + y_std Phi^{-1}(q)`` with ``y_mean, y_std = predict(X, return_std=True)``
        (so after a heteroscedastic fit, of the noise-free regression function).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Query points.

        quantiles : float or array-like of shape (n_quantiles,), default=(0.05, 0.5, 0.95)
            Probabilities in (0, 1).

        Returns
        -------
        y_quantiles : ndarray of shape (n_samples, n_quantiles) or (n_samples, n_targets, n_quantiles)
            The predictive quantiles of each point (per target after a fit on a 2-D
            ``y``), one column per entry of ``quantiles``.
        """
        q = check_quantiles(quantiles)
        y_mean, y_std = self.predict(X, return_std=True)
        return gaussian_quantiles(y_mean, y_std, q)

    def sample_y(
        self, X: ArrayLike, n_samples: int = 1, random_state: int | np.random.RandomState | None = 0
    ) -> np.ndarray:
        """Draw samples from the posterior predictive distribution at X.

        The draws are joint over the query points: each column uses one
        weight vector drawn exactly from ``N(coef_, sigma_)``, plus independent
        Gaussian noise of precision ``noise_precision_`` per point
        (no noise after a heteroscedastic fit, consistent with
        :meth:`predict`). The intercept is taken at its posterior mean. With
        several targets each has its own weights, drawn independently.

        The draws derive from the public fitted attributes (``coef_``, ``sigma_``,
        ``intercept_``, ``X_offset_``, ``noise_precision_``): after the fit they
        use the factorisation the fit computed; after a hand edit of any of them,
        a factorisation of the edited ``sigma_`` (one ``O(n_features^3)``
        eigendecomposition per call).

        Parameters
        ----------
        X : array-like of shape (n_samples_X, n_features)
            Query points.

        n_samples : int, default=1
            Number of samples drawn per query point.

        random_state : int, RandomState instance or None, default=0
            Determines random number generation to randomly draw samples.
            Pass an int for reproducible results across multiple function
            calls.
            See scikit-learn's `Glossary <https://scikit-learn.org/stable/glossary.html#term-random_state>`__.

        Returns
        -------
        y_samples : ndarray of shape (n_samples_X, n_samples) or (n_samples_X, n_targets, n_samples)
            Values of n_samples samples drawn from the posterior predictive
            distribution and evaluated at query points (the second shape after a
            fit on a 2-D ``y``, as :meth:`sklearn.gaussian_process.GaussianProcessRegressor.sample_y`).

        Raises
        ------
        MemoryLimitError
            If the draws (``n_features x n_samples`` weights and
            ``n_samples_X x n_samples`` values, with temporaries) would exceed
            ``skbayes.linear_model.MEMORY_LIMIT_GIB``.
        ValueError
            If an edited ``sigma_`` is not a covariance matrix (symmetric positive
            semi-definite).
        """
        check_is_fitted(self)
        if isinstance(n_samples, (bool, np.bool_)) or not isinstance(n_samples, numbers.Integral) or n_samples < 1:
            raise ValueError(f"n_samples must be an int >= 1, got {n_samples!r}.")
        X = validate_data(self, X, reset=False, dtype=np.float64)
        rng = check_random_state(random_state)
        targets = self._target_indices()
        draws = [self._sample_target(X, j, int(n_samples), rng) for j in targets]
        y_samples = draws[0] if targets == [None] else np.stack(draws, axis=1)
        _check_finite("predictive samples", y_samples)
        return y_samples

    def _sample_target(self, X: np.ndarray, j: int | None, n_samples: int, rng: np.random.RandomState) -> np.ndarray:
        n_q, d = X.shape
        state = self._private_state(j)
        rows = 0 if state is None or state["_route"] == "primal" else state["_dual_design"].shape[0]
        _check_memory(
            8.0 * (3 * d * n_samples + 3 * rows * n_samples + n_q * d + 2 * n_q * n_samples)
            + (8.0 * 3 * d * d if state is None else 0.0),
            "sample_y",
            f"X has shape ({n_q}, {d}) and {n_samples} draws need ({d}, {n_samples}) weight and "
            f"({n_q}, {n_samples}) output arrays; draw fewer samples at a time",
        )
        pub = self._public(j)
        if state is None:  # edited public attributes: draw from N(coef_, sigma_) itself
            sigma = pub["sigma_"]
            if sigma.shape != (d, d) or not np.allclose(sigma, sigma.T, rtol=0.0, atol=1e-12 * np.abs(sigma).max()):
                raise ValueError(f"sigma_ must be a symmetric ({d}, {d}) covariance matrix.")
            lam, V = linalg.eigh(0.5 * (sigma + sigma.T), check_finite=False)
            if lam.size and lam.min() < -math.sqrt(_EPS) * max(lam.max(), 0.0):
                raise ValueError(
                    f"sigma_ is not positive semi-definite (smallest eigenvalue {lam.min():.3g}); it is not a "
                    "covariance matrix, so sample_y cannot draw from N(coef_, sigma_)."
                )
            W = (V * np.sqrt(np.clip(lam, 0.0, None))) @ rng.standard_normal((d, n_samples))
            with np.errstate(over="ignore", invalid="ignore"):
                y_samples = (X - pub["X_offset_"]) @ W + (X @ pub["coef_"] + pub["intercept_"])[:, None]
        else:
            if state["_route"] == "primal":
                # S = A^{-1} = C^{-T} C^{-1} with A = C C^T: w = m + C^{-T} z (standardised weights).
                z = rng.standard_normal((d, n_samples))
                W = linalg.solve_triangular(state["_chol"].T, z, lower=False, overwrite_b=True, check_finite=False)
            else:
                # Exact posterior draws by perturbing the prior and the data (Matheron's rule):
                # w = m + w0 - Xw^T K^{-1} (Xw w0 + e), w0 ~ N(0, I/alpha), e ~ N(0, I_n'),
                # with Xw the (rotated) whitened rows factorised at fit time.
                Xw = state["_dual_design"]
                W = rng.standard_normal((d, n_samples)) / math.sqrt(self.alpha_)
                e = rng.standard_normal((Xw.shape[0], n_samples))
                W -= Xw.T @ _cho_solve(state["_chol"], Xw @ W + e)
            W += state["_coef_std"][:, None]
            W *= (pub["y_scale_"] / self.X_scale_)[:, None]  # to the units of the data
            with np.errstate(over="ignore", invalid="ignore"):
                y_samples = (X - self.X_offset_) @ W + state["_y_offset"]
        tau = self._noise_precision(j)
        if tau is not None:
            y_samples += rng.standard_normal(y_samples.shape) / math.sqrt(tau)
        return y_samples

    def log_marginal_likelihood(self, alpha: float | None = None, noise_precision: float | None = None) -> float:
        """Return the log marginal likelihood (evidence) of the training data.

        Parameters
        ----------
        alpha : float, default=None
            Prior precision of the weights of the standardised problem (see
            the class parameter). If None, ``alpha_`` is used.

        noise_precision : float or array-like of shape (n_targets,), default=None
            Noise precision in the units of ``y`` (homoscedastic fits only; one per
            target, or one for all, after a fit on a 2-D ``y``).
            If None, ``noise_precision_`` is used. Must be None after a
            heteroscedastic fit, whose per-sample variances are always used.

        Returns
        -------
        log_likelihood : float
            Log marginal likelihood of the training targets (a density in the
            units of ``y``) at the given hyper-parameters,
            ``log N(yc | 0, L + Xc P^{-1} Xc^T)`` with the prior precision
            ``P = alpha diag(X_scale_ ** 2) / y_scale_ ** 2``, plus
            ``log(2 pi) / 2 - log(sum_i 1 / L_ii) / 2`` for the flat-prior
            intercept when ``fit_intercept=True`` (see Notes of the class). After a
            fit on a 2-D ``y``, the sum over the targets (which are independent).
        """
        check_is_fitted(self)
        alpha = self.alpha_ if alpha is None else _check_positive("alpha", alpha)
        targets = self._target_indices()
        if noise_precision is not None:
            if self._heteroscedastic:
                raise ValueError(
                    "noise_precision cannot be set for a model fitted with per-sample noise_variance; "
                    "those variances are used."
                )
            taus = np.asarray(noise_precision, dtype=np.float64) if not isinstance(noise_precision, str) else None
            if taus is None or taus.ndim > 1 or (taus.ndim == 1 and taus.shape[0] != len(targets)):
                raise ValueError(
                    f"noise_precision must be a positive float or an array of {len(targets)} positive floats "
                    f"(one per target), got {noise_precision!r}."
                )
            taus = np.broadcast_to(taus, (len(targets),))
            taus = [_check_positive("noise_precision", float(t)) for t in taus]
        else:
            taus = [None] * len(targets)
        total = 0.0
        for j, tau in zip(targets, taus):
            # the training data and scales of the fit; the hyper-parameters from the public
            # attributes (the fitted noise precisions themselves while those are unedited)
            state = self.__dict__ if j is None else self._targets[j]
            if tau is None and not self._heteroscedastic and self._private_state(j) is None:
                tau = self._noise_precision(j)
            y_scale = state.get("_y_scale", float(self._public(j)["y_scale_"]))
            total += self._log_evidence_target(state["_y_train"], state["_precision_train"], alpha, tau, y_scale)
        return total

    def _log_evidence_target(
        self, y_train: np.ndarray, r: np.ndarray, alpha: float, tau: float | None, y_scale: float
    ) -> float:
        sw = getattr(self, "_sample_weight", None)
        if tau is not None:
            r = np.full_like(r, tau * y_scale**2)
            if sw is not None:
                r = r * sw
        post = _solve(self._X_train, y_train, r, alpha, self._restricted, compute_sigma=False)
        if sw is None:
            return post.log_evidence - self._log_jacobian(len(r), self._restricted, y_scale)
        log_evidence = post.log_evidence + _weighted_evidence_correction(r, sw)
        return log_evidence - self._log_jacobian(float(np.sum(sw)), self._restricted, y_scale)

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        return tags
