"""Block-diagonal (per layer) matrix-variate Gaussians: the posteriors of noisy K-FAC
and noisy EK-FAC.

For a layer with weight matrix ``W`` (``n`` inputs including the bias, ``p`` outputs;
see :class:`skbayes._networks.KronLayer`), noisy EK-FAC's block is eigenvalue-corrected::

    Cov(vec W) = (Q_S kron Q_A) diag(vec s) (Q_S kron Q_A)^T

with ``Q_A``, ``Q_S`` eigenvectors of the Kronecker factors and ``s = (lambda/N) / (R +
g_in)`` a per-entry variance in that eigenbasis. Noisy K-FAC's block is an exact
Kronecker product of two damped factors::

    Cov(vec W) = (lambda/N) (S + sqrt(g_in)/pi I)^-1 kron (A + pi sqrt(g_in) I)^-1

which in the same eigenbasis has ``s = (lambda/N) / ((lam_A + pi sqrt(g_in)) (lam_S +
sqrt(g_in)/pi)^T)``. K-FAC's blocks are held as Cholesky factors of the damped factors
(:class:`DampedFactor`): sampling and solving then cost triangular solves, and no
eigendecomposition is needed to fit (the eigenbasis is formed only when
:attr:`KroneckerGaussian.factors` is read).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from torch import Tensor

from .._linalg import randn, sym_eig
from .._networks import KronLayer, SharedOnCopy, layer_map
from ._common import MAX_DENSE_SIZE, PosteriorMixin, is_scalar_precision, vector_prior_kl

#: Factors up to this size whiten rows (and transform a prediction's normal draws) by a matrix
#: product with their kept inverse Cholesky factor, larger ones by a triangular solve. On one CPU thread the product is
#: faster up to about 200 columns (float32, 4,500 rows: 0.34 against 0.74 ms at 50 columns,
#: 4.0 against 5.0 at 200), the solve beyond (15.5 against 14.7 ms at 400, 84 against 54 at 785).
_WHITEN_BY_PRODUCT = 256


class DampedFactor(SharedOnCopy):
    """A damped symmetric PSD Kronecker factor ``F = M + shift I``, factorised once.

    Held as the lower Cholesky factor ``L`` of ``F`` (``F = L L^T``); where the Cholesky
    factorisation fails (``F`` not numerically positive definite: a tiny ``shift``
    against rounding in a large ``M``) as the eigendecomposition of ``M`` with its
    eigenvalues clamped at 0 before the shift is added, which is what the eigenbasis
    code does in every case.

    Parameters
    ----------
    M : Tensor of shape (n, n)
        The symmetric PSD factor (not modified).
    shift : float
        The damping added to its diagonal, ``> 0`` (0 is allowed when ``M`` is definite).
    """

    L: Tensor | None
    # the eigendecomposition (n, n) and (n,): set exactly when L is None
    Q: Any
    lam: Any

    def __init__(self, M: Tensor, shift: float) -> None:
        self.n = M.shape[0]
        Md = M.clone()  # the Cholesky factorisation reads the lower triangle only
        Md.diagonal().add_(float(shift))
        L, info = torch.linalg.cholesky_ex(Md)
        if int(info) == 0:
            self.L, self.Q, self.lam = L, None, None
        else:
            lam, Q = sym_eig(M)
            self.L, self.Q, self.lam = None, Q, lam + float(shift)

    def tensors(self) -> list[Tensor]:
        return [self.L] if self.L is not None else [self.Q, self.lam]

    def solve_left(self, V: Tensor) -> Tensor:
        """``F^{-1} V`` for ``V`` of shape (n, k)."""
        if self.L is not None:
            return torch.cholesky_solve(V, self.L)
        return self.Q @ ((self.Q.T @ V) / self.lam[:, None])

    def solve_right(self, V: Tensor) -> Tensor:
        """``V F^{-1}`` for ``V`` of shape (k, n)."""
        return self.solve_left(V.T).T

    def isqrt_left(self, X: Tensor, kept: bool = False) -> Tensor:
        """``R X`` with ``R R^T = F^{-1}`` (``R = L^{-T}``), batched over leading dims of ``X`` (..., n, k).
        ``kept``: up to ``_WHITEN_BY_PRODUCT`` columns, a product with the kept
        :meth:`inverse_factor` (for a factor used again: a prediction's draws), not a solve."""
        if self.L is not None:
            if kept and self._by_product():
                return self.inverse_factor().T @ X
            return torch.linalg.solve_triangular(self.L.T, X, upper=True)
        return self.Q @ (X * torch.rsqrt(self.lam)[:, None])

    def isqrt_right(self, X: Tensor, kept: bool = False) -> Tensor:
        """``X R^T`` with ``R R^T = F^{-1}`` (``R^T = L^{-1}``), batched over leading dims of ``X`` (..., k, n).
        ``kept``: as in :meth:`isqrt_left`."""
        if self.L is not None:
            if kept and self._by_product():
                return X @ self.inverse_factor()
            return torch.linalg.solve_triangular(self.L, X, upper=False, left=False)
        return (X * torch.rsqrt(self.lam)[None, :]) @ self.Q.T

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.pop("_Linv", None)  # a cache, formed again when needed
        return state

    def _by_product(self) -> bool:
        """Whether the kept :meth:`inverse_factor` is applied by a product rather than a
        triangular solve with ``L`` (up to ``_WHITEN_BY_PRODUCT`` columns)."""
        return self.n <= _WHITEN_BY_PRODUCT

    def inverse_factor(self) -> Tensor:
        """``L^{-1}`` (lower triangular), formed by one triangular solve on first use and kept
        (the factor never changes). Only with the Cholesky factor (``L`` not None)."""
        Linv = self.__dict__.get("_Linv")
        if Linv is None:
            assert self.L is not None  # the Cholesky branch
            eye = torch.eye(self.L.shape[0], dtype=self.L.dtype, device=self.L.device)
            Linv = torch.linalg.solve_triangular(self.L, eye, upper=False)
            self._Linv = Linv
        return Linv

    def whiten(self, A: Tensor) -> Tensor:
        """``A R`` with ``R R^T = F^{-1}`` for rows ``A`` (m, n), so that
        ``(A R)(A R)^T = A F^{-1} A^T``: ``A L^{-T}``, or ``A Q diag(lam)^{-1/2}``. Up to
        ``_WHITEN_BY_PRODUCT`` columns as one matrix product with the kept
        :meth:`inverse_factor`, beyond by a triangular solve (which does half its work)."""
        if self.L is not None:
            if self._by_product():
                return A @ self.inverse_factor().T
            return torch.linalg.solve_triangular(self.L.T, A, upper=True, left=False)
        return (A @ self.Q) * torch.rsqrt(self.lam)[None, :]

    def quad_inverse(self, A: Tensor) -> Tensor:
        """``a^T F^{-1} a`` for every row ``a`` of ``A`` (m, n): ``||L^{-1} a||^2``, (m,)."""
        Z = self.whiten(A)
        return (Z * Z).sum(1)

    def diag_inverse(self) -> Tensor:
        """``diag(F^{-1})`` (n,)."""
        if self.L is not None:
            Linv = self.inverse_factor()
            return (Linv * Linv).sum(0)
        return (self.Q * self.Q) @ (1.0 / self.lam)

    def logdet(self) -> Tensor:
        """``log det F``."""
        if self.L is not None:
            return 2.0 * torch.log(self.L.diagonal()).sum()
        return torch.log(self.lam).sum()

    def dense(self, inverse: bool = False) -> Tensor:
        """``F`` or ``F^{-1}`` as a dense matrix."""
        if self.L is not None:
            return torch.cholesky_inverse(self.L) if inverse else self.L @ self.L.T
        return (self.Q / self.lam) @ self.Q.T if inverse else (self.Q * self.lam) @ self.Q.T

    def eig(self) -> tuple[Tensor, Tensor]:
        """Eigenvalues (ascending) and eigenvectors of ``F``."""
        if self.L is not None:
            lam, Q = torch.linalg.eigh(self.L @ self.L.T)
            return lam, Q
        return self.lam, self.Q


class KroneckerBlock(SharedOnCopy):
    """One layer's covariance ``c F_S^{-1} kron F_A^{-1}`` (noisy K-FAC)."""

    _eig: tuple[Tensor, Tensor, Tensor] | None

    def __init__(self, FA: DampedFactor, FS: DampedFactor, c: float) -> None:
        self.FA, self.FS, self.c, self._eig = FA, FS, float(c), None

    def tensors(self) -> list[Tensor]:
        return self.FA.tensors() + self.FS.tensors()

    def transform(self, X: Tensor, kept: bool = False) -> Tensor:
        """Map standard normal ``X`` (k, n, p) to ``k`` draws of the centred block (``kept``: by
        the factors' kept inverses, :meth:`DampedFactor.isqrt_left`)."""
        k, n, p = X.shape
        # The entries of X are i.i.d., so any layout of them is standard normal too: read
        # them as one (n, k p) right-hand side for the left factor (one triangular solve,
        # not k with a broadcast copy of it), then as (k n, p) rows for the right one.
        Y = self.FA.isqrt_left(X.reshape(n, k * p), kept).reshape(n, k, p).transpose(0, 1).reshape(k * n, p)
        return (math.sqrt(self.c) * self.FS.isqrt_right(Y, kept)).reshape(k, n, p)

    def variance(self) -> Tensor:
        return self.c * self.FA.diag_inverse()[:, None] * self.FS.diag_inverse()[None, :]

    def output_variance(self, A: Tensor) -> Tensor:
        """Each row's factor of the layer's output covariance for rows ``A`` (m, n): row ``a``'s
        outputs ``a^T W`` have covariance ``v F_S^{-1}`` with ``v = c a^T F_A^{-1} a`` (m,)."""
        return self.c * self.FA.quad_inverse(A)

    def output_scale(self, A: Tensor) -> Tensor:
        """What :meth:`output_draws` needs of rows ``A`` (m, n): ``sqrt(c a^T F_A^{-1} a)`` (m,)."""
        return torch.sqrt(self.output_variance(A))

    def output_draws(self, mean: Tensor, scale: Tensor, eps: Tensor) -> Tensor:
        """Draws ``(k, m, p)`` of the layer's outputs ``a^T W`` for rows with outputs ``mean``
        (m, p) at the posterior mean and ``scale`` (:meth:`output_scale`), one per standard
        normal ``eps`` (k, p). Row ``a``'s outputs have covariance
        ``c (a^T F_A^{-1} a) F_S^{-1}``, drawn as ``sqrt(c a^T F_A^{-1} a) eps R_S^T``
        (``R_S R_S^T = F_S^{-1}``): every row's marginal is exact, and a row's draw does not
        depend on the other rows."""
        e = self.FS.isqrt_right(eps, kept=True)  # prediction only: the factor is used again
        # written into a (k, m, p) buffer: left to itself, addcmul lays its result out with the
        # draws' axis fastest, which makes the next layer's batched products 2-4 times slower
        out = mean.new_empty(e.shape[0], *mean.shape)
        return torch.addcmul(mean[None], scale[None, :, None], e[:, None, :], out=out)

    def apply(self, V: Tensor) -> Tensor:
        """The block's covariance applied to matrices ``V`` (r, n, p): ``c F_A^{-1} V F_S^{-1}``."""
        r, n, p = V.shape
        Y = self.FA.solve_left(V.transpose(0, 1).reshape(n, r * p)).reshape(n, r, p).transpose(0, 1)
        return self.c * self.FS.solve_right(Y.reshape(r * n, p)).reshape(r, n, p)

    def dense(self, inverse: bool) -> Tensor:
        if inverse:
            return torch.kron(self.FS.dense(), self.FA.dense()) / self.c
        return self.c * torch.kron(self.FS.dense(inverse=True), self.FA.dense(inverse=True))

    def logdet_covariance(self) -> Tensor:
        n, p = self.FA.n, self.FS.n
        return n * p * math.log(self.c) - p * self.FA.logdet() - n * self.FS.logdet()

    def eig(self) -> tuple[Tensor, Tensor, Tensor]:
        """``(Q_A, Q_S, s)``: the same covariance in its Kronecker eigenbasis (computed once)."""
        if self._eig is None:
            lamA, QA = self.FA.eig()
            lamS, QS = self.FS.eig()
            self._eig = (QA, QS, self.c / (lamA[:, None] * lamS[None, :]))
        return self._eig


class EigenBlock(SharedOnCopy):
    """One layer's covariance ``(Q_S kron Q_A) diag(vec s) (Q_S kron Q_A)^T`` (noisy EK-FAC)."""

    def __init__(self, QA: Tensor, QS: Tensor, s: Tensor) -> None:
        self.QA, self.QS, self.s = QA, QS, s

    def tensors(self) -> list[Tensor]:
        return [self.QA, self.QS, self.s]

    def transform(self, X: Tensor, kept: bool = False) -> Tensor:
        """Map standard normal ``X`` (k, n, p) to ``k`` draws of the centred block (``kept``
        changes nothing: the eigenbases are applied by products)."""
        return self.QA @ (X * torch.sqrt(self.s)) @ self.QS.T

    def variance(self) -> Tensor:
        return (self.QA * self.QA) @ self.s @ (self.QS * self.QS).T

    def output_variance(self, A: Tensor) -> Tensor:
        """Each row's variances of the layer's outputs in the ``Q_S`` basis for rows ``A`` (m, n):
        row ``a``'s outputs have covariance ``Q_S diag(z^2 s) Q_S^T``, ``z = Q_A^T a``; ``z^2 s`` (m, p)."""
        Z = A @ self.QA
        return (Z * Z) @ self.s

    def output_scale(self, A: Tensor) -> Tensor:
        """What :meth:`output_draws` needs of rows ``A`` (m, n): ``sqrt(z^2 s)`` (m, p) for
        ``z = Q_A^T a``."""
        return torch.sqrt(self.output_variance(A))

    def output_draws(self, mean: Tensor, scale: Tensor, eps: Tensor) -> Tensor:
        """As :meth:`KroneckerBlock.output_draws`: row ``a``'s outputs have covariance
        ``Q_S diag(z^2 s) Q_S^T`` with ``z = Q_A^T a``, drawn as ``(sqrt(z^2 s) * eps) Q_S^T``."""
        return torch.baddbmm(mean[None], scale[None] * eps[:, None, :], self.QS.T.expand(eps.shape[0], -1, -1))

    def apply(self, V: Tensor) -> Tensor:
        """The block's covariance applied to matrices ``V`` (r, n, p)."""
        return self.QA @ ((self.QA.T @ V @ self.QS) * self.s) @ self.QS.T

    def dense(self, inverse: bool) -> Tensor:
        Q = torch.kron(self.QS, self.QA)
        v = self.s.T.reshape(-1)  # vec(s), column-major
        v = 1.0 / v if inverse else v
        return (Q * v) @ Q.T

    def logdet_covariance(self) -> Tensor:
        return torch.log(self.s).sum()

    def eig(self) -> tuple[Tensor, Tensor, Tensor]:
        return self.QA, self.QS, self.s


class KroneckerGaussian(PosteriorMixin):
    """Block-diagonal (per layer) matrix-variate Gaussian.

    The posterior of noisy K-FAC and noisy EK-FAC (see the module docstring for
    the covariance of one block). Built by the estimators; users read it.

    Parameters
    ----------
    mean : torch.Tensor of shape (D,)
        Posterior mean.
    layers : list of KronLayer
        Where each layer's block lives in the flat parameter vector.
    blocks : list of KroneckerBlock or EigenBlock
        Per layer the covariance block: a Kronecker product of two damped factors
        (noisy K-FAC) or an eigenbasis with per-entry variances (noisy EK-FAC).

    Attributes
    ----------
    mean : ndarray of shape (D,)
        Posterior mean in ``module_.parameters()`` order.
    factors : list of dict
        Per layer: ``name``, eigenbases ``Q_A`` (n, n) and ``Q_S`` (p, p), and
        ``scale`` (n, p), the variances in the eigenbasis (``s`` above).
    """

    family = "kronecker"

    def __init__(self, mean: Tensor, layers: list[KronLayer], blocks: list[KroneckerBlock | EigenBlock]) -> None:
        self.mean_t = mean
        self.layers = layers
        self.blocks = blocks

    @property
    def factors(self) -> list[dict[str, Any]]:
        """Per-layer eigenbases and variances (numpy copies).

        For noisy K-FAC these are the eigendecompositions of its two damped factors,
        formed on first access (fitting does not need them).
        """
        out = []
        for l, b in zip(self.layers, self.blocks):
            QA, QS, s = b.eig()
            out.append(
                {
                    "name": l.name,
                    "Q_A": QA.detach().cpu().numpy().copy(),
                    "Q_S": QS.detach().cpu().numpy().copy(),
                    "scale": s.detach().cpu().numpy().copy(),
                }
            )
        return out

    def _tensors(self) -> list[Tensor]:
        out = [self.mean_t]
        for b in self.blocks:
            out.extend(b.tensors())
        return out

    def sample_t(self, n: int, generator: torch.Generator | None = None, prediction: bool = False) -> Tensor:
        return self._sample_blocks(n, generator, prediction=prediction)

    def _sample_blocks(
        self, n: int, generator: torch.Generator | None, first: int = 0, prediction: bool = False
    ) -> Tensor:
        """``n`` weight samples ``(n, D)``; the blocks before ``first`` are left at the mean (no
        draws). The blocks' noise goes into the flat vector through :func:`layer_map` (one
        indexing operation on small networks, layer by layer on large ones)."""
        noise = [
            self.mean_t.new_zeros(n, l.n, l.p)
            if k < first
            else b.transform(randn((n, l.n, l.p), self.mean_t, generator, prediction), kept=prediction)
            for k, (l, b) in enumerate(zip(self.layers, self.blocks))
        ]
        return layer_map(self.layers, self.mean_t.device).to_flat(noise).add_(self.mean_t)  # a new tensor

    def sample_rest_t(
        self, n: int, generator: torch.Generator | None = None, prediction: bool = False
    ) -> tuple[Tensor, Tensor]:
        """Draw what :meth:`first_layer_outputs_t` needs: weight samples but the first layer's.

        Parameters
        ----------
        n : int
            Number of draws.
        generator : torch.Generator, optional
            Source of the standard normal draws.
        prediction : bool, default=False
            As in :meth:`sample_t`.

        Returns
        -------
        theta : Tensor of shape (n, D)
            Weight samples whose first block is left at the mean (the first layer's output
            draws replace it).
        eps : Tensor of shape (n, p)
            Standard normal vectors for the first layer's ``p`` outputs.
        """
        theta = self._sample_blocks(n, generator, first=1, prediction=prediction)
        return theta, randn((n, self.layers[0].p), self.mean_t, generator, prediction)

    def first_layer_moments_t(self, X: Tensor) -> tuple[Tensor, Tensor]:
        """Compute what :meth:`first_layer_outputs_t` needs of some rows (one pass over the layer).

        Parameters
        ----------
        X : Tensor of shape (m, n_in)
            Rows of the network's input (the first layer must be a ``Linear`` one).

        Returns
        -------
        mean : Tensor of shape (m, p)
            The first layer's outputs at the posterior mean.
        scale : Tensor of shape (m,) or (m, p)
            The block's scale of their spread (noisy K-FAC: ``sqrt(c a^T F_A^{-1} a)``;
            noisy EK-FAC: ``sqrt(z^2 s)`` with ``z = Q_A^T a``).
        """
        l, b = self.layers[0], self.blocks[0]
        A = l.patches(X)[:, 0, :]  # (m, n): the rows with a trailing 1 for the bias
        return A @ l.flat_to_mat(self.mean_t), b.output_scale(A)

    def first_layer_outputs_t(self, moments: tuple[Tensor, Tensor], eps: Tensor) -> Tensor:
        """Draw the first layer's outputs from their exact Gaussian under the posterior.

        Each row's outputs have the mean and covariance they have under weight samples. The
        draws of different rows share ``eps`` (so a row's value does not depend on the other
        rows), so their joint over rows is not the weight samples' one: use them for per-row
        quantities (a predictive's marginals), not for functions of several rows.

        Parameters
        ----------
        moments : tuple of Tensor
            :meth:`first_layer_moments_t` of the rows.
        eps : Tensor of shape (k, p)
            Standard normal vectors (:meth:`sample_rest_t`), one per draw.

        Returns
        -------
        outputs : Tensor of shape (k, m, p)
            One draw of every row's outputs per row of ``eps``.
        """
        return self.blocks[0].output_draws(*moments, eps)

    def variance_t(self) -> Tensor:
        return layer_map(self.layers, self.mean_t.device).to_flat([b.variance() for b in self.blocks])

    def covariance_apply_t(self, x: Tensor) -> Tensor:
        vec = x.dim() == 1
        X = (x[:, None] if vec else x).T  # (r, D)
        out = torch.zeros_like(X)
        for l, b in zip(self.layers, self.blocks):
            l.mat_to_flat(b.apply(l.flat_to_mat(X)), out)
        return out[0] if vec else out.T

    def _dense(self, inverse: bool) -> Tensor:
        D = self.mean_t.shape[0]
        out = torch.zeros(D, D, dtype=self.mean_t.dtype, device=self.mean_t.device)
        for l, b in zip(self.layers, self.blocks):
            idx = l.vec_index(out.device)
            out[idx[:, None], idx[None, :]] = b.dense(inverse)
        return out

    def precision_t(self) -> Tensor:
        return self._dense(inverse=True)

    def covariance(self, max_size: int = MAX_DENSE_SIZE) -> np.ndarray:
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

    def logdet_covariance_t(self) -> Tensor | float:
        """Log-determinant of the posterior covariance (the sum over layers' blocks).

        Returns
        -------
        logdet : Tensor of shape ()
            ``log det Sigma``.
        """
        return sum(b.logdet_covariance() for b in self.blocks)

    def kl_to_prior(self, prior_precision: float | Tensor) -> float:
        if not is_scalar_precision(prior_precision):
            return vector_prior_kl(prior_precision, self.mean_t, self.variance_t(), -self.logdet_covariance_t())  # type: ignore[arg-type]  # not scalar: a Tensor
        eta = 1.0 / float(prior_precision)
        D = self.mean_t.shape[0]
        tr = self.variance_t().sum()
        quad = (self.mean_t * self.mean_t).sum()
        logdet = self.logdet_covariance_t()
        return float(0.5 * ((tr + quad) / eta - D + D * math.log(eta) - logdet))
