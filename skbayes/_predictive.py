"""The linearised (GLM) predictive: the network linearised at the posterior mean.

With ``f(x; theta) ~ f(x; mu) + J(x) (theta - mu)`` and ``theta ~ N(mu, Sigma)``, the
outputs of a row are Gaussian with mean ``f(x; mu)`` and covariance
``J(x) Sigma J(x)^T`` (outputs x outputs). :func:`linearized_moments` computes both,
chunked over rows (memory does not grow with the number of rows; a row's moments
depend on that row only), without forming ``Sigma``:

- networks on the dense-layer path (``DenseSpec``): the Jacobian of output ``k`` with
  respect to a ``Linear`` layer's weights is the outer product of the back-propagated
  ``delta_k`` and the layer input ``a``, so every posterior structure reduces to small
  per-layer products: a diagonal covariance (VOGN, Vadam/Vprop, BBB), a diagonal minus a
  low-rank part (SLANG, by Woodbury), a Kronecker product per layer (noisy K-FAC) or its
  eigenbasis form (noisy EK-FAC);
- any other module: the Jacobian rows by ``torch.func`` (``vmap`` over rows of
  ``jacrev``), times ``Sigma J^T`` from the posterior's ``covariance_apply_t``.

:func:`gaussian_draws` turns the moments into draws of the outputs (the same standard
normal draws for every row), and :func:`probit_proba` into class probabilities by the
probit approximation.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Protocol

import torch
from torch import Tensor
from torch.func import jacrev, vmap

from ._networks.dense import materialise_delta
from .posteriors import DiagonalGaussian, KroneckerGaussian, LowRankGaussian, SoftplusGaussian
from .posteriors._common import GaussianTensors
from .posteriors.kfac import EigenBlock

if TYPE_CHECKING:
    from ._networks import NetworkForward

#: Elements of the largest temporary a chunk of rows may allocate (32 Mi values).
_BUDGET = 2**25


class CovarianceTensors(GaussianTensors, Protocol):
    """A Gaussian posterior that applies its covariance without forming it (what the
    linearised predictive reads): :class:`~skbayes.posteriors._common.GaussianTensors` plus
    ``covariance_apply_t``."""

    def covariance_apply_t(self, x: Tensor) -> Tensor:
        """``Sigma x`` for ``x`` of shape (D,) or (D, k), of the shape of ``x``."""
        ...


def linearized_moments(posterior: CovarianceTensors, forward: NetworkForward, X: Tensor) -> tuple[Tensor, Tensor]:
    """Mean and covariance of the linearised network's outputs under the posterior.

    Parameters
    ----------
    posterior : CovarianceTensors
        A Gaussian posterior (``mean_t`` and ``covariance_apply_t``).
    forward : NetworkForward
        The network.
    X : Tensor of shape (n, n_features)
        Rows.

    Returns
    -------
    mean : Tensor of shape (n, k)
        ``f(x; mu)``.
    cov : Tensor of shape (n, k, k)
        ``J(x) Sigma J(x)^T`` per row.
    """
    mu = posterior.mean_t.detach()
    fast = forward.dense and isinstance(
        posterior, (LowRankGaussian, DiagonalGaussian, SoftplusGaussian, KroneckerGaussian)
    )
    if fast:  # the last Linear layer's width (element-wise activations keep it)
        assert forward.spec is not None  # forward.dense
        k = forward.spec.linears[-1][1]
    else:
        with torch.no_grad():
            k = forward(mu, X[:1]).shape[-1] if X.shape[0] else 1
    if X.shape[0] == 0:
        return X.new_zeros(0, k), X.new_zeros(0, k, k)
    if fast:
        assert forward.spec is not None  # forward.dense
        plan = _dense_plan(posterior, forward)
        widest = max(max(o, i) for (_, o, i, _) in forward.spec.linears)
        rank = plan["Z"].shape[1] if plan.get("Z") is not None else 0
        m = max(1, min(4096, _BUDGET // (k * widest + rank * widest + widest)))
        step = lambda Xc: _dense_moments(plan, forward, mu, Xc, k)  # noqa: E731
    else:
        m = max(1, min(4096, _BUDGET // (k * mu.shape[0])))
        step = lambda Xc: _generic_moments(posterior, forward, mu, Xc)  # noqa: E731
    means, covs = [], []
    for r0 in range(0, X.shape[0], m):
        mean, cov = step(X[r0 : r0 + m])
        means.append(mean)
        covs.append(0.5 * (cov + cov.transpose(1, 2)))
    if len(means) == 1:
        return means[0], covs[0]
    return torch.cat(means), torch.cat(covs)


def _generic_moments(
    posterior: CovarianceTensors, forward: NetworkForward, mu: Tensor, Xc: Tensor
) -> tuple[Tensor, Tensor]:
    """Any module: Jacobian rows (m, k, D) by ``torch.func``, then ``J Sigma J^T``; the mean
    (m, k) and the covariances (m, k, k) of the rows ``Xc`` (m, n_features) at ``mu`` (D,)."""

    def f(theta: Tensor, x: Tensor) -> Tensor:
        return forward(theta, x[None])[0]

    with torch.enable_grad():
        J = vmap(jacrev(f), in_dims=(None, 0))(mu, Xc)  # (m, k, D)
    with torch.no_grad():
        J = J.detach()
        m, k, D = J.shape
        SJ = posterior.covariance_apply_t(J.reshape(m * k, D).T).T.reshape(m, k, D)
        cov = torch.einsum("mkd,mld->mkl", J, SJ)
        mean = forward(mu, Xc)
    return mean, cov


def _dense_plan(posterior: CovarianceTensors, forward: NetworkForward) -> dict[str, Any]:
    """The posterior's covariance in the form the dense path consumes, once per call:
    ``{"blocks": {w_off: (layer, block)}}`` (Kronecker), ``{"v": variances (D,), "Z": (D, L) or
    None}`` (low rank: ``Sigma = diag(v) - Z Z^T``), or ``{"v": variances (D,)}`` (diagonal)."""
    with torch.no_grad():
        if isinstance(posterior, KroneckerGaussian):
            return {"blocks": {l.w_off: (l, b) for l, b in zip(posterior.layers, posterior.blocks)}}
        if isinstance(posterior, LowRankGaussian):
            v, Z = posterior.covariance_factors_t()
            return {"v": v, "Z": Z if Z.shape[1] else None}
        return {"v": posterior.variance_t()}  # diagonal covariances


def _dense_moments(
    plan: dict[str, Any], forward: NetworkForward, mu: Tensor, Xc: Tensor, k: int
) -> tuple[Tensor, Tensor]:
    """Dense-layer networks: per layer, ``J_k = delta_k a^T`` (weights) and ``delta_k`` (bias);
    the mean (m, k) and the covariances (m, k, k) of the rows ``Xc`` (m, n_features) at ``mu`` (D,)."""
    spec = forward.spec
    assert spec is not None  # the dense path
    with torch.no_grad():
        out, tape = spec.forward_tape(mu[None], Xc)
        # row j's Jacobian with respect to a layer's outputs: P_j diag(d_j) (output_deltas)
        deltas = spec.output_deltas(tape)
        inputs = spec.linear_inputs(tape)
        m = Xc.shape[0]
        cov = Xc.new_zeros(m, k, k)
        flat = cov.view(m, k * k)
        JZ: Tensor | None = None
        for A, (P, d), (w_off, o, i, b_off) in zip(inputs, deltas, spec.linears):
            a = A[0]  # (m, i)
            identity = P is None and d is None
            shared = P is not None and P.dim() == 2
            if "blocks" in plan:
                layer, block = plan["blocks"][w_off]
                a1 = torch.cat([a, a.new_ones(m, 1)], 1) if layer.has_bias else a
                v = block.output_variance(a1)  # the row's output covariance, as its draws use it
                if isinstance(block, EigenBlock):  # Q_S diag(v) Q_S^T: (m, p)
                    if identity:  # one GEMM with the products of Q_S's rows
                        flat.addmm_(v, _column_products(block.QS))
                    else:  # batched GEMMs (m, k, o) x (m, o, k), not einsum: its path search
                        w = materialise_delta(P, d, m, out) @ block.QS  # costs more than the contraction
                        w.mul_(v.sqrt()[:, None, :])
                        cov.baddbmm_(w, w.transpose(1, 2))
                elif identity:  # v F_S^{-1}
                    flat.addr_(v, block.FS.dense(inverse=True).reshape(-1))
                else:  # W W^T = v dl F_S^{-1} dl^T: the rows' sqrt(v) folded into dl's scales
                    sv = v.sqrt()[:, None]
                    dv = sv.expand(m, o) if d is None else d * sv
                    W = block.FS.whiten(materialise_delta(P, dv, m, out).reshape(m * k, o)).reshape(m, k, o)
                    cov.baddbmm_(W, W.transpose(1, 2))
                continue
            v = plan["v"]
            T = (a * a) @ v[w_off : w_off + o * i].view(o, i).T  # (m, o): the layer's output variances
            if b_off is not None:
                T = T + v[b_off : b_off + o]
            if identity:
                cov.diagonal(dim1=1, dim2=2).add_(T)
            elif shared:  # P diag(d^2 T) P^T: one GEMM with the products of P's rows
                assert P is not None  # shared
                flat.addmm_(T if d is None else d * d * T, _column_products(P))
            else:
                dl = materialise_delta(P, d, m, out)
                cov.baddbmm_(dl * T[:, None, :], dl.transpose(1, 2))
            Z = plan.get("Z")
            if Z is not None:
                L = Z.shape[1]
                # G[m, r, :] = Z_r's (o, i) block applied to a_m: one GEMM with the (L o, i) rows of Z^T
                G = (a @ Z[w_off : w_off + o * i].T.reshape(L * o, i).T).view(m, L, o)
                if b_off is not None:
                    G.add_(Z[b_off : b_off + o].T[None])
                if identity:
                    part = G.transpose(1, 2)  # (m, k, L)
                elif shared:  # (G diag(d)) P^T: one GEMM
                    assert P is not None  # shared
                    Gd = G if d is None else G.mul_(d[:, None, :])
                    part = (Gd.reshape(m * L, o) @ P.T).view(m, L, k).transpose(1, 2)
                else:
                    part = materialise_delta(P, d, m, out) @ G.transpose(1, 2)
                JZ = part if JZ is None else JZ + part
        if JZ is not None:
            cov.baddbmm_(JZ, JZ.transpose(1, 2), alpha=-1.0)
        return out[0], cov


def _column_products(P: Tensor) -> Tensor:
    """``C[j, k l] = P[k, j] P[l, j]`` (o, k k) for ``P`` (k, o): ``(c @ C).view(k, k)`` is
    ``P diag(c) P^T`` for a row ``c`` (o,), so rows of such diagonals take one GEMM."""
    k = P.shape[0]
    return (P[:, None, :] * P[None, :, :]).reshape(k * k, -1).T


def _sqrt(cov: Tensor) -> Tensor:
    """Per-row square roots ``R`` with ``R R^T = cov`` (``cov`` (n, k, k) PSD up to rounding)."""
    if cov.shape[-1] == 1:
        return cov.clamp_min(0.0).sqrt()
    R, info = torch.linalg.cholesky_ex(cov)
    if bool((info != 0).any()):
        lam, Q = torch.linalg.eigh(cov)
        R = Q * lam.clamp_min(0.0).sqrt()[:, None, :]
    return R


def gaussian_draws(mean: Tensor, cov: Tensor, n_samples: int, generator: torch.Generator | None) -> Tensor:
    """Draws ``(S, n, k)`` of ``N(mean_i, cov_i)`` per row (``mean`` (n, k), ``cov`` (n, k, k),
    ``S = n_samples``); the same standard normal draws ``(S, k)`` serve every row, so a row's
    draws do not depend on the other rows."""
    z = torch.randn(int(n_samples), mean.shape[-1], generator=generator, dtype=mean.dtype, device=mean.device)
    return mean[None] + torch.einsum("nkl,sl->snk", _sqrt(cov), z)


def pairwise_probit_proba(mean: Tensor, cov: Tensor) -> Tensor:
    """Class probabilities ``(n, n_classes)`` from Gaussian logits (``mean`` (n, k), ``cov``
    (n, k, k)) by the probit approximation
    of every pairwise difference of logits (the mean-field approximation of Lu, Ie and Sha,
    2020)::

        p_k ~ 1 / sum_j exp(-(m_k - m_j) / sqrt(1 + pi s_kj / 8)),  s_kj = Var(f_k - f_j)

    normalised to sum to 1. It depends on the logits through their differences only, as the
    softmax does (a variance shared by all logits changes nothing), and for two classes it
    is MacKay's approximation of the sigmoid.
    """
    if mean.shape[-1] == 1:
        return probit_proba(mean, cov)
    var = torch.diagonal(cov, dim1=-2, dim2=-1)
    # in place on one (n, k, k) buffer: s_kj, then 1 / sqrt(1 + pi s_kj / 8), then z_kj
    s = torch.add(var[:, :, None], var[:, None, :]).sub_(cov, alpha=2.0).clamp_min_(0.0)
    z = s.mul_(math.pi / 8.0).add_(1.0).rsqrt_().mul_(mean[:, None, :] - mean[:, :, None])
    zmax = z.amax(-1, keepdim=True)  # logsumexp over j, by hand (faster on short rows)
    logp = -(z.sub_(zmax).exp_().sum(-1).log_() + zmax[..., 0])
    return torch.softmax(logp, -1)


def probit_proba(mean: Tensor, cov: Tensor) -> Tensor:
    """Class probabilities ``(n, n_classes)`` from Gaussian logits (``mean`` (n, k), ``cov``
    (n, k, k); ``k = 1`` for two classes) by the probit approximation.

    One logit (two classes): ``sigmoid(m / sqrt(1 + pi v / 8))`` (MacKay, 1992). Several:
    ``softmax(m_k / sqrt(1 + pi v_kk / 8))``, the multi-class probit approximation
    (the marginal variances only).
    """
    var = torch.diagonal(cov, dim1=-2, dim2=-1).clamp_min(0.0)
    z = mean / torch.sqrt(1.0 + (math.pi / 8.0) * var)
    if mean.shape[-1] == 1:
        p1 = torch.sigmoid(z[:, 0])
        return torch.stack([1.0 - p1, p1], -1)
    return torch.softmax(z, -1)
