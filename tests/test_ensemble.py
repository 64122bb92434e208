"""Ensembles of posteriors (skbayes.ensemble): the mixture's moments, quantiles, densities and
draws against references computed member by member, scikit-learn's checks, and bad input."""

import numpy as np
import pytest
import torch
from scipy.optimize import brentq
from scipy.special import logsumexp
from scipy.stats import norm
from sklearn.datasets import load_diabetes, load_iris
from sklearn.linear_model import BayesianRidge
from sklearn.metrics import log_loss
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import parametrize_with_checks

from skbayes import NoisyKFACClassifier, NoisyKFACRegressor, SLANGRegressor, VOGNClassifier
from skbayes._quantiles import mixture_quantiles
from skbayes._validation import InvalidParameterError
from skbayes.ensemble import PosteriorEnsembleClassifier, PosteriorEnsembleRegressor
from skbayes.pipeline import make_pipeline

_FAST = dict(hidden_layer_sizes=(10,), max_iter=30, predict_samples=20)


@pytest.fixture(scope="module")
def diabetes():
    X, y = load_diabetes(return_X_y=True)
    return StandardScaler().fit_transform(X), y


@pytest.fixture(scope="module")
def iris():
    X, y = load_iris(return_X_y=True)
    return StandardScaler().fit_transform(X), y


@pytest.fixture(scope="module", params=["sampled", "glm"])
def fitted_regressor(request, diabetes):
    X, y = diabetes
    member = NoisyKFACRegressor(**_FAST, predictive=request.param)
    return PosteriorEnsembleRegressor(member, n_members=3, random_state=0).fit(X, y)


def _weighted_quantiles(mu, sd, w, q):
    """The weighted mixture's quantiles through the estimators' routine, as NumPy."""
    as_t = torch.from_numpy
    return mixture_quantiles(as_t(mu), as_t(np.ascontiguousarray(sd)), q, as_t(w)).numpy()


def _cdf(x, mu, sd, w):
    return float(np.sum(w * norm.cdf((x - mu) / sd)))


def test_mixture_quantiles_match_brute_force_roots():
    rng = np.random.RandomState(0)
    C, n = 7, 5
    mu = rng.normal(size=(C, n)) * 3.0
    sd = rng.uniform(0.05, 2.0, size=(C, n))
    w = rng.dirichlet(np.ones(C))
    q = np.array([0.01, 0.05, 0.5, 0.9, 0.999])
    got = _weighted_quantiles(mu, sd, w, q)
    assert got.shape == (n, len(q))
    for i in range(n):
        for j, p in enumerate(q):
            ref = brentq(lambda x, i=i, p=p: _cdf(x, mu[:, i], sd[:, i], w) - p, -100.0, 100.0, xtol=1e-13)
            np.testing.assert_allclose(got[i, j], ref, rtol=0, atol=1e-8)


def test_mixture_quantiles_of_one_gaussian_are_closed_form():
    mu, sd = np.array([[1.5, -2.0]]), np.array([[0.3, 4.0]])
    q = np.array([0.05, 0.5, 0.95])
    np.testing.assert_allclose(
        _weighted_quantiles(mu, sd, np.ones(1), q), mu[0][:, None] + sd[0][:, None] * norm.ppf(q), atol=1e-9
    )


def test_mixture_quantiles_of_separated_components():
    """Two far-apart components: the median lies in the gap, where the density vanishes."""
    mu, sd = np.array([[-50.0], [50.0]]), np.full((2, 1), 0.1)
    x = _weighted_quantiles(mu, sd, np.array([0.5, 0.5]), np.array([0.25, 0.5, 0.75]))
    np.testing.assert_allclose(x[0, [0, 2]], [-50.0, 50.0], atol=1e-6)
    assert -50.0 < x[0, 1] < 50.0 and abs(_cdf(x[0, 1], mu[:, 0], sd[:, 0], np.array([0.5, 0.5])) - 0.5) < 1e-9


