"""Instance files: one scheduling `Round` as versioned JSON (see docs/instance-format.md).

Reading goes text → JSON (duplicate keys and NaN rejected) → format/version check → pydantic
shape check (`gfs_opt.instance.schema`) → cross-reference checks (`gfs_opt.instance.check`) →
`Round`. Every problem becomes one line; nothing a user can put in a file produces a traceback.

Node indices in a file are positions in its ``nodes`` list, in any order. `ClusterState` keeps
nodes grouped by pool in sorted pool order, so loading remaps indices and saving always writes
that canonical order: save → load → save is byte-for-byte stable.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import ValidationError

from gfs_opt.errors import InputError
from gfs_opt.fileio import write_text, writing
from gfs_opt.instance.check import check_instance
from gfs_opt.instance.schema import FORMAT, VERSION, InstanceFile, format_errors
from gfs_opt.model import MILLI, Round, normalized

__all__ = [
    "FORMAT", "VERSION", "Instance", "dumps_round", "load_instance", "load_round",
    "round_from_dict", "round_to_dict", "save_round", "validate_dict", "validate_file",
]

_MAX_REPORTED = 3  # problems quoted in an InputError; `instance validate` prints them all
#: an instance file is one scheduling round: the largest shipped one is a few MB, a million jobs
#: fit in ~200 MB; beyond this the file is refused before it is read into memory
MAX_FILE_BYTES = 256 * 2**20
#: objects and arrays inside each other: the format itself nests 4 deep; ``meta`` is free-form
#: but a tree deeper than this is not metadata (and exhausts the parser's recursion)
MAX_DEPTH = 64


@dataclass
class Instance:
    """A loaded file: the round plus the file's free-form ``meta``."""

    round: Round
    meta: dict[str, Any] = field(default_factory=dict)


# ---- reading ----------------------------------------------------------------------------------
class _JsonProblem(ValueError):
    pass


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _JsonProblem(f"duplicate key {json.dumps(key, ensure_ascii=False)} in one object")
        out[key] = value
    return out


def _no_constant(name: str) -> Any:
    raise _JsonProblem(f"{name} is not allowed (JSON numbers must be finite)")


def _nesting(text: str) -> int:
    """How deep objects and arrays nest in a JSON text (strings skipped; vectorised)."""
    bare = _STRINGS.sub("", text).encode("utf-8", "replace")
    b = np.frombuffer(bare, dtype=np.uint8)
    step = (np.isin(b, (ord("["), ord("{"))).astype(np.int64)
            - np.isin(b, (ord("]"), ord("}"))).astype(np.int64))
    return int(np.cumsum(step).max()) if len(step) else 0


_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"')


def _parse_json(text: str) -> tuple[Any, list[str]]:
    depth = _nesting(text)
    if depth > MAX_DEPTH:
        return None, [f"nested {depth} levels deep; an instance file nests at most {MAX_DEPTH} "
                      f"(objects and arrays inside each other)"]
    try:
        return json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constant), []
    except json.JSONDecodeError as exc:
        return None, [f"not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"]
    except _JsonProblem as exc:
        return None, [f"not valid JSON: {exc}"]
    except RecursionError:
        return None, ["not valid JSON: nested too deeply"]


def _header_problems(raw: Any) -> list[str]:
    """Format and version first: for another kind of file, field-by-field errors are noise."""
    if not isinstance(raw, dict):
        kinds: dict[type, str] = {list: "an array", str: "a string"}
        kind = kinds.get(type(raw), "a single value")
        return [f"top level must be a JSON object, got {kind}"]
    fmt = raw.get("format")
    if fmt != FORMAT:
        if fmt is None:
            return [f"format: missing; not a gfs-opt instance file (expected \"format\": \"{FORMAT}\")"]
        return [f"format: {json.dumps(fmt, ensure_ascii=False)[:40]} is not \"{FORMAT}\""]
    version = raw.get("version")
    if version is None:
        return ["version: missing required field"]
    if type(version) is not int or version != VERSION:
        return [f"version: {json.dumps(version)[:20]} is not supported (this gfs-opt reads version {VERSION})"]
    return []


def _validate_text(text: str) -> tuple[Instance | None, list[str]]:
    raw, problems = _parse_json(text)
    if problems:
        return None, problems
    problems = _header_problems(raw)
    if problems:
        return None, problems
    try:
        model = InstanceFile.model_validate_json(text, strict=True)
    except ValidationError as exc:
        return None, format_errors(exc)
    # JSON keys "7" and "07" are different strings but the same job id
    if len(model.queued_since) != len(raw.get("queued_since") or {}):
        return None, ["queued_since: a job id appears twice"]
    rnd, problems = check_instance(model)
    if rnd is None:
        return None, problems
    return Instance(rnd, dict(model.meta)), []


