"""BayesianLinearRegression against dense textbook formulas and BayesianRidge."""

import numpy as np
import pytest
from numpy.testing import assert_allclose
from scipy.stats import multivariate_normal
from sklearn.datasets import load_diabetes
from sklearn.linear_model import BayesianRidge
from sklearn.utils.estimator_checks import parametrize_with_checks

from skbayes.linear_model import BayesianLinearRegression, _solve


def _data(n, d, seed=0, noise=0.5):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    w = rng.standard_normal(d) / np.sqrt(d)
    y = X @ w + 0.7 + noise * rng.standard_normal(n)
    var = rng.uniform(0.05, 2.0, n)  # per-sample noise variances
    return X, y, var


def _dense(X, y, noise_var, alpha):
    """Textbook posterior and evidence with explicit inverses (no intercept)."""
    Linv = np.diag(1.0 / noise_var)
    Sigma = np.linalg.inv(alpha * np.eye(X.shape[1]) + X.T @ Linv @ X)
    m = Sigma @ X.T @ Linv @ y
    cov = np.diag(noise_var) + X @ X.T / alpha
    logev = multivariate_normal(np.zeros(len(y)), cov).logpdf(y)
    return m, Sigma, logev


# (a) dense formulas, homoscedastic and heteroscedastic, n > d and n < d ------------
@pytest.mark.parametrize("n, d", [(40, 6), (12, 30)])
@pytest.mark.parametrize("hetero", [False, True])
def test_posterior_and_evidence_match_dense_formulas(n, d, hetero):
    X, y, var = _data(n, d)
    alpha, tau = 0.7, 3.0
    if hetero:
        est = BayesianLinearRegression(alpha=alpha, fit_intercept=False).fit(X, y, noise_variance=var)
        noise_var = var
    else:
        est = BayesianLinearRegression(alpha=alpha, noise_precision=tau, fit_intercept=False).fit(X, y)
        noise_var = np.full(n, 1.0 / tau)
    assert est._route == ("primal" if d <= n else "dual")
    m, Sigma, logev = _dense(X, y, noise_var, alpha)
    assert_allclose(est.coef_, m, rtol=1e-10, atol=1e-12)
    assert_allclose(est.sigma_, Sigma, rtol=1e-10, atol=1e-12)
    assert est.intercept_ == 0.0
    assert_allclose(est.log_marginal_likelihood_value_, logev, rtol=1e-10)
    # evidence at other hyper-parameters
    _, _, logev2 = _dense(X, y, noise_var if hetero else np.full(n, 1 / 0.4), 2.5)
    got = est.log_marginal_likelihood(alpha=2.5, noise_precision=None if hetero else 0.4)
    assert_allclose(got, logev2, rtol=1e-10)
    # predictive moments
    Xq = np.random.default_rng(1).standard_normal((5, d))
    mean, std = est.predict(Xq, return_std=True)
    assert_allclose(mean, Xq @ m, rtol=1e-10, atol=1e-12)
    expected_var = np.einsum("ij,jk,ik->i", Xq, Sigma, Xq) + (0.0 if hetero else 1.0 / tau)
    assert_allclose(std**2, expected_var, rtol=1e-10)
    if hetero:
        assert np.isnan(est.noise_precision_)


@pytest.mark.parametrize("n, d", [(40, 6), (12, 30)])
@pytest.mark.parametrize("hetero", [False, True])
def test_flat_prior_intercept_is_integrated_out(n, d, hetero):
    """With fit_intercept=True the weights' posterior is the marginal of the joint
    posterior of (w, b) under a flat prior on b; the evidence is the limit of
    log p(y) + log(2 pi s^2)/2 under b ~ N(0, s^2), s -> inf."""
    X, y, var = _data(n, d, seed=3)
    y = y + 5.0
    alpha, tau = 1.3, 2.0
    noise_var = var if hetero else np.full(n, 1.0 / tau)
    est = BayesianLinearRegression(alpha=alpha, noise_precision="auto" if hetero else tau)
    est.fit(X, y, noise_variance=var if hetero else None)

    Z = np.hstack([X, np.ones((n, 1))])
    prec = Z.T @ (Z / noise_var[:, None])
    prec[np.arange(d), np.arange(d)] += alpha  # prior precision 0 on the intercept
    joint_cov = np.linalg.inv(prec)
    joint_mean = joint_cov @ Z.T @ (y / noise_var)
    assert_allclose(est.coef_, joint_mean[:d], rtol=1e-9, atol=1e-11)
    assert_allclose(est.intercept_, joint_mean[d], rtol=1e-9)
    assert_allclose(est.sigma_, joint_cov[:d, :d], rtol=1e-9, atol=1e-12)
    assert_allclose(est.X_offset_, np.average(X, axis=0, weights=1 / noise_var))

    s2 = 1e6
    cov = np.diag(noise_var) + X @ X.T / alpha + s2
    proper = multivariate_normal(np.zeros(n), cov).logpdf(y) + 0.5 * np.log(2 * np.pi * s2)
    assert_allclose(est.log_marginal_likelihood_value_, proper, atol=1e-4)
    # shift invariance in y
    est2 = BayesianLinearRegression(alpha=alpha, noise_precision="auto" if hetero else tau)
    est2.fit(X, y - 100.0, noise_variance=var if hetero else None)
    assert_allclose(est2.log_marginal_likelihood_value_, est.log_marginal_likelihood_value_, rtol=1e-10)


