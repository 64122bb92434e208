"""Warnings a user sees: none from the README quickstart and from default fits that converge,
each real one attributed to the user's own line, and clear words for common mistakes
(a regression target given to a classifier, a layer the Kronecker families cannot take)."""

import warnings

import numpy as np
import pytest
import torch
from sklearn.datasets import load_breast_cancer, load_diabetes, load_digits, load_iris
from sklearn.exceptions import ConvergenceWarning
from sklearn.preprocessing import StandardScaler
from torch import nn

import skbayes
from skbayes.exceptions import InputScaleWarning, UnsupportedLayerError


def _data(name):
    loader = {"diabetes": load_diabetes, "breast_cancer": load_breast_cancer, "digits": load_digits}[name]
    X, y = loader(return_X_y=True)
    return StandardScaler().fit_transform(X), y


@pytest.fixture(scope="module")
def quickstart():
    """The README quickstart's fitted SLANGRegressor and the warnings it raised."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        # the README's quickstart, as written there
        from sklearn.datasets import load_diabetes
        from sklearn.model_selection import train_test_split
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import StandardScaler

        from skbayes import SLANGClassifier, SLANGRegressor

        X, y = load_diabetes(return_X_y=True)
        X_train, X_test, y_train, y_test = train_test_split(X, y, random_state=0)

        reg = make_pipeline(StandardScaler(), SLANGRegressor(hidden_layer_sizes=(20,), rank=8, random_state=0))
        reg.fit(X_train, y_train)
        mean, std = reg.predict(X_test, return_std=True)
        reg.score(X_test, y_test)
        slang = reg[-1]
        slang.posterior_.variance()
        slang.sample_outputs(reg[:-1].transform(X_test), n_samples=50)
        slang.log_likelihood(reg[:-1].transform(X_test), y_test)
        SLANGClassifier(hidden_layer_sizes=(50,), random_state=0)
    return slang, caught


def test_readme_quickstart_warns_about_nothing_but_convergence(quickstart):
    _, caught = quickstart
    assert [str(w.message) for w in caught if not issubclass(w.category, ConvergenceWarning)] == []
    for w in caught:  # if it warns, it names the user's line (inside a Pipeline)
        assert w.filename == __file__


def test_readme_quickstart_stops_by_its_rule(quickstart):
    slang, caught = quickstart
    assert [str(w.message) for w in caught] == []
    assert slang.n_iter_ < slang._max_epochs(331)  # stopped by its rule, before max_iter='auto'


# Default fits (random_state=0 only) that stop by their rule, quickly enough for the suite.
QUIET_DEFAULT_FITS = [
    ("SLANGClassifier", "breast_cancer"),
    ("NoisyEKFACClassifier", "breast_cancer"),
    ("MCDropoutClassifier", "breast_cancer"),
    ("NoisyKFACRegressor", "diabetes"),
    ("NoisyEKFACRegressor", "diabetes"),
    ("VOGNRegressor", "diabetes"),
    ("BBBRegressor", "diabetes"),
    ("MCDropoutRegressor", "diabetes"),
    ("NoisyKFACClassifier", "breast_cancer"),
    ("VOGNClassifier", "breast_cancer"),
]


@pytest.mark.parametrize("name, data", QUIET_DEFAULT_FITS)
def test_default_fits_are_quiet(name, data):
    X, y = _data(data)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        est = getattr(skbayes, name)(random_state=0).fit(X, y)
    assert est.n_iter_ < est._max_epochs(X.shape[0])  # stopped by its rule (a ConvergenceWarning would raise)


@pytest.mark.parametrize("name, data", [("VadamRegressor", "diabetes"), ("VadamClassifier", "breast_cancer")])
def test_vadam_trains_its_budget_quietly_and_auto_lets_it_stop_by_its_rule(name, data):
    # Vadam's squared-gradient average forgets its start with a time constant of
    # 1 / (1 - beta2) = 1000 steps, 7-9 epochs of steps here: at 200 epochs its objective
    # still falls. The default (tol=None) trains that budget of 200 epochs without a
    # warning, the same fit as with a tolerance rule that does not fire (which warns)...
    X, y = _data(data)
    Est = getattr(skbayes, name)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        budget = Est(random_state=0).fit(X, y)
    assert budget.tol is None and budget.n_iter_ == budget.max_iter == 200
    with pytest.warns(ConvergenceWarning, match="maximum iterations"):
        ruled = Est(tol=1e-4, random_state=0).fit(X, y)
    np.testing.assert_array_equal(budget.posterior_.mean, ruled.posterior_.mean)
    # ... and 'auto' with a tolerance allows the epochs of 10,000 steps (at most 1000)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        est = Est(max_iter="auto", tol=1e-4, random_state=0).fit(X, y)
    assert est.n_iter_ < 1000


def test_tol_none_trains_max_iter_epochs_and_keeps_the_best_validation_epoch():
    X, y = _data("breast_cancer")
    kw = dict(hidden_layer_sizes=(8,), n_iter_no_change=2, max_iter=40, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ruled = skbayes.VOGNClassifier(**kw).fit(X, y)
        budget = skbayes.VOGNClassifier(tol=None, **kw).fit(X, y)
        val = skbayes.VOGNClassifier(tol=None, early_stopping=True, **kw).fit(X, y)
    assert ruled.n_iter_ < 40 and budget.n_iter_ == 40  # the rule fires at tol=1e-4, never at None
    np.testing.assert_array_equal(budget.loss_curve_[: ruled.n_iter_], ruled.loss_curve_)
    assert val.n_iter_ == 40 and len(val.validation_scores_) == 40
    assert val.best_validation_score_ == max(val.validation_scores_)
    # kept: the best epoch's posterior (the fit's own held-out rows, rescored); whether the last
    # epoch is the best depends on rounding, so test_noise_and_options.py checks a fit stopped after it
    _, _, Xv, yv = val._validation_split(X, np.searchsorted(val.classes_, y))
    assert val._validation_score(val._tensor(Xv), yv) == pytest.approx(val.best_validation_score_, rel=1e-12)


def test_a_divergence_warning_points_at_the_callers_line():
    X, y = load_digits(return_X_y=True)
    est = skbayes.NoisyEKFACClassifier(
        hidden_layer_sizes=(8,), learning_rate=1e3, kl_clip=None, momentum=0.0, max_iter=5, init="default"
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est.set_params(random_state=0, dtype="float32").fit(X[:200] / 16.0 * 1e18, y[:200])
    diverged = [w for w in caught if issubclass(w.category, ConvergenceWarning) and "diverged" in str(w.message)]
    assert diverged, [str(w.message) for w in caught]
    scale = [w for w in caught if issubclass(w.category, InputScaleWarning)]
    for w in diverged + scale:
        assert w.filename == __file__, (w.filename, str(w.message))


def test_a_warning_in_a_pipeline_or_a_search_points_at_the_users_line():
    from sklearn.model_selection import cross_val_score
    from sklearn.pipeline import make_pipeline

    X, y = _data("diabetes")
    pipe = make_pipeline(StandardScaler(), skbayes.VOGNRegressor(hidden_layer_sizes=(4,), max_iter=1, random_state=0))
    with pytest.warns(ConvergenceWarning, match="maximum iterations") as caught:
        pipe.fit(X, y)
    with pytest.warns(ConvergenceWarning, match="maximum iterations") as caught_cv:
        cross_val_score(pipe, X, y, cv=2)
    assert caught and caught_cv
    assert all(w.filename == __file__ for w in list(caught) + list(caught_cv))


def test_regression_like_integer_targets_warn_a_classifier():
    X, y = _data("diabetes")  # 214 distinct integers in 442 rows
    with pytest.warns(UserWarning, match=r"214 distinct numeric values in 442 rows.*VOGNRegressor") as caught:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            skbayes.VOGNClassifier(hidden_layer_sizes=(4,), max_iter=1, random_state=0).fit(X, y)
    assert any(w.filename == __file__ for w in caught)


@pytest.mark.parametrize(
    "labels",
    [
        load_digits(return_X_y=True)[1][:300],  # 10 classes
        load_iris(return_X_y=True)[1],  # 3 classes
        np.repeat(np.arange(30), 5),  # 30 classes of 5 rows: a real multi-class problem
        np.array([f"c{i}" for i in range(60)] * 2),  # many classes, but strings
    ],
    ids=["digits", "iris", "30x5", "strings"],
)
def test_classification_targets_do_not_warn(labels):
    X = np.random.RandomState(0).standard_normal((len(labels), 3))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.simplefilter("ignore", ConvergenceWarning)
        skbayes.VOGNClassifier(hidden_layer_sizes=(4,), max_iter=1, random_state=0).fit(X, labels)


def _layer_norm_net(n_in, n_out):
    return nn.Sequential(nn.Linear(n_in, 8), nn.LayerNorm(8), nn.Tanh(), nn.Linear(8, n_out))


def test_the_unsupported_layer_message_names_the_estimators_that_take_it():
    X, y = _data("breast_cancer")
    with pytest.raises(UnsupportedLayerError) as info:
        skbayes.NoisyKFACClassifier(module=_layer_norm_net, max_iter=1, random_state=0).fit(X, y)
    msg = str(info.value)
    assert "LayerNorm" in msg and "NoisyKFAC and NoisyEKFAC" in msg
    assert "SLANG, VOGN, Vadam, BBB and MCDropout estimators accept any module" in msg
    # a SLANG user is told about the initialisation, not to "use SLANG"
    with pytest.warns(UserWarning, match="init='iblm' handles networks") as caught:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            skbayes.SLANGClassifier(module=_layer_norm_net, max_iter=1, random_state=0).fit(X, y)
    assert all(w.filename == __file__ for w in caught if "init=" in str(w.message))
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        warnings.simplefilter("ignore", ConvergenceWarning)
        skbayes.SLANGClassifier(module=_layer_norm_net, init="default", max_iter=1, random_state=0).fit(X, y)
    assert torch.get_num_threads() >= 1


def _batch_norm_net(n_in, n_out):
    return nn.Sequential(nn.Linear(n_in, 8), nn.BatchNorm1d(8, affine=False), nn.Tanh(), nn.Linear(8, n_out))


@pytest.mark.filterwarnings("ignore:Initializing zero-element tensors")
@pytest.mark.parametrize(
    "Est",
    [
        skbayes.SLANGClassifier,
        skbayes.BBBClassifier,
        skbayes.MCDropoutClassifier,
        skbayes.VadamRegressor,
        skbayes.NoisyKFACRegressor,
    ],
)
def test_batch_normalisation_is_refused_by_every_estimator(Est):
    """Batch normalisation makes a row's output depend on the other rows of its batch (MC
    dropout's predictions did: 0.09 apart for the same row in two calls), so every estimator
    refuses it, parameter-free or not; a layer of width 0 is named too."""
    X, y = _data("breast_cancer")
    with pytest.raises(UnsupportedLayerError, match=r"Layer '1' \(BatchNorm1d\) normalises over the rows"):
        Est(module=_batch_norm_net, max_iter=1, random_state=0).fit(X[:40], y[:40])
    with pytest.raises(ValueError, match="parameter '0.weight' has no entries .* width 0"):
        Est(module=lambda i, o: nn.Sequential(nn.Linear(i, 0), nn.Linear(0, o)), max_iter=1).fit(X[:40], y[:40])
