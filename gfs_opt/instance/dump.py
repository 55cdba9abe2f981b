"""Cut instance files from a running simulation at rounds where decisions are contested."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from gfs_opt.instance import save_round
from gfs_opt.model import MILLI, Round
from gfs_opt.preempt.hp_pass import greedy_preemption
from gfs_opt.quota.admission import greedy_admission
from gfs_opt.sim.engine import Simulator


@dataclass
class ContestedRoundDump:
    """Hook for `Simulator.on_round`: saves rounds where preemption or admission is contested.

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
    confirm: bool = False
    written: list[Path] = field(default_factory=list)
    _last: float = -1e18

    def contested(self, sim: Simulator) -> str | None:
        st = sim.state
        if self.kind in ("preemption", "any") and len(sim.hp_q) >= self.min_pending_hp:
            running_lp = sum(1 for r in sim.running.values() if not r.job.is_hp)
            if running_lp >= self.min_running_lp:
                for pool in sim.hp_q.pools():
                    p = st.pool_index[pool]
                    need = sum(sim.jobs[j].demand for j in sim.hp_q.pool_ids(pool))
                    free = int(st.pool_capacity[p] - st.pool_used[p])
                    if need > free and st.pool_lp[p] > 0:
                        return "preemption"
        if self.kind in ("admission", "any") and sim.quotas:
            for pool in sim.lp_q.pools():
                p = st.pool_index[pool]
                quota = max((q for (pp, _d), q in sim.quotas.items() if pp == pool), default=None)
                if quota is None:
                    continue
                headroom = quota - int(st.pool_lp[p])
                need = sum(sim.jobs[j].demand for j in sim.lp_q.pool_ids(pool))
                if 0 < headroom < need and headroom >= MILLI:
                    return "admission"
        return None

    @staticmethod
    def confirmed(rnd: Round, kind: str) -> bool:
        if kind == "preemption":
            return bool(greedy_preemption(rnd).victims)
        admitted = greedy_admission(rnd)
        return 0 < len(admitted) < len(rnd.pending_lp)

    def __call__(self, sim: Simulator) -> None:
        t = sim.round.time
        if t < self.after or t - self._last < self.every_s:
            return
        kind = self.contested(sim)
        if kind is None:
            return
        if self.confirm and kind == "preemption" and not any(
                sim.runs[j].queued_since == t for j in sim.hp_q):
            return  # nothing new: the last pass already made every choice it could
        rnd = sim.snapshot()
        if self.confirm and not self.confirmed(rnd, kind):
            return
        self._last = t
        self.out.mkdir(parents=True, exist_ok=True)
        path = self.out / f"{self.prefix}-{kind}-t{int(t)}.json"
        meta = {"source": self.source, "policy": sim.policy.name, "contested": kind,
                "time": t, "pending_hp": len(rnd.pending_hp), "pending_lp": len(rnd.pending_lp),
                "running": len(rnd.running), "nodes": rnd.state.n_nodes,
                "gpus": rnd.state.n_gpus, "confirmed": self.confirm}
        save_round(rnd, path, meta=meta)
        self.written.append(path)
        if len(self.written) >= self.max_files:
            sim.stop_requested = True
