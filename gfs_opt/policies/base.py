"""One interface for every scheduling policy (in the spirit of Gavel's policies).

A policy turns a `Round` into a `Decision`. The round is read-only (see `gfs_opt.model`): the
policy may plan on ``round.state`` (the engine records the changes and rolls them back before
applying the returned decision through its own checks), and everything else it wants changed —
quotas, η, forecasts — goes into the decision; what it must remember lives in the policy. It
never reaches into the simulator. Hooks let it see HP usage history and the daily clock.

A greedy policy's round is three steps: the quotas in force (`quotas_for_pass`), the HP pass
(`hp_step`) and the LP pass (`lp_step`). The same steps run on a standalone round
(`standalone_quotas`, and the two passes on a copy of its state), which is what
`gfs-opt solve --method greedy` answers: one implementation for simulator and solver.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import ClassVar

from gfs_opt.model import ClusterState, Decision, Params, Round
from gfs_opt.preempt.fit_memo import FitMemo
from gfs_opt.preempt.scoring import BEST_FIT, Placer
from gfs_opt.quota.admission import Quotas
from gfs_opt.quota.spot_quota import SpotQuota


class Policy(ABC):
    """Base class: subclasses set ``name`` and implement `decide`.

    A policy that admits LP work under the spot quota holds a `SpotQuota` in ``spot``; the clock
    hooks below feed it, and `diagnostics` reports what it did.
    """

    name: ClassVar[str] = "policy"
    #: called at every event time (False: only on quota-refresh rounds, e.g. Chronus' 300 s rounds)
    every_event: ClassVar[bool] = True
    spot: SpotQuota | None = None

    def reset(self, state: ClusterState, params: Params, origin: object = None) -> None:
        """Called once before a simulation (or a standalone solve) starts."""
        self.params = params
        self._fit_memos: dict[str, FitMemo] = {}
        if self.spot is not None:
            self.spot.reset(state, params, origin)

    def fit_memo(self, name: str, preemptive: bool) -> FitMemo:
        """The `FitMemo` of one of the policy's passes (fresh after `reset`)."""
        memos = self.__dict__.setdefault("_fit_memos", {})
        memo = memos.get(name)
        if memo is None:
            memo = memos[name] = FitMemo(preemptive)
        return memo

    @abstractmethod
    def decide(self, rnd: Round) -> Decision: ...

    def observe_hour(self, t: float, hp_usage: Mapping[tuple[str, str], float]) -> None:
        """Hourly maximum of HP GPUs in use per (pool, org) for the hour that ends at ``t``."""
        if self.spot is not None:
            self.spot.observe_hour(t, hp_usage)

    def on_day(self, t: float) -> None:
        """Midnight of simulated time (forecaster refits)."""
        if self.spot is not None:
            self.spot.on_day(t)

    def options(self) -> dict[str, object]:
        return {}

    def diagnostics(self) -> dict[str, object]:
        """What the policy wants said about the run (e.g. the quota's activity), JSON-friendly."""
        return {"quota": self.spot.diagnostics()} if self.spot is not None else {}

    def quotas_for_pass(self, rnd: Round, decision: Decision) -> Quotas | None:
        """Refresh the spot quota when due; the quotas this pass applies (None: no quota)."""
        if self.spot is None:
            return None
        if self.spot.due(rnd):
            self.spot.refresh(rnd, decision)
        return self.spot.in_force()

    def count_denials(self, rnd: Round, denied: Mapping[str, int]) -> None:
        """The LP pass's quota refusals, for the quota's diagnostics."""
        if self.spot is not None:
            self.spot.count_denials(rnd.time, denied)


QUOTA_MODES = ("none", "sqa")


def shared_quota(mode: str, forecaster: str, policy: str) -> SpotQuota | None:
    """A baseline's LP admission: no quota, or GFS's SQA quota with η fixed at 1 (``"sqa"``),
    the setting in which the authors ran YARN-CS, Lyra and FGD."""
    if mode not in QUOTA_MODES:
        raise ValueError(f"{policy} quota must be one of {', '.join(QUOTA_MODES)}, got {mode!r}")
    return SpotQuota(forecaster, adaptive=False) if mode == "sqa" else None


class GreedyPolicy(Policy):
    """A policy whose round is the quotas in force, a greedy HP pass and a greedy LP pass."""

    #: its steps can answer a standalone round (`gfs-opt solve --policy`): they need nothing an
    #: instance file does not hold (False e.g. for exact steps or leases re-queued by time)
    standalone: ClassVar[bool] = True

    def decide(self, rnd: Round) -> Decision:
        decision = Decision()
        quotas = self.quotas_for_pass(rnd, decision)
        self.hp_step(rnd, decision)
        self.count_denials(rnd, self.lp_step(rnd, decision, quotas))
        return decision

    @abstractmethod
    def hp_step(self, rnd: Round, decision: Decision) -> None:
        """The HP pass on the round's state: placements and victims (or re-queues) into
        ``decision``."""

    @abstractmethod
    def lp_step(self, rnd: Round, decision: Decision, quotas: Quotas | None) -> dict[str, int]:
        """The LP pass on the round's state under ``quotas`` (None: no quota); returns the
        starts the quota refused, per pool."""

    def placer(self, rnd: Round) -> Placer:
        """How this round's passes pick free GPUs (default: best fit, no eviction history)."""
        return BEST_FIT

    def standalone_quotas(self, rnd: Round) -> Quotas | None:
        """The quotas this policy applies to a standalone round (an instance file): the quota
        rule on the round's forecast and η when it holds a spot quota, else None."""
        return self.spot.standalone_quotas(rnd) if self.spot is not None else None
