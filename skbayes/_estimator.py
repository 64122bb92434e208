"""The scikit-learn face shared by every network estimator: validation, target
encoding and scaling, initialisation, ``fit`` / ``partial_fit``, and prediction.

A public estimator is a thin subclass of :class:`BayesianNetworkRegressor` or
:class:`BayesianNetworkClassifier` that names its posterior family (``_family``)
and spells out its ``__init__`` signature (scikit-learn requires explicit keyword
arguments). Training itself runs in :mod:`skbayes._loop`.
"""

from __future__ import annotations

import copy
import math
import numbers
import warnings
from typing import TYPE_CHECKING

import numpy as np
import torch
from numpy.typing import ArrayLike
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.utils import check_array, check_consistent_length, check_random_state, column_or_1d
from sklearn.utils.multiclass import check_classification_targets, unique_labels
from sklearn.utils.validation import _check_sample_weight, check_is_fitted, validate_data
from torch import nn

if TYPE_CHECKING:
    from typing_extensions import Self

    RandomStateLike = int | np.random.RandomState | None

from . import _loop, _memory
from ._families.base import PosteriorFamily, kl_annealing_scale
from ._init import INITS, initial_moments, initial_precision
from ._likelihoods import Bernoulli, Categorical, Gaussian, GaussianNoise
from ._linalg import all_finite
from ._networks import ACTIVATIONS, NetworkForward, ParamLayout, build_mlp, make_module
from ._parallel import limit_torch_threads
from ._prior import WeightPrior
from ._validation import (
    BOOLEAN,
    CALLABLE,
    NONE,
    RANDOM_STATE,
    Check,
    Interval,
    Options,
    instance_of,
    merged_constraints,
    validate_params,
)
from .exceptions import InputScaleWarning, NonFiniteOutputError, PoorFitWarning, SmallStreamWarning
from .metrics import mixture_log_likelihood

_DTYPES = {"float32": torch.float32, "float64": torch.float64}

#: Column standard deviations outside this range trigger an ``InputScaleWarning``.
INPUT_SCALE = (1e-3, 1e3)


def _torch_dtype(dtype) -> torch.dtype:
    key = np.dtype(dtype).name if not isinstance(dtype, torch.dtype) else str(dtype).split(".")[-1]
    return _DTYPES[key]


def _is_supported_dtype(dtype) -> bool:
    try:
        _torch_dtype(dtype)
    except (KeyError, TypeError):
        return False
    return True


def _is_available_device(value) -> bool:
    if not isinstance(value, (str, torch.device)):
        return False
    device = torch.device(value)
    if device.type == "cuda":
        return torch.cuda.is_available() and (device.index is None or device.index < torch.cuda.device_count())
    if device.type == "mps":
        return torch.backends.mps.is_available()
    return device.type == "cpu"


def _is_layer_sizes(value) -> bool:
    if value is None or (isinstance(value, numbers.Integral) and not isinstance(value, bool)):
        value = () if value is None else (value,)
    return all(isinstance(h, numbers.Integral) and not isinstance(h, bool) and h >= 1 for h in tuple(value))


def _is_annealing(value) -> bool:
    return (
        isinstance(value, (tuple, list))
        and len(value) == 3
        and all(isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v) and v > 0 for v in value)
    )


def _is_gamma_prior(value) -> bool:
    return (
        isinstance(value, (tuple, list))
        and len(value) == 2
        and all(isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v) and v > 0 for v in value)
    )


def store_init_params(params):
    """Store an ``__init__``'s arguments (its ``locals()``) as attributes, unchanged, as
    scikit-learn requires of estimator constructors."""
    params = dict(params)
    self = params.pop("self")
    params.pop("__class__", None)
    for k, v in params.items():
        setattr(self, k, v)


_POSITIVE_INT = [Interval(numbers.Integral, 1, None, closed="left")]


