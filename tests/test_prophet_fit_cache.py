"""The Prophet fit cache (`gfs_opt.forecast.prophet_fit.FitCache`): a hit returns exactly what
Stan returned for the same inputs; a broken or disabled cache only costs time."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from test_forecast_models import T0, frame

import gfs_opt.forecast.prophet_fit as pf
from gfs_opt.forecast.prophet_model import ProphetForecaster


def test_cache_round_trip_corrupt_files_and_off(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    params = {"k": np.array([[0.5]]), "delta": np.arange(6.0).reshape(1, -1)}
    cache = pf.FitCache(tmp_path / "c")
    assert cache.get("ab12") is None
    cache.put("ab12", params)
    again = pf.FitCache(tmp_path / "c")                  # a new process: from disk
    got = again.get("ab12")
    assert got is not None and again.hits == 1
    for name, value in params.items():
        np.testing.assert_array_equal(got[name], value)
        assert got[name].dtype == value.dtype
    got["k"][0, 0] = 9.0                                  # callers may not change the cache
    np.testing.assert_array_equal(again.get("ab12")["k"], params["k"])
    (tmp_path / "c" / "ab" / "ab12.npz").write_bytes(b"not a zip")
    assert pf.FitCache(tmp_path / "c").get("ab12") is None     # unreadable: a miss, no error
    monkeypatch.setenv("GFS_FIT_CACHE", "off")
    assert pf.FitCache.from_env().folder is None
    monkeypatch.setenv("GFS_FIT_CACHE", str(tmp_path / "elsewhere"))
    assert pf.FitCache.from_env().folder == tmp_path / "elsewhere"


def test_a_fit_in_flight_is_computed_once(tmp_path: Path) -> None:
    """A second process (here: a thread with its own cache object and file handle) asking for a
    fit that another one is computing waits for it and gets its result."""
    params = {"k": np.array([[0.5]])}
    a, b = pf.FitCache(tmp_path / "c"), pf.FitCache(tmp_path / "c")
    order: list[tuple[str, bool]] = []

    def second() -> None:
        with b.computing("ab12") as done:
            order.append(("b", done is not None))

    with a.computing("ab12") as done:
        assert done is None
        t = threading.Thread(target=second)
        t.start()
        time.sleep(0.3)
        assert t.is_alive() and not order               # waiting on the lock
        a.put("ab12", params)
        order.append(("a", True))
    t.join(10)
    assert order == [("a", True), ("b", True)] and b.hits == 1
    assert not list((tmp_path / "c").rglob("*.lock"))    # lock files do not pile up
    with pf.FitCache(None).computing("ab12") as done:    # no folder: nothing to wait for
        assert done is None


def _fit_twice(hist: pd.DataFrame) -> tuple[ProphetForecaster, list[pd.DataFrame]]:
    day1 = hist[hist["ds"] < T0 + pd.Timedelta(days=9)]
    m = ProphetForecaster(calibration_days=1, solver="stan")   # the cache serves Stan fits
    m.fit(day1)
    first = m.predict(6)
    return m, [first, m.fit(hist).predict(6)]


def test_cached_fits_equal_fresh_fits(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hist, _ = frame(24 * 10, n_series=2, weekly=4.0)
    monkeypatch.setattr(pf, "fit_cache", lambda: cache)
    cache = pf.FitCache(None)                             # memory only, starts empty
    cold, cold_preds = _fit_twice(hist)
    assert cache.misses > 0 and cache.hits == 0
    misses = cache.misses
    warm, warm_preds = _fit_twice(hist)                   # same inputs: nothing refitted
    assert cache.misses == misses and cache.hits == misses
    for key in cold.states_:
        for name, value in cold.states_[key].model.params.items():
            np.testing.assert_array_equal(warm.states_[key].model.params[name], value)
    for a, b in zip(cold_preds, warm_preds, strict=True):
        pd.testing.assert_frame_equal(a, b)
    other, _ = frame(24 * 10, n_series=2, weekly=5.0)      # other data: misses, not hits
    _fit_twice(other)
    assert cache.misses > misses


def test_prophet_loads_without_pyplot_and_still_plots() -> None:
    """`import_prophet` defers prophet.plot (it imports matplotlib.pyplot, ≈ 0.7 s of CPU per
    replay); Prophet's plots and any name of prophet.plot still work, loading it on first use."""
    import subprocess
    import sys

    code = """
import sys
import numpy as np, pandas as pd
from gfs_opt.forecast.prophet_fit import import_prophet
Prophet = import_prophet()
assert "matplotlib.pyplot" not in sys.modules, "pyplot loaded with Prophet"
import matplotlib
matplotlib.use("Agg")
df = pd.DataFrame({"ds": pd.date_range("2024-01-01", periods=96, freq="h"),
                   "y": np.sin(np.arange(96) / 4.0)})
m = Prophet(daily_seasonality=True, weekly_seasonality=False, yearly_seasonality=False).fit(df)
fcst = m.predict(df)
assert type(m.plot(fcst)).__name__ == "Figure"
assert type(m.plot_components(fcst)).__name__ == "Figure"
from prophet.plot import add_changepoints_to_plot
assert callable(add_changepoints_to_plot) and "matplotlib.pyplot" in sys.modules
print("ok")
"""
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert res.returncode == 0 and res.stdout.strip().endswith("ok"), res.stderr[-2000:]
