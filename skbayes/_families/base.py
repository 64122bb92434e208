"""The posterior family interface: what a method provides to the training loop.

A family is a small object built from the estimator's parameters at the start of
every ``fit`` / ``partial_fit`` (so ``set_params`` between warm-started fits takes
effect). It holds hyperparameters only; everything that changes during training
lives in the posterior object and in a plain ``state`` dict of tensors and numbers,
both owned by the estimator (they deep-copy for snapshots and pickle with it).

The loop (:mod:`skbayes._loop`) owns the step counter ``t_``, the likelihood's own
update (the regressors' noise precision), snapshots, divergence and stopping; a
family never touches them. One training step is::

    result = family.step(posterior, state, Xb, yb, ctx)   # updates posterior/state in place

and the loop then feeds ``result.outputs`` to the likelihood's update with
``result.noise_step`` and advances ``t_``.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Generic, cast

import torch
from typing_extensions import TypeVar

from .._networks import NetworkForward
from .._prior import tensor_groups
from .._validation import NONE, Interval, Options
from ..posteriors._common import GaussianTensors, PosteriorTensors

#: Constraint of a weight prior that can be learned: 'auto' or a positive precision.
LEARNABLE_PRIOR = [Options(("auto",)), Interval(numbers.Real, 0, None, closed="neither")]
#: Constraint of ``decay_epochs``: a positive number of epochs, or None (constant steps).
DECAY_EPOCHS = [Interval(numbers.Real, 0, None, closed="neither"), NONE]

if TYPE_CHECKING:
    from .._memory import Layer, MemoryPart
    from .._start import InitialPrecision

#: The posterior class a family fits (each family names its own: ``SLANGFamily`` is a
#: ``PosteriorFamily[LowRankGaussian]``); the bare ``PosteriorFamily`` is any family.
P = TypeVar("P", bound=PosteriorTensors, default=Any)

#: A family's training state: optimiser moments, factors, counters (tensors and numbers, so
#: that it deep-copies for snapshots and pickles with the estimator).
FamilyState = dict[str, Any]


@dataclass
class StepContext:
    """What one training step may read (all owned by the loop).

    Attributes
    ----------
    forward : NetworkForward
        Network + parameter vector -> outputs.
    likelihood : object
        Per-example negative log-likelihood ``nll(f, y)`` and ``sample(f, generator)``.
    n_train : int or float
        Training examples ``N`` (the minibatch terms are scaled to ``N``); with
        sample weights, their sum (a float).
    generator : torch.Generator
        The fit's random stream (weight samples, masks, sampled labels).
    t : int
        Training steps completed before this one.
    kl_scale : float
        KL annealing factor at step ``t`` (1 without annealing): the KL term's weight at
        the step is ``kl_weight * kl_scale`` (:meth:`PosteriorFamily.kl_factor`).
    epoch : float
        Passes through the training rows completed before this step, fractional
        (``epochs done + rows of this epoch already seen / rows``; for a stream,
        ``partial_fit``, the rows of all its steps so far over the rows it stands for).
    mc_samples : int
        Weight samples ``S`` per step.
    prior_precision : float or Tensor of shape (D,)
        The weight prior's current precision: a number for a fixed prior, a
        per-parameter vector when it is learned (``prior_precision='auto'``).
    weights : Tensor of shape (M,) or None
        Sample weights of the minibatch rows, rescaled to mean one over the
        training set (``w_i N_rows / sum_j w_j``); ``n_train`` is then the
        effective number of examples ``sum_j w_j``. The weighted problem is the
        unweighted one on the weighted empirical distribution of the rows:
        every per-example term (negative log-likelihood, gradient, curvature
        statistic) is multiplied by its row's weight once, so that
        ``(n_train / M) sum_i weights_i nll_i = (N_rows / M) sum_i w_i nll_i``.
        None without sample weights (the unweighted code path).
    """

    forward: NetworkForward
    likelihood: Any
    n_train: float
    generator: torch.Generator
    t: int
    kl_scale: float
    mc_samples: int
    prior_precision: float | torch.Tensor = 1.0
    weights: torch.Tensor | None = None
    epoch: float = 0.0


@dataclass
class StepResult:
    """What one training step gives back to the loop.

    Attributes
    ----------
    data_term : float
        Minibatch estimate, scaled to all ``N`` examples, of the expected negative
        log-likelihood ``E_q[-log p(y | X, theta)]``: ``(N / (M S)) sum_{s,i} nll_si``.
    outputs : Tensor of shape (S, M, n_outputs)
        Network outputs of the step (detached), for the likelihood's own update.
    noise_step : float
        Step size of that update (the regressors' natural-gradient step on ``q(tau)``).
    """

    data_term: float
    outputs: torch.Tensor
    noise_step: float


class PosteriorFamily(Generic[P]):
    """Base class of the posterior families (one per method), generic in the posterior class
    ``P`` it fits.

    Subclasses declare ``parameter_constraints`` (validation, merged into the
    estimator's table) and ``param_docs`` (docstring entries of their own
    parameters, see :mod:`skbayes._docs`), and implement :meth:`init_posterior`
    and :meth:`step`. The default :meth:`kl` is ``kl_weight * kl_scale *
    KL(q || N(0, prior_precision^{-1} I))``.

    Tempering: every Gaussian family maximises ``E_q[log p(y | theta)] - w KL(q || prior)``
    with ``w = kl_factor(kl_scale) = kl_weight * kl_scale``. Divided by ``w``, this is the
    ELBO of the likelihood raised to the power ``1 / w``, so a natural-gradient family
    runs its untempered update with every data statistic (the per-example gradients and
    curvature scaled to ``N`` examples) multiplied by ``1 / w`` against the prior
    precision and the entropy; the fixed point of a linear-Gaussian model is the
    posterior with precision ``lambda I + (1 / w) H`` (``H`` the data's Gauss-Newton
    matrix). :func:`tempered_precision` applies the same scaling to the starting precision.

    Parameters
    ----------
    params : dict
        The estimator's parameters (``get_params(deep=False)`` plus fixed class
        values such as VOGN's ``rank = 0``). Only those the family declares in
        :attr:`parameter_constraints` are set as attributes; the others (the network's,
        the loop's, prediction's) never reach it.
    """

    #: Validation table of the family's own parameters (see :mod:`skbayes._validation`).
    parameter_constraints: ClassVar[dict[str, list[Any]]] = {}
    #: Docstring entries of the family's own parameters and its overrides of shared ones.
    param_docs: ClassVar[dict[str, Any]] = {}
    #: Docstring entries of the family's fitted attributes (``posterior_``, ``loss_curve_``...).
    attr_docs: ClassVar[dict[str, Any]] = {}
    #: Parameters named in divergence and instability warnings (besides ``learning_rate``).
    step_size_names: ClassVar[tuple[str, ...]] = ()
    #: Parameters fixed in the posterior's structure when a fit starts (besides the network's,
    #: ``dtype`` and ``device``): a continuing fit cannot apply a change of them.
    structural_params: ClassVar[tuple[str, ...]] = ()
    #: Parameters added after models could be saved, with the value that gives the earlier
    #: behaviour: an estimator unpickled from a save without them gets that value.
    params_added: ClassVar[dict[str, Any]] = {}

    #: Weight ``w`` of the KL term (every Gaussian family has the ``kl_weight`` parameter,
    #: which sets this attribute; MC dropout has none and keeps 1).
    kl_weight: float = 1.0
    #: The step size of the mean (every family declares ``learning_rate``; 'auto' where allowed).
    learning_rate: float | str
    #: The weight prior's precision (every family declares ``prior_precision``).
    prior_precision: float | str

    def __init__(self, params: dict[str, Any]) -> None:
        declared = self.parameter_constraints
        for k, v in params.items():
            if k in declared:
                setattr(self, k, v)

    # --- what every family provides ------------------------------------------------
    def init_posterior(
        self,
        mean: torch.Tensor,
        precision: InitialPrecision | None,
        n_train: float,
        forward: NetworkForward,
        kl_scale: float,
        prior_precision: float | torch.Tensor,
    ) -> tuple[P, FamilyState]:
        """The initial ``(posterior, state)``.

        Parameters
        ----------
        mean : Tensor of shape (D,)
            Initial mean (the initialiser's).
        precision : InitialPrecision or None
            The initialiser's diagonal precision over all ``n_train`` examples and its
            data part per example (:func:`skbayes._start.initial_precision`); None for
            ``init='default'``.
        n_train : int
        forward : NetworkForward
        kl_scale : float
            KL annealing factor at step 0.
        prior_precision : float or Tensor of shape (D,)
            The weight prior's starting precision (see :class:`StepContext`).
        """
        raise NotImplementedError

    def step(
        self, posterior: P, state: FamilyState, Xb: torch.Tensor, yb: torch.Tensor, ctx: StepContext
    ) -> StepResult:
        """One training step on a minibatch; updates ``posterior`` and ``state`` in place."""
        raise NotImplementedError

    def kl(self, posterior: P, state: FamilyState, kl_scale: float, prior_precision: float | torch.Tensor) -> float:
        """The prior term of the reported objective (``loss_curve_``) under the current prior
        (a Gaussian posterior's ``kl_to_prior``; a family with another posterior overrides it)."""
        return self.kl_factor(kl_scale) * cast(GaussianTensors, posterior).kl_to_prior(prior_precision)

    def prior_groups(self, forward: NetworkForward) -> list[tuple[str, torch.Tensor]]:
        """``(name, flat indices)`` of each group sharing one learned prior precision:
        every parameter tensor (each layer's weight and bias separately)."""
        return tensor_groups(forward.layout)

    def memory_parts(
        self, layers: list[Layer], batch_size: int, mc_samples: int, itemsize: int, dense: bool = True
    ) -> list[MemoryPart]:
        """Estimated memory of the posterior with the state the family keeps, and of one
        minibatch step, as a list of :class:`~skbayes._memory.MemoryPart` (checked before
        anything is allocated). The default: a diagonal Gaussian with a few vectors of
        optimiser state (6 vectors of ``D`` numbers), and a step of ``mc_samples`` weight
        samples with their gradients (3 matrices of ``S x D``) plus the activations.

        Parameters
        ----------
        layers : list of skbayes._memory.Layer
            The network's parameterised layers.
        batch_size, mc_samples, itemsize : int
            Minibatch rows, weight samples per step, bytes per number.
        dense : bool
            The network is the built MLP (the dense-layer path; custom modules take
            per-example gradients from ``torch.func``).
        """
        from .._memory import MemoryPart, activation_bytes, n_params

        D = n_params(layers)
        S = int(mc_samples)
        return [
            MemoryPart(6 * D * itemsize, f"the posterior and its optimiser state ({D} weights)", "hidden_layer_sizes"),
            MemoryPart(
                3 * S * D * itemsize + activation_bytes(layers, S * batch_size, itemsize),
                "one minibatch step",
                "batch_size or mc_samples",
            ),
        ]

    def set_stream_size(self, state: FamilyState, n_train: float) -> None:
        """``partial_fit``: the data of the coming steps stand for ``n_train`` examples (the
        rows seen so far, or the caller's ``n_samples_total``). Families that keep the
        training-set size in ``state`` update it here; the others read ``ctx.n_train``."""

    # --- shared helpers ---------------------------------------------------------------
    def kl_factor(self, kl_scale: float) -> float:
        """Weight ``w`` of the KL term at a step: the ``kl_weight`` parameter times the
        annealing factor ``kl_scale``."""
        return float(self.kl_weight) * kl_scale

    def step_sizes(self) -> str:
        """``name=value`` of the step sizes, for warnings."""
        names = ("learning_rate",) + tuple(self.step_size_names)
        return ", ".join(f"{n}={format_value(getattr(self, n))}" for n in names)


def format_value(value: object) -> str:
    """A parameter value for a message: floats to six significant digits (``0.05 * 0.1`` reads
    0.005, not 0.005000000000000001), anything else as ``str``."""
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def weighted_sum(values: torch.Tensor, weights: torch.Tensor | None) -> torch.Tensor:
    """``sum values``, each example's term (last axis) times its weight when ``weights`` is given."""
    return values.sum() if weights is None else (values * weights).sum()


def scaled_prior(prior_precision: float | torch.Tensor, kl_scale: float) -> float | torch.Tensor:
    """``prior_precision * kl_scale``: a float for a fixed prior (computed as before the
    prior could be learned, so fixed-prior fits are bitwise unchanged), else a tensor."""
    if isinstance(prior_precision, torch.Tensor) and prior_precision.dim() > 0:
        return prior_precision * kl_scale
    return float(prior_precision) * kl_scale


def start_precision(mean: torch.Tensor, prior_precision: float | torch.Tensor, n_train: float) -> torch.Tensor:
    """``prior_precision + n_train`` as a (D,) tensor: the prior plus one unit of curvature
    per training example, where families start without initialiser variances."""
    if isinstance(prior_precision, torch.Tensor) and prior_precision.dim() > 0:
        return prior_precision + float(n_train)
    return torch.full_like(mean, float(prior_precision) + float(n_train))


#: Floor of the KL weight ``w`` where a family divides its data statistics by it (an
#: annealing schedule can start at ``gamma / (1 + exp(a b))``, far below any useful value).
MIN_KL_FACTOR = 1e-8


def step_decay(epoch: float, decay_epochs: float | None) -> float:
    """``1 + epoch / decay_epochs``: a family's decayed step sizes are its constant ones divided
    by it after ``epoch`` passes through the data (:attr:`StepContext.epoch`); 1 with
    ``decay_epochs=None`` (constant steps)."""
    return 1.0 if decay_epochs is None else 1.0 + epoch / float(decay_epochs)


def data_factor(kl_factor: float) -> float:
    """``1 / w``, the factor of the data statistics in a tempered natural-gradient update
    (``w`` floored at :data:`MIN_KL_FACTOR`)."""
    return 1.0 / max(float(kl_factor), MIN_KL_FACTOR)


def tempered_precision(total: torch.Tensor, prior_precision: float | torch.Tensor, kl_factor: float) -> torch.Tensor:
    """A starting precision ``lambda + data`` with its data part scaled by ``1 / w``:
    ``lambda + max(total - lambda, 0) / w``; ``total`` itself (the same tensor) at ``w = 1``."""
    if kl_factor == 1.0:
        return total
    return prior_precision + (total - prior_precision).clamp_min(0.0) * data_factor(kl_factor)


def kl_annealing_scale(kl_annealing: Sequence[float] | None, t: int) -> float:
    """KL annealing weight ``gamma / (1 + exp(-a (t - b)))`` at step ``t`` (App. E.9 of
    the i-BLM paper); 1 without annealing."""
    if kl_annealing is None:
        return 1.0
    g, a, b = (float(v) for v in kl_annealing)
    z = -a * (t - b)
    return g / (1.0 + math.exp(min(z, 700.0)))


#: Step size of the regressors' natural-gradient update of the noise posterior ``q(tau)`` in
#: every family whose own steps have no such rate (SLANG and VOGN use their ``beta``).
NOISE_STEP = 0.05

#: Adam's default moment decay rates and epsilon (those of ``torch.optim.Adam``).
ADAM_BETAS = (0.9, 0.999)
ADAM_EPS = 1e-8


def adam_update(
    param: torch.Tensor,
    grad: torch.Tensor,
    state: FamilyState,
    key: str,
    lr: float,
    betas: tuple[float, float] = ADAM_BETAS,
    eps: float = ADAM_EPS,
) -> torch.Tensor:
    """One Adam step on ``param`` (returns the new tensor), ``torch.optim.Adam``'s arithmetic.

    The first and second moments live in ``state[key + "_m"]`` and ``state[key + "_v"]``
    and the step count in ``state["step"]`` (advanced by the caller once per step, before
    the call), so the whole optimiser state is a plain dict of tensors and an int: it
    deep-copies (snapshots, divergence recovery) and pickles with the estimator::

        m <- b1 m + (1 - b1) g,     v <- b2 v + (1 - b2) g^2
        param <- param - (lr / (1 - b1^t)) m / (sqrt(v / (1 - b2^t)) + eps)
    """
    b1, b2 = betas
    t = int(state["step"])
    m = state[key + "_m"].mul_(b1).add_(grad, alpha=1.0 - b1)
    v = state[key + "_v"].mul_(b2).addcmul_(grad, grad, value=1.0 - b2)
    denom = (v.sqrt() / math.sqrt(1.0 - b2**t)).add_(eps)
    return param - (lr / (1.0 - b1**t)) * m / denom
