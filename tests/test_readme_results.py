"""The README's measured tables are the ones the committed results files produce (no typed numbers)."""

from __future__ import annotations

from pathlib import Path

from fp16lab.course.readme import targets_table
from fp16lab.labs.benchmark import readme_section

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def test_readme_benchmark_comes_from_the_reference_run(monkeypatch):
    monkeypatch.chdir(ROOT)  # the section names its source relative to the repository
    section = readme_section("results/bench_live.json", "results/bench_live.png")
    table = [line for line in section.splitlines() if line.startswith(("|", "**", "!["))]
    assert len(table) >= 10
    for line in table:
        assert line in README, f"README is out of date with results/bench_live.json: {line}"
    assert (ROOT / "results" / "bench_live.png").exists()
    assert "H200" in section.splitlines()[0]  # the reference is a GPU run


def test_readme_targets_table_comes_from_the_results_files():
    for line in targets_table().splitlines():
        assert line in README, f"README is out of date with the results/*_targets.json files: {line}"
