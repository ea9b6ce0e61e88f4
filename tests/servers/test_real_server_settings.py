"""Real servers run at their documented defaults, and everything we change is disclosed (issue 20, finding 6).

scripts/catalogue/real-servers/settings.toml lists every setting we give a real server, with the
server's default and why. These checks read the real configuration files and catalogue commands
and fail on a setting the list does not have, or has with another value, and on any listen
backlog of ours. Each check is a function over files, also run on a broken copy to show it fails.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import gunicorn.config
import pytest
import waitress.adjustments
from harness.model.catalogue import load_catalogue
from harness.model.disclosed_settings import RealServer, load_real_servers
from harness.model.paths import REPO_ROOT

SERVERS = load_real_servers()
GUNICORN_CONFS = sorted((REPO_ROOT / "servers").glob("gunicorn_*.conf.py"))
NGINX_CONFS = [REPO_ROOT / "servers" / "nginx.conf", REPO_ROOT / "servers" / "nginx_keep_alive.conf"]
WAITRESS_RUNNER = REPO_ROOT / "servers" / "waitress_server.py"
NGINX_BLOCKS = {"events", "http", "server", "location", "if", "return"}


def gunicorn_settings(path: Path) -> dict[str, object]:
    """The settings a gunicorn configuration file assigns (it is Python: run it as gunicorn does)."""
    namespace: dict[str, object] = {"__file__": str(path)}
    exec(compile(path.read_text(encoding="utf-8"), str(path), "exec"), namespace)  # noqa: S102 - our own file
    return {name: value for name, value in namespace.items() if name in gunicorn.config.Config().settings}


def undisclosed_gunicorn(path: Path, server: RealServer) -> list[str]:
    defaults = gunicorn.config.Config().settings
    problems = []
    for name, value in gunicorn_settings(path).items():
        listed = server.setting(name)
        if name in server.plumbing:
            continue
        if listed is None:
            different = "differs from" if value != defaults[name].default else "equals"
            problems.append(f"{path.name}: {name} = {value!r} ({different} the default) is not listed")
        elif str(value) not in listed.ours:
            problems.append(f"{path.name}: {name} = {value!r}, but the list says {listed.ours!r}")
    return problems


def command_options(command: list[str]) -> dict[str, str | None]:
    """--option -> its value (None for a switch) in a catalogue command."""
    options: dict[str, str | None] = {}
    for index, part in enumerate(command):
        if part.startswith("--"):
            following = command[index + 1] if index + 1 < len(command) else None
            options[part] = None if following is None or following.startswith("--") or ":" in following else following
    return options


def undisclosed_options(command: list[str], server: RealServer) -> list[str]:
    problems = []
    for option, value in command_options(command).items():
        if option in server.plumbing:
            continue
        listed = server.setting(option)
        if listed is None:
            problems.append(f"{option} {value or ''} is not listed".replace("  ", " "))
        elif value is not None and "{" not in value and value not in listed.ours:
            problems.append(f"{option} {value}, but the list says {listed.ours!r}")
    return problems


def waitress_settings(path: Path) -> dict[str, object]:
    """The keyword arguments the runner gives waitress's create_server, with its constants resolved."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    constants = {node.targets[0].id: ast.literal_eval(node.value) for node in tree.body
                 if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
                 and node.targets[0].id.isupper() and _literal(node.value)}
    call = next(node for node in ast.walk(tree) if isinstance(node, ast.Call)
                and getattr(node.func, "id", "") == "create_server")
    values: dict[str, object] = {}
    for keyword in call.keywords:
        node = keyword.value
        values[keyword.arg] = (constants.get(node.id, node.id) if isinstance(node, ast.Name)
                               else ast.literal_eval(node) if _literal(node) else ast.unparse(node))
    return values


def _literal(node: ast.AST) -> bool:
    try:
        ast.literal_eval(node)
    except ValueError:
        return False
    return True


def undisclosed_waitress(path: Path, server: RealServer) -> list[str]:
    problems = []
    for name, value in waitress_settings(path).items():
        if name in server.plumbing:
            continue
        listed = server.setting(name)
        if listed is None:
            default = getattr(waitress.adjustments.Adjustments(), name, "?")
            problems.append(f"{name} = {value!r} (default {default!r}) is not listed")
        elif not isinstance(value, str) and str(value) not in listed.ours:
            problems.append(f"{name} = {value!r}, but the list says {listed.ours!r}")
    return problems


