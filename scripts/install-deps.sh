#!/usr/bin/env bash
# Installs what tether needs from Debian's packages, only what is missing.
# --mpi adds OpenMPI (for `mpirun -np K tether run` and its test): the test
# command installs it, the example command does without.
set -euo pipefail
packages=(cmake make ninja-build g++ ccache pkg-config libeigen3-dev nlohmann-json3-dev libcli11-dev libgtest-dev libnetcdf-dev)
if [ "${1:-}" = "--mpi" ]; then packages+=(libopenmpi-dev openmpi-bin); fi
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
