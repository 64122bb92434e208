"""Curvature: per-example gradients (SLANG, VOGN) and Kronecker factors (noisy K-FAC / EK-FAC).

- :mod:`.per_example`: the curvature batch ``G`` (per-example gradients of the negative
  log-likelihood) in two interchangeable representations, dense-layer and generic.
- :mod:`.factors`: per-layer inputs and output gradients and their KFC statistics.
- :mod:`.gradients`: minibatch gradients without per-example statistics (Vadam/Vprop,
  Bayes by Backprop, MC dropout), on dense networks and through autograd.
"""

from .factors import kron_batch, layer_grad, layer_stats, projected_second_moment
from .gradients import (
    Masks,
    masked_gradient,
    masked_outputs,
    minibatch_gradients,
    neg_elbo_estimate,
    neg_elbo_gradients,
    reparam_outputs,
)
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
    "Masks",
    "minibatch_gradients",
    "masked_gradient",
    "masked_outputs",
    "neg_elbo_estimate",
    "neg_elbo_gradients",
    "reparam_outputs",
]
