"""Mean-field natural-gradient baselines: VOGN (SLANG at rank 0), Vprop and Vadam."""

import inspect
import pickle
import re
import warnings

import numpy as np
import pytest
import torch
from conftest import reg_data
from sklearn.base import clone
from sklearn.datasets import load_breast_cancer, load_diabetes
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold, cross_val_predict, train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from torch import nn

import skbayes._curvature.per_example as curv_mod
import skbayes._families.vadam as vadam_mod
from skbayes import (
    SLANGClassifier,
    SLANGRegressor,
    VadamClassifier,
    VadamRegressor,
    VOGNClassifier,
    VOGNRegressor,
)
from skbayes.posteriors import DiagonalGaussian

DT = torch.float64
REGRESSORS = [VOGNRegressor, VadamRegressor]
CLASSIFIERS = [VOGNClassifier, VadamClassifier]
ALL = REGRESSORS + CLASSIFIERS
FAST = dict(hidden_layer_sizes=(8,), max_iter=30, batch_size=32, predict_samples=20, random_state=0)


def _small_data(kind, n=60, seed=0):
    rng = np.random.RandomState(seed)
    X = rng.randn(n, 4)
    z = X @ np.array([1.0, -2.0, 0.5, 0.0]) + 0.3 * rng.randn(n)
    if kind == "logreg":
        return X, (z > 0).astype(int)
    if kind == "multiclass":
        return X, np.digitize(z, [-1.0, 1.0])
    return X, 3.0 * z + 1.0


# --- VOGN is SLANG with rank 0 --------------------------------------------------------


@pytest.mark.parametrize(
    "Vogn,Slang,kind",
    [
        (VOGNRegressor, SLANGRegressor, "linreg"),
        (VOGNClassifier, SLANGClassifier, "logreg"),
        (VOGNClassifier, SLANGClassifier, "multiclass"),
    ],
)
def test_vogn_equals_slang_rank_zero_step_for_step(Vogn, Slang, kind):
    X, y = _small_data(kind)
    kw = dict(hidden_layer_sizes=(6,), mc_samples=2, batch_size=16, learning_rate=0.05, beta=0.05, random_state=3)
    own = {k: Vogn().get_params()[k] for k in ("kl_weight", "predictive", "prior_precision", "decay_epochs")}
    for name in ("kl_weight", "predictive"):  # VOGN's own small-network values (SLANG's 'auto' differs)
        if own[name] == "auto":
            own[name] = Vogn._auto_by_size[name][0]
    a, b = Vogn(**kw), Slang(rank=0, **kw, **own)
    for _epoch in range(4):  # 4 steps per epoch
        a.partial_fit(X, y, **({} if kind == "linreg" else {"classes": np.unique(y)}))
        b.partial_fit(X, y, **({} if kind == "linreg" else {"classes": np.unique(y)}))
        np.testing.assert_array_equal(a.posterior_.mean, b.posterior_.mean)
        np.testing.assert_array_equal(a.posterior_.d, b.posterior_.d)
        assert a.posterior_.U.shape == b.posterior_.U.shape == (a.posterior_.n_params, 0)
    assert a.t_ == b.t_ == 16
    assert a.loss_curve_ == b.loss_curve_
    out_a = a.predict(X, return_std=True) if kind == "linreg" else a.predict_proba(X)
    out_b = b.predict(X, return_std=True) if kind == "linreg" else b.predict_proba(X)
    np.testing.assert_array_equal(np.asarray(out_a), np.asarray(out_b))
    # and through fit(), with the defaults of both
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        fa = Vogn(max_iter=3, random_state=0).fit(X, y)
        fb = Slang(rank=0, learning_rate=0.05, beta=0.05, max_iter=3, random_state=0, **own).fit(X, y)
    np.testing.assert_array_equal(fa.posterior_.mean, fb.posterior_.mean)
    np.testing.assert_array_equal(fa.posterior_.d, fb.posterior_.d)


