"""Batched Bayesian linear regression in torch (the engine of i-BLM).

Model for one output: ``y = X w + e``, ``w ~ N(0, alpha^{-1} I)``,
``e ~ N(0, diag(v))`` (``v`` per-row noise variances; homoscedastic when all
equal). Leading dimensions batch independent problems. The posterior is
``N(m, P^{-1})`` with ``P = alpha I + X^T diag(1/v) X`` and
``m = P^{-1} X^T (y / v)``; by the push-through identity
``m = X^T (alpha diag(v) + X X^T)^{-1} y``, which needs a ``B x B`` solve instead of
``n x n`` when the design has more columns than rows.

Sample weights ``w_b`` raise row ``b``'s likelihood to the power ``w_b`` (weighted
least squares): for the weights that is the noise variance ``v_b / w_b``, exactly
the posterior of the data with row ``b`` repeated ``w_b`` times.

The regressions are solved in float64 whatever the dtype of their inputs, and their
results cast back: the hidden units of an i-BLM layer regress on the same targets, so
the next layer's design is nearly collinear, and with the small noise variances of the
evidence grid its precision ``alpha I + X^T X / v`` has a condition number (``1e7`` and
more on standardised data) beyond float32's ``1 / eps``, where the Cholesky
factorisation fails. The regressions are a one-off cost of the start.
"""

from __future__ import annotations

import math
from typing import overload

import torch
from torch import Tensor


def blr_solve(
    X: Tensor, y: Tensor, alpha: float, v: Tensor | float, weights: Tensor | None = None
) -> tuple[Tensor, Tensor]:
    """Posterior mean and the diagonal of the posterior precision.

    Parameters
    ----------
    X : Tensor (..., B, n)
    y : Tensor (..., B)
    alpha : float
        Prior precision.
    v : Tensor broadcastable to (..., B), or float
        Noise variances.
    weights : Tensor broadcastable to (..., B), optional
        Sample weights (positive): row ``b``'s precision ``1 / v_b`` becomes ``w_b / v_b``.

    Returns
    -------
    mean : Tensor (..., n)
    prec_diag : Tensor (..., n)
        ``diag(P) = alpha + sum_b X_b^2 / v_b``; ``1 / prec_diag`` are the KL-optimal
        factorised variances (KL(q || p) with q fully factorised).
    """
    dtype = X.dtype
    X, y, v, weights = _float64(X, y, v, weights)
    B, n = X.shape[-2], X.shape[-1]
    v = v.expand(y.shape)
    if weights is not None:
        v = v / weights  # the precision of a row with weight w: w / v
    w = 1.0 / v
    prec_diag = alpha + torch.einsum("...bn,...b->...n", X * X, w)
    if n <= B:
        P = X.transpose(-1, -2) @ (X * w[..., None])
        P.diagonal(dim1=-2, dim2=-1).add_(alpha)
        rhs = X.transpose(-1, -2) @ (y * w)[..., None]
        mean = torch.cholesky_solve(rhs, torch.linalg.cholesky(P))[..., 0]
    else:
        K = X @ X.transpose(-1, -2)
        K = K + torch.diag_embed(alpha * v)
        z = torch.cholesky_solve(y[..., None], torch.linalg.cholesky(K))
        mean = (X.transpose(-1, -2) @ z)[..., 0]
    return mean.to(dtype), prec_diag.to(dtype)


@overload
def _float64(X: Tensor, a: Tensor | float, b: Tensor | float, /) -> tuple[Tensor, Tensor, Tensor]: ...
@overload
def _float64(X: Tensor, a: Tensor | float, b: Tensor | None, /) -> tuple[Tensor, Tensor, Tensor | None]: ...
@overload
def _float64(
    X: Tensor, a: Tensor | float, b: Tensor | float, c: Tensor | None, /
) -> tuple[Tensor, Tensor, Tensor, Tensor | None]: ...
def _float64(X: Tensor, *others: Tensor | float | None) -> tuple[Tensor | None, ...]:
    """``X`` and each of ``others`` (tensors, numbers or None) as float64 tensors on ``X``'s device."""
    out: list[Tensor | None] = [X.to(torch.float64)]
    for a in others:
        out.append(None if a is None else torch.as_tensor(a, dtype=torch.float64, device=X.device))
    return tuple(out)


