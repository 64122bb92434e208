"""The shared estimator: validation, the training loop, prediction machinery.

Every public estimator is a thin subclass that picks a posterior family and a
likelihood. The loop is the one of every natural-gradient VI method::

    theta ~ q  ->  net(X; theta)  ->  per-example curvature  ->  precision update  ->  mean step
"""

import copy
import math
import numbers
import warnings

import numpy as np
import torch
from torch.func import functional_call
from sklearn.base import BaseEstimator
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted, validate_data

from . import curvature as _curv
from .init import INITS, initial_moments
from .networks import ACTIVATIONS, DenseSpec, ParamLayout, build_mlp, make_module

_DTYPES = {"float32": torch.float32, "float64": torch.float64}

#: Epochs in a row (at most ``n_iter_no_change``) the training objective must stay more than
#: ``max(1, |best|)`` above its best before the fit is stopped and reverted to the best epoch.
_RISE_PATIENCE = 10


def _torch_dtype(dtype):
    key = np.dtype(dtype).name if not isinstance(dtype, torch.dtype) else str(dtype).split(".")[-1]
    if key not in _DTYPES:
        raise ValueError(f"dtype must be 'float32' or 'float64', got {dtype!r}.")
    return _DTYPES[key]


def _check_number(name, value, low=None, high=None, low_open=False, integer=False, high_open=False):
    """Raise a ValueError naming ``name`` unless ``value`` is a number in the given range."""
    kind = numbers.Integral if integer else numbers.Real
    if isinstance(value, bool) or not isinstance(value, kind):
        raise ValueError(f"{name} must be {'an int' if integer else 'a number'}, got {value!r}.")
    if low is not None and (value < low or (low_open and value == low)):
        raise ValueError(f"{name} must be {'>' if low_open else '>='} {low}, got {value!r}.")
    if high is not None and (value > high or (high_open and value == high)):
        if high_open and low is not None:
            raise ValueError(f"{name} must be in {'(' if low_open else '['}{low}, {high}), got {value!r}.")
        raise ValueError(f"{name} must be {'<' if high_open else '<='} {high}, got {value!r}.")


def _store_init_params(params):
    """Store an ``__init__``'s arguments (its ``locals()``) as attributes, unchanged, as
    scikit-learn requires of estimator constructors."""
    params = dict(params)
    self = params.pop("self")
    params.pop("__class__", None)
    for k, v in params.items():
        setattr(self, k, v)


