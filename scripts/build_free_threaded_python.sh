#!/usr/bin/env bash
# Build CPython 3.13.5 twice from one release tarball, with the GIL and without (--disable-gil),
# and give each a virtual environment with the servers the free-threaded measurements start.
#
#   scripts/build_free_threaded_python.sh        (or: make free-threaded-python)
#
# No package registry serves a free-threaded interpreter for this machine, but Debian's source
# archive serves the release tarball: a sources file of our own (never the system's) with a deb-src
# line for Debian 13 "trixie", then `apt-get source --download-only python3.13` fetches
# python3.13_3.13.5.orig.tar.xz. Both builds come from that one file, so the only difference
# between them is the GIL. Everything lives outside the repository, in
#   $MANY_CLIENTS_CACHE (default ~/.cache/many-clients)/cpython-3.13.5/{gil,free-threaded}/  the installs
#   $MANY_CLIENTS_CACHE/venvs/{3.13.5,3.13.5t}/   the environments the harness starts servers with
#                                                 (scripts/free_threaded_environment.sh: the servers, the GIL hook)
# A second run finds both and does nothing. Each build takes about 3.5 minutes on two CPUs (make -j2);
# the times are printed and kept in cpython-3.13.5/build-times.txt.
# MANY_CLIENTS_DEBIAN_MIRROR replaces http://deb.debian.org/debian (the tests point it nowhere).
# MANY_CLIENTS_BUILD_RECORD=PATH also writes how long each step took as JSON (atomically), for the page: a build
# from a fresh clone with an empty cache:
#   MANY_CLIENTS_CACHE=$(mktemp -d) MANY_CLIENTS_BUILD_RECORD=results/free-threaded/build.json make free-threaded-python
set -euo pipefail

version=3.13.5
cache="${MANY_CLIENTS_CACHE:-$HOME/.cache/many-clients}"
root="$cache/cpython-$version"
mirror="${MANY_CLIENTS_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
repo="$(cd "$(dirname "$0")/.." && pwd)"
record="${MANY_CLIENTS_BUILD_RECORD:-}"
declare -A seconds_of=()  # step -> seconds, for the record
declare -A prefix=([gil]="$root/gil" [free-threaded]="$root/free-threaded")
declare -A executable=([gil]="$root/gil/bin/python3.13" [free-threaded]="$root/free-threaded/bin/python3.13t")
declare -A venv=([gil]="$cache/venvs/$version" [free-threaded]="$cache/venvs/${version}t")
declare -A configure_flags=([gil]="" [free-threaded]="--disable-gil")

