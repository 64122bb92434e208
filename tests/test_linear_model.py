"""BayesianLinearRegression against dense textbook formulas and BayesianRidge."""

import numpy as np
import pytest
import sklearn
from numpy.testing import assert_allclose
from scipy.stats import multivariate_normal
from sklearn.datasets import load_diabetes
from sklearn.linear_model import BayesianRidge
from sklearn.utils.estimator_checks import parametrize_with_checks

import skbayes.linear_model as blr_module
from skbayes.linear_model import BayesianLinearRegression, MemoryLimitError, _fit_memory_bytes, _solve


def _data(n, d, seed=0, noise=0.5):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    w = rng.standard_normal(d) / np.sqrt(d)
    y = X @ w + 0.7 + noise * rng.standard_normal(n)
    var = rng.uniform(0.05, 2.0, n)  # per-sample noise variances
    return X, y, var


def _prior_precision(alpha, X, y, noise_var=None, fit_intercept=True):
    """The documented prior precision of the weights in data units, alpha X_scale^2 / y_scale^2,
    with the scales computed here from their definition: (1 / noise_var)-weighted standard
    deviations (root mean squares without intercept) of the columns of X and of y."""
    w = np.ones(len(y)) if noise_var is None else 1.0 / noise_var
    w = w / w.sum()
    Xc = X - w @ X if fit_intercept else X
    yc = y - w @ y if fit_intercept else y
    sx, sy = np.sqrt(w @ Xc**2), np.sqrt(w @ yc**2)
    return alpha * sx**2 / sy**2, sx, sy


def _dense(X, y, noise_var, prior_prec):
    """Textbook posterior and evidence with explicit inverses (no intercept); ``prior_prec``
    is the (diagonal) prior precision of the weights."""
    P = np.broadcast_to(prior_prec, (X.shape[1],))
    Linv = np.diag(1.0 / noise_var)
    Sigma = np.linalg.inv(np.diag(P) + X.T @ Linv @ X)
    m = Sigma @ X.T @ Linv @ y
    cov = np.diag(noise_var) + (X / P) @ X.T
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
    P, sx, sy = _prior_precision(alpha, X, y, var if hetero else None, fit_intercept=False)
    assert_allclose(est.X_scale_, sx, rtol=1e-12)
    assert_allclose(est.y_scale_, sy, rtol=1e-12)
    m, Sigma, logev = _dense(X, y, noise_var, P)
    assert_allclose(est.coef_, m, rtol=1e-10, atol=1e-12)
    assert_allclose(est.sigma_, Sigma, rtol=1e-10, atol=1e-12)
    assert est.intercept_ == 0.0
    assert_allclose(est.log_marginal_likelihood_value_, logev, rtol=1e-10)
    # evidence at other hyper-parameters
    _, _, logev2 = _dense(X, y, noise_var if hetero else np.full(n, 1 / 0.4), P * 2.5 / alpha)
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

    P = _prior_precision(alpha, X, y, var if hetero else None)[0]
    Z = np.hstack([X, np.ones((n, 1))])
    prec = Z.T @ (Z / noise_var[:, None])
    prec[np.arange(d), np.arange(d)] += P  # prior precision 0 on the intercept
    joint_cov = np.linalg.inv(prec)
    joint_mean = joint_cov @ Z.T @ (y / noise_var)
    assert_allclose(est.coef_, joint_mean[:d], rtol=1e-9, atol=1e-11)
    assert_allclose(est.intercept_, joint_mean[d], rtol=1e-9)
    assert_allclose(est.sigma_, joint_cov[:d, :d], rtol=1e-9, atol=1e-12)
    assert_allclose(est.X_offset_, np.average(X, axis=0, weights=1 / noise_var))

    s2 = 1e6
    cov = np.diag(noise_var) + (X / P) @ X.T + s2
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
    """alpha refers to the standardised problem: BayesianRidge fitted to the standardised
    data with lambda_ = alpha, alpha_ = noise_precision * y_scale^2 is the same model."""
    xm, sx, ym, sy = X.mean(0), X.std(0), y.mean(), y.std()
    br = BayesianRidge(tol=1e-12, max_iter=2000, compute_score=True).fit((X - xm) / sx, (y - ym) / sy)
    assert br.n_iter_ < 2000
    est = BayesianLinearRegression(alpha=br.lambda_, noise_precision=br.alpha_ / sy**2).fit(X, y)
    assert_allclose(est.X_scale_, sx, rtol=1e-12)
    assert_allclose(est.y_scale_, sy, rtol=1e-12)
    ratio = sy / sx
    coef = br.coef_ * ratio
    assert_allclose(est.coef_, coef, rtol=1e-9, atol=1e-12 * np.abs(coef).max())
    assert_allclose(est.intercept_, ym + sy * br.intercept_ - xm @ coef, rtol=1e-9)
    sigma = br.sigma_ * np.outer(ratio, ratio)
    assert_allclose(est.sigma_, sigma, rtol=1e-8, atol=1e-12 * np.abs(sigma).max())
    assert_allclose(est.X_offset_, xm, rtol=1e-12, atol=1e-15 * np.abs(X).max())
    m1, s1 = est.predict(Xq, return_std=True)
    m2, s2 = br.predict((Xq - xm) / sx, return_std=True)
    assert_allclose(m1, ym + sy * m2, rtol=1e-9)
    assert_allclose(s1, sy * s2, rtol=1e-9)
    # Without its Gamma hyper-prior terms, BayesianRidge's score is log N(yc | 0, ...)
    # over n dimensions; the flat-prior intercept adds log(2 pi)/2 - log(n tau)/2. The
    # evidence of y is that of the standardised targets minus (n - 1) log(y_scale).
    n = X.shape[0]
    hyper = (
        br.lambda_1 * np.log(br.lambda_)
        - br.lambda_2 * br.lambda_
        + br.alpha_1 * np.log(br.alpha_)
        - br.alpha_2 * br.alpha_
    )
    expected = br.scores_[-1] - hyper + 0.5 * np.log(2 * np.pi) - 0.5 * np.log(n * br.alpha_) - (n - 1) * np.log(sy)
    assert_allclose(est.log_marginal_likelihood_value_, expected, rtol=1e-7)
    return est


