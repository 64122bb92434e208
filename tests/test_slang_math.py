"""SLANG's update against dense references (paper Sec. 3, App. D)."""

import numpy as np
import pytest
import torch
from torch import nn

import skbayes._curvature.per_example as curv_mod
from skbayes import SLANGClassifier, SLANGRegressor
from skbayes._curvature import GenericCurvature
from skbayes.posteriors.slang import slang_precision_update

DT = torch.float64


def _grad_sequence(D, n, steps, seed=0):
    g = torch.Generator().manual_seed(seed)
    # rows with very different scales, so the top eigenvectors matter
    scales = torch.logspace(0, -2, D, dtype=DT)
    return [torch.randn(n, D, generator=g, dtype=DT) * scales for _ in range(steps)]


@pytest.mark.parametrize("n", [3, 40])  # Gram route (D > L + n) and dense route
def test_diagonal_matches_full_vogn_for_every_rank(n):
    """App. D: diag(U U^T + diag d) equals the full-Gaussian VOGN diagonal at every step."""
    D, steps, beta, lam, scale = 25, 12, 0.2, 0.7, 3.0
    Gs = _grad_sequence(D, n, steps)
    P_full = torch.eye(D, dtype=DT) * 2.0
    states = {L: (torch.zeros(D, L, dtype=DT), torch.full((D,), 2.0, dtype=DT)) for L in (0, 1, 4, 10, D, D + 5)}
    for G in Gs:
        P_full = (1 - beta) * P_full + beta * (scale * G.T @ G + lam * torch.eye(D, dtype=DT))
        for L, (U, d) in states.items():
            U, d = slang_precision_update(U, d, GenericCurvature(G), scale, beta, lam, L)
            states[L] = (U, d)
            diag = (U * U).sum(1) + d
            torch.testing.assert_close(diag, torch.diag(P_full), rtol=1e-10, atol=1e-10)
            assert torch.all(d > 0)
            assert U.shape == (D, min(L, D))
    # rank >= D holds the whole matrix
    for L in (D, D + 5):
        U, d = states[L]
        torch.testing.assert_close(U @ U.T + torch.diag(d), P_full, rtol=1e-9, atol=1e-9)


def test_low_rank_part_is_top_eigenspace():
    """U_new U_new^T is the best rank-L approximation of (1-beta) U U^T + beta * scale * G^T G."""
    D, n, L, beta, scale = 30, 6, 3, 0.3, 2.0
    G = _grad_sequence(D, n, 1, seed=3)[0]
    U0 = torch.randn(D, L, generator=torch.Generator().manual_seed(9), dtype=DT)
    d0 = torch.ones(D, dtype=DT)
    U, d = slang_precision_update(U0, d0, GenericCurvature(G), scale, beta, 1.0, L)
    T = (1 - beta) * U0 @ U0.T + beta * scale * G.T @ G
    ev, Q = torch.linalg.eigh(T)
    best = Q[:, -L:] @ torch.diag(ev[-L:]) @ Q[:, -L:].T
    torch.testing.assert_close(U @ U.T, best, rtol=1e-9, atol=1e-9)


