"""Metrics for probabilistic predictions (numpy in, float out)."""

import numpy as np
from scipy.special import logsumexp
from scipy.stats import norm


def gaussian_log_likelihood(y_true, y_mean, y_std):
    """Mean per-point log density of ``y_true`` under ``N(y_mean, y_std^2)``.

    Parameters
    ----------
    y_true : array-like of shape (n,)
        Observed targets.
    y_mean : array-like of shape (n,)
        Predictive means.
    y_std : array-like of shape (n,)
        Predictive standard deviations.

    Returns
    -------
    log_likelihood : float
        Mean over the points of ``log N(y_i | y_mean_i, y_std_i^2)``.
    """
    return float(np.mean(norm.logpdf(np.asarray(y_true), np.asarray(y_mean), np.asarray(y_std))))


def mixture_log_likelihood(y_true, f_samples, noise_std):
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

    Returns
    -------
    log_likelihood : float
        Mean over the points of ``log (1/S) sum_s N(y_i | f_si, noise_std^2)``.
    """
    f = np.asarray(f_samples)
    logp = norm.logpdf(np.asarray(y_true)[None, :], f, noise_std)
    return float(np.mean(logsumexp(logp, axis=0) - np.log(f.shape[0])))


def interval_coverage(y_true, y_mean, y_std, level=0.9):
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


def expected_calibration_error(y_true, proba, n_bins=10):
    """Expected calibration error of the top-class confidence (equal-width bins).

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        Integer class indices (columns of ``proba``).
    proba : array-like of shape (n_samples, n_classes)
        Predicted class probabilities.
    n_bins : int, default=10
        Number of equal-width confidence bins on [0, 1].

    Returns
    -------
    ece : float
        ``sum_b (n_b / n) |accuracy_b - confidence_b|``.
    """
    proba = np.asarray(proba)
    y_true = np.asarray(y_true)
    conf = proba.max(1)
    correct = proba.argmax(1) == y_true
    bins = np.minimum((conf * n_bins).astype(int), n_bins - 1)
    ece = 0.0
    for b in range(n_bins):
        m = bins == b
        if m.any():
            ece += m.mean() * abs(correct[m].mean() - conf[m].mean())
    return float(ece)
