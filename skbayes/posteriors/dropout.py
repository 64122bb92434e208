"""The "posterior" of MC dropout: the distribution of dropout-masked weight vectors.

One dropout mask is a *masked copy of the weight vector*: dropping input unit ``j``
of a ``Linear`` layer zeroes column ``j`` of its weight matrix, and inverted
dropout scales the kept columns by ``1 / (1 - p)``. So prediction goes through the
shared forward path unchanged: ``sample_t(S, generator)`` draws ``S`` masks from the
seeded generator, and every row of a call sees the same ``S`` masked networks
(deterministic, row-independent predictions).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor

from .._linalg import PREDICTION_DRAWS_DTYPE
from ._common import PosteriorMixin


class DropoutPosterior(PosteriorMixin):
    """The distribution of dropout-masked weight vectors.

    A draw keeps every input unit ``j`` of a masked layer with probability
    ``1 - p`` and scales it by ``1 / (1 - p)``, i.e. column ``j`` of the layer's
    weight matrix becomes ``W[:, j] z_j / (1 - p)`` with ``z_j ~ Bernoulli(1 - p)``;
    biases and unmasked layers are kept as they are. The distribution is discrete
    (one atom per mask), with mean the weights and, per masked entry, variance
    ``W_ij^2 p / (1 - p)``; entries of one column are perfectly correlated
    (they share the mask), different columns and layers are independent.

    Built by the estimators (``posterior_``); users read it.

    Parameters
    ----------
    mean : Tensor of shape (D,)
        The network's weights.
    groups : list of tuple
        ``(name, weight offset, out, in, rate)`` of every ``Linear`` layer whose
        inputs are dropped (entries with rate 0 are ignored).

    Attributes
    ----------
    mean : ndarray of shape (D,)
        The network's weights, in ``module_.parameters()`` order (the mean of the masked weights).
    masked_layers : list of dict
        One entry per masked layer: ``name`` (of the ``Linear`` module), ``offset`` of
        its weight in the flat vector, its ``shape`` ``(out, in)`` and the ``rate`` ``p``.
    """

    family = "dropout"

    def __init__(self, mean: Tensor, groups: Sequence[tuple[str, int, int, int, float]]) -> None:
        self.mean_t = mean
        # (name, weight offset, out, in, rate) of every Linear layer whose inputs are dropped
        self.groups = [g for g in groups if g[4] > 0]

    @property
    def masked_layers(self) -> list[dict[str, Any]]:
        """One dict per masked layer: ``name``, ``offset``, ``shape`` ``(out, in)``, ``rate``."""
        return [dict(name=n, offset=o, shape=(out, inp), rate=p) for n, o, out, inp, p in self.groups]

    # --- tensor routines -------------------------------------------------
    def sample_t(self, n: int, generator: torch.Generator | None = None, prediction: bool = False) -> Tensor:
        mu = self.mean_t
        n = int(n)
        theta = mu.expand(n, mu.shape[0]).clone()
        # a prediction's uniforms in float32, as the other posteriors' normals (skbayes._linalg.randn)
        dtype = PREDICTION_DRAWS_DTYPE if prediction else mu.dtype
        for _, off, out, inp, p in self.groups:
            keep = (torch.rand(n, inp, generator=generator, dtype=dtype, device=mu.device) >= p).to(mu.dtype)
            W = theta[:, off : off + out * inp].view(n, out, inp)
            W.mul_((keep / (1.0 - p))[:, None, :])
        return theta

    def variance_t(self) -> Tensor:
        v = torch.zeros_like(self.mean_t)
        for _, off, out, inp, p in self.groups:
            w = self.mean_t[off : off + out * inp]
            v[off : off + out * inp] = w * w * (p / (1.0 - p))
        return v

    def covariance_t(self) -> Tensor:
        """Exact covariance of the masked weights as a tensor.

        Returns
        -------
        covariance : Tensor of shape (D, D)
            Dense and singular (see :meth:`covariance`).
        """
        D = self.mean_t.shape[0]
        C = self.mean_t.new_zeros(D, D)
        for _, off, out, inp, p in self.groups:
            W = self.mean_t[off : off + out * inp].view(out, inp)
            idx = off + torch.arange(out * inp, device=W.device).view(out, inp)
            for j in range(inp):
                ix = idx[:, j]
                C[ix[:, None], ix[None, :]] = torch.outer(W[:, j], W[:, j]) * (p / (1.0 - p))
        return C

    def covariance(self, max_size: int = 5000) -> np.ndarray:
        """Exact dense covariance of the masked weight vectors (small models only).

        Column ``j`` of a masked layer contributes ``W[:, j] W[:, j]^T p / (1 - p)``;
        everything else is 0. The matrix is singular: its rank is at most the
        number of dropped units (and it is 0 on biases and unmasked layers).

        Parameters
        ----------
        max_size : int, default=5000
            Largest ``D`` for which the dense matrix is formed; larger models raise
            a ValueError.

        Returns
        -------
        covariance : ndarray of shape (D, D)
            The covariance of the flat masked weight vector.
        """
        self._check_dense(max_size)
        with torch.no_grad():
            return self.covariance_t().cpu().numpy()

    def precision(self, max_size: int = 5000) -> np.ndarray:
        """Not defined: raises ``NotImplementedError``.

        The masked-weight distribution is a discrete mixture of ``2^k`` masked
        copies of the weights (``k`` dropped units), not a Gaussian, and its
        covariance is singular, so it has no precision matrix. Use
        :meth:`covariance`, :meth:`variance` or :meth:`sample`.

        Parameters
        ----------
        max_size : int, default=5000
            Unused (the signature of the other posteriors).

        Raises
        ------
        NotImplementedError
            Always.
        """
        raise NotImplementedError(
            "MC dropout's posterior is the discrete distribution of dropout-masked weight vectors, not a "
            "Gaussian, and its covariance is singular (rank at most the number of dropped units): it has no "
            "precision matrix. Use covariance(), variance() or sample() instead."
        )

    def _tensors(self) -> tuple[Tensor, ...]:
        return (self.mean_t,)
