"""Persistence: ``skops.io`` and pickle round-trips of every estimator, with identical
predictions and few untrusted types."""

import pickle
import warnings

import numpy as np
import pytest
import torch
from torch import nn

import skbayes
from skbayes import _persist

sio = pytest.importorskip("skops.io")

NETWORKS = [getattr(skbayes, name) for name in skbayes.__all__ if name.endswith(("Regressor", "Classifier"))]
ALL = NETWORKS + [skbayes.BayesianLinearRegression]


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def _data(classifier, n=40, seed=0):
    rng = np.random.RandomState(seed)
    X = rng.randn(n, 3)
    if classifier:
        return X, np.array(["a", "b", "c"])[np.digitize(X[:, 0], [-0.5, 0.5])]
    return X, X[:, 0] - 0.5 * X[:, 1] + 0.1 * rng.randn(n)


def _fit(Est, **params):
    classifier = Est.__name__.endswith("Classifier")
    X, y = _data(classifier)
    if Est is not skbayes.BayesianLinearRegression:
        params = {"max_iter": 2, "random_state": 0, **params}
    return Est(**params).fit(X, y), X


def _predictions(est, X):
    if hasattr(est, "predict_proba"):
        return [est.predict(X), est.predict_proba(X), est.predict_std(X)]
    return [
        *est.predict(X, return_std=True),
        est.sample_y(X, n_samples=3, random_state=1),
        est.sample_y(X, n_samples=2, random_state=np.random.RandomState(5)),
    ]


def _assert_identical(a, b):
    for u, v in zip(a, b, strict=True):
        np.testing.assert_array_equal(u, v)


def _qualname(obj):
    return f"{obj.__module__}.{obj.__name__}"


@pytest.mark.parametrize("Est", ALL, ids=lambda c: c.__name__)
def test_skops_round_trip_predicts_identically(Est):
    est, X = _fit(Est)
    data = sio.dumps(est)
    # the only type a user must trust is the estimator class itself
    assert sio.get_untrusted_types(data=data) == [_qualname(Est)]
    loaded = sio.loads(data, trusted=[_qualname(Est)])
    assert type(loaded) is Est
    assert loaded.get_params() == est.get_params()
    _assert_identical(_predictions(est, X), _predictions(loaded, X))
    # and pickle still round-trips, with the same predictions
    _assert_identical(_predictions(est, X), _predictions(pickle.loads(pickle.dumps(est)), X))


@pytest.mark.parametrize("Est", [skbayes.SLANGRegressor, skbayes.NoisyKFACClassifier, skbayes.VOGNRegressor])
def test_loaded_model_continues_training_as_the_original(Est):
    """Everything a continuing fit uses (posterior, family state, generator states,
    noise posterior, prior) survives: ``partial_fit`` after loading gives the
    same model, bit for bit, as ``partial_fit`` on the original."""
    est, X = _fit(Est)
    loaded = sio.loads(sio.dumps(est), trusted=[_qualname(Est)])
    X2, y2 = _data(Est.__name__.endswith("Classifier"), seed=1)
    est.partial_fit(X2, y2)
    loaded.partial_fit(X2, y2)
    _assert_identical(_predictions(est, X), _predictions(loaded, X))
    assert loaded.t_ == est.t_ and loaded.loss_curve_ == est.loss_curve_


@pytest.mark.parametrize("Est", [skbayes.SLANGRegressor, skbayes.BayesianLinearRegression])
def test_unfitted_estimator_round_trips(Est):
    est = Est()
    loaded = sio.loads(sio.dumps(est), trusted=[_qualname(Est)])
    assert loaded.get_params() == est.get_params()
    assert not hasattr(loaded, "n_features_in_")


def make_net(n_in, n_out):
    """A user network factory (module-level: skops stores it by name). Its first layer has
    no bias, so it is not an MLP of ``hidden_layer_sizes`` and loading must call it."""
    return nn.Sequential(nn.Linear(n_in, 5, bias=False), nn.Tanh(), nn.Linear(5, n_out))


def test_user_module_callable_is_the_one_extra_untrusted_type():
    est, X = _fit(skbayes.VadamRegressor, module=make_net)
    data = sio.dumps(est)
    untrusted = sio.get_untrusted_types(data=data)
    assert untrusted == sorted([_qualname(skbayes.VadamRegressor), _qualname(make_net)])
    rng_state = torch.random.get_rng_state()
    loaded = sio.loads(data, trusted=untrusted)
    # rebuilding the network by calling the factory leaves torch's global generator alone
    assert torch.equal(torch.random.get_rng_state(), rng_state)
    _assert_identical(_predictions(est, X), _predictions(loaded, X))


