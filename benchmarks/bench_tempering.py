"""Tempering: ``kl_weight`` per estimator and data set, and the posterior-vs-MAP gap.

Two parts, public API only:

``--part sweep`` (default): every Gaussian estimator at its defaults but ``kl_weight``
(each of ``--weights``), inside ``make_pipeline(StandardScaler(), est)``, on
scikit-learn's bundled digits, breast cancer and wine (test log-loss of
``predict_proba`` and accuracy) and diabetes (test log density per point,
``log_likelihood``, and RMSE), over 3 random stratified (classification) 75/25
splits ``train_test_split(..., random_state=k)``; with the fit's wall seconds and
epochs. Next to them, ``MLPClassifier(alpha=0.3)`` / ``MLPRegressor(alpha=0.3)``
(scikit-learn's ``alpha`` multiplies ``||W||^2 / (2 n_samples)`` in a per-example mean
loss, so on the summed loss it is the precision of a Gaussian prior on the weights,
biases excluded: the MAP under ``prior_precision=0.3``).

``--part gap``: on digits, why SLANG's posterior predicts worse than the MAP under the
same prior. For the MAP and for SLANG variants it prints the training and test
log-loss of the posterior *mean* network (``module_``, the mean loaded into the
network) next to the test log-loss of the sampled predictive, and the epochs used.
``--part trajectory``: the same quantities along a SLANG fit without stopping.

Run:  .venv/bin/python benchmarks/bench_tempering.py                       (sweep)
      .venv/bin/python benchmarks/bench_tempering.py --part gap
      .venv/bin/python benchmarks/bench_tempering.py --part trajectory --splits 1
Options: --methods slang,vogn,vadam,bbb,kfac,ekfac  --datasets digits,breast_cancer,wine,diabetes
         --weights 1,0.3,0.1,0.03  --splits 3  --jobs 2
"""

import argparse
import math
import os
import time
import warnings
from concurrent.futures import ProcessPoolExecutor

import numpy as np

METHODS = {
    "slang": "SLANG",
    "vogn": "VOGN",
    "vadam": "Vadam",
    "bbb": "BBB",
    "kfac": "NoisyKFAC",
    "ekfac": "NoisyEKFAC",
}
DATASETS = {
    "digits": "load_digits",
    "breast_cancer": "load_breast_cancer",
    "wine": "load_wine",
    "diabetes": "load_diabetes",
}
REGRESSION = {"diabetes"}


def load(name):
    import sklearn.datasets

    return getattr(sklearn.datasets, DATASETS[name])(return_X_y=True)


def split(name, k):
    from sklearn.model_selection import train_test_split

    X, y = load(name)
    strat = None if name in REGRESSION else y
    return train_test_split(X, y, test_size=0.25, random_state=k, stratify=strat)


def limit_threads():
    import torch

    torch.set_num_threads(1)
    warnings.simplefilter("ignore")


def make(method, regression, kl_weight, seed, **kw):
    import skbayes

    if method == "map":
        from sklearn.neural_network import MLPClassifier, MLPRegressor

        Est = MLPRegressor if regression else MLPClassifier
        return Est(alpha=0.3, max_iter=1000, random_state=seed)
    cls = getattr(skbayes, METHODS[method] + ("Regressor" if regression else "Classifier"))
    return cls(kl_weight=kl_weight, random_state=seed, **kw)


def mean_network_proba(pipe, X):
    """Class probabilities of the posterior-mean network (``module_`` holds the mean)."""
    import torch

    est = pipe[-1]
    Xs = pipe[:-1].transform(X)
    with torch.no_grad():
        f = est.module_(torch.as_tensor(Xs, dtype=next(est.module_.parameters()).dtype)).numpy()
    if f.shape[1] == 1:
        p1 = 1.0 / (1.0 + np.exp(-f[:, 0]))
        return np.column_stack([1 - p1, p1])
    f = f - f.max(1, keepdims=True)
    e = np.exp(f)
    return e / e.sum(1, keepdims=True)


