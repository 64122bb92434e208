"""The flat parameter vector: where each parameter of a module lives in it, and views
between the two."""

from __future__ import annotations

import torch


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
