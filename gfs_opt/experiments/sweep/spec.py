"""Sweep spec files (TOML or YAML): schema, one-line errors, and expansion into cells.

A spec names one or more trace sources (``setup`` or ``trace``), ``policies``, LP ``loads`` and
``seeds``, plus policy ``[options]`` and engine ``[params]``. Every list-valued key is a grid
axis; the grid is their cartesian product. An option applies only to the policies whose
constructor takes it (and do not fix it, like ``gfs-week-peak``'s forecaster), so e.g. a
forecaster axis does not multiply the baselines. ``params.guarantee_classes`` is itself a list:
a flat list is one value, a list of lists is an axis.

Each cell is one simulation (`RunSpec`). Its id hashes the cell's canonical `RunSpec`, so the
same simulation gets the same id whatever spec file produced it; ids name result folders and
make ``--resume`` safe.
"""

from __future__ import annotations

import datetime as dt
import difflib
import hashlib
import importlib
import importlib.util
import inspect
import itertools
import json
import math
import tomllib
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Annotated, Any, TypeVar

import pandas as pd
import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictStr,
    ValidationError,
    field_validator,
    model_validator,
)

from gfs_opt.errors import GfsError, InputError
from gfs_opt.experiments.runner import RunSpec
from gfs_opt.experiments.setups import LOADS, SETUPS
from gfs_opt.forecast.registry import MODELS
from gfs_opt.instance.schema import format_loc
from gfs_opt.model import Params
from gfs_opt.paths import data_dir
from gfs_opt.policies import (
    POLICIES,
    make_policy,
    parse_policy,
    policy_name,
    settable_options,
)
from gfs_opt.traces.base import check_time
from gfs_opt.traces.load import REF_TOY
from gfs_opt.traces.synth import SETUPS as SYNTH

DEFAULT_PARAMS = Params()

SPEC_SUFFIXES = (".toml", ".yaml", ".yml")
#: bump when the meaning of a cell id changes (old result folders then stop matching)
ID_VERSION = 2


# ---- normalisers --------------------------------------------------------------------------
def _as_list(value: Any) -> Any:
    """A scalar means a one-value axis."""
    if value is None or isinstance(value, list | tuple):
        return value
    return [value]


def _as_class_sets(value: Any) -> Any:
    """guarantee_classes: a number or flat list is one set; a list of lists is an axis of sets."""
    if isinstance(value, list | tuple) and value and all(isinstance(v, list | tuple) for v in value):
        return [list(v) for v in value]
    if isinstance(value, list | tuple):
        return [list(value)]
    return [[value]] if value is not None else value


def _dates_to_text(value: Any) -> Any:
    """TOML and YAML turn bare dates into date objects; times are dates or seconds as text."""
    if isinstance(value, dt.datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S")
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, list | tuple):
        return [_dates_to_text(v) for v in value]
    return value


def _number(value: Any) -> Any:
    """Numbers only: spec files have real types, so "1" or true where a number belongs is a typo."""
    if isinstance(value, bool | str) or value is None:
        raise ValueError(f"expected a number, got {_short(value)}")
    return value


Axis = Annotated[list[Any], BeforeValidator(_as_list), Field(min_length=1)]
Float = Annotated[float, BeforeValidator(_number), Field(allow_inf_nan=False)]
Int = Annotated[int, BeforeValidator(_number)]
PosFloat = Annotated[Float, Field(gt=0)]
NonNegFloat = Annotated[Float, Field(ge=0)]


_T = TypeVar("_T")
#: a grid axis of items of type T: one value or a non-empty list of them
AxisOf = Annotated[list[_T], BeforeValidator(_as_list), Field(min_length=1)]


class ParamsSpec(BaseModel):
    """`gfs_opt.model.Params` knobs; each one a value or a list (grid axis)."""

    model_config = ConfigDict(extra="forbid")

    rho: AxisOf[Annotated[Float, Field(gt=0, lt=1)]] | None = None
    horizon_h: AxisOf[Annotated[Int, Field(ge=1, le=168)]] | None = None
    guarantee_classes: Annotated[list[Annotated[list[PosFloat], Field(min_length=1)]],
                                 BeforeValidator(_as_class_sets), Field(min_length=1)] | None = None
    quota_refresh_s: AxisOf[PosFloat] | None = None
    eta_min: AxisOf[PosFloat] | None = None
    eta_max: AxisOf[PosFloat] | None = None
    restart_small_s: AxisOf[NonNegFloat] | None = None
    restart_large_s: AxisOf[NonNegFloat] | None = None
    hard_guarantee: AxisOf[StrictBool] | None = None
    quota_after_window: AxisOf[StrictBool] | None = None

    def axes(self) -> dict[str, list[Any]]:
        return {k: v for k, v in self.model_dump().items() if v is not None}


