"""Noisy K-FAC / EK-FAC against dense Kronecker-product references."""

import math
import warnings

import numpy as np
import pytest
import torch
from torch import nn

import skbayes._curvature.factors as kfac_curv
import skbayes._families.kfac as kfac_mod
import skbayes.posteriors.kfac as kfac_posteriors
from skbayes import NoisyEKFACClassifier, NoisyEKFACRegressor, NoisyKFACClassifier, NoisyKFACRegressor
from skbayes._curvature import kron_batch, layer_grad, layer_stats, projected_second_moment
from skbayes._likelihoods import Categorical
from skbayes._networks import DenseSpec, LayerMap, ParamLayout, kron_layers, layer_map
from skbayes.exceptions import UnsupportedLayerError
from skbayes.posteriors.kfac import DampedFactor, KroneckerBlock

DT = torch.float64


pytestmark = pytest.mark.usefixtures("quiet")  # short fits on purpose: no ConvergenceWarning noise


def _data(n=60, d=3, k=3, seed=0):
    rng = np.random.RandomState(seed)
    X = rng.randn(n, d)
    y = np.digitize(X[:, 0] + 0.5 * X[:, 1] ** 2 + 0.3 * rng.randn(n), [0.0, 1.0])[:n] % k
    return X, y


def _fit(Est, **kw):
    X, y = _data()
    base = dict(hidden_layer_sizes=(4,), max_iter=2, batch_size=20, random_state=0, momentum=0.0)
    base.update(kw)
    return Est(**base).fit(X, y)


def _dense_cov(est, layer_cov):
    """Assemble the block-diagonal covariance from per-layer vec(W) covariances."""
    post = est.posterior_
    D = post.mean.shape[0]
    out = np.zeros((D, D))
    for l, st in zip(post.layers, est._state["layers"]):
        idx = l.vec_index().numpy()
        out[np.ix_(idx, idx)] = layer_cov(l, st)
    return out


def test_layer_matrix_layout_round_trip():
    net = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2, bias=False)).double()
    layout = ParamLayout(net)
    layers = kron_layers(net, layout)
    theta = torch.arange(layout.size, dtype=DT)
    back = torch.zeros_like(theta)
    for l in layers:
        W = l.flat_to_mat(theta)
        mod = l.module
        torch.testing.assert_close(W[: l.n_in], theta[l.w_off : l.w_off + l.p * l.n_in].reshape(l.p, l.n_in).T)
        l.mat_to_flat(W, back)
        # vec(W) column-major indexes the flat vector
        torch.testing.assert_close(theta[l.vec_index()], W.T.reshape(-1))
        assert (mod.bias is None) == (not l.has_bias)
    torch.testing.assert_close(back, theta)


@pytest.mark.parametrize("gather_max", [10**9, 0], ids=["gather", "layer by layer"])
def test_layer_map_moves_the_same_values_as_the_per_layer_slices(monkeypatch, gather_max):
    """LayerMap.to_flat / to_mats (one indexing operation for all layers, or layer by layer
    beyond GATHER_MAX values) equal the layers' mat_to_flat / flat_to_mat exactly, with and
    without biases, for a conv layer and with leading sample dimensions."""
    monkeypatch.setattr(LayerMap, "GATHER_MAX", gather_max)
    net = nn.Sequential(
        nn.Conv2d(2, 3, 2), nn.ReLU(), nn.Flatten(), nn.Linear(12, 4, bias=False), nn.ReLU(), nn.Linear(4, 2)
    ).double()
    layout = ParamLayout(net)
    layers = kron_layers(net, layout)
    lmap = layer_map(layers, torch.device("cpu"))
    theta = torch.randn(5, 3, layout.size, dtype=DT, generator=torch.Generator().manual_seed(0))
    mats = lmap.to_mats(theta)
    for l, W in zip(layers, mats):
        assert torch.equal(W, l.flat_to_mat(theta))
    want = torch.full_like(theta, float("nan"))
    for l, W in zip(layers, mats):
        l.mat_to_flat(W, want)
    assert torch.equal(lmap.to_flat(mats), want)
    assert torch.equal(lmap.to_flat(mats), theta)
    assert layer_map(layers, torch.device("cpu")) is lmap  # one kept per geometry


