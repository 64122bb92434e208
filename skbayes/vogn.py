"""Mean-field VOGN estimators: SLANG with the rank fixed at 0.

Mean-field VOGN (Khan et al., 2018) is the ``L = 0`` special case of SLANG: the
precision is ``diag(d)`` with ``d = N s + lambda`` and ``s`` a moving average of
the per-example squared gradients. These classes use SLANG's family unchanged,
with ``rank`` a fixed class attribute instead of a parameter, so the two can never
drift apart: ``VOGNRegressor(**kw)`` trains exactly as ``SLANGRegressor(rank=0, **kw)``.
"""

from ._docs import REGRESSOR_FACE, estimator_doc
from ._estimator import BayesianNetworkClassifier, BayesianNetworkRegressor, store_init_params
from ._families import SLANGFamily

#: ``VOGNClassifier``'s ``decay_epochs``: both step sizes halve after 30 epochs, chosen with its
#: ``kl_weight`` and ``predictive`` by the defaults protocol's small classification group
#: (docs/defaults_protocol.md). The regressor keeps constant steps (None).
CLASSIFIER_DECAY_EPOCHS = 30

_BODY = """
Mean-field VOGN (variational online Gauss-Newton; Khan et al., ICML 2018)
fits a diagonal Gaussian posterior ``N(mu, diag(d)^{{-1}})`` by natural-gradient
steps built from back-propagated per-example gradients ``g_i`` of the
negative log-likelihood at a weight sample ``theta ~ q``. With ``N`` training
examples, a minibatch of ``M``, ``S`` weight samples and ``d = N s + lambda``::

    s  <- (1 - beta) s + beta / (M S) sum_i g_i**2
    mu <- mu - alpha (g_bar + lambda mu / N) / (s + lambda / N)

(``g_bar`` the minibatch-mean gradient, through the ``momentum`` average).
It is SLANG with ``rank=0``: this class shares SLANG's code and trains
step for step like ``SLANG*(rank=0)`` with the same parameters. {face}

Read more in the :doc:`mean-field estimators page </meanfield>` of the documentation.
"""


class VOGNRegressor(BayesianNetworkRegressor):
    _family = SLANGFamily
    #: The low-rank part SLANG's family keeps: none (mean field). A class attribute,
    #: not a parameter: ``get_params`` only lists ``__init__``'s arguments.
    rank = 0
    _fixed_params = ("rank",)
    #: 'auto' by network size (small, large): chosen by the defaults protocol.
    _auto_by_size = {"kl_weight": (0.3, 0.3), "predictive": ("sampled", "sampled")}

    def __init__(
        self,
        *,
        hidden_layer_sizes=(50,),
        activation="relu",
        module=None,
        prior_precision="auto",
        learning_rate=0.05,
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
        early_stopping=False,
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


class VOGNClassifier(BayesianNetworkClassifier):
    _family = SLANGFamily
    rank = 0
    _fixed_params = ("rank",)
    #: 'auto' by network size (small, large): chosen by the defaults protocol (small networks:
    #: the untempered posterior with the sampled predictive since the small classification group
    #: took in sets whose classes overlap, with the step decay; large networks: the tempered
    #: posterior with the sampled predictive, on images scaled as a whole;
    #: docs/defaults_protocol.md).
    _auto_by_size = {"kl_weight": (1.0, 0.3), "predictive": ("sampled", "sampled")}

    def __init__(
        self,
        *,
        hidden_layer_sizes=(50,),
        activation="relu",
        module=None,
        prior_precision=1.0,
        learning_rate=0.05,
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


VOGNRegressor.__doc__ = estimator_doc(
    VOGNRegressor,
    summary="Bayesian neural network regressor trained by mean-field VOGN.",
    body=_BODY.format(face=REGRESSOR_FACE),
    see_also="""
        VOGNClassifier : The classification counterpart.
        SLANGRegressor : Adds a low-rank part to the precision (``rank=0`` is this estimator).
        VadamRegressor : Mean-field VI without per-example gradients.
        """,
)

VOGNClassifier.__doc__ = estimator_doc(
    VOGNClassifier,
    summary="Bayesian neural network classifier trained by mean-field VOGN.",
    body=_BODY.format(
        face="""Two classes use one logit and a Bernoulli likelihood (so
``hidden_layer_sizes=()`` is Bayesian logistic regression with a diagonal
Gaussian posterior); more classes use a softmax."""
    ),
    see_also="""
        VOGNRegressor : The regression counterpart.
        SLANGClassifier : Adds a low-rank part to the precision (``rank=0`` is this estimator).
        VadamClassifier : Mean-field VI without per-example gradients.
        """,
    example_hidden="()",
)
