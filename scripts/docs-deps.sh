#!/usr/bin/env bash
# What the documentation tests need besides Python packages (idempotent; quick when present):
# - Chromium from Debian's packages, for the headless-browser test of the built site;
# - mermaid.min.js from the npm registry, so the site renders its diagrams without fetching a
#   script from a CDN (kept in .cache/docs/, not committed; scripts/mkdocs_hooks.py ships it).
set -euo pipefail
cd "$(dirname "$0")/.."
MERMAID_VERSION=11.17.2

if ! command -v chromium >/dev/null 2>&1; then
  echo "installing chromium"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq chromium >/dev/null
fi

target=.cache/docs/mermaid.min.js
if [ ! -s "$target" ] || ! grep -q "$MERMAID_VERSION" .cache/docs/mermaid.version 2>/dev/null; then
  echo "fetching mermaid $MERMAID_VERSION"
  tmp=$(mktemp -d)
  (cd "$tmp" && npm pack "mermaid@$MERMAID_VERSION" --silent >/dev/null)
  mkdir -p .cache/docs
  tar -xzf "$tmp"/mermaid-*.tgz -C "$tmp" package/dist/mermaid.min.js package/LICENSE
  cp "$tmp/package/dist/mermaid.min.js" "$target"
  cp "$tmp/package/LICENSE" .cache/docs/mermaid.LICENSE
  echo "$MERMAID_VERSION" > .cache/docs/mermaid.version
  rm -rf "$tmp"
fi
