"""SLANG estimators: low-rank-plus-diagonal natural-gradient variational inference."""

import re

import torch

from ._base import _check_number, _store_init_params
from ._estimators import BayesianClassifierBase, BayesianRegressorBase
from .posteriors import LowRankGaussian, slang_precision_update


class _SLANGFamily:
    """SLANG's posterior family and update (mixed into the public estimators)."""

    def _check_family_params(self):
        _check_number("rank", self.rank, low=0, integer=True)
        _check_number("prior_precision", self.prior_precision, low=0, low_open=True)
        _check_number("learning_rate", self.learning_rate, low=0, low_open=True)
        _check_number("beta", self.beta, low=0, high=1, low_open=True)
        _check_number("momentum", self.momentum, low=0, high=1, high_open=True)
        if self.lr_decay is not None:
            _check_number("lr_decay", self.lr_decay, low=0)

    def _prior_precision(self):
        return float(self.prior_precision)

    def _init_posterior(self, mean, n_train, var=None):
        D = mean.shape[0]
        L = min(int(self.rank), D)
        if var is None:
            # init='default': the prior plus one unit of curvature per training
            # example, i.e. initial standard deviations of about 1/sqrt(N + prior).
            d0 = torch.full_like(mean, float(self.prior_precision) + float(n_train))
        elif self.init == "iblm":
            # i-BLM's factorised precisions come from regressions on B rows; SLANG's
            # precision is on the scale of all N examples (N x empirical Fisher), so
            # the data part is scaled by N / B. U = 0.
            B = min(int(self.iblm_batch_size), n_train)
            lam = float(self.prior_precision)
            d0 = lam + (1.0 / var - lam).clamp_min(0.0) * (n_train / B)
        else:
            # the initialiser's variances, with U = 0
            d0 = 1.0 / var
        U0 = mean.new_zeros(L, D).T  # (D, L) view of a contiguous (L, D) tensor
        self.posterior_ = LowRankGaussian(mean, U0, d0)
        self._opt_state = {"momentum": torch.zeros_like(mean)}

    def _kl(self):
        return self._kl_scale() * self.posterior_.kl_to_prior(self.prior_precision)

    def _step(self, Xb, yb, N, gen, spec):
        """One SLANG step (Algorithm 1 with momentum and optional decay)."""
        post = self.posterior_
        S, M, t = int(self.mc_samples), Xb.shape[0], self.t_
        decay = 1.0 + (t ** float(self.lr_decay) if self.lr_decay else 0.0)
        alpha = float(self.learning_rate) / decay
        beta = float(self.beta) / decay
        lam = float(self.prior_precision) * self._kl_scale()
        theta = post.sample_t(S, generator=gen)
        curv, nll, f = self._curvature(theta, Xb, yb, spec)
        scale = N / (M * S)
        cache = self._opt_state.setdefault("cache", {})
        L = min(int(self.rank), post.n_params)
        U, d = slang_precision_update(
            post.U_t, post.d_t, curv, scale, beta, lam, self.rank, cache=cache, out=post.spare_factor(L)
        )
        # momentum: bias-corrected moving average of the likelihood gradient
        gamma = float(self.momentum)
        mom = self._opt_state["momentum"]
        mom.mul_(gamma).add_(curv.grad_sum(), alpha=(1.0 - gamma) * scale)
        post.set_factors(U, d, scaled_gram=cache.pop("scaled_gram", None))
        rhs = torch.add(mom, post.mean_t, alpha=lam * (1.0 - gamma ** (t + 1)))  # (1 - gamma^(t+1)) (m_hat + lam mu)
        post.mean_t = torch.sub(post.mean_t, post.solve_t(rhs), alpha=alpha / (1.0 - gamma ** (t + 1)))
        self._after_step(f, yb, scale, N, beta)
        self.t_ = t + 1
        return float(scale * nll.sum())

