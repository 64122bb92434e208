"""i-BLM and the competing initialisations (Rossi, Michiardi and Filippone, ICML 2019)."""

import math

import numpy as np
import pytest
import torch
from scipy.stats import multivariate_normal
from sklearn.datasets import load_diabetes
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from skbayes import BayesianLinearRegression, NoisyKFACClassifier, SLANGClassifier, SLANGRegressor
from skbayes._start.batched_blr import best_noise_variance, blr_log_evidence, blr_solve, dirichlet_transform
from skbayes.metrics import mixture_log_likelihood

DT = torch.float64


pytestmark = pytest.mark.usefixtures("quiet")  # short fits on purpose: no ConvergenceWarning noise


@pytest.mark.parametrize("B,n", [(40, 6), (6, 40)])  # primal and push-through (dual) routes
@pytest.mark.parametrize("hetero", [False, True])
def test_torch_blr_matches_dense_formulas(B, n, hetero):
    g = torch.Generator().manual_seed(B + n)
    X = torch.randn(B, n, generator=g, dtype=DT)
    y = torch.randn(B, generator=g, dtype=DT)
    v = (torch.rand(B, generator=g, dtype=DT) + 0.2) if hetero else torch.tensor(0.7, dtype=DT)
    alpha = 1.7
    Linv = torch.diag(1.0 / v.expand(B))
    P = alpha * torch.eye(n, dtype=DT) + X.T @ Linv @ X
    m_ref = torch.linalg.solve(P, X.T @ Linv @ y)
    m, pd = blr_solve(X, y, alpha, v)
    torch.testing.assert_close(m, m_ref, rtol=1e-9, atol=1e-11)
    torch.testing.assert_close(pd, torch.diag(P), rtol=1e-12, atol=1e-12)
    C = torch.diag(v.expand(B)) + X @ X.T / alpha
    ref = multivariate_normal(np.zeros(B), C.numpy()).logpdf(y.numpy())
    assert float(blr_log_evidence(X, y, alpha, v)) == pytest.approx(ref, rel=1e-10)
    # batched problems give the same answers as one at a time
    mb, _ = blr_solve(torch.stack([X, 2 * X]), torch.stack([y, y]), alpha, v)
    torch.testing.assert_close(mb[0], m_ref, rtol=1e-9, atol=1e-11)


def test_torch_blr_agrees_with_the_estimator_and_evidence_maximisation():
    X, y = load_diabetes(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    y = (y - y.mean()) / y.std()
    X1 = np.hstack([X, np.ones((len(X), 1))])
    est = BayesianLinearRegression(alpha=1.0, fit_intercept=False).fit(X1, y)
    v = 1.0 / est.noise_precision_
    m, _ = blr_solve(torch.as_tensor(X1), torch.as_tensor(y), 1.0, v)
    np.testing.assert_allclose(m.numpy(), est.coef_, rtol=1e-8, atol=1e-10)
    v_grid = best_noise_variance(torch.as_tensor(X1), torch.as_tensor(y), 1.0)
    assert v_grid == pytest.approx(v, rel=0.05)  # grid search lands near the exact optimum


def test_dirichlet_transform_matches_the_paper():
    Y = torch.tensor([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]], dtype=DT)
    T, V = dirichlet_transform(Y, 0.01)
    for y_, t, v in zip(Y.flatten(), T.flatten(), V.flatten()):
        var = math.log(1.0 / (float(y_) + 0.01) + 1.0)
        assert float(v) == pytest.approx(var)
        assert float(t) == pytest.approx(math.log(float(y_) + 0.01) - var / 2)
    # the true class has the larger target: softmax of the targets recovers the label
    assert torch.equal(T.argmax(1), Y.argmax(1))


def _init_only(est, X, y):
    """Fit with zero epochs: the posterior right after initialisation."""
    return est.set_params(max_iter=0).fit(X, y)


