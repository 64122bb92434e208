"""Cost of a training epoch on small tabular sets: every classifier against MLPClassifier.

Seconds per epoch of each skbayes classifier at its defaults (plus any ``--set``
overrides) on scikit-learn's digits and breast cancer and a generated 5,000 x 10
``make_classification`` set (standardised, the first 70% of the rows), against
scikit-learn's ``MLPClassifier`` at its defaults (minibatch 200). An epoch's time is
``(t(fit with 12 epochs) - t(fit with 2 epochs)) / 10``, so the initialisation (i-BLM)
and the first epochs' fixed costs cancel; stopping rules are switched off
(``n_iter_no_change`` huge); the best of ``--repeats`` runs, 1 torch thread. Public API
only. Epochs until done are in ``bench_defaults.py``; per-epoch ratios times those
give the fit-time ratios.

Run: ``.venv/bin/python benchmarks/bench_epoch.py [--methods slang,kfac,...]
[--set METHOD.PARAM=VALUE] [--repeats 3]``
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
import torch
from _harness import apply_overrides, library_version, parse_overrides
from sklearn.datasets import load_breast_cancer, load_digits, make_classification
from sklearn.neural_network import MLPClassifier
from sklearn.preprocessing import StandardScaler

import skbayes

METHODS = {e.method: e.estimator for e in skbayes.all_estimators(task="classifier", network=True)}
EPOCHS = 12


def datasets():
    gen = make_classification(5000, 10, n_informative=6, n_redundant=2, flip_y=0.05, random_state=0)
    for name, (X, y) in (
        ("digits", load_digits(return_X_y=True)),
        ("breast_cancer", load_breast_cancer(return_X_y=True)),
        ("gen_clf", gen),
    ):
        X = StandardScaler().fit_transform(X)
        n = int(0.7 * len(X))
        yield name, X[:n], y[:n]


def epoch_seconds(make, X, y, repeats):
    best = np.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        make(2).fit(X, y)
        t1 = time.perf_counter()
        make(EPOCHS).fit(X, y)
        t2 = time.perf_counter()
        best = min(best, ((t2 - t1) - (t1 - t0)) / (EPOCHS - 2))
    return best


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--methods", default="slang,vogn,vadam,bbb,mcdropout,kfac,ekfac")
    parser.add_argument("--set", action="append", default=[], metavar="METHOD.PARAM=VALUE")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    methods = args.methods.split(",")
    overrides, optional = parse_overrides(args.set, methods)
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")
    print("# Milliseconds per training epoch (bench_epoch.py)\n")
    print(f"{library_version()}, torch {torch.__version__}, 1 torch thread, best of {args.repeats}")
    if args.set:
        print(f"overrides: {args.set}")
    print()
    print("| dataset | " + " | ".join(methods) + " | MLPClassifier |")
    print("|---|" + "---:|" * (len(methods) + 1))
    for name, X, y in datasets():
        row = []
        for m in methods:

            def make(epochs, m=m):
                est = METHODS[m](random_state=0, max_iter=epochs, n_iter_no_change=10**6)
                return apply_overrides(est, overrides[m], optional[m])

            row.append(epoch_seconds(make, X, y, args.repeats))

        def make_mlp(epochs):
            return MLPClassifier(random_state=0, max_iter=epochs, n_iter_no_change=10**6)

        mlp = epoch_seconds(make_mlp, X, y, args.repeats)
        cells = [f"{1e3 * r:.1f} ({r / mlp:.1f}x)" for r in row]
        print(f"| {name} | " + " | ".join(cells) + f" | {1e3 * mlp:.1f} |", flush=True)


if __name__ == "__main__":
    main()
