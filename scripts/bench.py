#!/usr/bin/env python3
"""The benchmark harness: list designs, serve one, run scenarios, render tables.

    python scripts/bench.py list [--json]
    python scripts/bench.py scenarios [--json]
    python scripts/bench.py serve NAME [--port P] [--delay S] [--work N]
    python scripts/bench.py check NAME [--work N] [--keep-alive]
    python scripts/bench.py run [--scenario S|GROUP] [--design NAME ...] [--quick] [--repeat K] [--out DIR]
    python scripts/bench.py restart [--design NAME ...] [--quick] [--in-flight] [--out DIR]
    python scripts/bench.py balance [--quick] [--out DIR]
    python scripts/bench.py gil-dependencies [--python VERSION ...] [--output PATH]
    python scripts/bench.py render [--check]
    python scripts/bench.py new-design NAME --grows-from OTHER [--title "..."] [--model "..."]
    python scripts/bench.py hostile [--design NAME ...] [--case C ...] [--quick] [--jobs N] [--out DIR]
    python scripts/bench.py how-fast steps|profile [--quick] [...]
    python scripts/bench.py idle DESIGN [--connections N] [--hold S] [--server-args "..."] [--output PATH]
    python scripts/bench.py instructions [--quick] [--row NAME ...]
    python scripts/bench.py conformance [--design NAME ...] [--case C ...] [--quick] [--jobs N] [--out DIR]
    python scripts/bench.py deployment race|overload [--design NAME ...] [--quick] [--out DIR]
    python scripts/bench.py recipe check|quota [--quick] [--out DIR]
    python scripts/bench.py streaming [--design NAME ...] [--phase NAME ...] [--quick] [--out DIR]

Exit codes: 0 success; 1 a design failed (or was refused) or a table is stale; 2 bad input
(unknown design or scenario, busy port, missing tool, --work for a design
without it, a broken catalogue, an open-files hard limit too low for the connections); 3 a bug in the harness (traceback printed; every process it
started was stopped); 130 interrupted. `serve` instead exits with the design's own
exit status once it is stopped (0 after a graceful stop).
"""

from __future__ import annotations

import argparse
import json
import shlex
import signal
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parent))

# Only what every subcommand needs: each handler (and each parser builder) imports its own suite or renderer when
# it runs, so `list`, `check` or `--help` do not pay for importing every suite and renderer (issue 30, item 5).
from harness.model.catalogue import CATALOGUE_DIR, Catalogue, Scenario, UnknownNameError, load_catalogue  # noqa: E402
from harness.model.paths import REPO_ROOT  # noqa: E402

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_HARNESS_BUG, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
WORK_HELP = "iterations of simulated CPU work per request (designs with supports_work only)"


def command_list(catalogue: Catalogue, args: argparse.Namespace) -> int:
    if args.json:
        print(json.dumps([design.to_json() for design in catalogue.designs.values()], indent=2))
        return EXIT_OK
    width = max(len(name) for name in catalogue.designs)
    for design in catalogue.designs.values():
        print(f"{design.name:<{width}}  {design.kind:<10} {design.model:<28} {design.title}")
    return EXIT_OK


def command_scenarios(catalogue: Catalogue, args: argparse.Namespace) -> int:
    if args.json:
        print(json.dumps([scenario.to_json() for scenario in catalogue.scenarios.values()], indent=2))
        return EXIT_OK
    for scenario in catalogue.scenarios.values():
        print(f"{scenario.id}: {scenario.title}\n    tool {scenario.tool}, designs: {', '.join(scenario.designs)}")
    return EXIT_OK


