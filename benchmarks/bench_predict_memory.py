"""Peak memory of prediction against the number of rows.

For each row count, a fresh process fits a small model (SLANG, 10 features, one hidden
layer of 50 units, 1,000 rows; a regressor and a 3-class classifier), builds the query
rows, and then calls ``predict(X, return_std=True)`` (regressor) or ``predict_proba``
(classifier) with the default 100 weight samples. The table gives the process's peak
resident memory (``ru_maxrss``) before and after the prediction call: the increase is
what prediction needs on top of the query and its result.

Run: ``python benchmarks/bench_predict_memory.py`` (about a minute on 2 cores), or
``--rows 100000 2000000``. Public API only.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

CHILD = r"""
import json, resource, sys, time, warnings
import numpy as np, torch
torch.set_num_threads(1)
warnings.simplefilter("ignore")
import skbayes
kind, n = sys.argv[1], int(sys.argv[2])
rng = np.random.RandomState(0)
X = rng.standard_normal((1000, 10))
if kind == "regressor":
    est = skbayes.SLANGRegressor(hidden_layer_sizes=(50,), max_iter=5, random_state=0)
    est.fit(X, X[:, 0] + 0.1 * rng.standard_normal(1000))
else:
    est = skbayes.SLANGClassifier(hidden_layer_sizes=(50,), max_iter=5, random_state=0)
    est.fit(X, np.digitize(X[:, 0], [-0.5, 0.5]))
Xq = rng.standard_normal((n, 10))
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t0 = time.perf_counter()
out = est.predict(Xq, return_std=True) if kind == "regressor" else est.predict_proba(Xq)
sec = time.perf_counter() - t0
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"before": before / 1024, "after": after / 1024, "seconds": sec, "query": Xq.nbytes / 2**20}))
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", nargs="+", type=int, default=[100_000, 500_000, 2_000_000])
    ap.add_argument("--kinds", nargs="+", default=["regressor", "classifier"], choices=["regressor", "classifier"])
    args = ap.parse_args()
    print("| estimator | rows | query (MiB) | peak RSS before (MiB) | after (MiB) | increase (MiB) | seconds |")
    print("|---|---|---|---|---|---|---|")
    for kind in args.kinds:
        for n in args.rows:
            cmd = [sys.executable, "-c", CHILD, kind, str(n)]
            res = subprocess.run(cmd, capture_output=True, text=True, check=True)
            r = json.loads(res.stdout.strip().splitlines()[-1])
            print(
                f"| SLANG {kind} | {n:,} | {r['query']:.0f} | {r['before']:.0f} | {r['after']:.0f} | "
                f"{r['after'] - r['before']:.0f} | {r['seconds']:.1f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