def test_single_linear_layer_reproduces_the_blr_posterior_mean():
    X, y = load_diabetes(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    # the untempered posterior (kl_weight=1; the regressor's default 0.3 counts the data 1/0.3 times)
    est = _init_only(
        SLANGRegressor(hidden_layer_sizes=(), init="iblm", iblm_batch_size=len(X), kl_weight=1.0, random_state=0), X, y
    )
    ys = (y - y.mean()) / y.std()
    X1 = np.hstack([X, np.ones((len(X), 1))])
    # the evidence-maximising noise variance of the same regression
    v = best_noise_variance(torch.as_tensor(X1), torch.as_tensor(ys), 1.0)
    ref = BayesianLinearRegression(alpha=1.0, noise_precision=1.0 / v, fit_intercept=False).fit(X1, ys)
    np.testing.assert_allclose(est.posterior_.mean, ref.coef_, rtol=1e-8, atol=1e-10)
    # factorised precisions: diag of the BLR precision, rescaled from B = N rows to N (factor 1)
    P = 1.0 * np.eye(11) + X1.T @ X1 / v
    np.testing.assert_allclose(est.posterior_.d, np.diag(P), rtol=1e-8)


def test_classification_iblm_on_a_linear_layer_separates_the_classes():
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    X = X[:300] / 16.0
    clf = _init_only(
        SLANGClassifier(hidden_layer_sizes=(), init="iblm", iblm_batch_size=300, random_state=0), X, y[:300]
    )
    assert clf.score(X, y[:300]) > 0.95  # before any training
    clf2 = _init_only(
        NoisyKFACClassifier(hidden_layer_sizes=(), init="iblm", iblm_batch_size=300, random_state=0), X, y[:300]
    )
    np.testing.assert_allclose(clf2.posterior_.mean, clf.posterior_.mean, rtol=1e-10)


def _held_out_nll(est, X, y):
    f = est.sample_outputs(X, n_samples=50)[..., 0]
    return -mixture_log_likelihood(y, f, est.noise_std_)


def test_deep_net_iblm_starts_and_stays_ahead_on_diabetes():
    """5 hidden layers of 100 units: held-out NLL right after i-BLM is below every competing
    initialisation's, and after 5 epochs the i-BLM-started fit is still ahead."""
    X, y = load_diabetes(return_X_y=True)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, random_state=0)
    sc = StandardScaler().fit(Xtr)
    Xtr, Xte = sc.transform(Xtr), sc.transform(Xte)
    kw = dict(hidden_layer_sizes=(100,) * 5, random_state=0)
    at_init, after = {}, {}
    for init in ("iblm", "default", "uninformative", "heuristic", "xavier", "orthogonal", "lsuv"):
        at_init[init] = _held_out_nll(_init_only(SLANGRegressor(init=init, **kw), Xtr, ytr), Xte, yte)
        if init in ("iblm", "default", "xavier", "lsuv"):
            est = SLANGRegressor(init=init, max_iter=5, tol=0, n_iter_no_change=100, **kw).fit(Xtr, ytr)
            after[init] = _held_out_nll(est, Xte, yte)
    others = {k: v for k, v in at_init.items() if k != "iblm"}
    assert at_init["iblm"] < min(others.values()), at_init
    assert after["iblm"] < min(v for k, v in after.items() if k != "iblm"), after


