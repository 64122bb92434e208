"""Curvature: per-example gradients (SLANG, VOGN) and Kronecker factors (noisy K-FAC / EK-FAC).

- :mod:`.per_example`: the curvature batch ``G`` (per-example gradients of the negative
  log-likelihood) in two interchangeable representations, dense-layer and generic.
- :mod:`.factors`: per-layer inputs and output gradients and their KFC statistics.
- :mod:`.gradients`: minibatch gradients without per-example statistics (Vadam/Vprop,
  Bayes by Backprop, MC dropout).
"""

from .factors import kron_batch, layer_grad, layer_stats, projected_second_moment
from .gradients import masked_minibatch_gradient, minibatch_gradients, reparam_gradients
from .per_example import DenseCurvature, GenericCurvature, dense_curvature, generic_curvature, per_example_curvature

__all__ = [
    "DenseCurvature",
    "GenericCurvature",
    "dense_curvature",
    "generic_curvature",
    "per_example_curvature",
    "kron_batch",
    "layer_grad",
    "layer_stats",
    "projected_second_moment",
    "minibatch_gradients",
    "masked_minibatch_gradient",
    "reparam_gradients",
]
