#!/usr/bin/env bash
# Set-up and the two main jobs, for a fresh machine with only python3, pip, node and npm.
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

case "${1:-}" in
  run)
    setup
    export KR_STATE="${KR_STATE:-.kr-state}"
    "$VENV/bin/kr" build knowledge
    echo
    echo '$ kr query "O que é APR?"'
    "$VENV/bin/kr" query "O que é APR?"
    echo
    echo "Serving on http://127.0.0.1:8787 — try:"
    echo "  curl -s -X POST http://127.0.0.1:8787/v1/query -H 'content-type: application/json' \\"
    echo "       -d '{\"query\": \"Qual a validade padrão da APR?\"}'"
    exec "$VENV/bin/kr" serve --host 127.0.0.1 --port 8787
    ;;
  test)
    setup
    "$VENV/bin/ruff" check src tests scripts bench
    "$VENV/bin/mypy" --no-error-summary
    "$PY" -m pytest
    ;;
  *)
    echo "usage: scripts/dev.sh run|test" >&2
    exit 2
    ;;
esac
