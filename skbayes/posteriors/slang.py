"""Low-rank-plus-diagonal Gaussian posterior and the SLANG update.

``q(theta) = N(mu, P^{-1})`` with ``P = U U^T + diag(d)``; ``rank = 0`` is the
mean-field (diagonal) Gaussian and ``rank >= D`` the full Gaussian.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import Tensor

from .. import _linalg as linalg
from ._common import PosteriorMixin, is_scalar_precision, vector_prior_kl

if TYPE_CHECKING:
    from .._curvature.per_example import CurvatureBatch


class LowRankGaussian(PosteriorMixin):
    """Gaussian with precision ``U U^T + diag(d)``.

    Built by the estimators (``posterior_``); users read it.

    Parameters
    ----------
    mean : Tensor of shape (D,)
        Posterior mean.
    U : Tensor of shape (D, L)
        Low-rank factor of the precision.
    d : Tensor of shape (D,)
        Diagonal part of the precision (positive).

    Attributes
    ----------
    mean : ndarray of shape (D,)
        Posterior mean, in ``module_.parameters()`` order (a numpy copy).
    U : ndarray of shape (D, L)
        Low-rank factor of the precision.
    d : ndarray of shape (D,)
        Diagonal of the precision's diagonal part (positive).
    rank : int
        ``L``, the number of columns of ``U``.
    """

    family = "lowrank"

    _aux: tuple[Tensor | None, Tensor | None] | None
    _K: Tensor | None

    def __init__(self, mean: Tensor, U: Tensor, d: Tensor) -> None:
        self.mean_t = mean
        self.set_factors(U, d)

    def set_factors(self, U: Tensor, d: Tensor, scaled_gram: Tensor | None = None) -> None:
        """Replace ``(U, d)``; the small L x L quantities are recomputed lazily.

        The storage of the replaced ``U`` is kept as a spare (see :meth:`spare_factor`).

        Parameters
        ----------
        U : Tensor of shape (D, L)
            New low-rank factor.
        d : Tensor of shape (D,)
            New diagonal part.
        scaled_gram : Tensor of shape (L, L), default=None
            ``U^T diag(d)^{-1} U`` if the caller computed it.
        """
        old = getattr(self, "_U", None)
        self._spare = old.T if old is not None and old.T.is_contiguous() and old.shape[1] > 0 else None
        self._U, self._d, self._aux, self._K = U, d, None, scaled_gram

    def spare_factor(self, L: int) -> Tensor | None:
        """A contiguous ``(L, D)`` buffer for the next factor, or None.

        The storage of the factor that the last :meth:`set_factors` replaced:
        reusing it saves the page faults of a fresh ``D x L`` allocation on every
        step. It never aliases the current ``U``.

        Parameters
        ----------
        L : int
            Rank of the next factor.

        Returns
        -------
        buffer : Tensor of shape (L, D) or None
            The spare storage, or None when there is none of that shape.
        """
        sp = getattr(self, "_spare", None)
        if sp is None or tuple(sp.shape) != (L, self.mean_t.shape[0]) or sp.data_ptr() == self._U.data_ptr():
            return None
        self._spare = None
        return sp

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_spare"] = None  # scratch memory: not part of the posterior (pickles, snapshots)
        return state

    @property
    def U_t(self) -> Tensor:
        """Low-rank factor ``U`` (a tensor, not a copy)."""
        return self._U

    @property
    def d_t(self) -> Tensor:
        """Diagonal part ``d`` (a tensor, not a copy)."""
        return self._d

    def _small(self) -> tuple[Tensor | None, Tensor | None]:
        """``(chol(I + U^T D^-1 U), M)``: one O(D L^2) pass shared by solve and sample."""
        if self._aux is None:
            if self.rank == 0:
                self._aux = (None, None)
            else:
                K = self._K if getattr(self, "_K", None) is not None else linalg.scaled_gram(self._U, self._d)
                self._aux = (linalg.capacitance_cholesky(self._U, self._d, K=K), linalg.sqrt_inv_coeffs(K))  # type: ignore[arg-type]
        return self._aux

    @property
    def rank(self) -> int:
        """``L``, the number of columns of ``U``."""
        return self.U_t.shape[1]

    @property
    def U(self) -> np.ndarray:
        """Low-rank factor of the precision, shape ``(D, L)`` (a numpy copy)."""
        return self.U_t.detach().cpu().numpy().copy()

    @property
    def d(self) -> np.ndarray:
        """Diagonal part of the precision, shape ``(D,)`` (a numpy copy)."""
        return self.d_t.detach().cpu().numpy().copy()

    # --- tensor routines -------------------------------------------------
    def sample_t(self, n: int, generator: torch.Generator | None = None, prediction: bool = False) -> Tensor:
        M = self._small()[1]
        return linalg.lowrank_sample(
            self.mean_t, self.U_t, self.d_t, n, generator=generator, M=M, prediction=prediction
        )

    def variance_t(self) -> Tensor:
        return linalg.lowrank_variance(self.U_t, self.d_t, chol=self._small()[0])

    def precision_t(self) -> Tensor:
        return self.U_t @ self.U_t.T + torch.diag(self.d_t)

    def logdet_precision_t(self) -> Tensor:
        return linalg.lowrank_logdet(self.U_t, self.d_t, chol=self._small()[0])

    def solve_t(self, x: Tensor, shift: float = 0.0) -> Tensor:
        if shift:  # the cached capacitance factor belongs to the unshifted precision
            return linalg.woodbury_solve(self.U_t, self.d_t + shift, x)
        return linalg.woodbury_solve(self.U_t, self.d_t, x, chol=self._small()[0])

    def covariance_factors_t(self) -> tuple[Tensor, Tensor]:
        """The covariance as a diagonal minus a low-rank part, ``diag(v) - Z Z^T``.

        By the Woodbury identity ``(U U^T + diag(d))^{-1} = diag(1/d) - Z Z^T`` with
        ``Z = diag(1/d) U C^{-T}`` and ``C C^T = I + U^T diag(d)^{-1} U``.

        Returns
        -------
        v : Tensor of shape (D,)
            ``1 / d``.
        Z : Tensor of shape (D, L)
            The low-rank part's factor (``L = 0`` columns for a diagonal posterior).
        """
        v = 1.0 / self.d_t
        if self.rank == 0:
            return v, self.d_t.new_zeros(self.d_t.shape[0], 0)
        chol = self._small()[0]
        Z = torch.linalg.solve_triangular(chol, (self.U_t * v[:, None]).T, upper=False).T
        return v, Z

    def kl_to_prior(self, prior_precision: float | Tensor) -> float:
        if not is_scalar_precision(prior_precision):
            return vector_prior_kl(prior_precision, self.mean_t, self.variance_t(), self.logdet_precision_t())  # type: ignore[arg-type]  # not scalar: a Tensor
        lam = float(prior_precision)
        D = self.mean_t.shape[0]
        tr = self.variance_t().sum()
        quad = (self.mean_t * self.mean_t).sum()
        logdet_P = self.logdet_precision_t()
        return float(0.5 * (lam * (tr + quad) - D + logdet_P - D * math.log(lam)))

    def _tensors(self) -> tuple[Tensor, ...]:
        return (self.mean_t, self._U, self._d)


def slang_precision_update(
    U: Tensor,
    d: Tensor,
    curv: CurvatureBatch,
    scale: float,
    beta: float,
    prior_precision: float | Tensor,
    rank: int,
    cache: dict[str, Any] | None = None,
    out: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """One SLANG precision step (Algorithm 1, lines 7-11; App. D).

    The exact target is ``(1 - beta) (U U^T + diag d) + beta (scale * G^T G + lam I)``
    with ``G`` the per-example gradients of ``curv``. Writing
    ``W = [sqrt(1 - beta) U, sqrt(beta * scale) G^T]`` (D x (L + n)), the new factor
    is the top-``rank`` part of ``W W^T`` and the diagonal absorbs the rest of
    its diagonal::

        U_new = Q Lambda^{1/2}    (top-L eigenpairs of W W^T)
        d_new = (1 - beta) d + beta lam + diag(W W^T) - diag(U_new U_new^T)

    (eq. (9) of the paper, i.e. ``+ beta * lam``; Algorithm 1 line 11 prints
    ``+ lam``, which is not the VOGN update the method approximates).
    The eigendecomposition is exact: of the small Gram matrix ``W^T W`` when
    ``D > L + n`` (``U_new = W V_L``, no division by eigenvalues), else of the
    ``D x D`` matrix ``W W^T``. The correction term is a difference of two
    diagonals of PSD matrices with ``U_new U_new^T <= W W^T``; it is clamped at
    0 against rounding so ``d`` stays ``>= (1 - beta) d + beta lam > 0``.

    Parameters
    ----------
    U : Tensor of shape (D, L_old)
        The current low-rank factor.
    d : Tensor of shape (D,)
        The current diagonal part.
    curv : CurvatureBatch
        The minibatch's per-example gradients ``G`` (n, D) (see :mod:`skbayes._curvature`).
    scale : float
        ``N / (M S)``: ``scale * G^T G`` is the empirical Fisher estimate.
    beta : float
        The precision step size.
    prior_precision : float or Tensor of shape (D,)
        The prior precision ``lam``.
    rank : int
        Target rank ``L`` (capped at ``D``).
    cache : dict, optional
        ``{"row_sq": diag(U U^T), "gram": U^T U}`` of the incoming ``U`` if known
        (the previous update returns them: its Gram is diagonal, the eigenvalues);
        saves two passes over ``U``. Filled in place with the new ``U``'s values,
        and with ``"scaled_gram"``: ``U_new^T diag(d_new)^{-1} U_new`` (for the
        posterior's Woodbury solves and sampler).
    out : Tensor of shape (L, D), optional
        Contiguous buffer to build ``U_new^T`` in (must not share memory with ``U``).

    Returns
    -------
    U_new : Tensor of shape (D, min(rank, D))
        Stored as the transpose of a contiguous ``(L, D)`` tensor, so that
        each layer's block of every column is a contiguous ``(out, in)`` matrix.
    d_new : Tensor of shape (D,)
        The new diagonal part.
    """
    D = d.shape[0]
    L = min(int(rank), D)
    a = math.sqrt(1.0 - beta)
    b = math.sqrt(beta * scale)
    old = cache if cache is not None and cache.get("row_sq") is not None else {}
    u_sq = old.get("row_sq")
    diag_W = (1.0 - beta) * (_row_sq(U) if u_sq is None else u_sq) + (beta * scale) * curv.sq_sum()
    if L == 0:
        U_new = U.new_zeros(D, 0)
        d_new = (1.0 - beta) * d + beta * prior_precision + diag_W
        return U_new, d_new
    L_old = U.shape[1]
    m = L_old + curv.n
    VU = None
    if D <= m:
        W = torch.cat([a * U, b * curv.dense().T], dim=1)
        lam, Q = linalg.top_eig_psd(W @ W.T, L)
        U_new = (Q * torch.sqrt(lam)[None, :]).T.contiguous().T
    else:
        GU = curv.project(U)  # (n, L_old)
        K = U.new_empty(m, m)
        K[:L_old, :L_old] = (a * a) * (U.T @ U if old.get("gram") is None else old["gram"])
        K[:L_old, L_old:] = (a * b) * GU.T
        K[L_old:, :L_old] = (a * b) * GU
        K[L_old:, L_old:] = (b * b) * curv.gram()
        lam, V = linalg.top_eig_from_gram(K, L, n_lead=L_old)
        # U_new^T = b (G^T V_G)^T + a V_U^T U^T, built in the (L, D) layout: the
        # per-layer batched GEMMs write the first term into the buffer, the fused
        # pass below adds the second chunk by chunk.
        Ut_new = U.new_empty(L, D) if out is None else out
        curv.combine_into_(b * V[L_old:], Ut_new, beta=0.0)  # scale the small V, not the D x L result
        U_new = Ut_new.T
        if L_old:
            VU, Ut_old = a * V[:L_old].T, U.T
    # One pass over U_new in cache-sized chunks: finish U_new, then diag(U_new U_new^T),
    # the new d and U_new^T diag(d_new)^{-1} U_new (needed by every solve and sample),
    # without any D x L temporary.
    Ut_new = U_new.T
    d_new = torch.empty_like(d)
    new_sq = torch.empty_like(d)
    K_new = d.new_zeros(L, L)
    base = (1.0 - beta) * d + beta * prior_precision
    for c0 in range(0, D, _CHUNK):
        c1 = min(c0 + _CHUNK, D)
        Uc = Ut_new[:, c0:c1]
        if VU is not None:
            Uc.addmm_(VU, Ut_old[:, c0:c1])
        sq = (Uc * Uc).sum(0)
        new_sq[c0:c1] = sq
        # the correction is a difference of diagonals of PSD matrices with
        # U_new U_new^T <= W W^T: clamp rounding at 0
        dc = torch.add(base[c0:c1], (diag_W[c0:c1] - sq).clamp_min_(0.0), out=d_new[c0:c1])
        K_new.addmm_(Uc / dc, Uc.T)
    if cache is not None:
        cache["row_sq"] = new_sq
        # U_new = W V_L with orthonormal V_L, so U_new^T U_new = diag(lam) exactly
        cache["gram"] = torch.diag(lam) if D > m else U_new.T @ U_new
        cache["scaled_gram"] = K_new
    return U_new, d_new


#: Columns of ``U^T`` per chunk in the fused pass of :func:`slang_precision_update`
#: (L x 32768 values stay in the CPU caches).
_CHUNK = 32768


def _row_sq(U: Tensor) -> Tensor:
    """``(U * U).sum(1)`` for ``U`` (D, L) stored as the transpose of a (L, D) tensor."""
    if U.shape[1] == 0:
        return U.new_zeros(U.shape[0])
    Ut = U.T
    return (Ut * Ut).sum(0)