def _scalar(value: Any) -> Any:
    if not isinstance(value, str | bool | int | float) or (
            isinstance(value, float) and not math.isfinite(value)):
        raise ValueError(f"policy options take numbers, strings or booleans, got {_short(value)}")
    return value


OptionValue = Annotated[Any, AfterValidator(_scalar)]


class SweepSpec(BaseModel):
    """The whole spec file (see the module docstring)."""

    model_config = ConfigDict(extra="forbid")

    name: Annotated[StrictStr, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")] | None = None
    setup: AxisOf[StrictStr] | None = None
    trace: AxisOf[StrictStr] | None = None
    window: Annotated[list[Any], BeforeValidator(_dates_to_text),
                      Field(min_length=2, max_length=2)] | None = None
    replay_from: Annotated[Any, BeforeValidator(_dates_to_text)] = None
    pools: Annotated[list[StrictStr], BeforeValidator(_as_list), Field(min_length=1)] | None = None
    policies: AxisOf[StrictStr]
    loads: Axis = Field(default_factory=lambda: ["medium"])
    seeds: AxisOf[Annotated[Int, Field(ge=0, lt=2**32)]] = Field(default_factory=lambda: [0])
    options: dict[StrictStr, AxisOf[OptionValue]] = Field(default_factory=dict)
    params: ParamsSpec = Field(default_factory=ParamsSpec)
    imports: list[StrictStr] = Field(default_factory=list)
    check_invariants: StrictBool = False
    drain_days: Annotated[NonNegFloat, Field(le=365)] = 3.0
    price_per_gpu_hour: NonNegFloat = 2.0
    capacity_scale: Annotated[PosFloat, Field(le=100)] = 1.0
    time_scale: Annotated[PosFloat, Field(le=10_000)] = 1.0
    memory_gb: PosFloat | None = None

    @field_validator("setup")
    @classmethod
    def _known_setup(cls, v: list[str] | None) -> list[str] | None:
        for s in v or ():
            if s not in SETUPS:
                raise ValueError(f"unknown setup {s!r}; choose from {', '.join(SETUPS)}")
        return v

    @field_validator("loads")
    @classmethod
    def _known_loads(cls, v: list[Any]) -> list[Any]:
        for x in v:
            _load_value(x)
        return v

    @field_validator("window")
    @classmethod
    def _times(cls, v: list[Any] | None) -> list[Any] | None:
        for x in v or ():
            _check_time(x)
        if v is not None:
            _check_order(v[0], v[1])
        return v

    @field_validator("replay_from")
    @classmethod
    def _time(cls, v: Any) -> Any:
        if v is not None:
            _check_time(v)
        return v

    @model_validator(mode="after")
    def _one_source(self) -> SweepSpec:
        if (self.setup is None) == (self.trace is None):
            raise ValueError("give exactly one of 'setup' (named setups) or 'trace' (sources)")
        lo, hi = _eta_bounds({}, self.params.eta_min or [None], self.params.eta_max or [None])
        if lo > hi:
            raise ValueError("params: every eta_min is above every eta_max (defaults "
                             f"{DEFAULT_PARAMS.eta_min:g}, {DEFAULT_PARAMS.eta_max:g})")
        return self


def _eta_bounds(params: dict[str, Any], lows: list[Any] | None = None,
                highs: list[Any] | None = None) -> tuple[float, float]:
    """(smallest eta_min, largest eta_max) over the given values, defaults filled in."""
    lows = lows if lows is not None else [params.get("eta_min")]
    highs = highs if highs is not None else [params.get("eta_max")]
    lo = min(DEFAULT_PARAMS.eta_min if v is None else v for v in lows)
    hi = max(DEFAULT_PARAMS.eta_max if v is None else v for v in highs)
    return lo, hi


def _short(x: Any) -> str:
    text = repr(x)
    return text if len(text) <= 40 else text[:37] + "..."


def _check_order(start: Any, end: Any) -> None:
    """A window ends after it starts (caught here, before any cell runs). Two dates or two
    numbers compare without knowing the trace; a date against seconds depends on the trace's
    origin and is checked when the cell's trace is loaded."""
    def as_number(x: Any) -> float | None:
        try:
            return float(x)
        except (TypeError, ValueError):
            return None

    a, b = as_number(start), as_number(end)
    if a is None and b is None:
        reversed_ = pd.Timestamp(str(end)) <= pd.Timestamp(str(start))
    else:
        reversed_ = a is not None and b is not None and b <= a
    if reversed_:
        raise ValueError(f"end {end} is not after start {start}")


def _check_time(x: Any) -> None:
    """A date (YYYY-MM-DD[ HH:MM]) or seconds ≥ 0, as `setups.parse_time` reads them (the rule
    of `--window` on the command line too: `traces.base.check_time`)."""
    check_time(x)


def _load_value(x: Any) -> tuple[str, float]:
    """A load name or multiplier → (label, factor)."""
    if isinstance(x, str) and x in LOADS:
        return x, LOADS[x]
    if (isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)
            and 0 <= x <= 100):
        return f"x{x:g}", float(x)
    raise ValueError(f"unknown load {_short(x)}: use {', '.join(LOADS)} or a number in [0, 100]")


