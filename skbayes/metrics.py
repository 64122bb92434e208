"""Metrics and model-selection scorers for probabilistic predictions.

The metric functions take numpy arrays and return a float (a mean over the
points, optionally weighted). The scorers (:func:`make_log_likelihood_scorer`,
:func:`make_crps_scorer`, :func:`make_interval_scorer`, or by name through
:func:`get_scorer`) are callables ``scorer(estimator, X, y)`` that score the
predictive distribution of a fitted estimator, greater is better, for
``scoring=`` in ``GridSearchCV``, ``cross_validate`` and ``cross_val_score``.
See :doc:`/model_selection`.
"""

from __future__ import annotations

import inspect
import numbers
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import logsumexp
from scipy.stats import norm
from sklearn.base import is_classifier
from sklearn.metrics import get_scorer as _sklearn_get_scorer
from sklearn.metrics import get_scorer_names as _sklearn_get_scorer_names
from sklearn.metrics import log_loss
from sklearn.pipeline import Pipeline
from sklearn.utils import check_array, check_consistent_length, column_or_1d

__all__ = [
    "gaussian_log_likelihood",
    "mixture_log_likelihood",
    "crps_gaussian",
    "crps_ensemble",
    "interval_score",
    "interval_coverage",
    "expected_calibration_error",
    "risk_coverage_curve",
    "area_under_risk_coverage",
    "make_log_likelihood_scorer",
    "make_crps_scorer",
    "make_interval_scorer",
    "get_scorer",
    "get_scorer_names",
]

#: Predictive draws per test point of the sample-based CRPS and interval scorers.
DEFAULT_N_SAMPLES = 1000


def _check_1d(name: str, a: ArrayLike) -> np.ndarray:
    return column_or_1d(check_array(a, ensure_2d=False, dtype=np.float64, input_name=name))


def _average(values: np.ndarray, sample_weight: ArrayLike | None) -> float:
    """Mean of ``values``, or its ``sample_weight``-weighted mean."""
    if sample_weight is None:
        return float(np.mean(values))
    w = _check_1d("sample_weight", sample_weight)
    check_consistent_length(values, w)
    if np.any(w < 0):
        raise ValueError("sample_weight must be non-negative.")
    if not w.sum() > 0:
        raise ValueError("sample_weight must have a positive sum.")
    return float(np.average(values, weights=w))


def gaussian_log_likelihood(
    y_true: ArrayLike, y_mean: ArrayLike, y_std: ArrayLike, sample_weight: ArrayLike | None = None
) -> float:
    """Mean per-point log density of ``y_true`` under ``N(y_mean, y_std^2)``.

    Parameters
    ----------
    y_true : array-like of shape (n,)
        Observed targets.
    y_mean : array-like of shape (n,)
        Predictive means.
    y_std : array-like of shape (n,)
        Predictive standard deviations.
    sample_weight : array-like of shape (n,), default=None
        Weights of the points in the mean; None weighs them equally.

    Returns
    -------
    log_likelihood : float
        Mean over the points of ``log N(y_i | y_mean_i, y_std_i^2)``.

    Examples
    --------
    >>> from skbayes.metrics import gaussian_log_likelihood
    >>> round(gaussian_log_likelihood([0.0, 1.0], [0.0, 0.0], [1.0, 1.0]), 4)
    -1.1689
    """
    logp = norm.logpdf(np.asarray(y_true), np.asarray(y_mean), np.asarray(y_std))
    return _average(logp, sample_weight)


def _mixture_log_density(y_true: ArrayLike, f_samples: ArrayLike, noise_std: float | ArrayLike) -> np.ndarray:
    """Per-point ``log (1/S) sum_s N(y_i | f_si, noise_std^2)``."""
    f = np.asarray(f_samples)
    logp = norm.logpdf(np.asarray(y_true)[None, :], f, noise_std)
    return logsumexp(logp, axis=0) - np.log(f.shape[0])


def mixture_log_likelihood(
    y_true: ArrayLike, f_samples: ArrayLike, noise_std: float | ArrayLike, sample_weight: ArrayLike | None = None
) -> float:
    """Mean per-point log density under the mixture ``(1/S) sum_s N(y | f_s, noise_std^2)``.

    A log-mean-exp per point, as the papers evaluate (not a joint log-sum-exp over
    the test set).

    Parameters
    ----------
    y_true : array-like of shape (n,)
        Observed targets.
    f_samples : array-like of shape (S, n)
        Network outputs under ``S`` posterior weight samples (in the units of ``y``).
    noise_std : float or array-like of shape (n,)
        Standard deviation of the observation noise.
    sample_weight : array-like of shape (n,), default=None
        Weights of the points in the mean; None weighs them equally.

    Returns
    -------
    log_likelihood : float
        Mean over the points of ``log (1/S) sum_s N(y_i | f_si, noise_std^2)``.

    Examples
    --------
    >>> import numpy as np
    >>> from skbayes.metrics import mixture_log_likelihood
    >>> f = np.array([[-1.0, 0.0], [1.0, 0.0]])  # two weight samples, two points
    >>> round(mixture_log_likelihood([0.0, 0.0], f, 1.0), 4)
    -1.1689
    """
    return _average(_mixture_log_density(y_true, f_samples, noise_std), sample_weight)


