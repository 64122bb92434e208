"""The protocol shared by ``bench_methods.py`` and ``bench_uci.py``.

One place for: the estimator of a method name at its defaults plus the protocol's
fixed epochs and batch size, the step-size decay of the second half of training,
the train/test splits, one fit-and-score job (run in a worker process) and the
table formatting. Only public skbayes API is used.
"""

from __future__ import annotations

import ast
import math
import os
import subprocess
import time
import warnings

import numpy as np

import skbayes

#: Every network method of the registry: method name -> estimator class stem ('slang' -> 'SLANG').
REGISTRY_METHODS = {
    e.method: e.name.removesuffix("Regressor") for e in skbayes.all_estimators(task="regressor", network=True)
}
#: The registry's network methods whose posterior is a Gaussian over the weights.
REGISTRY_GAUSSIAN = tuple(e.method for e in skbayes.all_estimators(task="regressor", network=True, gaussian=True))
# method name: (estimator class stem, extra constructor arguments): every registry method at its
# defaults, and the variants the benchmarks compare
METHODS = {
    **{method: (stem, {}) for method, stem in REGISTRY_METHODS.items()},
    "slang": ("SLANG", {"rank": 8}),
    "slang1": ("SLANG", {"rank": 1}),
    "slang8": ("SLANG", {"rank": 8}),
    "vadam": ("Vadam", {"method": "vadam"}),
    "vprop": ("Vadam", {"method": "vprop"}),
}
# the tables' column headers (a method without one is headed by its class stem)
LABEL = {
    **{method: stem for method, stem in REGISTRY_METHODS.items()},
    "slang": "SLANG L=8",
    "slang1": "SLANG L=1",
    "slang8": "SLANG L=8",
    "vogn": "VOGN",
    "vadam": "Vadam",
    "vprop": "Vprop",
    "bbb": "BBB",
    "mcdropout": "MC dropout",
    "kfac": "noisy K-FAC",
    "ekfac": "noisy EK-FAC",
}
# What ``learning_rate='auto'`` resolves to (documented in VadamRegressor's docstring).
VADAM_AUTO_LEARNING_RATE = {"vadam": 0.01, "vprop": 0.05}
# The moving-average rates that act as step sizes and are decayed with ``learning_rate``.
DECAYED_RATES = ("beta", "factor_decay", "scale_decay")


def make_estimator(method, task, hidden, batch, epochs, seed, overrides=None, optional=None):
    """``method``'s estimator at its defaults with the protocol's epochs and batch size.

    ``tol=0`` and ``n_iter_no_change`` beyond any budget make the number of
    epochs fixed; ``overrides`` (a dict of constructor arguments) is applied last, and
    ``optional`` (the same, from a ``*`` wildcard) only where the estimator has the
    parameter (e.g. ``noise_prior`` on the regressors, not the classifiers).
    """
    stem, extra = METHODS[method]
    cls = getattr(skbayes, stem + ("Regressor" if task == "reg" else "Classifier"))
    est = cls(
        hidden_layer_sizes=(hidden,),
        batch_size=batch,
        max_iter=epochs,
        tol=0.0,
        n_iter_no_change=10**9,
        random_state=seed,
        **extra,
    )
    return apply_overrides(est, overrides, optional)


def parse_overrides(items, methods):
    """The ``--set METHOD.PARAM=VALUE`` items of a benchmark's command line.

    Returns ``(overrides, optional)``, two dicts ``{method: {param: value}}`` (values
    parsed with ``ast.literal_eval``): ``METHOD`` ``*`` puts ``PARAM`` in ``optional``
    for every method, applied only where the estimator has the parameter (see
    :func:`apply_overrides`). Raises ``ValueError`` with a usage message.
    """
    overrides = {m: {} for m in methods}
    optional = {m: {} for m in methods}
    for item in items:
        try:
            key, value = item.split("=", 1)
            m, param = key.split(".", 1)
            for target in methods if m == "*" else [m]:
                (optional if m == "*" else overrides)[target][param] = ast.literal_eval(value)
        except (ValueError, KeyError, SyntaxError) as exc:
            raise ValueError(
                f"--set expects METHOD.PARAM=VALUE with METHOD in {list(methods)} or '*', got {item!r}"
            ) from exc
    return overrides, optional


