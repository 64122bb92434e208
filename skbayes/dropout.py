"""MC dropout (Gal and Ghahramani, 2016): a network trained with dropout and weight decay,
with dropout kept on at prediction.

One dropout mask is a *masked copy of the weight vector*: dropping input unit ``j``
of a ``Linear`` layer zeroes column ``j`` of its weight matrix, and inverted
dropout scales the kept columns by ``1 / (1 - p)``. So the "posterior" of MC
dropout is the distribution of masked weight vectors, and prediction goes through
the engine's shared path unchanged: ``posterior_.sample_t(S, generator)`` draws
``S`` masks from the seeded generator, and every row of a call sees the same ``S``
masked networks (deterministic, row-independent predictions).
"""

import copy

import torch
from torch import nn
from torch.func import functional_call

from ._base import _check_number, _store_init_params
from ._estimators import BayesianClassifierBase, BayesianRegressorBase
from .bbb import NOISE_DOC, SHARED_ATTRS, SHARED_HEAD, SHARED_TAIL, adam_update
from .posteriors._common import PosteriorMixin


class DropoutPosterior(PosteriorMixin):
    """The distribution of dropout-masked weight vectors.

    A draw keeps every input unit ``j`` of a masked layer with probability
    ``1 - p`` and scales it by ``1 / (1 - p)``, i.e. column ``j`` of the layer's
    weight matrix becomes ``W[:, j] z_j / (1 - p)`` with ``z_j ~ Bernoulli(1 - p)``;
    biases and unmasked layers are kept as they are. The distribution is discrete
    (one atom per mask), with mean the weights and, per masked entry, variance
    ``W_ij^2 p / (1 - p)``; entries of one column are perfectly correlated
    (they share the mask), different columns and layers are independent.

    Attributes (numpy views for users)
    ----------------------------------
    mean : ndarray of shape (D,)
        The network's weights, in ``module_.parameters()`` order (the mean of the masked weights).
    masked_layers : list of dict
        One entry per masked layer: ``name`` (of the ``Linear`` module), ``offset`` of
        its weight in the flat vector, its ``shape`` ``(out, in)`` and the ``rate`` ``p``.
    """

    family = "dropout"

    def __init__(self, mean, groups):
        self.mean_t = mean
        # (name, weight offset, out, in, rate) of every Linear layer whose inputs are dropped
        self.groups = [g for g in groups if g[4] > 0]

    @property
    def masked_layers(self):
        return [dict(name=n, offset=o, shape=(out, inp), rate=p) for n, o, out, inp, p in self.groups]

    # --- tensor routines -------------------------------------------------
    def sample_t(self, n, generator=None):
        mu = self.mean_t
        n = int(n)
        theta = mu.expand(n, mu.shape[0]).clone()
        for _, off, out, inp, p in self.groups:
            keep = (torch.rand(n, inp, generator=generator, dtype=mu.dtype, device=mu.device) >= p).to(mu.dtype)
            W = theta[:, off : off + out * inp].view(n, out, inp)
            W.mul_((keep / (1.0 - p))[:, None, :])
        return theta

    def variance_t(self):
        v = torch.zeros_like(self.mean_t)
        for _, off, out, inp, p in self.groups:
            w = self.mean_t[off : off + out * inp]
            v[off : off + out * inp] = w * w * (p / (1.0 - p))
        return v

    def covariance_t(self):
        """Exact covariance of the masked weights (dense ``(D, D)``, singular)."""
        D = self.mean_t.shape[0]
        C = self.mean_t.new_zeros(D, D)
        for _, off, out, inp, p in self.groups:
            W = self.mean_t[off : off + out * inp].view(out, inp)
            idx = off + torch.arange(out * inp, device=W.device).view(out, inp)
            for j in range(inp):
                ix = idx[:, j]
                C[ix[:, None], ix[None, :]] = torch.outer(W[:, j], W[:, j]) * (p / (1.0 - p))
        return C

    def covariance(self, max_size=5000):
        """Exact dense covariance ``(D, D)`` of the masked weight vectors (small models only).

        Column ``j`` of a masked layer contributes ``W[:, j] W[:, j]^T p / (1 - p)``;
        everything else is 0. The matrix is singular: its rank is at most the
        number of dropped units (and it is 0 on biases and unmasked layers).
        """
        self._check_dense(max_size)
        with torch.no_grad():
            return self.covariance_t().cpu().numpy()

    def precision(self, max_size=5000):
        """Not defined: raises ``NotImplementedError``.

        The masked-weight distribution is a discrete mixture of ``2^k`` masked
        copies of the weights (``k`` dropped units), not a Gaussian, and its
        covariance is singular, so it has no precision matrix. Use
        :meth:`covariance`, :meth:`variance` or :meth:`sample`.
        """
        raise NotImplementedError(
            "MC dropout's posterior is the discrete distribution of dropout-masked weight vectors, not a "
            "Gaussian, and its covariance is singular (rank at most the number of dropped units): it has no "
            "precision matrix. Use covariance(), variance() or sample() instead."
        )

    def _tensors(self):
        return (self.mean_t,)


