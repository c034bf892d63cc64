#!/usr/bin/env bash
# Install what is missing, and nothing that is already there:
#   uv (into ~/.local/bin), Java 17 and Maven (Debian packages), the pinned Kafka and Spark-Kafka jars
#   (scripts/resolve-jars.sh, into .jars/), Debian's docker-compose client, PostgreSQL server and Chromium
#   (--test only),
#   and .venv from the hashed lock file requirements.lock (re-synced when the lock changes).
# Usage: scripts/bootstrap.sh [--test]
set -euo pipefail
cd "$(dirname "$0")/.."

want_test=0
for arg in "$@"; do
  case "$arg" in
    --test) want_test=1 ;;
    *) echo "usage: scripts/bootstrap.sh [--test]" >&2; exit 2 ;;
  esac
done

log() { printf '[bootstrap] %s\n' "$*"; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else
  echo "[bootstrap] need root to run: $*" >&2; return 1; fi; }
apt_install() {
  log "installing Debian packages: $*"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@" >/dev/null 2>&1 || {
    as_root apt-get update -q >/dev/null && as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@" >/dev/null; }
}

# -- Python 3.11 ---------------------------------------------------------------------------------
PY=""
for cand in python3.11 python3; do
  if command -v "$cand" >/dev/null && "$cand" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))'; then
    PY=$(command -v "$cand"); break
  fi
done
[ -n "$PY" ] || { echo "[bootstrap] Python 3.11 is required (python3.11 or python3 on PATH)" >&2; exit 1; }

# -- uv ------------------------------------------------------------------------------------------
export PATH="$HOME/.local/bin:$PATH"
if ! command -v uv >/dev/null; then
  log "installing uv"
  "$PY" -m pip install --user --quiet uv
fi
UV=$(command -v uv)

# -- Java 17+ ------------------------------------------------------------------------------------
java_major() { java -version 2>&1 | sed -nE 's/.*version "(1\.)?([0-9]+).*/\2/p' | head -1; }
if ! command -v java >/dev/null || [ "$(java_major)" -lt 17 ]; then
  apt_install openjdk-17-jre-headless
fi
# javac builds the plugin jar (streamops/spark/plugin: the warm-up plugin, the checkpoint file manager)
if ! command -v javac >/dev/null; then
  apt_install openjdk-17-jdk-headless
fi

# -- Maven, and the pinned jars: Apache Kafka (the embedded broker, its tools) and Spark's own
# Kafka connector (include/maven/*.pom.xml, checked against include/maven/jars.sha256) -----------
if ! command -v mvn >/dev/null; then
  apt_install maven
fi
scripts/resolve-jars.sh

# -- PostgreSQL's server, for the Airflow tests' metadata database (tests/fixtures/postgres.py) --
if [ "$want_test" = 1 ] && ! command -v initdb >/dev/null && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  apt_install postgresql
fi

# -- Debian's Chromium, for the Streams view's browser tests (Playwright drives it: no browser download) --
if [ "$want_test" = 1 ] && ! command -v chromium >/dev/null; then
  apt_install chromium
fi

# -- docker compose client, for the test that validates docker-compose.yaml ---------------------
if [ "$want_test" = 1 ] && ! docker compose version >/dev/null 2>&1 && ! command -v docker-compose >/dev/null; then
  apt_install docker-compose
fi

# -- .venv from the lock -------------------------------------------------------------------------
stamp=.venv/.streamops-lock
bytecode=.venv/.streamops-bytecode
want=$(cat requirements.lock pyproject.toml | sha256sum | cut -d' ' -f1)
if [ ! -x .venv/bin/python ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  log "creating .venv from requirements.lock"
  [ -x .venv/bin/python ] || "$UV" venv --quiet --python "$PY" .venv
  "$UV" pip sync --quiet --python .venv/bin/python --compile-bytecode --require-hashes requirements.lock
  "$UV" pip install --quiet --python .venv/bin/python --no-deps -e .
  echo "$want" > "$stamp"
  echo "$want" > "$bytecode"
fi
# Bytecode, once per lock: with PYTHONDONTWRITEBYTECODE set (as on these machines) Python never
# writes .pyc, so every driver, Spark Python worker, CLI call and Airflow task would compile its
# imports from source (about 4 s of each driver start). A venv synced before this line gets it here.
if [ "$(cat "$bytecode" 2>/dev/null)" != "$want" ]; then
  log "compiling .venv's bytecode (once) ..."
  .venv/bin/python -m compileall -q -j0 .venv/lib >/dev/null || true
  echo "$want" > "$bytecode"
fi
# the project's own modules (Spark's Python workers import them too); a no-op when up to date
.venv/bin/python -m compileall -q -j0 streamops jobs >/dev/null || true
log "ready: .venv ($(.venv/bin/python --version)), java $(java_major), uv $("$UV" --version | cut -d' ' -f2)"
