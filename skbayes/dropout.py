"""MC dropout estimators (Gal and Ghahramani, 2016): a network trained with dropout and
weight decay, with dropout kept on at prediction."""

from ._docs import CLASSIFIER_FACE, CLASSIFIER_PARAMS, EARLY_STOPPING_AUTO, REGRESSOR_FACE, estimator_doc
from ._estimator import (
    ADAM_AUTO_LEARNING_RATE,
    EARLY_STOPPING_BY_SIZE,
    MC_DROPOUT_AUTO_RATE,
    BayesianNetworkClassifier,
    BayesianNetworkRegressor,
    store_init_params,
)
from ._families import DropoutFamily

_BODY = """
MC dropout (Gal and Ghahramani, 2016) trains the network with dropout on the
hidden units and weight decay, by Adam, and keeps dropout on at prediction:
the prediction methods average ``predict_samples`` masked networks. Each
mask is drawn from a generator seeded at fit time and serves every row of
the call, so predictions are deterministic and a row's prediction does not
depend on the other rows. During training every example gets its own mask. {face}

Read more in the :doc:`Bayes by Backprop and MC dropout page </bbb_dropout>`
of the documentation.
"""


class MCDropoutRegressor(BayesianNetworkRegressor):
    _family = DropoutFamily
    #: 'auto' by network size (small, large): chosen by the defaults protocol.
    _auto_by_size = {"learning_rate": ADAM_AUTO_LEARNING_RATE, "dropout": MC_DROPOUT_AUTO_RATE}

    def __init__(
        self,
        *,
        hidden_layer_sizes=(50,),
        activation="relu",
        module=None,
        dropout="auto",
        input_dropout=0.0,
        prior_precision=1.0,
        learning_rate="auto",
        noise_precision="auto",
        noise_prior=(1e-3, 1e-3),
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
    ):
        store_init_params(locals())


class MCDropoutClassifier(BayesianNetworkClassifier):
    _family = DropoutFamily
    #: 'auto' by network size (small, large): chosen by the defaults protocol.
    _auto_by_size = {
        "learning_rate": ADAM_AUTO_LEARNING_RATE,
        "dropout": MC_DROPOUT_AUTO_RATE,
        "early_stopping": EARLY_STOPPING_BY_SIZE,
    }
    _param_docs = {**CLASSIFIER_PARAMS, "early_stopping": EARLY_STOPPING_AUTO}

    def __init__(
        self,
        *,
        hidden_layer_sizes=(50,),
        activation="relu",
        module=None,
        dropout="auto",
        input_dropout=0.0,
        prior_precision=1.0,
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
    ):
        store_init_params(locals())


MCDropoutRegressor.__doc__ = estimator_doc(
    MCDropoutRegressor,
    summary="Neural network regressor with MC dropout.",
    body=_BODY.format(face=REGRESSOR_FACE),
    see_also="""
        MCDropoutClassifier : The classification counterpart.
        BBBRegressor : Bayes by Backprop.
        """,
)


MCDropoutClassifier.__doc__ = estimator_doc(
    MCDropoutClassifier,
    summary="Neural network classifier with MC dropout.",
    body=_BODY.format(face=CLASSIFIER_FACE),
    see_also="""
        MCDropoutRegressor : The regression counterpart.
        BBBClassifier : Bayes by Backprop.
        """,
)
