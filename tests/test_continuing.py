"""Continuing fits (``warm_start=True`` and ``partial_fit``) after ``set_params``.

The rule the tests state: a parameter is *structural* when the fitted state fixes it at
the start of a fit: the network's (``hidden_layer_sizes``, ``activation``, ``module``),
``dtype``, ``device``, and the parameters a posterior family declares in its
``structural_params`` (MC dropout's rates). After a change of a structural parameter a
``warm_start`` fit warns and starts afresh (its result is, bit for bit, a new fit's), and
``partial_fit`` raises, leaving the model as it was. Every other parameter is applied by
the continuing fit, which keeps training the same network: the step counter goes on, and
the fitted state has the structure that a new fit with the changed parameter gives (the
same network, dtypes and posterior shapes, the same prior, likelihood and dropout rates).

The parameters come from ``get_params()`` of every network estimator; the changed value of
each is derived from its default (a number scaled or incremented, a flag negated) or
taken from the table below, and a parameter with no changed value fails the test.
"""

import copy
import warnings

import numpy as np
import pytest
import torch
from sklearn.datasets import load_diabetes, load_iris
from sklearn.preprocessing import StandardScaler
from torch import nn

import skbayes
from skbayes._estimator import _torch_dtype

NETWORK_ESTIMATORS = [getattr(skbayes, n) for n in skbayes.__all__ if n.endswith(("Regressor", "Classifier"))]
BASE = dict(hidden_layer_sizes=(5,), max_iter=1, batch_size=16, predict_samples=4, random_state=0, warm_start=True)


def small_net(n_in, n_out):
    return nn.Sequential(nn.Linear(n_in, 4), nn.Tanh(), nn.Linear(4, n_out))


#: Changed values of the parameters whose default has no generic change (None, strings, tuples).
TABLE = {
    "hidden_layer_sizes": [(3,), (5, 2)],
    "activation": ["tanh"],
    "module": [small_net],
    "batch_size": [8],
    "device": ["cuda"] if torch.cuda.is_available() else [],  # no second device on a CPU-only machine
    "dtype": ["float32"],
    "fisher": ["empirical", "true"],
    "init": ["default"],
    "kl_annealing": [(1.0, 1.0, 1.0)],
    "learning_rate": [0.01, 0.02],
    "lr_decay": [0.5],
    "decay_epochs": [50.0, None],
    "method": ["vprop"],
    "noise_precision": [10.0],
    "noise_prior": [(2.0, 2.0)],
    "prior_precision": [3.0, "auto"],
    "random_state": [7],
    "n_threads": [1],
    "predictive": ["glm", "sampled"],
    "glm_link": ["mc"],
    "kl_weight": [0.5, "auto"],
    "beta": [0.01, 0.02],
    "damping": [0.005, "auto"],
    "max_iter": [3],
    "tol": [1e-4, None],
    "dropout": [0.05, "auto"],
    "early_stopping": [True, False, "auto"],
}
#: ``warm_start`` is the switch under test itself.
SWITCH = "warm_start"


def _valid(est, name, value):
    try:
        copy.deepcopy(est).set_params(**{name: value})._validate_params()
    except ValueError:
        return False
    return True


def _same(value, default):
    return type(value) is type(default) and value == default


def changed_values(est, name):
    default = est.get_params()[name]
    if name in TABLE:
        values = [v for v in TABLE[name] if _valid(est, name, v) and not _same(v, default)]
        assert values or name == "device", f"no valid changed value of {type(est).__name__}.{name} in TABLE"
        return values
    if isinstance(default, bool):
        return [not default]
    if isinstance(default, int):
        return [default + 1]
    if isinstance(default, float):
        return [default * 0.5 if default > 0 else 0.1]
    raise AssertionError(f"no changed value for {type(est).__name__}.{name}={default!r}: add one to TABLE")


def is_structural(est, name):
    return name in ("hidden_layer_sizes", "activation", "module", "dtype", "device") + est._family.structural_params


def _data(cls):
    if cls.__name__.endswith("Classifier"):
        X, y = load_iris(return_X_y=True)
        rows = np.r_[0:10, 50:60, 100:110]
    else:
        X, y = load_diabetes(return_X_y=True)
        rows = np.arange(30)
    return StandardScaler().fit_transform(X[rows]), y[rows]


def _tensors(obj):
    return sorted(
        (k, tuple(v.shape), v.dtype, v.device.type) for k, v in vars(obj).items() if isinstance(v, torch.Tensor)
    )


def signature(est):
    """The structure of a fitted state: network, posterior shapes and dtypes, prior, likelihood."""
    post, lik = est.posterior_, est._likelihood
    noise = getattr(lik, "noise", None)
    return (
        repr(est.module_),
        type(post).__name__,
        _tensors(post),
        sorted((k, tuple(v.shape), v.dtype) for k, v in est._state.items() if isinstance(v, torch.Tensor)),
        getattr(post, "groups", None),
        (est._prior.learn, None if est._prior.learn else est._prior.values),
        type(lik).__name__,
        None if noise is None else (noise.learn, getattr(noise, "tau", None), noise.a0, noise.b0),
    )


