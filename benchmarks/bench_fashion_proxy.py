"""A CPU-sized proxy of the Fashion-MNIST benchmark: 784-400-400-10, batch 200, float32.

The network and batch of ``bench_fashion.py`` on a random subset of the training
rows (``--n-train``, default 10,000) for a few epochs (``--epochs``, default 2),
tested on the first ``--n-test`` test rows (default 5,000). Every skbayes
estimator keeps its defaults except the network, batch, epochs (``tol=0``) and
``dtype='float32'``; next to them a plain torch network of the same shape trained
by Adam (learning rate 1e-3, PyTorch's initialisation) on the same rows and epochs.
Pixels are scaled to [0, 1] and standardised with the training rows' mean and
std per pixel.

Reported per method: test error, test log-loss of ``predict_proba``, fit time
(wall seconds, all epochs). The uniform predictor's log-loss is ``log 10 = 2.303``.

Data: Debian's ``dataset-fashion-mnist`` (``apt-get install dataset-fashion-mnist``),
``--data DIR`` points elsewhere.

Run:  python benchmarks/bench_fashion_proxy.py
Options: --methods adam,vogn,slang,bbb,kfac  --epochs 2  --n-train 10000  --n-test 5000  --threads 1
         (method vogn_b05: VOGN with beta=0.05, the step its default 'auto' takes on small networks)
"""

import argparse
import sys
import time
import warnings

import numpy as np
from bench_fashion import DATA_DIR, load

METHODS = ("adam", "vogn", "slang", "bbb", "kfac")
LABEL = {"adam": "torch Adam (plain)", "vogn": "VOGN", "slang": "SLANG", "bbb": "BBB", "kfac": "noisy K-FAC"}
#: Extra rows, not run by default: an estimator with one parameter changed.
VARIANTS = {"vogn_b05": ("vogn", {"beta": 0.05})}
LABEL["vogn_b05"] = "VOGN, beta=0.05"


def fit_adam(Xtr, ytr, Xte, epochs, seed):
    """A plain 784-400-400-10 ReLU network, Adam (lr 1e-3), batch 200; test probabilities."""
    import torch

    torch.manual_seed(seed)
    net = torch.nn.Sequential(
        torch.nn.Linear(784, 400), torch.nn.ReLU(), torch.nn.Linear(400, 400), torch.nn.ReLU(), torch.nn.Linear(400, 10)
    )
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    X, y = torch.as_tensor(Xtr), torch.as_tensor(ytr)
    gen = torch.Generator().manual_seed(seed)
    for _ in range(epochs):
        perm = torch.randperm(len(y), generator=gen)
        for i in range(0, len(y), 200):
            b = perm[i : i + 200]
            opt.zero_grad()
            torch.nn.functional.cross_entropy(net(X[b]), y[b]).backward()
            opt.step()
    with torch.no_grad():
        return torch.softmax(net(torch.as_tensor(Xte)).double(), 1).numpy()


def make(method, epochs, seed):
    import skbayes

    method, extra = VARIANTS.get(method, (method, {}))
    cls = {
        "vogn": skbayes.VOGNClassifier,
        "slang": skbayes.SLANGClassifier,
        "bbb": skbayes.BBBClassifier,
        "kfac": skbayes.NoisyKFACClassifier,
    }[method]
    return cls(
        hidden_layer_sizes=(400, 400),
        batch_size=200,
        max_iter=epochs,
        tol=0.0,
        n_iter_no_change=10**9,
        dtype="float32",
        random_state=seed,
        **extra,
    )


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--n-train", type=int, default=10_000)
    ap.add_argument("--n-test", type=int, default=5_000)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data", default=DATA_DIR)
    args = ap.parse_args(argv)
    import torch
    from sklearn.metrics import log_loss

    import skbayes

    torch.set_num_threads(args.threads)
    Xtr, ytr, Xte, yte = load(args.data)
    idx = np.random.RandomState(args.seed).permutation(len(ytr))[: args.n_train]
    Xtr, ytr = Xtr[idx], ytr[idx]
    mu, sd = Xtr.mean(0), Xtr.std(0)
    sd[sd == 0] = 1.0
    Xtr, Xte = (Xtr - mu) / sd, (Xte[: args.n_test] - mu) / sd
    yte = yte[: args.n_test]
    print("# Fashion-MNIST proxy, 784-400-400-10, batch 200, float32 (bench_fashion_proxy.py)\n")
    print(f"command: python {' '.join(sys.argv) if argv is None else argv}")
    print(
        f"skbayes {skbayes.__version__}, torch {torch.__version__}, {args.threads} torch threads, "
        f"{len(ytr)} training rows, {len(yte)} test rows, {args.epochs} epochs, seed {args.seed}; "
        f"uniform predictor log-loss {np.log(10):.3f}\n"
    )
    print("| method | test error (%) | test log-loss | fit (s) |")
    print("|---|---:|---:|---:|")
    for m in [s.strip() for s in args.methods.split(",") if s.strip()]:
        t0 = time.perf_counter()
        if m == "adam":
            p = fit_adam(Xtr, ytr, Xte, args.epochs, args.seed)
            t_fit = time.perf_counter() - t0
        else:
            est = make(m, args.epochs, args.seed)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                est.fit(Xtr, ytr)
            t_fit = time.perf_counter() - t0
            p = est.predict_proba(Xte)
        err = float(np.mean(p.argmax(1) != yte))
        ll = float(log_loss(yte, np.clip(p, 1e-15, 1), labels=np.arange(10)))
        print(f"| {LABEL[m]} | {100 * err:.2f} | {ll:.4f} | {t_fit:.1f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
