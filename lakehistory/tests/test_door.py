"""The one door between the macros and the engine (lakehistory.door), checked without Spark or dbt:
every call a macro makes reaches an entry point that exists and takes exactly what it is given,
so a rename on either side fails here rather than in a `dbt build`."""

from __future__ import annotations

import inspect
import re

import pytest

from harness import REPO_ROOT
from lakehistory import door, macro_names, names

MACROS = REPO_ROOT / "macros"
DOOR_MACRO = MACROS / "internal" / "engine.sql"
ENGINE_CALL = re.compile(r"lakehistory\._engine\(\s*'(?P<entry>\w+)'\s*(?P<rest>[,)])")


def _arguments(text: str, start: int) -> list[str] | None:
    """The keys of the dict literal that starts at `text[start]` (top level only); None when the
    arguments are not a dict literal."""
    if text[start] != "{":
        return None
    depth, keys, i = 0, [], start
    while True:
        ch = text[i]
        if ch in "{[(":
            depth += 1
        elif ch in "}])":
            depth -= 1
            if depth == 0:
                return keys
        elif ch == "'" and depth == 1 and (m := re.match(r"'(\w+)'\s*:", text[i:])):
            keys.append(m.group(1))
            i += m.end() - 1
        elif ch in "'\"":
            i = text.index(ch, i + 1)  # a string literal: skip it whole
        i += 1


def engine_calls() -> list[tuple[str, str, list[str] | None]]:
    """(macro file, entry, argument keys) of every `_engine` call in the package's macros."""
    calls = []
    for path in sorted(MACROS.rglob("*.sql")):
        text = path.read_text()
        for m in ENGINE_CALL.finditer(text):
            keys: list[str] | None = []
            if m.group("rest") == ",":
                start = m.end()
                while text[start].isspace():
                    start += 1
                keys = _arguments(text, start)
            calls.append((str(path.relative_to(REPO_ROOT)), m.group("entry"), keys))
    return calls


def test_only_the_door_macro_calls_python() -> None:
    callers = {
        str(p.relative_to(REPO_ROOT)): p.read_text().count("call_python")
        for p in MACROS.rglob("*.sql")
        if "call_python" in p.read_text()
    }
    assert callers == {str(DOOR_MACRO.relative_to(REPO_ROOT)): 1}
    assert "adapter.call_python('lakehistory.door:' ~ entry" in DOOR_MACRO.read_text()


def test_the_macros_call_the_engine_somewhere_and_each_time_by_name() -> None:
    calls = sum(len(re.findall(r"lakehistory\._engine\(", p.read_text())) for p in MACROS.rglob("*.sql"))
    assert calls == len(engine_calls()), "an _engine call that names its entry with a variable cannot be checked"
    entries = {entry for _, entry, _ in engine_calls()}
    assert {"apply_pending", "stage_batches", "stage_extract", "run_transaction", "revert", "inspect"} <= entries


@pytest.mark.parametrize(("macro", "entry", "keys"), engine_calls(), ids=lambda v: v if isinstance(v, str) else None)
def test_each_call_reaches_an_entry_that_takes_its_arguments(macro: str, entry: str, keys: list[str] | None) -> None:
    function = getattr(door, entry, None)
    assert callable(function) and not entry.startswith("_"), f"{macro}: lakehistory.door has no entry point {entry}"
    assert keys is not None, (
        f"{macro}: the arguments of {entry} must be a dict literal, so that this test can read them"
    )
    parameters = list(inspect.signature(function).parameters.values())
    assert [p.name for p in parameters[:2]] == ["spark", "context"], f"{entry} must take (spark, context, ...)"
    taken = {p.name for p in parameters[2:]}
    required = {p.name for p in parameters[2:] if p.default is inspect.Parameter.empty}
    assert not set(keys) - taken, f"{macro}: {entry} takes no {sorted(set(keys) - taken)}"
    assert not required - set(keys), f"{macro}: {entry} needs {sorted(required - set(keys))}"


def test_every_entry_point_is_called_by_a_macro() -> None:
    public = {
        name
        for name, f in vars(door).items()
        if inspect.isfunction(f) and f.__module__ == door.__name__ and not name.startswith("_")
    }
    assert public == {entry for _, entry, _ in engine_calls()}


