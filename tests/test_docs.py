"""The project's documents speak of the project: no issue numbers, no account of how the work was
organised, no paths outside the repository; the README reads as a front door and BENCHMARKS.md
as a reference (their size targets); every glossary term is defined before it is used."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"

DOCUMENTS = sorted({
    *(REPO / name for name in ("README.md", "BENCHMARKS.md", "REPRODUCTION.md", "ARCHITECTURE.md")),
    *REPO.glob("docs/**/*.md"), *REPO.glob("instances/*.md"), *REPO.glob("formulations/*.md"),
    *REPO.glob("notebooks/*.py"), *REPO.glob("notebooks/*.ipynb"), *REPO.glob("examples/*"),
    REPO / "gfs_opt" / "data" / "NOTICE",
    *REPO.glob("gfs_opt/experiments/reproduce/*.md"),
    *REPO.glob("gfs_opt/experiments/reproduce/templates/*"),
})

#: what a project document must not contain, and why
FORBIDDEN = {
    r"\bissues? #?\d+": "an issue number (the tracker is not part of the project)",
    r"#\d{2,}\b(?![\d.])": "an issue number",
    r"\bsessions?\b": "an account of how the work was organised",
    r"\.\./shared|/work/": "a path outside the repository",
    r"\b(last|this|next) time\b": "an account of how the work was organised",
}


def _hits(text: str) -> list[str]:
    return [f"{why}: {m.group(0)!r}" for pat, why in FORBIDDEN.items()
            for m in re.finditer(pat, text, flags=re.IGNORECASE)]


def test_the_documents_exist() -> None:
    for name in ("docs/departures.md", "docs/slurm.md", "docs/data.md", "docs/reproduction.md"):
        assert (REPO / name).is_file(), name


@pytest.mark.parametrize("path", DOCUMENTS, ids=[str(p.relative_to(REPO)) for p in DOCUMENTS])
def test_no_document_cites_an_issue_or_narrates_the_work(path: Path) -> None:
    assert not _hits(path.read_text(encoding="utf-8")), _hits(path.read_text(encoding="utf-8"))


def _help_texts(parser: argparse.ArgumentParser) -> list[str]:
    texts = [parser.format_help()]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                texts += _help_texts(sub)
    return texts


def test_no_help_text_cites_an_issue_or_a_path_outside_the_repository() -> None:
    from gfs_opt.cli import build_parser

    texts = _help_texts(build_parser())
    assert len(texts) > 20
    hits = [h for t in texts for h in _hits(t)]
    assert not hits, hits


def test_the_forbidden_patterns_catch_what_they_should() -> None:
    assert _hits("see issue 40") and _hits("(issues 37 and 40)") and _hits("the third session")
    assert _hits("../shared/data/README.md") and _hits("see #42")
    assert not _hits("a 95 % interval; 0.66 ± 0.33 %; step 2.3; see BENCHMARKS.md")


def _lines_before_first_docs_link(text: str) -> int:
    for i, line in enumerate(text.splitlines(), 1):
        if re.search(r"\]\(docs/", line):
            return i - 1
    raise AssertionError("the README links no page of docs/")


def test_readme_is_a_front_door() -> None:
    text = README.read_text(encoding="utf-8")
    assert _lines_before_first_docs_link(text) <= 150
    blocks = re.findall(r"```bash\n(.*?)```", text, flags=re.S)
    # exactly two set-up commands come first: the main job and the tests
    setup = text[text.index("## Set-up"):text.index("## What the main job prints")]
    assert re.findall(r"```bash\n(.*?)```", setup, flags=re.S) == blocks[:2]
    assert [b.strip() for b in blocks[:2]] == [
        "pip install -e . && gfs-opt compare --setup demo --seeds 0,1,2 --out results/demo",
        'pip install -e ".[test]" && python -m pytest -q']


#: each glossary term, and how its first use may look outside the glossary (an inline definition)
GLOSSARY = {
    "HP": r"high-priority\s+\(HP\)", "LP": r"low-priority\s+\(LP", "guarantee window": None,
    "ρ": None, "spot quota": None, "η": None, "SQA": None, "+sqa": None, "GDE": None,
    "PTS": None, "JQT": None, "inside the noise": None,
}


def test_every_glossary_term_is_defined_before_its_first_use() -> None:
    text = README.read_text(encoding="utf-8")
    start = text.index("## Words used below")
    end = text.index("\n## ", start + 1)
    glossary = text[start:end]
    for term, inline in GLOSSARY.items():
        assert f"**{term}**" in glossary or f"`{term}`" in glossary or term in glossary, term
        first = text.find(term)
        if first < start:
            assert inline and re.search(inline, text[:start]), (
                f"{term!r} is used before the glossary without being defined there")
            assert re.search(inline, text).start() <= first, term


def test_benchmarks_is_a_reference() -> None:
    text = (REPO / "BENCHMARKS.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 600
    # every benchmark script is described (by name) on the page
    for script in sorted((REPO / "benchmarks").glob("*.py")):
        assert script.name in text, f"BENCHMARKS.md does not describe benchmarks/{script.name}"
    assert not list((REPO / "benchmarks").rglob("*.patch")), "patches live in git history"
