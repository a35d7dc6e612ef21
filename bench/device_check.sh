#!/usr/bin/env bash
# The checks that need a real NVIDIA GPU (bench/device_check.py says which), in one command:
#   bash bench/device_check.sh [--stand-in] [--seconds 60]
# On a GPU node it builds nothing: it needs the repository's .venv (make setup) and the
# driver's libnvidia-ml.so.1 and libcuda.so.1. With --stand-in it builds the stand-ins first.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ " $* " == *" --stand-in "* ]]; then
  bash deploy/local/build-fake-nvml.sh >&2
  bash deploy/local/build-fake-cuda.sh >&2
fi
PYTHONPATH="$PWD:$PWD/bench" exec "${PYTHON:-.venv/bin/python}" bench/device_check.py "$@"
