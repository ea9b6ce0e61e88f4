"""Launch a design exactly as the catalogue says: its command line, its config file, a reverse proxy.

Every start of a design goes through here, and a test (tests/harness/test_layers.py) fails when another
module builds a design's command or starts a server itself: `bench.py serve` (`started_design`),
`check`, every cell of a run, every suite (balance, restart, hostile, idle, how-fast) and the
tests (tests/conftest.py `started`) use `running_design`. What suites differ in is a parameter:
extra arguments after the design's own (`--workers 4`), a wrapper before it (`prlimit ...`), the
CPUs it is pinned to, simulated work, another CPython, a database. Whatever the design declares about
stopping (its graceful signal; `stop_main_process_only`) is honoured in one place, `stop_design`.
`server_command` fills the design's command template (and its config template, if it has one);
`reverse_proxy` puts nginx in front (a scenario's `proxy`); `delayed_path` a delaying proxy.
A design whose command takes `{database}` talks to PostgreSQL: `database` gives it the DSN
(`database_for` starts a scratch cluster, system/postgres.py), and without one it is refused.
The DSN is a template value, not an extra argument, so the catalogue's command shows it.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from harness.model.catalogue import Design
from harness.model.paths import REPO_ROOT
from harness.system import gil_report, ports, postgres, processes

LOG_DIR = REPO_ROOT / "build" / "logs"
PROXY_COMMAND = ["nginx", "-c", "{config}", "-p", "{workdir}", "-e", "stderr"]


class UnsupportedWorkError(ValueError):
    """Simulated CPU work (--work N) asked of a design that cannot do it: bad input, like an unknown name."""


def fill_template(template: str, workdir: Path, **values: str) -> Path:
    """Write a config template into workdir with its @TOKENS@ replaced (@HOST@ from host=..., and so on)."""
    text = (REPO_ROOT / template).read_text(encoding="utf-8")
    for name, value in {**values, "workdir": str(workdir), "repo": str(REPO_ROOT)}.items():
        text = text.replace(f"@{name.upper()}@", value)
    config = workdir / Path(template).name
    config.write_text(text, encoding="utf-8")
    return config


def write_config(design: Design, port: int, delay: float, host: str, workdir: Path) -> Path | None:
    """Fill a real server's config template with this run's port, delay and scratch directory."""
    if design.config_template is None:
        return None
    return fill_template(design.config_template, workdir, host=host, port=str(port), delay=f"{delay:g}",
                         delay_ms=str(round(delay * 1000)))


def takes_work_in_command(design: Design) -> bool:
    """Whether the design's command passes the work itself (`APP_WORK={work}`: a real server running
    servers/wsgi_app.py, whose command line belongs to the server) instead of taking `--work N` at its end."""
    return any("{work}" in part for part in design.command)


def work_arguments(design: Design, work: int) -> list[str]:
    """`--work N` when work is asked (N > 0) of a design that supports it; nothing when none is asked, or when
    its command takes `{work}` itself."""
    if work < 0:
        raise UnsupportedWorkError(f"--work takes a number of iterations, 0 or more, not {work}")
    if work == 0:
        return []
    if not design.supports_work:
        raise UnsupportedWorkError(f"design {design.name!r} cannot simulate CPU work (--work {work}): its "
                                   "catalogue entry does not say supports_work = true")
    return [] if takes_work_in_command(design) else ["--work", str(work)]


class DatabaseMissingError(LookupError):
    """A design that talks to PostgreSQL (its command takes {database}) started without a DSN."""


def needs_database(design: Design) -> bool:
    """Whether the design's command takes a PostgreSQL DSN (`{database}`)."""
    return any("{database}" in part for part in design.command)


@contextlib.contextmanager
def database_for(designs: Sequence[Design]) -> Iterator[str | None]:
    """A seeded scratch PostgreSQL's DSN when any of the designs needs one, else None; stopped on exit."""
    if not any(needs_database(design) for design in designs):
        yield None
        return
    with postgres.scratch_cluster() as cluster:
        yield cluster.dsn


class InterpreterMissingError(LookupError):
    """A scenario asks for a CPython version this machine does not have; the message says how to get it."""


def built_environments() -> Path:
    """Where scripts/build_free_threaded_python.sh leaves its environments (venvs/3.13.5, venvs/3.13.5t)."""
    return Path(os.environ.get("MANY_CLIENTS_CACHE", Path.home() / ".cache" / "many-clients")) / "venvs"


