#!/usr/bin/env bash
# Fetch the one JavaScript bundle the site serves itself: mermaid, pinned by version and checksum.
#
# Material for MkDocs loads mermaid from unpkg.com at run time unless the page already defines
# `mermaid`; mkdocs.yml loads this copy first (extra_javascript), so diagrams render with no
# network. The bundle is 3 MB, too big to commit, so `make install` fetches it from npm (the
# tarball alone: `npm pack`, no dependency tree) into build/site-assets/, and the mkdocs hook
# scripts/site_hooks.py copies it into the built site. Idempotent: does nothing when present.
set -euo pipefail

MERMAID_VERSION=11.14.0  # Material 9.x asks for mermaid@11
MERMAID_INTEGRITY=sha512-GSGloRsBs+JINmmhl0JDwjpuezCsHB4WGI4NASHxL3fHo3o/BRXTxhDLKnln8/Q0lRFRyDdEjmk1/d5Sn1Xz8g==
destination=build/site-assets
marker="$destination/mermaid-$MERMAID_VERSION.installed"

[ -e "$marker" ] && [ -e "$destination/mermaid.min.js" ] && exit 0
if ! command -v npm >/dev/null 2>&1; then
  echo "npm is missing: install Node.js (Debian: apt-get install npm) and rerun make install" >&2
  exit 1
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent "mermaid@$MERMAID_VERSION" >/dev/null)
tarball="$work/mermaid-$MERMAID_VERSION.tgz"
actual="sha512-$(openssl dgst -sha512 -binary "$tarball" | base64 -w0)"
if [ "$actual" != "$MERMAID_INTEGRITY" ]; then
  echo "mermaid-$MERMAID_VERSION.tgz: checksum $actual, expected $MERMAID_INTEGRITY" >&2
  exit 1
fi
tar -xzf "$tarball" -C "$work" package/dist/mermaid.min.js
mkdir -p "$destination"
mv "$work/package/dist/mermaid.min.js" "$destination/mermaid.min.js.tmp"
mv "$destination/mermaid.min.js.tmp" "$destination/mermaid.min.js"
rm -f "$destination"/mermaid-*.installed
touch "$marker"
echo "installed mermaid $MERMAID_VERSION into $destination/" >&2
