"""What choosing the temperature in ``fit`` costs: fit time of a classifier at its defaults
and with ``kl_weight=['auto', 0.3]`` (``--candidates``), side by side with MLPClassifier.

On the first 70% split of each data set (``train_test_split(..., test_size=0.3,
random_state=0, stratify=y)``, StandardScaler fitted on the training rows, the split
``bench_defaults.py`` uses), each configuration is fitted ``--repeats`` times with
``random_state`` 0, 1, ..., interleaved (default, choice, MLP, default, ...) so that
load from other processes hits all alike, on ``--threads`` torch threads. The table
reports the mean fit seconds, the ratio of the choice to the default and both against
the MLP, the value chosen in each repeat and the test log-loss of each configuration.

Run:  python benchmarks/bench_kl_choice.py --datasets digits,breast_cancer,satimage,ada,abalone
      (about 3 minutes on one core for noisy K-FAC)
"""

import argparse
import os
import sys
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _harness import library_version  # noqa: E402
from bench_defaults import load  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", default="digits,breast_cancer,satimage,ada,abalone")
    ap.add_argument("--estimator", default="NoisyKFACClassifier", help="a skbayes classifier with kl_weight")
    ap.add_argument("--candidates", default="['auto', 0.3]", help="the kl_weight list (a Python literal)")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)

    import ast

    import sklearn
    import torch
    from sklearn.metrics import log_loss
    from sklearn.model_selection import train_test_split
    from sklearn.neural_network import MLPClassifier
    from sklearn.preprocessing import StandardScaler

    import skbayes

    torch.set_num_threads(args.threads)
    cls = getattr(skbayes, args.estimator)
    candidates = list(ast.literal_eval(args.candidates))
    cmd = " ".join(["python", os.path.relpath(sys.argv[0])] + sys.argv[1:]) if argv is None else str(argv)
    print("# Cost of choosing kl_weight in fit (bench_kl_choice.py)\n")
    print(f"command: {cmd}")
    print(
        f"{library_version()}, torch {torch.__version__}, scikit-learn {sklearn.__version__}, "
        f"{args.threads} torch thread(s), {os.cpu_count()} CPUs\n"
    )
    print(
        f"| data set | default s | kl_weight={candidates} s | ratio | default / MLP | choice / MLP "
        "| chosen | log-loss default | log-loss choice | log-loss MLP |"
    )
    print("|---|---:|---:|---:|---:|---:|---|---:|---:|---:|")
    configs = {
        "default": lambda rs: cls(random_state=rs),
        "choice": lambda rs: cls(kl_weight=candidates, random_state=rs),
        "mlp": lambda rs: MLPClassifier(random_state=rs),
    }
    for name in [d for d in args.datasets.split(",") if d]:
        X, y = load(name)
        Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, random_state=0, stratify=y)
        scaler = StandardScaler().fit(Xtr)
        Xtr, Xte = scaler.transform(Xtr), scaler.transform(Xte)
        secs = {k: [] for k in configs}
        loss = {k: [] for k in configs}
        chosen = []
        for rs in range(args.repeats):
            for key, make in configs.items():
                est = make(rs)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    t0 = time.perf_counter()
                    est.fit(Xtr, ytr)
                    secs[key].append(time.perf_counter() - t0)
                loss[key].append(log_loss(yte, est.predict_proba(Xte), labels=est.classes_))
                if key == "choice":
                    chosen.append(f"{est.kl_weight_:g}")
        d, c, m = (float(np.mean(secs[k])) for k in ("default", "choice", "mlp"))
        ll = {k: float(np.mean(v)) for k, v in loss.items()}
        print(
            f"| {name} | {d:.2f} | {c:.2f} | {c / d:.2f}x | {d / m:.2f}x | {c / m:.2f}x | {', '.join(chosen)} "
            f"| {ll['default']:.3f} | {ll['choice']:.3f} | {ll['mlp']:.3f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