def interpreter(version: str) -> str:
    """The path of CPython `version` ("3.12", "3.13.5t"): an environment the build script made, pyenv's copy,
    or `python3.12` on PATH.

    pyenv's shims are skipped: a shim for a version that is not pyenv's current one exits 127.
    """
    built = built_environments() / version / "bin" / "python"
    if built.exists():
        return str(built)
    candidates = sorted(glob.glob(f"{Path.home()}/.pyenv/versions/{version}.*/bin/python{version}"))
    if candidates:
        return candidates[-1]
    found = shutil.which(f"python{version}")
    if found and "/.pyenv/shims/" not in found:
        return found
    raise InterpreterMissingError(f"CPython {version} is not installed here (no python{version} on PATH, no pyenv "
                                  f"copy, no {built.parent.parent}): `pyenv install {version}`, or `apt-get install "
                                  f"python{version}` where Debian has it; on GitHub, setup-python's python-version "
                                  "list; 3.13.5 and 3.13.5t (free-threaded): `make free-threaded-python`")


# Read from the interpreter itself, not from its path: the exact release, and whether its build has a GIL.
_DESCRIBE_INTERPRETER = ("import platform, sys, sysconfig; print(platform.python_version()); "
                         "print('disabled (free-threaded build)' if sysconfig.get_config_var('Py_GIL_DISABLED') "
                         "else 'enabled'); print(sys.executable)")


def describe_interpreter(version: str) -> dict[str, str | None]:
    """What CPython `version` ("3.12") is here: {"asked", "version" ("3.12.1"), "gil", "executable"}.

    A version this machine does not have gives {"asked", "version": None, "missing": how to get it}.
    """
    try:
        executable = interpreter(version)
    except InterpreterMissingError as error:
        return {"asked": version, "version": None, "missing": str(error)}
    answer = processes.run_tool([executable, "-c", _DESCRIBE_INTERPRETER], timeout=30)
    lines = answer.stdout.splitlines()
    if answer.returncode != 0 or len(lines) != 3:
        return {"asked": version, "version": None,
                "missing": f"{executable} did not say its version: {answer.stderr.strip()[-300:]}"}
    return {"asked": version, "version": lines[0], "gil": lines[1], "executable": lines[2]}


def server_command(design: Design, port: int, delay: float, workdir: Path,
                   host: str = processes.LOOPBACK, work: int = 0, python: str | None = None,
                   database: str | None = None) -> list[str]:
    """Fill the design's command template (and its config file, if it has one); add --work N if asked (a command
    that takes `{work}` gets it there).

    `python` ("3.12") runs the design on that CPython instead of the one running the harness;
    `database` is the DSN for `{database}`.
    """
    extra = work_arguments(design, work)  # refused before anything is written
    if needs_database(design) and not database:
        raise DatabaseMissingError(f"design {design.name!r} talks to PostgreSQL and was given no database: run it in "
                                   "a scenario with database = true (bench.py serve and check start one themselves)")
    executable = interpreter(python) if python else sys.executable
    workdir.mkdir(parents=True, exist_ok=True)
    config = write_config(design, port, delay, host, workdir)
    values = {"python": executable, "file": str(REPO_ROOT / design.file), "host": host,
              "port": str(port), "delay": f"{delay:g}", "config": str(config or ""), "workdir": str(workdir),
              "database": database or "", "work": str(work)}
    return [part.format(**values) for part in design.command] + extra


def design_command(design: Design, port: int, delay: float, workdir: Path, work: int = 0, python: str | None = None,
                   extra_arguments: Sequence[str] = (), wrapper: Sequence[str] = (),
                   database: str | None = None) -> list[str]:
    """The whole command line that starts a design: wrapper, the design's own command, extra arguments."""
    return [*wrapper, *server_command(design, port, delay, workdir, work=work, python=python, database=database),
            *extra_arguments]


