"""Vprop and Vadam (Khan et al., ICML 2018): mean-field natural-gradient VI without
per-example gradients (the "gradient magnitude" approximation)."""

from __future__ import annotations

import numbers
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from .._curvature import minibatch_gradients
from .._docs import E
from .._validation import Interval, Options
from ..posteriors import DiagonalGaussian
from .base import (
    DECAY_EPOCHS,
    LEARNABLE_PRIOR,
    NOISE_STEP,
    FamilyState,
    PosteriorFamily,
    StepContext,
    StepResult,
    data_factor,
    format_value,
    scaled_prior,
    step_decay,
    weighted_sum,
)

if TYPE_CHECKING:
    from .._memory import Layer, MemoryPart
    from .._networks import NetworkForward
    from .._start import InitialPrecision

METHODS = ("vadam", "vprop")

#: ``learning_rate='auto'``: an Adam step for Vadam, a natural-gradient step for Vprop.
AUTO_LEARNING_RATE = {"vadam": 0.01, "vprop": 0.05}


class VadamFamily(PosteriorFamily[DiagonalGaussian]):
    """Diagonal Gaussian ``N(mu, diag(N s + lambda)^{-1})`` with Vadam's or Vprop's update."""

    parameter_constraints = {
        "method": [Options(METHODS)],
        "prior_precision": LEARNABLE_PRIOR,
        "learning_rate": [Interval(numbers.Real, 0, None, closed="neither"), Options(("auto",))],
        "beta1": [Interval(numbers.Real, 0, 1, closed="left")],
        "beta2": [Interval(numbers.Real, 0, 1, closed="left")],
        "kl_weight": [Interval(numbers.Real, 0, None, closed="neither")],
        "decay_epochs": DECAY_EPOCHS,
    }
    method: str
    beta1: float
    beta2: float
    decay_epochs: float | None
    params_added = {"decay_epochs": None}  # saves from before it had constant step sizes

    param_docs = {
        "module": E(
            "callable or torch.nn.Module",
            """
            A custom network instead of the built one: a callable
            ``module(n_features_in, n_outputs)`` returning a ``torch.nn.Module``
            (a class works), or a module instance (deep-copied, never modified).
            It receives float tensors of shape ``(batch, n_features_in)``; a conv net
            reshapes them itself (e.g. with ``torch.nn.Unflatten``). Batch normalisation
            layers are rejected (they make a row's output depend on the other rows). A
            ``torch.nn.Sequential`` of ``Linear`` layers and element-wise activations
            runs all weight samples of a step in one batched forward and backward
            pass; any other module runs one ordinary forward and backward pass per
            weight sample (no per-example gradients either way).""",
        ),
        "method": E(
            "{'vadam', 'vprop'}",
            """
            The update: 'vadam' (Adam-like: momentum on the gradient, bias
            corrections, square root of the second moment in the mean step) or
            'vprop' (RMSprop-like natural-gradient step, no momentum). See above.""",
        ),
        "learning_rate": E(
            "float or 'auto'",
            """
            Step size ``alpha`` of the mean update. 'auto' is, for 'vadam' (an Adam
            step: each weight moves by about ``alpha`` per step), 0.01 on networks of
            fewer than 20,000 weights and 0.003 on larger ones, where the larger step
            leaves an overconfident network (the defaults protocol's image group); for
            'vprop' (a natural-gradient step, as VOGN's default) 0.05 on every network.""",
        ),
        "beta1": E(
            "float",
            """
            Decay ``gamma_1`` of Vadam's moving average ``m`` of the gradient
            (Adam's momentum). Ignored by 'vprop'.""",
        ),
        "beta2": E(
            "float",
            """
            Decay ``gamma_2`` of the moving average ``s`` of the squared minibatch
            gradient, for both methods (Vprop's rate ``beta`` of the poster is
            ``1 - beta2``). ``s`` forgets its start at rate ``1 - beta2`` per step:
            the default's time constant is 1000 steps, so a short fit keeps much of
            the initial precision.""",
        ),
        "decay_epochs": E(
            "float or None",
            """
            Decay of the mean's step size over the passes through the data: after
            ``e`` passes (fractional; for ``partial_fit``, the rows processed over
            ``n_samples_total``, or over the rows seen when it is None)
            ``learning_rate`` is scaled by ``1 / (1 + e / decay_epochs)``, as SLANG's
            and noisy K-FAC's. The precision's moving average keeps its rate
            ``1 - beta2`` (its bias correction counts steps). None keeps the step
            constant (the paper's algorithm).""",
        ),
        "init": E(
            "{'iblm', 'iblm_random', 'default', 'uninformative', 'heuristic', 'xavier', 'orthogonal', 'lsuv'}",
            """
            Initialisation of the posterior (see the initialisation page of the
            documentation). 'default': PyTorch's initialisation of the network as
            the mean and ``s0 = 1``, i.e. the precision ``(prior_precision + n_samples) I``
            SLANG and VOGN start from. The other choices give a mean and a diagonal
            precision ``d0`` over the ``n`` training samples (i-BLM's rescaled from
            its minibatches of ``iblm_batch_size`` rows, as for SLANG), turned into
            ``s0 = max(d0 - prior_precision, 0) / n``.""",
        ),
        "noise_precision": E(
            "'auto' or float",
            """
            Precision of the Gaussian observation noise, in the units of ``y``
            (1 / noise variance). 'auto' learns it (the Gamma prior ``noise_prior`` on the
            standardised scale, variational Gamma posterior updated after every
            step by a natural-gradient step of size 0.05, as for noisy K-FAC); a
            float fixes it.""",
        ),
    }
    attr_docs = {
        "posterior_": E(
            "DiagonalGaussian",
            """
            The variational posterior: ``mean``, the per-weight precision
            ``d = N s + prior_precision``, ``variance()`` (``1 / d``),
            ``sample(n, random_state)``, and for small models ``precision()`` and
            ``covariance()``.""",
        ),
    }

    def resolved_learning_rate(self) -> float:
        """The step size, with 'auto' resolved for the method."""
        if isinstance(self.learning_rate, str):  # 'auto' (validated)
            return AUTO_LEARNING_RATE[self.method]
        return float(self.learning_rate)

    def step_sizes(self) -> str:
        auto = f" = {format_value(self.resolved_learning_rate())}" if isinstance(self.learning_rate, str) else ""
        lr, b1, b2 = (format_value(v) for v in (self.learning_rate, self.beta1, self.beta2))
        return f"learning_rate={lr}{auto}, method={self.method!r}, beta1={b1}, beta2={b2}"

    def memory_parts(
        self, layers: list[Layer], batch_size: int, mc_samples: int, itemsize: int, dense: bool = True
    ) -> list[MemoryPart]:
        """Mean, precision, ``s``, ``s0`` and ``m`` (5 vectors); a step's weight samples,
        gradients and squared gradients (3 matrices of ``S x D``) and activations."""
        from .._memory import MemoryPart, activation_bytes, n_params

        D, S = n_params(layers), int(mc_samples)
        return [
            MemoryPart(6 * D * itemsize, f"the posterior and its optimiser state ({D} weights)", "hidden_layer_sizes"),
            MemoryPart(
                (3 * S * D + 2 * D) * itemsize + activation_bytes(layers, S * batch_size, itemsize),
                "one minibatch step",
                "batch_size or mc_samples",
            ),
        ]

    def init_posterior(
        self,
        mean: Tensor,
        precision: InitialPrecision | None,
        n_train: float,
        forward: NetworkForward,
        kl_scale: float,
        prior_precision: float | Tensor,
    ) -> tuple[DiagonalGaussian, FamilyState]:
        lam = scaled_prior(prior_precision, 1.0)
        if precision is None:
            s0 = torch.ones_like(mean)  # the precision N + lam SLANG and VOGN start from
        else:
            s0 = precision.per_example
        kf = self.kl_factor(kl_scale)
        n_eff = n_train if kf == 1.0 else n_train * data_factor(kf)  # tempering: N / kl_weight
        post = DiagonalGaussian(mean, n_eff * s0 + lam)
        # s = gamma_2^t s0 + v: the start's share and the data's moving average v, kept apart so
        # that Adam's bias correction reads v itself (subtracting gamma_2^t s0 from s cancels
        # catastrophically in float32 when s0 is far above the squared gradients)
        return post, {"s": s0, "s0": s0.clone(), "v": torch.zeros_like(mean), "m": torch.zeros_like(mean)}

    def step(self, post: DiagonalGaussian, st: FamilyState, Xb: Tensor, yb: Tensor, ctx: StepContext) -> StepResult:
        """One Vprop or Vadam step (see the estimators' docstrings for the update)."""
        S, M, t, N = ctx.mc_samples, Xb.shape[0], ctx.t + 1, ctx.n_train
        alpha = self.resolved_learning_rate() / step_decay(ctx.epoch, self.decay_epochs)
        b1, b2 = float(self.beta1), float(self.beta2)
        lam = scaled_prior(ctx.prior_precision, 1.0)
        kf = self.kl_factor(ctx.kl_scale)
        # tempering: the data statistics count N / w times (w = kl_weight), i.e. the
        # precision is (N / w) s + lam and the mean step's prior term is w lam / N
        n_eff = N if kf == 1.0 else N * data_factor(kf)
        lam_n = lam / n_eff
        theta = post.sample_t(S, generator=ctx.generator)  # mu + eps / sqrt(N s + lam)
        if ctx.weights is None:
            G, nll, f = minibatch_gradients(ctx.forward, theta, Xb, yb, ctx.likelihood)
        else:
            G, nll, f = minibatch_gradients(ctx.forward, theta, Xb, yb, ctx.likelihood, weights=ctx.weights)
        G = G / M  # minibatch-mean gradient of the NLL, one row per weight sample
        g = G.mean(0)
        g2 = (G * G).mean(0)  # MC estimate of E_q[g_hat**2]
        mu = post.mean_t
        v = st.get("v")
        if v is None:  # a state saved before v was kept: s - gamma_2^(t-1) s0
            v = (st["s"] - (b2 ** (t - 1)) * st["s0"]).clamp_min(0.0)
        v = b2 * v + (1.0 - b2) * g2
        s = (b2**t) * st["s0"] + v  # = b2 s_prev + (1 - b2) g2, s starting at s0
        if self.method == "vprop":
            mu = mu - alpha * (g + lam_n * mu) / (s + lam_n)
        else:
            m = b1 * st["m"] + (1.0 - b1) * (g + lam_n * mu)
            st["m"] = m
            m_hat = m / (1.0 - b1**t)
            # Adam's bias correction of the average of g_hat**2 (s started at s0, not 0)
            s_hat = v / (1.0 - b2**t)
            mu = mu - alpha * m_hat / (torch.sqrt(s_hat) + lam_n)
        st["s"], st["v"] = s, v
        post.mean_t = mu
        post.d_t = n_eff * s + lam
        scale = N / (M * S)
        return StepResult(float(scale * weighted_sum(nll, ctx.weights)), f, NOISE_STEP)
