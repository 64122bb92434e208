"""Linear algebra for low-rank-plus-diagonal precision matrices.

Every routine works on a precision ``P = U U^T + diag(d)`` with ``U`` of shape
``(D, L)`` and ``d > 0`` of shape ``(D,)`` and costs ``O(D L^2)`` time and
``O(D L)`` memory; none of them forms a ``D x D`` matrix. ``L = 0`` (a mean-field
Gaussian) is handled by the same code.
"""

import torch

__all__ = [
    "capacitance_cholesky",
    "woodbury_solve",
    "lowrank_variance",
    "lowrank_logdet",
    "lowrank_sample",
    "top_eig_psd",
    "top_eig_from_gram",
]


def capacitance_cholesky(U, d):
    """Cholesky factor of the capacitance matrix ``I_L + U^T diag(d)^{-1} U``.

    Parameters
    ----------
    U : Tensor of shape (D, L)
    d : Tensor of shape (D,), positive

    Returns
    -------
    chol : Tensor of shape (L, L), lower triangular.
    """
    Ud = U / d[:, None]
    cap = U.T @ Ud
    cap.diagonal().add_(1.0)
    return torch.linalg.cholesky(cap)


def woodbury_solve(U, d, x, chol=None):
    """Solve ``(U U^T + diag(d)) z = x`` by the Woodbury identity.

    ``z = d^{-1} x - d^{-1} U (I + U^T d^{-1} U)^{-1} U^T d^{-1} x``.

    Parameters
    ----------
    U : Tensor of shape (D, L)
    d : Tensor of shape (D,)
    x : Tensor of shape (D,) or (D, k)
    chol : Tensor of shape (L, L), optional
        Cholesky factor of the capacitance matrix, if already computed.

    Returns
    -------
    z : Tensor shaped like ``x``.
    """
    vec = x.dim() == 1
    X = x[:, None] if vec else x
    dX = X / d[:, None]
    if U.shape[1] == 0:
        z = dX
    else:
        if chol is None:
            chol = capacitance_cholesky(U, d)
        rhs = U.T @ dX
        w = torch.cholesky_solve(rhs, chol)
        z = dX - (U @ w) / d[:, None]
    return z[:, 0] if vec else z


def lowrank_variance(U, d, chol=None):
    """Diagonal of ``(U U^T + diag(d))^{-1}`` (the marginal variances)."""
    var = 1.0 / d
    if U.shape[1] == 0:
        return var
    if chol is None:
        chol = capacitance_cholesky(U, d)
    # (d^-1 U) C^{-1} (d^-1 U)^T with C = chol chol^T:  rows of Z = (d^-1 U) chol^{-T}
    Z = torch.linalg.solve_triangular(chol, (U / d[:, None]).T, upper=False).T
    return var - (Z * Z).sum(1)


def lowrank_logdet(U, d, chol=None):
    """``log det(U U^T + diag(d))`` by the matrix determinant lemma."""
    out = torch.log(d).sum()
    if U.shape[1] == 0:
        return out
    if chol is None:
        chol = capacitance_cholesky(U, d)
    return out + 2.0 * torch.log(torch.diagonal(chol)).sum()


def _sqrt_inv_coeffs(U, d):
    """Return ``V = d^{-1/2} U`` and the L x L matrix ``M`` with
    ``(I + V V^T)^{-1/2} = I + V M V^T``.

    With ``V^T V = R diag(t) R^T``, ``M = R diag(h(t)) R^T`` and
    ``h(t) = ((1 + t)^{-1/2} - 1) / t = -1 / (sqrt(1 + t) (1 + sqrt(1 + t)))``,
    which stays finite when ``t -> 0`` (zero columns of ``U`` are harmless).
    """
    V = U / torch.sqrt(d)[:, None]
    t, R = torch.linalg.eigh(V.T @ V)
    t = t.clamp_min(0.0)
    s = torch.sqrt(1.0 + t)
    h = -1.0 / (s * (1.0 + s))
    M = (R * h) @ R.T
    return V, M


def lowrank_sample(mean, U, d, n_samples, generator=None, eps=None):
    """Exact samples of ``N(mean, (U U^T + diag(d))^{-1})`` in ``O(D L^2 + D L S)``.

    With ``V = d^{-1/2} U``, ``P = D^{1/2} (I + V V^T) D^{1/2}``, so
    ``theta = mean + d^{-1/2} (I + V V^T)^{-1/2} eps`` has covariance ``P^{-1}``.
    The symmetric square root is applied through the eigendecomposition of the
    small matrix ``V^T V`` (see :func:`_sqrt_inv_coeffs`).

    Parameters
    ----------
    mean : Tensor of shape (D,)
    U : Tensor of shape (D, L)
    d : Tensor of shape (D,)
    n_samples : int
    generator : torch.Generator, optional
    eps : Tensor of shape (n_samples, D), optional
        Standard normal draws to transform (for tests); drawn from ``generator``
        when omitted.

    Returns
    -------
    theta : Tensor of shape (n_samples, D)
    """
    D = mean.shape[0]
    if eps is None:
        eps = torch.randn(n_samples, D, generator=generator, dtype=mean.dtype, device=mean.device)
    z = eps
    if U.shape[1] > 0:
        V, M = _sqrt_inv_coeffs(U, d)
        z = eps + ((eps @ V) @ M) @ V.T
    return mean[None, :] + z / torch.sqrt(d)[None, :]


def top_eig_psd(P, k):
    """Top-``k`` eigenpairs of a symmetric PSD matrix (dense route).

    Returns ``(evals, evecs)`` in descending order, eigenvalues clamped at 0.
    """
    evals, evecs = torch.linalg.eigh(P)
    k = min(k, P.shape[0])
    idx = torch.arange(P.shape[0] - 1, P.shape[0] - 1 - k, -1, device=P.device)
    return evals[idx].clamp_min(0.0), evecs[:, idx]


def top_eig_from_gram(gram, k):
    """Top-``k`` eigenpairs of ``W W^T`` from the Gram matrix ``W^T W``.

    If ``W^T W = V diag(lam) V^T``, the non-zero eigenpairs of ``W W^T`` are
    ``(lam_j, W v_j / sqrt(lam_j))``. This returns ``(lam, V_k)``: callers form
    ``W V_k`` (= ``Q Lambda^{1/2}``, exactly the SLANG factor ``U``) without ever
    dividing by a vanishing eigenvalue, so no column is lost and shapes never
    change when eigenvalues are zero.

    Parameters
    ----------
    gram : Tensor of shape (m, m), symmetric PSD
    k : int, ``k <= m``

    Returns
    -------
    lam : Tensor of shape (k,), descending, clamped at 0
    V : Tensor of shape (m, k)
    """
    return top_eig_psd(gram, k)
