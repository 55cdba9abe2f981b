"""Golden digests (tests/goldens.py): runs and solves that a refactor must leave byte-identical."""

from __future__ import annotations

import pytest
from goldens import cases, recorded
from standins import needs_ref_toy

RECORDED = recorded()


def _params(which: str) -> list[object]:
    marks = [pytest.mark.slow] if which == "slow" else []
    return [pytest.param(name, fn, id=name,
                         marks=[*marks, *([needs_ref_toy] if "ref-toy" in name else [])])
            for name, fn in cases(which).items()]


@pytest.mark.parametrize(("name", "digest"), [*_params("fast"), *_params("slow")])
def test_digest_is_unchanged(name: str, digest: object) -> None:
    if name not in RECORDED:
        pytest.fail(f"{name} has no recorded digest: run python tests/goldens.py --write")
    assert digest() == RECORDED[name], (
        f"{name} changed; if on purpose, re-record with python tests/goldens.py --write and say "
        f"why in the commit")
