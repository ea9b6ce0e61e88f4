#!/usr/bin/env bash
# Put vegeta (the constant-rate HTTP load tool the open-loop measurements use) into .venv/bin.
# Built from the Go module proxy (seconds); Go itself comes from Debian's golang-go where missing.
set -euo pipefail
version=v12.13.0
target="$(pwd)/.venv/bin"
# `go install` leaves vegeta -version empty; the module version is in the binary's build information.
if [ -x "$target/vegeta" ] && command -v go >/dev/null 2>&1 \
    && go version -m "$target/vegeta" | grep -q "mod.*tsenart/vegeta/v12.*${version}"; then
  exit 0
fi
if ! command -v go >/dev/null 2>&1; then
  echo "vegeta needs Go to build: apt-get install golang-go (or https://go.dev/dl/), then make install" >&2
  exit 1
fi
GOBIN="$target" GOFLAGS=-mod=mod go install "github.com/tsenart/vegeta/v12@${version}"
