"""Vprop and Vadam estimators: mean-field natural-gradient VI without per-example gradients.

Khan, Nielsen, Tangkaratt, Lin, Gal and Srivastava, "Fast and Scalable Bayesian
Deep Learning by Weight-Perturbation in Adam", ICML 2018.
"""

from ._docs import EARLY_STOPPING_AUTO, PARAMS, REGRESSOR_FACE, Entry, estimator_doc
from ._estimator import (
    EARLY_STOPPING_BY_SIZE,
    BayesianNetworkClassifier,
    BayesianNetworkRegressor,
    store_init_params,
)
from ._families import VadamFamily

_BODY = """
Vadam and Vprop (Khan et al., "Fast and Scalable Bayesian Deep Learning
by Weight-Perturbation in Adam", ICML 2018) fit a diagonal Gaussian
posterior ``q = N(mu, diag(N s + lambda)^{{-1}})`` with Adam- and
RMSprop-like updates. Where mean-field VOGN averages per-example squared
gradients, they use the square of the minibatch-mean gradient (the
"gradient magnitude" approximation), so a step costs one ordinary backward
pass per weight sample. With ``N`` training examples, a minibatch of ``M``,
``S = mc_samples`` weight samples, ``lambda = prior_precision``, step
``t = 1, 2, ...`` and ``alpha, gamma_1, gamma_2 = learning_rate, beta1,
beta2``, one step is::

    theta_k = mu + eps_k / sqrt(N s + lambda),  eps_k ~ N(0, I),  k = 1..S
    g_k     = (1/M) sum_i grad_theta [-log p(y_i | x_i, theta_k)]
    g       = (1/S) sum_k g_k,      h = (1/S) sum_k g_k**2
    s      <- gamma_2 s + (1 - gamma_2) h

    Vprop:  mu <- mu - alpha (g + lambda mu / N) / (s + lambda / N)

    Vadam:  m  <- gamma_1 m + (1 - gamma_1) (g + lambda mu / N)
            m_hat = m / (1 - gamma_1^t)
            s_hat = (s - gamma_2^t s0) / (1 - gamma_2^t)
            mu <- mu - alpha m_hat / (sqrt(s_hat) + lambda / N)

``N s + lambda`` is the posterior precision: the prior's ``lambda`` plus
``N`` times ``s``, a moving average of the squared gradient that stands in
for the per-example diagonal Gauss-Newton (Fisher) curvature. Weights are
sampled with the raw ``s`` (as in the paper's algorithm). Vprop's mean step
is the natural-gradient step of that Gaussian (the VOGN update with
``h`` in place of the mean of per-example squares); Vadam's takes Adam's
square root and is no longer a natural-gradient step, only its
precision is. ``s_hat`` is Adam's bias correction of the average of
``h``: ``s`` starts at ``s0`` (the initial precision, see ``init``), not
at 0, so its start is removed rather than scaled up; with ``s0 = 0`` it is
the paper's ``s / (1 - gamma_2^t)``. With ``M > 1`` the squared mean
gradient underestimates the mean of per-example squares (by up to a factor
``M`` for uncorrelated gradients), so after a long fit the posterior is
wider than VOGN's. {face}

Read more in the :doc:`mean-field estimators page </meanfield>` of the documentation.
"""


#: ``learning_rate='auto'`` by network size and method: Vadam's Adam step of 0.01 below
#: ``LARGE_NETWORK_WEIGHTS`` weights, 0.003 from there on (the defaults protocol's image
#: group); Vprop's 0.05 on every size ('auto': the family's value for the method).
_AUTO_LEARNING_RATE = ("auto", {"vadam": 0.003, "vprop": "auto"})