def _parameterised_call_order(module, n_features, dtype, device):
    """Names of the submodules holding parameters, in the order a forward pass calls them."""
    probe = copy.deepcopy(module)  # a forward pass may touch buffers (e.g. batch-norm statistics)
    order, hooks = [], []
    for name, m in probe.named_modules():
        if any(p.requires_grad for p in m.parameters(recurse=False)):
            hooks.append(m.register_forward_pre_hook(lambda mod, args, name=name: order.append(name)))
    try:
        with torch.no_grad():
            probe(torch.zeros(2, n_features, dtype=dtype, device=device))
    finally:
        for h in hooks:
            h.remove()
    seen = []
    for name in order:
        if name not in seen:
            seen.append(name)
    return seen


class _DropoutFamily:
    """MC dropout's "posterior" (masked weight vectors) and its training (mixed into the estimators)."""

    #: Step size of the natural-gradient (SVI) update of the regressor's Gamma noise posterior.
    _noise_step = 0.05

    def _check_family_params(self):
        _check_number("prior_precision", self.prior_precision, low=0, low_open=True)
        _check_number("learning_rate", self.learning_rate, low=0, low_open=True)
        for name in ("dropout", "input_dropout"):
            _check_number(name, getattr(self, name), low=0, high=1, high_open=True)

    def _prior_precision(self):
        return float(self.prior_precision)

    def _dropout_groups(self):
        """``(name, weight offset, out, in, rate)`` for every ``Linear`` layer of the network.

        The layer that receives the network input gets ``input_dropout``, every other
        ``Linear`` layer ``dropout`` (on its inputs: the hidden units feeding it).
        """
        net, layout = self.module_, self._layout
        pos = dict(zip(layout.names, layout.offsets))
        if any(isinstance(m, nn.modules.dropout._DropoutNd) for m in net.modules()):
            raise ValueError(
                f"module contains torch.nn dropout layers; {type(self).__name__} applies dropout itself "
                "(rate `dropout`) to the inputs of every Linear layer but the first, with masks drawn from "
                "its seeded generator: remove the nn.Dropout layers from the module."
            )
        modules = dict(net.named_modules())
        order = _parameterised_call_order(net, self.n_features_in_, self._dtype, self._device)
        first = order[0] if order else None
        groups = []
        for name in order:
            m = modules[name]
            key = f"{name}.weight" if name else "weight"
            if not isinstance(m, nn.Linear) or key not in pos:
                continue
            rate = float(self.input_dropout if name == first else self.dropout)
            groups.append((name, pos[key], m.out_features, m.in_features, rate))
        return groups

    def _init_posterior(self, mean, n_train, var=None):
        # The initialiser's variances are not used: the spread of MC dropout is set by
        # the rates and the weights.
        self.posterior_ = DropoutPosterior(mean.clone(), self._dropout_groups())
        z = torch.zeros_like(mean)
        self._opt_state = {"step": 0, "w_m": z.clone(), "w_v": z.clone()}

    def _lambda(self):
        return float(self.prior_precision) * self._kl_scale()

    def _kl(self):
        # The weight-decay term lambda/2 ||theta||^2 (the negative log prior up to a
        # constant) in place of a KL: ``loss_curve_`` is the regularised training loss.
        w = self.posterior_.mean_t
        return 0.5 * self._lambda() * float((w * w).sum())

    def _train_outputs(self, theta, Xb, n_samples, gen, spec):
        """Outputs ``(S, M, out)`` with fresh dropout masks per example and per sample.

        ``theta`` (the weights, possibly requiring grad) is not masked: the masks act on
        the layer inputs, independently for every example (standard dropout).
        """
        S, M = int(n_samples), Xb.shape[0]
        X = Xb.repeat(S, *([1] * (Xb.dim() - 1))) if S > 1 else Xb

        def drop(h, p):
            if p <= 0:
                return h
            keep = (torch.rand(h.shape, generator=gen, dtype=h.dtype, device=h.device) >= p).to(h.dtype)
            return h * (keep / (1.0 - p))

        groups = self.posterior_.groups  # the masked layers (rate > 0)
        if spec is not None:
            rates = {g[1]: g[4] for g in groups}  # by weight offset
            h = X
            for kind, info in spec.steps:
                if kind == "act":
                    h = info(h)
                    continue
                w_off, out, inp, b_off = info
                h = drop(h, rates.get(w_off, 0.0))
                h = h @ theta[w_off : w_off + out * inp].view(out, inp).T
                if b_off is not None:
                    h = h + theta[b_off : b_off + out]
            f = h
        else:
            modules = dict(self.module_.named_modules())
            hooks = [
                modules[name].register_forward_pre_hook(lambda m, args, p=p: (drop(args[0], p),) + tuple(args[1:]))
                for name, _, _, _, p in groups
            ]
            try:
                f = functional_call(self.module_, self._layout.unflatten(theta), (X,))
            finally:
                for h in hooks:
                    h.remove()
        return f.reshape(S, M, f.shape[-1])

    def _step(self, Xb, yb, N, gen, spec):
        """One step of Adam on ``(N/M) sum_i nll_i(masked net) + lambda/2 ||theta||^2``, per example."""
        post, state = self.posterior_, self._opt_state
        S, M = int(self.mc_samples), Xb.shape[0]
        scale = N / (M * S)
        with torch.enable_grad():
            theta = post.mean_t.detach().requires_grad_(True)
            f = self._train_outputs(theta, Xb, S, gen, spec)
            data = scale * self._likelihood.nll(f, yb).sum()
            loss = data + 0.5 * self._lambda() * (theta * theta).sum()
            (g,) = torch.autograd.grad(loss / N, (theta,))
        state["step"] += 1
        post.mean_t = adam_update(post.mean_t, g, state, "w", float(self.learning_rate))
        self._after_step(f.detach(), yb, scale, N, self._noise_step)
        self.t_ += 1
        return float(data)


