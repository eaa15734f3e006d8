"""The four CRMP metadata tables as a simulated source (small tables: plain Python, per row).

`MetaTable` keeps one table's true history over valid time: per key its events (versions with the
full row, deletes) in time order, and its current row. `MetadataSource` drives the four tables
through realistic changes, one sync window at a time, keeping referential integrity: a child is
only created or resurrected under a parent alive at that instant, a parent is only deleted when
it has no live children, and foreign-key columns never change in a late version.
"""

from __future__ import annotations

import bisect
import datetime as dt
import itertools
import random
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from lakehistory_tools.generator import catalog
from lakehistory_tools.generator.batches import DELETE, MS_DAY, MS_HOUR, MS_MINUTE, VERSION, Events, ms_to_dt
from lakehistory_tools.generator.domain import META_HISTORY, META_NETWORK, META_STATION, META_VARS, TableDef

Values = tuple  # a full row in table column order (key first)


class MetaTable:
    """True source state of one small table over valid time."""

    def __init__(self, tdef: TableDef):
        self.tdef = tdef
        self.cols = tdef.column_names
        self.pos = {c: i for i, c in enumerate(self.cols)}
        self.cur: dict[int, Values | None] = {}
        self.events: dict[int, list[tuple[int, int, int, Values | None]]] = {}  # (t, op, sync, values)
        self.dirty: set = set()
        self.multi: set = set()  # keys with two events or more (late-version candidates)
        self._multi_sorted: tuple[int, list[int]] = (-1, [])
        self._alive_sorted: tuple[int, list[int]] = (-1, [])
        self.next_id = 1
        self.sync = 0
        self.window_end = 0
        self.counts: dict[str, int] = {}

    # -- state -------------------------------------------------------------------------------
    def alive(self, key: int) -> bool:
        return self.cur.get(key) is not None

    def alive_keys(self) -> list[int]:
        return [k for k, v in self.cur.items() if v is not None]

    def pick(self, rng: np.random.Generator, pred: Callable[[int], bool] | None = None, tries: int = 30) -> int | None:
        """A random key alive now (and satisfying `pred`), drawn from the keys alive at the start
        of the sync; None when `tries` draws find none."""
        if self._alive_sorted[0] != self.sync:
            self._alive_sorted = (self.sync, sorted(self.alive_keys()))
        keys = self._alive_sorted[1]
        if not keys:
            return None
        for _ in range(tries):
            k = keys[int(rng.integers(0, len(keys)))]
            if self.alive(k) and (pred is None or pred(k)):
                return k
        return None

    def deleted_keys(self) -> list[int]:
        return [k for k, v in self.cur.items() if v is None]

    def values(self, key: int) -> Values:
        """The live row of `key` (an error for a deleted key)."""
        row = self.cur[key]
        if row is None:
            raise KeyError(f"{self.tdef.name} key {key} is deleted")
        return row

    def get(self, key: int, col: str):
        row = self.cur[key]
        return None if row is None else row[self.pos[col]]

    def _count(self, what: str) -> None:
        self.counts[what] = self.counts.get(what, 0) + 1

    def _push(self, key: int, t: int, op: int, values: Values | None) -> int | None:
        ev = self.events.setdefault(key, [])
        if ev and t <= ev[-1][0]:
            t = ev[-1][0] + 1
        if t > self.window_end:
            return None
        ev.append((t, op, self.sync, values))
        if len(ev) == 2:
            self.multi.add(key)
        self.dirty.add(key)
        self.cur[key] = values
        return t

    # -- changes -----------------------------------------------------------------------------
    def insert(self, t: int, **values) -> tuple[int, int]:
        """A new key (next id); returns (key, t)."""
        key = self.next_id
        row = tuple(key if c == self.tdef.key[0] else values.get(c) for c in self.cols)
        t2 = self._push(key, t, VERSION, row)
        if t2 is None:
            raise ValueError("insert past the window end")
        self.next_id += 1
        self._count("insert")
        return key, t2

    def resurrect(self, key: int, t: int, **changes) -> int | None:
        assert self.cur.get(key, 0) is None, "resurrect a deleted key only"
        row = list(self._last_values(key))
        for c, v in changes.items():
            row[self.pos[c]] = v
        t2 = self._push(key, t, VERSION, tuple(row))
        if t2 is not None:
            self._count("resurrect")
        return t2

    def update(self, key: int, t: int, **changes) -> int | None:
        row = self.cur[key]
        assert row is not None
        new = list(row)
        for c, v in changes.items():
            new[self.pos[c]] = v
        if tuple(new) == row:
            return None
        t2 = self._push(key, t, VERSION, tuple(new))
        if t2 is not None:
            self._count("update")
            if any(v is None and row[self.pos[c]] is not None for c, v in changes.items()):
                self._count("set_null")
        return t2

    def delete(self, key: int, t: int) -> int | None:
        assert self.cur[key] is not None
        t2 = self._push(key, t, DELETE, None)
        if t2 is not None:
            self._count("delete")
        return t2

    def _last_values(self, key: int) -> Values:
        for _, op, _, v in reversed(self.events[key]):
            if op == VERSION and v is not None:
                return v
        raise KeyError(key)

    def multi_keys(self) -> list[int]:
        """Keys with two events or more, sorted (cached for the sync)."""
        if self._multi_sorted[0] != self.sync:
            self._multi_sorted = (self.sync, sorted(self.multi))
        return self._multi_sorted[1]

    def late_candidates(self, key: int) -> list[int]:
        """Indices i of version events whose successor was sent before this sync, with room between."""
        ev = self.events.get(key, [])
        return [
            i
            for i in range(len(ev) - 1)
            if ev[i][1] == VERSION and ev[i + 1][2] < self.sync and ev[i + 1][0] - ev[i][0] >= 2
        ]

    def late(self, key: int, i: int, t_late: int, values: Values) -> None:
        """Insert a version at `t_late` between events i and i+1 (a late-arriving version)."""
        ev = self.events[key]
        assert ev[i][0] < t_late < ev[i + 1][0]
        pos = bisect.bisect_left([e[0] for e in ev], t_late)
        ev.insert(pos, (t_late, VERSION, self.sync, values))
        self.dirty.add(key)
        self._count("late")

    # -- output ------------------------------------------------------------------------------
    def events_of(self, keys) -> Events:
        """All events of `keys`, columnar (data-column values as object arrays)."""
        ks: list[int] = []
        ts: list[int] = []
        ops: list[int] = []
        sys_: list[int] = []
        rows: list[Values | None] = []
        for k in keys:
            for t, op, sy, v in self.events.get(k, ()):
                ks.append(k)
                ts.append(t)
                ops.append(op)
                sys_.append(sy)
                rows.append(v)
        values = {}
        for c in self.tdef.data_columns:
            j = self.pos[c]
            a = np.empty(len(rows), dtype=object)
            a[:] = [None if r is None else r[j] for r in rows]
            values[c] = a
        return Events(
            key=np.array(ks, dtype=np.int64),
            t=np.array(ts, dtype=np.int64),
            op=np.array(ops, dtype=np.int8),
            sync=np.array(sys_, dtype=np.int32),
            values=values,
        )

    def all_events(self) -> Events:
        return self.events_of(sorted(self.events))

    def current_rows(self) -> list[Values]:
        return [v for _, v in sorted(self.cur.items()) if v is not None]


