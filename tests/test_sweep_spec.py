"""Sweep specs: grid expansion, stable cell ids, and one-line errors naming the key."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from gfs_opt.cli import main
from gfs_opt.errors import InputError
from gfs_opt.experiments.sweep.spec import cell_id, expand, load_spec_file, validate_spec

BASE: dict[str, Any] = {"setup": "small", "policies": ["gfs", "yarn-cs"], "seeds": [0, 1]}


def cells_of(doc: dict[str, Any], **kw: Any) -> list:
    return expand(validate_spec(doc), Path("."), **kw)


def test_grid_is_the_product_of_list_valued_keys() -> None:
    cells = cells_of({**BASE, "loads": ["low", "high"], "params": {"rho": [0.8, 0.9, 0.95]}})
    assert len(cells) == 2 * 2 * 2 * 3                      # policies × seeds × loads × ρ
    assert len({c.id for c in cells}) == len(cells)
    assert {c.params["load"] for c in cells} == {"low", "high"}
    assert {c.spec.lp_load for c in cells} == {0.5, 2.0}
    # seeds innermost: consecutive cells of one configuration differ only in the seed
    assert [c.params["seed"] for c in cells[:2]] == [0, 1]
    assert cells[0].params | {"seed": 1} == cells[1].params


def test_options_multiply_only_the_policies_that_take_them() -> None:
    cells = cells_of({**BASE, "policies": ["gfs", "yarn-cs", "gfs-week-peak", "gfs-milp"],
                      "seeds": 0,
                      "options": {"forecaster": ["week-peak", "ets"], "time_limit": [0.5, 1]}})
    by_policy: dict[str, list] = {}
    for c in cells:
        by_policy.setdefault(c.params["policy"], []).append(c)
    assert len(by_policy["gfs"]) == 2              # forecaster axis
    assert len(by_policy["yarn-cs"]) == 1          # takes neither option
    assert len(by_policy["gfs-week-peak"]) == 1    # fixes its forecaster, no time limit
    assert len(by_policy["gfs-milp"]) == 4         # forecaster × time limit
    yarn = by_policy["yarn-cs"][0]
    assert yarn.params["forecaster"] is None and yarn.spec.policy_options == {}
    assert {c.spec.policy_options["time_limit"] for c in by_policy["gfs-milp"]} == {0.5, 1}


def test_cell_ids_hash_the_canonical_simulation() -> None:
    plain = cells_of(BASE)
    explicit = cells_of({**BASE, "loads": [1.0], "params": {"rho": 0.9, "guarantee_classes": [1]}})
    assert [c.id for c in plain] == [c.id for c in explicit]       # defaults spelled out
    assert [c.id for c in plain] == [c.id for c in cells_of(BASE, check_invariants=True)]
    assert all(c.spec.check_invariants for c in cells_of(BASE, check_invariants=True))
    assert cells_of({**BASE, "seeds": [2]})[0].id not in {c.id for c in plain}
    assert cells_of({**BASE, "params": {"rho": 0.8}})[0].id not in {c.id for c in plain}
    # the id is a function of the RunSpec alone, and stable across processes (no hash salt)
    c = plain[0]
    assert cell_id(c.spec) == c.id and len(c.id) == 16 and int(c.id, 16) >= 0
    code = ("from gfs_opt.experiments.sweep.spec import expand, validate_spec; "
            f"print(expand(validate_spec({BASE!r}))[0].id)")
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           env={**os.environ, "PYTHONHASHSEED": "123"}, check=True)
    assert other.stdout.strip() == c.id


def test_duplicate_simulations_appear_once() -> None:
    cells = cells_of({**BASE, "loads": ["medium", 1, 1.0], "seeds": [0, 0, 1]})
    assert len(cells) == 4


def test_guarantee_classes_flat_is_one_value_nested_is_an_axis() -> None:
    one = cells_of({**BASE, "seeds": 0, "params": {"guarantee_classes": [1, 2, 4]}})
    assert len(one) == 2 and one[0].spec.params["guarantee_classes"] == (1.0, 2.0, 4.0)
    assert one[0].params["guarantee_classes"] == "1,2,4"
    axis = cells_of({**BASE, "seeds": 0, "params": {"guarantee_classes": [[1], [1, 2, 4]]}})
    assert len(axis) == 4


def test_impossible_eta_corners_are_skipped_and_all_impossible_is_an_error() -> None:
    cells = cells_of({**BASE, "seeds": 0, "params": {"eta_min": [0.1, 0.5], "eta_max": [0.3, 2]}})
    assert len(cells) == 2 * 3
    with pytest.raises(InputError, match="eta_min"):
        validate_spec({**BASE, "params": {"eta_min": 12.0}})      # above the default η_max 10


def test_toml_and_yaml_give_the_same_cells(tmp_path: Path) -> None:
    toml = tmp_path / "s.toml"
    toml.write_text('setup = "small"\npolicies = ["gfs", "yarn-cs"]\nseeds = [0, 1]\n'
                    'window = [2024-03-20, 2024-03-22]\n[params]\nrho = [0.8, 0.9]\n')
    yml = tmp_path / "s.yaml"
    yml.write_text(yaml.safe_dump({"setup": "small", "policies": ["gfs", "yarn-cs"],
                                   "seeds": [0, 1], "window": ["2024-03-20", "2024-03-22"],
                                   "params": {"rho": [0.8, 0.9]}}))
    a = expand(load_spec_file(toml)[0], tmp_path)
    b = expand(load_spec_file(yml)[0], tmp_path)
    assert [c.id for c in a] == [c.id for c in b] and len(a) == 8
    assert a[0].spec.window == ("2024-03-20", "2024-03-22")   # TOML dates become text


def test_trace_paths_are_relative_to_the_spec_file(tmp_path: Path) -> None:
    folder = tmp_path / "traces" / "t1"
    folder.mkdir(parents=True)
    spec = tmp_path / "s.toml"
    spec.write_text('trace = "traces/t1"\npolicies = "lyra"\n')
    cells = expand(load_spec_file(spec)[0], spec.parent)
    assert cells[0].spec.trace == str(folder.resolve()) and cells[0].params["trace"] == "traces/t1"
    spec.write_text('trace = "traces/nope"\npolicies = "lyra"\n')
    with pytest.raises(InputError, match=r"key 'trace\[0\]'"):
        expand(load_spec_file(spec)[0], spec.parent, source=spec)


BAD: list[tuple[dict[str, Any], str]] = [
    ({"policies": ["gfs"]}, "exactly one of 'setup'"),
    ({**BASE, "trace": "small"}, "exactly one of 'setup'"),
    ({"setup": "small"}, "key 'policies': required key missing"),
    ({**BASE, "polices": ["gfs"]}, "key 'polices': unknown key"),
    ({**BASE, "setup": "big"}, "key 'setup': unknown setup 'big'"),
    ({**BASE, "policies": ["gfs", "yarn"]}, "key 'policies[1]': unknown policy 'yarn'"),
    ({**BASE, "seeds": [0, "1"]}, "key 'seeds[1]': expected a number"),
    ({**BASE, "seeds": [0, -1]}, "key 'seeds[1]'"),
    ({**BASE, "seeds": [True]}, "key 'seeds[0]': expected a number"),
    ({**BASE, "seeds": []}, "key 'seeds'"),
    ({**BASE, "loads": ["hgih"]}, "unknown load 'hgih'"),
    ({**BASE, "loads": [-1]}, "unknown load -1"),
    ({**BASE, "params": {"rho": 1.5}}, "key 'params.rho[0]'"),
    ({**BASE, "params": {"rho": [0.9, "x"]}}, "key 'params.rho[1]': expected a number"),
    ({**BASE, "params": {"eta": 1}}, "key 'params.eta': unknown key"),
    # a key that is not an identifier is quoted, so the message stays on one line
    ({**BASE, "params": {"\n": None}}, 'key \'params["\\n"]\': unknown key'),
    ({**BASE, "params": {"guarantee_classes": [1, -2]}}, "key 'params.guarantee_classes[0][1]'"),
    ({**BASE, "params": {"horizon_h": 2.5}}, "key 'params.horizon_h[0]'"),
    ({**BASE, "params": {"pool_aggregation": "max"}}, "key 'params.pool_aggregation'"),
    ({**BASE, "options": {"forecaster": "oracle"}}, "key 'options.forecaster[0]': unknown forecaster"),
    ({**BASE, "options": {"lease": 3}}, "key 'options.lease': no policy of this sweep takes it"),
    ({**BASE, "options": {"forecaster": [["a"]]}}, "key 'options.forecaster[0]': policy options take"),
    ({**BASE, "policies": ["yarn-cs"], "options": {"quota": "bogus"}}, "key 'options': policy 'yarn-cs'"),
    ({**BASE, "window": ["2024-03-01"]}, "key 'window'"),
    ({**BASE, "window": ["2024-03-01", "soon"]}, "key 'window': 'soon' is neither a date"),
    ({**BASE, "replay_from": "yesterday"}, "key 'replay_from'"),
    ({**BASE, "imports": ["no_such_module_xyz"]}, "key 'imports[0]': no module named"),
    ({**BASE, "drain_days": float("nan")}, "key 'drain_days'"),
    ({**BASE, "memory_gb": 0}, "key 'memory_gb'"),
    ({**BASE, "name": 3}, "key 'name'"),
]


@pytest.mark.parametrize(("doc", "fragment"), BAD, ids=[f for _d, f in BAD])
def test_bad_specs_fail_with_one_line_naming_the_key(doc: dict[str, Any], fragment: str) -> None:
    with pytest.raises(InputError) as info:
        validate_spec(doc, "spec.toml")
    msg = str(info.value)
    assert msg.startswith("spec.toml: ") and "\n" not in msg
    assert fragment in msg, msg


@pytest.mark.parametrize(("name", "text", "fragment"), [
    ("s.toml", "policies = [", "invalid TOML"),
    ("s.toml", "", "key 'policies': required key missing"),
    ("s.yaml", "policies: [gfs\n", "invalid YAML"),
    ("s.yaml", "- gfs\n", "must be a table"),
    ("s.yml", "setup: small\npolicies: gfs\nseeds: !!python/object:os.system {}\n", "invalid YAML"),
    ("s.json", "{}", "unknown spec format"),
    ("missing.toml", None, "no such file"),
])
def test_unreadable_spec_files(tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str,
                               text: str | None, fragment: str) -> None:
    path = tmp_path / name
    if text is not None:
        path.write_text(text)
    code = main(["sweep", str(path), "--dry-run"])
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("gfs-opt: error: "), err
    assert fragment in lines[0] and str(path) in lines[0]


def test_dry_run_lists_cells(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(BASE))
    assert main(["sweep", str(path), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{path}: 4 cells") and out.count("policy=gfs ") == 2
    assert not (Path("results") / "sweep-s").exists()


def test_examples_are_valid() -> None:
    root = Path(__file__).resolve().parent.parent / "examples"
    paper = expand(load_spec_file(root / "sweep-paper-a100.toml")[0], root)
    assert len(paper) == 72       # 8 policies (GFS, 4 no-quota, 3 +sqa) × 3 loads × 3 seeds
    assert {c.params["policy"] for c in paper} == {"gfs", "yarn-cs", "chronus", "lyra", "fgd",
                                                  "yarn-cs+sqa", "lyra+sqa", "fgd+sqa"}
    assert {c.params["load"] for c in paper} == {"low", "medium", "high"}
    assert {c.params["seed"] for c in paper} == {0, 1, 2}
    assert all(c.spec.trace == "paper-a100" for c in paper)
    assert len(expand(load_spec_file(root / "sweep-small.toml")[0], root)) == 4


@settings(max_examples=60, deadline=None, database=None)
@given(st.dictionaries(st.sampled_from(["setup", "policies", "loads", "seeds", "options", "params",
                                        "window", "imports", "pools", "bogus"]),
                       st.recursive(st.none() | st.booleans() | st.integers(-5, 5)
                                    | st.floats(allow_nan=True) | st.text(max_size=6),
                                    lambda c: st.lists(c, max_size=3)
                                    | st.dictionaries(st.text(max_size=5), c, max_size=3),
                                    max_leaves=8)))
def test_any_document_validates_or_fails_as_one_input_error(doc: dict[str, Any]) -> None:
    try:
        cells = expand(validate_spec(doc), Path("."))
    except InputError as exc:
        assert "\n" not in str(exc)
    else:
        assert cells
