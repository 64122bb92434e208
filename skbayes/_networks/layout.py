"""The flat parameter vector: where each parameter of a module lives in it, and views
between the two."""

from __future__ import annotations

import torch
from torch import Tensor, nn


class ParamLayout:
    """Where each parameter of a module lives in the flat vector.

    The flat vector follows ``module.parameters()`` order, each tensor flattened
    in row-major order (for ``nn.Linear``: the ``(out, in)`` weight, then the bias).
    Parameters that do not require gradients are left out.

    Parameters
    ----------
    module : torch.nn.Module
        The network.

    Attributes
    ----------
    names : list of str
        The parameters' names (``module.named_parameters()``), in vector order.
    shapes : list of tuple of int
        Their shapes.
    offsets : list of int
        Where each starts in the flat vector.
    size : int
        ``D``, the length of the flat vector.
    """

    def __init__(self, module: nn.Module) -> None:
        self.names: list[str] = []
        self.shapes: list[tuple[int, ...]] = []
        self.offsets: list[int] = []
        off = 0
        for name, p in module.named_parameters():
            if not p.requires_grad:
                continue
            self.names.append(name)
            self.shapes.append(tuple(p.shape))
            self.offsets.append(off)
            off += p.numel()
        self.size = off

    def unflatten(self, theta: Tensor) -> dict[str, Tensor]:
        """Dict name -> view of ``theta`` (shape ``(..., D)``) with the parameter's shape."""
        lead = theta.shape[:-1]
        out: dict[str, Tensor] = {}
        for name, shape, off in zip(self.names, self.shapes, self.offsets):
            n = 1
            for s in shape:
                n *= s
            out[name] = theta[..., off : off + n].reshape(*lead, *shape)
        return out

    def flatten_module(self, module: nn.Module) -> Tensor:
        """The parameters of ``module`` (laid out as this layout's) as a new flat vector (D,),
        detached."""
        params = dict(module.named_parameters())
        return torch.cat([params[n].detach().reshape(-1) for n in self.names])

    def load_into(self, module: nn.Module, theta: Tensor) -> None:
        """Copy the flat vector ``theta`` (D,) into the parameters of ``module`` in place."""
        params = dict(module.named_parameters())
        views = self.unflatten(theta)
        with torch.no_grad():
            for n in self.names:
                params[n].copy_(views[n])
