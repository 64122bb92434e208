"""SLANG (Mishkin et al., NeurIPS 2018): low-rank-plus-diagonal precision from
back-propagated per-example gradients; mean-field VOGN is its rank-0 case."""

from __future__ import annotations

import math
import numbers
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

from .._curvature import per_example_curvature
from .._docs import E
from .._validation import NONE, Interval, Options
from ..exceptions import _warn
from ..posteriors import LowRankGaussian
from ..posteriors.slang import slang_precision_update
from .base import (
    DECAY_EPOCHS,
    LEARNABLE_PRIOR,
    FamilyState,
    PosteriorFamily,
    StepContext,
    StepResult,
    data_factor,
    scaled_prior,
    start_precision,
    step_decay,
    tempered_precision,
    weighted_sum,
)

if TYPE_CHECKING:
    from .._memory import Layer, MemoryPart
    from .._networks import NetworkForward
    from .._start import InitialPrecision


def _power(t: float, p: float) -> float:
    """``t ** p``, infinite where it overflows (the decayed step sizes are then 0)."""
    try:
        return t**p
    except OverflowError:
        return math.inf


#: ``beta='auto'`` slows the precision update only on networks with at least this many weights.
#: It lies between the largest tabular networks measured (about 4,000 weights: digits,
#: breast cancer), where the slower update costs log-loss, and the smallest image network
#: (784-400-400-10: 478,000 weights), where the fast one collapses the precision to the prior.
AUTO_BETA_MIN_WEIGHTS = 100_000


#: ``beta='auto'`` below :data:`AUTO_BETA_MIN_WEIGHTS` weights, and its cap above: the rate
#: measured best on the small networks for each method, mean-field (``rank=0``: VOGN) and
#: with a low-rank part (SLANG).
AUTO_BETA_MEAN_FIELD = 0.05
AUTO_BETA_LOW_RANK = 0.01

#: The precision's time constant in epochs on networks of at least
#: :data:`AUTO_BETA_MIN_WEIGHTS` weights: ``beta='auto'`` is ``min(base, B / (epochs N))``. Four
#: for mean-field VOGN; two for SLANG, measured best of 1, 2, 4 and 8 on the full
#: Fashion-MNIST image target with one scale for all pixels (docs/slang.md).
AUTO_BETA_EPOCHS_MEAN_FIELD = 4.0
AUTO_BETA_EPOCHS_LOW_RANK = 2.0


def auto_beta(
    B: int, N: float, D: int, base: float = AUTO_BETA_MEAN_FIELD, epochs: float = AUTO_BETA_EPOCHS_MEAN_FIELD
) -> float:
    """``beta='auto'``: ``base`` (:data:`AUTO_BETA_MEAN_FIELD` for mean-field VOGN,
    :data:`AUTO_BETA_LOW_RANK` for SLANG) for networks of fewer than
    :data:`AUTO_BETA_MIN_WEIGHTS` weights ``D``; from that size ``min(base, B / (epochs N))``
    for minibatches of ``B`` of ``N`` rows, so that each row weighs ``1 / (epochs N)`` in the
    precision's moving average (a time constant of ``epochs`` passes through the data: four
    for VOGN, two for SLANG)."""
    if D < AUTO_BETA_MIN_WEIGHTS:
        return base
    return min(base, B / (epochs * N))


#: The estimators' default ``rank`` (clipped to ``D`` without a warning on smaller networks).
DEFAULT_RANK = 8


