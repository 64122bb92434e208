"""A battery of bad and edge cases against every estimator, tried as a new user would.

Each case ends in one of four outcomes:

- ``error``: a clear exception (``ValueError`` / ``TypeError`` / ``NotFittedError`` /
  ``MemoryError`` family) whose message is not an internal torch / linear-algebra one;
- ``ok``: the fit and the predictions are finite and sensible (on the training data,
  no worse than the best constant prediction, within 10%: regression mean squared
  error, classification log-loss; a prior that pins every weight to zero gives that
  constant, correctly), or not sensible but with a warning that says so
  (``InputScaleWarning``, ``PoorFitWarning``);
- ``silent``: finite predictions that are not sensible, with no warning but the
  ``max_iter`` one;
- ``crash``: any other exception, or an error message from the internals.

Besides bad input and extreme parameters, three categories of a fit's surroundings:

- ``concurrency``: clones fitted in 4 threads at once must equal serial fits bit for bit
  and leave torch's global RNG and default dtype alone (else ``silent``);
- ``continuing``: after ``set_params`` of a structural parameter (``hidden_layer_sizes``,
  ``activation``, ``dtype``, MC dropout's rates) a ``warm_start`` fit must warn and equal
  a new fit, ``partial_fit`` must refuse clearly (``error``); a changed
  ``prior_precision`` must be applied by a continuing fit;
- ``dtype``: ``dtype='float32'`` with the default start must fit standardised data
  (an exception is a ``crash``) and score within 0.05 of float64 (else ``silent``);
- ``stream``: ``partial_fit`` over batches of 1, 3 and 10 rows (shuffled, and ordered by
  class or target), 5 epochs by ``partial_fit`` with ``n_samples_total``, must end
  sensible or warn; a stream of 30 rows in all must warn that it is too short to trust;
- ``resource``: fits far above the memory limit (a layer of 2e8 units, SLANG's
  ``rank=1e6`` on two layers of 1000 units, noisy K-FAC on 20,000 features or a layer of 300,000 units,
  BayesianLinearRegression on 100,000 features) must be refused with a clear error, and
  predicting 300,000 rows must equal predicting each row's chunk.

The last five run for every estimator that has the method they need (``partial_fit`` for
the streams). Run: ``python benchmarks/bench_battery.py`` (about 10 minutes on 2 cores),
or ``--categories stream resource`` for some of the categories only. Prints a
table of outcomes per estimator and per category, and lists every case that is
``silent`` or ``crash``.
"""

from __future__ import annotations

import argparse
import collections
import sys
import tempfile
import time
import warnings

import numpy as np
import pandas as pd
import torch
from sklearn.datasets import load_diabetes, load_iris
from sklearn.exceptions import ConvergenceWarning, NotFittedError
from sklearn.preprocessing import StandardScaler

import skbayes
from skbayes.exceptions import InputScaleWarning, PoorFitWarning, SmallStreamWarning, StreamOrderWarning

INTERNAL = ("torch", "linalg", "mat1", "size mismatch", "cholesky", "_LinAlgError", "Tensor", "CUDA")
CLEAR = (ValueError, TypeError, NotFittedError, MemoryError)
SMALL = dict(hidden_layer_sizes=(8,), max_iter=20, predict_samples=10, random_state=0)


def _estimators():
    names = [n for n in skbayes.__all__ if n.endswith(("Regressor", "Classifier"))]
    out = [(n, getattr(skbayes, n), SMALL) for n in names]
    out.append(("BayesianLinearRegression", skbayes.BayesianLinearRegression, {}))
    return out


def _reg():
    X, y = load_diabetes(return_X_y=True)
    return StandardScaler().fit_transform(X[:150]), y[:150]


def _clf():
    X, y = load_iris(return_X_y=True)
    return StandardScaler().fit_transform(X), y


def _memmap(a):
    f = tempfile.NamedTemporaryFile(suffix=".dat", delete=False)
    m = np.memmap(f.name, dtype=a.dtype, mode="w+", shape=a.shape)
    m[:] = a
    m.flush()
    return np.memmap(f.name, dtype=a.dtype, mode="r", shape=a.shape)


