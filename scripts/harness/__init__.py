"""The benchmark harness behind scripts/bench.py.

Theory of operation: the catalogue (scripts/catalogue.toml) names designs and
scenarios as data. `runner` starts a design in its own process group, verifies
that it answers correctly, drives a load tool against it, and stops it whatever
happens. Each scenario's records go to results/<scenario>.json in one atomic
write. `render` turns records into the Markdown tables the pages include; it
never measures, and the runner never formats tables.
"""
