"""Scale-out on dask (docs/scaling.md): a real ``LocalCluster`` on loopback (2 worker
processes, 1 thread each), GridSearchCV through joblib's dask backend, dask-ml's
``Incremental`` over a chunked dask array, and the torch thread limit
(``skbayes._parallel``) inside a worker and in-process."""

import os
import sys
import types
import warnings

import numpy as np
import pytest
import torch

_WHY = (
    "needs dask's distributed scheduler and dask-ml, which the test extra installs: "
    'pip install -c constraints.txt -e ".[test]"'
)
distributed = pytest.importorskip("distributed", reason=_WHY)
pytest.importorskip("dask_ml", reason=_WHY)

import dask.array as da  # noqa: E402
import joblib  # noqa: E402
from conftest import clf_data, reg_data  # noqa: E402
from dask_ml.wrappers import Incremental  # noqa: E402
from sklearn.exceptions import ConvergenceWarning  # noqa: E402
from sklearn.model_selection import GridSearchCV  # noqa: E402

from skbayes import SLANGClassifier, SLANGRegressor, _loop  # noqa: E402
from skbayes._parallel import limit_torch_threads, torch_thread_limit  # noqa: E402

ENV_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")
SMALL = dict(hidden_layer_sizes=(8,), max_iter=8, predict_samples=8, random_state=0)


@pytest.fixture(scope="module")
def client():
    """A LocalCluster of 2 worker processes with 1 thread each, on loopback, and its client."""
    import logging

    cluster = distributed.LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        host="127.0.0.1",
        dashboard_address=None,
        silence_logs=logging.ERROR,
    )
    try:
        with distributed.Client(cluster, timeout="60s") as c:
            c.wait_for_workers(2, timeout=60)
            # import skbayes on both workers once, before the timed tests
            c.run(lambda: __import__("skbayes") and None)
            yield c
    finally:
        cluster.close(timeout=30)


@pytest.fixture
def quiet_fits():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        yield


# --- (a) GridSearchCV through joblib's dask backend equals n_jobs=1 ---------------------


@pytest.mark.parametrize(
    "est, data, grid",
    [
        (SLANGRegressor(**SMALL), reg_data(60, scale=True), {"prior_precision": [0.1, 1.0]}),
        (SLANGClassifier(**SMALL), clf_data(scale=True), {"prior_precision": [0.3, 3.0]}),
    ],
    ids=["regressor", "classifier"],
)
def test_grid_search_on_dask_equals_n_jobs_1(client, quiet_fits, est, data, grid):
    X, y = data
    local = GridSearchCV(est, grid, cv=2, n_jobs=1).fit(X, y)
    with joblib.parallel_backend("dask"):
        remote = GridSearchCV(est, grid, cv=2, n_jobs=-1).fit(X, y)
    keys = [k for k in local.cv_results_ if k.startswith(("split", "mean_test", "std_test", "rank_test", "param"))]
    assert keys
    for k in keys:
        np.testing.assert_array_equal(np.asarray(remote.cv_results_[k]), np.asarray(local.cv_results_[k]), err_msg=k)
    assert remote.best_params_ == local.best_params_
    np.testing.assert_array_equal(remote.predict(X), local.predict(X))


# --- (b) dask-ml Incremental equals in-memory partial_fit over the same chunks --------