@pytest.mark.parametrize("Vogn,Slang", [(VOGNRegressor, SLANGRegressor), (VOGNClassifier, SLANGClassifier)])
def test_vogn_parameters_are_slangs_without_rank(Vogn, Slang):
    est = Vogn()
    assert "rank" not in est.get_params() and Vogn.rank == 0
    slang = Slang().get_params()
    slang.pop("rank")
    # same names, same defaults, except the mean's step size: rank 0 is stable at 0.05, SLANG's
    # low-rank steps need 0.01 (docs/slang.md); both precision steps are 'auto' (below 100,000
    # weights 0.05 for rank 0, 0.01 for SLANG's); and the regressor's kl_weight, predictive and
    # prior, chosen for each by the defaults protocol (docs/defaults_protocol.md); the classifiers
    # share the step decay and 'auto' kl_weight and predictive, whose values differ by network size
    assert est.get_params()["learning_rate"] == 0.05 and est.get_params()["beta"] == "auto"
    assert slang["learning_rate"] == 0.01 and slang["beta"] == "auto"
    if Vogn is VOGNRegressor:  # and early stopping, 'auto' for SLANG's regressor only
        own = {
            "kl_weight": 0.3,
            "predictive": "sampled",
            "prior_precision": "auto",
            "decay_epochs": None,
            "early_stopping": False,
        }
    else:
        own = {"kl_weight": "auto", "predictive": "auto", "decay_epochs": 30}
    assert {k: est.get_params()[k] for k in own} == own
    slang_own = {k: slang[k] for k in own}
    assert {**est.get_params(), "learning_rate": 0.01, **slang_own} == slang
    # the classifiers take the protocol's values by network size, each its own
    if Vogn is VOGNClassifier:
        assert Vogn._auto_by_size != Slang._auto_by_size
    with pytest.raises(ValueError, match="rank"):
        est.set_params(rank=2)
    c = clone(Vogn(prior_precision=3.0, beta=0.1))
    assert c.get_params()["prior_precision"] == 3.0 and c.get_params()["beta"] == 0.1
    assert not re.search(r"\n    rank : ", Vogn.__doc__)


def _spy_precision_steps(monkeypatch):
    """The list that receives the ``beta`` of every SLANG/VOGN precision update from now on."""
    import skbayes._families.slang as slang_mod

    seen = []
    real = slang_mod.slang_precision_update

    def spy(U, d, curv, scale, beta, *args, **kw):
        seen.append(beta)
        return real(U, d, curv, scale, beta, *args, **kw)

    monkeypatch.setattr(slang_mod, "slang_precision_update", spy)
    return seen


