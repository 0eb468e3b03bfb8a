#!/usr/bin/env bash
# One prepared check of the GPU path and the Torch backend (benchmarks/gpu_check.py says what it runs).
#
#     bash benchmarks/gpu_wheels.sh                  # first, where the package registry can be reached
#     bash benchmarks/gpu_check.sh OUTDIR            # on the GPU machine: its python3, the wheels carried
#     bash benchmarks/gpu_check.sh OUTDIR --host     # the dry run on this CPU, at tiny sizes
#
# OUTDIR receives gpu_check.json and gpu_check.log; the last line printed is a one-line summary.
# The interpreter is $PYTHON, else python3 on the GPU machine and the project's .venv with --host.
set -uo pipefail
cd "$(dirname "$0")/.."

if [ $# -lt 1 ] || [[ "$1" == -* ]]; then
  echo "usage: bash benchmarks/gpu_check.sh OUTDIR [--host] [gpu_check.py options]" >&2
  exit 2
fi
host=0
for arg in "$@"; do
  [ "$arg" = "--host" ] && host=1
done
if [ -n "${PYTHON:-}" ]; then
  python=$PYTHON
elif [ $host = 1 ] && [ -x .venv/bin/python ]; then
  python=.venv/bin/python
else
  python=python3
fi
# the dry run builds the wheels when they are missing or sgsim's is older than its source (the GPU
# machine cannot: it has no network)
if [ $host = 1 ]; then
  wheel=$(compgen -G ".whl/gpu-check/sgsim-*.whl" | head -1)
  if [ -z "$wheel" ] || [ -n "$(find sgsim pyproject.toml -newer "$wheel" -type f -not -path "*/__pycache__/*" \
    -not -name "*.nb[ic]" -print -quit)" ]; then
    PYTHON=$python bash benchmarks/gpu_wheels.sh || exit
  fi
fi
export PYTHONUNBUFFERED=1
exec "$python" benchmarks/gpu_check.py "$@" --python "$python"
