"""Minibatch gradients (no per-example statistics): what Vadam/Vprop, Bayes by Backprop and
MC dropout need of back-propagation, one function per kind of gradient.

- :func:`minibatch_gradients`: the summed minibatch negative log-likelihood at each of ``S``
  weight samples (Vadam/Vprop).
- :func:`masked_gradient`: MC dropout's objective, the negative log-likelihood under fresh
  dropout masks plus weight decay, at one weight vector.
- :func:`neg_elbo_gradients`: Bayes by Backprop's reparameterised negative ELBO with respect
  to the mean and the softplus scales of the mean-field Gaussian.

Each has two branches: on a dense network (a :class:`~skbayes._networks.DenseSpec`) the
backward pass is written out (the data term through :meth:`DenseSpec.backward` and the
likelihood's ``nll_grad``, a prior term in closed form), with the same numbers as autograd
up to rounding; any other module goes through ``torch.autograd`` on the same objective
(:func:`masked_outputs`, :func:`neg_elbo_estimate`). The families call these functions and
never autograd or the dense backward pass themselves.

Shapes: ``D`` weights, ``S`` weight samples (or dropout repetitions), ``M`` minibatch rows,
``out`` network outputs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F
from torch import Tensor

from .._likelihoods import nll_grad
from ..posteriors._common import is_scalar_precision
from ..posteriors.bbb import diag_gaussian_kl

if TYPE_CHECKING:
    from .._networks import DenseSpec, NetworkForward

#: Dropout masks: ``{Linear layer name: h -> scaled keep mask of h's shape}`` (fresh draws per call).
Masks = dict[str, Callable[[Tensor], Tensor]]


def _weighted_sum(values: Tensor, weights: Tensor | None) -> Tensor:
    """``sum values``, each example's term (last axis) times its weight when ``weights`` is given."""
    return values.sum() if weights is None else (values * weights).sum()


# --- Vadam / Vprop -------------------------------------------------------------------------------
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


# --- MC dropout ----------------------------------------------------------------------------------
def _repeat_rows(X: Tensor, n_samples: int) -> Tensor:
    """``X`` (M, ...) stacked ``n_samples`` times along its first axis (sample-major rows)."""
    return X.repeat(n_samples, *([1] * (X.dim() - 1))) if n_samples > 1 else X


def _masking(mask: Callable[[Tensor], Tensor]) -> Callable[[Tensor], Tensor]:
    """The layer-input map ``h -> h * mask(h)``."""

    def apply(h: Tensor) -> Tensor:
        return h * mask(h)

    return apply


def masked_outputs(forward: NetworkForward, theta: Tensor, X: Tensor, masks: Masks, n_samples: int) -> Tensor:
    """Outputs ``(S, M, out)`` of the weights ``theta`` (D,) on ``S = n_samples`` copies of the
    rows ``X`` (M, ...), the input ``h`` of every layer named in ``masks`` replaced by
    ``h * masks[name](h)`` (a fresh mask per example and per copy). Differentiable in
    ``theta`` (the forward pass of :func:`masked_gradient`'s autograd branch)."""
    S, M = int(n_samples), X.shape[0]
    f = forward(theta, _repeat_rows(X, S), layer_inputs={name: _masking(m) for name, m in masks.items()})
    return f.reshape(S, M, f.shape[-1])


def _dense_masked_gradient(
    spec: DenseSpec, theta: Tensor, X: Tensor, masks: Masks, y: Tensor, lik: Any, n_samples: int, weights: Tensor | None
) -> tuple[Tensor, Tensor, Tensor]:
    """``(G (D,), nll (S, M), f (S, M, out))``: the gradient of ``sum_{s, i} w_i nll_si`` on a
    dense network, ``X`` (M, n_features) repeated ``n_samples`` times with the masks drawn
    during :meth:`DenseSpec.forward_tape`."""
    S = int(n_samples)
    M = y.shape[0]
    f, tape = spec.forward_tape(theta[None], _repeat_rows(X, S), input_masks=masks)
    f = f.reshape(S, M, f.shape[-1])
    nll, df = nll_grad(lik, f, y, weights)
    G = spec.weight_grads(tape, spec.backward(tape, df.reshape(1, S * M, -1)), torch.empty_like(theta)[None])
    return G[0], nll, f


def masked_gradient(
    forward: NetworkForward,
    theta: Tensor,
    X: Tensor,
    masks: Masks,
    y: Tensor,
    lik: Any,
    n_samples: int,
    n_train: float,
    weight_decay: float,
    weights: Tensor | None = None,
) -> tuple[Tensor, Tensor, Tensor]:
    """MC dropout's gradient: the objective per training example
    ``(1 / N) [(N / (M S)) sum_{s, i} w_i nll_si + (lambda / 2) ||theta||^2]`` at the weights
    ``theta`` (D,), with ``nll_si`` the negative log-likelihood of row ``i`` of ``X`` (M, ...)
    under the ``s``-th of ``S = n_samples`` independent draws of the dropout ``masks``.

    Parameters
    ----------
    n_train : int or float
        ``N``, the examples the minibatch stands for.
    weight_decay : float
        ``lambda``.
    weights : Tensor of shape (M,) or None
        Per-row weights ``w_i`` (None: all one).

    Returns
    -------
    g : Tensor of shape (D,)
        The gradient with respect to ``theta``.
    data : Tensor of shape ()
        The data term ``(N / (M S)) sum_{s, i} w_i nll_si`` (detached).
    f : Tensor of shape (S, M, out)
        The masked network's outputs (detached).
    """
    S, M, N = int(n_samples), X.shape[0], n_train
    scale = N / (M * S)
    spec = forward.spec
    if spec is not None:  # the backward pass written out (the masks drawn as in masked_outputs)
        G, nll, f = _dense_masked_gradient(spec, theta, X, masks, y, lik, S, weights)
        g = (scale * G + weight_decay * theta) / N
        return g, scale * _weighted_sum(nll, weights), f
    with torch.enable_grad():
        th = theta.detach().requires_grad_(True)
        f = masked_outputs(forward, th, X, masks, S)
        data = scale * _weighted_sum(lik.nll(f, y), weights)
        loss = data + 0.5 * weight_decay * (th * th).sum()
        (g,) = torch.autograd.grad(loss / N, (th,))
    return g, data.detach(), f.detach()


