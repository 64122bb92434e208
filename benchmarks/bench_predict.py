"""Cost of prediction: every network estimator against plain forward passes.

The issue-12 target: ``predict_proba`` (classifiers) and ``predict(return_std=True)``
(regressors) on 10,000 rows of the Fashion-MNIST network (784-400-400-10, float32) at
the default number of weight samples, ``predict_samples`` (100), cost at most 1.5x the
time of that many forward passes of a plain ``torch.nn.Sequential`` of the same
shape. The inputs are random (the cost does not depend on the data); each estimator
is fitted for one epoch on 1,000 random rows (prediction cost does not depend on
the fit either). Plain and skbayes timings are interleaved, ``--repeats`` times, and
the medians reported.

Run: ``.venv/bin/python benchmarks/bench_predict.py [--threads 1] [--rows 10000]
[--methods slang,vogn,...] [--repeats 3]``
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings

import numpy as np
import torch
from _harness import library_version

import skbayes

#: method -> (classifier, regressor), from the package's registry of estimators.
METHODS = {
    e.method: (e.estimator, r.estimator)
    for e in skbayes.all_estimators(task="classifier", network=True)
    for r in skbayes.all_estimators(task="regressor", network=True)
    if r.method == e.method
}


def plain_time(n_out, Xt, n_passes):
    net = torch.nn.Sequential(
        torch.nn.Linear(784, 400),
        torch.nn.ReLU(),
        torch.nn.Linear(400, 400),
        torch.nn.ReLU(),
        torch.nn.Linear(400, n_out),
    )
    X = torch.as_tensor(Xt)
    with torch.no_grad():
        net(X[:100])
        t = time.perf_counter()
        for _ in range(n_passes):
            net(X)
    return time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rows", type=int, default=10000)
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    warnings.simplefilter("ignore")
    rng = np.random.RandomState(0)
    X = rng.randn(1000, 784).astype(np.float32)
    Xt = rng.randn(args.rows, 784).astype(np.float32)
    print(f"# Prediction cost, 784-400-400-10, float32, {args.rows} rows, {args.threads} torch threads")
    print(f"{library_version()}, torch {torch.__version__}; medians of {args.repeats} interleaved runs\n")
    print("| method | task | samples | plain passes s | skbayes s | ratio |")
    print("|---|---|---:|---:|---:|---:|")
    for name in args.methods.split(","):
        clf_cls, reg_cls = METHODS[name]
        for task, cls, y in (
            ("predict_proba", clf_cls, rng.randint(0, 10, 1000)),
            ("predict(return_std=True)", reg_cls, rng.randn(1000)),
        ):
            est = cls(hidden_layer_sizes=(400, 400), max_iter=1, batch_size=200, dtype="float32", random_state=0)
            est.fit(X, y)
            S = est.sample_outputs(Xt[:1]).shape[0]  # the draws a prediction averages ('auto' resolved)
            call = est.predict_proba if task == "predict_proba" else (lambda A, e=est: e.predict(A, return_std=True))
            call(Xt[:100])
            plain, ours = [], []
            for _ in range(args.repeats):
                plain.append(plain_time(10 if task == "predict_proba" else 1, Xt, S))
                t = time.perf_counter()
                call(Xt)
                ours.append(time.perf_counter() - t)
            p, o = statistics.median(plain), statistics.median(ours)
            print(f"| {name} | {task} | {S} | {p:.2f} | {o:.2f} | {o / p:.2f} |", flush=True)


if __name__ == "__main__":
    main()
