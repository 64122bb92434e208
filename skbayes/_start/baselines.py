"""The competing initialisations of the i-BLM paper: uninformative, heuristic,
Xavier, orthogonal and LSUV (mean and factorised variances)."""

import torch

from .._networks import ordered_layers
from .iblm import layer_input


def _fan(layer):
    rf = layer.n_in // layer.module.weight.shape[1] if layer.is_conv else 1
    return layer.n_in, layer.p * rf


def simple_init(forward, kind, X, gen, prior_precision, *, batch_size):
    """The competing initialisations (mean, variance) of the i-BLM paper."""
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
