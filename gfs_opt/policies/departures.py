"""gfs_opt's departures from the published GFS, one row each: the table every GFS variant is made from.

`gfs-paper` is GFS-SPEC §2 and nothing else (`PAPER_PARTS`). Each `Departure` names one part
gfs_opt puts in place of a part of the paper's, with what it changes, why, the spec section it
departs from and its measured effect; its ``apply`` turns a composition into the one with the
departure. `gfs` is `gfs-paper` with every departure; the registry's `gfs-no-X` is `gfs` without
departure X (`gfs_opt.policies.variant_policies`), and docs/departures.md is generated from this
table (`departures_markdown`; a test keeps the page in step). Any other combination is one
option away: ``gfs[departures=wait+shape]``.

The measured effects come from the ablation in REPRODUCTION.md ("beyond the paper"): each
`gfs-no-X` against `gfs` on paper-a100 at three loads, ETS forecaster, three seeds.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace

from gfs_opt.model import HOUR
from gfs_opt.pending import PTS_ORDER, QueueOrder
from gfs_opt.preempt.boundary import HPPatience
from gfs_opt.preempt.greedy import PreemptRule
from gfs_opt.quota.eta import AttributableEta, EtaRule, PaperEta

#: the notice an LP job gets before an HP gang that does not take whole nodes evicts it (hours):
#: one minute — HP's promise is a prompt start, and longer notices buy fewer broken windows at
#: HP waits the trade table of docs/departures.md weighs
NOTICE_H = 1 / 60


@dataclass(frozen=True)
class GFSParts:
    """What a GFS variant is made of, part by part (`gfs_opt.policies.gfs.GFSPolicy` runs it)."""

    order: QueueOrder = PTS_ORDER
    eta_rule: EtaRule = field(default_factory=PaperEta)
    shape: bool = False                   # the spot quota keeps whole nodes for whole-node HP
    lp_beside_hp: bool = False            # the placement score puts LP beside HP work
    victims: PreemptRule = field(default_factory=lambda: PreemptRule("two-pointer", "gfs"))
    patience: HPPatience | None = None


#: GFS-SPEC §2: PTS order, the paper's η rule, a count quota, best fit with E(n) beside the
#: job's own class, two-pointer victims worker by worker, HP evicting at once
PAPER_PARTS = GFSParts()


@dataclass(frozen=True)
class Departure:
    """One part of gfs_opt's GFS that is not the paper's (module doc)."""

    key: str              # `gfs-no-<key>`; the name in ``departures=a+b``
    part: str             # the part, in words
    changes: str          # what it changes
    why: str              # why
    spec: str             # the spec section it departs from
    effect: str           # its measured effect (REPRODUCTION.md, "beyond the paper")
    apply: Callable[[GFSParts, Mapping[str, float]], GFSParts]
    #: its own options (the `NAME[key=value]` syntax) and their defaults
    options: Mapping[str, float] = field(default_factory=dict)


def _patience(parts: GFSParts, o: Mapping[str, float]) -> GFSParts:
    return replace(parts, patience=HPPatience(wait_h=o["hp_wait_h"], notice_h=o["hp_notice_h"]))


def _eta(parts: GFSParts, o: Mapping[str, float]) -> GFSParts:
    return replace(parts, eta_rule=AttributableEta(o["eta_window_h"], o["eta_band_window_h"]))


def _shape(parts: GFSParts, o: Mapping[str, float]) -> GFSParts:
    return replace(parts, shape=True)


def _gang(parts: GFSParts, o: Mapping[str, float]) -> GFSParts:
    return replace(parts, victims=replace(parts.victims, gang_aware=True))


def _beside(parts: GFSParts, o: Mapping[str, float]) -> GFSParts:
    return replace(parts, lp_beside_hp=True)


def _aged(parts: GFSParts, o: Mapping[str, float]) -> GFSParts:
    return replace(parts, order=replace(parts.order, lp_age_s=o["lp_age_h"] * HOUR))


def _hp_fifo(parts: GFSParts, o: Mapping[str, float]) -> GFSParts:
    return replace(parts, order=replace(parts.order, hp_fifo=True))


DEPARTURES: tuple[Departure, ...] = (
    Departure(
        "wait", "HP patience",
        "An HP gang that would evict first takes LP jobs at a guarantee-window boundary, "
        "re-queued at their checkpoint (no window broken), and waits for them only when "
        "boundaries known to come within its patience give it room (else it evicts at once, "
        "as PTS does): a gang of whole-node workers up to `hp_wait_h`, gathering whole LP nodes "
        "boundary by boundary, every other gang a notice of `hp_notice_h`; it is retried at "
        "the boundary or its patience's end exactly.",
        "Every running LP job reaches a boundary within d hours; PTS evicts mid-window although "
        "waiting a minute would often break nothing, and a wait no boundary ends only delays HP.",
        "§2.3 PTS, HP pass (preemptive placement at once)",
        "Chronus MIX1 ×24, seed 0: LP eviction 2.45 → 1.68 % (load 2), 2.89 → 2.35 % (load 4) "
        "for HP JQT p99 0 → 54 / 58 s; paper-a100, Prophet, 3 seeds: −0.53 / −0.44 / −0.43 pp "
        "LP eviction (low / medium / high), HP mean +17 / −28 / +30 s, inside the noise; longer "
        "notices in docs/departures.md (trade table).",
        _patience, {"hp_wait_h": 1.0, "hp_notice_h": NOTICE_H}),
    Departure(
        "attributable-eta", "η rule",
        "η moves only on the windows broken while HP demand exceeded the quota's plan U_0, each "
        "outcome once (the evidence restarts when η moves), and grows above 1 only while the "
        "windows that growth let in keep the promise.",
        "The paper's rule shrinks η on every eviction of the last H hours, those no margin "
        "prevents included, and re-reads one burst at every hourly update.",
        "§2.2 step 4 (η feedback)",
        "paper-a100, Prophet, 3 seeds: LP evict +0.04 / −0.02 / +0.18 pp (low / medium / high), "
        "LP JQT −241 / −438 / −353 s, HP mean +4 / −29 / −94 s: inside the noise "
        "(REPRODUCTION.md).",
        _eta, {"eta_window_h": 4.0, "eta_band_window_h": 24.0}),
    Departure(
        "shape", "shape reserve",
        "The quota also forecasts the HP demand of whole-node workers and keeps that many whole "
        "nodes free of LP.",
        "A count quota leaves room in GPUs but not in whole nodes: a whole-node HP gang then "
        "evicts although the pool has GPUs to spare.",
        "§2.2 steps 3, 5 (a count quota)",
        "paper-a100, Prophet, 3 seeds: LP evict −0.02 / −0.02 / +0.10 pp (low / medium / high), "
        "LP JQT +395 / +469 / +705 s (a cost, inside the noise), HP mean −29 / −52 / −67 s: no "
        "gain outside the noise (REPRODUCTION.md).",
        _shape),
    Departure(
        "gang-victims", "gang-aware victims",
        "An HP gang's victims are chosen with the whole gang in view: a node's eviction cost is "
        "shared by the workers its victims make room for.",
        "PTS places a gang worker by worker, so each worker's cheapest node can add up to more "
        "victims than the gang needs.",
        "§2.3 preemptive placement (one worker at a time)",
        "paper-a100 medium, ETS, 3 seeds: LP evict 0.92 → 0.48 %, large HP gangs' JQT −3 %; "
        "Prophet: −0.25 / −0.49 / −0.39 pp (low / medium / high; medium outside the noise) "
        "(BENCHMARKS.md, REPRODUCTION.md).",
        _gang),
    Departure(
        "beside", "LP beside HP",
        "Among equally tight nodes an LP gang goes beside HP work rather than beside other LP.",
        "LP packed onto LP-only nodes breaks up the whole nodes whole-node HP gangs need.",
        "§2.3 non-preemptive node score (same-class co-location)",
        "paper-a100, Prophet, 3 seeds: LP evict −0.00 / −0.03 / +0.07 pp (low / medium / high), "
        "HP mean −20 / −9 / −43 s; ETS: HP mean 447 / 560 / 671 → 483 / 509 / 590 s, Chronus "
        "LP evict 1.40 / 1.91 → 1.64 / 2.22 %: no difference outside the noise anywhere "
        "(BENCHMARKS.md).",
        _beside),
    Departure(
        "aged-order", "aged LP order",
        "LP jobs that have waited over `lp_age_h` go first, in submit order, before PTS's "
        "largest-first order.",
        "Largest-first starves a backlog's small LP jobs for weeks.",
        "§2.3 LP pass order (−g, w, s)",
        "paper-a100, Prophet, 3 seeds: the means move inside the noise (LP evict −0.00 / −0.04 "
        "/ +0.13 pp, HP mean −36 / +31 / −86 s at low / medium / high); its point is the "
        "backlog's oldest jobs, not the means (REPRODUCTION.md).",
        _aged, {"lp_age_h": 24.0}),
    Departure(
        "hp-fifo", "HP in submit order",
        "The HP pass walks its queue in submit order (the LP pass keeps PTS's); a gang that "
        "cannot start still blocks nobody.",
        "When HP outgrows a pool, largest-first hands each freed node to the largest gang that "
        "fits, so whole-node gangs submitted earlier wait behind later ones for days (paper-a100 "
        "seed 1: 8-GPU workers queued 16,066 s against 4,557 s under lyra+sqa's FIFO).",
        "§2.3 HP pass order (−g, w, s)",
        "paper-a100, ETS, 3 seeds: HP mean 510 / 589 / 697 → 483 / 509 / 590 s, p99 4,386 / "
        "9,304 / 9,803 → 4,296 / 4,308 / 5,693 s (low / medium / high), LP evict 0.41 → 0.48 % "
        "(medium); Chronus ×24: HP 2 / 8 → 2 / 10 s, p99 49 / 55 → 50 / 59 s; Prophet: HP mean "
        "−68 / −150 / +56 s, LP evict +0.01 / +0.06 / +0.12 pp, inside the noise "
        "(BENCHMARKS.md, REPRODUCTION.md).",
        _hp_fifo),
)

BY_KEY: dict[str, Departure] = {d.key: d for d in DEPARTURES}
ALL_KEYS: tuple[str, ...] = tuple(BY_KEY)
#: every departure's option → its departure's key
OPTION_OWNER: dict[str, str] = {o: d.key for d in DEPARTURES for o in d.options}


def departure_keys(selection: str | Iterable[str] | None) -> tuple[str, ...]:
    """The departures a ``departures`` option names, in table order: None or "all" = every one,
    "none" or "" = none, else keys joined by "+" (or an iterable of keys)."""
    if selection is None:
        return ALL_KEYS
    if isinstance(selection, str):
        text = selection.strip()
        if text == "all":
            return ALL_KEYS
        keys = [] if text in ("", "none") else [k.strip() for k in text.split("+")]
    else:
        keys = [str(k) for k in selection]
    unknown = [k for k in keys if k not in BY_KEY]
    if unknown:
        raise ValueError(f"unknown departure {unknown[0]!r}; choose from "
                         f"{', '.join(ALL_KEYS)} (joined by '+'), all or none")
    return tuple(k for k in ALL_KEYS if k in keys)


def compose(keys: Iterable[str], options: Mapping[str, float | None] | None = None) -> GFSParts:
    """`PAPER_PARTS` with the departures ``keys``, each with its options (None or absent: the
    departure's default). An option of a departure not in ``keys`` is a ValueError."""
    chosen = set(keys)
    given = {k: v for k, v in (options or {}).items() if v is not None}
    for name in given:
        owner = OPTION_OWNER.get(name)
        if owner is None:
            raise ValueError(f"unknown departure option {name!r}")
        if owner not in chosen:
            raise ValueError(f"option {name} belongs to departure '{owner}', which this "
                             "policy leaves out")
    parts = PAPER_PARTS
    for d in DEPARTURES:
        if d.key in chosen:
            opts = {k: float(given.get(k, default)) for k, default in d.options.items()}
            for k, v in opts.items():
                if not (0 <= v < math.inf) or (k == "lp_age_h" and v == 0):
                    raise ValueError(f"{k} must be a finite number of hours "
                                     f"{'> 0' if k == 'lp_age_h' else '≥ 0'}, got {v:g}")
            parts = d.apply(parts, opts)
    return parts


def departures_markdown() -> str:
    """The departures table as Markdown (docs/departures.md holds it between markers)."""
    rows = ["| departure | part | what it changes | why | departs from | measured effect | options |",
            "|---|---|---|---|---|---|---|"]
    for d in DEPARTURES:
        opts = ", ".join(f"`{k}` = {v:g}" for k, v in d.options.items()) or "—"
        rows.append(f"| `{d.key}` | {d.part} | {d.changes} | {d.why} | {d.spec} | {d.effect} | "
                    f"{opts} |")
    return "\n".join(rows) + "\n"