def nginx_directives(text: str) -> list[str]:
    """Every directive name in an nginx configuration, blocks included."""
    return re.findall(r"^\s*([a-z_0-9]+)\b[^#\n]*[;{]", text, flags=re.M)


def undisclosed_nginx(text: str, server: RealServer) -> list[str]:
    return sorted({name for name in nginx_directives(text) if name not in NGINX_BLOCKS
                   and name not in server.plumbing and server.setting(name) is None and not name.startswith("echo")})


def real_server_commands() -> dict[str, list[str]]:
    """Catalogue design -> its command, for the designs that run uvicorn or Granian."""
    return {design.name: design.command for design in load_catalogue().designs.values()
            if any(part in ("uvicorn", "granian") for part in design.command)}


@pytest.mark.parametrize("path", GUNICORN_CONFS, ids=lambda path: path.name)
def test_every_gunicorn_setting_we_make_is_listed_with_its_value(path: Path) -> None:
    assert undisclosed_gunicorn(path, SERVERS["Gunicorn"]) == []


@pytest.mark.parametrize("name", sorted(real_server_commands()))
def test_every_uvicorn_and_granian_option_we_pass_is_listed_with_its_value(name: str) -> None:
    command = real_server_commands()[name]
    server = SERVERS["uvicorn" if "uvicorn" in command else "Granian"]
    assert undisclosed_options(command, server) == []


def test_every_waitress_setting_we_make_is_listed_with_its_value() -> None:
    assert undisclosed_waitress(WAITRESS_RUNNER, SERVERS["Waitress"]) == []


@pytest.mark.parametrize("path", NGINX_CONFS, ids=lambda path: path.name)
def test_every_nginx_directive_we_write_is_listed_or_plumbing(path: Path) -> None:
    assert undisclosed_nginx(path.read_text(encoding="utf-8"), SERVERS["nginx"]) == []


def test_no_real_server_runs_with_a_listen_backlog_of_ours() -> None:
    for path in [*GUNICORN_CONFS, *NGINX_CONFS, REPO_ROOT / "servers" / "nginx_reverse_proxy.conf"]:
        text = path.read_text(encoding="utf-8")
        assert "backlog=" not in text.replace(" ", "") and "backlog =" not in text, path
    assert "backlog" not in waitress_settings(WAITRESS_RUNNER)
    for name, command in real_server_commands().items():
        assert "--backlog" not in command, name
    assert all(SERVERS[server].setting(name) is None for server in SERVERS for name in ("backlog", "--backlog"))


def test_the_checks_fail_on_a_setting_nobody_listed(tmp_path: Path) -> None:
    conf = tmp_path / "gunicorn_extra.conf.py"
    conf.write_text("backlog = 128\nworkers = 1\ngraceful_timeout = 7\n")
    assert undisclosed_gunicorn(conf, SERVERS["Gunicorn"]) == [
        "gunicorn_extra.conf.py: backlog = 128 (differs from the default) is not listed",
        "gunicorn_extra.conf.py: graceful_timeout = 7, but the list says '5'",
    ]
    assert undisclosed_options(["{python}", "-m", "uvicorn", "--backlog", "128", "--no-access-log", "app:app"],
                               SERVERS["uvicorn"]) == ["--backlog 128 is not listed"]
    assert undisclosed_nginx("http {\n    keepalive_timeout 5s;\n    sendfile on;\n}\n", SERVERS["nginx"]) == ["sendfile"]
    runner = tmp_path / "runner.py"
    runner.write_text("LIMIT = 7\nserver = create_server(app, host=HOST, threads=4, outbuf_overflow=LIMIT)\n")
    assert undisclosed_waitress(runner, SERVERS["Waitress"]) == ["outbuf_overflow = 7 (default 1048576) is not listed"]


def test_the_methodology_page_links_the_reference_page_that_shows_the_list() -> None:
    """The list moved to a reference page of its own (issue 35's page budget); methodology links it."""
    assert "(reference/real-server-settings.md)" in (REPO_ROOT / "docs" / "methodology.md").read_text(encoding="utf-8")
    page = (REPO_ROOT / "docs" / "reference" / "real-server-settings.md").read_text(encoding="utf-8")
    assert '--8<-- "docs/_generated/real-server-settings.md"' in page
    generated = (REPO_ROOT / "docs" / "_generated" / "real-server-settings.md").read_text(encoding="utf-8")
    assert all(f"**{name}**" in generated for name in SERVERS)
