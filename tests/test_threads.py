"""The estimators' torch thread count (``skbayes._parallel``, the ``n_threads`` parameter):
one thread for small networks, more only for large work and never more than the process
had unless asked for, scoped to the call and restored afterwards (also when it raises),
and always capped by the environment's limit."""

import numpy as np
import pytest
import torch
from conftest import clf_data, reg_data
from torch import nn

from skbayes import SLANGClassifier, SLANGRegressor, VadamRegressor, _estimator, _loop, _parallel
from skbayes._parallel import limit_torch_threads, network_macs_per_row, policy_threads
from skbayes.exceptions import InvalidParameterError

pytestmark = pytest.mark.skipif(
    not _parallel._openmp_backend(), reason="torch's thread count is only scoped on its OpenMP backend"
)

SMALL = dict(hidden_layer_sizes=(8,), max_iter=2, predict_samples=4, random_state=0)


@pytest.fixture
def process_threads(monkeypatch):
    """Set the process's torch thread count (no thread variables in the environment); restored after."""
    for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        monkeypatch.delenv(k, raising=False)
    before = torch.get_num_threads()

    def set_to(n):
        torch.set_num_threads(n)

    yield set_to
    torch.set_num_threads(before)


@pytest.fixture
def counts(monkeypatch):
    """The thread count at every training epoch and every prediction pass: {"fit": [...], "predict": [...]}."""
    seen = {"fit": [], "predict": []}
    run_epoch, outputs = _loop.run_epoch, _estimator.BayesianNetwork._outputs

    def spy_epoch(*args, **kwargs):
        seen["fit"].append(torch.get_num_threads())
        return run_epoch(*args, **kwargs)

    def spy_outputs(self, *args, **kwargs):
        seen["predict"].append(torch.get_num_threads())
        return outputs(self, *args, **kwargs)

    monkeypatch.setattr(_loop, "run_epoch", spy_epoch)
    monkeypatch.setattr(_estimator.BayesianNetwork, "_outputs", spy_outputs)
    return seen


def test_policy_threads():
    w = _parallel.WORK_PER_THREAD
    assert policy_threads(0.0, 8) == 1
    assert policy_threads(1.9 * w, 8) == 1
    assert policy_threads(2.0 * w, 8) == 2
    assert policy_threads(5.5 * w, 8) == 5
    assert policy_threads(100 * w, 8) == 8  # never above what is available
    assert policy_threads(None, 3) == 3  # work not given: the current count


def test_a_small_network_fits_and_predicts_on_one_thread(process_threads, counts):
    process_threads(2)
    X, y = reg_data(scale=True)
    with pytest.warns():  # a 2-epoch fit does not converge
        reg = SLANGRegressor(**SMALL).fit(X, y)
    reg.predict(X, return_std=True)
    reg.partial_fit(X, y)
    assert counts["fit"] and set(counts["fit"]) == {1}
    assert counts["predict"] and set(counts["predict"]) == {1}
    assert torch.get_num_threads() == 2
    # the work the policy saw: the 10-8-1 network's multiply-adds per row
    assert reg._macs_per_row == 10 * 8 + 8 * 1 + (8 + 1)  # fewer products than weights: the weights count


def test_large_work_uses_the_process_count_and_never_more(process_threads, counts, monkeypatch):
    monkeypatch.setattr(_parallel, "WORK_PER_THREAD", 1.0)  # every network is large
    X, y = clf_data(scale=True)
    process_threads(2)
    with pytest.warns():
        clf = SLANGClassifier(**SMALL).fit(X, y)
    clf.predict_proba(X)
    assert set(counts["fit"]) == {2} and set(counts["predict"]) == {2}
    process_threads(1)  # the user's (or threadpoolctl's) lower count is never raised
    counts["fit"].clear(), counts["predict"].clear()
    with pytest.warns():
        clf.fit(X, y)
    clf.predict(X)
    assert set(counts["fit"]) == {1} and set(counts["predict"]) == {1}
    assert torch.get_num_threads() == 1


def test_n_threads_asks_for_exactly_that_many(process_threads, counts):
    process_threads(1)
    X, y = reg_data(scale=True)
    reg = VadamRegressor(**SMALL, n_threads=2).fit(X, y)  # a budget of epochs (tol=None): no warning
    reg.predict(X)
    assert set(counts["fit"]) == {2} and set(counts["predict"]) == {2}
    assert torch.get_num_threads() == 1
    assert reg.get_params()["n_threads"] == 2


