"""Stopping at the defaults: every network estimator with ``max_iter=200`` against ``'auto'``.

Each network estimator of ``skbayes.all_estimators()`` at its defaults except ``max_iter``
(and ``random_state=k``; Vadam/Vprop, whose default ``tol=None`` trains a budget of
``max_iter`` epochs, with ``tol=1e-4`` so that both settings stop by the same rule), on
scikit-learn's bundled sets: classifiers on breast cancer and wine (test log-loss), regressors
on diabetes (negative mean test log-likelihood per point, in the units of y). Three random
75/25 splits ``train_test_split(..., random_state=k)``, stratified for the classifiers,
inputs standardised on the training rows, one torch thread.
Prints per estimator, data set and setting the mean ± standard error over the splits, the
epochs each fit used and how many fits raised a ``ConvergenceWarning``. Public API only.

Run:  .venv/bin/python benchmarks/bench_stopping.py [--task classifier|regressor] [--splits 3]
      [--methods slang,vadam] [--max-iter 200,auto]
      (about 10 minutes on 2 cores; run the two tasks in parallel)
"""

import argparse
import time
import warnings

import numpy as np
import torch
from sklearn.datasets import load_breast_cancer, load_diabetes, load_wine
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import log_loss
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

import skbayes

DATA = {
    "classifier": {"breast_cancer": load_breast_cancer, "wine": load_wine},
    "regressor": {"diabetes": load_diabetes},
}


def run_cell(info, loader, max_iter, splits):
    X, y = loader(return_X_y=True)
    scores, epochs, warned = [], [], 0
    classifier = info.task == "classifier"
    for k in range(splits):
        Xtr, Xte, ytr, yte = train_test_split(X, y, random_state=k, stratify=y if classifier else None)
        scaler = StandardScaler().fit(Xtr)
        Xtr, Xte = scaler.transform(Xtr), scaler.transform(Xte)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            est = info.estimator(random_state=k, max_iter=max_iter)
            if est.get_params()["tol"] is None:  # a budget default: compare the tolerance rule
                est.set_params(tol=1e-4)
            est.fit(Xtr, ytr)
        warned += sum(issubclass(w.category, ConvergenceWarning) for w in caught)
        epochs.append(est.n_iter_)
        if classifier:
            scores.append(log_loss(yte, est.predict_proba(Xte), labels=np.unique(y)))
        else:
            scores.append(-est.log_likelihood(Xte, yte))
    s = np.asarray(scores)
    se = s.std(ddof=1) / np.sqrt(len(s)) if len(s) > 1 else float("nan")
    return s.mean(), se, epochs, warned


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--task", choices=["classifier", "regressor"], default=None, help="default: both")
    ap.add_argument("--splits", type=int, default=3)
    ap.add_argument("--methods", default=None, help="comma-separated registry methods (default: all)")
    ap.add_argument("--max-iter", default="200,auto", help="comma-separated max_iter settings (default: 200,auto)")
    args = ap.parse_args(argv)
    settings = [v if v == "auto" else int(v) for v in args.max_iter.split(",")]
    torch.set_num_threads(1)
    methods = None if args.methods is None else set(args.methods.split(","))
    print(f"{'estimator':<22} {'data':<14} {'max_iter':>8} {'score':>18} {'warned':>6}  epochs")
    for task in [args.task] if args.task else ["classifier", "regressor"]:
        for info in skbayes.all_estimators(task=task, network=True):
            if methods is not None and info.method not in methods:
                continue
            for dname, loader in DATA[task].items():
                for max_iter in settings:
                    t0 = time.perf_counter()
                    mean, se, epochs, warned = run_cell(info, loader, max_iter, args.splits)
                    print(
                        f"{info.name:<22} {dname:<14} {max_iter!s:>8} {mean:>9.4f} ± {se:.4f} {warned:>6}  "
                        f"{epochs} ({time.perf_counter() - t0:.0f} s)",
                        flush=True,
                    )


if __name__ == "__main__":
    main()