_DROPOUT_PARAMS = """
    dropout : float, default=0.1
        Drop probability ``p`` of the inputs of every ``Linear`` layer except the
        one that receives the network input, i.e. of the hidden units (the
        standard placement of MC dropout). Kept units are scaled by ``1 / (1 - p)``
        (inverted dropout), so the mean of the masked network's weights is the
        network's weights. In a custom ``module`` the same rule applies to its
        ``nn.Linear`` layers (the first parameterised layer of the forward pass
        counts as the input layer); convolutions and other layers are not
        dropped (their weights are point estimates). The module must not contain
        ``nn.Dropout`` layers of its own (they would draw from PyTorch's global
        generator): fit raises a ValueError.
    input_dropout : float, default=0.0
        Drop probability of the network's input features (the inputs of the first
        layer, when it is an ``nn.Linear``).
    prior_precision : float, default=1.0
        Weight decay ``lambda``: the training objective is
        ``sum_i E_mask[-log p(y_i | x_i, theta, mask)] + lambda/2 ||theta||^2``
        on all weights and biases (the MAP objective under the prior
        ``N(0, lambda^{-1} I)``, with dropout noise). In Gal and Ghahramani's
        parameterisation (unscaled masks, weight decay ``(1 - p) l^2 / 2 ||M||^2``
        on a dropped layer's weights ``M = theta / (1 - p)``) this is a prior
        length-scale ``l^2 = lambda (1 - p)``.
    learning_rate : float, default=0.01
        Adam's step size on the weights."""