def _read_text(path: Path) -> tuple[str | None, list[str]]:
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            return None, [f"file is {size / 2**20:,.0f} MB; instance files are limited to "
                          f"{MAX_FILE_BYTES // 2**20} MB (one scheduling round)"]
        data = path.read_bytes()
    except IsADirectoryError:
        return None, ["cannot read: is a directory"]
    except FileNotFoundError:
        return None, ["cannot read: no such file"]
    except OSError as exc:
        return None, [f"cannot read: {exc.strerror or exc}"]
    if not data.strip():
        return None, ["empty file"]
    try:
        return data.decode("utf-8"), []
    except UnicodeDecodeError as exc:
        return None, [f"not UTF-8 text (binary file?): bad byte at offset {exc.start}"]


def _load(path: Path) -> tuple[Instance | None, list[str]]:
    text, problems = _read_text(path)
    if text is None:
        return None, problems
    return _validate_text(text)


def validate_file(path: str | os.PathLike[str]) -> list[str]:
    """Every problem of an instance file, one line each; empty when the file is valid."""
    return _load(Path(path))[1]


def validate_dict(data: Mapping[str, Any]) -> list[str]:
    """Same checks as `validate_file` for an already parsed document."""
    return _from_mapping(data)[1]


def _raise(source: object, problems: list[str]) -> None:
    shown = "; ".join(problems[:_MAX_REPORTED])
    more = len(problems) - _MAX_REPORTED
    if more > 0:
        shown += f" (+{more} more; run 'gfs-opt instance validate' for all)"
    raise InputError(source, shown)


def load_instance(path: str | os.PathLike[str]) -> Instance:
    """Load a file into a `Round` plus its ``meta``; raises `InputError` if it is invalid."""
    inst, problems = _load(Path(path))
    if inst is None:
        _raise(path, problems)
    assert inst is not None
    return inst


def load_round(path: str | os.PathLike[str]) -> Round:
    """Load an instance file; raises `InputError` naming the first problems if it is invalid."""
    return load_instance(path).round


