"""Cost of one SLANG step: time against a plain PyTorch step, scaling in D and L, peak memory.

Headline configuration (the SLANG paper's MNIST network): float32 MLP 784-400-400-10
(D = 478,410 parameters), softmax likelihood, random data (N = 2000 rows of 784
standard-normal features, random labels in 0..9), batch 200, rank L = 8, one MC sample.

Measurements (every configuration runs in its own fresh subprocess):

(a) seconds per SLANG step, timed on the estimator's internal step
    ``clf._step(Xb, yb, N, gen, spec)`` (what ``fit`` calls per minibatch), and
    seconds per step of the public ``partial_fit`` (one epoch = 10 steps, wall
    time / steps taken, so it includes the fit loop's per-step bookkeeping);
    against a plain PyTorch step of the same ``nn.Sequential`` network on the same
    batch (forward + cross-entropy + backward + ``torch.optim.Adam`` step).
    SLANG and plain steps are timed interleaved (blocks of steps, alternating), so
    that load from other processes hits both alike; the table reports medians over
    the blocks and the ratio of the medians. With 1 and 2 torch threads. Also the
    generic ``torch.func.vmap(grad)`` path, forced by wrapping the network in a
    custom ``nn.Module``, and a breakdown of the SLANG step into its parts.
(b) scaling: SLANG step time as D grows 10x and 100x at L = 8 (widening the
    hidden layers), and as L grows (0..32) at the headline network; log-log slopes.
(c) peak memory: ``ru_maxrss`` of a fresh process, before and after the steps
    (so the increase is the step's working memory), against the size of the
    D x M per-example gradient matrix that the dense path never forms.

Run:  .venv/bin/python benchmarks/bench_cost.py            (full, ~6 min)
      .venv/bin/python benchmarks/bench_cost.py --quick    (~1.5 min)
"""

import argparse
import json
import math
import os
import resource
import subprocess
import sys
import time

import numpy as np

N_ROWS, N_IN, N_CLASSES = 2000, 784, 10


def n_params(hidden):
    sizes = [N_IN, *hidden, N_CLASSES]
    return sum(a * b + b for a, b in zip(sizes[:-1], sizes[1:]))


def width_for(D_target):
    """Hidden width h of a 784-h-h-10 MLP with about D_target parameters."""
    b = N_IN + 2 + N_CLASSES  # D(h) = h^2 + (784 + 1 + 1 + 10) h + 10
    return max(1, int(round((-b + math.sqrt(b * b + 4 * (D_target - N_CLASSES))) / 2)))


def rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: KiB


# ---------------------------------------------------------------------------
# Worker (runs in a fresh subprocess)
# ---------------------------------------------------------------------------


