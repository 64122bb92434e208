"""Noisy K-FAC and noisy EK-FAC estimators (Zhang et al. 2018; Bae, Zhang and Grosse 2018)."""

import math

import torch

from ._base import _check_number, _store_init_params
from ._estimators import BayesianClassifierBase, BayesianRegressorBase
from .kronecker import (
    KroneckerGaussian,
    kron_batch,
    kron_layers,
    layer_grad,
    layer_stats,
    projected_second_moment,
    sym_eig,
)


class _KroneckerFamily:
    """The shared loop of noisy K-FAC (``_ekfac = False``) and noisy EK-FAC (``True``)."""

    _ekfac = False
    #: Step size of the natural-gradient (SVI) update of the regressor's Gamma noise posterior.
    _noise_step = 0.05

    def _check_family_params(self):
        _check_number("learning_rate", self.learning_rate, low=0, low_open=True)
        _check_number("factor_decay", self.factor_decay, low=0, high=1, low_open=True)
        _check_number("kl_weight", self.kl_weight, low=0, low_open=True)
        _check_number("prior_variance", self.prior_variance, low=0, low_open=True)
        _check_number("damping", self.damping, low=0)
        _check_number("momentum", self.momentum, low=0, high=1, high_open=True)
        _check_number("stats_interval", self.stats_interval, low=1, integer=True)
        if self.kl_clip is not None:
            _check_number("kl_clip", self.kl_clip, low=0, low_open=True)
        if self.fisher not in ("true", "empirical"):
            raise ValueError(f"fisher must be 'true' or 'empirical', got {self.fisher!r}.")
        if self._ekfac:
            _check_number("scale_decay", self.scale_decay, low=0, high=1, low_open=True)
            _check_number("eig_interval", self.eig_interval, low=1, integer=True)
            _check_number("scale_interval", self.scale_interval, low=1, integer=True)
            if self.rescale_reset_interval is not None:
                _check_number("rescale_reset_interval", self.rescale_reset_interval, low=1, integer=True)
        else:
            _check_number("inv_interval", self.inv_interval, low=1, integer=True)

    # --- state ----------------------------------------------------------------
    def _prior_precision(self):
        return 1.0 / float(self.prior_variance)

    def _init_posterior(self, mean, n_train, var=None):
        layers = kron_layers(self.module_, self._layout)
        self._n_train = int(n_train)
        blocks = []
        state = {"layers": [], "momentum": torch.zeros_like(mean), "ready": False}
        for l in layers:
            eye_n = torch.eye(l.n, dtype=mean.dtype, device=mean.device)
            eye_p = torch.eye(l.p, dtype=mean.dtype, device=mean.device)
            st = {
                "A": eye_n.clone(),
                "S": eye_p.clone(),
                "QA": eye_n.clone(),
                "QS": eye_p.clone(),
                "lamA": mean.new_ones(l.n),
                "lamS": mean.new_ones(l.p),
                "pi": 1.0,
            }
            if self._ekfac:
                st["R"] = mean.new_ones(l.n, l.p)
            state["layers"].append(st)
            blocks.append((eye_n.clone(), eye_p.clone(), mean.new_ones(l.n, l.p)))
        self._opt_state = state
        self.posterior_ = KroneckerGaussian(mean, layers, blocks)
        self._refresh_posterior()

    def _gamma_in(self):
        return self._lambda() / (self._n_train * float(self.prior_variance))

    def _lambda(self):
        """KL weight at the current step (``kl_weight`` times the annealing factor)."""
        return float(self.kl_weight) * self._kl_scale()

    def _kl(self):
        return self._lambda() * self.posterior_.kl_to_prior(self.prior_variance)

    def _denominators(self, st, gamma):
        """Per-entry curvature in the eigenbasis, damped by ``gamma`` (n, p)."""
        if self._ekfac:
            return st["R"] + gamma
        sg, pi = math.sqrt(gamma), st["pi"]
        return (st["lamA"] + pi * sg)[:, None] * (st["lamS"] + sg / pi)[None, :]

    def _refresh_posterior(self):
        """Covariance scales ``s = (lambda/N) / denominators(gamma_in)`` from the factors."""
        c = self._lambda() / self._n_train
        g_in = self._gamma_in()
        self.posterior_.blocks = [
            (st["QA"], st["QS"], c / self._denominators(st, g_in)) for st in self._opt_state["layers"]
        ]

    def _refresh_basis(self, st):
        st["lamA"], st["QA"] = sym_eig(st["A"])
        st["lamS"], st["QS"] = sym_eig(st["S"])
        n, p = st["A"].shape[0], st["S"].shape[0]
        ta, ts = float(st["lamA"].sum()) / n, float(st["lamS"].sum()) / p
        # Martens & Grosse's pi balances the damping between the two factors.
        st["pi"] = math.sqrt(ta / ts) if ta > 0 and ts > 0 else 1.0

    def _reset_scale(self, st):
        st["R"] = st["lamA"][:, None] * st["lamS"][None, :]

    # --- one step ---------------------------------------------------------------
    def _step(self, Xb, yb, N, gen, spec):
        post, state = self.posterior_, self._opt_state
        layers = post.layers
        S, M = int(self.mc_samples), Xb.shape[0]
        beta = float(self.factor_decay)
        if not state["ready"]:
            # Initialise the factors from the first minibatch at the mean (beta = 1).
            rows, _, _ = kron_batch(self.module_, self._layout, layers, post.mean_t[None], Xb, yb,
                                    self._likelihood, self.fisher, gen)
            for st, (A, _, Df) in zip(state["layers"], rows):
                st["A"], st["S"] = layer_stats(A, Df)
                self._refresh_basis(st)
                if self._ekfac:
                    self._reset_scale(st)
            state["ready"] = True
            self._refresh_posterior()
        k = self.t_ + 1
        theta = post.sample_t(S, generator=gen)
        rows, nll, f = kron_batch(self.module_, self._layout, layers, theta, Xb, yb, self._likelihood,
                                  self.fisher, gen)
        g_in = self._gamma_in()
        gamma = g_in + float(self.damping)
        alpha = float(self.learning_rate)
        step = torch.zeros_like(post.mean_t)
        vFv = 0.0
        W_mean = theta.mean(0)
        for l, st, (A, Dt, Df) in zip(layers, state["layers"], rows):
            if k % int(self.stats_interval) == 0:
                a_new, s_new = layer_stats(A, Df)
                st["A"] = (1 - beta) * st["A"] + beta * a_new
                st["S"] = (1 - beta) * st["S"] + beta * s_new
            if self._ekfac:
                if k % int(self.eig_interval) == 0:
                    # R lives in the old eigenbasis: restart it from the K-FAC
                    # eigenvalue products in the new one (as the authors' code does).
                    self._refresh_basis(st)
                    self._reset_scale(st)
                if k % int(self.scale_interval) == 0:
                    omega = float(self.scale_decay)
                    st["R"] = (1 - omega) * st["R"] + omega * projected_second_moment(A, Df, st["QA"], st["QS"])
                if self.rescale_reset_interval and k % int(self.rescale_reset_interval) == 0:
                    self._reset_scale(st)
            elif k % int(self.inv_interval) == 0:
                self._refresh_basis(st)
            # V = grad_W log p - gamma_in W (at the sampled weights), preconditioned in the eigenbasis
            V = -layer_grad(A, Dt) - g_in * l.flat_to_mat(W_mean)
            QA, QS = st["QA"], st["QS"]
            P = QA @ ((QA.T @ V @ QS) / self._denominators(st, gamma)) @ QS.T
            l.mat_to_flat(P, step)
            vFv += float((P * V).sum())
        if self.kl_clip is not None and vFv > 0:
            # K-FAC's trust region (Ba et al., 2017; the noisy K-FAC code uses 1e-3): rescale
            # the step so that its predicted change alpha^2 step^T F step stays below kl_clip.
            step = step * min(1.0, math.sqrt(float(self.kl_clip) / (alpha * alpha * vFv)))
        mom = float(self.momentum) * state["momentum"] + step
        state["momentum"] = mom
        post.mean_t = post.mean_t + alpha * mom
        self._refresh_posterior()
        scale = N / (M * S)
        self._after_step(f, yb, scale, N, self._noise_step)
        self.t_ = k
        return float(scale * nll.sum())