def blr_log_evidence(X: Tensor, y: Tensor, alpha: float, v: Tensor | float) -> Tensor:
    """``log N(y | 0, diag(v) + X X^T / alpha)`` (batched), via the cheaper of the
    ``B x B`` and ``n x n`` Cholesky factorisations (in float64).

    ``X`` (..., B, n), ``y`` (..., B), ``v`` broadcastable to (..., B); returns (...,) in float64.
    """
    X, y, v = _float64(X, y, v)
    B, n = X.shape[-2], X.shape[-1]
    v = v.expand(y.shape)
    if B <= n:
        C = X @ X.transpose(-1, -2) / alpha + torch.diag_embed(v)
        Lc = torch.linalg.cholesky(C)
        z = torch.linalg.solve_triangular(Lc, y[..., None], upper=False)[..., 0]
        logdet = 2.0 * torch.log(torch.diagonal(Lc, dim1=-2, dim2=-1)).sum(-1)
        quad = (z * z).sum(-1)
    else:
        w = 1.0 / v
        P = X.transpose(-1, -2) @ (X * w[..., None])
        P.diagonal(dim1=-2, dim2=-1).add_(alpha)
        Lp = torch.linalg.cholesky(P)
        r = X.transpose(-1, -2) @ (y * w)[..., None]
        s = torch.linalg.solve_triangular(Lp, r, upper=False)[..., 0]
        # |C| = |diag v| |P| / alpha^n ;  y^T C^{-1} y = y^T W y - r^T P^{-1} r
        logdet = (
            torch.log(v).sum(-1) + 2.0 * torch.log(torch.diagonal(Lp, dim1=-2, dim2=-1)).sum(-1) - n * math.log(alpha)
        )
        quad = (y * y * w).sum(-1) - (s * s).sum(-1)
    return -0.5 * (B * math.log(2.0 * math.pi) + logdet + quad)


def best_noise_variance(
    X: Tensor, y: Tensor, alpha: float, grid: Tensor | None = None, weights: Tensor | None = None
) -> float:
    """Homoscedastic noise variance maximising the log evidence over a log-spaced grid
    (``1e-4 .. 1e2`` relative to ``var(y)``, or to ``mean(y**2)`` where the targets are equal up
    to rounding), refined once around the best point.

    ``X`` (B, n), ``y`` (B,); ``grid`` replaces the default grid of candidate variances.

    With sample ``weights`` (positive, shape (B,)) the evidence is that of the weighted
    likelihood ``prod_b N(y_b | x_b w, v)^{w_b}``, which for integer weights is the
    evidence of the data with row ``b`` repeated ``w_b`` times:
    ``log N(y | 0, diag(v / w) + X X^T / alpha) + (B - sum_b w_b) log(v) / 2`` up to a
    constant; ``var(y)`` is the weighted variance.
    """
    X, y, weights = _float64(X, y, weights)
    if weights is None:
        vy = float(y.var()) if y.numel() > 1 else 1.0

        def evidence(g: Tensor) -> Tensor:
            return blr_log_evidence(X, y, alpha, g)

    else:
        W = float(weights.sum())
        ybar = float((weights * y).sum()) / W
        vy = float((weights * (y - ybar) ** 2).sum()) / (W - 1.0) if W > 1.0 else 1.0

        def evidence(g: Tensor) -> Tensor:
            return blr_log_evidence(X, y, alpha, g / weights) + 0.5 * (y.shape[-1] - W) * math.log(float(g))

    if not vy > 1e-12 * float((y * y).mean()):  # constant targets (up to rounding): their own scale
        vy = float((y * y).mean()) or 1.0
    if grid is None:
        grid = torch.logspace(-4, 2, 25, dtype=X.dtype, device=X.device) * vy
    ev = torch.stack([evidence(g) for g in grid])
    i = int(torch.argmax(ev))
    lo, hi = grid[max(i - 1, 0)], grid[min(i + 1, len(grid) - 1)]
    fine = torch.logspace(math.log10(float(lo)), math.log10(float(hi)), 11, dtype=X.dtype, device=X.device)
    ev = torch.stack([evidence(g) for g in fine])
    return float(fine[int(torch.argmax(ev))])


def dirichlet_transform(Y: Tensor, alpha_eps: float = 0.01) -> tuple[Tensor, Tensor]:
    """Milios et al. (2018): regression targets and noise variances for one-hot labels.

    ``var = log(1 / (Y + alpha_eps) + 1)``, ``target = log(Y + alpha_eps) - var / 2``
    (element-wise; the log-normal moment match of ``Gamma(Y + alpha_eps, 1)``). ``Y`` (N, K)
    one-hot; returns the targets and the variances, both (N, K).
    """
    var = torch.log(1.0 / (Y + alpha_eps) + 1.0)
    return torch.log(Y + alpha_eps) - 0.5 * var, var
