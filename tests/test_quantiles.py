"""Predictive quantiles and intervals of the regressors (``predict_quantiles``, ``predict_interval``).

The sampled predictive's quantiles are roots of a Gaussian mixture's distribution
function: checked against scipy's ``brentq`` on the very draws the estimator averages,
the linearised predictive's against the Gaussian of ``predict(return_std=True)``, and the
intervals' coverage on held-out rows of a real data set.
"""

import numpy as np
import pytest
import torch
from scipy.optimize import brentq
from scipy.stats import norm
from sklearn.datasets import load_diabetes
from sklearn.exceptions import NotFittedError
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from skbayes import (
    BayesianLinearRegression,
    MCDropoutRegressor,
    NoisyKFACRegressor,
    SLANGRegressor,
    VOGNRegressor,
)
from skbayes._quantiles import QUANTILE_TOL, mixture_quantiles

Q = np.array([0.025, 0.05, 0.3, 0.5, 0.9, 0.975])


def _reference(means, sd, p):
    """The ``p`` quantile of ``(1/S) sum_s N(means[s], sd^2)`` by brentq on a wide bracket."""
    lo, hi = means.min() - 50 * sd, means.max() + 50 * sd
    return brentq(lambda x: norm.cdf((x - means) / sd).mean() - p, lo, hi, xtol=1e-13 * sd, rtol=1e-15)


def _data(n_targets=None, rows=160):
    rng = np.random.RandomState(0)
    X = rng.normal(size=(rows, 3))
    f = np.sin(2 * X[:, 0]) + X[:, 1] ** 2
    if n_targets is None:
        return X, 10.0 + 3.0 * (f + 0.3 * rng.normal(size=rows))
    return X, np.stack([f + 0.3 * rng.normal(size=rows), -5.0 * f + 2.0 * rng.normal(size=rows)], axis=1)


def _drawn_outputs(est, X):
    """The draws of the network output that ``predict`` averages, in the units of ``y``: (n, S, k)."""
    (f,) = est._predict_rows(X, lambda f: (f.permute(1, 0, 2),))
    f = np.asarray(f, dtype=np.float64)
    mean = np.asarray(est._y_mean, dtype=np.float64).reshape(-1)
    scale = np.asarray(est._y_std, dtype=np.float64).reshape(-1)
    return mean + scale * f


@pytest.mark.parametrize(
    "est",
    [
        NoisyKFACRegressor(max_iter=15, random_state=0),
        SLANGRegressor(max_iter=15, random_state=0),
        MCDropoutRegressor(max_iter=15, random_state=0),
        VOGNRegressor(max_iter=15, predictive="sampled", random_state=0),
    ],
    ids=lambda e: type(e).__name__,
)
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_sampled_quantiles_are_the_mixture_quantiles(est):
    X, y = _data()
    est.fit(X[:120], y[:120])
    Xq = X[120:]
    got = est.predict_quantiles(Xq, Q)
    draws = _drawn_outputs(est, Xq)[..., 0]  # (n, S)
    sd = float(est.noise_std_)
    ref = np.array([[_reference(d, sd, p) for p in Q] for d in draws])
    np.testing.assert_allclose(got, ref, rtol=0, atol=20 * QUANTILE_TOL * sd)
    # the median of a mixture lies between its components' smallest and largest means
    assert np.all(got[:, 3] >= draws.min(1) - 1e-9) and np.all(got[:, 3] <= draws.max(1) + 1e-9)
    lower, upper = est.predict_interval(Xq, level=0.95)
    np.testing.assert_allclose(lower, ref[:, 0], rtol=0, atol=20 * QUANTILE_TOL * sd)
    np.testing.assert_allclose(upper, ref[:, -1], rtol=0, atol=20 * QUANTILE_TOL * sd)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_sampled_quantiles_per_target_after_a_2d_fit():
    X, y = _data(n_targets=2)
    est = NoisyKFACRegressor(max_iter=15, random_state=0).fit(X[:120], y[:120])
    got = est.predict_quantiles(X[120:], Q)
    assert got.shape == (40, 2, len(Q))
    draws = _drawn_outputs(est, X[120:])  # (n, S, 2)
    sds = np.asarray(est.noise_std_)
    for j in range(2):
        ref = np.array([[_reference(d, sds[j], p) for p in Q] for d in draws[:, :, j]])
        np.testing.assert_allclose(got[:, j], ref, rtol=0, atol=20 * QUANTILE_TOL * sds[j])
    lower, upper = est.predict_interval(X[120:])
    assert lower.shape == upper.shape == (40, 2) and np.all(lower < upper)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_glm_quantiles_are_gaussian():
    X, y = _data()
    est = VOGNRegressor(max_iter=15, predictive="glm", random_state=0).fit(X[:120], y[:120])
    mean, std = est.predict(X[120:], return_std=True)
    np.testing.assert_allclose(
        est.predict_quantiles(X[120:], Q), mean[:, None] + std[:, None] * norm.ppf(Q), rtol=1e-12
    )
    X2, y2 = _data(n_targets=2)
    est2 = VOGNRegressor(max_iter=15, predictive="glm", random_state=0).fit(X2[:120], y2[:120])
    mean2, std2 = est2.predict(X2[120:], return_std=True)  # (40, 2) each
    expected2 = mean2[..., None] + std2[..., None] * norm.ppf(Q)
    np.testing.assert_allclose(est2.predict_quantiles(X2[120:], Q), expected2, rtol=1e-12)
    blr = BayesianLinearRegression().fit(X[:120], y[:120])
    mean, std = blr.predict(X[120:], return_std=True)
    lower, upper = blr.predict_interval(X[120:], level=0.8)
    np.testing.assert_allclose(lower, mean - norm.ppf(0.9) * std, rtol=1e-12)
    np.testing.assert_allclose(upper, mean + norm.ppf(0.9) * std, rtol=1e-12)


