"""The training loop: epochs of family steps, and the rules that stop them.

The loop owns what every method shares: the step counter ``t_``, the likelihood's
own update after every step (the regressors' noise precision), snapshots of the
posterior, divergence recovery, stopping, the objective curve and the progress
bar. It knows the methods only through the :class:`~skbayes._families.PosteriorFamily`
interface, and the estimator only through two small objects: :class:`TrainingState`
(what training changes, copied in from the estimator's fitted attributes before a run
and back after it) and :class:`LoopSettings` (the hyper-parameters it reads).

Stopping rules are small objects, each fed one number per epoch:

- :class:`ToleranceStop`: the training objective has not improved by ``tol`` for
  ``n_iter_no_change`` epochs (converged).
- :class:`ValidationStop`: the same on a held-out log-likelihood (``early_stopping``);
  the best epoch's state is kept.
- :class:`RiseGuard`: the objective stayed far above its best for ``patience``
  epochs (step sizes too large): stop and revert to the best epoch; the same revert
  when the epochs run out within ``patience`` epochs of such a rise.
- :func:`is_healthy` / :class:`Divergence`: non-finite values or weights beyond
  ``MAX_ABS_WEIGHT`` in an epoch: revert to its start and stop.
"""

from __future__ import annotations

import copy
import copyreg
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypedDict

import numpy as np
import torch
from sklearn.exceptions import ConvergenceWarning

from ._families.base import PosteriorFamily, StepContext, kl_annealing_scale
from ._linalg import max_abs
from .exceptions import _warn

if TYPE_CHECKING:
    from ._likelihoods import Bernoulli, Categorical, Gaussian
    from ._networks import NetworkForward
    from ._prior import WeightPrior
    from .posteriors._common import PosteriorTensors

    Likelihood = Gaussian | Bernoulli | Categorical

#: Epochs in a row (at most ``n_iter_no_change``) the training objective must stay more than
#: ``max(1, |best|)`` above its best before the fit is stopped and reverted to the best epoch.
RISE_PATIENCE = 10

#: Posterior means beyond this magnitude count as divergence (the targets are
#: standardised, so no sensible network needs weights anywhere near it).
MAX_ABS_WEIGHT = 1e8


class ToleranceStop:
    """Stop when the objective has not improved by ``tol`` for ``patience`` epochs
    (never with ``tol=None``)."""

    def __init__(self, tol: float | None, patience: int) -> None:
        self.tol, self.patience = (-math.inf if tol is None else float(tol)), int(patience)
        self.best, self.no_improve = np.inf, 0

    def update(self, loss: float) -> bool:
        """Record an epoch's objective; True when training should stop."""
        self.no_improve = self.no_improve + 1 if loss > self.best - self.tol else 0
        self.best = min(self.best, loss)
        return self.no_improve >= self.patience


class ValidationStop:
    """Stop when a validation score has not improved by ``tol`` for ``patience`` epochs
    (never with ``tol=None``: the best epoch is still tracked)."""

    def __init__(self, tol: float | None, patience: int) -> None:
        self.tol, self.patience = (-math.inf if tol is None else float(tol)), int(patience)
        self.best, self.no_improve = -np.inf, 0

    def update(self, score: float) -> tuple[bool, bool]:
        """Record an epoch's score; returns ``(is the best so far, should stop)``."""
        improved = score > self.best
        self.no_improve = self.no_improve + 1 if score < self.best + self.tol else 0
        self.best = max(self.best, score)
        return improved, self.no_improve >= self.patience


