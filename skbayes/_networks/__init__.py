"""Networks: the MLP built from ``hidden_layer_sizes``, user modules, the flat
parameter vector <-> module views, the forward path (network + parameter vector ->
outputs) used by every family and by prediction, and the per-layer geometry of
``Linear`` / ``Conv2d`` layers that the Kronecker families and i-BLM work with.

The package is split by job: :mod:`.build` (the MLP and user modules), :mod:`.layout` (the
flat parameter vector), :mod:`.dense` (the batched dense engine and its backward pass),
:mod:`.forward` (the forward wrapper) and :mod:`.geometry` (layer order and Kronecker
layer geometry).
"""

from .build import ACTIVATIONS, build_mlp, init_layers, make_module, materialize
from .dense import DenseSpec
from .forward import NetworkForward
from .geometry import KronLayer, LayerMap, SharedOnCopy, call_order, kron_layers, layer_map, ordered_layers
from .layout import ParamLayout

__all__ = [
    "ACTIVATIONS",
    "DenseSpec",
    "KronLayer",
    "LayerMap",
    "NetworkForward",
    "ParamLayout",
    "SharedOnCopy",
    "build_mlp",
    "materialize",
    "call_order",
    "init_layers",
    "kron_layers",
    "layer_map",
    "make_module",
    "ordered_layers",
]
