"""Refactoring check: every estimator's fitted predictions, bit for bit, as one table.

Fits each of skbayes's 15 estimators (from ``skbayes.all_estimators()``) at its defaults
except ``max_iter=30`` on scikit-learn's bundled data, standardised, with one thread and
a fixed ``random_state``: classifiers on breast cancer (569 x 30), regressors on diabetes
(442 x 10). Prints, per estimator, the training log-loss (classifiers) or RMSE
(regressors), the mean predictive std (regressors) or largest class probability
(classifiers) and a SHA-256 prefix of the raw bytes of ``predict_proba`` /
``predict(return_std=True)``. Two runs of the same code on the same machine give the same
hashes; a refactoring that claims "no behaviour change" must too.

Run:  .venv/bin/python benchmarks/bench_identity.py [--save before.json] [--compare before.json]
      (about 10 seconds)
"""

import argparse
import hashlib
import json
import sys
import warnings

import numpy as np
import torch
from sklearn.datasets import load_breast_cancer, load_diabetes
from sklearn.preprocessing import StandardScaler

import skbayes


def _digest(*arrays):
    h = hashlib.sha256()
    for a in arrays:
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()[:16]


def run():
    torch.set_num_threads(1)
    warnings.simplefilter("ignore")  # 30 epochs do not converge, by design
    Xc, yc = load_breast_cancer(return_X_y=True)
    Xr, yr = load_diabetes(return_X_y=True)
    Xc = StandardScaler().fit_transform(Xc)
    Xr = StandardScaler().fit_transform(Xr)
    rows = {}
    for info in skbayes.all_estimators():
        params = {"random_state": 0, "max_iter": 30} if info.network else {}
        est = info.estimator(**params)
        if info.task == "classifier":
            est.fit(Xc, yc)
            p = est.predict_proba(Xc)
            metric = float(-np.mean(np.log(np.clip(p[np.arange(len(yc)), yc], 1e-300, None))))
            std = p.max(axis=1).mean()
            digest = _digest(p)
        else:
            est.fit(Xr, yr)
            mu, sd = est.predict(Xr, return_std=True)
            metric = float(np.sqrt(np.mean((mu - yr) ** 2)))
            std = float(np.mean(sd))
            digest = _digest(mu, sd)
        rows[info.name] = {"metric": metric, "std": float(std), "sha": digest}
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--save", help="write the table as JSON to this file")
    ap.add_argument("--compare", help="compare with a table saved by --save")
    args = ap.parse_args(argv)
    rows = run()
    before = json.load(open(args.compare)) if args.compare else None
    head = f"{'estimator':<24} {'log-loss/RMSE':>14} {'std|max p':>10} {'sha256[:16]':>18}"
    print(head + ("  same as saved" if before else ""))
    print("-" * len(head))
    same = True
    for name, r in rows.items():
        line = f"{name:<24} {r['metric']:>14.6f} {r['std']:>10.6f} {r['sha']:>18}"
        if before:
            eq = before.get(name, {}).get("sha") == r["sha"]
            same &= eq
            line += "  yes" if eq else f"  NO (was {before.get(name, {}).get('metric', float('nan')):.6f})"
        print(line)
    if args.save:
        with open(args.save, "w") as f:
            json.dump(rows, f, indent=1)
    if before:
        print("all identical" if same else "DIFFERENCES")
        return 0 if same else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