def _from_mapping(data: Mapping[str, Any]) -> tuple[Instance | None, list[str]]:
    try:
        text = json.dumps(data, allow_nan=False, ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        return None, [f"not JSON-serialisable: {exc}"]
    return _validate_text(text)


def round_from_dict(data: Mapping[str, Any], source: object = "<instance>") -> Round:
    """Build a `Round` from a parsed instance document; raises `InputError` if it is invalid."""
    inst, problems = _from_mapping(data)
    if inst is None:
        _raise(source, problems)
    assert inst is not None
    return inst.round


# ---- writing ----------------------------------------------------------------------------------
def _gpus(milli: int) -> int | float:
    """milli-GPU → GPU units, an int when whole so files read naturally (4, 0.5)."""
    milli = int(milli)
    return milli // MILLI if milli % MILLI == 0 else milli / MILLI


def _canonical_order(rnd: Round) -> list[int]:
    st = rnd.state
    return sorted(range(st.n_nodes), key=lambda n: (st.pools[int(st.node_pool[n])], n))


def round_to_dict(rnd: Round, meta: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The instance document of a round (plain JSON types, canonical node order).

    Raises ValueError for rounds that no file can represent (a job keyed under another id, a
    running job whose placement disagrees with the cluster state, a multi-GPU request that is
    not a whole number of GPUs).
    """
    st = rnd.state
    order = _canonical_order(rnd)
    new_index = {old: new for new, old in enumerate(order)}
    jobs = []
    for jid, job in rnd.jobs.items():
        if int(jid) != job.id:
            raise ValueError(f"Round.jobs key {jid} holds job {job.id}")
        if job.g >= MILLI and job.g % MILLI:
            raise ValueError(f"job {job.id}: request of {job.g} milli-GPU is above one GPU but not whole")
        jobs.append({"id": int(job.id), "org": str(job.org), "pool": str(job.pool),
                     "class": str(job.cls), "gpus_per_worker": _gpus(job.g),
                     "workers": int(job.workers), "submit": float(job.submit),
                     "duration": float(job.duration), "guarantee_h": float(job.guarantee_h),
                     "cpu": float(job.cpu)})
    if set(st.alloc) != set(rnd.running):
        extra = sorted(set(st.alloc) ^ set(rnd.running))[:5]
        raise ValueError(f"cluster state and Round.running disagree on jobs {extra}")
    running = []
    for jid, rj in rnd.running.items():
        placement = [[new_index[int(n)], [int(g) for g in gpus]] for n, gpus in rj.placement]
        if normalized(rj.placement) != st.alloc[jid][2]:
            raise ValueError(f"job {jid}: RunningJob.placement differs from the cluster state")
        running.append({"job": int(rj.job.id), "start": float(rj.start),
                        "last_ckpt": float(rj.last_ckpt), "window_start": float(rj.window_start),
                        "evictions": int(rj.evictions), "placement": placement})
    p = rnd.params
    params = {
        "rho": float(p.rho), "horizon_h": int(p.horizon_h),
        "guarantee_classes": [float(d) for d in p.guarantee_classes],
        "quota_refresh_s": float(p.quota_refresh_s), "eta_min": float(p.eta_min),
        "eta_max": float(p.eta_max),
        "eval_start": float(p.eval_start),
        "eval_end": float(p.eval_end) if math.isfinite(p.eval_end) else None,
        "restart_small_s": float(p.restart_small_s), "restart_large_s": float(p.restart_large_s),
        "hard_guarantee": bool(p.hard_guarantee),
        "quota_after_window": bool(p.quota_after_window),
    }
    pools = {str(name): {"eta": float(s.eta), "failed": int(s.failed),
                         "succeeded": int(s.succeeded), "oldest_lp_wait": float(s.oldest_lp_wait),
                         "has_hp_history": bool(s.has_hp_history),
                         # only where the shape reserve has something to start from
                         **({"hp_whole_gpus": float(s.hp_whole_gpus)} if s.hp_whole_gpus else {})}
             for name, s in rnd.pools.items()}
    forecasts = {str(name): {"mean": [float(x) for x in f.mean], "std": [float(x) for x in f.std],
                             "samples": None if f.samples is None
                             else [[float(x) for x in row] for row in f.samples]}
                 for name, f in rnd.forecasts.items()}

    def per_node(arr: np.ndarray | None) -> list[int] | None:
        return None if arr is None else [int(arr[old]) for old in order]

    return {
        "format": FORMAT,
        "version": VERSION,
        "time": float(rnd.time),
        "params": params,
        "pools": pools,
        "nodes": [{"name": str(st.node_names[n]), "pool": st.pools[int(st.node_pool[n])],
                   "gpus": int(st.node_gpus[n])} for n in order],
        "jobs": jobs,
        "running": running,
        "pending_hp": [int(j) for j in rnd.pending_hp],
        "pending_lp": [int(j) for j in rnd.pending_lp],
        "queued_since": {str(int(j)): float(t) for j, t in rnd.queued_since.items()},
        "forecasts": forecasts,
        "quotas": [{"pool": str(pool), "class_h": float(d), "gpus": _gpus(q)}
                   for (pool, d), q in rnd.quotas.items()],
        # only where a policy holds whole nodes back (files of other rounds stay as they were)
        **({"reserves": [{"pool": str(pool), "class_h": float(d), "nodes": int(r)}
                         for (pool, d), r in rnd.reserves.items()]} if rnd.reserves else {}),
        "node_evictions_1h": per_node(rnd.node_evictions_1h),
        "node_evictions_1d": per_node(rnd.node_evictions_1d),
        "quota_due": bool(rnd.quota_due),
        "meta": dict(meta or {}),
    }


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, allow_nan=False)


def dumps_document(doc: Mapping[str, Any]) -> str:
    """Canonical text: one line per node, job, running job, pool, forecast and quota.

    Line-per-record keeps large files readable and makes diffs of two rounds meaningful.
    """
    parts = []
    for key, value in doc.items():
        if key == "meta" and value:
            body = json.dumps(value, ensure_ascii=False, allow_nan=False, indent=2).replace("\n", "\n  ")
        elif isinstance(value, list) and value and isinstance(value[0], dict | list):
            body = "[\n" + ",\n".join(f"    {_dump(v)}" for v in value) + "\n  ]"
        elif isinstance(value, dict) and value and key != "queued_since":
            body = "{\n" + ",\n".join(f"    {_dump(k)}: {_dump(v)}" for k, v in value.items()) + "\n  }"
        else:
            body = _dump(value)
        parts.append(f"  {_dump(key)}: {body}")
    return "{\n" + ",\n".join(parts) + "\n}\n"


def dumps_round(rnd: Round, meta: Mapping[str, Any] | None = None) -> str:
    """The canonical file text of a round."""
    return dumps_document(round_to_dict(rnd, meta))


def save_round(rnd: Round, path: str | os.PathLike[str], meta: Mapping[str, Any] | None = None,
               *, check: bool = True) -> Path:
    """Write a round atomically (temp file + rename). With ``check``, the text is validated
    first, so a file written here always loads; raises ValueError listing the problems."""
    text = dumps_round(rnd, meta)
    if check:
        _inst, problems = _validate_text(text)
        if problems:
            raise ValueError("round cannot be saved as a valid instance: " + "; ".join(problems[:5]))
    target = Path(path)
    with writing(target):
        target.parent.mkdir(parents=True, exist_ok=True)
    return write_text(target, text)