def apply_overrides(est, overrides=None, optional=None):
    """``est.set_params`` with ``overrides``, and with those ``optional`` ones the estimator has."""
    valid = est.get_params()
    params = {k: v for k, v in (optional or {}).items() if k in valid}
    params.update(overrides or {})
    return est.set_params(**params)


def _auto_step(est, name):
    """The documented value of step size ``name='auto'`` of a fitted ``est`` on a network of
    fewer than 20,000 weights (the tabular networks the decay protocol runs on)."""
    n_weights = sum(p.numel() for p in est.module_.parameters())
    if n_weights >= 20_000:
        raise ValueError(f"{name}='auto' is resolved here only below 20,000 weights, not {n_weights}")
    p = est.get_params()
    if name == "learning_rate":  # Vadam/Vprop by method, BBB and MC dropout 0.01
        return VADAM_AUTO_LEARNING_RATE[p["method"]] if "method" in p else 0.01
    if name == "beta":  # VOGN (no rank parameter, or rank 0) 0.05, SLANG 0.01
        return 0.01 if p.get("rank", 0) > 0 else 0.05
    raise ValueError(f"no documented value for {name}='auto'")


def decayed_params(est, factor):
    """The step sizes of a fitted ``est`` multiplied by ``factor``: ``learning_rate`` and the
    rates of ``DECAYED_RATES``; an ``'auto'`` one is resolved with its documented value."""
    p = est.get_params()
    out = {}
    for name in ("learning_rate", *DECAYED_RATES):
        if name in p:
            value = _auto_step(est, name) if isinstance(p[name], str) else p[name]
            out[name] = value * factor
    return out


def uci_split(n, k):
    """Random 90/10 split ``k`` (``RandomState(k).permutation``)."""
    perm = np.random.RandomState(k).permutation(n)
    n_train = int(round(0.9 * n))
    return perm[:n_train], perm[n_train:]


def stratified_split(y, k):
    """Stratified 70/30 split ``k`` (``train_test_split(..., random_state=k)``)."""
    from sklearn.model_selection import train_test_split

    return train_test_split(np.arange(len(y)), test_size=0.3, stratify=y, random_state=k)


def standardise(X, tr, te):
    """Inputs standardised with the training rows' statistics (constant columns left at 0)."""
    mu, sd = X[tr].mean(0), X[tr].std(0)
    sd[sd == 0] = 1.0
    return (X[tr] - mu) / sd, (X[te] - mu) / sd


def fit_with_decay(est, X, y, epochs, decay=True):
    """Fit ``epochs`` epochs, the step sizes x0.1 for the second half (a ``warm_start`` refit).

    Returns ``(wall seconds, CPU seconds, problems)``; an exception or a warning
    other than "maximum iterations" is a problem (a result, not a crash).
    """
    first = epochs // 2 if decay else epochs
    problems = []
    t0, c0 = time.perf_counter(), time.process_time()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            est.set_params(max_iter=first).fit(X, y)
            if epochs - first > 0 and not est.diverged_:
                est.set_params(max_iter=epochs - first, warm_start=True, **decayed_params(est, 0.1))
                est.fit(X, y)
        except Exception as exc:
            problems.append(f"{type(exc).__name__}: {exc}")
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    for w in caught:
        msg = str(w.message)
        if "maximum iterations" not in msg:
            problems.append(msg.split(": training stopped")[0])
    return wall, cpu, problems


