"""Demo: a Bayesian neural network on the diabetes data set
========================================================

Fits ``StandardScaler -> SLANGRegressor`` (one hidden layer of 20 units,
low-rank-plus-diagonal Gaussian posterior of rank 8, noise precision learned)
on a held-out split of scikit-learn's ``load_diabetes`` and compares it with
``BayesianRidge``. For each model it prints the test RMSE, the mean per-point
test log-likelihood under the Gaussian predictive ``N(mean, std^2)``, and the
empirical coverage of the central 90% predictive interval, then writes a
plot: predictions against the truth with 90% error bars, and the coverage of
central intervals of every level (the interval calibration curve).

Run::

    python examples/demo.py [--out demo.png]
"""

import argparse
import time
import warnings

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
from scipy.stats import norm  # noqa: E402
from sklearn.datasets import load_diabetes  # noqa: E402
from sklearn.exceptions import ConvergenceWarning  # noqa: E402
from sklearn.linear_model import BayesianRidge  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402

from skbayes import SLANGRegressor  # noqa: E402
from skbayes.metrics import gaussian_log_likelihood, interval_coverage  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--out", default="demo.png", help="PNG to write (default: demo.png)")
    args = parser.parse_args(argv)
    # A small network: one thread is as fast, and avoids OpenMP oversubscription
    # (a many-fold slowdown) when the machine is busy.
    torch.set_num_threads(1)

    X, y = load_diabetes(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.25, random_state=0)
    print(f"load_diabetes: {len(y_train)} training and {len(y_test)} test points, {X.shape[1]} features")

    models = {
        "SLANGRegressor": make_pipeline(
            StandardScaler(),
            SLANGRegressor(
                hidden_layer_sizes=(20,),
                rank=8,
                prior_precision=10.0,
                max_iter=300,
                random_state=0,
            ),
        ),
        "BayesianRidge": make_pipeline(StandardScaler(), BayesianRidge()),
    }
    preds = {}
    print(f"\n{'model':<16}{'test RMSE':>10}{'test log-lik':>14}{'90% coverage':>14}{'fit time':>10}")
    for name, model in models.items():
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            model.fit(X_train, y_train)
        elapsed = time.perf_counter() - t0
        # A Pipeline passes return_std on to the final estimator's predict.
        mean, std = model.predict(X_test, return_std=True)
        preds[name] = (mean, std)
        rmse = np.sqrt(np.mean((y_test - mean) ** 2))
        loglik = gaussian_log_likelihood(y_test, mean, std)
        cover = interval_coverage(y_test, mean, std, level=0.9)
        print(f"{name:<16}{rmse:>10.2f}{loglik:>14.4f}{cover:>14.1%}{elapsed:>9.1f}s")

    slang = models["SLANGRegressor"][-1]
    ridge = models["BayesianRidge"][-1]
    print(f"\nlearned noise std: SLANG {slang.noise_std_:.1f}, BayesianRidge {1.0 / np.sqrt(ridge.alpha_):.1f}")
    print(
        f"SLANG: {slang.posterior_.n_params} weights, posterior rank {slang.posterior_.rank}, "
        f"{slang.n_iter_} epochs, final negative ELBO per example {slang.loss_curve_[-1]:.4f}"
    )

    levels = np.linspace(0.05, 0.95, 19)
    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(11, 4.8))
    z90 = norm.ppf(0.95)
    mean, std = preds["SLANGRegressor"]
    lo = min(y_test.min(), (mean - z90 * std).min()) - 10
    hi = max(y_test.max(), (mean + z90 * std).max()) + 10
    ax0.errorbar(
        y_test,
        mean,
        yerr=z90 * std,
        fmt="o",
        ms=3,
        color="tab:blue",
        ecolor="tab:blue",
        elinewidth=0.8,
        alpha=0.6,
        capsize=0,
        label="SLANG mean, 90% interval",
    )
    ax0.plot([lo, hi], [lo, hi], "k:", lw=1)
    ax0.set_xlim(y_test.min() - 15, y_test.max() + 15)
    ax0.set_ylim(lo, hi)
    ax0.set_xlabel("true disease progression")
    ax0.set_ylabel("predicted")
    ax0.set_title("SLANGRegressor on held-out diabetes data")
    ax0.legend(loc="upper left", fontsize=9)

    ax1.plot([0, 1], [0, 1], "k:", lw=1, label="ideal")
    for (name, (m, s)), mk in zip(preds.items(), ["o", "s"]):
        cov = [interval_coverage(y_test, m, s, level=p) for p in levels]
        ax1.plot(levels, cov, marker=mk, ms=4, label=name)
    ax1.set_xlabel("nominal level of the central interval")
    ax1.set_ylabel("fraction of test targets inside")
    ax1.set_title("Interval calibration")
    ax1.legend(loc="upper left", fontsize=9)
    fig.tight_layout()
    fig.savefig(args.out, dpi=120)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