def crps_gaussian(y_true: ArrayLike, mean: ArrayLike, std: ArrayLike, sample_weight: ArrayLike | None = None) -> float:
    """Compute the continuous ranked probability score of Gaussian predictives (closed form).

    ``CRPS(F, y) = E_F|X - y| - E_F|X - X'| / 2``, the integral over ``t`` of
    ``(F(t) - 1{y <= t})^2``. For ``F = N(mean, std^2)`` and ``z = (y - mean) / std``
    it is ``std * (z (2 Phi(z) - 1) + 2 phi(z) - 1 / sqrt(pi))`` (Gneiting and
    Raftery, 2007), and ``|y - mean|`` where ``std`` is 0. It is in the units of
    ``y``; lower is better.

    Parameters
    ----------
    y_true : array-like of shape (n,)
        Observed targets.
    mean : array-like of shape (n,)
        Predictive means.
    std : array-like of shape (n,)
        Predictive standard deviations (non-negative).
    sample_weight : array-like of shape (n,), default=None
        Weights of the points in the mean; None weighs them equally.

    Returns
    -------
    crps : float
        Mean over the points of the CRPS (lower is better).

    See Also
    --------
    crps_ensemble : The CRPS of predictive samples.

    Examples
    --------
    >>> from skbayes.metrics import crps_gaussian
    >>> round(crps_gaussian([0.0], [0.0], [1.0]), 4)  # (sqrt(2) - 1) / sqrt(pi)
    0.2337
    """
    y = _check_1d("y_true", y_true)
    mean = np.broadcast_to(np.asarray(mean, dtype=np.float64), y.shape)
    std = np.broadcast_to(np.asarray(std, dtype=np.float64), y.shape)
    if not (np.all(np.isfinite(mean)) and np.all(np.isfinite(std))):
        raise ValueError("mean and std must be finite.")
    if np.any(std < 0):
        raise ValueError("std must be non-negative.")
    pos = std > 0
    s = np.where(pos, std, 1.0)
    z = (y - mean) / s
    gauss = s * (z * (2.0 * norm.cdf(z) - 1.0) + 2.0 * norm.pdf(z) - 1.0 / np.sqrt(np.pi))
    crps = np.where(pos, gauss, np.abs(y - mean))
    return _average(crps, sample_weight)


def _crps_ensemble_points(y: np.ndarray, samples: np.ndarray) -> np.ndarray:
    """Per-point CRPS of the empirical distributions of ``samples`` (S, n), by sorting."""
    S = samples.shape[0]
    x = np.sort(samples, axis=0)
    # E|X - y| over the draws, and E|X - X'| = (2 / S^2) sum_i (2i - S - 1) x_(i), i = 1..S.
    spread = (2.0 * np.arange(1, S + 1) - S - 1.0) @ x / S**2
    return np.mean(np.abs(x - y[None, :]), axis=0) - spread


def crps_ensemble(y_true: ArrayLike, samples: ArrayLike, sample_weight: ArrayLike | None = None) -> float:
    """Compute the continuous ranked probability score of predictive samples.

    The CRPS of the empirical distribution of the ``S`` draws of each point,
    ``E|X - y| - E|X - X'| / 2`` with ``X, X'`` drawn from the draws, computed
    exactly after sorting the draws (``O(S log S)`` per point instead of the
    ``O(S^2)`` pairs): ``E|X - X'| = (2 / S^2) sum_i (2i - S - 1) x_(i)`` over the
    sorted draws ``x_(1) <= ... <= x_(S)``. With draws from a predictive ``F`` it
    estimates ``CRPS(F, y)`` (with a bias of order ``1 / S``). In the units of
    ``y``; lower is better.

    Parameters
    ----------
    y_true : array-like of shape (n,)
        Observed targets.
    samples : array-like of shape (S, n)
        ``S`` predictive draws of each point (one row per draw). The output of
        ``sample_y``, of shape ``(n, S)``, is its transpose.
    sample_weight : array-like of shape (n,), default=None
        Weights of the points in the mean; None weighs them equally.

    Returns
    -------
    crps : float
        Mean over the points of the CRPS (lower is better).

    See Also
    --------
    crps_gaussian : The closed form for Gaussian predictives.

    Examples
    --------
    >>> from skbayes.metrics import crps_ensemble
    >>> crps_ensemble([0.0], [[-1.0], [1.0]])  # E|X - y| = 1, E|X - X'| = 1
    0.5
    """
    y = _check_1d("y_true", y_true)
    x = check_array(samples, dtype=np.float64, input_name="samples")
    if x.shape[1] != y.shape[0]:
        raise ValueError(
            f"samples must have shape (n_draws, n) = (S, {y.shape[0]}) for {y.shape[0]} targets, "
            f"got {x.shape}; pass the transpose of sample_y's (n, S) output."
        )
    return _average(_crps_ensemble_points(y, x), sample_weight)