def test_matches_bayesian_ridge_on_diabetes():
    X, y = load_diabetes(return_X_y=True)
    est = _check_against_bayesian_ridge(X, y, X[:50])
    assert est._route == "primal"


@pytest.mark.skipif(
    tuple(int(v) for v in sklearn.__version__.split(".")[:2]) < (1, 7),
    reason="scikit-learn before 1.7 computes BayesianRidge's sigma_ from a thin SVD, wrong with fewer rows "
    "than features (the wide route is checked against dense formulas and the primal route above and below)",
)
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
    sse = np.sum((y - est.predict(X)) ** 2)
    gamma = d - np.sum(alpha * est.X_scale_**2 / est.y_scale_**2 * np.diag(est.sigma_))
    n_eff = n - 1 if fit_intercept else n
    assert_allclose(tau, (n_eff - gamma) / sse, rtol=1e-5)


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
# alpha=1000 on the standardised data keeps the evidence maximum over the noise interior
# (a vaguer prior interpolates: the noise search ends at its bracket, where the primal
# matrix has condition number ~1e12 and is no accurate reference).
@pytest.mark.parametrize("alpha, noise", [(1000.0, "auto"), (0.3, 4.0), (0.3, "hetero")])
def test_wide_dual_route_equals_primal(alpha, noise):
    X, y, var = _data(20, 500, seed=31)
    hetero = noise == "hetero"
    est = BayesianLinearRegression(alpha=alpha, noise_precision="auto" if hetero else noise)
    est.fit(X, y, noise_variance=var if hetero else None)
    assert est._route == "dual"
    for a in (est.coef_, est.sigma_, est.intercept_, est.log_marginal_likelihood_value_):
        assert np.all(np.isfinite(a))
    assert np.isnan(est.noise_precision_) if hetero else np.isfinite(est.noise_precision_)
    # the same standardised problem solved by the primal route, mapped to data units
    r = 1.0 / var if hetero else np.full(20, est.noise_precision_)
    Xs = (X - est.X_offset_) / est.X_scale_
    ys = (y - np.average(y, weights=r)) / est.y_scale_
    primal = _solve(Xs, ys, r * est.y_scale_**2, alpha, restricted=True, method="primal")
    ratio = est.y_scale_ / est.X_scale_
    assert_allclose(est.coef_, primal.coef * ratio, rtol=1e-8, atol=1e-12 * np.abs(est.coef_).max())
    assert_allclose(est.sigma_, primal.sigma * np.outer(ratio, ratio), rtol=1e-8, atol=1e-12 * est.sigma_.max())
    assert_allclose(est.log_marginal_likelihood_value_, primal.log_evidence - 19 * np.log(est.y_scale_), rtol=1e-10)
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


