"""Bayes by Backprop (Blundell et al., 2015): mean-field Gaussian VI with reparameterised
gradients and Adam, with the local reparameterisation trick (Kingma et al., 2015) for dense layers.

Also home of :func:`adam_update`, the small pure Adam step shared with the MC dropout estimators.
"""

import math

import torch
import torch.nn.functional as F
from torch.func import functional_call

from ._base import _check_number, _store_init_params
from ._estimators import BayesianClassifierBase, BayesianRegressorBase
from .posteriors._common import PosteriorMixin
from .slang import _COMMON_PARAMS, _param_docs

#: Adam's default moment decay rates and epsilon (those of ``torch.optim.Adam``).
ADAM_BETAS = (0.9, 0.999)
ADAM_EPS = 1e-8


def adam_update(param, grad, state, key, lr, betas=ADAM_BETAS, eps=ADAM_EPS):
    """One Adam step on ``param`` (returns the new tensor), ``torch.optim.Adam``'s arithmetic.

    The first and second moments live in ``state[key + "_m"]`` and ``state[key + "_v"]``
    and the step count in ``state["step"]`` (advanced by the caller once per step, before
    the call), so the whole optimiser state is a plain dict of tensors and an int: it
    deep-copies (snapshots, divergence recovery) and pickles with the estimator::

        m <- b1 m + (1 - b1) g,     v <- b2 v + (1 - b2) g^2
        param <- param - (lr / (1 - b1^t)) m / (sqrt(v / (1 - b2^t)) + eps)
    """
    b1, b2 = betas
    t = int(state["step"])
    m = state[key + "_m"].mul_(b1).add_(grad, alpha=1.0 - b1)
    v = state[key + "_v"].mul_(b2).addcmul_(grad, grad, value=1.0 - b2)
    denom = (v.sqrt() / math.sqrt(1.0 - b2**t)).add_(eps)
    return param - (lr / (1.0 - b1**t)) * m / denom


def inverse_softplus(s):
    """``rho`` with ``softplus(rho) = s`` (stable for small and large ``s > 0``)."""
    return s + torch.log(-torch.expm1(-s))


def diag_gaussian_kl(mean, sigma, prior_precision):
    """``KL(N(mean, diag(sigma^2)) || N(0, prior_precision^{-1} I))`` as a tensor (differentiable)."""
    lam = float(prior_precision)
    var = sigma * sigma
    return 0.5 * (lam * (var + mean * mean) - 1.0 - math.log(lam) - 2.0 * torch.log(sigma)).sum()


class SoftplusGaussian(PosteriorMixin):
    """Mean-field Gaussian ``N(mu, diag(sigma^2))`` with ``sigma = softplus(rho)``.

    The posterior family of Bayes by Backprop. ``rho`` is unconstrained, so a
    gradient step on ``(mu, rho)`` always gives a valid distribution.

    Attributes (numpy views for users)
    ----------------------------------
    mean : ndarray of shape (D,)
        Posterior mean ``mu``, in ``module_.parameters()`` order.
    rho : ndarray of shape (D,)
        Unconstrained scale parameters.
    sigma : ndarray of shape (D,)
        Posterior standard deviations ``softplus(rho)``.
    """

    family = "meanfield-softplus"

    def __init__(self, mean, rho):
        self.mean_t = mean
        self.rho_t = rho

    @classmethod
    def from_variance(cls, mean, var):
        """The posterior with mean ``mean`` and marginal variances ``var``."""
        return cls(mean, inverse_softplus(var.sqrt()))

    @property
    def sigma_t(self):
        return F.softplus(self.rho_t)

    @property
    def rho(self):
        return self.rho_t.detach().cpu().numpy().copy()

    @property
    def sigma(self):
        return self.sigma_t.detach().cpu().numpy()

    # --- tensor routines -------------------------------------------------
    def sample_t(self, n, generator=None):
        mu = self.mean_t
        eps = torch.randn(int(n), mu.shape[0], generator=generator, dtype=mu.dtype, device=mu.device)
        return mu + self.sigma_t * eps

    def variance_t(self):
        s = self.sigma_t
        return s * s

    def precision_t(self):
        return torch.diag(1.0 / self.variance_t())

    def covariance(self, max_size=5000):
        """Dense posterior covariance ``diag(sigma^2)`` (small models only)."""
        self._check_dense(max_size)
        with torch.no_grad():
            return torch.diag(self.variance_t()).cpu().numpy()

    def kl_to_prior(self, prior_precision):
        """``KL(q || N(0, prior_precision^{-1} I))`` in closed form."""
        with torch.no_grad():
            return float(diag_gaussian_kl(self.mean_t, self.sigma_t, prior_precision))

    def _tensors(self):
        return (self.mean_t, self.rho_t)


