# The README's two commands (`make serve`, `make test`) and the benchmark targets.
# Everything Python goes into .venv/; Debian packages are installed only where missing.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)
# Python caches compiled bytecode (__pycache__/, ignored by git) even where the environment says not to (this
# machine sets PYTHONDONTWRITEBYTECODE=1): `make test` starts Python some hundreds of times, and without the cache
# each start compiles the harness again (bench.py --help: 0.46 CPU-seconds, 0.28 with it) and each test worker
# rewrites every test module's asserts again.
unexport PYTHONDONTWRITEBYTECODE

.PHONY: install serve site check test bench bench-quick free-threaded-python free-threaded-bench render lock clean

# uv installs the locked packages in about 6 s where pip took 27 s here (the same 122 packages, plus uv itself).
$(VENV)/.installed: requirements.lock
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet uv==0.13.9
	$(PY) -m uv pip install --quiet --python $(PY) -r requirements.lock
	touch $@

install: $(VENV)/.installed
	scripts/install_system_packages.sh
	scripts/install_actionlint.sh
	scripts/install_vegeta.sh
	scripts/install_site_assets.sh

serve: install  ## build the site from the committed results and serve it at http://127.0.0.1:8800/ (8000 is the servers' port)
	$(PY) -m mkdocs build --strict
	$(PY) -m mkdocs serve --dev-addr 127.0.0.1:8800

site: install
	$(PY) -m mkdocs build --strict

# The fast tier (tests/tiers.py): no process started (a test that starts one fails there), so it needs only the
# Python packages: the layers, the typed records and settings, the catalogue, every renderer and `render --check`'s
# comparison, the pages' Markdown. About 30 s here; run it after every change, `make test` before a commit.
check: $(VENV)/.installed  ## the fast tier: every test that starts no process (tests/tiers.py), under a minute
	$(PY) -m pytest -m check -q

# Four workers (pytest-xdist): three took 775 s beside a busy loop, each worker busy for 710 s, mostly waiting on
# servers; four took 589 and 558 s there (fresh clones, about 750 CPU-seconds on the 1.5 CPUs the loop leaves, the
# four workers busy until within 2 s of each other), so a fifth would not help. The reload test that once failed on
# four passed 8 of 8 beside three busy loops.
# Tests that share an expensive module fixture share a worker (conftest.py); tests marked `alone` measure how many
# CPUs a server uses at once, so they run afterwards, by themselves: from the one file that has them (collecting
# every test to find them took 15 s; tests/project/test_tiers.py fails if another file gains one).
TEST_WORKERS ?= 4
test: install  ## every test: servers, harness, tables, docs, code blocks, workflows
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadgroup -m "not alone" --durations=15
	$(PY) -m pytest -m alone tests/servers/test_work.py

bench: install  ## what .github/workflows/bench.yml does: two full runs (the second checks the first), the other suites, the tables
	scripts/refresh_benchmarks.sh $(PY)

# Free-threaded Python (docs/free-threaded.md): CPython 3.13.5 built twice from Debian's release tarball, with
# and without the GIL, into ~/.cache/many-clients (about 7 minutes on two CPUs; nothing when both exist).
free-threaded-python:  ## build CPython 3.13.5 and 3.13.5t (free-threaded) with the servers they run
	scripts/build_free_threaded_python.sh

# Which dependencies turn the GIL back on (minutes: source builds), then the three workloads, each a pair of
# builds measured round robin (about 6 minutes each). Records in results/free-threaded/.
free-threaded-bench: $(VENV)/.installed free-threaded-python  ## measure GIL against no GIL (about 25 minutes)
	$(PY) scripts/bench.py gil-dependencies
	for workload in cpu mixed hello; do \
	  $(PY) scripts/bench.py run --scenario free-threaded-3.13-$$workload --out results/free-threaded || exit $$?; \
	done

bench-quick: install
	$(PY) scripts/bench.py run --quick

render: install
	$(PY) scripts/bench.py render

lock:  ## re-pin requirements.lock from requirements.in
	rm -rf build/lock-venv && $(PYTHON) -m venv build/lock-venv
	build/lock-venv/bin/pip install --quiet -r requirements.in
	build/lock-venv/bin/pip freeze --exclude-editable > requirements.lock

clean:
	rm -rf build site
