"""Kronecker-factored curvature and posteriors (noisy K-FAC, noisy EK-FAC).

Each ``nn.Linear`` / ``nn.Conv2d`` layer ``l`` is a block; the bias is folded in
as a homogeneous coordinate. A layer's weights form the matrix ``W`` of shape
``(n, p)``: ``n = n_in (+1)`` inputs (for a conv layer ``n_in = C kh kw``
patch entries), ``p`` outputs, ``W[:n_in] = weight.reshape(p, n_in).T`` and
``W[n_in] = bias``. ``vec`` stacks the columns of ``W`` (index ``j * n + i``).

Both posteriors are eigenvalue-corrected matrix-variate Gaussians::

    Cov(vec W) = (Q_S kron Q_A) diag(vec s) (Q_S kron Q_A)^T

with ``Q_A``, ``Q_S`` eigenvectors of the Kronecker factors and ``s`` a per-entry
variance in that eigenbasis. Noisy K-FAC sets
``s = (lambda/N) / ((lam_A + pi sqrt(g_in)) (lam_S + sqrt(g_in)/pi)^T)``; noisy
EK-FAC sets ``s = (lambda/N) / (R + g_in)``.
"""

import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call

from .posteriors._common import PosteriorMixin


class UnsupportedLayerError(ValueError):
    """A parameterised layer that the Kronecker-factored families cannot handle."""


class KronLayer:
    """Where one Linear/Conv2d layer lives in the network and in the flat vector."""

    def __init__(self, name, module, w_off, b_off):
        self.name = name
        self.module = module
        self.is_conv = isinstance(module, nn.Conv2d)
        self.p = module.weight.shape[0]
        self.n_in = module.weight[0].numel()
        self.has_bias = module.bias is not None
        self.n = self.n_in + int(self.has_bias)
        self.w_off, self.b_off = w_off, b_off

    def flat_to_mat(self, theta):
        """``(..., D)`` flat vectors -> ``(..., n, p)`` weight matrices."""
        lead = theta.shape[:-1]
        w = theta[..., self.w_off : self.w_off + self.p * self.n_in].reshape(*lead, self.p, self.n_in)
        W = w.transpose(-1, -2)
        if self.has_bias:
            b = theta[..., self.b_off : self.b_off + self.p].reshape(*lead, 1, self.p)
            W = torch.cat([W, b], dim=-2)
        return W

    def mat_to_flat(self, W, out):
        """Write ``(..., n, p)`` matrices into the flat vectors ``out`` (..., D)."""
        lead = W.shape[:-2]
        out[..., self.w_off : self.w_off + self.p * self.n_in] = (
            W[..., : self.n_in, :].transpose(-1, -2).reshape(*lead, self.p * self.n_in)
        )
        if self.has_bias:
            out[..., self.b_off : self.b_off + self.p] = W[..., self.n_in, :]

    def vec_index(self, device=None):
        """Flat indices of ``vec(W)`` (column-major), for dense references."""
        i = torch.arange(self.n, device=device)
        j = torch.arange(self.p, device=device)
        I, J = torch.meshgrid(i, j, indexing="ij")
        idx = self.w_off + J * self.n_in + I
        if self.has_bias:
            idx[self.n_in, :] = self.b_off + j
        return idx.T.reshape(-1)  # column-major: j * n + i

    def patches(self, x):
        """Layer inputs as rows ``(m, T, n)`` with a trailing 1 for the bias."""
        if self.is_conv:
            mod = self.module
            cols = F.unfold(x, mod.kernel_size, dilation=mod.dilation, padding=mod.padding, stride=mod.stride)
            a = cols.transpose(1, 2)  # (m, T, C kh kw)
        else:
            a = x.reshape(-1, 1, x.shape[-1]) if x.dim() == 2 else x.reshape(x.shape[0], -1, x.shape[-1])
        if self.has_bias:
            a = torch.cat([a, a.new_ones(*a.shape[:-1], 1)], dim=-1)
        return a

    def out_grads(self, g):
        """Output gradients as rows ``(m, T, p)``."""
        if self.is_conv:
            return g.flatten(2).transpose(1, 2)
        return g.reshape(-1, 1, g.shape[-1]) if g.dim() == 2 else g.reshape(g.shape[0], -1, g.shape[-1])


