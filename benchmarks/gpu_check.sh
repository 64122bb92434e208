#!/usr/bin/env bash
# The GPU checks in one command, for a machine where torch sees a CUDA device:
# tests/test_cuda.py (every network estimator on the GPU against the CPU) and
# tests/test_continuing.py (which also switches fitted models to device="cuda"), then the
# Fashion-MNIST benchmark at full scale on the GPU for each method and seed (one process
# per method, so a failure of one does not stop the others).
#
#   bash benchmarks/gpu_check.sh                       # seed 0, every method
#   SEEDS="0 1" METHODS="ekfac mlp" DATA=/path/to/fashion-mnist bash benchmarks/gpu_check.sh
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
    "$PY" benchmarks/bench_fashion.py --device cuda --threads "$(nproc)" --seed "$seed" --methods "$m" \
      ${DATA:+--data "$DATA"} | grep "^  " || echo "  $m seed $seed: failed"
  done
done