def sweep_job(method, dataset, kl_weight, k):
    limit_threads()
    from sklearn.metrics import accuracy_score, log_loss, mean_squared_error
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    reg = dataset in REGRESSION
    Xtr, Xte, ytr, yte = split(dataset, k)
    pipe = make_pipeline(StandardScaler(), make(method, reg, kl_weight, k))
    t0 = time.perf_counter()
    pipe.fit(Xtr, ytr)
    fit_s = time.perf_counter() - t0
    est = pipe[-1]
    if reg:
        pred = pipe.predict(Xte)
        if method == "map":
            score = float("nan")
        else:
            score = est.log_likelihood(pipe[:-1].transform(Xte), yte)
        second = math.sqrt(mean_squared_error(yte, pred))
    else:
        P = pipe.predict_proba(Xte)
        score = log_loss(yte, P, labels=est.classes_)
        second = accuracy_score(yte, est.classes_[P.argmax(1)])
    return method, dataset, kl_weight, k, score, second, fit_s, getattr(est, "n_iter_", 0)


def gap_job(label, kw, k):
    """Digits split ``k``: the MAP or a SLANG variant (``kw``), training/test log-loss of the
    mean network and test log-loss of the sampled predictive."""
    limit_threads()
    from sklearn.metrics import log_loss
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    Xtr, Xte, ytr, yte = split("digits", k)
    kw = dict(kw)
    method = kw.pop("method", "slang")
    kl = kw.pop("kl_weight", 1.0)
    pipe = make_pipeline(StandardScaler(), make(method, False, kl, k, **kw))
    t0 = time.perf_counter()
    pipe.fit(Xtr, ytr)
    fit_s = time.perf_counter() - t0
    est = pipe[-1]
    if method == "map":
        tr_mean, te_mean = log_loss(ytr, pipe.predict_proba(Xtr)), log_loss(yte, pipe.predict_proba(Xte))
        te_pred = te_mean
    else:
        tr_mean = log_loss(ytr, mean_network_proba(pipe, Xtr), labels=est.classes_)
        te_mean = log_loss(yte, mean_network_proba(pipe, Xte), labels=est.classes_)
        te_pred = log_loss(yte, pipe.predict_proba(Xte), labels=est.classes_)
    return label, k, tr_mean, te_mean, te_pred, fit_s, est.n_iter_


def trajectory_job(kl_weight, mc_samples, k, chunk=25, n_chunks=8):
    """Digits split ``k``: SLANG at the defaults but ``kl_weight`` and ``mc_samples``, trained
    in chunks of ``chunk`` epochs (``warm_start``, no stopping); after each chunk the
    training objective (``loss_curve_``), the training log-loss of the mean network, the
    test log-loss of the sampled predictive and the posterior's mean standard deviation."""
    limit_threads()
    from sklearn.metrics import log_loss
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    Xtr, Xte, ytr, yte = split("digits", k)
    est = make("slang", False, kl_weight, k, mc_samples=mc_samples, warm_start=True, max_iter=chunk)
    est.set_params(tol=0.0, n_iter_no_change=10**6)
    pipe = make_pipeline(StandardScaler(), est)
    rows = []
    for _ in range(n_chunks):
        pipe.fit(Xtr, ytr)
        tr_mean = log_loss(ytr, mean_network_proba(pipe, Xtr), labels=est.classes_)
        te_pred = log_loss(yte, pipe.predict_proba(Xte), labels=est.classes_)
        sd = float(np.sqrt(est.posterior_.variance()).mean())
        rows.append((kl_weight, mc_samples, k, len(est.loss_curve_), est.loss_curve_[-1], tr_mean, te_pred, sd))
    return rows


def mean_se(v):
    v = np.asarray(v, dtype=float)
    se = v.std(ddof=1) / math.sqrt(len(v)) if len(v) > 1 else float("nan")
    return v.mean(), se


def run(jobs, fn, args):
    """``fn(*a)`` for every ``a`` in ``args`` (in ``jobs`` processes); each result is also
    printed as a ``raw`` line when it arrives, so that a cut run keeps what it measured."""

    def show(r):
        print("raw", *(f"{v:.6g}" if isinstance(v, float) else v for v in r), flush=True)
        return r

    if jobs == 1:
        return [show(fn(*a)) for a in args]
    with ProcessPoolExecutor(jobs) as ex:
        futures = [ex.submit(fn, *a) for a in args]
        return [show(f.result()) for f in futures]


