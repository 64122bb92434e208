"""Probabilistic metrics and model-selection scorers (skbayes.metrics, issue 13).

Each metric against a direct computation, the proper-scoring-rule property on
synthetic Gaussians, and the scorers on fitted estimators, Pipelines,
classifiers and inside GridSearchCV / cross_validate.
"""

import pickle
import re

import numpy as np
import pytest
from conftest import clf_data, reg_data
from scipy import integrate
from scipy.stats import norm
from sklearn.base import clone
from sklearn.linear_model import BayesianRidge
from sklearn.metrics import check_scoring, log_loss
from sklearn.model_selection import GridSearchCV, KFold, cross_validate
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from skbayes import BayesianLinearRegression, SLANGClassifier, SLANGRegressor
from skbayes.metrics import (
    crps_ensemble,
    crps_gaussian,
    gaussian_log_likelihood,
    get_scorer,
    get_scorer_names,
    interval_score,
    make_crps_scorer,
    make_interval_scorer,
    make_log_likelihood_scorer,
    mixture_log_likelihood,
)

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

TINY = dict(hidden_layer_sizes=(8,), max_iter=20, predict_samples=20, random_state=0)


@pytest.fixture(scope="module")
def fitted_pipe():
    X, y = reg_data(150)
    return make_pipeline(StandardScaler(), SLANGRegressor(**TINY)).fit(X, y), X, y


@pytest.fixture(scope="module")
def fitted_clf():
    X, y = clf_data(scale=True)
    labels = np.array(["setosa", "versicolor", "virginica"])[y]
    return SLANGClassifier(**TINY).fit(X, labels), X, labels


# --- metrics against direct computations --------------------------------------------------
def test_crps_gaussian_equals_the_integral_definition():
    rng = np.random.default_rng(0)
    for y, mu, sd in zip(rng.normal(size=6) * 3, rng.normal(size=6), rng.uniform(0.1, 3, size=6)):
        # CRPS = int (F(t) - 1{y <= t})^2 dt, split at y where the indicator jumps.
        below = integrate.quad(lambda t, m=mu, s=sd: norm.cdf(t, m, s) ** 2, -np.inf, y)[0]
        above = integrate.quad(lambda t, m=mu, s=sd: norm.sf(t, m, s) ** 2, y, np.inf)[0]
        assert crps_gaussian([y], [mu], [sd]) == pytest.approx(below + above, rel=1e-7, abs=1e-9)
    # a point mass: the absolute error; the mean over points
    assert crps_gaussian([1.0, -2.0], [0.0, 0.0], [0.0, 0.0]) == pytest.approx(1.5)
    assert crps_gaussian([0.0], [0.0], [1.0]) == pytest.approx((np.sqrt(2) - 1) / np.sqrt(np.pi))
    with pytest.raises(ValueError, match="non-negative"):
        crps_gaussian([0.0], [0.0], [-1.0])


def _crps_pairs(y, samples):
    """The O(S^2) definition E|X - y| - E|X - X'| / 2 of the empirical distribution, by loops."""
    out = []
    for i in range(len(y)):
        x = samples[:, i]
        out.append(np.mean(np.abs(x - y[i])) - 0.5 * np.mean(np.abs(x[:, None] - x[None, :])))
    return np.mean(out)


def test_crps_ensemble_equals_the_pairwise_definition():
    rng = np.random.default_rng(1)
    for S, n in [(1, 3), (2, 4), (7, 5), (64, 9)]:
        samples, y = rng.normal(size=(S, n)), rng.normal(size=n)
        assert crps_ensemble(y, samples) == pytest.approx(_crps_pairs(y, samples), rel=1e-12, abs=1e-12)
    ties = rng.integers(0, 3, size=(30, 6)).astype(float)  # many equal draws
    y = rng.integers(0, 3, size=6).astype(float)
    assert crps_ensemble(y, ties) == pytest.approx(_crps_pairs(y, ties), rel=1e-12, abs=1e-12)
    # many draws from N(mu, sd^2) estimate the closed form
    mu, sd, y = np.array([0.0, 1.0]), np.array([1.0, 0.5]), np.array([0.3, -0.4])
    draws = mu + sd * rng.standard_normal((100_000, 2))
    assert crps_ensemble(y, draws) == pytest.approx(crps_gaussian(y, mu, sd), rel=1e-2)
    with pytest.raises(ValueError, match="transpose"):
        crps_ensemble(y, draws.T)