class RiseGuard:
    """Stop when the objective stays more than ``max(1, |best|)`` above its best for
    ``patience`` epochs in a row, so that a transient (a spike in the first epochs
    that training recovers from) or one noisy estimate does not stop a fit.

    The state at the end of the best epoch is the snapshot taken at the start of the
    following one: pass every epoch's starting snapshot to :meth:`epoch_start`.
    """

    def __init__(self, patience: int) -> None:
        self.patience = int(patience)
        self.best, self.n_above, self.last_was_best = np.inf, 0, False
        self.best_snapshot: Snapshot | None = None
        #: epochs since the objective was last far above its best, and the highest it was then
        self.since_above, self.peak, self.last = self.patience, -np.inf, np.inf

    def epoch_start(self, snapshot: Snapshot) -> None:
        """Offer the snapshot taken at the start of an epoch (kept when the last epoch was the best)."""
        if self.last_was_best:
            self.best_snapshot = snapshot

    def unsettled(self) -> bool:
        """Whether the objective was far above its best in one of the last ``patience`` epochs
        and the last epoch is still above it by more than half that margin: a rise the guard
        has not seen settle."""
        margin = 0.5 * max(1.0, abs(self.best))
        return self.since_above < self.patience and self.last > self.best + margin and self.best_snapshot is not None

    def update(self, loss: float) -> bool:
        """Record an epoch's objective; True when training should stop (and revert)."""
        self.last = loss
        far_above = loss > self.best + max(1.0, abs(self.best))
        self.n_above = self.n_above + 1 if far_above else 0
        if far_above:
            self.since_above, self.peak = 0, max(loss, self.peak if self.since_above < self.patience else -np.inf)
        else:
            self.since_above += 1
        if self.best_snapshot is not None and self.n_above >= self.patience:
            return True
        self.last_was_best = loss < self.best
        self.best = min(self.best, loss)
        return False


def is_healthy(posterior: PosteriorTensors) -> bool:
    """Finite posterior whose mean stays below ``MAX_ABS_WEIGHT`` in magnitude."""
    return posterior.is_finite() and max_abs(posterior.mean_t) < MAX_ABS_WEIGHT


class Divergence(Exception):
    """An epoch produced non-finite values or exploding weights."""


@dataclass
class Outcome:
    """How a run of epochs ended."""

    converged: bool = False
    diverged: bool = False
    unstable: bool = False
    interrupted: bool = False


@dataclass(frozen=True)
class LoopSettings:
    """The hyper-parameters the loop reads (read-only; the estimator's validated parameters).

    Attributes
    ----------
    name : str
        The estimator's class name, for warnings and the progress bar.
    batch_size : int
        Minibatch rows (at most the number of training rows).
    tol : float or None
        Smallest improvement of the objective (or of the validation score) that counts;
        None: no tolerance rule (train ``max_iter`` epochs, without a ``ConvergenceWarning``).
    n_iter_no_change : int
        Epochs without such an improvement before training stops.
    kl_annealing : sequence of 3 floats or None
        ``(gamma, a, b)`` of the KL annealing schedule (:func:`kl_annealing_scale`); None
        without annealing.
    mc_samples : int
        Weight samples ``S`` per step.
    verbose : bool
        Show a progress bar (``fit`` only).
    """

    name: str
    batch_size: int
    tol: float | None
    n_iter_no_change: int
    kl_annealing: Sequence[float] | None
    mc_samples: int
    verbose: bool


@dataclass(eq=False)
class TrainingState:
    """What training changes: the estimator copies its fitted attributes in before a run of
    epochs and the results back after it (the attribute each field comes from in brackets).

    The posterior, the family state, the likelihood and the prior are changed in place by
    the steps; :func:`restore` replaces the posterior and the family state by copies.

    Attributes
    ----------
    posterior : PosteriorTensors
        The variational posterior (``posterior_``).
    family_state : dict
        The family's optimiser state: tensors and numbers (``_state``).
    likelihood : Gaussian, Bernoulli or Categorical
        The likelihood, with the regressors' noise posterior (``_likelihood``).
    prior : WeightPrior
        The weight prior, fixed or learned (``_prior``).
    forward : NetworkForward
        Network + parameter vector -> outputs (``_forward``; never changed by the loop).
    rng_state : Tensor
        State of the fit's random generator on the training device (``_rng_state``).
    t : int
        Training steps completed (``t_``).
    n_iter : int
        Epochs completed (``n_iter_``).
    loss_curve : list of float
        The objective per example of every completed epoch (``loss_curve_``).
    validation_scores : list of float
        The held-out scores of this run's epochs (``validation_scores_``, early stopping).
    best_validation_score : float or None
        The best of them, set when the best epoch's state was kept (``best_validation_score_``).
    """

    posterior: PosteriorTensors
    family_state: dict[str, Any]
    likelihood: Likelihood
    prior: WeightPrior
    forward: NetworkForward
    rng_state: torch.Tensor
    t: int = 0
    n_iter: int = 0
    loss_curve: list[float] = field(default_factory=list)
    validation_scores: list[float] = field(default_factory=list)
    best_validation_score: float | None = None


