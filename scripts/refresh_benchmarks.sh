#!/usr/bin/env bash
# Refresh every benchmark: a full run into results/, a second full run into results/rerun/ (the
# methodology page compares the two), the suites that are not scenarios (the hostile clients,
# restarts under load and with requests in flight, the balance between workers, the How fast and
# Fast and correct steps, streams, conformance, the proxy race and overload, instruction counts),
# then the tables and plots. `make bench` and .github/workflows/bench.yml both run this.
#
#   scripts/refresh_benchmarks.sh [PYTHON]      (default: .venv/bin/python)
#
# A design that fails (exit 1) is data, not a reason to stop: its record says why, the tables
# show it, and the other steps still run. The script then exits 1 at the end. Anything else (2:
# bad input or a missing tool, 3: a bug in the harness, 130: interrupted, or killed by a signal)
# stops at once with that exit code, so a Ctrl-C during the first run does not start the second.
#
# Not refreshed here, and said so on their pages: the idle-connection records (one command per
# design, with its own keep-alive timeout: docs/keep-alive.md) and the profile behind the flame
# graph (py-spy needs ptrace rights a CI runner may not grant: docs/how-fast.md).
set -u
python=${1:-.venv/bin/python}
status=0
steps=(
    "scripts/bench.py run"
    "scripts/bench.py run --out results/rerun"
    "scripts/bench.py hostile"
    "scripts/bench.py restart"
    "scripts/bench.py restart --in-flight"
    "scripts/bench.py balance"
    "scripts/bench.py how-fast steps"
    "scripts/bench.py how-fast steps --chain fast-and-correct"
    "scripts/bench.py streaming"
    "scripts/bench.py conformance"
    "scripts/bench.py deployment race"
    "scripts/bench.py deployment overload"
    "scripts/bench.py instructions"
    "scripts/bench.py render"
)
for step in "${steps[@]}"; do
    echo "+ $python $step" >&2
    # shellcheck disable=SC2086  # $step is several words on purpose
    "$python" $step
    code=$?
    if [ "$code" -eq 1 ]; then
        status=1
    elif [ "$code" -ne 0 ]; then
        echo "refresh_benchmarks: 'bench.py $step' exited $code; stopping" >&2
        exit "$code"
    fi
done
exit "$status"
