"""Vprop and Vadam estimators: mean-field natural-gradient VI without per-example gradients.

Khan, Nielsen, Tangkaratt, Lin, Gal and Srivastava, "Fast and Scalable Bayesian
Deep Learning by Weight-Perturbation in Adam", ICML 2018 (the poster's "MLE vs
NGD-VI" box). Both keep a diagonal Gaussian ``N(mu, diag(N s + lambda)^{-1})``
and replace VOGN's mean of per-example squared gradients by the square of the
minibatch-mean gradient (the "gradient magnitude" approximation), so a step
costs one ordinary backward pass per weight sample.
"""

import math

import torch
from torch.func import functional_call

from ._base import _check_number, _store_init_params
from ._estimators import BayesianClassifierBase, BayesianRegressorBase
from .posteriors import DiagonalGaussian
from .slang import _COMMON_ATTRS, _COMMON_PARAMS, _param_docs

METHODS = ("vadam", "vprop")

#: ``learning_rate='auto'``: an Adam step for Vadam, a natural-gradient step for Vprop.
_AUTO_LEARNING_RATE = {"vadam": 0.01, "vprop": 0.05}

#: Initial ``s`` for ``init='default'``: one unit of curvature per example, i.e.
#: the precision ``N + lambda`` that SLANG and VOGN start from.
_DEFAULT_S0 = 1.0


def minibatch_gradients(module, layout, spec, theta, X, y, lik):
    """Gradients of the summed minibatch negative log-likelihood, one row per weight sample.

    A plain backward pass of ``sum_i nll_i(theta_s)`` (no per-example gradients):
    with the dense-layer path all ``S`` samples share one batched forward and
    backward pass (row ``s`` of the gradient with respect to ``theta`` only sees
    sample ``s``); any other module runs one ``functional_call`` per sample.

    Returns
    -------
    G : Tensor (S, D)
        ``G[s] = sum_i grad nll_i(theta_s)``.
    nll : Tensor (S, M), detached.
    f : Tensor (S, M, out), detached network outputs.
    """
    with torch.enable_grad():
        if spec is not None:
            th = theta.detach().requires_grad_(True)
            f = spec.forward(th, X)
            nll = lik.nll(f, y)
            (G,) = torch.autograd.grad(nll.sum(), th)
            return G, nll.detach(), f.detach()
        rows, nlls, fs = [], [], []
        for s in range(theta.shape[0]):
            th = theta[s].detach().requires_grad_(True)
            f_s = functional_call(module, layout.unflatten(th), (X,))
            nll_s = lik.nll(f_s, y)
            (g,) = torch.autograd.grad(nll_s.sum(), th)
            rows.append(g)
            nlls.append(nll_s.detach())
            fs.append(f_s.detach())
    return torch.stack(rows), torch.stack(nlls), torch.stack(fs)


