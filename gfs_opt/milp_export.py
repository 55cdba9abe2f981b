"""A MathOpt model as LP or MPS text that other solvers read the same way.

OR-Tools' own writers round every coefficient to six significant digits and keep a maximising
objective as ``OBJSENSE MAX``, which CBC ignores (it minimises), and write ``UI`` bounds, which
PuLP cannot read. This writer keeps what every reader we test against (PuLP, CBC, HiGHS and
OR-Tools itself) understands alike:

* the **minimisation form**: a maximised objective is written negated, so the file's optimum is
  the model's optimum with its sign flipped (the header says so);
* full precision (Python's shortest round-trip repr of each number);
* bounds as ``LO``/``UP``/``FX``/``FR``/``MI``/``BV`` only, every integer column's upper bound written
  out, a ranged row as two rows (``NAME_lo``, ``NAME_hi``), and an objective offset as the
  coefficient of a column fixed at 1 (``OBJ_CONSTANT``);
* names reduced to letters, digits and ``_`` (made unique), never starting with a digit or an
  ``e`` (LP readers take those for numbers).
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from dataclasses import dataclass

from ortools.math_opt import model_pb2

from gfs_opt.errors import GfsError

FORMATS = ("lp", "mps")
OFFSET_COLUMN = "OBJ_CONSTANT"
_BIG = 1e30                    # "no upper bound" for integer columns (CBC and HiGHS read it so)


@dataclass(frozen=True)
class _Row:
    name: str
    sense: str                 # "L", "G" or "E"
    rhs: float
    terms: list[tuple[int, float]]   # (column index, coefficient)


def _num(x: float) -> str:
    if x == math.floor(x) and abs(x) < 1e15:
        return str(int(x))
    return repr(float(x))


def _names(raw: list[str], prefix: str) -> list[str]:
    out: list[str] = []
    seen: set[str] = set()
    for i, name in enumerate(raw):
        clean = re.sub(r"[^A-Za-z0-9_]", "_", name) or f"{prefix}{i}"
        if clean[0].isdigit() or clean[0] in "eE":
            clean = f"{prefix}_{clean}"
        base, k = clean, 1
        while clean in seen or clean == OFFSET_COLUMN:
            clean, k = f"{base}_{k}", k + 1
        seen.add(clean)
        out.append(clean)
    return out


class _Flat:
    """The proto's columns, objective and rows, by position, in the minimisation form."""

    def __init__(self, proto: model_pb2.ModelProto) -> None:
        for field in ("quadratic_constraints", "second_order_cone_constraints",
                      "sos1_constraints", "sos2_constraints", "indicator_constraints"):
            if len(getattr(proto, field)):
                raise GfsError(f"cannot export a model with {field.replace('_', ' ')}")
        if len(proto.objective.quadratic_coefficients.row_ids):
            raise GfsError("cannot export a model with a quadratic objective")
        v = proto.variables
        self.name = re.sub(r"\s", "_", proto.name) or "model"
        self.maximize = bool(proto.objective.maximize)
        sign = -1.0 if self.maximize else 1.0
        self.cols = _names(list(v.names), "x")
        self.lb, self.ub = list(v.lower_bounds), list(v.upper_bounds)
        self.integer = list(v.integers)
        pos = {vid: i for i, vid in enumerate(v.ids)}
        self.obj = [0.0] * len(self.cols)
        lin = proto.objective.linear_coefficients
        for vid, c in zip(lin.ids, lin.values, strict=True):
            self.obj[pos[vid]] = sign * c
        self.offset = sign * proto.objective.offset
        cons = proto.linear_constraints
        row_pos = {cid: i for i, cid in enumerate(cons.ids)}
        terms: list[list[tuple[int, float]]] = [[] for _ in cons.ids]
        mat = proto.linear_constraint_matrix
        for r, c, a in zip(mat.row_ids, mat.column_ids, mat.coefficients, strict=True):
            terms[row_pos[r]].append((pos[c], a))
        self.rows: list[_Row] = []
        names = _names(list(cons.names), "c")
        for name, lo, hi, t in zip(names, cons.lower_bounds, cons.upper_bounds, terms,
                                   strict=True):
            if lo == hi:
                self.rows.append(_Row(name, "E", lo, t))
            elif math.isinf(lo) and math.isinf(hi):
                continue                                   # a free row binds nothing
            elif math.isinf(lo):
                self.rows.append(_Row(name, "L", hi, t))
            elif math.isinf(hi):
                self.rows.append(_Row(name, "G", lo, t))
            else:                                           # ranged: two rows every reader knows
                self.rows.append(_Row(f"{name}_lo", "G", lo, t))
                self.rows.append(_Row(f"{name}_hi", "L", hi, t))

    def header(self, comment: str) -> list[str]:
        sense = ("the model maximises: this file minimises the negated objective, so its optimum "
                 "is minus the model's" if self.maximize else "the model minimises, as this file")
        lines = [f"{comment} {self.name}: {len(self.cols)} columns, {len(self.rows)} rows",
                 f"{comment} {sense}"]
        if self.offset:
            lines.append(f"{comment} objective constant {_num(self.offset)}: the coefficient of "
                         f"column {OFFSET_COLUMN}, fixed at 1")
        return lines

    def binary(self, i: int) -> bool:
        return self.integer[i] and self.lb[i] == 0 and self.ub[i] == 1


