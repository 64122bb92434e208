"""Tempering (``kl_weight``) in every Gaussian family, against exact references.

The fit maximises ``E_q[log p(y | theta)] - w KL(q || prior)``. For a linear model with
Gaussian noise of fixed precision ``tau`` (``hidden_layer_sizes=()``) the optimum over
all Gaussians is the tempered Bayesian linear regression posterior::

    Sigma^{-1} = lam I + (tau / w) Xa^T Xa,      mu = Sigma (tau / w) Xa^T y

(``Xa`` the inputs with a column of ones, the bias last), and over diagonal Gaussians
the same mean with the precision's diagonal. SLANG and VOGN build their curvature from
squared per-example gradients at weight samples (the empirical Fisher), whose
expectation under ``q`` is ``tau^2 sum_i E_q[r_i^2] x_i x_i^T`` with ``r_i`` the
residual; it equals the Gauss-Newton matrix ``tau Xa^T Xa`` when ``E_q[r_i^2] = 1 / tau``
for every row. :func:`tempered_blr_data` builds targets for which that holds exactly
(rows in pairs with opposite residuals), so that every family's fixed point is the
exact tempered posterior and the tolerances below are Monte Carlo errors only.
"""

import warnings

import numpy as np
import pytest

import skbayes._loop
from skbayes import (
    BBBClassifier,
    BBBRegressor,
    MCDropoutClassifier,
    NoisyEKFACClassifier,
    NoisyEKFACRegressor,
    NoisyKFACClassifier,
    NoisyKFACRegressor,
    SLANGClassifier,
    SLANGRegressor,
    VadamClassifier,
    VadamRegressor,
    VOGNClassifier,
    VOGNRegressor,
)

TAU = 2.0  # noise precision of the (standardised) targets
LAM = 3.0  # prior precision


def tempered_blr_data(w, mean_field, n_pairs=60, seed=0):
    """Inputs ``X`` (2 features, rows in pairs) and targets ``y`` (mean 0, standard
    deviation 1, so the estimators' standardisation is the identity) whose tempered
    posterior under noise precision ``TAU`` and prior ``LAM`` has, at its optimum,
    ``E_q[r_i^2] = 1 / TAU`` for every row (``q`` the full Gaussian, or the diagonal one
    with ``mean_field``).

    Returns ``X, y, mu, P``: the exact tempered posterior mean and precision.
    """
    rng = np.random.default_rng(seed)
    X0 = rng.normal(size=(n_pairs, 2)) * np.array([1.0, 0.5]) + np.array([0.3, -0.2])
    X = np.vstack([X0, X0])
    Xa = np.hstack([X, np.ones((2 * n_pairs, 1))])
    H = Xa.T @ Xa
    P = LAM * np.eye(3) + (TAU / w) * H
    Sigma = np.linalg.inv(P)
    Sq = np.diag(1.0 / np.diag(P)) if mean_field else Sigma
    v = np.array([1.0, -0.5, 0.0])
    v[2] = -X.mean(0) @ v[:2]  # Xa v has mean 0
    # mu* = k v is the noise-free fit; the posterior mean is mu = (I - LAM Sigma) mu*, delta = LAM Sigma mu*
    xSx = np.einsum("ij,jk,ik->i", Xa, Sq, Xa)
    xd = Xa @ (LAM * Sigma @ v)  # x_i delta per unit k
    a, b = np.mean((Xa @ v) ** 2), np.mean(xd**2)
    # E_q r_i^2 = c_i^2 + (x_i delta)^2 + x_i^T Sq x_i = 1 / TAU, and var(y) = k^2 a + mean(c^2) = 1
    k = np.sqrt((1.0 - 1.0 / TAU + xSx.mean()) / (a - b))
    c2 = 1.0 / TAU - xSx - (k * xd) ** 2
    assert c2.min() > 0
    s = np.r_[np.ones(n_pairs), -np.ones(n_pairs)]
    y = Xa @ (k * v) + s * np.sqrt(c2)
    np.testing.assert_allclose([y.mean(), y.std()], [0.0, 1.0], atol=1e-12)
    mu = np.linalg.solve(P, (TAU / w) * Xa.T @ y)
    return X, y, mu, P