def test_interval_score_by_hand():
    rng = np.random.default_rng(2)
    y, lo = rng.normal(size=50) * 2, rng.normal(size=50) - 1
    hi = lo + rng.uniform(0, 2, size=50)
    for alpha in (0.05, 0.1, 0.5):
        by_hand = []
        for yi, li, ui in zip(y, lo, hi):
            s = ui - li
            if yi < li:
                s += 2 / alpha * (li - yi)
            elif yi > ui:
                s += 2 / alpha * (yi - ui)
            by_hand.append(s)
        assert interval_score(y, lo, hi, alpha) == pytest.approx(np.mean(by_hand))
    with pytest.raises(ValueError, match="alpha"):
        interval_score(y, lo, hi, alpha=1.0)
    with pytest.raises(ValueError, match="lower <= upper"):
        interval_score(y, hi + 1, lo, alpha=0.1)


def test_sample_weight_is_a_weighted_mean():
    rng = np.random.default_rng(3)
    y, mu, sd = rng.normal(size=6), rng.normal(size=6), rng.uniform(0.5, 2, size=6)
    w = np.array([0, 1, 2, 3, 1, 1])
    rep = np.repeat(np.arange(6), w)
    draws = rng.normal(size=(40, 6))
    pairs = [
        (crps_gaussian(y, mu, sd, sample_weight=w), crps_gaussian(y[rep], mu[rep], sd[rep])),
        (crps_ensemble(y, draws, sample_weight=w), crps_ensemble(y[rep], draws[:, rep])),
        (
            interval_score(y, mu - sd, mu + sd, 0.2, sample_weight=w),
            interval_score(y[rep], mu[rep] - sd[rep], mu[rep] + sd[rep], 0.2),
        ),
        (gaussian_log_likelihood(y, mu, sd, sample_weight=w), gaussian_log_likelihood(y[rep], mu[rep], sd[rep])),
        (mixture_log_likelihood(y, draws, 0.5, sample_weight=w), mixture_log_likelihood(y[rep], draws[:, rep], 0.5)),
    ]
    for weighted, repeated in pairs:
        assert weighted == pytest.approx(repeated)
    with pytest.raises(ValueError, match="non-negative"):
        crps_gaussian(y, mu, sd, sample_weight=-w)


# --- proper scoring rules -----------------------------------------------------------------
@pytest.mark.parametrize("version", ["closed form", "samples"])
def test_the_true_distribution_scores_best(version):
    """On y ~ N(mu, sd^2), the true predictive beats a shifted, a too narrow and a too wide one
    in mean over many points, for the three scores (greater is better: negated CRPS and IS)."""
    rng = np.random.default_rng(4)
    n, S, alpha = 10_000, 100, 0.1
    mu, sd = rng.normal(size=n) * 2, rng.uniform(0.5, 2.0, size=n)
    y = mu + sd * rng.standard_normal(n)
    candidates = {"true": (mu, sd), "shifted": (mu + 0.5 * sd, sd), "narrow": (mu, 0.6 * sd), "wide": (mu, 1.6 * sd)}
    z = norm.ppf(1 - alpha / 2)
    scores = {}
    for name, (m, s) in candidates.items():
        if version == "closed form":
            ll = gaussian_log_likelihood(y, m, s)
            crps = crps_gaussian(y, m, s)
            lo, hi = m - z * s, m + z * s
        else:  # S draws of each point, and a mixture of S Gaussians of half the variance
            draws = m + s * rng.standard_normal((S, n))
            ll = mixture_log_likelihood(y, m + s / np.sqrt(2) * rng.standard_normal((S, n)), s / np.sqrt(2))
            crps = crps_ensemble(y, draws)
            lo, hi = np.quantile(draws, [alpha / 2, 1 - alpha / 2], axis=0)
        scores[name] = np.array([ll, -crps, -interval_score(y, lo, hi, alpha)])
    for name in ("shifted", "narrow", "wide"):
        assert np.all(scores["true"] > scores[name]), (name, scores["true"], scores[name])