def test_large_batch_update_by_subspace_iteration():
    """With L + n above linalg.EXACT_EIG_MAX (here 8 + 200) the top-L eigenpairs come from
    the warm-started subspace iteration. On a hard sequence (fresh random gradients every
    step, a slowly decaying spectrum, an eigenvalue gap of 2% at the first step): the
    precision's diagonal stays the full VOGN one exactly (the diagonal correction),
    U U^T never exceeds the step's target T (so the correction is >= 0), and the rank-L
    approximation is within 1e-3 of the best one in captured trace and Frobenius error."""
    import skbayes._linalg as linalg

    D, n, L, steps, beta, lam, scale = 400, 200, 8, 6, 0.05, 0.7, 3.0
    assert L + n > linalg.EXACT_EIG_MAX
    U, d = torch.zeros(L, D, dtype=DT).T, torch.full((D,), 2.0, dtype=DT)
    diag_full = torch.full((D,), 2.0, dtype=DT)
    for G in _grad_sequence(D, n, steps, seed=5):
        diag_full = (1 - beta) * diag_full + beta * (scale * (G * G).sum(0) + lam)
        T = (1 - beta) * U @ U.T + beta * scale * G.T @ G
        U, d = slang_precision_update(U, d, GenericCurvature(G), scale, beta, lam, L)
        torch.testing.assert_close((U * U).sum(1) + d, diag_full, rtol=1e-12, atol=0)
        ev, Q = torch.linalg.eigh(T)
        assert float(torch.linalg.eigvalsh(T - U @ U.T)[0]) > -1e-10 * float(ev[-1])
        assert -1e-9 < 1 - float((U * U).sum() / ev[-L:].sum()) < 1e-3
        best = Q[:, -L:] @ torch.diag(ev[-L:]) @ Q[:, -L:].T
        excess = float(torch.linalg.matrix_norm(T - U @ U.T) / torch.linalg.matrix_norm(T - best)) - 1
        assert -1e-9 < excess < 1e-3


class _Recorder:
    """Wraps the curvature routine to record every step's (theta, X, y) and the state before it."""

    def __init__(self, monkeypatch, est):
        self.calls = []
        self.est = est
        for name in ("dense_curvature", "generic_curvature"):
            orig = getattr(curv_mod, name)
            monkeypatch.setattr(curv_mod, name, self._wrap(orig))

    def _wrap(self, orig):
        def f(*args):
            theta, X, y = args[-4], args[-3], args[-2]
            p = self.est.posterior_
            self.calls.append(
                dict(
                    theta=theta.clone(),
                    X=X.clone(),
                    y=y.clone(),
                    mean=p.mean_t.clone(),
                    U=p.U_t.clone(),
                    d=p.d_t.clone(),
                )
            )
            return orig(*args)

        return f


def _per_example_grads(theta, X, y):
    """Reference per-example gradients of Bernoulli logistic regression, one backward each."""
    D = theta.shape[0]
    rows = []
    for i in range(X.shape[0]):
        th = theta.clone().requires_grad_(True)
        z = X[i] @ th[: D - 1] + th[D - 1]
        loss = torch.nn.functional.softplus(z) - y[i] * z
        (g,) = torch.autograd.grad(loss, th)
        rows.append(g)
    return torch.stack(rows)


def _logreg_data():
    rng = np.random.RandomState(0)
    X = rng.randn(60, 4)
    y = (X @ np.array([1.0, -2.0, 0.5, 0.0]) + 0.3 * rng.randn(60) > 0).astype(int)
    return X, y


