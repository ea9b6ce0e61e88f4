"""Suites: each measurement the harness makes, as plan, measure, write a record. The scenario
runner (plan.py, runner.py) and the suites with their own shape of record: balance, restart,
hostile, how-fast, idle. Every suite is a `bench.py` subcommand; none renders. Imports the model,
the system and the clients."""