def kron_layers(module, layout):
    """The Kronecker blocks of ``module``, or a clear error for an unsupported layer."""
    pos = dict(zip(layout.names, layout.offsets))
    layers = []
    for name, mod in module.named_modules():
        own = [p for p in mod.parameters(recurse=False)]
        if not own:
            continue
        if isinstance(mod, nn.Linear) or (
            isinstance(mod, nn.Conv2d)
            and mod.groups == 1
            and mod.padding_mode == "zeros"
            and not isinstance(mod.padding, str)
        ):
            prefix = f"{name}." if name else ""
            b_off = pos[prefix + "bias"] if mod.bias is not None else None
            layers.append(KronLayer(name, mod, pos[prefix + "weight"], b_off))
        else:
            raise UnsupportedLayerError(
                f"Layer {name or '<root>'!r} ({type(mod).__name__}) has parameters but is not an nn.Linear or "
                "an nn.Conv2d (groups=1, zero padding given as integers, not 'same'/'valid'): the "
                "Kronecker-factored posteriors cannot represent it. "
                "Use SLANG for such modules, or make the layer parameter-free."
            )
    covered = sum(l.p * l.n for l in layers)
    if covered != layout.size:
        raise UnsupportedLayerError("Some trainable parameters do not belong to a Linear or Conv2d layer.")
    return layers


def kron_batch(module, layout, layers, theta, X, y, lik, fisher="true", generator=None):
    """Per-layer inputs and output gradients at weight samples ``theta`` (S, D).

    Returns
    -------
    rows : list per layer of ``(A, Dtrue, Dfisher)`` with ``A`` (m, T, n) patches and
        ``D*`` (m, T, p) gradients of the negative log-likelihood with respect to
        the layer's outputs, ``m = S * M``. ``Dtrue`` uses the observed labels (for
        the mean step); ``Dfisher`` the labels sampled from the model (``fisher="true"``)
        or the observed ones (``fisher="empirical"``).
    nll : Tensor (S, M), f : Tensor (S, M, out)
    """
    per_layer = [[] for _ in layers]
    nlls, fs = [], []
    for s in range(theta.shape[0]):
        captured = []
        hooks = [
            l.module.register_forward_hook(lambda mod, inp, out, k=k: captured.append((k, inp[0].detach(), out)))
            for k, l in enumerate(layers)
        ]
        try:
            with torch.enable_grad():
                th = theta[s].detach().requires_grad_(True)  # puts every layer output in the graph
                f = functional_call(module, layout.unflatten(th), (X,))
                nll = lik.nll(f, y)
                outs = [c[2] for c in captured]
                d_true = torch.autograd.grad(nll.sum(), outs, retain_graph=fisher == "true")
                if fisher == "true":
                    y_s = lik.sample(f.detach(), generator)
                    d_fish = torch.autograd.grad(lik.nll(f, y_s).sum(), outs)
                else:
                    d_fish = d_true
        finally:
            for h in hooks:
                h.remove()
        if len(captured) != len(layers):
            raise UnsupportedLayerError("Each Linear/Conv2d layer must be called exactly once per forward pass.")
        for (k, inp, _), dt, df in zip(captured, d_true, d_fish):
            l = layers[k]
            per_layer[k].append((l.patches(inp), l.out_grads(dt.detach()), l.out_grads(df.detach())))
        nlls.append(nll.detach())
        fs.append(f.detach())
    rows = [tuple(torch.cat(parts, 0) for parts in zip(*chunks)) for chunks in per_layer]
    return rows, torch.stack(nlls), torch.stack(fs)


def layer_stats(A, Dg):
    """KFC factors of one minibatch: ``(E_i[sum_t a a^T], E_i[(1/T) sum_t d d^T])``."""
    m, T, n = A.shape
    Af = A.reshape(m * T, n)
    Df = Dg.reshape(m * T, -1)
    return Af.T @ Af / m, Df.T @ Df / (m * T)


def layer_grad(A, Dg):
    """Mean over examples of the per-example weight gradients ``sum_t a_t d_t^T`` (n, p)."""
    m, T, n = A.shape
    return A.reshape(m * T, n).T @ Dg.reshape(m * T, -1) / m


