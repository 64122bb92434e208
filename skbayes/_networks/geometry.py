"""Layer geometry: the order in which a module calls its layers, and the per-layer view of
``Linear`` / ``Conv2d`` layers (inputs as patches, output gradients, weight and bias offsets)
that the Kronecker families and i-BLM work with."""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any, TypeVar, cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..exceptions import UnsupportedLayerError

if TYPE_CHECKING:
    from torch.utils.hooks import RemovableHandle

    from .layout import ParamLayout

_Shared = TypeVar("_Shared", bound="SharedOnCopy")


def call_order(module: nn.Module, X_probe: Tensor) -> list[str]:
    """Names of the submodules holding trainable parameters, in the order a forward pass
    on ``X_probe`` (rows of the network's input) calls them (each once; the module is not
    modified)."""
    probe = copy.deepcopy(module)  # a forward pass may touch buffers (e.g. batch-norm statistics)
    order: list[str] = []
    hooks: list[RemovableHandle] = []
    for name, m in probe.named_modules():
        if any(p.requires_grad for p in m.parameters(recurse=False)):
            hooks.append(m.register_forward_pre_hook(lambda mod, args, name=name: order.append(name)))
    try:
        with torch.no_grad():
            probe(X_probe)
    finally:
        for h in hooks:
            h.remove()
    seen: list[str] = []
    for name in order:
        if name not in seen:
            seen.append(name)
    return seen


# --- per-layer geometry of Linear / Conv2d layers ------------------------------------
#
# Each ``nn.Linear`` / ``nn.Conv2d`` layer ``l`` is a block; the bias is folded in
# as a homogeneous coordinate. A layer's weights form the matrix ``W`` of shape
# ``(n, p)``: ``n = n_in (+1)`` inputs (for a conv layer ``n_in = C kh kw``
# patch entries), ``p`` outputs, ``W[:n_in] = weight.reshape(p, n_in).T`` and
# ``W[n_in] = bias``. ``vec`` stacks the columns of ``W`` (index ``j * n + i``).


class SharedOnCopy:
    """Base of value objects that are never modified once built (a refresh replaces them;
    at most caches of derived quantities are added): copies, deep ones included (the fit
    loop snapshots the posterior and the family state every epoch), share the object
    instead of duplicating its tensors and modules."""

    def __copy__(self: _Shared) -> _Shared:
        return self

    def __deepcopy__(self: _Shared, memo: dict[int, Any]) -> _Shared:
        return self


