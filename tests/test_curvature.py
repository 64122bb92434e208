"""Per-example gradients: fast dense-layer path vs torch.func vmap path vs a loop."""

import pytest
import torch
from torch import nn

from skbayes._curvature import dense_curvature, generic_curvature
from skbayes._likelihoods import Bernoulli, Categorical, Gaussian, GaussianNoise
from skbayes._networks import DenseSpec, ParamLayout

DT = torch.float64


def _net(with_bias_free=False):
    torch.manual_seed(0)
    layers = [nn.Linear(4, 5), nn.Tanh(), nn.Linear(5, 3, bias=not with_bias_free), nn.ReLU(), nn.Linear(3, 3)]
    return nn.Sequential(*layers).to(DT)


def _lik_and_y(kind, M, g):
    if kind == "gaussian":
        return Gaussian(GaussianNoise(tau=2.5, learn=False)), torch.randn(M, generator=g, dtype=DT), 1
    if kind == "bernoulli":
        return Bernoulli(), torch.randint(0, 2, (M,), generator=g).to(DT), 1
    return Categorical(3), torch.randint(0, 3, (M,), generator=g), 3


def _setup(kind, bias_free=False, S=2, M=7):
    g = torch.Generator().manual_seed(1)
    lik, y, n_out = _lik_and_y(kind, M, g)
    net = _net(bias_free)
    if n_out == 1:
        net[-1] = nn.Linear(3, 1).to(DT)
    layout = ParamLayout(net)
    theta = layout.flatten_module(net)[None] + 0.3 * torch.randn(S, layout.size, generator=g, dtype=DT)
    X = torch.randn(M, 4, generator=g, dtype=DT)
    return net, layout, theta, X, y, lik


def _loop_gradients(net, layout, theta, X, y, lik):
    """Reference: one backward pass per (sample, example)."""
    rows = []
    for s in range(theta.shape[0]):
        for i in range(X.shape[0]):
            layout.load_into(net, theta[s])
            net.zero_grad()
            loss = lik.nll(net(X[i : i + 1]), y[i : i + 1]).sum()
            loss.backward()
            rows.append(torch.cat([p.grad.reshape(-1) for p in net.parameters()]))
    return torch.stack(rows)


@pytest.mark.parametrize("kind", ["gaussian", "bernoulli", "categorical"])
@pytest.mark.parametrize("bias_free", [False, True])
def test_dense_path_equals_loop_and_vmap(kind, bias_free):
    net, layout, theta, X, y, lik = _setup(kind, bias_free)
    G_ref = _loop_gradients(net, layout, theta.clone(), X, y, lik)
    spec = DenseSpec(net, layout)
    dc, nll_d, f_d = dense_curvature(spec, theta, X, y, lik)
    gc, nll_g, f_g = generic_curvature(net, layout, theta, X, y, lik)
    tol = dict(rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(dc.dense(), G_ref, **tol)
    torch.testing.assert_close(gc.dense(), G_ref, **tol)
    torch.testing.assert_close(nll_d, nll_g, **tol)
    torch.testing.assert_close(f_d, f_g, **tol)
    # Every product the posterior updates use, against the explicit matrix.
    g = torch.Generator().manual_seed(5)
    U = torch.randn(layout.size, 3, generator=g, dtype=DT)
    V = torch.randn(G_ref.shape[0], 4, generator=g, dtype=DT)
    for c in (dc, gc):
        torch.testing.assert_close(c.grad_sum(), G_ref.sum(0), **tol)
        torch.testing.assert_close(c.sq_sum(), (G_ref**2).sum(0), **tol)
        torch.testing.assert_close(c.gram(), G_ref @ G_ref.T, **tol)
        torch.testing.assert_close(c.project(U), G_ref @ U, **tol)
        torch.testing.assert_close(c.combine(V), G_ref.T @ V, **tol)
        # in place: beta=0 ignores whatever the buffer held (NaN included), beta=1 accumulates
        out = torch.full((V.shape[1], layout.size), float("nan"), dtype=DT)
        torch.testing.assert_close(c.combine_into_(V, out, beta=0.0), (G_ref.T @ V).T, **tol)
        c.combine_into_(V, out, beta=1.0)
        torch.testing.assert_close(out, 2 * (G_ref.T @ V).T, **tol)


def test_empirical_fisher_equals_loop_of_outer_products():
    """N/(MS) sum_i g_i g_i^T built from the curvature batch equals the explicit loop."""
    net, layout, theta, X, y, lik = _setup("categorical")
    N, (S, M) = 100, (theta.shape[0], X.shape[0])
    dc, _, _ = dense_curvature(DenseSpec(net, layout), theta, X, y, lik)
    G = dc.dense()
    F = (N / (M * S)) * G.T @ G
    F_ref = torch.zeros(layout.size, layout.size, dtype=DT)
    for row in _loop_gradients(net, layout, theta.clone(), X, y, lik):
        F_ref += torch.outer(row, row)
    F_ref *= N / (M * S)
    torch.testing.assert_close(F, F_ref, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(torch.diag(F), (N / (M * S)) * dc.sq_sum(), rtol=1e-10, atol=1e-12)


def test_dense_spec_detection():
    assert DenseSpec.supports(_net())
    assert not DenseSpec.supports(nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2)))
    assert not DenseSpec.supports(nn.Sequential(nn.Linear(2, 2), nn.PReLU()))  # parameterised activation

    class Wrapped(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = _net()

        def forward(self, x):
            return self.inner(x)

    assert not DenseSpec.supports(Wrapped())
