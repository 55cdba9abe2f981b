"""The provider's hourly path on arrays (issue 13) gives the same bits as the frame path.

`ForecastProvider.fast = False` keeps the original route (history frame → ``update``, prediction
frame → ``pool_forecasts``), so each test drives two providers through the same calls and
compares every forecast byte for byte. The incremental calibration rows are checked against a
recomputation from scratch, and `HourlyMaxSeries.recent` against the history frame it replaces.
Prophet fits cost ~0.2–0.5 s each: the Prophet cases fit two short series a few times.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gfs_opt.forecast import make_forecaster
from gfs_opt.forecast.base import (
    MIN_ERRORS,
    BaseForecaster,
    SeriesData,
    cold_start_std,
    split_series,
)
from gfs_opt.forecast.calibration import lead_spreads
from gfs_opt.forecast.provider import ForecastProvider
from gfs_opt.forecast.series import HOUR_S, HourlyMaxSeries

T0 = pd.Timestamp("2024-03-01")


def usage_at(hour: int, rng: np.random.Generator) -> dict[tuple[str, str], float]:
    """Two tenants with a daily wave; a third appears on day 4; some values exactly 0."""
    wave = 8 * np.sin(2 * np.pi * hour / 24)
    out = {("A", "a"): max(0.0, 30 + wave + rng.normal(0, 3)),
           ("B", "b"): float(rng.integers(0, 3)) * (hour % 5 != 0)}
    if hour >= 24 * 4:
        out[("A", "new")] = float(rng.integers(0, 6))
    return out


def drive(provider: ForecastProvider, hours: int, skip: set[int],
          on_hour: Callable[[ForecastProvider, int], None] | None = None,
          usage: Callable[[int, np.random.Generator], dict[tuple[str, str], float]] = usage_at,
          ) -> list[bytes]:
    """The simulator's calls (observe hourly, refit at midnight, refresh every 20 minutes)
    with the hours in ``skip`` never observed; every forecast's bytes, in call order."""
    rng = np.random.default_rng(7)
    out: list[bytes] = []
    for hour in range(1, hours):
        use = usage(hour - 1, rng)
        if hour - 1 not in skip:
            provider.observe((hour - 1) * HOUR_S + 10.0, use)
        if hour % 24 == 0:
            provider.refit(hour * HOUR_S)
        for minute in (0, 20, 40):
            fcs = provider.pool_forecasts(hour * HOUR_S + minute * 60.0)
            out.append(repr(sorted(fcs)).encode())
            out += [f.mean.tobytes() + f.std.tobytes() for _, f in sorted(fcs.items())]
        if on_hour is not None:
            on_hour(provider, hour)
    return out


@pytest.mark.parametrize(("model", "aggregation", "rho"), [
    ("ets", "independent", 0.9), ("ets", "sum-quantiles", 0.8),
    ("seasonal-naive", "independent", 0.9), ("week-peak", "sum-quantiles", 0.9),
    ("prophet", "sum-quantiles", 0.9)])
def test_array_path_equals_the_frame_path(model: str, aggregation: str, rho: float) -> None:
    days = 6 if model == "prophet" else 8
    skip = {24 * 5 + 3, 24 * 5 + 4, 24 * 5 + 5}     # a gap: the forecast reaches over it
    runs = []
    for fast in (True, False):
        kw = {"model": make_forecaster(model, window_h=24 * 3, min_fit_hours=24, quantiles=(rho,))
              if model == "prophet" else model}
        p = ForecastProvider(**kw, aggregation=aggregation, rho=rho)  # type: ignore[arg-type]
        p.fast = fast
        runs.append(drive(p, 24 * days, skip))
        assert p.update_log, "the hourly path never ran"
    assert len(runs[0]) == len(runs[1]) > 100
    assert runs[0] == runs[1]


def reference_calibration_errors(model: BaseForecaster, key: str, horizon: int) -> np.ndarray:
    """calibration_errors from scratch (its definition, no cached rows)."""
    data = model.series_[key]
    end = data.end_hour
    lo = max(end - model._calibration_hours(), data.start_hour)
    current = model._errors(key, model.states_[key], data, np.arange(lo, end), horizon)
    stored = model.oos_errors_.get(key)
    if stored is None:
        return current
    keep = (stored[0] >= lo) & (stored[0] < end)
    if not keep.any():
        return current
    rows = stored[1][keep][:, :horizon]
    if rows.shape[1] < horizon:
        rows = np.hstack([rows, np.full((len(rows), horizon - rows.shape[1]), np.nan)])
    covered = np.zeros(len(current), dtype=bool)
    covered[stored[0][keep] - lo] = True
    return np.vstack([current[~covered], rows])


