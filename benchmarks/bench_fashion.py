"""Fashion-MNIST at the estimators' defaults: the SLANG paper's 784-400-400-10 network.

Every estimator keeps its defaults except the protocol's network
(``hidden_layer_sizes=(400, 400)``), batch size 200, ``dtype='float32'`` and a fixed
number of epochs (``max_iter``, ``tol=None``), against scikit-learn's ``MLPClassifier``
with the same network, batch and epochs (``early_stopping=False``). Pixels are
scaled to [0, 1] and standardised with one mean and one standard deviation of the
training set for all pixels, as the method guide advises; ``--image-scaling pixel``
standardises each pixel on its own instead (constant pixels left at 0), as
``StandardScaler`` in a Pipeline would; ``--image-scaling scale`` divides by the one
standard deviation without subtracting the mean (a blank pixel stays 0), and
``--image-scaling centred`` subtracts each pixel's own mean and divides by one scale (the root
mean square of the centred pixels): ``skbayes.preprocessing.ImageScaler`` with
``centering='global'``, None and ``'pixel'``.

Reported per method: test error, test log-loss of ``predict_proba`` (each
estimator's default predictive), wall seconds of ``fit`` per epoch and of ``predict_proba`` on the
test rows, and for ``prior_precision='auto'`` the learned prior precision of every
parameter group (``prior_precision_``).

Data: Debian's ``dataset-fashion-mnist`` (``apt-get install dataset-fashion-mnist``;
``dpkg -L dataset-fashion-mnist`` lists the four idx files), a benchmark
dependency only; ``--data DIR`` points elsewhere.

Run:  .venv/bin/python benchmarks/bench_fashion.py                 (60k rows, 5 epochs, ~25 min on 2 cores)
      .venv/bin/python benchmarks/bench_fashion.py --quick         (10k rows, 3 epochs)
Options: --methods mlp,slang,vogn,vadam,bbb,mcdropout,kfac,ekfac  --epochs 5  --n-train 60000
         --threads 2  --set slang.rank=4  --image-scaling pixel
         --device cuda   (the skbayes estimators fit and predict on the GPU, MLPClassifier on the CPU)
"""

import argparse
import gzip
import os
import struct
import sys
import time
import warnings

import numpy as np
from _harness import IMAGE_CENTERING, apply_overrides, library_version, parse_overrides

DATA_DIR = "/usr/share/datasets/fashion-mnist"
METHODS = ("mlp", "slang", "vogn", "vadam", "bbb", "mcdropout", "kfac", "ekfac")
LABEL = {
    "mlp": "MLPClassifier",
    "slang": "SLANG L=8",
    "vogn": "VOGN",
    "vadam": "Vadam",
    "bbb": "BBB",
    "mcdropout": "MC dropout",
    "kfac": "noisy K-FAC",
    "ekfac": "noisy EK-FAC",
}