class BaseBayesianNetwork(BaseEstimator):
    """Machinery shared by every skbayes estimator (not public)."""

    # --- subclass hooks ---------------------------------------------------
    def _make_likelihood(self):  # pragma: no cover - abstract
        raise NotImplementedError

    def _encode_targets(self, y):  # pragma: no cover - abstract
        raise NotImplementedError

    # --- validation -------------------------------------------------------
    def _check_params(self):
        hls = self.hidden_layer_sizes
        if hls is None:
            hls = ()
        if isinstance(hls, numbers.Integral):
            hls = (hls,)
        hls = tuple(hls)
        if any(isinstance(h, bool) or not isinstance(h, numbers.Integral) or h < 1 for h in hls):
            raise ValueError(f"hidden_layer_sizes must be positive ints, got {self.hidden_layer_sizes!r}.")
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {sorted(ACTIVATIONS)}, got {self.activation!r}.")
        self._check_family_params()
        _check_number("max_iter", self.max_iter, low=1, integer=True)
        if self.batch_size != "auto":
            _check_number("batch_size", self.batch_size, low=1, integer=True)
        _check_number("mc_samples", self.mc_samples, low=1, integer=True)
        _check_number("predict_samples", self.predict_samples, low=1, integer=True)
        _check_number("validation_fraction", self.validation_fraction, low=0, high=1, low_open=True, high_open=True)
        _check_number("n_iter_no_change", self.n_iter_no_change, low=1, integer=True)
        _check_number("tol", self.tol, low=0)
        if self.init not in INITS:
            raise ValueError(f"init must be one of {list(INITS)}, got {self.init!r}.")
        _check_number("iblm_batch_size", self.iblm_batch_size, low=1, integer=True)
        ka = self.kl_annealing
        if ka is not None:
            if not (isinstance(ka, (tuple, list)) and len(ka) == 3) or any(
                isinstance(v, bool) or not isinstance(v, numbers.Real) or not v > 0 for v in ka
            ):
                raise ValueError(f"kl_annealing must be None or a tuple (gamma, a, b) of positive numbers, got {ka!r}.")
        return hls

    def _validate_X(self, X, reset):
        return validate_data(self, X, reset=reset, dtype=[np.float64, np.float32])

    # --- helpers ----------------------------------------------------------
    def _tensor(self, a, dtype=None):
        return torch.as_tensor(np.ascontiguousarray(a), dtype=dtype or self._dtype, device=self._device)

    @property
    def _dtype(self):
        return _torch_dtype(self.dtype)

    @property
    def _device(self):
        return torch.device(self.device)

    def _spec(self):
        if DenseSpec.supports(self.module_):
            return DenseSpec(self.module_, self._layout)
        return None

    def _batch_size(self, n):
        bs = min(64, n) if self.batch_size == "auto" else min(int(self.batch_size), n)
        return max(bs, 1)

    # --- initialisation ---------------------------------------------------
    def _initialize(self, X, y_enc, rng):
        hls = self._check_params()
        self._likelihood = self._make_likelihood()
        n_out = self._likelihood.n_outputs
        seed = int(rng.randint(np.iinfo(np.int32).max))
        # Build under a fixed seed and the estimator's dtype, so the initial
        # weights depend neither on the global RNG nor on torch's default dtype.
        prev_dtype = torch.get_default_dtype()
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            torch.set_default_dtype(self._dtype)
            try:
                if self.module is None:
                    net = build_mlp(X.shape[1], hls, n_out, self.activation)
                else:
                    net = make_module(self.module, X.shape[1], n_out)
            finally:
                torch.set_default_dtype(prev_dtype)
        net = net.to(device=self._device, dtype=self._dtype)
        self.module_ = net
        self._layout = ParamLayout(net)
        gen = torch.Generator(device=self._device).manual_seed(int(rng.randint(np.iinfo(np.int32).max)))
        Xt, yt = self._tensor(X), self._target_tensor(y_enc)
        with torch.no_grad():
            mean, var, noise_variance = initial_moments(self, Xt, yt, gen, self._prior_precision())
        self._layout.load_into(net, mean)
        self._init_posterior(mean, X.shape[0], var)
        self._after_init(X.shape[0], noise_variance)
        self.t_ = 0
        self.n_iter_ = 0
        self.loss_curve_ = []
        self._predict_seed = int(rng.randint(np.iinfo(np.int32).max))
        self._rng_state = torch.Generator(device=self._device).manual_seed(
            int(rng.randint(np.iinfo(np.int32).max))
        ).get_state()  # a device generator's state (CUDA states differ in size from CPU ones)

    #: Posterior means beyond this magnitude count as divergence (the targets are
    #: standardised, so no sensible network needs weights anywhere near it).
    _MAX_ABS_WEIGHT = 1e8

    def _healthy(self):
        post = self.posterior_
        return post.is_finite() and float(torch.linalg.vector_norm(post.mean_t, float("inf"))) < self._MAX_ABS_WEIGHT

    def _divergence_hint(self):
        """Extra hyper-parameters named in the divergence warning."""
        names = ("beta", "damping")
        return "".join(f", {n}={getattr(self, n)}" for n in names if hasattr(self, n))

    def _kl_scale(self):
        """KL annealing weight ``gamma / (1 + exp(-a (t - b)))`` at the current step (App. E.9)."""
        if self.kl_annealing is None:
            return 1.0
        g, a, b = (float(v) for v in self.kl_annealing)
        z = -a * (self.t_ - b)
        return g / (1.0 + math.exp(min(z, 700.0)))

    # --- one step (family hooks) -------------------------------------------
    def _curvature(self, theta, Xb, yb, spec):
        """Per-example curvature at weight samples ``theta`` (S, D) on a minibatch."""
        if spec is not None:
            return _curv.dense_curvature(spec, theta, Xb, yb, self._likelihood)
        return _curv.generic_curvature(self.module_, self._layout, theta, Xb, yb, self._likelihood)

    def _after_step(self, f, yb, scale, N, beta):
        """Hook for likelihood parameters (the regressor's noise precision)."""

    def _finalize(self):
        """Hook run at the end of every fit / partial_fit."""

    def _after_init(self, n_train, noise_variance=None):
        """Hook run once the initial posterior is set (``noise_variance``: the initialiser's
        estimate of the observation noise on the standardised scale, if it made one)."""

    def _extra_kl(self):
        return 0.0

    # --- state snapshots (divergence recovery, early stopping) -------------
    def _snapshot(self):
        snap = {"post": copy.deepcopy(self.posterior_), "opt": copy.deepcopy(self._opt_state), "t": self.t_}
        noise = getattr(self, "_noise", None)
        if noise is not None and noise.learn:
            snap["noise"] = (noise.a, noise.b)
        return snap

    def _restore(self, snap):
        self.posterior_ = copy.deepcopy(snap["post"])
        self._opt_state = copy.deepcopy(snap["opt"])
        self.t_ = snap["t"]
        if "noise" in snap:
            self._noise.a, self._noise.b = snap["noise"]

    # --- the loop ---------------------------------------------------------
    def _fit_loop(self, X, y, n_epochs, incremental):
        """Run epochs over (X, y) (already validated and encoded)."""
        N_all = X.shape[0]
        gen = torch.Generator(device=self._device)
        gen.set_state(self._rng_state)
        Xv = yv = None
        early = self.early_stopping and not incremental
        if early:
            Xt, yt, Xv, yv = self._validation_split(X, y)
        else:
            Xt, yt = X, y
        N = Xt.shape[0]
        Xt_t, yt_t = self._tensor(Xt), self._target_tensor(yt)
        bs = self._batch_size(N)
        spec = self._spec()
        best_loss, best_score, no_improve = np.inf, -np.inf, 0
        best_snap = None
        converged = False
        self._diverged = False
        self._unstable = False
        bar = None
        if self.verbose and not incremental:
            from tqdm.auto import tqdm

            bar = tqdm(total=n_epochs, desc=type(self).__name__, leave=True)
        # Guard against a training objective that climbs far above its best (step sizes
        # too large for the problem): the state at the end of the best epoch is the
        # snapshot taken at the start of the following one.
        # It must hold for `patience` epochs in a row, so that a transient (a spike in the first
        # epochs that training recovers from) or one noisy estimate does not stop the fit.
        guard = not incremental and self.kl_annealing is None
        patience = min(_RISE_PATIENCE, int(self.n_iter_no_change))
        best_train_snap, last_was_best, best_train, n_above = None, False, np.inf, 0
        for epoch in range(n_epochs):
            snap = self._snapshot()
            if last_was_best:
                best_train_snap = snap
            perm = torch.randperm(N, generator=gen, device=self._device)
            data_term, n_steps, bad = 0.0, 0, False
            for start in range(0, N, bs):
                idx = perm[start : start + bs]
                try:
                    with torch.no_grad():
                        data_term += self._step(Xt_t[idx], yt_t[idx], N, gen, spec)
                except (torch.linalg.LinAlgError, FloatingPointError):  # non-finite values mid-step
                    bad = True
                    break
                n_steps += 1
                if not math.isfinite(data_term) or not self._healthy():
                    bad = True
                    break
            if bad:
                self._restore(snap)
                self._diverged = True
                warnings.warn(
                    f"{type(self).__name__} diverged (non-finite values or weights beyond 1e8) in epoch {self.n_iter_ + 1}: "
                    f"training stopped and the posterior reverted to the end of epoch {self.n_iter_}. "
                    f"The learning rate is likely too large (learning_rate={self.learning_rate}"
                    f"{self._divergence_hint()}) or the "
                    "inputs are badly scaled; lower the learning rate, or standardise the inputs.",
                    ConvergenceWarning,
                )
                break
            with torch.no_grad():
                kl = self._kl() + self._extra_kl()
            loss = (data_term / n_steps + kl) / N
            self.loss_curve_.append(loss)
            self.n_iter_ += 1
            if bar is not None:
                bar.set_postfix(neg_elbo=f"{loss:.4f}")
                bar.update(1)
            if incremental:
                continue
            n_above = n_above + 1 if loss > best_train + max(1.0, abs(best_train)) else 0
            if guard and best_train_snap is not None and n_above >= patience:
                self._restore(best_train_snap)
                self._unstable = True
                warnings.warn(
                    f"{type(self).__name__}: the training objective per example (loss_curve_) rose "
                    f"from {best_train:.4g} to {loss:.4g} and stayed up for {n_above} epochs (epoch "
                    f"{self.n_iter_}): training stopped and the "
                    f"posterior reverted to the end of its best epoch. The step sizes are likely too "
                    f"large for this problem (learning_rate={self.learning_rate}{self._divergence_hint()}); "
                    "lower them, or use early_stopping.",
                    ConvergenceWarning,
                )
                break
            last_was_best = loss < best_train
            best_train = min(best_train, loss)
            if early:
                score = self._validation_score(Xv, yv)
                self.validation_scores_.append(score)
                if score > best_score:
                    best_snap = self._snapshot()
                if score < best_score + self.tol:
                    no_improve += 1
                else:
                    no_improve = 0
                best_score = max(best_score, score)
            else:
                if loss > best_loss - self.tol:
                    no_improve += 1
                else:
                    no_improve = 0
                best_loss = min(best_loss, loss)
            if no_improve >= self.n_iter_no_change:
                converged = True
                break
        if bar is not None:
            bar.close()
        if early and best_snap is not None:
            self._restore(best_snap)
            self.best_validation_score_ = best_score
        self._rng_state = gen.get_state()
        self._layout.load_into(self.module_, self.posterior_.mean_t)
        self._finalize()
        if not incremental and not converged and not self._diverged and not self._unstable:
            warnings.warn(
                f"{type(self).__name__}: maximum iterations ({n_epochs}) reached and the "
                "optimization hasn't converged yet.",
                ConvergenceWarning,
            )

    def _validation_split(self, X, y):
        from sklearn.model_selection import train_test_split

        stratify = y if getattr(self, "_is_classifier", False) else None
        seed = int(np.random.RandomState(self._predict_seed).randint(np.iinfo(np.int32).max))
        try:
            Xt, Xv, yt, yv = train_test_split(
                X, y, test_size=self.validation_fraction, random_state=seed, stratify=stratify
            )
        except ValueError:
            Xt, Xv, yt, yv = train_test_split(X, y, test_size=self.validation_fraction, random_state=seed)
        if Xv.shape[0] < 1 or Xt.shape[0] < 1:
            raise ValueError(
                f"early_stopping with validation_fraction={self.validation_fraction} leaves an empty "
                f"training or validation set for {X.shape[0]} samples."
            )
        self.validation_scores_ = []
        return Xt, yt, Xv, yv

    # --- fit / partial_fit -------------------------------------------------
    def _fit(self, X, y, incremental, classes=None):
        fitted = hasattr(self, "posterior_")
        reset = not (fitted and (incremental or self.warm_start))
        X, y = self._validate_X_y(X, y, reset=reset)
        self._check_params()
        self._prepare_targets(y, first=reset, classes=classes)
        y_enc = self._encode_targets(y)
        if reset:
            self._initialize(X, y_enc, check_random_state(self.random_state))
        n_epochs = 1 if incremental else int(self.max_iter)
        self._fit_loop(X, y_enc, n_epochs, incremental)
        return self

    # --- prediction ---------------------------------------------------------
    def _predict_outputs(self, X, n_samples=None, seed=None):
        """Validate ``X`` and return network outputs under posterior weight samples.

        The samples are drawn from a generator seeded at fit time, so a fitted
        model's predictions are deterministic, and the same samples serve every
        row, so a row's prediction never depends on the other rows.
        Returns a tensor ``(n_samples, n_rows, n_outputs)``.
        """
        check_is_fitted(self, "posterior_")
        X = self._validate_X(X, reset=False)
        return self._outputs(self._tensor(X), n_samples, seed)

    def _outputs(self, Xt, n_samples=None, seed=None):
        S = int(self.predict_samples if n_samples is None else n_samples)
        seed = self._predict_seed if seed is None else seed
        gen = torch.Generator(device=self._device).manual_seed(int(seed))
        spec = self._spec()
        outs = []
        with torch.no_grad():
            for s0 in range(0, S, 16):
                theta = self.posterior_.sample_t(min(16, S - s0), generator=gen)
                rows = []
                for r0 in range(0, Xt.shape[0], 2048):
                    Xr = Xt[r0 : r0 + 2048]
                    if spec is not None:
                        rows.append(spec.forward(theta, Xr))
                    else:
                        rows.append(
                            torch.stack(
                                [functional_call(self.module_, self._layout.unflatten(th), (Xr,)) for th in theta]
                            )
                        )
                outs.append(torch.cat(rows, 1))
        f = torch.cat(outs, 0)
        if not torch.isfinite(f).all():
            raise FloatingPointError(
                f"{type(self).__name__} produced non-finite network outputs; the fitted posterior is "
                "degenerate (lower learning_rate or standardise the inputs and refit)."
            )
        return f

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        return tags