def lrt_forward(spec, mean, var, X, n_samples, generator=None):
    """Network outputs ``(S, n, out)`` under the local reparameterisation trick.

    For every dense layer the pre-activations are sampled directly from their
    distribution given the layer input ``h`` under the factorised weights,
    ``z ~ N(h mu_W^T + mu_b, h^2 (sigma_W^2)^T + sigma_b^2)``, independently for
    every example and each of the ``S`` draws. Per example this is the same
    distribution of every layer's pre-activations as drawing one weight sample
    (so the expected loss and its gradient are the same), with less variance
    across examples.
    """
    h = X
    tiny = torch.finfo(mean.dtype).tiny
    for kind, info in spec.steps:
        if kind == "act":
            h = info(h)
            continue
        w_off, out, inp, b_off = info
        Wm = mean[w_off : w_off + out * inp].reshape(out, inp)
        Wv = var[w_off : w_off + out * inp].reshape(out, inp)
        zm = h @ Wm.T
        zv = (h * h) @ Wv.T
        if b_off is not None:
            zm = zm + mean[b_off : b_off + out]
            zv = zv + var[b_off : b_off + out]
        eps = torch.randn((int(n_samples),) + tuple(zm.shape[-2:]), generator=generator, dtype=zm.dtype,
                          device=zm.device)
        h = zm + torch.sqrt(zv.clamp_min(tiny)) * eps
    return h


