"""Variables and linear rows of a MathOpt model, collected in plain lists and written in bulk.

MathOpt's Python objects cost a few microseconds per variable, bound and coefficient: most of
the time of building a contested pass's preemption model (≈ 10 ms for 300 variables
and 300 rows of four terms, against ≈ 1 ms in bulk). A `MilpWriter` hands out integer handles
while a model is being described and then adds everything at once through the model's
element store (OR-Tools ≥ 9.12), or one element at a time through the public API when that
store is missing. Both give the same model: the same ids, names, bounds and coefficients, in
the same order (``tests/test_milp_writer.py`` compares the exported models).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

import numpy as np
from ortools.math_opt.python import mathopt

try:
    from ortools.math_opt.elemental.python import enums as _enums
except ImportError:   # OR-Tools before its element store: the public API only
    _enums = None

#: False forces the element-at-a-time path (the tests compare both)
BULK = True


def _store(model: mathopt.Model) -> object | None:
    """The model's element store when the bulk path may use it, else None."""
    store = getattr(model, "_elemental", None)
    return store if BULK and _enums is not None and hasattr(store, "set_attrs") else None


def set_objective(model: mathopt.Model, coefficients: Mapping[mathopt.Variable, float], *,
                  maximize: bool) -> None:
    """The objective Σ c·x (no offset) from {x: c}, maximised or minimised: what
    ``model.maximize(expr)`` / ``model.minimize(expr)`` set for that sum, in one bulk call."""
    obj = model.objective
    obj.clear()
    store = _store(model)
    if store is None:
        for x, c in coefficients.items():
            obj.set_linear_coefficient(x, c)
    elif coefficients:
        keys = np.array([x.id for x in coefficients], dtype=np.int64).reshape(-1, 1)
        store.set_attrs(_enums.DoubleAttr1.OBJECTIVE_LINEAR_COEFFICIENT,  # type: ignore[attr-defined]
                        keys, np.array(list(coefficients.values()), dtype=np.float64))
    obj.is_maximize = maximize


