"""What every posterior family exposes: the engine's tensor interface (the Protocols
:class:`PosteriorTensors`, :class:`GaussianTensors`, :class:`PrecisionTensors`) and the
shared user-facing API (numpy in, numpy out, :class:`PosteriorMixin`)."""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np
import torch
from sklearn.utils import check_random_state
from torch import Tensor

from ..exceptions import MemoryLimitError


def _physical_memory() -> int:
    """Bytes of physical memory, or 0 where it cannot be queried."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):  # pragma: no cover - not POSIX
        return 0


#: Largest parameter count for which dense ``precision()``/``covariance()`` are allowed.
MAX_DENSE_SIZE = 5000


def is_scalar_precision(prior_precision: float | Tensor) -> bool:
    """True for a number, False for a per-parameter precision tensor."""
    return not (isinstance(prior_precision, torch.Tensor) and prior_precision.dim() > 0)


def vector_prior_kl(prior_precision: Tensor, mean: Tensor, variance: Tensor, logdet_precision: Tensor | float) -> float:
    """``KL(q || N(0, diag(lam)^{-1}))`` of a Gaussian ``q`` with marginal ``variance`` and
    precision log-determinant ``logdet_precision``, for a per-parameter ``lam`` (D,)::

        0.5 (sum_i lam_i (var_i + mu_i^2) - D - sum_i log lam_i + log det P)
    """
    lam = prior_precision
    D = mean.shape[0]
    quad = (lam * (variance + mean * mean)).sum()
    return float(0.5 * (quad - D - torch.log(lam).sum() + logdet_precision))


@runtime_checkable
class PosteriorTensors(Protocol):
    """The engine's interface to every posterior (tensors in, tensors out).

    Every posterior class satisfies it (``isinstance(posterior, PosteriorTensors)``);
    :class:`GaussianTensors` and :class:`PrecisionTensors` add what the Gaussian ones
    offer. A posterior class that implements one of these methods without a docstring
    inherits the one documented here (:meth:`PosteriorMixin.__init_subclass__`, which does
    the same for the methods of :class:`PosteriorMixin` itself).

    Attributes
    ----------
    mean_t : Tensor of shape (D,)
        Posterior mean, flat, in ``module_.parameters()`` order.
    """

    mean_t: Tensor

    def sample_t(self, n: int, generator: torch.Generator | None = None, prediction: bool = False) -> Tensor:
        """Weight samples as a tensor.

        Parameters
        ----------
        n : int
            Number of samples.
        generator : torch.Generator, default=None
            Source of the random draws (None: torch's global generator).
        prediction : bool, default=False
            Draws for a prediction from this (fixed) posterior: the random numbers are
            drawn in float32 and widened (``skbayes._linalg.randn``), and noisy
            K-FAC multiplies by its factors' kept inverses instead of solving with them.
            The same distribution, faster; a fit's draws (False) keep the model's dtype.

        Returns
        -------
        theta : Tensor of shape (n, D)
            Flat weight vectors drawn from the posterior.
        """
        ...

    def variance_t(self) -> Tensor:
        """Marginal variances as a tensor.

        Returns
        -------
        variance : Tensor of shape (D,)
            ``Var_q(theta_i)`` of every parameter.
        """
        ...

    @property
    def n_params(self) -> int:
        """Number of parameters ``D`` of the network."""
        ...

    def is_finite(self) -> bool:
        """Whether every stored tensor is finite.

        Returns
        -------
        finite : bool
            True when no entry of the posterior's tensors is NaN or infinite.
        """
        ...

    def _tensors(self) -> Sequence[Tensor]:
        """Every tensor the posterior stores (what :meth:`is_finite` checks)."""
        ...


@runtime_checkable
class GaussianTensors(PosteriorTensors, Protocol):
    """A Gaussian posterior: :class:`PosteriorTensors` plus its precision and its KL to the prior."""

    def precision_t(self) -> Tensor:
        """Dense precision matrix as a tensor (small models only).

        Returns
        -------
        precision : Tensor of shape (D, D)
            The inverse posterior covariance.
        """
        ...

    def kl_to_prior(self, prior_precision: float | Tensor) -> float:
        """``KL(q || N(0, diag(lam)^{-1}))`` to the Gaussian weight prior.

        Parameters
        ----------
        prior_precision : float or Tensor of shape (D,)
            The prior precision ``lam``: one number for every weight, or one per weight.

        Returns
        -------
        kl : float
            The Kullback-Leibler divergence from the posterior to the prior.
        """
        ...


@runtime_checkable
class PrecisionTensors(GaussianTensors, Protocol):
    """A Gaussian posterior held by its precision: :class:`GaussianTensors` plus solves with
    the precision and its log-determinant (what a natural-gradient mean step needs)."""

    def logdet_precision_t(self) -> Tensor:
        """Log-determinant of the posterior precision.

        Returns
        -------
        logdet : Tensor of shape ()
            ``log det P``.
        """
        ...

    def solve_t(self, x: Tensor, shift: float = 0.0) -> Tensor:
        """Apply the posterior covariance: ``P^{-1} x`` (or ``(P + shift I)^{-1} x``).

        Parameters
        ----------
        x : Tensor of shape (D,) or (D, k)
            Right-hand side(s).
        shift : float, default=0.0
            A constant added to the precision's diagonal for this solve only (the
            extrinsic damping of a mean step); the posterior is not changed.

        Returns
        -------
        y : Tensor of the shape of ``x``
            The solution of ``(P + shift I) y = x``.
        """
        ...


class _DenseSelf(GaussianTensors, Protocol):
    """What :meth:`PosteriorMixin.precision` and ``covariance`` use of their posterior."""

    def _check_dense(self, max_size: int) -> None: ...


class PosteriorMixin:
    """Shared user-facing API of the posteriors (numpy out).

    A posterior class derives from it and implements the tensor interface
    :class:`PosteriorTensors` (and, for a Gaussian, :class:`GaussianTensors` or
    :class:`PrecisionTensors`), which the methods here call.
    """

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for proto in (PosteriorMixin, PosteriorTensors, GaussianTensors, PrecisionTensors):
            for name, base_fn in vars(proto).items():
                fn = cls.__dict__.get(name)
                if callable(fn) and not fn.__doc__ and getattr(base_fn, "__doc__", None):
                    fn.__doc__ = base_fn.__doc__

    def covariance_apply_t(self: PrecisionTensors, x: Tensor) -> Tensor:
        """Apply the posterior covariance: ``Sigma x``, without forming ``Sigma``.

        Parameters
        ----------
        x : Tensor of shape (D,) or (D, k)
            Vector(s) to multiply.

        Returns
        -------
        y : Tensor of the shape of ``x``
            ``Sigma x`` (``P^{-1} x`` by default, through ``solve_t``).
        """
        return self.solve_t(x)

    @property
    def mean(self: PosteriorTensors) -> np.ndarray:
        """Posterior mean, flat, in ``module_.parameters()`` order."""
        return self.mean_t.detach().cpu().numpy().copy()

    def is_finite(self: PosteriorTensors) -> bool:
        """Whether every stored tensor is finite.

        Returns
        -------
        finite : bool
            True when no entry of the posterior's tensors is NaN or infinite.
        """
        # A sum is non-finite iff an entry is (or it overflows, which is divergence too):
        # one reduction per tensor instead of a full boolean mask.
        return all(math.isfinite(float(t.sum())) for t in self._tensors())

    @property
    def n_params(self: PosteriorTensors) -> int:
        """Number of parameters ``D`` of the network."""
        return int(self.mean_t.shape[0])

    def variance(self: PosteriorTensors) -> np.ndarray:
        """Marginal posterior variances.

        Returns
        -------
        variance : ndarray of shape (D,)
            ``Var_q(theta_i)`` of every parameter, in ``module_.parameters()`` order.
        """
        return self.variance_t().detach().cpu().numpy()

    def sample(
        self: PosteriorTensors, n_samples: int = 1, random_state: int | np.random.RandomState | None = None
    ) -> np.ndarray:
        """Draw weight vectors from the posterior.

        Parameters
        ----------
        n_samples : int, default=1
            Number of weight vectors.
        random_state : int, RandomState instance or None, default=None
            Seeds the draw; ``None`` draws a fresh seed from numpy's global state.

        Returns
        -------
        samples : ndarray of shape (n_samples, D)
            Flat weight vectors in ``module_.parameters()`` order.
        """
        seed = int(check_random_state(random_state).randint(np.iinfo(np.int32).max))
        gen = torch.Generator(device=self.mean_t.device).manual_seed(seed)
        with torch.no_grad():
            return self.sample_t(int(n_samples), generator=gen).cpu().numpy()

    def _check_dense(self: PosteriorTensors, max_size: int) -> None:
        D = self.n_params
        if D > max_size:
            raise ValueError(
                f"The posterior has {D} parameters; dense {D}x{D} matrices are only formed for "
                f"at most max_size={max_size} parameters. Use the structured factors, variance() "
                "or sample() instead, or pass a larger max_size."
            )
        # a dense precision, its Cholesky factor and the inverse (plus the numpy copy)
        nbytes = 4 * D * D * self.mean_t.element_size()
        physical = _physical_memory()
        if physical and nbytes > physical:
            raise MemoryLimitError(
                f"A dense {D}x{D} posterior matrix needs about {nbytes / 2**30:.1f} GiB of working "
                f"memory, more than this machine's {physical / 2**30:.1f} GiB; nothing was allocated. "
                "Use the structured factors, variance() or sample() instead."
            )

    def precision(self: _DenseSelf, max_size: int = MAX_DENSE_SIZE) -> np.ndarray:
        """Dense posterior precision matrix (small models only).

        Parameters
        ----------
        max_size : int, default=5000
            Largest ``D`` for which the dense matrix is formed; larger models raise
            a ValueError (use the structured factors, ``variance()`` or ``sample()``).

        Returns
        -------
        precision : ndarray of shape (D, D)
            The inverse posterior covariance.
        """
        self._check_dense(max_size)
        with torch.no_grad():
            return self.precision_t().cpu().numpy()

    def covariance(self: _DenseSelf, max_size: int = MAX_DENSE_SIZE) -> np.ndarray:
        """Dense posterior covariance matrix (small models only).

        Parameters
        ----------
        max_size : int, default=5000
            Largest ``D`` for which the dense matrix is formed; larger models raise
            a ValueError (use the structured factors, ``variance()`` or ``sample()``).

        Returns
        -------
        covariance : ndarray of shape (D, D)
            The posterior covariance of the flat parameter vector.
        """
        self._check_dense(max_size)
        with torch.no_grad():
            P = self.precision_t()
            return torch.cholesky_inverse(torch.linalg.cholesky(P)).cpu().numpy()