def test_constant_heteroscedastic_variances_equal_homoscedastic_fit():
    X, y, _ = _data(30, 4, seed=5)
    a = BayesianLinearRegression(alpha=0.5, noise_precision=4.0).fit(X, y)
    b = BayesianLinearRegression(alpha=0.5).fit(X, y, noise_variance=np.full(30, 0.25))
    assert_allclose(a.coef_, b.coef_, rtol=1e-12)
    assert_allclose(a.intercept_, b.intercept_, rtol=1e-12)
    assert_allclose(a.sigma_, b.sigma_, rtol=1e-12)
    assert_allclose(a.log_marginal_likelihood_value_, b.log_marginal_likelihood_value_, rtol=1e-12)
    Xq = X[:3] + 0.1
    _, sa = a.predict(Xq, return_std=True)
    _, sb = b.predict(Xq, return_std=True)
    assert_allclose(sa**2, sb**2 + 0.25, rtol=1e-12)  # heteroscedastic std leaves the noise out


# (b) agreement with scikit-learn's BayesianRidge at equal hyper-parameters ----------
def _check_against_bayesian_ridge(X, y, Xq):
    br = BayesianRidge(tol=1e-12, max_iter=2000, compute_score=True).fit(X, y)
    assert br.n_iter_ < 2000
    est = BayesianLinearRegression(alpha=br.lambda_, noise_precision=br.alpha_).fit(X, y)
    assert_allclose(est.coef_, br.coef_, rtol=1e-9, atol=1e-12 * np.abs(br.coef_).max())
    assert_allclose(est.intercept_, br.intercept_, rtol=1e-9)
    assert_allclose(est.sigma_, br.sigma_, rtol=1e-8, atol=1e-12 * np.abs(br.sigma_).max())
    assert_allclose(est.X_offset_, br.X_offset_, rtol=1e-12)
    m1, s1 = est.predict(Xq, return_std=True)
    m2, s2 = br.predict(Xq, return_std=True)
    assert_allclose(m1, m2, rtol=1e-9)
    assert_allclose(s1, s2, rtol=1e-9)
    # Without its Gamma hyper-prior terms, BayesianRidge's score is log N(yc | 0, ...)
    # over n dimensions; the flat-prior intercept adds log(2 pi)/2 - log(n tau)/2.
    n = X.shape[0]
    hyper = (
        br.lambda_1 * np.log(br.lambda_)
        - br.lambda_2 * br.lambda_
        + br.alpha_1 * np.log(br.alpha_)
        - br.alpha_2 * br.alpha_
    )
    expected = br.scores_[-1] - hyper + 0.5 * np.log(2 * np.pi) - 0.5 * np.log(n * br.alpha_)
    assert_allclose(est.log_marginal_likelihood_value_, expected, rtol=1e-7)
    return est


def test_matches_bayesian_ridge_on_diabetes():
    X, y = load_diabetes(return_X_y=True)
    est = _check_against_bayesian_ridge(X, y, X[:50])
    assert est._route == "primal"


def test_matches_bayesian_ridge_wide():
    X, y, _ = _data(40, 60, seed=7)
    est = _check_against_bayesian_ridge(X, y, _data(10, 60, seed=8)[0])
    assert est._route == "dual"


# (c) evidence maximisation over the noise precision --------------------------------
@pytest.mark.parametrize("n, d, alpha", [(400, 5, 2.0), (30, 80, 80.0)])
@pytest.mark.parametrize("fit_intercept", [True, False])
def test_auto_noise_precision_maximises_evidence(n, d, alpha, fit_intercept):
    X, y, _ = _data(n, d, seed=11, noise=0.4)
    if not fit_intercept:
        y = y - 0.7
    est = BayesianLinearRegression(alpha=alpha, fit_intercept=fit_intercept).fit(X, y)
    tau = est.noise_precision_
    assert est.n_iter_ >= 1
    best = est.log_marginal_likelihood_value_
    assert_allclose(best, est.log_marginal_likelihood(), rtol=1e-12)
    for f in (0.5, 2.0, 0.99, 1.01, 0.999, 1.001):
        assert best >= est.log_marginal_likelihood(noise_precision=f * tau) - 1e-10
    # stationarity: MacKay's fixed point tau = (n_eff - gamma) / SSE holds at the optimum
    Xc = X - est.X_offset_
    sse = np.sum((y - est.predict(X)) ** 2)
    gamma = d - alpha * np.trace(est.sigma_)
    n_eff = n - 1 if fit_intercept else n
    assert_allclose(tau, (n_eff - gamma) / sse, rtol=1e-5)
    assert Xc.shape == X.shape