@pytest.mark.parametrize("model", ["ets", "prophet"])
def test_incremental_calibration_rows_equal_a_recomputation(model: str) -> None:
    checked = {"n": 0}

    def check(provider: ForecastProvider, hour: int) -> None:
        m = provider.model
        if not isinstance(m, BaseForecaster) or not m.is_fitted:
            return
        # the provider's horizon every hour; now and then another one (cache rebuilt, reused)
        for horizon in ((4, 6, 4, 60) if hour % 17 == 0 else (4,)):
            for key in m.series_:
                got = m.calibration_errors(key, horizon)
                want = reference_calibration_errors(m, key, horizon)
                assert got.shape == want.shape and got.tobytes() == want.tobytes(), (key, hour)
                checked["n"] += 1

    inner = (make_forecaster("prophet", window_h=24 * 3, min_fit_hours=24, calibration_window_h=40)
             if model == "prophet" else make_forecaster("ets", calibration_window_h=40))
    drive(ForecastProvider(inner), 24 * (5 if model == "prophet" else 7), {24 * 4 + 2}, check)
    assert checked["n"] > 200
    assert any(len(v[0]) for v in inner.oos_errors_.values()), "no stored rows were exercised"


def test_prophet_fast_errors_equal_the_element_wise_rule() -> None:
    """Consecutive origins take the sliding-window route; any other order the element-wise
    one: the same numbers, and the same extension of Prophet's evaluated mean."""
    hist = pd.concat([pd.DataFrame({"ds": T0 + pd.to_timedelta(np.arange(24 * 4), unit="h"),
                                    "series": s, "y": 20 + 5 * np.sin(np.arange(24 * 4) / 3.0)
                                    + np.arange(24 * 4) % 7 * k})
                      for k, s in enumerate(("P|a", "P|b"))], ignore_index=True)
    m = make_forecaster("prophet", window_h=24 * 3, min_fit_hours=24).fit(hist)
    for key, data in m.series_.items():
        state = m.states_[key]
        origins = np.arange(data.end_hour - 30, data.end_hour + 1)
        fast = m._errors(key, state, data, origins, 48)      # extends past the evaluated mean
        slow = m._errors(key, state, data, origins[::-1], 48)[::-1]
        assert fast.tobytes() == slow.tobytes()
        path = m._residual_path(state, data, data.end_hour, 5)
        target = data.end_hour + np.arange(1, 6)
        r = float(data.values_at(np.array([data.end_hour]))[0]
                  - m._yhat_at(state, np.array([data.end_hour]))[0])
        want = m._yhat_at(state, target) + state.phi ** np.arange(1, 6) * r
        assert path.tobytes() == want.tobytes()