# --- scorers on estimators ----------------------------------------------------------------
def _r2(y, pred):
    """The coefficient of determination, 1 - SS_res / SS_tot."""
    return 1.0 - np.sum((y - pred) ** 2) / np.sum((y - np.mean(y)) ** 2)


def test_log_likelihood_scorer_equals_the_estimator_method(fitted_pipe):
    pipe, X, y = fitted_pipe
    reg, Xt = pipe[-1], pipe[:-1].transform(X)
    scorer = get_scorer("log_likelihood")
    assert scorer(reg, Xt, y) == reg.log_likelihood(Xt, y)
    assert scorer(pipe, X, y) == reg.log_likelihood(Xt, y)
    assert scorer(pipe, X, y) == scorer(pipe, X, y)  # deterministic
    assert make_log_likelihood_scorer(n_samples=7)(pipe, X, y) == reg.log_likelihood(Xt, y, n_samples=7)
    # weights: ones change nothing, integer weights are repetitions
    w = np.arange(len(y)) % 3
    rep = np.repeat(np.arange(len(y)), w)
    assert scorer(pipe, X, y, sample_weight=np.ones(len(y))) == pytest.approx(reg.log_likelihood(Xt, y), rel=1e-12)
    assert scorer(pipe, X, y, sample_weight=w) == pytest.approx(reg.log_likelihood(Xt[rep], y[rep]), rel=1e-12)


def test_sampled_scorers_on_a_network_and_a_pipeline(fitted_pipe):
    pipe, X, y = fitted_pipe
    reg, Xt = pipe[-1], pipe[:-1].transform(X)
    draws = reg.sample_y(Xt, n_samples=1000, random_state=0).T
    crps, iscore = get_scorer("neg_crps"), get_scorer("neg_interval_score")
    assert crps(pipe, X, y) == pytest.approx(-crps_ensemble(y, draws), rel=1e-12)
    assert crps(pipe, X, y) == crps(reg, Xt, y) == crps(pipe, X, y)
    lo, hi = np.quantile(draws, [0.05, 0.95], axis=0)
    assert iscore(pipe, X, y) == pytest.approx(-interval_score(y, lo, hi, 0.1), rel=1e-12)
    assert iscore(pipe, X, y) == iscore(reg, Xt, y)
    small = make_interval_scorer(alpha=0.5, n_samples=50, random_state=3)
    lo, hi = np.quantile(reg.sample_y(Xt, n_samples=50, random_state=3), [0.25, 0.75], axis=1)
    assert small(pipe, X, y) == pytest.approx(-interval_score(y, lo, hi, 0.5), rel=1e-12)
    assert make_crps_scorer(n_samples=50, random_state=1)(pipe, X, y) != make_crps_scorer(n_samples=50)(pipe, X, y)


@pytest.mark.parametrize("est", [BayesianLinearRegression(), BayesianRidge()], ids=["BLR", "BayesianRidge"])
def test_gaussian_predictives_use_the_closed_forms(est):
    X, y = reg_data(150)
    pipe = make_pipeline(StandardScaler(), est).fit(X, y)
    mean, std = pipe.predict(X, return_std=True)
    z = norm.ppf(0.95)
    assert get_scorer("log_likelihood")(pipe, X, y) == pytest.approx(np.mean(norm.logpdf(y, mean, std)))
    assert get_scorer("neg_crps")(pipe, X, y) == pytest.approx(-crps_gaussian(y, mean, std))
    assert get_scorer("neg_interval_score")(pipe, X, y) == pytest.approx(
        -interval_score(y, mean - z * std, mean + z * std, 0.1)
    )


def test_classifier_scorers(fitted_clf):
    clf, X, labels = fitted_clf
    scorer = get_scorer("log_likelihood")
    assert scorer(clf, X, labels) == pytest.approx(-log_loss(labels, clf.predict_proba(X)))
    # a fold with one class only: the labels come from classes_
    part = slice(0, 20)
    assert scorer(clf, X[part], labels[part]) == pytest.approx(
        -log_loss(labels[part], clf.predict_proba(X[part]), labels=clf.classes_)
    )
    for name in ("neg_crps", "neg_interval_score"):
        with pytest.raises(TypeError, match=f"'{name}'.*classifier"):
            get_scorer(name)(clf, X, labels)


