#!/usr/bin/env bash
# Set up Samsa on a fresh Debian/Ubuntu machine: Python 3.11+ in a virtualenv at .venv.
#   scripts/setup.sh          the broker
#   scripts/setup.sh --test   the broker and everything the tests use (clients, kcat, kafkajs, the
#                             pipelines' PySpark and its Kafka connector's jars, bench's matplotlib,
#                             franz-go's kgo tests)
set -euo pipefail
cd "$(dirname "$0")/.."
SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo"

apt_install() {
  missing=()
  for pkg in "$@"; do dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg"); done
  if [ ${#missing[@]} -gt 0 ]; then
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
  fi
}

PYTHON="${PYTHON:-python3}"
if ! command -v "$PYTHON" >/dev/null 2>&1; then
  apt_install python3 python3-venv
fi
if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  echo "Samsa needs Python 3.11 or newer; $PYTHON is $("$PYTHON" --version)" >&2
  exit 1
fi
# The C codec (wire/_speedups.c) is compiled at install: a C compiler and this Python's headers.
command -v gcc >/dev/null 2>&1 || apt_install gcc libc6-dev
"$PYTHON" -c 'import os, sys, sysconfig; sys.exit(not os.path.isfile(sysconfig.get_paths()["include"] + "/Python.h"))' \
  || apt_install "python$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')-dev"
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv 2>/dev/null || { apt_install python3-venv; rm -rf .venv; "$PYTHON" -m venv .venv; }
fi
# setuptools 77+ in the venv too (pyproject.toml's SPDX license needs it), not only in pip's
# isolated build: `python setup.py build_ext --inplace` in a worktree uses the venv's
# (bench/README.md, "A change against the code before it").
.venv/bin/python -m pip install -q --upgrade pip "setuptools>=77"
if [ "${1:-}" = "--test" ]; then
  .venv/bin/python -m pip install -q -e ".[test,pipeline,plot]"
  bash scripts/fetch-jars.sh spark >/dev/null  # a JDK and Maven via apt if missing
  if [ -f compat-tests/install.sh ]; then PYTHON="$PWD/.venv/bin/python" bash compat-tests/install.sh; fi
  # franz-go's kgo tests, built into the cache once per version (about 1 min), a no-op
  # after. librdkafka's suite (SAMSA_COMPAT_LIBRDKAFKA_SUITE=1) is built on demand with
  # `scripts/fetch-suites.sh librdkafka`: its GitHub tarball is not reachable everywhere.
  bash scripts/fetch-suites.sh franz-go >/dev/null
else
  .venv/bin/python -m pip install -q -e .
fi
