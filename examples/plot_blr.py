"""Exact Bayesian linear regression next to scikit-learn's BayesianRidge
======================================================================

On scikit-learn's diabetes data (442 patients, 10 features), in its raw units:

- the prior precision ``alpha`` (on the standardised scale) chosen by the exact log
  evidence, ``log_marginal_likelihood(alpha=...)``, over a grid, with the noise
  precision learned by evidence maximisation at each value;
- held-out RMSE, mean log predictive density and the coverage of the +-2 std band,
  against ``BayesianRidge`` (MacKay updates with vague Gamma hyperpriors);
- the scale invariance: the same fit after multiplying the features by 1e6
  (predictions unchanged) and the targets by 1e-3 (the mean and std scale with them);
- posterior predictive draws (``sample_y``) for a few test patients.

Run::

    python examples/plot_blr.py [--out examples/blr.png]
"""

import argparse
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from scipy.stats import norm  # noqa: E402
from sklearn.datasets import load_diabetes  # noqa: E402
from sklearn.linear_model import BayesianRidge  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402

from skbayes.linear_model import BayesianLinearRegression  # noqa: E402


def scores(y, mean, std):
    rmse = float(np.sqrt(np.mean((y - mean) ** 2)))
    lpd = float(np.mean(norm.logpdf(y, mean, std)))
    cover = float(np.mean(np.abs(y - mean) <= 2 * std))
    return rmse, lpd, cover


def main():
    ap = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "blr.png"))
    args = ap.parse_args()

    X, y = load_diabetes(return_X_y=True)
    X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=0.3, random_state=0)

    # 1. alpha by the exact evidence (noise precision re-optimised at each alpha)
    alphas = np.logspace(-3, 3, 25)
    evidence = [BayesianLinearRegression(alpha=a).fit(X_tr, y_tr).log_marginal_likelihood_value_ for a in alphas]
    best = float(alphas[int(np.argmax(evidence))])
    blr = BayesianLinearRegression(alpha=best).fit(X_tr, y_tr)
    br = BayesianRidge().fit(X_tr, y_tr)

    print(f"alpha chosen by the evidence: {best:.3g} (standardised scale)")
    print(f"{'model':<32} {'RMSE':>7} {'log pred. density':>18} {'coverage of +-2 std':>20}")
    for name, (m, s) in (
        ("BayesianLinearRegression", blr.predict(X_te, return_std=True)),
        ("BayesianRidge", br.predict(X_te, return_std=True)),
    ):
        rmse, lpd, cover = scores(y_te, m, s)
        print(f"{name:<32} {rmse:7.2f} {lpd:18.3f} {cover:20.2f}")

    # 2. scale invariance
    m0, s0 = blr.predict(X_te, return_std=True)
    m1, s1 = BayesianLinearRegression(alpha=best).fit(X_tr * 1e6, y_tr).predict(X_te * 1e6, return_std=True)
    m2, s2 = BayesianLinearRegression(alpha=best).fit(X_tr, y_tr * 1e-3).predict(X_te, return_std=True)
    print(
        "X x 1e6: max |change| of mean / std "
        f"{np.max(np.abs(m1 - m0)):.2e} / {np.max(np.abs(s1 - s0)):.2e}; "
        f"y x 1e-3: max relative change of mean / std {np.max(np.abs(m2 * 1e3 / m0 - 1)):.2e} / "
        f"{np.max(np.abs(s2 * 1e3 / s0 - 1)):.2e}"
    )

    # 3. predictive draws
    draws = blr.sample_y(X_te[:8], n_samples=200, random_state=0)

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    axes[0].semilogx(alphas, evidence, "o-", ms=3)
    axes[0].axvline(best, color="k", ls="--", lw=1)
    axes[0].set(xlabel="alpha (prior precision, standardised scale)", ylabel="log evidence", title="Choosing alpha")
    order = np.argsort(m0)
    axes[1].errorbar(np.arange(len(order)), m0[order], yerr=2 * s0[order], fmt="none", alpha=0.3, label="+-2 std")
    axes[1].plot(np.arange(len(order)), y_te[order], ".", ms=3, color="k", label="held-out y")
    axes[1].set(xlabel="test patients (sorted by predicted mean)", ylabel="disease progression")
    axes[1].set_title("Held-out predictions")
    axes[1].legend(loc="upper left")
    inset = axes[1].inset_axes([0.62, 0.07, 0.35, 0.3])
    inset.boxplot(draws.T, showfliers=False)
    inset.set_title("sample_y, 8 patients", fontsize=8)
    inset.tick_params(labelsize=6)
    fig.tight_layout()
    fig.savefig(args.out, dpi=120)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