def test_competing_initialisations_follow_their_definitions():
    X, y = load_diabetes(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    kw = dict(hidden_layer_sizes=(7,), prior_precision=2.0, kl_weight=1.0, random_state=0)  # untempered
    unif = _init_only(SLANGRegressor(init="uninformative", **kw), X, y)
    assert np.all(unif.posterior_.mean == 0) and np.allclose(unif.posterior_.d, 2.0)  # q = prior
    heur = _init_only(SLANGRegressor(init="heuristic", **kw), X, y)
    w0 = heur.module_[0].weight.numel()
    np.testing.assert_allclose(heur.posterior_.d[:w0], 10.0)  # variance 1 / D_in
    xav = _init_only(SLANGRegressor(init="xavier", **kw), X, y)
    np.testing.assert_allclose(xav.posterior_.d[:w0], (10 + 7) / 2.0)  # variance 2 / (D_in + D_out)
    orth = _init_only(SLANGRegressor(init="orthogonal", **kw), X, y)
    W = orth.module_[0].weight.detach().numpy()
    np.testing.assert_allclose(W @ W.T, np.eye(7), atol=1e-10)  # orthonormal rows (7 <= 10)
    lsuv = _init_only(SLANGRegressor(init="lsuv", **kw), X, y)
    h = lsuv.module_[0](torch.as_tensor(X))
    assert float(h.std()) == pytest.approx(1.0, rel=0.15)  # unit output variance (on a minibatch)


def _toy(n=500, seed=0):
    """The i-BLM paper's 1-D toy (App. E.1): sin(x) + sin(x/2) + sin(x/3) - sin(x/4), noise N(0, e^-2)."""
    rng = np.random.RandomState(seed)
    x = rng.uniform(-10, 10, (n, 1))
    t = x[:, 0]
    return x / 5.77, np.sin(t) + np.sin(t / 2) + np.sin(t / 3) - np.sin(t / 4) + np.exp(-1.0) * rng.randn(n)


def test_toy_fits_after_a_few_epochs_from_iblm_only():
    """The paper's toy with a 4-hidden-layer net: i-BLM explains most of the variance right
    after initialisation and still after 5 epochs (held-out R^2 > 0.8); no competing start
    gets anywhere near in the same budget."""
    X, y = _toy(700)
    Xtr, Xte, ytr, yte = X[:500], X[500:], y[:500], y[500:]
    kw = dict(hidden_layer_sizes=(50,) * 4, random_state=0, predict_samples=30)
    r2 = {}
    for init in ("iblm", "default", "xavier", "orthogonal", "lsuv"):
        est = SLANGRegressor(init=init, max_iter=5, tol=0, n_iter_no_change=100, **kw).fit(Xtr, ytr)
        r2[init] = est.score(Xte, yte)
    at_init = _init_only(SLANGRegressor(init="iblm", **kw), Xtr, ytr).score(Xte, yte)
    assert at_init > 0.8, at_init
    assert r2["iblm"] > 0.8, r2
    assert max(v for k, v in r2.items() if k != "iblm") < 0.5, r2


def test_hidden_units_regress_on_local_minibatches_and_differ():
    """With one target column every hidden unit regresses on the same target; local
    minibatches (nearest rows of the layer input to a random anchor) make the units'
    regressions, hence their weights, differ. Each unit's mean is the BLR posterior
    mean on its own minibatch, which lies within the training set."""
    import skbayes._start.iblm as init_mod
    from skbayes._networks import ordered_layers

    X, y = _toy(300)
    est = _init_only(SLANGRegressor(hidden_layer_sizes=(20,), iblm_batch_size=40, random_state=0), X, y)
    W = est.module_[0].weight.detach().numpy()[:, 0]
    b = est.module_[0].bias.detach().numpy()
    slopes = np.abs(W)
    assert slopes.max() / slopes.min() > 3  # local slopes of a wiggly function differ
    assert np.isfinite(b).all()
    # with 4 B >= N the pool is the whole training set: a group's rows are exactly the
    # B rows nearest to its anchor (1-D inputs: an interval, far narrower than the data)
    gen = torch.Generator().manual_seed(0)
    Xt = torch.as_tensor(X)
    layers = ordered_layers(est.module_, est._forward.layout, Xt)
    B = 75
    idx = init_mod._local_minibatches(est.module_, est._forward.layout, layers[0], est.posterior_.mean_t, Xt, 3, B, gen)
    for rows in idx.numpy():
        dist = np.abs(X[:, 0] - X[rows[0], 0])
        assert len(set(rows)) == B and rows[0] in rows
        assert set(rows) == set(np.argsort(dist, kind="stable")[:B]) or dist[rows].max() == np.sort(dist)[B - 1]
        assert np.ptp(X[rows, 0]) < 0.5 * np.ptp(X[:, 0])


def test_iblm_undetermined_weight_starts_at_prior_plus_n():
    # i-BLM's data part of the precision is rescaled from B regression rows to N; a weight
    # with no data part (its input is zero on every regression row: out of a ReLU unit dead
    # at the mean network) starts at prior + N, as init='default', not at the prior
    from skbayes._start import initial_precision

    lam, N, B = 2.0, 1000, 100
    var = torch.tensor([1.0 / lam, 1.0 / (lam + 50.0), 1.0 / (lam + 0.5)], dtype=torch.float64)
    var_in = var.clone()
    p = initial_precision(var, lam, N, "iblm", B)
    torch.testing.assert_close(var, var_in, rtol=0, atol=0)
    eps = torch.finfo(torch.float64).eps
    torch.testing.assert_close(
        p.total,
        torch.tensor([lam + N, lam + 50.0 * N / B, lam + 0.5 * N / B], dtype=torch.float64),
        rtol=10 * eps,
        atol=0,
    )
    torch.testing.assert_close(p.per_example, (p.total - lam) / N, rtol=10 * eps, atol=0)
