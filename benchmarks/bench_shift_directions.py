"""Where a first layer's weights sit against the directions a covariate shift moves the inputs.

Full-scale Fashion-MNIST as ``bench_uncertainty.py`` prepares it (all 60,000 training rows
standardised per pixel, or with ``--image-scaling global`` with one mean and std for all pixels,
the 784-100-10 network, 5 epochs of batch 200, float32 for skbayes,
seed 0). The eigenvectors of the training inputs' second-moment matrix ``A = X^T X / N``
(784 x 784) are grouped by eigenvalue. For each group the script prints

- how many directions it has;
- the fraction of the shift's perturbation energy that lies in them (the standardised
  severity-1 test images minus the clean ones, ``sum ((x' - x)^T q)^2`` over the rows);
- for ``MLPClassifier`` and ``NoisyKFACClassifier`` at their defaults (and a second noisy
  K-FAC with the parameters given by ``--set``): the first layer's weight energy per direction, ``sum_j (w_j^T q)^2``
  over its hidden units ``j`` averaged over the group's directions, divided by the same
  average over the group of the largest eigenvalues. A preconditioner that whitens the
  inputs (the natural gradient's ``A^{-1}``) moves the weights along every direction at the
  same rate; plain gradients favour the directions of large variance;

then each model's test log-loss and accuracy at severities 0 and 1.

Run: ``python benchmarks/bench_shift_directions.py [--threads 2] [--base PARAM=VALUE ...] [--set PARAM=VALUE ...]``
(about a minute and a half on two cores; needs the Debian package ``dataset-fashion-mnist``).
``--set`` fits a second noisy K-FAC with those parameters (``--set damping=0.03``); ``--base``
sets parameters of the first one (``--base damping=0.001``, the large-network default of the
tables in docs/uncertainty.md, which 'auto' has replaced by 0.003). Only public
API is used: the fitted ``module_`` of the skbayes estimator and ``coefs_`` of the MLP.
"""

from __future__ import annotations

import argparse
import ast
import time
import warnings

import numpy as np
import torch
from bench_uncertainty import make_data
from sklearn.metrics import accuracy_score, log_loss
from sklearn.neural_network import MLPClassifier

import skbayes

EDGES = (1e-3, 1e-2, 1e-1, 1.0, 10.0, np.inf)


def group_masks(lam):
    """One boolean mask over the directions per eigenvalue group ``[EDGES[i], EDGES[i + 1])``."""
    return [(lam >= lo) & (lam < hi) for lo, hi in zip(EDGES[:-1], EDGES[1:], strict=True)]


def group_means(values, masks):
    """Mean of ``values`` over the directions of each group (nan for an empty one)."""
    return np.array([float(values[m].mean()) if m.any() else float("nan") for m in masks])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--set", action="append", default=[], metavar="PARAM=VALUE")
    ap.add_argument("--base", action="append", default=[], metavar="PARAM=VALUE")
    ap.add_argument("--image-scaling", choices=("pixel", "global"), default="pixel")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore", category=UserWarning)
    job = dict(
        dataset="fashion",
        fit="full",
        seed=0,
        data_dir=args.data,
        fashion_test_rows=10000,
        fashion_rows=60000,
        severities=[0, 1],
        image_scaling=args.image_scaling,
    )
    d = make_data(job)
    X, y = d["Xtr"], d["ytr"]
    lam, Q = np.linalg.eigh(X.T @ X / len(X))
    shift = ((d["tests"][1] - d["tests"][0]) @ Q) ** 2
    masks = group_masks(lam)
    shift_share = np.array([shift.sum(0)[m].sum() for m in masks])
    shift_share /= shift_share.sum()
    counts = [int(m.sum()) for m in masks]

    budget = dict(hidden_layer_sizes=(100,), max_iter=5, batch_size=200, random_state=0)
    models = {"MLPClassifier": MLPClassifier(**budget)}
    for params in [args.base] + ([args.set] if args.set else []):  # the first at its defaults unless --base
        extra = {k: ast.literal_eval(v) for k, v in (s.split("=", 1) for s in params)}
        label = "NoisyKFACClassifier" + ("(" + ", ".join(f"{k}={v!r}" for k, v in extra.items()) + ")" if extra else "")
        models[label] = skbayes.NoisyKFACClassifier(dtype="float32", **budget, **extra)

    rows, scores = {}, []
    for name, model in models.items():
        t0 = time.perf_counter()
        model.fit(X, y)
        fit_s = time.perf_counter() - t0
        if isinstance(model, MLPClassifier):
            W = model.coefs_[0].T
        else:
            W = next(model.module_.parameters()).detach().double().cpu().numpy()
        energy = group_means(((W @ Q) ** 2).sum(0), masks)
        rows[name] = energy / energy[-1]
        s = [name, f"{np.sqrt((W**2).mean()):.3f}", f"{fit_s:.1f}"]
        for sev in (0, 1):
            p = model.predict_proba(d["tests"][sev])
            loss = log_loss(d["yte"], p, labels=np.arange(10))
            s += [f"{loss:.3f}", f"{100 * accuracy_score(d['yte'], p.argmax(1)):.1f}"]
        scores.append(s)

    groups = [f"[{lo:g}, {hi:g})" for lo, hi in zip(EDGES[:-1], EDGES[1:], strict=True)]
    print(f"# torch {torch.__version__}, {args.threads} threads; Fashion-MNIST, 60,000 rows, 784-100-10, seed 0\n")
    print("| eigenvalue of A | " + " | ".join(groups) + " |")
    print("|---|" + "---:|" * len(groups))
    print("| directions | " + " | ".join(map(str, counts)) + " |")
    print("| share of the severity-1 shift's energy | " + " | ".join(f"{v:.3f}" for v in shift_share) + " |")
    for name, r in rows.items():
        print(f"| {name}: weight energy per direction / the top group's | " + " | ".join(f"{v:.3f}" for v in r) + " |")
    head = ("model", "first-layer RMS", "fit s", "clean log-loss", "clean accuracy %", "severity-1 log-loss")
    print("\n| " + " | ".join(head) + " | severity-1 accuracy % |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for s in scores:
        print("| " + " | ".join(s) + " |")


if __name__ == "__main__":
    main()
