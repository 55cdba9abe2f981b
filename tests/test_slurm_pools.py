"""A Slurm cluster of several pools (GPU types), without a live Slurm: config generation, the
replay plan split by pool, job options, outcomes per pool and one controller per pool."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pandas as pd
import pytest
from test_slurm_units import FakeSlurm, squeue_record
from tiny_trace import write_tiny_trace

from gfs_opt.cli import main
from gfs_opt.errors import GfsError
from gfs_opt.model import MILLI, Params
from gfs_opt.slurm.clock import TraceClock
from gfs_opt.slurm.layout import ClusterSpec, parse_pools, pool_tag, render_configs, spot_qos
from gfs_opt.slurm.live import LiveJob, guarantee_of
from gfs_opt.slurm.outcomes import JobOutcome, Run, quota_admissions, to_recorder
from gfs_opt.slurm.plan import build_plan
from gfs_opt.slurm.replay import sbatch_options

POOLS = (("A100-SXM4-80GB", 2), ("A10", 3))


def _spec(tmp: Path | str = "/tmp/p", **kw: object) -> ClusterSpec:
    return ClusterSpec(dir=str(tmp), nodes=5, gpus=8, host="h", pools=POOLS,
                       classes=(1.0, 0.5), **kw)  # type: ignore[arg-type]


def test_pool_names_and_errors() -> None:
    assert parse_pools("A100-SXM4-80GB:8, A10:8") == (("A100-SXM4-80GB", 8), ("A10", 8))
    assert pool_tag("A100-SXM4-80GB") == "a100" and pool_tag("H800") == "h800"
    assert spot_qos(1.0, "A10") == "spot-1h-a10" and spot_qos(1.0) == "spot-1h"
    assert guarantee_of("spot-0.5h-a100") == 0.5 and guarantee_of("spot-1h") == 1.0
    for bad in ("A100", "A100:x", ":3", "A100:8,,A10:2"):
        with pytest.raises(GfsError, match="NAME:NODES"):
            parse_pools(bad)
    with pytest.raises(GfsError, match="share the Slurm name"):
        ClusterSpec(nodes=4, pools=(("A100-40GB", 2), ("A100-80GB", 2)))
    with pytest.raises(GfsError, match="--nodes is 4"):
        ClusterSpec(nodes=4, pools=(("A100", 2), ("A10", 3)))
    with pytest.raises(GfsError, match="start with a letter"):
        ClusterSpec(nodes=2, pools=(("8x", 2),))
    with pytest.raises(GfsError, match="has pools"):
        _spec().nodes_of("H800")


def test_pooled_configs_type_the_gres_and_give_each_pool_a_partition() -> None:
    spec = _spec()
    files = render_configs(spec, "pw")
    conf, gres = files["etc/slurm.conf"], files["etc/gres.conf"]
    assert conf.count("Gres=gpu:a100:8") == 2 and conf.count("Gres=gpu:a10:8") == 3
    assert "PartitionName=a100 Nodes=n[1-2] Default=YES" in conf
    assert "PartitionName=a10 Nodes=n[3-5] Default=NO" in conf
    assert "PartitionName=gpu" not in conf
    assert "NodeName=n[1-2] Name=gpu Type=a100 File=/tmp/p/dev/gpu[0-7]" in gres
    assert "NodeName=n[3-5] Name=gpu Type=a10 File=/tmp/p/dev/gpu[0-7]" in gres
    assert spec.spot_qos == ["spot-1h-a100", "spot-0.5h-a100", "spot-1h-a10", "spot-0.5h-a10"]
    assert spec.spot_classes()[1] == (0.5, "spot-0.5h-a100")
    assert spec.nodes_of("A10") == ["n3", "n4", "n5"] and spec.partition("A10") == "a10"
    # the record round-trips; the single-pool cluster keeps its names
    assert ClusterSpec.from_json(spec.to_json()) == spec
    one = ClusterSpec(dir="/tmp/p", nodes=2, host="h")
    single = render_configs(one, "pw")
    assert "PartitionName=gpu Nodes=n[1-2] Default=YES" in single["etc/slurm.conf"]
    assert "Gres=gpu:8 " in single["etc/slurm.conf"]
    assert "NodeName=n[1-2] Name=gpu File=" in single["etc/gres.conf"]
    assert one.spot_qos == ["spot-1h"] and one.nodes_of(None) == ["n1", "n2"]


def test_plan_keeps_every_pool_on_its_own_nodes(tmp_path: Path) -> None:
    folder = write_tiny_trace(tmp_path / "tiny")
    pools = (("A100", 2), ("A10", 1))
    plan = build_plan(str(folder), (0, 172_800), 3, 8, pools=pools)
    assert plan.pools == ("A100", "A10") and plan.pool_nodes == pools
    assert list(plan.trace.nodes["node_name"]) == ["n1", "n2", "n3"]
    assert list(plan.trace.nodes["pool"]) == ["A100", "A100", "A10"]
    assert set(plan.jobs["pool"]) == {"A100", "A10"}
    assert (plan.jobs.loc[plan.jobs["pool"] == "A10", "g"] == MILLI).all()   # rounded up
    assert {s.split("|")[0] for s in plan.history["series"]} <= {"A100", "A10"}
    alone = build_plan(str(folder), (0, 172_800), 2, 8, pool="A100")
    assert len(plan.jobs[plan.jobs["pool"] == "A100"]) == len(alone.jobs)
    assert "A10 (1 nodes" in plan.describe()
    with pytest.raises(GfsError, match="the trace has pools"):
        build_plan(str(folder), (0, 172_800), 3, 8, pools=(("H800", 2), ("A10", 1)))
    with pytest.raises(GfsError, match="--pool picks one pool"):
        build_plan(str(folder), (0, 172_800), 3, 8, pool="A10", pools=pools)

    # each job goes to its pool's partition and spot QOS; HP QOS are shared
    spec = ClusterSpec(dir=str(tmp_path), nodes=3, gpus=8, host="h", pools=pools)
    seen = set()
    for _, job in plan.jobs.iterrows():
        opts = sbatch_options(job, plan, 60.0, Params(), tmp_path)
        part = next(o for o in opts if o.startswith("--partition="))
        qos = next(o for o in opts if o.startswith("--qos="))
        tag = pool_tag(job["pool"])
        assert part == f"--partition={tag}"
        assert qos == ("--qos=hp" if job["cls"] == "HP" else f"--qos=spot-1h-{tag}")
        assert part.split("=")[1] == spec.partition(job["pool"])
        seen.add((tag, job["cls"]))
    assert seen == {("a100", "HP"), ("a100", "LP"), ("a10", "HP"), ("a10", "LP")}


def test_outcomes_count_windows_and_usage_per_pool(tmp_path: Path) -> None:
    folder = write_tiny_trace(tmp_path / "tiny")
    plan = build_plan(str(folder), (0, 172_800), 3, 8, pools=(("A100", 2), ("A10", 1)))
    jobs = plan.jobs
    lp_a100 = int(jobs[(jobs["pool"] == "A100") & (jobs["cls"] == "LP")]["job_id"].iloc[0])
    lp_a10 = int(jobs[(jobs["pool"] == "A10") & (jobs["cls"] == "LP")]["job_id"].iloc[0])
    w = 5_000.0
    clock = TraceClock(w, plan.t0, 60.0)
    outcomes = [JobOutcome(int(t), None) for t in jobs["job_id"]]
    for o in outcomes:
        if o.trace_id == lp_a100:
            o.slurm_id, o.status = 1, "done"
            o.runs = [Run(w + 20.0, w + 80.0, "done")]
        if o.trace_id == lp_a10:
            o.slurm_id, o.status = 2, "done"
            o.runs = [Run(w + 20.0, w + 150.0, "evicted", "controller", w + 80.0),
                      Run(w + 160.0, w + 170.0, "done")]
    real = to_recorder(plan, outcomes, clock, cutoff=w + 400, params=Params())
    by = real.jobs.set_index("job_id")
    assert by.loc[lp_a100, "pool"] == "A100" and by.loc[lp_a10, "pool"] == "A10"
    pools = real.recorder.state.pools
    a100 = jobs.set_index("job_id").loc[lp_a100]
    # samples every 60 s from t0 = 0: the A100 job runs 1,200–4,800 s, the A10 one from its
    # submission (5,010 s) to 9,000 s — each counted in its own pool only
    early, late = real.recorder.sample_used[40], real.recorder.sample_used[100]
    assert early.shape == (2,)
    assert list(early) == [int(a100["g"]) * int(a100["workers"]) if p == "A100" else 0
                           for p in pools]
    assert list(late) == [MILLI if p == "A10" else 0 for p in pools]
    # the A10 job's eviction fails a window of pool A10, not of A100
    assert real.recorder.windows[("A10", False)] == 1
    assert real.recorder.windows[("A100", False)] == 0
    # a quota is judged against the QOS of the job's own pool
    qlog = pd.DataFrame({"t_wall": [w], "qos": ["spot-1h-a10"], "limit": [0.0]})
    q = quota_admissions(plan, outcomes, qlog)
    assert q["spot_starts_over_limit"] == 2      # both runs of the A10 job; A100 has no limit


def test_one_controller_per_pool_sees_only_its_partition(tmp_path: Path) -> None:
    from gfs_opt.slurm.controller import Controller, ControllerConfig

    now = time.time()
    spec = _spec(tmp_path, speedup=60.0)
    recs = [dict(squeue_record(1, "spot-1h-a10", start=now - 90, node="n3"), partition="a10"),
            dict(squeue_record(2, "hp", state="PENDING", reason="Resources", submit=now - 1),
                 partition="a100"),
            dict(squeue_record(3, "spot-1h-a100", start=now - 90, node="n1"), partition="a100"),
            dict(squeue_record(4, "hp", start=now, node="n2"), partition="a100")]
    assert LiveJob.from_json(recs[0]).partition == "a10"
    calls = {}
    for pool in ("A100-SXM4-80GB", "A10"):
        fake = FakeSlurm(recs)
        log = tmp_path / f"{pool}.jsonl"
        cfg = ControllerConfig(pool=pool, speedup=60.0, t0=1000.0, forecaster="seasonal-naive",
                               log=log, ckpt_wait_s=0.1)
        ctl = Controller(spec, cfg, client=fake)  # type: ignore[arg-type]
        ctl.warm_up(1000.0)
        ctl.clock = TraceClock(time.time(), 1000.0, 60.0)
        ctl.poll()
        calls[pool] = fake.calls
        assert ctl.nodes == spec.nodes_of(pool)
    # the A100 controller limits its own QOS (2 nodes: Q = 16 GPUs) and evicts job 3 for HP 2
    assert ("limit", "spot-1h-a100", 16) in calls["A100-SXM4-80GB"]
    assert ("requeue", 3) in calls["A100-SXM4-80GB"]
    assert not any(c[1] in ("spot-1h-a10", 1) for c in calls["A100-SXM4-80GB"])
    # the A10 controller never touches the A100 pool: no HP job waits in partition a10
    assert ("limit", "spot-1h-a10", 24) in calls["A10"]
    assert not [c for c in calls["A10"] if c[0] != "limit"]
    assert all("a100" not in str(c[1]) for c in calls["A10"])
    with pytest.raises(GfsError, match="has pools"):
        Controller(spec, ControllerConfig(pool="gpu"), client=FakeSlurm([]))  # type: ignore[arg-type]


def test_up_rejects_a_bad_pool_spec_in_one_line(capsys: pytest.CaptureFixture[str],
                                                tmp_path: Path) -> None:
    for argv, msg in ((["--pools", "A100"], "NAME:NODES"),
                      (["--pools", "A100:2,A10:2", "--nodes", "3"], "--nodes is 3")):
        code = main(["slurm", "up", "--dir", str(tmp_path / "none"), "--no-install", *argv])
        err = capsys.readouterr().err.strip()
        assert code != 0 and msg in err and len(err.splitlines()) == 1, err
    assert json.loads(_spec().to_json())["pools"] == [["A100-SXM4-80GB", 2], ["A10", 3]]
