"""The methodology page's table of what we change in the real servers (model/disclosed_settings.py)."""

from __future__ import annotations

from harness.model.disclosed_settings import RealServer


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def disclosed_settings_page(servers: dict[str, RealServer]) -> str:
    """One table per real server: every setting we give it that is not its default (or that we state), and why."""
    parts = []
    for server in servers.values():
        changed = sum(setting.ours.split(" (")[0] != setting.default.split(" (")[0] for setting in server.settings)
        rows = [f"| `{_cell(setting.setting)}` | {_cell(setting.ours)} | {_cell(setting.default)} | {_cell(setting.why)} |"
                for setting in server.settings]
        parts.append(f"**{server.name}** ({server.where}): {changed} of {len(server.settings)} settings differ from "
                     f"the default; the rest are stated.\n\n"
                     "| Setting | Ours | Default | Why |\n|---|---|---|---|\n" + "\n".join(rows) + "\n")
    return "\n".join(parts)
