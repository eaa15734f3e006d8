"""Plain-Python readings of the event history and the feature states, for tests: a table rebuilt
by replaying either, and a Naksha uuid decoded bit by bit (seed 002's layout)."""

from __future__ import annotations

import datetime as dt
import uuid

INSERT, DELETE, UPDATE_FROM, UPDATE_TO = 1, 2, 3, 4
# A feature state's own columns; the rest are the table's data columns.
STATE_COLUMNS = frozenset(
    ("action", "version", "uuid", "puuid", "txn", "txn_id", "author", "app_id", "created_at", "updated_at")
    + ("rtcts", "rtuts", "valid_created_at", "valid_updated_at", "deleted")
)


def decode(u: str) -> dict:
    """A Naksha uuid's fields (seed 002's bit layout), read in plain Python."""
    n = uuid.UUID(u).int
    high, low = n >> 64, n & (2**64 - 1)
    assert (high >> 12) & 0xF == 4 and low >> 62 == 0b10, f"{u}: not version 4, variant 1"
    return {
        "object_id": ((high >> 16) << 12) | (high & 0xFFF),
        "date": dt.date(2000 + ((low >> 52) & 0x3FF), (low >> 48) & 0xF, (low >> 43) & 0x1F),
        "object_type": (low >> 40) & 0x7,
        "database_id": low & (2**40 - 1),
    }


def replay_events(events: list[dict], key: list[str], data: list[str], upto: int) -> dict:
    """The table rebuilt from its events up to a transaction, in transaction then valid-time
    order (no valid time last): inserts and update_to set a row, deletes remove it. A delete may
    find its key gone already: a late deletion that precedes one already recorded."""
    state: dict = {}

    def order(e: dict) -> tuple:
        valid = e["_hist_valid_time"]
        return (e["_hist_trans_id"], valid is None, valid or dt.datetime.min, e["_hist_event"])

    for e in sorted(events, key=order):
        if e["_hist_trans_id"] > upto:
            break
        k = tuple(e[c] for c in key)
        if e["_hist_event"] in (INSERT, UPDATE_TO):
            state[k] = tuple(e[c] for c in data)
        elif e["_hist_event"] == DELETE:
            state.pop(k, None)
    return state


def replay_states(states: list[dict], key: list[str], data: list[str], upto: int) -> dict:
    """The table rebuilt from the feature states: each key's latest state up to a transaction,
    unless it is deleted."""
    latest: dict = {}
    for s in states:
        if s["txn_id"] <= upto:
            k = tuple(s[c] for c in key)
            if k not in latest or s["version"] > latest[k]["version"]:
                latest[k] = s
    return {k: tuple(s[c] for c in data) for k, s in latest.items() if not s["deleted"]}