# (h) invariance to the units of X and y ---------------------------------------------
SCALES = (1e-8, 1e-3, 1.0, 1e3, 1e8)


def _invariance_problem(setting):
    n, d = (15, 40) if setting.startswith("wide") else (60, 5)
    X, y, var = _data(n + 6, d, seed=51, noise=0.3)
    X = X + np.arange(d)  # columns with different means: the centring matters
    if setting == "auto":
        X[:, 2] = 3.0  # a constant column; at the query points it differs
        X[n:, 2] = 4.0
    if setting == "no_intercept":
        y = y - 0.7
    return X[:n], y[:n], var[:n], X[n:]


def _fit_scaled(setting, X, y, var, fx, cy):
    # "wide" (d > n, dual route) interpolates at alpha=0.5: the noise search ends at its
    # bracket; at alpha=50 its maximum is interior.
    kwargs = {"alpha": 50.0 if setting == "wide_interior" else 0.5}
    if setting == "fixed":
        kwargs["noise_precision"] = 4.0 / cy**2  # a precision in the units of y
    if setting == "no_intercept":
        kwargs["fit_intercept"] = False
    est = BayesianLinearRegression(**kwargs)
    return est.fit(X * fx, y * cy, noise_variance=var * cy**2 if setting == "hetero" else None)


@pytest.mark.parametrize("setting", ["auto", "fixed", "hetero", "no_intercept", "wide", "wide_interior"])
@pytest.mark.parametrize("rescale", ["X columns", "X per column", "y"])
def test_invariant_to_the_units_of_X_and_y(setting, rescale):
    """Rescaling the columns of X (all by c, or each by its own factor between 1/c and c)
    leaves every prediction unchanged; rescaling y by c multiplies the predictive mean and
    std by c and divides the noise precision by c^2, for c in 1e-8 .. 1e8."""
    X, y, var, Xq = _invariance_problem(setting)
    d = X.shape[1]
    # A learned noise precision is located to tol=1e-6 on its log, whose rounding-level
    # differences between the scaled problems can move; with the noise fixed, only rounding.
    rtol = 1e-9 if setting in ("fixed", "hetero") else 1e-6
    ref = _fit_scaled(setting, X, y, var, np.ones(d), 1.0)
    ref_mean, ref_std = ref.predict(Xq, return_std=True)
    ref_draws = ref.sample_y(Xq, 3, random_state=0)
    n_jac = X.shape[0] - (0 if setting == "no_intercept" else 1)
    for c in SCALES:
        if rescale == "X columns":
            fx, cy = np.full(d, c), 1.0
        elif rescale == "X per column":
            fx, cy = c ** np.linspace(-1.0, 1.0, d), 1.0
        else:
            fx, cy = np.ones(d), c
        est = _fit_scaled(setting, X, y, var, fx, cy)
        mean, std = est.predict(Xq * fx, return_std=True)
        assert_allclose(mean / cy, ref_mean, rtol=rtol, atol=rtol * np.abs(ref_mean).max())
        assert_allclose(std / cy, ref_std, rtol=rtol)
        assert_allclose(
            est.sample_y(Xq * fx, 3, random_state=0) / cy, ref_draws, rtol=rtol, atol=rtol * np.abs(ref_draws).max()
        )
        if setting == "hetero":
            assert np.isnan(est.noise_precision_)
        else:
            assert_allclose(est.noise_precision_ * cy**2, ref.noise_precision_, rtol=10 * rtol)
        ratio = fx / cy  # coef_ is in units of y per unit of x
        assert_allclose(est.coef_ * ratio, ref.coef_, rtol=rtol, atol=rtol * np.abs(ref.coef_).max())
        assert_allclose(est.intercept_ / cy, ref.intercept_, rtol=rtol, atol=rtol * np.abs(ref_mean).max())
        assert_allclose(est.sigma_ * np.outer(ratio, ratio), ref.sigma_, rtol=rtol, atol=rtol * ref.sigma_.max())
        # the evidence is a density of y: it changes by the Jacobian of y -> y * c only
        lml = est.log_marginal_likelihood_value_ + n_jac * np.log(cy)
        assert_allclose(lml, ref.log_marginal_likelihood_value_, rtol=1e-9, atol=1e-9 * X.shape[0])


