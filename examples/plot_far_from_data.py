"""Far from the training data: point estimates grow sure, posteriors do not
=========================================================================

A ReLU network's logits grow linearly as an input moves away from its decision
boundary, so a point estimate is surest of inputs far from anything it was
trained on. A Gaussian posterior over the weights adds a predictive variance that
grows with that distance too, and the prediction falls back towards uncertainty.

Iris, trained on two species (versicolor and virginica, all four features,
standardised on the training rows), each model at its defaults: scikit-learn's
``MLPClassifier``, a deep ensemble of five of them (``VotingClassifier`` with soft voting), and
skbayes' ``NoisyEKFACClassifier``, ``SLANGClassifier`` and ``NoisyKFACClassifier``, and
noisy K-FAC three more times: with the true Fisher (``fisher='true'``) instead of its default on
small networks, the empirical Fisher; with the linearised (GLM) predictive
(``predictive='glm'``) instead of its default on small networks, the sampled one; and with
both the GLM predictive and a tempered posterior (``kl_weight=0.3``), its earlier default.
The third species, setosa, was never seen: the script prints the AUROC of the
predictive entropy separating the setosa test rows from the trained species' test
rows (1 is perfect, 0.5 chance, 0 means setosa looks *more* familiar than the
trained species), and plots each model's confidence (its largest class
probability) along the line from the virginica mean through the setosa mean::

    model                 AUROC   confidence at setosa mean   time
    MLPClassifier         0.000                       1.000   0.1s
    5-MLP ensemble        0.000                       1.000   0.3s
    noisy EK-FAC          0.025                       0.996   0.3s
    SLANG                 0.880                       0.937   2.6s
    noisy K-FAC           0.120                       0.984   0.2s
    K-FAC, true Fisher    0.123                       0.977   0.2s
    K-FAC, GLM            0.332                       0.956   0.2s
    K-FAC, 0.3 and GLM    0.434                       0.985   0.3s

Beyond the data the point estimates reach certainty; SLANG's confidence levels off below it
and it flags setosa. The Kronecker estimators' small-network defaults (the untempered
posterior with the sampled predictive) were chosen for their fit on data like the training
data, where classes overlap too (docs/defaults_protocol.md, "The small classifiers'
temperature where classes overlap"), and on this split they stay nearly as sure as the point
estimates; noisy K-FAC's linearised predictive, whose variance grows with the network's
Jacobian along the line, flags setosa more often, and the earlier tempered default with it a
little more. The curves' small jumps with the GLM predictive are where a hidden unit switches
on or off.

``bench_uncertainty.py --tasks ood --datasets iris --ood-half upper`` measures the
same on three splits (docs/uncertainty.md, "Against the targets").

Run::

    python examples/plot_far_from_data.py [--out examples/far_from_data.png]
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
from sklearn.datasets import load_iris  # noqa: E402
from sklearn.ensemble import VotingClassifier  # noqa: E402
from sklearn.exceptions import ConvergenceWarning  # noqa: E402
from sklearn.metrics import roc_auc_score  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402
from sklearn.neural_network import MLPClassifier  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402

from skbayes import NoisyEKFACClassifier, NoisyKFACClassifier, SLANGClassifier  # noqa: E402
from skbayes.pipeline import make_pipeline  # noqa: E402


def entropy(p):
    return -np.sum(p * np.log(np.clip(p, 1e-300, None)), axis=1)


def main(argv=None):
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--out", default=os.path.join(here, "far_from_data.png"), help="PNG to write")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)  # small networks: one thread avoids OpenMP overheads

    iris = load_iris()
    X_train, X_test, y_train, y_test = train_test_split(
        iris.data, iris.target, test_size=0.25, stratify=iris.target, random_state=0
    )
    seen = y_train > 0  # versicolor (1) and virginica (2); setosa (0) is held out
    models = {
        "MLPClassifier": MLPClassifier(random_state=0),
        "5-MLP ensemble": VotingClassifier(  # a deep ensemble: five seeds, probabilities averaged
            [(f"mlp{i}", MLPClassifier(random_state=100 + i)) for i in range(5)], voting="soft"
        ),
        "noisy EK-FAC": NoisyEKFACClassifier(random_state=0),
        "SLANG": SLANGClassifier(random_state=0),
        "noisy K-FAC": NoisyKFACClassifier(random_state=0),
        "K-FAC, true Fisher": NoisyKFACClassifier(fisher="true", random_state=0),
        "K-FAC, GLM": NoisyKFACClassifier(predictive="glm", random_state=0),
        "K-FAC, 0.3 and GLM": NoisyKFACClassifier(kl_weight=0.3, predictive="glm", random_state=0),
    }
    # the line from the virginica mean (t = 0) through the setosa mean (t = 1)
    start, end = iris.data[iris.target == 2].mean(0), iris.data[iris.target == 0].mean(0)
    t = np.linspace(-0.5, 2.0, 201)
    line = start + t[:, None] * (end - start)
    print(f"trained on {seen.sum()} rows of versicolor and virginica; test: {len(y_test)} rows, setosa held out")
    print(f"{'model':<20}{'AUROC':>7}{'confidence at setosa mean':>28}{'time':>7}")
    curves = {}
    for name, est in models.items():
        pipe = make_pipeline(StandardScaler(), est)
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            pipe.fit(X_train[seen], y_train[seen])
        elapsed = time.perf_counter() - t0
        auroc = roc_auc_score(y_test == 0, entropy(pipe.predict_proba(X_test)))
        conf = pipe.predict_proba(line).max(1)
        curves[name] = conf
        at_setosa = float(np.interp(1.0, t, conf))
        print(f"{name:<20}{auroc:>7.3f}{at_setosa:>28.3f}{elapsed:>6.1f}s")

    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    for name, conf in curves.items():
        ax.plot(t, conf, lw=2, ls="--" if "MLP" in name else "-", label=name)
    for pos, label in ((0.0, "virginica mean"), (1.0, "setosa mean (never seen)")):
        ax.axvline(pos, color="0.5", lw=0.8, ls=":")
        ax.text(pos, 0.51, label, rotation=90, va="bottom", ha="right", fontsize=8, color="0.3")
    ax.set_xlabel("position along the line from the virginica mean (0) through the setosa mean (1)")
    ax.set_ylabel("confidence (largest class probability)")
    ax.set_ylim(0.48, 1.01)
    ax.set_title("Iris trained on versicolor and virginica: confidence away from the data", fontsize=10)
    ax.legend(fontsize=8, loc="lower left")
    fig.tight_layout()
    fig.savefig(args.out, dpi=120)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