@pytest.mark.parametrize("momentum, damping", [(0.0, 0.0), (0.9, 0.0), (0.9, 0.05)])
def test_full_rank_reproduces_dense_vogn_step_for_step(monkeypatch, momentum, damping):
    """Dense VOGN (eq. 2) replayed step for step; with ``damping`` the mean step solves
    with ``P + N gamma I`` (extrinsic damping) while the precision is untouched."""
    X, y = _logreg_data()
    N, D = X.shape[0], X.shape[1] + 1
    lam, alpha, beta, S = 0.5, 0.1, 0.2, 3
    est = SLANGClassifier(
        decay_epochs=None,  # the paper's constant steps
        kl_weight=1.0,  # and its untempered ELBO
        hidden_layer_sizes=(),
        rank=D,
        prior_precision=lam,
        learning_rate=alpha,
        beta=beta,
        momentum=momentum,
        damping=damping,
        mc_samples=S,
        batch_size=16,
        max_iter=3,
        tol=0,
        n_iter_no_change=100,
        random_state=0,
    )
    rec = _Recorder(monkeypatch, est)
    with pytest.warns(Warning):
        est.fit(X, y)
    assert len(rec.calls) == 3 * 4
    # Dense VOGN (eq. 2) replayed on the recorded samples and minibatches.
    first = rec.calls[0]
    mu = first["mean"].clone()
    P = first["U"] @ first["U"].T + torch.diag(first["d"])
    m = torch.zeros(D, dtype=DT)
    for t, c in enumerate(rec.calls):
        torch.testing.assert_close(c["mean"], mu, rtol=1e-8, atol=1e-10)
        torch.testing.assert_close(c["U"] @ c["U"].T + torch.diag(c["d"]), P, rtol=1e-8, atol=1e-8)
        M = c["X"].shape[0]
        G = torch.cat([_per_example_grads(th, c["X"], c["y"]) for th in c["theta"]])
        scale = N / (M * S)
        P = (1 - beta) * P + beta * (scale * G.T @ G + lam * torch.eye(D, dtype=DT))
        m = momentum * m + (1 - momentum) * scale * G.sum(0)
        m_hat = m / (1 - momentum ** (t + 1))
        mu = mu - alpha * torch.linalg.solve(P + N * damping * torch.eye(D, dtype=DT), m_hat + lam * mu)
    p = est.posterior_
    torch.testing.assert_close(p.mean_t, mu, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(p.precision(), P.numpy(), rtol=1e-8, atol=1e-8)
    np.testing.assert_allclose(p.covariance(), torch.linalg.inv(P).numpy(), rtol=1e-7, atol=1e-10)


def test_rank_zero_reproduces_mean_field_vogn_step_for_step(monkeypatch):
    X, y = _logreg_data()
    N, D = X.shape[0], X.shape[1] + 1
    lam, alpha, beta, S = 0.5, 0.1, 0.2, 2
    est = SLANGClassifier(
        decay_epochs=None,  # the paper's constant steps
        kl_weight=1.0,  # and its untempered ELBO
        hidden_layer_sizes=(),
        rank=0,
        prior_precision=lam,
        learning_rate=alpha,
        beta=beta,
        momentum=0.0,
        mc_samples=S,
        batch_size=20,
        max_iter=2,
        tol=0,
        n_iter_no_change=100,
        random_state=1,
    )
    rec = _Recorder(monkeypatch, est)
    with pytest.warns(Warning):
        est.fit(X, y)
    # Mean-field VOGN in the poster's notation: precision N s + lam, s an EMA of mean squared gradients.
    first = rec.calls[0]
    s = (first["d"] - lam) / N
    mu = first["mean"].clone()
    for c in rec.calls:
        torch.testing.assert_close(c["d"], N * s + lam, rtol=1e-10, atol=1e-10)
        torch.testing.assert_close(c["mean"], mu, rtol=1e-9, atol=1e-11)
        # the sampler of a diagonal Gaussian: theta - mu is eps / sqrt(N s + lam)
        M = c["X"].shape[0]
        G = torch.cat([_per_example_grads(th, c["X"], c["y"]) for th in c["theta"]])
        s = (1 - beta) * s + beta * (G**2).sum(0) / (M * S)
        g_mean = G.sum(0) / (M * S)  # minibatch-mean gradient of the NLL
        # the mean step's extrinsic damping (default 0.01) is added per example, precision untouched
        mu = mu - alpha * (g_mean + lam * mu / N) / (s + lam / N + est.damping)
    assert est.damping == 0.01
    torch.testing.assert_close(est.posterior_.mean_t, mu, rtol=1e-9, atol=1e-11)
    torch.testing.assert_close(est.posterior_.d_t, N * s + lam, rtol=1e-10, atol=1e-10)
    assert est.posterior_.U.shape == (D, 0)


class _Wrapped(nn.Module):
    """Same network as the built MLP, hidden from the dense path (forces torch.func vmap)."""

    def __init__(self, n_in, n_out):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(n_in, 6), nn.Tanh(), nn.Linear(6, n_out))

    def forward(self, x):
        return self.net(x)


def _seq(n_in, n_out):
    return nn.Sequential(nn.Linear(n_in, 6), nn.Tanh(), nn.Linear(6, n_out))