# --- snapshots ------------------------------------------------------------------------
_ATOMIC = frozenset({int, float, bool, str, bytes, complex, type(None), torch.dtype, torch.device})


def deep_copy(x: Any, memo: dict[Any, Any] | None = None) -> Any:
    """``copy.deepcopy(x)`` for the training state, with the same result and a faster path for
    what it holds: plain tensors, dicts, lists, tuples and plain objects.

    ``copy.deepcopy`` spends about 20 us on each small tensor (``Tensor.__deepcopy__``'s checks)
    against 2-5 us for a ``clone``; the loop snapshots the state every epoch, which on small data
    is a few short steps. Here a
    plain strided tensor (no autograd history, no ``requires_grad``, no conjugate or negative
    bit, no Python attributes) gets a copy of its storage, shared by every tensor on that storage
    and keyed as ``copy.deepcopy`` keys it (``memo['torch']``), so views keep their aliasing and
    anything else goes through ``copy.deepcopy`` with the same ``memo``. Objects are copied
    as ``copy.deepcopy`` copies them (``__getstate__`` / ``__setstate__``); classes with their
    own copy hooks (``__deepcopy__``, ``__reduce__``, ``__reduce_ex__``, ``__slots__``,
    ``__getnewargs__``, a ``copyreg`` entry) are left to it."""
    if memo is None:
        memo = {}
    y = memo.get(id(x), _MISSING)
    if y is not _MISSING:
        return y
    cls = type(x)
    if cls in _ATOMIC:
        return x
    if cls is torch.Tensor:
        y = _copy_tensor(x, memo)
    elif cls is dict:
        y = {}
        memo[id(x)] = y
        for k, v in x.items():
            y[deep_copy(k, memo)] = deep_copy(v, memo)
        _keep_alive(x, memo)
        return y
    elif cls is list:
        y = []
        memo[id(x)] = y
        y.extend(deep_copy(v, memo) for v in x)
        _keep_alive(x, memo)
        return y
    elif cls is tuple:
        items = [deep_copy(v, memo) for v in x]
        y = memo.get(id(x), _MISSING)  # a cycle through the tuple made it already
        if y is not _MISSING:
            return y
        y = x if all(a is b for a, b in zip(items, x)) else tuple(items)
    elif _plain_class(cls):
        y = object.__new__(cls)  # cls.__new__ is object.__new__ (_plain_class)
        memo[id(x)] = y
        state = deep_copy(x.__getstate__(), memo)
        if hasattr(y, "__setstate__"):
            y.__setstate__(state)
        elif state:
            y.__dict__.update(state)
        _keep_alive(x, memo)
        return y
    else:
        return copy.deepcopy(x, memo)
    memo[id(x)] = y
    _keep_alive(x, memo)
    return y


_MISSING = object()


def _keep_alive(x: Any, memo: dict[Any, Any]) -> None:
    """As ``copy.deepcopy``: keep the originals alive while ``memo`` is, so that their ids stay theirs."""
    memo.setdefault(id(memo), []).append(x)


def _plain_class(cls: type) -> bool:
    """Whether ``copy.deepcopy`` copies instances of ``cls`` through ``object.__reduce_ex__``:
    a new object, then its ``__getstate__`` copied into it."""
    return (
        getattr(cls, "__deepcopy__", None) is None
        and cls.__reduce_ex__ is object.__reduce_ex__
        and cls.__reduce__ is object.__reduce__
        and not hasattr(cls, "__slots__")
        and not hasattr(cls, "__getnewargs__")
        and not hasattr(cls, "__getnewargs_ex__")
        and cls not in copyreg.dispatch_table
        and cls.__new__ is object.__new__
        and cls.__mro__[-1] is object
        and all(c.__flags__ & _HEAP_TYPE for c in cls.__mro__[:-1])  # classes written in Python only
    )


