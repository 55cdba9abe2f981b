"""The spot-quota loop (SQA) as one part that any policy can hold: GFS and the `+sqa` baselines.

Every refresh (300 s): forecast HP demand per pool from the latest completed hour, turn it into a
quota per guarantee class with the rule (`gfs_opt.quota.rule`), and — when ``adaptive`` — move η
at most once per ``eta_every_s`` on the eviction rate of the last H hours. The `+sqa` baselines
hold the same part with ``adaptive=False`` (η stays 1: the plain ρ-quantile), which is how the
authors gave YARN-CS, Lyra and FGD the GFS quota.

The quota stays on until the replay ends (``Params.quota_after_window``, the default), so every
window of a scored LP job is one the quota governs. With it off — the authors' lifted drain — the
quota is lifted when the scored window ends so the LP backlog floods in, and the forecaster stops
refitting; the windows that start then are scored apart (`gfs_opt.sim.metrics`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from gfs_opt.forecast.provider import ForecastProvider
from gfs_opt.model import (
    ClusterState,
    Decision,
    Params,
    PoolForecast,
    QuotaFeedback,
    Round,
    SolveReport,
    WindowOutcome,
)
from gfs_opt.quota.admission import quota_wait
from gfs_opt.quota.eta import EtaRule, PaperEta
from gfs_opt.quota.ledger import EtaLedger
from gfs_opt.quota.rule import rule_quotas
from gfs_opt.quota.shape import pool_reserves

Quotas = dict[tuple[str, float], int]


@dataclass(slots=True)
class QuotaDiagnostics:
    """What the quota did in one pool inside the scored window (to tell when it never mattered)."""

    refreshes: int = 0           # quota refreshes inside the window
    with_forecast: int = 0       # … at which the pool had a demand forecast
    binding: int = 0             # … at which some class's quota was below C − HP in use
    denials: int = 0             # LP starts the quota refused inside the window
    eta_min_seen: float = float("inf")
    eta_max_seen: float = float("-inf")


class SpotQuota:
    """Forecast → quota per (pool, class) → η feedback; see the module doc.

    forecaster: a name for `gfs_opt.forecast.make_forecaster` ("prophet", "ets", …).
    adaptive: η feedback on (GFS) or η fixed at 1 (the `+sqa` baselines, the static-η ablation).
    eta_every_s: the feedback acts at most this often. The quota refreshes every 300 s but ER
        looks back H hours; correcting at every refresh would compound one measurement up to 48
        times.
    shape: also forecast the HP demand of whole-node workers and keep that many whole nodes
        free of LP (`gfs_opt.quota.shape`, the quota's shape dimension).
    eta_rule: how η moves (`gfs_opt.quota.eta`): `PaperEta` (the paper's rule, default) or
        `AttributableEta`. Its evidence is the quota's own ledger (`gfs_opt.quota.ledger`), fed
        by the window outcomes the scheduler reports (`observe_window`).
    fixed_eta: the η a quota without feedback holds (1: the plain ρ-quantile; other values
        trace the static-η family's eviction/queueing frontier, BENCHMARKS.md).
    """

    def __init__(self, forecaster: str = "prophet", adaptive: bool = True,
                 aggregation: str = "independent", eta_every_s: float = 3600.0,
                 shape: bool = False, fixed_eta: float = 1.0,
                 eta_rule: EtaRule | None = None) -> None:
        if not fixed_eta > 0:
            raise ValueError(f"a fixed η must be > 0, got {fixed_eta}")
        self.eta_rule: EtaRule = PaperEta() if eta_rule is None else eta_rule
        self.forecaster = forecaster
        self.fixed_eta = float(fixed_eta)
        self.adaptive = adaptive
        self.aggregation = aggregation
        self.eta_every_s = eta_every_s
        self.shape = shape

    @property
    def name(self) -> str:
        eta = (f"adaptive η, {self.eta_rule.name} rule" if self.adaptive
               else f"η = {self.fixed_eta:g}")
        return f"spot quota ({self.forecaster}, {eta}{', whole-node reserve' if self.shape else ''})"

    def reset(self, state: ClusterState, params: Params, origin: object = None) -> None:
        self.params = params
        self.quotas: Quotas | None = None
        self._rule: tuple[object, tuple, Quotas] | None = None   # the rule's last inputs, answer
        self._reserve: tuple[object, tuple, Quotas] | None = None   # the same for the reserves
        self.lifted = False
        self.last_eta_update = -float("inf")
        self.diag = {p: QuotaDiagnostics() for p in state.pools}
        self.ledger = EtaLedger(state.pools, {p: state.capacity_gpus(p) for p in state.pools},
                                params, *self.eta_rule.spans(params))
        where: dict[str, Any] = {} if origin is None else {"origin": origin}  # the trace's t = 0

        def provider() -> ForecastProvider:
            return ForecastProvider(
                self.forecaster, horizon_h=params.horizon_h, rho=params.rho,
                aggregation=self.aggregation, refit_from=max(0.0, params.eval_start - 86_400.0),
                **where)

        self.provider = provider()
        # the whole-node part of the HP demand, one series per pool (the shape reserve's input)
        self.whole_provider = provider() if self.shape else None

    # ---- clock hooks (forwarded by the policy) --------------------------------------------
    def observe_hour(self, t: float, hp_usage: Mapping[tuple[str, str], float],
                     whole_usage: Mapping[str, float] | None = None) -> None:
        """Hourly maxima of the hour that ends at ``t``: HP GPUs per (pool, org) and, for the
        shape reserve, HP GPUs of whole-node workers per pool."""
        self.provider.observe(t - 3600.0, hp_usage)
        if self.whole_provider is not None and whole_usage is not None:
            self.whole_provider.observe(t - 3600.0, {(p, "whole-node"): v
                                                     for p, v in whole_usage.items()})

    def on_day(self, t: float) -> None:
        if not self._after_window(t):
            self.provider.refit(t)
            if self.whole_provider is not None:
                self.whole_provider.refit(t)

    def observe_window(self, outcome: WindowOutcome) -> None:
        """An LP window ended (reported by the simulator or a live scheduler): η's evidence."""
        self.ledger.record(outcome)

    def attribution(self, pool: str, hp_milli: int) -> tuple[bool, float]:
        """(whether an eviction with the pool's HP at ``hp_milli`` is the quota's to answer for,
        the plan U_0 it was set for in GPUs): what the eviction-cause table records."""
        return self.ledger.attribution(pool, hp_milli)[0], self.ledger.plan_gpus(pool)

    # ---- the loop -------------------------------------------------------------------------
    def _after_window(self, t: float) -> bool:
        return not self.params.quota_after_window and t >= self.params.eval_end

    def _in_window(self, t: float) -> bool:
        return self.params.eval_start <= t < self.params.eval_end

    def due(self, rnd: Round) -> bool:
        return rnd.quota_due or self.quotas is None

    def quotas_for_pass(self, rnd: Round, decision: Decision) -> Quotas | None:
        """Refresh when due (into ``decision``); the quotas this pass applies (None: none)."""
        if self.due(rnd):
            self.refresh(rnd, decision)
        return self.in_force()

    def settled_quotas(self, rnd: Round) -> tuple[bool, Quotas | None]:
        """(True, the quotas in force) when no refresh is due, else (False, None)."""
        return (False, None) if self.due(rnd) else (True, self.in_force())

    def refresh(self, rnd: Round, decision: Decision) -> None:
        """New quotas, η, forecasts and which pools have HP history into ``decision`` (the engine
        hands them back in later rounds); after the window, an empty quota map (none)."""
        if rnd.quota_due:
            self.ledger.refresh(rnd.time)
        if self._after_window(rnd.time):
            if not self.lifted:
                self.lifted = True
                self.quotas = {}
                decision.quotas = {}
                if self.shape:
                    decision.reserves = {}
            return
        eta: dict[str, float] = {}
        history: dict[str, bool] = {}
        feedback = self.adaptive and rnd.time - self.last_eta_update >= self.eta_every_s
        if feedback:
            self.last_eta_update = rnd.time
        ledger = self.ledger
        for pool in rnd.state.pools:
            status = rnd.pool_status(pool)
            if feedback:
                wait = quota_wait(rnd, pool, self.quotas) if self.quotas else None
                eta[pool] = self.eta_rule.update(status.eta, ledger.reading(pool), rnd.params,
                                                 wait)
            else:
                eta[pool] = status.eta if self.adaptive else self.fixed_eta
            if eta[pool] != status.eta:
                ledger.moved(pool)   # this move read every outcome so far
            history[pool] = self.provider.has_history(pool)
        forecasts = self.provider.pool_forecasts(rnd.time)
        # the rule reads the hour's forecasts, η, history and capacity only: the 12 refreshes of
        # an hour usually ask it the same question
        asked = (tuple(eta.items()), tuple(history.items()),
                 tuple(rnd.state.capacity_gpus(p) for p in rnd.state.pools))
        if self._rule is not None and self._rule[0] is forecasts and self._rule[1] == asked:
            self.quotas = dict(self._rule[2])
        else:
            self.quotas = rule_quotas(rnd, eta, forecasts=forecasts, history=history)
            self._rule = (forecasts, asked, dict(self.quotas))
        if self.whole_provider is not None:
            whole = self.whole_provider.pool_forecasts(rnd.time)
            # the reserves read the hour's whole-node forecasts, η and the nodes whole-node HP
            # workers hold: most refreshes of an hour ask them the same question
            pools = rnd.pools
            asked_reserve = tuple(
                (p, eta.get(p, 1.0), pools[p].hp_whole_gpus if p in pools else 0.0) for p in whole)
            kept = self._reserve
            if kept is not None and kept[0] is whole and kept[1] == asked_reserve:
                decision.reserves = dict(kept[2])
            else:
                decision.reserves = pool_reserves(rnd.state, whole, pools, eta, rnd.params.rho,
                                                  rnd.params.guarantee_classes)
                self._reserve = (whole, asked_reserve, dict(decision.reserves))
        ledger.plan(forecasts, eta)
        if self._in_window(rnd.time):
            self._note(rnd, eta, forecasts)
        decision.feedback = {pool: QuotaFeedback(eta[pool], ledger.reading(pool),
                                                 ledger.plan_gpus(pool)) for pool in eta}
        decision.eta = eta
        decision.hp_history = history
        decision.forecasts = forecasts
        decision.quotas = dict(self.quotas)
        decision.reports.append(SolveReport(step="quota", method="rule", status="heuristic",
                                            objective=float(sum(self.quotas.values())) / 1000.0))

    def _note(self, rnd: Round, eta: Mapping[str, float],
              forecasts: Mapping[str, PoolForecast]) -> None:
        st = rnd.state
        assert self.quotas is not None
        lowest: dict[str, int] = {}     # each pool's lowest class quota
        for (pool, _c), v in self.quotas.items():
            lowest[pool] = min(lowest.get(pool, v), v)
        for pool, d in self.diag.items():
            p = st.pool_index[pool]
            d.refreshes += 1
            d.with_forecast += int(pool in forecasts)
            room = int(st.pool_capacity[p] - st.pool_hp[p])
            d.binding += int(lowest.get(pool, room) < room)
            e = eta.get(pool, 1.0)
            d.eta_min_seen, d.eta_max_seen = min(d.eta_min_seen, e), max(d.eta_max_seen, e)

    def override(self, quotas: Mapping[tuple[str, float], int]) -> Quotas:
        """Replace some quotas (e.g. by the admission MILP's); returns the quotas now in force."""
        self.quotas = {**(self.quotas or {}), **quotas}
        return dict(self.quotas)

    def standalone_quotas(self, rnd: Round) -> Quotas:
        """The quotas in force on a standalone round: the rule on the round's forecast and η
        (η = 1 when not ``adaptive``, as every refresh in the simulator sets it)."""
        eta = None if self.adaptive else dict.fromkeys(rnd.state.pools, self.fixed_eta)
        return rule_quotas(rnd, eta)

    def in_force(self) -> Quotas | None:
        """The quotas an LP pass applies now (None: no quota)."""
        return self.quotas or None


    def count_denials(self, t: float, denied: Mapping[str, int]) -> None:
        if denied and self._in_window(t):
            for pool, n in denied.items():
                self.diag[pool].denials += n

    # ---- reporting ------------------------------------------------------------------------
    def diagnostics(self) -> dict[str, Any]:
        out: dict[str, Any] = {"forecaster": self.forecaster, "adaptive": self.adaptive,
                               "pools": {}}
        for pool, d in self.diag.items():
            row = asdict(d)
            if d.refreshes == 0:
                row["eta_min_seen"] = row["eta_max_seen"] = None
            out["pools"][pool] = row
        return out


def quota_warnings(diagnostics: Mapping[str, Any], lp_jobs: Mapping[str, int]) -> list[str]:
    """One line per pool where the quota had no say over LP jobs it was meant to govern."""
    out: list[str] = []
    for pool, d in diagnostics.get("pools", {}).items():
        if lp_jobs.get(pool, 0) == 0 or d["refreshes"] == 0:
            continue
        if d["with_forecast"] == 0:
            out.append(f"pool {pool}: no HP demand forecast existed during the scored window (the "
                       "HP history before it is shorter than the forecaster needs, or there is "
                       "none), so the spot quota was the whole pool")
        elif d["denials"] == 0:
            out.append(f"pool {pool}: the spot quota never held an LP job back in the scored "
                       "window (the pool is not contended, e.g. a trace sized to its peak demand; "
                       "--capacity-scale below 1 makes it contend)")
    return out