def _check_alpha(alpha: float) -> float:
    if isinstance(alpha, (bool, np.bool_)) or not isinstance(alpha, numbers.Real) or not 0 < alpha < 1:
        raise ValueError(f"alpha must be a number in (0, 1), got {alpha!r}.")
    return float(alpha)


def interval_score(
    y_true: ArrayLike, lower: ArrayLike, upper: ArrayLike, alpha: float, sample_weight: ArrayLike | None = None
) -> float:
    """Compute the interval score of central ``(1 - alpha)`` intervals (Gneiting and Raftery, 2007).

    ``IS = (u - l) + (2 / alpha) (l - y) 1{y < l} + (2 / alpha) (y - u) 1{y > u}``:
    the width of the interval plus a penalty for each miss, proportional to the
    distance by which it is missed. It is a proper scoring rule for the
    ``alpha / 2`` and ``1 - alpha / 2`` quantiles, so narrow intervals that
    still cover score best. In the units of ``y``; lower is better.

    Parameters
    ----------
    y_true : array-like of shape (n,)
        Observed targets.
    lower : array-like of shape (n,)
        Lower ends ``l`` of the intervals (the ``alpha / 2`` predictive quantiles).
    upper : array-like of shape (n,)
        Upper ends ``u`` (the ``1 - alpha / 2`` quantiles), ``u >= l``.
    alpha : float
        One minus the nominal coverage of the intervals, in (0, 1); 0.1 for
        90% intervals.
    sample_weight : array-like of shape (n,), default=None
        Weights of the points in the mean; None weighs them equally.

    Returns
    -------
    score : float
        Mean over the points of the interval score (lower is better).

    Examples
    --------
    >>> from skbayes.metrics import interval_score
    >>> interval_score([0.5, 3.0], [0.0, 0.0], [1.0, 1.0], alpha=0.1)  # (1 + (1 + 20 * 2)) / 2
    21.0
    """
    alpha = _check_alpha(alpha)
    y = _check_1d("y_true", y_true)
    lo = _check_1d("lower", np.broadcast_to(np.asarray(lower, dtype=np.float64), y.shape))
    hi = _check_1d("upper", np.broadcast_to(np.asarray(upper, dtype=np.float64), y.shape))
    if np.any(lo > hi):
        raise ValueError("Each interval needs lower <= upper.")
    score = (hi - lo) + (2.0 / alpha) * (np.maximum(lo - y, 0.0) + np.maximum(y - hi, 0.0))
    return _average(score, sample_weight)


def interval_coverage(y_true: ArrayLike, y_mean: ArrayLike, y_std: ArrayLike, level: float = 0.9) -> float:
    """Fraction of ``y_true`` inside the central ``level`` Gaussian predictive interval.

    Parameters
    ----------
    y_true : array-like of shape (n,)
        Observed targets.
    y_mean : array-like of shape (n,)
        Predictive means.
    y_std : array-like of shape (n,)
        Predictive standard deviations.
    level : float, default=0.9
        Probability of the central interval ``y_mean +- z y_std``.

    Returns
    -------
    coverage : float
        Fraction of the points inside their interval.
    """
    z = norm.ppf(0.5 + level / 2.0)
    return float(np.mean(np.abs(np.asarray(y_true) - np.asarray(y_mean)) <= z * np.asarray(y_std)))


def _class_indices(y_true: ArrayLike, proba: ArrayLike, labels: ArrayLike | None) -> tuple[np.ndarray, np.ndarray]:
    """``(y, p)``: the column index of each row's class, and the probabilities as a 2-D float
    array, validated (scikit-learn's conventions; ``labels`` names the columns)."""
    p = check_array(proba, dtype=np.float64, input_name="proba")
    y = column_or_1d(check_array(y_true, ensure_2d=False, dtype=None, input_name="y_true"))
    check_consistent_length(y, p)
    n_classes = p.shape[1]
    if labels is not None:
        names = column_or_1d(check_array(labels, ensure_2d=False, dtype=None, input_name="labels"))
        if len(names) != n_classes:
            raise ValueError(f"labels has {len(names)} entries but proba has {n_classes} columns.")
        index = {label: i for i, label in enumerate(names.tolist())}
        unknown = sorted({v for v in y.tolist() if v not in index}, key=str)
        if unknown:
            raise ValueError(f"y_true contains labels not in labels: {unknown[:5]}.")
        return np.array([index[v] for v in y.tolist()], dtype=np.intp), p
    if not (np.issubdtype(y.dtype, np.number) or y.dtype == bool):
        raise ValueError(
            "y_true must hold the column index of each row's class when labels is None; "
            "pass labels (e.g. the classifier's classes_) for other labels."
        )
    yi = y.astype(np.intp)
    if np.any(yi != y) or np.any(yi < 0) or np.any(yi >= n_classes):
        raise ValueError(
            f"y_true must hold column indices of proba, integers in [0, {n_classes}), when labels is None; "
            "pass labels (e.g. the classifier's classes_) for other labels."
        )
    return yi, p


