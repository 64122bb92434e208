"""The networks the estimators build: the MLP of ``hidden_layer_sizes`` and ``activation``
(on the meta device, initialised from the fit's generator with PyTorch's default scheme), and
the module of a user's ``module=``."""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import torch
from torch import nn

from ..exceptions import UnsupportedLayerError

#: The ``activation`` names of the built MLP and their (parameter-free) modules.
ACTIVATIONS: dict[str, type[nn.Module]] = {
    "relu": nn.ReLU,
    "tanh": nn.Tanh,
    "logistic": nn.Sigmoid,
    "sigmoid": nn.Sigmoid,
    "identity": nn.Identity,
    "elu": nn.ELU,
    "gelu": nn.GELU,
    "softplus": nn.Softplus,
    "leaky_relu": nn.LeakyReLU,
}


def build_mlp(
    n_in: int,
    hidden_layer_sizes: Sequence[int],
    n_out: int,
    activation: str = "relu",
    *,
    generator: torch.Generator | None = None,
    dtype: torch.dtype | None = None,
) -> nn.Sequential:
    """A fully connected network ``n_in -> hidden... -> n_out`` (no final activation).

    With a ``generator`` the layers are built without drawing from torch's global
    random state (on the meta device) and then initialised from ``generator`` by
    :func:`init_layers` with PyTorch's own scheme, on the CPU in ``dtype`` (default:
    torch's default dtype): the weights depend on the generator only. Without one,
    ``nn.Linear`` initialises itself from the global random state.
    """
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation={activation!r} is not supported; choose one of {sorted(ACTIVATIONS)}.")
    kw: dict[str, Any] = {} if generator is None else {"device": "meta", "dtype": dtype}
    layers: list[nn.Module] = []
    prev = n_in
    for h in hidden_layer_sizes:
        layers.append(nn.Linear(prev, int(h), **kw))
        layers.append(ACTIVATIONS[activation]())
        prev = int(h)
    layers.append(nn.Linear(prev, n_out, **kw))
    net = nn.Sequential(*layers)
    if generator is not None:
        materialize(net, "cpu")
        init_layers(net, generator)
    return net


M = TypeVar("M", bound=nn.Module)


def materialize(module: M, device: torch.device | str) -> M:
    """Give every parameter and buffer of ``module`` (built on the meta device) uninitialised
    storage on ``device``, in place; returns ``module``.

    What ``module.to_empty(device=...)`` does, without going through torch's meta-tensor
    decompositions, whose first use in a process imports sympy (seconds: a user's first
    fit would pay it).
    """
    for m in module.modules():
        for name, p in list(m._parameters.items()):
            if p is not None:
                m._parameters[name] = nn.Parameter(
                    torch.empty(p.shape, dtype=p.dtype, device=device), requires_grad=p.requires_grad
                )
        for name, b in list(m._buffers.items()):
            if b is not None:
                m._buffers[name] = torch.empty(b.shape, dtype=b.dtype, device=device)
    return module


#: Layers whose ``reset_parameters`` is PyTorch's default scheme, which
#: :func:`init_layers` reproduces from a generator.
_KAIMING_LAYERS = (nn.Linear, nn.modules.conv._ConvNd)


def init_layers(module: nn.Module, generator: torch.Generator) -> nn.Module:
    """Initialise every ``nn.Linear`` and convolution layer of ``module`` in place from
    ``generator``, by PyTorch's default scheme (``reset_parameters``: Kaiming-uniform
    weights with ``a = sqrt(5)``, i.e. ``U(-1/sqrt(fan_in), 1/sqrt(fan_in))``, and biases
    on the same bound), layer by layer in ``module.modules()`` order, weight before bias.

    This is what constructing the layers under ``torch.manual_seed(s)`` gives, drawn
    from ``generator`` (seeded with ``s``) instead of torch's global random state.
    Other layers are left as they are. Returns ``module``.
    """
    with torch.no_grad():
        for m in module.modules():
            if not isinstance(m, _KAIMING_LAYERS):
                continue
            w = m.weight
            if w.is_contiguous() and w.device == generator.device:
                nn.init.kaiming_uniform_(w, a=math.sqrt(5), generator=generator)
            else:  # as _ConvNd.reset_parameters: draw into a contiguous buffer (on the generator's device)
                tmp = torch.empty(w.shape, dtype=w.dtype, device=generator.device)
                nn.init.kaiming_uniform_(tmp, a=math.sqrt(5), generator=generator)
                w.copy_(tmp)
            if m.bias is not None:
                fan_in, _ = nn.init._calculate_fan_in_and_fan_out(w)
                bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
                b = m.bias if m.bias.device == generator.device else torch.empty_like(m.bias, device=generator.device)
                nn.init.uniform_(b, -bound, bound, generator=generator)
                if b is not m.bias:
                    m.bias.copy_(b)
    return module


def make_module(module: nn.Module | Callable[[int, int], nn.Module], n_in: int, n_out: int) -> nn.Module:
    """Instantiate the user's ``module`` parameter.

    ``module`` is either a callable ``module(n_features_in, n_outputs)`` returning
    a :class:`torch.nn.Module` (a class or a function), or a ready module instance,
    which is deep-copied so that the user's object is never modified.
    """
    if isinstance(module, nn.Module):
        net = copy.deepcopy(module)
    elif callable(module):
        net = module(n_in, n_out)
    else:
        raise TypeError(
            "module must be a torch.nn.Module or a callable (n_features_in, n_outputs) -> Module, "
            f"got {type(module).__name__}."
        )
    if not isinstance(net, nn.Module):
        raise TypeError(f"module(...) must return a torch.nn.Module, got {type(net).__name__}.")
    if not any(p.requires_grad for p in net.parameters()):
        raise ValueError("module has no trainable parameters.")
    for name, layer in net.named_modules():
        if isinstance(layer, nn.modules.batchnorm._BatchNorm):
            raise UnsupportedLayerError(
                f"Layer {name!r} ({type(layer).__name__}) normalises over the rows of a batch, so a row's "
                "output would depend on the other rows of its minibatch or prediction batch, which "
                "per-example gradients and a row-by-row predictive cannot represent. Normalise each row "
                "instead (torch.nn.LayerNorm or GroupNorm), or standardise the inputs."
            )
    for name, param in net.named_parameters():
        if not isinstance(param, nn.parameter.UninitializedParameter) and param.numel() == 0:
            raise ValueError(
                f"module's parameter {name!r} has no entries (shape {tuple(param.shape)}): a layer of width 0."
            )
    return net
