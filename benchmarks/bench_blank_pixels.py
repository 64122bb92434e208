"""How sure a posterior is of the weights on pixels that are blank in training, by image scaling.

The out-of-distribution task of ``bench_uncertainty.py`` on Fashion-MNIST (train on classes
0-4, 784-100-10, 5 epochs of batch 200, float32, every estimator at its defaults; all 30,000
training rows of those classes), with the images scaled as that script's
``--image-scaling`` does:

- ``global``: one mean and one standard deviation for all pixels (the benchmark's default): a
  blank pixel becomes the same negative value in every image;
- ``scale``: divided by the one standard deviation, not centred: a blank pixel stays 0;
- ``centred``: each pixel's own mean subtracted, one scale for all

(``skbayes.preprocessing.ImageScaler`` with ``centering='global'``, None and ``'pixel'``).

For each fit the script prints the posterior standard deviation of the first layer's weights
(``posterior_.variance()``, in the order of ``module_.parameters()``), averaged over the
weights of the pixels that are blank in training (standard deviation below 0.01 on the
[0, 1] scale) and over the others, and the AUROC of the predictive entropy separating the
held-out classes. A diagonal posterior takes each weight's precision from that weight's own
gradients: a pixel held at one value in every image gives its weights the same curvature as
the bias, so the posterior is as sure of them as of any other, although the data fix only
their sum with the bias. Kept at 0, the pixel gives them no curvature and they keep the
prior's width, which flags images that put ink there.

Run: ``python benchmarks/bench_blank_pixels.py [--threads 2] [--methods vogn,bbb,kfac]``
(about two minutes on two cores; needs the Debian package ``dataset-fashion-mnist``). Only
public API is used.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
import torch
from bench_uncertainty import FASHION_DIR, SKB_ALL, entropy, load_images, make_data, make_model
from sklearn.metrics import roc_auc_score

SCALINGS = ("global", "scale", "centred")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--data", default=FASHION_DIR)
    ap.add_argument("--methods", default="vogn,bbb,kfac", help=f"from {list(SKB_ALL)}")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore")
    methods = args.methods.split(",")
    Xtr, ytr, _, _, _ = load_images("fashion", args.seed, args.data, 10000)
    blank = Xtr[ytr < 5].std(0) < 0.01
    print(f"# torch {torch.__version__}, {args.threads} threads; Fashion-MNIST classes 0-4, seed {args.seed}")
    print(f"# {int(blank.sum())} of 784 pixels blank in training (std < 0.01 on [0, 1])\n")
    print("| method | scaling | weight std, blank pixels | weight std, other pixels | ratio | OOD AUROC | fit s |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for m in methods:
        for scaling in SCALINGS:
            job = dict(
                dataset="fashion",
                fit="ood",
                seed=args.seed,
                data_dir=args.data,
                fashion_test_rows=10000,
                fashion_rows=60000,
                image_scaling=scaling,
                method=m,
                hidden=(100,),
                epochs=None,
                overrides={},
                optional={},
            )
            d = make_data(job)
            model = make_model(job, "clf", d["Xtr"].shape[1])
            t0 = time.perf_counter()
            model.fit(d["Xtr"], d["ytr"])
            fit_s = time.perf_counter() - t0
            W = next(model.module_.parameters())  # the first layer's weights, (100, 784)
            var = np.asarray(model.posterior_.variance())[: W.numel()].reshape(tuple(W.shape))
            sd = np.sqrt(var)
            auroc = roc_auc_score(d["is_ood"], entropy(model.predict_proba(d["Xte"])))
            b, o = sd[:, blank].mean(), sd[:, ~blank].mean()
            print(f"| {m} | {scaling} | {b:.3f} | {o:.3f} | {b / o:.2f} | {auroc:.3f} | {fit_s:.1f} |")


if __name__ == "__main__":
    main()
