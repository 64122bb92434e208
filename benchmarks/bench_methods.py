"""Every skbayes estimator side by side: UCI regression and two scikit-learn classification sets.

Methods (every hyper-parameter at the estimator's default, ``init='iblm'``
included, except the protocol's epochs, batch size and fixed step-size decay):

=========  ===============================================  =======================================
name       estimator                                        posterior
=========  ===============================================  =======================================
slang      ``SLANG*(rank=8)``                               low rank + diagonal Gaussian precision
vogn       ``VOGN*``                                        diagonal Gaussian (natural gradient)
vadam      ``Vadam*()``                                     diagonal Gaussian (Adam-like NGD-VI)
vprop      ``Vadam*(method='vprop')``                       diagonal Gaussian (RMSprop-like NGD-VI)
bbb        ``BBB*``                                         diagonal Gaussian (reparameterised ELBO)
mcdropout  ``MCDropout*``                                   dropout masks (not a Gaussian)
kfac       ``NoisyKFAC*``                                   Kronecker-factored Gaussian per layer
ekfac      ``NoisyEKFAC*``                                  eigenvalue-corrected Kronecker Gaussian
=========  ===============================================  =======================================

and, after these, every other network method of ``skbayes.all_estimators()`` at its defaults.

Regression (the protocol of ``bench_uci.py``; both scripts share ``_harness.py``):
one hidden layer of 50 ReLU units (100 for Protein), random
90/10 splits (split ``k`` is ``RandomState(k).permutation``), inputs
standardised with the training split's statistics, metrics in the units of
``y``: RMSE of the predictive mean over 100 posterior samples and the test
log-likelihood ``log (1/S) sum_s N(y | f_s, sigma^2)`` (S = 100,
``log_likelihood``) with the learned noise (the regressors' default
``noise_prior``, vague; ``--set '*.noise_prior=(6.0, 6.0)'`` gives the
noisy EK-FAC paper's Gamma(6, 6) of the earlier tables).

Classification: scikit-learn's ``load_digits`` (1797 x 64, 10 classes) and
``load_breast_cancer`` (569 x 30), one hidden layer of 50 ReLU units, random
stratified 70/30 splits (``train_test_split(..., stratify=y, random_state=k)``),
inputs standardised with the training split's statistics (constant pixels
left at 0). Metrics: test error of the argmax of ``predict_proba`` (at the
estimator's default predictive: the linearised one of most classifiers on these
small networks, weight samples or dropout masks for the others), the log-loss of
those probabilities, and the expected calibration error
of the top-class confidence (10 equal-width bins,
``skbayes.metrics.expected_calibration_error``).

Training, both tasks: a fixed number of epochs (``tol=0``,
``n_iter_no_change`` beyond the budget), and the step sizes multiplied by 0.1
for the second half of training through a ``warm_start`` refit, as in
``bench_uci.py``: ``learning_rate`` for every method (Vadam/Vprop: the value
``'auto'`` resolves to, 0.01 and 0.05), plus the moving-average rates that play
the role of a step size where they are plain rates: ``beta`` for SLANG and VOGN,
``factor_decay`` for K-FAC and EK-FAC and ``scale_decay`` for EK-FAC.
Vadam/Vprop keep ``beta2`` (their bias correction assumes a constant
``beta2``); BBB and MC dropout have only Adam's ``learning_rate``. No
hyper-parameter is searched or tuned per method.

Budget (2 CPU cores, at most about 25 min wall for the default run with
``--jobs 2``): the epochs and batch sizes of ``bench_uci.py`` (batch 32 for the
small sets, 100 for Power and Protein; epochs in ``CONFIG``) but 3 splits
instead of 5, so that splits 0-2 of SLANG, K-FAC and EK-FAC can be compared
with that script's table. Protein (45,730 rows) gets 1 split of 20 epochs
(under-trained: a measure of how far each method gets on a budget, with no
standard error). Classification: batch 32, 200 epochs (Breast cancer) and 100
(Digits), 3 splits.

Timing: every fit runs single-threaded (``torch.set_num_threads(1)``) in one of
``--jobs`` worker processes; the tables give wall seconds per epoch of
``fit`` (initialisation included) and, in brackets, CPU seconds of the process,
which stay meaningful when other programs load the machine.

Run:  .venv/bin/python benchmarks/bench_methods.py            (default: ~17 CPU-min, ~9 min on 2 idle cores)
      .venv/bin/python benchmarks/bench_methods.py --quick    (1 split, 1/4 of the epochs, ~1 min)
Options: --datasets boston,digits  --methods slang,bbb  --splits 3  --epochs 50  --jobs 2
         --set kfac.prior_precision=10 (any estimator parameter; METHOD * for every method)
         --json out.json
"""

