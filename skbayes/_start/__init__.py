"""Initialisation of the variational posterior (the posterior's start): i-BLM and the
competitors of Rossi, Michiardi and Filippone (ICML 2019).

Every initialiser gives the posterior mean and the KL-optimal factorised variances
(flat vectors in ``module_.parameters()`` order); :func:`initial_precision` turns
them into the diagonal precision of a posterior over all ``N`` training examples,
which each family maps into its own structure.

- :mod:`.choose`: which initialiser runs for ``init=...`` and the starting precision.
- :mod:`.iblm`: layer-wise Bayesian linear regression.
- :mod:`.baselines`: uninformative, heuristic, Xavier, orthogonal, LSUV.
- :mod:`.batched_blr`: the batched Bayesian linear regression engine of i-BLM.
"""

from .choose import INITS, InitialPrecision, diagnose, initial_moments, initial_precision

__all__ = ["INITS", "InitialPrecision", "diagnose", "initial_moments", "initial_precision"]
