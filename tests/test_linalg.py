"""Low-rank-plus-diagonal linear algebra against dense references."""

import math

import numpy as np
import pytest
import torch

from skbayes import _linalg as linalg


@pytest.fixture(autouse=True)
def _float64_default():
    """float64 tensors by default in this module's tests only: set at import, the default
    leaked into every test of the session collected after this module."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(previous)


def _problem(D=12, L=4, seed=0, zero_cols=0):
    g = torch.Generator().manual_seed(seed)
    U = torch.randn(D, L, generator=g)
    if zero_cols:
        U[:, :zero_cols] = 0.0
    d = torch.rand(D, generator=g) + 0.1
    return U, d, U @ U.T + torch.diag(d)


@pytest.mark.parametrize("L", [0, 1, 4, 12, 15])
def test_woodbury_solve_matches_dense(L):
    U, d, P = _problem(L=L)
    x = torch.randn(12, generator=torch.Generator().manual_seed(1))
    X = torch.randn(12, 3, generator=torch.Generator().manual_seed(2))
    torch.testing.assert_close(linalg.woodbury_solve(U, d, x), torch.linalg.solve(P, x), rtol=1e-9, atol=1e-10)
    torch.testing.assert_close(linalg.woodbury_solve(U, d, X), torch.linalg.solve(P, X), rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("L", [0, 3, 12])
def test_variance_and_logdet_match_dense(L):
    U, d, P = _problem(L=L, seed=3)
    torch.testing.assert_close(linalg.lowrank_variance(U, d), torch.diag(torch.linalg.inv(P)), rtol=1e-9, atol=1e-12)
    torch.testing.assert_close(linalg.lowrank_logdet(U, d), torch.linalg.slogdet(P)[1], rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("L,zero_cols", [(0, 0), (1, 0), (5, 0), (5, 2), (12, 0), (20, 3)])
def test_sampler_covariance_is_inverse_precision(L, zero_cols):
    """The sampler is a linear map T of standard normals; T T^T must equal P^{-1} exactly."""
    D = 12
    U, d, P = _problem(D=D, L=L, seed=4, zero_cols=zero_cols)
    mean = torch.zeros(D)
    Tt = linalg.lowrank_sample(mean, U, d, D, eps=torch.eye(D))  # row k = T e_k
    cov = Tt.T @ Tt
    torch.testing.assert_close(cov, torch.linalg.inv(P), rtol=1e-8, atol=1e-10)


def test_sampler_statistics_with_generator():
    D = 6
    U, d, P = _problem(D=D, L=2, seed=5)
    mean = torch.arange(D, dtype=torch.float64)
    g = torch.Generator().manual_seed(0)
    n = 200_000
    x = linalg.lowrank_sample(mean, U, d, n, generator=g)
    emp_cov = torch.cov(x.T)
    true_cov = torch.linalg.inv(P)
    # Monte Carlo error of a covariance entry ~ sqrt(2/n) * scale
    scale = torch.sqrt(torch.diag(true_cov)[:, None] * torch.diag(true_cov)[None, :])
    assert torch.all((emp_cov - true_cov).abs() < 6 * scale * np.sqrt(2.0 / n))
    assert torch.all((x.mean(0) - mean).abs() < 6 * torch.sqrt(torch.diag(true_cov) / n))
    # the same seed gives the same draws
    x2 = linalg.lowrank_sample(mean, U, d, 5, generator=torch.Generator().manual_seed(7))
    x3 = linalg.lowrank_sample(mean, U, d, 5, generator=torch.Generator().manual_seed(7))
    torch.testing.assert_close(x2, x3, rtol=0, atol=0)


@pytest.mark.parametrize("D,m,k,rank_def", [(30, 8, 3, 0), (30, 8, 8, 0), (30, 8, 5, 4), (30, 10, 10, 10)])
def test_top_eig_from_gram_matches_eigh(D, m, k, rank_def):
    """W V_k from the small Gram matrix equals Q_k Lambda_k^{1/2} of eigh(W W^T)."""
    g = torch.Generator().manual_seed(D + m + k)
    W = torch.randn(D, m, generator=g)
    if rank_def:
        W[:, :rank_def] = 0.0  # vanishing eigenvalues: shapes must not change
    lam, V = linalg.top_eig_from_gram(W.T @ W, k)
    assert lam.shape == (k,) and V.shape == (m, k)
    Uk = W @ V
    ev, Q = torch.linalg.eigh(W @ W.T)
    ref_lam = ev.flip(0)[:k].clamp_min(0)
    torch.testing.assert_close(lam, ref_lam, rtol=1e-9, atol=1e-9)
    Qk = Q[:, -k:]
    ref = Qk @ torch.diag(ev[-k:].clamp_min(0)) @ Qk.T
    torch.testing.assert_close(Uk @ Uk.T, ref, rtol=1e-8, atol=1e-8)
    assert torch.isfinite(Uk).all()
    # columns are orthogonal with squared norms equal to the eigenvalues
    torch.testing.assert_close(Uk.T @ Uk, torch.diag(lam), rtol=1e-8, atol=1e-8)


@pytest.mark.parametrize("L", [0, 3])
def test_posterior_solve_with_shift_matches_dense(L):
    """``solve_t(x, shift)`` solves ``(P + shift I) y = x`` (the damped mean step) and leaves
    the posterior, and its cached unshifted solve, as they were."""
    from skbayes.posteriors import DiagonalGaussian, LowRankGaussian

    g = torch.Generator().manual_seed(L)
    D = 7
    U = torch.randn(D, L, generator=g, dtype=torch.float64)
    d = torch.rand(D, generator=g, dtype=torch.float64) + 0.1
    x = torch.randn(D, 2, generator=g, dtype=torch.float64)
    posts = [LowRankGaussian(torch.zeros(D, dtype=torch.float64), U, d)]
    if L == 0:
        posts.append(DiagonalGaussian(torch.zeros(D, dtype=torch.float64), d))
    P = U @ U.T + torch.diag(d)
    for post in posts:
        before = post.solve_t(x)
        for shift in (0.0, 2.5):
            want = torch.linalg.solve(P + shift * torch.eye(D, dtype=torch.float64), x)
            torch.testing.assert_close(post.solve_t(x, shift=shift), want, rtol=1e-10, atol=1e-12)
            torch.testing.assert_close(post.solve_t(x[:, 0], shift=shift), want[:, 0], rtol=1e-10, atol=1e-12)
        torch.testing.assert_close(post.solve_t(x), before, rtol=0, atol=0)
        torch.testing.assert_close(post.d_t, d, rtol=0, atol=0)


def _gram_with_old_factor(D=400, L=8, n=200, seed=0, decay=0.97, zero_old=False):
    """The SLANG update's Gram matrix ``W^T W`` for ``W = [a U_old, b G^T]``: ``U_old``
    the top-``L`` factor of a previous such matrix, ``G`` gradients with a decaying
    spectrum (the situation the warm start is for)."""
    g = torch.Generator().manual_seed(seed)
    basis = torch.linalg.qr(torch.randn(D, D, generator=g))[0]
    scales = decay ** torch.arange(D, dtype=torch.float64)

    def grads(m):
        return (torch.randn(m, D, generator=g) * scales) @ basis.T

    G0 = grads(n)
    ev, Q = torch.linalg.eigh(G0.T @ G0)
    U_old = torch.zeros(D, L) if zero_old else Q[:, -L:] * ev[-L:].sqrt()
    W = torch.cat([0.9 * U_old, 0.3 * grads(n).T], dim=1)
    return W


def test_top_eig_from_gram_is_exact_eigh_up_to_the_threshold():
    W = torch.randn(300, linalg.EXACT_EIG_MAX, generator=torch.Generator().manual_seed(1))
    K = W.T @ W
    lam, V = linalg.top_eig_from_gram(K, 8, n_lead=8)
    lam0, V0 = linalg.top_eig_psd(K, 8)
    torch.testing.assert_close(lam, lam0, rtol=0, atol=0)
    torch.testing.assert_close(V, V0, rtol=0, atol=0)


@pytest.mark.parametrize("zero_old,rtol", [(False, 1e-8), (True, 1e-5)])
def test_top_eig_from_gram_subspace_iteration_matches_eigh(zero_old, rtol):
    """Above the threshold the subspace iteration gives the exact top-k eigenpairs to
    near machine precision when the old factor is a good start, and to about 1e-6 from
    a zero old factor (the cold start from the sketch, once per fit) with an
    eigenvalue gap of only 6% after the k-th; deterministic."""
    L = 8
    W = _gram_with_old_factor(L=L, zero_old=zero_old)
    K = W.T @ W
    assert K.shape[0] > linalg.EXACT_EIG_MAX
    lam, V = linalg.top_eig_from_gram(K, L, n_lead=L)
    lam0, V0 = linalg.top_eig_psd(K, L)
    torch.testing.assert_close(lam, lam0, rtol=rtol, atol=0)
    torch.testing.assert_close(V.T @ V, torch.eye(L), rtol=0, atol=1e-12)
    # the same factor W V as the exact route (up to column signs): compare U U^T
    U, U0 = W @ V, W @ V0
    torch.testing.assert_close(U @ U.T, U0 @ U0.T, rtol=0, atol=10 * rtol * float(lam0[0]))
    torch.testing.assert_close(U.T @ U, torch.diag(lam), rtol=1e-9, atol=1e-9 * float(lam0[0]))
    lam2, V2 = linalg.top_eig_from_gram(K, L, n_lead=L)
    torch.testing.assert_close(lam2, lam, rtol=0, atol=0)
    torch.testing.assert_close(V2, V, rtol=0, atol=0)


def test_top_eig_from_gram_without_a_gap_still_bounds_the_spectrum():
    """With a flat spectrum (no gap after the k-th eigenvalue) the Ritz values are still
    lower bounds of the true eigenvalues (Cauchy interlacing) and capture nearly all of
    the top-k sum: what SLANG's diagonal correction relies on."""
    W = _gram_with_old_factor(D=300, n=250, decay=1.0, seed=3)
    K = W.T @ W
    lam, V = linalg.top_eig_from_gram(K, 8, n_lead=8)
    lam0, _ = linalg.top_eig_psd(K, 8)
    assert torch.all(lam <= lam0 * (1 + 1e-12))
    assert float(lam.sum()) >= 0.95 * float(lam0.sum())
    torch.testing.assert_close(V.T @ V, torch.eye(8), rtol=0, atol=1e-12)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_all_finite_and_max_abs_equal_the_elementwise_references(dtype):
    from skbayes._linalg import all_finite, max_abs

    g = torch.Generator().manual_seed(0)
    big = torch.finfo(dtype).max / 4
    cases = [torch.randn(500, 7, dtype=dtype, generator=g), torch.zeros(0, dtype=dtype)]
    # finite entries whose sum overflows: the fast sum says "not finite", the answer must not
    cases.append(torch.full((64,), big, dtype=dtype))
    cases.append(torch.tensor([big, big, -big, float("nan")], dtype=dtype))
    for bad in (float("nan"), float("inf"), -float("inf")):
        for pos in (0, 1234, 3499):
            x = torch.randn(3500, dtype=dtype, generator=g)
            x[pos] = bad
            cases.append(x)
    inf_inf = torch.randn(100, dtype=dtype, generator=g)
    inf_inf[3], inf_inf[70] = float("inf"), -float("inf")  # sums to NaN
    cases.append(inf_inf)
    for x in cases:
        assert all_finite(x) == bool(torch.isfinite(x).all())
        ref = float(torch.linalg.vector_norm(x, float("inf"))) if x.numel() else 0.0
        got = max_abs(x)
        assert (math.isnan(got) and math.isnan(ref)) or got == ref
    assert all_finite(torch.arange(5))  # integer tensors are finite
