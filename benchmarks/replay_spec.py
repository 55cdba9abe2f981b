"""One replay of the η and backlog studies by name: the Chronus MIX1 trace of $GFS_DATA_DIR with time
×24 (``chronus``) or a built-in setup, under a policy with the ETS forecaster."""

from __future__ import annotations

import argparse

from gfs_opt.experiments.runner import RunSpec
from gfs_opt.paths import data_dir
from gfs_opt.policies import options_for

CHRONUS = "chronus-philly-slo/trace_job_Philly_MIX1.csv"


def replay_spec(where: str, policy: str, load: float, seed: int,
                options: dict | None = None) -> RunSpec:
    """The `RunSpec` of ``policy`` (ETS, and ``options``) on ``where`` at LP load ``load`` and
    trace seed ``seed``."""
    opts = options_for(policy, {"forecaster": "ets", **(options or {})})
    if where == "chronus":
        return RunSpec(trace=str(data_dir() / CHRONUS), policy=policy, policy_options=opts,
                       lp_load=load, seed=seed, time_scale=24.0)
    return RunSpec.from_setup(where, policy=policy, policy_options=opts, lp_load=load,
                              seed=seed)


def case_parser(doc: str) -> argparse.ArgumentParser:
    """A script's parser with the case arguments every study takes: WHERE (``chronus`` or a
    setup), LP_LOAD and SEED; ``doc``'s first line is its description."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("where")
    ap.add_argument("load", type=float)
    ap.add_argument("seed", type=int)
    return ap