class KronLayer(SharedOnCopy):
    """Where one Linear/Conv2d layer lives in the network and in the flat vector.

    Read-only geometry, shared by copies together with its ``module``. A step rebinds
    layers whose module is not the one its network calls (see
    :meth:`~skbayes._families.kfac.KFACFamily.step`).

    Parameters
    ----------
    name : str
        The layer's module name in the network.
    module : torch.nn.Linear or torch.nn.Conv2d
        The layer.
    w_off : int
        Offset of its weight in the flat vector.
    b_off : int or None
        Offset of its bias, None without one.

    Attributes
    ----------
    is_conv : bool
        Whether the layer is a ``Conv2d``.
    p : int
        Outputs (channels of a conv layer).
    n_in : int
        Inputs per output (``C kh kw`` for a conv layer).
    has_bias : bool
        Whether the layer has a bias.
    n : int
        Rows of the weight matrix ``W``: ``n_in`` plus one with a bias.
    """

    def __init__(self, name: str, module: nn.Linear | nn.Conv2d, w_off: int, b_off: int | None) -> None:
        self.name = name
        self.module = module
        self.is_conv = isinstance(module, nn.Conv2d)
        self.p: int = module.weight.shape[0]
        self.n_in: int = module.weight[0].numel()
        self.has_bias = module.bias is not None
        self.n = self.n_in + int(self.has_bias)
        self.w_off, self.b_off = w_off, b_off

    def flat_to_mat(self, theta: Tensor) -> Tensor:
        """``(..., D)`` flat vectors -> ``(..., n, p)`` weight matrices."""
        lead = theta.shape[:-1]
        w = theta[..., self.w_off : self.w_off + self.p * self.n_in].reshape(*lead, self.p, self.n_in)
        W = w.transpose(-1, -2)
        if self.has_bias:
            assert self.b_off is not None  # set exactly when the layer has a bias
            b = theta[..., self.b_off : self.b_off + self.p].reshape(*lead, 1, self.p)
            W = torch.cat([W, b], dim=-2)
        return W

    def mat_to_flat(self, W: Tensor, out: Tensor, add: bool = False) -> None:
        """Write ``(..., n, p)`` matrices into the flat vectors ``out`` (..., D), or add them to
        what is there (``add=True``)."""
        lead = W.shape[:-2]
        parts = [(self.w_off, W[..., : self.n_in, :].transpose(-1, -2).reshape(*lead, self.p * self.n_in))]
        if self.has_bias:
            assert self.b_off is not None
            parts.append((self.b_off, W[..., self.n_in, :]))
        for off, part in parts:
            dest = out[..., off : off + part.shape[-1]]
            if add:
                dest.add_(part)
            else:
                dest.copy_(part)

    def vec_index(self, device: torch.device | str | None = None) -> Tensor:
        """Flat indices (n p,) of ``vec(W)`` (column-major), for dense references."""
        i = torch.arange(self.n, device=device)
        j = torch.arange(self.p, device=device)
        I, J = torch.meshgrid(i, j, indexing="ij")
        idx = self.w_off + J * self.n_in + I
        if self.has_bias:
            assert self.b_off is not None
            idx[self.n_in, :] = self.b_off + j
        return idx.T.reshape(-1)  # column-major: j * n + i

    def patches(self, x: Tensor) -> Tensor:
        """Layer inputs ``x`` ((m, n_in) or (m, ..., n_in) of a Linear layer, (m, C, H, W) of a
        conv layer) as rows ``(m, T, n)`` with a trailing 1 for the bias (``T`` positions per
        example: 1 for a dense input, the patches of a conv layer)."""
        if self.is_conv:
            mod = cast(nn.Conv2d, self.module)
            # kron_layers admits padding given as integers only (not 'same' / 'valid')
            padding = cast(tuple[int, ...], mod.padding)
            cols = F.unfold(x, mod.kernel_size, dilation=mod.dilation, padding=padding, stride=mod.stride)
            a = cols.transpose(1, 2)  # (m, T, C kh kw)
        else:
            a = x.reshape(-1, 1, x.shape[-1]) if x.dim() == 2 else x.reshape(x.shape[0], -1, x.shape[-1])
        if self.has_bias:
            a = torch.cat([a, a.new_ones(*a.shape[:-1], 1)], dim=-1)
        return a

    def out_grads(self, g: Tensor) -> Tensor:
        """Output gradients ``g`` (the shape of the layer's output: (m, p), (m, ..., p) or
        (m, p, H', W')) as rows ``(m, T, p)``."""
        if self.is_conv:
            return g.flatten(2).transpose(1, 2)
        return g.reshape(-1, 1, g.shape[-1]) if g.dim() == 2 else g.reshape(g.shape[0], -1, g.shape[-1])


#: The initialisations that regress layer by layer (they need ``kron_layers``).
_LAYERWISE_INITS = "'iblm', 'iblm_random', 'uninformative', 'heuristic', 'xavier', 'orthogonal' or 'lsuv'"


