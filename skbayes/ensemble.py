"""Ensembles of posteriors: equal-weight mixtures of independently fitted Bayesian networks.

A deep ensemble (Lakshminarayanan et al., 2017) averages networks trained from different
random starts; each lands in its own basin of the loss. A variational posterior describes
one basin. Fitting ``K`` posteriors from ``K`` seeds and averaging their predictive
distributions marginalises over basins and within them: the "multi-basin" Bayesian model
average of Wilson & Izmailov (2020, "Bayesian deep learning and a probabilistic perspective
of generalization", MultiSWAG). The predictive of the ensemble is the mixture

    p(y | x) = (1 / K) sum_k p_k(y | x),

where ``p_k`` is member ``k``'s own predictive (a Gaussian for the linearised predictive,
a mixture over weight samples for the sampled one). Every statistic here is that mixture's:
moments by the law of total variance, quantiles by root finding on its distribution
function, densities by a log-sum-exp.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np
import torch
from joblib import Parallel, delayed
from numpy.typing import ArrayLike
from scipy.special import logsumexp
from sklearn.base import BaseEstimator, ClassifierMixin, MetaEstimatorMixin, RegressorMixin, clone
from sklearn.utils import check_array, check_random_state, column_or_1d
from sklearn.utils.metaestimators import available_if
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted

from ._estimator import BayesianNetworkRegressor
from ._quantiles import PredictIntervalMixin, check_quantiles, mixture_quantiles
from ._validation import NONE, RANDOM_STATE, Check, Interval, validate_data, validate_params

__all__ = ["PosteriorEnsembleRegressor", "PosteriorEnsembleClassifier"]

_MAX_SEED = np.iinfo(np.int32).max


def _has(*methods: str) -> Check:
    return Check(
        lambda est: all(callable(getattr(est, m, None)) for m in methods) and hasattr(est, "get_params"),
        "an estimator with " + ", ".join(methods),
    )


def _members_have(method: str) -> Any:
    """For ``available_if``: the fitted members (or, before the fit, the estimator) have ``method``."""

    def check(ens: _PosteriorEnsemble) -> bool:
        if hasattr(ens, "estimators_"):
            return all(hasattr(m, method) for m in ens.estimators_)
        est = ens.estimator if ens.estimator is not None else ens._default_estimator()
        return hasattr(est, method)

    return check


def _fit_member(
    estimator: BaseEstimator, seed: int, X: np.ndarray, y: np.ndarray, sample_weight: ArrayLike | None
) -> BaseEstimator:
    member = clone(estimator).set_params(random_state=int(seed))
    if sample_weight is None:
        return member.fit(X, y)
    return member.fit(X, y, sample_weight=sample_weight)


class _PosteriorEnsemble(MetaEstimatorMixin, BaseEstimator):
    """Fitting and validation shared by the regressor and the classifier (not public)."""

    _parameter_constraints: dict[str, list[Any]] = {
        "n_members": [Interval(numbers.Integral, 1, None, closed="left")],
        "n_jobs": [Interval(numbers.Integral, None, None), NONE],
        "random_state": [RANDOM_STATE],
    }
    _required: tuple[str, ...] = ("fit", "predict")

    estimators_: list[Any]

    def __init__(
        self,
        estimator: Any = None,
        n_members: int = 5,
        *,
        n_jobs: int | None = None,
        random_state: int | np.random.RandomState | None = None,
    ) -> None:
        self.estimator = estimator
        self.n_members = n_members
        self.n_jobs = n_jobs
        self.random_state = random_state

    def _default_estimator(self) -> BaseEstimator:  # pragma: no cover - overridden
        raise NotImplementedError

    def _base_estimator(self) -> BaseEstimator:
        name = type(self).__name__
        validate_params(name, self.get_params(deep=False), self._parameter_constraints)
        if self.n_jobs == 0:
            raise ValueError(f"{name}: n_jobs == 0 has no meaning; pass None, a positive int or -1.")
        if self.estimator is None:
            return self._default_estimator()
        validate_params(name, {"estimator": self.estimator}, {"estimator": [_has(*self._required)]})
        if "random_state" not in self.estimator.get_params(deep=False):
            raise ValueError(
                f"{name}: the estimator {type(self.estimator).__name__} has no random_state parameter, "
                "so every member would be the same fit; pass an estimator with a random_state."
            )
        return self.estimator

    def _fit_members(self, X: np.ndarray, y: np.ndarray, sample_weight: ArrayLike | None) -> None:
        base = self._base_estimator()
        seeds = check_random_state(self.random_state).randint(_MAX_SEED, size=int(self.n_members))
        self.estimators_ = Parallel(n_jobs=self.n_jobs)(
            delayed(_fit_member)(base, seed, X, y, sample_weight) for seed in seeds
        )
        self.estimator_ = base

    def _check_X(self, X: ArrayLike) -> np.ndarray:
        check_is_fitted(self, "estimators_")
        return validate_data(self, X, reset=False)

    @available_if(_members_have("sample_outputs"))
    def sample_outputs(self, X: ArrayLike, n_samples: int | None = None, random_state: Any = None) -> np.ndarray:
        """Network outputs under weight samples of the members' posteriors, pooled.

        Member by member: ``n_samples // K`` draws from each (one more from each of the
        first ``n_samples % K``), the members' outputs stacked in their order.

        Parameters
        ----------
        X : array-like of shape (n_rows, n_features)
            Inputs.
        n_samples : int, default=None
            Total number of draws; None pools every member's own ``sample_outputs(X)``
            (its ``predict_samples`` draws).
        random_state : int, RandomState instance or None, default=None
            Seeds the members' draws; None gives the samples their prediction methods
            use, so the result is deterministic.

        Returns
        -------
        outputs : ndarray of shape (n_samples, n_rows, n_outputs)
            The members' ``sample_outputs``, stacked.
        """
        validate_params(
            type(self).__name__,
            {"n_samples": n_samples, "random_state": random_state},
            {"n_samples": [Interval(numbers.Integral, 1, None, closed="left"), NONE], "random_state": [RANDOM_STATE]},
        )
        X_arr = self._check_X(X)
        K = len(self.estimators_)
        counts: list[int | None] = [None] * K
        if n_samples is not None:
            counts = [int(n_samples) // K + (k < int(n_samples) % K) for k in range(K)]
        rng = None if random_state is None else check_random_state(random_state)
        parts = []
        for m, c in zip(self.estimators_, counts, strict=True):
            seed = None if rng is None else int(rng.randint(_MAX_SEED))
            if c != 0:
                parts.append(m.sample_outputs(X_arr, n_samples=c, random_state=seed))
        return np.concatenate(parts)


class PosteriorEnsembleRegressor(PredictIntervalMixin, RegressorMixin, _PosteriorEnsemble):
    """Equal-weight mixture of Bayesian regressors fitted from different seeds.

    Fits ``n_members`` clones of ``estimator``, each with its own ``random_state``, on
    the same data, and predicts with the mixture of their predictive distributions
    ``(1 / K) sum_k p_k(y | x)``: the multi-basin Bayesian model average (each posterior
    covers one basin of the loss, the members cover several), the Bayesian counterpart of
    a deep ensemble. It costs ``n_members`` fits and predictions (``n_jobs`` runs the fits
    in parallel).

    Parameters
    ----------
    estimator : estimator instance, default=None
        The member to clone: a skbayes network regressor, or any regressor with a
        ``random_state`` parameter whose ``predict(X, return_std=True)`` is a
        Gaussian predictive (mean and standard deviation). None:
        ``NoisyKFACRegressor()``.
    n_members : int, default=5
        Number of members ``K``.
    n_jobs : int, default=None
        Members fitted in parallel (joblib; None is one at a time, -1 all CPUs).
        joblib's worker processes limit each member's threads to their share of
        the CPUs.
    random_state : int, RandomState instance or None, default=None
        Draws the members' seeds (``random_state`` of member ``k``); an int makes
        the fit reproducible.

    Attributes
    ----------
    estimators_ : list of estimators
        The fitted members.
    estimator_ : estimator
        The estimator that was cloned (``estimator``, or the default).
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Names of the features seen during fit, when ``X`` has string column names.

    See Also
    --------
    PosteriorEnsembleClassifier : The classifier.
    skbayes.NoisyKFACRegressor : The default member.

    Notes
    -----
    With members' predictive means ``m_k`` and standard deviations ``s_k``, the
    ensemble's mean is ``mean_k m_k`` and its variance ``mean_k s_k^2 + var_k m_k``
    (the law of total variance). Quantiles, intervals and :meth:`log_likelihood`
    are those of the mixture of the members' own predictives: a Gaussian per member
    with the linearised predictive (``predictive='glm'``), a mixture over its
    ``predict_samples`` weight draws with the sampled one.

    References
    ----------
    Lakshminarayanan, Pritzel & Blundell (2017), "Simple and scalable predictive
    uncertainty estimation using deep ensembles", NeurIPS.
    Wilson & Izmailov (2020), "Bayesian deep learning and a probabilistic perspective
    of generalization", NeurIPS.

    Examples
    --------
    >>> import numpy as np
    >>> from skbayes import NoisyKFACRegressor
    >>> from skbayes.ensemble import PosteriorEnsembleRegressor
    >>> rng = np.random.RandomState(0)
    >>> X = rng.uniform(-1, 1, size=(100, 1))
    >>> y = np.sin(3 * X[:, 0]) + 0.1 * rng.randn(100)
    >>> ens = PosteriorEnsembleRegressor(NoisyKFACRegressor(max_iter=50), n_members=3, random_state=0)
    >>> ens = ens.fit(X, y)
    >>> lower, upper = ens.predict_interval(X[:2], level=0.9)
    >>> bool(np.all(lower < upper))
    True
    """

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.target_tags.single_output = True
        tags.target_tags.multi_output = True  # as every skbayes regressor
        return tags

    def _default_estimator(self) -> BaseEstimator:
        from .kfac import NoisyKFACRegressor

        return NoisyKFACRegressor()

    def fit(self, X: ArrayLike, y: ArrayLike, sample_weight: ArrayLike | None = None) -> PosteriorEnsembleRegressor:
        """Fit the members, each from its own seed.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training inputs.
        y : array-like of shape (n_samples,) or (n_samples, n_targets)
            Targets.
        sample_weight : array-like of shape (n_samples,), default=None
            Passed to every member's ``fit``.

        Returns
        -------
        self : PosteriorEnsembleRegressor
            The fitted ensemble.
        """
        X_arr, y_arr = validate_data(self, X, y, multi_output=True, y_numeric=True)
        self._fit_members(X_arr, y_arr, sample_weight)
        return self

    def _member_moments(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        pairs = [m.predict(X, return_std=True) for m in self.estimators_]
        return np.stack([np.asarray(p[0], dtype=np.float64) for p in pairs]), np.stack(
            [np.asarray(p[1], dtype=np.float64) for p in pairs]
        )

    def predict(self, X: ArrayLike, return_std: bool = False) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
        """Predictive mean (and standard deviation) of the mixture.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Inputs.
        return_std : bool, default=False
            Also return the predictive standard deviation.

        Returns
        -------
        y_mean : ndarray of shape (n_samples,) or (n_samples, n_targets)
            The average of the members' predictive means.
        y_std : ndarray of shape (n_samples,) or (n_samples, n_targets)
            ``sqrt(mean_k s_k^2 + var_k m_k)`` (only if ``return_std`` is True).
        """
        X = self._check_X(X)
        if not return_std:
            return np.mean([np.asarray(m.predict(X), dtype=np.float64) for m in self.estimators_], axis=0)
        means, stds = self._member_moments(X)
        mean = means.mean(0)
        var = (stds * stds).mean(0) + ((means - mean) ** 2).mean(0)
        return mean, np.sqrt(var)

    def predict_std(self, X: ArrayLike) -> np.ndarray:
        """Predictive standard deviation of the mixture.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Inputs.

        Returns
        -------
        y_std : ndarray of shape (n_samples,) or (n_samples, n_targets)
            ``predict(X, return_std=True)[1]``.
        """
        return self.predict(X, return_std=True)[1]

    def _components(self, X: np.ndarray, n_samples: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The mixture's Gaussian components: means and standard deviations of shape
        (C, n) or (C, n, k) in the units of ``y``, and their weights (C,)."""
        mus, sds, ws = [], [], []
        for m in self.estimators_:
            if isinstance(m, BayesianNetworkRegressor):  # the draws its own predictions use
                mu, sd = m._predictive_components(X, n_samples=n_samples)
            else:  # one Gaussian per point
                mean, std = m.predict(X, return_std=True)
                mu, sd = np.asarray(mean, dtype=np.float64)[None], np.asarray(std, dtype=np.float64)[None]
            sd = np.broadcast_to(sd, mu.shape)
            mus.append(mu)
            sds.append(sd)
            ws.append(np.full(mu.shape[0], 1.0 / (len(self.estimators_) * mu.shape[0])))
        return np.concatenate(mus), np.concatenate(sds), np.concatenate(ws)

    def predict_quantiles(self, X: ArrayLike, quantiles: ArrayLike = (0.05, 0.5, 0.95)) -> np.ndarray:
        """Compute quantiles of the mixture's predictive distribution.

        Exact roots of the mixture's distribution function (Newton's method
        safeguarded by bisection), not read off random draws.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Inputs.
        quantiles : float or array-like of shape (n_quantiles,), default=(0.05, 0.5, 0.95)
            Probabilities in (0, 1).

        Returns
        -------
        y_quantiles : ndarray of shape (n_samples, n_quantiles) or (n_samples, n_targets, n_quantiles)
            The predictive quantiles of each point (per target after a fit on a 2-D
            ``y``), one column per entry of ``quantiles``.
        """
        q = check_quantiles(quantiles)
        mu, sd, w = self._components(self._check_X(X))
        x = mixture_quantiles(torch.from_numpy(mu), torch.from_numpy(np.ascontiguousarray(sd)), q, torch.from_numpy(w))
        return x.numpy()

    def log_likelihood(self, X: ArrayLike, y: ArrayLike, n_samples: int | None = None) -> float:
        """Mean per-point log density of ``y`` under the mixture.

        ``log (1 / K) sum_k p_k(y_i | x_i)``, averaged over the rows; after a fit on a
        2-D ``y`` the density of a row is that of all its targets together.

        Parameters
        ----------
        X : array-like of shape (n_rows, n_features)
            Inputs.
        y : array-like of shape (n_rows,) or (n_rows, n_targets)
            Observed targets (the shape of ``y`` at fit time).
        n_samples : int, default=None
            Weight samples of each member with a sampled predictive; None uses their
            ``predict_samples``. Members with a Gaussian predictive ignore it.

        Returns
        -------
        log_likelihood : float
            Mean over the rows of the log predictive density (higher is better).
        """
        mu, sd, w = self._components(self._check_X(X), n_samples=n_samples)
        multi = mu.ndim == 3
        y_arr = check_array(y, ensure_2d=multi, dtype=np.float64)
        if not multi:
            y_arr = column_or_1d(y_arr, warn=True)
        if y_arr.shape != mu.shape[1:]:
            raise ValueError(f"y must have shape {mu.shape[1:]} (rows of X, targets at fit time), got {y_arr.shape}.")
        logp = -0.5 * ((y_arr[None] - mu) / sd) ** 2 - np.log(sd) - 0.5 * math.log(2.0 * math.pi)
        if multi:
            logp = logp.sum(-1)
        return float(np.mean(logsumexp(logp + np.log(w)[:, None], axis=0)))

    def sample_y(self, X: ArrayLike, n_samples: int = 1, random_state: Any = 0) -> np.ndarray:
        """Draw targets from the mixture.

        Each draw picks a member uniformly at random, then draws from its predictive
        (its ``sample_y``).

        Parameters
        ----------
        X : array-like of shape (n_samples_X, n_features)
            Inputs.
        n_samples : int, default=1
            Number of draws per input.
        random_state : int, RandomState instance or None, default=0
            Seeds the draws.

        Returns
        -------
        y_samples : ndarray of shape (n_samples_X, n_samples) or (n_samples_X, n_targets, n_samples)
            Draws, one column per sample.
        """
        validate_params(
            type(self).__name__,
            {"n_samples": n_samples, "random_state": random_state},
            {"n_samples": [Interval(numbers.Integral, 1, None, closed="left")], "random_state": [RANDOM_STATE]},
        )
        X = self._check_X(X)
        rng = check_random_state(random_state)
        counts = rng.multinomial(int(n_samples), np.full(len(self.estimators_), 1.0 / len(self.estimators_)))
        parts = [
            m.sample_y(X, int(c), random_state=int(rng.randint(_MAX_SEED)))
            for m, c in zip(self.estimators_, counts, strict=True)
            if c
        ]
        draws = np.concatenate(parts, axis=-1)
        return draws[..., rng.permutation(draws.shape[-1])]


