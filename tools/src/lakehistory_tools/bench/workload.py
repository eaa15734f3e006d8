"""The benchmark's inputs, built set-based in Spark (the base tables) and by the landing writer
(the change batches), on the demo's largest table, `obs_raw`.

A history table of N rows holds N / 5 observations, each with the history three Fivetran
versions leave in transaction time (5 physical rows):

    version 0 active  [2, t1)        version 0 ended   [t1, open)
    version 1 active  [t1, t2)       version 1 ended   [t2, open)
    version 2 active  [t2, open)     with t1 in 3..6 and t2 in 7..11 by key

so the table has ten synthetic transactions (2..11, recorded in the transactions table) after the
real first one, every key one active row at every version, and as-of queries at old versions
return as many rows as the current state. Its files are laid out as the history table's
clustering (key, valid_to) leaves them: each file holds one key range of either closed or open
rows.

Each round's batch touches `batch_keys` keys the way the demo's observations change: it revises
the newest 80 % of them (QA revisions of recent observations), deletes 10 % just below those and
inserts 10 % new ones above the largest key.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from lakehistory.history.transactions import column_list
from lakehistory.landing.batch import TMAX, Batch
from lakehistory.landing.write import write_batch
from lakehistory_tools.generator.domain import get_table

TABLE = get_table("obs_raw")
KEY = TABLE.key[0]
ROWS_PER_KEY = 5
SYNTHETIC_TRANSACTIONS = range(2, 12)
OPEN = 9223372036854775807  # an open valid_to (lakehistory_open_end 'max', integer versions)
ROWS_PER_FILE = 200_000
T0 = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)


def q(name: str) -> str:
    return f"`{name}`"


DATA_COLUMNS = ", ".join(q(c) for c in TABLE.column_names)
FIVETRAN_COLUMNS = DATA_COLUMNS + ", `_fivetran_start`, `_fivetran_end`, `_fivetran_active`, `_fivetran_synced`"


def keys_for(rows: int) -> int:
    return max(1, rows // ROWS_PER_KEY)


def files_for(rows: int) -> int:
    return max(2, rows // ROWS_PER_FILE)


@dataclass(frozen=True)
class BatchPlan:
    """The keys round `r` (1, 2, ...) of a table with `keys` keys touches."""

    keys: int
    batch_keys: int

    @property
    def updates(self) -> int:
        return self.batch_keys * 8 // 10

    @property
    def deletes(self) -> int:
        return self.batch_keys // 10

    @property
    def inserts(self) -> int:
        return self.batch_keys - self.updates - self.deletes

    def check(self, rounds: int) -> None:
        if self.updates + rounds * self.deletes >= self.keys:
            raise ValueError(
                f"a table of {self.keys} keys is too small for {rounds} rounds of {self.batch_keys}-key batches"
            )

    def updated(self) -> range:
        return range(self.keys - self.updates + 1, self.keys + 1)

    def deleted(self, r: int) -> range:
        top = self.keys - self.updates - (r - 1) * self.deletes
        return range(top - self.deletes + 1, top + 1)

    def inserted(self, r: int) -> range:
        return range(self.keys + (r - 1) * self.inserts + 1, self.keys + r * self.inserts + 1)


def _row(key: int, start: dt.datetime, datum: float) -> dict:
    return {
        KEY: key,
        "history_id": key % 1000 + 1,
        "vars_id": key % 50 + 1,
        "obs_time": T0 + dt.timedelta(seconds=key),
        "datum": datum,
        "_fivetran_start": start,
        "_fivetran_end": TMAX,
        "_fivetran_active": True,
        "_fivetran_synced": start + dt.timedelta(hours=1),
    }


def round_start(r: int) -> dt.datetime:
    """Round r's versions start after the three synthetic ones (days 0, 1, 2)."""
    return T0 + dt.timedelta(days=2 + r)


def land_first_batch(landing: Path) -> None:
    """One observation (key 0): applying it makes the history table with the product's own layout."""
    write_batch(landing, _batch(0, [_row(0, T0, 0.0)], []))


