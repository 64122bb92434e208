"""Portable pickled state of the network estimators (pickle and ``skops.io``).

A fitted network estimator holds torch tensors, a torch module, generator states and
small skbayes objects (the posterior, the family's state, the likelihood, the prior).
``skops.io`` persists only types it can rebuild without running arbitrary code, and
torch tensors are not among them. :func:`encode_state` turns that fitted state into
builtin containers, strings, numbers and numpy arrays, which pickle and ``skops.io``
both store; :func:`decode_state` rebuilds it:

- a tensor becomes ``{"__tensor__": id, "array": ndarray, "device": str}`` (a later
  reference to the same tensor ``{"__ref__": id}``, so shared tensors stay shared);
- an instance of an skbayes class becomes ``{"__object__": id, "class": "module:name",
  "state": ...}`` (its ``__getstate__`` or ``__dict__``); only classes defined in the
  ``skbayes`` package are rebuilt;
- a submodule of the estimator's network becomes ``{"__submodule__": name}``;
- torch dtypes, devices and generators become tagged strings / states.

The network itself is stored as its ``state_dict`` (numpy arrays) with how to rebuild it:
the MLP of ``hidden_layer_sizes`` / ``activation`` (read off the fitted network, so a
``set_params`` after the fit does not matter; any network that is exactly such an MLP),
or else the estimator's ``module`` parameter (a callable is called again, a module
instance deep-copied).
"""

from __future__ import annotations

import importlib
from collections.abc import Container
from typing import Any

import numpy as np
import torch
from torch import nn

from ._networks import ACTIVATIONS, NetworkForward, ParamLayout, build_mlp, make_module, materialize

#: Version of the portable format (stored, checked on load).
FORMAT = 1

_ACTIVATION_NAMES: dict[type[nn.Module], str] = {}
for _name, _cls in ACTIVATIONS.items():
    _ACTIVATION_NAMES.setdefault(_cls, _name)


def _mlp_architecture(net: nn.Module, n_in: int) -> tuple[tuple[int, ...], str, int] | None:
    """``(hidden_layer_sizes, activation, n_out)`` when ``net`` is exactly what
    :func:`~skbayes._networks.build_mlp` builds, else None."""
    if type(net) is not nn.Sequential or len(net) % 2 != 1:
        return None
    hidden: list[int] = []
    activation: str | None = None
    prev = n_in
    for i, child in enumerate(net):
        if i % 2 == 0:
            if type(child) is not nn.Linear or child.in_features != prev or child.bias is None:
                return None
            prev = child.out_features
            if i < len(net) - 1:
                hidden.append(prev)
        else:
            name = _ACTIVATION_NAMES.get(type(child))
            if name is None or (activation is not None and name != activation):
                return None
            if repr(type(child)()) != repr(child):  # a non-default slope etc.
                return None
            activation = name
    return tuple(hidden), activation or "relu", prev


class _Encoder:
    def __init__(self, module: nn.Module | None) -> None:
        self.ids: dict[int, int] = {}
        self.submodules = {} if module is None else {id(m): n for n, m in module.named_modules()}
        self.keep: list[Any] = []  # keeps encoded objects alive, so that their ids stay unique

    def _new_id(self, obj: Any) -> int:
        self.keep.append(obj)
        self.ids[id(obj)] = len(self.ids)
        return self.ids[id(obj)]

    def __call__(self, obj: Any) -> Any:
        if obj is None or isinstance(obj, (bool, int, float, str, np.ndarray, np.generic)):
            return obj
        if id(obj) in self.ids:
            return {"__ref__": self.ids[id(obj)]}
        if isinstance(obj, torch.Tensor):
            i = self._new_id(obj)
            return {"__tensor__": i, "array": obj.detach().cpu().numpy().copy(order="K"), "device": str(obj.device)}
        if isinstance(obj, torch.dtype):
            return {"__dtype__": str(obj).split(".")[-1]}
        if isinstance(obj, torch.device):
            return {"__device__": str(obj)}
        if isinstance(obj, torch.Generator):
            i = self._new_id(obj)
            state = obj.get_state().numpy().copy()
            return {"__generator__": i, "state": state, "device": str(obj.device)}
        if isinstance(obj, nn.Module):
            if id(obj) not in self.submodules:
                raise TypeError(f"cannot persist a torch module outside the estimator's network: {obj!r}")
            return {"__submodule__": self.submodules[id(obj)]}
        if isinstance(obj, tuple) and not hasattr(obj, "_fields"):
            return {"__tuple__": [self(v) for v in obj]}
        if isinstance(obj, list):
            return [self(v) for v in obj]
        if isinstance(obj, dict):
            if all(isinstance(k, str) and not k.startswith("__") for k in obj):
                return {k: self(v) for k, v in obj.items()}
            return {"__dict__": [[self(k), self(v)] for k, v in obj.items()]}
        cls = type(obj)
        if cls.__module__.split(".")[0] == "skbayes":
            i = self._new_id(obj)
            state = obj.__getstate__() if hasattr(cls, "__getstate__") else obj.__dict__
            state = {} if state is None else dict(state)  # None: an object without attributes
            return {"__object__": i, "class": f"{cls.__module__}:{cls.__qualname__}", "state": self(state)}
        raise TypeError(f"skbayes cannot persist an object of type {cls.__module__}.{cls.__qualname__}")


