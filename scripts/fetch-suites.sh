#!/usr/bin/env bash
# Fetch and build the clients' own share-group test suites (issue 28) into a cache outside git,
# $SAMSA_CACHE/suites (SAMSA_CACHE defaults to ~/.cache/samsa); compat-tests/client_suites.py runs
# them against a broker. Idempotent: a suite whose stamp matches its version and build settings is
# left alone, so nothing downloads or compiles once the cache is warm.
#   scripts/fetch-suites.sh                      both
#   scripts/fetch-suites.sh librdkafka franz-go  these
# Prints each suite's directory.
#
# librdkafka v2.15.0: the GitHub tarball of the tag (its commit checked with git get-tar-commit-id),
#   built as its tests/README.md says: ./configure, make, make -C tests build, into
#   suites/librdkafka-2.15.0 (tests/test-runner, run with LD_LIBRARY_PATH=src:src-cpp).
#   SAMSA_LIBRDKAFKA_GIT=DIR takes the tag from a local clone (git archive) instead of GitHub.
# franz-go v1.22.3: `go mod download` into suites/gomod (a GOMODCACHE of its own), then its kgo
#   package's test binary, `go test -c`, into suites/franz-go-v1.22.3/kgo.test.
# SAMSA_SUITES_JOBS: make's parallelism (default 2).
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE="${SAMSA_CACHE:-$HOME/.cache/samsa}/suites"
JOBS="${SAMSA_SUITES_JOBS:-2}"

LIBRDKAFKA_VERSION=2.15.0
LIBRDKAFKA_COMMIT=9a94e11452cdeb0a844db44ee5dd01ccbe17d3ab
# As librdkafka's CI job for the share consumer configures it (.semaphore/semaphore.yml: --enable-devel,
# its asserts on), with zstd (0171 produces with every codec; libzstd-dev from apt) and without the
# optional libraries no share test uses, so that the build is the same on every machine: GSSAPI
# (libsasl2), OIDC (libcurl). LZ4 is librdkafka's own copy; zlib and OpenSSL are used if present.
# RapidJSON (rapidjson-dev from apt, headers only) for the broker suite's C++ tests: without it
# 0053_stats, 0098_consumer_txn, 0101_fetch_from_follower and 0110_batch_size skip themselves.
LIBRDKAFKA_CONFIGURE=(--enable-devel --enable-zstd --disable-gssapi --disable-curl --disable-lz4-ext)
FRANZ_GO_VERSION=v1.22.3

mkdir -p "$CACHE"

stamp_ok() { [ "$(cat "$1/.stamp" 2>/dev/null)" = "$2" ]; }

fetch_librdkafka() {
  local dir="$CACHE/librdkafka-$LIBRDKAFKA_VERSION"
  local stamp="v$LIBRDKAFKA_VERSION $LIBRDKAFKA_COMMIT ${LIBRDKAFKA_CONFIGURE[*]} rapidjson"
  if stamp_ok "$dir" "$stamp"; then echo "$dir"; return; fi
  local tarball="$CACHE/downloads/librdkafka-v$LIBRDKAFKA_VERSION.tar.gz"
  mkdir -p "$CACHE/downloads"
  if [ ! -s "$tarball" ]; then
    echo "fetch-suites: librdkafka v$LIBRDKAFKA_VERSION -> $tarball" >&2
    if [ -n "${SAMSA_LIBRDKAFKA_GIT:-}" ]; then
      git -C "$SAMSA_LIBRDKAFKA_GIT" archive --format=tar.gz --prefix="librdkafka-$LIBRDKAFKA_VERSION/" \
          "v$LIBRDKAFKA_VERSION" > "$tarball.tmp"
    else
      curl -sSfL -o "$tarball.tmp" \
          "https://github.com/confluentinc/librdkafka/archive/refs/tags/v$LIBRDKAFKA_VERSION.tar.gz"
    fi
    mv "$tarball.tmp" "$tarball"
  fi
  local commit
  commit="$(gunzip -c "$tarball" | git get-tar-commit-id || true)"
  if [ "$commit" != "$LIBRDKAFKA_COMMIT" ]; then
    echo "fetch-suites: $tarball is commit '$commit', not v$LIBRDKAFKA_VERSION's $LIBRDKAFKA_COMMIT" >&2
    rm -f "$tarball"
    exit 1
  fi
  if ! pkg-config --exists libzstd 2>/dev/null || [ ! -f /usr/include/rapidjson/schema.h ]; then
    SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends libzstd-dev pkg-config \
        rapidjson-dev >/dev/null
  fi
  echo "fetch-suites: building librdkafka v$LIBRDKAFKA_VERSION and its test-runner in $dir (make -j$JOBS)" >&2
  local tmp="$dir.tmp"
  rm -rf "$tmp"
  mkdir -p "$tmp"
  tar -xzf "$tarball" -C "$tmp" --strip-components=1
  (
    cd "$tmp"
    # (No file named configure.*: mklove takes one for a module of that name.)
    ./configure "${LIBRDKAFKA_CONFIGURE[@]}" > fetch-suites-configure.out 2>&1 || { tail -30 fetch-suites-configure.out >&2; exit 1; }
    make -j"$JOBS" libs > fetch-suites-build.out 2>&1 || { tail -30 fetch-suites-build.out >&2; exit 1; }
    make -j"$JOBS" -C tests build >> fetch-suites-build.out 2>&1 || { tail -30 fetch-suites-build.out >&2; exit 1; }
    grep -q '^WITH_RAPIDJSON=\s*y' Makefile.config || { echo "fetch-suites: configure found no rapidjson" >&2; exit 1; }
  )
  rm -rf "$dir"
  mv "$tmp" "$dir"
  echo "$stamp" > "$dir/.stamp"
  echo "$dir"
}

fetch_franz_go() {
  local dir="$CACHE/franz-go-$FRANZ_GO_VERSION"
  local stamp="$FRANZ_GO_VERSION"
  if stamp_ok "$dir" "$stamp" && [ -x "$dir/kgo.test" ]; then echo "$dir"; return; fi
  command -v go >/dev/null 2>&1 || { echo "fetch-suites: franz-go needs go on PATH" >&2; exit 1; }
  echo "fetch-suites: franz-go $FRANZ_GO_VERSION -> $dir/kgo.test" >&2
  # Its own module cache, writable (-modcacherw) so that the cache can be removed with rm -rf.
  export GOMODCACHE="$CACHE/gomod" GOFLAGS="-modcacherw -buildvcs=false"
  local src
  src="$(cd / && go mod download -json "github.com/twmb/franz-go@$FRANZ_GO_VERSION" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')"
  [ -d "$src/pkg/kgo" ] || { echo "fetch-suites: go mod download gave no franz-go source ($src)" >&2; exit 1; }
  mkdir -p "$dir"
  (cd "$src" && go mod download && go test -c -o "$dir/kgo.test.tmp" ./pkg/kgo)
  mv "$dir/kgo.test.tmp" "$dir/kgo.test"
  echo "$stamp" > "$dir/.stamp"
  echo "$dir"
}

suites=("$@")
[ ${#suites[@]} -gt 0 ] || suites=(librdkafka franz-go)
for suite in "${suites[@]}"; do
  case "$suite" in
    librdkafka) fetch_librdkafka ;;
    franz-go) fetch_franz_go ;;
    *) echo "fetch-suites: unknown suite $suite (librdkafka, franz-go)" >&2; exit 2 ;;
  esac
done