def test_scorers_in_scikit_learn_model_selection(fitted_pipe):
    X, y = reg_data(150)
    est = make_pipeline(StandardScaler(), SLANGRegressor(**TINY))
    scoring = {"ll": get_scorer("log_likelihood"), "crps": get_scorer("neg_crps"), "r2": "r2"}
    # check_scoring resolves each to a scorer with the value computed by hand
    pipe = fitted_pipe[0]
    reg, Xt = pipe[-1], pipe[:-1].transform(X)
    by_hand = {
        "ll": reg.log_likelihood(Xt, y),
        "crps": -crps_ensemble(y, reg.sample_y(Xt, n_samples=1000, random_state=0).T),
        "r2": _r2(y, pipe.predict(X)),
    }
    for name, scorer in scoring.items():
        assert check_scoring(est, scoring=scorer)(pipe, X, y) == pytest.approx(by_hand[name], rel=1e-12), name
    # each fold's score is the score of the fold's model on its held-out rows
    res = cross_validate(est, X, y, cv=2, scoring=scoring, return_estimator=True, return_indices=True)
    for i, (model, test) in enumerate(zip(res["estimator"], res["indices"]["test"])):
        Xf = model[:-1].transform(X[test])
        assert res["test_ll"][i] == pytest.approx(model[-1].log_likelihood(Xf, y[test]), rel=1e-12)
        draws = model[-1].sample_y(Xf, n_samples=1000, random_state=0).T
        assert res["test_crps"][i] == pytest.approx(-crps_ensemble(y[test], draws), rel=1e-12)
        assert res["test_r2"][i] == pytest.approx(_r2(y[test], model.predict(X[test])), rel=1e-12, abs=1e-12)
    s = get_scorer("neg_interval_score")
    assert pickle.loads(pickle.dumps(s))(fitted_pipe[0], X, y) == s(fitted_pipe[0], X, y)
    assert repr(s) == "make_interval_scorer(alpha=0.1, n_samples=1000, random_state=0)"


def test_grid_search_selects_by_log_likelihood():
    X, y = reg_data(150, scale=True)
    grid = [0.01, 1.0, 100.0]
    cv = KFold(3, shuffle=True, random_state=0)
    search = GridSearchCV(
        SLANGRegressor(**TINY), {"prior_precision": grid}, scoring=get_scorer("log_likelihood"), cv=cv
    ).fit(X, y)
    means = search.cv_results_["mean_test_score"]
    assert search.best_params_ == {"prior_precision": grid[int(np.argmax(means))]}
    assert search.best_score_ == pytest.approx(means.max())
    # the CV scores are the held-out log_likelihood of the fold's fit
    train, test = next(cv.split(X))
    fold = clone(SLANGRegressor(**TINY)).set_params(prior_precision=grid[0]).fit(X[train], y[train])
    assert search.cv_results_["split0_test_score"][0] == pytest.approx(fold.log_likelihood(X[test], y[test]))


def test_get_scorer_names(fitted_pipe):
    pipe, X, y = fitted_pipe
    # scikit-learn's names resolve to scikit-learn's scorers
    assert get_scorer("r2")(pipe, X, y) == pytest.approx(_r2(y, pipe.predict(X)), rel=1e-12, abs=1e-12)
    assert "r2" in get_scorer_names()
    assert get_scorer_names()[:3] == ["log_likelihood", "neg_crps", "neg_interval_score"]
    own = make_crps_scorer()
    assert get_scorer(own) is own
    with pytest.raises(ValueError, match=re.escape("'log_likelihood', 'neg_crps', 'neg_interval_score'")):
        get_scorer("log_likelihod")
    with pytest.raises(ValueError, match="alpha"):
        make_interval_scorer(alpha=0)
    with pytest.raises(ValueError, match="n_samples"):
        make_crps_scorer(n_samples=0)
