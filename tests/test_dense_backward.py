"""The hand-written backward pass of dense networks against torch.autograd.

``DenseSpec.forward_tape`` / ``backward`` / ``weight_grads`` and the likelihoods'
``nll_grad`` replace autograd on the training path of every family on dense networks;
they use the operations autograd uses (the same numbers as autograd through the batched
forward pass; against the module's own forward here, so the tolerances are a few ulps).
"""

import pytest
import torch
from torch import nn

from skbayes._likelihoods import Bernoulli, Categorical, Gaussian, GaussianNoise, nll_grad
from skbayes._networks import DenseSpec, ParamLayout
from skbayes._networks.dense import materialise_delta

#: Longest reduction in these comparisons: the weight gradients sum over the 40 rows (and the
#: backward pass over at most 9 units), so a result may differ from autograd's by the rounding of
#: a sum of that many terms, whose order depends on the CPU's vector width (AVX2 vs AVX-512).
N_REDUCE = 50


def _close(a, b):
    """``a`` equals ``b`` up to the rounding of an ``N_REDUCE``-term sum in their dtype:
    ``|a - b| <= N_REDUCE eps (|b| + max |b|)`` (a worst-case summation bound, elementwise
    relative plus absolute at the scale of the tensor)."""
    eps = torch.finfo(b.dtype).eps
    scale = float(b.abs().max()) if b.numel() else 0.0
    torch.testing.assert_close(a, b, rtol=N_REDUCE * eps, atol=N_REDUCE * eps * max(scale, 1e-30))


ARCHS = {
    "relu": lambda: [nn.Linear(6, 9), nn.ReLU(), nn.Linear(9, 4)],
    "tanh-sigmoid": lambda: [nn.Linear(6, 9), nn.Tanh(), nn.Linear(9, 5, bias=False), nn.Sigmoid(), nn.Linear(5, 4)],
    # activations without a closed-form derivative here (autograd), two in a row, one first
    "gelu-elu": lambda: [nn.Linear(6, 9), nn.GELU(), nn.ELU(), nn.Linear(9, 4)],
    "act-first": lambda: [nn.Tanh(), nn.Linear(6, 9), nn.Identity(), nn.ReLU(), nn.Linear(9, 4)],
    "relu-after-act": lambda: [nn.Linear(6, 9), nn.LeakyReLU(0.1), nn.ReLU(), nn.Linear(9, 4), nn.Sigmoid()],
}


def _net(arch, dtype):
    torch.manual_seed(0)
    net = nn.Sequential(*ARCHS[arch]()).to(dtype)
    return net, ParamLayout(net)


def _autograd_reference(net, layout, theta, X, lik, y, g):
    """The module itself under autograd, one weight sample at a time: outputs, nll, the
    gradients with respect to every Linear output (forward hooks), with respect to theta,
    and the Linear layers' inputs."""
    fs, nlls, deltas, Gs, inputs = [], [], [], [], []
    for th in theta:
        layout.load_into(net, th)
        net.zero_grad()
        captured = []
        hooks = [
            m.register_forward_hook(lambda mod, inp, out, c=captured: c.append((inp[0].detach(), out)))
            for m in net
            if isinstance(m, nn.Linear)
        ]
        try:
            with torch.enable_grad():
                f = net(X)
                nll = lik.nll(f, y)
                loss = nll.sum() if g is None else (nll * g).sum()
                deltas.append(torch.autograd.grad(loss, [c[1] for c in captured], retain_graph=True))
                loss.backward()
        finally:
            for h in hooks:
                h.remove()
        fs.append(f.detach())
        nlls.append(nll.detach())
        Gs.append(torch.cat([p.grad.reshape(-1) for p in net.parameters()]))
        inputs.append([c[0] for c in captured])
    stack = lambda parts: [torch.stack(p) for p in zip(*parts)]  # noqa: E731
    return torch.stack(fs), torch.stack(nlls), stack(deltas), torch.stack(Gs), stack(inputs)


@pytest.mark.parametrize("arch", sorted(ARCHS))
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("S", [1, 3])
def test_backward_equals_autograd(arch, dtype, S):
    net, layout = _net(arch, dtype)
    spec = DenseSpec(net, layout)
    gen = torch.Generator().manual_seed(1)
    theta = torch.randn(S, layout.size, generator=gen, dtype=dtype)
    X = torch.randn(40, 6, generator=gen, dtype=dtype)
    X_before = X.clone()
    y = torch.randint(0, 4, (40,), generator=gen)
    w = torch.rand(40, generator=gen, dtype=dtype)
    lik = Categorical(4)
    for g in (None, w):
        f_ref, nll_ref, d_ref, G_ref, A_ref = _autograd_reference(net, layout, theta, X, lik, y, g)
        f, tape = spec.forward_tape(theta, X)
        nll, df = nll_grad(lik, f, y, g)
        deltas = spec.backward(tape, df)
        G = spec.weight_grads(tape, deltas, torch.full_like(theta, float("nan")))
        _close(f, f_ref)
        _close(nll, nll_ref)
        assert len(deltas) == len(d_ref) == len(spec.linears)
        for a, b in zip(deltas, d_ref):
            _close(a, b)
        _close(G, G_ref)
        for a, b in zip(spec.linear_inputs(tape), A_ref):  # the inputs of the Linear layers
            _close(a, b)
    assert torch.equal(X, X_before)  # in-place activations never touch the caller's rows
    assert not f.requires_grad and not any(d.requires_grad for d in deltas)