def worker(cfg):
    import torch
    from torch import nn

    torch.set_num_threads(int(cfg["threads"]))
    from sklearn.utils import check_random_state

    from skbayes import SLANGClassifier

    hidden = tuple(cfg["hidden"])
    bs = int(cfg["batch"])
    seed = int(cfg.get("seed", 0))
    rng = np.random.RandomState(seed)
    X = rng.standard_normal((N_ROWS, N_IN)).astype(np.float32)
    y = rng.randint(0, N_CLASSES, N_ROWS)
    out = {"cfg": cfg, "D": n_params(hidden), "loadavg": os.getloadavg()[0]}

    def build_sequential():
        torch.manual_seed(seed)
        sizes = [N_IN, *hidden, N_CLASSES]
        layers = []
        for a, b in zip(sizes[:-1], sizes[1:]):
            layers += [nn.Linear(a, b), nn.ReLU()]
        return nn.Sequential(*layers[:-1])

    class Wrapper(nn.Module):
        """Not an nn.Sequential: forces skbayes' generic vmap(grad) curvature path."""

        def __init__(self, n_in, n_out):
            super().__init__()
            self.inner = build_sequential()

        def forward(self, x):
            return self.inner(x)

    def make_slang():
        clf = SLANGClassifier(
            hidden_layer_sizes=hidden,
            module=Wrapper if cfg.get("generic") else None,
            rank=int(cfg["rank"]),
            mc_samples=int(cfg.get("mc", 1)),
            batch_size=bs,
            dtype="float32",
            random_state=seed,
        )
        # Initialise exactly as fit does (posterior, momentum, generator) without running a step.
        clf._check_params()
        clf._prepare_targets(y, first=True, classes=np.arange(N_CLASSES))
        clf._initialize(N_IN, N_ROWS, check_random_state(seed))
        return clf

    kind = cfg["kind"]
    steps, blocks, warm = int(cfg["steps"]), int(cfg["blocks"]), int(cfg.get("warmup", 2))
    Xt = torch.as_tensor(X[:bs])
    yt = torch.as_tensor(y[:bs])

    slang_step = plain_step = None
    if kind in ("slang", "pair"):
        clf = make_slang()
        gen = torch.Generator().manual_seed(seed)
        spec = clf._spec()
        out["path"] = "dense" if spec is not None else "vmap"
        Xb = clf._tensor(X[:bs])
        yb = clf._target_tensor(clf._encode_targets(y[:bs]))

        def slang_step():
            with torch.no_grad():
                clf._step(Xb, yb, N_ROWS, gen, spec)

    if kind in ("plain", "pair"):
        net = build_sequential()
        opt = torch.optim.Adam(net.parameters(), lr=1e-3)
        lossf = nn.CrossEntropyLoss()

        def plain_step():
            opt.zero_grad(set_to_none=True)
            loss = lossf(net(Xt), yt)
            loss.backward()
            opt.step()

    out["rss_before_mb"] = rss_mb()
    for _ in range(warm):
        for f in (slang_step, plain_step):
            if f is not None:
                f()
    times = {"slang": [], "plain": []}
    for _ in range(blocks):
        for name, f in (("slang", slang_step), ("plain", plain_step)):
            if f is None:
                continue
            t0 = time.perf_counter()
            for _ in range(steps):
                f()
            times[name].append((time.perf_counter() - t0) / steps)
    out["rss_peak_mb"] = rss_mb()
    for name, ts in times.items():
        if ts:
            out[name] = float(np.median(ts))
            out[name + "_min"] = float(np.min(ts))
            out[name + "_all"] = ts
    if kind in ("slang", "pair"):
        out["finite"] = bool(clf._finite_state())

    if cfg.get("partial_fit"):
        # The public path: partial_fit epochs of N_ROWS / bs steps each.
        pf = SLANGClassifier(hidden_layer_sizes=hidden, rank=int(cfg["rank"]), mc_samples=int(cfg.get("mc", 1)),
                             batch_size=bs, dtype="float32", random_state=seed)
        pf.partial_fit(X, y, classes=np.arange(N_CLASSES))  # warm-up epoch (initialises)
        per = []
        for _ in range(int(cfg["partial_fit"])):
            t_before, t0 = pf.t_, time.perf_counter()
            pf.partial_fit(X, y)
            per.append((time.perf_counter() - t0) / (pf.t_ - t_before))
        out["partial_fit"] = float(np.median(per))
        out["partial_fit_all"] = per

    if cfg.get("breakdown"):
        out["breakdown"] = breakdown(clf, Xb, yb, gen, spec, reps=int(cfg["breakdown"]))
    return out


