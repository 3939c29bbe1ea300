#!/usr/bin/env bash
# Side by side with SQLMesh (make sqlmesh-bench): builds gapless, installs
# SQLMesh into a cached virtual environment, runs harness.py.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
SQLMESH_VERSION=${SQLMESH_VERSION:-0.236.4}
venv=${SQLMESH_VENV:-$HOME/.cache/gapless/sqlmesh-venv}

if [ ! -x /usr/bin/time ]; then
  echo "installing GNU time (Debian's package 'time') for peak RSS"
  if [ "$(id -u)" = 0 ]; then apt-get install -y time >/dev/null || { apt-get update >/dev/null && apt-get install -y time >/dev/null; }
  else sudo apt-get install -y time >/dev/null; fi
fi

if ! "$venv/bin/python" -c "import sqlmesh, sys; sys.exit(sqlmesh.__version__ != '$SQLMESH_VERSION')" 2>/dev/null; then
  echo "installing SQLMesh $SQLMESH_VERSION into $venv (python3 -m venv, pip; once, about two minutes)"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "sqlmesh==$SQLMESH_VERSION"
fi

bin=$(mktemp -d)/gapless
trap 'rm -rf "$(dirname "$bin")"' EXIT
echo "building gapless (go build ./cmd/gapless)"
(cd "$repo" && go build -o "$bin" ./cmd/gapless)

"$venv/bin/python" "$here/harness.py" --gapless "$bin" "$@"