elsewhere() {
  cat >&2 <<EOF
Elsewhere, get a free-threaded CPython the ordinary way instead of building one:
  uv python install 3.14t     (uv's own builds; then: uv venv --python 3.14t)
  pyenv install 3.14.0t       (pyenv's free-threaded versions end in t: 3.13.0t, 3.14.0t, 3.14t-dev;
                               pyenv install --list | grep 't$' shows them)
  GitHub Actions: actions/setup-python with python-version: 3.14t
then scripts/free_threaded_environment.sh NAME INTERPRETER gives it the servers the comparison runs.
EOF
}

built() {
  [ -x "${executable[$1]}" ] && [ -x "${venv[$1]}/bin/python" ] && [ -f "${venv[$1]}/.installed" ] \
    && compgen -G "${venv[$1]}/lib/python3.13*/site-packages/many_clients_gil_report.pth" >/dev/null
}

if built gil && built free-threaded; then
  echo "CPython $version (GIL and free-threaded) already built in $root; nothing to do."
  exit 0
fi

fetch_tarball() {
  local apt="$root/apt" scratch="$root/download"
  mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial" "$scratch"
  echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror trixie main" > "$apt/sources.list"
  # Our own sources file, lists and cache, so the system's apt configuration is neither read nor changed.
  local options=(-o "Dir::Etc::SourceList=$apt/sources.list" -o Dir::Etc::SourceParts=/dev/null
                 -o "Dir::State::Lists=$apt/lists" -o "Dir::Cache=$apt/cache" -o APT::Sandbox::User=root
                 -o Acquire::Retries=1
                 -o Acquire::http::Timeout=20)
  if ! apt-get "${options[@]}" -q update >"$apt/update.log" 2>&1 \
      || ! (cd "$scratch" && apt-get "${options[@]}" -q source --download-only python3.13) >"$apt/source.log" 2>&1 \
      || [ ! -f "$scratch/python3.13_$version.orig.tar.xz" ]; then
    echo "Could not fetch the CPython $version source (python3.13_$version.orig.tar.xz) from Debian's" >&2
    echo "source archive ($mirror, trixie main); apt said:" >&2
    { tail -q -n 5 "$apt/update.log" "$apt/source.log" 2>/dev/null || true; } | sed 's/^/  /' >&2
    echo "Debian trixie may have moved on from $version, or the archive cannot be reached from here." >&2
    elsewhere
    exit 1
  fi
}

build() {
  local kind=$1 started seconds
  [ -x "${executable[$kind]}" ] && return 0
  started=$(date +%s)
  rm -rf "$root/build-$kind" && mkdir -p "$root/build-$kind"
  echo "Building CPython $version ($kind${configure_flags[$kind]:+, ${configure_flags[$kind]}}) into ${prefix[$kind]} ..."
  (cd "$root/build-$kind" \
    && "$root/src/Python-$version/configure" --prefix="${prefix[$kind]}" ${configure_flags[$kind]} >configure.log 2>&1 \
    && make -j2 >make.log 2>&1 && make install >install.log 2>&1) \
    || { echo "The $kind build failed: see $root/build-$kind/*.log" >&2; exit 1; }
  seconds=$(( $(date +%s) - started ))
  seconds_of[$kind]=$seconds
  echo "$kind: built in ${seconds} s (configure, make -j2, make install)" | tee -a "$root/build-times.txt"
}

environment() {  # KIND [GRANIAN_VERSION]
  built "$1" || "$repo/scripts/free_threaded_environment.sh" "$(basename "${venv[$1]}")" "${executable[$1]}" "${2:-}"
}

began=$(date +%s) began_utc=$(date -u +%Y-%m-%dT%H:%M:%SZ)
if [ ! -d "$root/src/Python-$version" ]; then
  [ -f "$root/download/python3.13_$version.orig.tar.xz" ] || fetch_tarball
  mkdir -p "$root/src"
  tar -xJf "$root/download/python3.13_$version.orig.tar.xz" -C "$root/src"
fi
seconds_of[source]=$(( $(date +%s) - began ))
started=$(date +%s)
for kind in gil free-threaded; do build "$kind"; done
environments_started=$(date +%s)
# The free-threaded environment first: the Granian it can get (a wheel) is the one both get.
environment free-threaded
environment gil "$("${venv[free-threaded]}/bin/python" -c 'import importlib.metadata as m; print(m.version("granian"))')"
seconds_of[environments]=$(( $(date +%s) - environments_started ))
echo "Done in $(( $(date +%s) - started )) s. Interpreters: ${venv[gil]}/bin/python (GIL), ${venv[free-threaded]}/bin/python (free-threaded)."
if [ -n "$record" ]; then  # the steps' times, written whole or not at all (a temporary file, then a rename)
  "${executable[gil]}" - "$record" "$version" "$began_utc" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
      "${seconds_of[source]}" "${seconds_of[gil]:-0}" "${seconds_of[free-threaded]:-0}" "${seconds_of[environments]}" \
      "$(git -C "$repo" rev-parse HEAD 2>/dev/null || echo unknown)" "$cache" <<'PY'
import json, os, platform, sys, tempfile
path, version, began, finished, source, gil, free, environments, commit, cache = sys.argv[1:]
model = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), "")
data = {"schema": 1, "kind": "free-threaded-build", "version": version, "started_utc": began, "finished_utc": finished,
        "seconds": {"source": int(source), "gil": int(gil), "free_threaded": int(free), "environments": int(environments)},
        "commit": commit, "cache": cache, "cpus": len(os.sched_getaffinity(0)), "cpu_model": model,
        "machine": platform.machine(), "make_jobs": 2}
folder = os.path.dirname(os.path.abspath(path))
os.makedirs(folder, exist_ok=True)
with tempfile.NamedTemporaryFile("w", dir=folder, delete=False, suffix=".tmp") as handle:
    json.dump(data, handle, indent=2)
    handle.write("\n")
os.replace(handle.name, path)
print(f"Build record: {path}")
PY
fi
"${venv[free-threaded]}/bin/python" -c 'import sys; print("free-threaded build, GIL enabled at start:", sys._is_gil_enabled())'
