"""Imports inside `gfs_opt` point one way (ARCHITECTURE.md): no cycle, and no function-local
import of the package's own modules outside the CLI.

The graph is read from the source with `ast`: every ``import``/``from … import`` of a `gfs_opt`
module is an edge, at module level, inside functions and under ``if TYPE_CHECKING:`` alike. So is
the package of the imported module when the importer lives outside it (importing
``gfs_opt.policies.base`` runs ``gfs_opt/policies/__init__.py`` first). ``gfs_opt/cli.py`` and
``gfs_opt/commands/`` may load subcommand code lazily (start-up time); everything else imports at
the top, and only heavy optional third-party packages (Prophet, Ray, matplotlib, …) load lazily.
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "gfs_opt"
LAZY_OK = ("gfs_opt.cli", "gfs_opt.commands")


def modules() -> dict[str, Path]:
    out = {}
    for f in sorted(PACKAGE.rglob("*.py")):
        parts = list(f.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = f
    return out


MODULES = modules()


def _resolve(name: str) -> str | None:
    """The module a dotted import name lands in (``gfs_opt.a.b.Name`` → ``gfs_opt.a.b``)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _is_package(module: str) -> bool:
    return MODULES[module].name == "__init__.py"


@cache
def imports(module: str) -> list[tuple[str, int, bool]]:
    """(imported gfs_opt module, line, inside a function or class) for each import statement."""
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    found: list[tuple[str, int, bool]] = []

    def visit(node: ast.AST, nested: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = nested or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef
                                         | ast.ClassDef | ast.Lambda)
            names: list[str] = []
            if isinstance(child, ast.Import):
                names = [a.name for a in child.names]
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    pkg = module.split(".") if _is_package(module) else module.split(".")[:-1]
                    pkg = pkg[:len(pkg) - (child.level - 1)]
                    base = ".".join([*pkg, base] if base else pkg)
                names = [f"{base}.{a.name}" for a in child.names] or [base]
            for name in names:
                target = _resolve(name) if name.startswith("gfs_opt") else None
                if target is not None and target != module:
                    found.append((target, child.lineno, nested))
            visit(child, inner)

    visit(tree, False)
    return found


@cache
def graph() -> dict[str, set[str]]:
    """module → the modules importing it runs (targets and the packages around them)."""
    edges: dict[str, set[str]] = {m: set() for m in MODULES}
    for m in MODULES:
        for target, _line, _nested in imports(m):
            edges[m].add(target)
            parts = target.split(".")
            for k in range(2, len(parts)):        # enclosing packages, not gfs_opt itself
                pkg = ".".join(parts[:k])
                if not (m == pkg or m.startswith(pkg + ".")):
                    edges[m].add(pkg)
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def test_the_graph_sees_every_kind_of_import() -> None:
    """The parser finds what it must (so an empty answer below means something)."""
    assert len(MODULES) > 100
    engine = {t for t, _l, _n in imports("gfs_opt.sim.engine")}
    assert {"gfs_opt.model", "gfs_opt.policies.base", "gfs_opt.pending"} <= engine
    cli = imports("gfs_opt.cli")
    commands = [t for t, _l, nested in imports("gfs_opt.commands.sim_cmd") if nested]
    assert cli and commands, "the commands load their code lazily: those are nested imports"
    assert "gfs_opt.policies" in graph()["gfs_opt.sim.engine"]   # the package runs first
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_cycle_inside_the_package() -> None:
    found = cycles(graph())
    assert not found, "import cycles (counting local imports and packages): " + "; ".join(
        " ↔ ".join(c) for c in found)


def test_no_function_local_import_of_own_modules_outside_the_cli() -> None:
    local = sorted({f"{MODULES[m].relative_to(PACKAGE.parent)}:{line} imports {target}"
             for m in MODULES if not m.startswith(LAZY_OK)
             for target, line, nested in imports(m) if nested})
    assert not local, "function-local imports of gfs_opt modules:\n" + "\n".join(local)


def test_layers_point_one_way() -> None:
    """model → (traces, forecast, solver wrapper) → preempt → quota → policies → sim →
    experiments → slurm: no module imports one of a higher layer. (`gfs_opt.instance` spans
    layers — the file format sits by the model, `solve_round` above the policies, `dump` above
    the simulator — and is held to the no-cycle rule only.)"""
    order = ["gfs_opt.errors", "gfs_opt.model", "gfs_opt.pending", "gfs_opt.traces",
             "gfs_opt.forecast", "gfs_opt.solve", "gfs_opt.preempt", "gfs_opt.quota",
             "gfs_opt.policies", "gfs_opt.sim", "gfs_opt.experiments", "gfs_opt.slurm"]

    def layer(m: str) -> int | None:
        for i, prefix in enumerate(order):
            if m == prefix or m.startswith(prefix + "."):
                return i
        return None

    edges = graph()
    wrong = [f"{m} → {t}" for m in edges for t in edges[m]
             if layer(m) is not None and layer(t) is not None and layer(t) > layer(m)]  # type: ignore[operator]
    assert not wrong, "imports against the layers: " + "; ".join(sorted(wrong))


def test_architecture_names_files_that_exist() -> None:
    """Every file or folder ARCHITECTURE.md points to is there (in gfs_opt/ or the repository)."""
    text = (PACKAGE.parent / "ARCHITECTURE.md").read_text(encoding="utf-8")
    named = set(re.findall(r"`([\w/.*+-]+(?:\.py|\.md|/))`", text))
    assert len(named) > 30
    missing = []
    for name in sorted(named):
        first = name.split(" ")[0]
        candidates = [PACKAGE / first, PACKAGE.parent / first, PACKAGE.parent / "tests" / first]
        # "forecast/prophet_model.py + prophet_fit.py" style: a bare file name is in the folder
        # named just before it in the same table cell
        if "*" in first or any(c.exists() for c in candidates):
            continue
        if not list(PACKAGE.rglob(first)):
            missing.append(name)
    assert not missing, f"ARCHITECTURE.md names what does not exist: {missing}"
