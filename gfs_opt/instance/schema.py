"""Structure of an instance file (pydantic v2) and one-line error messages.

These models check *shape* only: field names, types and ranges of single values. Everything that
relates two parts of a file (pools, job ids, placements against node sizes, …) is checked in
`gfs_opt.instance`, which also converts a valid file into a `Round`. The published JSON Schema
(`gfs_opt/schemas/instance.schema.json`) is generated from these models by `json_schema()` so the
two can never disagree; a test compares the committed file with the generated one.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from gfs_opt.model import Params, PoolStatus

FORMAT = "gfs-opt-instance"
VERSION = 1
SCHEMA_ID = "https://gfs-opt.example/schemas/instance-v1.schema.json"

_P = Params()
_S = PoolStatus()

# upper bounds keep every value a solver can take (SCIP refuses coefficients beyond 1e20) and
# reject typos such as 1e300 with a message instead of 300-digit costs
MAX_SECONDS = 10 * 365 * 86_400.0   # ten years
MAX_HOURS = 168.0                   # one week: longer than any forecast horizon
MAX_GPUS = 1e9
Seconds = Annotated[float, Field(ge=0, le=MAX_SECONDS)]
Hours = Annotated[float, Field(gt=0, le=MAX_HOURS)]
Count = Annotated[int, Field(ge=0, le=2**31 - 1)]  # fits the int32 counters of ClusterState


class _Strict(BaseModel):
    # strict: "4" is not an integer and 2.0 is not a worker count; forbid: a misspelt optional
    # field must not be silently ignored.
    model_config = ConfigDict(strict=True, extra="forbid", allow_inf_nan=False)


class ParamsIn(_Strict):
    """Policy knobs (`gfs_opt.model.Params`); every field is optional and defaults as there."""

    rho: float = Field(_P.rho, gt=0, lt=1, description="target probability that a guarantee window survives")
    horizon_h: int = Field(_P.horizon_h, ge=1, le=int(MAX_HOURS), description="forecast horizon H in hours")
    guarantee_classes: list[Hours] = Field(
        list(_P.guarantee_classes), min_length=1, description="LP guarantee classes d in hours")
    quota_refresh_s: float = Field(_P.quota_refresh_s, gt=0, le=MAX_SECONDS, description="spot-quota refresh period")
    eta_min: float = Field(_P.eta_min, gt=0, le=1e6, description="lower clamp of η")
    eta_max: float = Field(_P.eta_max, gt=0, le=1e6, description="upper clamp of η")
    eval_start: Seconds = Field(_P.eval_start, description="evaluation window start (s)")
    eval_end: Seconds | None = Field(None, description="evaluation window end (s); null = open-ended")
    restart_small_s: Seconds = Field(_P.restart_small_s, description="restart overhead when g·w ≤ 8 GPUs")
    restart_large_s: Seconds = Field(_P.restart_large_s, description="restart overhead when g·w > 8 GPUs")
    hard_guarantee: bool = Field(_P.hard_guarantee, description="never evict an LP job inside its window")
    quota_after_window: bool = Field(
        _P.quota_after_window,
        description="keep the spot quota on after the evaluation window (false: the authors' "
                    "lifted drain)")


class PoolIn(_Strict):
    """Feedback state of one pool (`gfs_opt.model.PoolStatus`)."""

    eta: float = Field(_S.eta, gt=0, le=1e6,
                       description="current safety-margin factor η (U = μ + z_ρ·σ/η)")
    failed: Count = Field(_S.failed, description="failed windows since the evaluation start (F)")
    succeeded: Count = Field(_S.succeeded, description="succeeded windows since the evaluation start (S)")
    oldest_lp_wait: Seconds = Field(_S.oldest_lp_wait, description="wait of the oldest pending LP job since (re)queue")
    has_hp_history: bool = Field(_S.has_hp_history, description="false: the pool gets quota = capacity")
    hp_whole_gpus: float = Field(_S.hp_whole_gpus, ge=0, le=MAX_GPUS,
                                 description="GPUs held by HP workers that take a whole node")


class NodeIn(_Strict):
    """One node. Its position in `nodes` is the node index used by placements."""

    name: str = Field(min_length=1, description="unique node name")
    pool: str = Field(min_length=1, description="GPU model of the node")
    gpus: int = Field(ge=1, le=1024, description="number of GPUs on the node")


class JobIn(_Strict):
    """A job the round mentions (running, pending, or only for reference)."""

    model_config = ConfigDict(populate_by_name=True)

    id: int = Field(ge=0, le=2**63 - 1, description="unique job id")
    org: str = Field(description="organisation (tenant)")
    pool: str = Field(min_length=1, description="GPU model the job needs")
    cls: Literal["HP", "LP"] = Field(alias="class", description="HP (never preempted) or LP (spot)")
    gpus_per_worker: float = Field(
        gt=0, description="GPUs per worker: a fraction below 1 shares one GPU, a whole number k takes "
                          "k distinct GPUs of one node; stored internally in milli-GPU")
    workers: int = Field(ge=1, le=1_000_000, description="gang size")
    submit: Seconds = Field(description="submit time (s)")
    duration: Seconds = Field(description="run time needed (s)")
    guarantee_h: float = Field(1.0, gt=0, le=MAX_HOURS, description="LP guarantee class in hours (ignored for HP)")
    cpu: float = Field(0.0, ge=0, le=1e9, description="CPU request, carried but not enforced")


WorkerIn = Annotated[
    tuple[Annotated[int, Field(ge=0)], Annotated[list[Annotated[int, Field(ge=0)]], Field(min_length=1)]],
    Field(description="[node index, [node-local GPU indices]] of one worker")]


class RunningIn(_Strict):
    """A job holding GPUs at `time`."""

    job: int = Field(description="id of a job listed in `jobs`")
    start: Seconds = Field(description="when it (re)started")
    last_ckpt: Seconds = Field(description="time of its last checkpoint")
    window_start: Seconds = Field(description="start of its current guarantee window")
    evictions: Count = Field(0, description="times it has been evicted so far")
    placement: list[WorkerIn] = Field(min_length=1, description="one entry per worker")


class ForecastIn(_Strict):
    """HP GPU demand forecast of one pool, per future hour (index 0 = current hour)."""

    mean: list[Annotated[float, Field(ge=-MAX_GPUS, le=MAX_GPUS)]] = Field(min_length=1, description="mean HP demand in GPUs per hour")
    std: list[Annotated[float, Field(ge=0, le=MAX_GPUS)]] = Field(min_length=1, description="standard deviation per hour")
    samples: Annotated[list[list[Annotated[float, Field(ge=-MAX_GPUS, le=MAX_GPUS)]]],
                       Field(min_length=1)] | None = Field(None, description="optional scenarios, S rows × H hours")


class QuotaIn(_Strict):
    """Current spot quota of one (pool, guarantee class)."""

    pool: str = Field(min_length=1)
    class_h: float = Field(gt=0, le=MAX_HOURS, description="guarantee class in hours")
    gpus: float = Field(ge=0, le=MAX_GPUS, description="quota in GPUs (stored internally in milli-GPU)")


class ReserveIn(_Strict):
    """Whole-node reserve in force for one (pool, guarantee class): whole free nodes of the
    pool's largest size an LP job of the class may not break (the quota's shape dimension)."""

    pool: str = Field(min_length=1)
    class_h: float = Field(gt=0, le=MAX_HOURS, description="guarantee class in hours")
    nodes: Count = Field(description="whole free nodes held back from LP")


class InstanceFile(_Strict):
    """One scheduling round of gfs_opt: loads into exactly `gfs_opt.model.Round`."""

    model_config = ConfigDict(title="gfs-opt instance file")

    format: Literal["gfs-opt-instance"] = Field(description="always 'gfs-opt-instance'")
    version: Literal[1] = Field(description="format version; this is version 1")
    time: Seconds = Field(description="current time of the round (s since the trace origin)")
    params: ParamsIn = Field(default_factory=ParamsIn)
    pools: dict[str, PoolIn] = Field(default_factory=dict, description="feedback state per pool")
    nodes: list[NodeIn] = Field(min_length=1, description="nodes in any order; position = node index")
    jobs: list[JobIn] = Field(description="every job the round mentions")
    running: list[RunningIn] = Field(default_factory=list)
    pending_hp: list[int] = Field(default_factory=list, description="HP queue, in queue order")
    pending_lp: list[int] = Field(default_factory=list, description="LP queue, in queue order")
    queued_since: dict[int, Seconds] = Field(
        default_factory=dict, description="job id → time of its last (re)queue",
        json_schema_extra={"propertyNames": {"pattern": "^-?[0-9]+$"}})
    forecasts: dict[str, ForecastIn] = Field(default_factory=dict, description="per pool")
    quotas: list[QuotaIn] = Field(default_factory=list)
    reserves: list[ReserveIn] = Field(default_factory=list)
    node_evictions_1h: list[Count] | None = Field(
        None, description="LP evictions per node (node index order) over the last hour")
    node_evictions_1d: list[Count] | None = Field(
        None, description="LP evictions per node over the last day")
    quota_due: bool = Field(False, description="a quota refresh is due in this round")
    meta: dict[str, Any] = Field(
        default_factory=dict, description="free-form: source, notes, known optimum, …")


def json_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of the format, as committed in gfs_opt/schemas/."""
    schema = InstanceFile.model_json_schema(by_alias=True)
    head = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "description": (
            "One scheduling round of gfs_opt (see docs/instance-format.md). This schema checks "
            "structure only; gfs-opt instance validate also checks references between parts "
            "(pools, job ids, placements, GPU over-allocation)."),
    }
    return {**head, **{k: v for k, v in schema.items() if k != "description"}}


