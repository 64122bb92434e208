"""Networks: the MLP built from ``hidden_layer_sizes``, user modules, and the
flat parameter vector <-> module views used by every posterior family."""

import copy

import torch
from torch import nn

ACTIVATIONS = {
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

# Parameter-free modules that act element-wise: they may sit between the
# Linear layers of a network that takes the fast dense-layer curvature path.
_ELEMENTWISE = (
    nn.ReLU,
    nn.Tanh,
    nn.Sigmoid,
    nn.Identity,
    nn.ELU,
    nn.GELU,
    nn.Softplus,
    nn.LeakyReLU,
    nn.SiLU,
    nn.Mish,
    nn.Hardtanh,
    nn.ReLU6,
    nn.SELU,
    nn.CELU,
)


def build_mlp(n_in, hidden_layer_sizes, n_out, activation="relu"):
    """A fully connected network ``n_in -> hidden... -> n_out`` (no final activation)."""
    if activation not in ACTIVATIONS:
        raise ValueError(
            f"activation={activation!r} is not supported; choose one of {sorted(ACTIVATIONS)}."
        )
    layers = []
    prev = n_in
    for h in hidden_layer_sizes:
        layers.append(nn.Linear(prev, int(h)))
        layers.append(ACTIVATIONS[activation]())
        prev = int(h)
    layers.append(nn.Linear(prev, n_out))
    return nn.Sequential(*layers)


def make_module(module, n_in, n_out):
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
    return net


class ParamLayout:
    """Where each parameter of a module lives in the flat vector.

    The flat vector follows ``module.parameters()`` order, each tensor flattened
    in row-major order (for ``nn.Linear``: the ``(out, in)`` weight, then the bias).
    """

    def __init__(self, module):
        self.names = []
        self.shapes = []
        self.offsets = []
        off = 0
        for name, p in module.named_parameters():
            if not p.requires_grad:
                continue
            self.names.append(name)
            self.shapes.append(tuple(p.shape))
            self.offsets.append(off)
            off += p.numel()
        self.size = off

    def unflatten(self, theta):
        """Dict name -> view of ``theta`` (shape ``(..., D)``) with the parameter's shape."""
        lead = theta.shape[:-1]
        out = {}
        for name, shape, off in zip(self.names, self.shapes, self.offsets):
            n = 1
            for s in shape:
                n *= s
            out[name] = theta[..., off : off + n].reshape(*lead, *shape)
        return out

    def flatten_module(self, module):
        params = dict(module.named_parameters())
        return torch.cat([params[n].detach().reshape(-1) for n in self.names])

    def load_into(self, module, theta):
        params = dict(module.named_parameters())
        views = self.unflatten(theta)
        with torch.no_grad():
            for n in self.names:
                params[n].copy_(views[n])


class DenseSpec:
    """A ``nn.Sequential`` of ``nn.Linear`` layers and element-wise activations.

    Such a network gets the fast curvature path: per-example gradients are never
    materialised; every product with them is a few matmuls with the layer inputs
    ``A`` and the back-propagated output gradients ``Delta``.
    """

    def __init__(self, module, layout):
        self.steps = []  # ("linear", info) or ("act", module)
        pos = {n: (o, s) for n, s, o in zip(layout.names, layout.shapes, layout.offsets)}
        for idx, child in enumerate(module):
            if isinstance(child, nn.Linear):
                w_off, w_shape = pos[f"{idx}.weight"]
                b_off = pos[f"{idx}.bias"][0] if child.bias is not None else None
                self.steps.append(("linear", (w_off, w_shape[0], w_shape[1], b_off)))
            else:
                self.steps.append(("act", child))
        self.linears = [s[1] for s in self.steps if s[0] == "linear"]

    @staticmethod
    def supports(module):
        if not isinstance(module, nn.Sequential) or len(module) == 0:
            return False
        for child in module:
            if isinstance(child, nn.Linear):
                if not child.weight.requires_grad or (
                    child.bias is not None and not child.bias.requires_grad
                ):
                    return False
            elif isinstance(child, _ELEMENTWISE):
                if any(True for _ in child.parameters()):
                    return False
            else:
                return False
        return True

    def forward(self, theta, X, keep=False):
        """Evaluate the network for weight samples ``theta`` (S, D) on rows ``X`` (n, in).

        Returns the outputs ``(S, n, out)``; with ``keep=True`` also the list of
        layer inputs ``A_l`` (S, n, in_l) and pre-activations ``Z_l`` (S, n, out_l),
        with each ``Z_l`` part of the autograd graph so that
        ``torch.autograd.grad(loss, Z)`` gives the per-example output gradients.
        """
        h = X
        As, Zs = [], []
        for kind, info in self.steps:
            if kind == "act":
                h = info(h)
                continue
            w_off, out, inp, b_off = info
            W = theta[:, w_off : w_off + out * inp].reshape(-1, out, inp)
            z = torch.matmul(h, W.transpose(1, 2))
            if b_off is not None:
                z = z + theta[:, None, b_off : b_off + out]
            if keep:
                if h.dim() == 2:
                    h = h.expand(theta.shape[0], *h.shape)
                As.append(h.detach())
                if not z.requires_grad:
                    z.requires_grad_(True)
                Zs.append(z)
            h = z
        if keep:
            return h, As, Zs
        return h