def expected_calibration_error(
    y_true: ArrayLike, proba: ArrayLike, n_bins: int = 10, *, labels: ArrayLike | None = None
) -> float:
    """Expected calibration error of the top-class confidence (equal-width bins).

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True classes: integer column indices of ``proba``, or labels from ``labels``.
    proba : array-like of shape (n_samples, n_classes)
        Predicted class probabilities.
    n_bins : int, default=10
        Number of equal-width confidence bins on [0, 1].
    labels : array-like of shape (n_classes,), default=None
        The class of each column of ``proba`` (a classifier's ``classes_``); None: ``y_true``
        holds column indices.

    Returns
    -------
    ece : float
        ``sum_b (n_b / n) |accuracy_b - confidence_b|``.
    """
    y, p = _class_indices(y_true, proba, labels)
    conf = p.max(1)
    correct = p.argmax(1) == y
    bins = np.minimum((conf * n_bins).astype(int), n_bins - 1)
    ece = 0.0
    for b in range(n_bins):
        m = bins == b
        if m.any():
            ece += m.mean() * abs(correct[m].mean() - conf[m].mean())
    return float(ece)


def _ranked_errors(
    y_true: ArrayLike, proba: ArrayLike, labels: ArrayLike | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The rows by decreasing top-class confidence: ``(conf, wrong, group)``, ``group`` numbering
    the runs of equal confidence 0, 1, ... (stable order within a run)."""
    y, p = _class_indices(y_true, proba, labels)
    order = np.argsort(-p.max(1), kind="stable")
    conf = p.max(1)[order]
    wrong = (p.argmax(1) != y)[order].astype(np.float64)
    group = np.cumsum(np.r_[True, conf[1:] != conf[:-1]]) - 1
    return conf, wrong, group


def risk_coverage_curve(
    y_true: ArrayLike, proba: ArrayLike, *, labels: ArrayLike | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Selective risk at every confidence threshold: the error rate of the rows kept.

    A classifier that abstains on the rows whose top-class probability is below a
    threshold keeps a fraction of the rows (the coverage) and errs on some of them (the
    selective risk). One point per distinct confidence, from the most confident rows alone
    to all rows, as :func:`sklearn.metrics.roc_curve` has one per distinct score.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True classes: integer column indices of ``proba``, or labels from ``labels``.
    proba : array-like of shape (n_samples, n_classes)
        Predicted class probabilities; each row's prediction is its most probable class.
    labels : array-like of shape (n_classes,), default=None
        The class of each column of ``proba`` (a classifier's ``classes_``); None: ``y_true``
        holds column indices.

    Returns
    -------
    coverage : ndarray of shape (n_thresholds,)
        Fraction of the rows whose confidence is at least the threshold (increasing; the
        last is 1).
    risk : ndarray of shape (n_thresholds,)
        Error rate among those rows.
    thresholds : ndarray of shape (n_thresholds,)
        The distinct top-class probabilities, decreasing.

    See Also
    --------
    area_under_risk_coverage : The area under this curve, one number.
    expected_calibration_error : Whether the confidences match the accuracies.

    Examples
    --------
    >>> import numpy as np
    >>> from skbayes.metrics import risk_coverage_curve
    >>> proba = np.array([[0.9, 0.1], [0.2, 0.8], [0.6, 0.4], [0.45, 0.55]])
    >>> coverage, risk, thresholds = risk_coverage_curve([0, 1, 1, 0], proba)
    >>> coverage.tolist(), risk.tolist()
    ([0.25, 0.5, 0.75, 1.0], [0.0, 0.0, 0.3333333333333333, 0.5])
    """
    conf, wrong, _ = _ranked_errors(y_true, proba, labels)
    last = np.r_[conf[1:] != conf[:-1], True]  # the last row of each group of equal confidence
    kept = np.arange(1, len(conf) + 1)[last]
    return kept / len(conf), np.cumsum(wrong)[last] / kept, conf[last]


def area_under_risk_coverage(y_true: ArrayLike, proba: ArrayLike, *, labels: ArrayLike | None = None) -> float:
    """Area under the risk-coverage curve (AURC): the selective risk averaged over coverages.

    The mean over ``k = 1..n`` of the error rate of the ``k`` rows with the highest
    top-class probability (the risk-coverage curve of Geifman and El-Yaniv, 2017; lower
    is better). It is the error rate when confidence carries no information about
    errors, and smaller the more the errors sit among the least confident rows. Rows of
    equal confidence are taken in every order with equal probability: the value is the
    expectation over those orders, so it does not depend on the order of the rows.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True classes: integer column indices of ``proba``, or labels from ``labels``.
    proba : array-like of shape (n_samples, n_classes)
        Predicted class probabilities; each row's prediction is its most probable class.
    labels : array-like of shape (n_classes,), default=None
        The class of each column of ``proba`` (a classifier's ``classes_``); None: ``y_true``
        holds column indices.

    Returns
    -------
    aurc : float
        The area, in [0, 1].

    See Also
    --------
    risk_coverage_curve : The curve itself.

    Examples
    --------
    >>> import numpy as np
    >>> from skbayes.metrics import area_under_risk_coverage
    >>> proba = np.array([[0.9, 0.1], [0.2, 0.8], [0.6, 0.4], [0.45, 0.55]])
    >>> round(area_under_risk_coverage([0, 1, 1, 0], proba), 4)  # (0 + 0 + 1/3 + 2/4) / 4
    0.2083

    As a scorer (lower is better, so negated) on scikit-learn's iris, whose classes are
    the column indices:

    >>> from sklearn.datasets import load_iris
    >>> from sklearn.linear_model import LogisticRegression
    >>> from sklearn.metrics import make_scorer
    >>> from sklearn.model_selection import cross_val_score
    >>> X, y = load_iris(return_X_y=True)
    >>> scorer = make_scorer(area_under_risk_coverage, greater_is_better=False, response_method="predict_proba")
    >>> scores = cross_val_score(LogisticRegression(max_iter=1000), X, y, cv=3, scoring=scorer)
    >>> bool(np.all(scores <= 0))
    True
    """
    _, wrong, group = _ranked_errors(y_true, proba, labels)
    errors = np.bincount(group, weights=wrong)  # per group of equal confidence
    sizes = np.bincount(group)
    starts = np.cumsum(sizes) - sizes  # rows before each group
    before = np.cumsum(errors) - errors  # errors before each group
    k = np.arange(1, len(wrong) + 1)
    # expected errors among the first k rows: the earlier groups' and, of the current
    # group's, the share of its rows kept
    expected = before[group] + (k - starts[group]) * errors[group] / sizes[group]
    return float(np.mean(expected / k))


# --- scorers ------------------------------------------------------------------------------
def _final_step(estimator: Any, X: Any) -> tuple[Any, Any]:
    """The last step of (nested) Pipelines and ``X`` transformed by the steps before it.

    A Pipeline forwards ``predict`` and ``predict_proba`` but not ``log_likelihood``
    or ``sample_y``, so the scorers call its final estimator themselves.
    """
    while isinstance(estimator, Pipeline):
        for _, step in estimator.steps[:-1]:
            if step is not None and step != "passthrough":
                X = step.transform(X)
        estimator = estimator.steps[-1][1]
    return estimator, X


def _predicts_std(estimator: Any) -> bool:
    """Whether ``estimator.predict`` takes ``return_std`` (a Gaussian predictive)."""
    predict = getattr(estimator, "predict", None)
    if predict is None:
        return False
    try:
        return "return_std" in inspect.signature(predict).parameters
    except (TypeError, ValueError):
        return False


class _PredictiveScorer:
    """Base of the skbayes scorers: ``scorer(estimator, X, y, sample_weight=None)``.

    Greater is better. Subclasses implement ``_score(estimator, X, y, sample_weight)``
    on the final step of a Pipeline.
    """

    _name = ""
    _factory = ""
    _score: Callable[[Any, Any, ArrayLike, ArrayLike | None], float]

    def __call__(
        self, estimator: Any, X: ArrayLike, y_true: ArrayLike, sample_weight: ArrayLike | None = None
    ) -> float:
        final, Xt = _final_step(estimator, X)
        return float(self._score(final, Xt, y_true, sample_weight))

    def _params(self) -> dict[str, Any]:
        return {}

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self._params().items())
        return f"{self._factory}({args})"

    def _not_for_classifiers(self, estimator: Any) -> None:
        if is_classifier(estimator):
            raise TypeError(
                f"The {self._name!r} scorer scores a real-valued predictive distribution and "
                f"{type(estimator).__name__} is a classifier; score classifiers with "
                "'log_likelihood' (the negative log-loss of predict_proba)."
            )

    def _unsupported(self, estimator: Any, needs: str) -> TypeError:
        return TypeError(f"The {self._name!r} scorer cannot score {type(estimator).__name__}: it needs {needs}.")