def _fit(est, X, y, method="fit"):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if method == "fit":
            est.fit(X, y)
        else:
            est.partial_fit(X, y)
    restarts = [w for w in caught if "starts afresh" in str(w.message)]
    return est, restarts


def _mean(est):
    return est.posterior_.mean_t.detach().cpu().numpy()


@pytest.mark.parametrize("cls", NETWORK_ESTIMATORS, ids=lambda c: c.__name__)
def test_every_parameter_change_restarts_or_continues(cls):
    X, y = _data(cls)
    fitted, _ = _fit(cls(**BASE), X, y)
    base_sig = signature(fitted)
    names = sorted(n for n in fitted.get_params() if n != SWITCH)
    tried = 0
    for name in names:
        for value in changed_values(fitted, name):
            est = copy.deepcopy(fitted).set_params(**{name: value})
            t_before, mean_before = est.t_, _mean(est).copy()
            fresh, _ = _fit(cls(**{**BASE, name: value}), X, y)
            what = f"{cls.__name__}.{name}={value!r}"
            if is_structural(est, name):
                assert signature(fresh) != base_sig, f"{what}: declared structural but changes no structure"
                est, restarts = _fit(est, X, y)
                assert len(restarts) == 1 and name in str(restarts[0].message), what
                assert est.t_ == fresh.t_ and np.array_equal(_mean(est), _mean(fresh)), f"{what}: not a new fit"
                assert signature(est) == signature(fresh), what
                # partial_fit refuses, and leaves the fitted model as it was
                est = copy.deepcopy(fitted).set_params(**{name: value})
                with pytest.raises(ValueError, match=f"partial_fit cannot continue.*{name}"):
                    est.partial_fit(X, y)
                assert est.t_ == t_before and np.array_equal(_mean(est), mean_before), what
            else:
                est, restarts = _fit(est, X, y)
                assert not restarts, f"{what}: restarted"
                assert est.t_ > t_before, f"{what}: did not continue"
                assert signature(est) == signature(fresh), f"{what}: the continuing fit did not apply it"
            tried += 1
    assert tried >= len(names) - 1  # every parameter but (on a CPU-only machine) device


def test_equal_values_are_no_change():
    """Spellings of the same value, and the same module callable, continue the fit."""
    X, y = _data(skbayes.VOGNRegressor)
    est = skbayes.VOGNRegressor(**{**BASE, "hidden_layer_sizes": 5, "dtype": np.float64}).fit(X, y)
    t = est.t_
    est.set_params(hidden_layer_sizes=[5], dtype="float64")
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        est.partial_fit(X, y)
    assert est.t_ > t
    est = skbayes.VOGNRegressor(**{**BASE, "module": small_net}).fit(X, y)
    t = est.t_
    est.set_params(hidden_layer_sizes=(9,), activation="tanh")  # not used with a module
    est.partial_fit(X, y)
    assert est.t_ > t
    assert _torch_dtype(est.dtype) == torch.float64


def test_restored_and_pickled_models_keep_their_module():
    """A module instance keeps its identity through the copies of a failed fit and a pickle."""
    import pickle

    X, y = _data(skbayes.SLANGRegressor)
    net = small_net(X.shape[1], 1).double()
    est = skbayes.SLANGRegressor(**{**BASE, "module": net}).fit(X, y)
    with pytest.raises(ValueError):
        est.partial_fit(X[:, :3], y)  # fails after the state was copied: the copy is restored
    t = est.t_
    est.partial_fit(X, y)
    assert est.t_ > t
    est = pickle.loads(pickle.dumps(est))
    t = est.t_
    est.partial_fit(X, y)
    assert est.t_ > t


@pytest.mark.parametrize("cls", [skbayes.SLANGRegressor, skbayes.BBBClassifier])
def test_the_loop_continues_a_training_state_as_a_warm_start_fit_does(cls):
    """The loop trains a ``TrainingState`` and never the estimator: one epoch of
    ``run_epochs`` on the state copied out of a fitted model, with the model's settings,
    gives the posterior, step counter and objective of a ``warm_start`` fit of one epoch,
    bit for bit."""
    from skbayes import _loop

    X, y = _data(cls)
    est = cls(**{**BASE, "max_iter": 2}).fit(X, y)
    twin = copy.deepcopy(est)
    state = twin._training_state()
    Xt, yt = twin._tensor(X), twin._target_tensor(twin._encode_targets(y))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.set_params(max_iter=1).fit(X, y)
        outcome = _loop.run_epochs(state, twin._loop_settings(X.shape[0]), twin._make_family(), Xt, yt, 1, False)
    assert not outcome.diverged and state.n_iter == est.n_iter_ == 3
    assert state.t == est.t_ and state.loss_curve == est.loss_curve_
    assert torch.equal(state.posterior.mean_t, est.posterior_.mean_t)
    assert torch.equal(state.rng_state, est._rng_state)
    twin._store_training_state(state)
    assert twin.posterior_ is state.posterior and twin.t_ == est.t_ and twin.loss_curve_ == est.loss_curve_
