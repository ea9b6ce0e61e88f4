"""Where the repository is: every path the harness reads or writes starts here."""

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[3]
