"""What we change in the real servers: every setting that is not the server's documented default, and why.

Read from scripts/catalogue/real-servers/settings.toml (its header says how the defaults were
read). Real servers run at their defaults unless a scenario is about a setting; this list is
the disclosure of everything else, shown on the methodology page and checked by
tests/servers/test_real_server_settings.py against the configuration files and catalogue commands.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

from harness.model.catalogue import CATALOGUE_DIR

SETTINGS_FILE = CATALOGUE_DIR / "real-servers" / "settings.toml"
FIELDS = ("setting", "ours", "default", "why")


@dataclass(frozen=True)
class ChangedSetting:
    setting: str
    ours: str
    default: str
    why: str


@dataclass(frozen=True)
class RealServer:
    name: str
    where: str
    plumbing: tuple[str, ...]  # options that only say where to listen, what to load, where to write
    settings: tuple[ChangedSetting, ...]

    def setting(self, name: str) -> ChangedSetting | None:
        return next((setting for setting in self.settings if setting.setting == name), None)


def load_real_servers(path: Path = SETTINGS_FILE) -> dict[str, RealServer]:
    """Server name -> what we set; a malformed entry is an error naming the file and the entry."""
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    servers = {}
    for entry in data.get("server", []):
        settings = []
        for item in entry.get("settings", []):
            if set(item) != set(FIELDS):
                raise ValueError(f"{path}: server {entry.get('name')!r}: a setting needs exactly {', '.join(FIELDS)}: "
                                 f"{item}")
            settings.append(ChangedSetting(**{key: str(item[key]) for key in FIELDS}))
        servers[entry["name"]] = RealServer(entry["name"], entry["where"], tuple(entry.get("plumbing", [])),
                                            tuple(settings))
    return servers
