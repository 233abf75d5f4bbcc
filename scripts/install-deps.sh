#!/usr/bin/env bash
# Installs what tether needs from Debian's packages, only what is missing.
# --mpi adds OpenMPI (for `mpirun -np K tether run` and its test); --python
# the Python package's build and test needs from PyPI (nanobind, NumPy,
# xarray, netCDF4, pytest; ArviZ, tqdm and matplotlib, which the package and
# its examples use where present). The test command installs both, the
# example command neither.
set -euo pipefail
packages=(cmake make ninja-build g++ ccache pkg-config libeigen3-dev nlohmann-json3-dev libcli11-dev libgtest-dev libnetcdf-dev)
python=0
for option in "$@"; do
  case "$option" in
    --mpi) packages+=(libopenmpi-dev openmpi-bin) ;;
    --python) python=1 ;;
    *) echo "install-deps.sh: unknown option $option" >&2; exit 2 ;;
  esac
done
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "[tether] installing: ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [ "$python" = 1 ]; then
  if ! command -v python3 >/dev/null 2>&1; then
    echo "[tether] no python3 on PATH: the Python package is not built" >&2
    exit 0
  fi
  # module name=pip requirement, installed only where the import fails
  wanted=(nanobind=nanobind numpy=numpy xarray=xarray netCDF4=netCDF4 pytest=pytest arviz=arviz tqdm=tqdm
          matplotlib=matplotlib)
  pip_missing=()
  for w in "${wanted[@]}"; do
    python3 -c "import ${w%%=*}" >/dev/null 2>&1 || pip_missing+=("${w#*=}")
  done
  if [ ${#pip_missing[@]} -gt 0 ]; then
    echo "[tether] installing from PyPI: ${pip_missing[*]}"
    python3 -m pip install -q --disable-pip-version-check --root-user-action=ignore "${pip_missing[@]}"
  fi
fi
