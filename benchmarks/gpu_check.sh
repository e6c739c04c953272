#!/usr/bin/env bash
# GPU readiness: with CUDA, run the GPU tests and a short benchmark (under 8 minutes in all)
# that writes its figures to benchmarks/RESULTS.md (section bench_gpu). Without CUDA it says
# so and exits 0 having run nothing.
#
#   benchmarks/gpu_check.sh                # from the repository root or anywhere
#   PYTHON=.venv/bin/python benchmarks/gpu_check.sh --model tiny.en
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python}

if ! "$PY" -c 'import ctranslate2, sys; sys.exit(0 if ctranslate2.get_cuda_device_count() > 0 else 1)' 2>/dev/null; then
  echo "gpu_check: no CUDA device visible to CTranslate2; skipped (nothing run, RESULTS.md untouched)"
  exit 0
fi

echo "gpu_check: GPU tests"
timeout 150 "$PY" -m pytest -q -m gpu tests
echo "gpu_check: benchmark"
timeout 330 "$PY" benchmarks/bench_gpu.py "$@"
echo "gpu_check: done; figures in benchmarks/RESULTS.md (bench_gpu)"