class _BBBFamily:
    """Bayes by Backprop's posterior family and update (mixed into the public estimators)."""

    #: Step size of the natural-gradient (SVI) update of the regressor's Gamma noise posterior
    #: (the value of the Kronecker-factored estimators).
    _noise_step = 0.05

    def _check_family_params(self):
        _check_number("prior_precision", self.prior_precision, low=0, low_open=True)
        _check_number("learning_rate", self.learning_rate, low=0, low_open=True)
        _check_number("kl_weight", self.kl_weight, low=0, low_open=True)
        if not isinstance(self.local_reparam, bool):
            raise ValueError(f"local_reparam must be a bool, got {self.local_reparam!r}.")

    def _prior_precision(self):
        return float(self.prior_precision)

    def _init_posterior(self, mean, n_train, var=None):
        lam = float(self.prior_precision)
        if var is None:
            # init='default': the prior plus one unit of curvature per training example,
            # i.e. standard deviations of about 1/sqrt(N + prior) (as the SLANG estimators).
            var = torch.full_like(mean, 1.0 / (lam + float(n_train)))
        elif self.init == "iblm":
            # i-BLM's precisions come from regressions on B rows: rescale their data part to N.
            B = min(int(self.iblm_batch_size), n_train)
            var = 1.0 / (lam + (1.0 / var - lam).clamp_min(0.0) * (n_train / B))
        self.posterior_ = SoftplusGaussian.from_variance(mean.clone(), var.clone())
        z = torch.zeros_like(mean)
        self._opt_state = {"step": 0, "mu_m": z.clone(), "mu_v": z.clone(), "rho_m": z.clone(), "rho_v": z.clone()}

    def _kl_weight(self):
        """Weight of the KL term at the current step (``kl_weight`` times the annealing factor)."""
        return float(self.kl_weight) * self._kl_scale()

    def _kl(self):
        return self._kl_weight() * self.posterior_.kl_to_prior(self.prior_precision)

    def _uses_lrt(self, spec):
        return bool(self.local_reparam) and spec is not None

    def _sampled_outputs(self, mean, rho, Xb, n_samples, gen, spec):
        """Network outputs ``(S, M, out)`` at reparameterised samples of ``q(mean, rho)``."""
        sigma = F.softplus(rho)
        if self._uses_lrt(spec):
            return lrt_forward(spec, mean, sigma * sigma, Xb, n_samples, gen)
        eps = torch.randn(int(n_samples), mean.shape[0], generator=gen, dtype=mean.dtype, device=mean.device)
        theta = mean + sigma * eps
        if spec is not None:
            return spec.forward(theta, Xb)
        return torch.stack([functional_call(self.module_, self._layout.unflatten(th), (Xb,)) for th in theta])

    def _neg_elbo_estimate(self, mean, rho, Xb, yb, N, gen, spec):
        """Unbiased minibatch estimate of the negative ELBO at ``(mean, rho)``.

        ``(N / (M S)) sum_{s, i} -log p(y_i | x_i, theta_s) + kl_weight * KL(q || prior)``
        with ``S = mc_samples`` reparameterised samples. Returns
        ``(estimate, data_term, outputs)``; ``estimate`` is differentiable in ``mean`` and ``rho``.
        """
        S, M = int(self.mc_samples), Xb.shape[0]
        f = self._sampled_outputs(mean, rho, Xb, S, gen, spec)
        data = (N / (M * S)) * self._likelihood.nll(f, yb).sum()
        kl = diag_gaussian_kl(mean, F.softplus(rho), self.prior_precision)
        return data + self._kl_weight() * kl, data, f

    def _step(self, Xb, yb, N, gen, spec):
        """One Bayes-by-Backprop step: Adam on ``(mu, rho)`` with the reparameterised gradient."""
        post, state = self.posterior_, self._opt_state
        with torch.enable_grad():
            mu = post.mean_t.detach().requires_grad_(True)
            rho = post.rho_t.detach().requires_grad_(True)
            loss, data, f = self._neg_elbo_estimate(mu, rho, Xb, yb, N, gen, spec)
            # Adam on the negative ELBO per training example (Adam is invariant to the scale).
            g_mu, g_rho = torch.autograd.grad(loss / N, (mu, rho))
        state["step"] += 1
        lr = float(self.learning_rate)
        post.mean_t = adam_update(post.mean_t, g_mu, state, "mu", lr)
        post.rho_t = adam_update(post.rho_t, g_rho, state, "rho", lr)
        S, M = int(self.mc_samples), Xb.shape[0]
        self._after_step(f.detach(), yb, N / (M * S), N, self._noise_step)
        self.t_ += 1
        return float(data)


# --- docstrings ------------------------------------------------------------------
SHARED_HEAD = """
    hidden_layer_sizes : tuple of int, default=(50,)
        Widths of the hidden layers of the fully connected network built when
        ``module`` is None. ``()`` gives a linear model.
    activation : {'relu', 'tanh', 'logistic', 'identity', 'elu', 'gelu', 'softplus', 'leaky_relu'}, default='relu'
        Hidden-layer activation of the built network.
    module : callable or torch.nn.Module, default=None
        A custom network instead of the built one: a callable
        ``module(n_features_in, n_outputs)`` returning a :class:`torch.nn.Module`
        (a class works), or a module instance (deep-copied, never modified).
        It receives float tensors of shape ``(batch, n_features_in)``."""

