"""A tiny trace folder in the Alibaba v2026 file format, shared by CLI and sweep tests."""

from __future__ import annotations

from pathlib import Path

import pandas as pd


def write_tiny_trace(folder: Path, n: int = 40) -> Path:
    """Two days of a 2-pool, 4-node cluster with HP preempting LP (Alibaba v2026 schema)."""
    folder.mkdir(parents=True, exist_ok=True)
    pd.DataFrame({
        "gpu_model": ["A10", "A10", "A100", "A100"], "gpu_capacity_num": [1, 1, 8, 8],
        "cpu_num": [64, 64, 128, 128], "node_name": ["a0", "a1", "b0", "b1"],
    }).to_csv(folder / "node_info_df.csv", index=False)
    rows = [("hp-res", 1, "A100", 8, 8.0, 1, 0, 30_000, "HP")]
    for i in range(n):
        t = 1000 + i * 4000
        rows.append((f"lp{i}", i % 3, "A100", 4, 2.0, 1 + i % 3, t, 2000 + 300 * (i % 7), "Spot"))
        rows.append((f"hp{i}", i % 2, "A100", 4, 4.0, 1 + i % 2, t + 1500, 900 + 100 * (i % 5), "HP"))
        rows.append((f"small{i}", 5, "A10", 1, 0.5, 1, t + 10, 1200, "Spot" if i % 2 else "HP"))
    pd.DataFrame(rows, columns=["job_name", "organization", "gpu_model", "cpu_request",
                                "gpu_request", "worker_num", "submit_time", "duration",
                                "job_type"]).to_csv(folder / "job_info_df.csv", index=False)
    return folder
