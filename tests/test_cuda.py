"""``device='cuda'``: every network estimator fits and predicts on a GPU.

Skipped where torch sees no CUDA device (the CI machines). Where one exists, each
claim is checked against the same estimator on the CPU:

- a fit on the GPU scores as a CPU fit does (held-out accuracy or R^2 within the
  seed-to-seed spread; the two devices draw different random numbers, so the fits are
  not the same bit for bit), and its outputs are numpy arrays on the host;
- a model fitted on the GPU and loaded where CUDA is unavailable lands on the CPU and
  predicts what it predicted on the GPU: the linearised (GLM) predictive, which draws
  nothing, agrees to float64 rounding, so the GPU computes the CPU's mathematics;
- continuing fits (``partial_fit``, ``warm_start``) and float32 stay on the GPU.
"""

import pickle

import numpy as np
import pytest
import torch
from scipy.stats import norm
from sklearn.datasets import load_breast_cancer, load_diabetes
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

import skbayes

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

NETWORK_ESTIMATORS = [getattr(skbayes, n) for n in skbayes.__all__ if n.endswith(("Regressor", "Classifier"))]
GAUSSIAN = [E for E in NETWORK_ESTIMATORS if "MCDropout" not in E.__name__]
IDS = [E.__name__ for E in NETWORK_ESTIMATORS]


def _data(est_cls):
    if est_cls.__name__.endswith("Classifier"):
        X, y = load_breast_cancer(return_X_y=True)
        strat = y
    else:
        X, y = load_diabetes(return_X_y=True)
        y = (y - y.mean()) / y.std()
        strat = None
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, random_state=0, stratify=strat)
    sc = StandardScaler().fit(Xtr)
    return sc.transform(Xtr), sc.transform(Xte), ytr, yte


def _device_of(est):
    return next(est.module_.parameters()).device


def _make(est_cls, **kw):
    params = dict(hidden_layer_sizes=(32,), max_iter=40, tol=None, random_state=0)
    params.update(kw)
    return est_cls(**params)


@pytest.mark.parametrize("est_cls", NETWORK_ESTIMATORS, ids=IDS)
def test_gpu_fit_scores_as_a_cpu_fit(est_cls):
    Xtr, Xte, ytr, yte = _data(est_cls)
    # regressors: 200 epochs, where VOGN's R^2 spreads by 0.01 over seeds (0.10-0.42 at 40)
    epochs = 40 if est_cls.__name__.endswith("Classifier") else 200
    gpu = _make(est_cls, device="cuda", max_iter=epochs).fit(Xtr, ytr)
    cpu = _make(est_cls, device="cpu", max_iter=epochs).fit(Xtr, ytr)
    assert _device_of(gpu).type == "cuda"
    pred = gpu.predict(Xte)
    assert isinstance(pred, np.ndarray) and np.all(np.isfinite(pred.astype(float)))
    if est_cls.__name__.endswith("Classifier"):
        proba = gpu.predict_proba(Xte)
        assert isinstance(proba, np.ndarray) and proba.dtype == cpu.predict_proba(Xte).dtype
        np.testing.assert_allclose(proba.sum(1), 1.0, rtol=1e-10)
        # held-out accuracy on 171 rows: one row is 0.006
        assert abs(gpu.score(Xte, yte) - cpu.score(Xte, yte)) <= 0.04
    else:
        mean, std = gpu.predict(Xte, return_std=True)
        assert isinstance(std, np.ndarray) and np.all(std > 0)
        # R^2 on 133 rows of diabetes: 0.37-0.40, spread 0.01 over seeds on either device
        assert abs(gpu.score(Xte, yte) - cpu.score(Xte, yte)) <= 0.06


