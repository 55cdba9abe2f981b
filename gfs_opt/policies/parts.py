"""The named parts a greedy policy is composed of (the split of Blox: admission, scheduling,
placement, preemption as separate, swappable pieces).

- **queue order** (`QueueOrder`): the order a pass walks a pool's pending jobs and whether a
  blocked job holds the line — `PTS_ORDER`, `FIFO_ORDER`, or FIFO with head-of-line blocking;
- **admission rule** (`Admission`): the quota LP starts are held to — `NoQuota`, GFS's forecast
  loop `SpotQuota` (η adaptive or fixed at 1), or `FreeCapacityQuota`;
- **placement score** (`PlacementScore`): where free GPUs are taken — `BestFit` (PTS's node
  score, E(n) as tie-break when ``history``) or a paper's own (FGD's fragmentation gradient);
- **victim rule** (`PreemptRule`, or None for no preemption): which LP jobs an HP job may evict,
  node by node.

`gfs_opt.policies.base.ComposedPolicy` runs them: quotas, then the HP pass, then the LP pass.
A new baseline is a new composition of these parts (or a new part), not a new flag.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from gfs_opt.model import HOUR, MILLI, ClusterState, Decision, Params, Round
from gfs_opt.pending import FIFO_ORDER, PTS_ORDER, QueueOrder
from gfs_opt.preempt.greedy import PreemptRule
from gfs_opt.preempt.scoring import EvictionHistory, Placer
from gfs_opt.quota.admission import Quotas
from gfs_opt.quota.spot_quota import SpotQuota

__all__ = ["FIFO_ORDER", "PTS_ORDER", "Admission", "BestFit", "FreeCapacityQuota", "NoQuota",
           "PlacementScore", "PreemptRule", "QueueOrder", "SpotQuota", "baseline_admission"]


class Admission(Protocol):
    """The quota rule of a policy's LP pass (`SpotQuota` is the stateful one)."""

    @property
    def name(self) -> str: ...

    def reset(self, state: ClusterState, params: Params, origin: object = None) -> None: ...

    def quotas_for_pass(self, rnd: Round, decision: Decision) -> Quotas | None:
        """The quotas this pass applies (None: no quota); a refresh goes into ``decision``."""

    def standalone_quotas(self, rnd: Round) -> Quotas | None:
        """The quotas in force on a standalone round (an instance file)."""

    def settled_quotas(self, rnd: Round) -> tuple[bool, Quotas | None]:
        """(True, the quotas this pass applies) when taking them changes nothing (no refresh
        is due); (False, None) otherwise (`ComposedPolicy.settled`)."""

    def count_denials(self, t: float, denied: Mapping[str, int]) -> None: ...


class NoQuota:
    """Admit every LP job that fits."""

    name = "no quota"

    def reset(self, state: ClusterState, params: Params, origin: object = None) -> None:
        return None

    def quotas_for_pass(self, rnd: Round, decision: Decision) -> Quotas | None:
        return None

    def standalone_quotas(self, rnd: Round) -> Quotas | None:
        return None

    def settled_quotas(self, rnd: Round) -> tuple[bool, Quotas | None]:
        return True, None

    def count_denials(self, t: float, denied: Mapping[str, int]) -> None:
        return None


class FreeCapacityQuota(NoQuota):
    """LP may use the capacity HP does not use right now (whole GPUs, every class): a common
    operator setting with no forecast."""

    name = "free capacity"

    def quotas_for_pass(self, rnd: Round, decision: Decision) -> Quotas | None:
        return self.standalone_quotas(rnd)

    def settled_quotas(self, rnd: Round) -> tuple[bool, Quotas | None]:
        return True, self.standalone_quotas(rnd)

    def standalone_quotas(self, rnd: Round) -> Quotas | None:
        st = rnd.state
        return {(p, d): int(st.pool_capacity[i] - st.pool_hp[i]) // MILLI * MILLI
                for i, p in enumerate(st.pools) for d in rnd.params.guarantee_classes}


#: a baseline's LP admission by name (the ``quota`` option of YARN-CS, Lyra and FGD)
BASELINE_QUOTAS = ("none", "sqa")


def baseline_admission(mode: str, forecaster: str, policy: str,
                       extra: tuple[str, ...] = (), eta: float = 1.0) -> Admission:
    """``"none"``: no quota; ``"sqa"``: GFS's spot quota with η fixed (at 1: the setting in
    which the authors ran YARN-CS, Lyra and FGD); ``"static"`` (only where ``extra`` allows it):
    the free capacity."""
    modes = (*BASELINE_QUOTAS, *extra)
    if mode not in modes:
        raise ValueError(f"{policy} quota must be one of {', '.join(modes)}, got {mode!r}")
    if mode == "sqa":
        try:
            return SpotQuota(forecaster, adaptive=False, fixed_eta=eta)
        except ValueError as exc:
            raise ValueError(f"{policy} quota_eta: {exc}") from None
    return FreeCapacityQuota() if mode == "static" else NoQuota()


class PlacementScore(Protocol):
    """Where a pass takes free GPUs: a `Placer` for this round."""

    @property
    def name(self) -> str: ...

    def placer(self, rnd: Round) -> Placer: ...


class BestFit:
    """PTS's node score: the node that fits most tightly, then co-location with the job's own
    class; with ``history``, ties go by E(n), the node's recent evictions (HP to troubled nodes,
    LP to calm ones)."""

    def __init__(self, history: bool = False, lp_beside_hp: bool = False) -> None:
        self.history = history
        self.lp_beside_hp = lp_beside_hp
        self.name = ("best fit + E(n)" if history else "best fit") + (
            ", LP beside HP" if lp_beside_hp else "")
        self._evictions = EvictionHistory()
        self._plain = Placer(None, use_history=False, lp_beside_hp=lp_beside_hp)
        self._scored = self._plain

    def placer(self, rnd: Round) -> Placer:
        if not self.history:
            return self._plain
        scores = self._evictions.scores(rnd)
        if self._scored.e_score is not scores:   # new counts come every 300 s, passes far more often
            self._scored = Placer(scores, use_history=True, lp_beside_hp=self.lp_beside_hp)
        return self._scored


def describe_order(order: QueueOrder) -> str:
    if not order.fifo:
        text = "PTS (largest first)"
        if order.ages:
            text += f"; LP waiting > {order.lp_age_s / HOUR:g} h first, FIFO"
        return text + ("; HP in submit order" if order.hp_fifo else "")
    if not order.head_of_line:
        return "FIFO"
    return f"FIFO, head of line blocks ≤ {order.hol_timeout_s:g} s"


_ORDERS = {"two-pointer": "two-pointer (spare the costliest work)", "naive": "by job id",
           "newest": "newest first", "lyra": "fewest and smallest jobs"}
_NODES = {"gfs": "GFS node cost", "count": "node with the fewest victims",
          "lyra": "node with the lowest reclaim cost"}


def describe_victims(rule: PreemptRule | None) -> str:
    if rule is None:
        return "no preemption"
    where = "first candidate node" if rule.first_candidate_only else _NODES.get(
        rule.node_cost, rule.node_cost)
    gang = ", the gang in view" if rule.gang_aware else ""
    return f"{_ORDERS.get(rule.victim_order, rule.victim_order)}, {where}{gang}"
