"""Cost of one SLANG step: time against a plain PyTorch step, scaling in D and L, peak memory.

Headline configuration (the SLANG paper's MNIST network): float32 MLP 784-400-400-10
(D = 478,410 parameters), softmax likelihood, random data (N = 2000 rows of 784
standard-normal features, random labels in 0..9), batch 200, rank L = 8, one MC sample.

Measurements (every configuration runs in its own fresh subprocess):

(a) seconds per SLANG step, timed on the engine's ``SLANGFamily.step`` (what
    ``fit`` calls per minibatch, docs/architecture.md), and
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
    hidden layers: D = 47.7k, 478k, 4.78M; --huge adds 47.8M), and as L grows
    (0..32) at the headline network; log-log slopes.
(c) peak memory: ``ru_maxrss`` of a fresh process before the model is built and
    after a few steps (the increase is the model state plus the steps' working
    memory), against the size of the D x M per-example gradient matrix that the
    dense path never forms.

Run:  .venv/bin/python benchmarks/bench_cost.py            (full, ~6 min on an idle 2-core machine)
      .venv/bin/python benchmarks/bench_cost.py --quick    (~2.5 min)
      .venv/bin/python benchmarks/bench_cost.py --huge     (adds D = 47.8M; needs ~10 GB RAM, +3 min or more)
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
from _harness import library_version  # benchmarks/ is on sys.path when run as a script

N_ROWS, N_IN, N_CLASSES = 2000, 784, 10
# glibc malloc settings that keep freed memory for reuse instead of returning large
# blocks (> 32 MB, or above the dynamic mmap threshold) to the kernel, so that a fresh
# D x L temporary does not page-fault on every step.
MALLOC_TUNED = {"MALLOC_MMAP_THRESHOLD_": str(2**32), "MALLOC_TRIM_THRESHOLD_": str(2**36)}


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
            init="default",
            random_state=seed,
        )
        # Initialise through the public API: one partial_fit step on one batch.
        clf.partial_fit(X[:bs], y[:bs], classes=np.arange(N_CLASSES))
        return clf

    kind = cfg["kind"]
    steps, blocks, warm = int(cfg["steps"]), int(cfg["blocks"]), int(cfg.get("warmup", 2))
    Xt = torch.as_tensor(X[:bs])
    yt = torch.as_tensor(y[:bs])

    # Memory baseline: torch imported and the data built, no model yet.
    torch.ones(8, 8) @ torch.ones(8, 8)
    out["rss_before_mb"] = rss_mb()

    slang_step = plain_step = None
    if kind in ("slang", "pair"):
        clf = make_slang()
        # The step fit() runs per minibatch, called through the family interface (the
        # engine's internal contract, docs/architecture.md) on a copy of the fitted
        # posterior: forward pass, curvature, precision and mean updates, no loop.
        family, post, state, ctx, Xb, yb = slang_engine(clf, X[:bs], y[:bs], seed)
        with torch.no_grad():
            family.step(post, state, Xb, yb, ctx)

        def slang_step():
            with torch.no_grad():
                family.step(post, state, Xb, yb, ctx)

        out["timed"] = "SLANGFamily.step"
        out["path"] = "generic vmap" if cfg.get("generic") else "dense"

    if kind in ("plain", "pair"):
        net = build_sequential()
        opt = torch.optim.Adam(net.parameters(), lr=1e-3)
        lossf = nn.CrossEntropyLoss()

        def plain_step():
            opt.zero_grad(set_to_none=True)
            loss = lossf(net(Xt), yt)
            loss.backward()
            opt.step()

    for _ in range(warm):
        for f in (slang_step, plain_step):
            if f is not None:
                f()
    times = {"slang": [], "plain": []}
    faults = {"slang": 0, "plain": 0}
    for _ in range(blocks):
        for name, f in (("slang", slang_step), ("plain", plain_step)):
            if f is None:
                continue
            f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            t0 = time.perf_counter()
            for _ in range(steps):
                f()
            times[name].append((time.perf_counter() - t0) / steps)
            faults[name] += resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0
    out["rss_peak_mb"] = rss_mb()
    for name, ts in times.items():
        if ts:
            out[name] = float(np.median(ts))
            out[name + "_min"] = float(np.min(ts))
            out[name + "_all"] = ts
            out[name + "_faults_mb"] = faults[name] / (blocks * steps) * resource.getpagesize() / 2**20
    if kind in ("slang", "pair"):
        out["finite"] = bool(post.is_finite())

    if cfg.get("partial_fit"):
        # The public path: partial_fit epochs of N_ROWS / bs steps each.
        pf = clf
        pf.partial_fit(X, y)  # warm-up epoch
        per = []
        for _ in range(int(cfg["partial_fit"])):
            t_before, t0 = pf.t_, time.perf_counter()
            pf.partial_fit(X, y)
            per.append((time.perf_counter() - t0) / (pf.t_ - t_before))
        out["partial_fit"] = float(np.median(per))
        out["partial_fit_all"] = per

    if cfg.get("breakdown"):
        out["breakdown"] = breakdown(family, post, state, ctx, Xb, yb, reps=int(cfg["breakdown"]))
    return out


def slang_engine(clf, Xb, yb, seed):
    """What one SLANG step reads, rebuilt from the fitted estimator's public attributes.

    Returns ``(family, posterior copy, family state, StepContext, Xb, yb)`` as tensors.
    """
    import copy

    import torch

    from skbayes._families.base import StepContext
    from skbayes._families.slang import SLANGFamily
    from skbayes._likelihoods import Categorical
    from skbayes._networks import NetworkForward, ParamLayout

    module = clf.module_
    forward = NetworkForward(module, ParamLayout(module), Xb.shape[1])
    post = copy.deepcopy(clf.posterior_)
    family = SLANGFamily(clf.get_params())
    state = {"momentum": torch.zeros_like(post.mean_t)}
    ctx = StepContext(
        forward=forward,
        likelihood=Categorical(N_CLASSES),
        n_train=N_ROWS,
        generator=torch.Generator().manual_seed(seed),
        t=1,
        kl_scale=1.0,
        mc_samples=int(clf.mc_samples),
    )
    dtype = post.mean_t.dtype
    return family, post, state, ctx, torch.as_tensor(Xb, dtype=dtype), torch.as_tensor(yb)


def breakdown(family, post, state, ctx, Xb, yb, reps):
    """Median seconds of each part of one SLANG step, calling the engine's own pieces in
    the order ``SLANGFamily.step`` does (the posterior state is left untouched)."""
    import copy

    import torch

    from skbayes._curvature import per_example_curvature
    from skbayes._linalg import top_eig_from_gram
    from skbayes.posteriors.slang import slang_precision_update

    L = int(family.rank)
    S = ctx.mc_samples
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
        theta = tm("sample theta ~ q (posterior.sample_t)", lambda: post.sample_t(S, generator=ctx.generator))
        curv = tm(
            "forward + backward to layer outputs (curvature)",
            lambda: per_example_curvature(ctx.forward, theta, Xb, yb, ctx.likelihood),
        )[0]
        U, d = post.U_t, post.d_t
        shift = ctx.n_train * float(family.damping)  # the mean step's damping, as the step passes it
        tm(
            "precision update (slang_precision_update), total",
            lambda: slang_precision_update(U, d, curv, scale, 0.05, 1.0, L),
        )
        tm("  of which sq_sum: diag(G^T G)", curv.sq_sum)
        if L > 0 and U.shape[1] > 0:
            GU = tm("  of which project: G U", lambda: curv.project(U))
            tm("  of which gram: G G^T", curv.gram)
            m = L + curv.n
            K = torch.zeros(m, m, dtype=GU.dtype)
            K[:L, :L] = U.T @ U
            K[L:, L:] = curv.gram()
            K[L:, :L] = GU
            K[:L, L:] = GU.T
            V = tm(
                "  of which top-L eigenpairs of the (L+M)x(L+M) Gram (top_eig_from_gram)",
                lambda: top_eig_from_gram(K, L, n_lead=L),
            )
            tm("  of which combine: G^T V", lambda: curv.combine(V[1][L:]))
        g = tm("gradient sum (grad_sum)", curv.grad_sum)
        tm(
            "mean step (posterior.solve_t with the damping, Woodbury)",
            lambda: post.solve_t(g + post.mean_t, shift=shift),
        )
        tm("fit loop: posterior.is_finite() per step", post.is_finite)
        tm(
            "fit loop: snapshot (deep copy of posterior and state) per epoch",
            lambda: (copy.deepcopy(post), copy.deepcopy(state)),
        )
    return parts


def run_worker(cfg):
    env = dict(os.environ)
    env["OMP_NUM_THREADS"] = str(cfg["threads"])
    env["MKL_NUM_THREADS"] = str(cfg["threads"])
    if cfg.get("malloc_tuned"):
        env.update(MALLOC_TUNED)
    if cfg.get("omp_passive"):
        env["OMP_WAIT_POLICY"] = "PASSIVE"
    p = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--worker", json.dumps(cfg)],
        capture_output=True,
        text=True,
        env=env,
    )
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
    p.add_argument("--quick", action="store_true", help="short run: fewer blocks, no tuned-malloc columns")
    p.add_argument(
        "--huge",
        action="store_true",
        help="add the D = 47.8M point (1000x D_base) to the D scan: ~9 GB RAM, minutes per step",
    )
    p.add_argument("--worker", type=str, default=None, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.worker is not None:
        print(json.dumps(worker(json.loads(a.worker))))
        return

    import torch

    q = a.quick
    blocks = 3 if q else 5
    H = (400, 400)
    D0 = n_params(H)
    t_start = time.perf_counter()
    print("# Cost of one SLANG step (CPU)\n")
    print(
        f"{library_version()}, torch {torch.__version__}, {os.cpu_count()} logical CPUs, float32, batch M = 200, "
        f"N = {N_ROWS} random rows, 10 classes. Every configuration runs in a fresh subprocess; "
        f"times are medians over {blocks} interleaved blocks of steps. "
        f"Load average at start: {os.getloadavg()[0]:.2f} (other processes on the machine inflate "
        "times, especially with 2 threads).\n"
    )

    # (a) headline -------------------------------------------------------------
    print(f"## (a) Headline: MLP 784-400-400-10 (D = {D0:,}), L = 8, S = 1, M = 200\n")
    print(
        "| threads | path | SLANG step (ms) | plain Adam step (ms) | ratio | SLANG min (ms) | plain min (ms) | "
        "ratio of mins | partial_fit per step (ms) | partial_fit ratio | fresh pages per SLANG step (MB) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    head = {}
    # (threads, tuned malloc, OMP_WAIT_POLICY=PASSIVE)
    for th, tuned, passive in (
        (1, False, False),
        (2, False, False),
        (2, False, True),
        (1, True, False),
        (2, True, True),
    ):
        r = run_worker(
            dict(
                kind="pair",
                hidden=H,
                rank=8,
                batch=200,
                threads=th,
                steps=4,
                blocks=blocks,
                partial_fit=2 if q else 3,
                breakdown=7 if th == 1 and not tuned else 0,
                malloc_tuned=tuned,
                omp_passive=passive,
            )
        )
        head[(th, tuned)] = r
        label = "dense (nn.Sequential)" + (", tuned malloc" if tuned else "") + (", OMP passive" if passive else "")
        if "error" in r:
            print(f"| {th} | {label} | error: {r['error']} |")
            continue
        pf = r.get("partial_fit")
        print(
            f"| {th} | {label} | {ms(r['slang'])} | {ms(r['plain'])} | {r['slang'] / r['plain']:.1f}x | "
            f"{ms(r['slang_min'])} | {ms(r['plain_min'])} | {r['slang_min'] / r['plain_min']:.1f}x | {ms(pf)} | "
            f"{pf / r['plain']:.1f}x | {r['slang_faults_mb']:.0f} |"
        )
    head[1] = head[(1, False)]
    vm_bs = 200
    for th in (1, 2):
        r = run_worker(
            dict(
                kind="pair",
                hidden=H,
                rank=8,
                batch=vm_bs,
                threads=th,
                steps=1,
                blocks=1 if q else 2,
                generic=True,
                warmup=0,
                omp_passive=th > 1,
            )
        )
        head[f"vmap{th}"] = r
        if "error" in r:
            print(f"| {th} | vmap | error: {r['error']} |")
            continue
        print(
            f"| {th} | generic vmap(grad) (custom Module){', OMP passive' if th > 1 else ''} | "
            f"{ms(r['slang'])} | {ms(r['plain'])} | "
            f"{r['slang'] / r['plain']:.1f}x | {ms(r['slang_min'])} | {ms(r['plain_min'])} | "
            f"{r['slang_min'] / r['plain_min']:.1f}x | - | - | {r['slang_faults_mb']:.0f} |"
        )
    print(
        "\nratio = SLANG step / plain step (target <= 10x). 'partial_fit per step' is the public path: wall time "
        "of a partial_fit epoch (10 steps) / steps, including the fit loop's per-step checks. 'tuned malloc' runs "
        "the same process with " + " ".join(f"{k}={v}" for k, v in MALLOC_TUNED.items()) + " (glibc keeps freed "
        "memory instead of unmapping it); 'OMP passive' sets OMP_WAIT_POLICY=PASSIVE (idle OpenMP threads sleep "
        "instead of spinning, which matters when the cores are shared with other processes); 'fresh pages' = minor "
        "page faults per SLANG step x page size.\n"
    )

    bd = head[1].get("breakdown")
    if bd:
        tot = head[1]["slang"]
        print("### Where the time goes (1 thread, headline network; medians of single calls)\n")
        print("| part of the step | ms | share of the step |")
        print("|---|---|---|")
        for k, v in bd.items():
            if isinstance(v, str):
                print(f"| {k} | {v} | |")
                continue
            share = f"{100 * v / tot:.0f}%" if not k.startswith("fit loop") else "(outside the step)"
            print(f"| {k} | {ms(v)} | {share} |")
        print(f"| **whole step** | **{ms(tot)}** | 100% |")
        print(f"| plain Adam step, for scale | {ms(head[1]['plain'])} | |\n")

    # (b) scaling in D ---------------------------------------------------------
    # D_base = D0 / 10, then 10x and 100x that; --huge adds 1000x (D = 47.8M, ~9 GB RSS, minutes per step).
    factors = [0.1, 1, 10] + ([100] if a.huge else [])
    print("## (b) Scaling\n")
    print(
        "Load from other processes varies between configurations, so besides the medians the slopes are also "
        "computed from the fastest block (min) and from the SLANG / plain ratio measured in the same process.\n"
    )
    print("### In D at L = 8, M = 200, 1 thread (hidden widths h of a 784-h-h-10 MLP)\n")
    print(
        "| h | D | D / D_base | SLANG step (ms) | SLANG min (ms) | plain step (ms) | ratio | SLANG min / D (ns) | "
        "fresh pages per SLANG step (MB) | SLANG step, tuned malloc (ms) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    Ds, ts_s, ts_min, ts_p, ratios = [], [], [], [], []
    for f in factors:
        h = 400 if f == 1 else width_for(f * D0)
        big = f >= 100
        spec_d = dict(
            kind="pair",
            hidden=(h, h),
            rank=8,
            batch=200,
            threads=1,
            steps=1 if big else (2 if f >= 10 else 4),
            blocks=1 if big else (2 if q else 4),
            warmup=0 if big else 1,
        )
        r = head[1] if (f == 1 and head[1].get("slang")) else run_worker(spec_d)
        if "error" in r:
            print(f"| {h} | - | {10 * f:g} | error: {r['error']} |")
            continue
        tuned = "-"
        if not q and f >= 1 and not big:
            rt = head[(1, True)] if f == 1 else run_worker(dict(spec_d, malloc_tuned=True))
            tuned = ms(rt.get("slang"))
        Ds.append(r["D"])
        ts_s.append(r["slang"])
        ts_min.append(r["slang_min"])
        ts_p.append(r["plain"])
        ratios.append(r["slang"] / r["plain"])
        print(
            f"| {h} | {r['D']:,} | {r['D'] / (D0 / 10):.1f} | {ms(r['slang'])} | {ms(r['slang_min'])} | "
            f"{ms(r['plain'])} | {r['slang'] / r['plain']:.1f}x | {1e9 * r['slang_min'] / r['D']:.0f} | "
            f"{r['slang_faults_mb']:.0f} | {tuned} |"
        )
    if len(Ds) >= 2:
        print(
            f"\nlog-log slope of SLANG step time vs D: {slope(Ds, ts_s):.2f} (medians), {slope(Ds, ts_min):.2f} "
            f"(min blocks); plain step: {slope(Ds, ts_p):.2f}; slope of the SLANG / plain ratio: "
            f"{slope(Ds, ratios):+.2f}. 1.0 = linear in D; the plain step is itself linear in D, so a ratio slope "
            "near 0 means SLANG scales like plain training.\n"
        )

    print("### In L at the headline network (D = 478,410), M = 200, 1 thread\n")
    print(
        "| L | SLANG step (ms) | SLANG min (ms) | plain step (ms) | ratio | fresh pages per SLANG step (MB) | "
        "SLANG step, tuned malloc (ms) | ratio, tuned malloc |"
    )
    print("|---|---|---|---|---|---|---|---|")
    Ls = [0, 1, 2, 4, 8, 16, 32]
    Lt, Lr = {}, {}
    for L in Ls:
        spec_l = dict(kind="pair", hidden=H, rank=L, batch=200, threads=1, steps=2, blocks=2 if q else 4, warmup=1)
        r = head[1] if (L == 8 and head[1].get("slang")) else run_worker(spec_l)
        if "error" in r:
            print(f"| {L} | error: {r['error']} |")
            continue
        Lt[L], Lr[L] = r["slang_min"], r["slang"] / r["plain"]
        tuned = "- | -"
        if not q and L >= 8:
            rt = head[(1, True)] if L == 8 else run_worker(dict(spec_l, malloc_tuned=True))
            if "error" not in rt:
                tuned = f"{ms(rt['slang'])} | {rt['slang'] / rt['plain']:.1f}x"
        print(
            f"| {L} | {ms(r['slang'])} | {ms(r['slang_min'])} | {ms(r['plain'])} | {r['slang'] / r['plain']:.1f}x | "
            f"{r['slang_faults_mb']:.0f} | {tuned} |"
        )
    pos = [L for L in Lt if L >= 4]
    if len(pos) >= 2:
        inc = np.polyfit(pos, [Lt[L] for L in pos], 1)[0]
        inc_r = np.polyfit(pos, [Lr[L] for L in pos], 1)[0]
        print(
            f"\nFor L >= 4: log-log slope of the step time (min blocks) vs L {slope(pos, [Lt[L] for L in pos]):.2f}, "
            f"of the SLANG / plain ratio {slope(pos, [Lr[L] for L in pos]):.2f}; each extra unit of L costs "
            f"{1e3 * inc:.1f} ms = {inc_r:.2f} plain steps. Theory: the precision update does 4 M D L flops "
            "(G U and G^T V) against 6 M D for a plain step, i.e. 2/3 of a plain step per unit of L at equal "
            "flop rates, on top of an L-independent forward/backward: the time is affine in L while M >> L.\n"
        )

    # (c) memory ---------------------------------------------------------------
    print("## (c) Peak memory (ru_maxrss of a fresh process, 1 thread, M = 200)\n")
    print(
        "| configuration | D | RSS before the model (MB) | peak RSS (MB) | increase (MB) | "
        "D x M per-example grads, float32 (MB) | model state (MB) |"
    )
    print("|---|---|---|---|---|---|---|")
    mem_cfgs = [
        ("plain Adam step", dict(kind="plain", hidden=H, rank=8)),
        ("SLANG dense path, L = 8", dict(kind="slang", hidden=H, rank=8)),
        ("SLANG dense path, L = 32", dict(kind="slang", hidden=H, rank=32)),
        ("SLANG vmap path, L = 8", dict(kind="slang", hidden=H, rank=8, generic=True)),
        (
            f"SLANG dense path, L = 8, h = {width_for(10 * D0)}",
            dict(kind="slang", hidden=(width_for(10 * D0),) * 2, rank=8),
        ),
        (f"plain Adam step, h = {width_for(10 * D0)}", dict(kind="plain", hidden=(width_for(10 * D0),) * 2, rank=8)),
    ]
    for name, c in mem_cfgs:
        c = dict(c, batch=200, threads=1, steps=2, blocks=1, warmup=0)
        r = run_worker(c)
        if "error" in r:
            print(f"| {name} | error: {r['error']} |")
            continue
        D = r["D"]
        grads = D * 200 * 4 / 2**20
        state = D * (c["rank"] + 3) * 4 / 2**20 if c["kind"] == "slang" else D * 4 * 4 / 2**20
        print(
            f"| {name} | {D:,} | {r['rss_before_mb']:.0f} | {r['rss_peak_mb']:.0f} | "
            f"{r['rss_peak_mb'] - r['rss_before_mb']:.0f} | {grads:.0f} | {state:.0f} |"
        )
    print(
        "\n'RSS before the model' holds Python, torch and the data. The increase is the model state plus the "
        "working memory of the steps (SLANG: 4 steps including the initialising partial_fit step; plain: 2 steps). "
        "Model state: SLANG D x (L + 3) floats (mean, U, d, momentum); plain D x 4 (parameters, gradients, Adam's two "
        "moments).\n"
    )
    print(f"Total benchmark wall time: {time.perf_counter() - t_start:.0f} s.")


if __name__ == "__main__":
    main()