def breakdown(clf, Xb, yb, gen, spec, reps):
    """Median seconds of each part of one SLANG step (library functions, state untouched)."""
    import torch

    from skbayes import curvature as C
    from skbayes import linalg
    from skbayes.posteriors import slang_precision_update

    post = clf.posterior_
    L = int(clf.rank)
    S = int(clf.mc_samples)
    M = Xb.shape[0]
    scale = N_ROWS / (M * S)
    parts = {}

    def tm(name, f):
        ts = []
        for _ in range(reps):
            t0 = time.perf_counter()
            r = f()
            ts.append(time.perf_counter() - t0)
        parts[name] = float(np.median(ts))
        return r

    with torch.no_grad():
        theta = tm("sample theta ~ q (lowrank_sample)", lambda: post.sample_t(S, generator=gen))
        curv, _, _ = tm("forward + backward (dense_curvature)",
                        lambda: C.dense_curvature(spec, theta, Xb, yb, clf._likelihood))
        U, d = tm("precision update (slang_precision_update), total",
                  lambda: slang_precision_update(post.U_t, post.d_t, curv, scale, 0.05, 1.0, L))
        tm("  of which sq_sum: diag(G^T G)", curv.sq_sum)
        if L > 0:
            GU = tm("  of which project: G U", lambda: curv.project(post.U_t))
            tm("  of which gram: G G^T", curv.gram)
            m = L + curv.n
            K = torch.zeros(m, m, dtype=GU.dtype)
            K[:L, :L] = post.U_t.T @ post.U_t
            K[L:, L:] = curv.gram()
            K[L:, :L] = GU
            K[:L, L:] = GU.T
            _, V = tm("  of which eigh of the (L+M)x(L+M) Gram", lambda: linalg.top_eig_from_gram(K, L))
            tm("  of which combine: G^T V", lambda: curv.combine(V[L:]))
        g = tm("gradient sum (grad_sum)", curv.grad_sum)
        tm("mean step (woodbury_solve)", lambda: linalg.woodbury_solve(U, d, g + post.mean_t))
        tm("fit loop: _finite_state() per step", clf._finite_state)
        tm("fit loop: _snapshot() per epoch", clf._snapshot)
    return parts


def run_worker(cfg):
    env = dict(os.environ)
    env["OMP_NUM_THREADS"] = str(cfg["threads"])
    env["MKL_NUM_THREADS"] = str(cfg["threads"])
    p = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", json.dumps(cfg)],
                       capture_output=True, text=True, env=env)
    if p.returncode != 0:
        return {"cfg": cfg, "error": (p.stderr.strip().splitlines() or ["?"])[-1]}
    return json.loads(p.stdout.strip().splitlines()[-1])


# ---------------------------------------------------------------------------
# Main: configurations and tables
# ---------------------------------------------------------------------------


def slope(x, y):
    lx, ly = np.log(np.asarray(x, float)), np.log(np.asarray(y, float))
    return float(np.polyfit(lx, ly, 1)[0])