class BayesianNetwork(BaseEstimator):
    """Machinery shared by every skbayes network estimator (not public)."""

    #: The posterior family (set by each public estimator).
    _family: type[PosteriorFamily] = PosteriorFamily
    #: The minibatch size of ``batch_size='auto'`` (capped at ``n_samples``).
    _auto_batch_size: int = 64
    #: Class attributes passed to the family as fixed parameters (e.g. VOGN's ``rank``).
    _fixed_params: tuple[str, ...] = ()

    _parameter_constraints: dict = {
        "hidden_layer_sizes": [Check(_is_layer_sizes, "a tuple of positive ints")],
        "activation": [Options(tuple(ACTIVATIONS))],
        "module": [NONE, instance_of(nn.Module, "a torch.nn.Module"), CALLABLE],
        "max_iter": [Interval(numbers.Integral, 0, None, closed="left")],
        "batch_size": [Options(("auto",)), Interval(numbers.Integral, 1, None, closed="left")],
        "mc_samples": _POSITIVE_INT,
        "predict_samples": _POSITIVE_INT,
        "init": [Options(INITS)],
        "iblm_batch_size": _POSITIVE_INT,
        "kl_annealing": [NONE, Check(_is_annealing, "a tuple (gamma, a, b) of positive numbers")],
        "warm_start": [BOOLEAN],
        "early_stopping": [BOOLEAN],
        "validation_fraction": [Interval(numbers.Real, 0, 1, closed="neither")],
        "n_iter_no_change": _POSITIVE_INT,
        "tol": [Interval(numbers.Real, 0, None, closed="left")],
        "random_state": [RANDOM_STATE],
        "device": [
            Check(_is_available_device, "a torch device available on this machine ('cpu', or 'cuda' with a GPU)")
        ],
        "dtype": [Check(_is_supported_dtype, "'float32' or 'float64'")],
        "verbose": [BOOLEAN, Interval(numbers.Integral, 0, None, closed="left")],
    }

    # --- validation ---------------------------------------------------------------
    @classmethod
    def _constraints(cls) -> dict:
        """The constraints table merged along the class hierarchy, then the family's."""
        tables = [
            k.__dict__["_parameter_constraints"]
            for k in reversed(cls.__mro__)
            if "_parameter_constraints" in k.__dict__
        ]
        return merged_constraints(*tables, cls._family.parameter_constraints)

    def _validate_params(self) -> None:
        validate_params(type(self).__name__, self.get_params(deep=False), self._constraints())

    def _make_family(self) -> PosteriorFamily:
        params = self.get_params(deep=False)
        params.update({k: getattr(self, k) for k in self._fixed_params})
        return self._family(params)

    def _hidden_layer_sizes(self) -> tuple[int, ...]:
        hls = self.hidden_layer_sizes
        if hls is None:
            return ()
        if isinstance(hls, numbers.Integral):
            return (int(hls),)
        return tuple(int(h) for h in hls)

    def _validate_X(self, X, reset):
        return validate_data(self, X, reset=reset, dtype=[np.float64, np.float32])

    # --- helpers ---------------------------------------------------------------------
    def _tensor(self, a, dtype=None):
        a = np.ascontiguousarray(a)
        if not a.flags.writeable:  # torch must not share (and could not write) read-only user memory
            a = a.copy()
        return torch.as_tensor(a, dtype=dtype or self._dtype, device=self._device)

    # A fitted model computes on the device and in the dtype it was initialised with,
    # whatever ``set_params`` did since (continuing fits included); a new fit from
    # scratch takes the current parameters.
    @property
    def _dtype(self):
        return self.__dict__.get("_fitted_dtype") or _torch_dtype(self.dtype)

    @property
    def _device(self):
        return self.__dict__.get("_fitted_device") or torch.device(self.device)

    def _batch_size(self, n):
        bs = min(self._auto_batch_size, n) if self.batch_size == "auto" else min(int(self.batch_size), n)
        return max(bs, 1)

    # --- initialisation -----------------------------------------------------------------
    def _effective_weights(self, sample_weight, n_rows):
        """``(weights, n_train)`` for training: the sample weights rescaled to mean one (a
        tensor) and their sum, the effective number of examples; ``(None, n_rows)``
        without sample weights."""
        if sample_weight is None:
            return None, n_rows
        total = float(np.sum(sample_weight, dtype=np.float64))
        return self._tensor(sample_weight * (n_rows / total)), total

    def _initialize(self, X, y_enc, family, rng, sample_weight=None):
        self._fitted_dtype, self._fitted_device = _torch_dtype(self.dtype), torch.device(self.device)
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
                    net = build_mlp(X.shape[1], self._hidden_layer_sizes(), n_out, self.activation)
                else:
                    net = make_module(self.module, X.shape[1], n_out)
            finally:
                torch.set_default_dtype(prev_dtype)
        net = net.to(device=self._device, dtype=self._dtype)
        if self.module is not None:
            self._check_module_widths(net, X, n_out)
        self.module_ = net
        self._forward = NetworkForward(net, ParamLayout(net), X.shape[1])
        gen = torch.Generator(device=self._device).manual_seed(int(rng.randint(np.iinfo(np.int32).max)))
        Xt, yt = self._tensor(X), self._target_tensor(y_enc)
        self._prior = WeightPrior(
            family.prior_groups(self._forward),
            self._forward.layout.size,
            family.prior_precision,
            dtype=self._dtype,
            device=self._device,
        )
        lam = self._prior.values[0] if self._prior.values else 1.0  # the starting precision of every group
        weights, n_train = self._effective_weights(sample_weight, X.shape[0])
        B = int(self.iblm_batch_size)
        if weights is not None:
            # i-BLM's regressions on min(B, n_rows) rows stand for min(B, n_train) examples
            weights = weights * (min(B, n_train) / min(B, X.shape[0]))
        with torch.no_grad():
            mean, var, noise_variance = initial_moments(
                self.init,
                self._forward,
                Xt,
                yt,
                gen,
                lam,
                batch_size=int(self.iblm_batch_size),
                n_classes=self._n_classes(),
                centre_hidden=self.module is None and self.activation in ("tanh", "identity", "logistic", "sigmoid"),
                **({} if weights is None else {"weights": weights}),
            )
            precision = initial_precision(var, lam, n_train, self.init, self.iblm_batch_size)
            self._forward.layout.load_into(net, mean)
            self.posterior_, self._state = family.init_posterior(
                mean,
                precision,
                n_train,
                self._forward,
                kl_annealing_scale(self.kl_annealing, 0),
                self._prior.value(),
            )
        if noise_variance is not None:
            self._likelihood.start_from(noise_variance, min(B, n_train))
        self.t_ = 0
        self.n_iter_ = 0
        self.loss_curve_ = []
        self._predict_seed = int(rng.randint(np.iinfo(np.int32).max))
        self._rng_state = (
            torch.Generator(device=self._device).manual_seed(int(rng.randint(np.iinfo(np.int32).max))).get_state()
        )  # a device generator's state (CUDA states differ in size from CPU ones)

    def _check_module_widths(self, net, X, n_out):
        """A custom module must map rows of ``n_features_in_`` inputs to ``n_out`` outputs."""
        probe = copy.deepcopy(net).eval()  # a forward pass may touch buffers (batch-norm statistics)
        try:
            with torch.no_grad():
                out = probe(self._tensor(X[:2]))
        except RuntimeError as exc:
            raise ValueError(
                f"{type(self).__name__}: module fails on rows of {X.shape[1]} features "
                "(n_features_in_); see the chained exception for its error."
            ) from exc
        if not isinstance(out, torch.Tensor) or out.dim() != 2 or out.shape != (min(2, X.shape[0]), n_out):
            shape = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
            what = "1 output" if n_out == 1 else f"{n_out} outputs"
            raise ValueError(
                f"{type(self).__name__}: module must map (n_rows, {X.shape[1]}) inputs to (n_rows, {n_out}) "
                f"outputs ({what}: 1 for regression and for two classes, one per class otherwise); "
                f"it returned shape {shape}."
            )

    # --- fit / partial_fit ------------------------------------------------------------
    def _fitted_state(self, deep):
        """Everything in the instance that is not a constructor parameter (deep copies
        when the coming fit continues from, and so mutates, the current state)."""
        params = self.get_params(deep=False)
        state = {k: v for k, v in self.__dict__.items() if k not in params}
        return copy.deepcopy(state) if deep else state

    def _restore_fitted_state(self, state):
        params = self.get_params(deep=False)
        for k in [k for k in self.__dict__ if k not in params]:
            del self.__dict__[k]
        self.__dict__.update(state)

    def _fit(self, X, y, incremental, classes=None, sample_weight=None, n_samples_total=None):
        """Transactional fit: the previous fitted state is restored, exactly, when
        anything raises before the fit completes (invalid ``sample_weight`` included);
        a ``KeyboardInterrupt`` after at least one completed epoch keeps the end of the
        last completed epoch."""
        self._validate_params()
        fitted = hasattr(self, "posterior_")
        reset = not (fitted and (incremental or self.warm_start))
        saved = self._fitted_state(deep=not reset)
        try:
            with limit_torch_threads():
                interrupted = self._fit_unguarded(X, y, incremental, reset, classes, sample_weight, n_samples_total)
        except BaseException:
            self._restore_fitted_state(saved)
            raise
        if interrupted:
            warnings.warn(
                f"{type(self).__name__}.fit was interrupted; the model is left at the end of "
                f"its last completed epoch (n_iter_={self.n_iter_}).",
                UserWarning,
                stacklevel=3,
            )
            raise KeyboardInterrupt
        return self

    def _fit_unguarded(self, X, y, incremental, reset, classes, sample_weight=None, n_samples_total=None):
        n_iter_before = getattr(self, "n_iter_", 0) if not reset else 0
        X, y = self._validate_X_y(X, y, reset=reset)
        sw = None
        if sample_weight is not None:
            X, y, sw = self._check_sample_weight(sample_weight, X, y)
        if incremental:
            n_total = self._stream_total(n_samples_total)
            X, y, sw, reset, classes = self._stream_start(X, y, sw, reset, classes)
        if reset:
            self._warn_input_scale(X)
        self._prepare_targets(y, first=reset, classes=classes, sample_weight=sw)
        y_enc = self._encode_targets(y)
        family = self._make_family()
        self._check_fit_memory(X, family, continuing=not reset, incremental=incremental)
        if reset:
            self._initialize(X, y_enc, family, check_random_state(self.random_state), sw)
        validation = None
        if self.early_stopping and not incremental:
            if sw is None:
                X, y_enc, Xv, yv = self._validation_split(X, y_enc)
                Xv_t = self._tensor(Xv)
                validation = lambda: self._validation_score(Xv_t, yv)  # noqa: E731
            else:
                X, y_enc, sw, Xv, yv, swv = self._validation_split(X, y_enc, sw)
                Xv_t = self._tensor(Xv)
                validation = lambda: self._validation_score(Xv_t, yv, swv)  # noqa: E731
        n_epochs = 1 if incremental else int(self.max_iter)
        weights, n_train = (None, None) if sw is None else self._effective_weights(sw, X.shape[0])
        n_seen = float(X.shape[0] if sw is None else n_train)
        if reset:
            self._n_seen = 0.0
        self._n_seen = self.__dict__.get("_n_seen", 0.0) + n_seen if incremental else n_seen
        stream_size = None
        if incremental:  # partial_fit: the batch stands for the stream's rows, not for itself
            stream_size = self._n_seen if n_total is None else n_total
            family.set_stream_size(self._state, stream_size)
        outcome = _loop.run_epochs(
            self,
            family,
            self._tensor(X),
            self._target_tensor(y_enc),
            n_epochs,
            incremental,
            validation,
            weights=weights,
            n_train=n_train,
            n_total=stream_size,
        )
        if outcome.interrupted and self.n_iter_ == (0 if reset else n_iter_before):
            raise KeyboardInterrupt  # no epoch completed: roll back to the previous state
        if incremental and reset and n_iter_before:
            self.n_iter_ = n_iter_before + 1  # a restarted stream start counts its calls
        if incremental:
            self._warn_small_stream()
        self.diverged_ = outcome.diverged
        self.prior_precision_ = self._prior.as_dict()
        self._forward.layout.load_into(self.module_, self.posterior_.mean_t)
        self._finalize()
        if not incremental and not outcome.interrupted and self.n_iter_ > 0:
            self._warn_poor_fit(X, y_enc, family)
        return outcome.interrupted

    # --- memory ----------------------------------------------------------------------
    def _memory_layers(self, n_features, n_outputs):
        """The network's layers for the memory estimate, without building it (custom
        modules: the fitted one, the instance, or the callable's module built on the
        'meta' device, which allocates nothing); None when they cannot be known."""
        if self.module is None:
            return _memory.mlp_layers(n_features, self._hidden_layer_sizes(), n_outputs)
        net = self.__dict__.get("module_")
        if net is None and isinstance(self.module, nn.Module):
            net = self.module
        if net is None:
            try:
                with torch.device("meta"):
                    net = make_module(self.module, n_features, n_outputs)
            except Exception:  # a module that cannot be built on 'meta': checked when built
                return None
        return _memory.module_layers(net) or None

    def _fit_memory_parts(self, X, family, continuing=False, incremental=False):
        """The memory estimate of a fit on ``X`` (a list of ``MemoryPart``; empty when the
        network's layers cannot be known before it is built).

        The posterior and the state the family keeps are counted with their copies: the
        snapshot at the start of every epoch (two while the next replaces it), the best
        epoch's (``fit``'s guard against a rising objective, early stopping) and the
        previous state a continuing fit keeps until it completes.
        """
        n_out = self._make_likelihood().n_outputs
        layers = self._memory_layers(X.shape[1], n_out)
        if layers is None:
            return []
        itemsize = (self._dtype if continuing else _torch_dtype(self.dtype)).itemsize  # a fitted model keeps it
        parts = family.memory_parts(
            layers, self._batch_size(X.shape[0]), int(self.mc_samples), itemsize, dense=self.module is None
        )
        copies = 1 + int(continuing) + (0 if incremental else 2 + int(bool(self.early_stopping)))
        for p in parts[:-1]:  # all but the step: the posterior and its state
            p.nbytes *= 1 + copies * p.copied
            p.what += f" (with {copies} snapshot copies)"
        parts.append(
            _memory.MemoryPart(2 * X.shape[0] * X.shape[1] * itemsize, "the training data as tensors", "fewer rows")
        )
        return parts

    def _check_fit_memory(self, X, family, continuing=False, incremental=False):
        """Refuse with ``MemoryLimitError`` before anything is allocated when the fit's
        estimated memory is above the limit (``skbayes.linear_model.MEMORY_LIMIT_GIB``)."""
        parts = self._fit_memory_parts(X, family, continuing, incremental)
        _memory.check_memory(parts, f"{type(self).__name__}.{'partial_fit' if incremental else 'fit'}")

    # --- streams (partial_fit) ------------------------------------------------------
    def _stream_total(self, n_samples_total):
        """The ``n_samples_total`` of this ``partial_fit`` call, else of the last call that
        passed one, else None (the running count of the rows seen)."""
        if n_samples_total is None:
            return self.__dict__.get("_n_samples_total")
        if (
            isinstance(n_samples_total, bool)
            or not isinstance(n_samples_total, numbers.Real)
            or not math.isfinite(n_samples_total)
            or n_samples_total <= 0
        ):
            raise ValueError(
                f"n_samples_total must be a positive number (the size of the whole data set the "
                f"stream is drawn from) or None; got {n_samples_total!r}."
            )
        self._n_samples_total = float(n_samples_total)
        return self._n_samples_total

    def _stream_start(self, X, y, sw, reset, classes):
        """The rows a ``partial_fit`` call trains on, and whether it (re)initialises.

        Until ``iblm_batch_size`` rows have been seen, the target scaling and the start
        are set from too few rows to be trusted: the stream's first rows are kept, and
        every call re-initialises from all of them (the result is that of one
        ``partial_fit`` on the rows so far). Returns ``(X, y, sample_weight, reset, classes)``.
        """
        buf = None if reset else self.__dict__.get("_stream_rows")
        if buf is not None:
            Xb, yb, wb = buf
            if sw is not None or wb is not None:
                wb = np.ones(Xb.shape[0]) if wb is None else wb
                sw = np.concatenate([wb, np.ones(X.shape[0]) if sw is None else sw])
            X = np.concatenate([Xb, X.astype(Xb.dtype, copy=False)])
            y = np.concatenate([yb, np.asarray(y)])
            reset = True
            if classes is None and hasattr(self, "classes_"):
                classes = self.classes_
        if reset:
            keep = X.shape[0] < int(self.iblm_batch_size)
            self._stream_rows = (X.copy(), np.array(y), None if sw is None else sw.copy()) if keep else None
        return X, y, sw, reset, classes

    def _warn_small_stream(self):
        if self.__dict__.get("_stream_rows") is None:
            return
        warnings.warn(
            f"{type(self).__name__}.partial_fit has seen fewer rows than the "
            f"iblm_batch_size={self.iblm_batch_size} it needs to set the target scaling and the start: "
            "they are re-estimated from all rows seen so far at each call until then, and a model "
            "fitted on so few rows is not to be trusted.",
            SmallStreamWarning,
            stacklevel=5,  # the caller of partial_fit
        )

    def _check_sample_weight(self, sample_weight, X, y):
        """Validated sample weights (a new float64 array when anything is dropped or
        converted; the caller's array is never written to) and the rows with a positive
        weight: ``(X, y, sample_weight)``. A row of weight zero has no influence on the
        objective, so it is dropped before anything else looks at the data."""
        sw = _check_sample_weight(sample_weight, X, dtype=np.float64, ensure_non_negative=True)
        keep = sw > 0
        if not keep.all():
            X, y, sw = X[keep], np.asarray(y)[keep], sw[keep]
        return X, y, sw

    def _warn_input_scale(self, X):
        with np.errstate(over="ignore", invalid="ignore"):
            std = np.std(X, axis=0, dtype=np.float64)
        std = std[std > 0]
        if std.size and (std.min() < INPUT_SCALE[0] or std.max() > INPUT_SCALE[1]):
            warnings.warn(
                f"{type(self).__name__}: the standard deviations of the input columns range from "
                f"{std.min():.3g} to {std.max():.3g}. The network's priors and initialisation assume "
                "features of roughly unit scale, and fits on inputs this far from it can fail; "
                "standardise them (a StandardScaler in a Pipeline).",
                InputScaleWarning,
                stacklevel=4,
            )

    def _warn_poor_fit(self, X, y_enc, family):
        """Warn when the fitted predictive scores the training data (a fixed subsample)
        clearly worse than the best constant prediction does."""
        n = min(X.shape[0], 1000)
        rows = np.linspace(0, X.shape[0] - 1, n).astype(np.int64)
        f = self._outputs(self._tensor(X[rows]), n_samples=min(int(self.predict_samples), 8))
        worse, fit_score, const_score = self._training_fit_vs_constant(f, np.asarray(y_enc)[rows])
        if worse:
            warnings.warn(
                f"{type(self).__name__}: the fitted model predicts its own training data worse than a "
                f"constant does ({fit_score:.4g} against {const_score:.4g}). The fit has likely gone "
                f"wrong: the step sizes may be too large ({family.step_sizes()}) or the inputs badly "
                "scaled (standardise them).",
                PoorFitWarning,
                stacklevel=4,
            )

    def _validation_split(self, X, y, sample_weight=None):
        """Hold out ``validation_fraction`` of the rows: ``(X, y, Xv, yv)``, or with
        sample weights ``(X, y, w, Xv, yv, wv)`` (the weights split with their rows)."""
        from sklearn.model_selection import train_test_split

        stratify = y if is_classifier_face(self) else None
        seed = int(np.random.RandomState(self._predict_seed).randint(np.iinfo(np.int32).max))
        n = X.shape[0]
        n_val = math.ceil(float(self.validation_fraction) * n)
        if n_val < 1 or n - n_val < 1:
            raise ValueError(
                f"early_stopping with validation_fraction={self.validation_fraction} leaves an empty "
                f"training or validation set for {n} samples."
            )
        arrays = (X, y) if sample_weight is None else (X, y, sample_weight)
        try:
            parts = train_test_split(
                *arrays, test_size=float(self.validation_fraction), random_state=seed, stratify=stratify
            )
        except ValueError:
            parts = train_test_split(*arrays, test_size=float(self.validation_fraction), random_state=seed)
        self.validation_scores_ = []
        return tuple(parts[0::2]) + tuple(parts[1::2])

    def _finalize(self):
        """Fitted attributes derived from the trained state (hook of the faces)."""

    # --- prediction ---------------------------------------------------------------------
    def _predict_outputs(self, X, n_samples=None, seed=None):
        """Validate ``X`` and return network outputs ``(n_samples, n_rows, n_outputs)`` (a
        tensor) under posterior weight samples.

        The samples are drawn from a generator seeded at fit time, so a fitted
        model's predictions are deterministic, and the same samples serve every
        row, so a row's prediction never depends on the other rows.
        """
        check_is_fitted(self, "posterior_")
        X = self._validate_X(X, reset=False)
        with limit_torch_threads():
            return self._outputs(self._tensor(X), n_samples, seed)

    def _chunk_rows(self, n_samples=None):
        """Rows per prediction chunk: their network outputs under ``n_samples`` weight samples
        (and the widest layer's activations) fit in ``skbayes._memory.PREDICT_CHUNK_BYTES``.
        A multiple of the 2048 rows ``_outputs`` evaluates at once when it is larger."""
        S = int(self.predict_samples if n_samples is None else n_samples)
        layers = _memory.module_layers(self.module_) or [_memory.Layer(1, 1)]
        widest = max(max(l.fan_in, l.fan_out) * l.positions for l in layers)
        rows = _memory.row_chunk(S, self._likelihood.n_outputs, self._dtype.itemsize, widest)
        return rows - rows % 2048 if rows >= 2048 else rows

    def _predict_rows(self, X, reduce, n_samples=None, seed=None):
        """Validate ``X`` and apply ``reduce`` to the network outputs ``(S, rows, n_outputs)`` of
        one chunk of rows at a time (:meth:`_chunk_rows`): memory independent of the number
        of rows. ``reduce`` returns a tuple of per-row results (rows first); the chunks'
        results are concatenated on the CPU. Every chunk draws the same weight samples, so
        the result equals that of one chunk."""
        check_is_fitted(self, "posterior_")
        X = self._validate_X(X, reset=False)
        rows = self._chunk_rows(n_samples)
        parts = []
        with limit_torch_threads():
            for r0 in range(0, X.shape[0], rows):
                out = reduce(self._outputs(self._tensor(X[r0 : r0 + rows]), n_samples, seed))
                parts.append(tuple(o.cpu() if isinstance(o, torch.Tensor) else o for o in out))
        return tuple(
            torch.cat(col, 0) if isinstance(col[0], torch.Tensor) else np.concatenate(col, 0) for col in zip(*parts)
        )

    def _outputs(self, Xt, n_samples=None, seed=None):
        S = int(self.predict_samples if n_samples is None else n_samples)
        seed = self._predict_seed if seed is None else seed
        gen = torch.Generator(device=self._device).manual_seed(int(seed))
        outs = []
        with torch.no_grad():
            for s0 in range(0, S, 16):
                theta = self.posterior_.sample_t(min(16, S - s0), generator=gen)
                rows = [self._forward(theta, Xt[r0 : r0 + 2048]) for r0 in range(0, Xt.shape[0], 2048)]
                outs.append(torch.cat(rows, 1))
        f = torch.cat(outs, 0)
        self._check_finite("network outputs", f)
        return f

    def _check_finite(self, what, *values):
        """Raise :class:`NonFiniteOutputError` unless every value (tensors or arrays) is finite."""
        for v in values:
            ok = all_finite(v) if isinstance(v, torch.Tensor) else bool(np.isfinite(v).all())
            if not ok:
                raise NonFiniteOutputError(
                    f"{type(self).__name__} produced non-finite {what} for some of the inputs: they "
                    "are likely far outside the range of the training data (or the fitted posterior "
                    "is degenerate; check diverged_). Scale the inputs as at fit time, e.g. with a "
                    "StandardScaler in a Pipeline."
                )

    def _sample_seed(self, random_state):
        if random_state is None:
            return None
        return int(check_random_state(random_state).randint(np.iinfo(np.int32).max))

    def sample_outputs(
        self, X: ArrayLike, n_samples: int | None = None, random_state: RandomStateLike = None
    ) -> np.ndarray:
        """Network outputs under posterior weight samples.

        Every statistic of the predictive distribution can be computed from these
        draws (the prediction methods average them).

        Parameters
        ----------
        X : array-like of shape (n_rows, n_features)
            Inputs.
        n_samples : int, default=None
            Number of weight samples; None uses ``predict_samples``.
        random_state : int, RandomState instance or None, default=None
            Seeds the weight samples. None gives the samples the prediction
            methods use (fixed at fit time), so the result is deterministic.

        Returns
        -------
        outputs : ndarray of shape (n_samples, n_rows, n_outputs)
            Regressors: the network's mean function in the units of ``y``
            (``n_outputs = 1``, without observation noise). Classifiers: the
            logits (one column for two classes, the log-odds of ``classes_[1]``).
        """
        if n_samples is not None:
            validate_params(type(self).__name__, {"n_samples": n_samples}, {"n_samples": _POSITIVE_INT})
        f = self._predict_outputs(X, n_samples=n_samples, seed=self._sample_seed(random_state))
        out = self._output_units(f.cpu().numpy().astype(np.float64))
        self._check_finite("network outputs (in the units of y)", out)
        return out

    def _output_units(self, f):
        return f


