"""The regressor's noise model, early stopping and learning-rate decay."""

import math

import numpy as np
import pytest
from scipy import integrate, stats
from sklearn.exceptions import ConvergenceWarning

from skbayes import SLANGClassifier, SLANGRegressor
from skbayes._likelihoods import GaussianNoise

pytestmark = pytest.mark.usefixtures("quiet")  # short fits on purpose: no ConvergenceWarning noise


def test_gamma_kl_matches_numerical_integral():
    n = GaussianNoise(learn=True, a0=6.0, b0=6.0)
    n.a, n.b = 40.0, 25.0
    q, p = stats.gamma(40.0, scale=1 / 25.0), stats.gamma(6.0, scale=1 / 6.0)
    ref, _ = integrate.quad(lambda t: q.pdf(t) * (q.logpdf(t) - p.logpdf(t)), 1e-9, 20, limit=200)
    assert n.kl() == pytest.approx(ref, rel=1e-6)
    assert n.log_tau_mean == pytest.approx(integrate.quad(lambda t: q.pdf(t) * math.log(t), 1e-12, 20)[0], rel=1e-6)


def test_noise_update_fixed_point_is_optimal_gamma():
    """Iterating the natural-gradient step converges to a0 + N/2, b0 + sum r^2 / 2."""
    n = GaussianNoise(learn=True)
    for _ in range(2000):
        n.update(300.0, N=100, beta=0.05)
    assert n.a == pytest.approx(6.0 + 50.0) and n.b == pytest.approx(6.0 + 150.0)


def test_learned_noise_precision_recovers_the_truth():
    rng = np.random.RandomState(0)
    X = rng.randn(2000, 3)
    y = 3.0 * X @ np.array([1.0, -0.5, 0.25]) + 10.0 + 2.0 * rng.randn(2000)
    reg = SLANGRegressor(hidden_layer_sizes=(), rank=4, beta=0.05, max_iter=30, random_state=0).fit(X, y)
    assert reg.noise_precision_ == pytest.approx(1 / 4.0, rel=0.1)
    _, std = reg.predict(X[:10], return_std=True)
    np.testing.assert_allclose(std, 2.0, rtol=0.1)
    # q(tau) is the optimal Gamma given q(theta): a = a0 + N/2, b = b0 + sum_i E_q[r_i^2] / 2
    f = (reg.sample_outputs(X, n_samples=500)[..., 0] - y.mean()) / y.std()
    r2 = ((reg._encode_targets(y)[None, :] - f) ** 2).mean(0).sum()
    a0, b0 = reg.noise_prior
    assert reg._likelihood.noise.a == pytest.approx(a0 + 1000.0, rel=1e-6)
    assert reg._likelihood.noise.b == pytest.approx(b0 + r2 / 2, rel=0.05)
    fixed = SLANGRegressor(hidden_layer_sizes=(), noise_precision=2.0, max_iter=5, random_state=0).fit(X, y)
    assert fixed.noise_precision_ == pytest.approx(2.0)
    _, std = fixed.predict(X[:10], return_std=True)
    assert np.all(std >= 1 / np.sqrt(2.0))


def test_early_stopping_keeps_best_validation_state():
    rng = np.random.RandomState(1)
    X = rng.randn(300, 5)
    y = (X[:, 0] + X[:, 1] * X[:, 2] > 0).astype(int)
    clf = SLANGClassifier(
        hidden_layer_sizes=(16,), early_stopping=True, n_iter_no_change=3, max_iter=200, random_state=0
    ).fit(X, y)
    assert clf.n_iter_ < 200
    assert len(clf.validation_scores_) == clf.n_iter_
    assert clf.best_validation_score_ == pytest.approx(max(clf.validation_scores_))
    # the kept posterior is the best epoch's, not the last one's: its score on the held-out
    # rows (the fit's own split, recomputed) is the best score, which the last epoch missed
    assert clf.validation_scores_[-1] < clf.best_validation_score_
    _, _, Xv, yv = clf._validation_split(X, np.searchsorted(clf.classes_, y))
    assert clf._validation_score(clf._tensor(Xv), yv) == pytest.approx(clf.best_validation_score_, rel=1e-12)
    assert clf.score(X, y) > 0.8


def test_a_fit_without_early_stopping_forgets_the_validation_scores():
    X = np.random.RandomState(1).randn(60, 3)
    y = (X[:, 0] > 0).astype(int)
    clf = SLANGClassifier(early_stopping=True, max_iter=3, random_state=0).fit(X, y)
    assert len(clf.validation_scores_) == clf.n_iter_
    clf.set_params(early_stopping=False).fit(X, y)
    assert not hasattr(clf, "validation_scores_") and not hasattr(clf, "best_validation_score_")