def test_moments_follow_the_law_of_total_variance(fitted_regressor, diabetes):
    X, _ = diabetes
    ens = fitted_regressor
    means = np.stack([m.predict(X[:20], return_std=True)[0] for m in ens.estimators_])
    stds = np.stack([m.predict(X[:20], return_std=True)[1] for m in ens.estimators_])
    mean, std = ens.predict(X[:20], return_std=True)
    np.testing.assert_allclose(mean, means.mean(0), rtol=1e-12)
    np.testing.assert_allclose(std**2, (stds**2 + means**2).mean(0) - means.mean(0) ** 2, rtol=1e-9)
    np.testing.assert_allclose(ens.predict(X[:20]), mean, rtol=1e-12)
    np.testing.assert_allclose(ens.predict_std(X[:20]), std, rtol=1e-12)


def test_members_are_different_fits(fitted_regressor, diabetes):
    X, _ = diabetes
    preds = [m.predict(X[:10]) for m in fitted_regressor.estimators_]
    assert len({m.random_state for m in fitted_regressor.estimators_}) == 3
    assert not np.allclose(preds[0], preds[1])


def test_log_likelihood_is_the_mixture_density_row_by_row(fitted_regressor, diabetes):
    """Against each member's own log density of each row (its public log_likelihood on one row)."""
    X, y = diabetes
    ens = fitted_regressor
    rows = range(8)
    per_member = np.array([[m.log_likelihood(X[i : i + 1], y[i : i + 1]) for i in rows] for m in ens.estimators_])
    ref = np.mean(logsumexp(per_member, axis=0) - np.log(len(ens.estimators_)))
    np.testing.assert_allclose(ens.log_likelihood(X[:8], y[:8]), ref, rtol=1e-9)


def test_log_likelihood_is_at_least_the_members_mean(fitted_regressor, diabetes):
    """Jensen: the log of the average density is at least the average of the log densities."""
    X, y = diabetes
    ens = fitted_regressor
    members = [m.log_likelihood(X, y) for m in ens.estimators_]
    assert ens.log_likelihood(X, y) >= np.mean(members) - 1e-12


def test_quantiles_invert_the_mixture_distribution_function(fitted_regressor, diabetes):
    """The quantile's CDF value, summed member by member from their own predictives, is q."""
    X, _ = diabetes
    ens = fitted_regressor
    q = np.array([0.05, 0.5, 0.95])
    got = ens.predict_quantiles(X[:6], q)
    K = len(ens.estimators_)
    for i in range(6):
        for j, p in enumerate(q):
            total = 0.0
            for m in ens.estimators_:
                if m.get_params()["predictive"] == "glm":
                    mu, sd = m.predict(X[i : i + 1], return_std=True)
                    total += norm.cdf((got[i, j] - mu[0]) / sd[0]) / K
                else:  # its own draws (checked against its public methods below)
                    f, sd = m._predictive_components(X[i : i + 1])
                    total += norm.cdf((got[i, j] - f[:, 0]) / sd).mean() / K
            assert abs(total - p) < 1e-8
    lower, upper = ens.predict_interval(X[:6], level=0.9)
    np.testing.assert_allclose(lower, got[:, 0])
    np.testing.assert_allclose(upper, got[:, 2])


def test_components_are_the_members_own_predictive(fitted_regressor, diabetes):
    """The components the ensemble mixes give back each member's public predict,
    predict_quantiles and log_likelihood."""
    X, y = diabetes
    q = np.array([0.05, 0.5, 0.95])
    for m in fitted_regressor.estimators_:
        mu, sd = m._predictive_components(X[:30])
        sd = np.broadcast_to(sd, mu.shape)
        w = np.full(mu.shape[0], 1.0 / mu.shape[0])
        mean, std = m.predict(X[:30], return_std=True)
        np.testing.assert_allclose(mu.mean(0), mean, rtol=1e-10)
        np.testing.assert_allclose(np.sqrt((sd**2).mean(0) + mu.var(0)), std, rtol=1e-8)
        np.testing.assert_allclose(_weighted_quantiles(mu, sd, w, q), m.predict_quantiles(X[:30], q), rtol=1e-8)
        logp = logsumexp(norm.logpdf(y[None, :30], mu, sd), axis=0) - np.log(mu.shape[0])
        np.testing.assert_allclose(np.mean(logp), m.log_likelihood(X[:30], y[:30]), rtol=1e-9)