def test_the_environment_caps_n_threads(process_threads, counts, monkeypatch):
    process_threads(2)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    X, y = reg_data(scale=True)
    with pytest.warns():
        SLANGRegressor(**SMALL, n_threads=2).fit(X, y).predict(X)
    assert set(counts["fit"]) == {1} and set(counts["predict"]) == {1}
    assert torch.get_num_threads() == 2


def test_the_count_is_restored_when_a_fit_or_prediction_raises(process_threads, monkeypatch):
    process_threads(1)
    X, y = reg_data(scale=True)

    def boom(*args, **kwargs):
        assert torch.get_num_threads() == 2
        raise RuntimeError("boom")

    run_epoch = _loop.run_epoch
    monkeypatch.setattr(_loop, "run_epoch", boom)
    with pytest.raises(RuntimeError, match="boom"):
        SLANGRegressor(**SMALL, n_threads=2).fit(X, y)
    assert torch.get_num_threads() == 1
    monkeypatch.setattr(_loop, "run_epoch", run_epoch)  # (not undo(): it would restore the environment)
    with pytest.warns():
        reg = SLANGRegressor(**SMALL, n_threads=2).fit(X, y)
    monkeypatch.setattr(_estimator.BayesianNetwork, "_outputs", boom)
    with pytest.raises(RuntimeError, match="boom"):
        reg.predict(X)
    assert torch.get_num_threads() == 1


@pytest.mark.parametrize("value", [0, -1, 2**31, 1.5, "2"])
def test_invalid_n_threads(value):
    X, y = reg_data(scale=True)
    with pytest.raises(InvalidParameterError, match="n_threads"):
        SLANGRegressor(**SMALL, n_threads=value).fit(X, y)


class _Conv(nn.Module):
    def __init__(self, n_out=2):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3)
        self.fc = nn.Linear(4 * 6 * 6, n_out)

    def forward(self, x):
        return self.fc(torch.relu(self.conv(x.reshape(-1, 1, 8, 8))).flatten(1))


def test_network_macs_per_row_counts_convolutions_and_leaves_the_global_generator_alone():
    torch.manual_seed(0)
    net = _Conv()
    state = torch.random.get_rng_state()
    macs = network_macs_per_row(net, torch.zeros(3, 64))
    # conv: 4 x 6 x 6 outputs of 1 x 3 x 3 products each; linear: 144 x 2
    assert macs == 4 * 6 * 6 * 9 + 144 * 2
    assert torch.equal(torch.random.get_rng_state(), state)
    # a module without counted layers: its number of weights
    assert network_macs_per_row(nn.Sequential(nn.Flatten()), torch.zeros(2, 3)) == 0.0
    emb = nn.Sequential(nn.LayerNorm(5))
    assert network_macs_per_row(emb, torch.zeros(2, 5)) == 10.0


def test_a_custom_module_is_sized_once_built(process_threads, counts, monkeypatch):
    """Before the module exists its work counts as small; once built, its own count decides."""
    process_threads(2)
    rng = np.random.RandomState(0)
    X, y = rng.standard_normal((40, 64)), rng.randint(0, 2, 40)
    monkeypatch.setattr(_parallel, "WORK_PER_THREAD", 1440 * 40 / 2)  # 2 threads for 40 rows
    with pytest.warns():
        clf = SLANGClassifier(module=lambda n_in, n_out: _Conv(n_out), batch_size=40, max_iter=2, random_state=0)
        clf.fit(X, y)
    assert clf._macs_per_row == 4 * 6 * 6 * 9 + 144
    assert set(counts["fit"]) == {2}
    assert torch.get_num_threads() == 2


def test_nested_scopes_change_nothing_twice(process_threads, monkeypatch):
    process_threads(2)
    calls = []
    real = torch.set_num_threads
    monkeypatch.setattr(torch, "set_num_threads", lambda n: (calls.append(n), real(n)))
    with limit_torch_threads(None, 0.0):
        with limit_torch_threads(None, 0.0):
            assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == 2
    assert calls == [1, 2]