class _VadamFamily:
    """Vprop / Vadam: the diagonal posterior family and its update (mixed into the public estimators)."""

    #: Step size of the natural-gradient (SVI) update of the regressor's Gamma noise posterior.
    _noise_step = 0.05

    def _check_family_params(self):
        if self.method not in METHODS:
            raise ValueError(f"method must be one of {list(METHODS)}, got {self.method!r}.")
        _check_number("prior_precision", self.prior_precision, low=0, low_open=True)
        if not (isinstance(self.learning_rate, str) and self.learning_rate == "auto"):
            _check_number("learning_rate", self.learning_rate, low=0, low_open=True)
        for name in ("beta1", "beta2"):
            _check_number(name, getattr(self, name), low=0, high=1, high_open=True)

    def _prior_precision(self):
        return float(self.prior_precision)

    def _learning_rate(self):
        if isinstance(self.learning_rate, str):  # 'auto' (validated)
            return _AUTO_LEARNING_RATE[self.method]
        return float(self.learning_rate)

    def _divergence_hint(self):
        auto = f" = {self._learning_rate()}" if isinstance(self.learning_rate, str) else ""
        return f"{auto}, method={self.method!r}, beta1={self.beta1}, beta2={self.beta2}"

    def _init_posterior(self, mean, n_train, var=None):
        lam = float(self.prior_precision)
        if var is None:
            s0 = torch.full_like(mean, _DEFAULT_S0)
        elif self.init == "iblm":
            # as SLANG: i-BLM's precisions come from regressions on B rows, so their
            # data part is per-example curvature summed over B examples
            s0 = (1.0 / var - lam).clamp_min(0.0) / min(int(self.iblm_batch_size), n_train)
        else:
            s0 = (1.0 / var - lam).clamp_min(0.0) / n_train
        self.posterior_ = DiagonalGaussian(mean, n_train * s0 + lam)
        self._opt_state = {"s": s0, "s0": s0.clone(), "m": torch.zeros_like(mean)}

    def _kl(self):
        return self._kl_scale() * self.posterior_.kl_to_prior(self.prior_precision)

    def _step(self, Xb, yb, N, gen, spec):
        """One Vprop or Vadam step (see the class docstring for the update)."""
        post, st = self.posterior_, self._opt_state
        S, M, t = int(self.mc_samples), Xb.shape[0], self.t_ + 1
        alpha = self._learning_rate()
        b1, b2 = float(self.beta1), float(self.beta2)
        lam = float(self.prior_precision) * self._kl_scale()
        lam_n = lam / N
        theta = post.sample_t(S, generator=gen)  # mu + eps / sqrt(N s + lam)
        G, nll, f = minibatch_gradients(self.module_, self._layout, spec, theta, Xb, yb, self._likelihood)
        G = G / M  # minibatch-mean gradient of the NLL, one row per weight sample
        g = G.mean(0)
        g2 = (G * G).mean(0)  # MC estimate of E_q[g_hat**2]
        mu = post.mean_t
        s = b2 * st["s"] + (1.0 - b2) * g2
        if self.method == "vprop":
            mu = mu - alpha * (g + lam_n * mu) / (s + lam_n)
        else:
            m = b1 * st["m"] + (1.0 - b1) * (g + lam_n * mu)
            st["m"] = m
            m_hat = m / (1.0 - b1**t)
            # Adam's bias correction of the average of g_hat**2 (s started at s0, not 0)
            s_hat = ((s - (b2**t) * st["s0"]) / (1.0 - b2**t)).clamp_min(0.0)
            mu = mu - alpha * m_hat / (torch.sqrt(s_hat) + lam_n)
        st["s"] = s
        post.mean_t = mu
        post.d_t = N * s + lam
        scale = N / (M * S)
        self._after_step(f, yb, scale, N, self._noise_step)
        self.t_ = t
        return float(scale * nll.sum())



_SHARED = _param_docs(_COMMON_PARAMS)


def _shared(*names):
    return "".join(_SHARED[n] for n in names)


_PARAMS = (
    _shared("hidden_layer_sizes", "activation")
    + """
    module : callable or torch.nn.Module, default=None
        A custom network instead of the built one: a callable
        ``module(n_features_in, n_outputs)`` returning a :class:`torch.nn.Module`
        (a class works), or a module instance (deep-copied, never modified).
        It receives float tensors of shape ``(batch, n_features_in)``; a conv net
        reshapes them itself (e.g. with :class:`torch.nn.Unflatten`). A
        ``torch.nn.Sequential`` of ``Linear`` layers and element-wise activations
        runs all weight samples of a step in one batched forward and backward
        pass; any other module runs one ordinary forward and backward pass per
        weight sample (no per-example gradients either way).
    method : {'vadam', 'vprop'}, default='vadam'
        The update: 'vadam' (Adam-like: momentum on the gradient, bias
        corrections, square root of the second moment in the mean step) or
        'vprop' (RMSprop-like natural-gradient step, no momentum). See above."""
    + _shared("prior_precision")
    + """
    learning_rate : float or 'auto', default='auto'
        Step size ``alpha`` of the mean update. 'auto' is 0.01 for 'vadam' (an
        Adam step: each weight moves by about ``alpha`` per step) and 0.05 for
        'vprop' (a natural-gradient step, as VOGN's default).
    beta1 : float, default=0.9
        Decay ``gamma_1`` of Vadam's moving average ``m`` of the gradient
        (Adam's momentum). Ignored by 'vprop'.
    beta2 : float, default=0.999
        Decay ``gamma_2`` of the moving average ``s`` of the squared minibatch
        gradient, for both methods (Vprop's rate ``beta`` of the poster is
        ``1 - beta2``). ``s`` forgets its start at rate ``1 - beta2`` per step:
        the default's time constant is 1000 steps, so a short fit keeps much of
        the initial precision."""
    + _shared("max_iter", "batch_size", "mc_samples", "predict_samples")
    + """
    init : {'iblm', 'default', 'uninformative', 'heuristic', 'xavier', 'orthogonal', 'lsuv'}, default='iblm'
        Initialisation of the posterior (see :doc:`/init`). 'default': PyTorch's
        initialisation of the network as the mean and ``s0 = 1``, i.e. the
        precision ``(prior_precision + n_samples) I`` SLANG and VOGN start from.
        The other choices give a mean and factorised variances ``var``, turned
        into ``s0 = max(1 / var - prior_precision, 0) / n`` with ``n`` the number
        of training samples ('iblm': its minibatch size ``iblm_batch_size``,
        whose rows its precisions come from, as for SLANG)."""
    + _shared(
        "iblm_batch_size",
        "kl_annealing",
    )
)

