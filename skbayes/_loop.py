"""The training loop: epochs of family steps, and the rules that stop them.

The loop owns what every method shares: the step counter ``t_``, the likelihood's
own update after every step (the regressors' noise precision), snapshots of the
posterior, divergence recovery, stopping, the objective curve and the progress
bar. It knows the methods only through the :class:`~skbayes._families.PosteriorFamily`
interface.

Stopping rules are small objects, each fed one number per epoch:

- :class:`ToleranceStop`: the training objective has not improved by ``tol`` for
  ``n_iter_no_change`` epochs (converged).
- :class:`ValidationStop`: the same on a held-out log-likelihood (``early_stopping``);
  the best epoch's state is kept.
- :class:`RiseGuard`: the objective stayed far above its best for ``patience``
  epochs (step sizes too large): stop and revert to the best epoch.
- :func:`is_healthy` / :class:`Divergence`: non-finite values or weights beyond
  ``MAX_ABS_WEIGHT`` in an epoch: revert to its start and stop.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import numpy as np
import torch
from sklearn.exceptions import ConvergenceWarning

from ._families.base import StepContext, kl_annealing_scale
from ._linalg import max_abs
from .exceptions import _warn

#: Epochs in a row (at most ``n_iter_no_change``) the training objective must stay more than
#: ``max(1, |best|)`` above its best before the fit is stopped and reverted to the best epoch.
RISE_PATIENCE = 10

#: Posterior means beyond this magnitude count as divergence (the targets are
#: standardised, so no sensible network needs weights anywhere near it).
MAX_ABS_WEIGHT = 1e8


class ToleranceStop:
    """Stop when the objective has not improved by ``tol`` for ``patience`` epochs."""

    def __init__(self, tol: float, patience: int):
        self.tol, self.patience = float(tol), int(patience)
        self.best, self.no_improve = np.inf, 0

    def update(self, loss: float) -> bool:
        """Record an epoch's objective; True when training should stop."""
        self.no_improve = self.no_improve + 1 if loss > self.best - self.tol else 0
        self.best = min(self.best, loss)
        return self.no_improve >= self.patience


class ValidationStop:
    """Stop when a validation score has not improved by ``tol`` for ``patience`` epochs."""

    def __init__(self, tol: float, patience: int):
        self.tol, self.patience = float(tol), int(patience)
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

    def __init__(self, patience: int):
        self.patience = int(patience)
        self.best, self.n_above, self.last_was_best = np.inf, 0, False
        self.best_snapshot = None

    def epoch_start(self, snapshot) -> None:
        if self.last_was_best:
            self.best_snapshot = snapshot

    def update(self, loss: float) -> bool:
        """Record an epoch's objective; True when training should stop (and revert)."""
        self.n_above = self.n_above + 1 if loss > self.best + max(1.0, abs(self.best)) else 0
        if self.best_snapshot is not None and self.n_above >= self.patience:
            return True
        self.last_was_best = loss < self.best
        self.best = min(self.best, loss)
        return False


def is_healthy(posterior) -> bool:
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


def snapshot(est):
    """Deep copies of everything a step changes: posterior, family state, ``t_``, likelihood."""
    return {
        "posterior": copy.deepcopy(est.posterior_),
        "state": copy.deepcopy(est._state),
        "t": est.t_,
        "likelihood": copy.deepcopy(est._likelihood.get_state()),
        "prior": est._prior.get_state(),
    }


def restore(est, snap):
    est.posterior_ = copy.deepcopy(snap["posterior"])
    est._state = copy.deepcopy(snap["state"])
    est.t_ = snap["t"]
    est._likelihood.set_state(copy.deepcopy(snap["likelihood"]))
    est._prior.set_state(snap["prior"])


def permutation(n, gen, device):
    """The order of the rows in an epoch (tests replace it to fix the order)."""
    return torch.randperm(n, generator=gen, device=device)


