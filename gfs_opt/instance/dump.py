"""Cut instance files from a running simulation at rounds where decisions are contested."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from gfs_opt.instance import save_round
from gfs_opt.model import MILLI, JobClass, Round
from gfs_opt.pending import as_queue
from gfs_opt.preempt.hp_pass import greedy_preemption
from gfs_opt.quota.admission import greedy_admission


@dataclass
class ContestedRoundDump:
    """A `Simulator.on_round` hook (`gfs_opt.sim.engine.RoundHook`): saves rounds where
    preemption or admission is contested, and stops the run after ``max_files``.

    Preemption is contested in a pool when its pending HP demand exceeds its free GPUs while LP
    jobs run there (someone may have to be evicted); admission is contested when pending LP
    demand exceeds the quota headroom that is left (not every LP job can start).

    Those tests are cheap but loose: one HP gang that can never start keeps a pool "contested"
    for weeks. With ``confirm`` a candidate round is kept only if the greedy PTS step on a
    snapshot really has a choice to make: preemption needs a new HP arrival and at least one LP
    victim of the greedy HP pass; admission needs the rule to admit some pending LP jobs while
    others keep waiting.
    """

    out: Path
    prefix: str = "round"
    every_s: float = 3600.0
    max_files: int = 5
    kind: str = "any"                  # preemption | admission | any
    min_pending_hp: int = 1
    min_running_lp: int = 0
    after: float = 0.0
    source: str = ""
    policy: str = ""                   # the simulated policy's name (for the files' meta)
    confirm: bool = False
    written: list[Path] = field(default_factory=list)
    _last: float = -1e18

    def contested(self, rnd: Round) -> str | None:
        st = rnd.state
        hp_q = as_queue(rnd.pending_hp, rnd.jobs, JobClass.HP)
        if self.kind in ("preemption", "any") and len(hp_q) >= self.min_pending_hp:
            running_lp = sum(1 for r in rnd.running.values() if not r.job.is_hp)
            if running_lp >= self.min_running_lp:
                for pool in hp_q.pools():
                    p = st.pool_index[pool]
                    need = sum(rnd.jobs[j].demand for j in hp_q.pool_ids(pool))
                    free = int(st.pool_capacity[p] - st.pool_used[p])
                    if need > free and st.pool_lp[p] > 0:
                        return "preemption"
        if self.kind in ("admission", "any") and rnd.quotas:
            lp_q = as_queue(rnd.pending_lp, rnd.jobs, JobClass.LP)
            for pool in lp_q.pools():
                p = st.pool_index[pool]
                quota = max((q for (pp, _d), q in rnd.quotas.items() if pp == pool), default=None)
                if quota is None:
                    continue
                headroom = quota - int(st.pool_lp[p])
                need = sum(rnd.jobs[j].demand for j in lp_q.pool_ids(pool))
                if 0 < headroom < need and headroom >= MILLI:
                    return "admission"
        return None

    @staticmethod
    def confirmed(rnd: Round, kind: str) -> bool:
        if kind == "preemption":
            return bool(greedy_preemption(rnd).victims)
        admitted = greedy_admission(rnd)
        return 0 < len(admitted) < len(rnd.pending_lp)

    def __call__(self, rnd: Round) -> bool:
        """Save the round if it is contested; True (stop the run) once ``max_files`` are saved."""
        t = rnd.time
        if t < self.after or t - self._last < self.every_s:
            return False
        kind = self.contested(rnd)
        if kind is None:
            return False
        if self.confirm and kind == "preemption" and not any(
                rnd.queued_since.get(j) == t for j in rnd.pending_hp):
            return False  # nothing new: the last pass already made every choice it could
        snap = rnd.copy()
        if self.confirm and not self.confirmed(snap, kind):
            return False
        self._last = t
        self.out.mkdir(parents=True, exist_ok=True)
        path = self.out / f"{self.prefix}-{kind}-t{int(t)}.json"
        meta = {"source": self.source, "policy": self.policy, "contested": kind,
                "time": t, "pending_hp": len(snap.pending_hp), "pending_lp": len(snap.pending_lp),
                "running": len(snap.running), "nodes": snap.state.n_nodes,
                "gpus": snap.state.n_gpus, "confirmed": self.confirm}
        save_round(snap, path, meta=meta)
        self.written.append(path)
        return len(self.written) >= self.max_files
