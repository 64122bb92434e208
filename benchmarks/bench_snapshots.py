"""Does a posterior settle? Test log-loss of snapshots taken 20 epochs apart.

``NoisyKFACClassifier`` (or ``SLANGClassifier`` with ``--method slang``) is fitted on digits
(pixels / 16, ``StandardScaler``, the stratified 75/25 splits of ``bench_uncertainty.py``)
with ``warm_start=True`` and ``max_iter=20``, so each ``fit`` call trains 20 more epochs; the
convergence test is switched off (``n_iter_no_change=10000``) so that every call runs its 20
epochs. The posterior is the untempered one with the sampled predictive (``kl_weight=1``,
``predictive='sampled'``; the classifiers' small-network defaults are now tempered with the
GLM predictive), the setting in which the step decay was chosen. After each call the test set
is predicted, clean and under the benchmark's covariate shift at severity 1.
Per ``decay_epochs`` value (None: constant steps; the default values are None,100 for noisy
K-FAC and None,30 for SLANG) the table gives, over the snapshots of epochs 100-200, the mean test log-loss and
its range (max - min): a posterior that has settled has a small range. Every snapshot's
scores are printed too, with the training objective (``loss_curve_``, the mean of the
snapshot's 20 epochs). Public API only.

Run:  .venv/bin/python benchmarks/bench_snapshots.py          (~2 min on 2 cores)
Options: --method kfac|slang  --decay None,100  --splits 3  --snapshots 10  --jobs 2
"""

import argparse
import time
import warnings
from concurrent.futures import ProcessPoolExecutor

import numpy as np
from _harness import library_version


def run_one(job):
    """Snapshots of one fit: (split, decay, [(epochs, clean, shifted log-loss, objective)])."""
    import torch
    from bench_uncertainty import corrupt
    from sklearn.datasets import load_digits
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.metrics import log_loss
    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import StandardScaler

    from skbayes import NoisyKFACClassifier, SLANGClassifier

    torch.set_num_threads(1)
    method, split, decay, n_snap = job
    X, y = load_digits(return_X_y=True)
    Xtr, Xte, ytr, yte = train_test_split(X / 16.0, y, test_size=0.25, stratify=y, random_state=split)
    sc = StandardScaler().fit(Xtr)
    tests = (sc.transform(Xte), sc.transform(corrupt(Xte, 8, 1, split)))
    kw = dict(
        kl_weight=1.0,
        predictive="sampled",
        warm_start=True,
        max_iter=20,
        n_iter_no_change=10_000,
        random_state=split,
    )
    est = (NoisyKFACClassifier if method == "kfac" else SLANGClassifier)(decay_epochs=decay, **kw)
    rows = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        for k in range(n_snap):
            est.fit(sc.transform(Xtr), ytr)
            scores = [log_loss(yte, est.predict_proba(T), labels=est.classes_) for T in tests]
            rows.append((20 * (k + 1), *scores, float(np.mean(est.loss_curve_[-20:]))))
    return split, decay, rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--method", default="kfac", choices=("kfac", "slang"))
    ap.add_argument("--decay", default=None, help="decay_epochs values (None: constant steps)")
    ap.add_argument("--splits", type=int, default=3)
    ap.add_argument("--snapshots", type=int, default=10, help="fit calls of 20 epochs each")
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    spec = args.decay or ("None,100" if args.method == "kfac" else "None,30")
    decays = [None if v == "None" else float(v) for v in spec.split(",")]
    print(f"# {args.method} snapshots (bench_snapshots.py)\n")
    print(f"{library_version()}; {args.jobs} worker processes with 1 torch thread each\n")
    t0 = time.perf_counter()
    jobs = [(args.method, s, d, args.snapshots) for s in range(args.splits) for d in decays]
    with ProcessPoolExecutor(args.jobs) as pool:
        results = list(pool.map(run_one, jobs))
    print("Every snapshot's test log-loss, clean / under shift (severity 1) / training objective:\n")
    for split, decay, rows in results:
        cells = ", ".join(f"{e}: {a:.3f} / {b:.2f} / {c:.3f}" for e, a, b, c in rows)
        print(f"- split {split}, decay_epochs={decay}: {cells}")
    print("\nOver the snapshots of epochs 100-200 (mean, and range = max - min):\n")
    print("| decay_epochs | split | clean log-loss: mean | range | shifted: mean | range |")
    print("|---|---:|---:|---:|---:|---:|")
    for split, decay, rows in results:
        late = np.array([r[1:3] for r in rows if 100 <= r[0] <= 200])
        if not len(late):
            continue
        a, b = late[:, 0], late[:, 1]
        print(f"| {decay} | {split} | {a.mean():.3f} | {np.ptp(a):.3f} | {b.mean():.2f} | {np.ptp(b):.2f} |")
    print(f"\ntotal wall time {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
