import warnings

import pytest
import torch
from sklearn.datasets import load_diabetes, load_iris
from sklearn.exceptions import ConvergenceWarning
from sklearn.preprocessing import StandardScaler

# The test problems are tiny: one thread avoids OpenMP spin-wait overheads
# that dominate small kernels (and oversubscription when the machine is busy).
torch.set_num_threads(1)


def pytest_addoption(parser):
    parser.addoption(
        "--slow",
        action="store_true",
        default=False,
        help="long runs: many more fuzz examples (tests/test_fuzz.py) and the tests marked slow",
    )


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: a long-running test, skipped unless --slow is given")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--slow"):
        return
    skip = pytest.mark.skip(reason="long run: pass --slow")
    for item in items:
        if item.get_closest_marker("slow") is not None:
            item.add_marker(skip)


@pytest.fixture
def slow(request):
    """Whether the session runs with ``--slow``."""
    return bool(request.config.getoption("--slow"))


@pytest.fixture
def quiet():
    """Silence ConvergenceWarning (short fits on purpose); ``pytest.warns`` still sees it."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        yield


def step_context(est, generator, n_train, mc_samples=None, dense=True):
    """The family of a fitted estimator and a StepContext for calling its methods directly
    (``dense=False`` forces the generic ``functional_call`` path)."""
    import copy

    from skbayes._families.base import StepContext

    forward = est._forward
    if not dense:
        forward = copy.copy(forward)
        forward.spec = None
    ctx = StepContext(
        forward=forward,
        likelihood=est._likelihood,
        n_train=n_train,
        generator=generator,
        t=est.t_,
        kl_scale=1.0,
        mc_samples=int(est.mc_samples if mc_samples is None else mc_samples),
    )
    return est._make_family(), ctx


def reg_data(n=120, scale=False):
    """The first ``n`` rows of scikit-learn's diabetes data (10 features), optionally standardised."""
    X, y = load_diabetes(return_X_y=True)
    X, y = X[:n], y[:n]
    return (StandardScaler().fit_transform(X) if scale else X), y


def clf_data(scale=False):
    """Scikit-learn's iris data (150 x 4, 3 classes), optionally standardised."""
    X, y = load_iris(return_X_y=True)
    return (StandardScaler().fit_transform(X) if scale else X), y
