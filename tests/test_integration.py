"""The estimators inside scikit-learn's tooling, and the user-facing guarantees."""

import pickle
import warnings

import joblib
import numpy as np
import pandas as pd
import pytest
import torch
from conftest import clf_data, reg_data
from sklearn.base import clone
from sklearn.datasets import make_classification
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import GridSearchCV, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from torch import nn

from skbayes import (
    BBBRegressor,
    NoisyKFACRegressor,
    SLANGClassifier,
    SLANGRegressor,
    VadamClassifier,
    VadamRegressor,
    all_estimators,
)

FAST = dict(hidden_layer_sizes=(8,), max_iter=30, batch_size=32, predict_samples=20, random_state=0)
REGRESSORS = [e.estimator for e in all_estimators(task="regressor", network=True)]
CLASSIFIERS = [e.estimator for e in all_estimators(task="classifier", network=True)]


pytestmark = pytest.mark.usefixtures("quiet")  # short fits on purpose: no ConvergenceWarning noise


@pytest.mark.parametrize(
    "Reg,Clf,extra",
    [(R, C, {}) for R, C in zip(REGRESSORS, CLASSIFIERS)] + [(VadamRegressor, VadamClassifier, {"method": "vprop"})],
)
def test_pipeline_and_cross_val_score(Reg, Clf, extra):
    X, y = reg_data(200)
    pipe = make_pipeline(StandardScaler(), Reg(**FAST, **extra))
    scores = cross_val_score(pipe, X, y, cv=3)
    assert scores.shape == (3,) and np.all(np.isfinite(scores))
    assert scores.mean() > 0.2  # diabetes: linear models reach ~0.45
    Xc, yc = clf_data()
    acc = cross_val_score(make_pipeline(StandardScaler(), Clf(**FAST, **extra)), Xc, yc, cv=3)
    assert acc.mean() > 0.8


@pytest.mark.parametrize("Reg", REGRESSORS)
def test_grid_search_parallel(Reg):
    """Every estimator names its weight prior prior_precision: one grid serves all."""
    X, y = reg_data(150)
    pipe = make_pipeline(StandardScaler(), Reg(**FAST))
    key = f"{Reg.__name__.lower()}__prior_precision"
    gs = GridSearchCV(pipe, {key: [0.1, 10.0]}, cv=2, n_jobs=2)
    gs.fit(X, y)
    means = gs.cv_results_["mean_test_score"]
    # the grid's value reaches the estimator inside the pipeline: the two priors score differently
    assert means[0] != means[1]
    assert gs.best_params_[key] == gs.cv_results_["params"][int(np.argmax(means))][key]
    assert gs.best_score_ > 0.1
    np.testing.assert_array_equal(gs.predict(X[:5]), gs.best_estimator_.predict(X[:5]))


def test_clone_keeps_params_and_drops_state():
    est = SLANGClassifier(rank=3, prior_precision=2.0, **FAST).fit(*clf_data())
    c = clone(est)
    assert c.get_params() == est.get_params()
    assert not hasattr(c, "posterior_")


@pytest.mark.parametrize("Est,data", [(R, reg_data) for R in REGRESSORS] + [(C, clf_data) for C in CLASSIFIERS])
def test_pickle_and_joblib_round_trip_predict_identically(Est, data, tmp_path):
    X, y = data()
    X = StandardScaler().fit_transform(X)
    est = Est(**FAST).fit(X, y)
    ref = est.predict_proba(X) if hasattr(est, "predict_proba") else est.predict(X, return_std=True)
    est2 = pickle.loads(pickle.dumps(est))
    path = tmp_path / "m.joblib"
    joblib.dump(est, path)
    est3 = joblib.load(path)
    for e in (est2, est3):
        out = e.predict_proba(X) if hasattr(e, "predict_proba") else e.predict(X, return_std=True)
        np.testing.assert_array_equal(np.asarray(out), np.asarray(ref))
    # a loaded model keeps training, from where it stopped
    est3.partial_fit(X, y)
    assert est3.n_iter_ == est.n_iter_ + 1 and est3.t_ > est.t_