class PosteriorEnsembleClassifier(ClassifierMixin, _PosteriorEnsemble):
    """Equal-weight mixture of Bayesian classifiers fitted from different seeds.

    Fits ``n_members`` clones of ``estimator``, each with its own ``random_state``, on
    the same data, and predicts the average of their predictive class probabilities:
    the multi-basin Bayesian model average, the Bayesian counterpart of a deep ensemble.
    It costs ``n_members`` fits and predictions (``n_jobs`` runs the fits in parallel).

    Parameters
    ----------
    estimator : estimator instance, default=None
        The member to clone: a skbayes network classifier, or any classifier with a
        ``random_state`` parameter and ``predict_proba``. None:
        ``NoisyKFACClassifier()`` (the best separation of unseen classes and
        log-loss under strong shift); ``MCDropoutClassifier()`` members give the
        lowest log-loss on data like the training data (see the ensembles page).
    n_members : int, default=5
        Number of members ``K``.
    n_jobs : int, default=None
        Members fitted in parallel (joblib; None is one at a time, -1 all CPUs).
    random_state : int, RandomState instance or None, default=None
        Draws the members' seeds; an int makes the fit reproducible.

    Attributes
    ----------
    estimators_ : list of estimators
        The fitted members.
    estimator_ : estimator
        The estimator that was cloned (``estimator``, or the default).
    classes_ : ndarray of shape (n_classes,)
        Class labels.
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Names of the features seen during fit, when ``X`` has string column names.

    See Also
    --------
    PosteriorEnsembleRegressor : The regressor.
    skbayes.NoisyKFACClassifier : The default member.

    References
    ----------
    Wilson & Izmailov (2020), "Bayesian deep learning and a probabilistic perspective
    of generalization", NeurIPS.

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from skbayes import VOGNClassifier
    >>> from skbayes.ensemble import PosteriorEnsembleClassifier
    >>> X, y = load_iris(return_X_y=True)
    >>> ens = PosteriorEnsembleClassifier(VOGNClassifier(max_iter=30), n_members=3, random_state=0)
    >>> ens.fit(X, y).predict_proba(X[:1]).shape
    (1, 3)
    """

    _required = ("fit", "predict_proba")

    def _default_estimator(self) -> BaseEstimator:
        from .kfac import NoisyKFACClassifier

        return NoisyKFACClassifier()

    def fit(self, X: ArrayLike, y: ArrayLike, sample_weight: ArrayLike | None = None) -> PosteriorEnsembleClassifier:
        """Fit the members, each from its own seed.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training inputs.
        y : array-like of shape (n_samples,)
            Class labels.
        sample_weight : array-like of shape (n_samples,), default=None
            Passed to every member's ``fit``.

        Returns
        -------
        self : PosteriorEnsembleClassifier
            The fitted ensemble.
        """
        X_arr, y_arr = validate_data(self, X, y)
        check_classification_targets(y_arr)
        self.classes_ = np.unique(y_arr)
        self._fit_members(X_arr, y_arr, sample_weight)
        for m in self.estimators_:  # the columns of predict_proba must mean the same classes
            if not np.array_equal(getattr(m, "classes_", self.classes_), self.classes_):
                name = type(self).__name__
                raise ValueError(f"{name}: a member's classes_ {m.classes_!r} differ from {self.classes_!r}.")
        return self

    def predict_proba(self, X: ArrayLike) -> np.ndarray:
        """Average of the members' predictive class probabilities.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Inputs.

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes)
            Class probabilities, columns in the order of ``classes_``.
        """
        X = self._check_X(X)
        return np.mean([np.asarray(m.predict_proba(X), dtype=np.float64) for m in self.estimators_], axis=0)

    def predict_log_proba(self, X: ArrayLike) -> np.ndarray:
        """Logarithm of :meth:`predict_proba`.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Inputs.

        Returns
        -------
        log_proba : ndarray of shape (n_samples, n_classes)
            Log class probabilities.
        """
        with np.errstate(divide="ignore"):
            return np.log(self.predict_proba(X))

    def predict_std(self, X: ArrayLike) -> np.ndarray:
        """Standard deviation of each class probability over the mixture.

        ``sqrt(mean_k (s_k^2 + p_k^2) - p^2)`` from the members' probabilities ``p_k``
        and their own spreads ``s_k`` (their ``predict_std``; 0 for a member without
        one).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Inputs.

        Returns
        -------
        std : ndarray of shape (n_samples, n_classes)
            Spread of the class probabilities over the members and their posteriors.
        """
        X = self._check_X(X)
        p = np.stack([np.asarray(m.predict_proba(X), dtype=np.float64) for m in self.estimators_])
        s = np.stack(
            [
                np.asarray(m.predict_std(X), dtype=np.float64) if hasattr(m, "predict_std") else np.zeros_like(pk)
                for m, pk in zip(self.estimators_, p, strict=True)
            ]
        )
        mean = p.mean(0)
        return np.sqrt((s * s).mean(0) + ((p - mean) ** 2).mean(0))

    def predict(self, X: ArrayLike) -> np.ndarray:
        """Most probable class under the mixture.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Inputs.

        Returns
        -------
        y : ndarray of shape (n_samples,)
            Predicted class labels.
        """
        proba = self.predict_proba(X)  # checks the fit first
        return self.classes_[np.argmax(proba, axis=1)]