def _readonly(a):
    a = np.array(a)
    a.setflags(write=False)
    return a


def _cases(is_clf):
    """(name, X, y, X_predict, expectation) with expectation 'error' or 'fit'."""
    X, y = _clf() if is_clf else _reg()
    bad = X.copy()
    bad[3, 1] = np.nan
    infs = X.copy()
    infs[0, 0] = np.inf
    ynan = y.astype(float).copy()
    ynan[2] = np.nan
    cases = [
        ("X with NaN", bad, y, X, "error"),
        ("X with inf", infs, y, X, "error"),
        ("y with NaN", X, ynan, X, "error"),
        ("empty X", X[:0], y[:0], X, "error"),
        ("1-D X", X[:, 0], y, X, "error"),
        ("3-D X", X[:, :, None], y, X, "error"),
        ("string X", np.full(X.shape, "a"), y, X, "error"),
        ("complex X", X + 1j, y, X, "error"),
        ("mismatched lengths", X, y[:-1], X, "error"),
        ("predict: wrong width", X, y, X[:, :-1], "error"),
        ("list X", X.tolist(), list(y), X, "fit"),
        ("pandas X", pd.DataFrame(X), pd.Series(y), pd.DataFrame(X), "fit"),
        ("read-only X, y", _readonly(X), _readonly(y), X, "fit"),
        ("memmap X", _memmap(X), y, X, "fit"),
        ("int X", np.round(X * 3).astype(np.int64), y, np.round(X * 3).astype(np.int64), "fit"),
        ("float32 X", X.astype(np.float32), y, X.astype(np.float32), "fit"),
        ("X * 1e8", X * 1e8, y, X * 1e8, "fit"),
        ("X * 1e-8", X * 1e-8, y, X * 1e-8, "fit"),
        ("a constant column", np.hstack([X, np.ones((len(X), 1))]), y, np.hstack([X, np.ones((len(X), 1))]), "fit"),
        ("duplicated rows", np.vstack([X, X]), np.concatenate([y, y]), X, "fit"),
        ("more features than rows", np.hstack([X[:20]] * 4), y[:20], np.hstack([X[:20]] * 4), "fit"),
        ("predict: X * 1e300", X, y, X * 1e300, "fit"),
        ("predict: X * 1e20", X, y, X * 1e20, "fit"),
    ]
    if is_clf:
        cases += [
            ("one class", X, np.zeros(len(y)), X, "error"),
            ("string labels", X, np.array(["a", "b", "c"])[y], X, "fit"),
            ("float labels", X, y.astype(float) + 0.5, X, "fit"),
            ("continuous y", X, np.linspace(0, 1, len(y)), X, "error"),
            ("2 rows per class", X[[0, 1, 50, 51, 100, 101]], y[[0, 1, 50, 51, 100, 101]], X, "fit"),
        ]
    else:
        cases += [
            ("constant y", X, np.full(len(y), 3.0), X, "fit"),
            ("y * 1e10", X, y * 1e10, X, "fit"),
            ("y * 1e-10", X, y * 1e-10, X, "fit"),
            ("2-D y (n, 1)", X, y[:, None], X, "fit"),
            ("int y", X, np.round(y).astype(np.int64), X, "fit"),
        ]
    return cases


def _param_cases(cls):
    """Valid but extreme hyperparameter settings the estimator has."""
    names = cls().get_params()
    options = [
        ("learning_rate", 1e4),
        ("learning_rate", 1e-8),
        ("max_iter", 0),
        ("max_iter", 1),
        ("batch_size", 1),
        ("mc_samples", 1),
        ("predict_samples", 1),
        ("prior_precision", 1e-8),
        ("prior_precision", 1e8),
        ("alpha", 1e-12),
        ("alpha", 1e12),
        ("dropout", 0.99),
        ("early_stopping", True),
        ("kl_weight", 1e-6),
        ("rank", 10**6),
    ]
    return [{k: v} for k, v in options if k in names]