def _chunks(X, y, n_chunks):
    size = -(-X.shape[0] // n_chunks)
    dX = da.from_array(X, chunks=(size, X.shape[1]))
    dy = da.from_array(y, chunks=size)
    assert dX.numblocks[0] == n_chunks
    bounds = np.cumsum((0,) + dX.chunks[0])
    return dX, dy, [(X[a:b], y[a:b]) for a, b in zip(bounds[:-1], bounds[1:])]


def test_incremental_regressor_equals_in_memory_partial_fit(client, quiet_fits):
    X, y = reg_data(60, scale=True)
    dX, dy, blocks = _chunks(X, y, 3)
    # shuffle_blocks=False: the chunks in order (the default shuffles them with random_state)
    inc = Incremental(SLANGRegressor(**SMALL), shuffle_blocks=False).fit(dX, dy)
    mem = SLANGRegressor(**SMALL)
    for Xb, yb in blocks:
        mem.partial_fit(Xb, yb)
    fitted = inc.estimator_
    assert fitted.n_iter_ == mem.n_iter_ == 3
    np.testing.assert_array_equal(fitted.posterior_.mean, mem.posterior_.mean)
    np.testing.assert_array_equal(fitted.posterior_.variance(), mem.posterior_.variance())
    np.testing.assert_array_equal(inc.predict(X), mem.predict(X))
    np.testing.assert_array_equal(fitted.predict_std(X), mem.predict_std(X))
    # predictions on a dask array run block by block on the workers: equal to in-memory
    # predictions of the same blocks (a kernel over 20 rows may round differently from one over 60)
    by_block = np.concatenate([mem.predict(Xb) for Xb, _ in blocks])
    np.testing.assert_array_equal(inc.predict(dX).compute(), by_block)
    np.testing.assert_allclose(by_block, mem.predict(X), rtol=1e-12)


def test_incremental_classifier_equals_in_memory_partial_fit(client, quiet_fits):
    X, y = clf_data(scale=True)
    rows = np.random.RandomState(0).permutation(len(y))  # iris is sorted by class: mix the chunks
    X, y = X[rows], y[rows]
    classes = np.unique(y)
    dX, dy, blocks = _chunks(X, y, 3)
    # Incremental forwards fit's keyword arguments to every partial_fit call: classes too
    inc = Incremental(SLANGClassifier(**SMALL), shuffle_blocks=False).fit(dX, dy, classes=classes)
    mem = SLANGClassifier(**SMALL)
    for Xb, yb in blocks:
        mem.partial_fit(Xb, yb, classes=classes)
    fitted = inc.estimator_
    np.testing.assert_array_equal(fitted.classes_, mem.classes_)
    np.testing.assert_array_equal(fitted.posterior_.mean, mem.posterior_.mean)
    np.testing.assert_array_equal(inc.predict_proba(X), mem.predict_proba(X))
    np.testing.assert_array_equal(inc.predict(X), mem.predict(X))


# --- (c) torch's threads inside a worker ---------------------------------------------------


def test_fit_in_a_worker_runs_torch_at_the_worker_share(client):
    """In a worker of 1 thread, whose torch was raised to 2 threads by the task: the
    training loop and the prediction run at 1 thread, and both restore 2 after."""

    def probe():

        import torch

        from skbayes import SLANGRegressor, _loop
        from skbayes._parallel import _dask_worker_limit, limit_torch_threads, torch_thread_limit

        seen = {}
        run_epochs = _loop.run_epochs

        def recording_run_epochs(*args, **kwargs):
            seen.setdefault("fit", torch.get_num_threads())
            return run_epochs(*args, **kwargs)

        original = torch.get_num_threads()
        env = {k: os.environ[k] for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS") if k in os.environ}
        try:
            torch.set_num_threads(2)
            seen["task"] = torch.get_num_threads()
            seen["env"] = env
            seen["worker_limit"] = _dask_worker_limit()
            # the worker's share alone, without the nanny's OMP_NUM_THREADS=1
            for k in env:
                del os.environ[k]
            seen["limit_without_env"] = torch_thread_limit()
            with limit_torch_threads():
                seen["context_without_env"] = torch.get_num_threads()
            seen["after_context"] = torch.get_num_threads()
            _loop.run_epochs = recording_run_epochs
            rng = np.random.RandomState(0)
            X = rng.normal(size=(40, 3))
            y = X @ [1.0, -1.0, 0.5] + 0.1 * rng.normal(size=40)
            est = SLANGRegressor(hidden_layer_sizes=(8,), max_iter=3, predict_samples=4, random_state=0).fit(X, y)
            seen["after_fit"] = torch.get_num_threads()
            outputs = est._outputs
            est._outputs = lambda *a, **kw: (seen.setdefault("predict", torch.get_num_threads()), outputs(*a, **kw))[1]
            est.predict(X)
            seen["after_predict"] = torch.get_num_threads()
        finally:
            _loop.run_epochs = run_epochs
            os.environ.update(env)
            torch.set_num_threads(original)
        return seen

    seen = client.submit(probe, pure=False).result(timeout=120)
    assert seen["env"] == {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}  # dask's nanny default
    assert seen["task"] == 2
    assert seen["worker_limit"] == 1 and seen["limit_without_env"] == 1
    assert seen["context_without_env"] == 1 and seen["after_context"] == 2
    assert seen["fit"] == 1 and seen["after_fit"] == 2
    assert seen["predict"] == 1 and seen["after_predict"] == 2


# --- (d) the context manager in-process ---------------------------------------------------


@pytest.fixture
def two_threads(monkeypatch):
    """torch at 2 threads in this thread, no thread variables in the environment; restored after."""
    for k in ENV_VARS:
        monkeypatch.delenv(k, raising=False)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def set_calls(monkeypatch):
    """Record torch.set_num_threads calls (and still make them)."""
    calls = []
    real = torch.set_num_threads

    def recording(n):
        calls.append(n)
        real(n)

    monkeypatch.setattr(torch, "set_num_threads", recording)
    return calls


def test_no_limit_changes_nothing(two_threads, set_calls):
    assert torch_thread_limit() is None  # distributed is imported, but this is no dask task
    with limit_torch_threads():
        assert torch.get_num_threads() == 2
    assert torch.get_num_threads() == 2
    assert set_calls == []


@pytest.mark.parametrize("value", ["2", "3", "", "0", "-1", "many"])
def test_a_limit_not_below_the_current_count_changes_nothing(two_threads, set_calls, monkeypatch, value):
    monkeypatch.setenv("OMP_NUM_THREADS", value)
    with limit_torch_threads():
        assert torch.get_num_threads() == 2
    assert torch.get_num_threads() == 2
    assert set_calls == []


@pytest.mark.parametrize("var, value", [("OMP_NUM_THREADS", "1"), ("OMP_NUM_THREADS", "1,2")])
def test_an_environment_limit_caps_then_restores(two_threads, set_calls, monkeypatch, var, value):
    monkeypatch.setenv(var, value)
    assert torch_thread_limit() == 1
    with limit_torch_threads():
        assert torch.get_num_threads() == 1
        with limit_torch_threads():  # nested: already capped, nothing more to do
            assert torch.get_num_threads() == 1
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == 2
    assert set_calls == [1, 2]


@pytest.mark.skipif(not torch.backends.mkl.is_available(), reason="torch without MKL reads OMP_NUM_THREADS only")
def test_mkl_num_threads_comes_first_as_in_torch(two_threads, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setenv("MKL_NUM_THREADS", "2")
    assert torch_thread_limit() == 2
    monkeypatch.setenv("MKL_NUM_THREADS", "1")
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    assert torch_thread_limit() == 1


def test_the_count_is_restored_when_the_block_raises(two_threads, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    with pytest.raises(RuntimeError, match="boom"):
        with limit_torch_threads():
            assert torch.get_num_threads() == 1
            raise RuntimeError("boom")
    assert torch.get_num_threads() == 2


def test_a_lower_count_is_never_raised(two_threads, set_calls, monkeypatch):
    torch.set_num_threads(1)  # e.g. the user's, or threadpoolctl's limit on the OpenMP runtime
    set_calls.clear()
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    with limit_torch_threads():
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == 1
    assert set_calls == []


def _fake_distributed(nthreads):
    def get_worker():
        if nthreads is None:
            raise ValueError("No worker found")
        return types.SimpleNamespace(state=types.SimpleNamespace(nthreads=nthreads))

    return types.SimpleNamespace(get_worker=get_worker)


def test_the_dask_worker_share_caps(two_threads, monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", _fake_distributed(1))
    with limit_torch_threads():
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == 2
    monkeypatch.setitem(sys.modules, "distributed", _fake_distributed(4))
    assert torch_thread_limit() == 4
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert torch_thread_limit() == 3  # the smallest limit wins
    monkeypatch.setitem(sys.modules, "distributed", _fake_distributed(None))  # not inside a task
    monkeypatch.delenv("OMP_NUM_THREADS")
    assert torch_thread_limit() is None


def test_fit_and_predict_run_under_the_limit_and_restore(two_threads, monkeypatch, quiet_fits):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    seen = []
    run_epochs = _loop.run_epochs
    monkeypatch.setattr(
        _loop, "run_epochs", lambda *a, **kw: (seen.append(torch.get_num_threads()), run_epochs(*a, **kw))[1]
    )
    X, y = reg_data(40, scale=True)
    est = SLANGRegressor(hidden_layer_sizes=(8,), max_iter=2, predict_samples=4, random_state=0)
    est.fit(X, y)
    est.partial_fit(X, y)
    assert seen == [1, 1]
    assert torch.get_num_threads() == 2
    outputs = est._outputs
    est._outputs = lambda *a, **kw: (seen.append(torch.get_num_threads()), outputs(*a, **kw))[1]
    est.predict(X)
    est.sample_outputs(X)
    assert seen == [1, 1, 1, 1]
    assert torch.get_num_threads() == 2


def test_a_fit_that_raises_restores_the_count(two_threads, set_calls, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    X, y = reg_data(40, scale=True)
    with pytest.raises(ValueError, match="NaN"):
        SLANGRegressor(hidden_layer_sizes=(8,), max_iter=2).fit(X, np.full_like(y, np.nan))
    assert set_calls == [1, 2]  # the error came from inside the capped block, and the count was restored
    assert torch.get_num_threads() == 2


def test_no_dask_import_at_skbayes_import():
    import subprocess

    code = "import sys, skbayes; sys.exit(any(m.split('.')[0] in ('dask', 'distributed') for m in sys.modules))"
    assert subprocess.run([sys.executable, "-c", code], timeout=120).returncode == 0