def test_mixture_quantiles_routine():
    rng = np.random.RandomState(1)
    # one component: the Gaussian's quantiles
    f = torch.as_tensor(rng.normal(size=(1, 7, 1)))
    got = mixture_quantiles(f, 0.7, Q).numpy()
    np.testing.assert_allclose(got[:, 0], f[0].numpy() + 0.7 * norm.ppf(Q), atol=1e-9)
    # well-separated components (a vanishing density between them: the bisection fallback)
    f = torch.tensor([[[-40.0]], [[0.0]], [[40.0]]], dtype=torch.float64)
    p = np.array([0.3, 0.2, 0.5, 0.9])
    got = mixture_quantiles(f, 1.0, p).numpy()[0, 0]
    ref = [_reference(f[:, 0, 0].numpy(), 1.0, pi) for pi in p]
    np.testing.assert_allclose(got, ref, atol=1e-8)
    # float32 draws, a per-output sd
    f = torch.as_tensor(rng.normal(size=(50, 4, 2)), dtype=torch.float32)
    sd = torch.tensor([0.1, 3.0], dtype=torch.float64)
    got = mixture_quantiles(f, sd, Q).numpy()
    for j in range(2):
        for i in range(4):
            ref = [_reference(f[:, i, j].double().numpy(), float(sd[j]), p) for p in Q]
            np.testing.assert_allclose(got[i, j], ref, atol=1e-8 * float(sd[j]))


def test_interval_coverage_on_held_out_data():
    """At the defaults, 90% intervals of noisy K-FAC and SLANG cover 80-98% of diabetes'
    held-out rows (three splits of 111 rows: a binomial standard error of about 1.6 points)."""
    X, y = load_diabetes(return_X_y=True)
    for cls in (NoisyKFACRegressor, SLANGRegressor):
        covered = []
        for k in range(3):
            Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.25, random_state=k)
            sc = StandardScaler().fit(Xtr)
            est = cls(random_state=k).fit(sc.transform(Xtr), ytr)
            lower, upper = est.predict_interval(sc.transform(Xte))
            covered.append(np.mean((yte >= lower) & (yte <= upper)))
        assert 0.80 <= np.mean(covered) <= 0.98, (cls.__name__, covered)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("bad", [0.0, 1.0, -0.1, 1.5, [0.2, 1.0], [[0.1, 0.2]], [], True, "half", np.nan])
def test_bad_quantiles_and_levels(bad):
    X, y = _data(rows=60)
    for est in (SLANGRegressor(max_iter=2, random_state=0).fit(X, y), BayesianLinearRegression().fit(X, y)):
        with pytest.raises(ValueError, match="quantiles"):
            est.predict_quantiles(X, bad)
        if np.ndim(bad) == 0 and not isinstance(bad, str):
            with pytest.raises(ValueError, match="level"):
                est.predict_interval(X, level=bad)


def test_not_fitted():
    X, _ = _data(rows=10)
    for est in (SLANGRegressor(), BayesianLinearRegression()):
        with pytest.raises(NotFittedError):
            est.predict_interval(X)
