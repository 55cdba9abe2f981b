"""The simulator's opt-in Slurm scheduling model (`gfs_opt.sim.slurm_model`): head-of-line stop,
backfill honouring reservations by time limit, start latency, requeue delay, GrpTRES delay."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from gfs_opt.errors import GfsError
from gfs_opt.model import MILLI, Decision, Job, JobClass, Params
from gfs_opt.sim.engine import SimConfig, Simulator
from gfs_opt.sim.slurm_model import Reservation, SlurmModel, earliest_fit, fit_counts
from gfs_opt.slurm.bridge import SlurmGFSPolicy, SlurmQOSPolicy
from gfs_opt.traces.base import ALIBABA_ORIGIN, Trace

H = 3600.0


def _trace(rows: list[tuple[int, str, int, float, float]], nodes: int = 1) -> Trace:
    """rows: (id, cls, GPUs, submit, duration) on ``nodes`` × 8 GPUs."""
    jobs = pd.DataFrame([(i, "org-a", c, g * MILLI, 1, s, d) for i, c, g, s, d in rows],
                        columns=["job_id", "org", "cls", "g", "workers", "submit", "duration"])
    jobs = jobs.assign(name=jobs["job_id"].astype(str), pool="A100", cpu=1.0, guarantee_h=1.0,
                       resident=False)
    frame = pd.DataFrame({"node_name": [f"n{i}" for i in range(nodes)], "pool": "A100",
                          "gpus": 8, "cpus": 16.0})
    return Trace(frame, jobs, ALIBABA_ORIGIN, "t")


def _run(trace: Trace, model: SlurmModel | None, policy: object = None) -> pd.DataFrame:
    cfg = SimConfig(eval_start=0.0, eval_end=100 * H, drain_s=0.0, check_invariants=True,
                    slurm=model)
    sim = Simulator(trace, policy or SlurmQOSPolicy(), Params(), cfg)  # type: ignore[arg-type]
    return sim.run().recorder.jobs.set_index("job_id")


NO_LATENCY = SlurmModel(start_latency_wall_s=0.0, requeue_delay_wall_s=0.0, quota_delay_wall_s=0.0)


def test_head_of_line_stop_and_backfill_by_time_limit() -> None:
    # A holds 4 GPUs for 10 h; B needs the whole node and blocks the main loop; C (1 h) ends
    # before B's reservation (A's time limit) and is backfilled; D (20 h) would delay B: waits
    tr = _trace([(0, "LP", 4, 0, 10 * H), (1, "LP", 8, 10, H), (2, "LP", 2, 20, H),
                 (3, "LP", 2, 30, 20 * H)])
    slurm = _run(tr, NO_LATENCY)
    assert slurm.loc[2, "first_start"] == 20                   # backfilled at once
    assert slurm.loc[3, "first_start"] >= slurm.loc[1, "first_start"]   # did not jump B
    assert slurm.loc[1, "first_start"] == pytest.approx(10 * H)  # B when A ends
    plain = _run(tr, None)                                     # the default: D starts at once
    assert plain.loc[3, "first_start"] == 30
    # without backfill, C too waits behind B (the head-of-line stop alone)
    hol = _run(tr, SlurmModel(0.0, 0.0, 0.0, backfill=False))
    assert hol.loc[2, "first_start"] >= hol.loc[1, "first_start"]
    # without the stop, anything that fits starts (C and D at once)
    free = _run(tr, SlurmModel(0.0, 0.0, 0.0, hol_stop=False, backfill=False))
    assert free.loc[2, "first_start"] == 20 and free.loc[3, "first_start"] == 30


def test_start_latency_and_requeue_delay_scale_with_the_speedup() -> None:
    # a spot job past its exempt hour is preempted by an HP job; it may run again only after
    # the requeue delay; every first start comes start_latency after the submission
    tr = _trace([(0, "LP", 8, 0, 5 * H), (1, "HP", 8, 2 * H, 600)])
    m = SlurmModel(start_latency_wall_s=1.5, requeue_delay_wall_s=12.0, quota_delay_wall_s=0.0,
                   speedup=60.0)
    assert (m.start_latency_s, m.requeue_delay_s) == (90.0, 720.0)
    jobs = _run(tr, m)
    assert jobs.loc[0, "first_start"] == 90.0 and jobs.loc[1, "first_start"] == 2 * H + 90.0
    assert jobs.loc[0, "evictions"] == 1
    # the victim waits out both the HP job (10 min) and its requeue delay (12 min)
    evicted_at = 2 * H + 90.0
    restart = jobs.loc[0, "end"] - (5 * H - (evicted_at - 90.0)) - Params().restart_small_s
    assert restart == pytest.approx(evicted_at + 720.0, abs=1.0)
    assert jobs.loc[0, "jqt"] == pytest.approx(90.0 + 720.0, abs=1.0)


class _QuotaPolicy(SlurmGFSPolicy):
    """GFS on Slurm with a scripted quota: 0 GPUs, then 8 from the second refresh on."""

    def __init__(self) -> None:
        super().__init__(forecaster="seasonal-naive")
        self.calls = 0

    def decide(self, rnd):  # type: ignore[no-untyped-def]
        d = super().decide(rnd)
        if rnd.quota_due:
            self.calls += 1
            q = 0 if self.calls == 1 else 8 * MILLI
            d = Decision(placements=d.placements, victims=d.victims,
                         quotas={("A100", 1.0): q}, eta=d.eta, forecasts=d.forecasts)
        return d


def test_a_new_grptres_lands_after_the_quota_delay() -> None:
    tr = _trace([(0, "LP", 2, 10, H)])
    for delay in (0.0, 2.5):
        m = SlurmModel(start_latency_wall_s=0.0, requeue_delay_wall_s=0.0,
                       quota_delay_wall_s=delay, speedup=60.0)
        jobs = _run(tr, m, _QuotaPolicy())
        # quota 0 from t=0 (the first one is in force at once), 8 GPUs at the 300 s refresh
        assert jobs.loc[0, "first_start"] == pytest.approx(300.0 + 60.0 * delay)


def test_reservations_and_fits() -> None:
    assert fit_counts({0: 3, 1: 8, 2: 5}, 2, 2) == {2: 2}     # one node, the tightest that holds it
    assert fit_counts({0: 3, 1: 1}, 2, 2) is None
    # no single node: as few nodes as possible, roomiest first
    assert fit_counts({0: 2, 1: 6, 2: 4, 3: 2}, 2, 5) == {1: 3, 2: 2}
    # 2 GPUs free; 6 come back at t=100; a reservation holds 8 from t=100 to 200
    res = [Reservation(100.0, 200.0, {0: 8})]
    assert earliest_fit(0.0, {0: 2}, [(100.0, 0, 6)], res, 2, 1, 50.0) == (0.0, {0: 1})
    assert earliest_fit(0.0, {0: 2}, [(100.0, 0, 6)], res, 2, 1, 150.0) == (200.0, {0: 1})
    assert earliest_fit(0.0, {0: 2}, [], [], 4, 1, 10.0) is None


def test_model_checks_its_parameters_and_time_limit() -> None:
    with pytest.raises(GfsError):
        SlurmModel(start_latency_wall_s=-1.0)
    with pytest.raises(GfsError):
        SlurmModel(speedup=0.0)
    job = Job(1, "o", "A100", JobClass.LP, 8 * MILLI, 1, 0.0, 3000.0)
    m = SlurmModel(speedup=60.0)
    # sbatch --time of the replay: ⌈(1.2·50 s + 40/60 s + 60 s) / 60 s⌉ = 3 min wall = 3 h trace
    assert m.time_limit(job, Params()) == 3 * 3600.0
    assert math.isclose(m.quota_delay_s, 60.0 * m.quota_delay_wall_s)


def test_simulate_cli_opts_in(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    import json

    from tiny_trace import write_tiny_trace

    from gfs_opt.cli import main

    folder = write_tiny_trace(tmp_path / "t", n=12)
    out = {}
    for sched in ("default", "slurm"):
        # the paper's PTS: GFS's own HP gangs may wait for LP window boundaries, which would
        # blur the start latency this test reads
        assert main(["simulate", "--trace", str(folder), "--policy", "gfs-no-wait", "--forecaster",
                     "seasonal-naive", "--scheduler", sched, "--slurm-speedup", "60",
                     "--no-progress", "--json"]) == 0
        out[sched] = json.loads(capsys.readouterr().out)
    assert "scheduler" not in out["default"]          # the default run's summary is unchanged
    assert out["slurm"]["scheduler"]["name"] == "slurm"
    assert out["slurm"]["scheduler"]["speedup"] == 60.0
    # every HP job waits at least the start latency (0.75 s × 60) under the model
    assert out["slurm"]["hp_jqt_mean"] >= 0.75 * 60 - 1e-6 > out["default"]["hp_jqt_mean"]
