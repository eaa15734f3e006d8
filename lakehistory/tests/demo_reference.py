"""What the `demo` fixture's project should hold, from the generator's own batches and extracts run
through the reference model (oracle.fivetran), day by day."""

from __future__ import annotations

import datetime as dt
import functools

from harness import DEMO_CONFIG, DEMO_EXTRACTS, DbtProject
from lakehistory.landing.batch import ONE_MS, TMAX
from lakehistory.names import END, START
from lakehistory_tools.generator import SourceSimulator, get_table
from lakehistory_tools.generator.batches import to_python
from oracle.fivetran import apply_stream, state_at

HISTORY = ("meta_network", "meta_station", "obs_raw")  # history mode: change batches
TABLES = ("meta_network", "meta_station", "meta_history", "meta_vars", "obs_raw")  # and daily extracts


def naive(v):
    return v.astimezone(dt.UTC).replace(tzinfo=None) if isinstance(v, dt.datetime) else v


@functools.cache
def simulated() -> dict:
    """The demo's source, sync by sync: per history-mode table its batches, per extract table its
    captures (sync time, rows)."""
    sim = SourceSimulator(DEMO_CONFIG)
    batches: dict[str, list] = {t: [] for t in HISTORY}
    captures: dict[str, list] = {t: [] for t in DEMO_EXTRACTS}
    for _ in sim.run():
        for t in HISTORY:
            batches[t].append(sim.batch(t)[0])
        for t in DEMO_EXTRACTS:
            tdef = get_table(t)
            columns = sim.current_columns(t)
            values = [to_python(columns[c], tdef.types[c]) for c in tdef.column_names]
            rows = [dict(zip(tdef.column_names, r, strict=True)) for r in zip(*values, strict=True)]
            captures[t].append((naive(sim.sync_time(sim.sync)), rows))
    return {"batches": batches, "captures": captures}


def known_after(syncs: int | None = None) -> dict:
    """What the project knew after its first `syncs` builds (all of them when None): per
    history-mode table its reference Fivetran table, per extract table its captures."""
    source = simulated()
    return {
        "history": {t: apply_stream(b[:syncs]) for t, b in source["batches"].items()},
        "captures": {t: c[:syncs] for t, c in source["captures"].items()},
    }


def state(reference: dict, table: str, at: dt.datetime) -> dict:
    """The table's rows valid at `at`, key -> values of its columns."""
    tdef = get_table(table)
    if table in reference["history"]:
        out = {}
        # Where a late version left its predecessor overlapping (rule 8), the later start wins.
        for r in sorted(state_at(reference["history"][table], at.replace(tzinfo=dt.UTC)), key=lambda r: r[START]):
            out[tuple(r[k] for k in tdef.key)] = tuple(naive(r[c]) for c in tdef.column_names)
        return out
    taken = [rows for when, rows in reference["captures"][table] if when <= at]
    return {
        tuple(r[k] for k in tdef.key): tuple(naive(r[c]) for c in tdef.column_names)
        for r in (taken[-1] if taken else [])
    }


def instants(reference: dict) -> list[dt.datetime]:
    """Valid times where the state changes (a sample of starts and ends) and around each sync."""
    changes = sorted(
        {naive(r[START]) for rows in reference["history"].values() for r in rows}
        | {naive(r[END]) + ONE_MS for rows in reference["history"].values() for r in rows if r[END] < TMAX}
    )
    syncs = [when for when, _ in reference["captures"]["meta_vars"]]
    return sorted(set(changes[:: max(1, len(changes) // 12)] + syncs + [s - ONE_MS for s in syncs] + [changes[-1]]))


def compile_many(project: DbtProject, queries: dict[str, str]) -> dict[str, str]:
    """Each Jinja query as dbt compiles it in `project`, in one dbt invocation."""
    marks = {name: f"/* lakehistory-test: {name} */" for name in queries}
    compiled = project.compile_inline("\n".join(f"{marks[name]}\n{sql}" for name, sql in queries.items()))
    out = {}
    for name in reversed(list(queries)):
        compiled, _, query = compiled.rpartition(marks[name])
        out[name] = query.strip()
    return out