def score(est, Xte, yte, task, n_samples=100):
    """Test metrics from public API.

    Regression: RMSE of the predictive mean over ``n_samples`` weight samples and
    the mixture log-likelihood with the learned noise (``noise_std_``).
    Classification: error, log-loss and ECE of ``predict_proba``.
    """
    from sklearn.metrics import log_loss

    from skbayes.metrics import expected_calibration_error, mixture_log_likelihood

    with np.errstate(all="ignore"):
        if task == "reg":
            f = est.sample_outputs(Xte, n_samples=n_samples)[..., 0]
            return {
                "rmse": float(np.sqrt(np.mean((f.mean(0) - yte) ** 2))),
                "ll": mixture_log_likelihood(yte, f, est.noise_std_),
                "noise_std": est.noise_std_,
            }
        proba = est.predict_proba(Xte)
        yi = np.searchsorted(est.classes_, yte)
        return {
            "error": float(np.mean(proba.argmax(1) != yi)),
            "logloss": float(log_loss(yi, np.clip(proba, 1e-15, 1.0), labels=np.arange(len(est.classes_)))),
            "ece": expected_calibration_error(yi, proba),
        }


NAN_METRICS = {
    "reg": {"rmse": math.nan, "ll": math.nan},
    "clf": {"error": math.nan, "logloss": math.nan, "ece": math.nan},
}


def one_thread():
    """Give this worker process one thread, in torch and in numpy's and scipy's BLAS alike (the
    scikit-learn peers compute with numpy), so that every model is timed at the same threads."""
    import torch
    from threadpoolctl import threadpool_limits

    torch.set_num_threads(1)
    threadpool_limits(1)  # for the process's life, not a context


def run_job(est, Xtr, ytr, Xte, yte, task, epochs, decay=True):
    """Fit (single torch thread, single BLAS thread) and score; a dict of metrics, timings and
    problems."""
    one_thread()
    wall, cpu, problems = fit_with_decay(est, Xtr, ytr, epochs, decay)
    n_ep = int(getattr(est, "n_iter_", 0))
    out = dict(
        task=task,
        n_epochs=n_ep,
        sec_per_epoch=wall / max(n_ep, 1),
        cpu_per_epoch=cpu / max(n_ep, 1),
        problems=problems,
    )
    if not hasattr(est, "posterior_"):
        out.update(NAN_METRICS[task])
        return out
    try:
        out.update(score(est, Xte, yte, task))
    except (FloatingPointError, ValueError, RuntimeError) as exc:
        out.update(NAN_METRICS[task])
        out["problems"].append(f"prediction: {exc}")
    return out


def mean_se(v):
    """Mean and standard error (nan for fewer than two values)."""
    v = np.asarray(v, dtype=float)
    if len(v) < 2:
        return float(np.mean(v)), math.nan
    return float(np.mean(v)), float(np.std(v, ddof=1) / math.sqrt(len(v)))


def fmt(m, se, digits):
    """``m ± se`` with ``digits`` decimals."""
    if not np.isfinite(m):
        return "nan"
    return f"{m:.{digits}f} ± {se:.{digits}f}" if np.isfinite(se) else f"{m:.{digits}f}"


#: ``--image-scaling`` of the image benchmarks -> ``skbayes.preprocessing.ImageScaler``'s
#: ``centering`` (``'pixel'``, a per-pixel StandardScaler, is handled by each script)
IMAGE_CENTERING = {"global": "global", "centred": "pixel", "scale": None}


def library_version():
    """skbayes commit (and whether skbayes/ has uncommitted changes), for the record."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(skbayes.__file__)))
    info = f"skbayes {skbayes.__version__} from {root}"
    try:
        rev = subprocess.run(
            ["git", "-C", root, "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", root, "status", "--porcelain", "--", "skbayes"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        info += f", commit {rev}" + (" + uncommitted changes in skbayes/" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        pass
    return info


def print_problems(results, none_message=None):
    """The ``(!)`` footnote of a table: every fit whose result lists ``problems``."""
    probs = [r for r in results if r["problems"]]
    if probs:
        print("\n(!) problems:")
        for r in probs:
            print(f"  {r['dataset']} {r['method']} split {r['split']}: {'; '.join(r['problems'])}")
    elif none_message:
        print("\n" + none_message)
