#!/usr/bin/env bash
# Builds the stand-in libnvidia-ml.so.1 (deploy/local/fake_nvml/fake_nvml.c) into
# <repo>/.build/fake-nvml/ and prints the library's path on stdout (diagnostics go to stderr).
# Idempotent: the NVML header is fetched once and the library is rebuilt only when its
# source or header is newer.
#
# Needs a C compiler and a Python with pip that can reach PyPI (or the index pip is
# configured for): the header comes from the PyPI wheel nvidia-nvml-dev.
# Environment:
#   CC                 compiler (default gcc)
#   PYTHON             Python whose pip fetches the header (default: the repo's .venv, else python3)
#   NVML_DEV_VERSION   nvidia-nvml-dev version to take nvml.h from (default below)
#   NVML_INCLUDE_DIR   a directory that already holds nvml.h (e.g. a CUDA toolkit); skips pip
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
src="$repo/deploy/local/fake_nvml/fake_nvml.c"
out_dir="$repo/.build/fake-nvml"
lib="$out_dir/libnvidia-ml.so.1"
nvml_dev_version=${NVML_DEV_VERSION:-13.5.37}

mkdir -p "$out_dir"

if [[ -n ${NVML_INCLUDE_DIR:-} ]]; then
    include_dir=$NVML_INCLUDE_DIR
else
    include_dir="$out_dir/include"
    if [[ ! -f $include_dir/nvml.h ]]; then
        python=${PYTHON:-}
        if [[ -z $python ]]; then
            if [[ -x $repo/.venv/bin/python ]]; then python=$repo/.venv/bin/python; else python=python3; fi
        fi
        if ! "$python" -m pip --version >/dev/null 2>&1; then
            echo "build-fake-nvml: '$python -m pip' is not available; set PYTHON to a Python with pip" \
                "or NVML_INCLUDE_DIR to a directory holding nvml.h" >&2
            exit 1
        fi
        tmp=$(mktemp -d)
        trap 'rm -rf "$tmp"' EXIT
        echo "build-fake-nvml: fetching nvml.h from nvidia-nvml-dev==$nvml_dev_version" >&2
        # The header is the same on every platform; naming one lets any machine take the wheel.
        "$python" -m pip install --quiet --disable-pip-version-check --no-deps \
            --only-binary=:all: --platform manylinux2014_x86_64 \
            --target "$tmp/wheel" "nvidia-nvml-dev==$nvml_dev_version" >&2
        header=$(find "$tmp/wheel" -name nvml.h -print -quit)
        if [[ -z $header ]]; then
            echo "build-fake-nvml: nvidia-nvml-dev==$nvml_dev_version holds no nvml.h" >&2
            exit 1
        fi
        mkdir -p "$include_dir"
        cp "$header" "$include_dir/nvml.h.tmp"
        mv -f "$include_dir/nvml.h.tmp" "$include_dir/nvml.h"
    fi
fi

if [[ ! -f $lib || $src -nt $lib || $include_dir/nvml.h -nt $lib ]]; then
    # Build beside the target and rename, so a concurrent reader never sees half a library.
    "${CC:-gcc}" -shared -fPIC -O2 -Wall -Wextra -I "$include_dir" \
        -Wl,-soname,libnvidia-ml.so.1 -o "$lib.tmp.$$" "$src"
    mv -f "$lib.tmp.$$" "$lib"
fi

echo "$lib"
