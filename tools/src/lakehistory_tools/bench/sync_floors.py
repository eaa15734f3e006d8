"""The two floors `python -m lakehistory_tools.bench.sync` sets beside the product: the shortest
hand-written PySpark that does the same work on the same landed files, on copies of the history
tables in a schema of their own (`<schema>_floors`, so that they are not in dbt's listing).

- Today's floor keeps Fivetran-shaped copies: per table one MERGE that closes the active rows the
  batch supersedes or deletes (rules 8 and 11), then one INSERT of the new versions, the update
  file's unmodified cells taken from each key's version before (rule 10).
- The engine's floor keeps what the product's contract keeps: per table one MERGE that closes
  those rows in transaction time (`valid_to`), inserts their ended copies and the new versions
  (`valid_from`, `valid_to`), and one ledger row per table of the sync.

Neither does rule 7's overlap delete: no batch of the bench goes below a stored start. Both
read every cell as a string and cast it, as the landing's files are text.
"""

from __future__ import annotations

import functools
from pathlib import Path

from lakehistory_tools.bench.sync_tables import OPEN, SYSTEM_TYPES, UNMODIFIED_STRING, columns, model, table


def floors(schema: str) -> str:
    """The floors' schema: beside dbt's, so that their copies are not in the listing of dbt's."""
    return f"{schema}_floors"


def engine_ledger(schema: str) -> str:
    """The engine floor's ledger: a row per table and sync."""
    return f"`{floors(schema)}`.`engine_ledger`"


def hand_table(i: int) -> str:
    """Today's floor's Fivetran-shaped copy of table i."""
    return f"hand_{table(i)}"


def engine_table(i: int) -> str:
    """The engine floor's copy of table i, as the history table holds it."""
    return f"engine_{table(i)}"


def _file(spark, landing: Path, i: int, n: int, kind: str):
    """Batch n's `kind` file of table i, its cells as text; None when the batch has none."""
    path = landing / table(i) / f"{n:06d}" / f"{kind}_0.csv"
    return spark.read.option("header", True).csv(str(path)) if path.exists() else None


def _types(i: int) -> dict[str, str]:
    return {c.name: c.type for c in columns(i)} | SYSTEM_TYPES


def _new_versions(spark, landing: Path, i: int, n: int, target: str, current: str):
    """The batch's new versions, typed: its replace rows, and its update rows with each
    unmodified cell from the key's version before (the latest of `target` whose `current`
    holds with a smaller start; an update with none is left out)."""
    from pyspark.sql import functions as F

    types = _types(i)
    typed = [F.col(c).cast(t).alias(c) for c, t in types.items()]
    replace, update = _file(spark, landing, i, n, "replace"), _file(spark, landing, i, n, "update")
    versions = [replace.select(*typed)] if replace is not None else []
    if update is not None:
        data = [c for c in types if c != "id"]
        resolved = ", ".join(
            f"case when u.`{c}` = u.`_unmodified` then p.`_prev`.`{c}` else cast(u.`{c}` as {types[c]}) end as `{c}`"
            for c in data
        )
        versions.append(
            spark.sql(
                f"""
                with `u` as (
                    select *, cast(`id` as bigint) as `_id`, cast(`_fivetran_start` as timestamp) as `_s`
                    from {{update}}
                ),
                `p` as (
                    select u.`_id`, u.`_s`, max_by(struct(t.*), t.`_fivetran_start`) as `_prev`
                    from `u` join {target} as t on t.`id` = u.`_id` and t.`_fivetran_start` < u.`_s` and {current}
                    group by u.`_id`, u.`_s`
                )
                select u.`_id` as `id`, {resolved} from `u` join `p` on u.`_id` = p.`_id` and u.`_s` = p.`_s`
                """,
                update=update.withColumn("_unmodified", F.lit(UNMODIFIED_STRING)),
            )
        )
    return _union(versions)


def _closes(spark, landing: Path, i: int, n: int):
    """Per key the batch closes, the `_fivetran_end` its active row gets: its earliest start
    less 1 ms (rule 8), or the delete's time (rule 11)."""
    earliest, delete = _file(spark, landing, i, n, "earliest"), _file(spark, landing, i, n, "delete")
    parts = []
    if earliest is not None:
        parts.append(
            spark.sql(
                "select cast(`id` as bigint) as `id`,"
                " min(cast(`_fivetran_start` as timestamp)) - interval 1 millisecond as `_end`"
                " from {earliest} group by 1",
                earliest=earliest,
            )
        )
    if delete is not None:
        parts.append(delete.selectExpr("cast(`id` as bigint) as `id`", "cast(`_fivetran_end` as timestamp) as `_end`"))
    return _union(parts)


