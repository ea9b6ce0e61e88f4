"""Whether the GIL is really off inside a server: each of its processes says so, after its imports.

A free-threaded CPython (built with --disable-gil) turns the GIL back on, silently, when it imports a
C extension that does not declare free-threading support; `sys._is_gil_enabled()` then returns True.
Only the server's own processes can ask, and only after they have imported what they serve with.

How: the environments `scripts/build_free_threaded_python.sh` makes carry a `.pth` line (PTH_LINE)
that runs this file at interpreter start-up when MANY_CLIENTS_GIL_REPORT names a folder. It starts a
daemon thread that writes "enabled" or "disabled" into <folder>/<pid> at once and again whenever the
answer changes (it asks every half second), in every process: forked workers start their own thread
(os.register_at_fork), spawned ones run the .pth again. The launcher names the folder for every
server it starts; the runner reads it after each run (`read`): "enabled" if any process had the GIL,
"disabled" if all reported it off, None when nothing reported (an interpreter without the hook, or
without sys._is_gil_enabled, older than 3.13).

The top of this file is the standard library only: it runs inside the server, not in the harness.
Known limit: a process that lives less than the first report's instant (short-lived helpers) says nothing.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

ENVIRONMENT_VARIABLE = "MANY_CLIENTS_GIL_REPORT"
POLL_SECONDS = 0.5
THIS_FILE = Path(__file__).resolve()
# One line a .pth file runs at start-up (site.py executes lines that begin with `import`).
# It names this checkout's copy; where that is gone (a moved clone), it does nothing and runs say "not reported".
PTH_LINE = (f"import os, runpy; os.environ.get({ENVIRONMENT_VARIABLE!r}) and os.path.exists({str(THIS_FILE)!r}) and "
            f"runpy.run_path({str(THIS_FILE)!r}, run_name='__gil_report__')\n")


def gil_state() -> str | None:
    """'enabled' or 'disabled' for this process now; None on a CPython that cannot say (before 3.13)."""
    is_enabled = getattr(sys, "_is_gil_enabled", None)
    if is_enabled is None:
        return None
    return "enabled" if is_enabled() else "disabled"


def _write(folder: Path, state: str) -> None:
    """<folder>/<pid> holds the latest answer, written whole (rename) so a reader never sees half a word."""
    folder.mkdir(parents=True, exist_ok=True)
    partial = folder / f".{os.getpid()}.partial"
    partial.write_text(state, encoding="ascii")
    os.replace(partial, folder / str(os.getpid()))


def _report_forever(folder: Path) -> None:
    last = None
    while True:
        state = gil_state()
        if state is not None and state != last:
            try:
                _write(folder, state)
                last = state
            except OSError:  # the folder went away (the run is over): nothing left to tell
                return
        time.sleep(POLL_SECONDS)


def start_reporting() -> None:
    """Start the reporting thread in this process and in every process forked from it."""
    folder = os.environ.get(ENVIRONMENT_VARIABLE)
    if not folder or gil_state() is None:
        return

    def start() -> None:
        threading.Thread(target=_report_forever, args=(Path(folder),), name="gil-report", daemon=True).start()

    start()
    os.register_at_fork(after_in_child=start)


def read(folder: Path) -> str | None:
    """What a server's processes reported: 'enabled' if any had the GIL, 'disabled' if all had not, else None."""
    if not folder.is_dir():
        return None
    states = {path.read_text(encoding="ascii").strip() for path in folder.iterdir() if path.name.isdigit()}
    if not states:
        return None
    return "enabled" if "enabled" in states else "disabled"


def install_hook(site_packages: Path) -> Path:
    """Write the .pth file that runs this hook into an environment's site-packages; its path."""
    path = site_packages / "many_clients_gil_report.pth"
    path.write_text(PTH_LINE, encoding="utf-8")
    return path


if __name__ == "__gil_report__":  # run by the .pth line, at start-up of the server's interpreter
    start_reporting()
elif __name__ == "__main__":  # `python gil_report.py SITE_PACKAGES`: the build script installs the hook
    print(install_hook(Path(sys.argv[1])))