def test_the_macros_names_are_those_of_the_engine() -> None:
    assert (REPO_ROOT / macro_names.MACRO_FILE).read_text() == macro_names.macro_text(), (
        "macros/internal/names.sql is not what lakehistory.names says: run python -m lakehistory.macro_names"
    )


def test_the_context_refuses_what_the_macro_did_not_build() -> None:
    context = {
        "transactions": "`s`.`lakehistory_transactions`",
        "writer_lock": "`s`.`lakehistory_transactions_writer`",
        "history_tables": ["`s`.`a`"],
        "invocation_id": "run-1",
        "writer_wait_seconds": 600,
        "versioning": {"version_type": "integer", "open_end": "max", "append_only": False},
        "database_id": 7,
    }
    built = door.Context.of(context)
    assert (built.history_tables, built.writer_wait_seconds, built.database_id) == (("`s`.`a`",), 600.0, 7)
    assert "| 7)" in built.uuid_sql
    with pytest.raises(door.ContextError, match="lacks database_id"):
        door.Context.of({k: v for k, v in context.items() if k != "database_id"})
    with pytest.raises(ValueError, match="lakehistory_database_id must be an integer from 0 to 2\\^40 - 1"):
        door.Context.of({**context, "database_id": 1 << 40})
    with pytest.raises(door.ContextError, match="lakehistory_writer_wait_seconds must be a number"):
        door.Context.of({**context, "writer_wait_seconds": "soon"})


def test_the_project_goes_with_an_invocation_s_first_call_and_is_kept_for_the_others() -> None:
    context = {
        "transactions": "`s`.`lakehistory_transactions`",
        "writer_lock": "`s`.`lakehistory_transactions_writer`",
        "invocation_id": "run-2",
        "writer_wait_seconds": 600,
        "versioning": {"version_type": "integer", "open_end": "max", "append_only": False},
        "database_id": 0,
    }
    assert not door.project_known(None, context)  # type: ignore[arg-type]
    with pytest.raises(door.ContextError, match="lacks history_tables"):
        door.Context.of(context)
    project = {"history_tables": ["`s`.`a`"], "feature_state_inputs": ["model.p.a"]}
    # rendered while dbt parses: no graph yet, nothing kept
    assert door.Context.of({**context, **project, "project_complete": False}).history_tables == ("`s`.`a`",)
    assert not door.project_known(None, context)  # type: ignore[arg-type]
    first = door.Context.of({**context, **project, "project_complete": True})
    assert door.project_known(None, context)  # type: ignore[arg-type]
    later = door.Context.of(context)
    assert later.project == first.project and later.history_tables == ("`s`.`a`",)
    assert later.project.feature_state_inputs == {"model.p.a"}
    # another invocation walks the graph again: the kept project is not its
    assert not door.project_known(None, {**context, "invocation_id": "run-3"})  # type: ignore[arg-type]
    with pytest.raises(door.ContextError, match="lacks history_tables"):
        door.Context.of({**context, "invocation_id": "run-3"})


def test_the_argument_reader_sees_only_the_top_level_keys() -> None:
    text = """{'a': 1, 'b': {'c': 2}, 'd': f('e', {'x': 'y'}), 'f': 'g: h', 'i': [{'j': 'k'}], 'l': "m}"}"""
    assert _arguments(text, 0) == ["a", "b", "d", "f", "i", "l"]
    assert _arguments("arguments)", 0) is None


def test_the_system_names_the_macros_spell_are_the_engine_s() -> None:
    """SQL text in a macro reads better with `_fivetran_start` than with a lookup, so macros may
    spell the protocol's and the event history's columns; each must be one lakehistory.names
    declares, so that a rename on one side fails here."""
    declared = {*names.FIVETRAN_PROTOCOL, *names.EVENT_SYSTEM}
    spelled = {
        (str(path.relative_to(REPO_ROOT)), name)
        for path in MACROS.rglob("*.sql")
        for name in re.findall(r"(?<!\w)(_fivetran_\w+|_hist_\w+)", path.read_text())
    }
    assert spelled and not {(path, name) for path, name in spelled if name not in declared}
