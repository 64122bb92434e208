"""Regression and classification faces of the shared estimator."""

import math
import numbers

import numpy as np
import torch
from sklearn.base import ClassifierMixin, RegressorMixin
from sklearn.utils import check_random_state
from sklearn.utils.multiclass import check_classification_targets, unique_labels
from sklearn.utils.validation import check_is_fitted, validate_data

from ._base import BaseBayesianNetwork
from .likelihoods import Bernoulli, Categorical, Gaussian, GaussianNoise


class BayesianRegressorBase(RegressorMixin, BaseBayesianNetwork):
    """Gaussian-likelihood regression on standardised targets (not public)."""

    def _validate_X_y(self, X, y, reset):
        return validate_data(self, X, y, reset=reset, dtype=[np.float64, np.float32], y_numeric=True)

    def _prepare_targets(self, y, first, classes=None):
        if not first:
            return
        tau = self.noise_precision
        if isinstance(tau, str):
            if tau != "auto":
                raise ValueError(f"noise_precision must be 'auto' or a positive float, got {tau!r}.")
        elif isinstance(tau, bool) or not isinstance(tau, numbers.Real) or not tau > 0:
            raise ValueError(f"noise_precision must be 'auto' or a positive float, got {tau!r}.")
        y = np.asarray(y, dtype=np.float64)
        self._y_mean = float(y.mean())
        std = float(y.std())
        self._y_std = std if std > 0 and np.isfinite(std) else 1.0
        if tau == "auto":
            self._noise = GaussianNoise(learn=True, a0=6.0, b0=6.0)
        else:
            self._noise = GaussianNoise(tau=float(tau) * self._y_std**2, learn=False)

    def _make_likelihood(self):
        return Gaussian(self._noise)

    def _encode_targets(self, y):
        return (np.asarray(y, dtype=np.float64) - self._y_mean) / self._y_std

    def _target_tensor(self, y):
        return self._tensor(y)

    def _after_step(self, f, yb, scale, N, beta):
        r = f[..., 0] - yb
        self._noise.update(scale * float((r * r).sum()), N, beta)

    def _extra_kl(self):
        return self._noise.kl()

    def _after_init(self, n_train, noise_variance=None):
        # i-BLM estimated the noise variance of the output layer's regression by
        # evidence maximisation on a minibatch of B rows: start q(tau) at the
        # posterior that B observations with that variance would give.
        v = noise_variance
        if v is not None and self._noise.learn:
            B = min(int(self.iblm_batch_size), n_train)
            self._noise.a = self._noise.a0 + 0.5 * B
            self._noise.b = self._noise.b0 + 0.5 * B * v

    def _finalize(self):
        self.noise_precision_ = self._noise.tau_mean / self._y_std**2

    def _validation_score(self, Xv, yv):
        f = self._outputs(self._tensor(Xv), n_samples=min(int(self.predict_samples), 16))[..., 0]
        y = self._tensor(yv)
        var = self._noise.noise_variance
        logp = -0.5 * (y[None] - f) ** 2 / var - 0.5 * math.log(2 * math.pi * var)
        return float((torch.logsumexp(logp, 0) - math.log(f.shape[0])).mean())

    # --- public API -----------------------------------------------------------
    def fit(self, X, y):
        """Fit the variational posterior to data.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training inputs.
        y : array-like of shape (n_samples,)
            Real-valued targets.

        Returns
        -------
        self : object
            Fitted estimator.
        """
        return self._fit(X, y, incremental=False)

    def partial_fit(self, X, y):
        """Run one epoch over ``(X, y)``, continuing from the current posterior.

        The first call initialises the model (target scaling is fixed by the
        data of that call).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)

        Returns
        -------
        self : object
        """
        return self._fit(X, y, incremental=True)

    def _moments(self, X):
        f = self._predict_outputs(X)[..., 0]
        mean = f.mean(0)
        var = f.var(0, unbiased=False) + self._noise.noise_variance
        return mean, var

    def predict(self, X, return_std=False):
        """Posterior predictive mean (and standard deviation).

        The mean averages the network output over ``predict_samples`` weight
        samples; the standard deviation combines the spread of those outputs
        (epistemic) with the learned noise (aleatoric):
        ``std^2 = Var_q[f(x)] + E_q[1 / tau]``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        return_std : bool, default=False
            Also return the predictive standard deviation.

        Returns
        -------
        y_mean : ndarray of shape (n_samples,)
        y_std : ndarray of shape (n_samples,)
            Only if ``return_std`` is True.
        """
        mean, var = self._moments(X)
        y_mean = (self._y_mean + self._y_std * mean).cpu().numpy().astype(np.float64)
        if not return_std:
            return y_mean
        return y_mean, (self._y_std * torch.sqrt(var)).cpu().numpy().astype(np.float64)

    def predict_std(self, X):
        """Posterior predictive standard deviation, shape ``(n_samples,)``."""
        return self.predict(X, return_std=True)[1]

    def sample_y(self, X, n_samples=1, random_state=0):
        """Draw targets from the posterior predictive distribution.

        Each draw takes a weight sample from the posterior, a noise precision
        from its posterior (or the fixed one) and Gaussian noise.

        Parameters
        ----------
        X : array-like of shape (n_samples_X, n_features)
        n_samples : int, default=1
            Number of draws per input.
        random_state : int, RandomState instance or None, default=0
            Seeds the draws (as in :meth:`GaussianProcessRegressor.sample_y`).

        Returns
        -------
        y_samples : ndarray of shape (n_samples_X, n_samples)
        """
        rng = check_random_state(random_state)
        seed = int(rng.randint(np.iinfo(np.int32).max))
        f = self._predict_outputs(X, n_samples=int(n_samples), seed=seed)[..., 0].cpu().numpy().astype(np.float64)
        noise = self._noise
        if noise.learn:
            tau = rng.gamma(noise.a, 1.0 / noise.b, size=(f.shape[0], 1))
        else:
            tau = np.full((f.shape[0], 1), noise.tau)
        eps = rng.standard_normal(f.shape)
        y = f + eps / np.sqrt(tau)
        return (self._y_mean + self._y_std * y).T

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.single_output = True
        tags.target_tags.multi_output = False
        return tags