@pytest.mark.parametrize("Reg,Clf", list(zip(REGRESSORS, CLASSIFIERS)))
def test_pandas_input_and_feature_names(Reg, Clf):
    X, y = reg_data()
    df = pd.DataFrame(X, columns=[f"f{i}" for i in range(X.shape[1])])
    est = Reg(**FAST).fit(df, pd.Series(y))
    np.testing.assert_array_equal(est.feature_names_in_, df.columns.to_numpy())
    np.testing.assert_allclose(est.predict(df), est.predict(X))
    with pytest.raises(ValueError, match="feature names"):
        est.predict(df.rename(columns={"f0": "zz"}))
    Xc, yc = clf_data()
    dfc = pd.DataFrame(Xc, columns=list("abcd"))
    clf = Clf(**FAST).fit(dfc, yc)
    assert list(clf.feature_names_in_) == list("abcd")


def _no_columns_estimators():
    from skbayes.ensemble import PosteriorEnsembleClassifier, PosteriorEnsembleRegressor
    from skbayes.linear_model import BayesianLinearRegression
    from skbayes.preprocessing import ImageScaler

    ests = [Reg(**FAST) for Reg in REGRESSORS] + [Clf(**FAST) for Clf in CLASSIFIERS]
    ests += [BayesianLinearRegression(), ImageScaler()]
    ests += [PosteriorEnsembleRegressor(SLANGRegressor(**FAST), n_members=2)]
    ests += [PosteriorEnsembleClassifier(SLANGClassifier(**FAST), n_members=2)]
    return ests


@pytest.mark.parametrize("est", _no_columns_estimators(), ids=lambda e: type(e).__name__)
def test_a_frame_of_no_columns_gets_scikit_learns_error(est):
    """A DataFrame of no columns (a ColumnTransformer that selects nothing) gets the error of an
    array of no columns, at fit and at predict, not numpy's "at least one array or dtype is
    required" from inside scikit-learn's check_array."""
    X, y = clf_data() if hasattr(est, "predict_proba") else reg_data()
    empty = pd.DataFrame(index=range(len(y)))
    with pytest.raises(ValueError, match=r"0 feature\(s\) \(shape=\(\d+, 0\)\) while a minimum of 1 is required"):
        est.fit(empty, y)
    est.fit(X, y)
    predict = est.transform if hasattr(est, "transform") else est.predict
    with pytest.raises(ValueError, match=r"0 feature\(s\)"):
        predict(empty)


@pytest.mark.parametrize("Clf", CLASSIFIERS)
def test_string_labels_binary_and_multiclass(Clf):
    Xc, yc = clf_data()
    names = np.array(["setosa", "versicolor", "virginica"])[yc]
    clf = Clf(**FAST).fit(StandardScaler().fit_transform(Xc), names)
    assert list(clf.classes_) == ["setosa", "versicolor", "virginica"]
    pred = clf.predict(StandardScaler().fit_transform(Xc))
    assert pred.dtype == names.dtype and set(pred) <= set(names)
    assert (pred == names).mean() > 0.8
    X, y = make_classification(n_samples=120, n_features=5, random_state=0)
    lab = np.where(y == 1, "yes", "no")
    clf = Clf(**FAST).fit(X, lab)
    assert clf.module_[-1].out_features == 1  # binary: one logit
    proba = clf.predict_proba(X)
    np.testing.assert_allclose(proba.sum(1), 1.0)
    assert (clf.predict(X) == lab).mean() > 0.8


def test_binary_logistic_regression_has_d_plus_one_parameters():
    X, y = make_classification(n_samples=80, n_features=6, random_state=1)
    clf = SLANGClassifier(hidden_layer_sizes=(), max_iter=5, random_state=0).fit(X, y)
    p = clf.posterior_
    assert p.mean.shape == (7,)
    np.testing.assert_array_equal(p.mean[:6], clf.module_[0].weight.detach().numpy().ravel())
    assert p.mean[6] == clf.module_[0].bias.item()


