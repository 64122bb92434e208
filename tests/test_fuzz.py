"""Fuzz suite (issue 11): every public estimator against random, malformed and extreme
inputs and hyperparameters.

Every case must end in one of two outcomes:

- a clear error: a ``ValueError`` / ``TypeError`` raised by skbayes or scikit-learn
  (not leaked from torch, numpy or scipy internals) whose message names the
  offending input (``X``, ``y``, labels, samples, ...) or hyperparameter;
- or finite predictions of the right shape (probabilities in [0, 1] summing to 1),
  with the caller's arrays left unmodified.

The suite:

- ``test_data_fuzz``: random ``X`` / ``y`` (scales 1e-8..1e8 per column and columns at
  1e+-300, integer, float, bool and object dtypes; lists, pandas frames (also nullable
  dtypes), memmaps, read-only, Fortran-ordered and strided arrays, sparse matrices;
  constant, huge, tiny, integer, string, boolean and many-class targets), fitted with
  ``fit``, ``partial_fit``, or ``partial_fit`` continuing a fit (which, if it fails, must
  leave the model's predictions bit-identical). One test per estimator for well-formed
  data and one per kind of malformed data (NaN / inf, 1-D / 3-D / empty ``X``, too few
  rows, ``y`` of the wrong length or width, a single class, continuous or mixed labels).
- ``test_predict_fuzz``: a model fitted on clean data, asked to predict on such inputs
  (also with the wrong number of features).
- ``test_hyperparameter_bounds``: every constructor parameter of every estimator
  set, one at a time, to its boundaries and beyond (0, -1, NaN, +-inf, huge, tiny,
  wrong types, None, booleans).
- ``test_hyperparameter_combinations``: several such values at once, on random data.
- ``test_continuing_fit_fuzz``: random ``set_params`` changes between a fit and a
  continuing one: a changed structure restarts (``warm_start``) or is refused
  (``partial_fit``), anything else continues.
- ``test_float32_fuzz``: ``dtype='float32'`` on data at random scales with every start.
- ``test_global_state_untouched``: fit / predict leave torch's thread count, default
  dtype, RNG and grad mode, numpy's global RNG and error state, and the warnings
  filters as they were.
- ``test_data_fuzz_longer_fits`` (``slow``): larger problems and longer fits.

By default each hypothesis test runs a small, fixed (derandomised) number of examples
so CI stays within its time budget; ``pytest --slow`` runs 20 times as many, drawn
afresh on every run, and the ``slow`` tests.
"""

from __future__ import annotations

import copy
import os
import re
import tempfile
import traceback
import warnings

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
import torch
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from sklearn.base import is_classifier
from sklearn.exceptions import ConvergenceWarning
from torch import nn

import skbayes

ESTIMATORS = [e.estimator for e in skbayes.all_estimators()]
IDS = [Est.__name__ for Est in ESTIMATORS]

#: Tiny networks and short fits: every example must take milliseconds.
FAST = {"hidden_layer_sizes": (4,), "max_iter": 3, "predict_samples": 4, "mc_samples": 1, "random_state": 0}

#: Multiplier of the example counts under ``--slow``.
SLOW_FACTOR = 20


def make(Est, **params):
    """``Est`` with the fast settings (where it has such parameters) and ``params``."""
    names = Est().get_params()
    base = {k: v for k, v in FAST.items() if k in names} if "hidden_layer_sizes" in names else {}
    return Est(**{**base, **params})


def fuzz_settings(slow, n):
    """Hypothesis settings: ``n`` derandomised examples, or ``SLOW_FACTOR * n`` random ones."""
    return settings(
        max_examples=n * SLOW_FACTOR if slow else n,
        deadline=None,
        derandomize=not slow,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large],
        print_blob=True,
    )


# --- outcomes ------------------------------------------------------------------------------

#: Messages of library internals that must not reach the user.
INTERNAL = re.compile(
    r"torch\.linalg|torch\._|linalg\.|LinAlgError|size mismatch|mat1 and mat2|cannot be multiplied|must match the size|"
    r"RuntimeError|out of bounds|read-only|assignment destination|[Tt]ensor|broadcast|"
    r"not supported between instances|object has no attribute|unhashable|takes \d+ positional|"
    r"float\(\) argument|int\(\) argument|unsupported operand|invalid value encountered|"
    # numpy's and LAPACK's own words, which reach the user when a check upstream is missing
    r"zero-size array|at least one array or dtype|illegal value in \d+\w* argument"
)
#: A data error must say which input it is about.
NAMES_DATA = re.compile(r"\bX\b|\by\b|[Ii]nput|[Ll]abel|[Cc]lass|[Ss]ample|[Ff]eature|[Tt]arget|[Aa]rray|dtype|shape")
ESTIMATOR_NAMES = re.compile(r"\w*(Regressor|Classifier|Regression)\b")
#: Where a deliberate error is raised.
OWN_CODE = (os.sep + "skbayes" + os.sep, os.sep + "sklearn" + os.sep)


def raised_in(exc):
    """File of the innermost Python frame of ``exc``'s traceback."""
    frames = traceback.extract_tb(exc.__traceback__)
    return frames[-1].filename if frames else ""