@pytest.mark.parametrize("Est", [SLANGRegressor, SLANGClassifier])
def test_dense_and_generic_paths_train_identically(Est):
    rng = np.random.RandomState(2)
    X = rng.randn(50, 3)
    y = X[:, 0] - X[:, 1] ** 2 + 0.1 * rng.randn(50)
    if Est is SLANGClassifier:
        y = np.digitize(y, [-1.0, 0.0])  # three classes
    kw = dict(rank=3, mc_samples=2, batch_size=10, max_iter=3, tol=0, n_iter_no_change=100, random_state=0)
    with pytest.warns(Warning):
        a = Est(module=_seq, **kw).fit(X, y)
    with pytest.warns(Warning):
        b = Est(module=_Wrapped, **kw).fit(X, y)
    np.testing.assert_allclose(a.posterior_.mean, b.posterior_.mean, rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(a.posterior_.precision(), b.posterior_.precision(), rtol=1e-8, atol=1e-8)
    pa = a.predict_proba(X) if Est is SLANGClassifier else a.predict(X)
    pb = b.predict_proba(X) if Est is SLANGClassifier else b.predict(X)
    np.testing.assert_allclose(pa, pb, rtol=1e-9, atol=1e-12)


def test_sampled_weights_are_mean_plus_noise(monkeypatch):
    """The network is evaluated at theta = mu + eps (not 2 mu + eps as in the reference code)."""
    X, y = _logreg_data()
    est = SLANGClassifier(hidden_layer_sizes=(), rank=2, mc_samples=4000, batch_size=60, max_iter=1, random_state=0)
    rec = _Recorder(monkeypatch, est)
    with pytest.warns(Warning):
        est.fit(X, y)
    c = rec.calls[0]
    emp = c["theta"].mean(0)
    sd = torch.sqrt(torch.diag(torch.linalg.inv(c["U"] @ c["U"].T + torch.diag(c["d"]))))
    assert torch.all((emp - c["mean"]).abs() < 5 * sd / np.sqrt(4000))
    # and the model's forward at the recorded theta uses exactly those weights
    from skbayes._networks import DenseSpec

    Xt = torch.as_tensor(X[:5])
    z = Xt @ c["theta"][0, :-1] + c["theta"][0, -1]
    f = DenseSpec(est.module_, est._forward.layout).forward(c["theta"][:1], Xt)[0, :, 0]
    torch.testing.assert_close(f, z, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("n", [3, 40])
def test_cached_factor_statistics_give_the_same_update(n):
    """The cache of diag(U U^T) and U^T U carried between steps changes nothing."""
    D, L = 25, 4
    Gs = _grad_sequence(D, n, 5, seed=7)
    U1 = U2 = torch.zeros(L, D, dtype=DT).T
    d1 = d2 = torch.full((D,), 2.0, dtype=DT)
    cache = {}
    for G in Gs:
        U1, d1 = slang_precision_update(U1, d1, GenericCurvature(G), 3.0, 0.2, 0.7, L)
        U2, d2 = slang_precision_update(U2, d2, GenericCurvature(G), 3.0, 0.2, 0.7, L, cache=cache)
        torch.testing.assert_close(U2 @ U2.T, U1 @ U1.T, rtol=1e-10, atol=1e-10)
        torch.testing.assert_close(d2, d1, rtol=1e-10, atol=1e-10)
        torch.testing.assert_close(cache["gram"], U2.T @ U2, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("n", [3, 40])
def test_chunked_pass_buffer_and_scaled_gram(monkeypatch, n):
    """The fused chunked pass (several chunks), a caller-supplied output buffer and the
    returned U^T diag(d)^-1 U agree with an unchunked update and with dense formulas."""
    import skbayes.posteriors.slang as lr

    D, L = 25, 4
    Gs = _grad_sequence(D, n, 4, seed=11)
    U1 = U2 = torch.zeros(L, D, dtype=DT).T
    d1 = d2 = torch.full((D,), 2.0, dtype=DT)
    for G in Gs:
        cache = {}
        U1, d1 = slang_precision_update(U1, d1, GenericCurvature(G), 3.0, 0.2, 0.7, L)
        monkeypatch.setattr(lr, "_CHUNK", 7)  # 4 chunks, the last one short
        buf = torch.full((L, D), float("nan"), dtype=DT)  # garbage must not leak in
        U2n, d2 = slang_precision_update(U2, d2, GenericCurvature(G), 3.0, 0.2, 0.7, L, cache=cache, out=buf)
        monkeypatch.setattr(lr, "_CHUNK", 32768)
        if D > L + n:
            assert U2n.T.data_ptr() == buf.data_ptr()  # built in the buffer
        U2 = U2n
        torch.testing.assert_close(U2 @ U2.T, U1 @ U1.T, rtol=1e-10, atol=1e-10)
        torch.testing.assert_close(d2, d1, rtol=1e-10, atol=1e-10)
        torch.testing.assert_close(cache["scaled_gram"], U2.T @ (U2 / d2[:, None]), rtol=1e-10, atol=1e-12)
        torch.testing.assert_close(cache["row_sq"], (U2 * U2).sum(1), rtol=1e-10, atol=1e-12)


def test_spare_factor_never_aliases_and_is_not_pickled():
    import pickle

    from skbayes.posteriors import LowRankGaussian

    D, L = 12, 3
    g = torch.Generator().manual_seed(0)
    mk = lambda: torch.randn(L, D, generator=g, dtype=DT).T  # noqa: E731
    post = LowRankGaussian(torch.zeros(D, dtype=DT), mk(), torch.ones(D, dtype=DT))
    assert post.spare_factor(L) is None  # nothing replaced yet
    first = post.U_t
    post.set_factors(mk(), torch.ones(D, dtype=DT))
    assert pickle.loads(pickle.dumps(post)).spare_factor(L) is None
    sp = post.spare_factor(L)
    assert sp is not None and sp.data_ptr() == first.T.data_ptr() != post.U_t.data_ptr()
    assert post.spare_factor(L) is None  # handed out once
    assert post.spare_factor(L + 1) is None


def test_fit_through_the_subspace_iteration_matches_the_exact_fit(monkeypatch):
    """A whole fit at a minibatch of 200 (Gram matrices of 208 rows: the subspace-iteration
    route) gives the posterior and predictions of the same fit with the exact eigh, to
    rounding-level differences, on real data."""
    from sklearn.datasets import load_breast_cancer
    from sklearn.preprocessing import StandardScaler

    import skbayes._linalg as linalg

    X, y = load_breast_cancer(return_X_y=True)
    X = StandardScaler().fit_transform(X)

    def fit():
        return SLANGClassifier(batch_size=200, max_iter=5, random_state=0).fit(X, y)

    fast = fit()
    monkeypatch.setattr(linalg, "EXACT_EIG_MAX", 10**9)
    exact = fit()
    P_fast = fast.posterior_.U @ fast.posterior_.U.T
    P_exact = exact.posterior_.U @ exact.posterior_.U.T
    assert np.abs(P_fast - P_exact).max() < 1e-6 * np.abs(P_exact).max()
    np.testing.assert_allclose(fast.posterior_.mean, exact.posterior_.mean, rtol=0, atol=1e-6)
    np.testing.assert_allclose(fast.predict_proba(X), exact.predict_proba(X), rtol=0, atol=1e-6)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("rank", [0, 3])
def test_decay_epochs_scales_both_step_sizes(rank):
    """A step taken ``e`` epochs in with ``decay_epochs=E`` is, exactly, the constant-step
    update with ``learning_rate`` and ``beta`` divided by ``1 + e / E``."""
    import copy

    from conftest import step_context
    from sklearn.datasets import load_iris
    from sklearn.preprocessing import StandardScaler

    X, y = load_iris(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    kw = dict(hidden_layer_sizes=(4,), rank=rank, max_iter=1, batch_size=50, random_state=0, beta=0.05)
    est = SLANGClassifier(decay_epochs=None, **kw).fit(X, y)
    Xb = est._tensor(X[:50])
    yb = est._target_tensor(np.searchsorted(est.classes_, y[:50]))
    epoch, E = 1.5, 0.5
    slow = 1.0 + epoch / E
    results = []
    for params in (dict(decay_epochs=E), dict(decay_epochs=None, learning_rate=0.01 / slow, beta=0.05 / slow)):
        twin = copy.deepcopy(est).set_params(**params)
        family, ctx = step_context(twin, torch.Generator().manual_seed(3), float(len(X)))
        ctx.epoch = epoch
        post, state = copy.deepcopy(est.posterior_), copy.deepcopy(est._state)
        family.step(post, state, Xb, yb, ctx)
        results.append((post.mean_t, post.U_t, post.d_t))
    for a, b in zip(*results):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-14)


def test_true_fisher_rows_are_gradients_at_sampled_targets_and_unbiased_for_gauss_newton():
    """``fisher='true'``: ``grad_sum`` is the observed targets' gradient, every curvature
    quantity that of targets drawn from the model, and over draws ``E[sq_sum]`` is the
    Gauss-Newton diagonal ``tau sum_i (d f_i / d theta)^2`` (dense Jacobian reference)."""
    rng = np.random.RandomState(0)
    X, y = rng.normal(size=(6, 3)), rng.normal(size=6)
    est = SLANGRegressor(hidden_layer_sizes=(4,), max_iter=1, random_state=0).fit(X, y)
    fwd, lik = est._forward, est._likelihood
    theta = est.posterior_.mean_t[None].clone()
    Xt, yt = est._tensor(X), torch.as_tensor(est._encode_targets(y))
    observed, _, f = curv_mod.per_example_curvature(fwd, theta, Xt, yt, lik)
    gen = torch.Generator().manual_seed(1)
    curv, _, _ = curv_mod.per_example_curvature(fwd, theta, Xt, yt, lik, fisher="true", generator=gen)
    torch.testing.assert_close(curv.grad_sum(), observed.grad_sum(), rtol=0, atol=0)
    drawn = lik.sample(f.detach(), torch.Generator().manual_seed(1))[0]  # the same draw
    sampled, _, _ = curv_mod.per_example_curvature(fwd, theta, Xt, drawn, lik)
    torch.testing.assert_close(curv.sq_sum(), sampled.sq_sum(), rtol=1e-12, atol=0)
    torch.testing.assert_close(curv.gram(), sampled.gram(), rtol=1e-12, atol=0)
    torch.testing.assert_close(curv.dense(), sampled.dense(), rtol=1e-12, atol=0)
    # unbiased for the Gauss-Newton diagonal
    J = torch.func.jacrev(lambda t: fwd(t[None], Xt)[0, :, 0])(theta[0])  # (n, D)
    tau = float(lik.noise.tau_mean)
    ggn = tau * (J * J).sum(0)
    draws = torch.stack(
        [
            curv_mod.per_example_curvature(fwd, theta, Xt, yt, lik, fisher="true", generator=gen)[0].sq_sum()
            for _ in range(4000)
        ]
    )
    mean, se = draws.mean(0), draws.std(0) / np.sqrt(len(draws))
    live = ggn > 1e-8 * ggn.max()
    assert torch.all((mean - ggn).abs()[live] <= 6 * se[live] + 1e-12)


def test_true_fisher_fits_a_training_row_far_outside_the_others():
    """One training row 38 standard deviations out along an input the target saturates in:
    the i-BLM start extrapolates to about 44 there (the target is 3.3). With the empirical
    Fisher that row's curvature grows with its squared residual and SLANG leaves it unfitted
    (prediction 45.5, noise std 1.2 against the true 0.3); with ``fisher='true'`` it fits the
    row and learns the noise."""
    rng = np.random.RandomState(0)
    X = rng.normal(size=(1500, 5))
    X[0, 2] = 38.0
    y = np.sin(X[:, 0]) + X[:, 1] + 2.0 * np.tanh(X[:, 2]) + 0.3 * rng.normal(size=1500)
    est = SLANGRegressor(fisher="true", random_state=0).fit(X, y)
    assert abs(est.predict(X[:1])[0] - y[0]) < 1.0
    assert 0.25 < est.noise_std_ < 0.4


def test_true_fisher_needs_one_weight_sample_per_step():
    X = np.random.RandomState(0).normal(size=(20, 3))
    with pytest.raises(ValueError, match="fisher='true' .* needs mc_samples=1, got mc_samples=2"):
        SLANGRegressor(fisher="true", mc_samples=2, max_iter=2).fit(X, X[:, 0])
