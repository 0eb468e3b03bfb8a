#!/usr/bin/env bash
# The wheels that benchmarks/gpu_check.sh installs on a GPU machine that has no network.
#
#     bash benchmarks/gpu_wheels.sh [DIR]        # default DIR: .whl/gpu-check (ignored by git)
#
# DIR receives sgsim's own wheel, built from this checkout, and the pure-Python packages that
# sgsim needs and the GPU machine's Python 3.12 lacks (ArviZ and what it needs beyond NumPy,
# SciPy, pandas, xarray, h5py and matplotlib, which are there), at the versions this
# machine's environment runs, for CPython 3.12 on x86-64 Linux. The folder travels with the
# working tree (carried as an ignored path), whose whole size is limited to 64 MiB: the script
# prints both sizes and fails when the wheels alone exceed 48 MiB.
#
# It runs $PYTHON, else the project's .venv (where sgsim's dependencies are installed), else
# python3; it needs the package registry.
set -euo pipefail
cd "$(dirname "$0")/.."

dir=${1:-.whl/gpu-check}
if [ -n "${PYTHON:-}" ]; then
  python=$PYTHON
elif [ -x .venv/bin/python ]; then
  python=.venv/bin/python
else
  python=python3
fi
# the GPU machine's image holds numpy, scipy, numba, pandas, xarray, h5py, matplotlib, tqdm,
# threadpoolctl, packaging, setuptools, typing-extensions, pytest and hypothesis; these it does not
missing=(arviz h5netcdf xarray-einstats platformdirs)

rm -rf "$dir"
mkdir -p "$dir"
# sgsim's own wheel, without its dependencies (no isolated build: setuptools is installed here)
"$python" -m pip wheel -q --no-deps --no-build-isolation -w "$dir" .

# the missing packages at the versions installed here (the ones the test suite runs with)
pins=()
for name in "${missing[@]}"; do
  version=$("$python" -c "import importlib.metadata as m, sys; print(m.version(sys.argv[1]))" "$name")
  pins+=("$name==$version")
done
"$python" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d "$dir" "${pins[@]}" 2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)

ls -l "$dir"
wheels_kib=$(du -sk "$dir" | cut -f1)
tree="n/a (not a git checkout)"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  # the working tree that travels: tracked files and untracked ones that git does not ignore
  tree_kib=$(git ls-files -z --cached --others --exclude-standard | du -ck --files0-from=- 2>/dev/null | tail -1 | cut -f1)
  tree="$(( tree_kib / 1024 )) MiB"
fi
echo "wheels: $(( wheels_kib / 1024 )) MiB ($wheels_kib KiB) in $dir; working tree: $tree; the limit for both together: 64 MiB"
if (( wheels_kib > 48 * 1024 )); then
  echo "the wheels exceed 48 MiB: too large to travel beside the working tree" >&2
  exit 1
fi
