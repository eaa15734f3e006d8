"""The suite's cost table (lakehistory_tools.suite_costs): sums per group, and GROUP_SECONDS."""

from __future__ import annotations

from lakehistory_tools.suite_costs import group_seconds, table


def row(test: str, group: str, seconds: float, dbt: float = 0.0, jvm_in: float = 0.0, jvm_out: float = 0.0) -> dict:
    return {
        "test": test,
        "group": group,
        "seconds": seconds,
        "invocations": 1 if dbt else 0,
        "dbt_seconds": dbt,
        "jvm_in_dbt": jvm_in,
        "jvm_outside": jvm_out,
    }


ROWS = [
    row("a.py::one", "a.py", 10.0, dbt=8.0, jvm_in=6.0, jvm_out=1.5),
    row("a.py::two", "a.py", 2.0, jvm_out=1.0),
    row("demo.py::x", "demo", 31.0, dbt=30.0, jvm_in=20.0),
    row("c.py::tiny", "c.py", 1.0),
]


def test_the_table_sums_each_group_longest_first_with_dbts_own_seconds_apart() -> None:
    lines = table(ROWS).splitlines()
    assert [line.split()[0] for line in lines[1:]] == ["demo", "a.py", "c.py", "all"]
    demo, a, _, total = (line.split() for line in lines[1:])
    # tests, seconds, invocations, in dbt, jvm in dbt, dbt less jvm, outside dbt, jvm outside
    assert demo[1:] == ["1", "31", "1", "30", "20", "10", "1", "0"]
    assert a[1:] == ["2", "12", "1", "8", "6", "2", "4", "2"]
    assert total[1:4] == ["4", "44", "2"]


def test_group_seconds_lists_groups_of_five_seconds_or_more_rounded_up() -> None:
    assert group_seconds(ROWS) == 'GROUP_SECONDS = {\n    "demo": 35,\n    "a.py": 15,\n}'
