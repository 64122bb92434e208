"""Bayes by Backprop against MC dropout on the toy regression y = x^3 + noise
==========================================================================

The data of ``plot_toy_regression.py``: thirty points with ``x ~ Uniform(-4, 4)``
and ``y = x^3 + eps``, ``eps ~ N(0, 9)``. Both models use the same network (one
hidden layer of 50 ReLU units), the same prior precision (1, as weight decay
for dropout), Adam with step 0.01 and full-batch steps:

* ``BBBRegressor``: a mean-field Gaussian posterior over the weights, fitted by
  maximising the ELBO with reparameterised gradients (local
  reparameterisation trick);
* ``MCDropoutRegressor``: the network trained with dropout (rate 0.1 on the
  hidden units) and weight decay, with dropout kept on at prediction.

The plot shows each posterior-predictive mean with a band of +-2 predictive
standard deviations on ``[-6, 6]``, the data and the true function; the script
prints the fit time, test RMSE and coverage of the +-2 std intervals on 2000 new
points, and the predictive standard deviation outside the data.

Run::

    python examples/plot_bbb_dropout.py [--out examples/bbb_dropout.png]

By default the noise precision is fixed to its true value 1/9 (as in
``plot_toy_regression.py``); pass ``--noise-precision auto`` to learn it.
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
from _toy_data import NOISE_STD, make_data  # examples/ is on sys.path when run as a script  # noqa: E402
from sklearn.exceptions import ConvergenceWarning  # noqa: E402

from skbayes import BBBRegressor, MCDropoutRegressor  # noqa: E402


def main(argv=None):
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--out", default=os.path.join(here, "bbb_dropout.png"), help="PNG to write")
    parser.add_argument(
        "--noise-precision",
        default=str(1.0 / NOISE_STD**2),
        help="'auto' to learn the noise precision, or a number (default: the true 1/9)",
    )
    parser.add_argument("--epochs", type=int, default=3000, help="full-batch Adam steps")
    args = parser.parse_args(argv)
    noise = args.noise_precision if args.noise_precision == "auto" else float(args.noise_precision)

    torch.set_num_threads(1)  # a small network: one thread is fastest on a shared machine
    X, y = make_data()
    common = dict(
        hidden_layer_sizes=(50,),
        # 30 training points: too few rows for i-BLM's per-unit regressions to beat
        # PyTorch's start here (see docs/init.md), so this example uses the latter.
        init="default",
        activation="relu",
        prior_precision=1.0,
        learning_rate=0.01,
        noise_precision=noise,
        batch_size=30,  # full batch: 30 points
        max_iter=args.epochs,
        n_iter_no_change=args.epochs,  # run all epochs: the loss of one-sample estimates is noisy
        predict_samples=500,
        random_state=0,
    )
    models = {
        "Bayes by Backprop": BBBRegressor(**common),
        "MC dropout (p = 0.1)": MCDropoutRegressor(dropout=0.1, **common),
    }
    grid = np.linspace(-6.0, 6.0, 241)[:, None]
    truth = grid[:, 0] ** 3
    inside = np.abs(grid[:, 0]) <= 4.0
    X_test, y_test = make_data(n=2000, seed=1)

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5), sharey=True)
    for ax, (name, reg) in zip(axes, models.items()):
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)  # max_iter is the intended budget
            reg.fit(X, y)
        fit_time = time.perf_counter() - t0
        mean, std = reg.predict(grid, return_std=True)
        m_test, s_test = reg.predict(X_test, return_std=True)
        covered = np.mean(np.abs(y_test - m_test) <= 2.0 * s_test)
        print(f"{name}: {reg.posterior_.n_params} parameters, {reg.n_iter_} epochs in {fit_time:.1f} s")
        print(f"  test RMSE (2000 new points)         {np.sqrt(np.mean((m_test - y_test) ** 2)):6.2f}")
        print(f"  RMSE to x^3 on [-4, 4]              {np.sqrt(np.mean((mean[inside] - truth[inside]) ** 2)):6.2f}")
        print(f"  coverage of +-2 std on test points  {covered:6.1%}  (Gaussian: 95.4%)")
        print(f"  mean predictive std on [-4, 4]      {std[inside].mean():6.2f}")
        print(f"  predictive std at x = -6 / +6       {std[0]:6.2f} / {std[-1]:6.2f}")
        ax.axvspan(-6, -4, color="0.93", zorder=0)
        ax.axvspan(4, 6, color="0.93", zorder=0)
        ax.fill_between(grid[:, 0], mean - 2 * std, mean + 2 * std, color="tab:blue", alpha=0.25, label="mean ± 2 std")
        ax.plot(grid[:, 0], truth, "k--", lw=1.2, label="true $x^3$")
        ax.plot(grid[:, 0], mean, color="tab:blue", lw=2, label="predictive mean")
        ax.plot(X[:, 0], y, "o", color="tab:red", ms=4, label="data (30 points)")
        ax.set_xlim(-6, 6)
        ax.set_ylim(-250, 250)
        ax.set_xlabel("x")
        ax.set_title(f"{name}, {fit_time:.1f} s")
    axes[0].set_ylabel("y")
    axes[0].legend(loc="upper left", fontsize=9)
    fig.tight_layout()
    fig.savefig(args.out, dpi=120)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