# --- Bayes by Backprop ---------------------------------------------------------------------------
def reparam_outputs(
    forward: NetworkForward,
    mean: Tensor,
    rho: Tensor,
    X: Tensor,
    n_samples: int,
    generator: torch.Generator,
    local: bool = True,
) -> Tensor:
    """Network outputs ``(S, M, out)`` at ``S = n_samples`` reparameterised samples of
    ``q = N(mean, diag(softplus(rho)^2))``: the local reparameterisation trick when ``local``
    and the network is dense, else weight samples ``mean + softplus(rho) eps_s``.
    Differentiable in ``mean`` and ``rho``."""
    sigma = F.softplus(rho)
    if local and forward.spec is not None:
        return forward.spec.local_reparam(mean, sigma * sigma, X, n_samples, generator)
    eps = torch.randn(int(n_samples), mean.shape[0], generator=generator, dtype=mean.dtype, device=mean.device)
    return forward(mean + sigma * eps, X)


def neg_elbo_estimate(
    forward: NetworkForward,
    mean: Tensor,
    rho: Tensor,
    X: Tensor,
    y: Tensor,
    lik: Any,
    n_samples: int,
    generator: torch.Generator,
    n_train: float,
    kl_weight: float,
    prior_precision: float | Tensor,
    weights: Tensor | None = None,
    local: bool = True,
) -> tuple[Tensor, Tensor, Tensor]:
    """Unbiased minibatch estimate of the negative ELBO of ``q = N(mean, diag(softplus(rho)^2))``:
    ``(N / (M S)) sum_{s, i} w_i nll_si + kl_weight * KL(q || N(0, prior_precision^{-1} I))``
    with ``S = n_samples`` draws of :func:`reparam_outputs`.

    Returns ``(estimate, data, f)``: the estimate (differentiable in ``mean`` and ``rho``),
    its data term and the outputs ``(S, M, out)``.
    """
    S, M, N = int(n_samples), X.shape[0], n_train
    f = reparam_outputs(forward, mean, rho, X, S, generator, local)
    data = (N / (M * S)) * _weighted_sum(lik.nll(f, y), weights)
    kl = diag_gaussian_kl(mean, F.softplus(rho), prior_precision)
    return data + kl_weight * kl, data, f


def _dense_reparam_gradients(
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
    """The data term's gradients on a dense network, ``(g_mean, g_sigma, nll, f)``: those of
    ``sum_{s, i} w_i nll_si`` with respect to the mean and the standard deviations (D,), with
    ``nll`` (S, M) and ``f`` (S, M, out). ``local``: the local reparameterisation trick
    (Gaussian pre-activations, the backward pass through them); else weight samples
    ``theta_s = mean + sigma eps_s``."""
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


def neg_elbo_gradients(
    forward: NetworkForward,
    mean: Tensor,
    rho: Tensor,
    X: Tensor,
    y: Tensor,
    lik: Any,
    n_samples: int,
    generator: torch.Generator,
    n_train: float,
    kl_weight: float,
    prior_precision: float | Tensor,
    weights: Tensor | None = None,
    local: bool = True,
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Gradient of :func:`neg_elbo_estimate` divided by ``n_train`` with respect to
    ``(mean, rho)``, with the same random draws.

    On a dense network the backward pass is written out (the network's through
    :class:`~skbayes._networks.DenseSpec`, the KL's in closed form:
    ``d KL / d mean = lam mean``, ``d KL / d sigma = lam sigma - 1 / sigma``); any
    other network goes through autograd.

    Returns
    -------
    g_mean, g_rho : Tensor of shape (D,)
    data : Tensor of shape ()
        The estimate's data term (detached).
    f : Tensor of shape (S, M, out)
        The sampled outputs (detached).
    """
    spec = forward.spec
    if spec is None:
        with torch.enable_grad():
            mu = mean.detach().requires_grad_(True)
            rh = rho.detach().requires_grad_(True)
            loss, data, f = neg_elbo_estimate(
                forward, mu, rh, X, y, lik, n_samples, generator, n_train, kl_weight, prior_precision, weights, local
            )
            g_mu, g_rho = torch.autograd.grad(loss / n_train, (mu, rh))
        return g_mu, g_rho, data.detach(), f.detach()
    S, M, N = int(n_samples), X.shape[0], n_train
    sigma = F.softplus(rho)
    g_mean, g_sigma, nll, f = _dense_reparam_gradients(spec, mean, sigma, X, y, lik, S, generator, weights, local)
    # the data term (N / (M S)) sum nll, divided by N; the KL term's weight over N
    c, k = 1.0 / (M * S), kl_weight / N
    lam = prior_precision if not is_scalar_precision(prior_precision) else float(prior_precision)
    g_mean = c * g_mean + k * (lam * mean)
    g_sigma = c * g_sigma + k * (lam * sigma - 1.0 / sigma)
    g_rho = torch.ops.aten.softplus_backward(g_sigma, rho, 1.0, 20.0)  # times sigmoid(rho)
    data = (N / (M * S)) * _weighted_sum(nll, weights)
    return g_mean, g_rho, data, f
