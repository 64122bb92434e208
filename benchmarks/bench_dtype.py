"""float32 against float64: held-out scores of every network estimator.

Each estimator (its defaults, ``max_iter`` epochs) is fitted on standardised
diabetes (R^2), breast cancer and digits (accuracy and log-loss), and optionally a
Fashion-MNIST subset, in float64 with two seeds and in float32 with the first: the
float32 score should differ from the float64 one by about what the seed changes.

Run: ``python benchmarks/bench_dtype.py [--max-iter 50] [--only SLANGRegressor,...] [--fashion 3000]``
(``--fashion N``: also a stratified subset of N Fashion-MNIST rows, from Debian's
``dataset-fashion-mnist``). ``--seeds N`` (N > 2) fits both dtypes at seeds 0 to N-1 instead
and prints each dtype's mean score ± standard error over the seeds.
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np
import torch
from sklearn.datasets import load_breast_cancer, load_diabetes, load_digits
from sklearn.metrics import log_loss, r2_score
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

import skbayes

try:
    from _harness import fmt, mean_se
except ImportError:  # imported as benchmarks.bench_dtype
    from benchmarks._harness import fmt, mean_se


def _split(X, y, stratify):
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.25, random_state=0, stratify=y if stratify else None)
    sc = StandardScaler().fit(Xtr)
    return sc.transform(Xtr), sc.transform(Xte), ytr, yte


def _fashion(n_rows):
    """A stratified subset of ``n_rows`` Fashion-MNIST training rows, or None without the data."""
    try:
        from bench_fashion import DATA_DIR, load
    except ImportError:
        from benchmarks.bench_fashion import DATA_DIR, load
    try:
        X, y, _, _ = load(DATA_DIR)
    except FileNotFoundError:
        return None
    X, _, y, _ = train_test_split(X, y, train_size=n_rows, random_state=0, stratify=y)
    return _split(X.astype(np.float64), y, True)


def datasets(fashion):
    out = {"diabetes": ("reg",) + _split(*load_diabetes(return_X_y=True), False)}
    out["breast_cancer"] = ("clf",) + _split(*load_breast_cancer(return_X_y=True), True)
    out["digits"] = ("clf",) + _split(*load_digits(return_X_y=True), True)
    if fashion is not None:
        out["fashion_subset"] = ("clf",) + fashion
    return out


def score(est, Xte, yte, kind):
    if kind == "reg":
        return r2_score(yte, est.predict(Xte)), None
    p = est.predict_proba(Xte)
    return float(np.mean(est.classes_[p.argmax(1)] == yte)), log_loss(yte, p, labels=est.classes_)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-iter", type=int, default=50)
    parser.add_argument("--only", default=None)
    parser.add_argument("--fashion", type=int, default=0, help="rows of a Fashion-MNIST subset (0: none)")
    parser.add_argument("--data", default=None, help="comma-separated data sets (default: all)")
    parser.add_argument("--seeds", type=int, default=2, help="N > 2: both dtypes at seeds 0..N-1, means")
    args = parser.parse_args()
    torch.set_num_threads(1)
    fashion = _fashion(args.fashion) if args.fashion else None
    many = args.seeds > 2
    if many:
        print(f"| data | estimator | float64 (seeds 0-{args.seeds - 1}) | float32 | float32 - float64 |")
        print("|---|---|---:|---:|---:|")
    else:
        print(
            "| data | estimator | float64 (seed 0) | float64 (seed 1) | float32 (seed 0) | float32 - float64"
            " | seed noise |"
        )
        print("|---|---|---:|---:|---:|---:|---:|")
    for data, (kind, Xtr, Xte, ytr, yte) in datasets(fashion).items():
        if args.data and data not in args.data.split(","):
            continue
        suffix = "Regressor" if kind == "reg" else "Classifier"
        for name in [n for n in skbayes.__all__ if n.endswith(suffix)]:
            if args.only and name not in args.only.split(","):
                continue
            cls = getattr(skbayes, name)
            runs = (
                [(f"{d}_{k}", d, k) for d in ("float64", "float32") for k in range(args.seeds)]
                if many
                else [("64a", "float64", 0), ("64b", "float64", 1), ("32", "float32", 0)]
            )
            res = {}
            for key, dtype, seed in runs:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    try:
                        est = cls(dtype=dtype, random_state=seed, max_iter=args.max_iter).fit(Xtr, ytr)
                        res[key] = score(est, Xte, yte, kind)
                    except Exception as exc:  # noqa: BLE001 - reported in the table
                        res[key] = (float("nan"), f"{type(exc).__name__}: {exc}"[:60])
            if many:
                m64, m32 = (mean_se([res[f"{d}_{k}"][0] for k in range(args.seeds)]) for d in ("float64", "float32"))
                print(
                    f"| {data} | {name} | {fmt(*m64, 3)} | {fmt(*m32, 3)} | {m32[0] - m64[0]:+.3f} |",
                    flush=True,
                )
                continue
            a, b, c = (res[k][0] for k in ("64a", "64b", "32"))
            print(
                f"| {data} | {name} | {a:.3f} | {b:.3f} | {c:.3f} | {c - a:+.3f} | {abs(b - a):.3f} |"
                + (f" {res['32'][1]}" if isinstance(res["32"][1], str) else ""),
                flush=True,
            )


if __name__ == "__main__":
    main()