def fit(Est, X, y, w, **kw):
    return Est(
        hidden_layer_sizes=(),
        noise_precision=TAU,
        prior_precision=LAM,
        kl_weight=w,
        batch_size=X.shape[0],
        random_state=0,
        **kw,
    ).fit(X, y)


# Monte Carlo tolerances of the fits below (S weight samples per step, full batch): the mean
# jitters about its fixed point by a small fraction of the posterior standard deviation
# (at most 0.2 sd seen over both weights); natural-gradient precisions average
# 1 / beta steps of nearly deterministic curvature (relative errors at most 6e-3 seen);
# BBB's Adam on softplus standard deviations keeps a stationary noise of a few percent.
MEAN_TOL_SD = 0.3
NATGRAD = dict(learning_rate=0.1, beta=0.05, mc_samples=16, max_iter=400, init="default", n_iter_no_change=1000)


def mean_error_in_sd(est, mu, P):
    return np.abs(est.posterior_.mean - mu) / np.sqrt(np.diag(np.linalg.inv(P)))


@pytest.mark.parametrize("w", [0.1, 1.0])
def test_slang_full_rank_is_the_exact_tempered_posterior(w):
    X, y, mu, P = tempered_blr_data(w, mean_field=False)
    est = fit(SLANGRegressor, X, y, w, rank=3, **NATGRAD)
    assert mean_error_in_sd(est, mu, P).max() < MEAN_TOL_SD
    np.testing.assert_allclose(est.posterior_.precision(), P, rtol=0, atol=0.01 * np.abs(P).max())


@pytest.mark.parametrize("w", [0.1, 1.0])
def test_vogn_is_the_mean_field_optimum_of_the_tempered_objective(w):
    """Diagonal Gaussians: the optimum has the exact mean and precision ``diag(P)``."""
    X, y, mu, P = tempered_blr_data(w, mean_field=True)
    est = fit(VOGNRegressor, X, y, w, **NATGRAD)
    assert mean_error_in_sd(est, mu, P).max() < MEAN_TOL_SD
    np.testing.assert_allclose(1.0 / est.posterior_.variance(), np.diag(P), rtol=0.01)


@pytest.mark.parametrize("w", [0.1, 1.0])
def test_bbb_is_the_mean_field_optimum_of_the_tempered_objective(w):
    X, y, mu, P = tempered_blr_data(w, mean_field=True)
    est = fit(
        BBBRegressor, X, y, w, learning_rate=0.05, mc_samples=32, max_iter=300, init="default", n_iter_no_change=1000
    )
    est.set_params(learning_rate=0.005, warm_start=True, max_iter=150).fit(X, y)  # Adam's noise down
    assert mean_error_in_sd(est, mu, P).max() < MEAN_TOL_SD
    np.testing.assert_allclose(1.0 / est.posterior_.variance(), np.diag(P), rtol=0.15)


@pytest.mark.parametrize("w", [0.1, 1.0])
def test_ekfac_is_the_exact_tempered_posterior(w):
    """One output: the eigenvalue-corrected Kronecker block is a full precision over the
    inputs, ``(N / w) (R + w lam / N)`` in the eigenbasis of ``A``, and ``E_q[R]`` is
    ``tau`` times ``A``'s eigenvalues."""
    X, y, mu, P = tempered_blr_data(w, mean_field=False)
    est = fit(NoisyEKFACRegressor, X, y, w, learning_rate=0.1, mc_samples=16, max_iter=400, n_iter_no_change=1000)
    assert mean_error_in_sd(est, mu, P).max() < MEAN_TOL_SD
    np.testing.assert_allclose(est.posterior_.precision(), P, rtol=0, atol=0.01 * np.abs(P).max())