_HEAP_TYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class statement's class, not a builtin type


def _copy_tensor(x: torch.Tensor, memo: dict[Any, Any]) -> torch.Tensor:
    if (
        x.requires_grad
        or x.grad_fn is not None
        or x.layout != torch.strided
        or x.is_quantized
        or x.is_conj()
        or x.is_neg()
        or x.device.type not in ("cpu", "cuda")
        or x.__dict__
    ):
        return copy.deepcopy(x, memo)
    storage = x.untyped_storage()
    key = getattr(storage, "_cdata", None)  # the storage's identity, as torch's own deepcopy keys it
    if key is None:  # a torch without it: its own protocol
        return copy.deepcopy(x, memo)
    copies = memo.setdefault("torch", {})
    new = copies.get(key)
    if new is None:
        if x.storage_offset() == 0 and x.is_contiguous() and storage.nbytes() == x.numel() * x.element_size():
            y = x.clone()  # the whole storage, in one operation
            copies[key] = y.untyped_storage()
            return y
        new = storage.clone()
        copies[key] = new
    return torch.empty((0,), dtype=x.dtype, device=x.device).set_(new, x.storage_offset(), x.size(), x.stride())


class Snapshot(TypedDict):
    """Copies of everything a step changes (:func:`snapshot`)."""

    posterior: PosteriorTensors
    state: dict[str, Any]
    t: int
    likelihood: Any
    prior: list[float]


def snapshot(state: TrainingState) -> Snapshot:
    """Deep copies of everything a step changes: posterior, family state, ``t``, likelihood, prior."""
    return {
        "posterior": deep_copy(state.posterior),
        "state": deep_copy(state.family_state),
        "t": state.t,
        "likelihood": deep_copy(state.likelihood.get_state()),
        "prior": state.prior.get_state(),
    }


def restore(state: TrainingState, snap: Snapshot) -> None:
    """Put ``state`` back to a :func:`snapshot` (the snapshot stays usable)."""
    state.posterior = deep_copy(snap["posterior"])
    state.family_state = deep_copy(snap["state"])
    state.t = snap["t"]
    state.likelihood.set_state(deep_copy(snap["likelihood"]))
    state.prior.set_state(snap["prior"])


def permutation(n: int, gen: torch.Generator, device: torch.device) -> torch.Tensor:
    """The order of the rows in an epoch (tests replace it to fix the order)."""
    return torch.randperm(n, generator=gen, device=device)


def n_examples(n_rows: int, weights: torch.Tensor | None, n_train: float | None, n_total: float | None) -> float:
    """The number of examples the data terms of ``n_rows`` rows are scaled to: ``n_total``
    (``partial_fit``: the stream's), else ``n_train`` with sample weights (their sum), else
    ``n_rows``."""
    if n_total is not None:
        return n_total
    if weights is None:
        return n_rows
    if n_train is None:
        raise TypeError("n_train (the sum of the sample weights) is required with weights.")
    return n_train