_DROPOUT_ATTRS = """
    loss_curve_ : list of float
        Training loss per epoch per training example: the average minibatch
        estimate of ``E_mask[-log p(y | X, theta)]`` over the epoch plus
        ``lambda/2 ||theta||^2`` at its end (regressors: on standardised targets,
        with the noise precision's KL). Not an ELBO: MC dropout has no closed-form
        variational objective.
    posterior_ : DropoutPosterior
        The distribution of masked weight vectors: ``mean`` (the weights),
        ``sample(n, random_state)``, exact ``variance()`` and (small models)
        ``covariance()``; ``precision()`` raises NotImplementedError (not a
        Gaussian, singular covariance). ``masked_layers`` lists the dropped layers."""


def _dropout_doc(title, extra_params, extra_attrs, see_also, example):
    return f"""{title}

    MC dropout (Gal and Ghahramani, 2016) trains the network with dropout on the
    hidden units and weight decay, by Adam, and keeps dropout on at prediction:
    the prediction methods average ``predict_samples`` masked networks. Each
    mask is drawn from a generator seeded at fit time and serves every row of
    the call, so predictions are deterministic and a row's prediction does not
    depend on the other rows. During training every example gets its own mask.

    Read more in the :doc:`Bayes by Backprop and MC dropout page </bbb_dropout>`.

    Parameters
    ----------{SHARED_HEAD}{_DROPOUT_PARAMS}{extra_params}{SHARED_TAIL}

    Attributes
    ----------{extra_attrs}{SHARED_ATTRS}{_DROPOUT_ATTRS}

    See Also
    --------
    {see_also}

    Examples
    --------
{example}
    """


class MCDropoutRegressor(_DropoutFamily, BayesianRegressorBase):
    __doc__ = _dropout_doc(
        "Neural network regressor with MC dropout.",
        NOISE_DOC.replace("Gamma variational posterior updated", "Gamma variational posterior, given the\n"
                          "        dropout predictive, updated"),
        "\n    noise_precision_ : float\n        Posterior mean of the noise precision, in the units of ``y``.",
        "MCDropoutClassifier : the classification counterpart.\n    BBBRegressor : Bayes by Backprop.",
        """    >>> from sklearn.datasets import load_diabetes
    >>> from skbayes import MCDropoutRegressor
    >>> X, y = load_diabetes(return_X_y=True)
    >>> reg = MCDropoutRegressor(hidden_layer_sizes=(20,), max_iter=20, random_state=0).fit(X, y)
    >>> mean, std = reg.predict(X[:3], return_std=True)""",
    )

    def __init__(self, hidden_layer_sizes=(50,), activation="relu", module=None, dropout=0.1, input_dropout=0.0,
                 prior_precision=1.0, learning_rate=0.01, noise_precision="auto", max_iter=200, batch_size="auto",
                 mc_samples=1, predict_samples=100, init="iblm", iblm_batch_size=128, kl_annealing=None,
                 warm_start=False, early_stopping=False, validation_fraction=0.1, n_iter_no_change=20, tol=1e-4,
                 random_state=None, device="cpu", dtype="float64", verbose=False):
        _store_init_params(locals())


class MCDropoutClassifier(_DropoutFamily, BayesianClassifierBase):
    __doc__ = _dropout_doc(
        "Neural network classifier with MC dropout.",
        "",
        "\n    classes_ : ndarray of shape (n_classes,)\n        Class labels.",
        "MCDropoutRegressor : the regression counterpart.\n    BBBClassifier : Bayes by Backprop.",
        """    >>> from sklearn.datasets import load_breast_cancer
    >>> from sklearn.preprocessing import StandardScaler
    >>> from skbayes import MCDropoutClassifier
    >>> X, y = load_breast_cancer(return_X_y=True)
    >>> X = StandardScaler().fit_transform(X)
    >>> clf = MCDropoutClassifier(hidden_layer_sizes=(20,), max_iter=20, random_state=0).fit(X, y)
    >>> proba = clf.predict_proba(X[:3])""",
    )

    def __init__(self, hidden_layer_sizes=(50,), activation="relu", module=None, dropout=0.1, input_dropout=0.0,
                 prior_precision=1.0, learning_rate=0.01, max_iter=200, batch_size="auto", mc_samples=1,
                 predict_samples=100, init="iblm", iblm_batch_size=128, kl_annealing=None, warm_start=False,
                 early_stopping=False, validation_fraction=0.1, n_iter_no_change=20, tol=1e-4, random_state=None,
                 device="cpu", dtype="float64", verbose=False):
        _store_init_params(locals())