@pytest.mark.parametrize("est_cls", GAUSSIAN, ids=[E.__name__ for E in GAUSSIAN])
def test_gpu_model_loads_on_a_cpu_machine_and_predicts_the_same(est_cls, monkeypatch):
    Xtr, Xte, ytr, _ = _data(est_cls)
    gpu = _make(est_cls, device="cuda", predictive="glm").fit(Xtr, ytr)
    classifier = est_cls.__name__.endswith("Classifier")
    on_gpu = gpu.predict_proba(Xte) if classifier else gpu.predict(Xte, return_std=True)
    blob = pickle.dumps(gpu)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # a machine without a GPU
    cpu = pickle.loads(blob)
    assert _device_of(cpu).type == "cpu"
    if classifier:
        np.testing.assert_allclose(cpu.predict_proba(Xte), on_gpu, rtol=1e-8, atol=1e-12)
    else:
        m_cpu, s_cpu = cpu.predict(Xte, return_std=True)
        np.testing.assert_allclose(m_cpu, on_gpu[0], rtol=1e-8, atol=1e-10)
        np.testing.assert_allclose(s_cpu, on_gpu[1], rtol=1e-8)


@pytest.mark.parametrize("est_cls", NETWORK_ESTIMATORS, ids=IDS)
def test_gpu_model_round_trips_on_the_gpu(est_cls):
    Xtr, Xte, ytr, _ = _data(est_cls)
    gpu = _make(est_cls, device="cuda", max_iter=5).fit(Xtr, ytr)
    back = pickle.loads(pickle.dumps(gpu))
    assert _device_of(back).type == "cuda"
    if est_cls.__name__.endswith("Classifier"):
        np.testing.assert_array_equal(back.predict_proba(Xte), gpu.predict_proba(Xte))
    else:
        np.testing.assert_array_equal(back.predict(Xte, return_std=True)[1], gpu.predict(Xte, return_std=True)[1])
    back.partial_fit(Xtr, ytr)  # the saved training generator's state is a CUDA one
    assert back.t_ > gpu.t_


@pytest.mark.parametrize("est_cls", [skbayes.SLANGClassifier, skbayes.NoisyKFACRegressor], ids=lambda c: c.__name__)
def test_continuing_fits_and_float32_stay_on_the_gpu(est_cls):
    Xtr, Xte, ytr, yte = _data(est_cls)
    est = _make(est_cls, device="cuda", dtype="float32", max_iter=3, warm_start=True)
    est.fit(Xtr, ytr)
    t = est.t_
    est.set_params(max_iter=6).fit(Xtr, ytr)  # continues: the step counter goes on
    assert est.t_ > t
    est.partial_fit(Xtr, ytr)
    w = next(est.module_.parameters())
    assert w.device.type == "cuda" and w.dtype == torch.float32
    assert np.all(np.isfinite(est.predict(Xte)))


REGRESSORS = [E for E in NETWORK_ESTIMATORS if E.__name__.endswith("Regressor")]


@pytest.mark.parametrize("est_cls", REGRESSORS, ids=[E.__name__ for E in REGRESSORS])
def test_gpu_predict_quantiles_are_the_quantiles_of_its_own_predictive(est_cls):
    from test_quantiles import _drawn_outputs, _reference

    from skbayes._quantiles import QUANTILE_TOL

    Xtr, Xte, ytr, _ = _data(est_cls)
    y_scale = 50.0  # units of y far from the standardised ones the network learns
    est = _make(est_cls, device="cuda", max_iter=20).fit(Xtr, y_scale * ytr)
    Xq, q = Xte[:12], np.array([0.05, 0.5, 0.95])
    got = est.predict_quantiles(Xq, q)
    assert isinstance(got, np.ndarray) and got.shape == (len(Xq), len(q))
    if not est._uses_glm():
        draws = _drawn_outputs(est, Xq)[..., 0]  # the very draws predict averages, on the host
        sd = float(est.noise_std_)
        ref = np.array([[_reference(d, sd, p) for p in q] for d in draws])
        np.testing.assert_allclose(got, ref, rtol=0, atol=20 * QUANTILE_TOL * sd)
    else:  # the linearised predictive's Gaussian
        mean, std = est.predict(Xq, return_std=True)
        np.testing.assert_allclose(got, mean[:, None] + std[:, None] * norm.ppf(q), rtol=1e-9, atol=1e-9 * y_scale)
    lower, upper = est.predict_interval(Xq, level=0.9)
    np.testing.assert_allclose(lower, got[:, 0], rtol=1e-12, atol=1e-12 * y_scale)
    np.testing.assert_allclose(upper, got[:, 2], rtol=1e-12, atol=1e-12 * y_scale)