def check_clear_error(exc, what, names):
    """``exc`` is a deliberate ValueError / TypeError whose message matches ``names``."""
    msg = f"{type(exc).__name__}: {exc}"
    where = raised_in(exc)
    assert isinstance(exc, (ValueError, TypeError)), f"{what}: not a ValueError/TypeError: {msg}"
    assert not isinstance(exc, np.linalg.LinAlgError), f"{what}: a raw linear-algebra error: {msg}"
    assert any(part in where for part in OWN_CODE), f"{what}: raised inside {where}, not by skbayes/sklearn: {msg}"
    assert not INTERNAL.search(str(exc)), f"{what}: the message exposes internals: {msg}"
    text = ESTIMATOR_NAMES.sub("", str(exc))  # 'SLANGClassifier: ...' does not name a class label
    assert names.search(text), f"{what}: the message does not name the offending input: {msg}"


def check_predictions(est, X, n_rows, what):
    """Predictions on ``X`` (training data of ``est``) are finite and of the right shape."""
    if is_classifier(est):
        k = len(est.classes_)
        proba = est.predict_proba(X)
        assert proba.shape == (n_rows, k), f"{what}: predict_proba shape {proba.shape}"
        assert np.all(np.isfinite(proba)), f"{what}: non-finite predict_proba"
        assert np.all((proba >= 0) & (proba <= 1)), f"{what}: predict_proba outside [0, 1]"
        assert np.allclose(proba.sum(axis=1), 1.0, atol=1e-6), f"{what}: predict_proba rows do not sum to 1"
        pred = est.predict(X)
        assert pred.shape == (n_rows,), f"{what}: predict shape {pred.shape}"
        assert np.all(np.isin(pred, est.classes_)), f"{what}: predict outside classes_"
        std = est.predict_std(X)
        assert std.shape == (n_rows, k), f"{what}: predict_std shape {std.shape}"
        assert np.all(np.isfinite(std)) and np.all(std >= 0), f"{what}: predict_std not finite and >= 0"
    else:
        shape = (n_rows,) + np.shape(est.noise_precision_)  # one column per target of a 2-D y
        mean = est.predict(X)
        assert mean.shape == shape, f"{what}: predict shape {mean.shape}"
        assert np.all(np.isfinite(mean)), f"{what}: non-finite predict: {mean}"
        mean2, std = est.predict(X, return_std=True)
        assert np.all(np.isfinite(mean2)), f"{what}: non-finite predict(return_std=True) mean"
        assert std.shape == shape, f"{what}: std shape {std.shape}"
        assert np.all(np.isfinite(std)) and np.all(std >= 0), f"{what}: std not finite and >= 0: {std}"
        if hasattr(est, "predict_std"):
            std2 = est.predict_std(X)
            assert np.all(np.isfinite(std2)) and std2.shape == shape, f"{what}: predict_std {std2}"


def snapshot(obj):
    if isinstance(obj, (pd.DataFrame, pd.Series)):
        return obj.copy(deep=True)
    if sp.issparse(obj):
        return obj.copy()
    if isinstance(obj, np.ndarray):
        return np.array(obj, copy=True)
    return copy.deepcopy(obj)


def same(a, b):
    if isinstance(a, (pd.DataFrame, pd.Series)):
        return a.equals(b) and list(a.dtypes if a.ndim == 2 else [a.dtype]) == list(
            b.dtypes if b.ndim == 2 else [b.dtype]
        )
    if sp.issparse(a):
        a, b = a.tocsr(), b.tocsr()
        return (
            a.shape == b.shape
            and np.array_equal(a.indptr, b.indptr)
            and np.array_equal(a.indices, b.indices)
            and same(a.data, b.data)
        )
    a_arr, b_arr = np.asarray(a), np.asarray(b)
    if a_arr.dtype != b_arr.dtype or a_arr.shape != b_arr.shape:
        return False
    if a_arr.dtype.kind in "fc":
        return np.array_equal(a_arr, b_arr, equal_nan=True)
    return bool(np.all(a_arr == b_arr)) if a_arr.dtype.kind != "O" else repr(a) == repr(b)


def n_rows_of(X):
    return X.shape[0] if hasattr(X, "shape") else len(X)


