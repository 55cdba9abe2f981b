"""Scheduling policies behind one interface; `make_policy` builds one from a CLI spec."""

from __future__ import annotations

import inspect
import math
from typing import Any

from gfs_opt.errors import GfsError
from gfs_opt.policies.base import Policy
from gfs_opt.policies.chronus import ChronusPolicy
from gfs_opt.policies.fgd import FGDPolicy
from gfs_opt.policies.gfs import GFSPolicy
from gfs_opt.policies.gfs_milp import GFSMilpPolicy
from gfs_opt.policies.lyra import LyraPolicy
from gfs_opt.policies.yarn_cs import YarnCSPolicy

#: name → (class, fixed options). Ablations are GFS with options (GFS-SPEC §8).
POLICIES: dict[str, tuple[type[Policy], dict[str, Any]]] = {
    "gfs": (GFSPolicy, {}),
    # the published GFS (GFS-SPEC §2): every departure of gfs_opt's GFS switched off
    "gfs-paper": (GFSPolicy, {"eta_rule": "paper", "shape": False, "gang_victims": False,
                              "lp_beside_hp": False, "lp_age_h": math.inf, "hp_wait_h": 0.0,
                              "hp_notice_h": 0.0}),
    "yarn-cs": (YarnCSPolicy, {}),
    "chronus": (ChronusPolicy, {}),
    "lyra": (LyraPolicy, {}),
    "fgd": (FGDPolicy, {}),
    "gfs-milp": (GFSMilpPolicy, {}),
    # the baselines under GFS's spot quota with a static η, as the authors ran them
    "yarn-cs+sqa": (YarnCSPolicy, {"quota": "sqa"}),
    "lyra+sqa": (LyraPolicy, {"quota": "sqa"}),
    "fgd+sqa": (FGDPolicy, {"quota": "sqa"}),
    "gfs-week-peak": (GFSPolicy, {"forecaster": "week-peak"}),
    "gfs-static-eta": (GFSPolicy, {"static_eta": True}),
    "gfs-no-history": (GFSPolicy, {"use_history": False}),
    "gfs-naive-victims": (GFSPolicy, {"victims": "naive"}),
    # the mechanisms of "GFS wins both at once" (issue 37), one at a time
    "gfs-no-shape": (GFSPolicy, {"shape": False}),
    "gfs-no-beside": (GFSPolicy, {"lp_beside_hp": False}),
    "gfs-worker-victims": (GFSPolicy, {"gang_victims": False}),
    "gfs-paper-eta": (GFSPolicy, {"eta_rule": "paper"}),
    # PTS's LP order alone, without letting long-waiting LP jobs first (issue 40)
    "gfs-pts-order": (GFSPolicy, {"lp_age_h": None}),
    # the paper's PTS: HP gangs evict at once, without waiting for LP window boundaries
    # (whole-node gangs up to an hour, the others the notice; issue 40)
    "gfs-no-wait": (GFSPolicy, {"hp_wait_h": 0.0, "hp_notice_h": 0.0}),
    # only the whole-node gangs wait: no notice for the others (issue 40, seventh session's GFS)
    "gfs-no-notice": (GFSPolicy, {"hp_notice_h": 0.0}),
}


def settable_options(name: str) -> set[str]:
    """Constructor keywords of a registered policy that it does not fix itself (the forecaster
    only where the policy holds a spot quota: a no-quota baseline has no use for one)."""
    cls, fixed = POLICIES[name]
    names: set[str] = set()
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        params = inspect.signature(init).parameters.values()
        names |= {p.name for p in params if p.name != "self" and p.kind in (
            p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
        if not any(p.kind is p.VAR_KEYWORD for p in params):
            break   # no **kwargs: the bases' keywords are not reachable
    names -= set(fixed)
    if "forecaster" in names and make_policy(name).spot is None:
        names.discard("forecaster")
    return names


def options_for(name: str, options: dict[str, Any]) -> dict[str, Any]:
    """The run-wide options (e.g. the forecaster) that policy ``name`` takes and does not fix."""
    keys = settable_options(name)
    return {k: v for k, v in options.items() if k in keys and v is not None}


def family(name: str) -> str:
    """"gfs" (GFS and its variants), "sqa" (a baseline under the shared spot quota) or "none"."""
    if name.startswith("gfs"):
        return "gfs"
    return "sqa" if name.endswith("+sqa") else "none"


def register_policy(name: str, cls: type[Policy], **options: Any) -> None:
    POLICIES[name] = (cls, options)


def make_policy(spec: str, **overrides: Any) -> Policy:
    """``spec`` is a registered name; ``overrides`` are extra constructor options."""
    try:
        cls, options = POLICIES[spec]
    except KeyError:
        raise GfsError(f"unknown policy '{spec}'; choose from {', '.join(POLICIES)}") from None
    merged = {**options, **{k: v for k, v in overrides.items() if v is not None}}
    try:
        return cls(**merged)
    except TypeError as exc:
        raise GfsError(f"policy '{spec}': {exc}") from None


__all__ = ["POLICIES", "Policy", "family", "make_policy", "options_for", "register_policy",
           "settable_options"]