import argparse
import json
import math
import os
import platform
import sys
import time
from concurrent.futures import ProcessPoolExecutor

import _uci_data  # benchmarks/ is on sys.path when run as a script
import numpy as np
from _harness import (
    LABEL,
    REGISTRY_METHODS,
    fmt,
    library_version,
    make_estimator,
    mean_se,
    parse_overrides,
    print_problems,
    run_job,
    standardise,
    stratified_split,
    uci_split,
)

# name: (task, hidden units, batch size, epochs, splits)
CONFIG = {
    "boston": ("reg", 50, 32, 300, 3),
    "concrete": ("reg", 50, 32, 1000, 3),
    "wine": ("reg", 50, 32, 100, 3),
    "yacht": ("reg", 50, 32, 1000, 3),
    "power": ("reg", 50, 100, 100, 3),
    "protein": ("reg", 100, 100, 20, 1),
    "breast_cancer": ("clf", 50, 32, 200, 3),
    "digits": ("clf", 50, 32, 100, 3),
}
DEFAULT_DATASETS = tuple(CONFIG)
QUICK_EPOCHS = {
    "boston": 75,
    "concrete": 250,
    "wine": 25,
    "yacht": 250,
    "power": 25,
    "protein": 2,
    "breast_cancer": 50,
    "digits": 25,
}

# the table's columns: these first, then any other method of the registry
METHODS = ("slang", "vogn", "vadam", "vprop", "bbb", "mcdropout", "kfac", "ekfac")
METHODS += tuple(m for m in REGISTRY_METHODS if m not in METHODS)

_DATA = {}


def load(dataset):
    if dataset not in _DATA:
        if CONFIG[dataset][0] == "reg":
            _DATA[dataset] = _uci_data.load(dataset)
        else:
            from sklearn import datasets

            X, y = getattr(datasets, "load_" + dataset)(return_X_y=True)
            _DATA[dataset] = (X.astype(np.float64), y)
    return _DATA[dataset]


def split(dataset, k):
    X, y = load(dataset)
    if CONFIG[dataset][0] == "reg":
        return uci_split(len(y), k)
    return stratified_split(y, k)


def run_one(job):
    """Fit one method on one split; returns a dict of metrics (runs in a worker)."""
    dataset, method, k, epochs, (overrides, optional) = job
    task, hidden, batch = CONFIG[dataset][:3]
    X, y = load(dataset)
    tr, te = split(dataset, k)
    Xtr, Xte = standardise(X, tr, te)
    est = make_estimator(method, task, hidden, batch, epochs, seed=k, overrides=overrides, optional=optional)
    out = run_job(est, Xtr, y[tr], Xte, y[te], task, epochs)
    out.update(dataset=dataset, method=method, split=k)
    return out


# metric key, label, digits, higher is better
METRICS = {
    "reg": [("rmse", "RMSE", 3, False), ("ll", "test LL", 3, True)],
    "clf": [("error", "error (%)", 2, False), ("logloss", "log-loss", 3, False), ("ece", "ECE (%)", 2, False)],
}
PERCENT = {"error", "ece"}


