"""A prediction's weight samples: float32 random numbers widened, one block on small networks.

``sample_t(prediction=True)`` (what the prediction methods draw) must have the posterior's
distribution, like the fit's draws (``prediction=False``), which keep the model's dtype. The
draws of a small prediction come in one block and run through the network in passes whose
shape depends on the rows; a row's result must not depend on the other rows.
"""

import warnings

import numpy as np
import pytest
import torch

import skbayes
from skbayes import _memory
from skbayes._linalg import PREDICTION_DRAWS_DTYPE, randn
from skbayes._registry import all_estimators
from skbayes.posteriors.kfac import DampedFactor

EPS64 = np.finfo(np.float64).eps


def _fitted(Est, hidden=(3,), **kw):
    rng = np.random.RandomState(0)
    X = rng.normal(size=(40, 2))
    y = X[:, 0] - 0.5 * X[:, 1] + 0.1 * rng.normal(size=40)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a few epochs do not converge
        return Est(hidden_layer_sizes=hidden, max_iter=3, random_state=0, **kw).fit(X, y), X


GAUSSIAN = [info.estimator for info in all_estimators(task="regressor", network=True) if info.gaussian]


def test_randn_draws_float32_normals_widened_for_a_prediction():
    like = torch.zeros(1, dtype=torch.float64)
    a = randn((5, 7), like, torch.Generator().manual_seed(3), prediction=True)
    b = torch.randn(5, 7, generator=torch.Generator().manual_seed(3), dtype=PREDICTION_DRAWS_DTYPE)
    assert a.dtype == torch.float64
    torch.testing.assert_close(a, b.double(), rtol=0, atol=0)
    # the fit's draws are the model dtype's stream
    c = randn((5, 7), like, torch.Generator().manual_seed(3))
    torch.testing.assert_close(c, torch.randn(5, 7, generator=torch.Generator().manual_seed(3), dtype=torch.float64))
    assert not torch.equal(a, c)


@pytest.mark.parametrize("Est", GAUSSIAN, ids=lambda c: c.__name__)
def test_prediction_draws_have_the_posteriors_moments(Est):
    """Mean and covariance of 40,000 prediction draws against the posterior's dense ones, to
    6 Monte Carlo standard errors; the fit's draws of the same generator differ."""
    est, _ = _fitted(Est)
    post = est.posterior_
    n = 40_000
    theta = post.sample_t(n, generator=torch.Generator().manual_seed(0), prediction=True)
    assert theta.dtype == torch.float64
    ref = post.covariance()
    sd = np.sqrt(np.diag(ref))
    x = (theta - post.mean_t).numpy()
    assert np.all(np.abs(x.mean(0)) < 6 * sd / np.sqrt(n))
    emp = x.T @ x / n
    scale = np.sqrt(np.outer(np.diag(ref), np.diag(ref)))
    assert np.all(np.abs(emp - ref) < 6 * scale * np.sqrt(2.0 / n))
    fit = post.sample_t(8, generator=torch.Generator().manual_seed(0))
    assert not torch.equal(fit, theta[:8])


def test_dropout_prediction_masks_keep_each_weight_at_its_rate():
    est, _ = _fitted(skbayes.MCDropoutRegressor, hidden=(20,))
    post = est.posterior_
    theta = post.sample_t(20_000, generator=torch.Generator().manual_seed(0), prediction=True)
    for _, off, out, inp, p in post.groups:
        W = theta[:, off : off + out * inp].reshape(-1, out, inp)
        mean = post.mean_t[off : off + out * inp].reshape(out, inp)
        kept = (W != 0).double().mean(0)[mean != 0]  # a weight is 0 or its mean / (1 - p)
        torch.testing.assert_close(W[W != 0], (mean / (1 - p)).expand_as(W)[W != 0])
        assert abs(float(kept.mean()) - (1 - p)) < 6 * np.sqrt(p * (1 - p) / (20_000 * kept.numel()))