def run_epoch(
    state: TrainingState,
    settings: LoopSettings,
    family: PosteriorFamily,
    X: torch.Tensor,
    y: torch.Tensor,
    gen: torch.Generator,
    weights: torch.Tensor | None = None,
    n_train: float | None = None,
    n_total: float | None = None,
    on_step: Callable[[int, torch.Tensor], None] | None = None,
) -> tuple[float, int]:
    """One pass over ``(X, y)`` (tensors of ``N`` rows) in random minibatches of
    ``settings.batch_size`` rows; returns the summed data terms and the number of steps.
    Raises :class:`Divergence` on non-finite values.

    ``weights``: None, or the rows' sample weights (shape ``(N,)``) rescaled to mean one,
    with ``n_train`` their sum before rescaling (the effective number of examples; see
    :class:`~skbayes._families.base.StepContext`). ``n_total`` (``partial_fit``): the
    number of examples the rows stand for (the stream's), which the data terms are
    scaled to instead. ``on_step``: None, or a callable given the rows and the posterior
    mean of every completed step."""
    N = X.shape[0]
    n_train = n_examples(N, weights, n_train, n_total)
    batch_size = settings.batch_size
    perm = permutation(N, gen, X.device)
    total, n_steps = 0.0, 0
    prior_precision = state.prior.value()
    for start in range(0, N, batch_size):
        idx = perm[start : start + batch_size]
        Xb, yb = X[idx], y[idx]
        wb = None if weights is None else weights[idx]
        ctx = StepContext(
            forward=state.forward,
            likelihood=state.likelihood,
            n_train=n_train,
            generator=gen,
            t=state.t,
            kl_scale=kl_annealing_scale(settings.kl_annealing, state.t),
            mc_samples=int(settings.mc_samples),
            prior_precision=prior_precision,
            weights=wb,
            # passes through the data so far: a stream's (partial_fit) are its rows processed
            # over the rows it stands for, whatever the number of calls
            epoch=state.n_iter + start / N if n_total is None else state.t * batch_size / float(n_total),
        )
        try:
            with torch.no_grad():
                res = family.step(state.posterior, state.family_state, Xb, yb, ctx)
                f = res.outputs
                if wb is None:
                    state.likelihood.update(f, yb, n_train / (f.shape[1] * f.shape[0]), n_train, res.noise_step)
                else:
                    scale = n_train / (f.shape[1] * f.shape[0])
                    state.likelihood.update(f, yb, scale, n_train, res.noise_step, weights=wb)
        except (torch.linalg.LinAlgError, FloatingPointError) as exc:  # non-finite values mid-step
            raise Divergence from exc
        state.t += 1
        total += res.data_term
        n_steps += 1
        if not math.isfinite(total) or not is_healthy(state.posterior):
            raise Divergence
        if on_step is not None:
            on_step(Xb.shape[0], state.posterior.mean_t)
    return total, n_steps


def update_prior(state: TrainingState) -> None:
    """Empirical-Bayes (M-step) update of a learned weight prior from the current posterior."""
    if state.prior.learn:
        with torch.no_grad():
            state.prior.update(state.posterior.mean_t, state.posterior.variance_t())


def objective(
    state: TrainingState, settings: LoopSettings, family: PosteriorFamily, data_term: float, n_steps: int, N: float
) -> float:
    """Per-example negative ELBO of an epoch: mean data term plus the KL terms at its end."""
    try:
        with torch.no_grad():
            kl = family.kl(
                state.posterior,
                state.family_state,
                kl_annealing_scale(settings.kl_annealing, state.t),
                state.prior.value(),
            )
            kl += state.likelihood.kl()
    except (torch.linalg.LinAlgError, FloatingPointError) as exc:  # a posterior too degenerate to evaluate
        raise Divergence from exc
    return (data_term / n_steps + kl) / N