def test_module_instance_pickles():
    est, X = _fit(skbayes.BBBRegressor, module=make_net(3, 1))
    _assert_identical(_predictions(est, X), _predictions(pickle.loads(pickle.dumps(est)), X))


def test_pickled_state_holds_no_torch_objects():
    """What pickle and skops store of a fitted model: builtins and numpy arrays only."""
    est, _ = _fit(skbayes.NoisyEKFACRegressor)
    state = est.__getstate__()

    def walk(obj):
        if isinstance(obj, dict):
            for k, v in obj.items():
                walk(k)
                walk(v)
        elif isinstance(obj, (list, tuple)):
            for v in obj:
                walk(v)
        else:
            assert obj is None or isinstance(obj, (bool, int, float, str, np.ndarray, np.generic)), type(obj)

    walk(state)


def test_state_refuses_classes_outside_skbayes():
    est, _ = _fit(skbayes.VadamRegressor)
    state = est.__getstate__()
    state["_skbayes_state"]["fitted"]["_likelihood"]["class"] = "os:system"
    with pytest.raises(ValueError, match="not an skbayes class"):
        pickle.loads(pickle.dumps(est)).__setstate__(state)
    with pytest.raises(ValueError, match="not an skbayes class"):
        _persist._skbayes_class("subprocess:Popen")


@pytest.mark.parametrize("Est", [skbayes.NoisyKFACRegressor, skbayes.BayesianLinearRegression])
def test_multi_output_regressor_round_trips(Est):
    rng = np.random.RandomState(0)
    X = rng.randn(40, 3)
    Y = np.column_stack([X[:, 0], 5.0 * X[:, 1] + rng.randn(40)])
    params = {} if Est is skbayes.BayesianLinearRegression else {"max_iter": 2, "random_state": 0}
    est = Est(**params).fit(X, Y)
    loaded = sio.loads(sio.dumps(est), trusted=[_qualname(Est)])
    _assert_identical(_predictions(est, X), _predictions(loaded, X))
    assert loaded.predict(X).shape == (40, 2)


def _saved_without(param, cls, X, y, **params):
    """A small fit of ``cls`` and its copy loaded from a state without ``param``, as a save made
    before the parameter existed."""
    est = cls(hidden_layer_sizes=(5,), max_iter=3, random_state=0, **params)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(X, y)
    state = est.__getstate__()
    del state[param]
    old = cls.__new__(cls)
    old.__setstate__(state)
    return est, old


@pytest.mark.parametrize("name", ["NoisyKFACClassifier", "SLANGClassifier", "VadamClassifier"])
def test_a_save_from_before_decay_epochs_loads_with_the_constant_step(name):
    """A model saved before ``decay_epochs`` existed loads with None (the constant steps it
    was trained with), predicts as saved, and continues training."""
    from sklearn.datasets import load_iris

    X, y = load_iris(return_X_y=True)
    est, old = _saved_without("decay_epochs", getattr(skbayes, name), X, y, predict_samples=20)
    assert old.decay_epochs is None
    np.testing.assert_array_equal(old.predict_proba(X), est.predict_proba(X))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        old.partial_fit(X, y)


@pytest.mark.parametrize("name", ["VOGNClassifier", "NoisyEKFACClassifier"])
def test_a_save_from_before_glm_link_loads_with_the_pairwise_link(name):
    """A classifier saved before ``glm_link`` existed loads with 'pairwise' (the link it
    predicted with), so ``get_params`` / ``clone`` work and it predicts as saved."""
    from sklearn.base import clone
    from sklearn.datasets import load_iris

    X, y = load_iris(return_X_y=True)
    est, old = _saved_without("glm_link", getattr(skbayes, name), X, y, predictive="glm")
    assert old.get_params()["glm_link"] == "pairwise" and clone(old).glm_link == "pairwise"
    np.testing.assert_array_equal(old.predict_proba(X), est.predict_proba(X))
    assert np.abs(old.set_params(glm_link="probit").predict_proba(X) - est.predict_proba(X)).max() > 1e-6
