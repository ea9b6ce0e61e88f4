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
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness.clients import probe, verify  # noqa: E402
from harness.clients.tools import ToolMissingError, require_tool  # noqa: E402
from harness.model.catalogue import CATALOGUE_DIR, Catalogue, Scenario, UnknownNameError, load_catalogue  # noqa: E402
from harness.model import new_design  # noqa: E402
from harness.model.paths import REPO_ROOT  # noqa: E402
from harness.model.records import load_scenario_records  # noqa: E402
from harness.render import conformance_tables, how_fast_tables, instructions_tables, site, survival  # noqa: E402
from harness.render.figures import FigureError  # noqa: E402
from harness.suites import (  # noqa: E402
    balance,
    conformance,
    deployment,
    gil_dependencies,
    hostile,
    how_fast,
    idle,
    instructions,
    interleave,
    plan,
    recipe,
    restart,
    runner,
    streaming,
)
from harness.system import cpu_quota, launcher, processes  # noqa: E402
from harness.suites.hostile import emfile_settings  # noqa: E402
from harness.system.open_files import OpenFilesLimitError  # noqa: E402

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
    if name is None:
        return plan.every_scenario(catalogue, quick)
    return interleave.members(catalogue, name) or [catalogue.scenario(name)]


def command_run(catalogue: Catalogue, args: argparse.Namespace) -> int:
    scenarios = selected_scenarios(catalogue, args.scenario, args.quick)
    for name in args.design or []:
        catalogue.design(name)  # unknown names fail before anything starts
    selected = [(scenario, [name for name in args.design if name in scenario.designs] if args.design else None)
                for scenario in scenarios]
    selected = [(scenario, names) for scenario, names in selected if names != []]
    for scenario, _ in selected:
        require_tool(scenario.tool)  # a missing tool stops the run before the first cell, not midway
    progress = plan.plan_run(catalogue, selected, args.quick, args.repeat)
    any_failed = False
    names_of = {scenario.id: names for scenario, names in selected}
    for group in interleave.groups([scenario for scenario, _ in selected]):
        if len(group) > 1 and not args.design:  # the interleave group, round robin
            written = interleave.run_group(catalogue, group, args.quick, args.repeat, args.out, progress)
        else:
            written = [runner.run_scenario(catalogue, scenario, names_of[scenario.id], args.quick, args.repeat,
                                           args.out, progress) for scenario in group]
        for path, record in written:
            print(site.scenario_table(record))
            print(f"Wrote {path}")
            failed = [design.name + (f" ({design.status})" if design.status != "failed" else "")
                      for design in record.designs if design.status != "ok"]
            if failed:
                any_failed = True
                print(f"FAILED in {record.id}: {', '.join(failed)} (see the table and build/logs/)", file=sys.stderr)
    return EXIT_FAILED if any_failed else EXIT_OK


def command_restart(catalogue: Catalogue, args: argparse.Namespace) -> int:
    """The restart scenario: restarts under steady load, every request recorded (harness/suites/restart.py)."""
    run = restart.run_restart_in_flight if args.in_flight else restart.run_restart
    path, problems = run(catalogue, args.quick, args.design, args.out)
    print(f"Wrote {path}")
    return EXIT_OK if problems == 0 else EXIT_FAILED  # failed requests are findings, recorded


def command_gil_dependencies(catalogue: Catalogue, args: argparse.Namespace) -> int:
    """Which dependencies install on each CPython, and which turn the GIL back on (harness/suites/gil_dependencies.py)."""
    print(f"Wrote {gil_dependencies.run_gil_dependencies(args.python or ['3.13.5', '3.13.5t'], args.output)}")
    return EXIT_OK


def command_balance(catalogue: Catalogue, args: argparse.Namespace) -> int:
    """How evenly event-loop workers share connections (harness/suites/balance.py)."""
    print(f"Wrote {balance.run_balance(catalogue, args.quick, args.out)}")
    return EXIT_OK


