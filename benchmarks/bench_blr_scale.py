"""Scale (in)variance of BayesianLinearRegression against scikit-learn's BayesianRidge.

One synthetic regression problem (seed 0): n = 300 rows, d = 8 standard-normal
features with column means 0..7, y = X w + 1 + 0.1 * noise. The inputs are
rescaled by a factor c (all columns by c, or column j by c ** (j / (d - 1)) * 10 ** (j % 3),
a different factor per column), or the targets by c; both estimators are fitted
at their defaults on the rescaled data and evaluated on 200 held-out rows
rescaled the same way. Printed per scale, in units of the *unscaled* y (values
for y x c are divided by c, so an invariant estimator prints the same row for
every c):

* median predictive std of BayesianLinearRegression and of BayesianRidge;
* the noise std ``1 / sqrt(noise_precision_)`` of BayesianLinearRegression;
* rms of the held-out residuals of BayesianLinearRegression;
* the largest relative deviation of BayesianLinearRegression's predictive mean
  and std from its own c = 1 fit.

Run:  .venv/bin/python benchmarks/bench_blr_scale.py
      .venv/bin/python benchmarks/bench_blr_scale.py --module /tmp/old_linear_model.py
            (another version of skbayes/linear_model.py, e.g. from ``git show``)
"""

import argparse
import importlib.util
import warnings

import numpy as np
from sklearn.linear_model import BayesianRidge

SCALES = (1e-8, 1e-3, 1.0, 1e3, 1e5, 1e8)


def _problem():
    rng = np.random.default_rng(0)
    n, d = 500, 8
    X = rng.standard_normal((n, d)) + np.arange(d)
    y = X @ rng.standard_normal(d) + 1.0 + 0.1 * rng.standard_normal(n)
    return X[:300], y[:300], X[300:], y[300:]


def _estimator_class(module_path):
    if module_path is None:
        from skbayes.linear_model import BayesianLinearRegression

        return BayesianLinearRegression
    spec = importlib.util.spec_from_file_location("_blr_under_test", module_path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.BayesianLinearRegression


def _fit(cls, X, y, Xq):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = cls().fit(X, y)
        br = BayesianRidge().fit(X, y)
    mean, std = est.predict(Xq, return_std=True)
    _, std_br = br.predict(Xq, return_std=True)
    return mean, std, std_br, 1.0 / np.sqrt(est.noise_precision_)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--module", help="path of a linear_model.py to load instead of skbayes.linear_model")
    args = parser.parse_args(argv)
    cls = _estimator_class(args.module)
    X, y, Xq, yq = _problem()
    d = X.shape[1]
    per_column = 10.0 ** (np.arange(d) % 3)
    print(f"# BayesianLinearRegression under rescaling ({args.module or 'skbayes.linear_model'})\n")
    columns = ["rescaled", "c", "median std", "BayesianRidge median std", "noise std", "residual rms"]
    columns += ["max rel. dev. mean", "max rel. dev. std"]
    print("| " + " | ".join(columns) + " |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    ref_mean, ref_std, _, _ = _fit(cls, X, y, Xq)
    for what in ("X (all columns)", "X (per column)", "y"):
        for c in SCALES:
            if what == "y":
                f = np.ones(d)
                cy = c
            elif what == "X (all columns)":
                f, cy = np.full(d, c), 1.0
            else:
                f, cy = c ** (np.arange(d) / (d - 1)) * per_column, 1.0
            try:
                mean, std, std_br, noise = _fit(cls, X * f, y * cy, Xq * f)
            except Exception as exc:  # report, keep going
                print(f"| {what} | {c:g} | {type(exc).__name__}: {str(exc)[:60]} | | | | | |")
                continue
            mean, std, std_br, noise = mean / cy, std / cy, std_br / cy, noise / cy
            dev_mean = np.max(np.abs(mean - ref_mean)) / np.std(ref_mean)
            dev_std = np.max(np.abs(std / ref_std - 1.0))
            rms = np.sqrt(np.mean((mean - yq) ** 2))
            print(
                f"| {what} | {c:g} | {np.median(std):.4g} | {np.median(std_br):.4g} | {noise:.4g} | "
                f"{rms:.4g} | {dev_mean:.1e} | {dev_std:.1e} |"
            )


if __name__ == "__main__":
    main()
