"""Lint-time stand-ins for the project's own macro namespace (`lakehistory.<macro>`).

sqlfluff's jinja templater renders models without dbt; a model that calls a macro through the
package namespace needs a value to render. These return what the macros return at run time: a
relation name to select from.
"""


def landing_batches(source_name: str, table_name: str) -> str:
    return f"`__lakehistory_pending__{source_name}__{table_name}`"


# Time travel (macros/time_travel): each returns a relation to select from, or a version.
def as_of(relation, version) -> str:
    return "`lakehistory_as_of`"


def current(relation) -> str:
    return "`lakehistory_current`"


def history(relation, form, a=None, b=None, clock="transaction", version=None) -> str:
    return "`lakehistory_history`"


def current_versions() -> str:
    return "`lakehistory_current_versions`"


def current_version(relation) -> str:
    return "(select 0)"


def version_at(at=None) -> int:
    return 0


def transactions_relation() -> str:
    return "`lakehistory_transactions`"


# Daily extracts (macros/landing) and _hx tables (macros/hx).
def landing_extract(source_name: str, table_name: str, snapshot_name: str | None = None) -> str:
    return f"`{table_name}_snapshot__lh_extract`"


def record_capture(source_table: str) -> str:
    return ""


def hx_current(relation) -> str:
    return "`lakehistory_hx_current`"


def hx_as_of(relation, at, txn=None) -> str:
    return "`lakehistory_hx_as_of`"


def hx_resolved(relation) -> str:
    return "`lakehistory_hx_resolved`"


def database_as_of(at, txn=None) -> str:
    tables = ("meta_network", "meta_station", "meta_history", "meta_vars", "obs_raw")
    return ",\n".join(f"{t} as (select * from `lakehistory_hx_as_of_{t}`)" for t in tables)


# Event history and feature states (macros/changes): each returns a whole model body.
def event_history(history) -> str:
    return "select * from `lakehistory_event_history`"


def feature_states(history) -> str:
    return "select * from `lakehistory_feature_states`"


def core_history(tables) -> str:
    return "select * from `lakehistory_core_history`"


def column_changes(events, from_time=None, to_time=None) -> str:
    return "`lakehistory_column_changes`"


# Invariant tests (tests/generic), called directly by a singular test: the failing rows.
def test_gap_free_ids(model, column_name, first_id=1, per=None) -> str:
    return "select 1 as id, 'problem' as problem"
