"""Mean-field VOGN estimators: SLANG with the rank fixed at 0.

Mean-field VOGN (Khan et al., 2018; the poster's "NGD for mean-field VI" box)
is the ``L = 0`` special case of SLANG: the precision is ``diag(d)`` with
``d = N s + lambda`` and ``s`` a moving average of the per-example squared
gradients. These classes reuse SLANG's family (:class:`~skbayes.slang._SLANGFamily`)
unchanged, with ``rank`` a class attribute instead of a parameter, so the two
can never drift apart: ``VOGNRegressor(**kw)`` trains exactly as
``SLANGRegressor(rank=0, **kw)``.
"""

from ._base import _store_init_params
from ._estimators import BayesianClassifierBase, BayesianRegressorBase
from .slang import _COMMON_ATTRS, _COMMON_PARAMS, _SLANGFamily, _param_docs


# VOGN (rank 0) keeps the larger step sizes it is stable with; SLANG's low-rank steps
# default to 0.01 for both (docs/slang.md).
_VOGN_PARAMS = (
    "".join(e for name, e in _param_docs(_COMMON_PARAMS).items() if name != "rank")
    .replace("    learning_rate : float, default=0.01\n", "    learning_rate : float, default=0.05\n", 1)
    .replace("    beta : float, default=0.01\n", "    beta : float, default=0.05\n", 1)
)
assert "learning_rate : float, default=0.05" in _VOGN_PARAMS and "beta : float, default=0.05" in _VOGN_PARAMS

_VOGN_ATTRS = _COMMON_ATTRS.replace(
    "posterior_ : LowRankGaussian",
    "posterior_ : LowRankGaussian\n        With an empty low-rank factor (``U`` of shape ``(D, 0)``): a diagonal\n        Gaussian with precision ``d``.",
    1,
)

_METHOD = """Mean-field VOGN (variational online Gauss-Newton; Khan et al., ICML 2018)
    fits a diagonal Gaussian posterior ``N(mu, diag(d)^{-1})`` by natural-gradient
    steps built from back-propagated per-example gradients ``g_i`` of the
    negative log-likelihood at a weight sample ``theta ~ q``. With ``N`` training
    examples, a minibatch of ``M``, ``S`` weight samples and ``d = N s + lambda``::

        s  <- (1 - beta) s + beta / (M S) sum_i g_i**2
        mu <- mu - alpha (g_bar + lambda mu / N) / (s + lambda / N)

    (``g_bar`` the minibatch-mean gradient, through the ``momentum`` average).
    It is SLANG with ``rank=0``: this class shares SLANG's code and trains
    step for step like ``SLANG*(rank=0)`` with the same parameters."""


class VOGNRegressor(_SLANGFamily, BayesianRegressorBase):
    __doc__ = f"""Bayesian neural network regressor trained by mean-field VOGN.

    {_METHOD}

    Targets are standardised internally; predictions are mapped back. The
    Gaussian noise precision is learned by default with a ``Gamma(6, 6)``
    prior and a Gamma variational posterior.

    Read more in the :doc:`mean-field estimators page </meanfield>`.

    Parameters
    ----------{_VOGN_PARAMS}
    noise_precision : 'auto' or float, default='auto'
        Precision of the Gaussian observation noise, in the units of ``y``
        (1 / noise variance). 'auto' learns it (Gamma(6, 6) prior on the
        standardised scale, variational Gamma posterior updated by natural
        gradient with step ``beta``); a float fixes it.

    Attributes
    ----------{_VOGN_ATTRS}
    noise_precision_ : float
        Posterior mean of the noise precision, in the units of ``y``.

    See Also
    --------
    VOGNClassifier : the classification counterpart.
    SLANGRegressor : adds a low-rank part to the precision (``rank=0`` is this estimator).
    VadamRegressor : mean-field VI without per-example gradients.

    Examples
    --------
    >>> from sklearn.datasets import load_diabetes
    >>> from skbayes import VOGNRegressor
    >>> X, y = load_diabetes(return_X_y=True)
    >>> reg = VOGNRegressor(hidden_layer_sizes=(20,), max_iter=20, random_state=0).fit(X, y)
    >>> mean, std = reg.predict(X[:3], return_std=True)
    """

    #: The low-rank part SLANG's family keeps: none (mean field). A class
    #: attribute, not a parameter: ``get_params`` only lists ``__init__``'s arguments.
    rank = 0

    def __init__(
        self,
        hidden_layer_sizes=(50,),
        activation="relu",
        module=None,
        prior_precision=1.0,
        learning_rate=0.05,
        beta=0.05,
        momentum=0.9,
        lr_decay=None,
        max_iter=200,
        batch_size="auto",
        mc_samples=1,
        predict_samples=100,
        init="iblm",
        iblm_batch_size=128,
        kl_annealing=None,
        noise_precision="auto",
        warm_start=False,
        early_stopping=False,
        validation_fraction=0.1,
        n_iter_no_change=20,
        tol=1e-4,
        random_state=None,
        device="cpu",
        dtype="float64",
        verbose=False,
    ):
        _store_init_params(locals())


class VOGNClassifier(_SLANGFamily, BayesianClassifierBase):
    __doc__ = f"""Bayesian neural network classifier trained by mean-field VOGN.

    {_METHOD}

    Two classes use one logit and a Bernoulli likelihood (so
    ``hidden_layer_sizes=()`` is Bayesian logistic regression with a diagonal
    Gaussian posterior); more classes use a softmax.

    Read more in the :doc:`mean-field estimators page </meanfield>`.

    Parameters
    ----------{_VOGN_PARAMS}

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        Class labels.{_VOGN_ATTRS}

    See Also
    --------
    VOGNRegressor : the regression counterpart.
    SLANGClassifier : adds a low-rank part to the precision (``rank=0`` is this estimator).
    VadamClassifier : mean-field VI without per-example gradients.

    Examples
    --------
    >>> from sklearn.datasets import load_breast_cancer
    >>> from sklearn.preprocessing import StandardScaler
    >>> from skbayes import VOGNClassifier
    >>> X, y = load_breast_cancer(return_X_y=True)
    >>> X = StandardScaler().fit_transform(X)
    >>> clf = VOGNClassifier(hidden_layer_sizes=(), max_iter=20, random_state=0).fit(X, y)
    >>> proba = clf.predict_proba(X[:3])
    """

    rank = 0

    def __init__(
        self,
        hidden_layer_sizes=(50,),
        activation="relu",
        module=None,
        prior_precision=1.0,
        learning_rate=0.05,
        beta=0.05,
        momentum=0.9,
        lr_decay=None,
        max_iter=200,
        batch_size="auto",
        mc_samples=1,
        predict_samples=100,
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
    ):
        _store_init_params(locals())