_PARAMS_HEAD = """
    hidden_layer_sizes : tuple of int, default=(50,)
        Widths of the hidden layers of the fully connected network built when
        ``module`` is None.
    activation : {'relu', 'tanh', 'logistic', 'identity', 'elu', 'gelu', 'softplus', 'leaky_relu'}, default='relu'
        Hidden-layer activation of the built network.
    module : callable or torch.nn.Module, default=None
        A custom network: a callable ``module(n_features_in, n_outputs)``
        returning a :class:`torch.nn.Module`, or a module instance (deep-copied).
        Its parameterised layers must be ``nn.Linear`` or ``nn.Conv2d``
        (``groups=1``, zero padding), each called once per forward pass;
        parameter-free layers (activations, pooling, flatten, reshape) are free.
        Any other parameterised layer raises an error naming it.
    learning_rate : float, default=0.01
        Step size ``alpha`` of the preconditioned mean update (the papers' value).
    factor_decay : float, default=0.05
        Exponential-moving-average rate ``beta`` of the Kronecker factors.
    kl_weight : float, default=1.0
        ``lambda``: weight of the KL term; 1 is the exact ELBO, below 1 tempers
        the posterior (covariances shrink by ``lambda``).
    prior_variance : float, default=1.0
        ``eta``: variance of the isotropic Gaussian prior on every weight and bias
        (the SLANG estimators' ``prior_precision`` is ``1 / eta``).
    damping : float, default=1e-3 (noisy K-FAC) or 0.1 (noisy EK-FAC)
        Extrinsic damping ``gamma_ex`` added to the curvature in the mean step
        only; the covariance uses the intrinsic damping
        ``gamma_in = kl_weight / (n_samples * prior_variance)``. K-FAC splits
        the damping between its two factors (``pi``), which adds the cross terms
        ``sqrt(gamma) (pi lam_S + lam_A / pi)`` to every curvature entry; EK-FAC
        adds ``gamma`` alone to ``R``, so it needs a larger value for stable steps
        where the sampled-label Fisher is small (confident predictions).
    momentum : float, default=0.9
        Heavy-ball momentum on the preconditioned mean step (0 gives the
        papers' Algorithms exactly).
    stats_interval : int, default=1
        Update the Kronecker factors every ``stats_interval`` steps.
    kl_clip : float or None, default=1e-3
        K-FAC's trust region: the preconditioned step is shrunk so that
        ``alpha^2 step^T F step <= kl_clip`` (the value of the noisy K-FAC code).
        Flat directions of deep networks otherwise get huge steps; None disables it.
    fisher : {'true', 'empirical'}, default='true'
        Curvature of the factors: the Fisher with labels sampled from the model
        (as the papers' code does; one extra backward pass) or the empirical
        Fisher with the observed labels."""