def test_auto_noise_precision_recovers_noise_level():
    rng = np.random.default_rng(0)
    n, d, sigma = 3000, 8, 0.3
    X = rng.standard_normal((n, d))
    y = X @ rng.standard_normal(d) - 2.0 + sigma * rng.standard_normal(n)
    est = BayesianLinearRegression(alpha=1e-2).fit(X, y)
    assert_allclose(1.0 / np.sqrt(est.noise_precision_), sigma, rtol=0.05)


def test_max_iter_reached_warns():
    from sklearn.exceptions import ConvergenceWarning

    X, y, _ = _data(50, 3)
    with pytest.warns(ConvergenceWarning, match="max_iter"):
        est = BayesianLinearRegression(max_iter=2).fit(X, y)
    assert est.n_iter_ == 2


def test_fixed_noise_has_no_iterations():
    X, y, var = _data(20, 3)
    assert BayesianLinearRegression(noise_precision=2.0).fit(X, y).n_iter_ == 0
    assert BayesianLinearRegression().fit(X, y, noise_variance=var).n_iter_ == 0
    assert BayesianLinearRegression(noise_precision=1.0).fit(X, y, noise_variance=var).n_iter_ == 0


# (d) sample_y moments ---------------------------------------------------------------
@pytest.mark.parametrize("n, d", [(50, 4), (15, 40)])
@pytest.mark.parametrize("hetero", [False, True])
def test_sample_y_moments_match_predict(n, d, hetero):
    X, y, var = _data(n, d, seed=21)
    est = BayesianLinearRegression(alpha=0.8, noise_precision="auto" if hetero else 2.0)
    est.fit(X, y, noise_variance=var if hetero else None)
    Xq = _data(4, d, seed=22)[0]
    S = 40000
    draws = est.sample_y(Xq, n_samples=S, random_state=0)
    assert draws.shape == (4, S)
    mean, std = est.predict(Xq, return_std=True)
    assert np.all(np.abs(draws.mean(1) - mean) < 4.5 * std / np.sqrt(S))
    assert_allclose(draws.std(1), std, rtol=0.03)
    # joint covariance across query points
    Xc = Xq - est.X_offset_
    cov = Xc @ est.sigma_ @ Xc.T + (0.0 if hetero else np.eye(4) / est.noise_precision_)
    scale = np.sqrt(np.outer(np.diag(cov), np.diag(cov)))
    assert np.all(np.abs(np.cov(draws) - cov) < 0.04 * scale)
    # reproducible and shaped like GaussianProcessRegressor.sample_y
    assert_allclose(est.sample_y(Xq, 3, random_state=5), est.sample_y(Xq, 3, random_state=5))
    assert est.sample_y(Xq).shape == (4, 1)


# (e) d >> n: dual route, equal to the primal route in float64 ----------------------
@pytest.mark.parametrize("alpha, noise", [(500.0, "auto"), (0.3, 4.0), (0.3, "hetero")])
def test_wide_dual_route_equals_primal(alpha, noise):
    X, y, var = _data(20, 500, seed=31)
    hetero = noise == "hetero"
    est = BayesianLinearRegression(alpha=alpha, noise_precision="auto" if hetero else noise)
    est.fit(X, y, noise_variance=var if hetero else None)
    assert est._route == "dual"
    for a in (est.coef_, est.sigma_, est.intercept_, est.log_marginal_likelihood_value_, est.noise_precision_):
        assert np.all(np.isfinite(a)) or (hetero and np.isnan(est.noise_precision_))
    Xc = X - est.X_offset_
    yc = y - np.average(y, weights=est._precision_train)
    r = 1.0 / var if hetero else np.full(20, est.noise_precision_)
    primal = _solve(Xc, yc, r, alpha, restricted=True, method="primal")
    assert_allclose(est.coef_, primal.coef, rtol=1e-8, atol=1e-12)
    assert_allclose(est.sigma_, primal.sigma, rtol=1e-8, atol=1e-12)
    assert_allclose(est.log_marginal_likelihood_value_, primal.log_evidence, rtol=1e-10)
    _, std = est.predict(X[:3] + 1.0, return_std=True)
    assert np.all(np.isfinite(std)) and np.all(std > 0)
    assert np.all(np.isfinite(est.sample_y(X[:3], 4)))