class _Decoder:
    def __init__(self, module: nn.Module | None) -> None:
        self.objects: dict[int, Any] = {}
        self.module = module

    def __call__(self, obj: Any) -> Any:
        if isinstance(obj, list):
            return [self(v) for v in obj]
        if not isinstance(obj, dict):
            return obj
        if "__ref__" in obj:
            return self.objects[obj["__ref__"]]
        if "__tensor__" in obj:
            t = torch.from_numpy(np.array(obj["array"], copy=True)).to(_device(obj["device"]))
            self.objects[obj["__tensor__"]] = t
            return t
        if "__dtype__" in obj:
            return getattr(torch, obj["__dtype__"])
        if "__device__" in obj:
            return _device(obj["__device__"])
        if "__generator__" in obj:
            g = torch.Generator(device=_device(obj["device"]))
            g.set_state(torch.from_numpy(np.array(obj["state"], copy=True)))
            self.objects[obj["__generator__"]] = g
            return g
        if "__submodule__" in obj:
            return self.module.get_submodule(obj["__submodule__"])  # type: ignore[union-attr]  # only encoded with a module
        if "__tuple__" in obj:
            return tuple(self(v) for v in obj["__tuple__"])
        if "__dict__" in obj:
            return {self(k): self(v) for k, v in obj["__dict__"]}
        if "__object__" in obj:
            cls = _skbayes_class(obj["class"])
            inst = cls.__new__(cls)
            self.objects[obj["__object__"]] = inst
            state = self(obj["state"])
            if hasattr(cls, "__setstate__"):
                inst.__setstate__(state)
            else:
                inst.__dict__.update(state)
            if isinstance(inst, NetworkForward) and not hasattr(inst, "_lock"):
                inst.__init__(inst.module, inst.layout, inst.n_features)  # type: ignore[misc]  # rebuilds its lock
            return inst
        return {k: self(v) for k, v in obj.items()}


def _device(name: str) -> torch.device:
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        return torch.device("cpu")
    return device


def _skbayes_class(path: str) -> Any:  # an skbayes class
    module_name, _, qualname = path.partition(":")
    if module_name.split(".")[0] != "skbayes":
        raise ValueError(f"refusing to rebuild {path!r}: not an skbayes class")
    obj = importlib.import_module(module_name)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    if not isinstance(obj, type):
        raise ValueError(f"{path!r} is not a class")
    return obj


def encode_state(est: Any, state: dict[str, Any], params: Container[str]) -> dict[str, Any]:
    """Replace the fitted entries of ``state`` (``est.__dict__`` plus scikit-learn's
    version) by one portable entry ``_skbayes_state``; returns the new dict."""
    fitted = {k: v for k, v in state.items() if k not in params and k != "_sklearn_version"}
    if not any(isinstance(v, (torch.Tensor, nn.Module)) for v in fitted.values()) and "posterior_" not in fitted:
        return state  # nothing torch in it (not fitted)
    out = {k: v for k, v in state.items() if k not in fitted}
    net = fitted.pop("module_", None)
    fitted.pop("_forward", None)  # rebuilt from module_
    enc = _Encoder(net)
    network = None
    if net is not None:
        n_in = int(state["n_features_in_"])
        arch = _mlp_architecture(net, n_in)  # also a user module that is exactly such an MLP
        network = {
            "state_dict": {k: v.detach().cpu().numpy().copy(order="K") for k, v in net.state_dict().items()},
            "mlp": None if arch is None else {"hidden": list(arch[0]), "activation": arch[1], "n_out": arch[2]},
            "n_in": n_in,
            "n_out": _n_outputs(net, arch),
            "training": bool(net.training),
        }
    out["_skbayes_state"] = {"format": FORMAT, "network": network, "fitted": enc(fitted)}
    return out


def _n_outputs(net: nn.Module, arch: tuple[tuple[int, ...], str, int] | None) -> int | None:
    if arch is not None:
        return arch[2]
    linears = [m for m in net.modules() if isinstance(m, nn.Linear)]
    return int(linears[-1].out_features) if linears else None


def decode_state(est: Any, state: dict[str, Any]) -> None:
    """Inverse of :func:`encode_state`: sets the fitted attributes on ``est``."""
    portable = state.pop("_skbayes_state", None)
    est.__dict__.update(state)
    if portable is None:
        return
    if portable.get("format") != FORMAT:
        raise ValueError(f"unknown skbayes state format {portable.get('format')!r} (expected {FORMAT})")
    network = portable["network"]
    net = None
    if network is not None:
        net = _rebuild_network(est, network)
    fitted = _Decoder(net)(portable["fitted"])
    est.__dict__.update(fitted)
    if net is not None:
        net = net.to(device=est.__dict__.get("_fitted_device") or "cpu")
        est.module_ = net
        est._forward = NetworkForward(net, ParamLayout(net), network["n_in"])


def _rebuild_network(est: Any, network: dict[str, Any]) -> nn.Module:
    sd = network["state_dict"]
    floating = [v.dtype for v in sd.values() if np.issubdtype(v.dtype, np.floating)]
    mlp = network["mlp"]
    if mlp is not None:
        with torch.device("meta"):
            net: nn.Module = build_mlp(network["n_in"], mlp["hidden"], mlp["n_out"], mlp["activation"])
        materialize(net, "cpu")
    else:
        if est.module is None:
            raise ValueError("cannot rebuild the network: no module parameter")
        with torch.random.fork_rng(devices=[]):  # building must not move the global generator
            net = make_module(est.module, network["n_in"], network["n_out"])
    if floating:
        net = net.to(dtype=torch.from_numpy(np.zeros(1, dtype=floating[0])).dtype)
    net.load_state_dict({k: torch.from_numpy(np.array(v, copy=True)) for k, v in sd.items()})
    net.train(network["training"])
    return net


__all__ = ["decode_state", "encode_state"]
