"""Stand-in traces in the formats of the optional traces, for tests that must run without the data
folder ($GFS_DATA_DIR): small, deterministic, written by this module, and read by the same loaders
as the real files."""

from __future__ import annotations

from pathlib import Path

import pytest

from gfs_opt.fetch import fetch_hint
from gfs_opt.paths import ref_toy_dir

#: the real ``ref-toy`` folder lives in the data folder, never in the repository
HAVE_REF_TOY = (ref_toy_dir() / "job_info_df.csv").is_file()
needs_ref_toy = pytest.mark.skipif(not HAVE_REF_TOY, reason="the ref-toy trace " + fetch_hint("ref-toy"))
#: a small contended setup for tests that only need one: ``ref-toy`` (≈ 1 s a run) when the data
#: folder has it, else the built-in ``small`` (slower, same code paths)
TOY_SETUP = "ref-toy" if HAVE_REF_TOY else "small"

ALIBABA_JOB_HEAD = ("job_name,organization,gpu_model,cpu_request,gpu_request,worker_num,"
                    "submit_time,duration,job_type\n")
#: pools that the shipped real node file also has, so the job file loads against either node file
STANDIN_POOLS = ("A10", "A100-SXM4-80GB")
STANDIN_NODES = ("gpu_model,gpu_capacity_num,cpu_num,node_name\n"
                 + "".join(f"A10,1,128,{i}\n" for i in range(4))
                 + "".join(f"A100-SXM4-80GB,8,128,{4 + i}\n" for i in range(4)))


def alibaba_standin_jobs(n_hp: int = 280, n_lp: int = 120) -> str:
    """A job file in the Alibaba v2026 schema shaped like ``ref-toy``: HP jobs over 14 days from
    the origin (2024-03-01), LP ("Spot") jobs only on days 10–11 (2024-03-11..12)."""
    rows = []
    hp_gap, lp_gap = 13 * 86_400 // n_hp, (2 * 86_400 - 7_200) // n_lp
    for i in range(n_hp):
        pool = STANDIN_POOLS[i % 5 == 0]
        gpus = 1 if pool == "A10" else (1, 2, 4, 8)[i % 4]
        rows.append(f"{i},{i % 3},{pool},4,{gpus}.0,1,{100 + i * hp_gap},{1200 + 97 * (i % 40)},HP\n")
    for k in range(n_lp):
        pool = STANDIN_POOLS[k % 4 != 0]
        gpus = 1 if pool == "A10" else (1, 2, 4, 8)[k % 4]
        submit = 10 * 86_400 + 60 + k * lp_gap
        rows.append(f"{n_hp + k},{3 + k % 2},{pool},4,{gpus}.0,1,{submit},{900 + 131 * (k % 30)},"
                    f"Spot\n")
    return ALIBABA_JOB_HEAD + "".join(rows)


def write_alibaba_standin(folder: Path) -> Path:
    """A folder with node_info_df.csv + job_info_df.csv (8 nodes, 36 GPUs) like ``ref-toy``."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "node_info_df.csv").write_text(STANDIN_NODES)
    (folder / "job_info_df.csv").write_text(alibaba_standin_jobs())
    return folder


def write_chronus_standin(path: Path, n: int = 120) -> Path:
    """A Chronus-format trace (`trace_job_*.csv` columns): strict and best-effort jobs over ~5 h."""
    head = ("job_id,user,num_gpu,submit_time,iterations,model_name,duration,interval,"
            "expect_time_list,expect_value_list,best_effort,job_type\n")
    rows = [f"{i},vc{i % 4},{(1, 2, 4, 8)[i % 4]},{150 * i},1,m,{600 + 40 * (i % 9)},1,1,1,"
            f"{int(i % 3 == 0)},{'best' if i % 3 == 0 else 'strict'}\n" for i in range(n)]
    path.write_text(head + "".join(rows))
    return path
