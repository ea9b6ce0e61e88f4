"""The benchmark harness behind scripts/bench.py, in five layers; imports point down only.

    bench.py            the one entry point: one table of subcommands (list, scenarios, serve, check,
       │                run, restart, balance, gil-dependencies, render, new-design, hostile, how-fast,
       │                idle, instructions, conformance, deployment, recipe, streaming) and their exit codes
       ├──────────────┐
    suites/        render/     suites measure and write records (plan, measure, record);
       │              │        render turns records into the site's files and never measures
    clients/          │        probes, verification, the load tools' adapters (clients/tools/)
       │              │
    system/           │        processes and their groups, ports, CPU pinning, samples of a
       │              │        process group, the one launcher of designs (system/launcher.py)
    model/ ◄──────────┘        the catalogue (scripts/catalogue/*.toml), settings, records, statistics

Theory of operation: the catalogue names designs and scenarios as data. bench.py turns the command
line into a suite's Plan and calls its measure_plan (suites/__init__.py: the one shape). A suite starts a
design through the launcher (its own process group, stopped as the design declares whatever
happens), verifies that it answers correctly, drives a load tool against it, and writes its
record to results/ in one atomic write. render/site.py's registry (RENDERERS) turns records into
the Markdown tables and plots the pages include; `render --check` fails on a stale file.
tests/harness/test_layers.py keeps the layers, the one launcher and the registry as drawn here.
"""
