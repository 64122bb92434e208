"""Minibatch gradients (no per-example statistics): what Vadam/Vprop, Bayes by Backprop and
MC dropout need of back-propagation.

Every function returns the gradient of the summed (or weighted) minibatch negative
log-likelihood with the network's outputs and the per-example ``nll``. On a dense network
(a :class:`~skbayes._networks.DenseSpec`) the backward pass is written out, with the same
numbers as autograd; any other module goes through autograd.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

from .._likelihoods import nll_grad

if TYPE_CHECKING:
    from .._networks import DenseSpec, NetworkForward


def minibatch_gradients(
    forward: NetworkForward, theta: Tensor, X: Tensor, y: Tensor, lik: Any, weights: Tensor | None = None
) -> tuple[Tensor, Tensor, Tensor]:
    """Gradients of the summed minibatch negative log-likelihood, one row per weight sample.

    A plain backward pass of ``sum_i nll_i(theta_s)`` (no per-example gradients):
    with the dense-layer path all ``S`` samples share one batched forward and
    backward pass (row ``s`` of the gradient with respect to ``theta`` only sees
    sample ``s``); any other module runs one ``functional_call`` per sample.

    With ``weights`` (M,), the sum is weighted: ``G[s] = sum_i w_i grad nll_i(theta_s)``.

    Returns
    -------
    G : Tensor of shape (S, D)
        ``G[s] = sum_i grad nll_i(theta_s)``.
    nll : Tensor of shape (S, M), detached.
    f : Tensor of shape (S, M, out), detached network outputs.
    """
    spec = getattr(forward, "spec", None)
    if spec is not None:  # the backward pass written out (the same numbers as autograd)
        f, tape = spec.forward_tape(theta, X)
        nll, df = nll_grad(lik, f, y, weights)
        G = spec.weight_grads(tape, spec.backward(tape, df), theta.new_empty(theta.shape))
        return G, nll, f
    with torch.enable_grad():
        th = theta.detach().requires_grad_(True)
        f = forward(th, X)
        nll = lik.nll(f, y)
        loss = nll.sum() if weights is None else (nll * weights).sum()
        (G,) = torch.autograd.grad(loss, th)
    return G, nll.detach(), f.detach()


def masked_minibatch_gradient(
    spec: DenseSpec,
    theta: Tensor,
    X: Tensor,
    input_masks: Any,
    y: Tensor,
    lik: Any,
    n_samples: int,
    weights: Tensor | None = None,
) -> tuple[Tensor, Tensor, Tensor]:
    """MC dropout's gradient on a dense network: the one weight vector ``theta`` (D,) on
    ``X`` repeated ``n_samples`` times with a dropout mask per repetition (``input_masks``,
    as :meth:`DenseSpec.forward_tape` takes them).

    Returns
    -------
    G : Tensor of shape (D,)
        Gradient of ``sum_{s, i} w_i nll_si``.
    nll : Tensor of shape (S, M).
    f : Tensor of shape (S, M, out).
    """
    S = int(n_samples)
    M = y.shape[0]
    f, tape = spec.forward_tape(theta[None], X, input_masks=input_masks)
    f = f.reshape(S, M, f.shape[-1])
    nll, df = nll_grad(lik, f, y, weights)
    G = spec.weight_grads(tape, spec.backward(tape, df.reshape(1, S * M, -1)), torch.empty_like(theta)[None])
    return G[0], nll, f


def reparam_gradients(
    spec: DenseSpec,
    mean: Tensor,
    sigma: Tensor,
    X: Tensor,
    y: Tensor,
    lik: Any,
    n_samples: int,
    generator: torch.Generator,
    weights: Tensor | None = None,
    local: bool = True,
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Bayes by Backprop's data-term gradients on a dense network, with respect to the mean
    and the standard deviations of ``q = N(mean, diag(sigma^2))``.

    ``local=True``: the local reparameterisation trick (Gaussian pre-activations, the backward
    pass through them); else weight samples ``theta_s = mean + sigma eps_s``.

    Returns
    -------
    g_mean, g_sigma : Tensor of shape (D,)
        Gradients of ``sum_{s, i} w_i nll_si``.
    nll : Tensor of shape (S, M).
    f : Tensor of shape (S, M, out).
    """
    S = int(n_samples)
    if local:
        g_mean, g_var = torch.empty_like(mean), torch.empty_like(mean)
        f, tape = spec.local_reparam_tape(mean, sigma * sigma, X, S, generator)
        nll, df = nll_grad(lik, f, y, weights)
        spec.local_reparam_backward(tape, df, g_mean, g_var)
        return g_mean, 2.0 * sigma * g_var, nll, f
    eps = torch.randn(S, mean.shape[0], generator=generator, dtype=mean.dtype, device=mean.device)
    f, tape = spec.forward_tape(mean + sigma * eps, X)
    nll, df = nll_grad(lik, f, y, weights)
    G = spec.weight_grads(tape, spec.backward(tape, df), torch.empty_like(eps))
    return G.sum(0), (G * eps).sum(0), nll, f
