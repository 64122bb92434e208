"""How many weight samples a prediction needs: test scores and time against ``predict_samples``.

Every skbayes estimator is fitted once per split exactly as in ``bench_defaults.py``
(its defaults, ``make_pipeline(StandardScaler(), est)``, the same data and 70/30
splits); then only ``predict_samples`` changes (``set_params`` on the fitted
estimator, public API) and the test set is predicted again with S weight samples
(or dropout masks). The reference is S = 1000, close to the exact predictive. Per
method and S the table gives the change of the test log-loss (classification) or of
the mean test log-likelihood per point (regression, ``log_likelihood``) from the
reference, averaged over data sets and splits, the largest change over them, and the
prediction time relative to the default S = 100. A positive log-loss change (or a
negative log-likelihood change) means the smaller S predicts worse: averaging fewer
sampled probabilities gives a noisier, on average over-confident predictive.

Run:  .venv/bin/python benchmarks/bench_predict_samples.py          (~3 min on 2 cores)
Options: --datasets digits,breast_cancer  --methods slang,kfac  --splits 3  --jobs 2
         --samples 5,10,20,50,100,1000
"""

import argparse
import time
import warnings
from concurrent.futures import ProcessPoolExecutor

import numpy as np
from _harness import LABEL, REGISTRY_METHODS, library_version
from bench_defaults import TASK, load, make

# these first, then any other network method of the registry
METHODS = ("slang", "vogn", "vadam", "bbb", "mcdropout", "kfac", "ekfac")
METHODS += tuple(m for m in REGISTRY_METHODS if m not in METHODS)
SAMPLES = (5, 10, 20, 50, 100, 1000)


def run_one(job):
    """Fit one method on one split, then score the test set for every number of samples."""
    import torch
    from sklearn.metrics import log_loss
    from sklearn.model_selection import train_test_split

    torch.set_num_threads(1)
    dataset, method, k, samples = job
    task = TASK[dataset]
    X, y = load(dataset)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, random_state=k, stratify=y if task == "clf" else None)
    pipe = make(method, task, k, [], False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pipe.fit(Xtr, ytr)
    Zte = pipe[0].transform(Xte)
    est = pipe[-1]
    out = []
    for S in samples:
        est.set_params(predict_samples=S)
        t0 = time.perf_counter()
        if task == "clf":
            score = float(log_loss(yte, est.predict_proba(Zte), labels=est.classes_))
        else:
            score = float(est.log_likelihood(Zte, yte))
        out.append(dict(dataset=dataset, method=method, split=k, S=S, score=score, seconds=time.perf_counter() - t0))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", default=",".join(TASK))
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--splits", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--samples", default=",".join(map(str, SAMPLES)))
    args = ap.parse_args()
    datasets, methods = args.datasets.split(","), args.methods.split(",")
    samples = sorted(int(s) for s in args.samples.split(","))
    ref, default = samples[-1], 100 if 100 in samples else samples[-1]
    jobs = [(d, m, k, samples) for d in datasets for m in methods for k in range(args.splits)]
    t0 = time.perf_counter()
    with ProcessPoolExecutor(args.jobs) as pool:
        rows = [r for out in pool.map(run_one, jobs) for r in out]
    print("# Test scores against the number of prediction samples (bench_predict_samples.py)\n")
    print(library_version() + f", datasets {','.join(datasets)}, {args.splits} splits, reference S = {ref}\n")
    print(
        f"Change from S = {ref} of the test log-loss (classification; + is worse) and of the test "
        f"log-likelihood per point (regression; - is worse): mean over data sets and splits / largest "
        f"worsening; time of the prediction relative to S = {default}.\n"
    )
    head = " | ".join(f"S = {S}" for S in samples[:-1])
    print(f"| method | task | {head} |")
    print("|---|---|" + "---|" * (len(samples) - 1))
    for m in methods:
        for task, sign, name in (("clf", 1.0, "log-loss"), ("reg", -1.0, "test LL")):
            sets = [d for d in datasets if TASK[d] == task]
            if not sets:
                continue
            cells = []
            for S in samples[:-1]:
                deltas, worse = [], []
                for d in sets:
                    for k in range(args.splits):
                        sc = {r["S"]: r["score"] for r in rows if (r["dataset"], r["method"], r["split"]) == (d, m, k)}
                        deltas.append(sc[S] - sc[ref])
                        worse.append(sign * (sc[S] - sc[ref]))
                cells.append(f"{np.mean(deltas):+.4f} / {sign * max(worse):+.4f}")
            print(f"| {LABEL[m]} | {name} | " + " | ".join(cells) + " |")
    print(f"\nPrediction time relative to S = {default} (mean over data sets and splits):\n")
    print("| method | " + " | ".join(f"S = {S}" for S in samples) + " |")
    print("|---|" + "---:|" * len(samples))
    for m in methods:
        t = {S: np.mean([r["seconds"] for r in rows if r["method"] == m and r["S"] == S]) for S in samples}
        print(f"| {LABEL[m]} | " + " | ".join(f"{t[S] / t[default]:.2f}" for S in samples) + " |")
    print(f"\ntotal wall time {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
