"""An ensemble of posteriors against one posterior and a deep ensemble, beyond the data
=====================================================================================

The toy problem of the SLANG paper, ``y = x^3 + eps`` with ``eps ~ N(0, 9)``, with 60 points
drawn on ``[-4, 4]``, and the predictive on ``[-6, 6]``: in the grey bands there is no data,
and only the model's uncertainty about the function can widen its intervals. Three models:

- ``NoisyKFACRegressor``: one variational posterior (one basin of the loss);
- ``PosteriorEnsembleRegressor``: five of them, fitted from five seeds, predicting with the
  mixture of their predictives (``skbayes.ensemble``);
- five scikit-learn ``MLPRegressor`` averaged, with the noise estimated on held-out rows:
  a deep ensemble, whose spread comes from the seeds alone.

The script prints, for each, the coverage of the central 95% interval on 2,000 new points
inside and outside the data's range, and the fit time, and draws the intervals. On this run
(seed 0): one posterior covers 36% of the points outside, five posteriors 60%, the deep
ensemble 0%; all three cover 93-100% inside. The members' means part where there is no data,
and the mixture keeps their disagreement. No model foresees ``x^3``'s growth: every ReLU
network extrapolates linearly, and with 300 points instead of 60, where each posterior is
narrower, the three cover 12%, 9% and 1% outside.

Run::

    python examples/plot_posterior_ensemble.py [--out examples/posterior_ensemble.png]
"""

import argparse
import os
import sys
import time
import warnings

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from scipy.stats import norm  # noqa: E402
from sklearn.exceptions import ConvergenceWarning  # noqa: E402
from sklearn.neural_network import MLPRegressor  # noqa: E402

from skbayes import NoisyKFACRegressor  # noqa: E402
from skbayes.ensemble import PosteriorEnsembleRegressor  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _toy_data import NOISE_STD  # noqa: E402

LEVEL = 0.95


class MLPEnsemble:
    """Five MLPRegressors from five seeds; a Gaussian predictive with the members' spread plus
    the noise variance of held-out residuals (each member leaves out a tenth of the rows)."""

    def __init__(self, k=5, hidden=(50,)):
        self.k, self.hidden = k, hidden

    def fit(self, X, y):
        rng = np.random.RandomState(0)
        self.y_mean_, self.y_std_ = float(y.mean()), float(y.std())
        z = (y - self.y_mean_) / self.y_std_  # the MLPs fit standardised targets
        self.members_, res = [], []
        for i in range(self.k):
            out = rng.permutation(len(X))[: max(1, len(X) // 10)]
            keep = np.setdiff1d(np.arange(len(X)), out)
            m = MLPRegressor(hidden_layer_sizes=self.hidden, max_iter=2000, random_state=i).fit(X[keep], z[keep])
            self.members_.append(m)
            res.append(self.y_std_ * m.predict(X[out]) + self.y_mean_ - y[out])
        self.noise_var_ = float(np.mean(np.concatenate(res) ** 2))
        return self

    def predict_interval(self, X, level):
        f = np.stack([self.y_std_ * m.predict(X) + self.y_mean_ for m in self.members_])
        mean, std = f.mean(0), np.sqrt(f.var(0) + self.noise_var_)
        z = norm.ppf(0.5 + level / 2)
        return mean, mean - z * std, mean + z * std


def draw(n, lo, hi, rng):
    X = rng.uniform(lo, hi, size=(n, 1))
    return X, X[:, 0] ** 3 + NOISE_STD * rng.standard_normal(n)


def main():
    ap = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "posterior_ensemble.png"))
    args = ap.parse_args()
    warnings.simplefilter("ignore", ConvergenceWarning)

    rng = np.random.RandomState(0)
    X, y = draw(60, -4.0, 4.0, rng)
    X_in, y_in = draw(2000, -4.0, 4.0, rng)
    X_out = np.concatenate([rng.uniform(-6.0, -4.0, size=(1000, 1)), rng.uniform(4.0, 6.0, size=(1000, 1))])
    y_out = X_out[:, 0] ** 3 + NOISE_STD * rng.standard_normal(2000)
    grid = np.linspace(-6, 6, 400)[:, None]

    member = NoisyKFACRegressor(hidden_layer_sizes=(50,), random_state=0)
    models = {
        "noisy K-FAC (one posterior)": member,
        "5 noisy K-FAC posteriors": PosteriorEnsembleRegressor(member, n_members=5, random_state=0),
        "5 MLPs (deep ensemble)": MLPEnsemble(),
    }
    fig, axes = plt.subplots(1, 3, figsize=(13, 4), sharey=True)
    print(f"{'model':30s} {'fit s':>6s} {'covered in [-4, 4]':>19s} {'covered outside':>16s}")
    for ax, (name, model) in zip(axes, models.items(), strict=True):
        t0 = time.perf_counter()
        model.fit(X, y)
        fit_s = time.perf_counter() - t0
        covered = []
        for Xt, yt in ((X_in, y_in), (X_out, y_out)):
            if isinstance(model, MLPEnsemble):
                _, lo, hi = model.predict_interval(Xt, LEVEL)
            else:
                lo, hi = model.predict_interval(Xt, level=LEVEL)
            covered.append(np.mean((yt >= lo) & (yt <= hi)))
        print(f"{name:30s} {fit_s:6.1f} {covered[0]:19.1%} {covered[1]:16.1%}")
        if isinstance(model, MLPEnsemble):
            mean, lo, hi = model.predict_interval(grid, LEVEL)
        else:
            mean = model.predict(grid)
            lo, hi = model.predict_interval(grid, level=LEVEL)
        for side in ((-6, -4), (4, 6)):
            ax.axvspan(*side, color="0.93", zorder=0)
        ax.fill_between(grid[:, 0], lo, hi, color="tab:blue", alpha=0.25, label=f"{LEVEL:.0%} interval")
        ax.plot(grid[:, 0], grid[:, 0] ** 3, "k--", lw=1, label="true $x^3$")
        ax.plot(grid[:, 0], mean, color="tab:blue", lw=1.5, label="predictive mean")
        ax.plot(X[:, 0], y, "o", color="tab:red", ms=3, label="data")
        ax.set_title(f"{name}\noutside [-4, 4]: {covered[1]:.0%} covered", fontsize=10)
        ax.set_xlim(-6, 6)
        ax.set_ylim(-300, 300)
        ax.set_xlabel("x")
    axes[0].set_ylabel("y")
    axes[0].legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
