"""The scikit-learn face shared by every network estimator: validation, target
encoding and scaling, initialisation, ``fit`` / ``partial_fit``, and prediction.

A public estimator is a thin subclass of :class:`BayesianNetworkRegressor` or
:class:`BayesianNetworkClassifier` that names its posterior family (``_family``)
and spells out its ``__init__`` signature (scikit-learn requires explicit keyword
arguments). Training itself runs in :mod:`skbayes._loop`.
"""

from __future__ import annotations

import copy
import functools
import inspect
import math
import numbers
import warnings
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, TypeGuard, TypeVar, cast

import numpy as np
import torch
from numpy.typing import ArrayLike, DTypeLike
from scipy.special import logsumexp
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.utils import check_array, check_consistent_length, check_random_state, column_or_1d
from sklearn.utils.multiclass import check_classification_targets, unique_labels
from sklearn.utils.validation import check_is_fitted
from torch import nn

if TYPE_CHECKING:
    from typing_extensions import Self

    from ._loop import Likelihood
    from ._parallel import ThreadScope
    from ._predictive import CovarianceTensors
    from .posteriors._common import PosteriorTensors

    RandomStateLike = int | np.random.RandomState | None

from . import _loop, _memory, _persist
from ._docs import CLASSIFIER_PARAMS
from ._families.base import PosteriorFamily, kl_annealing_scale
from ._likelihoods import Bernoulli, Categorical, Gaussian, GaussianNoise
from ._linalg import all_finite
from ._networks import ACTIVATIONS, NetworkForward, ParamLayout, build_mlp, init_layers, make_module
from ._parallel import limit_torch_threads, network_macs_per_row
from ._predictive import gaussian_draws, linearized_moments, pairwise_probit_proba, probit_proba
from ._prior import WeightPrior
from ._quantiles import PredictIntervalMixin, check_quantiles, gaussian_quantiles, mixture_quantiles
from ._start import INITS, diagnose, initial_moments, initial_precision
from ._validation import (
    BOOLEAN,
    CALLABLE,
    NONE,
    RANDOM_STATE,
    Check,
    Interval,
    Options,
    check_sample_weight,
    instance_of,
    merged_constraints,
    validate_data,
    validate_params,
)
from .exceptions import (
    InputScaleWarning,
    NonFiniteOutputError,
    PoorFitWarning,
    SmallStreamWarning,
    StreamOrderWarning,
    _warn,
)
from .metrics import _mixture_log_density as mixture_log_density
from .posteriors import KroneckerGaussian

_DTYPES = {"float32": torch.float32, "float64": torch.float64}

#: Column standard deviations outside this range trigger an ``InputScaleWarning``.
INPUT_SCALE = (1e-3, 1e3)

LARGE_NETWORK_WEIGHTS = _memory.LARGE_NETWORK_WEIGHTS

#: ``learning_rate='auto'`` of the Adam-trained estimators (BBB, MC dropout) by network size:
#: 0.01 below ``LARGE_NETWORK_WEIGHTS`` weights, 0.001 from there on (the defaults protocol's
#: image group, with the full-scale target as its constraint).
ADAM_AUTO_LEARNING_RATE = (0.01, 0.001)

#: ``dropout='auto'`` of MC dropout by network size: 0.02 below ``LARGE_NETWORK_WEIGHTS`` weights
#: (the defaults protocol's small classification and regression groups: 9 of 12 and 17 of 25
#: pairs against 0.1), 0.1 from there on (the image group: 0.1 better on all 6 pairs).
MC_DROPOUT_AUTO_RATE = (0.02, 0.1)

#: ``early_stopping='auto'`` of the estimators that have it, by network size (where ``max_iter``
#: exceeds ``n_iter_no_change``, so that it can stop a fit): off below ``LARGE_NETWORK_WEIGHTS``
#: weights, on from there (classifiers: the image group at the estimators' own budget, better
#: than training to convergence on 4-6 of 6 pairs for Vadam, BBB, MC dropout, noisy K-FAC and
#: noisy EK-FAC, SLANG and VOGN keep False; regressors: on wide regression networks a higher
#: test log-likelihood on all four sets for SLANG and noisy K-FAC, the others keep False).
EARLY_STOPPING_BY_SIZE = (False, True)

#: ``predict_samples='auto'`` (the classifiers' and ``MCDropoutRegressor``'s default):
#: ``AUTO_PREDICT_WORK // D`` weight samples on a network of ``D`` weights, clipped to
#: ``AUTO_PREDICT_SAMPLES``: 1000 up to 4,000 weights, 100 from 40,000 on, so that a prediction
#: costs at most about 4 million multiply-adds per row above the floor (the defaults protocol's
#: small classification group: 1000 samples against 100 improved the digits log-loss at the
#: strongest shift by 0.3-5 nats at no cost in accuracy; its regression group: MC dropout's
#: log density beyond the data, Boston -5.22 -> -4.75).
AUTO_PREDICT_SAMPLES = (100, 1000)
AUTO_PREDICT_WORK = 4_000_000

#: A classifier warns that ``y`` looks like a regression target when its labels are numbers,
#: more than ``REGRESSION_LIKE_CLASSES`` classes, with fewer than ``REGRESSION_LIKE_ROWS`` rows each.
REGRESSION_LIKE_CLASSES, REGRESSION_LIKE_ROWS = 20, 5


def _torch_dtype(dtype: DTypeLike | torch.dtype) -> torch.dtype:
    key = np.dtype(dtype).name if not isinstance(dtype, torch.dtype) else str(dtype).split(".")[-1]
    return _DTYPES[key]


def _is_supported_dtype(dtype: Any) -> bool:
    try:
        _torch_dtype(dtype)
    except (KeyError, TypeError):
        return False
    return True


def _is_available_device(value: object) -> bool:
    if not isinstance(value, (str, torch.device)):
        return False
    device = torch.device(value)
    if device.type == "cuda":
        return torch.cuda.is_available() and (device.index is None or device.index < torch.cuda.device_count())
    if device.type == "mps":
        return torch.backends.mps.is_available()
    return device.type == "cpu"


def _is_layer_sizes(value: Any) -> bool:
    if value is None or (isinstance(value, numbers.Integral) and not isinstance(value, bool)):
        value = () if value is None else (value,)
    return all(isinstance(h, numbers.Integral) and not isinstance(h, bool) and int(h) >= 1 for h in tuple(value))


def _is_positive_real(v: object) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v) and float(v) > 0


def _is_annealing(value: object) -> bool:
    return isinstance(value, (tuple, list)) and len(value) == 3 and all(_is_positive_real(v) for v in value)


def _is_gamma_prior(value: object) -> bool:
    return isinstance(value, (tuple, list)) and len(value) == 2 and all(_is_positive_real(v) for v in value)


def store_init_params(params: dict[str, Any]) -> None:
    """Store an ``__init__``'s arguments (its ``locals()``) as attributes, unchanged, as
    scikit-learn requires of estimator constructors."""
    params = dict(params)
    self = params.pop("self")
    params.pop("__class__", None)
    for k, v in params.items():
        setattr(self, k, v)


_POSITIVE_INT = [Interval(numbers.Integral, 1, None, closed="left")]


def _shape_hint(X: Any) -> tuple[int, int | None]:
    """``(n_rows, n_features)`` of an input before validation (which gives the real
    errors), for sizing the thread count; ``(1, None)`` when they cannot be read."""
    try:
        shape = X.shape if hasattr(X, "shape") else np.shape(X)
        return max(int(shape[0]), 1), (int(shape[1]) if len(shape) > 1 else None)
    except (TypeError, ValueError, IndexError):
        return 1, None


#: A prediction method ``method(self, X, ...)``.
_Method = TypeVar("_Method", bound=Callable[..., Any])

#: What a prediction's ``reduce`` returns per chunk of rows: tensors or arrays, rows first.
_Rows = TypeVar("_Rows", torch.Tensor, np.ndarray)


def _empty_rows_like(chunk: _Rows, n_rows: int) -> _Rows:
    """An uninitialised CPU result of ``n_rows`` rows shaped and typed like one chunk's."""
    if isinstance(chunk, torch.Tensor):
        return torch.empty((n_rows, *chunk.shape[1:]), dtype=chunk.dtype)
    return np.empty((n_rows, *chunk.shape[1:]), dtype=chunk.dtype)


def _scoped_threads(method: _Method) -> _Method:
    """Run a prediction method at the thread count of its work (``n_threads``, or the
    automatic policy; see :mod:`skbayes._parallel`), restored afterwards."""

    @functools.wraps(method)
    def scoped(self: BayesianNetwork, X: ArrayLike, *args: Any, **kwargs: Any) -> Any:
        work = self._prediction_work(X) if hasattr(self, "posterior_") else 0.0
        with self._threads(work):
            return method(self, X, *args, **kwargs)

    return cast(_Method, scoped)


#: ``max_iter='auto'``: enough epochs for this many optimiser steps ...
AUTO_MIN_STEPS = 10_000
#: ... and at least the first, at most the second number of epochs.
AUTO_EPOCHS = (200, 1000)


class _Structure:
    """The structural parameters' values at the start of a fit (see
    :meth:`BayesianNetwork._structural_values`). Immutable: copies of the estimator share it,
    so that a ``module`` keeps its identity through the state copies of a transactional fit."""

    __slots__ = ("values",)

    def __init__(self, values: dict[str, Any]) -> None:
        self.values = values

    def __copy__(self) -> _Structure:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> _Structure:
        return self

    def __getstate__(self) -> dict[str, Any]:
        return {"values": self.values}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.values = state["values"]


#: Stands for "the estimator's own ``module`` parameter" in a saved :class:`_Structure` (a
#: module, the user's class, factory or instance, is saved once, as the parameter).
_MODULE_PARAM = "<the estimator's module parameter>"


def _short(value: object) -> str:
    """A one-line description of a parameter value for messages."""
    if isinstance(value, (torch.dtype, torch.device)):  # as the user spells them: 'float32', 'cuda:0'
        return repr(str(value).removeprefix("torch."))
    if isinstance(value, nn.Module):
        return f"a {type(value).__name__} instance"
    if callable(value):
        return getattr(value, "__qualname__", type(value).__name__)
    return repr(value)


def _same_value(a: object, b: object) -> bool:
    """Whether two recorded parameter values are the same: modules and callables by identity,
    anything else by equality."""
    if a is b:
        return True
    if callable(a) or callable(b) or isinstance(a, nn.Module) or isinstance(b, nn.Module):
        return False
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - values that cannot be compared differ
        return False


def _is_candidates(value: object) -> TypeGuard[list[Any] | tuple[Any, ...]]:
    """Whether a ``kl_weight`` value lists candidates (a list or tuple)."""
    return isinstance(value, (list, tuple))


def _mentions_auto(value: object) -> bool:
    """Whether a parameter value is ``'auto'`` or lists it among candidates."""
    if _is_candidates(value):
        return any(isinstance(v, str) and v == "auto" for v in value)
    return isinstance(value, str) and value == "auto"


def _is_candidate_list(value: object, single: tuple[Any, ...]) -> bool:
    """Two or more distinct candidates, each satisfying one of the ``single`` constraints."""
    if not _is_candidates(value) or len(value) < 2:
        return False
    if not all(any(c.is_satisfied_by(v) for c in single) for v in value):
        return False
    return len({repr(float(v)) if isinstance(v, numbers.Real) else v for v in value}) == len(value)


