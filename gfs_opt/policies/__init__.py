"""Scheduling policies behind one interface; `make_policy` builds one from a CLI spec."""

from __future__ import annotations

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
    "yarn-cs": (YarnCSPolicy, {}),
    "chronus": (ChronusPolicy, {}),
    "lyra": (LyraPolicy, {}),
    "fgd": (FGDPolicy, {}),
    "gfs-milp": (GFSMilpPolicy, {}),
    "gfs-week-peak": (GFSPolicy, {"forecaster": "week-peak"}),
    "gfs-static-eta": (GFSPolicy, {"static_eta": True}),
    "gfs-no-history": (GFSPolicy, {"use_history": False}),
    "gfs-naive-victims": (GFSPolicy, {"victims": "naive"}),
}


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


__all__ = ["POLICIES", "Policy", "make_policy", "register_policy"]