def land_round(landing: Path, plan: BatchPlan, r: int) -> None:
    start = round_start(r)
    replace = [_row(k, start, float(r) + k % 7 / 10) for k in (*plan.updated(), *plan.inserted(r))]
    delete = [{KEY: k, "_fivetran_end": start} for k in plan.deleted(r)]
    write_batch(landing, _batch(r, replace, delete))


def land_small_round(landing: Path, plan: BatchPlan, r: int, keys: int) -> None:
    """Round r's small batch, right after its big one: `keys` of the updated keys revised again."""
    start = round_start(r) + dt.timedelta(hours=12)
    replace = [_row(k, start, float(r) + 0.5) for k in list(plan.updated())[:keys]]
    write_batch(landing, _batch(r, replace, [], small=True))


def land_backlog(landing: Path, keys: int, r: int, first: int, count: int, rows: int) -> None:
    """Batches `first` .. `first + count - 1` of a backlog, as a day of syncs after an outage
    leaves them: each revises `rows` keys of the table (neighbouring batches share keys), a minute
    after the one before it (round r's versions start after every earlier round's)."""
    for n in range(first, first + count):
        start = round_start(r) + dt.timedelta(minutes=n - first)
        low = (n * 37) % max(1, keys - rows)
        replace = [_row(k, start, float(n) + k % 7 / 10) for k in range(low + 1, low + rows + 1)]
        write_batch(landing, _batch(n, replace, [], backlog=True))


def _batch(r: int, replace: list[dict], delete: list[dict], small: bool = False, backlog: bool = False) -> Batch:
    if backlog:
        batch_id, sequence = f"backlog-{r:06d}", 1000 + r
    elif small:
        batch_id, sequence = f"bench-{r:04d}-small", 100 + 2 * r + 1
    else:
        batch_id, sequence = f"bench-{r:04d}", 100 + 2 * r
    return Batch(
        table=TABLE.name,
        batch_id=batch_id,
        sequence=sequence,
        key=TABLE.key,
        columns=TABLE.columns,
        replace=replace,
        delete=delete,
        author="lakehistory-bench",
        app_id="lakehistory-bench",
    )


def synthetic_history_sql(keys: int) -> str:
    """The N = 5 * keys physical rows described above (keys 1..keys), in the table's column order,
    with the helper column `_lh_open` for the file layout."""
    rows = ", ".join(
        f"struct({v} as v, {str(ended).lower()} as ended, {vf} as valid_from, {vt} as valid_to)"
        for v, ended, vf, vt in (
            (0, False, "2L", "t1"),
            (0, True, "t1", f"{OPEN}L"),
            (1, False, "t1", "t2"),
            (1, True, "t2", f"{OPEN}L"),
            (2, False, "t2", f"{OPEN}L"),
        )
    )
    return f"""
        with k as (
            select id as k, 3L + id % 4 as t1, 7L + id % 5 as t2 from range(1, {keys + 1})
        )
        select
            k as `{KEY}`,
            k % 1000 + 1 as `history_id`,
            k % 50 + 1 as `vars_id`,
            timestamp'2024-01-01 00:00:00' + make_dt_interval(0, 0, 0, k) as `obs_time`,
            cast(k % 997 as double) / 10 + v as `datum`,
            timestamp'2024-01-01 00:00:00' + make_dt_interval(v) as `_fivetran_start`,
            case
                when ended then timestamp'2024-01-01 00:00:00' + make_dt_interval(v + 1) - interval 1 millisecond
                else timestamp'9999-12-31 23:59:59.999'
            end as `_fivetran_end`,
            not ended as `_fivetran_active`,
            timestamp'2024-01-01 01:00:00' + make_dt_interval(v) as `_fivetran_synced`,
            valid_from as `valid_from`,
            valid_to as `valid_to`,
            valid_to = {OPEN}L as `_lh_open`
        from k
        lateral view inline(array({rows})) r as v, ended, valid_from, valid_to
    """


