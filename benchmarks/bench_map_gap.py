"""The posterior against the MAP under the same prior: where the posterior's mean goes.

On digits (pixels / 16, ``StandardScaler``, the stratified 75/25 splits of
``bench_uncertainty.py``), with one hidden layer of 50 units:

- **MAP**: ``MLPClassifier(alpha=1.0)`` trained to convergence (``max_iter=2000``,
  ``tol=1e-6``): the network that maximises the log posterior under a unit Gaussian prior on
  the weights (scikit-learn adds ``alpha / 2 ||W||^2`` to the summed loss; it does not penalise
  the biases), the prior ``prior_precision=1.0`` of the skbayes classifiers.
- **MLP**: ``MLPClassifier`` at its defaults (``alpha=1e-4``), the benchmark's single MLP.
- **noisy K-FAC** and **SLANG** at their defaults (``SLANGClassifier``'s: ``kl_weight=0.1``
  and the GLM predictive on this network), and at each ``kl_weight`` of ``--kl-weights`` with
  the sampled predictive (1: the posterior; 0.1: the objective's KL term weighted by 0.1, a
  colder posterior).
- **... from the MAP**: the same estimator started at the MAP's weights (public API: the
  MAP's weights copied into a ``torch.nn.Sequential`` passed as ``module`` with
  ``init='default'``), untempered (``kl_weight=1``, sampled predictive) at constant steps
  (``decay_epochs=None``), scored after 1, 5, 20 and
  100 epochs (``warm_start=True``, the convergence test off).

Columns: the test log-loss on clean data and under the benchmark's covariate shift at
severity 1 (rotation and pixel noise), the accuracy at severity 1, the training objective
(negative ELBO per row, the last epoch of ``loss_curve_``) and two norms of the first layer's
weights (of the posterior mean): the mean norm of an input's outgoing weights over all 64
inputs, and over the 8 inputs whose training standard deviation is smallest. Standardising
divides those pixels' noise by their small deviation (up to 12 training standard deviations
at severity 1), so their weights decide the shifted predictions. For the posteriors, the mean
marginal variance of the first-layer weights of those 8 inputs and of the 8 with the largest
training deviation. Means over the splits.
Public API only.

Run:  .venv/bin/python benchmarks/bench_map_gap.py          (~1 min on 2 cores)
Options: --splits 3  --jobs 2  --epochs 1,5,20,100  --kl-weights 1,0.1
"""

import argparse
import time
import warnings
from concurrent.futures import ProcessPoolExecutor

import numpy as np
from _harness import library_version

HIDDEN = 50
PRIOR = 1.0