@contextlib.contextmanager
def running_design(design: Design, port: int, delay: float, workdir: Path, cpu: str | None = None,
                   work: int = 0, python: str | None = None, extra_arguments: Sequence[str] = (),
                   wrapper: Sequence[str] = (), ready_timeout: float = processes.READY_TIMEOUT_SECONDS,
                   stop_grace: float = processes.STOP_GRACE_SECONDS,
                   database: str | None = None) -> Iterator[processes.RunningServer]:
    """A design listening on 127.0.0.1:port, started from the repository root; stopped as it declares on exit.

    extra_arguments follow the design's command (`--workers 4`); wrapper precedes it (`prlimit
    --nofile=64:64 --`). The yielded server's `command` is the exact command line started (taskset
    included when pinned). A wrapper that slows the design down (valgrind: about 50 times) needs a
    longer ready_timeout and stop_grace. `database` is the DSN of a design that needs one (`database_for`).
    """
    command = design_command(design, port, delay, workdir, work=work, python=python,
                             extra_arguments=extra_arguments, wrapper=wrapper, database=database)
    # Where its processes say whether they hold the GIL (system/gil_report.py; only the free-threaded
    # measurements' environments carry the hook that answers): the runner reads it after each run.
    shutil.rmtree(gil_folder(workdir), ignore_errors=True)  # an earlier start's processes had other pids
    env = {**os.environ, gil_report.ENVIRONMENT_VARIABLE: str(gil_folder(workdir))}
    with processes.running_server(command, port, workdir, cpu=cpu, env=env, cwd=REPO_ROOT,
                                  stop_signal=design.stop_signal,
                                  signal_whole_group=not design.stop_main_process_only,
                                  ready_timeout=ready_timeout, stop_grace=stop_grace) as server:
        yield server


@contextlib.contextmanager
def running_configuration(command: Sequence[str], port: int, workdir: Path, cpu: str | None,
                          stop_signal: signal.Signals) -> Iterator[processes.RunningServer]:
    """A real server started from a configuration the harness wrote (the recipe's gunicorn.conf.py or uvicorn line,
    suites/recipe.py), not from a catalogue design: from the repository root, pinned, stopped with stop_signal."""
    with processes.running_server(command, port, workdir, cpu=cpu, cwd=REPO_ROOT, stop_signal=stop_signal) as server:
        yield server


def gil_folder(workdir: Path) -> Path:
    """The folder a server started in workdir reports its GIL state into (system/gil_report.py)."""
    return workdir / "gil"


def started_design(design: Design, port: int, delay: float, workdir: Path, work: int = 0,
                   announce: Callable[[list[str]], None] = lambda command: None,
                   database: str | None = None) -> subprocess.Popen[bytes]:
    """A design started in the foreground (`bench.py serve`), in its own session; stop it with stop_design.

    `announce` gets the command line just before it starts (serve prints it first).
    """
    command = design_command(design, port, delay, workdir, work=work, database=database)
    announce(command)
    return subprocess.Popen(command, cwd=REPO_ROOT, start_new_session=True)


def stop_design(process: subprocess.Popen[bytes], design: Design) -> int:
    """Stop a design as it declares (its graceful signal, to its group or its main process); its exit status."""
    return processes.stop_process_group(process, stop_signal=design.stop_signal,
                                        whole_group=not design.stop_main_process_only)


@contextlib.contextmanager
def reverse_proxy(template: str, upstream_port: int, log_dir: Path,
                  cpu: str | None) -> Iterator[processes.RunningServer]:
    """nginx in front of a design (scenario option `proxy`), pinned to the design's CPU."""
    port = ports.run_port("proxy")
    workdir = log_dir / "proxy"
    workdir.mkdir(parents=True, exist_ok=True)
    config = fill_template(template, workdir, host=processes.LOOPBACK, port=str(port),
                           upstream=f"{processes.LOOPBACK}:{upstream_port}")
    command = [part.format(config=config, workdir=workdir) for part in PROXY_COMMAND]
    with processes.running_server(command, port, workdir, cpu=cpu, stop_signal=signal.SIGQUIT) as proxy:
        yield proxy


@contextlib.contextmanager
def delayed_path(upstream_port: int, one_way_ms: float, log_dir: Path,
                 cpu: str | None) -> Iterator[processes.RunningServer]:
    """harness/system/delay_proxy.py in front of a design (scenario setting `network_delay_ms`), on the tool's CPU."""
    port = ports.run_port("proxy")
    command = [sys.executable, str(Path(__file__).with_name("delay_proxy.py")), "--port", str(port),
               "--upstream-port", str(upstream_port), "--one-way-ms", f"{one_way_ms:g}"]
    with processes.running_server(command, port, log_dir / "delay-proxy", cpu=cpu) as proxy:
        yield proxy