def fill_history(spark: SparkSession, schema: str, rows: int) -> None:
    """Append the synthetic rows to `<schema>.obs_raw_history` (made by the first batch) and record
    their ten transactions after transaction 1."""
    history = f"{q(schema)}.`obs_raw_history`"
    transactions = f"{q(schema)}.`lakehistory_transactions`"
    frame = spark.sql(synthetic_history_sql(keys_for(rows)))
    (
        frame.repartitionByRange(files_for(rows), "_lh_open", KEY)
        .sortWithinPartitions(KEY, "valid_to")
        .drop("_lh_open")
        .write.insertInto(history)
    )
    delta_version = spark.sql(f"describe history {history} limit 1").collect()[0][0]
    first = min(SYNTHETIC_TRANSACTIONS)
    spark.sql(f"""
        insert into {transactions} ({column_list()})
        select
            id as txn_id,
            concat('bench-synthetic-', id) as txn_uuid,
            'batch' as operation,
            t.source_table,
            t.history_table,
            concat('bench-synthetic-', id) as batch_id,
            id as batch_sequence,
            'lakehistory-bench' as author,
            'lakehistory-bench' as app_id,
            'synthetic history of the benchmark' as commit_message,
            t.started_at + make_dt_interval(0, 0, 0, id) as started_at,
            t.committed_at + make_dt_interval(0, 0, 0, id) as committed_at,
            0 as rows_in,
            0 as versions_opened,
            0 as versions_closed,
            0 as rows_overlap_deleted,
            0 as rows_purged,
            {int(delta_version)} as delta_version,
            null as sync_id,
            null as commit_json,
            '[]' as schema_changes
        from range({first}, {max(SYNTHETIC_TRANSACTIONS) + 1})
        cross join (select * from {transactions} where txn_id = 1) as t
    """)


def make_fivetran_copy(spark: SparkSession, schema: str, rows: int) -> str:
    """What a hand-written pipeline keeps: the history table's current Fivetran rows, as a Delta
    table clustered by key with the same file layout rules."""
    target = f"{q(schema)}.`obs_raw_fivetran`"
    types = ", ".join(f"{q(c.name)} {c.type}" for c in TABLE.columns)
    spark.sql(f"""
        create table {target} (
            {types}, `_fivetran_start` timestamp, `_fivetran_end` timestamp, `_fivetran_active` boolean,
            `_fivetran_synced` timestamp
        ) using delta cluster by (`{KEY}`) tblproperties ('delta.enableDeletionVectors' = 'true')
    """)
    (
        spark.sql(f"select {FIVETRAN_COLUMNS} from {q(schema)}.`obs_raw_history` where `valid_to` = {OPEN}L")
        .repartitionByRange(files_for(rows), KEY)
        .sortWithinPartitions(KEY)
        .write.insertInto(target)
    )
    return target


def make_snapshot_source(spark: SparkSession, schema: str) -> str:
    """The source a dbt snapshot would capture: the current rows, one per key."""
    state = f"{q(schema)}.`obs_raw_state`"
    spark.sql(f"""
        create table {state} using delta as
        select {DATA_COLUMNS} from {q(schema)}.`obs_raw_history`
        where `valid_to` = {OPEN}L and `_fivetran_active`
    """)
    return state


def change_snapshot_source(spark: SparkSession, schema: str, staged: str) -> None:
    """The same change as the staged batch, made to the snapshot's source (not timed)."""
    updates = ", ".join(f"s.{q(c)} = b.{q(c)}" for c in TABLE.column_names)
    values = ", ".join(f"b.{q(c)}" for c in TABLE.column_names)
    spark.sql(f"""
        merge into {q(schema)}.`obs_raw_state` as s
        using (select * from {staged} where `_lh_kind` in ('replace', 'delete')) as b
        on s.`{KEY}` = b.`{KEY}`
        when matched and b.`_lh_kind` = 'delete' then delete
        when matched then update set {updates}
        when not matched and b.`_lh_kind` = 'replace' then insert ({DATA_COLUMNS}) values ({values})
    """)


