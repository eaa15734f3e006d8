"""obs_raw as a simulated source: vectorised with numpy, memory bounded by a QA horizon.

Observations arrive from every reporting (station history, variable) pair at the pair's
frequency (on the hour, twice a day, daily, or irregularly), each inserted at the source a little
after its `obs_time`. Which window an observation lands in depends only on a hash of (pair, slot),
so every slot is inserted exactly once however the syncs fall. After insertion an observation
stays open to QA for `horizon` syncs: corrections (partial updates of `datum`, sometimes to NULL),
deletions, resurrections of deleted observations and late-arriving QA versions placed between
versions already sent. Older observations are frozen and dropped from memory (unless the table is
extracted daily, which needs the full state), so memory is bounded by the horizon, not the run.

State is columnar: per key (ids `base .. next_id-1`) its history_id, vars_id, obs_time, current
datum, alive flag, last event time, version count and birth sync; plus the event log of those
keys (key, t, op, sync, datum) that `build_batch` turns into the sync's batch.
"""

from __future__ import annotations

import numpy as np

from lakehistory_tools.generator import catalog
from lakehistory_tools.generator.batches import DELETE, MS_DAY, MS_HOUR, MS_SECOND, VERSION, Events
from lakehistory_tools.generator.domain import OBS_RAW

FREQ_STEP = np.array([MS_HOUR, 12 * MS_HOUR, MS_DAY, 3 * MS_HOUR], dtype=np.int64)
FREQ_OFFSET = np.array([0, 6 * MS_HOUR, 8 * MS_HOUR, 0], dtype=np.int64)
IRREGULAR = 3
MAX_DELAY = 3 * MS_HOUR
_PAIR_CHUNK_CELLS = 2_000_000

_K = {k: i for i, k in enumerate(catalog.VAR_KINDS)}
_NONNEG = np.array([k not in ("temp", "tmax", "tmin", "dewp") for k in catalog.VAR_KINDS])
_TEMPLIKE = ~_NONNEG


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser on uint64 arrays (wrapping arithmetic)."""
    x = x.astype(np.uint64, copy=True)
    x ^= x >> np.uint64(30)
    x *= np.uint64(0xBF58476D1CE4E5B9)
    x ^= x >> np.uint64(27)
    x *= np.uint64(0x94D049BB133111EB)
    x ^= x >> np.uint64(31)
    return x


def _hash(salt: int, h: np.ndarray, v: np.ndarray, slot: np.ndarray, what: int) -> np.ndarray:
    x = (
        h.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
        + v.astype(np.uint64) * np.uint64(0xC2B2AE3D27D4EB4F)
        + slot.astype(np.uint64) * np.uint64(0x165667B19E3779F9)
        + np.uint64((salt * 0x27D4EB2F165667C5 + what * 0x85EBCA77C2B2AE63) & 0xFFFFFFFFFFFFFFFF)
    )
    return _mix(x)


def generate_datum(
    kind: np.ndarray, prec: np.ndarray, lat: np.ndarray, elev: np.ndarray, otime: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    """Plausible values for each observation's variable kind, place and time, rounded to precision."""
    n = len(kind)
    days = otime / MS_DAY
    doy = days % 365.2425
    hour_local = ((otime % MS_DAY) / MS_HOUR - 8.0) % 24.0
    mean = 10.0 - 0.5 * (lat - 49.0) - 0.0065 * elev - 9.0 * np.cos(2 * np.pi * (doy - 15.0) / 365.2425)
    diurnal = 4.0 * np.cos(2 * np.pi * (hour_local - 15.0) / 24.0)
    z = rng.standard_normal(n)
    u = rng.random(n)
    g = rng.gamma(0.7, 2.5, n)
    out = np.empty(n)
    sel = {k: kind == i for k, i in _K.items()}
    out[sel["temp"]] = (mean + diurnal + 2.5 * z)[sel["temp"]]
    out[sel["tmax"]] = (mean + 5.0 + 2.0 * z)[sel["tmax"]]
    out[sel["tmin"]] = (mean - 5.0 + 2.0 * z)[sel["tmin"]]
    out[sel["dewp"]] = (mean + diurnal - 3.0 - np.abs(2.0 * z))[sel["dewp"]]
    out[sel["precip"]] = np.where(u < 0.3, g, 0.0)[sel["precip"]]
    out[sel["snowfall"]] = np.where((u < 0.3) & (mean < 1.0), g * 1.3, 0.0)[sel["snowfall"]]
    snowd = np.maximum(0.0, (3.0 - mean) * 8.0 + 5.0 * z)
    out[sel["snowd"]] = snowd[sel["snowd"]]
    out[sel["swe"]] = (snowd * 3.0)[sel["swe"]]
    out[sel["rh"]] = np.clip(75.0 + 15.0 * z, 5.0, 100.0)[sel["rh"]]
    out[sel["wspd"]] = (g * 4.0 + np.abs(z) * 3.0)[sel["wspd"]]
    out[sel["wdir"]] = np.floor(u * 360.0)[sel["wdir"]]
    out[sel["pres"]] = (101.3 - 0.012 * elev + 0.8 * z)[sel["pres"]]
    return _round(out, prec)


