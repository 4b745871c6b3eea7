#!/usr/bin/env bash
# Static checks: ruff over the repository (settings in pyproject.toml), mypy over the packages
# listed below (wire/ with its generated codecs, storage/, coordinator/, ...). Exits non-zero on any
# finding.
#   scripts/lint.sh          both
#   scripts/lint.sh ruff     one of them (or mypy)
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-.venv/bin/python}"
what="${1:-all}"
status=0

if [ "$what" = all ] || [ "$what" = ruff ]; then
  echo "ruff check"
  "$PY" -m ruff check --output-format concise . || status=1
fi

if [ "$what" = all ] || [ "$what" = mypy ]; then
  echo "mypy"
  # The repository root is the package `samsa` (pyproject's package-dir), and the editable install's
  # import hook is invisible to mypy: a symlink named samsa gives it the package's name. One fixed
  # directory per checkout, since mypy's cache remembers the paths it read.
  root="${TMPDIR:-/tmp}/samsa-lint-$(printf %s "$PWD" | md5sum | cut -c1-12)"
  mkdir -p "$root"
  ln -sfn "$PWD" "$root/samsa"
  targets=(-p samsa.wire -p samsa.storage -p samsa.coordinator -p samsa.client -p samsa.pipelines -p samsa.server
           -p samsa.cli)
  # Paths are shown relative to the repository, not through the symlink.
  MYPYPATH="$root" "$PY" -m mypy --cache-dir "$root/mypy-cache" "${targets[@]}" | sed "s#^$root/samsa/##" || status=1
fi
exit $status