class _LogLikelihoodScorer(_PredictiveScorer):
    _name = "log_likelihood"
    _factory = "make_log_likelihood_scorer"

    def __init__(self, n_samples: int | None = None) -> None:
        self.n_samples = n_samples

    def _params(self) -> dict[str, Any]:
        return {"n_samples": self.n_samples}

    def _score(self, est: Any, X: Any, y: ArrayLike, sample_weight: ArrayLike | None) -> float:
        if is_classifier(est):
            if not hasattr(est, "predict_proba"):
                raise self._unsupported(est, "predict_proba")
            return -log_loss(y, est.predict_proba(X), labels=est.classes_, sample_weight=sample_weight)
        kw = {} if self.n_samples is None else {"n_samples": self.n_samples}
        if hasattr(est, "log_likelihood"):
            if sample_weight is None:
                return est.log_likelihood(X, y, **kw)
            if not (hasattr(est, "sample_outputs") and hasattr(est, "noise_std_")):
                raise self._unsupported(est, "sample_outputs and noise_std_ to weight the points")
            f = est.sample_outputs(X, **kw)[..., 0]
            y = _check_1d("y_true", y)
            check_consistent_length(f[0], y)
            return mixture_log_likelihood(y, f, est.noise_std_, sample_weight=sample_weight)
        if _predicts_std(est):
            mean, std = est.predict(X, return_std=True)
            return gaussian_log_likelihood(_check_1d("y_true", y), mean, std, sample_weight=sample_weight)
        raise self._unsupported(
            est, "predict_proba (a classifier), log_likelihood (skbayes regressors) or predict(X, return_std=True)"
        )


