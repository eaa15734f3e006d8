"""The CRMP source simulator: true source state over valid time, one sync at a time.

    sim = SourceSimulator(GeneratorConfig(scale=100, syncs=5, seed=42))
    for sync in sim.run():                       # advances one sync window per step
        batch, stats = sim.batch("meta_station")  # what history mode sends for it
        rows = sim.current_rows("meta_vars")      # the full current state (daily extracts)

Sync k happens at `start + (k-1) days + 03:00Z` (plus a few seeded minutes); its window is the
valid time since sync k-1. Sync 1 is the initial load: the metadata are created during the
`initial_days` before it, observations arrive during its last day. Everything is deterministic for
a seed, and independent of which tables are later written or how.
"""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from lakehistory.landing.batch import Batch, Sync
from lakehistory_tools.generator.batches import (
    MS_DAY,
    MS_HOUR,
    MS_MINUTE,
    BatchStats,
    Events,
    build_batch,
    ms_to_dt,
    to_ms,
)
from lakehistory_tools.generator.domain import OBS_RAW, TABLE_NAMES, TableDef, get_table
from lakehistory_tools.generator.metadata import MetadataSource, Rates
from lakehistory_tools.generator.observations import ObsSource


@dataclass
class GeneratorConfig:
    """What to simulate. `scale` is the number of stations at the initial load; networks
    (3 + scale/40), variables (4-9 per network), station histories (~1.2 per station) and
    observations (~60 per station per day) follow from it."""

    scale: int = 100
    syncs: int = 5
    seed: int = 0
    start: dt.date = dt.date(2024, 1, 1)
    initial_days: int = 30
    horizon: int = 7  # syncs during which an observation stays open to QA changes
    with_obs: bool = True  # simulate obs_raw at all
    keep_all_obs: bool = False  # keep every observation in memory (needed for obs_raw extracts)
    p_update_form: float = 0.7  # a change that may be sent as an update row is, with this probability
    rates: Rates = field(default_factory=Rates)
    author: str = "crmp-loader"
    app_id: str = "pcic.crmp.ingest"
    extract_author: str = "pcic-crmp-dump"  # the `extracted_by` of daily full extracts
    # Each sync's batches name it (`<sync_prefix>-<day>`): one transaction for its tables. None:
    # every batch a transaction of its own.
    sync_prefix: str | None = "crmp"

    def __post_init__(self) -> None:
        if self.scale < 1:
            raise ValueError("scale must be at least 1")
        if self.syncs < 1:
            raise ValueError("syncs must be at least 1")


def sync_of(config: GeneratorConfig, sync: int, day: dt.date, tables: Sequence[str]) -> Sync | None:
    """What the batches of sync k say of it: its id (the connector and the day), order and tables."""
    if config.sync_prefix is None:
        return None
    return Sync(f"{config.sync_prefix}-{day:%Y-%m-%d}", sync, tuple(tables))


def batch_id(sync: int) -> str:
    """`000001`, `000002`, ...: the batch of sync k in every table."""
    return f"{sync:06d}"


