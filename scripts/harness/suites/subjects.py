"""What the suites that probe designs one by one share: a design as a subject (alone or behind nginx), started.

The hostile suite (suites/hostile/) and the conformance suite (suites/conformance/) both run
every HTTP design, alone and behind nginx as the site recommends it (PROXY_TEMPLATE: client keep-alive on,
HTTP/1.1 and a cache of idle connections to the design, so a second request can share a connection with the
first, as in production): `Subject` names one,
`launched` starts it through the launcher (the one place these suites start servers; every
process is stopped on the way out), and `tool_versions` says which nginx their records used.
"""

from __future__ import annotations

import contextlib
import subprocess
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.model.catalogue import Design
from harness.system import launcher, processes

PROXY_TEMPLATE = "servers/nginx_upstream_keep_alive.conf"  # the proxy docs/deployment.md recommends
PROXIED_SUFFIX = "+nginx"  # "sequential-sockets+nginx": the design behind PROXY_TEMPLATE


@dataclass(frozen=True)
class Subject:
    """A design as the suite runs it: alone, or behind nginx."""

    design: Design
    behind_nginx: bool = False

    @property
    def name(self) -> str:
        return self.design.name + (PROXIED_SUFFIX if self.behind_nginx else "")


@dataclass
class Server:
    """A started design (maybe behind nginx): where clients go, and the process group to measure."""

    design: Design
    target_host: str
    target_port: int
    process: subprocess.Popen[bytes]
    running: processes.RunningServer
    command: list[str]
    proxy: processes.RunningServer | None = None

    def alive(self) -> bool:
        return self.running.alive() and (self.proxy is None or self.proxy.alive())

    def stderr_tail(self) -> str:
        return self.running.stderr_tail() + (("\n--- nginx in front ---\n" + self.proxy.stderr_tail())
                                             if self.proxy else "")


PROXY_START = threading.Lock()


@contextlib.contextmanager
def launched(design: Design, delay: float, log_dir: Path, behind_nginx: bool = False,
             database: str | None = None, extra_arguments: Sequence[str] = ()) -> Iterator[Server]:
    """Start a design (with a simulated call of `delay` seconds) the way the harness and tests start it; the one
    place these suites launch servers.

    With behind_nginx, with PROXY_TEMPLATE in front; `database` is the DSN a database design talks to
    (launcher.database_for); extra_arguments follow the design's command (a setting of a real server). Every
    process is stopped on the way out.
    """
    port = processes.free_port()
    with launcher.running_design(design, port, delay, log_dir, database=database,
                                 extra_arguments=extra_arguments) as server, \
            contextlib.ExitStack() as front:
        proxy = None
        if behind_nginx:
            with PROXY_START:  # reverse_proxy reuses one port per run: one proxy binds it, the next finds it busy
                proxy = front.enter_context(launcher.reverse_proxy(PROXY_TEMPLATE, port, log_dir, None))
        target = proxy or server
        yield Server(design, target.host, target.port, server.process, server, server.command, proxy)


def tool_versions() -> dict[str, str]:
    """nginx (the real server and the proxy), as it reports itself."""
    try:
        result = subprocess.run(["nginx", "-v"], check=False, capture_output=True, text=True, timeout=10)
        return {"nginx": (result.stderr or result.stdout).strip().splitlines()[0]}
    except (OSError, subprocess.SubprocessError, IndexError):
        return {"nginx": "nginx: not found"}
