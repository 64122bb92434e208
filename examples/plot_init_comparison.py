"""Compare the initialisations of the i-BLM paper on its 1-D toy problem
=====================================================================

``f(x) = sin(x) + sin(x/2) + sin(x/3) - sin(x/4)``, noise ``N(0, e^-2)``, ``x`` in ``[-10, 10]``.
For each `init`, plots the posterior-predictive mean and a 2-std band right after
initialisation (top row) and after a few epochs of SLANG (bottom row).

Run::

    .venv/bin/python examples/plot_init_comparison.py [--epochs 5] [--out examples/init_comparison.png]
"""

import argparse
import os
import warnings

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from sklearn.exceptions import ConvergenceWarning

from skbayes import SLANGRegressor

INITS = ("iblm", "default", "uninformative", "heuristic", "xavier", "orthogonal", "lsuv")


def f(x):
    return np.sin(x) + np.sin(x / 2) + np.sin(x / 3) - np.sin(x / 4)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "init_comparison.png"))
    args = ap.parse_args()
    warnings.simplefilter("ignore", ConvergenceWarning)
    rng = np.random.RandomState(0)
    x = rng.uniform(-10, 10, 500)
    y = f(x) + np.exp(-1.0) * rng.randn(500)
    X = (x / 5.77)[:, None]  # roughly standardised
    grid = np.linspace(-12, 12, 400)
    G = (grid / 5.77)[:, None]
    fig, axes = plt.subplots(2, len(INITS), figsize=(3.0 * len(INITS), 5.5), sharex=True, sharey=True)
    for j, init in enumerate(INITS):
        for i, epochs in enumerate((0, args.epochs)):
            est = SLANGRegressor(
                hidden_layer_sizes=(50, 50),
                init=init,
                random_state=0,
                predict_samples=50,
                max_iter=epochs,
                tol=0,
                n_iter_no_change=10**6,
            )  # max_iter=0: init only
            est.fit(X, y)
            m, s = est.predict(G, return_std=True)
            r2 = est.score(X, y)
            ax = axes[i, j]
            ax.plot(x, y, ".", ms=2, color="0.6")
            ax.plot(grid, f(grid), "k--", lw=1)
            ax.plot(grid, m, color="C0")
            ax.fill_between(grid, m - 2 * s, m + 2 * s, color="C0", alpha=0.25)
            ax.set_ylim(-5, 5)
            ax.set_title(f"{init}, {'init' if epochs == 0 else f'{epochs} epochs'}\nR2={r2:.2f}", fontsize=8)
            print(f"{init:14s} {'after init' if epochs == 0 else f'after {epochs} epochs':16s} train R2 {r2:7.3f}")
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    print("wrote", args.out)


if __name__ == "__main__":
    main()