_PARAMS_TAIL = """
    max_iter : int, default=200
        Maximum number of epochs.
    batch_size : int or 'auto', default='auto'
        Minibatch size; 'auto' is ``min(64, n_samples)``.
    mc_samples : int, default=1
        Weight samples per training step.
    predict_samples : int, default=100
        Weight samples averaged by the prediction methods.
    init : {'iblm', 'default', 'uninformative', 'heuristic', 'xavier', 'orthogonal', 'lsuv'}, default='iblm'
        Initial mean: 'iblm' sets each unit's weights to the posterior mean of a
        layer-wise Bayesian linear regression (Rossi et al., 2019); 'default' is
        PyTorch's initialisation; the others are the i-BLM paper's baselines
        (see :doc:`/init`). The Kronecker factors are then computed exactly on the
        first minibatch at that mean (the factorised variances of the
        initialiser are not used: the factors define the covariance).
    iblm_batch_size : int, default=128
        Rows of the minibatch each i-BLM regression uses.
    kl_annealing : tuple (gamma, a, b) or None, default=None
        Anneal the KL weight: ``kl_weight * gamma / (1 + exp(-a (t - b)))`` at step ``t``.
    warm_start : bool, default=False
        Continue from the previous posterior when ``fit`` is called again.
    early_stopping : bool, default=False
        Stop on a held-out validation log-likelihood (see ``SLANGRegressor``).
    validation_fraction : float, default=0.1
        Fraction held out for early stopping.
    n_iter_no_change : int, default=20
        Epochs without improvement before training stops.
    tol : float, default=1e-4
        Minimum improvement that counts.
    random_state : int, RandomState instance or None, default=None
        Seeds initialisation, minibatches, weight samples and prediction samples.
    device : str, default='cpu'
        Torch device, e.g. 'cuda'.
    dtype : {'float64', 'float32'}, default='float64'
        Floating-point precision.
    verbose : bool, default=False
        Show a progress bar with the running negative ELBO."""

