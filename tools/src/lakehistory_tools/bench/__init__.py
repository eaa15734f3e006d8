"""The benchmark: how the cost of lakehistory grows, side by side with what users would pick instead.

`make bench` (or `python -m lakehistory_tools.bench`) builds its inputs at chosen scales, runs every
measurement several times, interleaved so that compared runs are made side by side, and writes a
table to the terminal, `bench.csv` (one row per run), `bench.json` (runs and figures) and PNG plots.

    workload.py  the inputs: history tables of N rows, change batches, the dbt snapshot's source
    measure.py   timing, peak driver memory, files read by a scan, medians and spreads
    report.py    the terminal table, CSV, JSON and plots
    __main__.py  the command: what runs in which order

Two narrower tools beside it: `statements.py` lists the Spark statements of one history run with
their cost, and `threads.py` times the demo's daily `dbt build` per dbt thread count.
"""