def test_recent_equals_the_history_frame() -> None:
    rng = np.random.default_rng(3)
    s = HourlyMaxSeries(T0)
    names = ["x|1", "a|2", "m|3", "b|4"]
    for hour in range(60):
        if hour in (20, 21, 35):
            continue                                   # hours without samples stay 0
        for minute in (0, 30):
            live = names[: 1 + min(3, hour // 12)]     # tenants appear over time
            s.observe(hour * HOUR_S + minute * 60,
                      {n: float(rng.integers(0, 9)) for n in live if rng.random() < 0.8})
        for since, until in ((0, hour), (hour - 3, hour), (hour - 1, hour + 1), (hour, hour)):
            frame = s.history(since=since * HOUR_S, until=until * HOUR_S)
            want = [(d.key, d.start_hour, d.y.tobytes()) for d in split_series(frame)] \
                if not frame.empty else []
            base = int(np.datetime64(T0, "h").astype(np.int64))
            got = [(n, base + first, y.tobytes()) for n, first, y in s.recent(since, until)]
            assert got == want, (hour, since, until)


def test_update_series_equals_update() -> None:
    hist = pd.concat([pd.DataFrame({"ds": T0 + pd.to_timedelta(np.arange(24 * 5), unit="h"),
                                    "series": s, "y": (np.arange(24 * 5) * (k + 3)) % 11 * 1.0})
                      for k, s in enumerate(("P|b", "P|a"))], ignore_index=True)
    old = hist[hist["ds"] < T0 + pd.Timedelta(hours=24 * 4)]
    new = hist[hist["ds"] >= T0 + pd.Timedelta(hours=24 * 4 - 2)]
    a = make_forecaster("ets").fit(old).update(new)
    b = make_forecaster("ets").fit(old).update_series(
        [SeriesData(d.key, d.start_hour, d.y) for d in split_series(new)][::-1])
    pd.testing.assert_frame_equal(a.predict(4), b.predict(4), check_exact=True)
    assert list(a.series_) == list(b.series_)


def reference_forecasts(m: BaseForecaster, horizon: int) -> dict[str, tuple[bytes, ...]]:
    """`forecasts` as it was before the spread read its blocks in place: each series' error
    rows concatenated (`calibration_errors`), `lead_spreads`, then clipping series by series."""
    raw, errors = {}, {}
    for key, data in m.series_.items():
        fc = m._forecast(key, m.states_[key], data, horizon)
        raw[key] = np.asarray(fc.mean, dtype=float)
        assert fc.std is None, "a model with its own spread: not what this reference covers"
        errors[key] = m.calibration_errors(key, horizon)
    keys = list(raw)
    window = m._calibration_hours()
    cold = np.array([cold_start_std(m.series_[k].y[-window:])
                     if np.count_nonzero(~np.isnan(errors[k][:, 0])) < MIN_ERRORS else 0.0
                     for k in keys])
    std, offsets = lead_spreads([errors[k] for k in keys], horizon, m.quantiles, cold, MIN_ERRORS)
    out = {}
    for i, key in enumerate(keys):
        q = [np.maximum(raw[key] + offsets[lv][i], 0.0).tobytes() for lv in m.quantiles]
        out[key] = (np.maximum(raw[key], 0.0).tobytes(), np.maximum(std[i], 0.0).tobytes(), *q)
    return out


@pytest.mark.parametrize("model", ["ets", "prophet"])
def test_forecasts_equal_the_spread_of_concatenated_rows(model: str) -> None:
    """The hourly spread stacks each series' error blocks without concatenating them and clips
    all series at once: the same bytes as the per-series route, with stored rows in play."""
    checked = {"n": 0}

    def check(provider: ForecastProvider, hour: int) -> None:
        m = provider.model
        if not isinstance(m, BaseForecaster) or not m.is_fitted:
            return
        for horizon in ((4, 7) if hour % 13 == 0 else (4,)):
            # without quantiles first (the provider's independent sum asks so): the same means
            # and spreads, and a later call with quantiles computes them rather than reusing
            lean = {k: (f.mean.tobytes(), f.std.tobytes())  # type: ignore[union-attr]
                    for k, f in m.forecasts(horizon, quantiles=False).items()}
            fcs = m.forecasts(horizon)
            got = {k: (f.mean.tobytes(), f.std.tobytes(),  # type: ignore[union-attr]
                       *(f.quantiles[lv].tobytes() for lv in m.quantiles))  # type: ignore[index]
                   for k, f in fcs.items()}
            assert got == reference_forecasts(m, horizon), hour
            assert {k: v[:2] for k, v in got.items()} == lean, hour
            assert m.forecasts(horizon, quantiles=False) is fcs     # the fuller result serves
            checked["n"] += 1

    inner = (make_forecaster("prophet", window_h=24 * 3, min_fit_hours=24, calibration_window_h=40,
                             quantiles=(0.1, 0.9))
             if model == "prophet" else make_forecaster("ets", calibration_window_h=40,
                                                         quantiles=(0.1, 0.9)))
    drive(ForecastProvider(inner), 24 * (5 if model == "prophet" else 7), {24 * 4 + 2}, check)
    assert checked["n"] > 60
    assert any(len(v[0]) for v in inner.oos_errors_.values()), "no stored rows were exercised"


@settings(max_examples=200, deadline=None)
@given(start=st.integers(-5, 5), n_y=st.integers(0, 8), first=st.integers(-12, 14),
       n=st.integers(0, 12))
def test_values_from_equals_values_at(start: int, n_y: int, first: int, n: int) -> None:
    data = SeriesData("s", start, np.arange(n_y, dtype=float) + 0.5)
    want = data.values_at(first + np.arange(n))
    assert data.values_from(first, n).tobytes() == want.tobytes()
    # into a row of the caller's matrix that holds something else
    rows = np.full((2, n), -7.0)
    row = rows[1]
    assert data.values_from(first, n, out=row) is row
    assert rows[1].tobytes() == want.tobytes() and (rows[0] == -7.0).all()


def persistent_usage() -> Callable[[int, np.random.Generator], dict[tuple[str, str], float]]:
    """`usage_at` plus a tenant whose noise persists (AR(1)), so that its residual factor φ is
    not 0 and the residual term of every mean and error row matters."""
    level = {"x": 0.0}

    def usage(hour: int, rng: np.random.Generator) -> dict[tuple[str, str], float]:
        level["x"] = 0.9 * level["x"] + rng.normal(0, 4)
        return usage_at(hour, rng) | {("B", "ar"): max(0.0, 40 + 10 * np.sin(hour / 4)
                                                       + level["x"])}

    return usage


def test_prophet_hourly_batch_equals_the_per_series_route() -> None:
    """`ProphetForecaster._hourly_batch` computes the steady series' means and error rows for
    all of them at once: the same bytes as `_forecast` and `_errors` series by series (the batch
    switched off), every forecast and every calibration row, with a gap and a new tenant."""
    batched = {"series": 0}
    phis: list[float] = []
    runs, rows = [], []
    for batch in (True, False):
        inner = make_forecaster("prophet", window_h=24 * 3, min_fit_hours=24,
                                calibration_window_h=40)
        if batch:
            own = inner._hourly_batch

            def counted(horizon: int, own=own) -> dict:
                out = own(horizon)
                batched["series"] += len(out)
                return out

            inner._hourly_batch = counted  # type: ignore[method-assign]
        else:
            inner._hourly_batch = lambda horizon: {}  # type: ignore[method-assign]
        seen: list[bytes] = []

        def keep(provider: ForecastProvider, hour: int, seen: list[bytes] = seen) -> None:
            m = provider.model
            if isinstance(m, BaseForecaster) and m.is_fitted:
                seen.extend(m.calibration_errors(k, 4).tobytes() for k in sorted(m.series_))
                phis.extend(s.phi for s in m.states_.values() if s.model is not None)

        runs.append(drive(ForecastProvider(inner), 24 * 5, {24 * 4 + 2}, keep,
                          persistent_usage()))
        rows.append(seen)
    assert batched["series"] > 100, "the batch never ran"
    assert max(phis) > 0, "no series with a residual term"
    assert len(runs[0]) > 100 and runs[0] == runs[1]
    assert len(rows[0]) > 100 and rows[0] == rows[1]


def test_pool_layout_is_kept_only_while_the_rows_are_the_same() -> None:
    """The provider keeps where each forecast row is summed (`PoolLayout`) from hour to hour;
    whenever the rows change — a tenant renamed or added, a series ending at another hour than
    the others, a longer reach — its pool forecasts are those of a layout made afresh."""
    p = ForecastProvider(model="seasonal-naive", horizon_h=4)
    model = p.model
    assert isinstance(model, BaseForecaster)
    base = p._origin_hour()
    assert base is not None
    rng = np.random.default_rng(3)
    cases = [  # (series, their last hours, the hour asked, steps)
        (["A|a", "B|b"], [50, 50], 51, 4),
        (["A|a", "B|b"], [50, 50], 51, 4),             # the same rows: the layout is kept
        (["A|a", "B|c"], [50, 50], 51, 4),             # another tenant, the same count
        (["A|a", "A|c"], [50, 50], 51, 4),             # ... of another pool
        (["A|a", "A|c"], [50, 49], 51, 4),             # one series an hour behind
        (["A|a", "A|c"], [49, 50], 51, 4),
        (["A|a", "A|c", "B|b"], [52, 52, 52], 55, 6),  # reaching over missing hours
    ]
    for names, ends, hour, steps in cases:
        model.fit_series(SeriesData(n, base + e - 99, rng.uniform(0, 9, 100))
                         for n, e in zip(names, ends, strict=True))
        kept = p._predict_arrays(model, hour, steps)
        p._pred_rows = None
        fresh = p._predict_arrays(model, hour, steps)
        assert sorted(kept) == sorted(fresh)
        for pool in fresh:
            assert kept[pool].mean.tobytes() == fresh[pool].mean.tobytes()
            assert kept[pool].std.tobytes() == fresh[pool].std.tobytes()
