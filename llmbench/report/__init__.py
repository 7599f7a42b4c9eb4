"""The report: draws what results/ holds. Tables (rich), plots (matplotlib), a static HTML page.

    llmbench report --db llmbench-results.db --out out/   # the report of a database
    llmbench reproduce --quick --out out/                 # fill it first (studies/reproduce.py)

Layout: `rows` (reading results rows through the Workload and declared metric names), `style`
(colours, markers, hardware labels), `plotkit` (shared plotting helpers), `plots_machine` and
`plots_studies` (one function per figure), `figures` (the list of figures and their captions),
`tables` (table data + rich), `html` (the static page and `report()`), `cli` (`llmbench report`).
It imports neither the engines (perfmodel, measure, streaming) nor studies/, and runs no
subprocess: every plan of work is made in llmbench/studies.
"""