def command_serve(catalogue: Catalogue, args: argparse.Namespace) -> int:
    """Run one design in the foreground exactly as the harness starts it, until SIGINT/SIGTERM.

    Exits with the design's own exit status: after Ctrl-C or SIGTERM, the status it stopped with
    (0 after a graceful stop), 128 + N if a signal N ended it.
    """
    from harness.system import launcher, processes
    design = catalogue.design(args.name)
    processes.ensure_port_free(args.port)
    with launcher.database_for([design]) as database:  # a scratch PostgreSQL for a design that talks to one
        if database:
            print(f"scratch PostgreSQL (stopped with the design): {database}", file=sys.stderr, flush=True)
        process = launcher.started_design(design, args.port, args.delay, launcher.LOG_DIR / "serve" / design.name,
                                          work=args.work, database=database,
                                          announce=lambda command: print("$ " + shlex.join(command), file=sys.stderr,
                                                                         flush=True))
        try:
            status = process.wait()
        except KeyboardInterrupt:
            # Ctrl-C reaches only us (the server has its own session): pass on the design's graceful stop.
            status = launcher.stop_design(process, design)
            print(f"{design.name} stopped on {design.stop_signal.name}: exit status {status}", file=sys.stderr)
        finally:
            launcher.stop_design(process, design)  # nothing left if it ended already
    return status if status >= 0 else 128 - status  # killed by signal N: 128 + N, as a shell reports it


def command_check(catalogue: Catalogue, args: argparse.Namespace) -> int:
    """Start a design, show its answer to GET /, verify it (in keep-alive mode if asked), stop it."""
    from harness.clients import probe, verify
    from harness.system import launcher, processes
    design = catalogue.design(args.name)
    refused = verify.refusal(design, "check --keep-alive", args.keep_alive)
    if refused:
        print(f"{design.name}: {refused}", file=sys.stderr)
        return EXIT_FAILED
    port = processes.free_port()
    workdir = launcher.LOG_DIR / "check" / design.name
    with launcher.database_for([design]) as database, \
            launcher.running_design(design, port, args.delay, workdir, work=args.work, database=database) as server:
        print("$ " + shlex.join(server.command), file=sys.stderr, flush=True)
        verification = verify.verify(design, server.host, server.port, keep_alive=args.keep_alive)
        if design.kind in verify.HTTP_KINDS and not args.keep_alive:
            print(probe.get(server.host, server.port).raw.decode("utf-8", errors="replace"))
    problems = verification.problems
    proven = f" ({', '.join(f'{key} {value}' for key, value in verification.proven.items())})" if not problems else ""
    print(f"{design.name}: {'OK' if not problems else 'FAILED: ' + '; '.join(problems)}{proven}; "
          f"exit code on {design.stop_signal.name} {server.exit_code}")
    return EXIT_OK if not problems and server.exit_code == 0 else EXIT_FAILED


def selected_scenarios(catalogue: Catalogue, name: str | None, quick: bool) -> list[Scenario]:
    """Every scenario a run of all runs (plan.every_scenario); or one by id; or an interleave group by its name."""
    from harness.suites import interleave, plan
    if name is None:
        return plan.every_scenario(catalogue, quick)
    return interleave.members(catalogue, name) or [catalogue.scenario(name)]


def command_run(catalogue: Catalogue, args: argparse.Namespace) -> int:
    from harness.clients.tools import require_tool
    from harness.render import site
    from harness.suites import interleave, plan, runner
    scenarios = selected_scenarios(catalogue, args.scenario, args.quick)
    for name in args.design or []:
        catalogue.design(name)  # unknown names fail before anything starts
    selected = [(scenario, [name for name in args.design if name in scenario.designs] if args.design else None)
                for scenario in scenarios]
    selected = [(scenario, names) for scenario, names in selected if names != []]
    for scenario, _ in selected:
        require_tool(scenario.tool)  # a missing tool stops the run before the first cell, not midway
    progress = plan.plan_run(catalogue, selected, args.quick, args.repeat)
    plans = {scenario.id: runner.Plan(scenario, tuple(names) if names is not None else None, args.quick, args.repeat,
                                      args.out, progress) for scenario, names in selected}
    any_failed = False
    for group in interleave.groups([scenario for scenario, _ in selected]):
        if len(group) > 1 and not args.design:  # the interleave group, round robin
            written = interleave.measure_group(catalogue, [plans[scenario.id] for scenario in group])
        else:
            written = [runner.measure_plan(catalogue, plans[scenario.id]) for scenario in group]
        for path, record in written:
            print(site.scenario_table(record))
            print(f"Wrote {path}")
            failed = [design.name + (f" ({design.status})" if design.status != "failed" else "")
                      for design in record.designs if design.status != "ok"]
            if failed:
                any_failed = True
                print(f"FAILED in {record.id}: {', '.join(failed)} (see the table and build/logs/)", file=sys.stderr)
    return EXIT_FAILED if any_failed else EXIT_OK