def _clear(exc):
    return isinstance(exc, CLEAR) and not any(s in str(exc) for s in INTERNAL)


def _sensible(est, X, y, Xp, is_clf):
    """Finite predictions (raises otherwise); True when the fit beats a constant."""
    if is_clf:
        p = est.predict_proba(Xp)
        if not (np.isfinite(p).all() and np.allclose(p.sum(1), 1)):
            return None
        yy = np.asarray(y)
        if np.shape(Xp) == np.shape(X) and np.array_equal(np.asarray(Xp, float), np.asarray(X, float)):
            idx = np.searchsorted(est.classes_, yy)
            loss = -np.mean(np.log(np.clip(p[np.arange(len(yy)), idx], 1e-300, None)))
            freq = np.bincount(idx, minlength=len(est.classes_)) / len(yy)
            const = -np.mean(np.log(freq[idx]))
            return loss <= 1.1 * const + 1e-3
        return True
    out = est.predict(Xp, return_std=True)
    if not all(np.isfinite(o).all() for o in out):
        return None
    if np.shape(Xp) == np.shape(X) and np.array_equal(np.asarray(Xp, float), np.asarray(X, float)):
        yy = np.asarray(y, float).reshape(np.shape(out[0]))  # a 2-D y: predictions of its shape
        if yy.std() == 0:
            return np.max(np.abs(out[0] - yy)) <= 3 * np.median(out[1]) + 1e-9
        return np.mean((out[0] - yy) ** 2) <= 1.1 * yy.var()
    return True