def read_landed_batch(spark: SparkSession, landing: Path, batch_id: str) -> str:
    """A landed batch as a hand-written pipeline reads it: its CSV files, typed, with the file
    kind in `_lh_kind`, as the temp view `bench_batch` (lazy: reading is part of what is timed)."""
    types = {c.name: c.type for c in TABLE.columns} | {
        "_fivetran_start": "timestamp",
        "_fivetran_end": "timestamp",
        "_fivetran_active": "boolean",
        "_fivetran_synced": "timestamp",
    }
    folder = landing / TABLE.name / batch_id
    frames = []
    for kind in ("replace", "delete", "earliest"):
        path = folder / f"{kind}_0.csv"
        if path.exists():
            raw = spark.read.option("header", True).csv(str(path))
            frames.append(raw.select(*[F.col(c).cast(types[c]) for c in raw.columns], F.lit(kind).alias("_lh_kind")))
    batch = frames[0]
    for frame in frames[1:]:
        batch = batch.unionByName(frame, allowMissingColumns=True)
    batch.createOrReplaceTempView("bench_batch")
    return "`bench_batch`"


def apply_by_hand(spark: SparkSession, staged: str, target: str) -> None:
    """The shortest correct hand-written PySpark for a batch of replace, delete and earliest rows
    (spec rules 6-9 and 11) on a Fivetran history table: one MERGE that deletes each key's
    versions from its earliest start on (rule 7) and ends its active row (rules 8 and 11), then
    one INSERT of the new versions (rule 9)."""
    spark.sql(f"""
        merge into {target} as t
        using (
            select
                `{KEY}`,
                min(case when `_lh_kind` = 'earliest' then `_fivetran_start` end) as earliest,
                max(case when `_lh_kind` = 'delete' then `_fivetran_end` end) as deleted_at
            from {staged}
            where `_lh_kind` in ('earliest', 'delete')
            group by `{KEY}`
        ) as s
        on t.`{KEY}` = s.`{KEY}` and (t.`_fivetran_active` or t.`_fivetran_start` >= s.earliest)
        when matched and t.`_fivetran_start` >= s.earliest then delete
        when matched then update set
            t.`_fivetran_end` = coalesce(s.earliest - interval 1 millisecond, s.deleted_at),
            t.`_fivetran_active` = false
    """)
    spark.sql(f"insert into {target} select {FIVETRAN_COLUMNS} from {staged} where `_lh_kind` = 'replace'")


def differences(spark: SparkSession, left: str, right: str) -> int:
    """Rows in one query and not the other (as multisets); 0 when they hold the same rows."""
    return (
        spark.sql(f"select count(*) from (({left}) except all ({right}))").collect()[0][0]
        + spark.sql(f"select count(*) from (({right}) except all ({left}))").collect()[0][0]
    )


# -- history foreign keys -----------------------------------------------------------------------------


def make_fk_inputs(spark: SparkSession, schema: str, children: int, parents: int) -> tuple[str, str]:
    """`_hx` rows of a child (obs_raw: `children` versions) and of its parent (meta_history:
    `parents` versions, five per station history), as Delta tables. Each child also carries a plain
    id of a parent version, for the equi-join of the same sizes."""
    parent_keys = max(1, parents // ROWS_PER_KEY)
    parent_table = f"{q(schema)}.`fk_parent_hx`"
    child_table = f"{q(schema)}.`fk_child_hx`"
    spark.sql(f"""
        create or replace table {parent_table} using delta as
        select
            id + 1 as `meta_history_hx_id`,
            id % {parent_keys} + 1 as `history_id`,
            timestamp'2024-01-01 00:00:00' + make_dt_interval(cast(id div {parent_keys} as int) * 30) as `mod_time`
        from range(0, {parents})
    """)
    spark.sql(f"""
        create or replace table {child_table} using delta as
        select
            id + 1 as `obs_raw_hx_id`,
            id % {parent_keys} + 1 as `history_id`,
            timestamp'2024-01-01 00:00:00' + make_dt_interval(cast(id % 150 as int), 0, 0, id % 86400) as `mod_time`,
            id % {parents} + 1 as `parent_version_id`
        from range(0, {children})
    """)
    return child_table, parent_table
