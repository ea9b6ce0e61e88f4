"""Model: what the harness knows as data. Imports nothing above it.

    paths.py, catalogue.py          where the repository is; the designs and scenarios (scripts/catalogue/)
    typed.py                        the one checker: typed classes read from TOML or JSON against their
                                    annotations (strictly, or leniently for an old record), and written back
    settings.py, suite_settings.py, the settings of a scenario and of each suite's plan, as frozen typed
      deployment_plan.py,           objects (an unknown key is refused, with a did-you-mean)
      restart_plan.py
    records/                        the records: written atomically (records/__init__.py), and every kind
                                    as typed classes (records/kinds.py the list; one module per kind:
                                    scenario_record.py, hostile_record.py, ...)
    stats.py                        statistics over repetitions
    how_fast_steps.py,              the chains of optimisation steps; the instruction-count rows
      instruction_counts.py
    disclosed_settings.py           the real servers' settings we change, and why
    new_design.py                   the files `bench.py new-design` writes for a design grown from one of ours
"""
