"""SLANG estimators: low-rank-plus-diagonal natural-gradient variational inference
(Mishkin et al., NeurIPS 2018)."""

from ._docs import EARLY_STOPPING_AUTO_REGRESSOR, REGRESSOR_FACE, estimator_doc
from ._estimator import (
    EARLY_STOPPING_BY_SIZE,
    BayesianNetworkClassifier,
    BayesianNetworkRegressor,
    store_init_params,
)
from ._families import SLANGFamily

_BODY = """
SLANG (Mishkin et al., NeurIPS 2018) fits a Gaussian variational posterior
whose precision is low rank plus diagonal, ``U U^T + diag(d)``, by
approximate natural-gradient steps built from back-propagated per-example
gradients. {face}

Read more in the :doc:`SLANG estimators page </slang>` of the documentation.
"""

#: ``SLANGClassifier``'s ``decay_epochs``: both step sizes halve after 30 epochs (the defaults
#: protocol's small classification group, docs/defaults_protocol.md). The regressor keeps constant
#: steps (None): every decay ranked below them on regression.
CLASSIFIER_DECAY_EPOCHS = 30


class SLANGRegressor(BayesianNetworkRegressor):
    _family = SLANGFamily
    #: 'auto' by network size (small, large): chosen by the defaults protocol (early stopping:
    #: the wide regression networks of docs/defaults_protocol.md, "Early stopping on wide
    #: regression networks").
    _auto_by_size = {
        "kl_weight": (0.3, 0.3),
        "predictive": ("sampled", "sampled"),
        "early_stopping": EARLY_STOPPING_BY_SIZE,
    }
    _param_docs = {"early_stopping": EARLY_STOPPING_AUTO_REGRESSOR}

    def __init__(
        self,
        *,
        hidden_layer_sizes=(50,),
        activation="relu",
        module=None,
        rank=8,
        prior_precision=1.0,
        learning_rate=0.01,
        beta="auto",
        momentum=0.9,
        lr_decay=None,
        decay_epochs=None,
        fisher="empirical",
        damping=0.01,
        max_iter="auto",
        batch_size="auto",
        mc_samples=1,
        predict_samples=100,
        init="iblm",
        iblm_batch_size=128,
        kl_annealing=None,
        noise_precision="auto",
        noise_prior=(1e-3, 1e-3),
        warm_start=False,
        early_stopping="auto",
        validation_fraction=0.1,
        n_iter_no_change=20,
        tol=1e-4,
        random_state=None,
        device="cpu",
        dtype="float64",
        verbose=False,
        n_threads=None,
        predictive="sampled",
        kl_weight=0.3,
    ):
        store_init_params(locals())


class SLANGClassifier(BayesianNetworkClassifier):
    _family = SLANGFamily
    #: 'auto' by network size (small, large): chosen by the defaults protocol (small networks:
    #: the untempered posterior with the sampled predictive since the small classification group
    #: took in sets whose classes overlap; large networks: the GLM predictive;
    #: docs/defaults_protocol.md).
    _auto_by_size = {"kl_weight": (1.0, 1.0), "predictive": ("sampled", "glm")}

    def __init__(
        self,
        *,
        hidden_layer_sizes=(50,),
        activation="relu",
        module=None,
        rank=8,
        prior_precision=1.0,
        learning_rate=0.01,
        beta="auto",
        momentum=0.9,
        lr_decay=None,
        decay_epochs=CLASSIFIER_DECAY_EPOCHS,
        fisher="empirical",
        damping=0.01,
        max_iter="auto",
        batch_size="auto",
        mc_samples=1,
        predict_samples="auto",
        init="iblm",
        iblm_batch_size=128,
        kl_annealing=None,
        warm_start=False,
        early_stopping=False,
        validation_fraction=0.1,
        n_iter_no_change=20,
        tol=1e-4,
        random_state=None,
        device="cpu",
        dtype="float64",
        verbose=False,
        n_threads=None,
        predictive="auto",
        glm_link="pairwise",
        kl_weight="auto",
    ):
        store_init_params(locals())


SLANGRegressor.__doc__ = estimator_doc(
    SLANGRegressor,
    summary="Bayesian neural network regressor trained by SLANG.",
    body=_BODY.format(face=REGRESSOR_FACE),
    see_also="""
        SLANGClassifier : The classification counterpart.
        VOGNRegressor : SLANG with ``rank=0`` (mean-field VOGN).
        sklearn.linear_model.BayesianRidge : Bayesian linear regression.
        """,
)

SLANGClassifier.__doc__ = estimator_doc(
    SLANGClassifier,
    summary="Bayesian neural network classifier trained by SLANG.",
    body=_BODY.format(
        face="""Two classes use one logit and a Bernoulli likelihood (so
``hidden_layer_sizes=()`` is exactly Bayesian logistic regression with
``n_features + 1`` parameters, weights then bias); more classes use a
softmax."""
    ),
    see_also="""
        SLANGRegressor : The regression counterpart.
        VOGNClassifier : SLANG with ``rank=0`` (mean-field VOGN).
        """,
    example_hidden="()",
)
