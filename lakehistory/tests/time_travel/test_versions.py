"""Versions on the demo: `version_at` gives one consistent cut of every history table, version
discovery finds each table's last transaction, and an empty table has the empty-table version
(Atoti's `emptyTableVersion`), which keeps out the rows a later transaction adds."""

from __future__ import annotations

import datetime as dt

from demo_reference import HISTORY, compile_many, known_after, naive

from harness import DbtProject
from lakehistory.names import ACTIVE, END, START
from lakehistory_tools.generator import get_table

FIVETRAN = (START, END, ACTIVE)


def fivetran_table(rows: list[dict], table: str) -> list[tuple]:
    """A Fivetran history-mode table as sorted tuples: key, data columns, start, end, active."""
    tdef = get_table(table)
    names = [*tdef.key, *tdef.column_names, *FIVETRAN]
    return sorted((tuple(naive(r[n]) for n in names) for r in rows), key=repr)


def visible_at(txns: list[dict], syncs: list[dict], at: dt.datetime) -> int:
    """The reference consistent cut at `at`: the last transaction before the first one not
    visible then. A transaction is visible once it is recorded; a sync once each of its tables
    has recorded it."""
    recorded: dict[int, set[str]] = {}
    for t in txns:
        if t["committed_at"] <= at:
            recorded.setdefault(t["txn_id"], set()).add(t["source_table"])
    tables = {s["txn_id"]: set(s["tables"]) for s in syncs}
    cut = 0
    for txn_id in sorted({t["txn_id"] for t in txns} | set(tables)):
        if txn_id not in recorded or not tables.get(txn_id, set()) <= recorded[txn_id]:
            break
        cut = txn_id
    return cut


def test_version_at_cuts_every_history_table_at_one_transaction(demo: DbtProject) -> None:
    """At any instant, version_at is the last transaction before the first one not visible then
    (a sync is visible once each of its tables has recorded it; 0 before the first), and every
    history table as of it is the Fivetran table the batches applied by then give."""
    txns = demo.rows("select txn_id, committed_at, batch_sequence, source_table from {schema}.lakehistory_transactions")
    syncs = demo.rows("select txn_id, tables from {schema}.lakehistory_transactions_syncs")
    first_day = max(t["txn_id"] for t in txns if t["batch_sequence"] == 1)
    first_day_done = max(t["committed_at"] for t in txns if t["txn_id"] == first_day)
    queries = compile_many(
        demo,
        {
            "version_at_sql": "select {{ lakehistory.version_at_sql('lh_test_at') }} as v",
            "version_at": f"""select {{{{ lakehistory.version_at("timestamp'{first_day_done}'") }}}} as v""",
            **{t: f"select * from {{{{ lakehistory.as_of(ref('{t}_history'), 'lh_test_v') }}}}" for t in HISTORY},
        },
    )
    demo.spark.sql("declare or replace variable lh_test_at timestamp")
    probes = [min(t["committed_at"] for t in txns) - dt.timedelta(microseconds=1)]
    probes += sorted({t["committed_at"] for t in txns})
    for at in probes:
        demo.spark.sql(f"set var lh_test_at = timestamp'{at}'")
        assert demo.rows(queries["version_at_sql"])[0]["v"] == visible_at(txns, syncs, at), f"version_at({at})"

    # version_at reads the version when the query compiles: one literal for every table of the cut.
    assert queries["version_at"].endswith(f"select {visible_at(txns, syncs, first_day_done)} as v"), queries[
        "version_at"
    ]
    last = max(t["txn_id"] for t in txns)
    demo.spark.sql("declare or replace variable lh_test_v bigint")
    for version, reference in ((first_day, known_after(1)), (last, known_after())):
        demo.spark.sql(f"set var lh_test_v = {version}")
        for table in HISTORY:
            assert fivetran_table(demo.rows(queries[table]), table) == fivetran_table(
                reference["history"][table], table
            ), f"{table} as of version {version}"


def test_a_demo_day_is_one_transaction_of_its_history_tables(demo: DbtProject) -> None:
    """The generator lands each day's batches as one sync: one id per day, a row per history
    table, in day order; the feature states of its tables have uuids no other state has."""
    batches = demo.rows(
        "select sync_id, txn_id, source_table, batch_sequence from {schema}.lakehistory_transactions"
        " where operation = 'batch'"
    )
    days: dict[str, set] = {}
    for b in batches:
        days.setdefault(b["sync_id"], set()).add((b["txn_id"], b["batch_sequence"]))
    assert all(len(ids) == 1 for ids in days.values()), days
    assert len(days) == len({b["batch_sequence"] for b in batches}) and None not in days
    ordered = sorted(next(iter(ids)) for ids in days.values())
    assert [day for _, day in ordered] == sorted(day for _, day in ordered), "ids follow the days"
    assert all(len([b for b in batches if b["sync_id"] == s]) == len(HISTORY) for s in days)
    # The tables' feature states share the day's transaction, each in a uuid slot of its own.
    states = demo.rows(" union all ".join(f"select uuid, txn_id from {{schema}}.{t}_states" for t in HISTORY))
    assert len({s["uuid"] for s in states}) == len(states), "a feature state's uuid repeats across tables"
    assert {s["txn_id"] for s in states} <= {txn for ids in days.values() for txn, _ in ids}


def test_discovery_finds_the_last_transaction_that_changed_each_history_table(demo: DbtProject) -> None:
    queries = compile_many(demo, {"found": "select * from {{ lakehistory.current_versions() }}"})
    found = {r["table_name"]: r["version"] for r in demo.rows(queries["found"])}
    txns = demo.rows("select * from {schema}.lakehistory_transactions where operation = 'batch'")
    changed: dict[str, int] = {}
    for t in txns:
        name = t["history_table"].replace("`", "").rsplit(".", 1)[-1]
        if t["versions_opened"] or t["versions_closed"]:
            changed[name] = max(changed.get(name, 0), t["txn_id"])
    assert found == changed
    assert set(found) == {f"{t}_history" for t in HISTORY}


def test_an_empty_table_has_the_empty_version_which_keeps_later_rows_out(demo: DbtProject) -> None:
    """Discovery on an empty table gives the var `lakehistory_empty_version` (default 0); a query
    pinned to that version still finds the table empty after a transaction adds rows."""
    probe = f"api.Relation.create(schema='{demo.schema}', identifier='lh_empty_probe')"
    jinja = {
        "version": f"select {{{{ lakehistory.current_version({probe}) }}}} as v",
        "as_of": f"select count(*) as n from {{{{ lakehistory.as_of({probe}, 'lh_test_v') }}}}",
    }
    demo.rows("create table {schema}.lh_empty_probe as select * from {schema}.meta_network_history where false")
    try:
        queries = compile_many(demo, jinja)
        configured = demo.run_ok("compile", "--inline", jinja["version"], vars={"lakehistory_empty_version": -1})
        assert demo.rows(configured.result.results[0].node.compiled_code)[0]["v"] == -1
        empty_version = demo.rows(queries["version"])[0]["v"]
        assert empty_version == 0

        demo.rows("insert into {schema}.lh_empty_probe select * from {schema}.meta_network_history")
        demo.spark.sql("declare or replace variable lh_test_v bigint")
        demo.spark.sql(f"set var lh_test_v = {empty_version}")
        assert demo.rows(queries["as_of"])[0]["n"] == 0
        now = demo.rows(queries["version"])[0]["v"]
        demo.spark.sql(f"set var lh_test_v = {now}")
        assert now > empty_version and demo.rows(queries["as_of"])[0]["n"] > 0
    finally:
        demo.rows("drop table if exists {schema}.lh_empty_probe")