class _SampledScorer(_PredictiveScorer):
    """Scores from ``predict(return_std=True)`` for Gaussian predictives, else ``sample_y`` draws."""

    _from_gaussian: Callable[[np.ndarray, ArrayLike, ArrayLike, ArrayLike | None], float]
    _from_samples: Callable[[np.ndarray, np.ndarray, ArrayLike | None], float]

    def __init__(
        self, n_samples: int = DEFAULT_N_SAMPLES, random_state: int | np.random.RandomState | None = 0
    ) -> None:
        self.n_samples = n_samples
        self.random_state = random_state

    def _params(self) -> dict[str, Any]:
        return {"n_samples": self.n_samples, "random_state": self.random_state}

    def _score(self, est: Any, X: Any, y: ArrayLike, sample_weight: ArrayLike | None) -> float:
        self._not_for_classifiers(est)
        y = _check_1d("y_true", y)
        if not hasattr(est, "log_likelihood") and _predicts_std(est):
            mean, std = est.predict(X, return_std=True)
            return self._from_gaussian(y, mean, std, sample_weight)
        if hasattr(est, "sample_y"):
            draws = np.asarray(est.sample_y(X, n_samples=self.n_samples, random_state=self.random_state))
            if draws.ndim != 2:
                raise ValueError(
                    f"The {self._name!r} scorer needs single-output sample_y draws of shape (n, n_samples), "
                    f"got {draws.shape}."
                )
            check_consistent_length(draws, y)
            return self._from_samples(y, draws.T, sample_weight)
        raise self._unsupported(est, "sample_y or predict(X, return_std=True)")


class _CRPSScorer(_SampledScorer):
    _name = "neg_crps"
    _factory = "make_crps_scorer"

    def _from_gaussian(self, y: np.ndarray, mean: ArrayLike, std: ArrayLike, sample_weight: ArrayLike | None) -> float:
        return -crps_gaussian(y, mean, std, sample_weight=sample_weight)

    def _from_samples(self, y: np.ndarray, samples: np.ndarray, sample_weight: ArrayLike | None) -> float:
        return -crps_ensemble(y, samples, sample_weight=sample_weight)


class _IntervalScorer(_SampledScorer):
    _name = "neg_interval_score"
    _factory = "make_interval_scorer"

    def __init__(
        self,
        alpha: float = 0.1,
        n_samples: int = DEFAULT_N_SAMPLES,
        random_state: int | np.random.RandomState | None = 0,
    ) -> None:
        super().__init__(n_samples=n_samples, random_state=random_state)
        self.alpha = _check_alpha(alpha)

    def _params(self) -> dict[str, Any]:
        return {"alpha": self.alpha, **super()._params()}

    def _from_gaussian(self, y: np.ndarray, mean: ArrayLike, std: ArrayLike, sample_weight: ArrayLike | None) -> float:
        z = norm.ppf(1.0 - self.alpha / 2.0)
        mean, std = np.asarray(mean), np.asarray(std)
        return -interval_score(y, mean - z * std, mean + z * std, self.alpha, sample_weight=sample_weight)

    def _from_samples(self, y: np.ndarray, samples: np.ndarray, sample_weight: ArrayLike | None) -> float:
        lo, hi = np.quantile(samples, [self.alpha / 2.0, 1.0 - self.alpha / 2.0], axis=0)
        return -interval_score(y, lo, hi, self.alpha, sample_weight=sample_weight)