@dataclass
class HistInfo:
    station_id: int
    real: bool  # observes (never deleted); False for a row entered by mistake
    obs_from: int | None = None  # ms: first possible obs_time
    obs_until: int | None = None  # ms: obs_time before this (set when the station moves)
    vars: list[tuple[int, int]] = field(default_factory=list)  # (vars_id, from ms)


@dataclass
class StationInfo:
    network_id: int
    mistake: bool
    created_sync: int
    current_history: int | None = None
    first_obs: int | None = None


@dataclass
class VarInfo:
    network_id: int
    kind: str
    spec: catalog.VarSpec
    attached: bool  # some history observes it: never deleted


@dataclass
class Rates:
    """Expected number of each change per sync (lambda of a Poisson draw); `*_per_station` terms
    scale with the number of live stations, `*_p` are per-row probabilities."""

    net_edit: float = 0.3
    net_edit_per_network: float = 0.05
    net_new: float = 0.4
    net_delete: float = 0.5
    net_resurrect: float = 0.3
    net_late: float = 0.3
    stn_stats_p: float = 0.3
    stn_edit: float = 0.3
    stn_edit_per_station: float = 0.02
    stn_new: float = 0.5
    stn_new_per_station: float = 0.015
    stn_mistake_p: float = 0.3
    stn_retire_p: float = 0.7
    stn_resurrect: float = 0.4
    stn_late: float = 0.3
    stn_late_per_station: float = 0.005
    hist_move: float = 0.3
    hist_move_per_station: float = 0.01
    hist_edit: float = 0.5
    hist_edit_per_station: float = 0.03
    hist_late: float = 0.3
    hist_late_per_station: float = 0.01
    var_edit: float = 0.3
    var_edit_per_var: float = 0.02
    var_new: float = 0.4
    var_new_per_station: float = 0.002
    var_mistake_p: float = 0.4
    var_retire_p: float = 0.6
    var_resurrect: float = 0.3
    var_late: float = 0.3


