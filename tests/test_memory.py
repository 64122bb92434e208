"""Memory checked before it is spent, and prediction in row chunks of bounded memory."""

import warnings

import numpy as np
import pytest
import torch
from sklearn.base import is_classifier
from sklearn.datasets import load_diabetes, load_iris
from sklearn.exceptions import ConvergenceWarning
from sklearn.preprocessing import StandardScaler
from torch import nn

import skbayes
from skbayes import _memory
from skbayes import linear_model as blr_module
from skbayes._estimator import BayesianNetwork
from skbayes.exceptions import MemoryLimitError

NETWORK_ESTIMATORS = [
    getattr(skbayes, n) for n in skbayes.__all__ if n.endswith(("Regressor", "Classifier")) and "Linear" not in n
]


def _data(Est, n=60):
    if "Classifier" in Est.__name__:
        X, y = load_iris(return_X_y=True)
    else:
        X, y = load_diabetes(return_X_y=True)
    idx = np.random.RandomState(0).permutation(len(y))[:n]
    return StandardScaler().fit_transform(X[idx]), y[idx]


def _storage_bytes(obj, seen=None, out=None):
    """Bytes of the distinct tensor storages reachable from ``obj`` (modules excluded)."""
    seen = set() if seen is None else seen
    out = {} if out is None else out
    if id(obj) in seen:
        return out
    seen.add(id(obj))
    if isinstance(obj, torch.Tensor):
        out[obj.untyped_storage().data_ptr()] = obj.untyped_storage().nbytes()
    elif isinstance(obj, nn.Module):
        pass
    elif isinstance(obj, dict):
        for v in obj.values():
            _storage_bytes(v, seen, out)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            _storage_bytes(v, seen, out)
    elif hasattr(obj, "__dict__"):
        for v in vars(obj).values():
            _storage_bytes(v, seen, out)
    return out


