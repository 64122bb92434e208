"""Streams: quality after ``partial_fit`` over a data set in small batches, against one ``fit``.

Each data set (digits, breast cancer: accuracy; diabetes: R^2; and the mean test
log-likelihood of all three) is standardised and split 75/25 (seed 0). The training
rows are streamed once, in batches of 1, 3, 10, 30 and 100 rows, each batch one
``partial_fit`` call with the estimator's defaults, in two orders: shuffled, and
ordered (sorted by class for the classifiers, so that most batches hold one class;
by target for the regressor). The reference is one ``fit`` on the same rows at the
defaults. ``gap`` is the reference's score minus the stream's; ``warned``: whether the
stream raised ``StreamOrderWarning`` (its calls arrive far from a random order).

Run: ``python benchmarks/bench_streaming.py`` (all methods, data sets, batches and
orders; about an hour on 2 cores), or a subset, e.g.
``python benchmarks/bench_streaming.py --methods slang vogn --data breast_cancer
--batches 10 100 --orders shuffled``. Public API only.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
import torch
from sklearn.datasets import load_breast_cancer, load_diabetes, load_digits
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

import skbayes
from skbayes.exceptions import StreamOrderWarning

#: Every network method of the registry: method name -> estimator class stem ('slang' -> 'SLANG').
METHODS = {e.method: e.name.removesuffix("Regressor") for e in skbayes.all_estimators(task="regressor", network=True)}
DATA = {"digits": load_digits, "breast_cancer": load_breast_cancer, "diabetes": load_diabetes}
BATCHES = (1, 3, 10, 30, 100)
ORDERS = ("shuffled", "ordered")


def load(name):
    X, y = DATA[name](return_X_y=True)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.25, random_state=0)
    scaler = StandardScaler().fit(Xtr)
    return scaler.transform(Xtr), scaler.transform(Xte), ytr, yte


def estimator(method, is_clf, seed):
    cls = getattr(skbayes, METHODS[method] + ("Classifier" if is_clf else "Regressor"))
    return cls(random_state=seed)


def scores(est, X, y, is_clf):
    """(accuracy or R^2, mean test log-likelihood)."""
    if is_clf:
        p = est.predict_proba(X)
        idx = np.searchsorted(est.classes_, y)
        return float(np.mean(est.classes_[p.argmax(1)] == y)), float(np.mean(np.log(p[np.arange(len(y)), idx])))
    return float(est.score(X, y)), float(est.log_likelihood(X, y))


def stream(method, is_clf, Xtr, ytr, batch, order, seed):
    rng = np.random.RandomState(seed)
    perm = rng.permutation(len(ytr))
    if order == "ordered":
        perm = perm[np.argsort(ytr[perm], kind="stable")]
    est = estimator(method, is_clf, seed)
    kw = {"classes": np.unique(ytr)} if is_clf else {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for s in range(0, len(perm), batch):
            rows = perm[s : s + batch]
            est.partial_fit(Xtr[rows], ytr[rows], **kw)
    return est, any(issubclass(w.category, StreamOrderWarning) for w in caught)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS))
    ap.add_argument("--data", nargs="+", default=list(DATA), choices=list(DATA))
    ap.add_argument("--batches", nargs="+", type=int, default=list(BATCHES))
    ap.add_argument("--orders", nargs="+", default=list(ORDERS), choices=list(ORDERS))
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    torch.set_num_threads(1)
    warnings.simplefilter("ignore")
    print("| data | method | order | batch | score | log-lik | fit score | fit log-lik | gap | warned | seconds |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for data in args.data:
        Xtr, Xte, ytr, yte = load(data)
        is_clf = data != "diabetes"
        for method in args.methods:
            ref = estimator(method, is_clf, args.seed).fit(Xtr, ytr)
            ref_score, ref_ll = scores(ref, Xte, yte, is_clf)
            for order in args.orders:
                for batch in args.batches:
                    t0 = time.perf_counter()
                    est, warned = stream(method, is_clf, Xtr, ytr, batch, order, args.seed)
                    sec = time.perf_counter() - t0
                    score, ll = scores(est, Xte, yte, is_clf)
                    print(
                        f"| {data} | {method} | {order} | {batch} | {score:.3f} | {ll:.3f} | {ref_score:.3f} | "
                        f"{ref_ll:.3f} | {ref_score - score:+.3f} | {'yes' if warned else 'no'} | {sec:.1f} |",
                        flush=True,
                    )


if __name__ == "__main__":
    main()