def read_idx(path):
    """An idx file (gzip or plain) as a numpy array."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as fh:
        zero, dtype_code, ndim = struct.unpack(">HBB", fh.read(4))
        shape = struct.unpack(">" + "I" * ndim, fh.read(4 * ndim))
        return np.frombuffer(fh.read(), dtype=np.uint8).reshape(shape)


def load(data_dir):
    def find(stem):
        for ext in (".gz", ""):
            p = os.path.join(data_dir, stem + ext)
            if os.path.exists(p):
                return p
        raise FileNotFoundError(
            f"{stem} not found in {data_dir}: apt-get install dataset-fashion-mnist, or pass --data DIR"
        )

    Xtr = read_idx(find("train-images-idx3-ubyte")).reshape(-1, 784).astype(np.float32) / 255.0
    ytr = read_idx(find("train-labels-idx1-ubyte")).astype(np.int64)
    Xte = read_idx(find("t10k-images-idx3-ubyte")).reshape(-1, 784).astype(np.float32) / 255.0
    yte = read_idx(find("t10k-labels-idx1-ubyte")).astype(np.int64)
    return Xtr, ytr, Xte, yte


def make(method, epochs, seed, overrides, optional, device="cpu"):
    common = dict(hidden_layer_sizes=(400, 400), batch_size=200, max_iter=epochs, random_state=seed)
    if method == "mlp":
        from sklearn.neural_network import MLPClassifier

        return MLPClassifier(**common, tol=0.0, n_iter_no_change=10**9)
    import skbayes

    cls = {
        "slang": skbayes.SLANGClassifier,
        "vogn": skbayes.VOGNClassifier,
        "vadam": skbayes.VadamClassifier,
        "bbb": skbayes.BBBClassifier,
        "mcdropout": skbayes.MCDropoutClassifier,
        "kfac": skbayes.NoisyKFACClassifier,
        "ekfac": skbayes.NoisyEKFACClassifier,
    }[method]
    est = cls(**common, tol=None, dtype="float32", device=device)  # a budget of `epochs` epochs
    return apply_overrides(est, overrides.get(method), optional.get(method))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="10k training rows, 3 epochs")
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--epochs", type=int, default=None)
    ap.add_argument("--n-train", type=int, default=None)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data", default=DATA_DIR)
    ap.add_argument("--device", default="cpu", help="the skbayes estimators' device, e.g. cuda")
    ap.add_argument("--set", action="append", default=[], metavar="METHOD.PARAM=VALUE")
    ap.add_argument(
        "--image-scaling",
        choices=("pixel", "global", "scale", "centred"),
        default="global",
        help="standardise all pixels with one mean and std (default) or each pixel on its own, divide by one std, "
        "or centre each pixel and divide by one scale",
    )
    args = ap.parse_args(argv)
    import torch
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.metrics import log_loss

    torch.set_num_threads(args.threads)
    epochs = args.epochs or (3 if args.quick else 5)
    n_train = args.n_train or (10_000 if args.quick else 60_000)
    try:  # the skbayes methods only: MLPClassifier's parameters are not overridable
        overrides, optional = parse_overrides(args.set, [m for m in METHODS if m != "mlp"])
    except ValueError as exc:
        ap.error(str(exc))
    Xtr, ytr, Xte, yte = load(args.data)
    rng = np.random.RandomState(args.seed)
    idx = rng.permutation(len(ytr))[:n_train]
    Xtr, ytr = Xtr[idx], ytr[idx]
    if args.image_scaling == "pixel":
        mu, sd = Xtr.mean(0), Xtr.std(0)
        sd[sd == 0] = 1.0
        Xtr, Xte = (Xtr - mu) / sd, (Xte - mu) / sd
    else:  # one scale for all pixels, centred as a whole, per pixel or not
        from skbayes.preprocessing import ImageScaler

        sc = ImageScaler(centering=IMAGE_CENTERING[args.image_scaling]).fit(Xtr)
        Xtr, Xte = sc.transform(Xtr), sc.transform(Xte)
    device_name = args.device
    if args.device.startswith("cuda") and torch.cuda.is_available():
        device_name = f"{args.device} ({torch.cuda.get_device_name()})"
    print("# Fashion-MNIST, 784-400-400-10, batch 200, float32 (bench_fashion.py)\n")
    print(f"command: python {' '.join(sys.argv) if argv is None else argv}")
    print(
        f"{library_version()}, torch {torch.__version__}, {args.threads} torch threads, device {device_name}, "
        f"{n_train} training rows, {len(yte)} test rows, {epochs} epochs, seed {args.seed}, "
        + {
            "pixel": "per-pixel standardisation",
            "global": "one-scale standardisation",
            "scale": "one scale, not centred",
            "centred": "each pixel centred, one scale",
        }[args.image_scaling]
    )
    if args.set:
        print(f"overrides: {args.set}")
    print()
    rows = []
    for m in [s.strip() for s in args.methods.split(",") if s.strip()]:
        est = make(m, epochs, args.seed, overrides, optional, args.device)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            t0 = time.perf_counter()
            est.fit(Xtr, ytr)
            t_fit = time.perf_counter() - t0
        t0 = time.perf_counter()
        p = est.predict_proba(Xte)
        t_pred = time.perf_counter() - t0
        err = float(np.mean(p.argmax(1) != yte))
        ll = float(log_loss(yte, np.clip(p, 1e-15, 1), labels=np.arange(10)))
        n_ep = int(getattr(est, "n_iter_", epochs))
        prior = getattr(est, "prior_precision_", None)
        prior_s = ", ".join(f"{k}: {v:.3g}" for k, v in prior.items()) if prior else "-"
        diverged = bool(getattr(est, "diverged_", False))
        rows.append((m, err, ll, t_fit / max(n_ep, 1), t_pred, n_ep, prior_s, diverged))
        print(
            f"  {LABEL[m]:14s} error {100 * err:5.2f}%  log-loss {ll:.4f}  {t_fit / max(n_ep, 1):6.1f} s/epoch "
            f"({n_ep} epochs)  predict_proba {t_pred:5.1f} s  prior {prior_s}" + ("  DIVERGED" if diverged else ""),
            flush=True,
        )
    print("\n| method | test error (%) | test log-loss | s / epoch | predict_proba (s) | learned prior precisions |")
    print("|---|---:|---:|---:|---:|---|")
    for m, err, ll, spe, tp, _, prior_s, diverged in rows:
        flag = " (diverged)" if diverged else ""
        print(f"| {LABEL[m]}{flag} | {100 * err:.2f} | {ll:.4f} | {spe:.1f} | {tp:.1f} | {prior_s} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