def projected_second_moment(A, Dg, QA, QS):
    """``E_i[(Q_A^T G_i Q_S)^2]`` of the per-example gradients ``G_i = sum_t a_t d_t^T``.

    For a dense layer (``T = 1``) ``Q_A^T G_i Q_S`` is the outer product
    ``(Q_A^T a_i)(Q_S^T d_i)^T``, so the moment is one matmul of squares and no
    per-example matrix is formed.
    """
    m, T, n = A.shape
    a = A @ QA  # (m, T, n)
    d = Dg @ QS  # (m, T, p)
    if T == 1:
        return (a[:, 0] ** 2).T @ (d[:, 0] ** 2) / m
    P = torch.einsum("mtn,mtp->mnp", a, d)
    return (P * P).mean(0)


def sym_eig(M):
    """Eigen-decomposition of a symmetric PSD factor; eigenvalues clamped at 0."""
    lam, Q = torch.linalg.eigh(0.5 * (M + M.T))
    return lam.clamp_min(0.0), Q


class KroneckerGaussian(PosteriorMixin):
    """Block-diagonal (per layer) eigenvalue-corrected matrix-variate Gaussian.

    Attributes (for users)
    ----------------------
    mean : ndarray of shape (D,)
        Posterior mean in ``module_.parameters()`` order.
    factors : list of dict
        Per layer: ``name``, eigenbases ``Q_A`` (n, n) and ``Q_S`` (p, p), and
        ``scale`` (n, p), the variances in the eigenbasis (``s`` above).
    """

    family = "kronecker"

    def __init__(self, mean, layers, blocks):
        self.mean_t = mean
        self.layers = layers
        self.blocks = blocks  # list of (QA, QS, s)

    @property
    def factors(self):
        return [
            {
                "name": l.name,
                "Q_A": QA.detach().cpu().numpy().copy(),
                "Q_S": QS.detach().cpu().numpy().copy(),
                "scale": s.detach().cpu().numpy().copy(),
            }
            for l, (QA, QS, s) in zip(self.layers, self.blocks)
        ]

    def _tensors(self):
        out = [self.mean_t]
        for b in self.blocks:
            out.extend(b)
        return out

    def sample_t(self, n, generator=None):
        noise = self.mean_t.new_zeros(n, self.mean_t.shape[0])
        for l, (QA, QS, s) in zip(self.layers, self.blocks):
            X = torch.randn(n, l.n, l.p, generator=generator, dtype=s.dtype, device=s.device)
            l.mat_to_flat(QA @ (X * torch.sqrt(s)) @ QS.T, noise)
        return self.mean_t[None] + noise

    def variance_t(self):
        var = torch.zeros_like(self.mean_t)
        for l, (QA, QS, s) in zip(self.layers, self.blocks):
            l.mat_to_flat((QA * QA) @ s @ (QS * QS).T, var)
        return var

    def _dense(self, inverse):
        D = self.mean_t.shape[0]
        out = torch.zeros(D, D, dtype=self.mean_t.dtype, device=self.mean_t.device)
        for l, (QA, QS, s) in zip(self.layers, self.blocks):
            Q = torch.kron(QS, QA)
            v = s.T.reshape(-1)  # vec(s), column-major
            v = 1.0 / v if inverse else v
            idx = l.vec_index(out.device)
            out[idx[:, None], idx[None, :]] = (Q * v) @ Q.T
        return out

    def precision_t(self):
        return self._dense(inverse=True)

    def covariance(self, max_size=None):
        from .posteriors._common import MAX_DENSE_SIZE

        self._check_dense(MAX_DENSE_SIZE if max_size is None else max_size)
        with torch.no_grad():
            return self._dense(inverse=False).cpu().numpy()

    def logdet_covariance_t(self):
        return sum(torch.log(s).sum() for (_, _, s) in self.blocks)

    def kl_to_prior(self, prior_variance):
        """``KL(q || N(0, prior_variance I))``."""
        eta = float(prior_variance)
        D = self.mean_t.shape[0]
        tr = self.variance_t().sum()
        quad = (self.mean_t * self.mean_t).sum()
        logdet = self.logdet_covariance_t()
        return float(0.5 * ((tr + quad) / eta - D + D * math.log(eta) - logdet))
