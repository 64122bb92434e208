"""Fits that share a process: a result depends on the estimator's parameters and data only.

Every network estimator is fitted (and predicts) in 8 threads at once, several times over,
and must give, bit for bit, what the same fits give one after another; torch's process-wide
state (the global random generator, the default dtype) must be left as it was.
"""

import random
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import torch
from sklearn.base import clone, is_classifier
from sklearn.datasets import load_diabetes, load_iris
from sklearn.preprocessing import StandardScaler
from torch import nn

import skbayes

NETWORK_ESTIMATORS = [getattr(skbayes, n) for n in skbayes.__all__ if n.endswith(("Regressor", "Classifier"))]
SMALL = dict(hidden_layer_sizes=(5,), max_iter=3, predict_samples=4, batch_size=16, random_state=3)


def _data(cls):
    if cls.__name__.endswith("Classifier"):
        X, y = load_iris(return_X_y=True)
        rows = np.r_[0:15, 50:65, 100:115]
    else:
        X, y = load_diabetes(return_X_y=True)
        rows = np.arange(45)
    return StandardScaler().fit_transform(X[rows]), y[rows]


def _fit_and_predict(est, X, y):
    """The fitted posterior mean, the predictions and the loss curve of a fit of ``est``
    (the caller silences the short fits' warnings: the filters are process-wide, so threads
    must not change them)."""
    est.fit(X, y)
    pred = est.predict_proba(X) if is_classifier(est) else np.stack(est.predict(X, return_std=True))
    return est.posterior_.mean_t.detach().cpu().numpy().copy(), pred, np.asarray(est.loss_curve_)


def _jobs():
    jobs = []
    for cls in NETWORK_ESTIMATORS:
        X, y = _data(cls)
        for init in ("iblm", "default"):
            jobs.append((f"{cls.__name__}(init={init!r})", cls(init=init, **SMALL), X, y))
    # a float32 fit, and a module instance (deep-copied by each fit, no random draws of its own)
    X, y = _data(skbayes.SLANGRegressor)
    jobs.append(("SLANGRegressor(dtype='float32')", skbayes.SLANGRegressor(dtype="float32", **SMALL), X, y))
    net = nn.Sequential(nn.Linear(X.shape[1], 4), nn.Tanh(), nn.Linear(4, 1)).double()
    jobs.append(("VOGNRegressor(module=instance)", skbayes.VOGNRegressor(module=net, init="default", **SMALL), X, y))
    return jobs


@pytest.mark.filterwarnings("ignore")
def test_concurrent_fits_equal_serial_fits_bit_for_bit():
    jobs = _jobs()
    rng_before, dtype_before = torch.random.get_rng_state(), torch.get_default_dtype()
    serial = {name: _fit_and_predict(clone(est), X, y) for name, est, X, y in jobs}
    order = list(range(len(jobs)))
    for round_ in range(2):
        random.Random(round_).shuffle(order)  # different neighbours in every round
        with ThreadPoolExecutor(max_workers=8) as pool:
            futures = {}
            for i in order:
                name, est, X, y = jobs[i]
                futures[name] = pool.submit(_fit_and_predict, clone(est), X, y)
        for name, fut in futures.items():
            mean, pred, curve = fut.result()
            s_mean, s_pred, s_curve = serial[name]
            assert np.array_equal(mean, s_mean), (round_, name, "posterior mean")
            assert np.array_equal(pred, s_pred), (round_, name, "predictions")
            assert np.array_equal(curve, s_curve), (round_, name, "loss curve")
    assert torch.equal(torch.random.get_rng_state(), rng_before)
    assert torch.get_default_dtype() == dtype_before


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("cls", NETWORK_ESTIMATORS, ids=lambda c: c.__name__)
def test_fit_ignores_and_keeps_torch_global_state(cls):
    """A fit reads neither torch's global random state nor its default dtype, and changes
    neither: the same parameters give the same model whatever they are."""
    X, y = _data(cls)
    est = cls(init="default", **SMALL)
    results = []
    for seed, dtype in ((0, torch.float32), (12345, torch.float64)):
        torch.manual_seed(seed)
        prev = torch.get_default_dtype()
        torch.set_default_dtype(dtype)
        try:
            state = torch.random.get_rng_state()
            results.append(_fit_and_predict(clone(est), X, y))
            assert torch.equal(torch.random.get_rng_state(), state)
            assert torch.get_default_dtype() == dtype
        finally:
            torch.set_default_dtype(prev)
    for a, b in zip(*results):
        assert np.array_equal(a, b)
