#!/usr/bin/env bash
# Make the environment the harness starts servers with on one CPython of the free-threaded comparison:
#
#   scripts/free_threaded_environment.sh NAME INTERPRETER [GRANIAN_VERSION]
#                                          (NAME as the catalogue's `python` says it: 3.13.5t)
#
# It lands in $MANY_CLIENTS_CACHE (default ~/.cache/many-clients)/venvs/NAME, where launcher.interpreter
# looks first. It holds the real servers the comparison measures, at the versions requirements.lock pins
# (pure Python, or with a free-threaded wheel: Granian), and the .pth hook through which every server
# started from it says whether it holds the GIL (scripts/harness/system/gil_report.py). The optional
# C extensions (uvloop, httptools, gevent, psycopg-binary) stay out: `bench.py gil-dependencies` tries
# them in scratch environments, so none can turn the GIL on in a measured server.
# Granian is Rust, and its source build fetches a crate from GitHub: where the pinned release has no wheel
# for this interpreter (2.8.7 has none for 3.13t), the newest release up to the pin that has one is taken,
# or GRANIAN_VERSION exactly, so that both builds of a pair run the same Granian. The script prints it.
# scripts/build_free_threaded_python.sh runs it for 3.13.5 and 3.13.5t; the bench workflow for 3.14 and 3.14t.
set -euo pipefail
if [ $# -lt 2 ] || [ $# -gt 3 ]; then
  echo "usage: $0 NAME INTERPRETER [GRANIAN_VERSION]   (for example: $0 3.14t /opt/hostedtoolcache/Python/3.14.0/x64-freethreaded/bin/python3.14t)" >&2
  exit 2
fi
name=$1 interpreter=$2 granian=${3:-}
repo="$(cd "$(dirname "$0")/.." && pwd)"
venv="${MANY_CLIENTS_CACHE:-$HOME/.cache/many-clients}/venvs/$name"
servers=(gunicorn waitress uvicorn h11)
pinned_granian=$(sed -n 's/^granian==//p' "$repo/requirements.lock")
rm -rf "$venv"
"$interpreter" -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip
# -c: the versions the rest of the site measures, and nothing else from the lock file.
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -c "$repo/requirements.lock" "${servers[@]}"
if [ -n "$granian" ]; then spec="granian==$granian"; else spec="granian<=$pinned_granian"; fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --only-binary granian "$spec"
"$venv/bin/python" "$repo/scripts/harness/system/gil_report.py" \
  "$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')" >/dev/null
touch "$venv/.installed"
"$venv/bin/python" -c 'import importlib.metadata as m, sys
print(sys.executable, sys.version.split()[0], "GIL enabled:", getattr(sys, "_is_gil_enabled", lambda: True)(),
      "granian", m.version("granian"))'