def test_interpolating_regime_stops_at_bracket_end():
    """d > n and a vague prior: the evidence increases all the way to zero noise;
    the search stops at the largest noise precision it considers and stays finite."""
    X, y, _ = _data(30, 80, seed=11, noise=0.4)
    est = BayesianLinearRegression(alpha=2.0).fit(X, y)
    tau = est.noise_precision_
    assert np.isfinite(tau) and tau > 1e8
    assert est.log_marginal_likelihood_value_ >= est.log_marginal_likelihood(noise_precision=0.5 * tau)
    assert np.all(np.isfinite(est.sigma_)) and np.all(np.isfinite(est.predict(X, return_std=True)[1]))
    assert_allclose(est.predict(X), y, atol=1e-6)  # essentially interpolates


def test_docstring_example():
    import doctest

    import skbayes.linear_model as mod

    assert doctest.testmod(mod, raise_on_error=False).failed == 0


def test_tall_dual_route_equals_primal():
    X, y, var = _data(300, 7, seed=41)
    r = 1.0 / var
    p = _solve(X, y, r, 0.9, restricted=False, method="primal")
    q = _solve(X, y, r, 0.9, restricted=False, method="dual")
    assert_allclose(p.coef, q.coef, rtol=1e-9)
    assert_allclose(p.sigma, q.sigma, rtol=1e-8, atol=1e-14)
    assert_allclose(p.log_evidence, q.log_evidence, rtol=1e-11)


# (f) scikit-learn's estimator checks ------------------------------------------------
@parametrize_with_checks([BayesianLinearRegression()])
def test_sklearn_compatible(estimator, check):
    check(estimator)


# (g) bad input ----------------------------------------------------------------------
def test_bad_noise_variance():
    X, y, var = _data(10, 3)
    est = BayesianLinearRegression()
    with pytest.raises(ValueError, match="strictly positive"):
        est.fit(X, y, noise_variance=-var)
    with pytest.raises(ValueError, match="strictly positive"):
        est.fit(X, y, noise_variance=np.r_[0.0, var[1:]])
    with pytest.raises(ValueError, match="finite"):
        est.fit(X, y, noise_variance=np.r_[np.nan, var[1:]])
    with pytest.raises(ValueError, match=r"shape \(n_samples,\)"):
        est.fit(X, y, noise_variance=var[:-1])
    with pytest.raises(ValueError, match=r"shape \(n_samples,\)"):
        est.fit(X, y, noise_variance=var[:, None])
    with pytest.raises(ValueError, match=r"shape \(n_samples,\)"):
        est.fit(X, y, noise_variance=0.5)
    with pytest.raises(ValueError, match="noise_precision must be 'auto'"):
        BayesianLinearRegression(noise_precision=2.0).fit(X, y, noise_variance=var)
    fitted = BayesianLinearRegression().fit(X, y, noise_variance=var)
    with pytest.raises(ValueError, match="noise_precision cannot be set"):
        fitted.log_marginal_likelihood(noise_precision=2.0)


@pytest.mark.parametrize("alpha", [0.0, -1.0, np.inf, np.nan, "1", None, True])
def test_bad_alpha(alpha):
    X, y, _ = _data(10, 3)
    with pytest.raises(ValueError, match="alpha must be a positive float"):
        BayesianLinearRegression(alpha=alpha).fit(X, y)


@pytest.mark.parametrize(
    "params, match",
    [
        (dict(noise_precision=0.0), "noise_precision"),
        (dict(noise_precision=-2.0), "noise_precision"),
        (dict(noise_precision="fixed"), "noise_precision"),
        (dict(max_iter=0), "max_iter"),
        (dict(tol=-1.0), "tol"),
        (dict(fit_intercept="yes"), "fit_intercept"),
    ],
)
def test_bad_params(params, match):
    X, y, _ = _data(10, 3)
    with pytest.raises(ValueError, match=match):
        BayesianLinearRegression(**params).fit(X, y)


def test_bad_arguments_after_fit():
    X, y, _ = _data(10, 3)
    est = BayesianLinearRegression().fit(X, y)
    with pytest.raises(ValueError, match="alpha must be a positive float"):
        est.log_marginal_likelihood(alpha=-1.0)
    with pytest.raises(ValueError, match="noise_precision must be a positive float"):
        est.log_marginal_likelihood(noise_precision=0.0)
    with pytest.raises(ValueError, match="n_samples"):
        est.sample_y(X, n_samples=0)