# Parameters that mean exactly what they mean for SLANG take its entries; the others
# are worded for a first-order fit of a loss.
_OWN_TAIL = _param_docs("""
    mc_samples : int, default=1
        Monte Carlo samples ``S`` per training step.
    init : {'iblm', 'default', 'uninformative', 'heuristic', 'xavier', 'orthogonal', 'lsuv'}, default='iblm'
        Initial mean: 'default' is PyTorch's initialisation, 'iblm' the layer-wise
        Bayesian linear regressions of Rossi et al. (2019), the others the i-BLM
        paper's baselines (see :doc:`/init`).
    kl_annealing : tuple (gamma, a, b) or None, default=None
        Scale the prior term by ``gamma / (1 + exp(-a (t - b)))`` at step ``t``.
    warm_start : bool, default=False
        Continue from the previous fit (posterior and optimiser state) when ``fit`` is called again.
    early_stopping : bool, default=False
        Hold out ``validation_fraction`` of the training data and stop when its
        predictive log-likelihood (16 samples) has not improved by ``tol`` for
        ``n_iter_no_change`` epochs; the best state is kept.
    n_iter_no_change : int, default=20
        Epochs without improvement (of the training loss, or of the validation
        score with ``early_stopping``) before training stops.
    tol : float, default=1e-4
        Minimum improvement that counts.
    random_state : int, RandomState instance or None, default=None
        Seeds the initialisation, minibatch order, Monte Carlo noise and the
        prediction samples. Predictions of a fitted model are always deterministic.
    verbose : bool, default=False
        Show a progress bar with the running training loss.""")
_SLANG_DOCS = _param_docs(_COMMON_PARAMS)
_GENERIC_TAIL = ("max_iter", "batch_size", "predict_samples", "iblm_batch_size", "validation_fraction", "device", "dtype")
_TAIL_ORDER = (
    "max_iter", "batch_size", "mc_samples", "predict_samples", "init", "iblm_batch_size", "kl_annealing",
    "warm_start", "early_stopping", "validation_fraction", "n_iter_no_change", "tol", "random_state",
    "device", "dtype", "verbose",
)
SHARED_TAIL = "".join((_SLANG_DOCS if n in _GENERIC_TAIL else _OWN_TAIL)[n] for n in _TAIL_ORDER)

NOISE_DOC = """
    noise_precision : 'auto' or float, default='auto'
        Precision of the Gaussian observation noise in the units of ``y``.
        'auto' learns it: ``Gamma(6, 6)`` prior on the standardised scale and a
        Gamma variational posterior updated after every step by the conjugate
        natural-gradient (SVI) step of size 0.05, as in the Kronecker-factored
        estimators. A float fixes it."""

SHARED_ATTRS = """
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Feature names seen during fit (string column names only).
    n_iter_ : int
        Epochs run.
    t_ : int
        Training steps (minibatch updates) run.
    validation_scores_ : list of float
        Validation log-likelihood per epoch (only with ``early_stopping``).
    best_validation_score_ : float
        Best validation score (only with ``early_stopping``).
    module_ : torch.nn.Module
        The network, holding the posterior mean as its parameters."""

_BBB_PARAMS = """
    prior_precision : float, default=1.0
        Precision ``lambda`` of the isotropic Gaussian prior ``N(0, lambda^{-1} I)``
        on every weight and bias.
    kl_weight : float, default=1.0
        Weight of ``KL(q || prior)`` in the objective; 1 is the exact ELBO, below 1
        tempers the posterior (down-weights the prior).
    local_reparam : bool, default=True
        Use the local reparameterisation trick for the dense layers: sample each
        example's pre-activations from ``N(h mu_W^T + mu_b, h^2 sigma_W^2 + sigma_b^2)``
        instead of one weight sample per step shared by the minibatch (the same
        expected gradient, lower variance, about twice the matmuls). Applies when
        the network is a ``torch.nn.Sequential`` of ``Linear`` layers and
        element-wise activations (the built MLP); any other ``module`` falls back
        to sampling the weights.
    learning_rate : float, default=0.01
        Adam's step size on ``(mu, rho)``."""

_BBB_ATTRS = """
    loss_curve_ : list of float
        Negative ELBO per epoch per training example: the average minibatch
        estimate of ``E_q[-log p(y | X, theta)]`` over the epoch plus
        ``kl_weight * KL(q || prior)`` at its end (regressors: on standardised
        targets, with the noise precision's KL).
    posterior_ : SoftplusGaussian
        The mean-field posterior: ``mean``, ``rho``, ``sigma``, ``variance()``,
        ``sample(n, random_state)``, ``kl_to_prior(prior_precision)``, and for
        small models ``precision()`` and ``covariance()`` (diagonal)."""


