#!/usr/bin/env bash
# Command 2: install, build, and run the whole test suite (gpu-labelled tests
# skip themselves where no device is present). Without a GPU nothing runs the
# cuda kernels, so they are compiled to PTX only to check them
# (TETHER_CUDA_COMPILE_CHECK in CMakeLists.txt).
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS=0
scripts/install-deps.sh --mpi --python
installed=$SECONDS
check=OFF
scripts/has-gpu.sh || check=ON
python=()  # the Python the package is built and tested with: build-venv/ where install-deps made one
[ -x build-venv/bin/python ] && python=(-DPython_EXECUTABLE="$PWD/build-venv/bin/python")
scripts/build.sh -DTETHER_CUDA_COMPILE_CHECK="$check" "${python[@]}"
built=$SECONDS
# Tests share two cores: idle OpenMP threads must sleep, not spin.
export OMP_WAIT_POLICY=passive
rc=0
ctest --test-dir build --output-on-failure -j"$(nproc)" || rc=$?
# Where command 2's time went (its budget is 10 minutes on the 2-core machine).
echo "[tether] install ${installed} s, build $((built - installed)) s, tests $((SECONDS - built)) s"
exit $rc