def run_epoch(est, family, X, y, batch_size, gen, weights=None, n_train=None, n_total=None, on_step=None):
    """One pass over ``(X, y)`` (tensors) in random minibatches; returns the summed data
    terms and the number of steps. Raises :class:`Divergence` on non-finite values.

    ``weights``: None, or the rows' sample weights rescaled to mean one, with ``n_train``
    their sum before rescaling (the effective number of examples; see
    :class:`~skbayes._families.base.StepContext`). ``n_total`` (``partial_fit``): the
    number of examples the rows stand for (the stream's), which the data terms are
    scaled to instead. ``on_step``: None, or a callable given the rows of every completed step."""
    N = X.shape[0]
    if weights is None:
        n_train = N
    if n_total is not None:
        n_train = n_total
    perm = permutation(N, gen, X.device)
    total, n_steps = 0.0, 0
    prior_precision = est._prior.value()
    for start in range(0, N, batch_size):
        idx = perm[start : start + batch_size]
        Xb, yb = X[idx], y[idx]
        wb = None if weights is None else weights[idx]
        ctx = StepContext(
            forward=est._forward,
            likelihood=est._likelihood,
            n_train=n_train,
            generator=gen,
            t=est.t_,
            kl_scale=kl_annealing_scale(est.kl_annealing, est.t_),
            mc_samples=int(est.mc_samples),
            prior_precision=prior_precision,
            weights=wb,
        )
        try:
            with torch.no_grad():
                res = family.step(est.posterior_, est._state, Xb, yb, ctx)
                f = res.outputs
                if wb is None:
                    est._likelihood.update(f, yb, n_train / (f.shape[1] * f.shape[0]), n_train, res.noise_step)
                else:
                    scale = n_train / (f.shape[1] * f.shape[0])
                    est._likelihood.update(f, yb, scale, n_train, res.noise_step, weights=wb)
        except (torch.linalg.LinAlgError, FloatingPointError) as exc:  # non-finite values mid-step
            raise Divergence from exc
        est.t_ += 1
        total += res.data_term
        n_steps += 1
        if not math.isfinite(total) or not is_healthy(est.posterior_):
            raise Divergence
        if on_step is not None:
            on_step(Xb.shape[0])
    return total, n_steps


def update_prior(est):
    """Empirical-Bayes (M-step) update of a learned weight prior from the current posterior."""
    if est._prior.learn:
        with torch.no_grad():
            est._prior.update(est.posterior_.mean_t, est.posterior_.variance_t())


def objective(est, family, data_term, n_steps, N):
    """Per-example negative ELBO of an epoch: mean data term plus the KL terms at its end."""
    try:
        with torch.no_grad():
            kl = family.kl(est.posterior_, est._state, kl_annealing_scale(est.kl_annealing, est.t_), est._prior.value())
            kl += est._likelihood.kl()
    except (torch.linalg.LinAlgError, FloatingPointError) as exc:  # a posterior too degenerate to evaluate
        raise Divergence from exc
    return (data_term / n_steps + kl) / N