class SourceSimulator:
    def __init__(self, config: GeneratorConfig):
        self.config = config
        ss = np.random.SeedSequence(config.seed)
        c_meta, c_py, c_obs, c_salt = ss.spawn(4)
        self.meta = MetadataSource(
            config.scale,
            random.Random(int(c_py.generate_state(1)[0])),
            np.random.default_rng(c_meta),
            config.rates,
        )
        self.obs: ObsSource | None = None
        if config.with_obs:
            self.obs = ObsSource(
                int(c_salt.generate_state(1)[0]),
                np.random.default_rng(c_obs),
                horizon=config.horizon,
                keep_all=config.keep_all_obs,
            )
        self.sync = 0
        start_ms = to_ms(dt.datetime.combine(config.start, dt.time(), tzinfo=dt.UTC))
        jitter = np.random.default_rng([config.seed, 9001]).integers(0, 10 * MS_MINUTE, size=config.syncs + 1)
        self._times = [start_ms - config.initial_days * MS_DAY] + [
            start_ms + (k - 1) * MS_DAY + 3 * MS_HOUR + int(jitter[k]) for k in range(1, config.syncs + 1)
        ]

    # -- time ----------------------------------------------------------------------------------
    def sync_time_ms(self, sync: int) -> int:
        """Valid time of sync k (its `_fivetran_synced`); sync 0 is the start of the initial load."""
        return self._times[sync]

    def sync_time(self, sync: int) -> dt.datetime:
        return ms_to_dt(self._times[sync])

    # -- simulation ----------------------------------------------------------------------------
    def advance(self) -> int:
        """Simulate the next sync window; returns its sync number."""
        if self.sync >= self.config.syncs:
            raise StopIteration("all syncs simulated")
        k = self.sync + 1
        a, b = self._times[k - 1], self._times[k]
        if k == 1:
            self.meta.initial(1, a, b, obs_from=b - MS_DAY)
            self.meta.window(1, b - MS_DAY, b, begin=False)
        else:
            self.meta.window(k, a, b)
        if self.obs is not None:
            self.obs.window(k, a, b, self.meta.obs_pairs(), self.meta.history_lookup(), self.meta.vars_lookup())
        self.sync = k
        return k

    def run(self) -> Iterator[int]:
        while self.sync < self.config.syncs:
            yield self.advance()

    # -- output --------------------------------------------------------------------------------
    def events(self, table: str, *, only_changed: bool = False) -> Events:
        """Events of `table` in memory: all of them, or those of keys changed in the current sync."""
        if table == OBS_RAW.name:
            if self.obs is None:
                raise ValueError("obs_raw is not simulated (with_obs=False)")
            return self.obs.events_for_sync(self.sync) if only_changed else self.obs.all_events()
        mt = self.meta.tables[table]
        return mt.events_of(sorted(mt.dirty)) if only_changed else mt.all_events()

    def batch(self, table: str) -> tuple[Batch, BatchStats]:
        """The history-mode batch of `table` for the current sync."""
        tdef = get_table(table)
        return build_batch(
            tdef,
            self.events(table, only_changed=True),
            self.sync,
            self._times[self.sync],
            batch_id=batch_id(self.sync),
            rng=np.random.default_rng([self.config.seed, TABLE_NAMES.index(table), self.sync, 17]),
            p_update=self.config.p_update_form,
            author=self.config.author,
            app_id=self.config.app_id,
        )

    def current_columns(self, table: str) -> dict[str, np.ndarray]:
        """The current rows of `table` (keys alive now), columnar; timestamps as int64 ms for
        obs_raw, Python values for the metadata tables."""
        if table == OBS_RAW.name:
            if self.obs is None:
                raise ValueError("obs_raw is not simulated (with_obs=False)")
            if not self.obs.complete:
                raise ValueError("obs_raw state was pruned: use keep_all_obs=True for obs_raw extracts")
            return self.obs.current()
        mt = self.meta.tables[table]
        rows = mt.current_rows()
        out = {}
        for j, c in enumerate(mt.cols):
            a = np.empty(len(rows), dtype=object)
            a[:] = [r[j] for r in rows]
            out[c] = a
        return out

    def counts(self) -> dict[str, dict[str, int]]:
        """Changes simulated so far, per table and kind (insert, update, set_null, delete,
        resurrect, late)."""
        out = {name: dict(t.counts) for name, t in self.meta.tables.items()}
        if self.obs is not None:
            out[OBS_RAW.name] = dict(self.obs.counts)
        return out


def tables_in_order(names: Sequence[str]) -> list[TableDef]:
    wanted = set(names)
    unknown = wanted - set(TABLE_NAMES)
    if unknown:
        raise ValueError(f"unknown tables {sorted(unknown)}; choose from {', '.join(TABLE_NAMES)}")
    return [get_table(n) for n in TABLE_NAMES if n in wanted]
