#!/usr/bin/env bash
# Builds the stand-in libcuda.so.1 (deploy/local/fake_cuda/fake_cuda.c) into <out dir>
# (default <repo>/.build/fake-cuda/) and prints the library's path. No CUDA header needed:
# the source declares cuda.h's few types itself. Environment: CC (default gcc).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
src="$repo/deploy/local/fake_cuda/fake_cuda.c"
out_dir=${1:-$repo/.build/fake-cuda}
lib="$out_dir/libcuda.so.1"

mkdir -p "$out_dir"
if [[ ! -f $lib || $src -nt $lib ]]; then
    # Built beside the target and renamed: a concurrent reader never sees half a library.
    "${CC:-gcc}" -shared -fPIC -O2 -Wall -Wextra -Werror -Wl,-soname,libcuda.so.1 \
        -o "$lib.tmp.$$" "$src"
    mv -f "$lib.tmp.$$" "$lib"
fi
echo "$lib"