class BayesianClassifierBase(ClassifierMixin, BaseBayesianNetwork):
    """Bernoulli (two classes, one logit) or categorical (softmax) classification (not public)."""

    _is_classifier = True

    def _validate_X_y(self, X, y, reset):
        X, y = validate_data(self, X, y, reset=reset, dtype=[np.float64, np.float32])
        check_classification_targets(y)
        return X, y

    def _prepare_targets(self, y, first, classes=None):
        if first:
            labels = unique_labels(y) if classes is None else unique_labels(np.asarray(classes))
            if len(labels) < 2:
                raise ValueError(
                    f"{type(self).__name__} needs samples of at least 2 classes in the data; "
                    f"got 1 class: {labels[0]!r}."
                )
            self.classes_ = labels
        else:
            if classes is not None and not np.array_equal(unique_labels(np.asarray(classes)), self.classes_):
                raise ValueError(
                    f"classes={classes!r} differs from the classes of the first call, {self.classes_!r}."
                )
        unseen = np.setdiff1d(np.unique(y), self.classes_)
        if unseen.size:
            raise ValueError(f"y contains labels not in classes_: {unseen!r}.")

    def _make_likelihood(self):
        k = len(self.classes_)
        return Bernoulli() if k == 2 else Categorical(k)

    def _encode_targets(self, y):
        return np.searchsorted(self.classes_, y)

    def _target_tensor(self, y):
        if len(self.classes_) == 2:
            return self._tensor(np.asarray(y, dtype=np.float64))
        return self._tensor(np.asarray(y, dtype=np.int64), dtype=torch.long)

    def _probs(self, f):
        """Class probabilities per weight sample, ``(S, n, n_classes)``."""
        if len(self.classes_) == 2:
            p1 = torch.sigmoid(f[..., 0])
            return torch.stack([1.0 - p1, p1], -1)
        return torch.softmax(f, -1)

    def _validation_score(self, Xv, yv):
        f = self._outputs(self._tensor(Xv), n_samples=min(int(self.predict_samples), 16))
        p = self._probs(f).mean(0)
        idx = torch.as_tensor(np.asarray(yv, dtype=np.int64), device=p.device)
        return float(torch.log(p.gather(1, idx[:, None]).clamp_min(1e-300)).mean())

    # --- public API -----------------------------------------------------------
    def fit(self, X, y):
        """Fit the variational posterior to data.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training inputs.
        y : array-like of shape (n_samples,)
            Class labels (any hashable, sortable type: ints, strings, ...).

        Returns
        -------
        self : object
            Fitted estimator.
        """
        return self._fit(X, y, incremental=False)

    def partial_fit(self, X, y, classes=None):
        """Run one epoch over ``(X, y)``, continuing from the current posterior.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        classes : array-like of shape (n_classes,), default=None
            All classes that can appear in any call. Required on the first
            call (as for scikit-learn's incremental classifiers), ignored later
            unless it disagrees with ``classes_``.

        Returns
        -------
        self : object
        """
        if not hasattr(self, "classes_") and classes is None:
            raise ValueError("classes must be passed on the first call to partial_fit.")
        return self._fit(X, y, incremental=True, classes=classes)

    def predict_proba(self, X):
        """Posterior predictive class probabilities.

        The Monte Carlo average over ``predict_samples`` weight samples of the
        network's class probabilities (not of its logits).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes)
            Columns follow ``classes_``.
        """
        check_is_fitted(self, "posterior_")
        p = self._probs(self._predict_outputs(X)).mean(0)
        return p.cpu().numpy().astype(np.float64)

    def predict_log_proba(self, X):
        """Logarithm of :meth:`predict_proba`."""
        with np.errstate(divide="ignore"):
            return np.log(self.predict_proba(X))

    def predict_std(self, X):
        """Standard deviation of each class probability over the posterior.

        Returns
        -------
        std : ndarray of shape (n_samples, n_classes)
        """
        check_is_fitted(self, "posterior_")
        p = self._probs(self._predict_outputs(X))
        return p.std(0, unbiased=False).cpu().numpy().astype(np.float64)

    def predict(self, X):
        """Most probable class under the posterior predictive.

        Returns
        -------
        y : ndarray of shape (n_samples,)
        """
        proba = self.predict_proba(X)
        return self.classes_[np.argmax(proba, axis=1)]