class LayerMap:
    """All the layers' weight matrices to and from the flat vector, for layers that cover the
    flat vector exactly (:func:`kron_layers` checks it).

    ``KronLayer.mat_to_flat`` / ``flat_to_mat`` take several slices, transposes and copies a
    layer; on the small networks of tabular data, where a step is a few hundred small
    operations, those are a tenth of a noisy K-FAC step. Up to ``GATHER_MAX`` values in all
    this map moves them in one indexing operation instead; more values go layer by layer,
    where the gather, at about three times the memory traffic of the slices, is slower (one
    thread: 20 against 38 us for one vector of 3,760 weights, 2.2 against 1.0 ms for 1,000 of
    501, 0.27 against 0.13 ms for one of 79,510). The values moved are the same either way.
    Build it with :func:`layer_map`, which keeps one per geometry and device.
    """

    #: The most values moved by one indexing operation (``to_flat`` / ``to_mats``).
    GATHER_MAX = 10_000

    def __init__(self, layers: list[KronLayer], device: torch.device) -> None:
        src = []
        for l in layers:
            i = torch.arange(l.n)[:, None].expand(l.n, l.p)
            j = torch.arange(l.p)[None, :].expand(l.n, l.p)
            pos = (l.w_off + j * l.n_in + i).clone()  # W[i, j] of W = [weight.T; bias]
            if l.has_bias:
                assert l.b_off is not None
                pos[l.n_in] = l.b_off + torch.arange(l.p)
            src.append(pos.reshape(-1))
        cat = torch.cat(src)
        inv = torch.empty_like(cat)
        inv[cat] = torch.arange(cat.numel())
        self.src, self.inv = cat.to(device), inv.to(device)
        self.layers = layers
        self.shapes = [(l.n, l.p) for l in layers]
        self.sizes = [l.n * l.p for l in layers]

    def to_flat(self, mats: list[Tensor]) -> Tensor:
        """Matrices ``(..., n, p)``, one a layer, as flat vectors ``(..., D)``."""
        lead = mats[0].shape[:-2]
        if lead.numel() * self.inv.numel() <= self.GATHER_MAX:
            return torch.cat([M.reshape(*lead, -1) for M in mats], -1)[..., self.inv]
        out = mats[0].new_empty(*lead, self.inv.numel())
        for l, M in zip(self.layers, mats):
            l.mat_to_flat(M, out)
        return out

    def to_mats(self, theta: Tensor) -> list[Tensor]:
        """Flat vectors ``(..., D)`` as the layers' matrices ``(..., n, p)`` (copies or views)."""
        lead = theta.shape[:-1]
        if theta.numel() > self.GATHER_MAX:
            return [l.flat_to_mat(theta) for l in self.layers]
        parts = theta[..., self.src].split(self.sizes, -1)
        return [part.reshape(*lead, n, p) for part, (n, p) in zip(parts, self.shapes)]


_LAYER_MAPS: dict[tuple[Any, ...], LayerMap] = {}


def layer_map(layers: list[KronLayer], device: torch.device) -> LayerMap:
    """The :class:`LayerMap` of ``layers`` on ``device`` (one kept per geometry)."""
    key = (str(device), *((l.w_off, l.b_off, l.n_in, l.p, l.has_bias) for l in layers))
    m = _LAYER_MAPS.get(key)
    if m is None:
        if len(_LAYER_MAPS) >= 64:
            _LAYER_MAPS.clear()
        m = _LAYER_MAPS[key] = LayerMap(layers, device)
    return m


def kron_layers(module: nn.Module, layout: ParamLayout) -> list[KronLayer]:
    """The Kronecker blocks of ``module``, or a clear error for an unsupported layer."""
    pos = dict(zip(layout.names, layout.offsets))
    layers: list[KronLayer] = []
    for name, mod in module.named_modules():
        own = [p for p in mod.parameters(recurse=False)]
        if not own:
            continue
        if isinstance(mod, nn.Linear) or (
            isinstance(mod, nn.Conv2d)
            and mod.groups == 1
            and mod.padding_mode == "zeros"
            and not isinstance(mod.padding, str)
        ):
            prefix = f"{name}." if name else ""
            b_off = pos[prefix + "bias"] if mod.bias is not None else None
            layers.append(KronLayer(name, mod, pos[prefix + "weight"], b_off))
        else:
            raise UnsupportedLayerError(
                f"Layer {name or '<root>'!r} ({type(mod).__name__}) has parameters but is not an nn.Linear or "
                "an nn.Conv2d (groups=1, zero padding given as integers, not 'same'/'valid'). The "
                "Kronecker-factored posteriors (NoisyKFAC and NoisyEKFAC estimators) and the layer-wise "
                f"initialisations (init={_LAYERWISE_INITS}) need every parameterised layer to be one of these. "
                "The SLANG, VOGN, Vadam, BBB and MCDropout estimators accept any module (with init='default'); "
                "or make the layer parameter-free."
            )
    covered = sum(l.p * l.n for l in layers)
    if covered != layout.size:
        raise UnsupportedLayerError("Some trainable parameters do not belong to a Linear or Conv2d layer.")
    return layers


def ordered_layers(module: nn.Module, layout: ParamLayout, X: Tensor) -> list[KronLayer]:
    """Linear/Conv2d blocks in the order a forward pass on ``X`` (rows of the network's input)
    calls them."""
    layers = {l.name: l for l in kron_layers(module, layout)}
    return [layers[name] for name in call_order(module, X[:1]) if name in layers]
