"""Room for many sockets at once: lift our own soft open-files limit (RLIMIT_NOFILE) towards the hard one.

Every socket a client holds is a file descriptor, and the soft limit is often 1024. A process
may raise its own soft limit up to the hard limit without privileges; past the hard limit only
root (`ulimit -Hn`, LimitNOFILE= in systemd) can help, so a run that needs more is refused
before it starts, with a message that says so.

scripts/http_load.py and scripts/echo_client.py carry copies of FILES_MARGIN,
OpenFilesLimitError and raise_open_files_limit (they run without the harness);
tests/test_standalone_copies.py keeps the copies identical to these.
"""

from __future__ import annotations

import resource
import sys

FILES_MARGIN = 32  # descriptors beyond one per socket: stdio, the event loop's own, imports


class OpenFilesLimitError(ValueError):
    """The hard open-files limit is lower than a run needs; the message says how to raise it."""


def raise_open_files_limit(sockets: int, what: str) -> dict[str, int]:
    """Make room for `sockets` open at once (`what` they are, for the message) under the soft RLIMIT_NOFILE.

    Raises the soft limit up to the hard one if needed; OpenFilesLimitError when even that is too low.
    Returns the limits then in force and the soft limit before: {"soft", "hard", "raised_from"}.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    needed = sockets + FILES_MARGIN
    if needed <= soft:
        return {"soft": soft, "hard": hard, "raised_from": soft}
    if hard != resource.RLIM_INFINITY and needed > hard:
        raise OpenFilesLimitError(f"{sockets} {what} need about {needed} open files, but the hard limit is {hard} "
                                  f"(soft {soft}). Raise it (`ulimit -Hn {needed}` as root, or LimitNOFILE= in "
                                  "systemd), or ask for fewer.")
    resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))
    print(f"raised the open-files soft limit from {soft} to {needed} (hard limit {hard})", file=sys.stderr)
    return {"soft": needed, "hard": hard, "raised_from": soft}