@pytest.mark.parametrize("w", [0.1, 1.0])
def test_kfac_is_the_tempered_damped_kronecker_posterior(w):
    """K-FAC splits its intrinsic damping ``g = w lam / N`` between the two factors, so its
    precision is ``(N / w) (S + sqrt(g) / pi) (A + pi sqrt(g) I)`` (exact ``S = tau``,
    ``A = Xa^T Xa / N``): the exact tempered precision up to the cross terms
    ``sqrt(g) (pi S + A / pi)``."""
    X, y, mu, P = tempered_blr_data(w, mean_field=False)
    est = fit(
        NoisyKFACRegressor,
        X,
        y,
        w,
        fisher="empirical",
        learning_rate=0.1,
        mc_samples=16,
        max_iter=300,
        n_iter_no_change=1000,
    )
    N = X.shape[0]
    Xa = np.hstack([X, np.ones((N, 1))])
    A, g = Xa.T @ Xa / N, w * LAM / N
    pi = np.sqrt(np.trace(A) / 3 / TAU)
    P_kfac = (N / w) * (TAU + np.sqrt(g) / pi) * (A + pi * np.sqrt(g) * np.eye(3))
    assert mean_error_in_sd(est, mu, P).max() < MEAN_TOL_SD
    np.testing.assert_allclose(est.posterior_.precision(), P_kfac, rtol=0, atol=0.02 * np.abs(P_kfac).max())


def test_a_smaller_kl_weight_narrows_the_posterior_by_the_predicted_factor():
    """The same data at w = 0.1 and w = 1: the data part of VOGN's precision grows by
    1 / w, times the ratio of the empirical Fisher's expectations under the two posteriors
    (``E_q r_i^2`` grows with the posterior's variance). Fails if ``kl_weight`` is ignored
    or enters as a scaled prior precision."""
    X, y, _, P = tempered_blr_data(0.1, mean_field=True)
    cold = fit(VOGNRegressor, X, y, 0.1, **NATGRAD)
    warm = fit(VOGNRegressor, X, y, 1.0, **NATGRAD)
    # VOGN's fixed point at w = 1 on these data: d = lam + tau^2 sum_i E_q[r_i^2] x_i^2
    Xa = np.hstack([X, np.ones((X.shape[0], 1))])
    mu1 = np.linalg.solve(LAM * np.eye(3) + TAU * Xa.T @ Xa, TAU * Xa.T @ y)
    d = np.diag(P).copy()
    for _ in range(100):
        d = LAM + TAU**2 * ((y - Xa @ mu1) ** 2 + (Xa**2) @ (1.0 / d)) @ Xa**2
    predicted = (np.diag(P) - LAM) / (d - LAM)  # about 9.7: 10 from w, the rest from E_q r^2
    assert np.all(np.abs(predicted - 10.0) > 0.2)
    ratio = (1.0 / cold.posterior_.variance() - LAM) / (1.0 / warm.posterior_.variance() - LAM)
    np.testing.assert_allclose(ratio, predicted, rtol=0.01)


@pytest.fixture
def in_order(monkeypatch):
    """Minibatches in row order, drawing nothing from the fit's random stream."""
    monkeypatch.setattr(skbayes._loop, "permutation", lambda n, gen, device: np.arange(n))


CASES = [
    (SLANGRegressor, dict(rank=2, noise_precision=2.0), "reg"),
    (SLANGClassifier, dict(rank=3, damping=0.1), "clf"),
    (VOGNClassifier, dict(), "clf"),
    (VadamRegressor, dict(noise_precision=2.0), "reg"),
    (VadamClassifier, dict(method="vprop"), "clf"),
    (BBBClassifier, dict(local_reparam=False), "clf"),
    (NoisyKFACClassifier, dict(fisher="empirical"), "clf"),
    (NoisyEKFACRegressor, dict(noise_precision=2.0, fisher="empirical"), "reg"),
]


