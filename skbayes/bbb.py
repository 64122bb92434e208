"""Bayes by Backprop estimators (Blundell et al., 2015): mean-field Gaussian VI with
reparameterised gradients and Adam, with the local reparameterisation trick."""

from ._docs import CLASSIFIER_FACE, CLASSIFIER_PARAMS, EARLY_STOPPING_AUTO, REGRESSOR_FACE, estimator_doc
from ._estimator import (
    ADAM_AUTO_LEARNING_RATE,
    EARLY_STOPPING_BY_SIZE,
    BayesianNetworkClassifier,
    BayesianNetworkRegressor,
    store_init_params,
)
from ._families import BBBFamily

_BODY = """
Bayes by Backprop (Blundell et al., 2015) fits a mean-field Gaussian
posterior ``q = N(mu, diag(sigma^2))``, ``sigma = softplus(rho)``, by
minimising a Monte Carlo estimate of the negative ELBO
``E_q[-log p(y | X, theta)] + kl_weight * KL(q || N(0, lambda^{{-1}} I))``
(closed-form KL) with reparameterised gradients and Adam on ``(mu, rho)``.
Initial standard deviations are ``1 / sqrt(n_samples + prior_precision)``
for ``init='default'``, else those of the initialiser. {face}

Read more in the :doc:`Bayes by Backprop and MC dropout page </bbb_dropout>`
of the documentation.
"""


class BBBRegressor(BayesianNetworkRegressor):
    _family = BBBFamily
    #: 'auto' by network size (small, large): chosen by the defaults protocol.
    _auto_by_size = {"kl_weight": (0.1, 0.1), "predictive": ("glm", "glm"), "learning_rate": ADAM_AUTO_LEARNING_RATE}

    def __init__(
        self,
        *,
        hidden_layer_sizes=(50,),
        activation="relu",
        module=None,
        prior_precision=1.0,
        kl_weight=0.1,
        local_reparam=True,
        learning_rate="auto",
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
        early_stopping=False,
        validation_fraction=0.1,
        n_iter_no_change=20,
        tol=1e-4,
        random_state=None,
        device="cpu",
        dtype="float64",
        verbose=False,
        n_threads=None,
        predictive="glm",
    ):
        store_init_params(locals())


class BBBClassifier(BayesianNetworkClassifier):
    _family = BBBFamily
    #: 'auto' by network size (small, large): chosen by the defaults protocol (small networks: the
    #: untempered posterior with the sampled predictive since the small classification group took
    #: in sets whose classes overlap; large networks: the untempered posterior with the GLM predictive).
    _auto_by_size = {
        "kl_weight": (1.0, 1.0),
        "predictive": ("sampled", "glm"),
        "learning_rate": ADAM_AUTO_LEARNING_RATE,
        "early_stopping": EARLY_STOPPING_BY_SIZE,
    }
    _param_docs = {**CLASSIFIER_PARAMS, "early_stopping": EARLY_STOPPING_AUTO}

    def __init__(
        self,
        *,
        hidden_layer_sizes=(50,),
        activation="relu",
        module=None,
        prior_precision=1.0,
        kl_weight="auto",
        local_reparam=True,
        learning_rate="auto",
        max_iter="auto",
        batch_size="auto",
        mc_samples=1,
        predict_samples="auto",
        init="iblm",
        iblm_batch_size=128,
        kl_annealing=None,
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
        predictive="auto",
        glm_link="pairwise",
    ):
        store_init_params(locals())


BBBRegressor.__doc__ = estimator_doc(
    BBBRegressor,
    summary="Bayesian neural network regressor trained by Bayes by Backprop.",
    body=_BODY.format(face=REGRESSOR_FACE),
    see_also="""
        BBBClassifier : The classification counterpart.
        MCDropoutRegressor : MC dropout.
        """,
)


BBBClassifier.__doc__ = estimator_doc(
    BBBClassifier,
    summary="Bayesian neural network classifier trained by Bayes by Backprop.",
    body=_BODY.format(face=CLASSIFIER_FACE),
    see_also="""
        BBBRegressor : The regression counterpart.
        MCDropoutClassifier : MC dropout.
        """,
)