def _heldout_log_densities(est: BayesianNetwork, X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Each held-out row's log predictive density under a fitted ``est``: a classifier's log
    probability of the row's label (a label it never saw in training: 1e-300); a
    regressor's as :meth:`log_likelihood` computes it (the mixture over the predictive's
    weight samples, or the linearised predictive's Gaussian; a 2-D ``y``: all targets
    together)."""
    if is_classifier_face(est):
        proba = np.clip(est.predict_proba(X), 1e-300, None)
        classes, y = est.classes_, np.asarray(y)
        index = np.minimum(np.searchsorted(classes, y), len(classes) - 1)  # classes_ is sorted
        seen = classes[index] == y
        return np.where(seen, np.log(proba[np.arange(len(y)), index]), math.log(1e-300))
    return cast("BayesianNetworkRegressor", est)._log_densities(X, y)


def _paired_gain(lp: np.ndarray, lp_first: np.ndarray, w: np.ndarray | None) -> tuple[float, float]:
    """The (weighted) mean per-row gain ``lp - lp_first`` and its standard error."""
    d = lp - lp_first
    w = np.ones_like(d) if w is None else np.asarray(w, dtype=np.float64)
    mean = float(np.sum(w * d) / np.sum(w))
    n_eff = float(np.sum(w) ** 2 / np.sum(w * w))
    var = float(np.sum(w * (d - mean) ** 2) / np.sum(w))
    return mean, math.sqrt(var / max(n_eff - 1.0, 1.0))


class BayesianNetwork(BaseEstimator):
    """Machinery shared by every skbayes network estimator (not public)."""

    #: The posterior family (set by each public estimator).
    _family: type[PosteriorFamily] = PosteriorFamily
    #: The minibatch size of ``batch_size='auto'`` (capped at ``n_samples``).
    _auto_batch_size: int = 64
    #: Class attributes passed to the family as fixed parameters (e.g. VOGN's ``rank``).
    _fixed_params: tuple[str, ...] = ()
    #: What ``'auto'`` means for ``kl_weight``, ``predictive`` and the other parameters a class
    #: lists: ``(small, large)``, the values the defaults protocol chose for networks of fewer than
    #: :data:`LARGE_NETWORK_WEIGHTS` weights and for larger ones, each a value or a dict by
    #: ``method`` (docs/defaults_protocol.md, "Defaults chosen by the protocol").
    _auto_by_size: dict[str, tuple[Any, Any]] = {"kl_weight": (1.0, 1.0), "predictive": ("sampled", "sampled")}
    #: What ``prior_precision=None`` stands for: ``(small, large)`` as in ``_auto_by_size`` (each a
    #: value or a dict by ``method``), set on a class whose default prior differs between its
    #: methods or network sizes (the defaults protocol's values); None elsewhere, where
    #: ``prior_precision`` is a number or ``'auto'``.
    _prior_for_none: tuple[Any, Any] | None = None

    # The fitted state, declared for the type checker (set by ``_initialize`` and the fits;
    # the loop trains the part in ``_loop.TrainingState``).
    posterior_: PosteriorTensors
    module_: nn.Module
    t_: int
    n_iter_: int
    loss_curve_: list[float]
    validation_scores_: list[float]
    best_validation_score_: float
    _state: dict[str, Any]
    _likelihood: Likelihood
    _prior: WeightPrior
    _forward: NetworkForward
    _rng_state: torch.Tensor
    _predict_seed: int

    _parameter_constraints: dict[str, list[Any]] = {
        "hidden_layer_sizes": [Check(_is_layer_sizes, "a tuple of positive ints")],
        "activation": [Options(tuple(ACTIVATIONS))],
        "module": [NONE, instance_of(nn.Module, "a torch.nn.Module"), CALLABLE],
        "max_iter": [Options(("auto",)), Interval(numbers.Integral, 0, None, closed="left")],
        "batch_size": [Options(("auto",)), Interval(numbers.Integral, 1, None, closed="left")],
        "mc_samples": _POSITIVE_INT,
        "predict_samples": [*_POSITIVE_INT, Options(("auto",))],
        "init": [Options(INITS)],
        "iblm_batch_size": _POSITIVE_INT,
        "kl_annealing": [NONE, Check(_is_annealing, "a tuple (gamma, a, b) of positive numbers")],
        "warm_start": [BOOLEAN],
        "early_stopping": [BOOLEAN],
        "validation_fraction": [Interval(numbers.Real, 0, 1, closed="neither")],
        "n_iter_no_change": _POSITIVE_INT,
        "tol": [NONE, Interval(numbers.Real, 0, None, closed="left")],
        "random_state": [RANDOM_STATE],
        "device": [
            Check(_is_available_device, "a torch device available on this machine ('cpu', or 'cuda' with a GPU)")
        ],
        "dtype": [Check(_is_supported_dtype, "'float32' or 'float64'")],
        "verbose": [BOOLEAN, Interval(numbers.Integral, 0, None, closed="left")],
        "n_threads": [NONE, Interval(numbers.Integral, 1, 2**31 - 1, closed="both")],
        "predictive": [Options(("sampled", "glm", "auto"))],
    }

    # --- persistence: tensors and modules as numpy arrays (pickle and skops.io) ---------
    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        structure = state.get("_structure")
        if structure is not None and "module" in structure.values:
            values = dict(structure.values)
            if values["module"] is self.module:
                values["module"] = _MODULE_PARAM
            else:  # changed since the fit and not saved: that change is not detected after loading
                del values["module"]
            state = {**state, "_structure": _Structure(values)}
        return _persist.encode_state(self, state, self.get_params(deep=False))

    def __setstate__(self, state: dict[str, Any]) -> None:
        state = dict(state)
        for name, before in self._family.params_added.items():  # saved before the parameter existed
            state.setdefault(name, before)
        # Any other parameter missing from an older save takes its default, which for these
        # reproduces what the save did (``glm_link``: 'pairwise', the only link before it);
        # a parameter whose default would change an old model belongs in ``params_added``.
        for name, param in inspect.signature(type(self).__init__).parameters.items():
            if param.kind is param.KEYWORD_ONLY and param.default is not param.empty:
                state.setdefault(name, param.default)
        portable = state.pop("_skbayes_state", None)
        super().__setstate__(state)
        if portable is not None:
            _persist.decode_state(self, {"_skbayes_state": portable})
        structure = self.__dict__.get("_structure")
        if structure is not None and structure.values.get("module") == _MODULE_PARAM:
            self._structure = _Structure({**structure.values, "module": self.module})

    # --- validation ---------------------------------------------------------------
    @classmethod
    def _constraints(cls) -> dict[str, list[Any]]:
        """The constraints table merged along the class hierarchy, then the family's."""
        tables = [
            k.__dict__["_parameter_constraints"]
            for k in reversed(cls.__mro__)
            if "_parameter_constraints" in k.__dict__
        ]
        merged = merged_constraints(*tables, cls._family.parameter_constraints)
        for name in cls._auto_by_size:  # 'auto' by network size: resolved before the family sees it
            if name in merged and not any(isinstance(c, Options) and "auto" in c.options for c in merged[name]):
                merged[name] = [*merged[name], Options(("auto",))]
        if cls._prior_for_none is not None:  # None: the protocol's prior, resolved before the family sees it
            merged["prior_precision"] = [*merged["prior_precision"], NONE]
        if "kl_weight" in merged:  # a list of candidates: fit chooses one on held-out rows
            single = tuple(merged["kl_weight"])
            merged["kl_weight"] = [
                *single,
                Check(
                    lambda v: _is_candidate_list(v, single),
                    "a list of two or more distinct candidates, each a positive number or 'auto'",
                ),
            ]
        return merged

    def _validate_params(self) -> None:
        validate_params(type(self).__name__, self.get_params(deep=False), self._constraints())

    def _make_family(self, n_weights: int | None = None) -> PosteriorFamily:
        """The family of the current parameters, ``'auto'`` values resolved for a network of
        ``n_weights`` weights (None: the fitted network's; before a fit, a small one)."""
        if n_weights is None:
            n_weights = int(self.posterior_.n_params) if hasattr(self, "posterior_") else 0
        params = self.get_params(deep=False)
        params.update({k: getattr(self, k) for k in self._fixed_params})
        if _is_candidates(params.get("kl_weight")):  # the last choice among them, else the first
            params["kl_weight"] = self._last_choice(params["kl_weight"], n_weights)
        for name in self._sized_params():
            if params.get(name) == "auto":
                params[name] = self._resolve_auto(name, n_weights)
        if self._prior_for_none is not None and params.get("prior_precision") is None:
            params["prior_precision"] = self._sized_value(self._prior_for_none, n_weights)
        return self._family(params)

    def _last_choice(self, candidates: list[Any] | tuple[Any, ...], n_weights: int) -> Any:
        """The ``kl_weight`` a continuing fit of ``candidates`` trains at: the last fit's choice
        (``kl_weight_``, when a fresh fit chose it and it is one of these candidates), else
        the first candidate."""
        chosen = self.__dict__.get("kl_weight_")
        if chosen is None or "kl_weight_scores_" not in self.__dict__:
            return candidates[0]
        for c in candidates:
            value = self._resolve_auto("kl_weight", n_weights) if _mentions_auto(c) else c
            if float(value) == chosen:
                return c
        return candidates[0]

    def _stops_early(self, n_weights: int | None = None) -> bool:
        """Whether a fit holds out rows and stops early (``early_stopping``; ``'auto'``: the
        protocol's value for a network of ``n_weights`` weights, None: the fitted one's, where
        the fit can run more than ``n_iter_no_change`` epochs; a shorter fixed ``max_iter``,
        which early stopping could not cut short, trains on every row)."""
        value = self.early_stopping
        if isinstance(value, str):  # 'auto'
            if self.max_iter != "auto" and int(self.max_iter) <= int(self.n_iter_no_change):
                return False
            if n_weights is None:
                n_weights = int(self.posterior_.n_params) if hasattr(self, "posterior_") else 0
            return bool(self._resolve_auto("early_stopping", n_weights))
        return bool(value)

    def _sized_params(self) -> list[str]:
        """The training parameters whose ``'auto'`` depends on the network's size (``predictive``
        is resolved when predicting)."""
        return [name for name in self._auto_by_size if name != "predictive"]

    def _resolve_auto(self, name: str, n_weights: int) -> Any:
        """The value ``'auto'`` stands for in parameter ``name`` on a network of ``n_weights``
        weights: the protocol's small-network value below :data:`LARGE_NETWORK_WEIGHTS`, its
        large-network value from there on (a dict: per value of ``method``)."""
        return self._sized_value(self._auto_by_size[name], n_weights)

    def _sized_value(self, pair: tuple[Any, Any], n_weights: int) -> Any:
        """The entry of ``pair = (small, large)`` for a network of ``n_weights`` weights (each
        entry a value or a dict by ``method``)."""
        small, large = pair
        value = large if n_weights >= LARGE_NETWORK_WEIGHTS else small
        return value[self.get_params(deep=False)["method"]] if isinstance(value, dict) else value

    def _n_weights(self, X: np.ndarray, reset: bool) -> int:
        """The number of weights of the network a fit on ``X`` trains (before it is built)."""
        if not reset and hasattr(self, "posterior_"):
            return int(self.posterior_.n_params)
        n_outputs = self._make_likelihood().n_outputs
        if self.module is None:
            return _memory.n_params(_memory.mlp_layers(X.shape[1], self._hidden_layer_sizes(), n_outputs))
        net = self._custom_network(X.shape[1], n_outputs, fitted=False)
        if net is None:  # a module that cannot be built on 'meta' counts as small
            return 0
        return sum(p.numel() for p in net.parameters())

    def _hidden_layer_sizes(self) -> tuple[int, ...]:
        hls = self.hidden_layer_sizes
        if hls is None:
            return ()
        if isinstance(hls, numbers.Integral):
            return (int(hls),)
        return tuple(int(h) for h in hls)

    def _validate_X(self, X: ArrayLike, reset: bool) -> np.ndarray:
        return validate_data(self, X, reset=reset, dtype=[np.float64, np.float32])

    # --- helpers ---------------------------------------------------------------------
    def _tensor(self, a: ArrayLike, dtype: torch.dtype | None = None) -> torch.Tensor:
        a = np.ascontiguousarray(a)
        if not a.flags.writeable:  # torch must not share (and could not write) read-only user memory
            a = a.copy()
        return torch.as_tensor(a, dtype=dtype or self._dtype, device=self._device)

    # A fitted model computes on the device and in the dtype it was initialised with,
    # whatever ``set_params`` did since (continuing fits included); a new fit from
    # scratch takes the current parameters.
    @property
    def _dtype(self) -> torch.dtype:
        return self.__dict__.get("_fitted_dtype") or _torch_dtype(self.dtype)

    @property
    def _device(self) -> torch.device:
        return self.__dict__.get("_fitted_device") or torch.device(self.device)

    def _max_epochs(self, n_rows: int) -> int:
        """``max_iter`` as a number of epochs: ``'auto'`` gives the optimiser at least
        :data:`AUTO_MIN_STEPS` steps (the methods' step sizes and moving averages count steps,
        and a small data set has few per epoch), within :data:`AUTO_EPOCHS`."""
        if self.max_iter != "auto":
            return int(self.max_iter)
        lo, hi = AUTO_EPOCHS
        steps_per_epoch = math.ceil(n_rows / self._batch_size(n_rows))
        return int(min(hi, max(lo, math.ceil(AUTO_MIN_STEPS / steps_per_epoch))))

    def _batch_size(self, n: int) -> int:
        bs = min(self._auto_batch_size, n) if self.batch_size == "auto" else min(int(self.batch_size), n)
        return max(bs, 1)

    # --- threads (skbayes._parallel) ------------------------------------------------------
    def _network_work(self, rows: int, n_features: int | None = None, fresh: bool = False) -> float:
        """Multiply-adds of one network pass over ``rows`` rows (the thread policy's work
        size): the fitted network's count (unless ``fresh``: a fit from scratch), else the
        MLP's from its widths, else 0 (a custom module counts as small until it is built)."""
        per_row = None if fresh else self.__dict__.get("_macs_per_row")
        if per_row is None and self.module is None and n_features is not None:
            widths = (n_features, *self._hidden_layer_sizes(), 1)
            per_row = sum(a * b for a, b in zip(widths[:-1], widths[1:]))
        return float(per_row or 0) * rows

    def _training_work(self, n_rows: int, n_features: int | None = None, fresh: bool = False) -> float:
        return self._network_work(self._batch_size(n_rows) * int(self.mc_samples), n_features, fresh)

    def _prediction_work(self, X: ArrayLike) -> float:
        """The work of a prediction's network pass: the rows of one pass under one block of
        weight samples (as ``_outputs`` computes them)."""
        n_rows, _ = _shape_hint(X)
        per_pass, pass_rows = _memory.pass_shape(n_rows, self._sample_block(self._n_predict_samples()))
        return self._network_work(min(n_rows, pass_rows) * per_pass, getattr(self, "n_features_in_", None))

    def _sample_block(self, n_samples: int) -> int:
        """Weight samples per block of a prediction (:func:`skbayes._memory.sample_block`)."""
        n_weights = int(self.posterior_.n_params) if hasattr(self, "posterior_") else 1
        return _memory.sample_block(n_samples, n_weights, self._dtype.itemsize)

    def _n_predict_samples(self) -> int:
        """The weight samples of a prediction: ``predict_samples``, or what ``'auto'`` stands for
        on the fitted network of ``D`` weights (``AUTO_PREDICT_WORK // D`` clipped to
        ``AUTO_PREDICT_SAMPLES``)."""
        value = self.predict_samples
        if value != "auto":
            return int(value)
        n_weights = int(self.posterior_.n_params) if hasattr(self, "posterior_") else 1
        low, high = AUTO_PREDICT_SAMPLES
        return int(min(high, max(low, AUTO_PREDICT_WORK // max(n_weights, 1))))

    def _threads(self, work: float | None) -> AbstractContextManager[ThreadScope]:
        """The thread scope of a call (``n_threads``, or the automatic policy for ``work``)."""
        return limit_torch_threads(getattr(self, "n_threads", None), work)

    # --- initialisation -----------------------------------------------------------------
    def _effective_weights(self, sample_weight: np.ndarray | None, n_rows: int) -> tuple[torch.Tensor | None, float]:
        """``(weights, n_train)`` for training: the sample weights rescaled to mean one (a
        tensor) and their sum, the effective number of examples; ``(None, n_rows)``
        without sample weights."""
        if sample_weight is None:
            return None, n_rows
        total = float(np.sum(sample_weight, dtype=np.float64))
        return self._tensor(sample_weight * (n_rows / total)), total

    def _initialize(
        self,
        X: np.ndarray,
        y_enc: np.ndarray,
        family: PosteriorFamily,
        rng: np.random.RandomState,
        sample_weight: np.ndarray | None = None,
    ) -> None:
        self._fitted_dtype, self._fitted_device = _torch_dtype(self.dtype), torch.device(self.device)
        self._likelihood = self._make_likelihood()
        n_out = self._likelihood.n_outputs
        seed = int(rng.randint(np.iinfo(np.int32).max))
        # The initial weights come from a generator of the fit's own, in the estimator's
        # dtype: no process-wide torch state (global RNG, default dtype) is read or changed,
        # so fits in concurrent threads give the results of serial ones.
        init_gen = torch.Generator().manual_seed(seed)
        if self.module is None:
            net = build_mlp(
                X.shape[1], self._hidden_layer_sizes(), n_out, self.activation, generator=init_gen, dtype=self._dtype
            )
        else:
            net = make_module(self.module, X.shape[1], n_out)
            if not isinstance(self.module, nn.Module):  # a callable's Linear/conv layers: start from init_gen
                net = init_layers(net.to(dtype=self._dtype), init_gen)
        net = net.to(device=self._device, dtype=self._dtype)
        self._structure = _Structure(self._structural_values())
        if self.module is not None:
            self._check_module_widths(net, X, n_out)
        self._macs_per_row = network_macs_per_row(copy.deepcopy(net).eval(), self._tensor(X[:2]))
        self.module_ = net
        self._forward = NetworkForward(net, ParamLayout(net), X.shape[1])
        gen = torch.Generator(device=self._device).manual_seed(int(rng.randint(np.iinfo(np.int32).max)))
        Xt, yt = self._tensor(X), self._target_tensor(y_enc)
        if not all_finite(Xt):  # finite float64 values beyond float32's range
            raise ValueError(f"{type(self).__name__}: {diagnose(Xt, 1.0)}")
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

    def _check_module_widths(self, net: nn.Module, X: np.ndarray, n_out: int) -> None:
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

    # --- continuing fits --------------------------------------------------------------
    def _structural_values(self) -> dict[str, Any]:
        """The parameters fixed in the fitted state when a fit starts, normalised: the
        network's (``hidden_layer_sizes`` and ``activation`` only when ``module`` is None;
        ``module`` by identity), ``dtype``, ``device``, and the family's
        ``structural_params``. A continuing fit (``warm_start``, ``partial_fit``) cannot
        apply a change of them."""
        own = self.module is None
        device = torch.device(self.device)
        if device.type == "cuda" and device.index is None:  # 'cuda' is the current device: 'cuda:0' is the same
            device = torch.device("cuda", torch.cuda.current_device())
        values = {
            "hidden_layer_sizes": self._hidden_layer_sizes() if own else None,
            "activation": self.activation if own else None,
            "module": self.module,
            "dtype": _torch_dtype(self.dtype),
            "device": device,
        }
        for name in self._family.structural_params:
            values[name] = getattr(self, name)
        return values

    def _structural_changes(self) -> list[str]:
        """``'name: old -> new'`` for each structural parameter changed since the fit started."""
        recorded = self.__dict__.get("_structure")
        if recorded is None:  # a model fitted before the values were recorded: nothing to compare
            return []
        now = self._structural_values()
        return [
            f"{k}: {_short(v)} -> {_short(now.get(k))}"
            for k, v in recorded.values.items()
            if not _same_value(v, now.get(k))
        ]

    def _continue_or_restart(self, incremental: bool) -> bool:
        """Whether a continuing fit must start afresh: a structural parameter changed since
        the last fit. ``partial_fit`` raises instead (restarting would drop every batch seen
        so far); a ``warm_start`` fit sees all its data, so it restarts with a warning."""
        changes = self._structural_changes()
        if not changes:
            return False
        what = "; ".join(changes)
        if incremental:
            raise ValueError(
                f"{type(self).__name__}.partial_fit cannot continue the fitted model: parameters that fix "
                f"the network or the posterior's structure changed since it was fitted ({what}). Set them "
                "back, or call fit to start a new model with them."
            )
        _warn(
            f"{type(self).__name__}: parameters that fix the network or the posterior's structure changed "
            f"since the last fit ({what}); warm_start cannot continue the fitted model, so this fit starts "
            "afresh.",
            UserWarning,
        )
        return True

    def _refresh_hyperparameters(self, family: PosteriorFamily, n_rows: int) -> None:
        """On a continuing fit, apply the current ``prior_precision`` (and the regressors'
        noise parameters), which the fitted state holds: a changed fixed prior replaces the
        old one; a learned prior (``'auto'``) keeps its learned values while it stays learned."""
        prior = family.prior_precision
        learn = isinstance(prior, str)
        if learn != self._prior.learn or (not learn and self._prior.scalar() != float(prior)):
            self._prior = WeightPrior(
                family.prior_groups(self._forward),
                self._forward.layout.size,
                prior,
                dtype=self._dtype,
                device=self._device,
            )
        self._refresh_likelihood(n_rows)

    def _refresh_likelihood(self, n_rows: int) -> None:
        """Apply changed likelihood parameters on a continuing fit (a hook of the faces)."""

    # --- fit / partial_fit ------------------------------------------------------------
    def _fitted_state(self, deep: bool) -> dict[str, Any]:
        """Everything in the instance that is not a constructor parameter (deep copies
        when the coming fit continues from, and so mutates, the current state)."""
        params = self.get_params(deep=False)
        state = {k: v for k, v in self.__dict__.items() if k not in params}
        return copy.deepcopy(state) if deep else state

    def _restore_fitted_state(self, state: dict[str, Any]) -> None:
        params = self.get_params(deep=False)
        for k in [k for k in self.__dict__ if k not in params]:
            del self.__dict__[k]
        self.__dict__.update(state)

    def _fit(
        self,
        X: ArrayLike,
        y: ArrayLike,
        incremental: bool,
        classes: ArrayLike | None = None,
        sample_weight: ArrayLike | None = None,
        n_samples_total: float | None = None,
    ) -> Self:
        """Transactional fit: the previous fitted state is restored, exactly, when
        anything raises before the fit completes (invalid ``sample_weight`` included);
        a ``KeyboardInterrupt`` after at least one completed epoch keeps the end of the
        last completed epoch."""
        self._validate_params()
        # candidates: a fresh fit chooses among them; partial_fit and a continuing fit train at
        # the last choice (kl_weight_), or at the first candidate before any
        choose = not incremental and _is_candidates(getattr(self, "kl_weight", None))
        fitted = hasattr(self, "posterior_")
        reset = not (fitted and (incremental or self.warm_start))
        reset = reset or self._continue_or_restart(incremental)
        saved = self._fitted_state(deep=not reset)
        work = self._training_work(*_shape_hint(X), fresh=reset)
        try:
            self._drop_stale_attributes(reset, incremental)
            if choose and reset:
                self._choose_kl_weight(X, y, sample_weight)
            with self._threads(work) as threads:
                interrupted = self._fit_unguarded(
                    X, y, incremental, reset, classes, sample_weight, n_samples_total, threads
                )
        except BaseException:
            self._restore_fitted_state(saved)
            raise
        if interrupted:
            _warn(
                f"{type(self).__name__}.fit was interrupted; the model is left at the end of "
                f"its last completed epoch (n_iter_={self.n_iter_}).",
                UserWarning,
            )
            raise KeyboardInterrupt
        return self

    def _drop_stale_attributes(self, reset: bool, incremental: bool) -> None:
        """Forget the fitted attributes a fit sets only sometimes, when this one will not set
        them: the validation scores, which only a ``fit`` that stops early sets again
        (``partial_fit``, which never stops early, keeps them), and the candidates' scores when ``kl_weight``
        lists none or a fresh fit is to choose again (a continuing fit keeps the scores of the
        choice it trains at)."""
        if not incremental:  # a fit that stops early sets them again
            self.__dict__.pop("validation_scores_", None)
            self.__dict__.pop("best_validation_score_", None)
        if reset or not _is_candidates(getattr(self, "kl_weight", None)):
            self.__dict__.pop("kl_weight_scores_", None)

    def _fit_unguarded(
        self,
        X: ArrayLike,
        y: ArrayLike,
        incremental: bool,
        reset: bool,
        classes: ArrayLike | None,
        sample_weight: ArrayLike | None = None,
        n_samples_total: float | None = None,
        threads: ThreadScope | None = None,
    ) -> bool:
        n_iter_before = getattr(self, "n_iter_", 0) if not reset else 0
        X, y = self._validate_X_y(X, y, reset=reset)
        sw = None
        if sample_weight is not None:
            X, y, sw = self._check_sample_weight(sample_weight, X, y)
        n_call = X.shape[0]  # this call's rows (a restarted start prepends the rows kept so far)
        if incremental:
            n_total = self._stream_total(n_samples_total)
            X, y, sw, reset, classes = self._stream_start(X, y, sw, reset, classes)
        if reset:
            self._warn_input_scale(X)
        self._prepare_targets(y, first=reset, classes=classes, sample_weight=sw)
        y_enc = self._encode_targets(y)
        if incremental:
            self._stream_order_add(y[X.shape[0] - n_call :], y_enc[X.shape[0] - n_call :])
        # sized only when needed (a module factory is built for it)
        auto = any(_mentions_auto(getattr(self, name, None)) for name in self._sized_params()) or (
            self._prior_for_none is not None and getattr(self, "prior_precision", None) is None
        )
        n_weights = self._n_weights(X, reset) if auto else None
        family = self._make_family(n_weights)
        if "kl_weight" in family.parameter_constraints:
            self.kl_weight_ = float(family.kl_weight)
        self._check_fit_memory(X, family, continuing=not reset, incremental=incremental)
        if reset:
            self._initialize(X, y_enc, family, check_random_state(self.random_state), sw)
        else:
            self._refresh_hyperparameters(family, X.shape[0])
        if threads is not None:  # the network is built now: its work is known
            threads.update(self._training_work(X.shape[0]))
        validation = None
        if not incremental and self._stops_early(n_weights):
            if sw is None:
                X, y_enc, Xv, yv = self._validation_split(X, y_enc)
                Xv_t = self._tensor(Xv)
                validation = lambda posterior: self._validation_score(Xv_t, yv, posterior=posterior)  # noqa: E731
            else:
                X, y_enc, sw, Xv, yv, swv = self._validation_split(X, y_enc, sw)
                Xv_t = self._tensor(Xv)
                validation = lambda posterior: self._validation_score(Xv_t, yv, swv, posterior)  # noqa: E731
        n_epochs = 1 if incremental else self._max_epochs(X.shape[0])
        weights, n_train = (None, None) if sw is None else self._effective_weights(sw, X.shape[0])
        n_seen = float(X.shape[0] if n_train is None else n_train)
        if reset:
            self._n_seen = 0.0
        self._n_seen = self.__dict__.get("_n_seen", 0.0) + n_seen if incremental else n_seen
        stream_size = None
        if incremental:  # partial_fit: the batch stands for the stream's rows, not for itself
            stream_size = self._n_seen if n_total is None else n_total
            family.set_stream_size(self._state, stream_size)
        on_step = self._stream_average_begin(reset, n_total, n_seen, X.shape[0]) if incremental else None
        if not incremental:  # a fit ends any stream
            for k in ("_stream_rows", "_stream_average", "_stream_iterate", "_stream_order"):
                self.__dict__.pop(k, None)
        state = self._training_state()
        outcome = _loop.run_epochs(
            state,
            self._loop_settings(X.shape[0]),
            family,
            self._tensor(X),
            self._target_tensor(y_enc),
            n_epochs,
            incremental,
            validation,
            weights=weights,
            n_train=n_train,
            n_total=stream_size,
            on_step=on_step,
        )
        self._store_training_state(state, early_stopping=validation is not None)
        if outcome.interrupted and self.n_iter_ == (0 if reset else n_iter_before):
            raise KeyboardInterrupt  # no epoch completed: roll back to the previous state
        if incremental and reset and n_iter_before:
            self.n_iter_ = n_iter_before + 1  # a restarted stream start counts its calls
        if incremental:
            self._stream_average_end(outcome)
            self._warn_small_stream()
            self._warn_stream_order()
        self.diverged_ = outcome.diverged
        self.prior_precision_ = self._prior.as_dict()
        self._forward.layout.load_into(self.module_, self.posterior_.mean_t)
        self._finalize()
        if not incremental and not outcome.interrupted and self.n_iter_ > 0:
            self._warn_poor_fit(X, y_enc, family)
        return outcome.interrupted

    def _training_state(self) -> _loop.TrainingState:
        """The fitted state the loop trains (:class:`skbayes._loop.TrainingState`), from the
        fitted attributes (the same objects, not copies)."""
        return _loop.TrainingState(
            posterior=self.posterior_,
            family_state=self._state,
            likelihood=self._likelihood,
            prior=self._prior,
            forward=self._forward,
            rng_state=self._rng_state,
            t=self.t_,
            n_iter=self.n_iter_,
            loss_curve=self.loss_curve_,
        )

    def _store_training_state(self, state: _loop.TrainingState, early_stopping: bool = False) -> None:
        """Copy a trained :class:`skbayes._loop.TrainingState` back into the fitted attributes
        (with ``early_stopping``, the validation scores too)."""
        self.posterior_, self._state = state.posterior, state.family_state
        self._likelihood, self._prior, self._forward = state.likelihood, state.prior, state.forward
        self._rng_state = state.rng_state
        self.t_, self.n_iter_, self.loss_curve_ = state.t, state.n_iter, state.loss_curve
        if early_stopping:
            self.validation_scores_ = state.validation_scores
        if state.best_validation_score is not None:
            self.best_validation_score_ = state.best_validation_score

    def _loop_settings(self, n_rows: int) -> _loop.LoopSettings:
        """The hyper-parameters the loop reads, for training on ``n_rows`` rows."""
        return _loop.LoopSettings(
            name=type(self).__name__,
            batch_size=self._batch_size(n_rows),
            tol=None if self.tol is None else float(self.tol),
            n_iter_no_change=int(self.n_iter_no_change),
            kl_annealing=self.kl_annealing,
            mc_samples=int(self.mc_samples),
            verbose=bool(self.verbose),
        )

    # --- memory ----------------------------------------------------------------------
    def _memory_layers(self, n_features: int, n_outputs: int) -> list[_memory.Layer] | None:
        """The network's layers for the memory estimate, without building it (custom
        modules: the fitted one, the instance, or the callable's module built on the
        'meta' device, which allocates nothing); None when they cannot be known."""
        if self.module is None:
            return _memory.mlp_layers(n_features, self._hidden_layer_sizes(), n_outputs)
        net = self._custom_network(n_features, n_outputs, fitted=True)
        if net is None:  # a module that cannot be built on 'meta': checked when built
            return None
        return _memory.module_layers(net) or None

    def _custom_network(self, n_features: int, n_outputs: int, fitted: bool) -> nn.Module | None:
        """The custom ``module`` without building it for real: the fitted one (when ``fitted``),
        the instance, or the callable's module built on the 'meta' device, which allocates
        nothing; None when it cannot be built there."""
        net = self.__dict__.get("module_") if fitted else None
        if net is None and isinstance(self.module, nn.Module):
            net = self.module
        if net is None:
            try:
                with torch.device("meta"):
                    net = make_module(self.module, n_features, n_outputs)
            except Exception:  # noqa: BLE001 - any failure means the size is unknown here
                return None
        return net

    def _fit_memory_parts(
        self, X: np.ndarray, family: PosteriorFamily, continuing: bool = False, incremental: bool = False
    ) -> list[_memory.MemoryPart]:
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
        # early_stopping="auto" counts the best epoch's copy on every network (an upper bound)
        copies = 1 + int(continuing) + (0 if incremental else 2 + int(bool(self.early_stopping)))
        for p in parts[:-1]:  # all but the step: the posterior and its state
            p.nbytes *= 1 + copies * p.copied
            p.what += f" (with {copies} snapshot copies)"
        parts.append(
            _memory.MemoryPart(2 * X.shape[0] * X.shape[1] * itemsize, "the training data as tensors", "fewer rows")
        )
        return parts

    def _check_fit_memory(
        self, X: np.ndarray, family: PosteriorFamily, continuing: bool = False, incremental: bool = False
    ) -> None:
        """Refuse with ``MemoryLimitError`` before anything is allocated when the fit's
        estimated memory is above the limit (``skbayes.linear_model.MEMORY_LIMIT_GIB``)."""
        parts = self._fit_memory_parts(X, family, continuing, incremental)
        _memory.check_memory(parts, f"{type(self).__name__}.{'partial_fit' if incremental else 'fit'}")

    # --- streams (partial_fit) ------------------------------------------------------
    def _stream_total(self, n_samples_total: float | None) -> float | None:
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

    def _stream_start(
        self, X: np.ndarray, y: np.ndarray, sw: np.ndarray | None, reset: bool, classes: ArrayLike | None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, bool, ArrayLike | None]:
        """The rows a ``partial_fit`` call trains on, and whether it (re)initialises.

        Until ``iblm_batch_size`` rows have been seen, the target scaling and the start
        are set from too few rows to be trusted: the stream's first rows are kept, and
        every call re-initialises from all of them (the result is that of one
        ``partial_fit`` on the rows so far). Returns ``(X, y, sample_weight, reset, classes)``.
        """
        buf = None if reset else self.__dict__.get("_stream_rows")
        if buf is not None:
            # the checks of a continuing call (classes, labels, the targets' shape) before the
            # kept rows are joined: the re-initialisation below would not make them
            self._prepare_targets(y, first=False, classes=classes)
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

    def _stream_average_begin(
        self, reset: bool, n_total: float | None, n_call: float, n_rows: int
    ) -> Callable[[int, torch.Tensor], None] | None:
        """Start a ``partial_fit`` call of a stream (``n_samples_total`` never given): the
        fitted mean is the average of the means its steps visit, while training continues
        from the last of them. Each mean is weighted by the rows of its step times the rows
        seen (``n_call``: this call's count, sample weights summed, over ``n_rows`` rows),
        the start's by its rows squared, so that the late means count most. Returns the
        loop's ``on_step`` (None with ``n_samples_total``: the calls are then the epochs
        of a fit on that many rows, without averaging)."""
        if n_total is not None:
            self.__dict__.pop("_stream_average", None)
            self.__dict__.pop("_stream_iterate", None)
            return None
        if reset or self.__dict__.get("_stream_average") is None:
            self._stream_average = _loop.IterateAverage(self.posterior_.mean_t, self._n_seen * self._n_seen)
        else:
            self.posterior_.mean_t = self._stream_iterate
        self._stream_average_before = copy.deepcopy(self._stream_average)
        per_row = self._n_seen * n_call / n_rows
        average = self._stream_average
        return lambda rows, mean: average.add(mean, rows * per_row)

    def _stream_average_end(self, outcome: _loop.Outcome) -> None:
        """End a stream's call: keep its last mean and report the average (a call that
        diverged, and so reverted to its start, adds nothing to the average)."""
        before = self.__dict__.pop("_stream_average_before", None)
        if self.__dict__.get("_stream_average") is None:
            return
        if outcome.diverged:
            self._stream_average = before
        self._stream_iterate = self.posterior_.mean_t.clone()
        self.posterior_.mean_t = self._stream_average.value()

    def _stream_order_add(self, y: np.ndarray, y_enc: np.ndarray) -> None:
        """Add a ``partial_fit`` call's rows to the stream's order statistics: a runs test of
        the classes (classifiers, from the encoded labels) or a trend test of the targets
        against the call number (regressors, from the targets as given)."""
        state = self.__dict__.get("_stream_order")
        if is_classifier_face(self):
            self._stream_order = _loop.stream_order_update(state, y_enc, len(self.classes_))
        else:
            y2 = np.asarray(y, dtype=np.float64)
            self._stream_order = _loop.stream_trend_update(state, y2.reshape(y2.shape[0], -1))

    def _warn_stream_order(self) -> None:
        """Warn once per stream when its rows arrive far from a random order."""
        state = self.__dict__.get("_stream_order")
        if state is None or state["warned"] or state["n"] < _loop.STREAM_ORDER_MIN_ROWS:
            return
        if is_classifier_face(self):
            z, changes, expected = _loop.stream_order_z(state)
            what = (
                f"the class changes about {changes:.0f} times between consecutive rows, where a random "
                f"order of the same rows gives about {expected:.0f}; runs test z = {z:.1f}"
            )
            ordered = z < -_loop.STREAM_ORDER_Z
        else:
            z, r = _loop.stream_trend_z(state)
            what = (
                f"the targets trend with the order of the calls: correlation {r:.2f} between the call "
                f"number and the target, where a random order gives about 0 +- {1 / math.sqrt(state['n'] - 1):.2f}"
            )
            ordered = z > _loop.STREAM_ORDER_Z
        if not ordered:
            return
        state["warned"] = True
        _warn(
            f"{type(self).__name__}.partial_fit: the {state['n']} rows streamed so far arrive in an "
            f"order a shuffled stream would almost never show ({what}). Each call moves the model "
            "towards the rows it holds and earlier rows are not seen again, so a stream ordered by "
            "class or by target learns far less than one fit on the same rows: shuffle the rows "
            "before streaming them, or collect rows until each call holds every class.",
            StreamOrderWarning,
        )

    def _warn_small_stream(self) -> None:
        if self.__dict__.get("_stream_rows") is None:
            return
        _warn(
            f"{type(self).__name__}.partial_fit has seen fewer rows than the "
            f"iblm_batch_size={self.iblm_batch_size} it needs to set the target scaling and the start: "
            "they are re-estimated from all rows seen so far at each call until then, and a model "
            "fitted on so few rows is not to be trusted.",
            SmallStreamWarning,
        )

    def _check_sample_weight(
        self, sample_weight: ArrayLike, X: np.ndarray, y: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """Validated sample weights (a new float64 array when anything is dropped or
        converted; the caller's array is never written to) and the rows with a positive
        weight: ``(X, y, sample_weight)``. A row of weight zero has no influence on the
        objective, so it is dropped before anything else looks at the data. Weights that
        are all one are no weights: they come back as None, so that such a fit is the
        unweighted one to the last bit (the weighted formulas, a weighted mean or
        variance, round differently)."""
        sw = check_sample_weight(sample_weight, X)
        if bool(np.all(sw == 1.0)):
            return X, y, None
        keep = sw > 0
        if not keep.all():
            X, y, sw = X[keep], np.asarray(y)[keep], sw[keep]
        return X, y, sw

    def _warn_input_scale(self, X: np.ndarray) -> None:
        with np.errstate(over="ignore", invalid="ignore"):
            std = np.std(X, axis=0, dtype=np.float64)
        # constant columns carry no scale; their std can be rounding (1e-14 for a column of one
        # shifted value), so they are found by their range, not by std > 0
        std = std[np.ptp(X, axis=0) > 0]
        if std.size and (std.min() < INPUT_SCALE[0] or std.max() > INPUT_SCALE[1]):
            _warn(
                f"{type(self).__name__}: the standard deviations of the input columns range from "
                f"{std.min():.3g} to {std.max():.3g}. The network's priors and initialisation assume "
                "features of roughly unit scale, and fits on inputs this far from it can fail; "
                "standardise them (a StandardScaler in a Pipeline).",
                InputScaleWarning,
            )

    def _warn_poor_fit(self, X: np.ndarray, y_enc: np.ndarray, family: PosteriorFamily) -> None:
        """Warn when the fitted predictive scores the training data (a fixed subsample)
        clearly worse than the best constant prediction does."""
        n = min(X.shape[0], 1000)
        rows = np.linspace(0, X.shape[0] - 1, n).astype(np.int64)
        f = self._outputs(self._tensor(X[rows]), n_samples=min(self._n_predict_samples(), 8))
        worse, fit_score, const_score = self._training_fit_vs_constant(f, np.asarray(y_enc)[rows])
        if worse:
            _warn(
                f"{type(self).__name__}: the fitted model predicts its own training data worse than a "
                f"constant does ({fit_score:.4g} against {const_score:.4g}). The fit has likely gone "
                f"wrong: the step sizes may be too large ({family.step_sizes()}) or the inputs badly "
                "scaled (standardise them).",
                PoorFitWarning,
            )

    def _choose_kl_weight(self, X: ArrayLike, y: ArrayLike, sample_weight: ArrayLike | None) -> None:
        """``kl_weight`` given as candidates: fit a copy of the estimator at each on the rows
        left after holding out ``validation_fraction`` of them (stratified for a classifier),
        score each by the mean log predictive density of the held-out rows (weighted by their
        ``sample_weight``), and keep in ``kl_weight_`` (its value, ``'auto'`` resolved) the first
        candidate unless the best beats it by more than one standard error of the rows' paired
        differences (the one-standard-error rule), every score in ``kl_weight_scores_``. A
        candidate whose fit diverged scores ``-inf``."""
        from sklearn.base import clone

        X, y = self._validate_X_y(X, y, reset=True)
        sw = None
        if sample_weight is not None:
            X, y, sw = self._check_sample_weight(sample_weight, X, y)
        if is_classifier_face(self):  # the error a fit on these rows would give, not a candidate's
            cast("BayesianNetworkClassifier", self)._check_labels(unique_labels(y), sw)
        arrays = (X, y) if sw is None else (X, y, sw)
        seed = int(check_random_state(self.random_state).randint(np.iinfo(np.int32).max))
        parts = self._hold_out(arrays, seed, f"kl_weight={self.kl_weight!r} chooses on")
        fit_part, held = parts[0::2], parts[1::2]
        wv = held[2] if sw is not None else None
        values, densities = [], []
        for candidate in self.kl_weight:
            est = clone(self).set_params(kl_weight=candidate, warm_start=False)
            with warnings.catch_warnings():  # the chosen fit below warns for itself
                warnings.simplefilter("ignore")
                est.fit(*fit_part[:2], sample_weight=None if sw is None else fit_part[2])
            values.append(est.kl_weight_)
            lp = np.full(held[0].shape[0], -np.inf) if est.diverged_ else _heldout_log_densities(est, *held[:2])
            densities.append(np.where(np.isfinite(lp), lp, -np.inf))
        scores = np.array([np.average(lp, weights=wv) for lp in densities])
        best = int(np.argmax(scores))
        if best > 0 and np.isfinite(scores[0]):  # the first candidate unless beaten by over one SE
            gain, se = _paired_gain(densities[best], densities[0], wv)
            best = best if gain > se else 0
        self.kl_weight_ = values[best]
        self.kl_weight_scores_ = scores
        if self.verbose:
            table = ", ".join(f"{v:g}: {s:.4f}" for v, s in zip(values, scores))
            print(f"kl_weight: held-out log-likelihood {table}; chose {self.kl_weight_:g}")

    def _validation_split(
        self, X: np.ndarray, y: np.ndarray, sample_weight: np.ndarray | None = None
    ) -> tuple[np.ndarray, ...]:
        """Hold out ``validation_fraction`` of the rows: ``(X, y, Xv, yv)``, or with
        sample weights ``(X, y, w, Xv, yv, wv)`` (the weights split with their rows)."""
        seed = int(np.random.RandomState(self._predict_seed).randint(np.iinfo(np.int32).max))
        arrays = (X, y) if sample_weight is None else (X, y, sample_weight)
        parts = self._hold_out(arrays, seed, "early_stopping with")
        return tuple(parts[0::2]) + tuple(parts[1::2])

    def _hold_out(self, arrays: tuple[np.ndarray, ...], seed: int, purpose: str) -> list[np.ndarray]:
        """``train_test_split`` of ``arrays`` (``X, y[, sample_weight]``) holding out
        ``ceil(validation_fraction * n)`` rows; ``purpose`` opens the error raised when either
        side would be empty. A classifier's split is stratified by ``y``, and keeps at least one
        row of every class on the training side: where stratifying cannot (a class of one row,
        or fewer training rows than classes), the held-out rows are drawn at random from the
        rows that leave each class one, and an error says so when too few rows are left."""
        from sklearn.model_selection import train_test_split

        n = arrays[0].shape[0]
        n_val = math.ceil(float(self.validation_fraction) * n)
        if n_val < 1 or n - n_val < 1:
            raise ValueError(
                f"{purpose} validation_fraction={self.validation_fraction} leaves an empty training or "
                f"validation set for {n} samples."
            )
        if not is_classifier_face(self):
            return list(train_test_split(*arrays, test_size=n_val, random_state=seed))
        y = np.asarray(arrays[1])
        labels, codes = np.unique(y, return_inverse=True)
        try:
            parts = list(train_test_split(*arrays, test_size=n_val, random_state=seed, stratify=y))
            if np.unique(parts[2]).size == labels.size:
                return parts
        except ValueError:  # a class too rare to stratify
            pass
        order = np.random.RandomState(seed).permutation(n)
        first = np.zeros(n, dtype=bool)  # each class's first row in the random order stays in training
        first[order[np.unique(codes[order], return_index=True)[1]]] = True
        spare = order[~first[order]]
        if spare.size < n_val:
            raise ValueError(
                f"{purpose} validation_fraction={self.validation_fraction}: holding out {n_val} of {n} rows "
                f"would leave some of the {labels.size} classes without a training row; use a smaller "
                "validation_fraction or more rows."
            )
        held = spare[:n_val]
        train = order[~np.isin(order, held)]
        return [part for a in arrays for part in (a[train], a[held])]

    def _finalize(self) -> None:
        """Fitted attributes derived from the trained state (hook of the faces)."""

    # --- prediction ---------------------------------------------------------------------
    def _predict_outputs(self, X: ArrayLike, n_samples: int | None = None, seed: int | None = None) -> torch.Tensor:
        """Validate ``X`` and return network outputs ``(n_samples, n_rows, n_outputs)`` (a
        tensor) under posterior weight samples.

        The samples are drawn from a generator seeded at fit time, so a fitted
        model's predictions are deterministic, and the same samples serve every
        row, so a row's prediction never depends on the other rows. The sampled
        predictive draws whole weight vectors here (``sample_outputs``, ``sample_y``:
        each sample is one network), not the per-row draws of its averages.
        """
        check_is_fitted(self, "posterior_")
        X = self._validate_X(X, reset=False)
        with self._threads(self._prediction_work(X)):
            return self._predictive_outputs(self._tensor(X), n_samples, seed, marginal=False)

    def _predictive_outputs(
        self,
        Xt: torch.Tensor,
        n_samples: int | None = None,
        seed: int | None = None,
        samples: list[Any] | None = None,
        marginal: bool = True,
    ) -> torch.Tensor:
        """Outputs ``(S, rows, n_outputs)`` under the predictive in use: the network at weight
        samples (``samples`` and ``marginal``: see :meth:`_outputs`), or draws of the
        linearised network's Gaussian outputs (``predictive='glm'``)."""
        if self._uses_glm():
            mean, cov = self._glm_moments_t(Xt)
            S = self._n_predict_samples() if n_samples is None else int(n_samples)
            seed = self._predict_seed if seed is None else seed
            gen = torch.Generator(device=self._device).manual_seed(int(seed))
            return gaussian_draws(mean, cov, S, gen)
        return self._outputs(Xt, n_samples, seed, samples=samples, marginal=marginal, prediction=True)

    def _prediction_param(self, name: str, absent: Any) -> Any:
        """A parameter that prediction reads (``set_params`` may change it after fitting),
        validated when read; ``absent`` for estimators without it."""
        value = getattr(self, name, absent)
        validate_params(type(self).__name__, {name: value}, {name: self._constraints()[name]})
        return value

    def _uses_glm(self, posterior: PosteriorTensors | None = None) -> bool:
        """True when predictions from ``posterior`` (default ``posterior_``) take the linearised
        (GLM) predictive (``predictive='glm'``, or what ``'auto'`` stands for at its size)."""
        value = self._prediction_param("predictive", "sampled")  # estimators without it sample
        if value == "auto":
            posterior = self.posterior_ if posterior is None else posterior
            value = self._resolve_auto("predictive", int(posterior.n_params))
        return bool(value == "glm")

    def _glm_moments_t(self, Xt: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Mean ``(n, k)`` and covariance ``(n, k, k)`` of the linearised network's outputs."""
        posterior = cast("CovarianceTensors", self.posterior_)  # a Gaussian one: MC dropout has no predictive
        mean, cov = linearized_moments(posterior, self._forward, Xt)
        self._check_finite("network outputs", mean, cov)
        return mean, cov

    def _glm_moments(self, X: ArrayLike) -> tuple[torch.Tensor, torch.Tensor]:
        """``_glm_moments_t`` of validated user inputs."""
        check_is_fitted(self, "posterior_")
        X = self._validate_X(X, reset=False)
        with limit_torch_threads():
            return self._glm_moments_t(self._tensor(X))

    def _chunk_rows(self, n_samples: int | None = None) -> int:
        """Rows per prediction chunk: their network outputs under ``n_samples`` weight samples
        (and the widest layer's activations) fit in ``skbayes._memory.PREDICT_CHUNK_BYTES``.
        A multiple of the 2048 rows ``_outputs`` evaluates at once when it is larger
        (:func:`skbayes._memory.pass_shape`)."""
        S = self._n_predict_samples() if n_samples is None else int(n_samples)
        layers = _memory.module_layers(self.module_) or [_memory.Layer(1, 1)]
        widest = max(max(l.fan_in, l.fan_out) * l.positions for l in layers)
        rows = _memory.row_chunk(S, self._likelihood.n_outputs, self._dtype.itemsize, widest)
        return rows - rows % 2048 if rows >= 2048 else rows

    def _predict_rows(
        self,
        X: ArrayLike,
        reduce: Callable[[torch.Tensor], tuple[_Rows, ...]],
        n_samples: int | None = None,
        seed: int | None = None,
    ) -> tuple[_Rows, ...]:
        """Validate ``X`` and apply ``reduce`` to the network outputs ``(S, rows, n_outputs)`` of
        one chunk of rows at a time (:meth:`_chunk_rows`): memory independent of the number
        of rows. ``reduce`` returns a tuple of per-row results (rows first); the chunks'
        results are written into result arrays on the CPU allocated once (many small per-chunk
        results kept alive between the chunks' large temporaries fragment the C heap: RSS grew
        by 1 GiB over 2 million rows). Every chunk takes the same weight samples, so the
        result equals that of one chunk: they are drawn once and kept for the later chunks
        when they take at most ``PREDICT_SAMPLES_BYTES`` (else each chunk draws them again)."""
        check_is_fitted(self, "posterior_")
        X = self._validate_X(X, reset=False)
        rows = self._chunk_rows(n_samples)
        n = X.shape[0]
        results: list[_Rows] = []
        S = self._n_predict_samples() if n_samples is None else int(n_samples)
        keep = n > rows and S * int(self.posterior_.n_params) * self._dtype.itemsize <= _memory.PREDICT_SAMPLES_BYTES
        samples: list[Any] | None = [] if keep else None
        with limit_torch_threads():
            for r0 in range(0, n, rows):
                out = reduce(self._predictive_outputs(self._tensor(X[r0 : r0 + rows]), n_samples, seed, samples))
                if not results:  # the whole result is allocated once, before the chunks fill it
                    results = [_empty_rows_like(o, n) for o in out]
                for dest, o in zip(results, out):
                    dest[r0 : r0 + o.shape[0]] = o.cpu() if isinstance(o, torch.Tensor) else o
        return tuple(results)

    def _outputs(
        self,
        Xt: torch.Tensor,
        n_samples: int | None = None,
        seed: int | None = None,
        posterior: PosteriorTensors | None = None,
        samples: list[Any] | None = None,
        marginal: bool = False,
        prediction: bool = False,
    ) -> torch.Tensor:
        """Network outputs ``(S, rows, n_outputs)`` at ``S`` weight samples (``predict_samples``
        unless ``n_samples``) of ``posterior`` (default ``posterior_``), drawn from a
        generator seeded with ``seed`` (default: the fit's prediction seed), in blocks of
        :meth:`_sample_block` samples (which depend on the network and ``S``, not on the rows,
        so a row's draws never depend on the other rows), run through the network
        :func:`skbayes._memory.pass_shape` samples and rows at a time. ``samples``: a list
        that keeps the drawn blocks, reused by later calls with the same list (the same
        draws: a prediction's row chunks draw them once).

        ``prediction``: a prediction's draws (the posterior's ``sample_t(prediction=True)``:
        float32 random numbers, widened); the fit's own calls (validation scores, the
        poor-fit check) leave it False and keep their draws.

        ``marginal``: only each row's distribution of outputs is needed (a predictive), not
        their joint over rows. Where the posterior draws the first layer's outputs exactly
        without its weights (:meth:`_draws_first_layer`), they replace the first layer's
        weight samples: the same distribution for every row, at the cost of one pass over
        the first layer instead of one per sample."""
        S = self._n_predict_samples() if n_samples is None else int(n_samples)
        seed = self._predict_seed if seed is None else seed
        gen = torch.Generator(device=self._device).manual_seed(int(seed))
        posterior = self.posterior_ if posterior is None else posterior
        # the first layer's outputs drawn row by row (a Kronecker posterior of a dense network)
        kron = posterior if marginal and self._draws_first_layer(posterior) else None
        spec = self._forward.spec
        outs = []
        block = self._sample_block(S)
        per_pass, piece = _memory.pass_shape(Xt.shape[0], block)
        with torch.no_grad():
            pieces = [Xt[r0 : r0 + piece] for r0 in range(0, Xt.shape[0], piece)]
            if kron is not None:  # the first layer's outputs at the mean and their spread, once per piece
                moments = [kron.first_layer_moments_t(Xr) for Xr in pieces]
            draws: Any  # weight samples, or (weight samples, normal draws) for the first layer's outputs
            for i, s0 in enumerate(range(0, S, block)):
                k = min(block, S - s0)
                if samples is not None and i < len(samples):
                    draws = samples[i]
                else:
                    if kron is not None:
                        draws = kron.sample_rest_t(k, generator=gen, prediction=prediction)
                    else:
                        draws = posterior.sample_t(k, generator=gen, prediction=prediction)
                    if samples is not None:
                        samples.append(draws)
                for t0 in range(0, k, per_pass):
                    rows = []
                    for j, Xr in enumerate(pieces):
                        if kron is not None and spec is not None:
                            theta, eps = (d[t0 : t0 + per_pass] for d in draws)
                            first = kron.first_layer_outputs_t(moments[j], eps)
                            rows.append(spec.forward(theta, Xr, first_output=first))
                        else:
                            rows.append(self._forward(draws[t0 : t0 + per_pass], Xr))
                    outs.append(torch.cat(rows, 1))
        f = torch.cat(outs, 0)
        self._check_finite("network outputs", f)
        return f

    def _draws_first_layer(self, posterior: PosteriorTensors) -> TypeGuard[KroneckerGaussian]:
        """Whether ``posterior`` draws the first layer's outputs of this network exactly
        (:meth:`~skbayes.posteriors.KroneckerGaussian.first_layer_outputs_t`): a Kronecker
        posterior of a network of dense layers whose first step is its first block."""
        spec = self._forward.spec
        if spec is None or not isinstance(posterior, KroneckerGaussian):
            return False
        first = posterior.layers[0]
        return spec.steps[0][0] == "linear" and not first.is_conv and first.w_off == spec.linears[0][0]

    def _check_finite(self, what: str, *values: torch.Tensor | np.ndarray | float) -> None:
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

    def _sample_seed(self, random_state: RandomStateLike) -> int | None:
        if random_state is None:
            return None
        return int(check_random_state(random_state).randint(np.iinfo(np.int32).max))

    @_scoped_threads
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
            Number of weight samples; None uses the prediction methods' number
            (``predict_samples``; ``'auto'`` is up to 1000 on small networks, and
            the result holds ``n_samples x n_rows x n_outputs`` values:
            pass a smaller number for many rows).
        random_state : int, RandomState instance or None, default=None
            Seeds the weight samples. None gives the samples the prediction
            methods use (fixed at fit time), so the result is deterministic.

        Returns
        -------
        outputs : ndarray of shape (n_samples, n_rows, n_outputs)
            With ``predictive='glm'``, draws of the linearised network's Gaussian
            outputs per row (the same standard normal draws for every row).
            Regressors: the network's mean function in the units of ``y``
            (``n_outputs`` = 1, or the number of targets of a 2-D ``y``; without
            observation noise). Classifiers: the
            logits (one column for two classes, the log-odds of ``classes_[1]``).
        """
        if n_samples is not None:
            validate_params(type(self).__name__, {"n_samples": n_samples}, {"n_samples": _POSITIVE_INT})
        f = self._predict_outputs(X, n_samples=n_samples, seed=self._sample_seed(random_state))
        out = self._output_units(f.cpu().numpy().astype(np.float64))
        self._check_finite("network outputs (in the units of y)", out)
        return out

    def _output_units(self, f: np.ndarray) -> np.ndarray:
        return f


def _weighted_mean(values: torch.Tensor, weights: np.ndarray) -> float:
    """``sum_i w_i v_i / sum_i w_i`` of a tensor ``values`` and numpy ``weights`` (as
    ``values.mean()`` computes it when every weight is 1)."""
    w = torch.as_tensor(np.asarray(weights), dtype=values.dtype, device=values.device)
    return float((values * w).sum() / w.sum())


def is_classifier_face(est: BayesianNetwork) -> bool:
    return isinstance(est, BayesianNetworkClassifier)


class BayesianNetworkRegressor(PredictIntervalMixin, RegressorMixin, BayesianNetwork):
    """Gaussian-likelihood regression on standardised targets (not public)."""

    _likelihood: Gaussian
    # The targets' mean and standard deviation: floats, or arrays of shape (n_targets,)
    # after a 2-D ``y`` (``_is_multi``).
    _y_mean: Any
    _y_std: Any

    _parameter_constraints = {
        "noise_precision": [Options(("auto",)), Interval(numbers.Real, 0, None, closed="neither")],
        "noise_prior": [Check(_is_gamma_prior, "a tuple (shape, rate) of two positive numbers")],
    }

    def _validate_X_y(self, X: ArrayLike, y: ArrayLike, reset: bool) -> tuple[np.ndarray, np.ndarray]:
        return validate_data(self, X, y, reset=reset, dtype=[np.float64, np.float32], y_numeric=True, multi_output=True)

    def _n_classes(self) -> int | None:
        return None

    def _prepare_targets(
        self, y: np.ndarray, first: bool, classes: ArrayLike | None = None, sample_weight: np.ndarray | None = None
    ) -> None:
        y = np.asarray(y, dtype=np.float64)
        n_targets = y.shape[1] if y.ndim == 2 else None  # None: a 1-D y
        if not first:
            if n_targets != self.__dict__.get("_n_targets"):
                fitted = self.__dict__.get("_n_targets")
                raise ValueError(
                    f"y has shape {y.shape}, but {type(self).__name__} was fitted on "
                    + ("a 1-D y" if fitted is None else f"a y of {fitted} columns")
                    + "; a continuing fit needs targets of the same shape."
                )
            return
        self._n_targets = n_targets
        if n_targets is not None:  # standardise every column on its own
            if sample_weight is None:
                self._y_mean = y.mean(0)
                std = y.std(0)
            else:
                self._y_mean = np.average(y, axis=0, weights=sample_weight)
                std = np.sqrt(np.average((y - self._y_mean) ** 2, axis=0, weights=sample_weight))
            self._y_std = np.where((std > 0) & np.isfinite(std), std, 1.0)
            return
        if sample_weight is None:
            self._y_mean = float(y.mean())
            std = float(y.std())
        else:  # the weighted moments: those of the data with rows repeated by integer weights
            self._y_mean = float(np.average(y, weights=sample_weight))
            std = float(np.sqrt(np.average((y - self._y_mean) ** 2, weights=sample_weight)))
        self._y_std = std if std > 0 and np.isfinite(std) else 1.0

    def _make_likelihood(self) -> Gaussian:
        tau = self.noise_precision
        k = self.__dict__.get("_n_targets")
        if tau == "auto":
            a0, b0 = (float(v) for v in self.noise_prior)
            return Gaussian(GaussianNoise(learn=True, a0=a0, b0=b0, n_outputs=k))
        if k is not None:
            return Gaussian(GaussianNoise(tau=float(tau) * self._y_std**2, learn=False, n_outputs=k))
        return Gaussian(GaussianNoise(tau=float(tau) * self._y_std**2, learn=False))

    def _refresh_likelihood(self, n_rows: int) -> None:
        old, new = self._likelihood.noise, self._make_likelihood()
        if new.noise.learn and old.learn:  # the learned q(tau) continues under the current noise_prior
            old.a0, old.b0 = new.noise.a0, new.noise.b0
        elif not new.noise.learn:
            if old.learn or old.tau != new.noise.tau:
                self._likelihood = new
        else:  # fixed -> learned: q(tau) starts at the fixed value, as from n_rows observations
            new.start_from(old.noise_variance, min(int(self.iblm_batch_size), n_rows))
            self._likelihood = new

    def _encode_targets(self, y: np.ndarray) -> np.ndarray:
        return (np.asarray(y, dtype=np.float64) - self._y_mean) / self._y_std

    def _target_tensor(self, y: np.ndarray) -> torch.Tensor:
        return self._tensor(y)

    def _finalize(self) -> None:
        noise = self._likelihood.noise
        self.noise_precision_ = noise.tau_mean / self._y_std**2
        if self.__dict__.get("_n_targets") is not None:
            self.noise_std_ = np.sqrt(noise.noise_variance) * self._y_std
            return
        self.noise_std_ = math.sqrt(noise.noise_variance) * self._y_std

    def _is_multi(self) -> bool:
        return self.__dict__.get("_n_targets") is not None

    def _validation_score(
        self,
        Xv: torch.Tensor,
        yv: np.ndarray,
        wv: np.ndarray | None = None,
        posterior: PosteriorTensors | None = None,
    ) -> float:
        """Mean (weighted by ``wv``) log predictive density of held-out rows under ``posterior``,
        by the predictive that predictions take (early stopping keeps the epoch best by it):
        the linearised network's Gaussian where ``predictive`` is (or stands for) 'glm', else
        the mixture over up to 16 weight samples."""
        if self._uses_glm(posterior):
            mean, cov = linearized_moments(cast("CovarianceTensors", posterior), self._forward, Xv)
            var = self._glm_variance(cov, cov.dtype)
            y = self._tensor(yv).reshape(mean.shape)
            lp = (-0.5 * (y - mean) ** 2 / var - 0.5 * torch.log(2 * math.pi * var)).sum(-1)
            return float(lp.mean()) if wv is None else _weighted_mean(lp, wv)
        if self._is_multi():  # the joint density of a row's targets
            f = self._outputs(Xv, n_samples=min(self._n_predict_samples(), 16), posterior=posterior)
            y = self._tensor(yv)
            var = torch.as_tensor(self._likelihood.noise.noise_variance, dtype=f.dtype, device=f.device)
            logp = (-0.5 * (y[None] - f) ** 2 / var - 0.5 * torch.log(2 * math.pi * var)).sum(-1)
            lp = torch.logsumexp(logp, 0) - math.log(f.shape[0])
            return float(lp.mean()) if wv is None else _weighted_mean(lp, wv)
        f = self._outputs(Xv, n_samples=min(self._n_predict_samples(), 16), posterior=posterior)[..., 0]
        y = self._tensor(yv)
        var = cast(float, self._likelihood.noise.noise_variance)  # one target: a number
        logp = -0.5 * (y[None] - f) ** 2 / var - 0.5 * math.log(2 * math.pi * var)
        lp = torch.logsumexp(logp, 0) - math.log(f.shape[0])
        return float(lp.mean()) if wv is None else _weighted_mean(lp, wv)

    def _output_units(self, f: np.ndarray) -> np.ndarray:
        return self._y_mean + self._y_std * f

    def _training_fit_vs_constant(self, f: torch.Tensor, y: np.ndarray) -> tuple[bool, float, float]:
        """Mean squared error of the predictive mean on (standardised) training targets
        against that of their mean; 'worse' beyond twice the constant's."""
        if self._is_multi():
            mean = f.double().mean(0).cpu().numpy()
            mse, const = float(np.mean((mean - y) ** 2)), float(np.mean(np.var(y, axis=0)))
            return mse > 2.0 * const + 1e-12, mse, const
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
        y : array-like of shape (n_samples,) or (n_samples, n_targets)
            Real-valued targets. A 2-D ``y`` gives the network one output per
            target, each standardised on its own with its own noise precision.
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
        y : array-like of shape (n_samples,) or (n_samples, n_targets)
            Real-valued targets. A 2-D ``y`` gives the network one output per
            target, each standardised on its own with its own noise precision.
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
            after a single pass the posterior is weighed against all the data seen;
            the posterior's mean is then the weighted average of the means the
            stream's steps visit (the next call trains on from the last of them).
            Given, the calls are the epochs of a ``fit`` on that many rows, without
            averaging. Remembered for later calls that do not pass it. See the
            :ref:`streams section <streams-section>` of the documentation.

        Returns
        -------
        self : object
            Fitted estimator.
        """
        return self._fit(X, y, incremental=True, sample_weight=sample_weight, n_samples_total=n_samples_total)

    def _glm_variance(self, cov: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        """The linearised predictive's variance ``(n, k)`` in ``dtype``: the diagonal of the
        outputs' covariance ``cov`` plus the noise variance."""
        var = torch.diagonal(cov, dim1=-2, dim2=-1).to(dtype).clamp_min(0.0)
        return var + torch.as_tensor(self._likelihood.noise.noise_variance, dtype=dtype, device=var.device)

    def _moments(self, X: ArrayLike) -> tuple[torch.Tensor, torch.Tensor]:
        check_is_fitted(self, "posterior_")
        if self._uses_glm():
            mean, cov = self._glm_moments(X)
            var = self._glm_variance(cov, torch.float64)
            if self._is_multi():
                return mean.double(), var
            return mean[:, 0].double(), var[:, 0]
        noise_variance = self._likelihood.noise.noise_variance
        if self._is_multi():
            noise = torch.as_tensor(noise_variance, dtype=torch.float64)

            def multi_moments(f: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
                f = f.double()
                return f.mean(0), f.var(0, unbiased=False) + noise.to(f.device)

            mean, var = self._predict_rows(X, multi_moments)
            return mean, var

        def moments(f: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            f = f[..., 0].double()  # float64 moments: no overflow of a float32 variance
            return f.mean(0), f.var(0, unbiased=False) + cast(float, noise_variance)  # one target: a number

        mean, var = self._predict_rows(X, moments)
        return mean, var

    @_scoped_threads
    def predict(self, X: ArrayLike, return_std: bool = False) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
        """Posterior predictive mean (and standard deviation).

        The mean averages the network output over ``predict_samples`` weight
        samples; the standard deviation combines the spread of those outputs
        (epistemic) with the learned noise (aleatoric):
        ``std^2 = Var_q[f(x)] + E_q[1 / tau]``. With ``predictive='glm'`` the
        mean is ``f(x; mu)`` and ``Var_q[f(x)]`` is the linearised network's
        ``J(x) Sigma J(x)^T``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Inputs.
        return_std : bool, default=False
            Also return the predictive standard deviation.

        Returns
        -------
        y_mean : ndarray of shape (n_samples,) or (n_samples, n_targets)
            Predictive mean (the shape of ``y`` at fit time).
        y_std : ndarray of shape (n_samples,) or (n_samples, n_targets)
            Predictive standard deviation (only if ``return_std`` is True).
        """
        mean, var = self._moments(X)
        if self._is_multi():
            y_mean = self._y_mean + self._y_std * mean.cpu().numpy()
            self._check_finite("predictive means", y_mean)
            if not return_std:
                return y_mean
            y_std = self._y_std * np.sqrt(var.cpu().numpy())
            self._check_finite("predictive standard deviations", y_std)
            return y_mean, y_std
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
        y_std : ndarray of shape (n_samples,) or (n_samples, n_targets)
            ``predict(X, return_std=True)[1]``.
        """
        return self.predict(X, return_std=True)[1]

    @_scoped_threads
    def predict_quantiles(self, X: ArrayLike, quantiles: ArrayLike = (0.05, 0.5, 0.95)) -> np.ndarray:
        """Compute quantiles of the posterior predictive distribution of ``y``.

        The predictive that :meth:`predict` summarises and :meth:`log_likelihood` scores:
        with the sampled predictive, per point the mixture ``(1/S) sum_s N(f_s(x),
        noise_std_^2)`` over the ``predict_samples`` draws of the network's output that
        :meth:`predict` averages; with ``predictive='glm'``, the Gaussian ``N(f(x; mu), J Sigma J^T +
        noise_std_^2)``. A mixture's quantiles are exact roots of its distribution
        function (Newton's method safeguarded by bisection, to ``1e-10`` times
        ``noise_std_``), not read off random draws, so they are deterministic and
        have no Monte Carlo error beyond that of the weight samples. A mixture has
        heavier tails than the Gaussian of its mean and standard deviation, so its
        intervals can differ from ``mean -+ z std``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Inputs.
        quantiles : float or array-like of shape (n_quantiles,), default=(0.05, 0.5, 0.95)
            Probabilities in (0, 1).

        Returns
        -------
        y_quantiles : ndarray of shape (n_samples, n_quantiles) or (n_samples, n_targets, n_quantiles)
            The predictive quantiles of each point (per target after a fit on a 2-D
            ``y``: the marginal quantiles of each target), one column per entry of
            ``quantiles``.

        See Also
        --------
        predict_interval : Central intervals.
        """
        q = check_quantiles(quantiles)
        check_is_fitted(self, "posterior_")
        if self._uses_glm():  # a Gaussian: its mean and standard deviation in the units of y
            mean, std = cast("tuple[np.ndarray, np.ndarray]", self.predict(X, return_std=True))
            return gaussian_quantiles(mean, std, q)
        noise_sd = torch.as_tensor(np.sqrt(self._likelihood.noise.noise_variance), dtype=torch.float64)

        def quantiles_of(f: torch.Tensor) -> tuple[torch.Tensor]:
            return (mixture_quantiles(f, noise_sd.to(f.device), q),)

        (x,) = self._predict_rows(X, quantiles_of)  # (n, k, P) in the standardised units
        # quantiles move with the affine map to the units of y; the targets' axis last for it
        out = np.moveaxis(self._output_units(np.moveaxis(np.asarray(x, dtype=np.float64), -1, 0)), 0, -1)
        if not self._is_multi():
            out = out[:, 0]
        self._check_finite("predictive quantiles", out)
        return out

    @_scoped_threads
    def _predictive_components(self, X: ArrayLike, n_samples: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The predictive of every row as Gaussian components, in the units of ``y``: means
        ``(C, n)`` (``(C, n, k)`` after a fit on a 2-D ``y``) and standard deviations that
        broadcast against them. The linearised predictive is one Gaussian (``C = 1``); the
        sampled one the mixture over the draws that :meth:`predict`, :meth:`predict_quantiles`
        and :meth:`log_likelihood` average (``n_samples`` of them; None: ``predict_samples``),
        with the learned noise."""
        if self._uses_glm():
            mean, std = cast("tuple[np.ndarray, np.ndarray]", self.predict(X, return_std=True))
            return np.asarray(mean)[None], np.asarray(std)[None]
        if n_samples is not None:
            validate_params(type(self).__name__, {"n_samples": n_samples}, {"n_samples": _POSITIVE_INT})
        (f,) = self._predict_rows(X, lambda f: (f.transpose(0, 1),), n_samples=n_samples)  # (n, S, k)
        mu = self._output_units(np.moveaxis(np.asarray(f, dtype=np.float64), 1, 0))  # (S, n, k)
        self._check_finite("network outputs (in the units of y)", mu)
        return (mu if self._is_multi() else mu[..., 0]), np.asarray(self.noise_std_, dtype=np.float64)

    @_scoped_threads
    def log_likelihood(self, X: ArrayLike, y: ArrayLike, n_samples: int | None = None) -> float:
        """Mean per-point log-likelihood of ``y`` under the posterior predictive.

        The predictive density of a point is the mixture over posterior weight
        samples with the learned noise, ``(1/S) sum_s N(y | f_s(x), noise_std_^2)``,
        as the papers evaluate it (a log-mean-exp per point, averaged over points;
        in the units of ``y``, so the number compares with published tables).
        After a fit on a 2-D ``y`` the density of a row is that of all its targets
        together (conditionally independent given the weights:
        ``(1/S) sum_s prod_j N(y_j | f_sj(x), noise_std_[j]^2)``), so the result is
        summed over the targets, not averaged.
        With ``predictive='glm'`` it is the exact density of the linearised
        predictive, ``N(y | f(x; mu), J Sigma J^T + noise_std_^2)`` (per target, summed
        over the targets of a 2-D ``y``).

        Parameters
        ----------
        X : array-like of shape (n_rows, n_features)
            Inputs.
        y : array-like of shape (n_rows,) or (n_rows, n_targets)
            Observed targets (the shape of ``y`` at fit time).
        n_samples : int, default=None
            Weight samples ``S``; None uses ``predict_samples``.

        Returns
        -------
        log_likelihood : float
            Mean over the rows of the log predictive density (higher is better).
        """
        return float(np.mean(self._log_densities(X, y, n_samples)))

    def _log_densities(self, X: ArrayLike, y: ArrayLike, n_samples: int | None = None) -> np.ndarray:
        """Each row's log predictive density, as :meth:`log_likelihood` defines it (its mean)."""
        if self._uses_glm():
            mean_t, var_t = self._moments(X)
            mean = self._y_mean + self._y_std * mean_t.cpu().numpy()
            var = self._y_std**2 * var_t.cpu().numpy()
            if self._is_multi():
                y_2d: np.ndarray = check_array(y, ensure_2d=True, dtype=np.float64)
                if y_2d.shape != mean.shape:
                    raise ValueError(
                        f"y must have shape {mean.shape} (rows of X, targets at fit time), got {y_2d.shape}."
                    )
                return (-0.5 * (y_2d - mean) ** 2 / var - 0.5 * np.log(2 * np.pi * var)).sum(-1)
            y = column_or_1d(check_array(y, ensure_2d=False, dtype=np.float64), warn=True)
            check_consistent_length(mean, y)
            return -0.5 * (y - mean) ** 2 / var - 0.5 * np.log(2 * np.pi * var)
        if self._is_multi():
            f = self.sample_outputs(X, n_samples=n_samples)  # (S, n, k) in the units of y
            y_arr: np.ndarray = check_array(y, ensure_2d=True, dtype=np.float64)
            y = y_arr
            if y_arr.shape != f.shape[1:]:
                raise ValueError(
                    f"y must have shape {f.shape[1:]} (rows of X, targets at fit time), got {y_arr.shape}."
                )
            std = np.asarray(self.noise_std_, dtype=np.float64)
            logp = (-0.5 * ((y_arr[None] - f) / std) ** 2 - np.log(std) - 0.5 * math.log(2 * math.pi)).sum(-1)
            return logsumexp(logp, axis=0) - math.log(f.shape[0])
        if n_samples is not None:
            validate_params(type(self).__name__, {"n_samples": n_samples}, {"n_samples": _POSITIVE_INT})
        check_is_fitted(self, "posterior_")
        X = self._validate_X(X, reset=False)
        y_1d: np.ndarray = column_or_1d(check_array(y, ensure_2d=False, dtype=np.float64), warn=True)
        y = y_1d
        check_consistent_length(X, y_1d)
        noise_std = self.noise_std_
        rows = iter(range(0, len(y_1d), self._chunk_rows(n_samples)))

        def chunk_log_density(f_t: torch.Tensor) -> tuple[np.ndarray]:
            """The log predictive density of each of one chunk's rows."""
            r0 = next(rows)
            f = self._output_units(f_t[..., 0].cpu().numpy().astype(np.float64))
            self._check_finite("network outputs (in the units of y)", f)
            return (mixture_log_density(y[r0 : r0 + f.shape[1]], f, noise_std),)

        (log_density,) = self._predict_rows(X, chunk_log_density, n_samples=n_samples)
        return log_density

    @_scoped_threads
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
        y_samples : ndarray of shape (n_samples_X, n_samples) or (n_samples_X, n_targets, n_samples)
            Draws, one column per sample (the second shape after a fit on a 2-D ``y``,
            as ``GaussianProcessRegressor.sample_y``).
        """
        validate_params(type(self).__name__, {"n_samples": n_samples}, {"n_samples": _POSITIVE_INT})
        rng = check_random_state(random_state)
        seed = int(rng.randint(np.iinfo(np.int32).max))
        if self._is_multi():  # (S, n, k): one noise precision per weight sample and target
            f = self._predict_outputs(X, n_samples=int(n_samples), seed=seed).cpu().numpy().astype(np.float64)
            noise = self._likelihood.noise
            k = f.shape[2]
            if noise.learn:
                tau = rng.gamma(noise.a, 1.0 / noise.b, size=(f.shape[0], 1, k))
            else:
                tau = np.broadcast_to(noise.tau, (f.shape[0], 1, k))
            eps = rng.standard_normal(f.shape)
            y = np.moveaxis(self._y_mean + self._y_std * (f + eps / np.sqrt(tau)), 0, -1)
            self._check_finite("predictive samples", y)
            return y
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

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.target_tags.single_output = True
        tags.target_tags.multi_output = True
        return tags


class BayesianNetworkClassifier(ClassifierMixin, BayesianNetwork):
    """Bernoulli (two classes, one logit) or categorical (softmax) classification (not public)."""

    _parameter_constraints = {
        "glm_link": [Options(("pairwise", "probit", "mc"))],
    }
    _param_docs = CLASSIFIER_PARAMS

    def _validate_X_y(self, X: ArrayLike, y: ArrayLike, reset: bool) -> tuple[np.ndarray, np.ndarray]:
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

    def _n_classes(self) -> int:
        return len(self.classes_)

    def _prepare_targets(
        self, y: np.ndarray, first: bool, classes: ArrayLike | None = None, sample_weight: np.ndarray | None = None
    ) -> None:
        if first:
            labels = unique_labels(y) if classes is None else unique_labels(np.asarray(classes))
            self._check_labels(labels, sample_weight)
            self.classes_ = labels
            if classes is None:
                self._warn_regression_like_labels(labels, len(y))
        else:
            if classes is not None and not np.array_equal(unique_labels(np.asarray(classes)), self.classes_):
                raise ValueError(f"classes={classes!r} differs from the classes of the first call, {self.classes_!r}.")
        unseen = np.setdiff1d(np.unique(y), self.classes_)
        if unseen.size:
            raise ValueError(f"y contains labels not in classes_: {unseen!r}.")

    def _check_labels(self, labels: np.ndarray, sample_weight: np.ndarray | None) -> None:
        if len(labels) < 2:
            where = "the data" if sample_weight is None else "the rows with a positive sample_weight"
            raise ValueError(
                f"{type(self).__name__} needs samples of at least 2 classes in {where}; got 1 class: {labels[0]!r}."
            )

    def _warn_regression_like_labels(self, labels: np.ndarray, n_rows: int) -> None:
        """Warn when ``y`` looks like a numeric regression target: integer labels, more than
        ``REGRESSION_LIKE_CLASSES`` classes, and fewer than ``REGRESSION_LIKE_ROWS`` rows per
        class on average (diabetes' target: 214 classes from 442 rows)."""
        k = len(labels)
        numeric = labels.dtype.kind in "iuf"
        if numeric and k > REGRESSION_LIKE_CLASSES and n_rows < REGRESSION_LIKE_ROWS * k:
            _warn(
                f"{type(self).__name__}: y has {k} distinct numeric values in {n_rows} rows (fewer than "
                f"{REGRESSION_LIKE_ROWS} rows per class): it looks like a regression target, and a "
                "classifier learns one class per distinct value. For a numeric target use the "
                f"{type(self).__name__.replace('Classifier', 'Regressor')}.",
                UserWarning,
            )

    def _make_likelihood(self) -> Bernoulli | Categorical:
        k = len(self.classes_)
        return Bernoulli() if k == 2 else Categorical(k)

    def _encode_targets(self, y: np.ndarray) -> np.ndarray:
        return np.searchsorted(self.classes_, y)

    def _target_tensor(self, y: np.ndarray) -> torch.Tensor:
        if len(self.classes_) == 2:
            return self._tensor(np.asarray(y, dtype=np.float64))
        return self._tensor(np.asarray(y, dtype=np.int64), dtype=torch.long)

    def _probs(self, f: torch.Tensor) -> torch.Tensor:
        """Class probabilities per weight sample, ``(S, n, n_classes)``."""
        if len(self.classes_) == 2:
            p1 = torch.sigmoid(f[..., 0])
            return torch.stack([1.0 - p1, p1], -1)
        # softmax written out: torch.softmax along a short last axis (a few classes) is several
        # times slower on the CPU (7 ms against 2 for 100 samples of 450 rows of 10 classes)
        e = torch.exp(f - f.amax(-1, keepdim=True))
        return e / e.sum(-1, keepdim=True)

    def _training_fit_vs_constant(self, f: torch.Tensor, y: np.ndarray) -> tuple[bool, float, float]:
        """Log-loss of the predictive probabilities on training labels against that of the
        class frequencies; 'worse' beyond 1.5 times the constant's."""
        p = self._probs(f.double()).mean(0).cpu().numpy()
        y = np.asarray(y, dtype=np.int64)
        loss = float(-np.mean(np.log(np.clip(p[np.arange(len(y)), y], 1e-300, None))))
        freq = np.bincount(y, minlength=p.shape[1]) / len(y)
        const = float(-np.mean(np.log(np.clip(freq[y], 1e-300, None))))
        return loss > 1.5 * const + 1e-3, loss, const

    def _validation_score(
        self,
        Xv: torch.Tensor,
        yv: np.ndarray,
        wv: np.ndarray | None = None,
        posterior: PosteriorTensors | None = None,
    ) -> float:
        """Mean (weighted by ``wv``) log predictive probability of held-out labels under ``posterior``,
        by the predictive that :meth:`predict_proba` takes (early stopping keeps the epoch best
        by it): the linearised network's with the ``glm_link`` where ``predictive`` is (or
        stands for) 'glm', else the average over up to 16 weight samples (draws of the
        linearised logits for the 'mc' link)."""
        S = min(self._n_predict_samples(), 16)
        if self._uses_glm(posterior):
            mean, cov = linearized_moments(cast("CovarianceTensors", posterior), self._forward, Xv)
            link = self._closed_form_link()
            if link is not None:
                p = link(mean.double(), cov.double())
            else:
                gen = torch.Generator(device=self._device).manual_seed(int(self._predict_seed))
                p = self._probs(gaussian_draws(mean, cov, S, gen)).mean(0)
        else:
            p = self._probs(self._outputs(Xv, n_samples=S, posterior=posterior)).mean(0)
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
            after a single pass the posterior is weighed against all the data seen;
            the posterior's mean is then the weighted average of the means the
            stream's steps visit (the next call trains on from the last of them).
            Given, the calls are the epochs of a ``fit`` on that many rows, without
            averaging. Remembered for later calls that do not pass it. See the
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

    @_scoped_threads
    def predict_proba(self, X: ArrayLike) -> np.ndarray:
        """Posterior predictive class probabilities.

        The Monte Carlo average over ``predict_samples`` weight samples of the
        network's class probabilities (not of its logits). With
        ``predictive='glm'``: the probit approximation of the expected sigmoid or
        softmax under the linearised network's Gaussian logits (for the softmax, of every
        pairwise difference of the logits).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Inputs.

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes)
            Columns follow ``classes_``.
        """
        check_is_fitted(self, "posterior_")
        link = self._closed_form_link() if self._uses_glm() else None
        if link is not None:
            mean, cov = self._glm_moments(X)
            p = link(mean.double(), cov.double()).cpu().numpy()
        else:
            (p,) = self._predict_rows(X, lambda f: (self._probs(f).mean(0),))
            p = p.numpy().astype(np.float64)
        self._check_finite("class probabilities", p)
        # rows of a float32 average sum to 1 only to ~1e-7: renormalise in float64 so that
        # scikit-learn's metrics (which check the sums at float64 precision) accept them
        return p / p.sum(axis=1, keepdims=True)

    def _closed_form_link(self) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None:
        """The ``glm_link`` that maps Gaussian logits' mean and covariance to probabilities in
        closed form (pairwise probit, or probit; either for two classes), or None for the
        'mc' link of more than two classes, whose probabilities average draws of the logits."""
        glm_link = self._glm_link()
        if glm_link == "mc" and len(self.classes_) != 2:
            return None
        return pairwise_probit_proba if glm_link == "pairwise" else probit_proba

    def _glm_link(self) -> str:
        """How ``predictive='glm'`` turns Gaussian logits into probabilities for more than
        two classes (the ``glm_link`` parameter; 'pairwise' for estimators without it)."""
        return str(self._prediction_param("glm_link", "pairwise"))

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

    @_scoped_threads
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