class MilpWriter:
    """Describes variables and rows for ``model``; `flush` adds them and returns the variables.

    A variable is named by its handle (its position among this writer's variables) until
    `flush`; rows may only use this writer's variables. As in `gfs_opt.solve.add_row`, a
    variable repeated in a row has its coefficients summed.
    """

    def __init__(self, model: mathopt.Model) -> None:
        self.model = model
        self._names: list[str] = []
        self._lb: list[float] = []
        self._ub: list[float] = []
        self._integer: list[bool] = []
        self._row_names: list[str] = []
        self._row_lb: list[float] = []
        self._row_ub: list[float] = []
        self._at_row: list[int] = []     # one entry per coefficient
        self._at_var: list[int] = []
        self._coef: list[float] = []
        self._ids: list[int] = []        # the variables' ids, by handle, once flushed

    def variable(self, *, lb: float = -math.inf, ub: float = math.inf, integer: bool = False,
                 name: str = "") -> int:
        self._names.append(name)
        self._lb.append(lb)
        self._ub.append(ub)
        self._integer.append(integer)
        return len(self._names) - 1

    def binary(self, name: str = "") -> int:
        return self.variable(lb=0.0, ub=1.0, integer=True, name=name)

    def integer(self, *, lb: float, ub: float, name: str = "") -> int:
        return self.variable(lb=lb, ub=ub, integer=True, name=name)

    @property
    def n_rows(self) -> int:
        return len(self._row_names)

    @property
    def n_vars(self) -> int:
        return len(self._names)

    def name(self, var: int) -> str:
        return self._names[var]

    def row(self, terms: Iterable[tuple[float, int]], *, lb: float = -math.inf,
            ub: float = math.inf, name: str = "") -> None:
        """``lb ≤ Σ a·x ≤ ub`` from (a, handle) pairs."""
        coef: dict[int, float] = {}
        for a, x in terms:
            coef[x] = coef.get(x, 0.0) + a
        r = len(self._row_names)
        self._row_names.append(name)
        self._row_lb.append(lb)
        self._row_ub.append(ub)
        self._at_row.extend([r] * len(coef))
        self._at_var.extend(coef)
        self._coef.extend(coef.values())

    def flush(self) -> list[mathopt.Variable]:
        """Add what was described to the model; the variables, by handle."""
        store = _store(self.model)
        if store is None:
            out = self._one_by_one()
        else:
            # what `Model.get_variable(i, validate=False)` returns, without its call per variable
            var, elem = mathopt.Variable, store
            out = [var(elem, i) for i in self._bulk(store)]
        self._ids = [v.id for v in out]
        return out

    def satisfied(self, values: Mapping[int, float], tol: float = 1e-6) -> bool:
        """Whether ``values`` (by variable id; missing read as 0) meet every bound and row this
        writer added — `gfs_opt.solve.satisfies` on a model that holds nothing else, without
        exporting it. Only after `flush`."""
        x = np.array([values.get(i, 0.0) for i in self._ids], dtype=float)
        if (np.any(x < np.array(self._lb) - tol) or np.any(x > np.array(self._ub) + tol)):
            return False
        if not self._row_names:
            return True
        coef = np.array(self._coef, dtype=float) * x[np.array(self._at_var, dtype=np.int64)]
        activity = np.bincount(np.array(self._at_row, dtype=np.int64), weights=coef,
                               minlength=len(self._row_names))
        return bool(np.all(activity >= np.array(self._row_lb) - tol)
                    and np.all(activity <= np.array(self._row_ub) + tol))

    def _bulk(self, store: object) -> list[int]:
        E, D1, B1 = _enums.ElementType, _enums.DoubleAttr1, _enums.BoolAttr1
        # one element per call: the store's named bulk call reads a fixed-width array and
        # keeps the padding of the shorter names
        add, put = store.add_element, store.set_attrs  # type: ignore[attr-defined]
        var_ids = np.array([add(E.VARIABLE, n) for n in self._names], dtype=np.int64)
        if self._names:
            keys = var_ids.reshape(-1, 1)
            put(D1.VARIABLE_LOWER_BOUND, keys, np.array(self._lb, dtype=np.float64))
            put(D1.VARIABLE_UPPER_BOUND, keys, np.array(self._ub, dtype=np.float64))
            put(B1.VARIABLE_INTEGER, keys, np.array(self._integer, dtype=bool))
        if self._row_names:
            row_ids = np.array([add(E.LINEAR_CONSTRAINT, n) for n in self._row_names],
                               dtype=np.int64)
            keys = row_ids.reshape(-1, 1)
            put(D1.LINEAR_CONSTRAINT_LOWER_BOUND, keys, np.array(self._row_lb, dtype=np.float64))
            put(D1.LINEAR_CONSTRAINT_UPPER_BOUND, keys, np.array(self._row_ub, dtype=np.float64))
            if self._coef:
                at = np.column_stack([row_ids[np.array(self._at_row, dtype=np.int64)],
                                      var_ids[np.array(self._at_var, dtype=np.int64)]])
                put(_enums.DoubleAttr2.LINEAR_CONSTRAINT_COEFFICIENT, at,
                    np.array(self._coef, dtype=np.float64))
        return var_ids.tolist()

    def _one_by_one(self) -> list[mathopt.Variable]:
        m = self.model
        vs = [m.add_variable(lb=lb, ub=ub, is_integer=i, name=n)
              for n, lb, ub, i in zip(self._names, self._lb, self._ub, self._integer, strict=True)]
        rows = [m.add_linear_constraint(lb=lb, ub=ub, name=n)
                for n, lb, ub in zip(self._row_names, self._row_lb, self._row_ub, strict=True)]
        for r, x, a in zip(self._at_row, self._at_var, self._coef, strict=True):
            rows[r].set_coefficient(vs[x], a)
        return vs