@pytest.mark.parametrize("Reg,Clf", list(zip(REGRESSORS, CLASSIFIERS)))
def test_partial_fit_continues_from_posterior(Reg, Clf):
    X, y = reg_data()
    X = StandardScaler().fit_transform(X)
    est = Reg(**FAST)
    est.partial_fit(X, y)
    assert est.n_iter_ == 1
    mean1 = est.posterior_.mean
    t1 = est.t_
    est.partial_fit(X, y)
    assert est.n_iter_ == 2 and est.t_ == 2 * t1
    assert not np.allclose(est.posterior_.mean, mean1)
    # continuing is not restarting: one more epoch from a fresh model differs
    fresh = Reg(**FAST).partial_fit(X, y)
    np.testing.assert_allclose(fresh.posterior_.mean, mean1)  # same seed, same first epoch
    assert not np.allclose(fresh.posterior_.variance(), est.posterior_.variance())
    # the loss keeps falling over several epochs on average
    for _ in range(10):
        est.partial_fit(X, y)
    assert np.mean(est.loss_curve_[-3:]) < np.mean(est.loss_curve_[:2])
    Xc, yc = clf_data()
    clf = Clf(**FAST)
    with pytest.raises(ValueError, match="classes"):
        clf.partial_fit(Xc, yc)
    clf.partial_fit(Xc[yc < 2], yc[yc < 2], classes=[0, 1, 2])
    assert list(clf.classes_) == [0, 1, 2] and clf.predict_proba(Xc).shape == (150, 3)
    clf.partial_fit(Xc, yc)
    with pytest.raises(ValueError, match="not in classes_"):
        clf.partial_fit(Xc, yc + 5)


def test_warm_start_continues():
    X, y = reg_data()
    est = SLANGRegressor(warm_start=True, **FAST).fit(X, y)
    n1 = est.n_iter_
    t1 = est.t_
    est.fit(X, y)
    assert est.t_ > t1 and est.n_iter_ > n1


@pytest.mark.parametrize("Clf", CLASSIFIERS)
def test_class_probabilities_deterministic_and_row_independent(Clf):
    X, y = clf_data()
    est = Clf(**FAST).fit(X, y)
    p1 = est.predict_proba(X)
    np.testing.assert_array_equal(est.predict_proba(X), p1)
    idx = np.random.RandomState(0).permutation(len(X))[:17]
    np.testing.assert_allclose(est.predict_proba(X[idx]), p1[idx], rtol=1e-12)


@pytest.mark.parametrize("Reg", REGRESSORS)
def test_predictions_deterministic_and_row_independent(Reg):
    X, y = reg_data()
    est = Reg(**FAST).fit(X, y)
    m1, s1 = est.predict(X, return_std=True)
    m2, s2 = est.predict(X, return_std=True)
    np.testing.assert_array_equal(m1, m2)
    np.testing.assert_array_equal(s1, s2)
    idx = np.random.RandomState(0).permutation(len(X))[:17]
    ms, ss = est.predict(X[idx], return_std=True)
    np.testing.assert_allclose(ms, m1[idx], rtol=1e-12)
    np.testing.assert_allclose(ss, s1[idx], rtol=1e-12)
    assert np.all(s1 > 0)
    np.testing.assert_array_equal(est.predict_std(X), s1)


def test_sample_y_matches_predictive_moments():
    X, y = reg_data()
    X = StandardScaler().fit_transform(X)
    est = SLANGRegressor(predict_samples=4000, **{k: v for k, v in FAST.items() if k != "predict_samples"}).fit(X, y)
    mean, std = est.predict(X[:5], return_std=True)
    draws = est.sample_y(X[:5], n_samples=4000, random_state=1)
    assert draws.shape == (5, 4000)
    np.testing.assert_allclose(draws.mean(1), mean, atol=5 * std.max() / np.sqrt(4000))
    np.testing.assert_allclose(draws.std(1), std, rtol=0.06)
    np.testing.assert_array_equal(draws, est.sample_y(X[:5], n_samples=4000, random_state=1))