def _lp_expr(terms: list[tuple[str, float]]) -> list[str]:
    """`+ a x` pieces, several to a line (LP readers cap line length)."""
    pieces = [f"{'-' if a < 0 else '+'} {_num(abs(a))} {x}" for x, a in terms]
    return [" ".join(pieces[i:i + 8]) for i in range(0, len(pieces), 8)] or ["0"]


def to_lp(proto: model_pb2.ModelProto) -> str:
    f = _Flat(proto)
    out = [*f.header("\\"), "Minimize"]
    obj = [(f.cols[i], c) for i, c in enumerate(f.obj) if c]
    if f.offset:
        obj.append((OFFSET_COLUMN, f.offset))
    if not obj and f.cols:
        obj = [(f.cols[0], 0.0)]
    lines = _lp_expr(obj)
    out.append(f" obj: {lines[0]}")
    out += [f"   {ln}" for ln in lines[1:]]
    out.append("Subject To")
    op = {"L": "<=", "G": ">=", "E": "="}
    for row in f.rows:
        t = [(f.cols[i], a) for i, a in row.terms if a] or [(f.cols[0], 0.0)]
        lines = _lp_expr(t)
        out.append(f" {row.name}: {lines[0]}" + ("" if len(lines) > 1 else
                                                   f" {op[row.sense]} {_num(row.rhs)}"))
        if len(lines) > 1:
            out += [f"   {ln}" for ln in lines[1:-1]]
            out.append(f"   {lines[-1]} {op[row.sense]} {_num(row.rhs)}")
    out.append("Bounds")
    for i, name in enumerate(f.cols):
        lo, hi = f.lb[i], f.ub[i]
        if f.binary(i) or (lo == 0 and math.isinf(hi)):     # the format's default bounds
            continue
        if lo == hi:
            out.append(f" {name} = {_num(lo)}")
        elif math.isinf(lo) and math.isinf(hi):
            out.append(f" {name} free")
        else:
            left = "-inf" if math.isinf(lo) else _num(lo)
            right = "+inf" if math.isinf(hi) else _num(hi)
            out.append(f" {left} <= {name} <= {right}")
    if f.offset:
        out.append(f" {OFFSET_COLUMN} = 1")
    general = [n for i, n in enumerate(f.cols) if f.integer[i] and not f.binary(i)]
    binary = [n for i, n in enumerate(f.cols) if f.binary(i)]
    for title, names in (("Generals", general), ("Binaries", binary)):
        if names:
            out.append(title)
            out += [" " + " ".join(names[i:i + 8]) for i in range(0, len(names), 8)]
    out.append("End")
    return "\n".join(out) + "\n"


def _field(first: str, second: str, value: float) -> str:
    """A COLUMNS / RHS line in the fixed format's columns (longer names push the rest right;
    every reader here then reads it as free format)."""
    return f"    {first:<8}  {second:<8}  {_num(value)}"


def _bound(kind: str, column: str, value: float | None = None) -> str:
    line = f" {kind} BND       {column}"
    return line if value is None else f"{line:<24}  {_num(value)}"


def to_mps(proto: model_pb2.ModelProto) -> str:
    f = _Flat(proto)
    out = [*(f"* {ln[2:]}" for ln in f.header("*")), f"NAME          {f.name}", "ROWS",
           " N  obj"]
    out += [f" {row.sense}  {row.name}" for row in f.rows]
    entries: dict[int, list[tuple[str, float]]] = defaultdict(list)
    for i, c in enumerate(f.obj):
        if c:
            entries[i].append(("obj", c))
    for row in f.rows:
        for i, a in row.terms:
            if a:
                entries[i].append((row.name, a))
    out.append("COLUMNS")
    in_int = False
    for i, name in enumerate(f.cols):
        if f.integer[i] != in_int:
            marker = "INTORG" if f.integer[i] else "INTEND"
            out.append(f"    MARKER    'MARKER'                 '{marker}'")
            in_int = f.integer[i]
        # a column with no entry is still declared (its bounds follow)
        out += [_field(name, row, a) for row, a in (entries[i] or [("obj", 0.0)])]
    if in_int:
        out.append("    MARKER    'MARKER'                 'INTEND'")
    if f.offset:
        out.append(_field(OFFSET_COLUMN, "obj", f.offset))
    out.append("RHS")
    out += [_field("RHS", row.name, row.rhs) for row in f.rows if row.rhs]
    out.append("BOUNDS")
    for i, name in enumerate(f.cols):
        lo, hi = f.lb[i], f.ub[i]
        if f.binary(i):
            out.append(_bound("BV", name))
        elif lo == hi:
            out.append(_bound("FX", name, lo))
        else:
            if math.isinf(lo):    # MI, then UP: PuLP reads MI as "upper bound 0" until UP
                out.append(_bound("FR" if math.isinf(hi) else "MI", name))
            elif lo != 0:
                out.append(_bound("LO", name, lo))
            if not math.isinf(hi):
                out.append(_bound("UP", name, hi))
            elif f.integer[i]:   # readers differ on an integer column with no upper bound
                out.append(_bound("UP", name, _BIG))
    if f.offset:
        out.append(_bound("FX", OFFSET_COLUMN, 1.0))
    out.append("ENDATA")
    return "\n".join(out) + "\n"


def export_text(proto: model_pb2.ModelProto, fmt: str) -> str:
    if fmt == "lp":
        return to_lp(proto)
    if fmt == "mps":
        return to_mps(proto)
    raise GfsError(f"unknown export format '{fmt}' (choose lp or mps)")