def with_problems(path: Path, problems: int) -> int:
    """Say where the record went and how many runs had a problem (the record keeps why); 1 if any had one."""
    print(f"Wrote {path}" + (f"; {problems} run(s) with a problem (see the record)" if problems else ""))
    return EXIT_FAILED if problems else EXIT_OK


def command_restart(catalogue: Catalogue, args: argparse.Namespace) -> int:
    """The restart scenario: restarts under steady load, every request recorded (harness/suites/restart.py)."""
    from harness.suites import restart
    path, record = restart.measure_plan(catalogue, restart.Plan(names(args.design), args.quick, args.in_flight,
                                                                args.out))
    print(f"Wrote {path}")
    return EXIT_OK if restart.problems(record) == 0 else EXIT_FAILED  # failed requests are findings, recorded


def command_gil_dependencies(catalogue: Catalogue, args: argparse.Namespace) -> int:
    """Which dependencies install on each CPython, and which turn the GIL back on (harness/suites/gil_dependencies.py)."""
    from harness.suites import gil_dependencies
    versions = tuple(args.python) if args.python else gil_dependencies.DEFAULT_VERSIONS
    path, _ = gil_dependencies.measure_plan(catalogue, gil_dependencies.Plan(versions, args.output))
    print(f"Wrote {path}")
    return EXIT_OK


def command_balance(catalogue: Catalogue, args: argparse.Namespace) -> int:
    """How evenly event-loop workers share connections (harness/suites/balance.py)."""
    from harness.suites import balance
    path, _ = balance.measure_plan(catalogue, balance.Plan(args.quick, args.out))
    print(f"Wrote {path}")
    return EXIT_OK


