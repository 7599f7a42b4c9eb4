"""Reproduce the seeds' studies end to end and report them: tables (rich), plots (matplotlib), HTML.

    llmbench reproduce --quick --out out/      # measure here, predict every catalog system, report
    llmbench report --db llmbench-results.db --out out/   # rebuild the report from a database

Layout: `sweeps` (what is predicted), `measure_plan` (what is measured here, with time budgets),
`rows` (reading results rows tolerantly), `figures` (matplotlib), `tables` (table data + rich),
`html` (the static page), `reproduce` (the orchestration), `cli` (argparse commands).
"""