def _round(x: np.ndarray, prec: np.ndarray) -> np.ndarray:
    p = np.where(prec > 0, prec, 0.1)
    return np.round(np.round(x / p) * p, 4)


def perturb_datum(datum: np.ndarray, kind: np.ndarray, prec: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A QA correction of each value: different from it, still plausible."""
    n = len(datum)
    z = rng.standard_normal(n)
    templike = _TEMPLIKE[kind]
    d = np.where(np.isnan(datum), 0.0, datum)
    new = np.where(templike, d + 1.5 * z, d * (1.0 + 0.2 * z) + 3.0 * prec * z)
    new = np.where(_NONNEG[kind], np.maximum(new, 0.0), new)
    new = np.where(kind == _K["rh"], np.minimum(new, 100.0), new)
    new = np.where(kind == _K["wdir"], np.mod(new, 360.0), new)
    new = _round(new, prec)
    same = new == d
    new[same] = _round(new[same] + np.maximum(prec[same], 0.1), prec[same])
    return new


class ObsSource:
    """obs_raw: columnar true state of the keys still open to QA, and their event log."""

    tdef = OBS_RAW

    # per-sync probabilities
    p_missing = 0.005  # inserted with datum NULL
    p_correct_new = 0.01  # corrected within the same sync (several versions in one batch)
    p_third = 0.2  # of those, corrected twice
    p_delete_new = 0.001  # inserted and deleted within the same sync
    p_update = 0.004  # QA update of an older observation
    p_null = 0.12  # of QA updates: the value is withdrawn (set NULL)
    p_delete = 0.0015  # QA deletion of an older observation
    p_delete_resurrect = 0.1  # of those deletions: re-inserted within the same sync
    p_resurrect = 0.05  # a deleted observation is inserted again
    p_late = 0.02  # a late QA version for an observation with two versions or more

    def __init__(self, salt: int, rng: np.random.Generator, horizon: int = 7, keep_all: bool = False):
        self.salt = int(salt) & 0xFFFFFFFF
        self.rng = rng
        self.horizon = max(1, int(horizon))
        self.keep_all = keep_all
        self.base = 1
        self.next_id = 1
        self.first_id_of_sync: dict[int, int] = {}
        e64 = np.empty(0, dtype=np.int64)
        self.s_hist = e64.copy()
        self.s_var = e64.copy()
        self.s_otime = e64.copy()
        self.s_datum = np.empty(0)
        self.s_alive = np.empty(0, dtype=bool)
        self.s_last = e64.copy()
        self.s_nver = np.empty(0, dtype=np.int32)
        self.log: dict[str, np.ndarray] = {
            "key": e64.copy(),
            "t": e64.copy(),
            "op": np.empty(0, np.int8),
            "sync": np.empty(0, np.int32),
            "datum": np.empty(0),
        }
        self.counts: dict[str, int] = {}
        self.sync = 0

    def _count(self, what: str, n: int) -> None:
        self.counts[what] = self.counts.get(what, 0) + int(n)

    # -- new observations --------------------------------------------------------------------
    def _arrivals(self, pairs: dict[str, np.ndarray], a: int, b: int):
        """(history_id, vars_id, obs_time, t) of the observations inserted during (a, b]."""
        out_h: list[np.ndarray] = []
        out_v: list[np.ndarray] = []
        out_o: list[np.ndarray] = []
        out_t: list[np.ndarray] = []
        for code in range(len(FREQ_STEP)):
            sel = pairs["freq"] == code
            if not sel.any():
                continue
            h, v, fr, un = pairs["history_id"][sel], pairs["vars_id"][sel], pairs["from"][sel], pairs["until"][sel]
            step, off = int(FREQ_STEP[code]), int(FREQ_OFFSET[code])
            lo = max(a - MAX_DELAY - (step if code == IRREGULAR else 0), int(fr.min()) - step)
            first = -(-(lo - off) // step)
            last = (b - off) // step
            if last < first:
                continue
            slots = np.arange(first, last + 1, dtype=np.int64)
            base = slots * step + off
            per = max(1, _PAIR_CHUNK_CELLS // len(slots))
            for c0 in range(0, len(h), per):
                hc, vc, frc, unc = h[c0 : c0 + per], v[c0 : c0 + per], fr[c0 : c0 + per], un[c0 : c0 + per]
                ot = np.broadcast_to(base, (len(hc), len(slots)))
                keep = None
                if code == IRREGULAR:
                    hh = _hash(self.salt, hc[:, None], vc[:, None], slots[None, :], 1)
                    ot = base[None, :] + (hh % np.uint64(step // MS_SECOND)).astype(np.int64) * MS_SECOND
                    keep = (hh >> np.uint64(40)) & np.uint64(1) == 1
                mask = (ot >= frc[:, None]) & (ot < unc[:, None]) & (ot <= b)
                if keep is not None:
                    mask &= keep
                pi, si = np.nonzero(mask)
                if len(pi) == 0:
                    continue
                o = ot[pi, si]
                hd = _hash(self.salt, hc[pi], vc[pi], slots[si], 0)
                u = (hd >> np.uint64(11)).astype(np.float64) / float(1 << 53)
                t = o + MS_SECOND + (u * u * (MAX_DELAY - MS_SECOND)).astype(np.int64)
                ok = (t > a) & (t <= b)
                out_h.append(hc[pi][ok])
                out_v.append(vc[pi][ok])
                out_o.append(o[ok])
                out_t.append(t[ok])
        if not out_h:
            e = np.empty(0, dtype=np.int64)
            return e, e, e, e
        return (np.concatenate(out_h), np.concatenate(out_v), np.concatenate(out_o), np.concatenate(out_t))

    # -- one sync window ---------------------------------------------------------------------
    def window(
        self,
        sync: int,
        a: int,
        b: int,
        pairs: dict[str, np.ndarray],
        hist: dict[str, np.ndarray],
        vars_: dict[str, np.ndarray],
    ) -> None:
        rng = self.rng
        self.sync = sync
        self.first_id_of_sync[sync] = self.next_id
        lo = max(self.first_id_of_sync.get(max(1, sync - self.horizon + 1), self.base), self.base)
        if not self.keep_all and lo > self.base:
            self._drop_below(lo)

        ek: list[np.ndarray] = []
        et: list[np.ndarray] = []
        eo: list[np.ndarray] = []
        ed: list[np.ndarray] = []

        def emit(keys, ts, op, datum) -> None:
            ek.append(np.asarray(keys, dtype=np.int64))
            et.append(np.asarray(ts, dtype=np.int64))
            eo.append(np.full(len(keys), op, dtype=np.int8))
            ed.append(np.asarray(datum, dtype=np.float64) if op == VERSION else np.full(len(keys), np.nan))

        # ---- older observations still open to QA: ids lo .. next_id-1
        i0 = lo - self.base
        m = self.next_id - lo
        if m > 0 and b - a > 2:
            idx = np.arange(i0, i0 + m)
            keys = idx + self.base
            alive = self.s_alive[idx]
            kinds = vars_["kind"][self.s_var[idx]]
            precs = vars_["precision"][self.s_var[idx]]
            r = rng.random(m)
            upd = alive & (r < self.p_update)
            dele = alive & (r >= self.p_update) & (r < self.p_update + self.p_delete)
            parents_ok = hist["alive"][self.s_hist[idx]] & vars_["alive"][self.s_var[idx]]
            res = ~alive & (r < self.p_resurrect) & parents_ok
            late = alive & (self.s_nver[idx] >= 2) & (rng.random(m) < self.p_late)

            # QA updates
            u = np.flatnonzero(upd)
            if len(u):
                tu = rng.integers(a + 1, b + 1, size=len(u))
                before = self.s_datum[idx[u]]
                du = perturb_datum(before, kinds[u], precs[u], rng)
                nul = rng.random(len(u)) < self.p_null
                du[nul] = np.nan
                emit(keys[u], tu, VERSION, du)
                self.s_datum[idx[u]] = du
                self.s_last[idx[u]] = tu
                self.s_nver[idx[u]] += 1
                self._count("update", len(u))
                self._count("set_null", int(np.sum(nul & ~np.isnan(before))))
            # QA deletions, some re-inserted in the same window
            d = np.flatnonzero(dele)
            if len(d):
                td = rng.integers(a + 1, b, size=len(d))
                emit(keys[d], td, DELETE, None)
                self.s_alive[idx[d]] = False
                self.s_last[idx[d]] = td
                self._count("delete", len(d))
                back = (rng.random(len(d)) < self.p_delete_resurrect) & (td < b)
                if back.any():
                    dd = d[back]
                    tr = rng.integers(td[back] + 1, b + 1)
                    emit(keys[dd], tr, VERSION, self.s_datum[idx[dd]])
                    self.s_alive[idx[dd]] = True
                    self.s_last[idx[dd]] = tr
                    self.s_nver[idx[dd]] += 1
                    self._count("resurrect", len(dd))
            # resurrections of observations deleted in earlier syncs
            rr = np.flatnonzero(res)
            if len(rr):
                tr = rng.integers(a + 1, b + 1, size=len(rr))
                fresh = rng.random(len(rr)) < 0.5
                dr = self.s_datum[idx[rr]].copy()
                if fresh.any():
                    dr[fresh] = perturb_datum(dr[fresh], kinds[rr][fresh], precs[rr][fresh], rng)
                emit(keys[rr], tr, VERSION, dr)
                self.s_datum[idx[rr]] = dr
                self.s_alive[idx[rr]] = True
                self.s_last[idx[rr]] = tr
                self.s_nver[idx[rr]] += 1
                self._count("resurrect", len(rr))
            # late QA versions between two versions already sent
            lk = keys[late]
            if len(lk):
                self._late_versions(lk, sync, vars_, emit)

        # ---- new observations
        h, v, o, t = self._arrivals(pairs, a, b)
        parents_ok = hist["alive"][h] & vars_["alive"][v] if len(h) else np.empty(0, dtype=bool)
        h, v, o, t = h[parents_ok], v[parents_ok], o[parents_ok], t[parents_ok]
        order = np.lexsort((v, h, t))
        h, v, o, t = h[order], v[order], o[order], t[order]
        n = len(h)
        new_keys = np.arange(self.next_id, self.next_id + n, dtype=np.int64)
        kinds = vars_["kind"][v]
        precs = vars_["precision"][v]
        datum = generate_datum(kinds, precs, hist["lat"][h], hist["elev"][h], o, rng)
        datum[rng.random(n) < self.p_missing] = np.nan
        emit(new_keys, t, VERSION, datum)
        last_t = t.copy()
        cur = datum.copy()
        nver = np.ones(n, dtype=np.int32)
        alive_new = np.ones(n, dtype=bool)
        self._count("insert", n)
        r = rng.random(n)
        corr = np.flatnonzero((r < self.p_correct_new) & (t <= b - 2))
        if len(corr):
            t2 = rng.integers(t[corr] + 1, b)
            d2 = perturb_datum(cur[corr], kinds[corr], precs[corr], rng)
            emit(new_keys[corr], t2, VERSION, d2)
            cur[corr], last_t[corr] = d2, t2
            nver[corr] += 1
            third = corr[rng.random(len(corr)) < self.p_third]
            if len(third):
                t3 = rng.integers(last_t[third] + 1, b + 1)
                d3 = perturb_datum(cur[third], kinds[third], precs[third], rng)
                emit(new_keys[third], t3, VERSION, d3)
                cur[third], last_t[third] = d3, t3
                nver[third] += 1
            self._count("update", len(corr))
        gone = np.flatnonzero((r >= self.p_correct_new) & (r < self.p_correct_new + self.p_delete_new) & (t < b))
        if len(gone):
            td = rng.integers(last_t[gone] + 1, b + 1)
            emit(new_keys[gone], td, DELETE, None)
            alive_new[gone] = False
            last_t[gone] = td
            self._count("delete", len(gone))

        # ---- state and log
        self.s_hist = np.concatenate([self.s_hist, h])
        self.s_var = np.concatenate([self.s_var, v])
        self.s_otime = np.concatenate([self.s_otime, o])
        self.s_datum = np.concatenate([self.s_datum, cur])
        self.s_alive = np.concatenate([self.s_alive, alive_new])
        self.s_last = np.concatenate([self.s_last, last_t])
        self.s_nver = np.concatenate([self.s_nver, nver])
        self.next_id += n
        if ek:
            k_all = np.concatenate(ek)
            self.log = {
                "key": np.concatenate([self.log["key"], k_all]),
                "t": np.concatenate([self.log["t"]] + et),
                "op": np.concatenate([self.log["op"]] + eo),
                "sync": np.concatenate([self.log["sync"], np.full(len(k_all), sync, dtype=np.int32)]),
                "datum": np.concatenate([self.log["datum"]] + ed),
            }

    def _late_versions(self, keys: np.ndarray, sync: int, vars_: dict[str, np.ndarray], emit) -> None:
        lg = self.log
        sel = np.flatnonzero(np.isin(lg["key"], keys))
        order = sel[np.lexsort((lg["t"][sel], lg["key"][sel]))]
        k, t, op, sy, dm = lg["key"][order], lg["t"][order], lg["op"][order], lg["sync"][order], lg["datum"][order]
        ok = np.zeros(len(k), dtype=bool)
        if len(k) > 1:
            ok[:-1] = (k[1:] == k[:-1]) & (op[:-1] == VERSION) & (sy[1:] < sync) & (t[1:] - t[:-1] >= 2)
        cand = np.flatnonzero(ok)
        if len(cand) == 0:
            return
        # one pair per key: the last eligible one
        last_of_key = np.r_[k[cand][1:] != k[cand][:-1], True]
        pick = cand[last_of_key]
        t_late = self.rng.integers(t[pick] + 1, t[pick + 1])
        var = self.s_var[k[pick] - self.base]
        d = perturb_datum(dm[pick], vars_["kind"][var], vars_["precision"][var], self.rng)
        emit(k[pick], t_late, VERSION, d)
        self.s_nver[k[pick] - self.base] += 1
        self._count("late", len(pick))

    def _drop_below(self, lo: int) -> None:
        cut = lo - self.base
        for name in ("s_hist", "s_var", "s_otime", "s_datum", "s_alive", "s_last", "s_nver"):
            setattr(self, name, getattr(self, name)[cut:])
        keep = self.log["key"] >= lo
        self.log = {c: a[keep] for c, a in self.log.items()}
        self.base = lo

    # -- output ------------------------------------------------------------------------------
    def _events(self, rows: np.ndarray) -> Events:
        lg = self.log
        key = lg["key"][rows]
        i = key - self.base
        return Events(
            key=key,
            t=lg["t"][rows],
            op=lg["op"][rows],
            sync=lg["sync"][rows],
            values={
                "history_id": self.s_hist[i],
                "vars_id": self.s_var[i],
                "obs_time": self.s_otime[i],
                "datum": lg["datum"][rows],
            },
        )

    def events_for_sync(self, sync: int) -> Events:
        """All events of the keys that changed in `sync`."""
        lg = self.log
        mark = np.zeros(self.next_id - self.base, dtype=bool)
        mark[lg["key"][lg["sync"] == sync] - self.base] = True
        return self._events(np.flatnonzero(mark[lg["key"] - self.base]))

    def all_events(self) -> Events:
        """Every event still in memory (all of them when nothing was dropped)."""
        return self._events(np.arange(len(self.log["key"])))

    def current(self) -> dict[str, np.ndarray]:
        """The current rows in memory (alive keys), columnar."""
        alive = np.flatnonzero(self.s_alive)
        return {
            "obs_raw_id": alive + self.base,
            "history_id": self.s_hist[alive],
            "vars_id": self.s_var[alive],
            "obs_time": self.s_otime[alive],
            "datum": self.s_datum[alive],
        }

    @property
    def complete(self) -> bool:
        """True when every key ever inserted is still in memory."""
        return self.base == 1

    def memory_rows(self) -> int | None:
        return int(self.next_id - self.base)