def run_split(job):
    """Rows ``(label, clean log-loss, shifted log-loss, shifted accuracy, objective, all, rare)``."""
    import torch
    from bench_uncertainty import corrupt
    from sklearn.datasets import load_digits
    from sklearn.metrics import log_loss
    from sklearn.model_selection import train_test_split
    from sklearn.neural_network import MLPClassifier
    from sklearn.preprocessing import StandardScaler

    from skbayes import NoisyKFACClassifier, SLANGClassifier

    torch.set_num_threads(1)
    split, epochs, kl_weights = job
    X, y = load_digits(return_X_y=True)
    Xtr, Xte, ytr, yte = train_test_split(X / 16.0, y, test_size=0.25, stratify=y, random_state=split)
    sc = StandardScaler().fit(Xtr)
    Z, clean, shifted = sc.transform(Xtr), sc.transform(Xte), sc.transform(corrupt(Xte, 8, 1, split))
    rare = np.argsort(sc.scale_)[:8]
    common = np.argsort(sc.scale_)[-8:]
    rows = []

    def score(label, est, W1, objective=float("nan"), V1=None):
        norms = np.linalg.norm(W1, axis=0)  # W1: (hidden, inputs); an input's outgoing weights
        var = (np.nan, np.nan) if V1 is None else (float(V1[:, rare].mean()), float(V1[:, common].mean()))
        p0, p1 = est.predict_proba(clean), est.predict_proba(shifted)
        rows.append(
            (
                label,
                log_loss(yte, p0, labels=est.classes_),
                log_loss(yte, p1, labels=est.classes_),
                100.0 * float(np.mean(est.classes_[p1.argmax(1)] == yte)),
                objective,
                float(norms.mean()),
                float(norms[rare].mean()),
                *var,
            )
        )

    def first_layer(est, what="mean"):
        v = est.posterior_.mean if what == "mean" else est.posterior_.variance()
        return np.asarray(v)[: HIDDEN * Z.shape[1]].reshape(HIDDEN, Z.shape[1])

    def score_posterior(label, est):
        score(label, est, first_layer(est), est.loss_curve_[-1], first_layer(est, "variance"))

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ConvergenceWarning of the fixed budgets; the input-scale warning
        mlp_map = MLPClassifier((HIDDEN,), alpha=PRIOR, max_iter=2000, tol=1e-6, random_state=split).fit(Z, ytr)
        score("MAP (MLPClassifier, alpha=1)", mlp_map, mlp_map.coefs_[0].T)
        mlp = MLPClassifier((HIDDEN,), random_state=split).fit(Z, ytr)
        score("MLPClassifier (alpha=1e-4)", mlp, mlp.coefs_[0].T)
        for name, cls in (("noisy K-FAC", NoisyKFACClassifier), ("SLANG", SLANGClassifier)):
            est = cls(random_state=split).fit(Z, ytr)
            score_posterior(f"{name}, defaults", est)
            defaults = cls().get_params()
            for w in kl_weights:
                if defaults["kl_weight"] == w and defaults["predictive"] == "sampled":
                    continue  # the defaults' row
                est = cls(kl_weight=w, predictive="sampled", random_state=split).fit(Z, ytr)
                score_posterior(f"{name}, kl_weight={w:g}, sampled", est)
            net = torch.nn.Sequential(torch.nn.Linear(Z.shape[1], HIDDEN), torch.nn.ReLU(), torch.nn.Linear(HIDDEN, 10))
            with torch.no_grad():
                for layer, W, b in zip((net[0], net[2]), mlp_map.coefs_, mlp_map.intercepts_):
                    layer.weight.copy_(torch.as_tensor(W.T))
                    layer.bias.copy_(torch.as_tensor(b))
            est = cls(
                module=net.double(),
                init="default",
                kl_weight=1.0,
                predictive="sampled",
                decay_epochs=None,
                warm_start=True,
                n_iter_no_change=10_000,
                random_state=split,
            )
            done = 0
            for e in epochs:
                est.set_params(max_iter=e - done)
                est.fit(Z, ytr)
                done = e
                score_posterior(f"{name} from the MAP, {e} epochs", est)
    return split, rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--splits", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--epochs", default="1,5,20,100", help="comma-separated epoch counts (increasing)")
    ap.add_argument("--kl-weights", default="1,0.1", help="comma-separated kl_weight rows (empty: none)")
    args = ap.parse_args()
    epochs = [int(e) for e in args.epochs.split(",")]
    kl_weights = [float(w) for w in args.kl_weights.split(",") if w]
    print(f"skbayes {library_version()}; digits, {args.splits} splits, one torch thread per worker, {args.jobs} jobs")
    t0 = time.perf_counter()
    with ProcessPoolExecutor(args.jobs) as ex:
        results = list(ex.map(run_split, [(s, epochs, kl_weights) for s in range(args.splits)]))
    labels = [r[0] for r in results[0][1]]
    table = {lab: np.array([[row[1:] for row in rows if row[0] == lab][0] for _, rows in results]) for lab in labels}
    print()
    print(
        "| fit | clean log-loss | severity 1 log-loss | severity 1 accuracy % | objective "
        "| weight norm, all inputs | 8 rarest | variance, 8 rarest | 8 most varied |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for lab in labels:
        m = table[lab].mean(0)
        obj = "-" if np.isnan(m[3]) else f"{m[3]:.3f}"
        var = "| - | -" if np.isnan(m[6]) else f"| {m[6]:.2f} | {m[7]:.2f}"
        print(f"| {lab} | {m[0]:.3f} | {m[1]:.3f} | {m[2]:.1f} | {obj} | {m[4]:.2f} | {m[5]:.2f} {var} |")
    print(f"\ntotal wall time {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
