"""gfs_opt: preemption-aware GPU-cluster scheduling with predictive spot quotas (GFS)."""

from gfs_opt.model import (
    MILLI,
    ClusterState,
    Decision,
    Job,
    JobClass,
    Params,
    PoolForecast,
    PoolStatus,
    Round,
    RunningJob,
    SolveReport,
)

__version__ = "0.1.0"

__all__ = [
    "MILLI",
    "ClusterState",
    "Decision",
    "Job",
    "JobClass",
    "Params",
    "PoolForecast",
    "PoolStatus",
    "Round",
    "RunningJob",
    "SolveReport",
    "__version__",
]