def ms(v):
    return f"{1e3 * v:.1f}" if v is not None and np.isfinite(v) else "-"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="short run: fewer blocks, no 100x-D point")
    p.add_argument("--worker", type=str, default=None, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.worker is not None:
        print(json.dumps(worker(json.loads(a.worker))))
        return

    import torch

    q = a.quick
    blocks = 3 if q else 7
    H = (400, 400)
    D0 = n_params(H)
    t_start = time.perf_counter()
    print("# Cost of one SLANG step (CPU)\n")
    print(f"torch {torch.__version__}, {os.cpu_count()} logical CPUs, float32, batch M = 200, "
          f"N = {N_ROWS} random rows, 10 classes. Every configuration runs in a fresh subprocess; "
          f"times are medians over {blocks} interleaved blocks of steps. "
          f"Load average at start: {os.getloadavg()[0]:.2f} (other processes on the machine inflate "
          "times, especially with 2 threads).\n")

    # (a) headline -------------------------------------------------------------
    print(f"## (a) Headline: MLP 784-400-400-10 (D = {D0:,}), L = 8, S = 1, M = 200\n")
    print("| threads | path | SLANG step (ms) | plain Adam step (ms) | ratio | SLANG min (ms) | plain min (ms) | ratio of mins | partial_fit per step (ms) | partial_fit ratio |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    head = {}
    for th in (1, 2):
        r = run_worker(dict(kind="pair", hidden=H, rank=8, batch=200, threads=th, steps=4, blocks=blocks,
                            partial_fit=2 if q else 4, breakdown=0 if q or th == 2 else 7))
        head[th] = r
        if "error" in r:
            print(f"| {th} | dense | error: {r['error']} |")
            continue
        pf = r.get("partial_fit")
        print(f"| {th} | dense (nn.Sequential) | {ms(r['slang'])} | {ms(r['plain'])} | {r['slang'] / r['plain']:.1f}x | "
              f"{ms(r['slang_min'])} | {ms(r['plain_min'])} | {r['slang_min'] / r['plain_min']:.1f}x | {ms(pf)} | "
              f"{pf / r['plain']:.1f}x |")
    vm_bs = 200
    for th in (1, 2):
        r = run_worker(dict(kind="pair", hidden=H, rank=8, batch=vm_bs, threads=th, steps=1, blocks=2 if q else 3,
                            generic=True, warmup=1))
        head[f"vmap{th}"] = r
        if "error" in r:
            print(f"| {th} | vmap | error: {r['error']} |")
            continue
        print(f"| {th} | generic vmap(grad) (custom Module) | {ms(r['slang'])} | {ms(r['plain'])} | "
              f"{r['slang'] / r['plain']:.1f}x | {ms(r['slang_min'])} | {ms(r['plain_min'])} | "
              f"{r['slang_min'] / r['plain_min']:.1f}x | - | - |")
    print("\nratio = SLANG step / plain step (target <= 10x). 'partial_fit per step' is the public path: wall time "
          "of a partial_fit epoch (10 steps) / steps, including the fit loop's per-step checks.\n")

    bd = head[1].get("breakdown")
    if bd:
        tot = head[1]["slang"]
        print("### Where the time goes (1 thread, headline network; medians of single calls)\n")
        print("| part of the step | ms | share of the step |")
        print("|---|---|---|")
        for k, v in bd.items():
            share = f"{100 * v / tot:.0f}%" if not k.startswith("fit loop") else "(outside _step)"
            print(f"| {k} | {ms(v)} | {share} |")
        print(f"| **whole _step** | **{ms(tot)}** | 100% |")
        print(f"| plain Adam step, for scale | {ms(head[1]['plain'])} | |\n")

    # (b) scaling in D ---------------------------------------------------------
    factors = [0.1, 1, 10] + ([] if q else [100])
    print("## (b) Scaling\n")
    print("### In D at L = 8, M = 200, 1 thread (hidden widths h of a 784-h-h-10 MLP)\n")
    print("| h | D | D / D0 | SLANG step (ms) | plain step (ms) | ratio | SLANG step / D (ns) |")
    print("|---|---|---|---|---|---|---|")
    Ds, ts_s, ts_p = [], [], []
    for f in factors:
        h = 400 if f == 1 else width_for(f * D0)
        if f == 1 and head[1].get("slang"):
            r = head[1]
        else:
            big = f >= 100
            r = run_worker(dict(kind="pair", hidden=(h, h), rank=8, batch=200, threads=1,
                                steps=1 if big else (2 if f >= 10 else 4), blocks=2 if big else (3 if q else 5),
                                warmup=1 if big else 2))
        if "error" in r:
            print(f"| {h} | - | {f:g} | error: {r['error']} |")
            continue
        Ds.append(r["D"]); ts_s.append(r["slang"]); ts_p.append(r["plain"])
        print(f"| {h} | {r['D']:,} | {r['D'] / D0:.2f} | {ms(r['slang'])} | {ms(r['plain'])} | "
              f"{r['slang'] / r['plain']:.1f}x | {1e9 * r['slang'] / r['D']:.0f} |")
    if len(Ds) >= 2:
        big = [i for i, D in enumerate(Ds) if D >= D0]
        print(f"\nlog-log slope of SLANG step time vs D: {slope(Ds, ts_s):.2f} over all points"
              + (f", {slope([Ds[i] for i in big], [ts_s[i] for i in big]):.2f} for D >= D0" if len(big) >= 2 else "")
              + f" (plain step: {slope(Ds, ts_p):.2f}); 1.0 = linear in D.\n")

    print("### In L at the headline network (D = 478,410), M = 200, 1 thread\n")
    print("| L | SLANG step (ms) | plain step (ms) | ratio |")
    print("|---|---|---|---|")
    Ls = [0, 1, 2, 4, 8, 16, 32]
    Lt = {}
    for L in Ls:
        if L == 8 and head[1].get("slang"):
            r = head[1]
        else:
            r = run_worker(dict(kind="pair", hidden=H, rank=L, batch=200, threads=1, steps=3,
                                blocks=3 if q else 5))
        if "error" in r:
            print(f"| {L} | error: {r['error']} |")
            continue
        Lt[L] = r["slang"]
        print(f"| {L} | {ms(r['slang'])} | {ms(r['plain'])} | {r['slang'] / r['plain']:.1f}x |")
    pos = [L for L in Lt if L >= 4]
    if len(pos) >= 2:
        print(f"\nlog-log slope of step time vs L for L >= 4: {slope(pos, [Lt[L] for L in pos]):.2f}; "
              f"increment per unit of L for L >= 4: "
              f"{1e3 * np.polyfit(pos, [Lt[L] for L in pos], 1)[0]:.2f} ms (theory: O(D L M + D L^2) work on top of "
              "an L-independent forward/backward, so the time is affine in L while M >> L).\n")

    # (c) memory ---------------------------------------------------------------
    print("## (c) Peak memory (ru_maxrss of a fresh process, 1 thread, M = 200)\n")
    print("| configuration | D | RSS before steps (MB) | peak RSS (MB) | increase (MB) | D x M per-example grads, float32 (MB) | posterior state D x (L+3) (MB) |")
    print("|---|---|---|---|---|---|---|")
    mem_cfgs = [
        ("plain Adam step", dict(kind="plain", hidden=H, rank=8)),
        ("SLANG dense path, L = 8", dict(kind="slang", hidden=H, rank=8)),
        ("SLANG dense path, L = 32", dict(kind="slang", hidden=H, rank=32)),
        ("SLANG vmap path, L = 8", dict(kind="slang", hidden=H, rank=8, generic=True)),
        (f"SLANG dense path, L = 8, h = {width_for(10 * D0)}", dict(kind="slang", hidden=(width_for(10 * D0),) * 2, rank=8)),
        (f"plain Adam step, h = {width_for(10 * D0)}", dict(kind="plain", hidden=(width_for(10 * D0),) * 2, rank=8)),
    ]
    for name, c in mem_cfgs:
        c = dict(c, batch=200, threads=1, steps=2, blocks=1, warmup=1)
        r = run_worker(c)
        if "error" in r:
            print(f"| {name} | error: {r['error']} |")
            continue
        D = r["D"]
        grads = D * 200 * 4 / 2**20
        state = D * (c["rank"] + 3) * 4 / 2**20 if c["kind"] == "slang" else D * 4 * 4 / 2**20
        print(f"| {name} | {D:,} | {r['rss_before_mb']:.0f} | {r['rss_peak_mb']:.0f} | "
              f"{r['rss_peak_mb'] - r['rss_before_mb']:.0f} | {grads:.0f} | {state:.0f} |")
    print("\n'RSS before steps' already holds torch, the data and the model state (SLANG: mean, U, d, momentum; "
          "plain: the parameters; the last column for plain is parameters + gradients + Adam's two moments). "
          "The increase is the working memory of the steps.\n")
    print(f"Total benchmark wall time: {time.perf_counter() - t_start:.0f} s.")


if __name__ == "__main__":
    main()