def test_noise_level_is_not_capped_by_a_vague_prior():
    """Nearly noiseless, well-conditioned data and a vague prior: the learned noise is the
    true one (1e-5), not the floor of a condition-number bracket (the search used to stop at
    noise variances >= s_max^2 / (1e12 alpha), a noise std of ~0.03 here)."""
    rng = np.random.default_rng(3)
    X = rng.standard_normal((200, 5))
    y = X @ rng.standard_normal(5) + 2.0 + 1e-5 * rng.standard_normal(200)
    est = BayesianLinearRegression(alpha=1e-6).fit(X, y)
    assert_allclose(1.0 / np.sqrt(est.noise_precision_), 1e-5, rtol=0.15)
    P = 1e-6 * est.X_scale_**2 / est.y_scale_**2
    prec = np.diag(P) + est.noise_precision_ * (X - X.mean(0)).T @ (X - X.mean(0))
    assert_allclose(est.sigma_, np.linalg.inv(prec), rtol=1e-8)
    best = est.log_marginal_likelihood_value_
    for f in (0.5, 0.9, 1.1, 2.0):
        assert best >= est.log_marginal_likelihood(noise_precision=f * est.noise_precision_)


# (i) memory guards ------------------------------------------------------------------
def test_fit_with_1e5_features_raises_a_clear_error_before_allocating():
    import tracemalloc

    from sklearn.exceptions import NotFittedError

    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((3, 100_000)), rng.standard_normal(3)
    est = BayesianLinearRegression()
    tracemalloc.start()
    try:
        with pytest.raises(MemoryLimitError) as info:
            est.fit(X, y)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 20 * 2**20  # X itself is 2.3 MiB; sigma_ would be 74.5 GiB
    assert isinstance(info.value, MemoryError) and isinstance(info.value, ValueError)
    msg = str(info.value)
    for part in ("(3, 100000)", "(100000, 100000)", "74.5 GiB", "MEMORY_LIMIT_GIB", "fewer features", "PCA"):
        assert part in msg, part
    with pytest.raises(NotFittedError):
        est.predict(X)


def test_memory_limit_is_configurable(monkeypatch):
    X, y, _ = _data(20, 300)
    BayesianLinearRegression().fit(X, y)  # 0.7 MiB for sigma_: fine at the default
    monkeypatch.setattr(blr_module, "MEMORY_LIMIT_GIB", 0.5 / 1024)  # 0.5 MiB
    with pytest.raises(MemoryLimitError, match=r"\(300, 300\)"):
        BayesianLinearRegression().fit(X, y)


def test_sample_y_raises_a_clear_error_for_too_many_draws():
    X, y, _ = _data(20, 3)
    est = BayesianLinearRegression().fit(X, y)
    with pytest.raises(MemoryLimitError, match=r"draw fewer samples"):
        est.sample_y(X, n_samples=10**10)


@pytest.mark.parametrize("n, d", [(300, 60), (60, 300), (20, 2000)])
@pytest.mark.parametrize("noise", ["auto", 2.0])
def test_memory_estimate_tracks_the_measured_peak(n, d, noise):
    """The guard's estimate is within a factor 1.5 of the peak of numpy's allocations during
    the fit (traced by tracemalloc; the input itself is allocated before)."""
    import tracemalloc

    X, y, _ = _data(n, d)
    estimate, route = _fit_memory_bytes(n, d, True, noise == "auto")
    tracemalloc.start()
    try:
        est = BayesianLinearRegression(noise_precision=noise).fit(X, y)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert est._route == route
    assert estimate / 1.5 <= peak <= 1.5 * estimate