def _likelihoods(dtype, M, gen):
    noise = GaussianNoise(learn=True)
    noise.a, noise.b = 7.3, 2.1
    return [
        (Gaussian(noise), torch.randn(3, M, 1, generator=gen, dtype=dtype), torch.randn(M, generator=gen, dtype=dtype)),
        (
            Gaussian(GaussianNoise(tau=0.3, learn=False)),
            torch.randn(3, M, 1, generator=gen, dtype=dtype),
            torch.randn(M, generator=gen, dtype=dtype),
        ),
        # logits beyond softplus's threshold of 20 as well
        (
            Bernoulli(),
            15 * torch.randn(3, M, 1, generator=gen, dtype=dtype),
            torch.randint(0, 2, (M,), generator=gen).to(dtype),
        ),
        (
            Categorical(4),
            10 * torch.randn(3, M, 4, generator=gen, dtype=dtype),
            torch.randint(0, 4, (M,), generator=gen),
        ),
    ]


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_likelihood_gradients_equal_autograd(dtype):
    gen = torch.Generator().manual_seed(2)
    M = 30
    weights = [None, torch.rand(M, generator=gen, dtype=dtype), torch.rand(3, M, generator=gen, dtype=dtype)]
    for lik, f, y in _likelihoods(dtype, M, gen):
        f_before = f.clone()
        for g in weights:
            with torch.enable_grad():
                fr = f.clone().requires_grad_(True)
                nll_ref = lik.nll(fr, y)
                (df_ref,) = torch.autograd.grad(nll_ref.sum() if g is None else (nll_ref * g).sum(), fr)
            nll, df = lik.nll_grad(f, y, g)
            _close(nll, nll_ref.detach())
            _close(df, df_ref)
            # the closed forms the operations evaluate
            if isinstance(lik, Categorical):
                closed = torch.softmax(f, -1) - nn.functional.one_hot(y, 4).to(dtype)
            elif isinstance(lik, Bernoulli):
                closed = torch.sigmoid(f) - y[:, None]
            else:
                closed = lik.noise.tau_mean * (f - y[:, None])
            if g is not None:
                closed = closed * g[..., None]
            torch.testing.assert_close(df, closed, rtol=1e-5 if dtype == torch.float32 else 1e-12, atol=1e-6)
        assert torch.equal(f, f_before)


def test_likelihood_without_nll_grad_goes_through_autograd():
    class Laplace:  # a likelihood the hand-written path does not know
        def nll(self, f, y):
            return (f[..., 0] - y).abs() + 0.1 * f[..., 0] ** 2

    gen = torch.Generator().manual_seed(3)
    f = torch.randn(2, 9, 1, generator=gen, dtype=torch.float64)
    y = torch.randn(9, generator=gen, dtype=torch.float64)
    g = torch.rand(9, generator=gen, dtype=torch.float64)
    nll, df = nll_grad(Laplace(), f, y, g)
    torch.testing.assert_close(nll, (f[..., 0] - y).abs() + 0.1 * f[..., 0] ** 2)
    torch.testing.assert_close(df[..., 0], g * (torch.sign(f[..., 0] - y) + 0.2 * f[..., 0]))
    assert not nll.requires_grad and not df.requires_grad


@pytest.mark.parametrize("arch", sorted(ARCHS) + ["linear-linear"])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("masked", [False, True], ids=["plain", "masked"])
def test_output_deltas_equal_backward_of_each_output_direction(arch, dtype, masked):
    """``output_deltas`` (the per-row Jacobian of the outputs with respect to every Linear
    layer's output, factored as ``P_j diag(d_j)``) against :meth:`backward` of each unit
    output direction, on networks whose last step is a Linear layer (the identity), an
    activation, or whose Linear layers follow each other; with a mask on a layer's input."""
    if arch == "linear-linear":
        torch.manual_seed(0)
        net = nn.Sequential(nn.Linear(6, 9), nn.ReLU(), nn.Linear(9, 5), nn.Linear(5, 4)).to(dtype)
        layout = ParamLayout(net)
    else:
        net, layout = _net(arch, dtype)
    spec = DenseSpec(net, layout)
    gen = torch.Generator().manual_seed(3)
    theta = torch.randn(1, layout.size, generator=gen, dtype=dtype)
    X = torch.randn(40, 6, generator=gen, dtype=dtype)
    last = [n for n, m in zip(spec.names, net) if isinstance(m, nn.Linear)][-1]
    masks = {last: lambda h: (torch.rand(h.shape, generator=gen, dtype=h.dtype) < 0.7).to(h.dtype) / 0.7}
    f, tape = spec.forward_tape(theta, X, masks if masked else None)
    k = f.shape[-1]
    deltas = spec.output_deltas(tape)
    assert len(deltas) == len(spec.linears)
    ref = [spec.backward(tape, torch.eye(k, dtype=dtype)[c].expand(1, 40, k)) for c in range(k)]
    for layer, (P, d) in enumerate(deltas):
        got = materialise_delta(P, d, 40, f)
        want = torch.stack([r[layer][0] for r in ref], 1)  # (m, k, o)
        _close(got, want)
    # the last layer's Jacobian is the identity exactly when nothing follows it
    assert (deltas[-1] == (None, None)) == isinstance(net[-1], nn.Linear)
