"""Bayes by Backprop (Blundell et al., 2015): mean-field Gaussian VI with reparameterised
gradients and Adam, with the local reparameterisation trick (Kingma et al., 2015) for
dense layers."""

from __future__ import annotations

import numbers
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

from .._curvature import neg_elbo_estimate, neg_elbo_gradients
from .._docs import PARAMS, E
from .._validation import BOOLEAN, Interval
from ..posteriors import SoftplusGaussian
from .base import (
    LEARNABLE_PRIOR,
    NOISE_STEP,
    FamilyState,
    PosteriorFamily,
    StepContext,
    StepResult,
    adam_update,
    start_precision,
    tempered_precision,
)

if TYPE_CHECKING:
    from .._networks import NetworkForward
    from .._start import InitialPrecision

#: Docstring entries of the first-order baselines (BBB and MC dropout), worded for the fit
#: of a loss by Adam where SLANG's wording speaks of natural-gradient steps.
FIRST_ORDER_DOCS = {
    "mc_samples": E(
        "int",
        """
        Monte Carlo samples ``S`` per training step.""",
    ),
    "init": E(
        "{'iblm', 'iblm_random', 'default', 'uninformative', 'heuristic', 'xavier', 'orthogonal', 'lsuv'}",
        """
        Initial mean: 'default' is PyTorch's initialisation, 'iblm' the layer-wise
        Bayesian linear regressions of Rossi et al. (2019) ('iblm_random' with the
        paper's random minibatches), the others the i-BLM paper's baselines (see
        the initialisation page of the documentation).""",
    ),
    "kl_annealing": E(
        "tuple (gamma, a, b) or None",
        """
        Scale the prior term by ``gamma / (1 + exp(-a (t - b)))`` at step ``t``.""",
    ),
    "early_stopping": E(
        "bool",
        """
        Hold out ``validation_fraction`` of the training data and stop when its
        predictive log-likelihood (16 samples) has not improved by ``tol`` for
        ``n_iter_no_change`` epochs; the best state is kept.""",
    ),
    "n_iter_no_change": E(
        "int",
        """
        Epochs without improvement (of the training loss, or of the validation
        score with ``early_stopping``) before training stops.""",
    ),
    "tol": PARAMS["tol"],  # the same rule as every network estimator's
    "random_state": E(
        "int, RandomState instance or None",
        """
        Seeds the initialisation, minibatch order, Monte Carlo noise and the
        prediction samples. Predictions of a fitted model are always deterministic.""",
    ),
    "verbose": E(
        "bool",
        """
        Show a progress bar with the running training loss.""",
    ),
    "noise_precision": E(
        "'auto' or float",
        """
        Precision of the Gaussian observation noise in the units of ``y``.
        'auto' learns it: the Gamma prior ``noise_prior`` on the standardised scale and a
        Gamma variational posterior updated after every step by the conjugate
        natural-gradient (SVI) step of size 0.05, as in the Kronecker-factored
        estimators. A float fixes it.""",
    ),
}


