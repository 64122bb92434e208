"""The posterior tensor interface is a Protocol that every posterior satisfies."""

import warnings

import numpy as np
import pytest
import torch

import skbayes
import skbayes.posteriors as posteriors
from skbayes._registry import all_estimators
from skbayes.posteriors._common import GaussianTensors, PosteriorTensors, PrecisionTensors

#: Posteriors known to hold their precision in a form that supports solves (the natural-gradient
#: mean step), and known not to (a new posterior may be either).
PRECISION_HELD = {"LowRankGaussian", "DiagonalGaussian"}
NOT_PRECISION_HELD = {"SoftplusGaussian", "KroneckerGaussian", "DropoutPosterior"}
#: Every public posterior class (``skbayes.__all__``'s classes from ``skbayes.posteriors``).
PUBLIC_POSTERIORS = {
    name
    for name in skbayes.__all__
    if isinstance(getattr(skbayes, name), type) and getattr(skbayes, name).__module__.startswith("skbayes.posteriors")
}


def _fitted_posteriors():
    rng = np.random.RandomState(0)
    X = rng.normal(size=(24, 2))
    y = X[:, 0] - 0.5 * X[:, 1] + 0.1 * rng.normal(size=24)
    for info in all_estimators(task="regressor", network=True):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # two epochs do not converge
            est = info.estimator(hidden_layer_sizes=(3,), max_iter=2, random_state=0).fit(X, y)
        yield info, est.posterior_


@pytest.fixture(scope="module")
def fitted():
    return list(_fitted_posteriors())


def test_every_posterior_class_satisfies_its_protocols(fitted):
    seen = set()
    for info, post in fitted:
        name = type(post).__name__
        seen.add(name)
        assert isinstance(post, PosteriorTensors), name
        assert isinstance(post, GaussianTensors) == info.gaussian, name
        if name in PRECISION_HELD | NOT_PRECISION_HELD:
            assert isinstance(post, PrecisionTensors) == (name in PRECISION_HELD), name
        # the Protocol's methods work as documented: shapes and finiteness
        D = post.n_params
        assert post.mean_t.shape == (D,)
        assert post.sample_t(3, generator=torch.Generator().manual_seed(0)).shape == (3, D)
        assert post.variance_t().shape == (D,)
        assert post.is_finite() is True
        if isinstance(post, GaussianTensors):
            assert post.precision_t().shape == (D, D)
            assert isinstance(post.kl_to_prior(1.0), float)
            # and their values agree with the dense precision: the variances are its inverse's diagonal
            P = post.precision_t()
            torch.testing.assert_close(post.variance_t(), torch.diag(torch.linalg.inv(P)), rtol=1e-8, atol=0)
        if isinstance(post, PrecisionTensors):
            x = torch.ones(D, dtype=post.mean_t.dtype)
            torch.testing.assert_close(post.precision_t() @ post.solve_t(x), x)
            assert post.logdet_precision_t().shape == ()
            torch.testing.assert_close(post.logdet_precision_t(), torch.linalg.slogdet(post.precision_t())[1])
    # every public posterior class is reached by some estimator
    assert seen == PUBLIC_POSTERIORS
    assert set(posteriors.__all__) <= PUBLIC_POSTERIORS


def test_protocol_documents_the_implementations():
    # an implementation without a docstring inherits the Protocol's
    assert posteriors.DiagonalGaussian.variance_t.__doc__ == PosteriorTensors.variance_t.__doc__
    assert posteriors.LowRankGaussian.solve_t.__doc__ == PrecisionTensors.solve_t.__doc__
    assert posteriors.SoftplusGaussian.kl_to_prior.__doc__ == GaussianTensors.kl_to_prior.__doc__


def test_a_non_posterior_does_not_satisfy_the_protocol():
    assert not isinstance(object(), PosteriorTensors)
    assert not isinstance(posteriors.DropoutPosterior(torch.zeros(2), []), GaussianTensors)
