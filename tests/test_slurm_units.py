"""`gfs_opt.slurm` without a live Slurm: configs, parsing, the live Round, the adapter, the
payload, outcome bookkeeping, plans, the simulator models and the CLI's error paths."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from tiny_trace import write_tiny_trace

from gfs_opt.cli import main
from gfs_opt.errors import GfsError
from gfs_opt.model import MILLI, Params, PoolStatus
from gfs_opt.slurm import payload, procs
from gfs_opt.slurm.clock import TraceClock
from gfs_opt.slurm.layout import ClusterSpec, exempt_seconds, hms, render_configs, spot_qos
from gfs_opt.slurm.live import (
    LiveJob,
    WindowTracker,
    build_round,
    gpu_indices,
    gres_count,
    guarantee_of,
    placement_of,
)
from gfs_opt.slurm.outcomes import JobOutcome, Run, job_runs, quota_admissions, to_recorder
from gfs_opt.slurm.plan import ReplayPlan, account_of, build_plan
from gfs_opt.traces.base import Trace

# ---- names, configs ------------------------------------------------------------------------------


def test_qos_names_and_exempt_times() -> None:
    assert spot_qos(1.0) == "spot-1h" and spot_qos(0.5) == "spot-0.5h" and spot_qos(4) == "spot-4h"
    assert guarantee_of("spot-0.5h") == 0.5 and guarantee_of("hp") is None
    assert exempt_seconds(1.0, 60) == 60 and exempt_seconds(2.0, 1) == 7200
    assert exempt_seconds(1.0, 1e9) == 1          # never 0: 0 would mean "no exemption"
    assert hms(3661) == "01:01:01" and hms(30) == "00:00:30"


def test_rendered_configs_hold_every_private_path_and_port() -> None:
    spec = ClusterSpec(dir="/srv/c", nodes=3, gpus=4, port_base=20000, host="h")
    files = render_configs(spec, "pw")
    conf = files["etc/slurm.conf"]
    assert "${" not in "".join(files.values())
    nodes = [ln for ln in conf.splitlines() if ln.startswith("NodeName=")]
    assert [ln.split()[0] for ln in nodes] == ["NodeName=n1", "NodeName=n2", "NodeName=n3"]
    assert all("Gres=gpu:4" in ln and "NodeAddr=127.0.0.1" in ln for ln in nodes)
    assert [int(ln.split("Port=")[1].split()[0]) for ln in nodes] == [20101, 20102, 20103]
    for line in ("SlurmctldPort=20017", "AccountingStoragePort=20019", "PreemptType=preempt/qos",
                 "AccountingStoragePass=/srv/c/munge/munge.socket", "PartitionName=gpu Nodes=n[1-3]"):
        assert line in conf
    assert "cred_expire=10" in conf and "sched_min_interval=100000" in conf
    assert "NodeName=n[1-3] Name=gpu File=/srv/c/dev/gpu[0-3]" in files["etc/gres.conf"]
    dbd = files["etc/slurmdbd.conf"]
    assert "StoragePort=20006" in dbd and "StoragePass=pw" in dbd and "DbdPort=20019" in dbd
    assert "port=20006" in files["etc/my.cnf"]


def test_cluster_spec_checks_and_identity() -> None:
    with pytest.raises(GfsError, match="--nodes"):
        ClusterSpec(nodes=0)
    with pytest.raises(GfsError, match="--speedup"):
        ClusterSpec(speedup=0)
    with pytest.raises(GfsError, match="guarantee classes"):
        ClusterSpec(classes=(1.0, -2.0))
    a = ClusterSpec(dir="/x", speedup=1.0, host="h")
    assert ClusterSpec.from_json(a.to_json()) == a
    assert a.same_cluster(ClusterSpec(dir="/x", speedup=60.0, host="h"))
    assert not a.same_cluster(ClusterSpec(dir="/x", nodes=8, host="h"))


# ---- parsing and the live Round ----------------------------------------------------------------


def test_gres_parsing() -> None:
    assert gpu_indices("gpu:8(IDX:0-7)") == tuple(range(8))
    assert gpu_indices("gpu:a100:3(IDX:0,3-4)") == (0, 3, 4)
    assert gpu_indices("") == ()
    assert gres_count("gres:gpu:2") == 2 and gres_count("gres/gpu:a100=4") == 4
    assert gres_count("cpu=2") == 0


def squeue_record(job_id: int, qos: str, state: str = "RUNNING", start: float = 0.0,
                  node: str = "n1", idx: str = "0-7", gpus: int = 8, tasks: int = 1,
                  reason: str = "None", account: str = "org-a", submit: float = 0.0) -> dict:
    """A `squeue --json` job record, trimmed to the keys the controller reads (22.05 layout)."""
    running = state == "RUNNING"
    return {
        "job_id": job_id, "name": f"j{job_id}", "account": account, "qos": qos,
        "job_state": state, "state_reason": reason, "submit_time": int(submit),
        "start_time": int(start) if running else 0, "restart_cnt": 0, "tasks": tasks,
        "node_count": 1, "tres_per_task": f"gres:gpu:{gpus}", "tres_per_node": "",
        "tres_per_job": "", "time_limit": 10,
        "gres_detail": [f"gpu:{gpus * tasks}(IDX:{idx})"] if running else [],
        "job_resources": {"allocated_nodes": [{"nodename": node}]} if running else None,
    }


def test_live_job_and_placement() -> None:
    j = LiveJob.from_json(squeue_record(5, "hp", gpus=2, tasks=2, idx="0-1,4-5"))
    assert (j.g, j.workers, j.gpus, j.running) == (2 * MILLI, 2, 4, True)
    assert placement_of(j, {"n1": 0, "n2": 1}) == ((0, (0, 1)), (0, (4, 5)))
    odd = LiveJob.from_json(squeue_record(6, "hp", gpus=2, tasks=2, idx="0-2"))
    assert placement_of(odd, {"n1": 0}) is None                 # not whole workers: opaque
    pend = LiveJob.from_json(squeue_record(7, "spot-1h", state="PENDING", reason="QOSGrpGRES"))
    assert not pend.running and pend.alloc == [] and pend.cls is not None


def _snapshot(now: float) -> list[LiveJob]:
    """4 × 8 cluster under K = 60 (1 h window = 60 s wall): n1 a young spot job (30 s wall =
    30 min trace: inside its window), n2 an old one (past it), n3 an HP job, n4 empty; an HP job
    waits for GPUs and another has not been looked at yet (reason None)."""
    recs = [squeue_record(1, "spot-1h", start=now - 30, node="n1", account="org-b"),
            squeue_record(2, "spot-1h", start=now - 90, node="n2", account="org-b"),
            squeue_record(3, "hp", start=now - 10, node="n3", gpus=8, account="org-a"),
            squeue_record(4, "hp", state="PENDING", reason="Resources", gpus=8, submit=now - 2),
            squeue_record(5, "hp", state="PENDING", reason="None", gpus=8, submit=now - 1),
            squeue_record(6, "spot-1h", state="PENDING", reason="QOSGrpGRES", gpus=1,
                          submit=now - 20)]
    return [LiveJob.from_json(r) for r in recs]


def test_build_round_protects_jobs_inside_their_window() -> None:
    now = time.time()
    clock = TraceClock(now, 1000.0, 60.0)
    nodes = ["n1", "n2", "n3", "n4"]
    view = build_round(_snapshot(now), nodes, 8, "P", clock, Params(), {"P": PoolStatus()})
    rnd = view.rnd
    assert sorted(rnd.state.alloc) == [1, 2, 3]
    assert list(rnd.running) == [2] and view.protected == [1]
    assert rnd.pending_hp == [4] and rnd.pending_lp == [6]
    assert view.lp_gpus_by_qos == {"spot-1h": 16} and view.hp_gpus_by_account == {"org-a": 8}
    run = rnd.running[2]
    assert run.window_start == run.start and run.last_ckpt == pytest.approx(run.start + 3600.0)
    loose = build_round(_snapshot(now), nodes, 8, "P", clock, Params(), {"P": PoolStatus()},
                        protect_windows=False)
    assert sorted(loose.rnd.running) == [1, 2] and loose.protected == []


def test_victims_come_from_the_adapter_and_respect_protection() -> None:
    from gfs_opt.slurm.bridge import GfsBrain

    now = time.time()
    clock = TraceClock(now, 1000.0, 60.0)
    nodes = ["n1", "n2", "n3", "n4"]
    recs = _snapshot(now)
    recs.append(LiveJob.from_json(squeue_record(9, "hp", start=now - 5, node="n4")))  # n4 full
    brain = GfsBrain(Params(), "seasonal-naive", pd.Timestamp("2024-03-01"),
                     build_round(recs, nodes, 8, "P", clock, Params(), {}).rnd.state)
    for exact in (False, True):
        view = build_round(recs, nodes, 8, "P", clock, Params(), {"P": PoolStatus()})
        plan = brain.victims(view.rnd, exact=exact)
        assert plan.victims == [2], (exact, plan)              # never the protected job 1
        assert plan.placements[4][0][0] == nodes.index("n2")
    soft = build_round(recs, nodes, 8, "P", clock, Params(), {"P": PoolStatus()},
                       protect_windows=False)
    assert brain.victims(soft.rnd).victims in ([1], [2])
    young = [r for r in recs if r.job_id != 2]                # only the protected job is left
    view = build_round(young, nodes, 8, "P", clock, Params(), {"P": PoolStatus()})
    assert brain.victims(view.rnd).victims == []
    assert brain.victims(view.rnd, exact=True).victims == []


def test_window_tracker_counts_like_the_simulator() -> None:
    now = time.time()
    clock = TraceClock(now, 0.0, 60.0)            # window of class 1 h = 60 s wall
    tr = WindowTracker(horizon_s=4 * 3600.0)
    start = now - 150                               # 2.5 windows ago
    running = LiveJob.from_json(squeue_record(1, "spot-1h", start=start, node="n2"))
    assert [e.ok for e in tr.update([running], clock)] == [True, True]
    assert tr.update([running], clock) == []        # nothing new on the next poll
    requeued = LiveJob.from_json(squeue_record(1, "spot-1h", state="PENDING", reason="BeginTime"))
    ev = tr.update([requeued], clock)
    assert [e.ok for e in ev] == [False] and ev[0].nodes == ("n2",)
    st = tr.filled(PoolStatus())
    assert (st.succeeded, st.failed) == (2, 1)
    c1h, c1d = tr.node_evictions(["n1", "n2"], clock.now())
    assert c1h.tolist() == [0, 1] and c1d.tolist() == [0, 1]
    again = LiveJob.from_json(squeue_record(1, "spot-1h", start=now, node="n1"))
    tr.update([again], clock)
    done = LiveJob.from_json(squeue_record(1, "spot-1h", state="COMPLETED"))
    assert [e.ok for e in tr.update([done], clock)] == [True]


# ---- the adapter's quota is the simulator's -----------------------------------------------------
@pytest.mark.parametrize("policy", ["gfs", "gfs-paper"])
def test_evictions_reported_by_a_live_controller_shrink_eta(policy: str) -> None:
    """The live controller reports window outcomes to the policy's own ledger, as the simulator
    does: 8 of 10 recent windows broken (no plan yet, so every one is the quota's to answer for)
    with LP waiting on the quota shrink η — to (1 − ρ)/ER — under gfs's rule as under the
    paper's, where the controller's old status (recent counts only) grew gfs's η to its ceiling."""
    from gfs_opt.model import WindowOutcome
    from gfs_opt.slurm.bridge import GfsBrain

    nodes = [f"n{i}" for i in range(1, 5)]
    clock = TraceClock(time.time(), 0.0, 1.0)
    params = Params(eval_start=0.0, eval_end=30 * 86_400.0)
    view = build_round([], nodes, 8, "P", clock, params, {"P": PoolStatus()})
    brain = GfsBrain(params, "seasonal-naive", pd.Timestamp("2024-03-01"), view.rnd.state,
                     policy=policy)
    rnd = dataclasses.replace(view.rnd, quota_due=True)
    assert brain.refresh(dataclasses.replace(rnd, time=0.0)).eta == {"P": 1.0}
    for k in range(10):
        brain.observe_window(WindowOutcome(600.0 + k, "P", ok=k >= 8, lp_milli=16 * MILLI,
                                           hp_milli=None if k >= 8 else 24 * MILLI))
    later = dataclasses.replace(rnd, time=3600.0,
                                pools={"P": PoolStatus(eta=1.0)})
    eta = brain.refresh(later).eta["P"]
    assert brain.evidence("P").recent_failed == 8
    assert eta == pytest.approx(0.1 / 0.8)




def test_brain_quota_is_the_quota_rule() -> None:
    from gfs_opt.quota.rule import pool_quota
    from gfs_opt.slurm.bridge import GfsBrain

    plan = build_plan("slurm-demo", (604_800, 612_000), 4, 8)
    now = time.time()
    clock = TraceClock(now, plan.t0, 60.0)
    params = Params(eval_start=plan.t0, eval_end=plan.t1)
    view = build_round([], [f"n{i}" for i in range(1, 5)], 8, plan.pool, clock, params,
                       {plan.pool: PoolStatus()})
    brain = GfsBrain(params, "seasonal-naive", plan.trace.origin, view.rnd.state)
    assert brain.load_history(plan.history) == plan.history["ds"].nunique()
    assert brain.refit(plan.t0)
    upd = brain.refresh(view.rnd)
    fc = upd.forecasts[plan.pool]
    assert upd.quotas == {(plan.pool, 1.0): pool_quota(fc, 32, 1.0, 1.0, params)}
    assert 0 < upd.quotas[(plan.pool, 1.0)] < 32 * MILLI


# ---- payload -----------------------------------------------------------------------------------


def _payload(tmp: Path, job: str, work: float, window: float, restarts: int = 0,
             overhead: float = 0.0) -> subprocess.Popen:
    env = {"GFS_WORK": str(work), "GFS_WINDOW": str(window), "GFS_OVERHEAD": str(overhead),
           "GFS_STATE": str(tmp), "SLURM_JOB_ID": job, "SLURM_RESTART_COUNT": str(restarts)}
    return subprocess.Popen([sys.executable, "-S", "-E", payload.__file__], env=env)


def _events(tmp: Path, job: str) -> list[dict]:
    return [json.loads(x) for x in (tmp / f"{job}.log").read_text().splitlines()]


def test_payload_checkpoints_and_resumes(tmp_path: Path) -> None:
    p = _payload(tmp_path, "1", work=0.7, window=0.3)
    assert p.wait(10) == 0
    ev = _events(tmp_path, "1")
    assert [e["ev"] for e in ev] == ["start", "ckpt", "ckpt", "done"]
    assert ev[-1]["t"] - ev[0]["t"] == pytest.approx(0.7, abs=0.15)
    assert ev[1]["saved"] == pytest.approx(0.3, abs=0.05)

    p = _payload(tmp_path, "2", work=1.0, window=10.0)
    time.sleep(0.5)
    p.send_signal(signal.SIGUSR1)                  # the controller's checkpoint request
    time.sleep(0.2)
    p.send_signal(signal.SIGTERM)                  # then the requeue
    assert p.wait(10) == 128 + signal.SIGTERM
    ev = _events(tmp_path, "2")
    assert [e["ev"] for e in ev] == ["start", "ckpt", "term"] and ev[1]["why"] == "signal"
    saved = ev[1]["saved"]
    assert 0.3 < saved < 0.7 and float((tmp_path / "2.ckpt").read_text()) == pytest.approx(saved, abs=1e-5)
    t0 = time.time()
    p = _payload(tmp_path, "2", work=1.0, window=10.0, restarts=1, overhead=0.2)
    assert p.wait(10) == 0
    ev = _events(tmp_path, "2")
    assert ev[-2]["ev"] == "start" and ev[-2]["saved"] == pytest.approx(saved, abs=1e-5)
    assert time.time() - t0 == pytest.approx(0.2 + 1.0 - saved, abs=0.25)


# ---- outcomes ----------------------------------------------------------------------------------


def _sacct(job: int, start: float, end: float, state: str) -> dict:
    return {"job_id": job, "state": {"current": state},
            "time": {"start": int(start), "end": int(end), "submission": int(start)}}


def test_job_runs_merge_the_run_log_with_sacct() -> None:
    w = 1_000_000.0
    events = [{"ev": "start", "t": w + 1.3, "restart": 0}, {"ev": "ckpt", "t": w + 20, "restart": 0},
              {"ev": "term", "t": w + 30.2, "restart": 0},
              {"ev": "start", "t": w + 45.6, "restart": 1}, {"ev": "done", "t": w + 80.1, "restart": 1}]
    recs = [_sacct(7, w + 44, w + 80, "COMPLETED"), _sacct(7, w, w + 30, "REQUEUED")]
    runs = job_runs(events, recs, cutoff=w + 1000)
    assert [(r.how, r.by) for r in runs] == [("evicted", "controller"), ("done", "")]
    assert runs[0].start == w + 0.5 and runs[0].end == w + 30.2 and runs[0].last_ckpt == w + 20
    assert runs[1].start == w + 44.5 and runs[1].payload_start == w + 45.6
    cut = job_runs(events, recs, cutoff=w + 60)           # the second run was still going
    assert [r.how for r in cut] == ["evicted", "running"]
    slurm = job_runs(events[:3], [_sacct(7, w, w + 30, "PREEMPTED")], cutoff=w + 100)
    assert (slurm[0].how, slurm[0].by) == ("evicted", "slurm")


def _two_job_plan() -> ReplayPlan:
    jobs = pd.DataFrame({
        "job_id": [1, 2], "name": ["1", "2"], "org": ["org-a", "org-b"], "pool": "P",
        "cls": ["HP", "LP"], "g": [8000, 2000], "workers": [1, 1], "submit": [0.0, 60.0],
        "duration": [3600.0, 9000.0], "cpu": 4.0, "guarantee_h": [1.0, 1.0],
        "resident": False})
    nodes = pd.DataFrame({"node_name": ["n1", "n2"], "pool": "P", "gpus": 8, "cpus": 16.0})
    return ReplayPlan(Trace(nodes, jobs, pd.Timestamp("2024-03-01"), "t"), 0.0, 7200.0, "P",
                      "t", 2, 8, pd.DataFrame(columns=["ds", "series", "y"]))


def test_outcomes_become_the_simulators_tables() -> None:
    plan = _two_job_plan()
    w = 5_000.0
    clock = TraceClock(w, 0.0, 60.0)         # 1 s wall = 60 s trace; window 1 h = 60 s wall
    hp = JobOutcome(1, 11, [Run(w + 1.0, w + 61.0, "done")], "done")
    # LP: submitted at t=60 (w+1), starts w+3, evicted after 1.5 windows (w+93), waits, restarts
    # at w+110 and finishes at w+180
    lp = JobOutcome(2, 12, [Run(w + 3.0, w + 93.0, "evicted", "slurm", w + 63.0, w + 3, w + 93),
                            Run(w + 110.0, w + 180.0, "done")], "done")
    real = to_recorder(plan, [hp, lp], clock, cutoff=w + 400, params=Params())
    jobs = real.jobs.set_index("job_id")
    assert jobs.loc[1, "jqt"] == pytest.approx(60.0) and jobs.loc[1, "evictions"] == 0
    assert jobs.loc[2, "jqt"] == pytest.approx((3 - 1) * 60 + (110 - 93) * 60)
    assert (jobs.loc[2, "windows_ok"], jobs.loc[2, "windows_failed"]) == (1 + 2, 1)
    assert jobs.loc[2, "lost_gpu_s"] == pytest.approx(2 * 30 * 60)
    assert jobs.loc[2, "jct"] == pytest.approx(180 * 60 - 60)
    assert real.checks["jobs_conserved"] and real.checks["evictions_by_slurm"] == 1
    assert real.checks["lp_evictions_in_exempt_window"] == 0
    # who evicted: one row per eviction, and the LP counts of the summary
    assert real.checks["lp_evictions_by_slurm"] == 1 and real.checks["lp_evictions_by_controller"] == 0
    assert real.checks["lp_evictions_controller_pct"] == 0.0
    (row,) = real.evictions.itertuples()
    assert (row.job_id, row.slurm_job_id, row.by, row.run, row.inside_exempt_window) == \
        (2, 12, "slurm", 0, False)
    assert row.end - row.start == pytest.approx(90 * 60)
    by_ctl = JobOutcome(2, 12, [dataclasses.replace(lp.runs[0], by="controller"), lp.runs[1]], "done")
    mine = to_recorder(plan, [hp, by_ctl], clock, cutoff=w + 400, params=Params())
    assert mine.checks["lp_evictions_controller_pct"] == 100.0
    ts = real.recorder.timeseries()
    assert len(ts) == 120 and ts["hp"].max() == 8 and ts["lp"].max() == 2
    from gfs_opt.sim.metrics import summarize

    s = summarize(real.recorder)
    assert s["lp_windows_failed"] == 1 and s["lp_windows_ok"] == 3 and s["hp_evictions"] == 0
    # the LP job started at w+3 while its QOS was limited to 1 GPU: one start over the limit
    qlog = pd.DataFrame({"t_wall": [w], "qos": ["spot-1h"], "limit": [1.0]})
    q = quota_admissions(plan, [hp, lp], qlog)
    assert (q["spot_starts_checked"], q["spot_starts_over_limit"]) == (2, 2)
    ok = quota_admissions(plan, [hp, lp], qlog.assign(limit=2.0))
    assert ok["spot_starts_over_limit"] == 0
    # Slurm reports whole seconds: a raise logged 0.5 s into the start's second may have let it
    # start (not counted); one logged 1.5 s later may not (counted); a cut logged inside the
    # second does not hide the limit that was in force
    whole = JobOutcome(2, 12, [Run(w + 3.0, w + 93.0, "done", slurm_start=w + 3, slurm_end=w + 93)],
                       "done")
    raised = pd.DataFrame({"t_wall": [w - 100, w + 3.5], "qos": ["spot-1h"] * 2,
                           "limit": [1.0, 2.0]})
    assert quota_admissions(plan, [hp, whole], raised)["spot_starts_over_limit"] == 0
    late = raised.assign(t_wall=[w - 100, w + 4.5])
    assert quota_admissions(plan, [hp, whole], late)["spot_starts_over_limit"] == 1
    cut = pd.DataFrame({"t_wall": [w - 100, w + 3.5], "qos": ["spot-1h"] * 2,
                        "limit": [2.0, 0.0]})
    assert quota_admissions(plan, [hp, whole], cut)["spot_starts_over_limit"] == 0


# ---- plans and the simulator's models of the live system -------------------------------------


def test_demo_plan_is_deterministic_and_named_by_account() -> None:
    a = build_plan("slurm-demo", (604_800, 612_000), 4, 8)
    b = build_plan("slurm-demo", (604_800, 612_000), 4, 8)
    pd.testing.assert_frame_equal(a.jobs, b.jobs)
    assert a.accounts == ["org-a", "org-b", "org-c"] and account_of("Team 1") == "org-team_1"
    assert (a.jobs["submit"] >= a.t0).all() and (a.jobs["submit"] < a.t1).all()
    assert a.jobs.loc[a.jobs["resident"], "submit"].eq(a.t0).all()
    assert (a.history["ds"] < a.trace.origin + pd.Timedelta(seconds=a.t0)).all()
    assert set(a.history["series"]) == {"A100|org-a", "A100|org-b", "A100|org-c"}
    assert list(a.trace.nodes["node_name"]) == ["n1", "n2", "n3", "n4"]


def test_plan_rounds_fractions_and_drops_what_cannot_fit(tmp_path: Path) -> None:
    folder = write_tiny_trace(tmp_path / "tiny")
    a10 = build_plan(str(folder), (0, 172_800), 2, 1, pool="A10")
    assert (a10.jobs["g"] == MILLI).all() and any("rounded up" in n for n in a10.notes)
    a100 = build_plan(str(folder), (0, 172_800), 2, 4, pool="A100")
    assert (a100.jobs["g"] <= 4 * MILLI).all() and any("dropped" in n for n in a100.notes)
    with pytest.raises(GfsError, match="--pool"):
        build_plan(str(folder), (0, 172_800), 2, 4, pool="H800")
    with pytest.raises(GfsError, match="not after"):
        build_plan(str(folder), (100, 50), 2, 4)


def test_simulated_models_of_the_live_system(tmp_path: Path) -> None:
    from gfs_opt.slurm.compare import simulate, table

    plan = build_plan("slurm-demo", (604_800, 612_000), 4, 8)
    gfs = simulate(plan, "gfs", tmp_path / "gfs", (1.0,), "seasonal-naive", 300.0, 0.9, 3600.0)
    qos = simulate(plan, "slurm-qos", tmp_path / "qos", (1.0,), "seasonal-naive", 300.0, 0.9,
                   3600.0)
    for side in (gfs, qos):
        assert side.summary["hp_evictions"] == 0 and side.summary["jobs_lp"] == 30
    quotas = pd.read_csv(tmp_path / "gfs" / "quota_log.csv")
    assert len(quotas) and quotas["quota_gpus"].between(0, 32).all()
    assert not (tmp_path / "qos" / "quota_log.csv").read_text().strip().count("\n")
    df = table({"gfs": (gfs, gfs)})
    assert (df["gfs gap %"].fillna(0) == 0).all()


def test_past_exempt_is_slurms_rule() -> None:
    from gfs_opt.slurm.bridge import past_exempt

    now = time.time()
    clock = TraceClock(now, 1000.0, 60.0)
    view = build_round(_snapshot(now), ["n1", "n2", "n3", "n4"], 8, "P", clock, Params(),
                       {"P": PoolStatus()}, protect_windows=False)
    assert list(past_exempt(view.rnd)) == [2]


# ---- processes, clock ----------------------------------------------------------------------------


def test_processes_are_stopped_by_recorded_pid_only(tmp_path: Path) -> None:
    env = dict(os.environ, GFS_SLURM_DAEMON=str(tmp_path))
    rec = procs.start("sleeper", ["sleep", "30"], tmp_path / "log", env)
    assert procs.alive(rec)
    assert procs.strays(f"GFS_SLURM_DAEMON={tmp_path}", set()) == [rec.pid]
    stale = procs.ProcRecord("sleeper", rec.pid, rec.start_ticks + 1, rec.argv)
    assert not procs.alive(stale) and procs.stop(stale) == "not running"   # a reused PID
    assert procs.alive(rec)
    procs.save(tmp_path, [rec])
    assert procs.load(tmp_path) == [rec]
    assert procs.stop(rec, timeout_s=5) == "stopped" and not procs.alive(rec)


def test_a_daemon_whose_main_thread_exited_is_still_running(tmp_path: Path) -> None:
    """slurmctld, slurmdbd and mariadbd shut down with their main thread gone first: the leader
    shows state Z while other threads still run. `stop` must wait for the last thread."""
    code = ("import threading, ctypes, time; threading.Thread(target=time.sleep, args=(1.5,))"
            ".start(); ctypes.CDLL(None).pthread_exit(None)")
    rec = procs.start("half-exited", [sys.executable, "-c", code], tmp_path / "log", dict(os.environ))
    deadline = time.monotonic() + 5
    while Path(f"/proc/{rec.pid}/stat").read_text().split(") ")[1][0] != "Z":
        assert time.monotonic() < deadline
        time.sleep(0.02)
    assert procs.alive(rec)                       # the leader is a zombie, a thread is not
    t0 = time.monotonic()
    while procs.alive(rec):
        time.sleep(0.05)
    assert time.monotonic() - t0 > 0.5            # it really was running that long


def test_stop_escalates_to_kill_and_waits(tmp_path: Path) -> None:
    deaf = procs.start("deaf", ["sh", "-c", "trap '' TERM; while :; do sleep 0.1; done"],
                       tmp_path / "log", dict(os.environ))
    polite = procs.start("polite", ["sleep", "30"], tmp_path / "log", dict(os.environ))
    time.sleep(0.2)                               # the trap is set
    t0 = time.monotonic()
    assert procs.stop_all([deaf, polite], timeout_s=0.5) == ["killed", "stopped"]
    assert 0.5 <= time.monotonic() - t0 < 5
    assert not procs.alive(deaf) and not procs.alive(polite)
    assert procs.stop_all([deaf]) == ["not running"]


def test_clock_round_trip(tmp_path: Path) -> None:
    c = TraceClock(1000.0, 5000.0, 60.0)
    assert c.trace(1010.0) == 5600.0 and c.wall(5600.0) == 1010.0
    c.write(tmp_path / "clock.json")
    assert TraceClock.read(tmp_path / "clock.json") == c
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(GfsError, match="not a clock file"):
        TraceClock.read(tmp_path / "bad.json")
    assert np.isclose(TraceClock.calendar(1.0, 7.0).now(), 7.0, atol=1.0)


# ---- CLI -----------------------------------------------------------------------------------------


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as exc:          # argparse errors
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def _one_line(code: int, err: str, fragment: str) -> None:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2 and "Traceback" not in err and len(lines) == 1, err
    assert fragment in lines[0], lines[0]


def test_cli_errors_are_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    empty = tmp_path / "none"
    code, _o, err = _cli(capsys, "slurm", "replay", "slurm-demo", "--dir", str(empty), "--out",
                         str(tmp_path / "o"))
    _one_line(code, err, "no cluster recorded")
    code, _o, err = _cli(capsys, "slurm", "up", "--nodes", "0", "--dir", str(empty))
    _one_line(code, err, "--nodes")
    code, _o, err = _cli(capsys, "slurm", "controller", "--dir", str(empty), "--clock",
                         str(tmp_path / "c.json"))
    _one_line(code, err, "--clock needs --t0")
    code, _o, err = _cli(capsys, "slurm", "compare", "--dir", str(empty), "--policies", "fifo",
                         "--out", str(tmp_path / "o"))
    _one_line(code, err, "--policies")
    code, _o, err = _cli(capsys, "slurm", "replay", "x", "--out", "o", "--speedup", "0")
    assert code == 2 and "must be > 0" in err
    code, out, _e = _cli(capsys, "slurm", "status", "--dir", str(empty))
    assert code == 1 and "no cluster" in out


# ---- the controller against a fake Slurm ---------------------------------------------------------


class FakeSlurm:
    """Stands in for `SlurmClient`: serves canned `squeue --json` records, records actions."""

    def __init__(self, records: list[dict]) -> None:
        self.records = records
        self.calls: list[tuple] = []
        self.fail_signal = False
        self.ckpt_dir: Path | None = None      # a payload that checkpoints on the signal
        self.n_calls, self.call_s = 0, 0.0

    def jobs(self) -> list[dict]:
        self.n_calls += 1
        return list(self.records)

    def set_gpu_limit(self, qos: str, gpus: int | None) -> None:
        self.calls.append(("limit", qos, gpus))

    def signal(self, job_id: int, sig: str, timeout_s: float = 3.0) -> None:
        from gfs_opt.slurm.client import SlurmError

        self.calls.append(("signal", job_id, sig))
        if self.fail_signal:    # Slurm preempted it meanwhile: the job is pending again
            self.records = [r if r["job_id"] != job_id else
                            {**r, "job_state": "PENDING", "gres_detail": [],
                             "job_resources": None, "start_time": 0} for r in self.records]
            raise SlurmError("Job can not be altered now")
        if self.ckpt_dir is not None:
            (self.ckpt_dir / f"{job_id}.ckpt").write_text("1.0")

    def requeue(self, job_id: int, timeout_s: float = 10.0) -> None:
        self.calls.append(("requeue", job_id))

    def set_job_qos(self, job_id: int, qos: str) -> None:
        self.calls.append(("qos", job_id, qos))


def _controller(tmp: Path, records: list[dict], **kw: object):
    from gfs_opt.slurm.controller import Controller, ControllerConfig

    spec = ClusterSpec(dir=str(tmp), nodes=4, gpus=8, speedup=60.0, host="h")
    fake = FakeSlurm(records)
    kw.setdefault("ckpt_wait_s", 0.1)
    cfg = ControllerConfig(pool="P", speedup=60.0, t0=1000.0, forecaster="seasonal-naive",
                           log=tmp / "actions.jsonl", **kw)  # type: ignore[arg-type]
    ctl = Controller(spec, cfg, client=fake)  # type: ignore[arg-type]
    ctl.warm_up(1000.0)
    ctl.clock = TraceClock(time.time(), 1000.0, 60.0)
    ctl.log.clock = ctl.clock
    return ctl, fake


def _logged(tmp: Path, kind: str) -> list[dict]:
    return [a for a in map(json.loads, (tmp / "actions.jsonl").read_text().splitlines())
            if a["action"] == kind]


def test_controller_guards_and_logs_its_victims(tmp_path: Path) -> None:
    now = time.time()
    recs = [squeue_record(1, "spot-1h", start=now - 30, node="n1"),     # inside its window
            squeue_record(2, "spot-1h", start=now - 90, node="n2"),     # past it
            squeue_record(3, "hp", start=now, node="n3"), squeue_record(8, "hp", start=now,
                                                                         node="n4"),
            squeue_record(4, "hp", state="PENDING", reason="Resources", submit=now - 1)]
    (tmp_path / "hard").mkdir()
    ctl, fake = _controller(tmp_path / "hard", recs)
    ctl.poll()
    assert ("limit", "spot-1h", 32) in fake.calls                       # no history: Q = C
    assert fake.calls[-2:] == [("signal", 2, "USR1"), ("requeue", 2)]
    (req,) = _logged(tmp_path / "hard", "requeue")
    assert req["job"] == 2 and "past its 1 h window" in req["reason"] and req["for_hp"] == [4]
    ctl.poll()                                   # same limit: not set again
    assert sum(c[0] == "limit" for c in fake.calls) == 1

    assert not _logged(tmp_path / "hard", "warn")      # no folder to watch: the grace is waited

    # with the payloads' folder: requeue once the checkpoint is on disk, warn when it never comes
    for name, writes in (("ack", True), ("noack", False)):
        (tmp_path / name).mkdir()
        ctl, fake = _controller(tmp_path / name, recs, ckpt_dir=tmp_path / name, ckpt_wait_s=1.0)
        fake.ckpt_dir = tmp_path / name if writes else None
        t = time.time()
        ctl.poll()
        waited = time.time() - t
        assert fake.calls[-2:] == [("signal", 2, "USR1"), ("requeue", 2)]
        assert bool(_logged(tmp_path / name, "warn")) is not writes
        assert writes or waited >= 1.0

    (tmp_path / "dry").mkdir()
    ctl, fake = _controller(tmp_path / "dry", recs, dry_run=True)
    ctl.poll()
    assert fake.calls == []                                              # dry run: no action
    assert _logged(tmp_path / "dry", "requeue")[0]["dry_run"] is True
    assert _logged(tmp_path / "dry", "quota")[0]["dry_run"] is True

    (tmp_path / "young").mkdir()
    young = [r for r in recs if r["job_id"] != 2]
    young.append(squeue_record(9, "spot-1h", start=now - 20, node="n2"))   # n2 busy, in window
    ctl, fake = _controller(tmp_path / "young", young)
    ctl.poll()
    assert not [c for c in fake.calls if c[0] != "limit"]             # job 1 is protected
    (tmp_path / "soft").mkdir()
    ctl, fake = _controller(tmp_path / "soft", young, protect_windows=False)
    ctl.poll()
    assert fake.calls[-1] in (("requeue", 1), ("requeue", 9))
    assert "INSIDE" in _logged(tmp_path / "soft", "requeue")[0]["reason"]

    (tmp_path / "race").mkdir()
    ctl, fake = _controller(tmp_path / "race", recs)
    fake.fail_signal = True
    ctl.poll()
    assert ("requeue", 2) not in fake.calls
    assert "Slurm requeued the victim first" in _logged(tmp_path / "race", "skip")[0]["reason"]


def test_controller_signals_every_victim_before_requeueing_and_logs_its_lateness(
        tmp_path: Path) -> None:
    now = time.time()
    recs = [squeue_record(1, "spot-1h", start=now - 100, node="n1"),
            squeue_record(2, "spot-1h", start=now - 90, node="n2"),
            squeue_record(3, "hp", start=now, node="n3"), squeue_record(8, "hp", start=now, node="n4"),
            squeue_record(4, "hp", state="PENDING", reason="Resources", submit=now - 1, tasks=2)]
    ctl, fake = _controller(tmp_path, recs, net_after_s=None)
    ctl.poll()
    acts = [c for c in fake.calls if c[0] != "limit"]
    # both checkpoints requested first, then both requeues: one wait for the pair
    assert [c[0] for c in acts] == ["signal", "signal", "requeue", "requeue"]
    assert {c[1] for c in acts} == {1, 2}
    reqs = _logged(tmp_path, "requeue")
    # window 60 s (1 h at ×60): job 1 ended it 40 s ago, job 2 30 s ago
    late = {r["job"]: r["after_window_s"] for r in reqs}
    assert late[1] == pytest.approx(40, abs=2) and late[2] == pytest.approx(30, abs=2)


def test_controller_hands_a_stuck_hp_job_to_slurms_preemption(tmp_path: Path) -> None:
    """Slurm's preemption as a late safety net: an HP job still pending --net-after seconds after
    the controller first found it a placement moves to QOS hp-net, once. One that waits only on
    protected windows, a young one, a spot job, or --no-net: nothing moves."""
    now = time.time()
    recs = [squeue_record(1, "spot-1h", start=now - 10, node=n) for n in ("n1", "n2", "n3", "n4")]
    recs = [{**r, "job_id": i} for i, r in enumerate(recs, start=1)]        # all in their window
    recs += [squeue_record(5, "hp", state="PENDING", reason="Resources", submit=now - 12),
             squeue_record(6, "hp", state="PENDING", reason="Resources", submit=now - 2),
             squeue_record(7, "spot-1h", state="PENDING", reason="Resources", submit=now - 60)]
    (tmp_path / "protected").mkdir()
    ctl, fake = _controller(tmp_path / "protected", recs, net_after_s=0.3)
    ctl.poll()
    time.sleep(0.4)
    ctl.poll()
    # Slurm could not preempt a job inside its exempt time either; escalating would only let
    # Slurm's event-driven pass beat the controller's poll when a protected job ends
    assert not [c for c in fake.calls if c[0] in ("qos", "signal", "requeue")]
    assert not _logged(tmp_path / "protected", "escalate")
    # n4's job is past its window (60 s at ×60): job 5 has a placement; its requeue does not
    # free the GPUs here (the canned records stay), so job 5 stays pending and is escalated
    # once --net-after has passed since that placement
    recs[3] = {**recs[3], "start_time": int(now - 90)}
    (tmp_path / "net").mkdir()
    ctl, fake = _controller(tmp_path / "net", recs, net_after_s=0.3)
    ctl.poll()
    assert ("requeue", 4) in fake.calls and not [c for c in fake.calls if c[0] == "qos"]
    time.sleep(0.4)
    ctl.poll()
    ctl.poll()
    assert [c for c in fake.calls if c[0] == "qos"] == [("qos", 5, "hp-net")]
    (esc,) = _logged(tmp_path / "net", "escalate")
    assert esc["job"] == 5 and "hp-net" in esc["reason"] and "since it had a placement" in \
        esc["reason"]
    (tmp_path / "off").mkdir()
    ctl, fake = _controller(tmp_path / "off", recs, net_after_s=None)
    ctl.poll()
    time.sleep(0.4)
    ctl.poll()
    assert not [c for c in fake.calls if c[0] == "qos"]
    # an escalated job is HP for the controller too (usage, forecaster)
    assert LiveJob.from_json(squeue_record(9, "hp-net")).cls == "HP"


def test_controller_feeds_hourly_usage_and_refits_daily(tmp_path: Path) -> None:
    now = time.time()
    recs = [squeue_record(3, "hp", start=now, node="n3", account="org-a")]
    ctl, _fake = _controller(tmp_path, recs)
    # 30 trace seconds (0.5 s of wall time) before midnight: the first poll must see the HP job
    # before the hour ends even on a loaded machine, the second one after it
    ctl.clock = TraceClock(now, 86_400.0 - 30.0, 60.0)
    ctl.next_hour, ctl.next_day = 86_400.0, 86_400.0
    ctl.poll()
    time.sleep(max(0.0, ctl.clock.wall(86_400.0 + 3.0) - time.time()))   # just past midnight
    ctl.poll()
    hours = _logged(tmp_path, "observe_hour")
    assert hours and hours[0]["hour_end"] == 86_400.0 and hours[0]["usage"] == {"P|org-a": 8.0}
    assert [a["day"] for a in _logged(tmp_path, "refit") if "day" in a] == [86_400.0]


def test_exempt_margin_is_a_live_setting() -> None:
    a = ClusterSpec(dir="/x", speedup=60.0, host="h")
    b = ClusterSpec(dir="/x", speedup=60.0, exempt_margin_s=2.5, host="h")
    assert a.exempt(1.0) == 60 and b.exempt(1.0) == 63 and b.exempt(2.0) == 123
    assert a.same_cluster(b)
    with pytest.raises(GfsError, match="--exempt-margin"):
        ClusterSpec(exempt_margin_s=-1)


def test_simulator_models_do_not_stay_registered() -> None:
    from gfs_opt.policies import POLICIES
    from gfs_opt.slurm import bridge  # noqa: F401  (importing must not register anything)

    assert "gfs-slurm" not in POLICIES and "slurm-qos" not in POLICIES


def test_real_runs_are_found_in_either_layout(tmp_path: Path) -> None:
    from gfs_opt.slurm.compare import real_folder

    (tmp_path / "a" / "gfs").mkdir(parents=True)
    (tmp_path / "a" / "gfs" / "summary.json").write_text("{}")
    (tmp_path / "b" / "gfs" / "real").mkdir(parents=True)
    (tmp_path / "b" / "gfs" / "real" / "summary.json").write_text("{}")
    assert real_folder(tmp_path / "a", "gfs") == tmp_path / "a" / "gfs"
    assert real_folder(tmp_path / "b", "gfs") == tmp_path / "b" / "gfs" / "real"
    with pytest.raises(GfsError, match="slurm-qos"):
        real_folder(tmp_path / "a", "slurm-qos")


def test_controller_lifts_the_spot_limit_after_the_scored_window(tmp_path: Path) -> None:
    """As the simulator with the authors' drain (`Params.quota_after_window` off): the drain
    admits LP freely. By default the limit is kept (see the next test)."""
    now = time.time()
    recs = [squeue_record(3, "hp", start=now, node="n3")]
    ctl, fake = _controller(tmp_path, recs, eval_end=1000.0 + 600.0, quota_after_window=False)
    ctl.poll()                                       # inside the window: a number
    assert [c for c in fake.calls if c[0] == "limit"] == [("limit", "spot-1h", 32)]
    ctl.clock = TraceClock(now, 1000.0 + 900.0, 60.0)   # past the window's end
    ctl.next_refresh = 0.0
    ctl.poll()
    ctl.next_refresh = 0.0
    ctl.poll()                                       # lifted once, not set again
    assert [c for c in fake.calls if c[0] == "limit"] == [("limit", "spot-1h", 32),
                                                           ("limit", "spot-1h", None)]
    assert "quota lifted" in _logged(tmp_path, "quota")[-1]["reason"]
    from gfs_opt.slurm.replay import quota_log

    actions = [json.loads(line) for line in (tmp_path / "actions.jsonl").read_text().splitlines()]
    qlog = quota_log(actions, ctl.clock, "P")             # what the replay writes and checks
    assert list(qlog["limit"]) == [32.0, float("inf")]


def test_controller_keeps_the_spot_limit_after_the_scored_window_by_default(
        tmp_path: Path) -> None:
    now = time.time()
    recs = [squeue_record(3, "hp", start=now, node="n3")]
    ctl, fake = _controller(tmp_path, recs, eval_end=1000.0 + 600.0)
    ctl.poll()
    ctl.clock = TraceClock(now, 1000.0 + 900.0, 60.0)   # past the window's end
    ctl.next_refresh = 0.0
    ctl.poll()
    assert ("limit", "spot-1h", None) not in fake.calls


def test_a_stale_socket_file_is_not_a_ready_server(tmp_path: Path) -> None:
    """After a machine reset the old MariaDB/munge socket files remain: readiness means a
    server accepts connections, not that the file exists."""
    import socket

    from gfs_opt.slurm.cluster import _unix_socket_open

    path = tmp_path / "db.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen(1)
    assert _unix_socket_open(path)
    server.close()                      # the file stays, nobody listens: stale
    assert path.exists() and not _unix_socket_open(path)
    assert not _unix_socket_open(tmp_path / "missing.sock")


def test_brain_places_by_the_eviction_history_it_is_handed() -> None:
    """GFS-SPEC §2.3: ties between equally free nodes go by E(n) — HP to troubled nodes. The
    brain reads E(n) from the eviction counts the controller puts in the round, as the
    simulator's GFS does."""
    from gfs_opt.slurm.bridge import GfsBrain

    now = time.time()
    clock = TraceClock(now, 1000.0, 60.0)
    nodes = ["n1", "n2", "n3"]
    recs = [LiveJob.from_json(squeue_record(4, "hp", state="PENDING", reason="Resources",
                                            gpus=2, submit=now - 2))]
    view = build_round(recs, nodes, 8, "P", clock, Params(), {"P": PoolStatus()})
    brain = GfsBrain(Params(), "seasonal-naive", pd.Timestamp("2024-03-01"), view.rnd.state)
    calm = brain.victims(view.rnd)
    assert calm.placements[4][0][0] == 0                  # all alike: the first node
    c1h = np.array([0, 0, 2], dtype=np.int32)             # n3 lost LP work in the last hour
    fresh = build_round(recs, nodes, 8, "P", clock, Params(), {"P": PoolStatus()})  # per poll
    troubled = dataclasses.replace(fresh.rnd, node_evictions_1h=c1h, node_evictions_1d=c1h.copy())
    assert brain.victims(troubled).placements[4][0][0] == nodes.index("n3")