def command_hostile(catalogue: Catalogue, args: argparse.Namespace) -> int:
    """The hostile suite (scripts/catalogue/hostile/cases.toml) against HTTP designs (harness/suites/hostile/):
    run, print the matrix, exit 1 when a design died or did not start."""
    if args.emfile_settings:
        path, settings_record = emfile_settings.run_emfile_settings(catalogue, args.quick, args.out)
        print(survival.emfile_settings_table(settings_record))
        print(f"Wrote {path}")
        return EXIT_OK  # a server that spins or loses connections is a finding, recorded
    path, record = hostile.run_suite(catalogue, args.design, args.case, args.quick, args.out, jobs=args.jobs)
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
    if args.part == "steps":
        path = how_fast.measure_steps(args)
        print(how_fast_tables.steps_table(how_fast_tables.load_steps(path)))
        print(f"wrote {path.relative_to(REPO_ROOT)}")
        return EXIT_OK
    path = how_fast.measure_profile(args)
    if path is None:
        return EXIT_FAILED
    meta = how_fast_tables.load_profile(path.with_suffix(".json"))
    print(how_fast_tables.profile_page(meta, how_fast_tables.read_collapsed(path.read_text(encoding="utf-8")), "(svg)"))
    print(f"wrote {path.relative_to(REPO_ROOT)} and its .json")
    return EXIT_OK


def command_idle(catalogue: Catalogue, args: argparse.Namespace) -> int:
    return idle.command(catalogue, args)


def command_streaming(catalogue: Catalogue, args: argparse.Namespace) -> int:
    return streaming.command(catalogue, args)