def _weighted_mean(values, weights) -> float:
    """``sum_i w_i v_i / sum_i w_i`` of a tensor ``values`` and numpy ``weights`` (as
    ``values.mean()`` computes it when every weight is 1)."""
    w = torch.as_tensor(np.asarray(weights), dtype=values.dtype, device=values.device)
    return float((values * w).sum() / w.sum())


def is_classifier_face(est) -> bool:
    return isinstance(est, BayesianNetworkClassifier)


class BayesianNetworkRegressor(RegressorMixin, BayesianNetwork):
    """Gaussian-likelihood regression on standardised targets (not public)."""

    _parameter_constraints = {
        "noise_precision": [Options(("auto",)), Interval(numbers.Real, 0, None, closed="neither")],
        "noise_prior": [Check(_is_gamma_prior, "a tuple (shape, rate) of two positive numbers")],
    }

    def _validate_X_y(self, X, y, reset):
        return validate_data(self, X, y, reset=reset, dtype=[np.float64, np.float32], y_numeric=True)

    def _n_classes(self):
        return None

    def _prepare_targets(self, y, first, classes=None, sample_weight=None):
        if not first:
            return
        y = np.asarray(y, dtype=np.float64)
        if sample_weight is None:
            self._y_mean = float(y.mean())
            std = float(y.std())
        else:  # the weighted moments: those of the data with rows repeated by integer weights
            self._y_mean = float(np.average(y, weights=sample_weight))
            std = float(np.sqrt(np.average((y - self._y_mean) ** 2, weights=sample_weight)))
        self._y_std = std if std > 0 and np.isfinite(std) else 1.0

    def _make_likelihood(self):
        tau = self.noise_precision
        if tau == "auto":
            a0, b0 = (float(v) for v in self.noise_prior)
            return Gaussian(GaussianNoise(learn=True, a0=a0, b0=b0))
        return Gaussian(GaussianNoise(tau=float(tau) * self._y_std**2, learn=False))

    def _encode_targets(self, y):
        return (np.asarray(y, dtype=np.float64) - self._y_mean) / self._y_std

    def _target_tensor(self, y):
        return self._tensor(y)

    def _finalize(self):
        noise = self._likelihood.noise
        self.noise_precision_ = noise.tau_mean / self._y_std**2
        self.noise_std_ = math.sqrt(noise.noise_variance) * self._y_std

    def _validation_score(self, Xv, yv, wv=None):
        f = self._outputs(Xv, n_samples=min(int(self.predict_samples), 16))[..., 0]
        y = self._tensor(yv)
        var = self._likelihood.noise.noise_variance
        logp = -0.5 * (y[None] - f) ** 2 / var - 0.5 * math.log(2 * math.pi * var)
        lp = torch.logsumexp(logp, 0) - math.log(f.shape[0])
        return float(lp.mean()) if wv is None else _weighted_mean(lp, wv)

    def _output_units(self, f):
        return self._y_mean + self._y_std * f

    def _training_fit_vs_constant(self, f, y):
        """Mean squared error of the predictive mean on (standardised) training targets
        against that of their mean; 'worse' beyond twice the constant's."""
        mean = f[..., 0].double().mean(0).cpu().numpy()
        mse, const = float(np.mean((mean - y) ** 2)), float(np.var(y))
        return mse > 2.0 * const + 1e-12, mse, const

    # --- public API ---------------------------------------------------------------------
    def fit(self, X: ArrayLike, y: ArrayLike, sample_weight: ArrayLike | None = None) -> Self:
        """Fit the variational posterior to data.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training inputs.
        y : array-like of shape (n_samples,)
            Real-valued targets.
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weight of each row's log-likelihood term: the ELBO's data
            term becomes ``sum_i w_i E_q[log p(y_i | x_i, theta)]``, and the
            curvature statistics and the noise-precision update are weighted alike. An integer
            weight acts as that many copies of the row; multiplying every weight
            by ``c`` acts as ``c`` times the data (the prior counts for less), not
            as an invariance. Rows of weight zero are dropped. None gives every row
            weight 1. See the :ref:`sample weights section <sample-weights-section>` of the
            documentation.

        Returns
        -------
        self : object
            Fitted estimator.
        """
        return self._fit(X, y, incremental=False, sample_weight=sample_weight)

    def partial_fit(
        self,
        X: ArrayLike,
        y: ArrayLike,
        sample_weight: ArrayLike | None = None,
        n_samples_total: float | None = None,
    ) -> Self:
        """Run one epoch over ``(X, y)``, continuing from the current posterior.

        The first call initialises the model. Until ``iblm_batch_size`` rows have
        been seen, every call re-initialises it from all the rows so far (target
        scaling and start), with a ``SmallStreamWarning``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training inputs.
        y : array-like of shape (n_samples,)
            Real-valued targets.
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weight of each row's log-likelihood term: the ELBO's data
            term becomes ``sum_i w_i E_q[log p(y_i | x_i, theta)]``, and the
            curvature statistics and the noise-precision update are weighted alike. An integer
            weight acts as that many copies of the row; multiplying every weight
            by ``c`` acts as ``c`` times the data (the prior counts for less), not
            as an invariance. Rows of weight zero are dropped. None gives every row
            weight 1. See the :ref:`sample weights section <sample-weights-section>` of the
            documentation. The weights count within the call: its
            data term is scaled to the sum of its weights.
        n_samples_total : int, default=None
            Size of the whole data set the stream is drawn from: every batch's data
            term is scaled to it, so the prior counts against the whole data set (pass
            it when running several epochs by ``partial_fit`` over the same data).
            None: the running count of the rows seen by ``partial_fit`` so far (this
            call's included; with sample weights, the sum of the weights), so that
            after a single pass the posterior is weighed against all the data seen.
            Remembered for later calls that do not pass it. See the
            :ref:`streams section <streams-section>` of the documentation.

        Returns
        -------
        self : object
            Fitted estimator.
        """
        return self._fit(X, y, incremental=True, sample_weight=sample_weight, n_samples_total=n_samples_total)

    def _moments(self, X):
        noise_variance = self._likelihood.noise.noise_variance

        def moments(f):
            f = f[..., 0].double()  # float64 moments: no overflow of a float32 variance
            return f.mean(0), f.var(0, unbiased=False) + noise_variance

        return self._predict_rows(X, moments)

    def predict(self, X: ArrayLike, return_std: bool = False) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
        """Posterior predictive mean (and standard deviation).

        The mean averages the network output over ``predict_samples`` weight
        samples; the standard deviation combines the spread of those outputs
        (epistemic) with the learned noise (aleatoric):
        ``std^2 = Var_q[f(x)] + E_q[1 / tau]``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Inputs.
        return_std : bool, default=False
            Also return the predictive standard deviation.

        Returns
        -------
        y_mean : ndarray of shape (n_samples,)
            Predictive mean.
        y_std : ndarray of shape (n_samples,)
            Predictive standard deviation (only if ``return_std`` is True).
        """
        mean, var = self._moments(X)
        y_mean = (self._y_mean + self._y_std * mean).cpu().numpy().astype(np.float64)
        self._check_finite("predictive means", y_mean)
        if not return_std:
            return y_mean
        y_std = (self._y_std * torch.sqrt(var)).cpu().numpy().astype(np.float64)
        self._check_finite("predictive standard deviations", y_std)
        return y_mean, y_std

    def predict_std(self, X: ArrayLike) -> np.ndarray:
        """Posterior predictive standard deviation.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Inputs.

        Returns
        -------
        y_std : ndarray of shape (n_samples,)
            ``predict(X, return_std=True)[1]``.
        """
        return self.predict(X, return_std=True)[1]

    def log_likelihood(self, X: ArrayLike, y: ArrayLike, n_samples: int | None = None) -> float:
        """Mean per-point log-likelihood of ``y`` under the posterior predictive.

        The predictive density of a point is the mixture over posterior weight
        samples with the learned noise, ``(1/S) sum_s N(y | f_s(x), noise_std_^2)``,
        as the papers evaluate it (a log-mean-exp per point, averaged over points;
        in the units of ``y``, so the number compares with published tables).

        Parameters
        ----------
        X : array-like of shape (n_rows, n_features)
            Inputs.
        y : array-like of shape (n_rows,)
            Observed targets.
        n_samples : int, default=None
            Weight samples ``S``; None uses ``predict_samples``.

        Returns
        -------
        log_likelihood : float
            Mean over the rows of the log predictive density (higher is better).
        """
        if n_samples is not None:
            validate_params(type(self).__name__, {"n_samples": n_samples}, {"n_samples": _POSITIVE_INT})
        check_is_fitted(self, "posterior_")
        X = self._validate_X(X, reset=False)
        y = column_or_1d(check_array(y, ensure_2d=False, dtype=np.float64), warn=True)
        check_consistent_length(X, y)
        noise_std = self.noise_std_
        rows = iter(range(0, len(y), self._chunk_rows(n_samples)))

        def chunk_log_likelihood(f):  # the mean log predictive density of one chunk's rows
            r0 = next(rows)
            f = self._output_units(f[..., 0].cpu().numpy().astype(np.float64))
            self._check_finite("network outputs (in the units of y)", f)
            return np.array([mixture_log_likelihood(y[r0 : r0 + f.shape[1]], f, noise_std)]), np.array([f.shape[1]])

        means, counts = self._predict_rows(X, chunk_log_likelihood, n_samples=n_samples)
        return float(means[0]) if len(means) == 1 else float(np.dot(means, counts) / np.sum(counts))

    def sample_y(self, X: ArrayLike, n_samples: int = 1, random_state: RandomStateLike = 0) -> np.ndarray:
        """Draw targets from the posterior predictive distribution.

        Each draw takes a weight sample from the posterior, a noise precision
        from its posterior (or the fixed one) and Gaussian noise.

        Parameters
        ----------
        X : array-like of shape (n_samples_X, n_features)
            Inputs.
        n_samples : int, default=1
            Number of draws per input.
        random_state : int, RandomState instance or None, default=0
            Seeds the draws (as in ``GaussianProcessRegressor.sample_y``).

        Returns
        -------
        y_samples : ndarray of shape (n_samples_X, n_samples)
            Draws, one column per sample.
        """
        rng = check_random_state(random_state)
        seed = int(rng.randint(np.iinfo(np.int32).max))
        f = self._predict_outputs(X, n_samples=int(n_samples), seed=seed)[..., 0].cpu().numpy().astype(np.float64)
        noise = self._likelihood.noise
        if noise.learn:
            tau = rng.gamma(noise.a, 1.0 / noise.b, size=(f.shape[0], 1))
        else:
            tau = np.full((f.shape[0], 1), noise.tau)
        eps = rng.standard_normal(f.shape)
        y = (self._y_mean + self._y_std * (f + eps / np.sqrt(tau))).T
        self._check_finite("predictive samples", y)
        return y

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.single_output = True
        tags.target_tags.multi_output = False
        return tags