_COMMON_PARAMS = """
    hidden_layer_sizes : tuple of int, default=(50,)
        Widths of the hidden layers of the fully connected network built when
        ``module`` is None. ``()`` gives a linear model (Bayesian linear or
        logistic regression).
    activation : {'relu', 'tanh', 'logistic', 'identity', 'elu', 'gelu', 'softplus', 'leaky_relu'}, default='relu'
        Hidden-layer activation of the built network.
    module : callable or torch.nn.Module, default=None
        A custom network instead of the built one: a callable
        ``module(n_features_in, n_outputs)`` returning a :class:`torch.nn.Module`
        (a class works), or a module instance (deep-copied, never modified).
        It receives float tensors of shape ``(batch, n_features_in)``; a conv net
        reshapes them itself (e.g. with :class:`torch.nn.Unflatten`). A
        ``torch.nn.Sequential`` of ``Linear`` layers and element-wise activations
        gets the fast dense-layer curvature path; any other module gets
        per-example gradients from ``torch.func.vmap(grad)``.
    rank : int, default=8
        Rank ``L`` of the precision's low-rank part ``U U^T``. ``0`` is mean-field
        VOGN; ``rank >= n_params`` is full-Gaussian VOGN.
    prior_precision : float, default=1.0
        Precision ``lambda`` of the isotropic Gaussian prior ``N(0, lambda^{-1} I)``
        on every weight and bias.
    learning_rate : float, default=0.01
        Step size ``alpha`` of the natural-gradient mean update.
    beta : float, default=0.01
        Step size of the precision update (the weight of the new curvature
        in ``P <- (1 - beta) P + beta (N * EF + lambda I)``).
    momentum : float, default=0.9
        Momentum on the mean: a bias-corrected moving average of the
        likelihood gradient (the prior term is added after it). ``0`` gives
        the plain update of the paper's eq. (2).
    lr_decay : float or None, default=None
        If set to ``omega``, both step sizes decay as ``alpha_t = alpha / (1 + t^omega)``
        with ``t`` the step count (the paper uses 0.51 for logistic regression).
    max_iter : int, default=200
        Maximum number of epochs (passes over the training data).
    batch_size : int or 'auto', default='auto'
        Minibatch size ``M``; 'auto' is ``min(64, n_samples)``. Clipped to the
        number of training samples.
    mc_samples : int, default=1
        Weight samples ``S`` per training step.
    predict_samples : int, default=100
        Weight samples averaged by the prediction methods.
    init : {'iblm', 'default', 'uninformative', 'heuristic', 'xavier', 'orthogonal', 'lsuv'}, default='iblm'
        Initialisation of the posterior. 'iblm' (Rossi et al., 2019): layer by
        layer from the input, each unit's weights get the posterior of a Bayesian
        linear regression of the targets on the layer's inputs (hidden units on
        a minibatch local in the layer's input space, so that units differ; the
        output layer on a random one): mean, and the KL-optimal factorised
        precisions, rescaled from the minibatch to all ``n_samples``, as ``d``;
        ``U = 0``. 'default': PyTorch's initialisation with precision
        ``(prior_precision + n_samples) I``. The others are the paper's
        baselines (see :doc:`/init`).
    iblm_batch_size : int, default=128
        Rows of the minibatch each i-BLM regression uses (and LSUV's minibatch).
    kl_annealing : tuple (gamma, a, b) or None, default=None
        Anneal the KL term (App. E.9 of the i-BLM paper): the prior precision is
        scaled by ``gamma / (1 + exp(-a (t - b)))`` at step ``t`` (in the
        precision update, the mean step and the reported objective).
    warm_start : bool, default=False
        Continue from the previous posterior when ``fit`` is called again.
    early_stopping : bool, default=False
        Hold out ``validation_fraction`` of the training data and stop when its
        posterior-predictive log-likelihood (16 weight samples) has not improved
        by ``tol`` for ``n_iter_no_change`` epochs; the best posterior is kept.
    validation_fraction : float, default=0.1
        Fraction held out for early stopping.
    n_iter_no_change : int, default=20
        Epochs without improvement (of the training negative ELBO, or of the
        validation score with ``early_stopping``) before training stops.
    tol : float, default=1e-4
        Minimum improvement of the per-example negative ELBO (or validation
        log-likelihood) that counts.
    random_state : int, RandomState instance or None, default=None
        Seeds the network initialisation, minibatch order, weight sampling and
        the prediction samples. Predictions of a fitted model are always
        deterministic; pass an int for reproducible fits.
    device : str, default='cpu'
        Torch device, e.g. 'cuda'.
    dtype : {'float64', 'float32'}, default='float64'
        Floating-point precision of the computation.
    verbose : bool, default=False
        Show a progress bar with the running negative ELBO."""

def _param_docs(block):
    """Split a numpydoc parameter block into ``{name: entry}`` (each entry keeps its
    leading newline and indentation, so entries join back into a block)."""
    entries = re.split(r"\n(?=    \w+ : )", block)
    return {e.split(" :", 1)[0].strip(): "\n" + e for e in entries if e.strip()}


