#!/usr/bin/env bash
# Install the Debian packages the benchmarks and the browser tests need, only where a command is missing.
# Runs apt-get as root, or through sudo; says what to do when neither is possible.
set -euo pipefail

declare -A package_for=(
  [ab]=apache2-utils
  [hey]=hey
  [wrk]=wrk
  [nginx]=nginx
  [taskset]=util-linux
  [ss]=iproute2
  [nc]=netcat-openbsd  # the pages send hand-made requests with nc
  [npm]=npm            # fetches the site's pinned mermaid bundle (scripts/install_site_assets.sh)
  [chromium]=chromium  # the browser tests (tests/site/test_browser.py) drive it through Playwright
  [valgrind]=valgrind  # callgrind counts instructions per request (bench.py instructions)
  [strace]=strace      # the timeline scenario traces the server's system calls (harness/system/syscall_trace.py)
)
missing=()
for command in "${!package_for[@]}"; do
  command -v "$command" >/dev/null 2>&1 || missing+=("${package_for[$command]}")
done
# nginx's echo module (echo_sleep) is a file, not a command.
[ -e /usr/lib/nginx/modules/ngx_http_echo_module.so ] || missing+=(libnginx-mod-http-echo)
# PostgreSQL's server programs (initdb, pg_ctl, postgres) are not on PATH in Debian: they live in a versioned
# directory. scripts/harness/system/postgres.py starts a scratch cluster with them (the database designs).
compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || missing+=(postgresql)

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "missing: ${missing[*]}; this is not a Debian-like system, install them with your package manager" >&2
  exit 1
fi
if [ "$(id -u)" -eq 0 ]; then
  run_as_root=()
elif command -v sudo >/dev/null 2>&1; then
  run_as_root=(sudo)
else
  echo "missing: ${missing[*]}; run as root: apt-get install ${missing[*]}" >&2
  exit 1
fi
echo "installing Debian packages: ${missing[*]}" >&2
"${run_as_root[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${run_as_root[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
