"""The Gaussian weight prior, fixed or learned by empirical Bayes (variational EM).

The prior over the flat parameter vector is ``N(0, diag(lam)^{-1})`` with ``lam``
constant within each parameter *group* (by default every parameter tensor of the
network: the weight matrix and the bias of each layer separately; the Kronecker
families use one group per layer, weight and bias together, because their posterior
precision is ``N (A kron S) + lam I`` per layer).

``prior_precision='auto'`` learns ``lam_g`` per group by maximising the ELBO over it
(the M-step of variational EM): with a ``Gamma(a0, b0)`` hyperprior (shape, rate) the
maximiser of ``E_q[log N(theta_g | 0, lam_g^{-1} I)] + log Gamma(lam_g | a0, b0)`` is::

    lam_g = (n_g + 2 (a0 - 1)) / (E_q ||theta_g||^2 + 2 b0)
    E_q ||theta_g||^2 = ||mu_g||^2 + sum_{i in g} Var_q(theta_i)

``a0 = 1, b0 = 0`` is plain type-II maximum likelihood (for a linear model with a
Gaussian posterior its fixed point is the evidence maximiser of MacKay / BayesianRidge).
The default hyperprior, ``a0 = 1.5, b0 = 0.5``, is one pseudo-weight of unit variance
per group: negligible for a weight matrix, it keeps a one-element group (a single output
bias) from an unbounded precision. The loop applies the update once per epoch, after
the epoch's steps; the families read the current ``lam`` through
:class:`~skbayes._families.base.StepContext` and the KL term.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from ._networks import ParamLayout

#: Default hyperprior on each group's precision: Gamma(shape, rate), one pseudo-weight of unit variance.
HYPERPRIOR = (1.5, 0.5)
#: Precisions are kept in this range (a group whose weights all collapse to zero would
#: otherwise drive its precision to infinity, and an exploding one to zero).
PRECISION_RANGE = (1e-6, 1e8)
#: The starting precision of ``prior_precision='auto'`` (the fixed default before learning).
AUTO_START = 1.0


def tensor_groups(layout: ParamLayout) -> list[tuple[str, torch.Tensor]]:
    """``(name, flat indices)`` of every parameter tensor of a :class:`~skbayes._networks.ParamLayout`."""
    out = []
    for name, shape, off in zip(layout.names, layout.shapes, layout.offsets):
        n = math.prod(shape) if shape else 1
        out.append((name, torch.arange(off, off + n)))
    return out


class WeightPrior:
    """Isotropic-per-group Gaussian prior ``N(0, diag(lam)^{-1})`` over the parameter vector.

    Parameters
    ----------
    groups : list of (str, LongTensor)
        Name and indices of each group in the flat vector; together a partition of
        ``range(D)``.
    n_params : int
        ``D``.
    precision : float or 'auto'
        A fixed precision for every group, or 'auto' to learn one per group (starting
        from ``AUTO_START``).
    hyperprior : tuple of float
        ``(a0, b0)`` of the Gamma hyperprior of the learned precisions.
    dtype, device : torch dtype and device of :meth:`vector`.
    """

    def __init__(
        self,
        groups: list[tuple[str, torch.Tensor]],
        n_params: int,
        precision: float | str,
        hyperprior: tuple[float, float] = HYPERPRIOR,
        dtype: torch.dtype = torch.float64,
        device: torch.device | str = "cpu",
    ) -> None:
        self.learn = isinstance(precision, str)
        start = AUTO_START if self.learn else float(precision)
        self.names = [name for name, _ in groups]
        self.groups = [g.to(device) for _, g in groups]
        self.values = [start] * len(groups)
        self.hyperprior = tuple(float(v) for v in hyperprior)
        self.n_params = int(n_params)
        self.dtype, self.device = dtype, device
        self._vector: torch.Tensor | None = None

    # --- views -------------------------------------------------------------------------
    @property
    def is_scalar(self) -> bool:
        """True when every group has the same precision (a fixed prior)."""
        return not self.learn

    def scalar(self) -> float:
        """The common precision of a fixed prior."""
        return self.values[0]

    def vector(self) -> torch.Tensor:
        """``lam`` as a ``(D,)`` tensor (cached until the next update)."""
        if self._vector is None:
            v = torch.empty(self.n_params, dtype=self.dtype, device=self.device)
            for g, lam in zip(self.groups, self.values):
                v[g] = lam
            self._vector = v
        return self._vector

    def value(self) -> float | torch.Tensor:
        """The fixed precision (a float), or the ``(D,)`` vector of a learned one."""
        return self.scalar() if self.is_scalar else self.vector()

    def as_dict(self) -> dict[str, float]:
        """``{group name: precision}``."""
        return dict(zip(self.names, self.values))

    # --- the M-step ----------------------------------------------------------------------
    def update(self, mean: torch.Tensor, variance: torch.Tensor) -> None:
        """Empirical-Bayes step: each group's precision maximises the ELBO given ``q``.

        ``mean`` and ``variance`` are the posterior's marginal means and variances (D,).
        """
        if not self.learn:
            return
        a0, b0 = self.hyperprior
        lo, hi = PRECISION_RANGE
        second = mean * mean + variance
        new: list[float] = []
        for g in self.groups:
            num = g.numel() + 2.0 * (a0 - 1.0)
            den = float(second[g].sum()) + 2.0 * b0
            lam = num / den if den > 0 else hi
            new.append(min(max(lam, lo), hi) if math.isfinite(lam) else self.values[len(new)])
        self.values = new
        self._vector = None

    # --- snapshots -----------------------------------------------------------------------
    def get_state(self) -> list[float]:
        return list(self.values)

    def set_state(self, state: Iterable[float]) -> None:
        self.values = list(state)
        self._vector = None

    def __getstate__(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d["_vector"] = None
        return d
