#!/usr/bin/env bash
# Command 1: install, build, and run the main job on the bundled example
# (backend auto: cuda when a GPU is present, else cpu).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
./build/tether run configs/spherical_pendulum.json --out runs/spherical_pendulum