class BayesianNetworkClassifier(ClassifierMixin, BayesianNetwork):
    """Bernoulli (two classes, one logit) or categorical (softmax) classification (not public)."""

    def _validate_X_y(self, X, y, reset):
        X, y = validate_data(self, X, y, reset=reset, dtype=[np.float64, np.float32])
        try:
            check_classification_targets(y)
        except TypeError as exc:  # np.unique cannot sort mixed label types
            kinds = sorted({type(v).__name__ for v in np.ravel(y)})
            raise ValueError(
                f"y mixes labels of different types ({', '.join(kinds)}), which cannot be ordered into "
                "classes_; use labels of one type."
            ) from exc
        return X, y

    def _n_classes(self):
        return len(self.classes_)

    def _prepare_targets(self, y, first, classes=None, sample_weight=None):
        if first:
            labels = unique_labels(y) if classes is None else unique_labels(np.asarray(classes))
            if len(labels) < 2:
                where = "the data" if sample_weight is None else "the rows with a positive sample_weight"
                raise ValueError(
                    f"{type(self).__name__} needs samples of at least 2 classes in {where}; got 1 class: {labels[0]!r}."
                )
            self.classes_ = labels
        else:
            if classes is not None and not np.array_equal(unique_labels(np.asarray(classes)), self.classes_):
                raise ValueError(f"classes={classes!r} differs from the classes of the first call, {self.classes_!r}.")
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

    def _training_fit_vs_constant(self, f, y):
        """Log-loss of the predictive probabilities on training labels against that of the
        class frequencies; 'worse' beyond 1.5 times the constant's."""
        p = self._probs(f.double()).mean(0).cpu().numpy()
        y = np.asarray(y, dtype=np.int64)
        loss = float(-np.mean(np.log(np.clip(p[np.arange(len(y)), y], 1e-300, None))))
        freq = np.bincount(y, minlength=p.shape[1]) / len(y)
        const = float(-np.mean(np.log(np.clip(freq[y], 1e-300, None))))
        return loss > 1.5 * const + 1e-3, loss, const

    def _validation_score(self, Xv, yv, wv=None):
        f = self._outputs(Xv, n_samples=min(int(self.predict_samples), 16))
        p = self._probs(f).mean(0)
        idx = torch.as_tensor(np.asarray(yv, dtype=np.int64), device=p.device)
        lp = torch.log(p.gather(1, idx[:, None]).clamp_min(1e-300))
        return float(lp.mean()) if wv is None else _weighted_mean(lp[:, 0], wv)

    # --- public API ---------------------------------------------------------------------
    def fit(self, X: ArrayLike, y: ArrayLike, sample_weight: ArrayLike | None = None) -> Self:
        """Fit the variational posterior to data.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training inputs.
        y : array-like of shape (n_samples,)
            Class labels (any hashable, sortable type: ints, strings, ...).
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weight of each row's log-likelihood term: the ELBO's data
            term becomes ``sum_i w_i E_q[log p(y_i | x_i, theta)]``, and the
            curvature statistics are weighted alike. An integer
            weight acts as that many copies of the row; multiplying every weight
            by ``c`` acts as ``c`` times the data (the prior counts for less), not
            as an invariance. Rows of weight zero are dropped. None gives every row
            weight 1. See the :ref:`sample weights section <sample-weights-section>` of the
            documentation. ``classes_`` are the labels of the rows with a
            positive weight.

        Returns
        -------
        self : object
            Fitted estimator.
        """
        return self._fit(X, y, incremental=False, sample_weight=sample_weight)

    def partial_fit(
        self,
        X: ArrayLike,
        y: ArrayLike,
        classes: ArrayLike | None = None,
        sample_weight: ArrayLike | None = None,
        n_samples_total: float | None = None,
    ) -> Self:
        """Run one epoch over ``(X, y)``, continuing from the current posterior.

        The first call initialises the model. Until ``iblm_batch_size`` rows have
        been seen, every call re-initialises it from all the rows so far (the
        start), with a ``SmallStreamWarning``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training inputs.
        y : array-like of shape (n_samples,)
            Class labels.
        classes : array-like of shape (n_classes,), default=None
            All classes that can appear in any call. Required on the first
            call (as for scikit-learn's incremental classifiers), ignored later
            unless it disagrees with ``classes_``.
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weight of each row's log-likelihood term: the ELBO's data
            term becomes ``sum_i w_i E_q[log p(y_i | x_i, theta)]``, and the
            curvature statistics are weighted alike. An integer
            weight acts as that many copies of the row; multiplying every weight
            by ``c`` acts as ``c`` times the data (the prior counts for less), not
            as an invariance. Rows of weight zero are dropped. None gives every row
            weight 1. See the :ref:`sample weights section <sample-weights-section>` of the
            documentation. The weights count within the call: its
            data term is scaled to the sum of its weights.
        n_samples_total : int, default=None
            Size of the whole data set the stream is drawn from: every batch's data
            term is scaled to it, so the prior counts against the whole data set (pass
            it when running several epochs by ``partial_fit`` over the same data).
            None: the running count of the rows seen by ``partial_fit`` so far (this
            call's included; with sample weights, the sum of the weights), so that
            after a single pass the posterior is weighed against all the data seen.
            Remembered for later calls that do not pass it. See the
            :ref:`streams section <streams-section>` of the documentation.

        Returns
        -------
        self : object
            Fitted estimator.
        """
        if not hasattr(self, "classes_") and classes is None:
            raise ValueError("classes must be passed on the first call to partial_fit.")
        return self._fit(
            X, y, incremental=True, classes=classes, sample_weight=sample_weight, n_samples_total=n_samples_total
        )

    def predict_proba(self, X: ArrayLike) -> np.ndarray:
        """Posterior predictive class probabilities.

        The Monte Carlo average over ``predict_samples`` weight samples of the
        network's class probabilities (not of its logits).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Inputs.

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes)
            Columns follow ``classes_``.
        """
        (p,) = self._predict_rows(X, lambda f: (self._probs(f).mean(0),))
        p = p.numpy().astype(np.float64)
        self._check_finite("class probabilities", p)
        # rows of a float32 average sum to 1 only to ~1e-7: renormalise in float64 so that
        # scikit-learn's metrics (which check the sums at float64 precision) accept them
        return p / p.sum(axis=1, keepdims=True)

    def predict_log_proba(self, X: ArrayLike) -> np.ndarray:
        """Logarithm of the posterior predictive class probabilities.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Inputs.

        Returns
        -------
        log_proba : ndarray of shape (n_samples, n_classes)
            ``log(predict_proba(X))``.
        """
        with np.errstate(divide="ignore"):
            return np.log(self.predict_proba(X))

    def predict_std(self, X: ArrayLike) -> np.ndarray:
        """Standard deviation of each class probability over the posterior.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Inputs.

        Returns
        -------
        std : ndarray of shape (n_samples, n_classes)
            Spread of the class probabilities over the weight samples.
        """
        (std,) = self._predict_rows(X, lambda f: (self._probs(f).std(0, unbiased=False),))
        std = std.numpy().astype(np.float64)
        self._check_finite("class-probability standard deviations", std)
        return std

    def predict(self, X: ArrayLike) -> np.ndarray:
        """Most probable class under the posterior predictive.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Inputs.

        Returns
        -------
        y : ndarray of shape (n_samples,)
            Predicted class labels.
        """
        proba = self.predict_proba(X)
        return self.classes_[np.argmax(proba, axis=1)]