def run_epochs(
    est, family, X, y, n_epochs, incremental, validation=None, weights=None, n_train=None, n_total=None, on_step=None
):
    """Train ``est`` for up to ``n_epochs`` epochs on ``(X, y)`` (tensors).

    ``validation``: None, or a callable returning the held-out score of the current
    posterior (early stopping). ``incremental`` (``partial_fit``): no stopping rule.
    ``weights``, ``n_train``: sample weights rescaled to mean one and their sum (see
    :func:`run_epoch`); the objective is then per effective example. ``n_total``: see
    :func:`run_epoch`.
    Returns an :class:`Outcome`; warnings name the family's step sizes.
    """
    name = type(est).__name__
    gen = torch.Generator(device=X.device)
    gen.set_state(est._rng_state)
    N = (X.shape[0] if weights is None else n_train) if n_total is None else n_total
    bs = est._batch_size(X.shape[0])
    tol_stop = ToleranceStop(est.tol, est.n_iter_no_change)
    val_stop = ValidationStop(est.tol, est.n_iter_no_change) if validation is not None else None
    guard = None
    if not incremental and est.kl_annealing is None:
        guard = RiseGuard(min(RISE_PATIENCE, int(est.n_iter_no_change)))
    best_val_snap = None
    outcome = Outcome()
    bar = None
    if est.verbose and not incremental:
        from tqdm.auto import tqdm

        bar = tqdm(total=n_epochs, desc=name, leave=True)
    for _ in range(n_epochs):
        snap = snapshot(est)
        if guard is not None:
            guard.epoch_start(snap)
        try:
            data_term, n_steps = run_epoch(est, family, X, y, bs, gen, weights, n_train, n_total, on_step)
            loss = objective(est, family, data_term, n_steps, N)
        except KeyboardInterrupt:
            restore(est, snap)  # the end of the last completed epoch
            outcome.interrupted = True
            break
        except Divergence:
            restore(est, snap)
            outcome.diverged = True
            _warn(
                f"{name} diverged (non-finite values or weights beyond 1e8) in epoch {est.n_iter_ + 1}: "
                f"training stopped and the posterior reverted to the end of epoch {est.n_iter_}. "
                f"The learning rate is likely too large ({family.step_sizes()}) or the "
                "inputs are badly scaled; lower the learning rate, or standardise the inputs.",
                ConvergenceWarning,
            )
            break
        update_prior(est)
        est.loss_curve_.append(loss)
        est.n_iter_ += 1
        if bar is not None:
            bar.set_postfix(neg_elbo=f"{loss:.4f}")
            bar.update(1)
        if incremental:
            continue
        if guard is not None and guard.update(loss):
            restore(est, guard.best_snapshot)
            outcome.unstable = True
            _warn(
                f"{name}: the training objective per example (loss_curve_) rose "
                f"from {guard.best:.4g} to {loss:.4g} and stayed up for {guard.n_above} epochs (epoch "
                f"{est.n_iter_}): training stopped and the "
                f"posterior reverted to the end of its best epoch. The step sizes are likely too "
                f"large for this problem ({family.step_sizes()}); "
                "lower them, or use early_stopping.",
                ConvergenceWarning,
            )
            break
        if val_stop is not None:
            score = validation()
            est.validation_scores_.append(score)
            improved, stop = val_stop.update(score)
            if improved:
                best_val_snap = snapshot(est)
        else:
            stop = tol_stop.update(loss)
            if stop and guard is not None and guard.best_snapshot is not None and loss > guard.best:
                # the objective has not improved for n_iter_no_change epochs: keep the best
                # epoch's posterior, not the last one (single-sample steps drift past the optimum)
                restore(est, guard.best_snapshot)
        if stop:
            outcome.converged = True
            break
    if bar is not None:
        bar.close()
    if best_val_snap is not None:
        restore(est, best_val_snap)
        est.best_validation_score_ = val_stop.best
    est._rng_state = gen.get_state()
    if (
        not incremental
        and n_epochs > 0
        and not (outcome.converged or outcome.diverged or outcome.unstable or outcome.interrupted)
    ):
        _warn(
            f"{name}: maximum iterations ({n_epochs}) reached and the optimization hasn't converged yet.",
            ConvergenceWarning,
        )
    return outcome


class IterateAverage:
    """Weighted average of the posterior means a stream's steps visit (Polyak-Ruppert
    averaging): ``sum_k w_k mu_k / sum_k w_k``. Plain tensor and float, so it deep-copies
    and pickles with the estimator."""

    def __init__(self, mean: torch.Tensor, weight: float):
        self.total = mean * float(weight)
        self.weight = float(weight)

    def add(self, mean: torch.Tensor, weight: float) -> None:
        self.total.add_(mean, alpha=float(weight))
        self.weight += float(weight)

    def value(self) -> torch.Tensor:
        return self.total / self.weight
