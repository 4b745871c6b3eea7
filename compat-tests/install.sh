#!/usr/bin/env bash
# Installs what the compatibility tests need besides the Python packages (those come from
# pyproject's [test] extra): kcat from Debian, the node clients (kafkajs 2.2.4 and pure-JS
# codecs for snappy, lz4 and zstd) from npm into compat-tests/node/node_modules, and kafka-python
# 2.3.3 into compat-tests/.kafka-python-2 for the rebalance test's members (group_processes.py says
# why they do not use the 3.0 line the other tests use).
# Idempotent: does nothing that is already done. Needs root for apt-get.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

apt_pkgs=()
command -v kcat >/dev/null 2>&1 || apt_pkgs+=(kcat)
command -v node >/dev/null 2>&1 || apt_pkgs+=(nodejs)
command -v npm >/dev/null 2>&1 || apt_pkgs+=(npm)
if [ ${#apt_pkgs[@]} -gt 0 ]; then
    echo "install.sh: apt-get install ${apt_pkgs[*]}"
    as_root apt-get update -qq
    DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq --no-install-recommends "${apt_pkgs[@]}" >/dev/null
fi

# node_modules matches the committed lockfile? (npm writes node_modules/.package-lock.json)
cd "$HERE/node"
if [ ! -f node_modules/.package-lock.json ] || ! cmp -s <(node -e '
    const l = require("./package-lock.json"), h = require("./node_modules/.package-lock.json");
    const pick = p => Object.fromEntries(Object.entries(p.packages).filter(([k]) => k).map(([k, v]) => [k, v.version]));
    console.log(JSON.stringify(pick(l)) === JSON.stringify(pick(h)) ? "same" : "differs");' 2>/dev/null) <(echo same); then
    echo "install.sh: npm ci in $HERE/node"
    npm ci --no-audit --no-fund --loglevel=error
fi

# Into a directory of its own: the [test] extra's kafka-python 3.0 stays the one everything else imports.
KAFKA_PYTHON_2="$HERE/.kafka-python-2"
if [ ! -d "$KAFKA_PYTHON_2/kafka_python-2.3.3.dist-info" ]; then
    echo "install.sh: kafka-python 2.3.3 into $KAFKA_PYTHON_2"
    rm -rf "$KAFKA_PYTHON_2"
    "${PYTHON:-python3}" -m pip install -q --no-deps --target "$KAFKA_PYTHON_2" kafka-python==2.3.3
fi

kcat -V >/dev/null 2>&1 || { echo "install.sh: kcat does not run" >&2; exit 1; }
node -e 'require("kafkajs"); require("kafkajs-snappy"); require("lz4js"); require("zstd-codec")' \
    || { echo "install.sh: node modules missing" >&2; exit 1; }
echo "install.sh: compat-test tools ready (kcat $(kcat -V 2>&1 | sed -n 's/^Version \([0-9.]*\).*/\1/p'), node $(node --version))"