def run_epochs(
    state: TrainingState,
    settings: LoopSettings,
    family: PosteriorFamily,
    X: torch.Tensor,
    y: torch.Tensor,
    n_epochs: int,
    incremental: bool,
    validation: Callable[[PosteriorTensors], float] | None = None,
    weights: torch.Tensor | None = None,
    n_train: float | None = None,
    n_total: float | None = None,
    on_step: Callable[[int, torch.Tensor], None] | None = None,
) -> Outcome:
    """Train ``state`` for up to ``n_epochs`` epochs on ``(X, y)`` (tensors).

    ``validation``: None, or a callable returning the held-out score of a posterior
    (early stopping). ``incremental`` (``partial_fit``): no stopping rule.
    ``weights``, ``n_train``: sample weights rescaled to mean one and their sum (see
    :func:`run_epoch`); the objective is then per effective example. ``n_total``, ``on_step``: see
    :func:`run_epoch`.
    Returns an :class:`Outcome`; warnings name the family's step sizes.
    """
    gen = torch.Generator(device=X.device)
    gen.set_state(state.rng_state)
    N = n_examples(X.shape[0], weights, n_train, n_total)
    rules = None if incremental else StoppingRules(settings, validation)
    outcome = Outcome()
    bar = None
    if settings.verbose and not incremental:
        from tqdm.auto import tqdm

        bar = tqdm(total=n_epochs, desc=settings.name, leave=True)
    for _ in range(n_epochs):
        snap = snapshot(state)
        if rules is not None:
            rules.epoch_start(snap)
        try:
            data_term, n_steps = run_epoch(state, settings, family, X, y, gen, weights, n_train, n_total, on_step)
            loss = objective(state, settings, family, data_term, n_steps, N)
        except KeyboardInterrupt:
            restore(state, snap)  # the end of the last completed epoch
            outcome.interrupted = True
            break
        except Divergence:
            restore(state, snap)
            outcome.diverged = True
            _warn_diverged(settings.name, state.n_iter, family)
            break
        update_prior(state)
        state.loss_curve.append(loss)
        state.n_iter += 1
        if bar is not None:
            bar.set_postfix(neg_elbo=f"{loss:.4f}")
            bar.update(1)
        if rules is not None and rules.stop_after_epoch(state, loss, family, outcome):
            break
    if bar is not None:
        bar.close()
    if rules is not None:
        rules.finish(state, family, outcome)
    state.rng_state = gen.get_state()
    if (
        not incremental
        and settings.tol is not None  # tol=None: a budget of epochs, not a convergence criterion
        and n_epochs > 0
        and not (outcome.converged or outcome.diverged or outcome.unstable or outcome.interrupted)
    ):
        _warn(
            f"{settings.name}: maximum iterations ({n_epochs}) reached and the optimization hasn't converged yet.",
            ConvergenceWarning,
        )
    return outcome


def _warn_diverged(name: str, n_iter: int, family: PosteriorFamily) -> None:
    _warn(
        f"{name} diverged (non-finite values or weights beyond 1e8) in epoch {n_iter + 1}: "
        f"training stopped and the posterior reverted to the end of epoch {n_iter}. "
        f"The learning rate is likely too large ({family.step_sizes()}) or the "
        "inputs are badly scaled; lower the learning rate, or standardise the inputs.",
        ConvergenceWarning,
    )


class StoppingRules:
    """The stopping rules of a ``fit`` (not of ``partial_fit``), fed once per epoch: the
    :class:`RiseGuard` (off with ``kl_annealing``), then :class:`ValidationStop` with a
    ``validation`` score (``early_stopping``), else :class:`ToleranceStop` on the objective.

    :meth:`stop_after_epoch` records an epoch and restores the posterior the rule keeps;
    :meth:`finish` restores the best validation epoch's after the last epoch.
    """

    def __init__(self, settings: LoopSettings, validation: Callable[[PosteriorTensors], float] | None) -> None:
        self.name = settings.name
        self.validation = validation
        self.tol_stop = ToleranceStop(settings.tol, settings.n_iter_no_change)
        self.val_stop = ValidationStop(settings.tol, settings.n_iter_no_change) if validation is not None else None
        self.guard = None
        if settings.kl_annealing is None:
            self.guard = RiseGuard(min(RISE_PATIENCE, int(settings.n_iter_no_change)))
        self.best_val_snap: Snapshot | None = None

    def epoch_start(self, snap: Snapshot) -> None:
        """Record the state at the start of an epoch (the end of the previous one)."""
        if self.guard is not None:
            self.guard.epoch_start(snap)

    def stop_after_epoch(self, state: TrainingState, loss: float, family: PosteriorFamily, outcome: Outcome) -> bool:
        """Record an epoch's objective ``loss``; True when training stops (``outcome`` says why)."""
        guard = self.guard
        if guard is not None and guard.update(loss) and guard.best_snapshot is not None:
            restore(state, guard.best_snapshot)
            outcome.unstable = True
            _warn(
                f"{self.name}: the training objective per example (loss_curve_) rose "
                f"from {guard.best:.4g} to {loss:.4g} and stayed up for {guard.n_above} epochs (epoch "
                f"{state.n_iter}): training stopped and the "
                f"posterior reverted to the end of its best epoch. The step sizes are likely too "
                f"large for this problem ({family.step_sizes()}); "
                "lower them, or use early_stopping.",
                ConvergenceWarning,
            )
            return True
        if self.val_stop is not None and self.validation is not None:
            score = self.validation(state.posterior)
            state.validation_scores.append(score)
            improved, stop = self.val_stop.update(score)
            if improved:
                self.best_val_snap = snapshot(state)
        else:
            stop = self.tol_stop.update(loss)
            if stop and guard is not None and guard.best_snapshot is not None and loss > guard.best:
                # the objective has not improved for n_iter_no_change epochs: keep the best
                # epoch's posterior, not the last one (single-sample steps drift past the optimum)
                restore(state, guard.best_snapshot)
        if stop:
            outcome.converged = True
        return stop

    def finish(self, state: TrainingState, family: PosteriorFamily, outcome: Outcome) -> None:
        """After the last epoch: with early stopping, the best validation epoch's posterior;
        without it, when the epochs ran out within ``patience`` epochs of the objective being far
        above its best and the last epoch is still well above it (a rise the :class:`RiseGuard`
        had no epochs left to see settle), the best epoch's posterior."""
        if self.val_stop is not None:
            if self.best_val_snap is not None:
                restore(state, self.best_val_snap)
                state.best_validation_score = self.val_stop.best
            return
        guard = self.guard
        if guard is None or guard.best_snapshot is None or not guard.unsettled():
            return
        if outcome.converged or outcome.diverged or outcome.unstable or outcome.interrupted:
            return
        restore(state, guard.best_snapshot)
        outcome.unstable = True
        _warn(
            f"{self.name}: the training objective per example (loss_curve_) rose from {guard.best:.4g} "
            f"to {guard.peak:.4g} within the last {guard.patience} epochs and the epochs ran out (epoch "
            f"{state.n_iter}): the posterior reverted to the end of its best epoch. The step sizes are "
            f"likely too large for this problem ({family.step_sizes()}); lower them, or use early_stopping.",
            ConvergenceWarning,
        )


