"""Calibration of SLANGClassifier on the breast cancer data set
============================================================

A Bayesian neural network (one hidden layer of 50 ReLU units) and Bayesian
logistic regression (``hidden_layer_sizes=()``), both trained by SLANG, are
compared with scikit-learn's LogisticRegression and MLPClassifier on a
stratified held-out split of ``load_breast_cancer``. Every model standardises
its inputs in a Pipeline. For each model the script prints the test accuracy,
the log-loss, the expected calibration error (ECE: 15 equal-width bins on
the confidence of the predicted class, the bins' ``|accuracy - confidence|``
weighted by their share of test points) and the area under the risk-coverage
curve (AURC: the error rate among the most confident test points, averaged over
how many of them the model answers; lower is better), and draws a reliability
diagram.

With a couple of hundred test points, almost all of them in the top bin,
most bins hold a handful of points: ECE differences of about 0.01 between
the models are within the noise of the split.

Run::

    python examples/plot_classification_calibration.py [--out examples/calibration.png]
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
from sklearn.datasets import load_breast_cancer  # noqa: E402
from sklearn.exceptions import ConvergenceWarning  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402
from sklearn.metrics import accuracy_score, log_loss  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402
from sklearn.neural_network import MLPClassifier  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402

from skbayes import SLANGClassifier  # noqa: E402
from skbayes.metrics import area_under_risk_coverage, expected_calibration_error  # noqa: E402
from skbayes.pipeline import make_pipeline  # noqa: E402

N_BINS = 15


def reliability(proba, y, n_bins=N_BINS):
    """Per-bin confidence, accuracy and count of the predicted class's confidence.

    Bins are ``[k/n_bins, (k+1)/n_bins)`` (the last one closed), as in
    :func:`skbayes.metrics.expected_calibration_error`; returns arrays of length
    ``n_bins`` (NaN for empty bins) and the expected calibration error.
    """
    conf = proba.max(1)
    correct = (proba.argmax(1) == y).astype(float)
    idx = np.minimum((conf * n_bins).astype(int), n_bins - 1)
    count = np.bincount(idx, minlength=n_bins).astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_conf = np.bincount(idx, weights=conf, minlength=n_bins) / count
        acc = np.bincount(idx, weights=correct, minlength=n_bins) / count
    filled = count > 0
    ece = float(np.sum(count[filled] / len(y) * np.abs(acc[filled] - mean_conf[filled])))
    return mean_conf, acc, count, ece


def main(argv=None):
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--out", default=os.path.join(here, "calibration.png"), help="PNG to write")
    args = parser.parse_args(argv)
    # Small networks: one thread avoids OpenMP oversubscription on a busy machine.
    torch.set_num_threads(1)

    data = load_breast_cancer()
    X_train, X_test, y_train, y_test = train_test_split(
        data.data, data.target, test_size=0.4, stratify=data.target, random_state=0
    )
    models = {
        "SLANG BNN (50,)": SLANGClassifier(hidden_layer_sizes=(50,), rank=8, prior_precision=1.0, random_state=0),
        "SLANG logistic": SLANGClassifier(hidden_layer_sizes=(), rank=8, prior_precision=1.0, random_state=0),
        "LogisticRegression": LogisticRegression(C=1.0),
        "MLPClassifier (50,)": MLPClassifier(hidden_layer_sizes=(50,), max_iter=2000, random_state=0),
    }
    print(f"breast_cancer: {len(y_train)} train / {len(y_test)} test points, {X_train.shape[1]} features")
    print(f"{'model':<22}{'accuracy':>9}{'log-loss':>10}{'ECE':>8}{'AURC':>8}{'time':>8}")
    results = {}
    for name, est in models.items():
        pipe = make_pipeline(StandardScaler(), est)
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            pipe.fit(X_train, y_train)
        elapsed = time.perf_counter() - t0
        proba = pipe.predict_proba(X_test)
        conf, acc, count, ece = reliability(proba, y_test)
        assert np.isclose(ece, expected_calibration_error(y_test, proba, n_bins=N_BINS))
        results[name] = (conf, acc, count, ece)
        print(
            f"{name:<22}{accuracy_score(y_test, proba.argmax(1)):>9.4f}"
            f"{log_loss(y_test, proba):>10.4f}{ece:>8.4f}"
            f"{area_under_risk_coverage(y_test, proba, labels=pipe.classes_):>8.4f}{elapsed:>7.1f}s"
        )
        if isinstance(est, SLANGClassifier):
            # Spread of the predicted probability over the posterior: larger on the
            # mistakes (skbayes.pipeline's Pipeline forwards predict_std).
            std = pipe.predict_std(X_test)[:, 1]
            wrong = proba.argmax(1) != y_test
            print(
                f"{'':<4}posterior std of P(benign): {std[~wrong].mean():.4f} on correct, "
                f"{std[wrong].mean() if wrong.any() else float('nan'):.4f} on {wrong.sum()} wrong predictions "
                f"({est.n_iter_} epochs)"
            )

    edges = np.linspace(0, 1, N_BINS + 1)
    width = edges[1] - edges[0]
    fig, axes = plt.subplots(2, 2, figsize=(9, 8), sharex=True, sharey=True)
    for ax, (name, (conf, acc, count, ece)) in zip(axes.ravel(), results.items()):
        filled = count > 0
        left = edges[:-1][filled]
        ax.bar(
            left,
            acc[filled],
            width=width,
            align="edge",
            color="tab:blue",
            alpha=0.7,
            edgecolor="k",
            lw=0.5,
            label="accuracy",
        )
        # The gap between each bin's accuracy and its mean confidence.
        ax.bar(
            left,
            conf[filled] - acc[filled],
            bottom=acc[filled],
            width=width,
            align="edge",
            color="tab:red",
            alpha=0.3,
            edgecolor="tab:red",
            lw=0.5,
            label="gap to confidence",
        )
        for x0, _a, c in zip(left, acc[filled], count[filled]):
            ax.text(x0 + width / 2, 0.02, f"{int(c)}", ha="center", va="bottom", fontsize=7)
        ax.plot([0, 1], [0, 1], "k:", lw=1)
        ax.set_title(f"{name}: ECE {ece:.3f}", fontsize=10)
        ax.set_xlim(0.45, 1.0)
        ax.set_ylim(0.0, 1.02)
    axes[0, 0].legend(loc="upper left", fontsize=8)
    for ax in axes[1]:
        ax.set_xlabel("confidence of the predicted class")
    for ax in axes[:, 0]:
        ax.set_ylabel("accuracy in bin")
    fig.suptitle(f"Reliability diagrams, breast_cancer test set ({N_BINS} bins; numbers: points per bin)")
    fig.tight_layout()
    fig.savefig(args.out, dpi=120)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