def _bbb_doc(title, extra_params, extra_attrs, see_also, example):
    return f"""{title}

    Bayes by Backprop (Blundell et al., 2015) fits a mean-field Gaussian
    posterior ``q = N(mu, diag(sigma^2))``, ``sigma = softplus(rho)``, by
    minimising a Monte Carlo estimate of the negative ELBO
    ``E_q[-log p(y | X, theta)] + kl_weight * KL(q || N(0, lambda^{{-1}} I))``
    (closed-form KL) with reparameterised gradients and Adam on ``(mu, rho)``.
    Initial standard deviations are ``1 / sqrt(n_samples + prior_precision)``
    for ``init='default'``, else those of the initialiser.

    Read more in the :doc:`Bayes by Backprop and MC dropout page </bbb_dropout>`.

    Parameters
    ----------{SHARED_HEAD}{_BBB_PARAMS}{extra_params}{SHARED_TAIL}

    Attributes
    ----------{extra_attrs}{SHARED_ATTRS}{_BBB_ATTRS}

    See Also
    --------
    {see_also}

    Examples
    --------
{example}
    """


class BBBRegressor(_BBBFamily, BayesianRegressorBase):
    __doc__ = _bbb_doc(
        "Bayesian neural network regressor trained by Bayes by Backprop.",
        NOISE_DOC,
        "\n    noise_precision_ : float\n        Posterior mean of the noise precision, in the units of ``y``.",
        "BBBClassifier : the classification counterpart.\n    MCDropoutRegressor : MC dropout.",
        """    >>> from sklearn.datasets import load_diabetes
    >>> from skbayes import BBBRegressor
    >>> X, y = load_diabetes(return_X_y=True)
    >>> reg = BBBRegressor(hidden_layer_sizes=(20,), max_iter=20, random_state=0).fit(X, y)
    >>> mean, std = reg.predict(X[:3], return_std=True)""",
    )

    def __init__(self, hidden_layer_sizes=(50,), activation="relu", module=None, prior_precision=1.0,
                 kl_weight=1.0, local_reparam=True, learning_rate=0.01, noise_precision="auto", max_iter=200,
                 batch_size="auto", mc_samples=1, predict_samples=100, init="iblm", iblm_batch_size=128,
                 kl_annealing=None, warm_start=False, early_stopping=False, validation_fraction=0.1,
                 n_iter_no_change=20, tol=1e-4, random_state=None, device="cpu", dtype="float64", verbose=False):
        _store_init_params(locals())


class BBBClassifier(_BBBFamily, BayesianClassifierBase):
    __doc__ = _bbb_doc(
        "Bayesian neural network classifier trained by Bayes by Backprop.",
        "",
        "\n    classes_ : ndarray of shape (n_classes,)\n        Class labels.",
        "BBBRegressor : the regression counterpart.\n    MCDropoutClassifier : MC dropout.",
        """    >>> from sklearn.datasets import load_breast_cancer
    >>> from sklearn.preprocessing import StandardScaler
    >>> from skbayes import BBBClassifier
    >>> X, y = load_breast_cancer(return_X_y=True)
    >>> X = StandardScaler().fit_transform(X)
    >>> clf = BBBClassifier(hidden_layer_sizes=(20,), max_iter=20, random_state=0).fit(X, y)
    >>> proba = clf.predict_proba(X[:3])""",
    )

    def __init__(self, hidden_layer_sizes=(50,), activation="relu", module=None, prior_precision=1.0,
                 kl_weight=1.0, local_reparam=True, learning_rate=0.01, max_iter=200, batch_size="auto",
                 mc_samples=1, predict_samples=100, init="iblm", iblm_batch_size=128, kl_annealing=None,
                 warm_start=False, early_stopping=False, validation_fraction=0.1, n_iter_no_change=20, tol=1e-4,
                 random_state=None, device="cpu", dtype="float64", verbose=False):
        _store_init_params(locals())