def table(task, datasets, methods, results):
    """Markdown table: one row per (dataset, metric), one column per method, best mean in bold."""
    lines = [
        "| dataset | metric | " + " | ".join(LABEL[m] for m in methods) + " |",
        "|---|---|" + "---:|" * len(methods),
    ]
    ranks = {key: {m: [] for m in methods} for key, *_ in METRICS[task]}
    for d in datasets:
        for key, label, digits, higher in METRICS[task]:
            cells, means = [], []
            for m in methods:
                rs = [r for r in results if r["dataset"] == d and r["method"] == m]
                v = np.array([r[key] for r in rs], dtype=float) * (100.0 if key in PERCENT else 1.0)
                mean, se = mean_se(v) if len(v) else (math.nan, math.nan)
                if len(v) and not np.all(np.isfinite(v)):
                    mean = math.nan
                means.append(mean)
                flag = "(!)" if any(r["problems"] for r in rs) else ""
                cells.append(fmt(mean, se, digits) + flag)
            finite = [x for x in means if np.isfinite(x)]
            if finite:
                best = max(finite) if higher else min(finite)
                cells = [f"**{c}**" if np.isfinite(x) and x == best else c for c, x in zip(cells, means)]
                order = sorted(finite, reverse=higher)
                for m, x in zip(methods, means):
                    ranks[key][m].append(order.index(x) + 1 if np.isfinite(x) else len(methods))
            lines.append(f"| {d} | {label} | " + " | ".join(cells) + " |")
        cells = []
        for m in methods:
            rs = [r for r in results if r["dataset"] == d and r["method"] == m]
            if rs:
                cells.append(
                    f"{np.mean([r['sec_per_epoch'] for r in rs]):.3f} ({np.mean([r['cpu_per_epoch'] for r in rs]):.3f})"
                )
            else:
                cells.append("-")
        lines.append(f"| {d} | s/epoch (CPU) | " + " | ".join(cells) + " |")
    if len(datasets) > 1:
        for key, label, *_ in METRICS[task]:
            r = [np.mean(ranks[key][m]) if ranks[key][m] else math.nan for m in methods]
            lines.append(f"| mean rank | {label} | " + " | ".join(f"{x:.1f}" for x in r) + " |")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="1 split, about 1/4 of the epochs (smoke run, ~1 min)")
    ap.add_argument("--datasets", default=",".join(DEFAULT_DATASETS), help=f"comma-separated, from {list(CONFIG)}")
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--splits", type=int, default=None, help="override the number of splits")
    ap.add_argument("--epochs", type=int, default=None, help="override the number of epochs")
    ap.add_argument("--jobs", type=int, default=2, help="worker processes (1 torch thread each)")
    ap.add_argument("--json", default=None, help="also write the per-split results here")
    ap.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="METHOD.PARAM=VALUE",
        help="override an estimator parameter, e.g. --set kfac.prior_precision=10 (repeatable; METHOD '*': "
        "every method that has PARAM)",
    )
    args = ap.parse_args(argv)

    datasets = [d.strip() for d in args.datasets.split(",") if d.strip()]
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    for d in datasets:
        if d not in CONFIG:
            ap.error(f"unknown dataset {d!r}; choose from {list(CONFIG)}")
    for m in methods:
        if m not in METHODS:
            ap.error(f"unknown method {m!r}; choose from {list(METHODS)}")

    import torch

    cmd = " ".join(["python", os.path.relpath(sys.argv[0])] + sys.argv[1:]) if argv is None else str(argv)
    print("# All skbayes estimators side by side (bench_methods.py)\n")
    print(f"command: {cmd}")
    import skbayes

    print(f"skbayes imported from {os.path.dirname(os.path.abspath(skbayes.__file__))}")
    print(
        f"{library_version()}, torch {torch.__version__}, numpy {np.__version__}, python "
        f"{platform.python_version()}, {os.cpu_count()} logical CPUs, {args.jobs} worker(s), "
        f"load average at start {os.getloadavg()[0]:.2f}"
    )

    try:
        overrides, optional = parse_overrides(args.set, list(METHODS))
    except ValueError as exc:
        ap.error(str(exc))
    if args.set:
        print(f"overrides: {args.set}")
    shapes, jobs = {}, []
    for d in datasets:
        try:
            X, y = load(d)
        except _uci_data.MissingDataPackage as exc:
            print(f"SKIPPING {d}: {exc}")
            continue
        shapes[d] = X.shape
        task, hidden, batch, epochs, n_splits = CONFIG[d]
        if args.quick:
            epochs, n_splits = QUICK_EPOCHS[d], 1
        epochs = args.epochs or epochs
        n_splits = args.splits or n_splits
        for k in range(n_splits):
            for m in methods:
                jobs.append((d, m, k, epochs, (overrides.get(m, {}), optional.get(m, {}))))
    if not jobs:
        print("nothing to run")
        return 1
    for d in shapes:
        task, hidden, batch = CONFIG[d][:3]
        ep = next(j[3] for j in jobs if j[0] == d)
        ns = len({j[2] for j in jobs if j[0] == d})
        how = "90/10 split" if task == "reg" else "stratified 70/30 split"
        print(
            f"  {d:13s} N={shapes[d][0]:5d} D_in={shapes[d][1]:2d}  hidden {hidden}, batch {batch}, {ep} epochs "
            f"(x0.1 step sizes for the second half), {ns} x {how}"
        )
    print(f"{len(jobs)} fits; every other hyper-parameter at the estimator's default (init='iblm')")
    sys.stdout.flush()

    # Most expensive fits first (rows x epochs), so the workers finish together.
    order = sorted(range(len(jobs)), key=lambda i: -shapes[jobs[i][0]][0] * jobs[i][3])
    t0 = time.perf_counter()
    results = []
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        for r in pool.map(run_one, [jobs[i] for i in order]):
            results.append(r)
            if r["task"] == "reg":
                score = f"RMSE {r['rmse']:.3f} LL {r['ll']:.3f}"
            else:
                score = f"err {r['error']:.4f} logloss {r['logloss']:.4f} ECE {r['ece']:.4f}"
            print(
                f"  [{time.perf_counter() - t0:6.0f}s] {r['dataset']:13s} {r['method']:9s} split {r['split']}: "
                f"{score} {r['sec_per_epoch']:.3f} s/epoch ({r['cpu_per_epoch']:.3f} CPU)"
                + (f"  PROBLEM: {r['problems']}" if r["problems"] else ""),
                flush=True,
            )
    total = time.perf_counter() - t0
    cpu = sum(r["cpu_per_epoch"] * max(r["n_epochs"], 1) for r in results)

    ran = [m for m in methods if any(r["method"] == m for r in results)]
    for task, title in (("reg", "Regression (UCI)"), ("clf", "Classification (scikit-learn)")):
        ds = [d for d in shapes if CONFIG[d][0] == task]
        if not ds:
            continue
        print(f"\n## {title}\n")
        if task == "reg":
            print(
                "Test RMSE and test log-likelihood per point (units of y), mean ± std error over splits; "
                "best mean in bold."
            )
        else:
            print(
                "Test error (%), log-loss of the MC-averaged probabilities and expected calibration error "
                "(%, 10 bins), mean ± std error over splits; best mean in bold."
            )
        print(
            "s/epoch = wall seconds of fit per epoch (CPU seconds in brackets), one torch thread per fit; "
            "mean rank = average rank over the data sets (1 = best).\n"
        )
        print(table(task, ds, ran, results))
    print_problems(results, "No fit diverged, failed or warned.")
    print(
        f"\ntotal wall time {total:.0f} s, {cpu / 60:.1f} CPU-min in the fits; "
        f"load average at the end {os.getloadavg()[0]:.2f}"
    )
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"args": vars(args), "results": results, "wall_time": total}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
