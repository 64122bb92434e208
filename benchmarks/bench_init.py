"""Initialisation cost versus one training epoch, and held-out NLL right after each
initialisation and after a small training budget (i-BLM paper, Rossi et al. 2019).

    .venv/bin/python benchmarks/bench_init.py            # full run
    .venv/bin/python benchmarks/bench_init.py --quick    # fewer networks
"""

import argparse
import time
import warnings

import numpy as np
import torch
from sklearn.datasets import load_diabetes
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from skbayes import NoisyKFACRegressor, SLANGRegressor
from skbayes.metrics import mixture_log_likelihood

INITS = ("iblm", "iblm_random", "default", "uninformative", "heuristic", "xavier", "orthogonal", "lsuv")
# "iblm_random": i-BLM with the paper's random minibatches for hidden units too (init="iblm"
# uses minibatches local in each layer's input space for hidden units; see docs/init.md).


def init_only(est, X, y):
    """The initialisation alone: ``max_iter=0`` fits the starting posterior and no epoch."""
    return est.set_params(max_iter=0).fit(X, y)


def nll(est, X, y):
    """Held-out negative mixture log-likelihood over 50 weight samples with the learned noise."""
    f = est.sample_outputs(X, n_samples=50)[..., 0]
    return -mixture_log_likelihood(y, f, est.noise_std_)


def toy(n=500, seed=0):
    rng = np.random.RandomState(seed)
    x = rng.uniform(-10, 10, (n, 1))
    t = x[:, 0]
    return x, np.sin(t) + np.sin(t / 2) + np.sin(t / 3) - np.sin(t / 4) + np.exp(-1.0) * rng.randn(n)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--epochs", type=int, default=5)
    args = ap.parse_args()
    torch.set_num_threads(1)
    warnings.simplefilter("ignore", ConvergenceWarning)
    X, y = load_diabetes(return_X_y=True)
    data = {"diabetes": (X, y), "toy 1-D": toy()}
    nets = [(50,), (100,) * 5] if not args.quick else [(100,) * 5]
    print(f"torch threads: 1; epochs after init: {args.epochs}")
    print("| data | net | estimator | init | init s | epoch s | init/epoch | NLL at init | NLL after | R2 after |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for dname, (X, y) in data.items():
        Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, random_state=0)
        sc = StandardScaler().fit(Xtr)
        Xtr, Xte = sc.transform(Xtr), sc.transform(Xte)
        for hls in nets:
            for Est in (SLANGRegressor, NoisyKFACRegressor) if not args.quick else (SLANGRegressor,):
                for name in INITS:
                    kw = dict(hidden_layer_sizes=hls, init=name, random_state=0)
                    t0 = time.perf_counter()
                    e0 = init_only(Est(**kw), Xtr, ytr)
                    t_init = time.perf_counter() - t0
                    t0 = time.perf_counter()
                    e1 = Est(max_iter=args.epochs, tol=0, n_iter_no_change=10**6, **kw).fit(Xtr, ytr)
                    t_fit = time.perf_counter() - t0
                    t_epoch = (t_fit - t_init) / args.epochs
                    print(
                        f"| {dname} | {hls if len(hls) < 3 else f'{len(hls)}x{hls[0]}'} | {Est.__name__} | {name} | "
                        f"{t_init:.3f} | {t_epoch:.3f} | {t_init / t_epoch:.2f} | {nll(e0, Xte, yte):.3f} | "
                        f"{nll(e1, Xte, yte):.3f} | {e1.score(Xte, yte):.3f} |",
                        flush=True,
                    )

    # Initialisation cost against one epoch as the training set grows (default network,
    # synthetic data: i-BLM's work hardly depends on N, an epoch's is linear in N).
    from sklearn.datasets import make_friedman1

    sizes = (1000, 10000, 50000) if not args.quick else (1000, 10000)
    print()
    print("Default network (50,), make_friedman1 data (10 features), init='iblm':")
    print("| N | estimator | init s | epoch s | init/epoch |")
    print("|---|---|---|---|---|")
    for n in sizes:
        X, y = make_friedman1(n_samples=n, noise=1.0, random_state=0)
        X = StandardScaler().fit_transform(X)
        for Est in (SLANGRegressor, NoisyKFACRegressor):
            t0 = time.perf_counter()
            init_only(Est(init="iblm", random_state=0), X, y)
            t_init = time.perf_counter() - t0
            t0 = time.perf_counter()
            Est(init="default", max_iter=2, tol=0, n_iter_no_change=10**6, random_state=0).fit(X, y)
            t_epoch = (time.perf_counter() - t0) / 2
            print(f"| {n} | {Est.__name__} | {t_init:.3f} | {t_epoch:.3f} | {t_init / t_epoch:.3f} |", flush=True)


if __name__ == "__main__":
    main()