_KFAC_PARAMS = """
    inv_interval : int, default=1
        Recompute the eigendecompositions of the damped factors (the inverses)
        every ``inv_interval`` steps."""

_EKFAC_PARAMS = """
    scale_decay : float, default=0.05
        Exponential-moving-average rate ``omega`` of the re-scaling ``R``.
    eig_interval : int, default=5
        Refresh the Kronecker eigenbasis every ``eig_interval`` steps. ``R`` then
        restarts from the K-FAC eigenvalue products in the new basis (the old
        ``R`` refers to the old basis), as the authors' code does.
    scale_interval : int, default=1
        Update ``R`` every ``scale_interval`` steps.
    rescale_reset_interval : int or None, default=50
        Reset ``R`` to the K-FAC eigenvalue products ``lam_A lam_S^T`` every so
        many steps (small batches make the second moment unstable); None never resets."""

_NOISE = """
    noise_precision : 'auto' or float, default='auto'
        Precision of the Gaussian observation noise in the units of ``y``. 'auto'
        learns it with a Gamma(6, 6) prior (standardised scale) and a Gamma
        variational posterior, as in the noisy EK-FAC paper's UCI experiments."""

_ATTRS = """
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Feature names seen during fit (string column names only).
    n_iter_ : int
        Epochs run.
    t_ : int
        Training steps run.
    loss_curve_ : list of float
        Negative ELBO per epoch per training example
        (``E_q[-log p] + kl_weight * KL``).
    validation_scores_ : list of float
        Validation log-likelihood per epoch (only with ``early_stopping``).
    best_validation_score_ : float
        Best validation score (only with ``early_stopping``).
    module_ : torch.nn.Module
        The network, holding the posterior mean.
    posterior_ : KroneckerGaussian
        Block-diagonal posterior: ``mean``, ``variance()``, ``sample()``,
        ``factors`` (per-layer ``Q_A``, ``Q_S``, ``scale``), dense
        ``precision()``/``covariance()`` for small models."""


def _doc(title, body, params, extra_attrs=""):
    return f"""{title}

    {body}

    Read more in the :doc:`Kronecker-factored estimators page </kfac>`.

    Parameters
    ----------{params}

    Attributes
    ----------{extra_attrs}{_ATTRS}
    """


_KFAC_BODY = """Noisy K-FAC fits a matrix-variate Gaussian posterior per layer,
    ``Cov(vec W) = (lambda/N) [S + sqrt(g)/pi I]^-1 kron [A + pi sqrt(g) I]^-1``,
    with ``A`` and ``S`` the Kronecker factors of the Fisher of the layer's inputs
    and output gradients (KFC factors for conv layers), by noisy natural gradient."""

_EKFAC_BODY = """Noisy EK-FAC fits an eigenvalue-corrected matrix-variate Gaussian per
    layer, ``Cov(vec W) = (lambda/N) (Q_S kron Q_A) (R + g_in)^-1 (Q_S kron Q_A)^T``:
    the Kronecker eigenbasis of K-FAC plus a full diagonal re-scaling ``R`` in that
    basis, tracked from per-example gradient projections."""