# ---- loading ------------------------------------------------------------------------------
def load_spec_file(path: Path) -> tuple[SweepSpec, str]:
    """Read and validate a spec file; returns the spec and the file's text (kept with results)."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in SPEC_SUFFIXES:
        raise InputError(path, f"unknown spec format {path.suffix or '(none)'!r}; use "
                               f"{', '.join(SPEC_SUFFIXES)}")
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(path, "no such file") from None
    except IsADirectoryError:
        raise InputError(path, "is a folder, not a spec file") from None
    except UnicodeDecodeError:
        raise InputError(path, "not a UTF-8 text file") from None
    except OSError as exc:
        raise InputError(path, f"cannot read ({exc.strerror or exc})") from None
    doc = _parse(path, text, suffix)
    return validate_spec(doc, path), text


def _parse(path: Path, text: str, suffix: str) -> Any:
    try:
        if suffix == ".toml":
            return tomllib.loads(text)

        return yaml.safe_load(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(path, f"invalid TOML: {_one_line(str(exc))}") from None
    except RecursionError:
        raise InputError(path, "nested too deeply") from None
    except Exception as exc:  # yaml.YAMLError and the odd scanner ValueError
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc)
        row = mark.line + 1 if mark is not None else None
        raise InputError(path, f"invalid YAML: {_one_line(problem)}", row=row) from None


def _one_line(text: str) -> str:
    return " ".join(text.split()) or "unreadable"


def validate_spec(doc: Any, source: object = "<spec>") -> SweepSpec:
    """Validate a parsed document; every problem is one line naming the key."""
    if not isinstance(doc, dict):
        raise InputError(source, "the spec must be a table of keys (e.g. policies = [...])")
    try:
        spec = SweepSpec.model_validate(doc)
    except ValidationError as exc:
        raise InputError(source, _first_error(exc)) from None
    except RecursionError:
        raise InputError(source, "nested too deeply") from None
    _check_policies(spec, source)
    return spec


def _first_error(exc: ValidationError) -> str:
    errors = exc.errors(include_url=False)
    # an unknown key is usually the typo behind a "required key missing": report it first
    err = min(errors, key=lambda e: e["type"] != "extra_forbidden")
    # keys are quoted where they are not identifiers: a key with a newline stays on one line
    loc = format_loc(tuple(err["loc"])) if err["loc"] else ""
    msg = str(err["msg"]).removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        msg = "unknown key" + _did_you_mean(err["loc"])
    elif err["type"] == "missing":
        msg = "required key missing"
    more = len(exc.errors()) - 1
    tail = f" (+{more} more problem{'s' if more > 1 else ''})" if more else ""
    return (f"key '{loc}': {msg}" if loc else msg) + tail


def _did_you_mean(loc: tuple[Any, ...]) -> str:
    model: type[BaseModel] = SweepSpec
    if len(loc) == 2 and loc[0] == "params":
        model = ParamsSpec
    elif len(loc) != 1:
        return ""
    close = difflib.get_close_matches(str(loc[-1]), list(model.model_fields), n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else f" (known: {', '.join(model.model_fields)})"


def _check_policies(spec: SweepSpec, source: object) -> None:

    for i, module in enumerate(spec.imports):
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            raise InputError(source, f"key 'imports[{i}]': no module named {module!r}")
        try:
            importlib.import_module(module)
        except Exception as exc:
            raise InputError(source, f"key 'imports[{i}]': importing {module!r} failed: "
                                     f"{type(exc).__name__}: {_one_line(str(exc))}") from None
    for i, pol in enumerate(spec.policies):
        try:
            parse_policy(pol)
        except GfsError as exc:
            raise InputError(source, f"key 'policies[{i}]': {exc}") from None
    for key in spec.options:
        if not any(key in _settable(p) for p in spec.policies):
            raise InputError(source, f"key 'options.{key}': no policy of this sweep takes it")
    if "forecaster" in spec.options:

        for i, name in enumerate(spec.options["forecaster"]):
            if name not in MODELS:
                raise InputError(source, f"key 'options.forecaster[{i}]': unknown forecaster "
                                         f"{_short(name)}; choose from {', '.join(MODELS)}")
    for pol in spec.policies:   # constructor checks (bad option values) before any cell runs
        for opts in _option_combos(spec, pol):
            try:
                make_policy(pol, **opts)
            except GfsError as exc:
                raise InputError(source, f"key 'options': {exc}") from None
            except (ValueError, TypeError) as exc:
                raise InputError(source, f"key 'options': policy {pol!r}: {exc}") from None


def _settable(policy: str) -> set[str]:
    """The options a sweep's ``[options]`` may set on ``policy`` (a spec, maybe with its own
    ``[key=value]`` options, which the grid does not override)."""
    name, own = parse_policy(policy)
    return settable_options(name) - set(own)


def _option_combos(spec: SweepSpec, policy: str) -> list[dict[str, Any]]:
    keys = [k for k in spec.options if k in _settable(policy)]
    return [dict(zip(keys, vals, strict=True))
            for vals in itertools.product(*(spec.options[k] for k in keys))]


# ---- cells --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Cell:
    """One simulation of the grid: its id, the parameters shown in tables, and its `RunSpec`."""

    id: str
    params: dict[str, Any]
    spec: RunSpec
    imports: tuple[str, ...] = field(default_factory=tuple)


def cell_id(spec: RunSpec, imports: tuple[str, ...] = ()) -> str:
    """Hash of the canonical simulation parameters (invariant checks do not change results)."""
    doc = asdict(spec)
    doc.pop("check_invariants")
    doc["id_version"] = ID_VERSION
    if imports:
        doc["imports"] = list(imports)
    text = json.dumps(doc, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _source(spec: SweepSpec, base_dir: Path) -> list[tuple[str, str, RunSpec]]:
    """(column, shown value, base RunSpec) per trace source."""
    out = []
    if spec.setup is not None:
        for s in spec.setup:
            out.append(("setup", s, RunSpec.from_setup(s)))
    else:
        for i, t in enumerate(spec.trace or ()):
            out.append(("trace", t, RunSpec(trace=resolve_trace(t, base_dir, f"trace[{i}]"))))
    return out


#: a trace path that starts with this is read from the data folder (`gfs_opt.paths.data_dir`),
#: so a spec names an optional trace the same way on every machine
DATA_DIR_PREFIX = "$GFS_DATA_DIR/"


def resolve_trace(text: str, base_dir: Path, key: str) -> str:
    """A path (relative to the spec file's folder, or under ``$GFS_DATA_DIR/``) or a built-in
    trace name."""
    if text.startswith(DATA_DIR_PREFIX):
        text = str(data_dir() / text.removeprefix(DATA_DIR_PREFIX))
    candidate = Path(text).expanduser()
    if not candidate.is_absolute():
        candidate = base_dir / candidate
    if candidate.exists():
        return str(candidate.resolve())
    if text == REF_TOY or text in SYNTH:
        return text
    raise GfsError(f"key '{key}': {text!r} is neither an existing file or folder (relative to "
                   f"{base_dir}) nor a built-in trace ({', '.join([*SYNTH, REF_TOY])})")


def _display(value: Any) -> Any:
    if isinstance(value, list | tuple):
        return ",".join(f"{v:g}" if isinstance(v, float) else str(v) for v in value)
    return value


#: the largest grid `expand` builds unless told otherwise (`gfs-opt sweep --max-cells`): every
#: cell is a simulation of seconds to hours, so a bigger grid is almost always a typo in an axis,
#: and listing or hashing millions of cells alone takes minutes
MAX_CELLS = 10_000


def grid_size(spec: SweepSpec) -> int:
    """How many cells the grid has at most (before duplicates and impossible η corners are
    dropped), computed from the axis lengths without building a cell."""
    sources = len(spec.setup or spec.trace or ())
    params = math.prod(len(v) for v in spec.params.axes().values())
    per_policy = sum(math.prod(len(spec.options[k]) for k in spec.options
                               if k in _settable(policy)) for policy in spec.policies)
    return sources * len(spec.loads) * params * per_policy * len(spec.seeds)


def expand(spec: SweepSpec, base_dir: Path = Path("."), check_invariants: bool = False,
           source: object = "<spec>", max_cells: int | None = MAX_CELLS) -> list[Cell]:
    """All cells of the grid in a stable order (sources, loads, params, policies, options,
    seeds innermost); cells that are the same simulation appear once. A grid of more than
    ``max_cells`` cells is refused before any is built (None: no limit)."""
    if max_cells is not None and (n := grid_size(spec)) > max_cells:
        raise InputError(source, f"the grid has {n:,} cells, more than the limit of "
                                 f"{max_cells:,} (--max-cells raises it)")
    try:
        sources = _source(spec, base_dir)
    except GfsError as exc:
        raise InputError(source, str(exc)) from None
    loads = [_load_value(x) for x in spec.loads]
    p_axes = spec.params.axes()
    p_keys = list(p_axes)
    o_keys = list(spec.options)
    cells: list[Cell] = []
    seen: set[str] = set()
    for (col, shown, base), (label, factor), p_vals in itertools.product(
            sources, loads, itertools.product(*(p_axes[k] for k in p_keys))):
        params = dict(zip(p_keys, p_vals, strict=True))
        if "guarantee_classes" in params:
            params["guarantee_classes"] = tuple(float(c) for c in params["guarantee_classes"])
        lo, hi = _eta_bounds(params)
        if lo > hi:
            continue   # an impossible corner of the grid
        for policy in spec.policies:
            for opts in _option_combos(spec, policy):
                for seed in spec.seeds:
                    run = replace(
                        base, policy=policy, policy_options=_non_default_options(policy, opts),
                        lp_load=factor, seed=int(seed), params=_non_default_params(params),
                        check_invariants=spec.check_invariants or check_invariants,
                        drain_days=spec.drain_days, price_per_gpu_hour=spec.price_per_gpu_hour,
                        capacity_scale=spec.capacity_scale, time_scale=spec.time_scale)
                    if spec.window is not None:
                        run = replace(run, window=tuple(spec.window))
                    if spec.replay_from is not None:
                        run = replace(run, replay_from=spec.replay_from)
                    if spec.pools is not None:
                        run = replace(run, pools=tuple(spec.pools))
                    cid = cell_id(run, tuple(spec.imports))
                    if cid in seen:
                        continue
                    seen.add(cid)
                    shown_params: dict[str, Any] = {col: shown, "policy": policy, "load": label,
                                                    "lp_load": factor}
                    for k in o_keys:
                        shown_params[k] = opts.get(k)
                    for k in p_keys:
                        shown_params[k] = _display(params[k])
                    shown_params["seed"] = int(seed)
                    cells.append(Cell(cid, shown_params, run, tuple(spec.imports)))
    if not cells:
        raise InputError(source, "the grid is empty")
    return cells


def _non_default_params(params: dict[str, Any]) -> dict[str, Any]:
    """Canonical form: a parameter set to its default is the same simulation as one left out."""
    return {k: v for k, v in params.items() if getattr(DEFAULT_PARAMS, k) != v}


def _non_default_options(policy: str, opts: dict[str, Any]) -> dict[str, Any]:

    cls, _fixed = POLICIES[policy_name(policy)]
    defaults: dict[str, Any] = {}
    for klass in reversed(cls.__mro__):
        init = klass.__dict__.get("__init__")
        if init is not None:
            defaults |= {p.name: p.default for p in inspect.signature(init).parameters.values()
                         if p.default is not inspect.Parameter.empty}
    return {k: v for k, v in opts.items() if k not in defaults or defaults[k] != v
            or type(defaults[k]) is not type(v)}


def memory_hint_mb(spec: RunSpec, override_gb: float | None = None) -> int:
    """Per-cell memory for Ray's scheduler: twice the peak RSS of one run of that trace."""
    if override_gb is not None:
        return int(override_gb * 1024)
    # peak RSS in MB of one simulation process (gfs, 2026-11-29; BENCHMARKS.md for full scale)
    measured = {"small": 250, "ref-toy": 230, "paper-a100": 370, "synthetic": 1130}
    if spec.trace in measured:
        return 2 * measured[spec.trace]
    path = Path(spec.trace)
    size = sum(f.stat().st_size for f in path.glob("*.csv")) if path.is_dir() else (
        path.stat().st_size if path.exists() else 0)
    return int(800 + 40 * size / 2**20)   # ~40 MB of tables per MB of CSV, measured on synthetic
