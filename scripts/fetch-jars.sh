#!/usr/bin/env bash
# Fetch the Java artifacts that jars/pom.xml names into a cache outside git, one directory per
# profile: $SAMSA_CACHE/<profile> (SAMSA_CACHE defaults to ~/.cache/samsa). Maven's own
# repository is kept there too ($SAMSA_CACHE/m2). Idempotent: a directory whose stamp matches its
# profile in the pom (the profile's block and the version properties) is left alone, so nothing
# downloads once the cache is warm, and adding a profile does not fetch the others again.
#   scripts/fetch-jars.sh                 every profile
#   scripts/fetch-jars.sh kafka4 kafka39  these profiles
# Prints each profile's directory (the class path is DIR/*).
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE="${SAMSA_CACHE:-$HOME/.cache/samsa}"
POM=jars/pom.xml
PLUGIN=org.apache.maven.plugins:maven-dependency-plugin:3.8.1  # older ones drop runtime-scoped jars
profiles=("$@")
[ ${#profiles[@]} -gt 0 ] || profiles=($(sed -n 's:.*<id>\(.*\)</id>.*:\1:p' "$POM"))

if ! command -v mvn >/dev/null 2>&1 || ! command -v java >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends openjdk-17-jdk-headless maven >/dev/null
fi

profile_stamp() {  # the <properties> block and the named <profile> block, hashed
  awk -v id="<id>$1</id>" '
    /<properties>/ { props = 1 } props { print } /<\/properties>/ { props = 0 }
    /<profile>/ { block = ""; inside = 1 } inside { block = block $0 "\n" }
    /<\/profile>/ { inside = 0; if (index(block, id)) printf "%s", block }' "$POM" | sha256sum | cut -c1-16
}

for profile in "${profiles[@]}"; do
  dir="$CACHE/$profile"
  stamp="$(profile_stamp "$profile")"
  grep -q "<id>$profile</id>" "$POM" || { echo "fetch-jars: no profile $profile in $POM" >&2; exit 2; }
  if [ "$(cat "$dir/.stamp" 2>/dev/null)" != "$stamp" ]; then
    echo "fetch-jars: $profile -> $dir" >&2
    rm -rf "$dir.tmp"
    mvn -q -B -f "$POM" -P "$profile" -Dmaven.repo.local="$CACHE/m2" \
        "$PLUGIN:copy-dependencies" -DoutputDirectory="$dir.tmp" >&2
    rm -rf "$dir"
    mv "$dir.tmp" "$dir"
    echo "$stamp" > "$dir/.stamp"
  fi
  echo "$dir"
done