def json_schema_text() -> str:
    return json.dumps(json_schema(), indent=2, ensure_ascii=False) + "\n"


# ---- errors → one line each -------------------------------------------------------------------
_TYPE_WORDS = {
    "int_type": "must be an integer", "int_parsing": "must be an integer",
    "int_from_float": "must be an integer",
    "float_type": "must be a number", "float_parsing": "must be a number",
    "bool_type": "must be true or false", "bool_parsing": "must be true or false",
    "string_type": "must be a string", "list_type": "must be a list",
    "dict_type": "must be an object", "model_type": "must be an object",
    "model_attributes_type": "must be an object",
    "tuple_type": "must be a [node index, [GPU indices]] pair",
    "finite_number": "must be a finite number",
}
_BOUND_WORDS = {"greater_than_equal": ("≥", "ge"), "greater_than": (">", "gt"),
                "less_than_equal": ("≤", "le"), "less_than": ("<", "lt")}


def format_loc(loc: tuple[int | str, ...]) -> str:
    """('jobs', 3, 'workers') → 'jobs[3].workers'; non-identifier keys are quoted."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part == "[key]":
            out += " (key)"
        elif part.isidentifier():
            out += f".{part}" if out else part
        else:
            out += f"[{json.dumps(part, ensure_ascii=False)}]"
    return out or "(top level)"


def _short(value: Any, limit: int = 40) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _message(err: Any) -> str:
    kind, ctx = err["type"], err.get("ctx") or {}
    if kind == "json_invalid":
        return f"not valid JSON: {ctx.get('error', err.get('msg'))}"
    if kind == "missing":
        return "missing required field"
    if kind == "extra_forbidden":
        return "unknown field"
    if kind in _BOUND_WORDS:
        sign, key = _BOUND_WORDS[kind]
        return f"must be {sign} {ctx.get(key)} (got {_short(err.get('input'))})"
    if kind in _TYPE_WORDS:
        return f"{_TYPE_WORDS[kind]} (got {_short(err.get('input'))})"
    if kind == "literal_error":
        return f"must be {ctx.get('expected')} (got {_short(err.get('input'))})"
    if kind in ("too_short", "string_too_short"):
        return "must not be empty" if ctx.get("min_length") == 1 else \
            f"needs at least {ctx.get('min_length')} items"
    if kind == "too_long":
        return f"has more than {ctx.get('max_length')} items"
    return str(err.get("msg", kind)).rstrip(".")


def format_errors(exc: ValidationError) -> list[str]:
    """One short line per pydantic error: 'jobs[3].workers: must be ≥ 1 (got 0)'."""
    lines: list[str] = []
    for err in exc.errors(include_url=False):
        loc = tuple(err["loc"])
        line = f"{format_loc(loc)}: {_message(err)}" if loc else _message(err)
        if line not in lines:
            lines.append(line)
    return lines