#: SLANG variants of the gap study (constructor arguments on top of the defaults).
GAP_VARIANTS = [
    ("MLPClassifier alpha=0.3 (MAP)", {"method": "map"}),
    ("SLANG defaults", {}),
    ("SLANG tol=0, 200 epochs", {"tol": 0.0, "n_iter_no_change": 1000}),
    ("SLANG mc_samples=4", {"mc_samples": 4}),
    ("SLANG init='default'", {"init": "default"}),
    ("SLANG prior_precision=0.3", {"prior_precision": 0.3}),
    ("SLANG kl_weight=0.1", {"kl_weight": 0.1}),
    ("SLANG kl_weight=0.1, tol=0, 200 epochs", {"kl_weight": 0.1, "tol": 0.0, "n_iter_no_change": 1000}),
]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--part", choices=("sweep", "gap", "trajectory"), default="sweep")
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--datasets", default=",".join(DATASETS))
    ap.add_argument("--weights", default="1,0.3,0.1,0.03")
    ap.add_argument("--splits", type=int, default=3)
    ap.add_argument("--variants", default="", help="gap part: indices of GAP_VARIANTS to run (default all)")
    ap.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    a = ap.parse_args()
    splits = range(a.splits)
    if a.part == "trajectory":
        cases = [(w, S, k) for k in splits for w, S in ((1.0, 1), (0.1, 1), (1.0, 4))]
        res = run(a.jobs, trajectory_job, cases)
        print("digits: SLANG trained in chunks of 25 epochs without stopping")
        print("| kl_weight | S | split | epochs | loss_curve_ | train log-loss (mean net) | test (sampled) | mean sd |")
        print("|---|---|---|---|---|---|---|---|")
        for rows in res:
            for r in rows:
                print("| " + " | ".join(f"{v:.4g}" if isinstance(v, float) else str(v) for v in r) + " |")
        return
    if a.part == "gap":
        chosen = [GAP_VARIANTS[int(i)] for i in a.variants.split(",")] if a.variants else GAP_VARIANTS
        res = run(a.jobs, gap_job, [(lab, kw, k) for lab, kw in chosen for k in splits])
        print("digits, StandardScaler, 75/25 stratified splits; log-loss mean ± SE over splits")
        print("| variant | train log-loss (mean net) | test (mean net) | test (sampled predictive) | fit s | epochs |")
        print("|---|---|---|---|---|---|")
        for lab, _ in chosen:
            rows = [r for r in res if r[0] == lab]
            cells = [mean_se([r[i] for r in rows]) for i in (2, 3, 4)]
            fs, ep = np.mean([r[5] for r in rows]), np.mean([r[6] for r in rows])
            print(f"| {lab} | " + " | ".join(f"{m:.3f} ± {s:.3f}" for m, s in cells) + f" | {fs:.1f} | {ep:.0f} |")
        return
    methods = a.methods.split(",")
    datasets = a.datasets.split(",")
    weights = [float(w) for w in a.weights.split(",")]
    args = []
    for k in splits:  # split by split, so that a cut run has whole splits
        args += [(m, d, w, k) for d in datasets for m in methods for w in weights] + [
            ("map", d, 1.0, k) for d in datasets
        ]
    res = run(a.jobs, sweep_job, args)
    header = " | ".join(f"{d} {'log density / RMSE' if d in REGRESSION else 'log-loss / acc'}" for d in datasets)
    print(f"mean ± SE over {a.splits} splits; fit seconds (mean over data sets) and epochs (mean)")
    for m in methods + ["map"]:
        print(f"\n{m}" if m != "map" else "\nMLP alpha=0.3 (MAP)")
        print(f"| kl_weight | {header} | fit s |")
        print("|---" * (len(datasets) + 2) + "|")
        for w in weights if m != "map" else [1.0]:
            cells, fit = [], []
            for d in datasets:
                rows = [r for r in res if r[:3] == (m, d, w)]
                (s, se), (s2, _) = mean_se([r[4] for r in rows]), mean_se([r[5] for r in rows])
                cells.append(f"{s:.3f} ± {se:.3f} / {s2:.3f}")
                fit += [r[6] for r in rows]
            print(f"| {w:g} | " + " | ".join(cells) + f" | {np.mean(fit):.1f} |")


if __name__ == "__main__":
    main()
