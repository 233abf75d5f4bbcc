#!/usr/bin/env bash
# Exit status 0 when nvidia-smi lists a GPU on this machine.
command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q "^GPU"