class NoisyKFACRegressor(_KroneckerFamily, BayesianRegressorBase):
    __doc__ = _doc("Bayesian neural network regressor trained by noisy K-FAC.", _KFAC_BODY,
                   _PARAMS_HEAD + _KFAC_PARAMS + _NOISE + _PARAMS_TAIL,
                   "\n    noise_precision_ : float\n        Posterior mean of the noise precision (units of ``y``).")

    def __init__(self, hidden_layer_sizes=(50,), activation="relu", module=None, learning_rate=0.01,
                 factor_decay=0.05, kl_weight=1.0, prior_variance=1.0, damping=1e-3, momentum=0.9,
                 stats_interval=1, kl_clip=1e-3, fisher="true", inv_interval=1, noise_precision="auto", max_iter=200,
                 batch_size="auto", mc_samples=1, predict_samples=100, init="iblm", iblm_batch_size=128, kl_annealing=None, warm_start=False,
                 early_stopping=False, validation_fraction=0.1, n_iter_no_change=20, tol=1e-4,
                 random_state=None, device="cpu", dtype="float64", verbose=False):
        _store_init_params(locals())


class NoisyKFACClassifier(_KroneckerFamily, BayesianClassifierBase):
    __doc__ = _doc("Bayesian neural network classifier trained by noisy K-FAC.", _KFAC_BODY,
                   _PARAMS_HEAD + _KFAC_PARAMS + _PARAMS_TAIL,
                   "\n    classes_ : ndarray of shape (n_classes,)\n        Class labels.")

    def __init__(self, hidden_layer_sizes=(50,), activation="relu", module=None, learning_rate=0.01,
                 factor_decay=0.05, kl_weight=1.0, prior_variance=1.0, damping=1e-3, momentum=0.9,
                 stats_interval=1, kl_clip=1e-3, fisher="true", inv_interval=1, max_iter=200, batch_size="auto",
                 mc_samples=1, predict_samples=100, init="iblm", iblm_batch_size=128, kl_annealing=None, warm_start=False, early_stopping=False,
                 validation_fraction=0.1, n_iter_no_change=20, tol=1e-4, random_state=None, device="cpu",
                 dtype="float64", verbose=False):
        _store_init_params(locals())


class NoisyEKFACRegressor(_KroneckerFamily, BayesianRegressorBase):
    __doc__ = _doc("Bayesian neural network regressor trained by noisy EK-FAC.", _EKFAC_BODY,
                   _PARAMS_HEAD + _EKFAC_PARAMS + _NOISE + _PARAMS_TAIL,
                   "\n    noise_precision_ : float\n        Posterior mean of the noise precision (units of ``y``).")
    _ekfac = True

    def __init__(self, hidden_layer_sizes=(50,), activation="relu", module=None, learning_rate=0.01,
                 factor_decay=0.05, scale_decay=0.05, kl_weight=1.0, prior_variance=1.0, damping=0.1,
                 momentum=0.9, stats_interval=1, kl_clip=1e-3, fisher="true", eig_interval=5, scale_interval=1,
                 rescale_reset_interval=50, noise_precision="auto", max_iter=200, batch_size="auto",
                 mc_samples=1, predict_samples=100, init="iblm", iblm_batch_size=128, kl_annealing=None, warm_start=False, early_stopping=False,
                 validation_fraction=0.1, n_iter_no_change=20, tol=1e-4, random_state=None, device="cpu",
                 dtype="float64", verbose=False):
        _store_init_params(locals())


class NoisyEKFACClassifier(_KroneckerFamily, BayesianClassifierBase):
    __doc__ = _doc("Bayesian neural network classifier trained by noisy EK-FAC.", _EKFAC_BODY,
                   _PARAMS_HEAD + _EKFAC_PARAMS + _PARAMS_TAIL,
                   "\n    classes_ : ndarray of shape (n_classes,)\n        Class labels.")
    _ekfac = True

    def __init__(self, hidden_layer_sizes=(50,), activation="relu", module=None, learning_rate=0.01,
                 factor_decay=0.05, scale_decay=0.05, kl_weight=1.0, prior_variance=1.0, damping=0.1,
                 momentum=0.9, stats_interval=1, kl_clip=1e-3, fisher="true", eig_interval=5, scale_interval=1,
                 rescale_reset_interval=50, max_iter=200, batch_size="auto", mc_samples=1,
                 predict_samples=100, init="iblm", iblm_batch_size=128, kl_annealing=None, warm_start=False, early_stopping=False,
                 validation_fraction=0.1, n_iter_no_change=20, tol=1e-4, random_state=None, device="cpu",
                 dtype="float64", verbose=False):
        _store_init_params(locals())