@pytest.mark.parametrize("Clf", CLASSIFIERS)
def test_classifier_outputs_are_consistent(Clf):
    Xc, yc = clf_data()
    Xc = StandardScaler().fit_transform(Xc)
    clf = Clf(**FAST).fit(Xc, yc)
    p = clf.predict_proba(Xc)
    np.testing.assert_allclose(p.sum(1), 1.0, rtol=1e-12)
    np.testing.assert_allclose(clf.predict_log_proba(Xc), np.log(p))
    np.testing.assert_array_equal(clf.predict(Xc), clf.classes_[p.argmax(1)])
    s = clf.predict_std(Xc)
    assert s.shape == p.shape and np.all(s >= 0) and np.any(s > 0)


def test_inputs_are_not_modified():
    X, y = reg_data()
    X0, y0 = X.copy(), y.copy()
    net = nn.Sequential(nn.Linear(10, 4), nn.ReLU(), nn.Linear(4, 1)).double()
    w0 = [p.detach().clone() for p in net.parameters()]
    est = SLANGRegressor(module=net, max_iter=3, random_state=0).fit(X, y)
    est.predict(X)
    np.testing.assert_array_equal(X, X0)
    np.testing.assert_array_equal(y, y0)
    for p, q in zip(net.parameters(), w0):
        assert torch.equal(p.detach(), q)
    assert est.module_ is not net


def test_bad_parameters_give_clear_errors():
    X, y = reg_data()
    for kw, msg in [
        (dict(rank=-1), "rank"),
        (dict(prior_precision=0), "prior_precision"),
        (dict(learning_rate=-1), "learning_rate"),
        (dict(beta=1.5), "beta"),
        (dict(momentum=1.0), "momentum"),
        (dict(batch_size=0), "batch_size"),
        (dict(activation="swish"), "activation"),
        (dict(hidden_layer_sizes=(0,)), "hidden_layer_sizes"),
        (dict(noise_precision=-2.0), "noise_precision"),
        (dict(init="nonsense"), "init"),
        (dict(kl_annealing=(1.0, -1.0, 2.0)), "kl_annealing"),
        (dict(iblm_batch_size=0), "iblm_batch_size"),
        (dict(dtype="float16"), "dtype"),
        (dict(module=3), "module"),
    ]:
        with pytest.raises((ValueError, TypeError), match=msg):
            SLANGRegressor(max_iter=1, **kw).fit(X, y)
    with pytest.raises(ValueError, match="at least 2 classes"):
        SLANGClassifier(max_iter=1).fit(X, np.zeros(len(X)))