@pytest.mark.parametrize("Est, kw, task", CASES, ids=lambda v: getattr(v, "__name__", ""))
def test_kl_weight_one_half_equals_two_copies_of_the_data(in_order, Est, kw, task):
    """``w = 1/2`` is the ELBO of the likelihood squared, i.e. of every example twice: a
    full-batch fit at ``kl_weight=0.5`` follows, step for step, the untempered fit on the
    data stacked twice (the same minibatch means, ``N`` doubled), in every family, and
    ``loss_curve_`` (data term per example + w KL / N) agrees too. (Per-row random draws,
    BBB's local reparameterisation and the sampled-label Fisher, would differ between the
    two, so the test uses weight sampling and the empirical Fisher.)"""
    rng = np.random.default_rng(1)
    X = rng.normal(size=(30, 3))
    y = X @ [1.0, -1.0, 0.5] + 0.3 * rng.normal(size=30)
    if task == "clf":
        y = (y > 0).astype(int)
    common = dict(hidden_layer_sizes=(4,), init="default", max_iter=8, n_iter_no_change=100, random_state=0, **kw)
    half = Est(kl_weight=0.5, batch_size=30, **common).fit(X, y)
    twice = Est(kl_weight=1.0, batch_size=60, **common).fit(np.vstack([X, X]), np.r_[y, y])
    np.testing.assert_allclose(half.posterior_.mean, twice.posterior_.mean, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(half.posterior_.variance(), twice.posterior_.variance(), rtol=1e-9, atol=0)
    np.testing.assert_allclose(half.loss_curve_, twice.loss_curve_, rtol=1e-9)
    plain = Est(kl_weight=1.0, batch_size=30, **common).fit(X, y)  # and tempering does change the fit
    assert np.abs(plain.posterior_.variance() / half.posterior_.variance() - 1).max() > 0.05


@pytest.mark.parametrize("Est, kw, task", CASES, ids=lambda v: getattr(v, "__name__", ""))
def test_kl_annealing_enters_exactly_as_kl_weight(monkeypatch, Est, kw, task):
    """The schedule's value multiplies ``kl_weight`` and enters every update and the
    objective as the weight itself: a schedule held at 0.5 with ``kl_weight=0.6`` fits
    exactly as ``kl_weight=0.3``."""
    import skbayes._estimator

    def held(kl_annealing, t):
        return 1.0 if kl_annealing is None else 0.5

    monkeypatch.setattr(skbayes._loop, "kl_annealing_scale", held)
    monkeypatch.setattr(skbayes._estimator, "kl_annealing_scale", held)
    rng = np.random.default_rng(2)
    X = rng.normal(size=(40, 3))
    y = X @ [1.0, -1.0, 0.5] + 0.3 * rng.normal(size=40)
    if task == "clf":
        y = (y > 0).astype(int)
    common = dict(hidden_layer_sizes=(4,), max_iter=3, random_state=0, **kw)
    fixed = Est(kl_weight=0.3, **common).fit(X, y)
    sched = Est(kl_weight=0.6, kl_annealing=(1.0, 1.0, 1.0), **common).fit(X, y)
    np.testing.assert_allclose(fixed.posterior_.mean, sched.posterior_.mean, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(fixed.posterior_.variance(), sched.posterior_.variance(), rtol=1e-12)
    np.testing.assert_allclose(fixed.loss_curve_, sched.loss_curve_, rtol=1e-12)


def test_kl_annealing_schedule_values():
    from skbayes._families.base import kl_annealing_scale

    assert kl_annealing_scale(None, 5) == 1.0
    g, a, b = 0.8, 0.1, 50.0
    for t in (0, 50, 200):
        assert kl_annealing_scale((g, a, b), t) == pytest.approx(g / (1 + np.exp(-a * (t - b))), rel=1e-15)


@pytest.mark.parametrize(
    "Est", [SLANGClassifier, VOGNRegressor, VadamClassifier, BBBRegressor, NoisyKFACRegressor, NoisyEKFACClassifier]
)
def test_every_gaussian_family_has_kl_weight_and_rejects_bad_values(Est):
    default = Est().get_params()["kl_weight"]
    for w in Est._auto_by_size["kl_weight"] if default == "auto" else (default,):
        for value in w.values() if isinstance(w, dict) else (w,):  # by method (Vadam / Vprop)
            assert 0.0 < value <= 1.0
    X, y = np.zeros((4, 2)), np.array([0, 1, 0, 1])
    for bad in (0.0, -1.0, "big", None):
        with pytest.raises(ValueError, match="kl_weight"):
            Est(kl_weight=bad).fit(X, y)
    assert "kl_weight" in Est.__doc__ and "E_q[log p(y | X, theta)] - w KL(q || prior)" in Est.__doc__


#: (kl_weight, predictive) chosen by the defaults protocol of docs/defaults_protocol.md, on networks of
#: fewer than LARGE_NETWORK_WEIGHTS weights and on larger ones (the image classification group,
#: with the full-scale target on seeds 0 and 1 as a constraint: noisy EK-FAC's 0.01; VOGN's and
#: BBB's large-network values from its rerun with one scale for all pixels). The small
#: classifiers' values: the untempered posterior with the sampled predictive since the small
#: classification group took in sets whose classes overlap.
PROTOCOL_DEFAULTS = {
    SLANGClassifier: ((1.0, "sampled"), (1.0, "glm")),
    SLANGRegressor: ((0.3, "sampled"), (0.3, "sampled")),
    VOGNClassifier: ((1.0, "sampled"), (0.3, "sampled")),
    VOGNRegressor: ((0.3, "sampled"), (0.3, "sampled")),
    NoisyKFACClassifier: ((1.0, "sampled"), (1.0, "sampled")),
    NoisyKFACRegressor: ((1.0, "sampled"), (1.0, "sampled")),
    NoisyEKFACClassifier: ((1.0, "sampled"), (0.01, "glm")),
    NoisyEKFACRegressor: ((0.3, "sampled"), (0.3, "sampled")),
    BBBClassifier: ((1.0, "sampled"), (1.0, "glm")),
    BBBRegressor: ((0.1, "glm"), (0.1, "glm")),
}


@pytest.mark.parametrize("Est", list(PROTOCOL_DEFAULTS))
def test_defaults_are_the_ones_the_protocol_chose(Est):
    """The documented winners ("Defaults chosen by the protocol" in docs/defaults_protocol.md),
    so that a default cannot change without the table changing too: a fixed default on
    every network, 'auto' through the class's table by network size."""
    params = Est().get_params()
    est = Est()
    for size in (0, 1):
        got = tuple(
            est._resolve_auto(name, 10**6 * size) if params[name] == "auto" else params[name]
            for name in ("kl_weight", "predictive")
        )
        assert got == PROTOCOL_DEFAULTS[Est][size], (Est.__name__, size)
    doc = Est.__doc__
    assert f"kl_weight : float, 'auto' or list, default={params['kl_weight']!r}" in doc
    assert f"predictive : {{'sampled', 'glm', 'auto'}}, default={params['predictive']!r}" in doc


def test_mc_dropout_has_no_kl_weight():
    assert "kl_weight" not in MCDropoutClassifier().get_params()


def _noisy_digits_split(rate=0.2):
    """scikit-learn's digits with a fraction ``rate`` of the labels (training and test alike)
    replaced by a class drawn at random, so that the classes overlap as on the data users often
    bring; a stratified 75/25 split at seed 0, standardised with the training rows."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import StandardScaler

    X, y = load_digits(return_X_y=True)
    rng = np.random.RandomState(0)
    y = np.where(rng.rand(len(y)) < rate, rng.randint(0, 10, len(y)), y)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.25, stratify=y, random_state=0)
    sc = StandardScaler().fit(Xtr)
    return sc.transform(Xtr), ytr, sc.transform(Xte), yte


#: The small classifiers' defaults before the small classification group took in sets whose
#: classes overlap (docs/defaults_protocol.md): tempered, with the GLM predictive.
TEMPERED_DEFAULTS = {
    SLANGClassifier: dict(kl_weight=0.1, predictive="glm"),
    VOGNClassifier: dict(kl_weight=0.3, predictive="glm"),
    NoisyKFACClassifier: dict(kl_weight=0.3, predictive="glm"),
}


@pytest.mark.parametrize("Est", list(TEMPERED_DEFAULTS), ids=lambda e: e.__name__)
def test_untempered_default_beats_the_tempered_one_where_classes_overlap(Est):
    """The protocol's reason for the small classifiers' untempered sampled default
    (docs/defaults_protocol.md): where the labels are noisy, the tempered posterior overfits
    them and is overconfident. On digits with a fifth of the labels drawn at random the default's
    test log-loss is lower than the earlier tempered default's by at least 10% (seed 0: SLANG
    1.17 against 1.50, VOGN 1.17 against 1.74, noisy K-FAC 1.40 against 1.69; seed 1 alike)."""
    from sklearn.metrics import log_loss

    Xtr, ytr, Xte, yte = _noisy_digits_split()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ConvergenceWarning, and digits' near-constant pixels
        default = Est(random_state=0).fit(Xtr, ytr)
        tempered = Est(**TEMPERED_DEFAULTS[Est], random_state=0).fit(Xtr, ytr)
    ll_default = log_loss(yte, default.predict_proba(Xte), labels=default.classes_)
    ll_tempered = log_loss(yte, tempered.predict_proba(Xte), labels=tempered.classes_)
    assert ll_default < 0.9 * ll_tempered, (ll_default, ll_tempered)
