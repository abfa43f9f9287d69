#!/usr/bin/env bash
# The static checks CI runs before the tests (scripts/test.sh calls this): formatting, lint, and
# the type checks of the tenxgraph package (mypy --strict and pyright basic, both configured in
# pyproject.toml). Stops at the first failure with one line naming the check and how to rerun it.
# Expects the dev extras in .venv (`.venv/bin/pip install -e ".[dev]"`).
set -uo pipefail
cd "$(dirname "$0")/.."

check() {
  local name=$1
  shift
  if ! "$@"; then
    echo "static check failed: ${name} (rerun: $*)" >&2
    exit 1
  fi
}

check "formatting (ruff format --check)" .venv/bin/ruff format --check .
check "lint (ruff check)" .venv/bin/ruff check .
check "types (mypy --strict)" .venv/bin/mypy
check "types (pyright basic)" .venv/bin/pyright
echo "static checks passed: ruff format, ruff check, mypy --strict, pyright"
