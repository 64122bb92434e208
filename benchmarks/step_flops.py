"""Arithmetic of one training step: each method's floating-point operations against a plain step.

Counts the multiply-adds (as 2 flops each) of the large operations one step of each
method performs in skbayes' implementation, for a dense network (``nn.Linear`` layers,
bias folded into the Kronecker factors), minibatch ``M``, one Monte Carlo sample, at
the defaults (``inv_interval = 1`` for noisy K-FAC, ``eig_interval = 5`` for noisy
EK-FAC). Element-wise work (O(D) per step) is left out, so the counts are lower
bounds. The ratio to a plain step (forward + backward of the same network, as
``MLPClassifier`` or a torch ``nn.Sequential`` with Adam does) bounds from below how
close to a plain network's epoch each method can come without changing its arithmetic
(fewer refactorisations, fewer samples, a lower rank); the measured epochs are in
docs/benchmarks.md.

Per layer ``l`` with ``n_l`` inputs (+1 for the bias) and ``p_l`` outputs
(``D = sum n_l p_l``, ``D_1`` the first layer's):

- plain step: forward ``2 M D``, weight gradients ``2 M D``, input gradients
  ``2 M (D - D_1)``;
- gradients at the pre-activations (SLANG, K-FAC): forward ``2 M D`` and input
  gradients ``2 M (D - D_1)``; the Kronecker methods back-propagate twice (observed
  labels for the mean step, sampled labels for the true Fisher) and form the weight
  gradient ``2 M D`` once;
- SLANG (rank ``L``): ``G U`` and ``G^T V`` ``2 L M D`` each, ``diag(G^T G)`` and the
  gradient sum ``2 M D`` each, the Gram matrix ``G G^T`` ``2 M^2 sum (n_l + p_l)``, the
  sampler, the Woodbury solve and the pass over ``U`` ``about 12 L D``;
- noisy K-FAC: factor statistics ``2 M sum (n_l^2 + p_l^2)``, two Cholesky
  factorisations per factor (the covariance's damping and the mean step's)
  ``2 sum (n_l^3 + p_l^3) / 3``, the mean step (a Cholesky solve on each side)
  ``2 sum (n_l^2 p_l + n_l p_l^2)``, the sampler (one triangular solve each side)
  ``sum (n_l^2 p_l + n_l p_l^2)``;
- noisy EK-FAC: the same statistics, the projected second moment
  ``2 M sum (n_l^2 + p_l^2) + 2 M D``, the mean step in the eigenbasis (four products)
  ``4 sum (n_l^2 p_l + n_l p_l^2)``, the sampler (two) ``2 sum (...)``, and the
  eigendecompositions (about ``4 n^3`` each, tridiagonal reduction plus vectors) every
  ``eig_interval`` steps.

Run: ``.venv/bin/python benchmarks/step_flops.py [--layers 784,400,400,10] [--batch 200] [--rank 8]``
"""

import argparse


def counts(widths, M, L, eig_interval):
    layers = [(i + 1, o) for i, o in zip(widths[:-1], widths[1:])]
    D = sum(n * p for n, p in layers)
    D1 = layers[0][0] * layers[0][1]
    fwd = 2 * M * D
    back_inputs = 2 * M * (D - D1)
    wgrad = 2 * M * D
    sq_np = sum(n * n * p + n * p * p for n, p in layers)
    stats = 2 * M * sum(n * n + p * p for n, p in layers)
    cubes = sum(n**3 + p**3 for n, p in layers)
    plain = fwd + wgrad + back_inputs
    slang = fwd + back_inputs + 2 * (2 * L * M * D) + 2 * (2 * M * D)
    if L:  # rank 0 (VOGN) skips the Gram matrix and the low-rank algebra
        slang += 2 * M * M * sum(n + p for n, p in layers) + 12 * L * D
    kron = fwd + 2 * back_inputs + wgrad + stats
    kfac = kron + 2 * cubes / 3 + 2 * sq_np + sq_np
    ekfac = kron + stats + 2 * M * D + 4 * sq_np + 2 * sq_np + 4 * cubes / eig_interval
    return D, plain, {f"SLANG L={L}": slang, "noisy K-FAC": kfac, "noisy EK-FAC": ekfac}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", default="784,400,400,10")
    ap.add_argument("--batch", type=int, default=200)
    ap.add_argument("--rank", type=int, default=8)
    ap.add_argument("--eig-interval", type=int, default=5)
    args = ap.parse_args()
    widths = [int(w) for w in args.layers.split(",")]
    D, plain, methods = counts(widths, args.batch, args.rank, args.eig_interval)
    print(f"# Flops of one step (step_flops.py): {args.layers}, D = {D:,}, M = {args.batch}, one sample\n")
    print("| method | GFLOP per step | ratio to a plain step |")
    print("|---|---:|---:|")
    print(f"| plain step (forward + backward) | {plain / 1e9:.3f} | 1.0x |")
    for name, f in methods.items():
        print(f"| {name} | {f / 1e9:.3f} | {f / plain:.1f}x |")


if __name__ == "__main__":
    main()