_PARAMS_TAIL = _shared(
    "warm_start",
    "early_stopping",
    "validation_fraction",
    "n_iter_no_change",
    "tol",
    "random_state",
    "device",
    "dtype",
    "verbose",
)

_ATTRS = _COMMON_ATTRS.replace(
    """    posterior_ : LowRankGaussian
        The variational posterior: ``mean``, ``U``, ``d``, ``variance()``,
        ``sample(n, random_state)``, and for small models ``precision()`` and
        ``covariance()``.""",
    """    posterior_ : DiagonalGaussian
        The variational posterior: ``mean``, the per-weight precision
        ``d = N s + prior_precision``, ``variance()`` (``1 / d``),
        ``sample(n, random_state)``, and for small models ``precision()`` and
        ``covariance()``.""",
)

_METHOD = """Vadam and Vprop (Khan et al., "Fast and Scalable Bayesian Deep Learning
    by Weight-Perturbation in Adam", ICML 2018) fit a diagonal Gaussian
    posterior ``q = N(mu, diag(N s + lambda)^{-1})`` with Adam- and
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
    wider than VOGN's."""


class VadamRegressor(_VadamFamily, BayesianRegressorBase):
    __doc__ = f"""Bayesian neural network regressor trained by Vadam or Vprop.

    {_METHOD}

    Targets are standardised internally; predictions are mapped back. The
    Gaussian noise precision is learned by default with a ``Gamma(6, 6)``
    prior and a Gamma variational posterior.

    Read more in the :doc:`mean-field estimators page </meanfield>`.

    Parameters
    ----------{_PARAMS}
    noise_precision : 'auto' or float, default='auto'
        Precision of the Gaussian observation noise, in the units of ``y``
        (1 / noise variance). 'auto' learns it (Gamma(6, 6) prior on the
        standardised scale, variational Gamma posterior updated after every
        step by a natural-gradient step of size 0.05, as for noisy K-FAC); a
        float fixes it.{_PARAMS_TAIL}

    Attributes
    ----------{_ATTRS}
    noise_precision_ : float
        Posterior mean of the noise precision, in the units of ``y``.

    See Also
    --------
    VadamClassifier : the classification counterpart.
    VOGNRegressor : mean-field natural gradient with per-example squared gradients.

    Examples
    --------
    >>> from sklearn.datasets import load_diabetes
    >>> from skbayes import VadamRegressor
    >>> X, y = load_diabetes(return_X_y=True)
    >>> reg = VadamRegressor(hidden_layer_sizes=(20,), max_iter=20, random_state=0).fit(X, y)
    >>> mean, std = reg.predict(X[:3], return_std=True)
    """

    def __init__(
        self,
        hidden_layer_sizes=(50,),
        activation="relu",
        module=None,
        method="vadam",
        prior_precision=1.0,
        learning_rate="auto",
        beta1=0.9,
        beta2=0.999,
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


class VadamClassifier(_VadamFamily, BayesianClassifierBase):
    __doc__ = f"""Bayesian neural network classifier trained by Vadam or Vprop.

    {_METHOD}

    Two classes use one logit and a Bernoulli likelihood (so
    ``hidden_layer_sizes=()`` is Bayesian logistic regression with a diagonal
    Gaussian posterior); more classes use a softmax.

    Read more in the :doc:`mean-field estimators page </meanfield>`.

    Parameters
    ----------{_PARAMS}{_PARAMS_TAIL}

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        Class labels.{_ATTRS}

    See Also
    --------
    VadamRegressor : the regression counterpart.
    VOGNClassifier : mean-field natural gradient with per-example squared gradients.

    Examples
    --------
    >>> from sklearn.datasets import load_breast_cancer
    >>> from sklearn.preprocessing import StandardScaler
    >>> from skbayes import VadamClassifier
    >>> X, y = load_breast_cancer(return_X_y=True)
    >>> X = StandardScaler().fit_transform(X)
    >>> clf = VadamClassifier(hidden_layer_sizes=(), max_iter=20, random_state=0).fit(X, y)
    >>> proba = clf.predict_proba(X[:3])
    """

    def __init__(
        self,
        hidden_layer_sizes=(50,),
        activation="relu",
        module=None,
        method="vadam",
        prior_precision=1.0,
        learning_rate="auto",
        beta1=0.9,
        beta2=0.999,
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