#: A stream whose runs test (:func:`stream_order_z`, classifiers) falls below minus this many
#: standard deviations, or whose trend test (:func:`stream_trend_z`, regressors) rises above
#: it, warns (``StreamOrderWarning``); a shuffled stream gets there with probability about 1e-9.
STREAM_ORDER_Z = 6.0

#: Rows a stream must have seen before its order is judged.
STREAM_ORDER_MIN_ROWS = 20


def stream_order_update(state: dict[str, Any] | None, labels: np.ndarray, n_levels: int) -> dict[str, Any]:
    """Add one ``partial_fit`` call's class labels (integers in ``[0, n_levels)``) to a
    stream's runs statistics.

    A call trains on its rows in a random order, so only the order of the calls matters:
    the changes between consecutive rows are counted as their mean under a random order
    within the call, ``(m - 1) - sum_k c_k (c_k - 1) / m`` for a call of ``m`` rows with
    ``c_k`` of class ``k``, plus the chance ``1 - sum_k p_k p'_k`` that the call's first
    row differs from the previous call's last (``p``, ``p'``: the two calls' class
    proportions). Calls of one row count the changes exactly. ``state`` (None to start):
    a plain dict (numpy arrays and numbers, so that it pickles and saves with skops)."""
    if state is None:
        state = {"n": 0, "counts": np.zeros(n_levels, dtype=np.int64), "changes": 0.0, "last": None, "warned": False}
    labels = np.asarray(labels, dtype=np.int64).ravel()
    m = labels.shape[0]
    if m == 0:
        return state
    counts = np.bincount(labels, minlength=n_levels)
    props = counts / m
    within = (m - 1.0) - float((counts * (counts - 1.0)).sum()) / m
    boundary = 0.0 if state["last"] is None else 1.0 - float(state["last"] @ props)
    state["changes"] = float(state["changes"]) + within + boundary
    state["counts"] = state["counts"] + counts
    state["n"] = int(state["n"]) + m
    state["last"] = props
    return state