def _freq(rng: random.Random) -> str:
    return rng.choices(catalog.FREQS, weights=catalog.FREQ_WEIGHTS)[0]


def _day(ms: int) -> dt.date:
    return ms_to_dt(ms).date()


class MetadataSource:
    """meta_network, meta_station, meta_history, meta_vars as one simulated source."""

    def __init__(self, scale: int, rng: random.Random, nrng: np.random.Generator, rates: Rates | None = None):
        self.scale = scale
        self.rng = rng
        self.nrng = nrng
        self.rates = rates or Rates()
        self.net = MetaTable(META_NETWORK)
        self.stn = MetaTable(META_STATION)
        self.hist = MetaTable(META_HISTORY)
        self.vars = MetaTable(META_VARS)
        self.tables: dict[str, MetaTable] = {t.tdef.name: t for t in (self.net, self.stn, self.hist, self.vars)}
        self.net_style: dict[int, str] = {}
        self.net_index: dict[int, int] = {}
        self.sinfo: dict[int, StationInfo] = {}
        self.hinfo: dict[int, HistInfo] = {}
        self.vinfo: dict[int, VarInfo] = {}
        self.stations_of_net: dict[int, set] = {}  # alive stations per network
        self.vars_of_net: dict[int, set] = {}  # alive vars per network
        self.hists_of_stn: dict[int, set] = {}  # alive histories per station
        self._n_networks_made = 0
        self._net_weights: tuple[int, list[int], list[float]] = (-1, [], [])

    # -- helpers -----------------------------------------------------------------------------
    def _begin(self, sync: int, window_end: int) -> None:
        for t in self.tables.values():
            t.sync = sync
            t.window_end = window_end
            t.dirty = set()

    def _later(self, t: int, max_delay: int) -> int | None:
        """A time 1 ms .. max_delay after t, within the window; None when t is at its end."""
        room = self.hist.window_end - t
        if room < 1:
            return None
        return t + int(self.nrng.integers(1, min(max_delay, room) + 1))

    def _poisson(self, lam: float) -> int:
        return int(self.nrng.poisson(lam))

    def _times(self, n: int, a: int, b: int) -> list[int]:
        """n times in (a, b], whole milliseconds."""
        if n <= 0 or b <= a:
            return []
        return sorted(self.nrng.integers(a + 1, b + 1, size=n).tolist())

    def live_stations(self) -> list[int]:
        return self.stn.alive_keys()

    # -- creation ----------------------------------------------------------------------------
    def _new_network(self, t: int) -> int | None:
        i = self._n_networks_made
        desc: str | None
        colour: str | None
        name, desc, colour, style = catalog.network_row(i, self.rng)
        virtual = "EC" if name == "EC_raw" else None
        if self.rng.random() < 0.05:
            desc = None
        if self.rng.random() < 0.05:
            colour = None
        nid, _ = self.net.insert(
            t, network_name=name, description=desc, virtual=virtual, publish=self.rng.random() < 0.9, col_hex=colour
        )
        self._n_networks_made += 1
        self.net_style[nid] = style
        self.net_index[nid] = i
        self.stations_of_net[nid] = set()
        self.vars_of_net[nid] = set()
        return nid

    def _var_values(self, nid: int, spec: catalog.VarSpec, variant: int) -> dict:
        spelled = catalog.NET_VAR_SPELLING.get(self.net_style.get(nid, ""), {}).get(
            spec.net_var_name, spec.net_var_name
        )
        name = spelled if variant == 0 else f"{spelled}_{variant + 1}"
        display = spec.display_name if variant == 0 else f"{spec.display_name} {variant + 1}"
        return dict(
            network_id=nid,
            net_var_name=name,
            standard_name=spec.standard_name,
            cell_method=spec.cell_method,
            unit=spec.unit,
            precision=spec.precision,
            display_name=display,
        )

    def _new_var(self, nid: int, t: int, attached: bool, spec: catalog.VarSpec | None = None) -> int | None:
        used = [self.vinfo[v].spec for v in self.vars_of_net[nid]]
        if spec is None:
            fresh = [s for s in catalog.VARIABLES if s not in used]
            spec = self.rng.choice(fresh) if fresh else self.rng.choice(catalog.VARIABLES)
        variant = sum(1 for s in used if s == spec)
        vid, _ = self.vars.insert(t, **self._var_values(nid, spec, variant))
        self.vinfo[vid] = VarInfo(nid, spec.kind, spec, attached)
        self.vars_of_net[nid].add(vid)
        return vid

    def _pick_network(self) -> int | None:
        """A network alive now, the first (bigger) networks more often."""
        if self._net_weights[0] != self.net.sync:
            nets = sorted(self.net.alive_keys())
            self._net_weights = (
                self.net.sync,
                nets,
                list(itertools.accumulate(1.0 / (1 + self.net_index[n]) ** 0.8 for n in nets)),
            )
        _, nets, cum = self._net_weights
        for _ in range(30):
            if not nets:
                return None
            nid = self.rng.choices(nets, cum_weights=cum)[0]
            if self.net.alive(nid):
                return nid
        return None

    def _var_set(self, nid: int, t: int) -> list[tuple[int, int]]:
        pool = sorted(v for v in self.vars_of_net.get(nid, ()) if self.vinfo[v].attached)
        if not pool:
            return []
        k = min(len(pool), 1 + int(self.nrng.binomial(5, 0.5)))
        weights = [self.vinfo[v].spec.weight for v in pool]
        chosen: list[int] = []
        while len(chosen) < k:
            v = self.rng.choices(pool, weights=weights)[0]
            if v not in chosen:
                chosen.append(v)
        return [(v, t) for v in sorted(chosen)]

    def _new_history(
        self,
        sid: int,
        t: int,
        real: bool,
        obs_from: int | None,
        *,
        sdate: dt.date | None = None,
        edate: dt.date | None = None,
    ) -> int | None:
        rng = self.rng
        elev: float | None
        name, lat, lon, elev, prov = catalog.place(rng)
        if rng.random() < 0.05:
            elev = None
        freq = _freq(rng)
        hid, t2 = self.hist.insert(
            t,
            station_id=sid,
            station_name=name,
            lon=lon,
            lat=lat,
            elev=elev,
            sdate=sdate,
            edate=edate,
            province=prov,
            country="CA",
            freq=freq,
        )
        info = HistInfo(sid, real)
        if real and obs_from is not None and edate is None:
            info.obs_from = max(obs_from, t2 + 1)
            info.vars = self._var_set(self.sinfo[sid].network_id, info.obs_from)
            st = self.sinfo[sid]
            if info.vars and (st.first_obs is None or info.obs_from < st.first_obs):
                st.first_obs = info.obs_from
            st.current_history = hid
        self.hinfo[hid] = info
        self.hists_of_stn.setdefault(sid, set()).add(hid)
        return hid

    def _new_station(
        self, t: int, nid: int, mistake: bool, obs_from: int | None, sync: int, old_history: bool = False
    ) -> int | None:
        style = self.net_style[nid]
        sid, t2 = self.stn.insert(
            t,
            native_id=catalog.native_id(self.rng, style, self.stn.next_id),
            network_id=nid,
            min_obs_time=None,
            max_obs_time=None,
            publish=self.rng.random() < 0.95,
        )
        self.sinfo[sid] = StationInfo(nid, mistake, sync)
        self.stations_of_net[nid].add(sid)
        self.hists_of_stn[sid] = set()
        th = self._later(t2, 5 * MS_MINUTE)
        if th is None:  # no room left in the window for its history: it is retired like a mistake
            self.sinfo[sid].mistake = True
            return sid
        today = _day(t2)
        sdate: dt.date | None = today - dt.timedelta(days=int(self.nrng.integers(1, 30 * 365)))
        if self.rng.random() < 0.03:
            sdate = None
        if old_history and sdate is not None:
            old_start = sdate - dt.timedelta(days=int(self.nrng.integers(365, 20 * 365)))
            self._new_history(sid, th, True, None, sdate=old_start, edate=sdate - dt.timedelta(days=1))
            th = self._later(th, MS_MINUTE)
            if th is None:
                return sid
        if mistake:
            self._new_history(sid, th, False, None, sdate=today)
        else:
            self._new_history(
                sid,
                th,
                True,
                obs_from if obs_from is not None else th + 1,
                sdate=sdate if obs_from is not None else today,
            )
        return sid

    # -- the initial load --------------------------------------------------------------------
    def initial(self, sync: int, t0: int, t1: int, obs_from: int) -> None:
        """Networks, their variables, stations and their histories, created during (t0, t1]."""
        self._begin(sync, t1)
        n_net = 3 + -(-self.scale // 40)
        span = t1 - t0
        net_times = self._times(n_net, t0, t0 + span // 10)
        for tn in net_times:
            nid = self._new_network(tn)
            if nid is None:
                continue
            k = int(self.nrng.integers(4, 10))
            for j, spec in enumerate(catalog.choose_vars(self.rng, k)):
                self._new_var(nid, tn + (j + 1) * int(self.nrng.integers(1, MS_HOUR)), True, spec)
        st_times = self._times(self.scale, t0 + span // 10 + MS_DAY, t0 + span * 2 // 3)
        for ts in st_times:
            nid = self._pick_network()
            if nid is None:
                continue
            self._new_station(ts, nid, False, obs_from, sync, old_history=self.rng.random() < 0.15)

    # -- one sync window ---------------------------------------------------------------------
    def window(self, sync: int, a: int, b: int, *, begin: bool = True) -> None:
        """Simulate the changes of one sync window (a, b] in time order."""
        if begin:
            self._begin(sync, b)
        r = self.rates
        n_st = len(self.stn.alive_keys())
        n_net = len(self.net.alive_keys())
        n_var = len(self.vars.alive_keys())
        plan: list[tuple[str, int | None]] = []

        def add(name: str, lam: float) -> None:
            plan.extend((name, None) for _ in range(self._poisson(lam)))

        add("net_edit", r.net_edit + r.net_edit_per_network * n_net)
        add("net_new", r.net_new)
        add("net_delete", r.net_delete)
        add("net_resurrect", r.net_resurrect)
        add("net_late", r.net_late)
        for sid in sorted(self.stn.alive_keys()):
            if not self.sinfo[sid].mistake and self.rng.random() < r.stn_stats_p:
                plan.append(("stn_stats", sid))
            elif self.sinfo[sid].mistake and self.sinfo[sid].created_sync < sync and self.rng.random() < r.stn_retire_p:
                plan.append(("stn_retire", sid))
        add("stn_edit", r.stn_edit + r.stn_edit_per_station * n_st)
        add("stn_new", r.stn_new + r.stn_new_per_station * n_st)
        add("stn_resurrect", r.stn_resurrect)
        add("stn_late", r.stn_late + r.stn_late_per_station * n_st)
        add("hist_move", r.hist_move + r.hist_move_per_station * n_st)
        add("hist_edit", r.hist_edit + r.hist_edit_per_station * n_st)
        add("hist_late", r.hist_late + r.hist_late_per_station * n_st)
        add("var_edit", r.var_edit + r.var_edit_per_var * n_var)
        add("var_new", r.var_new + r.var_new_per_station * n_st)
        for vid in sorted(self.vars.alive_keys()):
            if not self.vinfo[vid].attached and self.rng.random() < r.var_retire_p:
                plan.append(("var_retire", vid))
        add("var_resurrect", r.var_resurrect)
        add("var_late", r.var_late)

        times = self._times(len(plan), a, b)
        order = list(range(len(plan)))
        self.rng.shuffle(order)  # which action gets which time
        actions = sorted(((times[i], j) for i, j in enumerate(order)), key=lambda x: x[0])
        for t, j in actions:
            name, arg = plan[j]
            getattr(self, "_do_" + name)(t, sync, arg)

    # -- network actions ---------------------------------------------------------------------
    def _do_net_edit(self, t: int, sync: int, _arg) -> None:
        nid = self.net.pick(self.nrng)
        if nid is None:
            return
        what = self.rng.random()
        if what < 0.4:
            desc = self.net.get(nid, "description")
            base = catalog.network_row(self.net_index[nid], random.Random(nid))[1]
            new = base + self.rng.choice(catalog.DESCRIPTION_EDITS) if desc == base else base
            self.net.update(nid, t, description=new)
        elif what < 0.6:
            self.net.update(nid, t, publish=not self.net.get(nid, "publish"))
        elif what < 0.8:
            self.net.update(nid, t, col_hex=catalog.random_colour(self.rng) if self.rng.random() < 0.85 else None)
        else:
            v = self.net.get(nid, "virtual")
            self.net.update(nid, t, virtual=None if v is not None else self.rng.choice(("EC", "crmp", "MoTI")))

    def _do_net_new(self, t: int, sync: int, _arg) -> None:
        self._new_network(t)

    def _do_net_delete(self, t: int, sync: int, _arg) -> None:
        empty = [n for n in sorted(self.net.alive_keys()) if not self.stations_of_net[n] and not self.vars_of_net[n]]
        if empty:
            self.net.delete(self.rng.choice(empty), t)

    def _do_net_resurrect(self, t: int, sync: int, _arg) -> None:
        dead = sorted(self.net.deleted_keys())
        if dead:
            nid = self.rng.choice(dead)
            self.net.resurrect(nid, t, publish=self.rng.random() < 0.5)

    def _do_net_late(self, t: int, sync: int, _arg) -> None:
        def fix(row: Values) -> Values:
            p = self.net.pos
            r = list(row)
            if self.rng.random() < 0.5:
                r[p["col_hex"]] = catalog.random_colour(self.rng)
            else:
                r[p["description"]] = (r[p["description"]] or "") + " (corrected)"
            return tuple(r)

        self._late(self.net, fix)

    # -- station actions ---------------------------------------------------------------------
    def _do_stn_stats(self, t: int, sync: int, sid) -> None:
        if not self.stn.alive(sid):
            return
        st = self.sinfo[sid]
        if st.first_obs is None or st.first_obs > t - MS_HOUR:
            return
        first = -(-st.first_obs // MS_HOUR) * MS_HOUR
        last = max(first, (t - MS_HOUR) // MS_HOUR * MS_HOUR)
        self.stn.update(sid, t, min_obs_time=ms_to_dt(first), max_obs_time=ms_to_dt(last))

    def _do_stn_retire(self, t: int, sync: int, sid) -> None:
        """A station entered by mistake: delete its histories, then the station."""
        if not self.stn.alive(sid):
            return
        tt = t
        for hid in sorted(self.hists_of_stn.get(sid, ())):
            if self.hinfo[hid].real:
                return
        for hid in sorted(self.hists_of_stn.get(sid, ())):
            t2 = self.hist.delete(hid, tt)
            if t2 is None:
                return
            self.hists_of_stn[sid].discard(hid)
            later = self._later(t2, MS_MINUTE)
            if later is None:
                return
            tt = later
        if self.stn.delete(sid, tt) is not None:
            self.stations_of_net[self.sinfo[sid].network_id].discard(sid)

    def _do_stn_edit(self, t: int, sync: int, _arg) -> None:
        sid = self.stn.pick(self.nrng)
        if sid is None:
            return
        if self.rng.random() < 0.6:
            self.stn.update(sid, t, publish=not self.stn.get(sid, "publish"))
        else:
            style = self.net_style[self.sinfo[sid].network_id]
            self.stn.update(sid, t, native_id=catalog.native_id(self.rng, style, sid + 7))

    def _do_stn_new(self, t: int, sync: int, _arg) -> None:
        nid = self._pick_network()
        if nid is None:
            return
        mistake = self.rng.random() < self.rates.stn_mistake_p
        self._new_station(t, nid, mistake, None, sync)

    def _do_stn_resurrect(self, t: int, sync: int, _arg) -> None:
        dead = [s for s in sorted(self.stn.deleted_keys()) if self.net.alive(self.sinfo[s].network_id)]
        if not dead:
            return
        sid = self.rng.choice(dead)
        t2 = self.stn.resurrect(sid, t, min_obs_time=None, max_obs_time=None)
        if t2 is None:
            return
        st = self.sinfo[sid]
        st.mistake = False
        self.stations_of_net[st.network_id].add(sid)
        hids = sorted(h for h in self.hinfo if self.hinfo[h].station_id == sid and not self.hist.alive(h))
        th = self._later(t2, 5 * MS_MINUTE)
        if th is None:  # no room left for its history: deleted again later, like a mistake
            st.mistake = True
            return
        if hids:
            hid = hids[-1]
            t3 = self.hist.resurrect(hid, th, edate=None)
            if t3 is None:
                return
            info = self.hinfo[hid]
            info.real = True
            info.obs_from = t3 + 1
            info.vars = self._var_set(st.network_id, info.obs_from)
            if info.vars and st.first_obs is None:
                st.first_obs = info.obs_from
            st.current_history = hid
            self.hists_of_stn.setdefault(sid, set()).add(hid)
        else:
            self._new_history(sid, th, True, th + 1, sdate=_day(th))

    def _do_stn_late(self, t: int, sync: int, _arg) -> None:
        def fix(row: Values) -> Values:
            p = self.stn.pos
            r = list(row)
            if self.rng.random() < 0.5:
                r[p["publish"]] = not r[p["publish"]]
            else:
                r[p["native_id"]] = r[p["native_id"]] + "-QC"
            return tuple(r)

        self._late(self.stn, fix)

    # -- history actions ---------------------------------------------------------------------
    def _do_hist_move(self, t: int, sync: int, _arg) -> None:
        """The station moves: its current history gets an end date, a new one starts nearby."""
        sid = self.stn.pick(
            self.nrng, lambda s: not self.sinfo[s].mistake and self.sinfo[s].current_history is not None
        )
        if sid is None:
            return
        old = self.sinfo[sid].current_history
        if old is None or not self.hist.alive(old) or self.hist.get(old, "edate") is not None:
            return
        t2 = self.hist.update(old, t, edate=_day(t))
        if t2 is None:
            return
        info = self.hinfo[old]
        info.obs_until = t2
        th = self._later(t2, 10 * MS_MINUTE)
        if th is None:
            return
        like = dict(zip(self.hist.cols, self.hist.values(old)))
        lon, lat, elev = like["lon"], like["lat"], like["elev"]
        hid, th2 = self.hist.insert(
            th,
            station_id=sid,
            station_name=like["station_name"],
            lon=round(lon + self.rng.uniform(-0.05, 0.05), 4) if lon is not None else None,
            lat=round(lat + self.rng.uniform(-0.05, 0.05), 4) if lat is not None else None,
            elev=float(max(0, round(elev + self.rng.gauss(0, 40)))) if elev is not None else None,
            sdate=_day(t),
            edate=None,
            province=like["province"],
            country=like["country"],
            freq=like["freq"],
        )
        new = HistInfo(sid, True, obs_from=th2 + 1)
        new.vars = [(v, th2 + 1) for v, _ in info.vars if self.vars.alive(v)]
        self.hinfo[hid] = new
        self.hists_of_stn[sid].add(hid)
        self.sinfo[sid].current_history = hid

    def _do_hist_edit(self, t: int, sync: int, _arg) -> None:
        hid = self.hist.pick(self.nrng)
        if hid is None:
            return
        p = self.hist.pos
        row = self.hist.values(hid)
        what = self.rng.random()
        if what < 0.3:
            name = row[p["station_name"]] or "Unnamed"
            base = name.split(" (")[0]
            self.hist.update(
                hid,
                t,
                station_name=base
                if base != name
                else base + " (" + self.rng.choice(("relocated", "temporary", "auto", "manual")) + ")",
            )
        elif what < 0.6:
            e = row[p["elev"]]
            if e is None:
                self.hist.update(hid, t, elev=float(self.nrng.integers(0, 2200)))
            elif self.rng.random() < 0.3:
                self.hist.update(hid, t, elev=None)
            else:
                self.hist.update(hid, t, elev=float(max(0, round(e + self.rng.gauss(0, 25)))))
        elif what < 0.85:
            lat, lon = row[p["lat"]], row[p["lon"]]
            if lat is not None and lon is not None:
                self.hist.update(
                    hid,
                    t,
                    lat=round(lat + self.rng.uniform(-0.01, 0.01), 4),
                    lon=round(lon + self.rng.uniform(-0.01, 0.01), 4),
                )
        else:
            self.hist.update(hid, t, freq=_freq(self.rng))

    def _do_hist_late(self, t: int, sync: int, _arg) -> None:
        def fix(row: Values) -> Values:
            p = self.hist.pos
            r = list(row)
            if r[p["lat"]] is not None and self.rng.random() < 0.7:
                r[p["lat"]] = round(r[p["lat"]] + self.rng.uniform(-0.02, 0.02), 4)
                r[p["lon"]] = round(r[p["lon"]] + self.rng.uniform(-0.02, 0.02), 4)
            else:
                r[p["elev"]] = float(self.nrng.integers(0, 2200))
            return tuple(r)

        self._late(self.hist, fix)

    # -- variable actions --------------------------------------------------------------------
    def _do_var_edit(self, t: int, sync: int, _arg) -> None:
        vid = self.vars.pick(self.nrng)
        if vid is None:
            return
        spec = self.vinfo[vid].spec
        what = self.rng.random()
        if what < 0.4:
            d = self.vars.get(vid, "display_name")
            self.vars.update(
                vid, t, display_name=spec.display_name if d != spec.display_name else spec.display_name + " (QC)"
            )
        elif what < 0.7:
            p = self.vars.get(vid, "precision")
            self.vars.update(
                vid,
                t,
                precision=None
                if p is not None and self.rng.random() < 0.3
                else (spec.precision if p != spec.precision else spec.precision * 2),
            )
        else:
            u = self.vars.get(vid, "unit")
            self.vars.update(vid, t, unit=None if u is not None else spec.unit)

    def _do_var_new(self, t: int, sync: int, _arg) -> None:
        nid = self._pick_network()
        if nid is None:
            return
        mistake = self.rng.random() < self.rates.var_mistake_p
        vid = self._new_var(nid, t, not mistake)
        if mistake or vid is None:
            return
        tv = self.vars.events[vid][-1][0] + 1
        for sid in sorted(self.stations_of_net[nid]):
            hid = self.sinfo[sid].current_history
            if hid is None or not self.hist.alive(hid):
                continue
            info = self.hinfo[hid]
            if info.obs_until is None and info.obs_from is not None and self.rng.random() < 0.5:
                info.vars.append((vid, max(tv, info.obs_from)))

    def _do_var_retire(self, t: int, sync: int, vid) -> None:
        if self.vars.alive(vid) and not self.vinfo[vid].attached and self.vars.delete(vid, t) is not None:
            self.vars_of_net[self.vinfo[vid].network_id].discard(vid)

    def _do_var_resurrect(self, t: int, sync: int, _arg) -> None:
        dead = [v for v in sorted(self.vars.deleted_keys()) if self.net.alive(self.vinfo[v].network_id)]
        if dead:
            vid = self.rng.choice(dead)
            if self.vars.resurrect(vid, t) is not None:
                self.vars_of_net[self.vinfo[vid].network_id].add(vid)

    def _do_var_late(self, t: int, sync: int, _arg) -> None:
        def fix(row: Values) -> Values:
            p = self.vars.pos
            r = list(row)
            r[p["display_name"]] = (r[p["display_name"]] or "") + " [rev]"
            return tuple(r)

        self._late(self.vars, fix)

    # -- late versions -----------------------------------------------------------------------
    def _late(self, table: MetaTable, fix: Callable[[Values], Values]) -> None:
        keys = table.multi_keys()
        if not keys:
            return
        for _ in range(20):
            key = keys[int(self.nrng.integers(0, len(keys)))]
            cands = table.late_candidates(key)
            if not cands:
                continue
            i = cands[int(self.nrng.integers(0, len(cands)))]
            ev = table.events[key]
            t_late = int(self.nrng.integers(ev[i][0] + 1, ev[i + 1][0]))
            values = ev[i][3]
            if values is None:  # a late candidate is a version, which has values
                raise ValueError(f"{table.tdef.name} key {key}: event {i} is not a version")
            table.late(key, i, t_late, fix(values))
            return

    # -- for the obs simulator ---------------------------------------------------------------
    def obs_pairs(self) -> dict[str, np.ndarray]:
        """Every (history, variable) that reports, with its frequency and time bounds."""
        hs, vs, fr, un, fq = [], [], [], [], []
        freq_code = {f: i for i, f in enumerate(catalog.FREQS)}
        p = self.hist.pos
        for hid in sorted(self.hinfo):
            info = self.hinfo[hid]
            if not info.real or info.obs_from is None or not self.hist.alive(hid):
                continue
            f = self.hist.values(hid)[p["freq"]]
            code = freq_code.get(f, 0) if f is not None else 3
            until = info.obs_until if info.obs_until is not None else np.iinfo(np.int64).max
            for vid, since in info.vars:
                hs.append(hid)
                vs.append(vid)
                fr.append(max(info.obs_from, since))
                un.append(until)
                fq.append(code)
        return {
            "history_id": np.array(hs, dtype=np.int64),
            "vars_id": np.array(vs, dtype=np.int64),
            "from": np.array(fr, dtype=np.int64),
            "until": np.array(un, dtype=np.int64),
            "freq": np.array(fq, dtype=np.int8),
        }

    def history_lookup(self) -> dict[str, np.ndarray]:
        """Arrays indexed by history_id: alive, lat, elev."""
        n = self.hist.next_id
        alive = np.zeros(n, dtype=bool)
        lat = np.full(n, 50.0)
        elev = np.full(n, 500.0)
        p = self.hist.pos
        for hid, row in self.hist.cur.items():
            if row is None:
                continue
            alive[hid] = True
            if row[p["lat"]] is not None:
                lat[hid] = row[p["lat"]]
            if row[p["elev"]] is not None:
                elev[hid] = row[p["elev"]]
        return {"alive": alive, "lat": lat, "elev": elev}

    def vars_lookup(self) -> dict[str, np.ndarray]:
        """Arrays indexed by vars_id: alive, kind code (catalog.VAR_KINDS), precision."""
        n = self.vars.next_id
        alive = np.zeros(n, dtype=bool)
        kind = np.zeros(n, dtype=np.int8)
        prec = np.full(n, 0.1)
        for vid, info in self.vinfo.items():
            alive[vid] = self.vars.alive(vid)
            kind[vid] = catalog.VAR_KINDS.index(info.kind)
            p = self.vars.get(vid, "precision") if alive[vid] else None
            prec[vid] = p if p is not None else info.spec.precision
        return {"alive": alive, "kind": kind, "precision": prec}
