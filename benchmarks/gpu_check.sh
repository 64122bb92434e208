#!/usr/bin/env bash
# The GPU checks in one command, for a machine where torch sees a CUDA device:
# tests/test_cuda.py (every network estimator on the GPU against the CPU) and
# tests/test_continuing.py (which also switches fitted models to device="cuda"), then the
# Fashion-MNIST benchmark at full scale on the GPU for each method and seed (one process
# per method, so a failure of one does not stop the others).
#
#   bash benchmarks/gpu_check.sh                       # seed 0, every method
#   SEEDS="0 1" METHODS="ekfac mlp" DATA=/path/to/fashion-mnist bash benchmarks/gpu_check.sh
#   UNCERTAINTY=1 SEEDS="0 1 2" METHODS=none bash benchmarks/gpu_check.sh   # only the uncertainty tasks
#
# With UNCERTAINTY=1 it then runs bench_uncertainty.py's Fashion-MNIST tasks at full scale (60,000
# training rows, every peer, the (consecutive) seeds of SEEDS; skbayes on the GPU, the peers on the CPU,
# one thread per worker, nproc - 4 workers), about 5 minutes for 3 seeds on an H100 with 16 cores;
# the raw results go to ${UNCERTAINTY_JSON:-fashion_full.json}. The Laplace peer needs laplace-torch
# (see bench_uncertainty.py's docstring).
#
# About 3 minutes per seed on an NVIDIA H100 (the tests about a minute). PYTHON picks the
# interpreter (default: python3); DATA the directory of the four idx files.
set -u
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
export PYTHONUNBUFFERED=1
"$PY" -c "import torch; assert torch.cuda.is_available(), 'no CUDA device'; print(torch.__version__, torch.cuda.get_device_name())" || exit 1
"$PY" -m pytest -q -p no:cacheprovider tests/test_cuda.py tests/test_continuing.py
for seed in ${SEEDS:-0}; do
  for m in ${METHODS:-mlp slang vogn vadam bbb mcdropout kfac ekfac}; do
    [ "$m" = none ] && continue
    "$PY" benchmarks/bench_fashion.py --device cuda --threads "$(nproc)" --seed "$seed" --methods "$m" \
      ${DATA:+--data "$DATA"} | grep "^  " || echo "  $m seed $seed: failed"
  done
done
if [ -n "${UNCERTAINTY:-}" ]; then
  read -r -a seeds <<< "${SEEDS:-0}"  # consecutive seeds: the first and how many
  "$PY" benchmarks/bench_uncertainty.py --datasets fashion --fashion-rows 60000 \
    --first-seed "${seeds[0]}" --seeds "${#seeds[@]}" \
    --jobs $(( $(nproc) > 5 ? $(nproc) - 4 : 1 )) --set '*.device="cuda"' ${DATA:+--data "$DATA"} \
    --methods slang,vogn,vadam,bbb,mcdropout,kfac,ekfac,mlp,ensemble,logreg,laplace_ll \
    --json "${UNCERTAINTY_JSON:-fashion_full.json}" || echo "  uncertainty tasks: failed"
fi
