"""The project's versioning settings as the engine reads them: the open end a current row holds,
and the refusal of a version that would reach a chosen one (no Spark needed)."""

from __future__ import annotations

import pytest

from lakehistory.errors import HistoryError
from lakehistory.history.table import Versioning


@pytest.mark.parametrize(
    ("versioning", "sql"),
    [
        (Versioning(), "9223372036854775807"),
        (Versioning(open_end="null"), "null"),
        (Versioning(open_end="2147483647"), "2147483647"),
        (Versioning("timestamp"), "timestamp'9999-12-31 23:59:59.999999'"),
        (Versioning("timestamp", "2099-12-31 23:59:59"), "timestamp'2099-12-31 23:59:59'"),
        (Versioning("timestamp", "2099-12-31T23:59:59"), "timestamp'2099-12-31 23:59:59'"),
    ],
)
def test_the_open_end_a_current_row_is_written_with(versioning: Versioning, sql: str) -> None:
    assert versioning.open == sql


@pytest.mark.parametrize(
    ("version_type", "open_end"),
    [("integer", "2099-12-31"), ("integer", "1; drop table t"), ("timestamp", "2147483647"), ("timestamp", "x'")],
)
def test_an_open_end_not_of_the_version_type_is_refused(version_type: str, open_end: str) -> None:
    with pytest.raises(HistoryError, match="lakehistory_open_end must be"):
        Versioning(version_type, open_end)


def test_a_version_reaching_the_chosen_open_end_is_refused() -> None:
    ids = Versioning(open_end="2147483647")
    ids.refuse_past_open_end(2147483646, "2024-01-01 00:00:00.000", "t")
    with pytest.raises(HistoryError, match="next version 2147483647 is not below the open end 2147483647"):
        ids.refuse_past_open_end(2147483647, "2024-01-01 00:00:00.000", "t")
    times = Versioning("timestamp", "2099-12-31 23:59:59")
    times.refuse_past_open_end(2**40, "2099-12-31 23:59:58.999", "t")
    with pytest.raises(HistoryError, match="not below the open end"):
        times.refuse_past_open_end(1, "2099-12-31 23:59:59.000", "t")
    Versioning().refuse_past_open_end(2**62, "9999-01-01 00:00:00.000", "t")  # max: no end to reach