@pytest.mark.parametrize("Est", NETWORK_ESTIMATORS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_estimate_matches_the_allocated_posterior(Est, dtype):
    """The family's estimate of its posterior and state is within 25% of the bytes of the
    tensors the fitted posterior and state hold (two hidden layers, one more sample)."""
    X, y = _data(Est)
    est = Est(
        hidden_layer_sizes=(30, 20),
        max_iter=2,
        batch_size=16,
        mc_samples=2,
        dtype=dtype,
        init="default",
        random_state=0,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        est.fit(X, y)
    actual = sum(_storage_bytes(est.posterior_, out=_storage_bytes(est._state)).values())
    layers = _memory.mlp_layers(X.shape[1], (30, 20), est._likelihood.n_outputs)
    itemsize = 8 if dtype == "float64" else 4
    parts = est._make_family().memory_parts(layers, 16, 2, itemsize)
    estimate = sum(p.nbytes for p in parts[:-1])  # the last part is the step's working memory
    assert 0.8 <= estimate / actual <= 1.25, (estimate, actual)
    assert parts[-1].what == "one minibatch step" and parts[-1].nbytes > 0


@pytest.fixture
def no_allocation(monkeypatch):
    """Fail the test if a fit gets as far as building the network."""

    def refuse(*args, **kwargs):
        raise AssertionError("the network was built before the memory check")

    monkeypatch.setattr(BayesianNetwork, "_initialize", refuse)


CASES = [
    # noisy K-FAC / EK-FAC with a very wide layer: factors of hundreds of GB
    (skbayes.NoisyKFACRegressor, dict(hidden_layer_sizes=(300_000,)), 10, 2, "hidden_layer_sizes"),
    (skbayes.NoisyEKFACClassifier, dict(hidden_layer_sizes=(300_000,)), 10, 3, "hidden_layer_sizes"),
    # SLANG with a huge rank (after clipping to the number of weights)
    (skbayes.SLANGRegressor, dict(hidden_layer_sizes=(1000,), rank=100_000), 100, 2, "rank"),
    # K-FAC on 20,000 features: a 20,001 x 20,001 input factor, with its copies
    (skbayes.NoisyKFACRegressor, {}, 20_000, 2, "fewer input features"),
]


@pytest.mark.parametrize("Est, params, n_features, n_classes, names", CASES)
def test_the_issue_cases_are_refused_before_allocating(Est, params, n_features, n_classes, names, no_allocation):
    rng = np.random.RandomState(0)
    X = rng.standard_normal((20, n_features))
    if "Classifier" in Est.__name__:
        y, kw = np.arange(20) % n_classes, {"classes": np.arange(n_classes)}
    else:
        y, kw = rng.standard_normal(20), {}
    est = Est(**params)
    with pytest.raises(MemoryLimitError, match="nothing was allocated") as info:
        est.fit(X, y) if not kw else est.partial_fit(X, y, **kw)
    msg = str(info.value)
    assert names in msg and "MEMORY_LIMIT_GIB" in msg and "GiB" in msg
    assert not hasattr(est, "posterior_") and not hasattr(est, "classes_")  # left as it was


def test_refusal_of_fit_with_many_classes(no_allocation, monkeypatch):
    """K-FAC on 10,000 classes: a 10,000 x 10,000 output factor (0.75 GiB) with the copies fit
    keeps (the epoch snapshots) and a step's refactorisation, about 6 GiB: refused under a
    4 GiB limit, naming the number of classes."""
    monkeypatch.setattr(blr_module, "MEMORY_LIMIT_GIB", 4.0)
    X = np.random.RandomState(0).standard_normal((10_000, 5))
    with pytest.raises(MemoryLimitError, match="fewer outputs") as info:
        skbayes.NoisyKFACClassifier().fit(X, np.arange(10_000))
    assert "10000x10000" in str(info.value)


@pytest.mark.parametrize("Est", NETWORK_ESTIMATORS, ids=lambda c: c.__name__)
def test_the_limit_is_the_shared_one(Est, monkeypatch):
    """skbayes.linear_model.MEMORY_LIMIT_GIB limits every estimator; a continuing fit that
    would exceed it (a larger minibatch) is refused and leaves the model as it was."""
    X, y = _data(Est)
    params = dict(hidden_layer_sizes=(8,), max_iter=1, predict_samples=4, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        est = Est(**params).fit(X, y)
    before = est.predict(X)
    monkeypatch.setattr(blr_module, "MEMORY_LIMIT_GIB", 1e-6)  # 1 KiB
    with pytest.raises(MemoryLimitError, match=r"MEMORY_LIMIT_GIB = 1e-06"):
        Est(**params).fit(X, y)
    with pytest.raises(MemoryLimitError):
        est.partial_fit(X, y)
    np.testing.assert_array_equal(est.predict(X), before)
    assert _memory.memory_limit_bytes() == pytest.approx(1e-6 * 2**30)


def test_custom_module_is_estimated_without_being_built(monkeypatch):
    """A module callable is built on the 'meta' device for the estimate (no memory), and for
    sizing the 'auto' defaults (``early_stopping``), never for real before the estimate."""
    built = []

    def module(n_in, n_out):
        built.append(torch.empty(0).device.type)
        return nn.Sequential(nn.Linear(n_in, 200_000), nn.ReLU(), nn.Linear(200_000, n_out))

    X, y = _data(skbayes.NoisyKFACRegressor)
    with pytest.raises(MemoryLimitError, match="200001x200001"):
        skbayes.NoisyKFACRegressor(module=module).fit(X, y)
    assert built == ["meta", "meta"]
    built.clear()
    with pytest.raises(MemoryLimitError, match="200001x200001"):
        skbayes.NoisyKFACRegressor(module=module, early_stopping=False).fit(X, y)
    assert built == ["meta"]


@pytest.mark.parametrize(
    "Est", [skbayes.SLANGRegressor, skbayes.VadamClassifier, skbayes.NoisyKFACClassifier], ids=lambda c: c.__name__
)
def test_prediction_in_row_chunks_equals_one_chunk(Est, monkeypatch):
    """The same weight samples serve every chunk: chunks of 2048 rows (what a chunk of more
    rows is rounded down to a multiple of) give the results of one chunk to the last bit;
    chunks of 7 rows (many outputs per row) to a few units of roundoff of the matrix products."""
    X, y = _data(Est, n=50)
    X, y = np.tile(X, (100, 1))[:4500], np.tile(y, 100)[:4500]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        est = Est(hidden_layer_sizes=(8,), max_iter=3, predict_samples=5, random_state=0).fit(X, y)
    methods = ["predict", "predict_std"] + (["predict_proba"] if "Classifier" in Est.__name__ else ["log_likelihood"])

    def results():
        out = {}
        for m in methods:
            out[m] = getattr(est, m)(X, y) if m == "log_likelihood" else getattr(est, m)(X)
        return out

    whole = results()
    assert est._chunk_rows() >= len(y)
    eps = np.finfo(np.float64).eps
    monkeypatch.setattr(_memory, "row_chunk", lambda *args: 3000)
    assert est._chunk_rows() == 2048
    chunked = results()
    for m in methods:
        if m == "log_likelihood":  # the mean of the per-row densities the chunks wrote
            assert chunked[m] == pytest.approx(whole[m], rel=50 * eps)
        else:
            np.testing.assert_array_equal(chunked[m], whole[m])
    monkeypatch.setattr(_memory, "row_chunk", lambda *args: 7)
    assert est._chunk_rows() == 7
    small = results()
    for m in methods:
        # rounding at the scale of the quantities reduced: the outputs (class probabilities are
        # at most 1, a classifier's predict_std is a spread of them), not only of the result
        scale = max(np.max(np.abs(whole[m])), 1.0 if is_classifier(est) else 0.0)
        np.testing.assert_allclose(small[m], whole[m], rtol=0, atol=64 * eps * scale)


def test_row_chunks_draw_the_weight_samples_once(monkeypatch):
    """A prediction over many row chunks draws its weight samples once (in one block, or in
    blocks of 16 when they are larger than SAMPLE_BLOCK_BYTES, kept for the later chunks) and
    gives the results of one chunk (to the roundoff of matrix products over fewer rows)."""
    X, y = _data(skbayes.VOGNClassifier, n=50)
    X, y = np.tile(X, (10, 1)), np.tile(y, 10)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        est = skbayes.VOGNClassifier(
            hidden_layer_sizes=(8,), max_iter=3, predict_samples=40, predictive="sampled", random_state=0
        )
        est.fit(X, y)
    whole = est.predict_proba(X)
    calls = []
    sample_t = type(est.posterior_).sample_t

    def spy(self, n, generator=None, **kw):
        calls.append(n)
        return sample_t(self, n, generator=generator, **kw)

    monkeypatch.setattr(type(est.posterior_), "sample_t", spy)
    monkeypatch.setattr(_memory, "row_chunk", lambda *args: 60)
    assert est._chunk_rows() == 60 < len(y)
    # 40 samples of this small network fit in SAMPLE_BLOCK_BYTES: one block
    np.testing.assert_allclose(est.predict_proba(X), whole, rtol=0, atol=64 * np.finfo(np.float64).eps)
    assert calls == [40]
    # larger draws come in blocks of 16 (other draws, so another Monte Carlo estimate)
    monkeypatch.setattr(_memory, "SAMPLE_BLOCK_BYTES", 40 * est.posterior_.n_params * 8 - 1)
    calls.clear()
    whole = est.predict_proba(X)
    assert calls == [16, 16, 8]
    monkeypatch.setattr(_memory, "row_chunk", lambda *args: 10**6)
    assert est._chunk_rows() > len(y)
    np.testing.assert_allclose(est.predict_proba(X), whole, rtol=0, atol=64 * np.finfo(np.float64).eps)
    monkeypatch.setattr(_memory, "row_chunk", lambda *args: 60)
    # draws larger than PREDICT_SAMPLES_BYTES are made again for every chunk, with the same result
    calls.clear()
    monkeypatch.setattr(_memory, "PREDICT_SAMPLES_BYTES", 40 * est.posterior_.n_params * 8 - 1)
    np.testing.assert_allclose(est.predict_proba(X), whole, rtol=0, atol=64 * np.finfo(np.float64).eps)
    assert calls == [16, 16, 8] * int(np.ceil(len(y) / 60))


def test_chunk_rows_bound_the_outputs_memory():
    """A chunk's outputs under all weight samples fit in the budget, whatever the classes."""
    for S, k in [(100, 1), (100, 10_000), (10, 3)]:
        rows = _memory.row_chunk(S, k, 8, 50)
        assert rows >= 1
        assert rows == 1 or rows * S * k * 8 * 3 <= _memory.PREDICT_CHUNK_BYTES