def command_hostile(catalogue: Catalogue, args: argparse.Namespace) -> int:
    """The hostile suite (scripts/catalogue/hostile/cases.toml) against HTTP designs (harness/suites/hostile/):
    run, print the matrix, exit 1 when a design died or did not start."""
    from harness.model.records.hostile_record import EmfileSettingsRecord
    from harness.render import survival
    from harness.suites import hostile
    path, record = hostile.measure_plan(catalogue, hostile.Plan(names(args.design), names(args.case), args.quick,
                                                                args.jobs, args.out, args.emfile_settings))
    if isinstance(record, EmfileSettingsRecord):
        print(survival.emfile_settings_table(record))
        print(f"Wrote {path}")
        return EXIT_OK  # a server that spins or loses connections is a finding, recorded
    print(survival.matrix_tables(record))
    print(f"Wrote {path}")
    failed = [design.name for design in record.designs if design.status != "ok"]
    if failed:
        print(f"FAILED (died or did not start): {', '.join(failed)}; see the record's stderr tails",
              file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


def command_how_fast(catalogue: Catalogue, args: argparse.Namespace) -> int:
    """The how-fast suite (harness/suites/how_fast.py); its table or profile printed from the record written."""
    from harness.model.records.how_fast_records import ProfileRecord, StepsRecord
    from harness.render import how_fast_tables
    from harness.suites import how_fast
    if args.part == "steps":
        steps_plan = how_fast.Plan("steps", args.quick, args.seconds, chain=args.chain, repeat=args.repeat,
                                   request_heads=args.request_heads, references=names(args.reference))
        path, steps = how_fast.measure_plan(catalogue, steps_plan)
        assert isinstance(steps, StepsRecord)
        print(how_fast_tables.steps_table(steps))
        print(f"wrote {path.relative_to(REPO_ROOT)}")
        return EXIT_OK
    try:
        path, profile = how_fast.measure_plan(catalogue, how_fast.Plan("profile", args.quick, args.seconds,
                                                                       rate=args.rate))
    except how_fast.NothingWrittenError as error:
        print(error, file=sys.stderr)
        return EXIT_FAILED
    assert isinstance(profile, ProfileRecord)
    print(how_fast_tables.profile_page(profile, how_fast_tables.read_collapsed(path.read_text(encoding="utf-8")),
                                       "(svg)"))
    print(f"wrote {path.relative_to(REPO_ROOT)} and its .json")
    return EXIT_OK


def command_idle(catalogue: Catalogue, args: argparse.Namespace) -> int:
    """Hold idle keep-alive connections (harness/suites/idle.py); exit 2 for bad input, 1 when the design failed."""
    from harness.suites import idle
    from harness.system import processes
    try:
        idle_plan = idle.Plan(args.design, args.connections, args.hold, tuple(shlex.split(args.server_args)),
                              args.output)
        path, record = idle.measure_plan(catalogue, idle_plan)
    except (idle.BadInputError, UnknownNameError, ValueError) as error:  # ValueError: --server-args shlex refused
        print(f"error: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except processes.ServerStartError as error:
        print(f"error: the design did not start: {error}", file=sys.stderr)
        return EXIT_FAILED
    print(json.dumps({"design": record.design, "connections_kept_alive": record.connections_kept_alive,
                      "connections_open_after_hold": record.connections_open_after_hold,
                      "baseline_rss_mib": record.baseline_rss_mib, "peak_rss_mib": record.peak_rss_mib,
                      "kib_per_connection": record.kib_per_connection, "probe": record.probe.to_json()}))
    print(f"record: {path}")
    return EXIT_OK


def command_streaming(catalogue: Catalogue, args: argparse.Namespace) -> int:
    """Server-sent-event streams (harness/suites/streaming.py): a summary line per row; 1 when a row failed."""
    from harness.suites import streaming
    from harness.system.open_files import OpenFilesLimitError
    try:
        path, record = streaming.measure_plan(catalogue, streaming.Plan(names(args.design), names(args.phase),
                                                                        args.quick, args.out))
    except (streaming.BadInputError, UnknownNameError, OpenFilesLimitError) as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    for row in record.rows:
        shown: dict[str, Any] = {"phase": row.phase, "design": row.design, "status": row.status,
                                 "peak_pss_mib": row.peak_pss_mib, "peak_threads": row.peak_threads,
                                 "peak_fds": row.peak_fds, "fresh_ms_median": row.fresh_ms_median,
                                 "fresh_failed": row.fresh_failed, "stop_seconds": row.stop_seconds}
        if row.client:
            shown |= {"streams_with_events": row.client.streams_with_events, "events": row.client.events,
                      "outcomes": row.client.outcomes}
        print(json.dumps(shown))
    print(f"record: {path}")
    return EXIT_OK if all(row.status == "ok" for row in record.rows) else EXIT_FAILED


def command_instructions(catalogue: Catalogue, args: argparse.Namespace) -> int:
    """Instructions per request under callgrind (harness/suites/instructions.py); its table printed from the record."""
    from harness.render import instructions_tables
    from harness.suites import instructions
    path, record = instructions.measure_plan(catalogue, instructions.Plan(args.quick, names(args.row)))
    print(instructions_tables.instructions_page(record))
    print(f"wrote {path.relative_to(REPO_ROOT)}")
    failed = [row.name for row in record.rows if row.problems]
    if failed:
        print(f"FAILED: {', '.join(failed)} (see the record's problems and build/logs/instructions/)", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


def command_conformance(catalogue: Catalogue, args: argparse.Namespace) -> int:
    """The conformance corpus (scripts/catalogue/conformance/cases.toml) against HTTP designs and three parsers
    (harness/suites/conformance/): print each design's verdict, exit 1 when a design died or did not start."""
    from harness.render import conformance_tables
    from harness.suites import conformance
    path, record = conformance.measure_plan(catalogue, conformance.Plan(
        names(args.design), names(args.case), args.quick, args.jobs, not args.no_gunicorn_corpus, args.out))
    print(conformance_tables.summary_table(record))
    print(f"Wrote {path}")
    failed = [design.name for design in record.designs if design.status != "ok"]
    if failed:
        print(f"FAILED (died or did not start): {', '.join(failed)}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK  # a failed case is a finding, recorded


def command_deployment(catalogue: Catalogue, args: argparse.Namespace) -> int:
    """bench.py deployment race|overload (harness/suites/deployment.py): 0 when every run ran, 1 otherwise."""
    from harness.suites import deployment
    path, record = deployment.measure_plan(catalogue, deployment.Plan(args.part, names(args.design), args.quick,
                                                                      args.out))
    return with_problems(path, deployment.problems(record))


def command_recipe(catalogue: Catalogue, args: argparse.Namespace) -> int:
    """bench.py recipe check|quota (harness/suites/recipe.py): 0 when every run ran, 1 otherwise."""
    from harness.suites import recipe
    path, record = recipe.measure_plan(catalogue, recipe.Plan(args.part, args.quick, args.out))
    return with_problems(path, recipe.problems(record))


def command_render(catalogue: Catalogue, args: argparse.Namespace) -> int:
    from harness.model.records import load_scenario_records
    from harness.render import site
    if args.check:
        problems = site.stale_files()
        for problem in problems:
            print(problem, file=sys.stderr)
        if problems:
            print("Generated files are out of date with results/ (or servers/README.md with the catalogue, "
                  "the nav and the pages): run `python scripts/bench.py render`", file=sys.stderr)
            return EXIT_FAILED
        print(f"All tables match results/ ({len(load_scenario_records())} scenario records), "
              "and servers/README.md the catalogue, the nav and the pages.")
        return EXIT_OK
    for path in site.write_all():
        print(f"wrote {path.relative_to(REPO_ROOT)}")
    return EXIT_OK


def command_new_design(catalogue: Catalogue, args: argparse.Namespace) -> int:
    """Add a design grown from one of ours: server file, catalogue entry, page, nav entry (harness/model/new_design.py),
    then a whole render. Refuses (exit 2) having written nothing."""
    from harness.model import new_design
    from harness.render import site
    try:
        design = new_design.plan(catalogue, args.name, args.grows_from, args.title, args.model,
                                 catalogue_dir=args.catalogue)
    except new_design.NewDesignError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    for path in new_design.write(design):
        print(f"wrote {path.relative_to(REPO_ROOT)}")
    # A whole render: servers/README.md, the design's results file, and the plots (each design's marker follows its
    # place in the catalogue: render/presentation.py).
    before = {path: path.read_bytes() for path in site.generated_paths(site.GENERATED_DIR) | {site.SERVERS_INDEX}}
    for path in site.write_all():
        if before.get(path) != path.read_bytes():
            print(f"rendered {path.relative_to(REPO_ROOT)}")
    print(f"next: change the model section of {design.server_file}, then `python scripts/bench.py check {design.name}`")
    return EXIT_OK


def names(values: list[str] | None) -> tuple[str, ...] | None:
    """A repeatable option's values as a plan holds them: None when it was not given."""
    return tuple(values) if values else None


# --- The command line: one parser builder per subcommand, then the one table that names them ---

def positive_integer(text: str) -> int:
    """An argparse type: 1 or more (bad input exits 2 with the argument's name)."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, not {value}")
    return value


def with_json(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true")


def serve_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--delay", type=float, default=0.1)
    parser.add_argument("--work", type=int, default=0, help=WORK_HELP)


def check_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name")
    parser.add_argument("--delay", type=float, default=0.0)
    parser.add_argument("--work", type=int, default=0, help=WORK_HELP)
    parser.add_argument("--keep-alive", action="store_true",
                        help="check that it answers several requests on one connection (keep_alive = true designs)")


def run_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--scenario", help="one scenario id, or an interleave group's name, whose scenarios run "
                                           "round robin (python-versions); default: every scenario")
    parser.add_argument("--design", action="append", help="only this design (repeatable)")
    parser.add_argument("--quick", action="store_true", help="the scenario's quick settings (1 repetition)")
    parser.add_argument("--repeat", type=int, help="repetitions per design (overrides the scenario)")
    parser.add_argument("--out", type=Path, help="directory for the records (default: results/ for a complete "
                                                  "full run, build/results/ otherwise)")


def restart_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--design", action="append", help="only this design's targets (repeatable)")
    parser.add_argument("--quick", action="store_true", help="shorter load, fewer restarts")
    parser.add_argument("--in-flight", action="store_true",
                        help="one restart with kept-alive clients idle and long requests in flight "
                             "(restart.toml's [in_flight])")
    parser.add_argument("--out", type=Path, help="directory for the record (default: results/ for a full "
                                                  "run of every target, build/results/ otherwise)")


def gil_dependencies_arguments(parser: argparse.ArgumentParser) -> None:
    from harness.suites import gil_dependencies
    parser.add_argument("--python", action="append", default=None,
                        help="a CPython version as the catalogue names it (repeatable; default "
                             f"{' and '.join(gil_dependencies.DEFAULT_VERSIONS)})")
    parser.add_argument("--output", type=Path, default=gil_dependencies.RECORD_PATH)


def balance_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true", help="fewer requests")
    parser.add_argument("--out", type=Path, help="directory for the record (default: results/, or build/results/"
                                                  " with --quick)")


def hostile_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--design", action="append", help="only this design, or NAME+nginx behind nginx (repeatable)")
    parser.add_argument("--case", action="append", help="only this case, by number or id (repeatable)")
    parser.add_argument("--quick", action="store_true", help="shorter bounds, fewer connections, five designs")
    parser.add_argument("--out", type=Path, help="directory for hostile.json (default: results/ for a complete "
                                                  "full run, build/results/ otherwise)")
    parser.add_argument("--jobs", type=int, help="designs run at once (default: the suite's `jobs`)")
    parser.add_argument("--emfile-settings", action="store_true",
                        help="case 15 only, against the real servers at their defaults and with their own cap "
                             "(scripts/catalogue/hostile/emfile-settings.toml; results/hostile-emfile-settings.json)")


def how_fast_arguments(parser: argparse.ArgumentParser) -> None:
    from harness.model import how_fast_steps
    from harness.suites import how_fast
    parts = parser.add_subparsers(dest="part", required=True)
    steps = parts.add_parser("steps", help="measure every optimisation step of a chain and the reference servers")
    steps.add_argument("--chain", choices=sorted(how_fast_steps.CHAINS), default=how_fast_steps.HOW_FAST.name,
                       help="which design's steps (default: %(default)s)")
    steps.add_argument("--quick", action="store_true", help="short runs, one repetition, into build/results/")
    steps.add_argument("--repeat", type=positive_integer, help="repetitions of every row")
    steps.add_argument("--seconds", type=positive_integer, help="seconds of wrk per run")
    steps.add_argument("--request-heads", choices=["production"], default=None,
                       help="every request a production-shaped head, each unique (wrk_production_heads.lua), into "
                            "the chain's record with -production-heads in its name; default: wrk's one-header GET")
    steps.add_argument("--reference", action="append", help="a catalogue design to measure beside the steps "
                       "(default, by chain: " + "; ".join(f"{name}: {', '.join(designs)}" for name, designs
                                                          in how_fast.DEFAULT_REFERENCES.items())
                       + f"; those the catalogue has), and always the `{how_fast.CEILING_SCENARIO}` scenario's "
                         "ceiling")
    profile = parts.add_parser("profile", help="sample the fastest design with py-spy under wrk")
    profile.add_argument("--quick", action="store_true", help="a shorter profile, into build/results/")
    profile.add_argument("--seconds", type=positive_integer, help="seconds of sampling")
    profile.add_argument("--rate", type=positive_integer, default=how_fast.PROFILE_RATE_HZ, help="samples per second")


def idle_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("design")
    parser.add_argument("--connections", type=int, default=10_000)
    parser.add_argument("--hold", type=float, default=5.0, help="seconds to hold them idle while sampling")
    parser.add_argument("--server-args", default="", help="extra arguments for the design's command, one string")
    parser.add_argument("--output", type=Path, help="the record (default build/idle-connections/DESIGN.json)")


def streaming_arguments(parser: argparse.ArgumentParser) -> None:
    from harness.suites import streaming
    parser.add_argument("--quick", action="store_true", help="small phases, a few seconds each (not for results/)")
    parser.add_argument("--design", action="append", help="only this stream design (repeatable)")
    parser.add_argument("--phase", action="append",
                        help="only this phase (repeatable); the record is then streaming-PHASE.json")
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "build",
                        help=f"directory for {streaming.RECORD_NAME} (default build/; the site's record is in "
                             "results/)")


def instructions_arguments(parser: argparse.ArgumentParser) -> None:
    from harness.suites import instructions
    quick, full = instructions.QUICK.requests, instructions.FULL.requests
    parser.add_argument("--quick", action="store_true", help=f"{quick[0]:,} and {quick[1]:,} requests in place of "
                                                             f"{full[0]:,} and {full[1]:,}, into build/results/")
    parser.add_argument("--row", action="append", help="only this row (repeatable): step-0 ... step-5, "
                        f"{', '.join(instructions.PLAIN_AND_HARDENED)}, {instructions.VERSIONS_DESIGN}-python-3.12, "
                        f"fast-and-correct-step-7, fast-and-correct-step-7-production-heads, "
                        f"{instructions.NGINX}-production-heads, ...; into build/results/")


def conformance_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--design", action="append", help="only this design, or NAME+nginx behind nginx (repeatable)")
    parser.add_argument("--case", action="append", help="only this case or group of cases, by id (repeatable)")
    parser.add_argument("--quick", action="store_true", help="two designs (hardened, asyncio-streams), none behind nginx")
    parser.add_argument("--jobs", type=int, help="designs run at once (default: the suite's `jobs`)")
    parser.add_argument("--no-gunicorn-corpus", action="store_true",
                        help="skip fetching gunicorn's request corpus with pip")
    parser.add_argument("--out", type=Path, help="directory for conformance.json (default: results/ for a complete "
                                                  "full run, build/results/ otherwise)")


def deployment_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("part", choices=["race", "overload"], help="the idle-timeout race, or past capacity")
    parser.add_argument("--design", action="append", help="only this design's targets (repeatable)")
    parser.add_argument("--quick", action="store_true", help="fewer bursts, fewer rates, shorter schedules")
    parser.add_argument("--out", type=Path, help="directory for the record (default: results/deployment/ for a "
                                                  "complete full run, build/results/ otherwise)")


def recipe_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("part", choices=["check", "quota"],
                        help="the recipe's two configurations on the real stack, or workers against a CPU quota")
    parser.add_argument("--quick", action="store_true", help="shorter schedules, one repetition")
    parser.add_argument("--out", type=Path, help="directory for the record (default: results/deployment/ for a full "
                                                  "run, build/results/ for a quick one)")


def new_design_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", help="the new design's name (lower case, hyphens)")
    parser.add_argument("--grows-from", required=True, help="the design it starts as a copy of")
    parser.add_argument("--title", help="how pages and tables name it (default: from NAME)")
    parser.add_argument("--model", help="its concurrency model (default: the one it grows from)")


def render_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--check", action="store_true", help="exit 1 when a committed table is stale")


class Subcommand(NamedTuple):
    """One line of the table: its help, the builder of its arguments, and its handler (which builds a suite's Plan
    from the parsed arguments, calls the suite's measure_plan, prints from the record and returns the exit code)."""

    help: str
    arguments: Callable[[argparse.ArgumentParser], None]
    handler: Callable[[Catalogue, argparse.Namespace], int]


# Every subcommand, in the order of this module's docstring (tests/harness/test_suite_shape.py compares the two).
SUBCOMMANDS: dict[str, Subcommand] = {
    "list": Subcommand("the design catalogue", with_json, command_list),
    "scenarios": Subcommand("the scenario catalogue", with_json, command_scenarios),
    "serve": Subcommand("run one design in the foreground", serve_arguments, command_serve),
    "check": Subcommand("start a design, verify its answer, stop it", check_arguments, command_check),
    "run": Subcommand("measure designs under a scenario", run_arguments, command_run),
    "restart": Subcommand("restart servers under steady load; record every request", restart_arguments,
                          command_restart),
    "balance": Subcommand("how evenly event-loop workers share connections", balance_arguments, command_balance),
    "gil-dependencies": Subcommand("install our dependencies on each CPython and ask whether importing them turns "
                                   "the GIL back on (minutes: source builds)", gil_dependencies_arguments,
                                   command_gil_dependencies),
    "render": Subcommand("turn results/ into the tables the pages include", render_arguments, command_render),
    "new-design": Subcommand("add a design grown from one of ours: its file, catalogue entry, page and nav entry "
                             "(README.md, 'Adding a design')", new_design_arguments, command_new_design),
    "hostile": Subcommand("hostile clients against every HTTP design (results/hostile.json)", hostile_arguments,
                          command_hostile),
    "how-fast": Subcommand("measure the how-fast steps, or profile the fastest design", how_fast_arguments,
                           command_how_fast),
    "idle": Subcommand("hold many idle keep-alive connections; memory and latency", idle_arguments, command_idle),
    "instructions": Subcommand("instructions per request under valgrind's callgrind", instructions_arguments,
                               command_instructions),
    "conformance": Subcommand("RFC 9112 conformance cases against every HTTP design and three parsers",
                              conformance_arguments, command_conformance),
    "deployment": Subcommand("behind nginx (the idle-timeout race) and past capacity", deployment_arguments,
                             command_deployment),
    "recipe": Subcommand("the recipe's configurations on the real stack; a CPU quota", recipe_arguments,
                         command_recipe),
    "streaming": Subcommand("server-sent-event streams: held, slow readers, a stop", streaming_arguments,
                            command_streaming),
}


class SubcommandParser(argparse.ArgumentParser):
    """A subcommand's parser that adds its arguments when first used (to parse, or to print its help or usage).

    Some builders import their suite for a default or a list of choices: built lazily, only the chosen
    subcommand's builder runs, so `bench.py list` imports no suite and `bench.py run` no other suite's.
    """

    def __init__(self, *args: Any, arguments: Callable[[argparse.ArgumentParser], None] | None = None,
                 **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.arguments = arguments

    def built(self) -> SubcommandParser:
        arguments, self.arguments = self.arguments, None
        if arguments is not None:
            arguments(self)
        return self

    def parse_known_args(self, *args: Any, **kwargs: Any) -> Any:
        return super(SubcommandParser, self.built()).parse_known_args(*args, **kwargs)

    def format_usage(self) -> str:
        return super(SubcommandParser, self.built()).format_usage()

    def format_help(self) -> str:
        return super(SubcommandParser, self.built()).format_help()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="bench.py", description=__doc__.splitlines()[0])
    parser.add_argument("--catalogue", type=Path, default=CATALOGUE_DIR,
                        help="directory of catalogue *.toml files (default: scripts/catalogue)")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=SubcommandParser)
    for name, subcommand in SUBCOMMANDS.items():
        sub = commands.add_parser(name, help=subcommand.help, arguments=subcommand.arguments)
        sub.set_defaults(handler=subcommand.handler)
    return parser


# The errors that say "bad input" (exit 2), by the module that defines them. A module no handler imported cannot
# have raised its error, so main() catches those of the modules loaded, and importing them all is not needed.
BAD_INPUT_ERRORS = {
    "harness.model.catalogue": ("UnknownNameError",),
    "harness.system.processes": ("PortBusyError",),
    "harness.clients.tools": ("ToolMissingError",),
    "harness.system.launcher": ("UnsupportedWorkError",),
    "harness.suites.restart": ("RestartPlanError",),
    "harness.suites.deployment": ("DeploymentPlanError",),
    "harness.suites.recipe": ("RecipePlanError",),
    "harness.system.cpu_quota": ("QuotaUnavailableError",),
    "harness.render.figures": ("FigureError",),
    "harness.suites.instructions": ("UnknownRowError",),
    "harness.system.open_files": ("OpenFilesLimitError",),
}


def bad_input_errors() -> tuple[type[Exception], ...]:
    """The classes of BAD_INPUT_ERRORS whose modules are loaded (at the time an error reaches main)."""
    return tuple(getattr(sys.modules[module], name) for module, names in BAD_INPUT_ERRORS.items()
                 if module in sys.modules for name in names)


def interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # SIGTERM unwinds like Ctrl-C: every `finally` stops what it started


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    signal.signal(signal.SIGTERM, interrupt)
    # Also when started with SIGINT ignored (a background job of a script): Ctrl-C must still clean up.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        try:
            catalogue = load_catalogue(args.catalogue)
        except (OSError, ValueError) as error:  # unreadable, not TOML (a ValueError), or inconsistent
            print(f"error: the catalogue in {args.catalogue}: {error}", file=sys.stderr)
            return EXIT_BAD_INPUT
        return args.handler(catalogue, args)
    except bad_input_errors() as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("interrupted: every process started was stopped; no record was written", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception:  # noqa: BLE001 - not 1, which says "a design failed" and lets make bench go on
        traceback.print_exc()
        print("bug in the harness (the traceback above): every process started was stopped", file=sys.stderr)
        return EXIT_HARNESS_BUG


if __name__ == "__main__":
    sys.exit(main())
