"""The README's benchmark table is the one the committed results file produces."""

from __future__ import annotations

from pathlib import Path

from fp16lab.bench import readme_section

ROOT = Path(__file__).resolve().parent.parent


def test_readme_table_comes_from_the_results_file():
    section = readme_section(ROOT / "results" / "bench_resnet50_h200.json")
    readme = (ROOT / "README.md").read_text()
    table = [line for line in section.splitlines() if line.startswith("|")]
    assert len(table) >= 10
    for line in table:
        assert line in readme, f"README is out of date with results/bench_resnet50_h200.json: {line}"
    assert (ROOT / "results" / "bench_resnet50_h200.png").exists()
