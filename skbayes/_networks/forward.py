"""The forward path every family and prediction use: network + parameter vector(s) -> outputs,
by the batched dense engine where the network has one, else ``torch.func.functional_call``."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor, nn
from torch.func import functional_call

from .dense import DenseSpec, LayerInputFn

if TYPE_CHECKING:
    from .layout import ParamLayout


class NetworkForward:
    """Network + flat parameter vector -> outputs: the one forward path of the library.

    Hides the choice between the fast dense-layer path (a ``DenseSpec``: every
    weight sample of a call in one batched pass) and ``torch.func.functional_call``
    (any module, one pass per weight sample).

    Parameters
    ----------
    module : torch.nn.Module
        The network (its own parameters are never used by a call).
    layout : ParamLayout
        Where each parameter lives in the flat vector.
    n_features : int
        Width of the network's input rows.

    Attributes
    ----------
    spec : DenseSpec or None
        The dense-layer engine, None for a network off that path.
    """

    def __init__(self, module: nn.Module, layout: ParamLayout, n_features: int) -> None:
        self.module = module
        self.layout = layout
        self.n_features = int(n_features)
        self.spec: DenseSpec | None = DenseSpec(module, layout) if DenseSpec.supports(module) else None
        # functional_call swaps the module's parameters for the duration of a call: calls
        # from concurrent threads (e.g. predictions) must not interleave.
        self._lock = threading.RLock()

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        del state["_lock"]  # locks cannot be pickled or copied
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.RLock()

    @property
    def dense(self) -> bool:
        """True when the network takes the dense-layer path."""
        return self.spec is not None

    def __call__(self, theta: Tensor, X: Tensor, layer_inputs: Mapping[str, LayerInputFn] | None = None) -> Tensor:
        """Outputs for weights ``theta`` on rows ``X`` (n, n_features): (S, D) -> (S, n, out); (D,) -> (n, out).

        ``layer_inputs``: ``{module name: fn}`` applied to the inputs of those layers.
        """
        if self.spec is not None:
            return self.spec.forward(theta, X, layer_inputs=layer_inputs)
        if theta.dim() == 2:
            return torch.stack([self._call_one(th, X, layer_inputs) for th in theta])
        return self._call_one(theta, X, layer_inputs)

    def _call_one(self, theta: Tensor, X: Tensor, layer_inputs: Mapping[str, LayerInputFn] | None) -> Tensor:
        with self._lock:
            return self._call_one_unlocked(theta, X, layer_inputs)

    def _call_one_unlocked(self, theta: Tensor, X: Tensor, layer_inputs: Mapping[str, LayerInputFn] | None) -> Tensor:
        if not layer_inputs:
            return functional_call(self.module, self.layout.unflatten(theta), (X,))
        modules = dict(self.module.named_modules())
        hooks = [
            modules[name].register_forward_pre_hook(lambda m, args, fn=fn: (fn(args[0]),) + tuple(args[1:]))
            for name, fn in layer_inputs.items()
        ]
        try:
            return functional_call(self.module, self.layout.unflatten(theta), (X,))
        finally:
            for h in hooks:
                h.remove()
