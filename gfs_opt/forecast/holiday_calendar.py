"""Load the one ``holidays`` calendar a Prophet model names, not all ≈ 250 of them.

``holidays`` hands out a country's class through a lazy loader that imports
``holidays.countries.<module>``; importing any module of that package first runs the package's
``__init__``, which imports every country's calendar (≈ 300 modules, ≈ 60 ms of CPU: 4 % of a
`small` GFS run, paid once per process by every Prophet user). `load_calendar` executes just the
named country's module, under its own name and from the package's own folder, as the import system
would; the lazy loader then finds it in ``sys.modules`` and the holidays are the same objects of the
same code. The one difference: until something imports ``holidays.countries`` itself, that package
is absent, and afterwards it has no ``china`` (etc.) attribute for a module loaded here —
``from holidays.countries import China`` and ``holidays.CN`` work either way.

Anything unexpected (an unknown code, another ``holidays`` layout) loads nothing and leaves
Prophet's normal import to run (and to raise its own error for an unknown country).
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys

_PACKAGE = "holidays.countries"


def _module_of(country: str) -> str | None:
    from holidays.registry import COUNTRIES

    for module, entities in COUNTRIES.items():
        if country in entities:
            return module
    return None


def load_calendar(country: str) -> bool:
    """Make ``holidays``' class for ``country`` (a code such as "CN") importable without its
    package's other calendars; True when its module is loaded (by this or an earlier import)."""
    if _PACKAGE in sys.modules:
        return True
    try:
        module = _module_of(country)
        if module is None:
            return False
        name = f"{_PACKAGE}.{module}"
        if name in sys.modules:
            return True
        package = importlib.util.find_spec(_PACKAGE)   # imports `holidays`, not the package
        if package is None or not package.submodule_search_locations:
            return False
        spec = importlib.machinery.PathFinder.find_spec(name, package.submodule_search_locations)
        if spec is None or spec.loader is None:
            return False
        loaded = importlib.util.module_from_spec(spec)
        sys.modules[name] = loaded
        try:
            spec.loader.exec_module(loaded)
        except BaseException:
            sys.modules.pop(name, None)
            raise
    except Exception:  # any surprise: Prophet's own import decides
        return False
    return True