def test_early_stopping_split_is_stratified_and_too_few_rows_is_a_clear_error():
    """The held-out rows are ``ceil(validation_fraction * n)``, stratified for a classifier (every
    class keeps its share); a fraction that leaves either side empty is named."""
    rng = np.random.RandomState(0)
    X = rng.randn(40, 3)
    y = np.repeat([0, 1, 2, 3], 10)
    clf = SLANGClassifier(hidden_layer_sizes=(4,), early_stopping=True, validation_fraction=0.2, max_iter=2)
    with pytest.warns(ConvergenceWarning):
        clf.fit(X, y)  # the split's seed is drawn at fit time
    Xf, yf, Xv, yv = clf._validation_split(X, y)
    assert len(yv) == 8 and len(yf) == 32
    np.testing.assert_array_equal(np.bincount(yv), [2, 2, 2, 2])
    rows = {tuple(r) for r in np.concatenate([Xf, Xv])}
    assert rows == {tuple(r) for r in X}  # a partition of the rows
    with pytest.raises(ValueError, match="early_stopping with validation_fraction=0.99 leaves an empty training"):
        SLANGClassifier(early_stopping=True, validation_fraction=0.99).fit(X[::8], y[::8])


def test_lr_decay_changes_the_trajectory_but_not_the_start():
    rng = np.random.RandomState(2)
    X = rng.randn(100, 3)
    y = X[:, 0] + 0.1 * rng.randn(100)
    a = SLANGRegressor(hidden_layer_sizes=(), max_iter=1, batch_size=100, random_state=0).fit(X, y)
    b = SLANGRegressor(hidden_layer_sizes=(), max_iter=1, batch_size=100, lr_decay=0.51, random_state=0).fit(X, y)
    # t = 0: alpha_0 / (1 + 0^omega) = alpha_0, the same first step
    np.testing.assert_allclose(a.posterior_.mean, b.posterior_.mean)
    a = SLANGRegressor(hidden_layer_sizes=(), max_iter=3, batch_size=100, random_state=0).fit(X, y)
    b = SLANGRegressor(hidden_layer_sizes=(), max_iter=3, batch_size=100, lr_decay=0.51, random_state=0).fit(X, y)
    assert not np.allclose(a.posterior_.mean, b.posterior_.mean)


@pytest.mark.parametrize("n_samples", [0, -1, 2.5, True, None])
def test_sample_y_checks_its_number_of_draws(n_samples):
    X = np.random.RandomState(0).randn(20, 3)
    reg = SLANGRegressor(max_iter=2, random_state=0).fit(X, X[:, 0])
    with pytest.raises(ValueError, match="n_samples must be an int >= 1"):
        reg.sample_y(X[:2], n_samples=n_samples)
    assert reg.sample_y(X[:2], n_samples=3).shape == (2, 3)


def _predictive_estimators():
    import skbayes

    return [e.estimator for e in skbayes.all_estimators(network=True) if "predictive" in e.estimator().get_params()]


@pytest.mark.parametrize("est_cls", _predictive_estimators(), ids=lambda c: c.__name__)
def test_early_stopping_scores_the_linearised_predictive_that_predictions_take(est_cls):
    """With ``predictive='glm'`` the held-out score early stopping keeps the best epoch by is
    the log-likelihood of the held-out rows under the linearised predictive that
    ``predict_proba`` / ``predict(return_std=True)`` take, not under weight samples."""
    from sklearn.base import is_classifier

    rng = np.random.RandomState(0)
    X = rng.randn(240, 4)
    f = X[:, 0] - 0.5 * X[:, 1] * X[:, 2]
    clf = is_classifier(est_cls())
    y = (f > 0).astype(int) + (f > 1).astype(int) if clf else 3.0 * f + 0.5 * rng.randn(240) + 7.0
    links = ("pairwise", "probit", "mc") if clf else (None,)
    for link in links:
        params = dict(hidden_layer_sizes=(8,), predictive="glm", early_stopping=True, max_iter=6, random_state=0)
        if link is not None:
            params.update(glm_link=link, predict_samples=16)  # 'mc': the score's 16 draws of the logits
        est = est_cls(n_iter_no_change=3, **params).fit(X, y)
        if clf:
            _, _, Xv, yv = est._validation_split(X, np.searchsorted(est.classes_, y))
            p = est.predict_proba(Xv)
            expected = float(np.mean(np.log(p[np.arange(len(yv)), yv])))
        else:
            _, _, Xv, yv = est._validation_split(X, est._encode_targets(y))
            # the fit scores standardised targets: the density in the units of y, times y's scale
            expected = est.log_likelihood(Xv, est._y_mean + est._y_std * yv) + math.log(est._y_std)
        assert est.best_validation_score_ == pytest.approx(max(est.validation_scores_))
        assert est.best_validation_score_ == pytest.approx(expected, rel=1e-6, abs=1e-9), link
    if not clf:  # two targets: the joint density of a row's targets (a sum over them)
        Y = np.c_[y, X[:, 3] * 10.0 + rng.randn(240)]
        est = est_cls(n_iter_no_change=3, **params).fit(X, Y)
        _, _, Xv, yv = est._validation_split(X, est._encode_targets(Y))
        expected = est.log_likelihood(Xv, est._y_mean + est._y_std * yv) + float(np.sum(np.log(est._y_std)))
        assert est.best_validation_score_ == pytest.approx(expected, rel=1e-6, abs=1e-9)