def _check_n_samples(n_samples: int | None, allow_none: bool) -> int | None:
    if n_samples is None and allow_none:
        return None
    if isinstance(n_samples, (bool, np.bool_)) or not isinstance(n_samples, numbers.Integral) or n_samples < 1:
        raise ValueError(f"n_samples must be an int >= 1{' or None' if allow_none else ''}, got {n_samples!r}.")
    return int(n_samples)


def make_log_likelihood_scorer(n_samples: int | None = None) -> Callable[..., float]:
    """Scorer of the mean per-point predictive log-likelihood (greater is better).

    ``scorer(estimator, X, y, sample_weight=None)`` scores the fitted
    ``estimator`` (or a Pipeline ending in it) on ``(X, y)``:

    - skbayes regressors: ``estimator.log_likelihood(X, y)``, the log density of
      the mixture over posterior weight samples with the learned noise, mean over
      the points (with ``sample_weight``, the same from ``sample_outputs`` and
      ``noise_std_``, weighted);
    - regressors whose ``predict`` takes ``return_std`` (``BayesianLinearRegression``,
      scikit-learn's ``BayesianRidge`` and ``GaussianProcessRegressor``): the
      Gaussian log density ``N(y | mean, std^2)``;
    - classifiers: the negative log-loss of ``predict_proba`` (the labels are the
      estimator's ``classes_``), i.e. the mean log-probability of the true class.

    Parameters
    ----------
    n_samples : int, default=None
        Posterior weight samples of the mixture of skbayes regressors; None uses
        the estimator's ``predict_samples`` (the default of its ``log_likelihood``).
        The samples are seeded at fit time, so the score is deterministic.

    Returns
    -------
    scorer : callable
        ``scorer(estimator, X, y, sample_weight=None) -> float``.

    See Also
    --------
    get_scorer : The scorers by name (this one is ``'log_likelihood'``).

    Examples
    --------
    >>> from sklearn.datasets import make_regression
    >>> from sklearn.model_selection import cross_val_score
    >>> from skbayes import BayesianLinearRegression
    >>> from skbayes.metrics import make_log_likelihood_scorer
    >>> X, y = make_regression(n_samples=60, n_features=3, noise=1.0, random_state=0)
    >>> scores = cross_val_score(BayesianLinearRegression(), X, y, cv=3, scoring=make_log_likelihood_scorer())
    >>> scores.shape
    (3,)
    """
    return _LogLikelihoodScorer(n_samples=_check_n_samples(n_samples, allow_none=True))


def make_crps_scorer(
    n_samples: int = DEFAULT_N_SAMPLES, random_state: int | np.random.RandomState | None = 0
) -> Callable[..., float]:
    """Scorer of the negated continuous ranked probability score (greater is better).

    ``scorer(estimator, X, y, sample_weight=None)`` is minus the mean CRPS of the
    predictive distribution of the fitted regressor ``estimator`` (or a Pipeline
    ending in it) at the points of ``(X, y)``, in the units of ``y``:

    - regressors with a Gaussian predictive, whose ``predict`` takes
      ``return_std`` and which have no ``log_likelihood`` method
      (``BayesianLinearRegression``, ``BayesianRidge``): :func:`crps_gaussian`;
    - other regressors with ``sample_y`` (the skbayes networks):
      :func:`crps_ensemble` of ``sample_y(X, n_samples, random_state)``.

    Classifiers raise a TypeError.

    Parameters
    ----------
    n_samples : int, default=1000
        Predictive draws per point.
    random_state : int, RandomState instance or None, default=0
        Seeds ``sample_y``; the default fixes the draws, so the score is
        deterministic.

    Returns
    -------
    scorer : callable
        ``scorer(estimator, X, y, sample_weight=None) -> float``.

    See Also
    --------
    get_scorer : The scorers by name (the default one is ``'neg_crps'``).
    crps_ensemble : The metric of predictive samples.

    Examples
    --------
    >>> from sklearn.datasets import make_regression
    >>> from skbayes import BayesianLinearRegression
    >>> from skbayes.metrics import make_crps_scorer
    >>> X, y = make_regression(n_samples=60, n_features=3, noise=1.0, random_state=0)
    >>> model = BayesianLinearRegression().fit(X, y)
    >>> bool(make_crps_scorer()(model, X, y) < 0)
    True
    """
    return _CRPSScorer(n_samples=_check_n_samples(n_samples, allow_none=False), random_state=random_state)  # type: ignore[arg-type]  # an int