def _union(frames: list):
    return functools.reduce(lambda left, right: left.unionByName(right), frames)


def hand_apply(spark, landing: Path, schema: str, i: int, *, n: int) -> None:
    """Today's floor for one table: one MERGE that ends the active rows the batch closes, one
    INSERT of its new versions."""
    target = f"`{floors(schema)}`.`{hand_table(i)}`"
    versions = _new_versions(spark, landing, i, n, target, "true")  # the close changes no start nor data
    spark.sql(
        f"""
        merge into {target} as t using {{closes}} as s
        on t.`id` = s.`id` and t.`_fivetran_active`
        when matched then update set t.`_fivetran_end` = s.`_end`, t.`_fivetran_active` = false
        """,
        closes=_closes(spark, landing, i, n),
    )
    versions.write.format("delta").mode("append").saveAsTable(target)


def engine_apply(spark, landing: Path, schema: str, i: int, *, n: int) -> dict:
    """The engine's floor for one table: what the contract writes, in one MERGE. Each active row
    the batch closes is closed in transaction time (`valid_to` = the transaction) and has its
    ended copy (the new `_fivetran_end`, not active) valid from the transaction, as has each new
    version. The source reads the table's current rows. Returns its ledger row."""
    target = f"`{floors(schema)}`.`{engine_table(i)}`"
    current = f"t.`valid_to` = {OPEN}"
    data = list(_types(i))
    listed = ", ".join(f"`{c}`" for c in [*data, "valid_from", "valid_to"])
    ended = {"_fivetran_end": "c.`_end`", "_fivetran_active": "false"}
    ended_copy = ", ".join(ended.get(c, f"c.`{c}`") for c in data)
    row = ", ".join(f"`{c}`" for c in data)
    spark.sql(
        f"""
        merge into {target} as t
        using (
            with `c` as (
                select t.*, s.`_end` from {target} as t join {{closes}} as s on t.`id` = s.`id`
                where {current} and t.`_fivetran_active`
            )
            select `id` as `_merge_key`, `valid_from` as `_merge_from`, {listed} from `c`
            union all
            select null, null, {ended_copy}, {n}, {OPEN} from `c`
            union all
            select null, null, {row}, {n}, {OPEN} from {{versions}}
        ) as s
        on t.`id` = s.`_merge_key` and t.`valid_from` = s.`_merge_from` and t.`valid_to` = {OPEN}
            and t.`_fivetran_active`
        when matched then update set t.`valid_to` = {n}
        when not matched and s.`_merge_key` is null then insert ({listed}) values ({listed})
        """,
        closes=_closes(spark, landing, i, n),
        versions=_new_versions(spark, landing, i, n, target, current),
    )
    return {"txn_id": n, "history_table": target, "batch_id": f"{n:06d}"}


def check_floors(spark, schema: str, tables: int) -> None:
    """The floors did the product's work: today's floor's copy holds the history table's rows
    current in transaction time (the Fivetran table), the engine floor's also its rows closed in
    transaction time (their `valid_to`, the
    transaction, aside: the floor numbers transactions by batch)."""
    for i in range(1, tables + 1):
        data = ", ".join(f"`{c}`" for c in _types(i))
        history = f"`{schema}`.`{model(i)}`"
        for copy, rows in (
            (hand_table(i), f"select {data} from {{}}"),
            (engine_table(i), f"select {data}, `valid_to` = {OPEN} as `current` from {{}}"),
        ):
            ours, floor = rows.format(history), rows.format(f"`{floors(schema)}`.`{copy}`")
            if copy == hand_table(i):
                ours += f" where `valid_to` = {OPEN}"
            differ = spark.sql(
                f"select count(*) from (({ours}) except all ({floor}) union all (({floor}) except all ({ours})))"
            )
            if differ.collect()[0][0]:
                raise RuntimeError(
                    f"the floor's {copy} does not hold what {history} holds: the floor is not the product's work"
                )
