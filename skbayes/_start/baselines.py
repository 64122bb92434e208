"""The competing initialisations of the i-BLM paper: uninformative, heuristic,
Xavier, orthogonal and LSUV (mean and factorised variances)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import Tensor

from .._networks import ordered_layers
from .iblm import layer_input

if TYPE_CHECKING:
    from .._networks import KronLayer, NetworkForward


def _fan(layer: KronLayer) -> tuple[int, int]:
    """``(fan_in, fan_out)`` of a layer (a conv layer's counted over its kernel)."""
    rf = layer.n_in // layer.module.weight.shape[1] if layer.is_conv else 1
    return layer.n_in, layer.p * rf


def simple_init(
    forward: NetworkForward,
    kind: str,
    X: Tensor,
    gen: torch.Generator,
    prior_precision: float,
    *,
    batch_size: int,
) -> tuple[Tensor, Tensor]:
    """The competing initialisations of the i-BLM paper.

    Parameters
    ----------
    forward : NetworkForward
        The network.
    kind : str
        'uninformative', 'heuristic', 'xavier', 'orthogonal' or 'lsuv'.
    X : Tensor of shape (N, ...)
        The training inputs (LSUV rescales on a minibatch of them).
    gen : torch.Generator
        The fit's generator (orthogonal weights, LSUV's minibatch).
    prior_precision : float
        The prior precision (the variances of 'uninformative' and of the weights outside
        the Linear / Conv2d layers).
    batch_size : int
        LSUV's minibatch size.

    Returns
    -------
    mean, variance : Tensor of shape (D,)
        Flat vectors in ``module.parameters()`` order.
    """
    module, layout = forward.module, forward.layout
    layers = ordered_layers(module, layout, X)
    mean = layout.flatten_module(module).clone()
    var = torch.full_like(mean, 1.0 / prior_precision)
    if kind == "uninformative":  # q = prior
        return torch.zeros_like(mean), var
    for layer in layers:
        fan_in, fan_out = _fan(layer)
        W = torch.zeros(layer.n, layer.p, dtype=mean.dtype, device=mean.device)
        v = 2.0 / (fan_in + fan_out) if kind == "xavier" else 1.0 / fan_in
        if kind in ("orthogonal", "lsuv"):
            w = torch.empty(layer.p, layer.n_in, dtype=mean.dtype, device=mean.device)
            torch.nn.init.orthogonal_(w, generator=gen)
            W[: layer.n_in] = w.T
        layer.mat_to_flat(W, mean)
        layer.mat_to_flat(torch.full_like(W, v), var)
    if kind == "lsuv":
        # Mishkin & Matas: rescale each layer's weights so that its output has unit
        # variance on a minibatch, from the input upwards.
        idx = torch.randperm(X.shape[0], generator=gen, device=X.device)[: min(int(batch_size), X.shape[0])]
        for layer in layers:
            A = layer.patches(layer_input(module, layout, layer, mean, X[idx]))
            out = A.reshape(-1, layer.n) @ layer.flat_to_mat(mean)
            sd = float(out.std())
            if sd > 0:
                W = layer.flat_to_mat(mean) / sd
                layer.mat_to_flat(W, mean)
    return mean, var
