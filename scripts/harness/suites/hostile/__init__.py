"""The hostile suite: what a server facing the internet meets, against every HTTP design.

    cases.py    the cases (scripts/catalogue/hostile/cases.toml) read into Case objects, and
                each case kind: the bytes it sends, how it judges what comes back
    run.py      every case against every design: the probes, fd/thread counts and resources
                measured around each case, a design restarted after it dies, the record
    emfile_settings.py  case 15 against real servers at their defaults and with their own cap on
                connections (`bench.py hostile --emfile-settings`, results/hostile-emfile-settings.json)
    clients/raw_http.py (a layer down) is the client that sends raw bytes and reads what comes back.

`bench.py hostile` calls run_suite (run.py's, the package's one entry point); the record is
results/hostile.json, which render/survival.py turns into the tables docs/survive.md includes.

Known limits: a case reads what a client sees, so "closed" means the client saw EOF or
a reset; a server that stops reading but keeps the socket open is "still open" at the
bound. On loopback a 1 MiB response fits in the kernel's send buffer, so the slow
reader (case 14) stalls only servers that keep more than that in flight. Every
connection goes to 127.0.0.1, is bounded in time (the suite's `bound`) and count, and
is closed before the case returns.
"""

from harness.suites.hostile.run import run_suite

__all__ = ["run_suite"]
