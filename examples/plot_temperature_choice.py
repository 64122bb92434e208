"""
Choosing the temperature per data set
=====================================

The small classifiers' defaults temper the posterior (``kl_weight`` 0.1-0.3 on
networks of fewer than 20,000 weights): a sharper posterior predicts better where
the network separates the classes. Where the classes overlap, the same temperature
makes it overconfident, and the untempered posterior (``kl_weight=1.0``) predicts
better. ``kl_weight=["auto", 1.0]`` lets ``fit`` choose per data set: it fits each
candidate on 90% of the rows, keeps the first unless another predicts the held-out
tenth better by more than one standard error, and refits all the rows at the
choice (``kl_weight_``; each candidate's held-out score in ``kl_weight_scores_``).

Two data sets: scikit-learn's digits (almost separable: a network misclassifies
about 3% of the test rows) and a generated set with about 10% wrong labels
(``make_classification(flip_y=0.2)``, 3,000 rows), each split 70/30, in a
``StandardScaler`` pipeline. A ``NoisyKFACClassifier`` at its defaults, untempered,
and choosing between the two, with ``MLPClassifier`` for reference: test log-loss,
the value chosen and the fit time. On digits the choice keeps the default; on the
noisy labels it takes the untempered posterior. A held-out tenth is a small sample,
so the choice can miss where the two candidates are close (on other generated sets
it keeps the default when the untempered posterior is a little better, or the other
way round); cross-validation (``GridSearchCV``) is steadier for more fits.

Run::

    python examples/plot_temperature_choice.py [--out examples/temperature_choice.png]
"""

import argparse
import os
import time
import warnings

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
from sklearn.datasets import load_digits, make_classification  # noqa: E402
from sklearn.exceptions import ConvergenceWarning  # noqa: E402
from sklearn.metrics import log_loss  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402
from sklearn.neural_network import MLPClassifier  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402

from skbayes import NoisyKFACClassifier  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.strip().partition("\n")[0])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "temperature_choice.png"))
    args = ap.parse_args()
    torch.set_num_threads(1)  # small networks: one thread is fastest on a shared machine
    warnings.filterwarnings("ignore", category=ConvergenceWarning)  # the MLP's 200 epochs

    data = {
        "digits": load_digits(return_X_y=True),
        "noisy labels": make_classification(
            n_samples=3000, n_features=10, n_informative=6, n_redundant=2, flip_y=0.2, random_state=0
        ),
    }
    models = {
        "default (tempered)": lambda: NoisyKFACClassifier(random_state=0),
        "kl_weight=1.0": lambda: NoisyKFACClassifier(kl_weight=1.0, random_state=0),
        'kl_weight=["auto", 1.0]': lambda: NoisyKFACClassifier(kl_weight=["auto", 1.0], random_state=0),
        "MLPClassifier": lambda: MLPClassifier(random_state=0),
    }
    losses = {}
    for name, (X, y) in data.items():
        Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, random_state=0, stratify=y)
        print(f"{name}: {len(ytr)} training rows, {len(yte)} test rows")
        print(f"  {'model':<24} {'log-loss':>8} {'fit s':>6}  kl_weight_")
        for label, make in models.items():
            pipe = make_pipeline(StandardScaler(), make())
            t0 = time.perf_counter()
            pipe.fit(Xtr, ytr)
            secs = time.perf_counter() - t0
            loss = log_loss(yte, pipe.predict_proba(Xte), labels=pipe.classes_)
            losses[name, label] = loss
            est = pipe[-1]
            chosen = ""
            if hasattr(est, "kl_weight_"):
                chosen = f"{est.kl_weight_:g}"
                if hasattr(est, "kl_weight_scores_"):
                    scores = ", ".join(f"{s:.4f}" for s in est.kl_weight_scores_)
                    chosen += f" (held-out log-likelihood per row: {scores})"
            print(f"  {label:<24} {loss:>8.4f} {secs:>6.1f}  {chosen}")

    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    colors = ["tab:blue", "tab:orange", "tab:green", "gray"]
    for ax, name in zip(axes, data):
        values = [losses[name, label] for label in models]
        ax.bar(np.arange(len(models)), values, color=colors)
        ax.set_xticks(np.arange(len(models)), [m.replace(" ", "\n", 1) for m in models], fontsize=8)
        ax.set(ylabel="test log-loss", title=name, ylim=(0.9 * min(values), 1.05 * max(values)))
    fig.suptitle("NoisyKFACClassifier: the temperature chosen in fit", fontsize=10)
    fig.tight_layout()
    fig.savefig(args.out, dpi=120)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