def quiet_fit(est, method, X, y, classes=None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        if method == "partial_fit":
            if is_classifier(est):
                return est.partial_fit(X, y, classes=classes)
            return est.partial_fit(X, y)
        return est.fit(X, y)


# --- data strategies -------------------------------------------------------------------------

X_DTYPES = ["float64", "float64", "float64", "float32", "int64", "int32", "float16", "bool", "object"]
X_CONTAINERS = [
    "ndarray",
    "ndarray",
    "list",
    "dataframe",
    "memmap",
    "readonly",
    "fortran",
    "strided",
    "nullable",
    "sparse",
]
Y_CONTAINERS = ["ndarray", "ndarray", "list", "series", "column", "readonly", "memmap"]
#: Kinds of malformed data (one per example; ``few_rows`` is legal but tests small-sample paths).
X_FAULTS = ["nan", "inf", "-inf", "1d", "3d", "no_rows", "one_row", "few_rows", "no_features"]
Y_FAULTS = ["y_nan", "y_inf", "y_short", "y_long", "y_2col"]
Y_FAULTS_CLASSIFIER = ["single_class", "continuous", "mixed_types", "y_nan", "y_short", "y_long", "y_2col"]


@st.composite
def x_specs(draw, fault=None):
    """A recipe for an ``X``: small and printable (hypothesis reports it on failure)."""
    n = draw(st.integers(5, 40))
    d = draw(st.integers(1, 4))
    if fault == "no_rows":
        n = 0
    elif fault == "one_row":
        n = 1
    elif fault == "few_rows":
        n = draw(st.integers(2, 4))
    elif fault == "no_features":
        d = 0
    return {
        "n": n,
        "d": d,
        "seed": draw(st.integers(0, 2**16)),
        # 'random': a scale 10**e per column, e in [-8, 8]; 'extreme': one column at 1e+-300
        "scale": draw(st.sampled_from(["unit", "random", "random", "random", "offset", "extreme"])),
        "exponents": draw(st.lists(st.floats(-8, 8), min_size=6, max_size=6)),
        "constant_column": draw(st.booleans()),
        "duplicate_rows": draw(st.booleans()),
        "inject": {"nan": np.nan, "inf": np.inf, "-inf": -np.inf}.get(fault),
        "inject_at": draw(st.integers(0, 10**6)),
        "dtype": draw(st.sampled_from(X_DTYPES)) if fault not in ("nan", "inf", "-inf") else "float64",
        "ndim": {"1d": 1, "3d": 3}.get(fault, 2),
        "container": draw(st.sampled_from(X_CONTAINERS)),
    }


@st.composite
def y_specs(draw, classifier, fault=None):
    spec = {
        "seed": draw(st.integers(0, 2**16)),
        "container": draw(st.sampled_from(Y_CONTAINERS)),
        "length_change": {"y_short": -1, "y_long": 1}.get(fault, 0),
        "two_columns": fault == "y_2col",
        "fault": fault,
    }
    if classifier:
        kinds = ["int", "int", "str", "str", "bool", "float_int", "big_int", "many", "imbalanced"]
        spec["kind"] = {"single_class": "single", "continuous": "continuous", "mixed_types": "mixed"}.get(
            fault, draw(st.sampled_from(kinds))
        )
        spec["n_classes"] = draw(st.integers(2, 6))
    else:
        spec["kind"] = draw(st.sampled_from(["linear", "linear", "noise", "constant", "huge", "tiny", "offset", "int"]))
        spec["exponent"] = draw(st.integers(-10, 10))
        spec["dtype"] = draw(st.sampled_from(["float64", "float64", "float32", "int64", "object"]))
        if fault in ("y_nan", "y_inf"):
            spec["dtype"] = "float64"
    return spec


def faults_of(classifier):
    return X_FAULTS + (Y_FAULTS_CLASSIFIER if classifier else Y_FAULTS)


@st.composite
def data_specs(draw, classifier, fault="any"):
    """``(x_spec, y_spec)`` with the fault ``fault`` (None: none; 'any': at most one, any)."""
    if fault == "any":
        faults = faults_of(classifier)
        fault = draw(st.sampled_from([None] * len(faults) + faults))
    return draw(x_specs(fault)), draw(y_specs(classifier, fault))


def x_values(spec):
    """The float64 values of an ``X`` recipe, shape ``(n, d)``."""
    n, d = spec["n"], spec["d"]
    rng = np.random.RandomState(spec["seed"])
    X = rng.standard_normal((n, d))
    if spec["scale"] == "random":
        X *= 10.0 ** np.asarray(spec["exponents"][:d])
    elif spec["scale"] == "offset":
        X += 1e8
    elif spec["scale"] == "extreme" and d:
        X[:, 0] *= 1e300 if spec["seed"] % 2 else 1e-300
    if spec["constant_column"] and d:
        X[:, -1] = X[0, -1] if n else 0.0
    if spec["duplicate_rows"] and n > 1:
        X[n // 2 :] = X[: n - n // 2]
    if spec["inject"] is not None and X.size:
        X.flat[spec["inject_at"] % X.size] = spec["inject"]
    return X


def contain(values, container, tmpdir, name):
    """``values`` in the container ``container`` (2-D containers fall back to arrays)."""
    if container == "list":
        return values.tolist()
    if values.ndim == 2 and container == "dataframe":
        return pd.DataFrame(values, columns=[f"f{j}" for j in range(values.shape[1])])
    if values.ndim == 2 and container == "nullable" and values.dtype.kind in "fiu":
        frame = pd.DataFrame(values, columns=[f"f{j}" for j in range(values.shape[1])])
        return frame.astype("Float64" if values.dtype.kind == "f" else "Int64")
    if values.ndim == 2 and container == "sparse" and values.dtype.kind in "fiub" and values.dtype != np.float16:
        return sp.csr_matrix(values)
    if container == "memmap" and values.dtype != object and values.size:
        path = os.path.join(tmpdir, f"{name}.dat")
        mm = np.memmap(path, dtype=values.dtype, mode="w+", shape=values.shape)
        mm[...] = values
        mm.flush()
        return np.memmap(path, dtype=values.dtype, mode="r", shape=values.shape)
    if container == "readonly":
        values = values.copy()
        values.flags.writeable = False
        return values
    if container == "fortran":
        return np.asfortranarray(values)
    if container == "strided" and values.ndim >= 1:
        return np.repeat(values, 2, axis=0)[::2]
    return values


def build_x(spec, tmpdir):
    X = x_values(spec)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if spec["dtype"] in ("int64", "int32", "bool"):
            info = np.iinfo(np.int32)
            X = np.clip(np.round(X), info.min, info.max).astype(spec["dtype"])
        else:
            X = X.astype(spec["dtype"])
    if spec["ndim"] == 1:
        X = X.ravel()
    elif spec["ndim"] == 3:
        X = X[..., None]
    return contain(X, spec["container"], tmpdir, "X")


def build_y(spec, X_values, classifier, tmpdir):
    n = max(X_values.shape[0] + spec["length_change"], 0)
    rng = np.random.RandomState(spec["seed"])
    kind = spec["kind"]
    if classifier:
        k = spec["n_classes"]
        codes = rng.randint(0, k, n)
        codes[: min(k, n)] = np.arange(min(k, n))  # every class appears (when n allows)
        if kind == "int":
            y = codes
        elif kind == "str":
            y = np.array(["class_" + "abcdef"[c] for c in codes])
        elif kind == "single":
            y = np.full(n, 7)
        elif kind == "many":
            y = np.arange(n)
        elif kind == "imbalanced":
            y = np.zeros(n, dtype=np.int64)
            y[-1:] = 1
        elif kind == "bool":
            y = codes % 2 == 0
        elif kind == "float_int":
            y = codes.astype(np.float64)
        elif kind == "continuous":
            y = rng.standard_normal(n)
        elif kind == "mixed":
            y = np.array([int(c) if c % 2 else f"s{c}" for c in codes], dtype=object)
        else:  # big_int
            y = codes.astype(np.int64) * 10**15 - 3
        if spec["fault"] == "y_nan" and n:
            y = y.astype(np.float64) if y.dtype.kind in "biuf" else y.astype(object)
            y[rng.randint(n)] = np.nan
    else:
        scale = 10.0 ** spec["exponent"]
        rows = X_values[:n] if X_values.shape[0] >= n else np.zeros((n, X_values.shape[1]))
        with np.errstate(all="ignore"):
            w = rng.standard_normal(rows.shape[1])
            signal = np.nan_to_num(rows @ w) if rows.shape[1] else np.zeros(n)
            sd = np.std(signal) if n else 0.0
            signal = signal / sd if np.isfinite(sd) and sd > 0 else signal
        if kind == "linear":
            y = scale * (signal + 0.1 * rng.standard_normal(n))
        elif kind == "noise":
            y = scale * rng.standard_normal(n)
        elif kind == "constant":
            y = np.full(n, scale)
        elif kind == "huge":
            y = 1e300 * rng.standard_normal(n)
        elif kind == "tiny":
            y = 1e-300 * rng.standard_normal(n)
        elif kind == "offset":
            y = 1e8 + scale * rng.standard_normal(n)
        else:
            y = np.round(scale * rng.standard_normal(n))
        if spec["fault"] in ("y_nan", "y_inf") and n:
            y[rng.randint(n)] = np.nan if spec["fault"] == "y_nan" else -np.inf
        with np.errstate(all="ignore"):
            if spec["dtype"] == "int64":
                y = np.clip(np.round(y), -(2**62), 2**62).astype(np.int64)
            else:
                y = y.astype(spec["dtype"])
    if spec["two_columns"]:
        y = np.stack([y, y], axis=1)
    if spec["container"] == "column" and y.ndim == 1:
        return y[:, None]
    if spec["container"] == "series" and y.ndim == 1:
        return pd.Series(y, name="target")
    return contain(y, spec["container"], tmpdir, "y")


def clean_specs(x_spec, y_spec):
    """The recipes without their fault (and in plain arrays)."""
    x_clean = {**x_spec, "inject": None, "ndim": 2, "n": max(x_spec["n"], 5), "d": max(x_spec["d"], 1)}
    y_clean = {**y_spec, "fault": None, "length_change": 0, "two_columns": False}
    if y_clean["kind"] in ("single", "continuous", "mixed"):
        y_clean["kind"] = "int"
    return {**x_clean, "container": "ndarray"}, {**y_clean, "container": "ndarray"}


def prediction_state(est, X):
    """What a fitted model predicts on ``X`` (to compare bit for bit)."""
    if is_classifier(est):
        return est.predict_proba(X)
    return np.stack(est.predict(X, return_std=True))


def run_data_case(Est, x_spec, y_spec, method, dtype, bigger=False):
    """Fit ``Est`` on the fuzzed data: a clear error or finite predictions, inputs untouched.

    ``method``: 'fit', 'partial_fit', or 'continue' (fit on the data without its fault,
    then ``partial_fit`` on the fuzzed data; a failure must leave the model as it was).
    """
    names = Est().get_params()
    params = {"dtype": dtype} if "dtype" in names else {}
    if bigger and "hidden_layer_sizes" in names:
        params.update({"hidden_layer_sizes": (16,), "max_iter": 30, "predict_samples": 16})
    est = make(Est, **params)
    classifier = is_classifier(est)
    if method != "fit" and not hasattr(est, "partial_fit"):
        method = "fit"
    with tempfile.TemporaryDirectory() as tmpdir:
        X = build_x(x_spec, tmpdir)
        y = build_y(y_spec, x_values(x_spec), classifier, tmpdir)
        X0, y0 = snapshot(X), snapshot(y)
        what = f"{Est.__name__}.{method}"
        before = None
        if method == "continue":
            x_clean, y_clean = clean_specs(x_spec, y_spec)
            X_clean = build_x(x_clean, tmpdir)
            try:
                quiet_fit(est, "fit", X_clean, build_y(y_clean, x_values(x_clean), classifier, tmpdir))
            except Exception as exc:  # the data without its fault can still be refused (e.g. its scale)
                check_clear_error(exc, f"{Est.__name__}.fit", NAMES_DATA)
                return
            before = prediction_state(est, X_clean)
        try:
            quiet_fit(est, "fit" if method == "fit" else "partial_fit", X, y, classes=None if before is not None else y)
        except Exception as exc:
            event(f"fit raised {type(exc).__name__}")
            check_clear_error(exc, what, NAMES_DATA)
            fitted = False
        else:
            event("fitted")
            fitted = True
        assert same(X, X0), f"{what} modified X"
        assert same(y, y0), f"{what} modified y"
        if fitted:
            check_predictions(est, X, n_rows_of(X), f"{what} then predict on the training X")
            assert same(X, X0), f"{what}: predicting modified X"
        elif before is not None:
            after = prediction_state(est, X_clean)
            assert np.array_equal(before, after), f"{what} failed and changed the fitted model's predictions"
        del X, y  # release the memmaps before their directory goes
    return fitted


DATA_CASES = [(Est, fault) for Est in ESTIMATORS for fault in [None] + faults_of(is_classifier(Est()))]


@pytest.mark.parametrize("Est, fault", DATA_CASES, ids=[f"{Est.__name__}-{fault}" for Est, fault in DATA_CASES])
def test_data_fuzz(Est, fault, slow):
    """Well-formed data of every kind (``fault=None``), and every kind of malformed data."""

    @fuzz_settings(slow, 4 if fault else 25)
    @given(
        data=data_specs(is_classifier(Est()), fault),
        method=st.sampled_from(["fit", "fit", "partial_fit", "continue"]),
        dtype=st.sampled_from(["float64", "float64", "float32"]),
    )
    def run(data, method, dtype):
        fitted.append(run_data_case(Est, *data, method, dtype))

    fitted = []
    run()
    if fault is None:  # refusing every input is no clear error: well-formed data is fitted
        assert any(fitted), f"{Est.__name__}: none of {len(fitted)} well-formed examples was fitted"


@pytest.mark.slow
@pytest.mark.parametrize("Est", ESTIMATORS, ids=IDS)
def test_data_fuzz_longer_fits(Est, slow):
    @fuzz_settings(slow, 10)
    @given(
        data=data_specs(is_classifier(Est())),
        method=st.sampled_from(["fit", "partial_fit", "continue"]),
        dtype=st.sampled_from(["float64", "float32"]),
        n=st.integers(40, 300),
    )
    def run(data, method, dtype, n):
        x_spec, y_spec = data
        if x_spec["n"] >= 5:
            x_spec = {**x_spec, "n": n}
        run_data_case(Est, x_spec, y_spec, method, dtype, bigger=True)

    run()


def clean_data(classifier, n=24, d=3, seed=0):
    rng = np.random.RandomState(seed)
    X = rng.standard_normal((n, d))
    if classifier:
        y = np.arange(n) % 3
    else:
        y = X @ rng.standard_normal(d) + 0.1 * rng.standard_normal(n)
    return X, y


@pytest.mark.parametrize("Est", ESTIMATORS, ids=IDS)
def test_predict_fuzz(Est, slow):
    """A model fitted on clean data, predicting on fuzzed inputs (any number of features)."""
    classifier = is_classifier(Est())
    X_train, y_train = clean_data(classifier)
    est = quiet_fit(make(Est), "fit", X_train, y_train)

    @fuzz_settings(slow, 20)
    @given(
        x_spec=st.sampled_from([None] * len(X_FAULTS) + X_FAULTS).flatmap(x_specs),
        width=st.sampled_from([X_train.shape[1]] * 4 + [1, 2, 4, 5]),
    )
    def run(x_spec, width):
        if x_spec["d"]:
            x_spec = {**x_spec, "d": width}
        with tempfile.TemporaryDirectory() as tmpdir:
            X = build_x(x_spec, tmpdir)
            X0 = snapshot(X)
            what = f"{Est.__name__} predicting"
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", UserWarning)  # feature names
                    check_predictions(est, X, n_rows_of(X), what)
            except AssertionError:
                raise
            except Exception as exc:
                event(f"predict raised {type(exc).__name__}")
                check_clear_error(exc, what, NAMES_DATA)
            else:
                event("predicted")
                predicted.append(x_spec)
            assert same(X, X0), f"{what} modified X"
            del X

    predicted = []
    run()
    assert predicted, f"{Est.__name__}: no fuzzed input was predicted on"


# --- hyperparameters ------------------------------------------------------------------------

NAN, INF = float("nan"), float("inf")
#: Boundaries and beyond for any numeric parameter (the default run) ...
NUMBERS = [0, -1, 1 - 1e-12, 1.5, 1e-300, 1e300, NAN, INF, -INF, np.float32(0.5), np.int64(2)]
#: ... and more of them (``--slow``).
NUMBERS_MORE = [0.0, 1, 2, 0.5, 1e-12, -1e-300]
#: Wrong types (and 'auto', which some numeric parameters accept).
WRONG = ["x", "auto", None, True]
WRONG_MORE = ["", False, [1], (1,), 1j]
#: Huge integers, for integer parameters whose cost does not grow with their value.
HUGE_INTS = [2**63]
HUGE_INTS_MORE = [2**31]
#: Integer parameters whose cost grows with their value (no huge values for them).
COSTLY = {"max_iter", "predict_samples", "mc_samples", "rank"}


def _tuples(k):
    """Values for a parameter that is a tuple of ``k`` positive numbers."""
    return [
        (1.0,) * k,
        (0.0,) + (1.0,) * (k - 1),
        (-1.0,) + (1.0,) * (k - 1),
        (NAN,) + (1.0,) * (k - 1),
        (INF,) + (1.0,) * (k - 1),
        (1e300,) * k,
        (1e-300,) * k,
        (1.0,) * (k - 1),
        (1.0,) * (k + 1),
        ("a",) * k,
        [1.0] * k,
        np.ones(k),
    ]


def module_values(n_in, n_out):
    return [
        nn.Linear(n_in + 2, n_out),  # the wrong number of inputs
        nn.Linear(n_in, n_out + 3),  # the wrong number of outputs
        nn.Sequential(nn.Linear(n_in, 4), nn.Tanh(), nn.Linear(4, n_out)),
        nn.ReLU(),  # no parameters
        lambda n_in, n_out: 3,  # not a module
        lambda n_in, n_out: nn.Linear(n_in, n_out),
        nn.Linear,
        "x",
        1,
        True,
    ]


SPECIAL = {
    "hidden_layer_sizes": [
        (),
        None,
        0,
        3,
        (0,),
        (-1,),
        (4.5,),
        ("4",),
        (True,),
        [3, 2],
        np.array([3]),
        (np.int64(3),),
        "x",
        1.5,
        (NAN,),
    ],
    "kl_annealing": [None] + _tuples(3),
    "noise_prior": _tuples(2) + [None],
    "device": ["x", "", "CPU", "cpu:0", torch.device("cpu"), None, 1, True],
    "dtype": ["float16", "int64", "x", None, np.float32, np.dtype("float64"), torch.float32, "float32", 1, True],
    "batch_size": ["auto", "x", 0, 1, -1, 1.5, None, True, np.int64(2)] + HUGE_INTS,
    "random_state": [None, 0, -1, 2**32, 2**63, 1.5, "x", True, np.random.RandomState(0), np.random.default_rng(0)],
    "verbose": [True, False, 0, 1, 2, -1, 1.5, "x", None, NAN],
    "rank": [0, 1, 1000, -1, 1.5, NAN, "x", None, True, np.int64(2)],
    "n_threads": [None, 1, 2, np.int64(1), 0, -1, 2**31, 1.5, NAN, "x", True],
}
BOOLEANS = [True, False, np.bool_(True), 0, 1, "x", None, NAN]
#: Parameters that only matter with another one set.
CONTEXT = {"validation_fraction": {"early_stopping": True}, "n_iter_no_change": {"early_stopping": True}}


def hyper_values(name, default, n_in=3, n_out=1, full=False):
    """The values ``name`` is fuzzed with (``full``: more of them, for ``--slow``)."""
    if name == "module":
        return module_values(n_in, n_out)
    if name in SPECIAL:
        return SPECIAL[name]
    if isinstance(default, (bool, np.bool_)):
        return BOOLEANS
    if isinstance(default, str):  # an option ('auto', 'relu', ...)
        values = [default.upper(), "x", None, 0, True]
        values += [default + " ", "", 1, 1.5, NAN] if full else []
        if default == "auto":
            values += NUMBERS + (NUMBERS_MORE if full else [])
        return values
    values = NUMBERS + WRONG + (NUMBERS_MORE + WRONG_MORE if full else [])
    if isinstance(default, (int, np.integer)) and name not in COSTLY:
        values += HUGE_INTS + (HUGE_INTS_MORE if full else [])
    return values


HYPER_CASES = [(Est, name) for Est in ESTIMATORS for name in sorted(Est().get_params())]


def _shared_parameters():
    """Parameters every network regressor (classifier) has and handles in the same shared
    code, mapped to the one regressor and one classifier that fuzz them in the default run
    (rotating, so that every estimator takes some); ``--slow`` fuzzes them on all."""
    networks = [Est for Est in ESTIMATORS if "hidden_layer_sizes" in Est().get_params()]
    chosen = {}
    for face in (False, True):
        group = [Est for Est in networks if is_classifier(Est()) == face]
        names = set.intersection(*(set(Est().get_params()) for Est in group))
        names -= {"learning_rate", "prior_precision"}  # shared names, but each family's own meaning
        for i, name in enumerate(sorted(names)):
            chosen.setdefault(name, set()).add(group[i % len(group)])
    return chosen


SHARED = _shared_parameters()


def run_hyper_case(Est, setting, X, y):
    """Fit with ``setting`` (a dict of parameters): a clear error naming one of them, or a
    fit with finite predictions."""
    est = make(Est, **setting)
    what = f"{Est.__name__}({', '.join(f'{k}={v!r}' for k, v in setting.items())})"
    try:
        quiet_fit(est, "fit", X, y)
    except Exception as exc:
        check_clear_error(exc, what, re.compile("|".join(re.escape(k) for k in setting)))
        return
    check_predictions(est, X, X.shape[0], what)


@pytest.mark.parametrize("Est, name", HYPER_CASES, ids=[f"{Est.__name__}-{name}" for Est, name in HYPER_CASES])
def test_hyperparameter_bounds(Est, name, slow):
    if name in SHARED and Est not in SHARED[name] and not slow:
        pytest.skip("a shared parameter, fuzzed on two other estimators (all of them with --slow)")
    classifier = is_classifier(Est())
    X, y = clean_data(classifier, n=12, d=3)
    default = Est().get_params()[name]
    n_out = 3 if classifier else 1
    failures = []
    for value in hyper_values(name, default, X.shape[1], n_out, full=slow):
        try:
            run_hyper_case(Est, {**CONTEXT.get(name, {}), name: value}, X, y)
        except Exception as exc:  # collect every failing value of this parameter
            failures.append(f"{name}={value!r}: {str(exc).splitlines()[0]}")
    assert not failures, f"{Est.__name__}: {len(failures)} failing values:\n" + "\n".join(failures)


@pytest.mark.parametrize("Est", ESTIMATORS, ids=IDS)
def test_hyperparameter_combinations(Est, slow):
    classifier = is_classifier(Est())
    names = sorted(n for n in Est().get_params() if n != "module")
    defaults = Est().get_params()

    @fuzz_settings(slow, 10)
    @given(
        choice=st.lists(
            st.sampled_from(names).flatmap(
                lambda n: st.tuples(st.just(n), st.sampled_from(hyper_values(n, defaults[n], full=slow)))
            ),
            min_size=1,
            max_size=3,
            unique_by=lambda t: t[0],
        ),
        seed=st.integers(0, 1000),
        n=st.integers(6, 30),
    )
    def run(choice, seed, n):
        X, y = clean_data(classifier, n=n, d=2, seed=seed)
        run_hyper_case(Est, dict(choice), X, y)

    run()


# --- continuing fits and dtype -----------------------------------------------------------------

NETWORKS = [Est for Est in ESTIMATORS if "warm_start" in Est().get_params()]
#: Values for set_params between fits: structural parameters (in several spellings of one
#: value), and parameters a continuing fit applies.
CONTINUING_VALUES = {
    "hidden_layer_sizes": [(4,), 4, [4], (3,), (4, 2)],
    "activation": ["relu", "tanh"],
    "dtype": ["float64", np.float64, "float32"],
    "dropout": [0.1, 0.3],
    "input_dropout": [0.0, 0.2],
    "prior_precision": [1.0, 3.0],
    "max_iter": [1, 3],
    "mc_samples": [1, 2],
    "random_state": [0, 5],
    "init": ["iblm", "default"],
}
STRUCTURAL_FUZZ = ("hidden_layer_sizes", "activation", "dtype", "dropout", "input_dropout")


def structure_of(params):
    """The structural parameters of ``params``, in one spelling."""
    out = {}
    for k in STRUCTURAL_FUZZ:
        if k not in params:
            continue
        v = params[k]
        if k == "hidden_layer_sizes":
            v = tuple(np.atleast_1d(v).tolist())
        elif k == "dtype":
            v = np.dtype(v).name
        out[k] = v
    return out


@pytest.mark.parametrize("Est", NETWORKS, ids=[Est.__name__ for Est in NETWORKS])
def test_continuing_fit_fuzz(Est, slow):
    """Random ``set_params`` changes between a fit and a continuing fit (``warm_start`` or
    ``partial_fit``): a changed structure restarts the warm_start fit with a warning (giving a
    new fit's model) or makes partial_fit raise a clear error naming it (the model unchanged);
    anything else continues the fitted model."""
    classifier = is_classifier(Est())
    names = Est().get_params()
    keys = sorted(k for k in CONTINUING_VALUES if k in names)

    @fuzz_settings(slow, 4)
    @given(
        changes=st.lists(
            st.sampled_from(keys).flatmap(lambda k: st.tuples(st.just(k), st.sampled_from(CONTINUING_VALUES[k]))),
            min_size=1,
            max_size=3,
            unique_by=lambda t: t[0],
        ),
        how=st.sampled_from(["warm_start", "partial_fit"]),
        seed=st.integers(0, 1000),
    )
    def run(changes, how, seed):
        X, y = clean_data(classifier, n=20, d=3, seed=seed)
        est = quiet_fit(make(Est, warm_start=True), "fit", X, y)
        before = structure_of(est.get_params())
        t, mean = est.t_, est.posterior_.mean.copy()
        est.set_params(**dict(changes))
        changed = sorted(k for k, v in structure_of(est.get_params()).items() if v != before[k])
        what = f"{Est.__name__}.set_params({dict(changes)}) then {how}"
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                if how == "warm_start":
                    est.fit(X, y)
                else:
                    est.partial_fit(X, y)
            except ValueError as exc:
                assert how == "partial_fit" and changed, f"{what}: {exc}"
                check_clear_error(exc, what, re.compile("|".join(changed)))
                assert est.t_ == t and np.array_equal(est.posterior_.mean, mean), f"{what}: the model changed"
                return
        assert not (how == "partial_fit" and changed), f"{what}: partial_fit accepted a changed {changed}"
        restarted = [w for w in caught if "starts afresh" in str(w.message)]
        assert bool(restarted) == bool(changed), f"{what}: restarted={bool(restarted)}, changed={changed}"
        if changed:
            fresh = quiet_fit(make(Est, warm_start=True, **dict(changes)), "fit", X, y)
            assert np.array_equal(est.posterior_.mean, fresh.posterior_.mean), f"{what}: not a new fit"
        else:
            assert est.t_ > t, f"{what}: did not continue"
        check_predictions(est, X, X.shape[0], what)

    run()


@pytest.mark.parametrize("Est", NETWORKS, ids=[Est.__name__ for Est in NETWORKS])
def test_float32_fuzz(Est, slow):
    """``dtype='float32'`` on random data at scales 1e-3..1e3 with every start: finite
    predictions, or a clear error naming the input or the dtype."""
    classifier = is_classifier(Est())

    @fuzz_settings(slow, 4)
    @given(
        seed=st.integers(0, 1000),
        log_scale=st.floats(-3, 3),
        n=st.integers(8, 40),
        init=st.sampled_from(["iblm", "default", "iblm_random", "lsuv"]),
    )
    def run(seed, log_scale, n, init):
        X, y = clean_data(classifier, n=n, d=3, seed=seed)
        X = X * 10.0**log_scale
        est = make(Est, dtype="float32", init=init)
        what = f"{Est.__name__}(dtype='float32', init={init!r}) on X * 1e{log_scale:.1f}"
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                est.fit(X, y)
        except Exception as exc:
            check_clear_error(exc, what, NAMES_DATA)
            return
        check_predictions(est, X, X.shape[0], what)
        fitted.append(init)

    fitted = []
    run()
    assert fitted, f"{Est.__name__}: no float32 fit succeeded"


# --- global state ---------------------------------------------------------------------------


def global_state():
    return {
        "torch threads": torch.get_num_threads(),
        "torch default dtype": torch.get_default_dtype(),
        "torch rng": torch.get_rng_state(),
        "torch grad mode": torch.is_grad_enabled(),
        "numpy rng": np.random.get_state(),  # noqa: NPY002 - the legacy global RNG is the state at stake
        "numpy errstate": np.geterr(),
        "warnings filters": list(warnings.filters),
    }


def assert_same_state(before, after, what):
    for key in before:
        a, b = before[key], after[key]
        if key == "numpy rng":
            equal = a[0] == b[0] and np.array_equal(a[1], b[1]) and a[2:] == b[2:]
        elif isinstance(a, torch.Tensor):
            equal = torch.equal(a, b)
        else:
            equal = a == b
        assert equal, f"{what} changed the global {key}"


@pytest.mark.parametrize("default_dtype", [torch.float32, torch.float64], ids=["torch32", "torch64"])
@pytest.mark.parametrize("Est", ESTIMATORS, ids=IDS)
def test_global_state_untouched(Est, default_dtype):
    classifier = is_classifier(Est())
    X, y = clean_data(classifier)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(default_dtype)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            for params in ({}, {"dtype": "float32"} if "dtype" in Est().get_params() else {}):
                est = make(Est, **params)
                before = global_state()
                est.fit(X, y)
                assert_same_state(before, global_state(), f"{Est.__name__}.fit")
                if hasattr(est, "partial_fit"):
                    est.partial_fit(X, y)
                    assert_same_state(before, global_state(), f"{Est.__name__}.partial_fit")
                for method in ("predict", "predict_proba", "predict_std", "sample_outputs"):
                    if hasattr(est, method):
                        getattr(est, method)(X)
                        assert_same_state(before, global_state(), f"{Est.__name__}.{method}")
    finally:
        torch.set_default_dtype(previous)


def test_every_estimator_is_fuzzed():
    assert sorted(IDS) == sorted(n for n in skbayes.__all__ if n.endswith(("Regressor", "Classifier", "Regression")))
    assert len(IDS) == len(set(IDS)) == len(skbayes.all_estimators())