def stream_order_z(state: dict[str, Any]) -> tuple[float, float, float]:
    """The runs test of a stream's classes: ``(z, changes, expected)``.

    ``changes``: the changes between consecutive rows (see :func:`stream_order_update`);
    ``expected``: their mean under a random order of the same rows, ``(n - 1) q`` with
    ``q = 1 - sum_k n_k (n_k - 1) / (n (n - 1))``; ``z``: their difference in units of the
    binomial standard deviation ``sqrt((n - 1) q (1 - q))``, close to the spread of the
    changes under a random order (the within-call means spread less, so the test errs
    towards silence). ``(0, 0, 0)`` while a single class has been seen."""
    n = int(state["n"])
    if n < 2:
        return 0.0, 0.0, 0.0
    counts = state["counts"].astype(np.float64)
    q = 1.0 - float((counts * (counts - 1.0)).sum()) / (n * (n - 1.0))
    var = (n - 1.0) * q * (1.0 - q)
    if var <= 0:
        return 0.0, 0.0, 0.0
    expected = (n - 1.0) * q
    changes = float(state["changes"])
    return (changes - expected) / math.sqrt(var), changes, expected


def stream_trend_update(state: dict[str, Any] | None, y: np.ndarray) -> dict[str, Any]:
    """Add one ``partial_fit`` call's targets ``y`` (shape ``(n_rows, n_columns)``) to a
    regression stream's trend statistics: the means and co-moments of the call number
    ``t`` (0, 1, ...; the rows of a call share it, so the order within a call does not
    count) and each target column, merged call by call (Chan et al.'s pairwise update)."""
    y = np.asarray(y, dtype=np.float64)
    if state is None:
        k = y.shape[1]
        state = {
            "n": 0,
            "calls": 0,
            "mean_t": 0.0,
            "m2_t": 0.0,
            "mean_y": np.zeros(k),
            "m2_y": np.zeros(k),
            "c_ty": np.zeros(k),
            "warned": False,
        }
    m = y.shape[0]
    if m == 0:
        return state
    n, t = float(state["n"]), float(state["calls"])
    mean_yb = y.mean(0)
    m2_yb = ((y - mean_yb) ** 2).sum(0)
    total = n + m
    d_t, d_y = t - state["mean_t"], mean_yb - state["mean_y"]
    state["m2_t"] = state["m2_t"] + d_t * d_t * n * m / total  # the call's own t spread is zero
    state["m2_y"] = state["m2_y"] + m2_yb + d_y * d_y * n * m / total
    state["c_ty"] = state["c_ty"] + d_t * d_y * n * m / total
    state["mean_t"] = state["mean_t"] + d_t * m / total
    state["mean_y"] = state["mean_y"] + d_y * m / total
    state["n"], state["calls"] = int(total), int(t) + 1
    return state


def stream_trend_z(state: dict[str, Any]) -> tuple[float, float]:
    """The trend test of the column furthest from a random order: ``(z, r)``, with ``r``
    the correlation of the call number with the target and ``z = r sqrt(n - 1)`` (about
    standard normal when the rows arrive in a random order); ``(0, 0)`` while there is
    no spread of the call number or of the targets."""
    n = int(state["n"])
    ok = (state["m2_y"] > 0) & (state["m2_t"] > 0)
    if n < 3 or not ok.any():
        return 0.0, 0.0
    r = np.where(ok, state["c_ty"] / np.sqrt(np.where(ok, state["m2_t"] * state["m2_y"], 1.0)), 0.0)
    k = int(np.argmax(np.abs(r)))
    return float(abs(r[k]) * math.sqrt(n - 1.0)), float(r[k])


class IterateAverage:
    """Weighted average of the posterior means a stream's steps visit (Polyak-Ruppert
    averaging): ``sum_k w_k mu_k / sum_k w_k``. Plain tensor and float, so it deep-copies
    and pickles with the estimator."""

    def __init__(self, mean: torch.Tensor, weight: float) -> None:
        self.total = mean * float(weight)
        self.weight = float(weight)

    def add(self, mean: torch.Tensor, weight: float) -> None:
        self.total.add_(mean, alpha=float(weight))
        self.weight += float(weight)

    def value(self) -> torch.Tensor:
        return self.total / self.weight
