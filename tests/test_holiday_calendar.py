"""`load_calendar`: one country's holidays without the other calendars, the same holidays."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytest.importorskip("holidays")

# the holiday frame Prophet builds for China, and whether all calendars were imported for it
SCRIPT = """
import json, sys
from gfs_opt.forecast.holiday_calendar import load_calendar
loaded = load_calendar("CN") if sys.argv[1] == "one" else None
from prophet.make_holidays import make_holidays_df
frame = make_holidays_df([2023, 2024, 2025], "CN")
print(json.dumps({"loaded": loaded, "all": "holidays.countries" in sys.modules,
                  "rows": [[str(d), h] for d, h in zip(frame["ds"], frame["holiday"])]}))
"""


def _run(mode: str) -> dict:
    out = subprocess.run([sys.executable, "-c", SCRIPT, mode], capture_output=True, text=True,
                         check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_one_calendar_gives_the_same_holiday_frame_without_the_others() -> None:
    one, normal = _run("one"), _run("normal")
    assert one["loaded"] is True
    assert one["all"] is False and normal["all"] is True
    assert len(one["rows"]) > 20
    assert one["rows"] == normal["rows"]


def test_an_unknown_country_loads_nothing() -> None:
    from gfs_opt.forecast.holiday_calendar import load_calendar

    before = set(sys.modules)
    # with every calendar imported already (another test may have), any code counts as loaded
    assert load_calendar("not-a-country") is ("holidays.countries" in before)
    assert not {m for m in set(sys.modules) - before if m.startswith("holidays.countries.")}
