"""Likelihoods: per-example negative log-likelihoods of network outputs.

``nll(f, y)`` broadcasts: ``f`` has shape ``(..., m, n_outputs)``, ``y`` shape
``(m,)`` (``(m, k)`` for a Gaussian on ``k`` targets), the result ``(..., m)``.

What the training loop needs of a likelihood, beyond ``nll`` and ``sample``: ``update``
(a natural-gradient step on its own parameters after every training step),
``kl`` (their KL term in the objective), and ``get_state`` / ``set_state``
(for snapshots). A likelihood without parameters does nothing in them.

``nll_grad(f, y, g)`` returns the per-example negative log-likelihood and the gradient of
``sum_i g_i nll_i`` with respect to ``f`` (``g`` broadcasting against the result of
``nll``; ``None`` for all ones) for the hand-written backward pass of dense networks
(:meth:`skbayes._networks.DenseSpec.backward`). Each computes what ``torch.autograd``
computes for ``nll``, by the same operations, so the numbers are the same to the bit;
:func:`nll_grad` falls back to autograd for a likelihood without one.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from numpy.typing import ArrayLike
from scipy.special import digamma, gammaln
from torch import Tensor

from ._linalg import all_finite

_LOG_2PI = math.log(2.0 * math.pi)


def _check_finite(f: Tensor) -> None:
    if not all_finite(f):
        raise FloatingPointError("non-finite network outputs")


def nll_grad(lik: Any, f: Tensor, y: Tensor, g: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """``(nll, d/df sum_i g_i nll_i)`` for outputs ``f`` (detached): ``lik.nll_grad`` if the
    likelihood has it, else autograd on a graph holding ``f`` only."""
    if hasattr(lik, "nll_grad"):
        return lik.nll_grad(f, y, g)
    with torch.enable_grad():
        fr = f.detach().requires_grad_(True)
        nll = lik.nll(fr, y)
        (df,) = torch.autograd.grad(nll.sum() if g is None else (nll * g).sum(), fr)
    return nll.detach(), df


class _NoParameters:
    """A likelihood with no learned parameters."""

    def start_from(self, noise_variance: float | np.ndarray, n_rows: float) -> None:
        """No parameters to start."""

    def update(self, f: Tensor, y: Tensor, scale: float, N: float, step: float, weights: Tensor | None = None) -> None:
        """No parameters to update."""

    def kl(self) -> float:
        return 0.0

    def get_state(self) -> None:
        return None

    def set_state(self, state: Any) -> None:
        """Nothing to restore."""


class Gaussian:
    """Gaussian likelihood ``N(y | f, 1/tau)`` on standardised targets.

    The noise precision enters the gradients through its posterior mean
    ``E[tau]`` and the expected log-likelihood through ``E[log tau]`` (the two
    coincide with ``tau`` and ``log tau`` when the precision is fixed).

    With a noise of ``k`` outputs (``noise.n_outputs``, a 2-D target ``y`` of shape
    ``(m, k)``) the ``k`` targets are conditionally independent, each with its own
    precision ``tau_j``: the per-example negative log-likelihood sums over them.
    """

    multi = False
    n_outputs = 1

    def __init__(self, noise: GaussianNoise) -> None:
        self.noise = noise
        self.multi = noise.n_outputs is not None
        self.n_outputs = 1 if noise.n_outputs is None else int(noise.n_outputs)

    def _per_output(self, value: float | np.ndarray, f: Tensor) -> Tensor:
        """A per-output noise quantity as a tensor broadcasting against ``f`` (..., k)."""
        return torch.as_tensor(np.asarray(value, dtype=np.float64), dtype=f.dtype, device=f.device)

    def nll(self, f: Tensor, y: Tensor) -> Tensor:
        if self.multi:
            r = f - y
            tau = self._per_output(self.noise.tau_mean, f)
            log_tau = self._per_output(self.noise.log_tau_mean, f)
            return (0.5 * tau * r * r - 0.5 * log_tau + 0.5 * _LOG_2PI).sum(-1)
        r = f[..., 0] - y
        return 0.5 * self.noise.tau_mean * r * r - 0.5 * self.noise.log_tau_mean + 0.5 * _LOG_2PI  # type: ignore[return-value]  # numpy scalar * Tensor: a Tensor

    def nll_grad(self, f: Tensor, y: Tensor, g: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """See the module docstring (``d nll / d f = tau r``, as autograd evaluates it)."""
        if self.multi:
            r = f - y
            tau = self._per_output(self.noise.tau_mean, f)
            log_tau = self._per_output(self.noise.log_tau_mean, f)
            nll = (0.5 * tau * r * r - 0.5 * log_tau + 0.5 * _LOG_2PI).sum(-1)
            df = tau * r if g is None else (g.unsqueeze(-1) * tau) * r
            return nll, df
        r = f[..., 0] - y
        # Python floats: a numpy scalar costs a tensor operation twice the time, for the same value
        c = 0.5 * float(self.noise.tau_mean)
        a = c * r
        nll = a * r - 0.5 * float(self.noise.log_tau_mean) + 0.5 * _LOG_2PI
        dr = a + a if g is None else g * a + (g * r) * c  # both factors of a * r
        return nll, dr.unsqueeze(-1)

    def sample(self, f: Tensor, generator: torch.Generator | None = None) -> Tensor:
        """Targets drawn from the model at outputs ``f`` (for the true Fisher)."""
        if self.multi:
            eps = torch.randn(f.shape, generator=generator, dtype=f.dtype, device=f.device)
            return f + eps / torch.sqrt(self._per_output(self.noise.tau_mean, f))
        eps = torch.randn(f.shape[:-1], generator=generator, dtype=f.dtype, device=f.device)
        return f[..., 0] + eps / float(self.noise.tau_mean) ** 0.5

    def start_from(self, noise_variance: float | np.ndarray, n_rows: float) -> None:
        """Start ``q(tau)`` at the posterior that ``n_rows`` observations with variance
        ``noise_variance`` would give (i-BLM's evidence-maximising estimate of the noise
        of the output layer's regression on a minibatch of ``n_rows`` rows)."""
        if self.noise.learn:
            self.noise.a = self.noise.a0 + 0.5 * n_rows
            self.noise.b = self.noise.b0 + 0.5 * n_rows * noise_variance

    def update(self, f: Tensor, y: Tensor, scale: float, N: float, step: float, weights: Tensor | None = None) -> None:
        """Natural-gradient step on ``q(tau)`` from the outputs ``f`` (S, M, 1) of a training
        step on targets ``y`` (M,); ``scale = N / (M S)`` scales the squared residuals to ``N``.

        ``weights`` (M,): the rows' sample weights rescaled to mean one over the training
        set, with ``N`` then the sum of the sample weights (the effective number of
        observations): the squared residuals are weighted, as duplicated rows would be.
        With ``k`` outputs, each output's precision gets its own squared residuals."""
        if self.multi:
            r = f - y
            sq = r * r if weights is None else r * r * weights[:, None]
            per_output = sq.reshape(-1, r.shape[-1]).sum(0).double().cpu().numpy()
            self.noise.update(scale * per_output, N, step)
            return
        r = f[..., 0] - y
        sq = r * r if weights is None else r * r * weights
        self.noise.update(scale * float(sq.sum()), N, step)

    def kl(self) -> float:
        return self.noise.kl()

    def get_state(self) -> tuple[Any, Any] | None:
        if not self.noise.learn:
            return None
        return (np.copy(self.noise.a), np.copy(self.noise.b)) if self.multi else (self.noise.a, self.noise.b)

    def set_state(self, state: tuple[Any, Any] | None) -> None:
        if state is not None:
            self.noise.a, self.noise.b = state


class Bernoulli(_NoParameters):
    """Bernoulli likelihood of one logit; ``y`` in {0, 1} (float)."""

    n_outputs = 1

    def nll(self, f: Tensor, y: Tensor) -> Tensor:
        z = f[..., 0]
        return torch.nn.functional.softplus(z) - y * z

    def nll_grad(self, f: Tensor, y: Tensor, g: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """See the module docstring (``d nll / d z = sigmoid(z) - y``, as autograd evaluates it)."""
        z = f[..., 0]
        nll = torch.nn.functional.softplus(z) - y * z
        # the gradient reaching nll, materialised as autograd's is (the layout decides
        # whether softplus_backward's exp is vectorised, hence its last bit)
        gz = torch.ones_like(z) if g is None else g.expand_as(z).contiguous()
        dz = torch.ops.aten.softplus_backward(gz, z, 1.0, 20.0) + (-gz) * y
        return nll, dz.unsqueeze(-1)

    def sample(self, f: Tensor, generator: torch.Generator | None = None) -> Tensor:
        _check_finite(f)
        return torch.bernoulli(torch.sigmoid(f[..., 0]), generator=generator)


class Categorical(_NoParameters):
    """Categorical likelihood of ``K`` logits; ``y`` integer class indices."""

    def __init__(self, n_classes: int) -> None:
        self.n_outputs = n_classes

    def nll(self, f: Tensor, y: Tensor) -> Tensor:
        idx = y.expand(f.shape[:-1]).unsqueeze(-1)
        return torch.logsumexp(f, -1) - f.gather(-1, idx)[..., 0]

    def nll_grad(self, f: Tensor, y: Tensor, g: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """See the module docstring (``d nll / d f = softmax(f) - onehot(y)``, as autograd
        evaluates it)."""
        idx = y.expand(f.shape[:-1]).unsqueeze(-1)
        lse = torch.logsumexp(f, -1)
        nll = lse - f.gather(-1, idx)[..., 0]
        df = torch.exp(f - lse.unsqueeze(-1))
        if g is None:
            df.scatter_add_(-1, idx, torch.full_like(nll, -1.0).unsqueeze(-1))
        else:
            gb = g.expand_as(nll).unsqueeze(-1)
            df = gb * df
            df.scatter_add_(-1, idx, -gb)
        return nll, df

    def sample(self, f: Tensor, generator: torch.Generator | None = None) -> Tensor:
        _check_finite(f)
        p = torch.softmax(f, -1).reshape(-1, f.shape[-1])
        return torch.multinomial(p, 1, generator=generator).reshape(f.shape[:-1])


class GaussianNoise:
    """Noise precision ``tau`` of a Gaussian likelihood (on standardised targets).

    ``learn=False``: ``tau`` is fixed. ``learn=True``: a ``Gamma(a0, b0)`` prior
    (shape, rate; the estimators' ``noise_prior``)
    and a variational ``q(tau) = Gamma(a, b)``, updated by the natural gradient
    of the ELBO with the same step size ``beta`` as the weight precision. For a
    conjugate exponential-family factor that step is the stochastic
    variational inference update (Hoffman et al., 2013)::

        a <- (1 - beta) a + beta (a0 + N / 2)
        b <- (1 - beta) b + beta (b0 + (N / (M S)) sum_{i,s} r_is^2 / 2)

    whose fixed point is the optimal ``q(tau)`` given ``q(theta)``. With sample
    weights ``w_i``, ``N`` is ``sum_i w_i`` (the effective number of observations)
    and the squared residuals are weighted by ``w_i`` rescaled to mean one, so the
    update equals that on the data with row ``i`` repeated ``w_i`` times.

    ``n_outputs=k``: ``k`` independent precisions (one per target), each with the
    same prior; ``a``, ``b`` (or ``tau``) and every property are then arrays of shape (k,).
    """

    n_outputs: int | None = None
    # float, or ndarray of shape (n_outputs,); a and b are None for a fixed precision
    a: Any
    b: Any
    tau: Any

    def __init__(
        self,
        tau: float | ArrayLike = 1.0,
        learn: bool = True,
        a0: float = 6.0,
        b0: float = 6.0,
        n_outputs: int | None = None,
    ) -> None:
        self.learn = bool(learn)
        self.a0, self.b0 = float(a0), float(b0)
        #: None: one target (float parameters); k: ``k`` targets (arrays of shape (k,)).
        self.n_outputs = None if n_outputs is None else int(n_outputs)
        if self.learn:
            self.a, self.b = self.a0, self.b0
            if self.n_outputs is not None:
                self.a, self.b = np.full(self.n_outputs, self.a0), np.full(self.n_outputs, self.b0)
        else:
            self.a, self.b = None, None
            if self.n_outputs is None:
                self.tau = float(tau)  # type: ignore[arg-type]  # a number here
            else:
                self.tau = np.broadcast_to(np.asarray(tau, dtype=np.float64), (self.n_outputs,)).copy()

    @property
    def tau_mean(self) -> float | np.ndarray:
        return self.a / self.b if self.learn else self.tau

    @property
    def log_tau_mean(self) -> float | np.ndarray:
        if self.n_outputs is not None:
            return digamma(self.a) - np.log(self.b) if self.learn else np.log(self.tau)
        if self.learn:
            return float(digamma(self.a) - math.log(self.b))
        return math.log(self.tau)

    @property
    def noise_variance(self) -> float | np.ndarray:
        """Posterior expectation of the noise variance ``E[1/tau]`` (``b / (a - 1)``).

        For ``a <= 1`` (a vague prior before any data) that expectation is infinite;
        the plug-in ``1 / E[tau] = b / a`` is returned instead.
        """
        if self.n_outputs is not None:
            if self.learn:
                return np.where(self.a > 1.0, self.b / np.maximum(self.a - 1.0, 1e-300), self.b / self.a)
            return 1.0 / self.tau
        if self.learn:
            return self.b / (self.a - 1.0) if self.a > 1.0 else self.b / self.a
        return 1.0 / self.tau

    def update(self, sq_res_sum_scaled: float | np.ndarray, N: float, beta: float) -> None:
        """Natural-gradient step; ``sq_res_sum_scaled`` estimates ``sum_i E_q[r_i^2]``."""
        if not self.learn:
            return
        self.a = (1.0 - beta) * self.a + beta * (self.a0 + 0.5 * N)
        self.b = (1.0 - beta) * self.b + beta * (self.b0 + 0.5 * sq_res_sum_scaled)

    def kl(self) -> float:
        """``KL(Gamma(a, b) || Gamma(a0, b0))`` (0 for a fixed precision; summed over outputs)."""
        if not self.learn:
            return 0.0
        a, b, a0, b0 = self.a, self.b, self.a0, self.b0
        if self.n_outputs is not None:
            return float(
                np.sum(
                    (a - a0) * digamma(a) - gammaln(a) + gammaln(a0) + a0 * (np.log(b) - np.log(b0)) + a * (b0 - b) / b
                )
            )
        return float(
            (a - a0) * digamma(a) - gammaln(a) + gammaln(a0) + a0 * (math.log(b) - math.log(b0)) + a * (b0 - b) / b
        )
