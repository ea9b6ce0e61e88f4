"""Loads the code-block runner for README.md and docs/ (tests/conftest.py only reaches items under tests/)."""

pytest_plugins = ["tests.codeblock_runs"]
