"""Kronecker-factored curvature: per-layer inputs and output gradients of ``nn.Linear``
/ ``nn.Conv2d`` layers (captured by forward hooks), and the KFC statistics built from
them (noisy K-FAC, noisy EK-FAC). Layer geometry lives in :mod:`skbayes._networks`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor
from torch.func import functional_call

from .._likelihoods import nll_grad
from ..exceptions import UnsupportedLayerError

if TYPE_CHECKING:
    from torch import nn

    from .._networks import DenseSpec, KronLayer, ParamLayout

#: Per layer: the inputs ``A`` (m, T, n) and the output gradients at the observed and at the
#: sampled labels, ``Dtrue`` and ``Dfisher`` (m, T, p).
KronRows = list[tuple[Tensor, Tensor, Tensor]]


def kron_batch(
    module: nn.Module,
    layout: ParamLayout,
    layers: Sequence[KronLayer],
    theta: Tensor,
    X: Tensor,
    y: Tensor,
    lik: Any,
    fisher: str = "true",
    generator: torch.Generator | None = None,
    weights: Tensor | None = None,
    spec: DenseSpec | None = None,
) -> tuple[KronRows, Tensor, Tensor]:
    """Per-layer inputs and output gradients at weight samples ``theta`` (S, D).

    Returns
    -------
    rows : list per layer of ``(A, Dtrue, Dfisher)`` with ``A`` (m, T, n) patches and
        ``D*`` (m, T, p) gradients of the negative log-likelihood with respect to
        the layer's outputs, ``m = S * M``. ``Dtrue`` uses the observed labels (for
        the mean step); ``Dfisher`` the labels sampled from the model (``fisher="true"``)
        or the observed ones (``fisher="empirical"``).
    nll : Tensor (S, M), f : Tensor (S, M, out)

    With ``weights`` (M,) (sample weights), ``Dtrue`` holds ``w_i d_i`` (the gradient
    of the weighted negative log-likelihood) and ``Dfisher`` ``sqrt(w_i) d_i``, so that
    the second moments of :func:`layer_stats` and :func:`projected_second_moment`
    weight an example by ``w_i`` once; ``nll`` stays unweighted.

    ``spec``: the network's :class:`~skbayes._networks.DenseSpec`, if it has one. When its
    ``Linear`` layers are ``layers``, all ``S`` samples go through one batched forward pass
    and one backward pass per gradient (no hooks, no ``functional_call``): the same
    quantities, rows in the same order, with the labels of the true Fisher drawn in the
    same order (identical draws for ``S = 1``).
    """
    if spec is not None and _dense_match(spec, layers):
        return _dense_kron_batch(spec, layers, theta, X, y, lik, fisher, generator, weights)
    per_layer: list[list[tuple[Tensor, Tensor, Tensor]]] = [[] for _ in layers]
    nlls: list[Tensor] = []
    fs: list[Tensor] = []
    for s in range(theta.shape[0]):
        captured: list[tuple[int, Tensor, Tensor]] = []
        hooks = [
            l.module.register_forward_hook(
                lambda mod, inp, out, k=k, captured=captured: captured.append((k, inp[0].detach(), out))
            )
            for k, l in enumerate(layers)
        ]
        try:
            with torch.enable_grad():
                th = theta[s].detach().requires_grad_(True)  # puts every layer output in the graph
                f = functional_call(module, layout.unflatten(th), (X,))
                nll, g_true, g_fish = _output_grads(lik, f.detach(), y, fisher, generator)
                outs = [c[2] for c in captured]
                d_true = torch.autograd.grad(f, outs, g_true, retain_graph=g_fish is not g_true)
                d_fish = d_true if g_fish is g_true else torch.autograd.grad(f, outs, g_fish)
        finally:
            for h in hooks:
                h.remove()
        if len(captured) != len(layers):
            raise UnsupportedLayerError("Each Linear/Conv2d layer must be called exactly once per forward pass.")
        for (k, inp, _), dt, df in zip(captured, d_true, d_fish):
            l = layers[k]
            Dt, Df = l.out_grads(dt.detach()), l.out_grads(df.detach())
            if weights is not None:  # a layer output of row i only reaches nll_i: scale per row
                Dt, Df = Dt * weights[:, None, None], Df * torch.sqrt(weights)[:, None, None]
            per_layer[k].append((l.patches(inp), Dt, Df))
        nlls.append(nll.detach())
        fs.append(f.detach())
    rows: KronRows = []
    for chunks in per_layer:
        A, Dt, Df = (torch.cat(parts, 0) for parts in zip(*chunks))
        rows.append((A, Dt, Df))
    return rows, torch.stack(nlls), torch.stack(fs)


def _output_grads(
    lik: Any, f: Tensor, y: Tensor, fisher: str, generator: torch.Generator | None
) -> tuple[Tensor, Tensor, Tensor]:
    """The per-example negative log-likelihood at outputs ``f`` and the gradients of its sum
    with respect to ``f``: at the observed labels, and at labels drawn from the model
    (``fisher="true"``; the same tensor twice for the empirical Fisher). Both paths of
    :func:`kron_batch` back-propagate these."""
    nll, g_true = nll_grad(lik, f, y)
    if fisher != "true":
        return nll, g_true, g_true
    return nll, g_true, nll_grad(lik, f, lik.sample(f, generator))[1]


def _dense_match(spec: DenseSpec, layers: Sequence[KronLayer]) -> bool:
    """True when ``layers`` are exactly the ``Linear`` layers of ``spec``, in order."""
    return len(layers) == len(spec.linears) and all(
        not l.is_conv and (l.w_off, l.p, l.n_in, l.b_off) == info for l, info in zip(layers, spec.linears)
    )


def _dense_kron_batch(
    spec: DenseSpec,
    layers: Sequence[KronLayer],
    theta: Tensor,
    X: Tensor,
    y: Tensor,
    lik: Any,
    fisher: str,
    generator: torch.Generator | None,
    weights: Tensor | None,
) -> tuple[KronRows, Tensor, Tensor]:
    """:func:`kron_batch` for a dense network: every weight sample in one batched pass."""
    S, M = theta.shape[0], X.shape[0]
    f, tape = spec.forward_tape(theta, X)  # no autograd: the backward pass is written out
    As = spec.linear_inputs(tape)  # (S, M, in_l)
    nll, g_true, g_fish = _output_grads(lik, f, y, fisher, generator)
    d_true = spec.backward(tape, g_true)  # (S, M, out_l)
    d_fish = d_true if g_fish is g_true else spec.backward(tape, g_fish)
    scales = None  # the rows' weights for the true and the Fisher output gradients
    if weights is not None:  # rows are sample-major (s * M + i)
        w_rows = weights.repeat(S)[:, None, None]
        scales = (w_rows, torch.sqrt(w_rows))
    rows = []
    for l, A, dt, df in zip(layers, As, d_true, d_fish):
        Dt = l.out_grads(dt.reshape(S * M, l.p))
        Df = Dt if df is dt else l.out_grads(df.reshape(S * M, l.p))
        if scales is not None:
            Dt, Df = Dt * scales[0], Df * scales[1]
        rows.append((l.patches(A.reshape(S * M, l.n_in)), Dt, Df))
    return rows, nll, f


def layer_stats(
    A: Tensor,
    Dg: Tensor,
    weights: Tensor | None = None,
    decay: tuple[float, tuple[Tensor, Tensor]] | None = None,
) -> tuple[Tensor, Tensor]:
    """KFC factors of one minibatch: ``(E_i[sum_t a a^T], E_i[(1/T) sum_t d d^T])``.

    ``weights`` (m,), sample weights of the rows (mean one over the training set): the
    first factor becomes ``E_i[w_i sum_t a a^T]``; ``Dg`` from :func:`kron_batch` already
    holds ``sqrt(w_i) d``, so the second is ``E_i[w_i (1/T) sum_t d d^T]``. Each factor is
    then the expectation under the weighted empirical distribution of the examples,
    as on data with duplicated rows.

    ``decay=(beta, (A_old, S_old))`` returns the moving averages
    ``(1 - beta) A_old + beta A_batch`` and ``(1 - beta) S_old + beta S_batch`` instead
    (``A_old`` and ``S_old`` are not modified).
    """
    m, T, n = A.shape
    Af = A.reshape(m * T, n)
    Df = Dg.reshape(m * T, -1)
    Aw = Af if weights is None else Af * weights.repeat_interleave(T)[:, None]
    if decay is not None:  # the moving averages, each in one GEMM
        A_old, S_old = decay[1]
        beta = float(decay[0])
        return (
            torch.addmm(A_old, Af.T, Aw, beta=1.0 - beta, alpha=beta / m),
            torch.addmm(S_old, Df.T, Df, beta=1.0 - beta, alpha=beta / (m * T)),
        )
    return Af.T @ Aw / m, Df.T @ Df / (m * T)


def layer_grad(A: Tensor, Dg: Tensor, out: Tensor | None = None, beta: float = 0.0, alpha: float = 1.0) -> Tensor:
    """Mean over examples of the per-example weight gradients ``sum_t a_t d_t^T`` (n, p).

    With ``out`` (n, p): ``beta * out + alpha * mean`` in one GEMM (``out`` is not modified).
    """
    m, T, n = A.shape
    if out is None:
        return A.reshape(m * T, n).T @ Dg.reshape(m * T, -1) / m
    return torch.addmm(out, A.reshape(m * T, n).T, Dg.reshape(m * T, -1), beta=beta, alpha=alpha / m)


def projected_second_moment(A: Tensor, Dg: Tensor, QA: Tensor, QS: Tensor) -> Tensor:
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
