"""Lint-time stand-ins for the project's own macro namespace (`lakehistory.<macro>`).

sqlfluff's jinja templater renders models without dbt; a model that calls a macro through the
package namespace needs a value to render. These return what the macros return at run time: a
relation name to select from.
"""


def landing_batches(source_name: str, table_name: str) -> str:
    return f"`__lakehistory_pending__{source_name}__{table_name}`"


def open_version() -> int:
    return 9223372036854775807