def test_auto_beta_weighs_each_row_one_quarter_epoch(monkeypatch):
    """beta='auto' is min(0.05, B / (4 N)) at every step on a network of at least
    AUTO_BETA_MIN_WEIGHTS weights (lowered here to this small network's), B the batch size (a
    ragged last minibatch takes the same step), and trains exactly as the same float beta;
    below that size it is 0.05."""
    import skbayes._families.slang as slang_mod

    seen = _spy_precision_steps(monkeypatch)
    X, y = _small_data("logreg", n=400)
    # constant steps: the classifier's default decay_epochs would scale beta within the epoch
    kw = dict(hidden_layer_sizes=(5,), batch_size=48, max_iter=1, random_state=0, beta="auto", decay_epochs=None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        VOGNClassifier(**kw).fit(X, y)  # a small network: 0.05
        assert seen == [0.05] * 9
        seen.clear()
        monkeypatch.setattr(slang_mod, "AUTO_BETA_MIN_WEIGHTS", 10)
        VOGNClassifier(**kw).fit(X, y)  # 8 minibatches of 48 rows, one of 16
        assert seen == [48 / 1600] * 9
        seen.clear()
        VOGNClassifier(**kw).fit(X[:60], y[:60])  # 48 / 240 = 0.2: capped at 0.05
        assert seen == [0.05, 0.05]
        X2, y2 = X[:384], y[:384]  # 8 full minibatches: beta = 48 / 1536 at every step
        a = VOGNClassifier(**kw).fit(X2, y2)
        b = VOGNClassifier(**{**kw, "beta": 48 / 1536}).fit(X2, y2)
    np.testing.assert_array_equal(a.posterior_.d, b.posterior_.d)
    np.testing.assert_array_equal(a.posterior_.mean, b.posterior_.mean)
    with pytest.raises(ValueError, match="beta"):
        VOGNClassifier(beta="fast").fit(X[:60], y[:60])


def test_slang_auto_beta_caps_its_own_rate(monkeypatch):
    """SLANG's beta='auto' (its default) is 0.01 below AUTO_BETA_MIN_WEIGHTS weights (bit for bit
    the earlier default), min(0.01, B / (2 N)) from there on (a time constant of two epochs, VOGN's
    four); SLANG with rank=0 takes VOGN's 0.05 and its four epochs, so that it still trains exactly
    as VOGN."""
    import skbayes._families.slang as slang_mod

    seen = _spy_precision_steps(monkeypatch)
    X, y = _small_data("logreg", n=400)
    # constant steps: the classifier's default decay_epochs would scale beta within the epoch
    kw = dict(hidden_layer_sizes=(5,), batch_size=48, max_iter=1, random_state=0, decay_epochs=None)
    assert SLANGClassifier().get_params()["beta"] == "auto"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        a = SLANGClassifier(**kw, rank=2).fit(X, y)
        assert seen == [0.01] * 9
        b = SLANGClassifier(**kw, rank=2, beta=0.01).fit(X, y)
        seen.clear()
        SLANGClassifier(**kw, rank=0).fit(X, y)
        assert seen == [0.05] * 9
        monkeypatch.setattr(slang_mod, "AUTO_BETA_MIN_WEIGHTS", 10)
        seen.clear()
        SLANGClassifier(**kw, rank=2).fit(X, y)  # 48 / 800 = 0.06: capped at 0.01
        assert seen == [0.01] * 9
        seen.clear()
        big = np.tile(X, (10, 1)), np.tile(y, 10)  # 48 / (2 x 4000) = 0.006
        SLANGClassifier(**kw, rank=2).fit(*big)
        assert set(seen) == {48 / 8000}
        seen.clear()
        v = VOGNClassifier(**kw).fit(*big)
        assert set(seen) == {48 / 16000}  # VOGN: four epochs
        # VOGN's parameters, beta='auto' among them, with its own small-network temperature
        s = SLANGClassifier(**{**v.get_params(), "kl_weight": VOGNClassifier._auto_by_size["kl_weight"][0]}, rank=0)
        s.fit(*big)
    np.testing.assert_array_equal(a.posterior_.mean, b.posterior_.mean)
    np.testing.assert_array_equal(v.posterior_.mean, s.posterior_.mean)
    np.testing.assert_array_equal(v.posterior_.d, s.posterior_.d)


@pytest.mark.parametrize("Est", [VadamRegressor, VadamClassifier])
def test_vadam_shares_slangs_defaults(Est):
    """The shared parameters start from the same defaults as SLANG's (``init`` included), but
    ``max_iter`` and ``tol``: a budget of 200 epochs (``tol=None``) for Vadam, whose converged
    posterior predicts worse (slang.md, stopping),
    and the regressor's ``predictive`` (SLANG's classifier and Vadam's are both 'auto', GLM on
    large networks), ``kl_weight`` and ``decay_epochs``: 'auto', by method (the protocol chose 1
    and constant steps for Vadam's regressor, 0.3 and a decay for Vprop;
    test_vadam_auto_temperature_and_decay_by_method), and the classifier's ``prior_precision``
    (None: 3 for Vadam, 1 for Vprop; test_auto_defaults.py) and ``early_stopping`` ('auto': on
    large networks, where SLANG's classifier keeps False; the regressor's False, where SLANG's
    regressor is 'auto')."""
    slang = (SLANGRegressor if Est is VadamRegressor else SLANGClassifier)().get_params()
    own = {"method", "learning_rate", "beta1", "beta2", "max_iter", "tol", "predictive", "kl_weight", "decay_epochs"}
    own |= {"early_stopping"}
    if Est is VadamClassifier:
        own |= {"prior_precision"}
        assert Est().get_params()["prior_precision"] is None
    assert Est().get_params()["early_stopping"] == ("auto" if Est is VadamClassifier else False)
    assert slang["early_stopping"] == ("auto" if Est is VadamRegressor else False)
    assert Est().get_params()["decay_epochs"] == "auto"
    assert Est().get_params()["predictive"] == ("auto" if Est is VadamClassifier else "sampled")
    assert Est().get_params()["kl_weight"] == "auto"
    assert (Est().get_params()["max_iter"], Est().get_params()["tol"]) == (200, None)
    for name, value in Est().get_params().items():
        if name not in own:
            assert slang[name] == value, name


@pytest.mark.parametrize("Est", ALL)
def test_docstring_documents_every_parameter(Est):
    for name in inspect.signature(Est).parameters:
        assert re.search(rf"\n    {name} : ", Est.__doc__), name
    assert "posterior_ :" in Est.__doc__ and "Examples\n    --------" in Est.__doc__


# --- Vprop and Vadam against hand-computed updates -------------------------------------


class _Recorder:
    """Wraps the minibatch gradient routine to record each step's inputs and the state before it."""

    def __init__(self, monkeypatch, est):
        self.calls = []
        self.est = est
        orig = vadam_mod.minibatch_gradients

        def wrapped(forward, theta, X, y, lik):
            p, st = est.posterior_, est._state
            self.calls.append(
                dict(
                    theta=theta.clone(),
                    X=X.clone(),
                    y=y.clone(),
                    mean=p.mean_t.clone(),
                    d=p.d_t.clone(),
                    s=st["s"].clone(),
                    m=st["m"].clone(),
                )
            )
            return orig(forward, theta, X, y, lik)

        monkeypatch.setattr(vadam_mod, "minibatch_gradients", wrapped)


def _closed_form_grads(kind, theta, X, y, tau):
    """Per-example NLL gradients of a linear model (weights then bias), in closed form: (M, D)."""
    Xb = torch.cat([X, torch.ones(X.shape[0], 1, dtype=DT)], 1)
    z = Xb @ theta
    r = tau * (z - y) if kind == "linreg" else torch.sigmoid(z) - y
    return r[:, None] * Xb


@pytest.mark.parametrize("method", ["vadam", "vprop"])
@pytest.mark.parametrize("kind", ["linreg", "logreg"])
@pytest.mark.parametrize("decay", [None, 0.5])
def test_update_matches_hand_computation(monkeypatch, quiet, method, kind, decay):
    """Two epochs of three minibatches against the update written out; with ``decay_epochs``
    the mean's step before step ``t`` is ``alpha / (1 + e / decay_epochs)`` after the
    ``e = (t - 1) / 3`` passes so far, and the precision's average is unchanged."""
    X, y = _small_data(kind)
    N, D, S = X.shape[0], X.shape[1] + 1, 2
    lam, alpha, b1, b2 = 0.7, 0.05, 0.8, 0.9
    kw = dict(
        hidden_layer_sizes=(),
        method=method,
        prior_precision=lam,
        learning_rate=alpha,
        beta1=b1,
        beta2=b2,
        mc_samples=S,
        batch_size=20,
        max_iter=2,
        tol=0,
        n_iter_no_change=100,
        init="default",
        random_state=0,
        decay_epochs=decay,
        kl_weight=1.0,  # the update written out below is the untempered one
    )
    if kind == "linreg":
        est = VadamRegressor(noise_precision=0.2, **kw)
    else:
        est = VadamClassifier(**kw)
    rec = _Recorder(monkeypatch, est)
    est.fit(X, y)
    assert len(rec.calls) == 2 * 3
    tau = est._likelihood.noise.tau if kind == "linreg" else None
    first = rec.calls[0]
    # init='default': s0 = 1, precision N + lambda
    torch.testing.assert_close(first["d"], torch.full((D,), N + lam, dtype=DT), rtol=0, atol=0)
    mu, s0 = first["mean"].clone(), torch.ones(D, dtype=DT)
    s, m = s0.clone(), torch.zeros(D, dtype=DT)
    for t, c in enumerate(rec.calls, start=1):
        torch.testing.assert_close(c["mean"], mu, rtol=1e-12, atol=1e-14)
        torch.testing.assert_close(c["d"], N * s + lam, rtol=1e-12, atol=1e-14)  # precision N s + lambda
        M = c["X"].shape[0]
        gk = torch.stack([_closed_form_grads(kind, th, c["X"], c["y"], tau).sum(0) / M for th in c["theta"]])
        g, h = gk.mean(0), (gk**2).mean(0)
        s = b2 * s + (1 - b2) * h
        a_t = alpha if decay is None else alpha / (1.0 + (t - 1) * M / N / decay)
        if method == "vprop":
            mu = mu - a_t * (g + lam * mu / N) / (s + lam / N)
        else:
            m = b1 * m + (1 - b1) * (g + lam * mu / N)
            m_hat = m / (1 - b1**t)
            s_hat = (s - b2**t * s0) / (1 - b2**t)
            mu = mu - a_t * m_hat / (torch.sqrt(s_hat) + lam / N)
    p = est.posterior_
    assert isinstance(p, DiagonalGaussian) and p.family == "diagonal"
    torch.testing.assert_close(p.mean_t, mu, rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(p.d_t, N * s + lam, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(p.variance(), 1.0 / (N * s + lam).numpy(), rtol=1e-12)
    np.testing.assert_allclose(p.precision(), np.diag(N * s.numpy() + lam), rtol=1e-12)


def test_weight_samples_are_mean_plus_noise_of_the_current_precision(monkeypatch):
    X, y = _small_data("logreg")
    est = VadamClassifier(
        hidden_layer_sizes=(), init="xavier", mc_samples=4000, batch_size=60, max_iter=1, random_state=0
    )
    rec = _Recorder(monkeypatch, est)
    est.fit(X, y)  # one epoch of Vadam's default budget (tol=None): no warning
    c = rec.calls[0]
    z = (c["theta"] - c["mean"]) * torch.sqrt(c["d"])  # standard normal draws
    assert torch.all(z.mean(0).abs() < 5 / np.sqrt(4000))
    assert torch.all((z.std(0) - 1).abs() < 0.06)


def test_diagonal_gaussian_against_dense_formulas():
    g = torch.Generator().manual_seed(0)
    D, lam = 6, 0.8
    mean = torch.randn(D, generator=g, dtype=DT)
    d = torch.rand(D, generator=g, dtype=DT) + 0.5
    p = DiagonalGaussian(mean, d)
    eps = torch.randn(3, D, generator=g, dtype=DT)
    torch.testing.assert_close(p.sample_t(3, eps=eps), mean + eps / torch.sqrt(d))
    x = torch.randn(D, 2, generator=g, dtype=DT)
    torch.testing.assert_close(p.solve_t(x), torch.linalg.solve(torch.diag(d), x))
    torch.testing.assert_close(p.solve_t(x[:, 0]), x[:, 0] / d)
    ref = torch.distributions.kl_divergence(
        torch.distributions.MultivariateNormal(mean, precision_matrix=torch.diag(d)),
        torch.distributions.MultivariateNormal(torch.zeros(D, dtype=DT), precision_matrix=lam * torch.eye(D, dtype=DT)),
    )
    assert p.kl_to_prior(lam) == pytest.approx(float(ref), rel=1e-12)
    np.testing.assert_allclose(p.covariance(), np.diag(1 / d.numpy()), rtol=1e-12)
    # same draws as a rank-0 LowRankGaussian for the same generator state
    from skbayes.posteriors import LowRankGaussian

    q = LowRankGaussian(mean, mean.new_zeros(D, 0), d)
    a = p.sample_t(4, generator=torch.Generator().manual_seed(5))
    b = q.sample_t(4, generator=torch.Generator().manual_seed(5))
    torch.testing.assert_close(a, b, rtol=0, atol=0)
    assert p.is_finite() and not DiagonalGaussian(mean, d * float("nan")).is_finite()


@pytest.mark.parametrize("init", ["iblm", "xavier"])
def test_initial_precision_is_slangs(monkeypatch, init):
    """s0 from the initialiser's variances gives the precision SLANG (rank 0) starts from."""
    X, y = _small_data("logreg", n=200)
    # the same temperature: the start's data precision is divided by kl_weight
    kw = dict(
        hidden_layer_sizes=(5,),
        init=init,
        iblm_batch_size=50,
        max_iter=1,
        random_state=0,
        kl_weight=1.0,
        prior_precision=1.0,
    )
    vad = VadamClassifier(**kw)
    rec = _Recorder(monkeypatch, vad)
    seen = []
    orig = curv_mod.dense_curvature
    slang = SLANGClassifier(rank=0, **kw)

    def spy(*args):
        seen.append((slang.posterior_.mean_t.clone(), slang.posterior_.d_t.clone()))
        return orig(*args)

    monkeypatch.setattr(curv_mod, "dense_curvature", spy)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        vad.fit(X, y)
        slang.fit(X, y)
    torch.testing.assert_close(rec.calls[0]["mean"], seen[0][0], rtol=0, atol=0)
    lam = 1.0
    torch.testing.assert_close(rec.calls[0]["d"], seen[0][1].clamp_min(lam), rtol=1e-12, atol=1e-12)


class _Wrapped(nn.Module):
    """The same network as _seq, hidden from the dense path (forces the per-sample autograd path)."""

    def __init__(self, n_in, n_out):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(n_in, 6), nn.Tanh(), nn.Linear(6, n_out))

    def forward(self, x):
        return self.net(x)


def _seq(n_in, n_out):
    return nn.Sequential(nn.Linear(n_in, 6), nn.Tanh(), nn.Linear(6, n_out))


@pytest.mark.parametrize(
    "Est,kind,method", [(VadamRegressor, "linreg", "vadam"), (VadamClassifier, "multiclass", "vprop")]
)
def test_dense_and_generic_paths_train_identically(quiet, Est, kind, method):
    X, y = _small_data(kind, n=50)
    kw = dict(method=method, mc_samples=2, batch_size=10, max_iter=3, tol=0, n_iter_no_change=100, random_state=0)
    a = Est(module=_seq, **kw).fit(X, y)
    b = Est(module=_Wrapped, **kw).fit(X, y)
    np.testing.assert_allclose(a.posterior_.mean, b.posterior_.mean, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(a.posterior_.d, b.posterior_.d, rtol=1e-10, atol=1e-12)


def test_bad_parameters_give_clear_errors():
    X, y = reg_data(40, scale=True)
    for kw, msg in [
        (dict(method="adam"), "method"),
        (dict(learning_rate=0), "learning_rate"),
        (dict(learning_rate="fast"), "learning_rate"),
        (dict(beta1=1.0), "beta1"),
        (dict(beta2=-0.1), "beta2"),
        (dict(prior_precision=0.0), "prior_precision"),
        (dict(mc_samples=0), "mc_samples"),
        (dict(init="nonsense"), "init"),
    ]:
        with pytest.raises(ValueError, match=msg):
            VadamRegressor(max_iter=1, **kw).fit(X, y)


def test_divergence_names_the_learning_rate():
    X, y = reg_data(scale=True)
    est = VadamRegressor(hidden_layer_sizes=(8,), dtype="float32", max_iter=5, init="default", random_state=0)
    with pytest.warns(ConvergenceWarning, match=r"diverged.*learning_rate=auto = 0.01, method='vadam'"):
        est.fit(X * 1e30, y)
    assert est.diverged_ and est.n_iter_ == 0 and est.loss_curve_ == []


# --- scikit-learn's checks -------------------------------------------------------------

# scikit-learn's own checks run on these estimators in tests/test_sklearn_checks.py.


# --- user-facing guarantees (pipelines, grids, pickling, partial_fit: tests/test_integration.py) ---


def test_warm_start_keeps_the_optimizer_state(quiet):
    X, y = reg_data(scale=True)
    est = VadamRegressor(warm_start=True, **FAST).fit(X, y)
    t1, m1 = est.t_, est._state["m"].clone()
    est.fit(X, y)
    assert est.t_ > t1 and not torch.equal(est._state["m"], m1)


# --- behaviour on real data ------------------------------------------------------------


@pytest.mark.parametrize(
    "Clf,extra", [(VOGNClassifier, {}), (VadamClassifier, {}), (VadamClassifier, {"method": "vprop"})]
)
def test_breast_cancer_accuracy_close_to_logistic_regression(quiet, Clf, extra):
    """Out-of-fold accuracy of 5-fold CV within 2 points of LogisticRegression's."""
    X, y = load_breast_cancer(return_X_y=True)
    cv = StratifiedKFold(5, shuffle=True, random_state=0)
    p_lr = cross_val_predict(make_pipeline(StandardScaler(), LogisticRegression()), X, y, cv=cv, method="predict_proba")
    p = cross_val_predict(
        make_pipeline(StandardScaler(), Clf(random_state=0, **extra)), X, y, cv=cv, method="predict_proba"
    )
    acc, acc_lr = (p.argmax(1) == y).mean(), (p_lr.argmax(1) == y).mean()
    assert acc >= acc_lr - 0.02, (acc, acc_lr)
    assert -np.log(p[np.arange(len(y)), y]).mean() < 0.15


@pytest.mark.parametrize(
    "Reg,extra", [(VOGNRegressor, {}), (VadamRegressor, {}), (VadamRegressor, {"method": "vprop"})]
)
def test_diabetes_r2_is_sensible(quiet, Reg, extra):
    X, y = load_diabetes(return_X_y=True)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, random_state=0)
    reg = make_pipeline(StandardScaler(), Reg(hidden_layer_sizes=(20,), prior_precision=30.0, random_state=0, **extra))
    reg.fit(Xtr, ytr)
    mean, std = reg.predict(Xte, return_std=True)
    assert np.all(np.isfinite(mean)) and np.all(std > 0)
    assert reg.score(Xte, yte) > 0.3  # linear models reach about 0.4 on this split


def test_vadam_state_saved_before_v_was_kept_continues_the_same_fit(quiet):
    """A Vadam state from before the data's average ``v`` was kept apart (only ``s`` and ``s0``)
    continues as the current state does: ``v`` is recovered as ``s - gamma_2^(t-1) s0``."""
    X, y = _small_data("logreg")
    kw = dict(hidden_layer_sizes=(4,), max_iter=2, tol=None, random_state=0)
    a = VadamClassifier(**kw).fit(X, y)
    b = pickle.loads(pickle.dumps(a))
    del b._state["v"]
    for est in (a, b):
        est.set_params(warm_start=True, max_iter=1).fit(X, y)
    assert "v" in b._state
    np.testing.assert_allclose(b.posterior_.mean, a.posterior_.mean, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(b._state["v"], a._state["v"], rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("method, expected", [("vadam", (1.0, None)), ("vprop", (0.3, 30))])
def test_vadam_auto_temperature_and_decay_by_method(method, expected):
    """VadamRegressor's kl_weight='auto' and decay_epochs='auto' stand for each method's protocol
    values on every network (Vadam: the untempered posterior at constant steps, as before; Vprop:
    the regression group's 0.3 with the decay of 30 epochs), VadamClassifier's with its predictive
    by network size (and the prior precision its None stands for); a default fit is bit for bit
    the fit with those values passed."""
    from skbayes import VadamRegressor

    est = VadamRegressor(method=method)
    assert est.kl_weight == "auto" and est.decay_epochs == "auto"
    for n_weights in (100, 10**6):
        family = est._make_family(n_weights)
        assert (family.kl_weight, family.decay_epochs) == expected
    clf = VadamClassifier(method=method)
    assert clf.kl_weight == "auto" and clf.decay_epochs == "auto" and clf.predictive == "auto"
    small = {"vadam": (1.0, None, "sampled"), "vprop": (1.0, 30, "sampled")}[method]  # the small group's
    large = (1.0, None, "glm")  # the image group's, Vadam's (Vprop's large networks not measured)
    prior = {"vadam": (1.0, 3.0), "vprop": (1.0, 1.0)}[method]  # (small, large)
    for n_weights, want, lam in ((100, small, prior[0]), (10**6, large, prior[1])):
        family = clf._make_family(n_weights)
        assert (family.kl_weight, family.decay_epochs, clf._resolve_auto("predictive", n_weights)) == want
        assert family.prior_precision == lam
    rng = np.random.RandomState(0)
    X = rng.randn(80, 3)
    y = X[:, 0] - X[:, 1] ** 2 + 0.1 * rng.randn(80)
    kw = dict(method=method, hidden_layer_sizes=(8,), max_iter=40, random_state=0)
    auto = VadamRegressor(**kw).fit(X, y)
    fixed = VadamRegressor(kl_weight=expected[0], decay_epochs=expected[1], **kw).fit(X, y)
    np.testing.assert_array_equal(auto.posterior_.mean, fixed.posterior_.mean)
    np.testing.assert_array_equal(auto.predict(X), fixed.predict(X))
    other = (1.0, None) if method == "vprop" else (0.3, 30)
    moved = VadamRegressor(kl_weight=other[0], decay_epochs=other[1], **kw).fit(X, y)
    assert not np.array_equal(auto.posterior_.mean, moved.posterior_.mean)