def test_sample_y_draws_from_the_mixture(diabetes):
    X, y = diabetes
    # predict's moments from 20,000 weight samples: their own Monte Carlo error is below the draws'
    member = SLANGRegressor(**{**_FAST, "predict_samples": 20_000})
    ens = PosteriorEnsembleRegressor(member, n_members=2, random_state=1).fit(X, y)
    S = 100_000
    draws = ens.sample_y(X[:3], n_samples=S, random_state=0)
    assert draws.shape == (3, S)
    mean, std = ens.predict(X[:3], return_std=True)
    # the standard error of a mean of S draws is std / 316; of a standard deviation about std / 447
    atol = float(5 * std.max() / np.sqrt(S))
    np.testing.assert_allclose(draws.mean(1), mean, atol=atol)
    np.testing.assert_allclose(draws.std(1), std, rtol=0.02)
    # the check can tell the mixture from either member alone (their means are 0.03 std apart)
    for m in ens.estimators_:
        assert np.abs(m.predict(X[:3]) - mean).max() > 1.5 * atol
    np.testing.assert_array_equal(draws[:, :10], ens.sample_y(X[:3], n_samples=S, random_state=0)[:, :10])


def test_one_member_is_the_member_fitted_from_the_drawn_seed(diabetes):
    X, y = diabetes
    member = NoisyKFACRegressor(**_FAST)
    ens = PosteriorEnsembleRegressor(member, n_members=1, random_state=3).fit(X, y)
    seed = np.random.RandomState(3).randint(np.iinfo(np.int32).max)
    alone = NoisyKFACRegressor(**_FAST, random_state=int(seed)).fit(X, y)
    np.testing.assert_array_equal(ens.predict(X[:10]), alone.predict(X[:10]))
    np.testing.assert_allclose(ens.predict_quantiles(X[:10]), alone.predict_quantiles(X[:10]), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(ens.log_likelihood(X, y), alone.log_likelihood(X, y), rtol=1e-9)


def test_reproducible_and_parallel_fits_agree(diabetes):
    X, y = diabetes
    member = NoisyKFACRegressor(**_FAST)
    a = PosteriorEnsembleRegressor(member, n_members=2, random_state=0).fit(X, y).predict(X[:10])
    b = PosteriorEnsembleRegressor(member, n_members=2, random_state=0, n_jobs=2).fit(X, y).predict(X[:10])
    np.testing.assert_array_equal(a, b)
    assert member.random_state is None  # the estimator passed in is cloned, never changed


def test_a_member_needs_a_random_state(diabetes):
    X, y = diabetes
    ens = PosteriorEnsembleRegressor(BayesianRidge(), n_members=2, random_state=0)
    with pytest.raises(ValueError, match="random_state"):
        ens.fit(X, y)


def test_gaussian_members_from_scikit_learn(diabetes):
    """Any regressor whose predict(return_std=True) is a Gaussian predictive can be a member:
    here Gaussian processes whose optimiser restarts depend on the seed; the quantiles are
    those of the closed-form mixture of their Gaussians."""
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import RBF, WhiteKernel

    X, y = diabetes
    gp = GaussianProcessRegressor(RBF(1.0) + WhiteKernel(), normalize_y=True, n_restarts_optimizer=1)
    ens = PosteriorEnsembleRegressor(gp, n_members=2, random_state=0).fit(X[:150], y[:150])
    mus, sds = zip(*[m.predict(X[:4], return_std=True) for m in ens.estimators_], strict=True)
    got = ens.predict_quantiles(X[:4], [0.1, 0.9])
    for i in range(4):
        for j, p in enumerate([0.1, 0.9]):
            F = np.mean([norm.cdf((got[i, j] - mu[i]) / sd[i]) for mu, sd in zip(mus, sds, strict=True)])
            assert abs(F - p) < 1e-9


def test_multi_output_regression(diabetes):
    X, y = diabetes
    Y = np.column_stack([y, -2.0 * y + 10.0])
    ens = PosteriorEnsembleRegressor(NoisyKFACRegressor(**_FAST), n_members=2, random_state=0).fit(X, Y)
    assert ens.predict(X[:4]).shape == (4, 2)
    # per target, the mixture's mean is the members' average
    np.testing.assert_allclose(ens.predict(X[:4]), np.mean([m.predict(X[:4]) for m in ens.estimators_], 0), rtol=1e-12)
    assert ens.predict_quantiles(X[:4], [0.1, 0.9]).shape == (4, 2, 2)
    assert ens.sample_y(X[:4], 3).shape == (4, 2, 3)
    assert np.isfinite(ens.log_likelihood(X[:50], Y[:50]))
    with pytest.raises(ValueError, match="shape"):
        ens.log_likelihood(X[:50], y[:50])


def test_classifier_probabilities_and_their_spread(iris):
    """predict_std against the spread of the union of the members' sampled probabilities."""
    X, y = iris
    member = NoisyKFACClassifier(**_FAST, predictive="sampled")
    ens = PosteriorEnsembleClassifier(member, n_members=3, random_state=0).fit(X, y)
    proba = ens.predict_proba(X)
    np.testing.assert_allclose(proba.sum(1), 1.0, rtol=1e-12)
    np.testing.assert_allclose(proba, np.mean([m.predict_proba(X) for m in ens.estimators_], axis=0))
    # the draws of the members' own predictions (rows first), pooled: (3 S, 5, 3) logits
    draws = [m._predict_rows(X[:5], lambda f: (f.transpose(0, 1),))[0] for m in ens.estimators_]
    logits = np.concatenate([np.moveaxis(np.asarray(d, dtype=np.float64), 1, 0) for d in draws])
    p = np.exp(logits - logsumexp(logits, axis=-1, keepdims=True))
    np.testing.assert_allclose(ens.predict_proba(X[:5]), p.mean(0), rtol=1e-9)
    np.testing.assert_allclose(ens.predict_std(X[:5]), p.std(0), rtol=1e-7, atol=1e-12)
    np.testing.assert_allclose(np.exp(ens.predict_log_proba(X[:5])), proba[:5], rtol=1e-12)
    np.testing.assert_array_equal(ens.predict(X), ens.classes_[proba.argmax(1)])
    # convexity: the average of the members' probabilities has at most their mean log-loss
    assert log_loss(y, proba) <= np.mean([log_loss(y, m.predict_proba(X)) for m in ens.estimators_]) + 1e-12


def test_sample_outputs_pool_the_members(iris):
    X, y = iris
    ens = PosteriorEnsembleClassifier(NoisyKFACClassifier(**_FAST), n_members=3, random_state=0).fit(X, y)
    pooled = ens.sample_outputs(X[:4])
    np.testing.assert_array_equal(pooled, np.concatenate([m.sample_outputs(X[:4]) for m in ens.estimators_]))
    assert ens.sample_outputs(X[:4], n_samples=7, random_state=1).shape == (7, 4, 3)
    np.testing.assert_array_equal(
        ens.sample_outputs(X[:4], n_samples=7, random_state=1), ens.sample_outputs(X[:4], n_samples=7, random_state=1)
    )
    with pytest.raises(InvalidParameterError, match="n_samples"):
        ens.sample_outputs(X[:4], n_samples=0)
    from sklearn.svm import SVC

    assert not hasattr(PosteriorEnsembleClassifier(SVC()), "sample_outputs")  # members without it: no method


def test_classifier_string_labels_and_pipeline(iris):
    X, y = iris
    labels = np.array(["setosa", "versicolor", "virginica"])[y]
    pipe = make_pipeline(
        StandardScaler(), PosteriorEnsembleClassifier(VOGNClassifier(**_FAST), n_members=2, random_state=0)
    )
    pipe.fit(X, labels)
    assert set(pipe.predict(X)) <= set(labels)
    assert pipe.predict_std(X[:3]).shape == (3, 3)


def test_regressor_in_a_pipeline(diabetes):
    X, y = diabetes
    pipe = make_pipeline(
        StandardScaler(), PosteriorEnsembleRegressor(NoisyKFACRegressor(**_FAST), n_members=2, random_state=0)
    )
    lower, upper = pipe.fit(X, y).predict_interval(X[:5])
    assert np.all(lower < upper)
    ens = pipe[-1]
    Xs = pipe[0].transform(X[:40])
    assert pipe.log_likelihood(X[:40], y[:40]) == ens.log_likelihood(Xs, y[:40])
    # n_samples: the members' sampled predictives with that many draws, against one member alone
    one = PosteriorEnsembleRegressor(NoisyKFACRegressor(**_FAST), n_members=1, random_state=0).fit(Xs, y[:40])
    np.testing.assert_allclose(
        one.log_likelihood(Xs, y[:40], n_samples=7),
        one.estimators_[0].log_likelihood(Xs, y[:40], n_samples=7),
        rtol=1e-12,
    )
    assert one.log_likelihood(Xs, y[:40], n_samples=7) != one.log_likelihood(Xs, y[:40])


@pytest.mark.parametrize(
    "params, error, match",
    [
        (dict(n_members=0), InvalidParameterError, "n_members"),
        (dict(n_members=2.5), InvalidParameterError, "n_members"),
        (dict(n_jobs=0), ValueError, "n_jobs"),
        (dict(random_state="x"), InvalidParameterError, "random_state"),
        (dict(estimator="NoisyKFAC"), InvalidParameterError, "estimator"),
    ],
)
def test_bad_parameters(params, error, match, diabetes):
    X, y = diabetes
    ens = PosteriorEnsembleRegressor(NoisyKFACRegressor(**_FAST)).set_params(**params)
    with pytest.raises(error, match=match):
        ens.fit(X, y)


def test_a_classifier_member_needs_predict_proba(iris):
    X, y = iris
    from sklearn.svm import LinearSVC

    with pytest.raises(InvalidParameterError, match="predict_proba"):
        PosteriorEnsembleClassifier(LinearSVC()).fit(X, y)


def test_inputs_are_not_modified(diabetes):
    X, y = diabetes
    X0, y0 = X.copy(), y.copy()
    ens = PosteriorEnsembleRegressor(NoisyKFACRegressor(**_FAST), n_members=2, random_state=0).fit(X, y)
    ens.predict_quantiles(X)
    ens.log_likelihood(X, y)
    np.testing.assert_array_equal(X, X0)
    np.testing.assert_array_equal(y, y0)


def test_default_member_is_noisy_kfac(diabetes):
    X, y = diabetes
    ens = PosteriorEnsembleRegressor(n_members=1, random_state=0).fit(X[:120], y[:120])
    assert type(ens.estimator_) is NoisyKFACRegressor and type(ens.estimators_[0]) is NoisyKFACRegressor
    assert PosteriorEnsembleClassifier()._base_estimator().__class__ is NoisyKFACClassifier


_CHECK_FAST = dict(hidden_layer_sizes=(10,), max_iter=50, predict_samples=10)


@parametrize_with_checks(
    [
        PosteriorEnsembleRegressor(NoisyKFACRegressor(**_CHECK_FAST), n_members=2, random_state=0),
        PosteriorEnsembleClassifier(NoisyKFACClassifier(**_CHECK_FAST), n_members=2, random_state=0),
    ],
    expected_failed_checks=lambda est: {
        "check_sample_weight_equivalence_on_dense_data": (
            "the members' fits follow different random paths with repeated rows and with "
            "sample_weight (see tests/test_sklearn_checks.py)"
        )
    },
)
def test_sklearn_compatible(estimator, check):
    check(estimator)