_COMMON_ATTRS = """
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Feature names seen during fit (only for inputs with string column names).
    n_iter_ : int
        Epochs run.
    t_ : int
        Training steps (minibatch updates) run.
    loss_curve_ : list of float
        Negative ELBO per epoch, divided by the number of training examples:
        the average minibatch estimate of ``E_q[-log p(y | X, theta)]`` over the
        epoch plus ``KL(q || prior)`` at its end (regressors: on standardised
        targets, including the noise precision's terms).
    validation_scores_ : list of float
        Validation log-likelihood per epoch (only with ``early_stopping``).
    best_validation_score_ : float
        Best validation score (only with ``early_stopping``).
    module_ : torch.nn.Module
        The network, holding the posterior mean as its parameters.
    posterior_ : LowRankGaussian
        The variational posterior: ``mean``, ``U``, ``d``, ``variance()``,
        ``sample(n, random_state)``, and for small models ``precision()`` and
        ``covariance()``."""


class SLANGRegressor(_SLANGFamily, BayesianRegressorBase):
    __doc__ = f"""Bayesian neural network regressor trained by SLANG.

    SLANG (Mishkin et al., NeurIPS 2018) fits a Gaussian variational posterior
    whose precision is low rank plus diagonal, ``U U^T + diag(d)``, by
    approximate natural-gradient steps built from back-propagated per-example
    gradients. Targets are standardised internally; predictions are mapped
    back. The Gaussian noise precision is learned by default with a
    ``Gamma(6, 6)`` prior and a Gamma variational posterior.

    Read more in the :doc:`SLANG estimators page </slang>`.

    Parameters
    ----------{_COMMON_PARAMS}
    noise_precision : 'auto' or float, default='auto'
        Precision of the Gaussian observation noise, in the units of ``y``
        (1 / noise variance). 'auto' learns it (Gamma(6, 6) prior on the
        standardised scale, variational Gamma posterior updated by natural
        gradient); a float fixes it.

    Attributes
    ----------{_COMMON_ATTRS}
    noise_precision_ : float
        Posterior mean of the noise precision, in the units of ``y``.

    See Also
    --------
    SLANGClassifier : the classification counterpart.
    sklearn.linear_model.BayesianRidge : Bayesian linear regression.

    Examples
    --------
    >>> from sklearn.datasets import load_diabetes
    >>> from skbayes import SLANGRegressor
    >>> X, y = load_diabetes(return_X_y=True)
    >>> reg = SLANGRegressor(hidden_layer_sizes=(20,), max_iter=20, random_state=0).fit(X, y)
    >>> mean, std = reg.predict(X[:3], return_std=True)
    """

    def __init__(
        self,
        hidden_layer_sizes=(50,),
        activation="relu",
        module=None,
        rank=8,
        prior_precision=1.0,
        learning_rate=0.01,
        beta=0.01,
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


class SLANGClassifier(_SLANGFamily, BayesianClassifierBase):
    __doc__ = f"""Bayesian neural network classifier trained by SLANG.

    Two classes use one logit and a Bernoulli likelihood (so
    ``hidden_layer_sizes=()`` is exactly Bayesian logistic regression with
    ``n_features + 1`` parameters, weights then bias); more classes use a
    softmax. See :class:`SLANGRegressor` for the method.

    Read more in the :doc:`SLANG estimators page </slang>`.

    Parameters
    ----------{_COMMON_PARAMS}

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        Class labels.{_COMMON_ATTRS}

    See Also
    --------
    SLANGRegressor : the regression counterpart.

    Examples
    --------
    >>> from sklearn.datasets import load_breast_cancer
    >>> from sklearn.preprocessing import StandardScaler
    >>> from skbayes import SLANGClassifier
    >>> X, y = load_breast_cancer(return_X_y=True)
    >>> X = StandardScaler().fit_transform(X)
    >>> clf = SLANGClassifier(hidden_layer_sizes=(), max_iter=20, random_state=0).fit(X, y)
    >>> proba = clf.predict_proba(X[:3])
    """

    def __init__(
        self,
        hidden_layer_sizes=(50,),
        activation="relu",
        module=None,
        rank=8,
        prior_precision=1.0,
        learning_rate=0.01,
        beta=0.01,
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