def make_interval_scorer(
    alpha: float = 0.1, n_samples: int = DEFAULT_N_SAMPLES, random_state: int | np.random.RandomState | None = 0
) -> Callable[..., float]:
    """Scorer of the negated interval score of central prediction intervals (greater is better).

    ``scorer(estimator, X, y, sample_weight=None)`` is minus the mean
    :func:`interval_score` of the central ``(1 - alpha)`` predictive intervals of
    the fitted regressor ``estimator`` (or a Pipeline ending in it), in the units
    of ``y``. The intervals are ``mean -+ z std`` with ``z`` the ``1 - alpha / 2``
    standard normal quantile for Gaussian predictives (``predict`` takes
    ``return_std`` and there is no ``log_likelihood`` method), else the
    ``alpha / 2`` and ``1 - alpha / 2`` quantiles of ``sample_y(X, n_samples,
    random_state)``. Classifiers raise a TypeError.

    Parameters
    ----------
    alpha : float, default=0.1
        One minus the nominal coverage, in (0, 1); 0.1 scores 90% intervals.
    n_samples : int, default=1000
        Predictive draws per point (sample-based predictives).
    random_state : int, RandomState instance or None, default=0
        Seeds ``sample_y``; the default fixes the draws, so the score is
        deterministic.

    Returns
    -------
    scorer : callable
        ``scorer(estimator, X, y, sample_weight=None) -> float``.

    See Also
    --------
    get_scorer : The scorers by name (``'neg_interval_score'`` has ``alpha=0.1``).
    interval_score : The metric.

    Examples
    --------
    >>> from sklearn.datasets import make_regression
    >>> from skbayes import BayesianLinearRegression
    >>> from skbayes.metrics import make_interval_scorer
    >>> X, y = make_regression(n_samples=60, n_features=3, noise=1.0, random_state=0)
    >>> model = BayesianLinearRegression().fit(X, y)
    >>> scorer = make_interval_scorer(alpha=0.2)  # 80% intervals
    >>> bool(scorer(model, X, y) < 0)
    True
    """
    return _IntervalScorer(
        alpha=alpha,
        n_samples=_check_n_samples(n_samples, allow_none=False),  # type: ignore[arg-type]  # an int
        random_state=random_state,
    )


_SCORERS: dict[str, Callable[[], Callable[..., float]]] = {
    "log_likelihood": make_log_likelihood_scorer,
    "neg_crps": make_crps_scorer,
    "neg_interval_score": make_interval_scorer,
}


def get_scorer_names() -> list[str]:
    """List the names :func:`get_scorer` accepts: skbayes's and scikit-learn's.

    Returns
    -------
    names : list of str
        The skbayes scorer names followed by ``sklearn.metrics.get_scorer_names()``.

    Examples
    --------
    >>> from skbayes.metrics import get_scorer_names
    >>> get_scorer_names()[:3]
    ['log_likelihood', 'neg_crps', 'neg_interval_score']
    """
    return list(_SCORERS) + [n for n in _sklearn_get_scorer_names() if n not in _SCORERS]


def get_scorer(scoring: str | Callable[..., float]) -> Callable[..., float]:
    """Return a scorer by name: skbayes's probabilistic scorers, else scikit-learn's.

    Parameters
    ----------
    scoring : str or callable
        ``'log_likelihood'`` (:func:`make_log_likelihood_scorer`), ``'neg_crps'``
        (:func:`make_crps_scorer`, 1000 draws, ``random_state=0``),
        ``'neg_interval_score'`` (:func:`make_interval_scorer`, 90% intervals),
        or a name of ``sklearn.metrics.get_scorer_names()``. A callable is
        returned as it is. For other parameters call the factories.

    Returns
    -------
    scorer : callable
        ``scorer(estimator, X, y) -> float``, greater is better.

    Raises
    ------
    ValueError
        If ``scoring`` is an unknown name.

    See Also
    --------
    get_scorer_names : The valid names.

    Examples
    --------
    >>> from sklearn.datasets import make_regression
    >>> from sklearn.model_selection import GridSearchCV
    >>> from skbayes import BayesianLinearRegression
    >>> from skbayes.metrics import get_scorer
    >>> X, y = make_regression(n_samples=60, n_features=3, noise=1.0, random_state=0)
    >>> search = GridSearchCV(
    ...     BayesianLinearRegression(), {"alpha": [1e-3, 1.0, 1e3]}, scoring=get_scorer("log_likelihood"), cv=3
    ... ).fit(X, y)
    >>> search.best_params_["alpha"] in (1e-3, 1.0, 1e3)
    True
    """
    if not isinstance(scoring, str):
        if callable(scoring):
            return scoring
        raise TypeError(f"scoring must be a str or a callable, got {type(scoring).__name__}.")
    if scoring in _SCORERS:
        return _SCORERS[scoring]()
    try:
        return _sklearn_get_scorer(scoring)
    except ValueError:
        raise ValueError(
            f"{scoring!r} is not a known scorer. skbayes's scorers: {', '.join(map(repr, _SCORERS))}; "
            "or a scikit-learn scorer name (skbayes.metrics.get_scorer_names() lists them all)."
        ) from None
