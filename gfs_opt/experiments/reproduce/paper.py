"""The paper's published numbers (GFS-SPEC §8) and how a measured number is judged against them.

Changes are relative: ``(GFS − baseline) / baseline``, so −0.33 means "GFS 33 % lower". A verdict
compares our value with the paper's: within ``tolerance`` (relative to the paper's magnitude, or
inside a published range widened by it) is a **match**; better than that is **exceed**; worse is
**miss**. "Better" follows each number's direction (lower eviction, lower JQT, higher allocation).
Numbers without a better side (``"range"``: the baselines' own JQT, and the ablations' absolute
values, where "better" would mean a weaker ablation) can only match or miss, and
``"equal"`` claims (no difference between policies) are judged on our spread. Numbers the paper
observed in production (``kind="production"``: the allocation gain, the monthly value) are not
simulation targets: they get the verdict **production** and our simulation's value beside them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

Direction = Literal["lower", "higher", "equal", "range"]

#: relative tolerance of a "match"
TOLERANCE = 0.2
#: largest relative spread across policies that still counts as "equal"
EQUAL_SPREAD = 0.05


@dataclass(frozen=True, slots=True)
class PaperNumber:
    key: str
    label: str
    value: float | tuple[float, float]   # a number or a published range (lo, hi)
    unit: Literal["%", "s", "x", "$"]    # "%": fractions (0.33 = 33 %); "x": a ratio
    better: Direction
    source: str
    kind: Literal["simulation", "production"] = "simulation"


PAPER: dict[str, PaperNumber] = {n.key: n for n in (
    PaperNumber("lp_eviction_change", "LP eviction rate, GFS vs no-quota baselines", -0.330, "%",
                "lower", "abstract"),
    PaperNumber("lp_eviction_change_sqa", "LP eviction rate, GFS vs +sqa baselines", -0.330, "%",
                "lower", "abstract"),
    PaperNumber("lp_jqt_change", "LP queueing time, GFS vs +sqa baselines", -0.441, "%", "lower",
                "abstract (the authors' baselines shared GFS's quota)"),
    PaperNumber("lp_jqt_change_noquota", "LP queueing time, GFS vs no-quota baselines", -0.441,
                "%", "lower", "abstract"),
    PaperNumber("allocation_gain_max", "GPU allocation gain, best case", 0.228, "%", "higher",
                "abstract (production)", "production"),
    PaperNumber("monthly_value", "Monthly value of extra allocation (>10,000 GPUs)", 459_715.0,
                "$", "higher", "abstract (production)", "production"),
    PaperNumber("gfs_lp_jqt", "GFS LP JQT, medium load", 575.4, "s", "lower",
                "simulation, 2,296 A100"),
    PaperNumber("baseline_lp_jqt", "Baselines' LP JQT, medium load", (1211.7, 5450.5), "s",
                "range", "simulation, 2,296 A100"),
    PaperNumber("gfs_lp_eviction", "GFS LP eviction rate, medium load", 0.0121, "%", "lower",
                "simulation, 2,296 A100"),
    PaperNumber("hp_jqt_change", "HP mean JQT, GFS vs each baseline", (-0.71, -0.60), "%", "lower",
                "simulation, 2,296 A100"),
    PaperNumber("hp_jct_p99_spread", "HP p99 JCT spread across policies", 0.0, "%", "equal",
                "simulation, 2,296 A100"),
    PaperNumber("week_peak_lp_jqt", "Ablation previous-week peak: LP JQT", 10_502.4, "s", "range",
                "ablation, medium load"),
    PaperNumber("week_peak_lp_eviction", "Ablation previous-week peak: LP eviction", 0.0808, "%",
                "range", "ablation, medium load"),
    PaperNumber("static_eta_lp_jqt", "Ablation static η: LP JQT", 2_174.3, "s", "range",
                "ablation, medium load"),
    PaperNumber("week_peak_jqt_factor", "Ablation previous-week peak: LP JQT ÷ GFS's",
                10_502.4 / 575.4, "x", "higher", "ablation ÷ simulation"),
    PaperNumber("week_peak_eviction_factor", "Ablation previous-week peak: LP eviction ÷ GFS's",
                0.0808 / 0.0121, "x", "higher", "ablation ÷ simulation"),
    PaperNumber("static_eta_jqt_factor", "Ablation static η: LP JQT ÷ GFS's", 2_174.3 / 575.4, "x",
                "higher", "ablation ÷ simulation"),
)}

#: production observations that motivate the paper; not something a simulation reproduces
MOTIVATION = {"spot eviction rate, average": 0.495, "spot eviction rate, peak": 0.935,
              "high-end GPU allocation": "< 80 %"}


@dataclass(frozen=True, slots=True)
class Verdict:
    word: Literal["match", "exceed", "miss", "n/a", "production"]
    delta: str        # how far from the paper, in the number's own terms


def fmt(value: float | tuple[float, float] | None, unit: str, signed: bool = False) -> str:
    """A paper or measured value in its unit (ranges as lo … hi); ``signed`` for changes."""
    if isinstance(value, tuple):
        return f"{fmt(value[0], unit, signed)} … {fmt(value[1], unit, signed)}"
    if value is None or math.isnan(value):
        return "n/a"
    if unit == "%":
        return f"{100 * value:+.1f} %" if signed else f"{100 * value:.2f} %"
    if unit == "s":
        return f"{value:,.1f} s"
    if unit == "x":
        return f"{value:.2f}×"
    return f"{'−' if value < 0 else ''}${abs(value):,.0f}"


def is_change(number: PaperNumber) -> bool:
    """Relative changes and gains print with a sign."""
    return "_change" in number.key or number.key.endswith("_gain_max")


def verdict(ours: float | None, number: PaperNumber, tolerance: float = TOLERANCE) -> Verdict:
    """Judge ``ours`` against the paper (see module doc)."""
    if ours is None or (isinstance(ours, float) and math.isnan(ours)):
        return Verdict("n/a", "not measured")
    if number.kind == "production":
        return Verdict("production", "a production observation, not a simulation target")
    ref = number.value
    lo, hi = ref if isinstance(ref, tuple) else (ref, ref)
    if number.better == "equal":       # the claim is "no difference": ours is a spread ≥ 0
        return Verdict("match" if ours <= EQUAL_SPREAD else "miss", f"spread {100 * ours:.1f} %")
    width = tolerance * max(abs(lo), abs(hi))
    inside = lo - width <= ours <= hi + width
    if number.better == "range":
        return Verdict("match" if inside else "miss", _delta(ours, lo, hi, number.unit))
    better = (ours < lo - width) if number.better == "lower" else (ours > hi + width)
    if inside:
        return Verdict("match", _delta(ours, lo, hi, number.unit))
    return Verdict("exceed" if better else "miss", _delta(ours, lo, hi, number.unit))


def _delta(ours: float, lo: float, hi: float, unit: str) -> str:
    """Distance to the paper's number or range: points for fractions, a ratio otherwise."""
    ref = lo if ours < lo else hi if ours > hi else ours
    if ours == ref:
        return "inside the published range" if lo != hi else "equal"
    if unit == "%":
        return f"{100 * (ours - ref):+.1f} pp"
    if ref == 0:
        return "n/a"
    return f"{ours / ref:.2f}× the paper's"