#: ``VadamRegressor``'s ``kl_weight='auto'`` and ``decay_epochs='auto'`` by method, on every
#: network: Vadam's untempered posterior with a constant step; Vprop's temperature of 0.3 with the
#: step decay of 30 epochs, chosen by the defaults protocol's regression group
#: (docs/defaults_protocol.md, "Vprop through the protocol").
_REGRESSOR_KL_WEIGHT = ({"vadam": 1.0, "vprop": 0.3},) * 2  # (small, large): the same
_REGRESSOR_DECAY_EPOCHS = ({"vadam": None, "vprop": 30},) * 2
#: ``VadamClassifier``'s by method and network size, chosen by the defaults protocol's small
#: classification group (with sets whose classes overlap): the untempered posterior with the
#: sampled predictive on small networks for both methods (Vadam at constant steps, Vprop with the
#: step decay of 30 epochs); on large networks the untempered posterior with the GLM predictive
#: at constant steps (docs/defaults_protocol.md, "The small classifiers' temperature where classes
#: overlap", "Vadam's prior precision and temperature on classification" and "Vprop through the
#: protocol").
_CLASSIFIER_KL_WEIGHT = (1.0, 1.0)
_CLASSIFIER_PREDICTIVE = ("sampled", "glm")
_CLASSIFIER_DECAY_EPOCHS = ({"vadam": None, "vprop": 30}, {"vadam": None, "vprop": None})
#: ``VadamClassifier``'s ``prior_precision=None`` by network size and method: 1 on small networks
#: (with their untempered posterior); on large ones Vadam's 3, which won the image group, and
#: Vprop's 1 (its fits at 3 were unstable on digits).
_CLASSIFIER_PRIOR = ({"vadam": 1.0, "vprop": 1.0}, {"vadam": 3.0, "vprop": 1.0})
_CLASSIFIER_PRIOR_DOC = Entry(
    "float, 'auto' or None",
    PARAMS["prior_precision"].text
    + """
None stands for the value the defaults protocol chose for this estimator: 1 on
networks of fewer than 20,000 weights; on larger ones, by ``method``, {vadam:g} for
'vadam' and {vprop:g} for 'vprop'.""".format(**_CLASSIFIER_PRIOR[1]),
)
_DECAY_DOC = Entry(
    "float, None or 'auto'",
    VadamFamily.param_docs["decay_epochs"].text
    + "\n'auto' is the value the defaults protocol chose for this estimator, by ``method``:\n"
    + "{auto_decay_epochs}",
)


class VadamRegressor(BayesianNetworkRegressor):
    _family = VadamFamily
    _auto_by_size = {
        **BayesianNetworkRegressor._auto_by_size,
        "learning_rate": _AUTO_LEARNING_RATE,
        "kl_weight": _REGRESSOR_KL_WEIGHT,
        "decay_epochs": _REGRESSOR_DECAY_EPOCHS,
    }
    _param_docs = {"decay_epochs": _DECAY_DOC}  # the regressor has no face-specific entries of its own

    def __init__(
        self,
        *,
        hidden_layer_sizes=(50,),
        activation="relu",
        module=None,
        method="vadam",
        prior_precision=1.0,
        learning_rate="auto",
        beta1=0.9,
        beta2=0.999,
        decay_epochs="auto",
        max_iter=200,
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
        tol=None,
        random_state=None,
        device="cpu",
        dtype="float64",
        verbose=False,
        n_threads=None,
        predictive="sampled",
        kl_weight="auto",
    ):
        store_init_params(locals())


class VadamClassifier(BayesianNetworkClassifier):
    _family = VadamFamily
    _auto_by_size = {
        "kl_weight": _CLASSIFIER_KL_WEIGHT,
        "predictive": _CLASSIFIER_PREDICTIVE,
        "learning_rate": _AUTO_LEARNING_RATE,
        "decay_epochs": _CLASSIFIER_DECAY_EPOCHS,
        "early_stopping": EARLY_STOPPING_BY_SIZE,
    }
    _prior_for_none = _CLASSIFIER_PRIOR
    _param_docs = {
        **BayesianNetworkClassifier._param_docs,
        "decay_epochs": _DECAY_DOC,
        "prior_precision": _CLASSIFIER_PRIOR_DOC,
        "early_stopping": EARLY_STOPPING_AUTO,
    }

    def __init__(
        self,
        *,
        hidden_layer_sizes=(50,),
        activation="relu",
        module=None,
        method="vadam",
        prior_precision=None,
        learning_rate="auto",
        beta1=0.9,
        beta2=0.999,
        decay_epochs="auto",
        max_iter=200,
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
        tol=None,
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


VadamRegressor.__doc__ = estimator_doc(
    VadamRegressor,
    summary="Bayesian neural network regressor trained by Vadam or Vprop.",
    body=_BODY.format(face=REGRESSOR_FACE),
    see_also="""
        VadamClassifier : The classification counterpart.
        VOGNRegressor : Mean-field natural gradient with per-example squared gradients.
        """,
)

VadamClassifier.__doc__ = estimator_doc(
    VadamClassifier,
    summary="Bayesian neural network classifier trained by Vadam or Vprop.",
    body=_BODY.format(
        face="""Two classes use one logit and a Bernoulli likelihood (so
``hidden_layer_sizes=()`` is Bayesian logistic regression with a diagonal
Gaussian posterior); more classes use a softmax."""
    ),
    see_also="""
        VadamRegressor : The regression counterpart.
        VOGNClassifier : Mean-field natural gradient with per-example squared gradients.
        """,
    example_hidden="()",
)
