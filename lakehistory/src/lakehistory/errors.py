"""The errors lakehistory raises, on the ground floor: every module may import this one, and it
imports none of them. Each says what a user did or must do; `LakehistoryError` is the one base,
so a caller (dbt's run-operation, a test, a tool) tells the product's refusals from a failure of
Spark or Python by one class. The second base of each keeps what it was before (a value the user
gave: ValueError; a state found: RuntimeError)."""

from __future__ import annotations


class LakehistoryError(Exception):
    """A refusal or failure lakehistory explains in its message; nothing was half-applied."""


class HistoryError(LakehistoryError, RuntimeError):
    """A batch the rules cannot apply, an operation refused, or a model the strategy cannot serve."""