@pytest.mark.parametrize("n", [6, 120, 300])
def test_damped_factor_whitens_by_its_kept_inverse_as_by_solves(n):
    """``kept=True`` (products with the kept inverse factor, up to 256 columns) equals the
    triangular solves to rounding; larger factors and the eigen fallback keep their route."""
    g = torch.Generator().manual_seed(n)
    A = torch.randn(n, n, generator=g, dtype=torch.float64)
    F = DampedFactor(A @ A.T / n, 0.1)
    X = torch.randn(3, n, 5, generator=g, dtype=torch.float64)
    Y = torch.randn(4, n, generator=g, dtype=torch.float64)
    for kept in (False, True):
        R = torch.linalg.inv(torch.linalg.cholesky(F.dense())).T  # R R^T = F^-1
        torch.testing.assert_close(F.isqrt_left(X, kept), R @ X, rtol=0, atol=1e3 * n * EPS64)
        torch.testing.assert_close(F.isqrt_right(Y, kept), Y @ R.T, rtol=0, atol=1e3 * n * EPS64)
    assert ("_Linv" in F.__dict__) == (n <= 256)


def test_kron_prediction_draws_equal_the_fits_transform_of_the_same_normals():
    """Noisy K-FAC's prediction draws are its block transforms (by kept inverses) of float32
    normals: the same weights as the solves give for those normals, to rounding."""
    est, _ = _fitted(skbayes.NoisyKFACRegressor, hidden=(4,))
    post = est.posterior_
    got = post.sample_t(6, generator=torch.Generator().manual_seed(1), prediction=True)
    g = torch.Generator().manual_seed(1)
    want = post.mean_t.repeat(6, 1)
    for l, b in zip(post.layers, post.blocks):
        X = torch.randn(6, l.n, l.p, generator=g, dtype=torch.float32).double()
        l.mat_to_flat(b.transform(X), want, add=True)
    torch.testing.assert_close(got, want, rtol=0, atol=1e3 * EPS64)


@pytest.mark.parametrize(
    "Est", [skbayes.NoisyKFACRegressor, skbayes.SLANGRegressor, skbayes.MCDropoutRegressor], ids=lambda c: c.__name__
)
def test_a_rows_samples_do_not_depend_on_the_other_rows(Est):
    """One block of 100 samples runs in one pass over 3 rows, in passes of 16 samples over
    2048 rows on 3,000: every row's outputs agree to rounding."""
    est, X = _fitted(Est, hidden=(10,), predict_samples=100)
    assert est._sample_block(100) == 100
    assert _memory.pass_shape(3, 100) == (100, 327) and _memory.pass_shape(3000, 100) == (16, 2048)
    Xl = np.random.RandomState(1).normal(size=(3000, 2))
    many = est.sample_outputs(Xl)
    few = est.sample_outputs(Xl[:3])
    np.testing.assert_allclose(few, many[:, :3], rtol=1e-12, atol=1e-12)
    mean, std = est.predict(Xl, return_std=True)
    mean3, std3 = est.predict(Xl[:3], return_std=True)
    np.testing.assert_allclose(mean3, mean[:3], rtol=1e-12)
    np.testing.assert_allclose(std3, std[:3], rtol=1e-12)


def test_sample_block_takes_small_predictions_whole():
    assert _memory.sample_block(100, 501, 8) == 100
    assert _memory.sample_block(100, 501, 8) * 501 * 8 <= _memory.SAMPLE_BLOCK_BYTES
    assert _memory.sample_block(1000, 3760, 8) == 16
    assert _memory.sample_block(5, 10**6, 4) == 5
    for n_rows in (1, 100, 2048, 5000):
        for block in (5, 16, 100, 1000):
            s, r = _memory.pass_shape(n_rows, block)
            assert 1 <= s <= block and s * r <= _memory.PASS_ROWS_X_SAMPLES
            assert s == min(block, 16) or r >= n_rows  # more than 16 samples only in one pass over the rows