def run_case(cls, params, case, is_clf):
    name, X, y, Xp, expect = case
    X_copy, y_copy = np.array(X, dtype=object, copy=True), np.array(y, dtype=object, copy=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            est = cls(**params).fit(X, y)
            sensible = _sensible(est, X, y, Xp, is_clf)
        except Exception as exc:  # noqa: BLE001 - classifying every outcome is the point
            return ("error" if _clear(exc) else "crash"), f"{type(exc).__name__}: {str(exc)[:120]}"
    if not (np.array_equal(np.array(X, dtype=object), X_copy) and np.array_equal(np.array(y, dtype=object), y_copy)):
        return "crash", "the input was modified"
    if sensible is None:
        return "silent", "non-finite predictions"
    if expect == "error":
        return "silent", "accepted input that should be refused"
    warned = [w for w in caught if issubclass(w.category, (InputScaleWarning, PoorFitWarning))]
    if sensible or warned:
        return "ok", (str(warned[0].message)[:80] if warned else "")
    others = [w.category.__name__ for w in caught if not issubclass(w.category, ConvergenceWarning)]
    return "silent", "fit worse than a constant, no warning" + (f" ({others})" if others else "")


# --- fits that share a process, continuing fits, dtype ----------------------------------------
#: Structural parameters and a changed value (those an estimator has): a continuing fit
#: cannot apply them, so a warm_start fit must start afresh with a warning and
#: partial_fit must refuse.
STRUCTURAL = {
    "hidden_layer_sizes": (4,),
    "activation": "tanh",
    "dtype": "float32",
    "dropout": 0.3,
    "input_dropout": 0.2,
}


def _outputs(est, X, is_clf):
    return est.predict_proba(X) if is_clf else np.stack(est.predict(X, return_std=True))


def _concurrency_case(cls, params, is_clf):
    """Four clones fitted in four threads at once against the same fits one after another:
    'ok' when they agree bit for bit and torch's global RNG and default dtype are unchanged."""
    from concurrent.futures import ThreadPoolExecutor

    from sklearn.base import clone

    X, y = _clf() if is_clf else _reg()
    est = cls(**params)
    rng, dtype = torch.random.get_rng_state(), torch.get_default_dtype()

    def fit(e):
        return _outputs(clone(e).fit(X, y), X, is_clf)

    try:
        with warnings.catch_warnings():  # the filters are process-wide: set them here, not in the threads
            warnings.simplefilter("ignore")
            serial = [fit(est) for _ in range(2)]
            with ThreadPoolExecutor(max_workers=4) as pool:
                threaded = list(pool.map(fit, [est] * 4))
    except Exception as exc:  # noqa: BLE001
        return "crash", f"{type(exc).__name__}: {str(exc)[:120]}"
    if not all(np.array_equal(t, serial[0]) for t in serial + threaded):
        return "silent", "fits in threads differ from serial fits"
    if not (torch.equal(torch.random.get_rng_state(), rng) and torch.get_default_dtype() == dtype):
        return "silent", "torch's global RNG or default dtype changed"
    return "ok", ""


def _continuing_cases(cls, params, is_clf):
    """After ``set_params`` of a structural parameter: a warm_start fit must warn and equal a
    new fit; partial_fit must refuse clearly. After a change of ``prior_precision``: a
    continuing fit must apply it. Yields ``(case, outcome, detail)``."""
    names = cls().get_params()
    if "warm_start" not in names:
        return
    X, y = _clf() if is_clf else _reg()
    base = {**params, "max_iter": 3}
    for name, value in STRUCTURAL.items():
        if name not in names:
            continue
        for how in ("warm_start", "partial_fit"):
            case = f"continuing: {how} after {name}={value!r}"
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                try:
                    est = cls(**base, warm_start=True).fit(X, y).set_params(**{name: value})
                    if how == "warm_start":
                        est.fit(X, y)
                        fresh = cls(**{**base, name: value}, warm_start=True).fit(X, y)
                    else:
                        est.partial_fit(X, y)
                except Exception as exc:  # noqa: BLE001
                    outcome = "error" if how == "partial_fit" and _clear(exc) and name in str(exc) else "crash"
                    yield case, outcome, f"{type(exc).__name__}: {str(exc)[:120]}"
                    continue
            if how == "partial_fit":
                yield case, "silent", "partial_fit accepted a changed structure"
                continue
            warned = any(name in str(w.message) and "afresh" in str(w.message) for w in caught)
            same = np.array_equal(_outputs(est, X, is_clf), _outputs(fresh, X, is_clf))
            if warned and same:
                yield case, "ok", ""
            else:
                yield case, "silent", f"warned={warned}, equals a new fit={same}"
    if "prior_precision" in names:
        case = "continuing: prior_precision=10 applied"
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                est = cls(**base, warm_start=True).fit(X, y).set_params(prior_precision=10.0).fit(X, y)
        except Exception as exc:  # noqa: BLE001
            yield case, "crash", f"{type(exc).__name__}: {str(exc)[:120]}"
            return
        values = set(est.prior_precision_.values())
        yield (case, "ok", "") if values == {10.0} else (case, "silent", f"prior_precision_ = {values}")


def _dtype_cases(cls, params, is_clf):
    """float32 computation (the default start) on standardised data must fit as well as
    float64 does: the training score within 0.05 of float64's. Yields ``(case, outcome, detail)``."""
    if "dtype" not in cls().get_params():
        return
    X, y = _clf() if is_clf else _reg()
    scores = {}
    for dtype in ("float64", "float32"):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                est = cls(**params, dtype=dtype).fit(X, y)
            scores[dtype] = est.score(X, y)
        except Exception as exc:  # noqa: BLE001 - a float32 fit on standardised data must work
            yield f"dtype={dtype!r}, default start", "crash", f"{type(exc).__name__}: {str(exc)[:120]}"
            return
    gap = scores["float64"] - scores["float32"]
    outcome = "ok" if gap <= 0.05 else "silent"
    yield "dtype='float32', default start", outcome, f"score {scores['float32']:.3f} vs {scores['float64']:.3f}"


def _outcome_of(fn):
    """Run ``fn`` (which returns ``(sensible, warned)``) and classify it as :func:`run_case` does."""
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        try:
            sensible, warned = fn()
        except Exception as exc:  # noqa: BLE001 - classifying every outcome is the point
            return ("error" if _clear(exc) else "crash"), f"{type(exc).__name__}: {str(exc)[:120]}"
    if sensible is None:
        return "silent", "non-finite predictions"
    if sensible or warned:
        return "ok", warned or ""
    return "silent", "fit worse than a constant, no warning"


def _stream_cases(cls, params, is_clf):
    """Streams: ``partial_fit`` over small batches, shuffled and ordered, a stream too short
    to trust (it must warn), and epochs by ``partial_fit`` with ``n_samples_total``."""
    if not hasattr(cls, "partial_fit"):
        return []
    X, y = _clf() if is_clf else _reg()
    kw = {"classes": np.unique(y)} if is_clf else {}
    shuffled = np.random.RandomState(0).permutation(len(y))
    ordered = shuffled[np.argsort(y[shuffled], kind="stable")]

    def stream(order, batch, n_rows=None, epochs=1, **extra):
        def fn():
            est = cls(**params)
            rows = order[:n_rows]
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                for _ in range(epochs):
                    for s in range(0, len(rows), batch):
                        r = rows[s : s + batch]
                        est.partial_fit(X[r], y[r], **kw, **extra)
            warned = [
                w for w in caught if issubclass(w.category, (SmallStreamWarning, StreamOrderWarning, PoorFitWarning))
            ]
            if n_rows is not None and n_rows < est.iblm_batch_size and not warned:
                return False, ""  # a stream too short to trust must say so
            Xs, ys = X[rows], y[rows]
            return _sensible(est, Xs, ys, Xs, is_clf), (str(warned[-1].message)[:80] if warned else "")

        return fn

    return [
        ("stream: 1-row batches", stream(shuffled, 1)),
        ("stream: 3-row batches", stream(shuffled, 3)),
        ("stream: 10-row batches", stream(shuffled, 10)),
        ("stream: 10-row batches, ordered by " + ("class" if is_clf else "target"), stream(ordered, 10)),
        ("stream: 30 rows in all", stream(shuffled, 5, n_rows=30)),
        ("stream: 5 epochs with n_samples_total", stream(shuffled, 50, epochs=5, n_samples_total=len(y))),
    ]


def _resource_cases(cls, params, is_clf):
    """Resource limits: fits whose memory is far above the limit must be refused up front
    (``MemoryLimitError``) and prediction of many rows must equal that of each row."""
    X, y = _clf() if is_clf else _reg()
    network = hasattr(cls, "partial_fit")
    rng = np.random.RandomState(0)

    def fit(est, Xf, yf):
        def fn():
            est.fit(Xf, yf)
            return _sensible(est, Xf, yf, Xf, is_clf), ""

        return fn

    def many_rows():
        est = cls(**params).fit(X, y)
        Xbig = np.vstack([X, rng.standard_normal((300_000, X.shape[1]))])
        big = est.predict_proba(Xbig) if is_clf else est.predict(Xbig)
        small = est.predict_proba(X) if is_clf else est.predict(X)
        return bool(np.allclose(big[: len(X)], small, rtol=1e-12, atol=1e-12)), ""

    cases = [("predict 300,000 rows", many_rows)]
    if network:
        cases.append(("a layer of 2e8 units", fit(cls(**{**params, "hidden_layer_sizes": (200_000_000,)}), X, y)))
        if "rank" in cls().get_params():
            cases.append(
                (
                    "rank=1e6, 1000-1000 units",
                    fit(cls(**{**params, "hidden_layer_sizes": (1000, 1000), "rank": 10**6}), X, y),
                )
            )
        if "KFAC" in cls.__name__:
            wide = rng.standard_normal((20, 20_000))
            cases.append(("20,000 features", fit(cls(**params), wide, y[:20])))
            cases.append(("a layer of 300,000 units", fit(cls(**{**params, "hidden_layer_sizes": (300_000,)}), X, y)))
    else:
        wide = rng.standard_normal((20, 100_000))
        cases.append(("100,000 features", fit(cls(**params), wide, y[:20])))
    return cases


def run_category(cases, label=""):
    """``(case name, outcome, detail)`` of each ``(name, fn)``; each case's outcome and time
    go to stderr as it ends, so that a long run shows its progress."""
    out = []
    for name, fn in cases:
        start = time.perf_counter()
        out.append((name,) + _outcome_of(fn))
        print(f"{label} | {name} | {out[-1][1]} | {time.perf_counter() - start:.1f} s", file=sys.stderr, flush=True)
    return out


#: The categories ``--categories`` chooses from: bad data, extreme parameters (with predicting
#: before fit), and a fit's surroundings.
CATEGORIES = ("data", "params", "concurrency", "continuing", "dtype", "stream", "resource")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=None, help="comma-separated estimator names")
    parser.add_argument("--categories", nargs="+", default=list(CATEGORIES), choices=list(CATEGORIES))
    args = parser.parse_args()
    run = set(args.categories)
    torch.set_num_threads(1)
    rows, problems = [], []
    category = collections.defaultdict(lambda: dict(error=0, ok=0, silent=0, crash=0))
    for name, cls, params in _estimators():
        if args.only and name not in args.only.split(","):
            continue
        is_clf = name.endswith("Classifier")
        counts = dict(error=0, ok=0, silent=0, crash=0)
        for case in _cases(is_clf) if "data" in run else []:
            outcome, detail = run_case(cls, params, case, is_clf)
            counts[outcome] += 1
            if outcome in ("silent", "crash"):
                problems.append((name, case[0], outcome, detail))
        # extreme but valid hyperparameters on clean data
        data = _cases(is_clf)[10]  # "list X": clean data
        clean = ("extreme params",) + tuple(data[1:4]) + ("fit",)
        for extra in _param_cases(cls) if "params" in run else []:
            outcome, detail = run_case(cls, {**params, **extra}, clean, is_clf)
            counts[outcome] += 1
            if outcome in ("silent", "crash"):
                problems.append((name, f"params {extra}", outcome, detail))
        # fits that share a process, continuing fits, dtype
        extra = []
        if "concurrency" in run:
            extra += [("concurrency", ("concurrency: 4 threads", *_concurrency_case(cls, params, is_clf)))]
        if "continuing" in run:
            extra += [("continuing", c) for c in _continuing_cases(cls, params, is_clf)]
        if "dtype" in run:
            extra += [("dtype", c) for c in _dtype_cases(cls, params, is_clf)]
        # streams and resource limits
        if "stream" in run:
            extra += [("stream", c) for c in run_category(_stream_cases(cls, params, is_clf), name)]
        if "resource" in run:
            extra += [("resource", c) for c in run_category(_resource_cases(cls, params, is_clf), name)]
        for cat, (case, outcome, detail) in extra:
            counts[outcome] += 1
            category[cat][outcome] += 1
            if outcome in ("silent", "crash"):
                problems.append((name, case, outcome, detail))
        # not-fitted and refit-state cases
        if "params" in run:
            try:
                cls(**params).predict(_clf()[0] if is_clf else _reg()[0])
                counts["silent"] += 1
                problems.append((name, "predict before fit", "silent", "no error"))
            except NotFittedError:
                counts["error"] += 1
        rows.append((name, counts))
    print("| estimator | clear error | correct | silent | crash |")
    print("|---|---:|---:|---:|---:|")
    for name, c in rows:
        print(f"| {name} | {c['error']} | {c['ok']} | {c['silent']} | {c['crash']} |")
    total = {k: sum(c[k] for _, c in rows) for k in ("error", "ok", "silent", "crash")}
    print(f"| **total** | {total['error']} | {total['ok']} | {total['silent']} | {total['crash']} |")
    print("\n| category | clear error | correct | silent | crash |")
    print("|---|---:|---:|---:|---:|")
    for cat, c in category.items():
        print(f"| {cat} | {c['error']} | {c['ok']} | {c['silent']} | {c['crash']} |")
    if problems:
        print("\nSilent or crash outcomes:")
        for p in problems:
            print(" -", " | ".join(p))


if __name__ == "__main__":
    main()
