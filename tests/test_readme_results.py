"""The measured tables of results/README.md are the ones the committed results files produce (no typed numbers)."""

from __future__ import annotations

from pathlib import Path

from fp16lab.course import readme

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / readme.RESULTS_PAGE


def _block(text: str, start: str, end: str) -> str:
    return text.split(start, 1)[1].split(end, 1)[0].strip("\n")


def test_results_page_blocks_come_from_the_results_files():
    text = PAGE.read_text(encoding="utf-8")
    for start, end, kind in readme.BLOCKS:
        assert _block(text, start, end) == readme._block(kind), (
            f"{readme.RESULTS_PAGE} is out of date with the results files ({kind}): "
            "run `python -m fp16lab workshop pages`")


def test_the_reference_is_a_gpu_run_and_its_plot_is_committed():
    bench = readme._block("bench")
    assert "H200" in bench.splitlines()[0] and len([x for x in bench.splitlines() if x.startswith("|")]) >= 10
    assert (ROOT / "results" / "bench_live.png").exists()


def test_readme_links_the_results_page_and_types_no_table():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "](results/README.md)" in text
    assert "| configuration | batch | images/s" not in text, "the benchmark tables live on results/README.md"


def test_the_lab_reaches_the_reuse_guide():
    """The lab is rooted at notebooks/: the start page links a generated copy of the README's reuse guide."""
    assert (ROOT / readme.REUSE_PAGE).read_text(encoding="utf-8") == readme.reuse_page(), (
        "notebooks/REUSE.md is out of date with the README: run `python -m fp16lab workshop pages`")
    assert "](REUSE.md)" in (ROOT / "notebooks" / "README.md").read_text(encoding="utf-8")