def test_kfac_covariance_and_precision_equal_kronecker_formula():
    est = _fit(NoisyKFACClassifier, kl_weight=0.7, prior_precision=0.5)
    N = 60
    g_in = 0.7 / (N * 2.0)

    def cov(l, st):
        A, S, pi = st["A"], st["S"], st["pi"]
        sg = math.sqrt(g_in)
        Ad = A + pi * sg * torch.eye(l.n, dtype=DT)
        Sd = S + sg / pi * torch.eye(l.p, dtype=DT)
        return ((0.7 / N) * torch.kron(torch.linalg.inv(Sd), torch.linalg.inv(Ad))).numpy()

    ref = _dense_cov(est, cov)
    np.testing.assert_allclose(est.posterior_.covariance(), ref, rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(est.posterior_.precision(), np.linalg.inv(ref), rtol=1e-7, atol=1e-6)
    np.testing.assert_allclose(est.posterior_.variance(), np.diag(ref), rtol=1e-8, atol=1e-14)
    # pi is Martens & Grosse's trace ratio
    st = est._state["layers"][0]
    n, p = st["A"].shape[0], st["S"].shape[0]
    assert st["pi"] == pytest.approx(math.sqrt((torch.trace(st["A"]) / n) / (torch.trace(st["S"]) / p)))


def test_ekfac_covariance_equals_eigenbasis_formula():
    # kl_weight=1: the untempered formula (the classifier's small-network 'auto'), at a prior of 3
    est = _fit(NoisyEKFACClassifier, kl_weight=1.0, prior_precision=3.0, eig_interval=100, rescale_reset_interval=None)
    N = 60
    g_in = est.prior_precision / N  # the intrinsic damping lambda / N

    def cov(l, st):
        Q = torch.kron(st["QS"], st["QA"])
        r = st["R"].T.reshape(-1)
        return ((1.0 / N) * (Q / (r + g_in)) @ Q.T).numpy()

    ref = _dense_cov(est, cov)
    np.testing.assert_allclose(est.posterior_.covariance(), ref, rtol=1e-8, atol=1e-12)
    # R has moved away from the K-FAC products (the correction is real)
    st = est._state["layers"][0]
    assert not torch.allclose(st["R"], st["lamA"][:, None] * st["lamS"][None, :])


@pytest.mark.parametrize(
    ("singular", "whiten_by_product"),
    [(False, True), (False, False), (True, True)],
    ids=["cholesky-product", "cholesky-solve", "eigen-fallback"],
)
def test_damped_factor_against_dense_references(singular, whiten_by_product, monkeypatch):
    """Every operation of a damped factor ``F = M + shift I`` against dense linear algebra,
    through the Cholesky factor and, for a factor whose Cholesky factorisation fails, the
    eigendecomposition fallback. The Cholesky factor whitens small factors by a product with
    its inverse and large ones by a triangular solve: both are checked (the size limit moved)."""
    monkeypatch.setattr(kfac_posteriors, "_WHITEN_BY_PRODUCT", 10**6 if whiten_by_product else 0)
    torch.manual_seed(0)
    n = 6
    B = torch.randn(n, 3 if singular else 2 * n, dtype=DT)
    M = B @ B.T
    if singular:
        # rank 3 with small negative eigenvalues (rounding in a large factor) and no damping
        lam, Q = torch.linalg.eigh(M)
        lam[:3] = -1e-9
        M, shift = (Q * lam) @ Q.T, 0.0
    else:
        shift = 0.3
    M0 = M.clone()
    F = DampedFactor(M, shift)
    assert (F.L is None) == singular  # the fallback is taken exactly when Cholesky fails
    torch.testing.assert_close(M, M0, rtol=0, atol=0)  # the input is not modified
    if singular:
        lam, Q = torch.linalg.eigh(M)
        Fd = (Q * lam.clamp_min(0.0)) @ Q.T  # the clamped matrix the fallback represents
        shift = 1e-3  # make it invertible for the references below
        F = DampedFactor(M, shift)
        F.L, F.Q, F.lam = None, Q, lam.clamp_min(0.0) + shift  # force the fallback path
        Fd = Fd + shift * torch.eye(n, dtype=DT)
    else:
        Fd = M + shift * torch.eye(n, dtype=DT)
    Finv = torch.linalg.inv(Fd)
    V = torch.randn(n, 4, dtype=DT)
    torch.testing.assert_close(F.solve_left(V), Finv @ V, rtol=1e-8, atol=1e-8)
    torch.testing.assert_close(F.solve_right(V.T), V.T @ Finv, rtol=1e-8, atol=1e-8)
    I = torch.eye(n, dtype=DT)
    R = F.isqrt_left(I)  # R R^T = F^{-1}
    torch.testing.assert_close(R @ R.T, Finv, rtol=1e-8, atol=1e-8)
    Rt = F.isqrt_right(I)  # the transpose of the same R
    torch.testing.assert_close(Rt, R.T, rtol=1e-8, atol=1e-8)
    torch.testing.assert_close(F.isqrt_left(torch.stack([V, 2 * V])), torch.stack([R @ V, 2 * R @ V]))
    A = torch.randn(5, n, dtype=DT)  # rows
    W = F.whiten(A)  # A R: W W^T = A F^{-1} A^T
    torch.testing.assert_close(W, A @ R, rtol=1e-8, atol=1e-8)
    torch.testing.assert_close(W @ W.T, A @ Finv @ A.T, rtol=1e-8, atol=1e-8)
    torch.testing.assert_close(F.quad_inverse(A), torch.diag(A @ Finv @ A.T), rtol=1e-8, atol=1e-8)
    torch.testing.assert_close(F.diag_inverse(), torch.diag(Finv), rtol=1e-8, atol=1e-8)
    torch.testing.assert_close(F.logdet(), torch.logdet(Fd), rtol=1e-8, atol=1e-8)
    torch.testing.assert_close(F.dense(), Fd, rtol=1e-8, atol=1e-8)
    torch.testing.assert_close(F.dense(inverse=True), Finv, rtol=1e-8, atol=1e-8)
    lam, Q = F.eig()
    torch.testing.assert_close((Q * lam) @ Q.T, Fd, rtol=1e-8, atol=1e-8)


def test_kfac_block_against_dense_kronecker_covariance():
    torch.manual_seed(1)
    n, p, c = 4, 3, 0.2
    A = (lambda B: B @ B.T)(torch.randn(n, n, dtype=DT))
    S = (lambda B: B @ B.T)(torch.randn(p, p, dtype=DT))
    b = KroneckerBlock(DampedFactor(A, 0.1), DampedFactor(S, 0.2), c)
    Ad, Sd = A + 0.1 * torch.eye(n, dtype=DT), S + 0.2 * torch.eye(p, dtype=DT)
    cov = c * torch.kron(torch.linalg.inv(Sd), torch.linalg.inv(Ad))  # Cov(vec W), column-major
    torch.testing.assert_close(b.dense(inverse=False), cov, rtol=1e-8, atol=1e-10)
    torch.testing.assert_close(b.dense(inverse=True), torch.linalg.inv(cov), rtol=1e-8, atol=1e-8)
    torch.testing.assert_close(b.variance().T.reshape(-1), torch.diag(cov), rtol=1e-8, atol=1e-12)
    torch.testing.assert_close(b.logdet_covariance(), torch.logdet(cov), rtol=1e-8, atol=1e-8)
    # the eigenbasis form read by KroneckerGaussian.factors is the same covariance
    QA, QS, s = b.eig()
    Q = torch.kron(QS, QA)
    torch.testing.assert_close((Q * s.T.reshape(-1)) @ Q.T, cov, rtol=1e-8, atol=1e-10)
    # The sampler is a linear map of i.i.d. standard normals (which it reads in its own
    # layout, mixing the k draws of a batch): its draws must be independent with the
    # block's covariance, i.e. T T^T = I_k kron cov for the whole map T.
    for k in (1, 3):
        m = k * n * p
        E = torch.eye(m, dtype=DT)
        T = torch.stack([b.transform(E[j].reshape(k, n, p)).transpose(1, 2).reshape(-1) for j in range(m)], 1)
        torch.testing.assert_close(T @ T.T, torch.block_diag(*[cov] * k), rtol=1e-8, atol=1e-10)


def test_kfac_inverts_the_factors_of_the_last_refresh():
    """With ``inv_interval`` > 1 the covariance uses the factors (and pi) of the last refresh,
    not the moving averages updated since."""
    # untempered: the intrinsic damping below is prior_precision / N
    est = _fit(NoisyKFACClassifier, max_iter=1, inv_interval=2, kl_weight=1.0)  # 3 steps: refreshes at steps 0, 2
    assert est.t_ == 3
    N, g_in = 60, 1.0 / 60
    st = est._state["layers"][0]
    assert not torch.allclose(st["A"], st["A_ref"])  # updated at step 3, not refreshed

    def cov(l, st):
        sg, pi = math.sqrt(g_in), st["pi"]
        n, p = st["A_ref"].shape[0], st["S_ref"].shape[0]
        assert pi == pytest.approx(math.sqrt((torch.trace(st["A_ref"]) / n) / (torch.trace(st["S_ref"]) / p)))
        Ad = st["A_ref"] + pi * sg * torch.eye(l.n, dtype=DT)
        Sd = st["S_ref"] + sg / pi * torch.eye(l.p, dtype=DT)
        return ((1.0 / N) * torch.kron(torch.linalg.inv(Sd), torch.linalg.inv(Ad))).numpy()

    np.testing.assert_allclose(est.posterior_.covariance(), _dense_cov(est, cov), rtol=1e-8, atol=1e-12)


@pytest.mark.parametrize("Est", [NoisyKFACClassifier, NoisyEKFACClassifier])
def test_samplers_reproduce_the_covariance(Est):
    est = _fit(Est)
    post = est.posterior_
    n = 40000
    x = post.sample_t(n, generator=torch.Generator().manual_seed(0)) - post.mean_t
    emp = (x.T @ x / n).numpy()
    ref = post.covariance()
    scale = np.sqrt(np.outer(np.diag(ref), np.diag(ref)))
    assert np.all(np.abs(emp - ref) < 6 * scale * np.sqrt(2.0 / n))


def test_ekfac_scale_equals_kfac_products_right_after_reset():
    est = _fit(NoisyEKFACClassifier, max_iter=1, eig_interval=100, rescale_reset_interval=3)
    assert est.t_ == 3
    for st in est._state["layers"]:
        torch.testing.assert_close(st["R"], st["lamA"][:, None] * st["lamS"][None, :], rtol=0, atol=0)


def _layer_problem(conv=False, seed=0):
    torch.manual_seed(seed)
    if conv:
        net = nn.Sequential(
            nn.Unflatten(1, (2, 5, 5)),
            nn.Conv2d(2, 3, 3, stride=2, padding=1),
            nn.Tanh(),
            nn.Flatten(),
            nn.Linear(27, 3),
        ).double()
        X = torch.randn(12, 50, dtype=DT)
    else:
        net = nn.Sequential(nn.Linear(4, 5), nn.Tanh(), nn.Linear(5, 3)).double()
        X = torch.randn(30, 4, dtype=DT)
    y = torch.randint(0, 3, (X.shape[0],))
    layout = ParamLayout(net)
    layers = kron_layers(net, layout)
    theta = layout.flatten_module(net)[None]
    return net, layout, layers, theta, X, y


def _per_example_weight_grads(net, layout, layers, theta, X, y, lik):
    """Reference: one backward pass per example, as (n, p) matrices per layer."""
    out = [[] for _ in layers]
    for i in range(X.shape[0]):
        th = theta[0].clone().requires_grad_(True)
        f = torch.func.functional_call(net, layout.unflatten(th), (X[i : i + 1],))
        (g,) = torch.autograd.grad(lik.nll(f, y[i : i + 1]).sum(), th)
        for k, l in enumerate(layers):
            out[k].append(l.flat_to_mat(g))
    return [torch.stack(o) for o in out]


@pytest.mark.parametrize("conv, dense_path", [(False, False), (False, True), (True, False)])
def test_factors_gradients_and_projections_against_explicit_references(conv, dense_path):
    net, layout, layers, theta, X, y = _layer_problem(conv)
    lik = Categorical(3)
    spec = DenseSpec(net, layout) if dense_path else None
    rows, _, _ = kron_batch(net, layout, layers, theta, X, y, lik, fisher="empirical", spec=spec)
    G = _per_example_weight_grads(net, layout, layers, theta, X, y, lik)
    for l, (A, Dt, Df), Gl in zip(layers, rows, G):
        # mean gradient and projected second moments from per-example matrices
        torch.testing.assert_close(layer_grad(A, Dt), Gl.mean(0), rtol=1e-10, atol=1e-12)
        QA = torch.linalg.qr(torch.randn(l.n, l.n, dtype=DT))[0]
        QS = torch.linalg.qr(torch.randn(l.p, l.p, dtype=DT))[0]
        P = QA.T @ Gl @ QS
        torch.testing.assert_close(projected_second_moment(A, Df, QA, QS), (P**2).mean(0), rtol=1e-10, atol=1e-12)
        if l.is_conv:
            # KFC factors against explicit patch extraction, position by position
            mod = l.module
            x = X.reshape(-1, 2, 5, 5)
            xp = torch.nn.functional.pad(x, (1, 1, 1, 1))
            patches = []
            for r in range(0, 5, 2):
                for c in range(0, 5, 2):
                    patches.append(xp[:, :, r : r + 3, c : c + 3].reshape(x.shape[0], -1))
            P = torch.stack(patches, 1)  # (m, T, C kh kw)
            P = torch.cat([P, torch.ones(*P.shape[:2], 1, dtype=DT)], -1)
            torch.testing.assert_close(A, P, rtol=1e-12, atol=1e-12)
            T = P.shape[1]
            A_ref = torch.einsum("mti,mtj->ij", P, P) / P.shape[0]
            S_ref = torch.einsum("mti,mtj->ij", Df, Df) / (P.shape[0] * T)
            A_f, S_f = layer_stats(A, Df)
            torch.testing.assert_close(A_f, A_ref, rtol=1e-12, atol=1e-12)
            torch.testing.assert_close(S_f, S_ref, rtol=1e-12, atol=1e-12)
            assert mod.weight.shape[0] == l.p


@pytest.mark.parametrize("fisher, S, weighted", [("true", 1, False), ("true", 1, True), ("empirical", 3, True)])
def test_dense_batched_path_equals_the_hooked_path(fisher, S, weighted):
    # A network of Linear layers takes one batched forward pass for all S samples (DenseSpec);
    # it must give the hooked per-sample path's rows, in the same order, and for S = 1 the
    # same labels of the true Fisher from the same generator.
    net, layout, layers, theta, X, y = _layer_problem(False)
    theta = theta + 0.3 * torch.randn(S, theta.shape[1], dtype=DT, generator=torch.Generator().manual_seed(1))
    lik = Categorical(3)
    w = torch.rand(X.shape[0], dtype=DT, generator=torch.Generator().manual_seed(2)) + 0.5 if weighted else None
    spec = DenseSpec(net, layout)
    out = []
    for sp in (None, spec):
        gen = torch.Generator().manual_seed(3)
        out.append(kron_batch(net, layout, layers, theta, X, y, lik, fisher=fisher, generator=gen, weights=w, spec=sp))
    (rows_h, nll_h, f_h), (rows_d, nll_d, f_d) = out
    torch.testing.assert_close(nll_d, nll_h, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(f_d, f_h, rtol=1e-12, atol=1e-12)
    for rh, rd in zip(rows_h, rows_d):
        for a, b in zip(rh, rd):
            torch.testing.assert_close(b, a, rtol=1e-12, atol=1e-12)
    # the true Fisher's gradients differ from the observed-label ones (the check can fail)
    if fisher == "true":
        assert not torch.allclose(rows_d[-1][1], rows_d[-1][2])
    # layers that are not the network's Linear layers in order fall back to the hooks
    assert not kfac_curv._dense_match(spec, layers[::-1])


def test_ekfac_fisher_error_is_no_larger_than_kfac():
    """On exact per-example gradients, EK-FAC's diagonal in the Kronecker eigenbasis is the
    Frobenius-optimal one, so its error is at most K-FAC's (George et al., 2018)."""
    net, layout, layers, theta, X, y = _layer_problem(conv=False, seed=3)
    lik = Categorical(3)
    rows, _, _ = kron_batch(net, layout, layers, theta, X, y, lik, fisher="empirical")
    G = _per_example_weight_grads(net, layout, layers, theta, X, y, lik)
    for _l, (A, _, Df), Gl in zip(layers, rows, G):
        vecs = Gl.transpose(1, 2).reshape(Gl.shape[0], -1)  # vec(G_i), column-major
        F = vecs.T @ vecs / Gl.shape[0]
        Af, Sf = layer_stats(A, Df)
        F_kfac = torch.kron(Sf, Af)
        lamA, QA = torch.linalg.eigh(Af)
        lamS, QS = torch.linalg.eigh(Sf)
        Q = torch.kron(QS, QA)
        R = projected_second_moment(A, Df, QA, QS)
        F_ekfac = (Q * R.T.reshape(-1)) @ Q.T
        e_k, e_ek = torch.linalg.norm(F - F_kfac), torch.linalg.norm(F - F_ekfac)
        assert e_ek <= e_k + 1e-12
        assert e_ek < 0.99 * e_k  # strictly better on this problem
        # and K-FAC's eigenvalue products are R's value right after a reset
        torch.testing.assert_close(torch.diag(Q.T @ F_kfac @ Q), (lamA[:, None] * lamS[None, :]).T.reshape(-1))


@pytest.mark.parametrize("Est", [NoisyKFACClassifier, NoisyEKFACClassifier])
def test_mean_step_equals_dense_preconditioned_step(monkeypatch, Est):
    calls = []
    orig = kfac_mod.kron_batch

    def rec(*args, **kw):
        out = orig(*args, **kw)
        calls.append((args[3].clone(), out))
        return out

    monkeypatch.setattr(kfac_mod, "kron_batch", rec)
    X, y = _data()
    kw = dict(
        hidden_layer_sizes=(4,),
        max_iter=1,
        batch_size=60,
        momentum=0.0,
        learning_rate=0.3,
        kl_clip=None,
        damping=0.01,
        kl_weight=1.0,  # the untempered step
        prior_precision=3.0,
        random_state=0,
    )
    if Est is NoisyEKFACClassifier:
        kw.update(eig_interval=100, rescale_reset_interval=None)
    est = Est(**kw)
    est.fit(X, y)
    assert len(calls) == 2  # factor initialisation at the mean, then one step
    mean_before = calls[0][0][0]
    theta, (rows, _, _) = calls[1]
    _N, g_in = 60, est.prior_precision / 60  # lambda / N
    gamma = g_in + 0.01
    step = torch.zeros_like(mean_before)
    for l, st, (A, Dt, _) in zip(est.posterior_.layers, est._state["layers"], rows):
        V = -layer_grad(A, Dt) - g_in * l.flat_to_mat(theta.mean(0))
        if Est is NoisyKFACClassifier:
            sg, pi = math.sqrt(gamma), st["pi"]
            P = torch.kron(st["S"] + sg / pi * torch.eye(l.p, dtype=DT), st["A"] + pi * sg * torch.eye(l.n, dtype=DT))
        else:
            Q = torch.kron(st["QS"], st["QA"])
            P = (Q * (st["R"].T.reshape(-1) + gamma)) @ Q.T
        dv = torch.linalg.solve(P, V.T.reshape(-1))
        step[l.vec_index()] = dv
    torch.testing.assert_close(est.posterior_.mean_t - mean_before, 0.3 * step, rtol=1e-8, atol=1e-12)


def test_unsupported_layer_is_named():
    def module(n_in, n_out):
        return nn.Sequential(nn.Linear(n_in, 4), nn.BatchNorm1d(4), nn.Linear(4, n_out))

    X, y = _data()
    with pytest.raises(UnsupportedLayerError, match="'1'.*BatchNorm1d"):
        NoisyKFACClassifier(module=module, max_iter=1).fit(X, y)


def test_regressors_learn_noise_and_fit():
    rng = np.random.RandomState(0)
    X = rng.randn(300, 2)
    y = np.sin(2 * X[:, 0]) + 0.1 * rng.randn(300)
    for Est in (NoisyKFACRegressor, NoisyEKFACRegressor):
        reg = Est(hidden_layer_sizes=(20,), max_iter=100, random_state=0).fit(X, y)
        assert reg.score(X, y) > 0.8
        assert 1.0 < reg.noise_precision_ < 1e4


def test_kl_clip_bounds_the_predicted_change(monkeypatch):
    """With kl_clip, alpha^2 step^T F step of the applied step equals min(kl_clip, unclipped)."""
    X, y = _data()
    kw = dict(hidden_layer_sizes=(4,), max_iter=1, batch_size=60, momentum=0.0, learning_rate=0.3, random_state=0)
    kw.update(kl_weight=1.0, damping=0.01)  # the step of test_mean_step_equals_dense_preconditioned_step
    free = NoisyKFACClassifier(kl_clip=None, **kw).fit(X, y)
    clipped = NoisyKFACClassifier(kl_clip=1e-6, **kw).fit(X, y)
    start = NoisyKFACClassifier(kl_clip=None, **{**kw, "learning_rate": 1e-300}).fit(X, y).posterior_.mean_t
    d_free = free.posterior_.mean_t - start
    d_clip = clipped.posterior_.mean_t - start
    # same direction, shorter step
    cos = float(d_free @ d_clip / (d_free.norm() * d_clip.norm()))
    assert cos == pytest.approx(1.0, abs=1e-8)
    assert d_clip.norm() < d_free.norm()
    # the predicted change alpha^2 step^T F step, F the dense damped Kronecker preconditioner of
    # the step (the factors it used): the unclipped step's is above kl_clip, the applied one's is it
    gamma = free.prior_precision / 60 + 0.01  # intrinsic (lambda / N) plus extrinsic damping
    change = 0.0
    for l, st in zip(free.posterior_.layers, free._state["layers"]):
        sg, pi = math.sqrt(gamma), st["pi"]
        F = torch.kron(st["S"] + sg / pi * torch.eye(l.p, dtype=DT), st["A"] + pi * sg * torch.eye(l.n, dtype=DT))
        dv = d_free[l.vec_index()]
        change += float(dv @ F @ dv)  # alpha^2 step^T F step, d = alpha step
    assert change > 1e-5  # the clip below is active
    ratio = float(d_clip.norm() / d_free.norm())
    assert ratio**2 * change == pytest.approx(1e-6, rel=1e-6)
    # a kl_clip above the unclipped change leaves the step as it was
    loose = NoisyKFACClassifier(kl_clip=2 * change, **kw).fit(X, y)
    torch.testing.assert_close(loose.posterior_.mean_t, free.posterior_.mean_t, rtol=0, atol=0)


def test_string_padding_conv_is_reported_as_unsupported():
    def module(n_in, n_out):
        return nn.Sequential(
            nn.Unflatten(1, (1, 2, 2)), nn.Conv2d(1, 2, 3, padding="same"), nn.Flatten(), nn.Linear(8, n_out)
        )

    X, y = _data(d=4)
    with pytest.raises(UnsupportedLayerError, match="Conv2d"):
        NoisyKFACClassifier(module=module, max_iter=1).fit(X, y)


def test_non_finite_outputs_in_the_label_sampler_are_reported_as_divergence():
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    X = X[:200] / 16.0
    est = NoisyEKFACClassifier(
        hidden_layer_sizes=(8,),
        learning_rate=1e3,
        kl_clip=None,
        momentum=0.0,
        max_iter=5,
        init="default",
        dtype="float32",
        random_state=0,
    )
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        est.fit(X * 1e18, y[:200])
    assert any("diverged" in str(x.message) for x in w)


@pytest.mark.parametrize("Est", [NoisyKFACClassifier, NoisyEKFACClassifier])
def test_snapshots_share_immutable_blocks_and_restore_exactly(Est):
    # The fit loop's snapshots share the covariance blocks, damped factors and layer
    # geometry (immutable) instead of copying them: training on after a snapshot must
    # leave it intact, and restoring it must give back the same predictions.
    from skbayes._loop import restore, snapshot

    X, y = _data()
    est = _fit(Est, max_iter=3)
    before = est.predict_proba(X)
    snap = snapshot(est._training_state())
    assert snap["posterior"].blocks[0] is est.posterior_.blocks[0]
    assert snap["posterior"].mean_t is not est.posterior_.mean_t
    est.partial_fit(X, y)
    est.partial_fit(X, y)
    assert not np.allclose(est.predict_proba(X), before)
    state = est._training_state()
    restore(state, snap)
    est._store_training_state(state)
    np.testing.assert_array_equal(est.predict_proba(X), before)
    est.partial_fit(X, y)  # and training goes on from the restored state
    assert np.isfinite(est.predict_proba(X)).all()


@pytest.mark.parametrize("weighted", [False, True])
def test_fused_moving_averages_and_damped_gradient_equal_the_unfused_formulas(weighted):
    # The step forms V = -grad - gamma W and the factors' moving averages each in one GEMM
    net, layout, layers, theta, X, y = _layer_problem(True)
    rows, _, _ = kron_batch(net, layout, layers, theta, X, y, Categorical(3), fisher="empirical")
    g = torch.Generator().manual_seed(4)
    for l, (A, Dt, Df) in zip(layers, rows):
        w = torch.rand(A.shape[0], dtype=DT, generator=g) + 0.5 if weighted else None
        A0 = torch.randn(l.n, l.n, dtype=DT, generator=g)
        S0 = torch.randn(l.p, l.p, dtype=DT, generator=g)
        A0c, S0c = A0.clone(), S0.clone()
        a_new, s_new = layer_stats(A, Df, w)
        A1, S1 = layer_stats(A, Df, w, decay=(0.05, (A0, S0)))
        torch.testing.assert_close(A1, 0.95 * A0 + 0.05 * a_new, rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(S1, 0.95 * S0 + 0.05 * s_new, rtol=1e-12, atol=1e-12)
        assert torch.equal(A0, A0c) and torch.equal(S0, S0c)  # the old factors are not modified
        W = torch.randn(l.n, l.p, dtype=DT, generator=g)
        Wc = W.clone()
        V = layer_grad(A, Dt, out=W, beta=-0.3, alpha=-1.0)
        torch.testing.assert_close(V, -layer_grad(A, Dt) - 0.3 * W, rtol=1e-12, atol=1e-12)
        assert torch.equal(W, Wc)


@pytest.mark.parametrize("Est", [NoisyKFACClassifier, NoisyEKFACClassifier])
def test_decay_epochs_scales_the_mean_step_only(Est):
    """One row batch per epoch: the second step, taken after one epoch, is the constant
    step's times 1 / (1 + 1 / decay_epochs); the first step and the covariance are unchanged."""
    X, y = _data()
    kw = dict(hidden_layer_sizes=(4,), batch_size=60, momentum=0.0, random_state=0, n_iter_no_change=100)
    start = Est(decay_epochs=None, max_iter=1, **kw).fit(X, y).posterior_
    for m in (0.0, 0.9):  # with momentum the decay scales each step's contribution
        kw["momentum"] = m
        free = Est(decay_epochs=None, max_iter=2, **kw).fit(X, y).posterior_
        decayed = Est(decay_epochs=0.5, max_iter=2, **kw).fit(X, y).posterior_
        first = Est(decay_epochs=0.5, max_iter=1, **kw).fit(X, y).posterior_
        np.testing.assert_array_equal(first.mean, start.mean)
        step_free = free.mean - start.mean
        step_decayed = decayed.mean - start.mean
        if m == 0.0:
            np.testing.assert_allclose(step_decayed, step_free / 3.0, rtol=1e-9, atol=1e-13)
        else:  # mu_2 = mu_1 + a (m v_1 + c v_2): the first step's momentum is not decayed
            v1 = first.mean - Est(decay_epochs=None, max_iter=0, **kw).fit(X, y).posterior_.mean
            np.testing.assert_allclose(step_decayed - m * v1, (step_free - m * v1) / 3.0, rtol=1e-9, atol=1e-13)
        np.testing.assert_allclose(decayed.variance(), free.variance(), rtol=1e-12)


def test_kfac_regressor_default_patience_fits_further():
    """NoisyKFACRegressor waits 50 epochs without a new best (the protocol's choice; every other
    estimator 20). Its one-sample objective is noisy, so 20 stop it early: on a nonlinear
    regression (Friedman #1, 200 training rows, standardised) the longer patience gains test
    log-likelihood on average and loses it on no split (where both stop at the same epoch
    they are the same fit)."""
    from sklearn.datasets import make_friedman1
    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import StandardScaler

    assert NoisyKFACRegressor().get_params()["n_iter_no_change"] == 50
    for Est in (NoisyKFACClassifier, NoisyEKFACClassifier, NoisyEKFACRegressor):
        assert Est().get_params()["n_iter_no_change"] == 20
    gains = []
    for seed in range(4):
        X, y = make_friedman1(n_samples=400, noise=0.3, random_state=seed)
        Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.5, random_state=seed)
        sc = StandardScaler().fit(Xtr)
        Xtr, Xte = sc.transform(Xtr), sc.transform(Xte)
        ll = {}
        for patience in (20, None):
            kw = {} if patience is None else {"n_iter_no_change": patience}
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                est = NoisyKFACRegressor(random_state=seed, **kw).fit(Xtr, ytr)
            ll[patience] = float(np.mean(est.log_likelihood(Xte, yte)))
        gains.append(ll[None] - ll[20])
    assert min(gains) > -0.02, gains
    assert np.mean(gains) > 0.05, gains


def test_kfac_classifier_default_decay_settles_the_posterior():
    """With a constant step the posterior keeps moving on digits: the test log-loss of
    snapshots 20 epochs apart (epochs 100-200) spreads widely. A decay (``decay_epochs=100``, as
    bench_snapshots.py measured it, for the untempered sampled posterior) gives a lower log-loss
    on every split and a smaller spread over the three."""
    from sklearn.datasets import load_digits
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.metrics import log_loss
    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import StandardScaler

    X, y = load_digits(return_X_y=True)
    spread = {100: 0.0, None: 0.0}
    for seed in range(3):
        Xtr, Xte, ytr, yte = train_test_split(X / 16.0, y, test_size=0.25, stratify=y, random_state=seed)
        sc = StandardScaler().fit(Xtr)
        Xtr, Xte = sc.transform(Xtr), sc.transform(Xte)
        mean = {}
        for decay in spread:
            est = NoisyKFACClassifier(
                decay_epochs=decay,
                kl_weight=1.0,
                predictive="sampled",
                warm_start=True,
                max_iter=20,
                n_iter_no_change=10_000,
                predict_samples=300,
            ).set_params(random_state=seed)
            losses = []
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                for k in range(10):
                    est.fit(Xtr, ytr)
                    if k >= 4:  # epochs 100-200
                        losses.append(log_loss(yte, est.predict_proba(Xte), labels=range(10)))
            spread[decay] += max(losses) - min(losses)
            mean[decay] = float(np.mean(losses))
        assert mean[100] < mean[None], (seed, mean)
    assert spread[100] < 0.8 * spread[None], spread


def test_decay_epochs_counts_passes_through_a_stream(monkeypatch):
    """partial_fit: the step decay's epochs are passes through the stream, not calls."""
    seen = []
    step = kfac_mod.KFACFamily.step

    def spy(self, post, state, Xb, yb, ctx):
        seen.append(ctx.epoch)
        return step(self, post, state, Xb, yb, ctx)

    monkeypatch.setattr(kfac_mod.KFACFamily, "step", spy)
    X, y = _data(n=200)
    est = NoisyKFACClassifier(hidden_layer_sizes=(4,), batch_size=10, iblm_batch_size=16, random_state=0)
    for _ in range(2):  # two passes over ten chunks of 20 rows of a stream of 200
        for c in range(10):
            rows = slice(20 * c, 20 * (c + 1))
            est.partial_fit(X[rows], y[rows], classes=np.unique(y), n_samples_total=200)
    # 20 steps of 10 rows per pass
    assert seen[19] == pytest.approx(19 * 10 / 200)
    assert seen[-1] == pytest.approx(39 * 10 / 200)
    # without n_samples_total a stream stands for the rows seen so far (every call's rows are new)
    seen.clear()
    est = NoisyKFACClassifier(hidden_layer_sizes=(4,), batch_size=10, iblm_batch_size=16, random_state=0)
    for c in range(20):
        est.partial_fit(X[10 * c : 10 * (c + 1)], y[10 * c : 10 * (c + 1)], classes=np.unique(y))
    assert seen[-1] == pytest.approx(19 * 10 / 200)
    fit = NoisyKFACClassifier(hidden_layer_sizes=(4,), batch_size=10, max_iter=2, random_state=0)
    seen.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit.fit(X, y)
    np.testing.assert_allclose(seen, np.arange(40) / 20)


# --- the sampled predictive's first layer, drawn from its outputs' exact Gaussian ------


@pytest.mark.parametrize("Est", [NoisyKFACClassifier, NoisyEKFACClassifier, NoisyKFACRegressor])
def test_first_layer_outputs_have_the_weight_samples_moments(Est):
    """Row by row, the first layer's output draws have the mean and covariance of ``a^T W``
    under the posterior's dense covariance: ``eps`` = the unit vectors read the draw's
    linear map ``B_i`` off, and ``B_i B_i^T = J_i Sigma J_i^T`` with ``J_i`` the layer
    output's Jacobian in the weights. The draws of a row do not depend on the other rows."""
    X, y = _data()
    est = (
        _fit(Est, hidden_layer_sizes=(5, 4), max_iter=3)
        if Est is not NoisyKFACRegressor
        else Est(hidden_layer_sizes=(5,), max_iter=3, batch_size=20, random_state=0).fit(X, X[:, 0] + y)
    )
    post = est.posterior_
    Sigma = torch.as_tensor(post.covariance())
    l = post.layers[0]
    Xt = torch.as_tensor(X[:7])
    mean, scale = post.first_layer_moments_t(Xt)
    eye = torch.eye(l.p, dtype=DT)
    draws = post.first_layer_outputs_t((mean, scale), eye)  # (p, m, p): draw s is mean + B_i e_s
    torch.testing.assert_close(post.first_layer_outputs_t((mean, scale), torch.zeros(1, l.p, dtype=DT))[0], mean)
    A = torch.cat([Xt, torch.ones(7, 1, dtype=DT)], 1)
    idx = l.vec_index()  # column-major vec(W): entry (k, j) at j * n + k
    for i in range(7):
        J = torch.zeros(l.p, Sigma.shape[0], dtype=DT)
        for j in range(l.p):
            J[j, idx[j * l.n : (j + 1) * l.n]] = A[i]
        torch.testing.assert_close(mean[i], J @ post.mean_t, rtol=1e-10, atol=1e-12)
        B = (draws[:, i, :] - mean[i]).T  # (p, p): column s is B_i e_s
        torch.testing.assert_close(B @ B.T, J @ Sigma @ J.T, rtol=1e-8, atol=1e-12)
    one = post.first_layer_outputs_t(post.first_layer_moments_t(Xt[2:3]), eye)
    torch.testing.assert_close(one[:, 0], draws[:, 2], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("Est", [NoisyKFACClassifier, NoisyEKFACClassifier])
def test_sampled_predictive_draws_the_first_layer_outputs(monkeypatch, Est):
    """``predictive='sampled'`` draws the first layer's outputs instead of its weights: the
    same predictive as weight samples (agreeing within the Monte Carlo error at 4000
    samples), a row's prediction independent of the other rows, while ``sample_outputs``
    keeps drawing whole weight vectors (their rows share each sample's weights)."""
    X, y = _data(n=120)
    est = Est(hidden_layer_sizes=(8,), max_iter=30, batch_size=20, random_state=0, kl_weight=1.0)
    est.set_params(predictive="sampled", predict_samples=4000).fit(X, y)
    assert est._draws_first_layer(est.posterior_)
    local = est.predict_proba(X[:40])
    np.testing.assert_allclose(est.predict_proba(X[3:5]), local[3:5], rtol=1e-10, atol=1e-12)
    owner = next(c for c in type(est).__mro__ if "_draws_first_layer" in c.__dict__)
    monkeypatch.setattr(owner, "_draws_first_layer", lambda self, posterior: False)
    weights = est.predict_proba(X[:40])
    assert np.abs(local - weights).mean() < 0.01
    assert np.abs(local - weights).max() < 0.06
    monkeypatch.undo()

    def joint_only(*args, **kwargs):
        raise AssertionError("sample_outputs must draw whole weight vectors")

    monkeypatch.setattr(type(est.posterior_), "first_layer_outputs_t", joint_only)
    assert est.sample_outputs(X[:5], n_samples=3).shape == (3, 5, 3)


def test_first_layer_draws_only_where_the_network_starts_with_its_first_block():
    """A network whose first step is an activation (or any custom module off the dense path)
    keeps the weight-sample predictive: the first-layer draws need the rows to reach the
    first block unchanged."""
    X, y = _data()

    def starts_with_tanh(n_in, n_out):
        return nn.Sequential(nn.Tanh(), nn.Linear(n_in, 4), nn.ReLU(), nn.Linear(4, n_out))

    est = NoisyKFACClassifier(module=starts_with_tanh, init="default", max_iter=2, batch_size=20, random_state=0)
    est.set_params(predictive="sampled", predict_samples=20).fit(X, y)
    assert est._forward.spec is not None and not est._draws_first_layer(est.posterior_)
    p = est.predict_proba(X[:5])
    np.testing.assert_allclose(p.sum(1), 1.0)
    np.testing.assert_allclose(est.predict_proba(X[2:4]), p[2:4], rtol=1e-10)