class BBBFamily(PosteriorFamily[SoftplusGaussian]):
    """Mean-field Gaussian with softplus standard deviations, fitted by Adam on the
    reparameterised negative ELBO."""

    parameter_constraints = {
        "prior_precision": LEARNABLE_PRIOR,
        "learning_rate": [Interval(numbers.Real, 0, None, closed="neither")],
        "kl_weight": [Interval(numbers.Real, 0, None, closed="neither")],
        "local_reparam": [BOOLEAN],
    }
    local_reparam: bool

    param_docs = {
        **{k: v for k, v in FIRST_ORDER_DOCS.items() if k != "kl_annealing"},  # the shared schedule on kl_weight
        "local_reparam": E(
            "bool",
            """
            Use the local reparameterisation trick for the dense layers: sample each
            example's pre-activations from ``N(h mu_W^T + mu_b, h^2 sigma_W^2 + sigma_b^2)``
            instead of one weight sample per step shared by the minibatch (the same
            expected gradient, lower variance, about twice the matmuls). Applies when
            the network is a ``torch.nn.Sequential`` of ``Linear`` layers and
            element-wise activations (the built MLP); any other ``module`` falls back
            to sampling the weights.""",
        ),
        "learning_rate": E(
            "float or 'auto'",
            """
            Adam's step size on ``(mu, rho)``. 'auto' is the value the defaults
            protocol chose for this estimator: {auto_learning_rate} Adam moves every
            weight by about this much per step, so a step that suits a small network
            leaves a large one overconfident.""",
        ),
    }
    attr_docs = {
        "loss_curve_": E(
            "list of float",
            """
            Negative ELBO per epoch per training example: the average minibatch
            estimate of ``E_q[-log p(y | X, theta)]`` over the epoch plus
            ``kl_weight * KL(q || prior)`` at its end (regressors: on standardised
            targets, with the noise precision's KL).""",
        ),
        "posterior_": E(
            "SoftplusGaussian",
            """
            The mean-field posterior: ``mean``, ``rho``, ``sigma``, ``variance()``,
            ``sample(n, random_state)``, ``kl_to_prior(prior_precision)``, and for
            small models ``precision()`` and ``covariance()`` (diagonal).""",
        ),
    }

    def init_posterior(
        self,
        mean: Tensor,
        precision: InitialPrecision | None,
        n_train: float,
        forward: NetworkForward,
        kl_scale: float,
        prior_precision: float | Tensor,
    ) -> tuple[SoftplusGaussian, FamilyState]:
        kf = self.kl_factor(kl_scale)
        if precision is None:
            # the prior plus one unit of curvature per training example (as SLANG and VOGN)
            if kf == 1.0 and not (isinstance(prior_precision, torch.Tensor) and prior_precision.dim() > 0):
                var = torch.full_like(mean, 1.0 / (float(prior_precision) + float(n_train)))
            else:  # a learned prior, or tempered: lam + N / kl_weight
                var = 1.0 / tempered_precision(start_precision(mean, prior_precision, n_train), prior_precision, kf)
        else:
            var = 1.0 / tempered_precision(precision.total, prior_precision, kf)  # data part / kl_weight
        post = SoftplusGaussian.from_variance(mean.clone(), var.clone())
        z = torch.zeros_like(mean)
        return post, {"step": 0, "mu_m": z.clone(), "mu_v": z.clone(), "rho_m": z.clone(), "rho_v": z.clone()}

    def neg_elbo_estimate(
        self, mean: Tensor, rho: Tensor, Xb: Tensor, yb: Tensor, ctx: StepContext
    ) -> tuple[Tensor, Tensor, Tensor]:
        """Unbiased minibatch estimate of the negative ELBO at ``(mean, rho)``.

        ``(N / (M S)) sum_{s, i} -log p(y_i | x_i, theta_s) + kl_weight * KL(q || prior)``
        with ``S = mc_samples`` reparameterised samples (each term times the row's
        weight with sample weights, see :class:`~skbayes._families.base.StepContext`). Returns
        ``(estimate, data_term, outputs)``; ``estimate`` is differentiable in ``mean`` and ``rho``
        (:func:`skbayes._curvature.neg_elbo_estimate`).
        """
        return neg_elbo_estimate(ctx.forward, mean, rho, Xb, yb, ctx.likelihood, **self._objective(ctx))

    def neg_elbo_grad(
        self, mean: Tensor, rho: Tensor, Xb: Tensor, yb: Tensor, ctx: StepContext
    ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """Gradient of :meth:`neg_elbo_estimate` divided by ``n_train`` with respect to
        ``(mean, rho)``, with the same random draws; returns ``(g_mean, g_rho, data, f)``
        (:func:`skbayes._curvature.neg_elbo_gradients`: the backward pass written out on a
        dense network, autograd on any other)."""
        return neg_elbo_gradients(ctx.forward, mean, rho, Xb, yb, ctx.likelihood, **self._objective(ctx))

    def _objective(self, ctx: StepContext) -> dict[str, Any]:
        """The step's settings of the negative ELBO (keyword arguments of its estimate and gradient)."""
        return {
            "n_samples": ctx.mc_samples,
            "generator": ctx.generator,
            "n_train": ctx.n_train,
            "kl_weight": self.kl_factor(ctx.kl_scale),
            "prior_precision": ctx.prior_precision,
            "weights": ctx.weights,
            "local": bool(self.local_reparam),
        }

    def step(self, post: SoftplusGaussian, state: FamilyState, Xb: Tensor, yb: Tensor, ctx: StepContext) -> StepResult:
        """One Bayes-by-Backprop step: Adam on ``(mu, rho)`` with the reparameterised gradient."""
        # Adam on the negative ELBO per training example (Adam is invariant to the scale).
        g_mu, g_rho, data, f = self.neg_elbo_grad(post.mean_t, post.rho_t, Xb, yb, ctx)
        state["step"] += 1
        lr = float(self.learning_rate)
        post.mean_t = adam_update(post.mean_t, g_mu, state, "mu", lr)
        post.rho_t = adam_update(post.rho_t, g_rho, state, "rho", lr)
        return StepResult(float(data), f, NOISE_STEP)
