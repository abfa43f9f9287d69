#!/usr/bin/env bash
# The whole test suite, as README.md documents it: a virtualenv in .venv, the package with its
# dev extras, the static checks (scripts/static-checks.sh: ruff format, ruff check, mypy, pyright;
# the first failure stops here), the PostgreSQL and Redis servers (started when not answering),
# Chromium and mermaid for the documentation tests (scripts/docs-deps.sh), then pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
.venv/bin/python -m pip install -q -e ".[dev]"
bash scripts/static-checks.sh
bash scripts/services.sh
bash scripts/docs-deps.sh
exec .venv/bin/python -m pytest -n 2 --dist loadfile "$@"
