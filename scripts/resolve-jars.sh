#!/usr/bin/env bash
# Resolve the pinned Java jars (include/maven/*.pom.xml) into .jars/<name>/ with mvn, and check
# each jar against include/maven/jars.sha256. Runs again only when a pom or the lock changed
# (stamp: .jars/.pins). Nothing half-resolved is left: jars land in a temporary folder, are
# checked, and only then replace .jars/<name>/.
# Usage: scripts/resolve-jars.sh [--update-lock]   (--update-lock: write the lock from what mvn resolved)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

update=0
for arg in "$@"; do
  case "$arg" in
    --update-lock) update=1 ;;
    *) echo "usage: scripts/resolve-jars.sh [--update-lock]" >&2; exit 2 ;;
  esac
done
log() { printf '[jars] %s\n' "$*"; }
lock=include/maven/jars.sha256
stamp=.jars/.pins
want=$( (cat include/maven/*.pom.xml "$lock" 2>/dev/null || true) | sha256sum | cut -d' ' -f1)
if [ "$update" = 0 ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
  exit 0
fi
command -v mvn >/dev/null || { echo "[jars] mvn (Maven 3) is required to resolve Kafka's and Spark's Kafka jars: apt-get install -y maven" >&2; exit 1; }
mkdir -p .jars
tmp=$(mktemp -d .jars/.resolve.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
for pom in include/maven/*.pom.xml; do
  name=$(basename "$pom" .pom.xml)
  log "resolving $name (mvn dependency:copy-dependencies) ..."
  # -C: fail on a checksum the repository publishes that does not match
  if ! mvn -B -q -C -f "$pom" dependency:copy-dependencies -DoutputDirectory="$PWD/$tmp/$name" >"$tmp/$name.log" 2>&1; then
    cat "$tmp/$name.log" >&2
    echo "[jars] mvn could not resolve $pom (above); is the Maven repository reachable?" >&2
    exit 1
  fi
done
if [ "$update" = 1 ]; then
  (cd "$tmp" && find . -name '*.jar' | sed 's|^\./||' | sort | xargs sha256sum) > "$lock"
  log "wrote $lock ($(wc -l < "$lock") jars)"
  want=$(cat include/maven/*.pom.xml "$lock" | sha256sum | cut -d' ' -f1)
else
  got=$(cd "$tmp" && find . -name '*.jar' | sed 's|^\./||' | sort)
  expected=$(cut -d' ' -f3 "$lock" | sort)
  if [ "$got" != "$expected" ]; then
    echo "[jars] the resolved jars differ from $lock:" >&2
    diff <(echo "$expected") <(echo "$got") >&2 || true
    echo "[jars] a pom changed without its lock: run scripts/resolve-jars.sh --update-lock and commit $lock" >&2
    exit 1
  fi
  if ! (cd "$tmp" && sha256sum --quiet -c "$root/$lock") >&2; then
    echo "[jars] checksum mismatch against $lock (above): nothing was installed; a tampered or corrupt download, or a pin changed without its lock (scripts/resolve-jars.sh --update-lock)" >&2
    exit 1
  fi
fi
for dir in "$tmp"/*/; do
  name=$(basename "$dir")
  rm -rf ".jars/$name"
  mv "$dir" ".jars/$name"
done
echo "$want" > "$stamp"
log "ready: $(find .jars -name '*.jar' | wc -l) jars under .jars/"
