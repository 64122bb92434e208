import warnings

import pytest
import torch
from sklearn.exceptions import ConvergenceWarning

# The test problems are tiny: one thread avoids OpenMP spin-wait overheads
# that dominate small kernels (and oversubscription when the machine is busy).
torch.set_num_threads(1)


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