def command_instructions(catalogue: Catalogue, args: argparse.Namespace) -> int:
    """Instructions per request under callgrind (harness/suites/instructions.py); its table printed from the record."""
    path = instructions.measure(catalogue, args.quick, args.row)
    record = instructions_tables.load_instructions(path)
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
    path, record = conformance.run(catalogue, args)
    print(conformance_tables.summary_table(record))
    print(f"Wrote {path}")
    failed = [design.name for design in record.designs if design.status != "ok"]
    if failed:
        print(f"FAILED (died or did not start): {', '.join(failed)}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK  # a failed case is a finding, recorded


def command_render(catalogue: Catalogue, args: argparse.Namespace) -> int:
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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="bench.py", description=__doc__.splitlines()[0])
    parser.add_argument("--catalogue", type=Path, default=CATALOGUE_DIR,
                        help="directory of catalogue *.toml files (default: scripts/catalogue)")
    commands = parser.add_subparsers(dest="command", required=True)
    listing = commands.add_parser("list", help="the design catalogue")
    listing.add_argument("--json", action="store_true")
    listing.set_defaults(handler=command_list)
    scenarios = commands.add_parser("scenarios", help="the scenario catalogue")
    scenarios.add_argument("--json", action="store_true")
    scenarios.set_defaults(handler=command_scenarios)
    serve = commands.add_parser("serve", help="run one design in the foreground")
    serve.add_argument("name")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--delay", type=float, default=0.1)
    serve.add_argument("--work", type=int, default=0, help=WORK_HELP)
    serve.set_defaults(handler=command_serve)
    check = commands.add_parser("check", help="start a design, verify its answer, stop it")
    check.add_argument("name")
    check.add_argument("--delay", type=float, default=0.0)
    check.add_argument("--work", type=int, default=0, help=WORK_HELP)
    check.add_argument("--keep-alive", action="store_true",
                       help="check that it answers several requests on one connection (keep_alive = true designs)")
    check.set_defaults(handler=command_check)
    run = commands.add_parser("run", help="measure designs under a scenario")
    run.add_argument("--scenario", help="one scenario id, or an interleave group's name, whose scenarios run "
                                        "round robin (python-versions); default: every scenario")
    run.add_argument("--design", action="append", help="only this design (repeatable)")
    run.add_argument("--quick", action="store_true", help="the scenario's quick settings (1 repetition)")
    run.add_argument("--repeat", type=int, help="repetitions per design (overrides the scenario)")
    run.add_argument("--out", type=Path, help="directory for the records (default: results/ for a complete "
                                               "full run, build/results/ otherwise)")
    run.set_defaults(handler=command_run)
    restarting = commands.add_parser("restart", help="restart servers under steady load; record every request")
    restarting.add_argument("--design", action="append", help="only this design's targets (repeatable)")
    restarting.add_argument("--quick", action="store_true", help="shorter load, fewer restarts")
    restarting.add_argument("--in-flight", action="store_true",
                            help="one restart with kept-alive clients idle and long requests in flight "
                                 "(restart.toml's [in_flight])")
    restarting.add_argument("--out", type=Path, help="directory for the record (default: results/ for a full "
                                                      "run of every target, build/results/ otherwise)")
    restarting.set_defaults(handler=command_restart)
    dependencies = commands.add_parser("gil-dependencies", help="install our dependencies on each CPython and ask "
                                       "whether importing them turns the GIL back on (minutes: source builds)")
    dependencies.add_argument("--python", action="append", default=None,
                              help="a CPython version as the catalogue names it (repeatable; default 3.13.5 and 3.13.5t)")
    dependencies.add_argument("--output", type=Path, default=gil_dependencies.RECORD_PATH)
    dependencies.set_defaults(handler=command_gil_dependencies)
    balancing = commands.add_parser("balance", help="how evenly event-loop workers share connections")
    balancing.add_argument("--quick", action="store_true", help="fewer requests")
    balancing.add_argument("--out", type=Path, help="directory for the record (default: results/, or build/results/"
                                                     " with --quick)")
    balancing.set_defaults(handler=command_balance)
    hostile = commands.add_parser("hostile", help="hostile clients against every HTTP design (results/hostile.json)")
    hostile.add_argument("--design", action="append", help="only this design, or NAME+nginx behind nginx (repeatable)")
    hostile.add_argument("--case", action="append", help="only this case, by number or id (repeatable)")
    hostile.add_argument("--quick", action="store_true", help="shorter bounds, fewer connections, five designs")
    hostile.add_argument("--out", type=Path, help="directory for hostile.json (default: results/ for a complete "
                                                   "full run, build/results/ otherwise)")
    hostile.add_argument("--jobs", type=int, help="designs run at once (default: the suite's `jobs`)")
    hostile.add_argument("--emfile-settings", action="store_true",
                         help="case 15 only, against the real servers at their defaults and with their own cap "
                              "(scripts/catalogue/hostile/emfile-settings.toml; results/hostile-emfile-settings.json)")
    hostile.set_defaults(handler=command_hostile)
    how_fast_parser = commands.add_parser("how-fast", help="measure the how-fast steps, or profile the fastest design")
    how_fast.add_arguments(how_fast_parser)
    how_fast_parser.set_defaults(handler=command_how_fast)
    idle_parser = commands.add_parser("idle", help="hold many idle keep-alive connections; memory and latency")
    idle.add_arguments(idle_parser)
    idle_parser.set_defaults(handler=command_idle)
    streaming_parser = commands.add_parser("streaming", help="server-sent-event streams: held, slow readers, a stop")
    streaming.add_arguments(streaming_parser)
    streaming_parser.set_defaults(handler=command_streaming)
    instructions_parser = commands.add_parser("instructions", help="instructions per request under valgrind's callgrind")
    instructions.add_arguments(instructions_parser)
    instructions_parser.set_defaults(handler=command_instructions)
    conformance_parser = commands.add_parser("conformance",
                                             help="RFC 9112 conformance cases against every HTTP design and three parsers")
    conformance.add_arguments(conformance_parser)
    conformance_parser.set_defaults(handler=command_conformance)
    deployment_parser = commands.add_parser("deployment", help="behind nginx (the idle-timeout race) and past capacity")
    deployment.add_arguments(deployment_parser)
    deployment_parser.set_defaults(handler=deployment.command)
    recipe_parser = commands.add_parser("recipe", help="the recipe's configurations on the real stack; a CPU quota")
    recipe.add_arguments(recipe_parser)
    recipe_parser.set_defaults(handler=recipe.command)
    adding = commands.add_parser("new-design", help="add a design grown from one of ours: its file, catalogue "
                                 "entry, page and nav entry (README.md, 'Adding a design')")
    adding.add_argument("name", help="the new design's name (lower case, hyphens)")
    adding.add_argument("--grows-from", required=True, help="the design it starts as a copy of")
    adding.add_argument("--title", help="how pages and tables name it (default: from NAME)")
    adding.add_argument("--model", help="its concurrency model (default: the one it grows from)")
    adding.set_defaults(handler=command_new_design)
    rendering = commands.add_parser("render", help="turn results/ into the tables the pages include")
    rendering.add_argument("--check", action="store_true", help="exit 1 when a committed table is stale")
    rendering.set_defaults(handler=command_render)
    return parser


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
    except (UnknownNameError, processes.PortBusyError, ToolMissingError, launcher.UnsupportedWorkError,
            restart.RestartPlanError, deployment.DeploymentPlanError, recipe.RecipePlanError,
            cpu_quota.QuotaUnavailableError, FigureError, instructions.UnknownRowError, OpenFilesLimitError) as error:
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
