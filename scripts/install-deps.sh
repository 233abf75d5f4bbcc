#!/usr/bin/env bash
# Installs what tether needs from Debian's packages, only what is missing.
# --mpi adds OpenMPI (for `mpirun -np K tether run` and its test); --python
# the Python package's build and test needs from PyPI (nanobind, NumPy,
# xarray, netCDF4, pytest; ArviZ, tqdm, matplotlib and SymPy, which the
# package and its examples use where present; Numba, whose CUDA simulator
# tests the numba.cuda peers of bench/, and JAX with diffrax, which test its
# JAX peers on the cpu). The test command installs both, the
# example command neither.
set -euo pipefail
packages=(cmake make ninja-build g++ ccache pkg-config libeigen3-dev nlohmann-json3-dev libcli11-dev libgtest-dev libnetcdf-dev zlib1g-dev libginac-dev)
python=0
for option in "$@"; do
  case "$option" in
    --mpi) packages+=(libopenmpi-dev openmpi-bin) ;;
    --python) python=1 ;;
    *) echo "install-deps.sh: unknown option $option" >&2; exit 2 ;;
  esac
done
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
updated=0
apt_install() {  # the Debian packages named that are not installed yet
  local missing=()
  for p in "$@"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
  done
  [ ${#missing[@]} -gt 0 ] || return 0
  echo "[tether] installing: ${missing[*]}"
  [ "$updated" = 1 ] || { $sudo apt-get update -qq; updated=1; }
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}
apt_install "${packages[@]}"

if [ "$python" = 1 ]; then
  # Python with its headers. Where pip may not install into it (Debian's own
  # python3 is "externally managed"), a virtual environment in build-venv/
  # takes the packages; scripts/test.sh then builds against it.
  command -v python3 >/dev/null 2>&1 || apt_install python3 python3-dev python3-venv
  py=python3
  managed=$(python3 -c 'import sysconfig, os; print(os.path.exists(os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED")))')
  if [ "$managed" = True ] || ! python3 -m pip --version >/dev/null 2>&1; then
    if [ ! -x build-venv/bin/python ]; then
      apt_install python3-dev python3-venv
      python3 -m venv build-venv
    fi
    py=build-venv/bin/python
  fi
  # module name=pip requirement, installed only where the import fails
  wanted=(nanobind=nanobind numpy=numpy xarray=xarray netCDF4=netCDF4 pytest=pytest arviz=arviz tqdm=tqdm
          matplotlib=matplotlib sympy=sympy numba=numba jax=jax diffrax=diffrax)
  pip_missing=()
  for w in "${wanted[@]}"; do
    "$py" -c "import ${w%%=*}" >/dev/null 2>&1 || pip_missing+=("${w#*=}")
  done
  if [ ${#pip_missing[@]} -gt 0 ]; then
    echo "[tether] installing from PyPI: ${pip_missing[*]}"
    "$py" -m pip install -q --disable-pip-version-check --root-user-action=ignore "${pip_missing[@]}"
  fi
fi
