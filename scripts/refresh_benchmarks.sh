#!/usr/bin/env bash
# Refresh every benchmark: a full run into results/, a second full run into results/rerun/ (the
# methodology page compares the two), then the tables and plots. `make bench` and
# .github/workflows/bench.yml both run this.
#
#   scripts/refresh_benchmarks.sh [PYTHON]      (default: .venv/bin/python)
#
# A design that fails (bench.py exits 1) is data, not a reason to stop: its record says why, the
# tables show it, and the other steps still run. The script then exits 1 at the end. Anything
# else (2: bad input, 3: a bug in the harness, 130: interrupted, or killed by a signal) stops at
# once with that exit code, so a Ctrl-C during the first run does not start the second.
set -u
python=${1:-.venv/bin/python}
status=0
for step in "run" "run --out results/rerun" "render"; do
    echo "+ $python scripts/bench.py $step" >&2
    # shellcheck disable=SC2086  # $step is several words on purpose
    "$python" scripts/bench.py $step
    code=$?
    if [ "$code" -eq 1 ]; then
        status=1
    elif [ "$code" -ne 0 ]; then
        echo "refresh_benchmarks: 'bench.py $step' exited $code; stopping" >&2
        exit "$code"
    fi
done
exit "$status"
