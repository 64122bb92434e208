"""Metrics for probabilistic predictions (numpy in, float out)."""

import numpy as np
from scipy.special import logsumexp
from scipy.stats import norm


def gaussian_log_likelihood(y_true, y_mean, y_std):
    """Mean per-point log density of ``y_true`` under ``N(y_mean, y_std^2)``."""
    return float(np.mean(norm.logpdf(np.asarray(y_true), np.asarray(y_mean), np.asarray(y_std))))


def mixture_log_likelihood(y_true, f_samples, noise_std):
    """Mean per-point log density under the mixture ``(1/S) sum_s N(y | f_s, noise_std^2)``.

    ``f_samples`` has shape ``(S, n)`` (a log-mean-exp per point, as the papers
    evaluate; not a joint log-sum-exp over the test set).
    """
    f = np.asarray(f_samples)
    logp = norm.logpdf(np.asarray(y_true)[None, :], f, noise_std)
    return float(np.mean(logsumexp(logp, axis=0) - np.log(f.shape[0])))


def interval_coverage(y_true, y_mean, y_std, level=0.9):
    """Fraction of ``y_true`` inside the central ``level`` Gaussian predictive interval."""
    z = norm.ppf(0.5 + level / 2.0)
    return float(np.mean(np.abs(np.asarray(y_true) - np.asarray(y_mean)) <= z * np.asarray(y_std)))


def expected_calibration_error(y_true, proba, n_bins=10):
    """Expected calibration error of the top-class confidence (equal-width bins).

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        Integer class indices (columns of ``proba``).
    proba : array-like of shape (n_samples, n_classes)
    n_bins : int, default=10
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