class SLANGFamily(PosteriorFamily[LowRankGaussian]):
    """Low-rank plus diagonal Gaussian, updated by SLANG's Algorithm 1 (with momentum
    and optional step-size decay)."""

    parameter_constraints = {
        "rank": [Interval(numbers.Integral, 0, None, closed="left")],
        "prior_precision": LEARNABLE_PRIOR,
        "learning_rate": [Interval(numbers.Real, 0, None, closed="neither")],
        "beta": [Interval(numbers.Real, 0, 1, closed="right"), Options(("auto",))],
        "momentum": [Interval(numbers.Real, 0, 1, closed="left")],
        "lr_decay": [Interval(numbers.Real, 0, None, closed="left"), NONE],
        "damping": [Interval(numbers.Real, 0, None, closed="left")],
        "kl_weight": [Interval(numbers.Real, 0, None, closed="neither")],
        "decay_epochs": DECAY_EPOCHS,
        "fisher": [Options(("empirical", "true"))],
    }
    rank: int
    beta: float
    momentum: float
    lr_decay: float | None
    damping: float
    decay_epochs: float | None
    fisher: str
    step_size_names = ("beta",)
    # saves from before it had constant step sizes, and before it had the true Fisher
    params_added = {"decay_epochs": None, "fisher": "empirical"}

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
            gets the fast dense-layer curvature path; any other module gets
            per-example gradients from ``torch.func.vmap(grad)``.""",
        ),
        "rank": E(
            "int",
            """
            Rank ``L`` of the precision's low-rank part ``U U^T``. ``0`` is mean-field
            VOGN; ``rank = n_params`` is full-Gaussian VOGN (a larger rank is clipped to
            ``n_params``, with a warning unless it is the default).""",
        ),
        "learning_rate": E(
            "float",
            """
            Step size ``alpha`` of the natural-gradient mean update.""",
        ),
        "beta": E(
            "float or 'auto'",
            """
            Step size of the precision update (the weight of the new curvature
            in ``P <- (1 - beta) P + beta (N * EF + lambda I)``); also the step of
            the regressors' noise-precision update. 'auto': on networks of fewer than
            100,000 weights the rate measured best on small networks, 0.05 for
            mean-field VOGN (``rank=0``) and 0.01 with a low-rank part (SLANG); on
            larger ones ``min(that rate, B / (4 N))`` (VOGN) or ``min(that rate,
            B / (2 N))`` (SLANG) for minibatches of ``B`` of the ``N`` training rows, so
            that the precision forgets its start over about four (VOGN) or two (SLANG)
            passes through the data, and never in fewer than 20 (VOGN) or 100 (SLANG)
            steps.
            On a wide network with many steps per epoch a faster update lets the
            empirical Fisher, which shrinks as the fit improves, fall below the prior
            for most weights within an epoch; on small tabular networks the slower one
            costs log-loss (see the mean-field estimators page).""",
        ),
        "momentum": E(
            "float",
            """
            Momentum on the mean: a bias-corrected moving average of the
            likelihood gradient (the prior term is added after it). ``0`` gives
            the plain update of the paper's eq. (2).""",
        ),
        "lr_decay": E(
            "float or None",
            """
            If set to ``omega``, both step sizes decay as ``alpha_t = alpha / (1 + t^omega)``
            with ``t`` the step count (the paper uses 0.51 for logistic regression).""",
        ),
        "damping": E(
            "float",
            """
            Extrinsic damping ``gamma`` of the mean step, per example: the step
            solves with ``U U^T + diag(d) + N gamma I`` instead of the precision
            (as noisy K-FAC's ``damping``). The posterior, its precision and the
            fixed point of the mean are unchanged; only the path is: a step along a
            direction the data hardly determine (precision near the prior's
            ``lambda``) is at most ``alpha |g| / gamma`` instead of
            ``alpha N |g| / lambda``, which grows with ``N``. ``0`` is the paper's
            update.""",
        ),
        "decay_epochs": E(
            "float or None",
            """
            Decay of both step sizes over the passes through the data: after ``e``
            passes (fractional; for ``partial_fit``, the rows processed over
            ``n_samples_total``, or over the rows seen when it is None)
            ``learning_rate`` and ``beta`` are scaled by ``1 / (1 + e / decay_epochs)``
            (on top of ``lr_decay``). None keeps them constant (the paper's
            algorithm). With constant steps the fit drifts after it has settled on
            small data sets: the training objective rises again and the posterior
            widens (digits: test log-loss 0.112 after 100 epochs, 0.21 after 240).
            ``SLANGClassifier`` and ``VOGNClassifier`` default to 30, chosen by the
            defaults protocol; the regressors to None.""",
        ),
        "fisher": E(
            "{'empirical', 'true'}",
            """
            The per-example gradients the precision is built from. 'empirical' (the
            paper's): the gradients at the observed targets, whose squares are the
            empirical Fisher. 'true': the gradients at targets drawn from the model at
            each step's weight sample (the mean step still follows the observed
            targets' gradient), whose squares estimate the Fisher without bias (for
            regression, the Gauss-Newton matrix); a second backward pass per step,
            with ``mc_samples=1``. The empirical Fisher weighs a row the network fits
            badly by its squared residual, so the natural-gradient step on it shrinks
            as the residual grows: a training row far outside the others (an input
            dozens of standard deviations out) can stay unfitted, and a regressor then
            learns too large a noise (see the SLANG page of the documentation).""",
        ),
        "init": E(
            "{'iblm', 'iblm_random', 'default', 'uninformative', 'heuristic', 'xavier', 'orthogonal', 'lsuv'}",
            """
            Initialisation of the posterior. 'iblm' (Rossi et al., 2019): layer by
            layer from the input, each unit's weights get the posterior of a Bayesian
            linear regression of the targets on the layer's inputs (hidden units on
            a minibatch local in the layer's input space, so that units differ; the
            output layer on a random one): mean, and the KL-optimal factorised
            precisions, rescaled from the minibatch to all ``n_samples``, as ``d``;
            ``U = 0``. 'iblm_random': the same with the paper's random minibatches
            for every layer. 'default': PyTorch's initialisation with precision
            ``(prior_precision + n_samples) I``. The others are the paper's
            baselines (see the initialisation page of the documentation).""",
        ),
    }
    attr_docs = {
        "posterior_": E(
            "LowRankGaussian",
            """
            The variational posterior: ``mean``, ``U``, ``d``, ``variance()``,
            ``sample(n, random_state)``, and for small models ``precision()`` and
            ``covariance()``. With ``rank=0`` the low-rank factor is empty (``U`` of
            shape ``(D, 0)``): a diagonal Gaussian with precision ``d``.""",
        ),
    }

    def __init__(self, params: dict[str, Any]) -> None:
        super().__init__(params)
        if getattr(self, "fisher", "empirical") == "true" and int(params.get("mc_samples", 1)) != 1:
            raise ValueError(
                f"fisher='true' draws one set of targets per weight sample and needs mc_samples=1, "
                f"got mc_samples={params['mc_samples']}."
            )

    def memory_parts(
        self, layers: list[Layer], batch_size: int, mc_samples: int, itemsize: int, dense: bool = True
    ) -> list[MemoryPart]:
        """Mean, ``d``, momentum and two ``D x L`` factors (``U`` and the spare one the update
        writes into); a step's low-rank update works on ``D x (L + S M)`` matrices (a few
        copies), and custom modules hold the per-example gradients (``S M x D``)."""
        from .._memory import MemoryPart, activation_bytes, n_params

        D = n_params(layers)
        L = min(int(self.rank), D)
        n = int(mc_samples) * int(batch_size)
        m = L + n
        # the update's eigenproblem is the smaller of D x D (W W^T, when D <= L + S M) and
        # (L + S M) x (L + S M) (the Gram matrix); see slang_precision_update
        eig = 2 * D * D if D <= m else 2 * m * m
        step = 3 * D * m + eig + (0 if dense else n * D) + 2 * int(mc_samples) * D
        return [
            MemoryPart(
                (3 + 2 * L) * D * itemsize, f"the posterior (rank {L}, {D} weights)", "rank or hidden_layer_sizes"
            ),
            MemoryPart(
                step * itemsize + activation_bytes(layers, n, itemsize),
                "one minibatch step",
                "batch_size or mc_samples (or rank)",
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
    ) -> tuple[LowRankGaussian, FamilyState]:
        D = mean.shape[0]
        L = min(int(self.rank), D)
        if int(self.rank) > max(D, DEFAULT_RANK):  # the default is clipped silently on tiny networks
            _warn(
                f"rank={self.rank} exceeds the number of weights of the network ({D}); using "
                f"rank={D}, a full-Gaussian posterior whose every step factorises a {D} x {D} matrix "
                f"(pass rank <= {D} to silence this warning).",
                UserWarning,
            )
        if precision is None:
            d0 = start_precision(mean, prior_precision, n_train)
        else:
            d0 = precision.total
        d0 = tempered_precision(d0, prior_precision, self.kl_factor(kl_scale))  # data part / kl_weight
        U0 = mean.new_zeros(L, D).T  # (D, L) view of a contiguous (L, D) tensor
        return LowRankGaussian(mean, U0, d0), {"momentum": torch.zeros_like(mean)}

    def step(self, post: LowRankGaussian, state: FamilyState, Xb: Tensor, yb: Tensor, ctx: StepContext) -> StepResult:
        """One SLANG step (Algorithm 1 with momentum and optional decay)."""
        S, M, t, N = ctx.mc_samples, Xb.shape[0], ctx.t, ctx.n_train
        decay = 1.0 + (_power(t, float(self.lr_decay)) if self.lr_decay else 0.0)
        alpha = float(self.learning_rate) / decay
        if self.beta == "auto":  # from the batch size: the largest minibatch so far, not a ragged last one
            state["batch_rows"] = max(int(state.get("batch_rows", 0)), M)
            low_rank = int(self.rank) > 0
            base = AUTO_BETA_LOW_RANK if low_rank else AUTO_BETA_MEAN_FIELD
            epochs = AUTO_BETA_EPOCHS_LOW_RANK if low_rank else AUTO_BETA_EPOCHS_MEAN_FIELD
            beta = auto_beta(state["batch_rows"], N, post.mean_t.numel(), base, epochs)
        else:
            beta = float(self.beta)
        beta = beta / decay
        if self.decay_epochs is not None:  # both step sizes decay with the epochs
            slow = step_decay(ctx.epoch, self.decay_epochs)
            alpha, beta = alpha / slow, beta / slow
        lam = scaled_prior(ctx.prior_precision, 1.0)
        theta = post.sample_t(S, generator=ctx.generator)
        # with weights, rows sqrt(w_i) g_i: the Fisher weights example i by w_i, grad_sum is sum_i w_i g_i
        curv, nll, f = per_example_curvature(
            ctx.forward, theta, Xb, yb, ctx.likelihood, weights=ctx.weights, fisher=self.fisher, generator=ctx.generator
        )
        scale = N / (M * S)
        data_term = float(scale * weighted_sum(nll, ctx.weights))
        kf = self.kl_factor(ctx.kl_scale)
        if kf != 1.0:  # tempering: the data statistics count 1 / kl_weight times against the prior
            scale = scale * data_factor(kf)
        cache = state.setdefault("cache", {})
        L = min(int(self.rank), post.n_params)
        U, d = slang_precision_update(
            post.U_t, post.d_t, curv, scale, beta, lam, self.rank, cache=cache, out=post.spare_factor(L)
        )
        # momentum: bias-corrected moving average of the likelihood gradient
        gamma = float(self.momentum)
        mom = state["momentum"]
        mom.mul_(gamma).add_(curv.grad_sum(), alpha=(1.0 - gamma) * scale)
        post.set_factors(U, d, scaled_gram=cache.pop("scaled_gram", None))
        c = 1.0 - gamma ** (t + 1)
        if isinstance(lam, float):
            rhs = torch.add(mom, post.mean_t, alpha=lam * c)  # (1 - gamma^(t+1)) (m_hat + lam mu)
        else:
            rhs = mom + (lam * c) * post.mean_t
        shift = N * float(self.damping)  # damping: the mean step only, per (tempered) example
        if kf != 1.0:
            shift = shift * data_factor(kf)
        step = post.solve_t(rhs, shift=shift)
        post.mean_t = torch.sub(post.mean_t, step, alpha=alpha / (1.0 - gamma ** (t + 1)))
        return StepResult(data_term, f, beta)
