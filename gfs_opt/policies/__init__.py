"""Scheduling policies behind one interface; `make_policy` builds one from a CLI spec."""

from __future__ import annotations

import inspect
import re
from typing import Any

from gfs_opt.errors import GfsError
from gfs_opt.policies.base import Policy
from gfs_opt.policies.chronus import ChronusPolicy
from gfs_opt.policies.departures import ALL_KEYS, DEPARTURES, OPTION_OWNER
from gfs_opt.policies.fgd import FGDPolicy
from gfs_opt.policies.gfs import GFSPolicy
from gfs_opt.policies.gfs_milp import GFSMilpPolicy
from gfs_opt.policies.lyra import LyraPolicy
from gfs_opt.policies.yarn_cs import YarnCSPolicy


def _gfs_variants() -> dict[str, tuple[type[Policy], dict[str, Any]]]:
    """The published GFS, ours, and ours without each departure (`gfs_opt.policies.departures`:
    generated from its table, never listed by hand)."""
    out: dict[str, tuple[type[Policy], dict[str, Any]]] = {
        "gfs": (GFSPolicy, {}),
        "gfs-paper": (GFSPolicy, {"departures": "none"}),
    }
    for d in DEPARTURES:
        out[f"gfs-no-{d.key}"] = (GFSPolicy, {"departures": "+".join(
            k for k in ALL_KEYS if k != d.key) or "none"})
    return out


#: name → (class, fixed options)
POLICIES: dict[str, tuple[type[Policy], dict[str, Any]]] = {
    **_gfs_variants(),
    "yarn-cs": (YarnCSPolicy, {}),
    "chronus": (ChronusPolicy, {}),
    "lyra": (LyraPolicy, {}),
    "fgd": (FGDPolicy, {}),
    "gfs-milp": (GFSMilpPolicy, {}),
    # the baselines under GFS's spot quota with a static η, as the authors ran them
    "yarn-cs+sqa": (YarnCSPolicy, {"quota": "sqa"}),
    "lyra+sqa": (LyraPolicy, {"quota": "sqa"}),
    "fgd+sqa": (FGDPolicy, {"quota": "sqa"}),
    # the ablations of the paper's own components (GFS-SPEC §8), on gfs
    "gfs-week-peak": (GFSPolicy, {"forecaster": "week-peak"}),
    "gfs-static-eta": (GFSPolicy, {"static_eta": True}),
    "gfs-no-history": (GFSPolicy, {"use_history": False}),
    "gfs-naive-victims": (GFSPolicy, {"victims": "naive"}),
    # HP patience with the whole-node wait only (no notice for the other gangs)
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
    unsettable = getattr(cls, "unsettable", None)
    if unsettable is not None:
        names -= unsettable(fixed)
    if "forecaster" in names and make_policy(name).spot is None:
        names.discard("forecaster")
    return names


def options_for(spec: str, options: dict[str, Any]) -> dict[str, Any]:
    """The run-wide options (e.g. the forecaster) that policy ``spec`` takes and neither its
    registered name nor its own ``[key=value]`` options fix."""
    name, own = parse_policy(spec)
    keys = settable_options(name) - set(own)
    return {k: v for k, v in options.items() if k in keys and v is not None}


def family(spec: str) -> str:
    """"gfs" (GFS and its variants), "sqa" (a baseline under the shared spot quota) or "none"."""
    name = policy_name(spec)
    if name.startswith("gfs"):
        return "gfs"
    return "sqa" if name.endswith("+sqa") else "none"


_SPEC = re.compile(r"^\s*([A-Za-z0-9_.+-]+)\s*(?:\[(.*)\])?\s*$", re.DOTALL)
_INT = re.compile(r"^[+-]?\d+$")


def _value(text: str) -> Any:
    """A ``key=value`` value: true/false, an int, a float (inf, 1e-3), else the text."""
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    if _INT.match(text):
        return int(text)
    try:
        return float(text)
    except ValueError:
        return text


def policy_name(spec: str) -> str:
    """The registered name of ``spec`` (``gfs[hp_notice_h=0]`` → ``gfs``), unchecked."""
    return spec.split("[", 1)[0].strip()


def parse_policy(spec: str) -> tuple[str, dict[str, Any]]:
    """``NAME`` or ``NAME[key=value,...]`` → (registered name, its options as given), checked
    against the policy's own options (`settable_options`): a `GfsError` names what is wrong."""
    m = _SPEC.match(spec)
    if m is None:
        raise GfsError(f"policy {spec!r}: expected NAME or NAME[key=value,...]")
    name, body = m.group(1), m.group(2)
    if name not in POLICIES:
        raise GfsError(f"unknown policy '{name}'; choose from {', '.join(POLICIES)}")
    options: dict[str, Any] = {}
    if body is not None and body.strip():
        allowed = settable_options(name)
        for item in body.split(","):
            key, eq, raw = item.partition("=")
            key, raw = key.strip(), raw.strip()
            if not eq or not key or not raw:
                raise GfsError(f"policy {spec!r}: {item.strip()!r} is not key=value")
            if key in options:
                raise GfsError(f"policy {spec!r}: option {key} given twice")
            if key not in allowed:
                fixed = POLICIES[name][1]
                owner = OPTION_OWNER.get(key)
                if key in fixed:
                    why = f"{name} fixes it"
                elif owner is not None:
                    why = (f"it belongs to departure '{owner}', which {name} leaves out; e.g. "
                           f"gfs[departures=...+{owner},{key}=...]")
                else:
                    why = f"{name} takes " + (", ".join(sorted(allowed)) or "no option")
                raise GfsError(f"policy {spec!r}: no option {key!r} ({why})")
            options[key] = _value(raw)
    elif body is not None:
        raise GfsError(f"policy {spec!r}: empty [] (give key=value options or none)")
    return name, options


def split_policies(text: str) -> list[str]:
    """A comma-separated list of policy specs, commas inside ``[...]`` kept: ``gfs,gfs[a=1,b=2]``
    → ``["gfs", "gfs[a=1,b=2]"]``."""
    out: list[str] = []
    depth, start = 0, 0
    for i, ch in enumerate(text):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth = max(0, depth - 1)
        elif ch == "," and depth == 0:
            out.append(text[start:i])
            start = i + 1
    out.append(text[start:])
    return [p.strip() for p in out if p.strip()]


def register_policy(name: str, cls: type[Policy], **options: Any) -> None:
    POLICIES[name] = (cls, options)


def make_policy(spec: str, **overrides: Any) -> Policy:
    """``spec`` is a registered name, optionally with options (``gfs[hp_notice_h=0]``);
    ``overrides`` are extra constructor options (the spec's own win over them)."""
    name, own = parse_policy(spec)
    cls, fixed = POLICIES[name]
    merged = {**fixed, **{k: v for k, v in overrides.items() if v is not None}, **own}
    try:
        return cls(**merged)
    except (TypeError, ValueError) as exc:
        raise GfsError(f"policy '{spec}': {exc}") from None


__all__ = ["POLICIES", "Policy", "family", "make_policy", "options_for", "parse_policy",
           "policy_name", "register_policy", "settable_options", "split_policies"]
