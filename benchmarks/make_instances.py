"""Write the instance files of instances/ (run from the repo root):

    python benchmarks/make_instances.py [--out instances] [--check]     # hand-made + synthetic
    python benchmarks/make_instances.py --sim [--only NAME…]            # cut from simulations

Hand-made rounds are small enough to solve by hand; their optimum is written into the file's
``meta.optimum`` and derived in instances/README.md. ``--check`` re-solves every tiny file with
the OR-Tools MILP and the plain PuLP model and fails if either misses the written optimum.
Synthetic contested rounds come from benchmarks/contested.py (seeded, deterministic).

``--sim`` (≈ 10 minutes on 2 cores) runs ``gfs-opt instance dump --confirm`` for every entry of
`SIM_CUTS` into a scratch folder and keeps the most contested round of each run (`pick`): for
preemption the one where the greedy HP pass evicts the most LP jobs, for admission the one with
the most pending LP jobs; ties go to more running LP jobs, then to the earlier round. The rule
looks at the round only, never at the MILP, so the gap table is not biased by the choice.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np

from gfs_opt.instance import dumps_document, load_round, save_round
from gfs_opt.model import (
    MILLI,
    ClusterState,
    Job,
    JobClass,
    Params,
    Placement,
    PoolForecast,
    Round,
    RunningJob,
)

sys.path.insert(0, str(Path(__file__).parent))
from contested import contested_round

T = 7200.0  # every hand-made round happens at t = 2 h


def _job(jid: int, cls: str, g: float, w: int = 1, *, pool: str = "A100", submit: float = T,
         d: float = 1.0) -> Job:
    milli = round(g * MILLI) if g < 1 else int(g) * MILLI
    return Job(jid, "org-a", pool, JobClass(cls), milli, w, submit, 3 * 3600.0, guarantee_h=d)


def _round(nodes: Sequence[tuple[str, int]],
           running: Sequence[tuple[Job, Placement, float, float]], pending: Sequence[Job],
           params: Params | None = None) -> Round:
    """``running``: (job, placement, last_ckpt, window_start)."""
    st = ClusterState.from_nodes([(p, n, f"{p.lower()}-{i}") for i, (p, n) in enumerate(nodes)])
    jobs, run = {}, {}
    for jb, pl, ckpt, ws in running:
        jb.submit = min(jb.submit, ckpt, ws)   # running jobs were submitted before they started
        st.allocate(jb, pl)
        jobs[jb.id] = jb
        run[jb.id] = RunningJob(jb, start=min(ckpt, ws), last_ckpt=ckpt, window_start=ws, placement=pl)
    for jb in pending:
        jobs[jb.id] = jb
    return Round(time=T, state=st, jobs=jobs, running=run,
                 pending_hp=[j.id for j in pending if j.is_hp],
                 pending_lp=[j.id for j in pending if not j.is_hp], params=params or Params())


def _opt(placed: int, cost: float, quota: float | None = None, **extra: object) -> dict[str, object]:
    out: dict[str, object] = {"preemption": {"placed_value": placed, "eviction_cost": cost}}
    if quota is not None:
        out["quota"] = {"value": quota}
    out.update(extra)
    return out


def handmade() -> dict[str, tuple[Round, dict[str, object]]]:
    out: dict[str, tuple[Round, dict[str, object]]] = {}

    # 1: the cheaper of two victims (both greedy and MILP get it)
    r = _round([("A100", 8)],
               [(_job(1, "LP", 4), ((0, (0, 1, 2, 3)),), 7000.0, 7000.0),
                (_job(2, "LP", 4), ((0, (4, 5, 6, 7)),), 3000.0, 3000.0)],
               [_job(10, "HP", 4)])
    out["tiny-01-cheapest-victim"] = (r, {
        "exercises": "one node, two LP victims; c_1 = 4·200+4·40+3600 = 4560 < c_2 = 4·4200+160 = 16960",
        "optimum": _opt(4000, 4560.0, victims=[1])})

    # 2: one bigger victim beats two small ones once broken windows count
    r = _round([("A100", 4)],
               [(_job(1, "LP", 2), ((0, (0, 1)),), 5200.0, 5200.0),
                (_job(2, "LP", 1), ((0, (2,)),), 6200.0, 6200.0),
                (_job(3, "LP", 1), ((0, (3,)),), 6200.0, 6200.0)],
               [_job(10, "HP", 2)])
    out["tiny-02-window-penalty"] = (r, {
        "exercises": "every LP job is inside its window: evicting LP 1 (2 GPUs, c = 4000+80+3600 = "
                     "7680) beats LP 2 + LP 3 (2 × (1000+40+3600) = 9280), though the greedy, which "
                     "looks at wasted work only (4000 vs 2000), evicts LP 2 and LP 3",
        "optimum": _opt(2000, 7680.0, victims=[1])})

    # 3: fractional GPUs: shared GPUs, HP share that cannot be freed
    r = _round([("A100", 4)],
               [(_job(1, "HP", 0.5), ((0, (0,)),), 0.0, 0.0),
                (_job(2, "LP", 0.3), ((0, (0,)),), 7100.0, 7100.0),
                (_job(3, "LP", 0.6), ((0, (1,)),), 7000.0, 7000.0),
                (_job(4, "LP", 0.3), ((0, (1,)),), 7000.0, 7000.0),
                (_job(5, "LP", 1), ((0, (2,)),), 6000.0, 6000.0),
                (_job(6, "LP", 0.5), ((0, (3,)),), 7100.0, 7100.0)],
               [_job(10, "HP", 0.5), _job(11, "HP", 0.7)])
    out["tiny-03-fractional"] = (r, {
        "exercises": "fractional HP on shared GPUs; GPU 0 keeps 0.5 HP that no eviction frees; best: "
                     "0.5 on the free half of GPU 3, 0.7 on GPU 1 after evicting LP 3 (c = 120+24+3600 "
                     "= 3744); the greedy puts 0.7 on GPU 3 (evicting LP 6) and must then evict LP 2 too",
        "optimum": _opt(1200, 3744.0, victims=[3])})

    # 4: a 16-worker HP gang across three nodes; an LP gang spanning two nodes
    r = _round([("A100", 8)] * 3,
               [(_job(1, "LP", 4, 2), ((0, (0, 1, 2, 3)), (1, (0, 1, 2, 3))), 6800.0, 6800.0),
                (_job(2, "LP", 4), ((1, (4, 5, 6, 7)),), 4000.0, 4000.0),
                (_job(3, "HP", 4), ((2, (0, 1, 2, 3)),), 0.0, 0.0),
                *[(_job(4 + i, "LP", 1), ((2, (4 + i,)),), 7000.0, 7000.0) for i in range(4)]],
               [_job(20, "HP", 1, 16)])
    out["tiny-04-gang16"] = (r, {
        "exercises": "16-worker gang: 4 free GPUs + 12 freed; LP 1 (8 GPUs on two nodes, c = 7120) is "
                     "needed, then LP 2 (c = 16560) or LP 4–7 (4 × 3840 = 15360)",
        "optimum": _opt(16000, 22480.0, victims=[1, 4, 5, 6, 7])})

    # 5: everything inside its guarantee window, hard_guarantee on
    r = _round([("A100", 8), ("A100", 8)],
               [(_job(5, "LP", 0.5), ((0, (3,)),), 7000.0, 7000.0),
                (_job(6, "LP", 4), ((0, (4, 5, 6, 7)),), 7000.0, 7000.0),
                (_job(7, "LP", 2), ((1, (0, 1)),), 7000.0, 7000.0),
                (_job(8, "HP", 6), ((1, (2, 3, 4, 5, 6, 7)),), 0.0, 0.0)],
               [_job(10, "HP", 2), _job(11, "HP", 4), _job(12, "HP", 0.5)],
               Params(hard_guarantee=True))
    out["tiny-05-all-in-window-hard"] = (r, {
        "exercises": "hard_guarantee with every LP job inside its window: nothing may be evicted; "
                     "HP 10 (2 GPUs) and HP 12 (0.5) fit, HP 11 (4 GPUs) cannot start",
        "optimum": _opt(2500, 0.0, victims=[])})

    # 6: infeasible HP requests next to a feasible one
    r = _round([("A100", 8), ("A100", 8)],
               [(_job(1, "HP", 1), ((0, (0,)),), 0.0, 0.0),
                (_job(2, "HP", 1), ((1, (7,)),), 0.0, 0.0),
                (_job(3, "LP", 2), ((0, (1, 2)),), 7000.0, 7000.0)],
               [_job(10, "HP", 8), _job(11, "HP", 4, 4), _job(12, "HP", 2)])
    out["tiny-06-infeasible-hp"] = (r, {
        "exercises": "HP 10 needs 8 GPUs of one node but every node holds an HP GPU; HP 11 needs 16 "
                     "GPUs of a 16-GPU pool with 2 held by HP; only HP 12 (2 GPUs, free) starts",
        "optimum": _opt(2000, 0.0, victims=[])})

    # 7: the greedy's fail_size rule skips a job that fits
    r = _round([("A100", 8), ("A100", 8)],
               [(_job(1, "HP", 4), ((0, (4, 5, 6, 7)),), 0.0, 0.0),
                (_job(2, "HP", 6), ((1, (2, 3, 4, 5, 6, 7)),), 0.0, 0.0),
                (_job(3, "LP", 2), ((0, (2, 3)),), 7000.0, 7000.0)],
               [_job(10, "HP", 4, 2, submit=7100.0), _job(11, "HP", 4), _job(12, "HP", 2)])
    out["tiny-07-fail-size-trap"] = (r, {
        "exercises": "the 2×4 HP gang cannot start; the greedy then skips every request ≥ 4 GPUs "
                     "(fail_size) and misses HP 11, which fits on node 0 after evicting LP 3 (c = 4080)",
        "optimum": _opt(6000, 4080.0, victims=[3])})

    # 8: spot quota with guarantee classes
    r = _round([("A100", 8)],
               [(_job(1, "HP", 4), ((0, (0, 1, 2, 3)),), 0.0, 0.0)],
               [_job(20, "LP", 3, d=1.0), _job(21, "LP", 2, d=2.0), _job(22, "LP", 1, d=4.0),
                _job(23, "LP", 1, d=2.0)],
               Params(guarantee_classes=(1.0, 2.0, 4.0)))
    r = replace(r, forecasts={"A100": PoolForecast(mean=np.array([4.0, 5.0, 6.0, 6.0]),
                                                   std=np.zeros(4))})
    out["tiny-08-quota-classes"] = (r, {
        "exercises": "admission with classes 1/2/4 h and a certain forecast: free of HP per hour "
                     "[4,3,2,2]; the rule's quotas (3, 2, 2 GPUs) admit only LP 20 (value 3); the "
                     "MILP admits LP 22 + LP 23 (value 4 + 2 = 6)",
        "optimum": {"quota": {"value": 6.0, "admitted": [22, 23]}}})

    # 9: two pools, quota and preemption in both
    r = _round([("A10", 1)] * 4 + [("A100", 8)] * 2,
               [(_job(1, "HP", 1, pool="A10"), ((0, (0,)),), 0.0, 0.0),
                (_job(2, "LP", 1, 2, pool="A10"), ((1, (0,)), (2, (0,))), 6000.0, 6000.0),
                (_job(3, "LP", 1, pool="A10"), ((3, (0,)),), 7100.0, 7100.0),
                (_job(4, "HP", 8), ((4, tuple(range(8))),), 0.0, 0.0),
                (_job(5, "LP", 4), ((5, (0, 1, 2, 3)),), 5000.0, 5000.0),
                (_job(6, "LP", 2), ((5, (4, 5)),), 7000.0, 7000.0)],
               [_job(10, "HP", 1, pool="A10"), _job(11, "HP", 4), _job(12, "HP", 4, submit=3600.0),
                _job(20, "LP", 1, pool="A10"), _job(21, "LP", 2, d=2.0), _job(22, "LP", 1)],
               Params(guarantee_classes=(1.0, 2.0)))
    r = replace(r, forecasts={
        "A10": PoolForecast(mean=np.array([1.0, 1.5, 2.0]), std=np.array([0.3, 0.5, 0.5])),
        "A100": PoolForecast(mean=np.array([12.0, 12.0, 13.0]), std=np.array([1.0, 1.0, 1.5]))})
    out["tiny-09-two-pools"] = (r, {
        "exercises": "two pools in one model: on A10 evict LP 3 (c = 3740) rather than the 2-node "
                     "LP gang 2 (6080); on A100 both 4-GPU HP jobs need all of node 5, so LP 5 and "
                     "LP 6 go (12560 + 4080); no LP can be admitted (guaranteed LP fills the quota)",
        "optimum": _opt(13000, 20380.0, quota=0.0, victims=[3, 5, 6])})
    return out


#: Synthetic rounds keep what no simulation round reaches (see instances/README.md): the target
#: size (≥ 100 pending HP with ≥ 500 running LP), hard_guarantee at that size, and admission
#: with several guarantee classes.
SYNTHETIC = {
    "contested-300": dict(seed=3, nodes=300, pending_hp=120, pending_lp=150, hp_share=0.5, lp_share=0.49),
    "contested-300-hard": dict(seed=4, nodes=300, pending_hp=120, pending_lp=150, hp_share=0.5,
                               lp_share=0.4, hard_guarantee=True),
    "admission-150": dict(seed=6, nodes=150, pending_hp=10, pending_lp=300, hp_share=0.45,
                          lp_share=0.3),
}


def synthetic() -> dict[str, tuple[Round, dict[str, object]]]:
    out = {}
    for name, kw in SYNTHETIC.items():
        args = ", ".join(f"{k}={v}" for k, v in kw.items())
        out[name] = (contested_round(**kw), {  # type: ignore[arg-type]
            "exercises": "synthetic contested round: nearly full pool, many LP victims, burst of HP",
            "generator": f"benchmarks/contested.py: contested_round({args})"})
    return out


# ---- rounds cut from simulations ---------------------------------------------------------
#: name → `gfs-opt instance dump` arguments (besides --out/--prefix/--confirm/--every/--max).
#: GFS runs use the fast ETS forecaster (Prophet would take hours for the same rounds).
SIM_CUTS: dict[str, list[str]] = {
    **{f"sim-small-{level}-{kind}": ["--setup", "small", "--lp-load", load, "--kind", kind,
                                     "--forecaster", "ets"]
       for level, load in (("low", "0.5"), ("medium", "1"), ("high", "2"))
       for kind in ("preemption", "admission")},
    **{f"sim-paper-a100-{level}-{kind}": ["--setup", "paper-a100", "--lp-load", load,
                                          "--kind", kind, "--forecaster", "ets"]
       for level, load in (("low", "0.5"), ("medium", "1"), ("high", "2"))
       for kind in ("preemption", "admission")},
    # the largest natural rounds: baselines without a spot quota at 8× LP load
    "sim-paper-a100-lyra-x8-preemption": ["--setup", "paper-a100", "--policy", "lyra",
                                          "--lp-load", "8", "--kind", "preemption",
                                          "--min-running-lp", "250"],
    "sim-paper-a100-yarn-cs-x8-preemption": ["--setup", "paper-a100", "--policy", "yarn-cs",
                                             "--lp-load", "8", "--kind", "preemption",
                                             "--min-pending-hp", "40", "--min-running-lp", "60"],
}
SIM_MAX = 40          # candidate rounds per run
SIM_EVERY = 3600.0    # simulated seconds between candidates


def dump_command(name: str, out: Path) -> list[str]:
    return ["gfs-opt", "instance", "dump", *SIM_CUTS[name], "--confirm", "--every",
            f"{SIM_EVERY:g}", "--max", str(SIM_MAX), "--prefix", name, "--out", str(out)]


def contest_key(rnd: Round, kind: str) -> tuple[int, int, float]:
    """How contested a round is (larger = more); see the module docstring."""
    from gfs_opt.preempt.hp_pass import greedy_preemption

    n_lp = sum(1 for r in rnd.running.values() if r.job.cls is JobClass.LP)
    size = len(greedy_preemption(rnd).victims) if kind == "preemption" else len(rnd.pending_lp)
    return size, n_lp, -rnd.time


def pick(files: Sequence[Path], kind: str) -> Path:
    return max(files, key=lambda f: contest_key(load_round(f), kind))


def cut_from_simulation(name: str, out: Path) -> Path:
    kind = SIM_CUTS[name][SIM_CUTS[name].index("--kind") + 1]
    with tempfile.TemporaryDirectory() as tmp:
        cmd = dump_command(name, Path(tmp))
        subprocess.run([sys.executable, "-m", "gfs_opt.cli", *cmd[1:]], check=True,
                       stdout=subprocess.DEVNULL)
        files = sorted(Path(tmp).glob("*.json"))
        if not files:
            raise SystemExit(f"{name}: the simulation had no contested round")
        best = pick(files, kind)
        doc = json.loads(best.read_text())
        shown = [c if c != tmp else "DIR" for c in cmd]
        doc["meta"].update({
            "cut_by": " ".join(shown),
            "picked": f"most contested of {len(files)} candidate rounds "
                      f"(benchmarks/make_instances.py: contest_key, kind {kind})"})
        out.mkdir(parents=True, exist_ok=True)
        target = out / f"{name}.json"
        target.write_text(dumps_document(doc))
        return target


def check(files: dict[str, tuple[Round, dict[str, object]]]) -> int:
    from gfs_opt.crosscheck.pulp_models import solve_preemption_pulp, solve_quota_pulp
    from gfs_opt.preempt.milp import solve_preemption
    from gfs_opt.quota.milp import solve_quota
    from gfs_opt.solve import SolverOptions

    exact = SolverOptions(rel_gap=0.0)
    bad = 0
    for name, (rnd, meta) in files.items():
        opt = meta.get("optimum")
        if not isinstance(opt, dict):
            continue
        if "preemption" in opt:
            want = opt["preemption"]
            got, pp = solve_preemption(rnd, solver=exact), solve_preemption_pulp(rnd)
            ok = (got.score.placed == want["placed_value"] == pp.placed
                  and abs(got.score.eviction_cost - want["eviction_cost"]) < 1e-6
                  and abs(pp.cost - want["eviction_cost"]) < 1e-6)
            print(f"{name}: preemption {'ok' if ok else 'MISMATCH'} (MILP {got.score}, PuLP {pp.placed}/{pp.cost})")
            bad += not ok
        if "quota" in opt:
            want = opt["quota"]
            q, qp = solve_quota(rnd, solver=exact), solve_quota_pulp(rnd)
            ok = abs(q.value - want["value"]) < 1e-6 and abs(qp.value - want["value"]) < 1e-6
            print(f"{name}: quota {'ok' if ok else 'MISMATCH'} (MILP {q.value}, PuLP {qp.value})")
            bad += not ok
    return bad


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=Path("instances"))
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--no-synthetic", action="store_true")
    ap.add_argument("--sim", action="store_true", help="(re)cut the sim-* rounds (slow)")
    ap.add_argument("--only", nargs="*", default=None, help="with --sim: these names only")
    args = ap.parse_args(argv)
    if args.sim:
        for name in args.only or SIM_CUTS:
            if name not in SIM_CUTS:
                raise SystemExit(f"unknown sim cut {name}; choose from {', '.join(SIM_CUTS)}")
            print(f"wrote {cut_from_simulation(name, args.out)}", flush=True)
        return 0
    files = handmade()
    if not args.no_synthetic:
        files.update(synthetic())
    for name, (rnd, meta) in files.items():
        meta = {"source": "benchmarks/make_instances.py", **meta}
        path = save_round(rnd, args.out / f"{name}.json", meta)
        print(f"wrote {path}")
    return 1 if args.check and check(handmade()) else 0


if __name__ == "__main__":
    sys.exit(main())
