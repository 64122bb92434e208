"""Toy regression of the SLANG paper: y = x^3 + noise
==================================================

Thirty points with ``x ~ Uniform(-4, 4)`` and ``y = x^3 + eps``,
``eps ~ N(0, 9)``, are fitted by a one-hidden-layer network of 10 units
trained with SLANG. The plot shows the posterior-predictive mean and a
band of +-2 predictive standard deviations on ``[-6, 6]``, together with
the data and the true function: the band should hug the noise level
(+-6) where there is data and widen outside ``[-4, 4]``, where only the
weight uncertainty is left to say how little the model knows.

Run::

    python examples/plot_toy_regression.py [--out examples/toy_regression.png]

By default the noise precision is fixed to its true value 1/9; pass
``--noise-precision auto`` to learn it instead (with the default vague
``noise_prior``; 30 points are few, so the learned noise std comes out
above the true 3: about 11, and about 24 with the former ``noise_prior=(6, 6)``).
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

from skbayes import SLANGRegressor  # noqa: E402


def main(argv=None):
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--out", default=os.path.join(here, "toy_regression.png"), help="PNG to write")
    parser.add_argument(
        "--noise-precision",
        default=str(1.0 / NOISE_STD**2),
        help="'auto' to learn the noise precision, or a number (default: the true 1/9)",
    )
    parser.add_argument("--rank", type=int, default=8, help="rank L of the precision's low-rank part")
    args = parser.parse_args(argv)
    noise = args.noise_precision if args.noise_precision == "auto" else float(args.noise_precision)

    # A 31-parameter network gains nothing from several threads, and on a busy
    # machine idle-spinning OpenMP threads can make it 10-30x slower.
    torch.set_num_threads(1)
    X, y = make_data()
    reg = SLANGRegressor(
        hidden_layer_sizes=(10,),
        activation="tanh",
        rank=args.rank,
        prior_precision=0.1,
        noise_precision=noise,
        learning_rate=0.3,
        # The SLANG paper's figure starts from the usual random initialisation. From i-BLM
        # (the default) the fit is closer to x^3 on the data (RMSE 2.9 against 3.7 on [-4, 4])
        # but lands in a mode whose band widens much less outside it (std 4.7 at x = -6
        # against 14): see docs/init.md.
        init="default",
        batch_size=30,  # full batch: 30 points
        mc_samples=1,
        max_iter=1500,
        n_iter_no_change=1500,  # run all epochs: the loss of one-sample estimates is noisy
        predict_samples=500,
        random_state=0,
    )
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        # max_iter is the intended budget here, not a failure to converge.
        warnings.simplefilter("ignore", ConvergenceWarning)
        reg.fit(X, y)
    fit_time = time.perf_counter() - t0
    D = reg.posterior_.n_params

    grid = np.linspace(-6.0, 6.0, 241)[:, None]
    mean, std = reg.predict(grid, return_std=True)
    lower, upper = reg.predict_interval(grid, level=0.95)  # exact quantiles of the predictive
    truth = grid[:, 0] ** 3
    inside = np.abs(grid[:, 0]) <= 4.0

    # Fresh data from the same distribution, to check the 95% intervals.
    X_test, y_test = make_data(n=2000, seed=1)
    m_test = reg.predict(X_test)
    lo_test, hi_test = reg.predict_interval(X_test, level=0.95)
    covered = (y_test >= lo_test) & (y_test <= hi_test)

    m_train = reg.predict(X)
    print(f"SLANGRegressor: {D} parameters, rank {reg.posterior_.rank}, {reg.n_iter_} epochs in {fit_time:.1f} s")
    print(f"noise std: true {NOISE_STD:.2f}, used {reg.noise_std_:.2f}")
    print(f"train RMSE                          {np.sqrt(np.mean((m_train - y) ** 2)):6.2f}")
    print(f"test RMSE (2000 new points)         {np.sqrt(np.mean((m_test - y_test) ** 2)):6.2f}")
    print(f"RMSE to x^3 on [-4, 4]              {np.sqrt(np.mean((mean[inside] - truth[inside]) ** 2)):6.2f}")
    print(f"coverage of 95% intervals (test)    {covered.mean():6.1%}")
    print(f"mean predictive std on [-4, 4]      {std[inside].mean():6.2f}")
    for x0 in (-6.0, -5.0, 5.0, 6.0):
        i = int(np.argmin(np.abs(grid[:, 0] - x0)))
        print(f"at x = {x0:+.0f}: mean {mean[i]:8.1f} (true {x0**3:7.1f}), std {std[i]:6.2f}")

    fig, ax = plt.subplots(figsize=(7, 4.5))
    ax.axvspan(-6, -4, color="0.93", zorder=0)
    ax.axvspan(4, 6, color="0.93", zorder=0)
    ax.fill_between(grid[:, 0], lower, upper, color="tab:blue", alpha=0.25, label="95% predictive interval")
    ax.plot(grid[:, 0], truth, "k--", lw=1.2, label="true $x^3$")
    ax.plot(grid[:, 0], mean, color="tab:blue", lw=2, label="predictive mean")
    ax.plot(X[:, 0], y, "o", color="tab:red", ms=4, label="data (30 points)")
    ax.set_xlim(-6, 6)
    ax.set_ylim(-250, 250)
    ax.set_xlabel("x")
    ax.set_ylabel("y")
    ax.set_title(f"SLANG, 1 hidden layer of 10 units, rank {reg.posterior_.rank} (D = {D})")
    ax.legend(loc="upper left", fontsize=9)
    fig.tight_layout()
    fig.savefig(args.out, dpi=120)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
