"""Mean-field baselines on the toy regression y = x^3 + noise: VOGN, Vadam, Vprop
==============================================================================

The data of ``plot_toy_regression.py`` (30 points, ``x ~ Uniform(-4, 4)``,
``y = x^3 + eps`` with ``eps ~ N(0, 9)``), fitted by a one-hidden-layer
network of 10 tanh units with a diagonal Gaussian posterior, three ways:

- ``VOGNRegressor``: mean-field natural gradient from per-example squared
  gradients (SLANG with ``rank=0``);
- ``VadamRegressor(method="vadam")``: Adam-like steps, the precision from the
  square of the minibatch gradient;
- ``VadamRegressor(method="vprop")``: the RMSprop-like natural-gradient step
  with the same precision.

Each panel shows the predictive mean and a band of +-2 predictive standard
deviations; the printout gives the test RMSE, the coverage of the band on
fresh points, the median posterior standard deviation of the weights and the
fit time. With the full batch (``M = N = 30``) the squared mean gradient is
far smaller than the mean of per-example squares, so Vadam and Vprop end with
wider weight posteriors than VOGN. None of the three bands widens much outside
``[-4, 4]``: a diagonal posterior misses the correlations between weights that
make SLANG's band open up there (compare ``plot_toy_regression.py``, whose
``--rank 0`` run is the VOGN panel).

Run::

    python examples/plot_meanfield.py [--out examples/meanfield.png]
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

from skbayes import VadamRegressor, VOGNRegressor  # noqa: E402


def main(argv=None):
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--out", default=os.path.join(here, "meanfield.png"), help="PNG to write")
    args = parser.parse_args(argv)

    torch.set_num_threads(1)  # a 31-parameter network gains nothing from more threads
    X, y = make_data()
    common = dict(
        hidden_layer_sizes=(10,),
        # 30 training points: too few rows for i-BLM's per-unit regressions to beat
        # PyTorch's start here (see docs/init.md), so this example uses the latter.
        init="default",
        activation="tanh",
        prior_precision=0.1,
        noise_precision=1.0 / NOISE_STD**2,  # the true noise level, fixed
        batch_size=30,  # full batch
        max_iter=1500,
        n_iter_no_change=1500,  # run every epoch: one-sample loss estimates are noisy
        predict_samples=500,
        random_state=0,
    )
    models = [
        # VOGN with the step size of plot_toy_regression.py (it is SLANG with rank 0);
        # Vadam and Vprop as the paper states them (learning_rate 'auto', beta2 0.999, the
        # untempered posterior at constant steps: Vadam's defaults; Vprop's are tempered)
        ("VOGN", VOGNRegressor(learning_rate=0.3, **common)),
        ("Vadam", VadamRegressor(method="vadam", kl_weight=1.0, decay_epochs=None, **common)),
        ("Vprop", VadamRegressor(method="vprop", kl_weight=1.0, decay_epochs=None, **common)),
    ]
    grid = np.linspace(-6.0, 6.0, 241)[:, None]
    X_test, y_test = make_data(n=2000, seed=1)
    fig, axes = plt.subplots(1, len(models), figsize=(13, 4.2), sharey=True)
    for ax, (name, reg) in zip(axes, models):
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)  # max_iter is the budget here
            reg.fit(X, y)
        seconds = time.perf_counter() - t0
        mean, std = reg.predict(grid, return_std=True)
        m_test, s_test = reg.predict(X_test, return_std=True)
        rmse = np.sqrt(np.mean((m_test - y_test) ** 2))
        cover = np.mean(np.abs(y_test - m_test) <= 2.0 * s_test)
        sd_w = np.sqrt(reg.posterior_.variance())
        print(
            f"{name:6s} test RMSE {rmse:6.2f}  coverage of +-2 std {cover:6.1%}  "
            f"median weight std {np.median(sd_w):.3f}  std at x=+-6: {std[0]:.0f}, {std[-1]:.0f}  "
            f"fit {seconds:.1f} s"
        )
        ax.axvspan(-6, -4, color="0.93", zorder=0)
        ax.axvspan(4, 6, color="0.93", zorder=0)
        ax.fill_between(grid[:, 0], mean - 2 * std, mean + 2 * std, color="tab:blue", alpha=0.25, label="mean ± 2 std")
        ax.plot(grid[:, 0], grid[:, 0] ** 3, "k--", lw=1.2, label="true $x^3$")
        ax.plot(grid[:, 0], mean, color="tab:blue", lw=2, label="predictive mean")
        ax.plot(X[:, 0], y, "o", color="tab:red", ms=4, label="data")
        ax.set_xlim(-6, 6)
        ax.set_ylim(-250, 250)
        ax.set_xlabel("x")
        ax.set_title(f"{name}: test RMSE {rmse:.1f}, coverage {cover:.0%}")
    axes[0].set_ylabel("y")
    axes[0].legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