@pytest.mark.parametrize("Reg", REGRESSORS)
def test_divergence_is_reported_and_predictions_stay_finite(Reg):
    """Natural-gradient steps are self-stabilising for any learning rate, so force an
    overflow with absurdly scaled float32 inputs: the fit must say so and revert."""
    X, y = reg_data()
    kw = dict(hidden_layer_sizes=(8,), dtype="float32", init="default", random_state=0)
    est = Reg(max_iter=5, **kw)
    with pytest.warns(ConvergenceWarning, match="diverged.*learning_rate.*standardise"):
        est.fit(X * 1e30, y)
    assert est.diverged_ and est.n_iter_ == 0 and est.loss_curve_ == []
    # reverted to the initial posterior: the model of an initialisation-only fit
    init_only = Reg(max_iter=0, **kw).fit(X * 1e30, y)
    assert not init_only.diverged_
    np.testing.assert_array_equal(est.posterior_.mean, init_only.posterior_.mean)
    np.testing.assert_array_equal(est.predict(X), init_only.predict(X))
    # with i-BLM: either a clear error from the initialisation or a reported divergence,
    # never silent non-finite predictions
    est = Reg(hidden_layer_sizes=(8,), dtype="float32", max_iter=5, init="iblm", random_state=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            est.fit(X * 1e30, y)
        except ValueError as exc:
            assert "standardise X" in str(exc)
            return
    assert est.diverged_ == any("diverged" in str(w.message) for w in caught)
    if not est.diverged_:
        assert est.n_iter_ == 5


@pytest.mark.parametrize("Reg", REGRESSORS)
def test_divergence_flag_matches_the_warning(Reg):
    """A step size far too large: a diverged run is reported (warning and ``diverged_``), and a
    run that is not reported as diverged completed every epoch."""
    X, y = reg_data()
    X = StandardScaler().fit_transform(X)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est = Reg(hidden_layer_sizes=(8,), learning_rate=1e4, max_iter=5, random_state=0).fit(X, y)
    assert est.diverged_ == any("diverged" in str(w.message) for w in caught)
    assert est.diverged_ or est.n_iter_ == 5 or any("rose" in str(w.message) for w in caught)
    assert np.all(est.predict_std(X) > 0)


def test_step_size_messages_round_floats():
    """The rise and divergence warnings name the step sizes to six significant digits: a
    decayed 0.05 * 0.1 reads 0.005, not 0.005000000000000001."""
    from skbayes import VadamRegressor, VOGNRegressor

    vogn = VOGNRegressor(learning_rate=0.05 * 0.1, beta=0.05 * 0.1)._make_family().step_sizes()
    assert vogn == "learning_rate=0.005, beta=0.005"
    vadam = VadamRegressor(learning_rate=0.05 * 0.1, beta1=0.9)._make_family().step_sizes()
    assert vadam == "learning_rate=0.005, method='vadam', beta1=0.9, beta2=0.999"
    auto = VadamRegressor(method="vprop")._make_family().step_sizes()
    assert auto.startswith("learning_rate=auto = 0.05, method='vprop'")


def test_verbose_progress_bar(capsys):
    X, y = reg_data()
    SLANGRegressor(verbose=True, **FAST).fit(X, y)
    err = capsys.readouterr().err
    assert "neg_elbo" in err


@pytest.mark.parametrize("Clf", CLASSIFIERS)
def test_float32_and_custom_conv_module(Clf):
    """A user conv net (SLANG: the generic torch.func path; K-FAC: KFC factors), in float32."""
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    X, y = X[:300] / 16.0, y[:300]

    def conv(n_in, n_out):
        return nn.Sequential(
            nn.Unflatten(1, (1, 8, 8)),
            nn.Conv2d(1, 4, 3),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Flatten(),
            nn.Linear(36, n_out),
        )

    kw = dict(rank=4) if Clf is SLANGClassifier else dict(learning_rate=0.05)
    clf = Clf(module=conv, max_iter=40, batch_size=32, dtype="float32", predict_samples=10, random_state=0, **kw)
    clf.fit(X, y)
    assert clf.posterior_.mean.dtype == np.float32
    assert clf.score(X, y) > 0.8
    # float32 averages are renormalised: scikit-learn's metrics check the row sums at float64 precision
    p = clf.predict_proba(X)
    assert p.dtype == np.float64
    np.testing.assert_allclose(p.sum(1), 1.0, rtol=1e-12)


def _fit_with_kl(monkeypatch, Reg, kl, X, y, **kw):
    """A fit whose objective reads the family's KL term through ``kl``; the model and the
    messages of its ConvergenceWarnings."""
    monkeypatch.setattr(Reg._family, "kl", kl)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        est = Reg(**kw).fit(X, y)
    return est, [str(m.message) for m in w if issubclass(m.category, ConvergenceWarning)]


def _assert_kept_the_best_epoch(monkeypatch, Reg, kl, est, X, y, at_most, **kw):
    """``est`` kept the posterior of its best epoch (at most ``at_most``): exactly the posterior
    of a fit of that many epochs with the true KL term ``kl``."""
    best = int(np.argmin(est.loss_curve_)) + 1
    assert best <= at_most
    monkeypatch.setattr(Reg._family, "kl", kl)
    ref = Reg(max_iter=best, **kw).fit(X, y)
    np.testing.assert_array_equal(est.posterior_.mean, ref.posterior_.mean)
    np.testing.assert_array_equal(est.predict(X), ref.predict(X))


@pytest.mark.parametrize("Reg", [SLANGRegressor, NoisyKFACRegressor, BBBRegressor])
def test_rising_objective_is_reported_and_the_best_epoch_kept(monkeypatch, Reg):
    """A training objective that climbs far above its best and stays there (here: a KL term
    forced up after epoch 4) stops the fit after 10 such epochs with a ConvergenceWarning and
    keeps the best epoch's posterior, exactly the posterior a fit of that many epochs gives;
    a short spike that training recovers from does not stop it."""
    X, y = reg_data(150)
    X = StandardScaler().fit_transform(X)
    kw = dict(hidden_layer_sizes=(8,), batch_size=32, tol=0, n_iter_no_change=10**6, random_state=0)
    family = Reg._family
    orig = family.kl
    calls = {"n": 0}

    def rising_kl(self, *args):
        calls["n"] += 1
        return orig(self, *args) + (0.0 if calls["n"] <= 4 else 1e3 * X.shape[0])

    est, messages = _fit_with_kl(monkeypatch, Reg, rising_kl, X, y, max_iter=30, **kw)
    assert any("rose" in m for m in messages)
    assert est.n_iter_ == 14 and len(est.loss_curve_) == 14
    _assert_kept_the_best_epoch(monkeypatch, Reg, orig, est, X, y, at_most=4, **kw)

    # a spike of 9 epochs (one short of the patience) is ridden out
    calls["n"] = 0

    def spiky_kl(self, *args):
        calls["n"] += 1
        return orig(self, *args) + (1e3 * X.shape[0] if 4 < calls["n"] <= 13 else 0.0)

    est, messages = _fit_with_kl(monkeypatch, Reg, spiky_kl, X, y, max_iter=20, **kw)
    assert est.n_iter_ == 20 and not any("rose" in m for m in messages)

    # a spike the epochs run out in (epochs 17-18 of 20, and 19-20 back below it but still
    # three quarters of its margin above the best) is not ridden out: the best epoch's
    # posterior is kept, with a warning
    monkeypatch.setattr(family, "kl", orig)
    best16 = min(Reg(max_iter=16, **kw).fit(X, y).loss_curve_)
    calls["n"] = 0

    def late_kl(self, *args):
        calls["n"] += 1
        extra = {17: 1e3, 18: 1e3, 19: 0.75 * max(1.0, abs(best16)), 20: 0.75 * max(1.0, abs(best16))}
        return orig(self, *args) + extra.get(calls["n"], 0.0) * X.shape[0]

    est, messages = _fit_with_kl(monkeypatch, Reg, late_kl, X, y, max_iter=20, **kw)
    assert any("within the last 10 epochs and the epochs ran out" in m for m in messages), messages
    assert est.n_iter_ == 20 and len(est.loss_curve_) == 20
    _assert_kept_the_best_epoch(monkeypatch, Reg, orig, est, X, y, at_most=16, **kw)


@pytest.mark.parametrize("Reg", REGRESSORS)
def test_log_likelihood_is_the_mixture_density_of_the_samples(Reg, monkeypatch):
    """log_likelihood = mean over rows of log (1/S) sum_s N(y | f_s, noise_std_^2), computed
    here by hand from sample_outputs; it rewards the right targets over shifted ones. (The
    Kronecker regressors' predictive draws their first layer's outputs row by row, the same
    distribution as sample_outputs' whole networks but other draws: here it takes weight
    samples too, so that the two are the same numbers; test_kronecker.py checks the draws.)"""
    from scipy.stats import norm

    X, y = reg_data(150)
    X = StandardScaler().fit_transform(X)
    monkeypatch.setattr(Reg, "_draws_first_layer", lambda self, posterior: False)
    est = Reg(**FAST)
    if "predictive" in est.get_params():  # the sampled predictive, whatever the estimator's default
        est.set_params(predictive="sampled")
    est.fit(X[:100], y[:100])
    f = est.sample_outputs(X[100:], n_samples=30)[..., 0]
    dens = norm.pdf(y[100:][None, :], f, est.noise_std_).mean(0)
    ll = est.log_likelihood(X[100:], y[100:], n_samples=30)
    assert ll == pytest.approx(np.mean(np.log(dens)), rel=1e-10)
    assert est.log_likelihood(X[100:], y[100:] + 5 * y.std(), n_samples=30) < ll
    with pytest.raises(ValueError, match="inconsistent"):
        est.log_likelihood(X[100:], y[:10])
