"""Benchmark results: the result object, comparison tables, plots and the README's markdown."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from fp16lab.checks import existing_path, instance, one_of, positive_int, text
from fp16lab.checks import path as _path
from fp16lab.labs.benchmark.analysis import check_frame, ratio_values, summarise, targets_table
from fp16lab.labs.benchmark.configs import (
    ARTICLE_CLAIM,
    COMPILE_MODES,
    COMPILED,
    CONFIGS,
    RECOMMENDED,
    validate_output,
)
from fp16lab.labs.benchmark.options import BenchOptions
from fp16lab.labs.benchmark.profile import IDLE
from fp16lab.labs.runtime.results import load_results, save_results

__all__ = [
    "BenchResult",
    "PARTS",
    "comparison_table",
    "compile_modes_table",
    "profile_table",
    "kernel_ms",
    "busy_fraction",
    "side_by_side",
    "plot_results",
    "readme_section",
]

PARTS = ("comparison", "repeat", "sweep", "explore")
_NUMERIC = (
    "img_per_s", "img_per_s_min", "img_per_s_max", "spread", "step_ms", "peak_mem_gb", "peak_reserved_gb",
    "baseline_gb", "warmup_s", "first_step_s", "tflops", "mfu", "round",
)
_ROW_COLUMNS = ("config", "label", "batch_size", "status", "img_per_s")  # what every table here reads


@dataclass
class BenchResult:
    """Rows of a benchmark run with its metadata; renders as the comparison table in Jupyter."""

    frame: pd.DataFrame
    metadata: dict[str, Any] = field(default_factory=dict)
    path: Path | None = None
    interrupted: bool = False

    def table(self, part: str = "comparison") -> pd.DataFrame:
        """One part of the run as a table ('comparison', 'sweep' or 'explore'): :func:`comparison_table`."""
        return comparison_table(self.frame, part=part)

    def targets(self) -> pd.DataFrame:
        """The project's targets against this run: :func:`fp16lab.labs.benchmark.analysis.targets_table`."""
        return targets_table(self.frame)

    def contents(self) -> str:
        """One line on what this run holds: rounds or single runs, exploration, compile modes, step profile."""
        b = self.metadata.get("benchmark", {})
        f = self.frame
        parts = f["part"] if "part" in f else pd.Series("comparison", index=f.index)
        rounds = int(f.loc[parts == "repeat", "round"].nunique()) if "round" in f else 0
        head = (f"{rounds} interleaved rounds of {', '.join(b.get('repeat') or [])}" if rounds
                else "single runs only (no interleaved rounds)")
        explore = int((parts == "explore").sum())
        compared = set(f.loc[parts == "comparison", "config"]) if "config" in f else set()
        modes = [m for m, c in COMPILE_MODES.items() if c in compared]
        profiled = list((self.metadata.get("step_profile") or {}).keys())
        return (f"{head}; exploration rows: {explore or 'none'}; compile modes beside the recipe: "
                f"{', '.join(modes) or 'none'}; step profile: {', '.join(profiled) or 'none'}")

    def options(self) -> BenchOptions:
        """What the run was asked to do, as it recorded it (:meth:`BenchOptions.from_metadata`)."""
        return BenchOptions.from_metadata(self.metadata.get("benchmark", {}))

    def compile_modes(self) -> pd.DataFrame:
        """The compiled recipe's torch.compile modes side by side: :func:`compile_modes_table`."""
        return compile_modes_table(self.frame)

    def save(self, path: "str | os.PathLike[str]") -> Path:
        """Write JSON (rows + metadata) and a CSV copy beside it."""
        meta = dict(self.metadata, interrupted=self.interrupted)
        self.path = save_results(self.frame, validate_output(path), meta, csv=True)
        return self.path

    @classmethod
    def load(cls, path: "str | os.PathLike[str]") -> BenchResult:
        """Read a file written by :meth:`save` (or by ``python -m fp16lab bench``)."""
        frame, meta = load_results(path)
        return cls(_numeric(frame), meta, Path(path), bool(meta.get("interrupted", False)))

    @classmethod
    def reference(cls, name: str) -> BenchResult | None:
        """The committed GPU reference ``results/<name>.json``, printed with where it was measured;
        None (with a notice) while it has not been recorded (:func:`fp16lab.labs.runtime.results.load_reference`)."""
        from fp16lab.labs.runtime.results import load_reference

        frame, meta = load_reference(name)
        return None if frame is None or meta is None else cls(_current_labels(_numeric(frame)), meta)

    def __repr__(self) -> str:
        head = f"BenchResult({len(self.frame)} rows, {self.metadata.get('device', '?')}, {self.metadata.get('mode', '?')} mode"
        head += ", INTERRUPTED" if self.interrupted else ""
        return head + ")\n" + self.table().to_string()

    def _repr_html_(self) -> str:
        import html

        m = self.metadata
        real = m.get("real_device")
        ran = f" (ran on a real {html.escape(str(real))})" if real and real != m.get("device") else ""
        cap = (
            f"{html.escape(str(m.get('device', '?')))}{ran} · torch {html.escape(str(m.get('torch', '?')))} · "
            f"{html.escape(str(m.get('date', '?')))} · {html.escape(str(m.get('mode', '?')))} mode"
        )
        if self.interrupted:
            cap += " · <b>INTERRUPTED: partial results</b>"
        parts = [f"<p>{cap}</p>", self.table().to_html(index=False, na_rep="")]
        for part, title in (("explore", "exploration (single runs)"), ("sweep", "batch-size sweep")):
            if "part" in self.frame and (self.frame["part"] == part).any():
                parts += [f"<p>{title}</p>", self.table(part).to_html(index=False, na_rep="")]
        return "".join(parts)


def _current_labels(frame: pd.DataFrame) -> pd.DataFrame:
    """Today's label for each row whose configuration still exists with the settings it ran with.

    A label says what a name means now (an older reference called another configuration
    "recommended"); rows of configurations that changed or no longer exist keep their own.
    """
    need = {"config", "label", "precision", "memory_format", "optimizer"}
    if frame.empty or not need <= set(frame.columns):
        return frame
    for i, r in frame.iterrows():
        cfg = CONFIGS.get(r["config"])
        if cfg is not None and (r["precision"], r["memory_format"], r["optimizer"]) == (
                cfg.precision.value, cfg.memory_format, cfg.optimizer):
            frame.at[i, "label"] = cfg.label
    return frame


def _numeric(frame: pd.DataFrame) -> pd.DataFrame:
    for col in _NUMERIC:  # all-NaN columns (e.g. peak memory on a CPU) come back as None
        if col in frame:
            frame[col] = pd.to_numeric(frame[col], errors="coerce")
    return frame


def _rows_of(frame: pd.DataFrame, part: str) -> pd.DataFrame:
    if "part" not in frame:
        return frame
    if part != "sweep":
        return frame[frame["part"] == part]
    names = set(frame.loc[frame["part"] == "sweep", "config"])  # with their comparison rows
    f = frame[frame["config"].isin(names) & frame["part"].isin(["comparison", "sweep"])]
    return f.sort_values(["config", "batch_size"], kind="stable")


def _num(r: pd.Series, col: str, digits: int) -> float:
    v = r.get(col, math.nan)
    v = math.nan if v is None else float(v)
    return round(v, digits) if r["status"] == "ok" and v == v else math.nan


def comparison_table(frame: pd.DataFrame, part: str = "comparison") -> pd.DataFrame:
    """One row per (configuration, batch): images/s, spread, MFU, GB, first-step seconds, speed-ups.

    ``x_article`` / ``x_fp32_default`` are images/s relative to the article's loop and to
    PyTorch's default FP32 at the same batch size, from the comparison rows (NaN where missing);
    ``GB`` is peak allocated memory; ``first step s`` the seconds from building the model to the
    end of its first step (torch.compile compiles there, cuDNN autotunes). Rows that did not run
    show their status ('OOM', 'error', 'timeout', 'skipped') in ``img/s`` and why in ``note``.
    """
    check_frame("frame", frame, _ROW_COLUMNS)
    one_of("part", part, ("comparison", "sweep", "explore"))
    cols = ["config", "label", "batch", "img/s", "spread", "MFU", "GB", "first step s", "x_article",
            "x_fp32_default", "note"]
    if frame.empty:
        return pd.DataFrame(columns=cols)
    f = _rows_of(frame, part)
    comp = frame[frame["part"] == "comparison"] if "part" in frame else frame
    ok = comp[comp["status"] == "ok"]
    ref = {k: ok[ok["config"] == k].set_index("batch_size")["img_per_s"] for k in ("article", "fp32_default")}

    def ratio(r: pd.Series, k: str) -> float:
        base = ref[k].get(r["batch_size"], math.nan) if r["status"] == "ok" else math.nan
        return round(float(r["img_per_s"]) / base, 2) if base == base and base else math.nan

    rows = []
    for _, r in f.iterrows():
        note = r.get("error", "") or ""
        rows.append({
            "config": r["config"], "label": r["label"], "batch": int(r["batch_size"]),
            "img/s": round(float(r["img_per_s"]), 1) if r["status"] == "ok" else r["status"],
            "spread": _num(r, "spread", 3), "MFU": _num(r, "mfu", 3), "GB": _num(r, "peak_mem_gb", 2),
            "first step s": _num(r, "first_step_s", 1), "x_article": ratio(r, "article"),
            "x_fp32_default": ratio(r, "fp32_default"), "note": str(note)[:120],
        })
    return pd.DataFrame(rows, columns=cols)


def _profiles(metadata: object) -> dict[str, Any]:
    if not isinstance(metadata, dict):
        raise ValueError(f"metadata must be a run's metadata dict (BenchResult.metadata), got {type(metadata).__name__}")
    profiles = metadata.get("step_profile") or {}
    if not isinstance(profiles, dict):
        raise ValueError(f"metadata['step_profile'] must map configuration names to rows, got {profiles!r:.80}")
    return profiles


def compile_modes_table(frame: pd.DataFrame) -> pd.DataFrame:
    """The compiled recipe in each torch.compile mode the run tried, beside its default mode.

    One row per mode whose configuration is in ``frame`` (the default mode is :data:`COMPILED`;
    the others :data:`~fp16lab.labs.benchmark.configs.COMPILE_MODES`): its status, images/s, the
    ratio over the article's loop (median of the interleaved rounds' ratios, else a single run's)
    with its spread and number of values, the ratio over the default mode, and the first step's
    seconds (the compile). Empty when the run tried no other mode.
    """
    check_frame("frame", frame, _ROW_COLUMNS)
    cols = ["mode", "config", "status", "img/s", "x_article", "spread", "n", "x_default_mode", "first step s", "note"]
    names = {"default": COMPILED, **COMPILE_MODES}
    comp = frame[frame["part"] == "comparison"] if "part" in frame else frame
    present = set(comp["config"]) if not comp.empty else set()
    if not (present & set(COMPILE_MODES.values())):
        return pd.DataFrame(columns=cols)
    rows = []
    for mode, name in names.items():
        hit = comp[comp["config"] == name]
        if hit.empty:
            continue
        r = hit.iloc[0]
        ok = r["status"] == "ok"
        med, spread, n = summarise(ratio_values(frame, name, "article")[0])
        vs_default = summarise(ratio_values(frame, name, COMPILED)[0])[0] if name != COMPILED else (1.0 if ok else math.nan)
        rows.append({"mode": mode, "config": name, "status": r["status"],
                     "img/s": round(float(r["img_per_s"]), 1) if ok else math.nan, "x_article": med,
                     "spread": spread, "n": n, "x_default_mode": vs_default,
                     "first step s": _num(r, "first_step_s", 1), "note": str(r.get("error", "") or "")[:120]})
    return pd.DataFrame(rows, columns=cols)


def profile_table(metadata: dict[str, Any], value: str = "share_of_step") -> pd.DataFrame:
    """Share of the measured step per kind of kernel (and GPU idle), one column per profiled config.

    From a run's ``metadata["step_profile"]`` (``run_benchmark(..., profile=[...])``); empty when none
    was recorded. ``value='ms_per_step'`` gives milliseconds per step instead of shares. A profile
    that failed shows its error in a row ``error``.
    """
    one_of("value", value, ("share_of_step", "ms_per_step"))
    cols: dict[str, pd.Series] = {}
    for name, rows in _profiles(metadata).items():
        f = pd.DataFrame(rows)
        if "error" in f:
            cols[name] = pd.Series({"error": f["error"].iloc[0]})
        else:
            cols[name] = f.set_index("kind")[value]
    return pd.DataFrame(cols)


def _profile_of(metadata: dict[str, Any], config: str) -> pd.DataFrame:
    profiles = _profiles(metadata)
    instance("config", config, str, "a configuration name (str), e.g. 'article'")
    if config not in profiles:
        raise ValueError(f"config {config!r} was not profiled in this run; profiled: {sorted(profiles)!r}")
    f = pd.DataFrame(profiles[config])
    if "error" in f or "kind" not in f:
        raise ValueError(f"the profile of {config!r} failed: {f['error'].iloc[0] if 'error' in f else 'no rows'}")
    return f


def kernel_ms(metadata: dict[str, Any], config: str) -> float:
    """GPU kernel milliseconds per step of ``config``: its profile's rows without :data:`IDLE`.

    What the precision and the layout change, whether or not the host keeps the GPU waiting.
    Raises ValueError when ``config`` was not profiled or its profile failed.
    """
    f = _profile_of(metadata, config)
    return float(f.loc[f["kind"] != IDLE, "ms_per_step"].sum())


def busy_fraction(metadata: dict[str, Any], config: str) -> float:
    """The share of ``config``'s measured step in which a kernel ran (one minus the :data:`IDLE` share)."""
    f = _profile_of(metadata, config)
    return 1.0 - float(f.loc[f["kind"] == IDLE, "share_of_step"].sum())


def side_by_side(
    results: dict[str, BenchResult], *, fp32: str = "fp32_default", half: str = "article", batch: int | None = None
) -> pd.DataFrame:
    """The article's claim next to each run: FP32 and half-precision images/s and GB, ratios.

    Defaults: the article's "FP32" row is compared with ``fp32='fp32_default'`` (what a plain
    FP32 script runs: TF32 convolutions), its "FP16" row with ``half='article'`` (its own
    loop); ``batch=None`` uses each run's first comparison batch size. A configuration the run
    lacks (or that did not run) gives NaN. ``recipe`` is the recommended recipe's images/s.
    """
    batch = _side_args(results, fp32, half, batch)
    a32, a16 = ARTICLE_CLAIM["rows"]
    rows = [{
        "source": "the article (cited)", "gpu": ARTICLE_CLAIM["gpu"], "date": "", "batch": math.nan,
        "fp32 img/s": a32["img_per_s"], "half img/s": a16["img_per_s"], "speed-up": a16["img_per_s"] / a32["img_per_s"],
        "fp32 GB": a32["memory_gb"], "half GB": a16["memory_gb"], "memory ratio": a16["memory_gb"] / a32["memory_gb"],
        "recipe img/s": math.nan, "recipe / fp32": math.nan,
    }]
    for source, res in results.items():
        rows.append(_side_row(source, res, fp32, half, batch))
    return pd.DataFrame(rows)


def _side_args(results: object, fp32: object, half: object, batch: object) -> int | None:
    """:func:`side_by_side`'s arguments, checked once; ``batch`` parsed (None: each run's first)."""
    one_of("fp32", fp32, tuple(CONFIGS))
    one_of("half", half, tuple(CONFIGS))
    instance("results", results, dict, "a dict of source name -> BenchResult")
    for source, res in results.items():  # type: ignore[attr-defined]
        text("results key", source)
        instance(f"results[{source!r}]", res, BenchResult, "a BenchResult (BenchResult.load(path))")
    return None if batch is None else positive_int("batch", batch)


def _side_row(source: str, res: BenchResult, fp32: str, half: str, batch: int | None) -> dict[str, Any]:
    f = res.frame
    if not f.empty:
        f = f[(f["part"] == "comparison") if "part" in f else f.index == f.index]
        f = f[f["status"] == "ok"]
    b = batch if batch is not None else (int(res.frame["batch_size"].iloc[0]) if not res.frame.empty else None)

    def get(cfg: str, col: str) -> float:
        hit = f[(f["config"] == cfg) & (f["batch_size"] == b)] if not f.empty else f
        return float(hit[col].iloc[0]) if len(hit) else math.nan

    i32, i16, ir = get(fp32, "img_per_s"), get(half, "img_per_s"), get(RECOMMENDED, "img_per_s")
    g32, g16 = get(fp32, "peak_mem_gb"), get(half, "peak_mem_gb")
    return {
        "source": source, "gpu": res.metadata.get("device", "?"), "date": res.metadata.get("date", ""),
        "batch": b, "fp32 img/s": i32, "half img/s": i16, "speed-up": i16 / i32, "fp32 GB": g32,
        "half GB": g16, "memory ratio": g16 / g32, "recipe img/s": ir, "recipe / fp32": ir / i32,
    }


def _image_path(name: str, value: object) -> Path:
    """Where a plot is saved: a file in an existing folder, in a format matplotlib writes (no suffix: PNG)."""
    from matplotlib.backend_bases import FigureCanvasBase

    out = _path(name, value)
    if out.is_dir() or not out.parent.is_dir():
        raise ValueError(f"{name} {str(out)!r} must be a file in an existing folder")
    kinds = FigureCanvasBase.get_supported_filetypes()
    if out.suffix and out.suffix[1:].lower() not in kinds:
        raise ValueError(f"{name} {str(out)!r}: matplotlib cannot write {out.suffix!r} files; end it in one of "
                         + ", ".join(f".{k}" for k in sorted(kinds)) + " (e.g. .png)")
    return out


def plot_results(frame: pd.DataFrame, path: "str | os.PathLike[str] | None" = None, *, title: str = "") -> Any:
    """Bar charts of images/s and peak GB per configuration (comparison and exploration rows that ran).

    The article's claimed FP32/FP16 figures are drawn as dashed lines for orientation; the
    recommended recipe is green, the article's loop red, exploration rows hatched. Saves a PNG
    if ``path``; returns the matplotlib Figure.
    """
    import matplotlib.pyplot as plt

    check_frame("frame", frame, _ROW_COLUMNS)
    if path is not None:
        _image_path("path", path)
    instance("title", title, str, "a string")
    t = pd.concat([comparison_table(frame).assign(explore=False), comparison_table(frame, "explore").assign(explore=True)])
    t = t[t["img/s"].apply(lambda v: isinstance(v, (int, float)))]
    if t.empty:
        raise ValueError("frame has no comparison or exploration rows that ran (status 'ok'): nothing to plot")
    fig, axes = plt.subplots(1, 2, figsize=(12, 0.45 * max(len(t), 4) + 1.5), sharey=True)
    labels = [f"{r.label} (b={r.batch})" for r in t.itertuples()]
    colours = ["#1a7f37" if c == RECOMMENDED else ("#cf222e" if c == "article" else "#5a6f8c") for c in t["config"]]
    hatch = ["//" if e else "" for e in t["explore"]]
    for ax, col, fmt, xlabel in ((axes[0], "img/s", "%.0f", "training images/s (higher is better)"),
                                 (axes[1], "GB", "%.1f", "peak memory, GB (lower is better)")):
        bars = ax.barh(labels, t[col].astype(float), color=colours, hatch=hatch)
        if t[col].notna().any():
            ax.bar_label(bars, fmt=fmt, padding=2, fontsize=8)
        ax.set_xlabel(xlabel)
    for row, style in zip(ARTICLE_CLAIM["rows"], (":", "--"), strict=True):
        for ax, key in ((axes[0], "img_per_s"), (axes[1], "memory_gb")):
            ax.axvline(row[key], color="k", ls=style, lw=1, label=f"article {row['precision']} (cited, 4090D)")
    handles, names = axes[0].get_legend_handles_labels()
    fig.legend(handles, names, loc="lower center", ncol=2, fontsize=8, frameon=False)
    for ax in axes:
        ax.set_xlim(0, ax.get_xlim()[1] * 1.1)  # room for the value labels
    axes[0].invert_yaxis()
    if title:
        fig.suptitle(title)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    if path is not None:
        fig.savefig(path, dpi=110)
    return fig


def _cell(v: Any, fmt: str) -> str:
    if isinstance(v, str):
        return v
    return "" if v is None or v != v else format(v, fmt)


def readme_section(results: "str | os.PathLike[str]", png: "str | os.PathLike[str] | None" = None) -> str:
    """Markdown for the README: the run's table, its targets, its exploration and plot, the article's claim.

    Reads ``results`` (a file written by ``python -m fp16lab bench``), writes the plot to
    ``png`` (default: the results path with ``.png``; a file in an existing folder, checked before
    anything is read) and returns the markdown to paste.
    """
    import matplotlib.pyplot as plt

    source = existing_path("results", results, kind="file")
    png_path = _image_path("png", png) if png is not None else source.with_suffix(".png")
    res = BenchResult.load(source)
    m, b = res.metadata, res.metadata.get("benchmark", {})
    plt.close(plot_results(res.frame, png_path, title=f"{b.get('model', '')} training, {m.get('device')}, {m.get('date')}"))
    rounds = f"{b['rounds']} interleaved rounds for the repeated rows; " if b.get("rounds") else ""
    lines = [
        f"**{b.get('model', 'model')} training on {m.get('device')}** "
        f"({m.get('date')}, torch {m.get('torch')}, CUDA {m.get('cuda')}, cuDNN {m.get('cudnn')}; "
        f"synthetic data, Adam; {rounds}{b.get('windows')} timed windows of {b.get('steps')} steps, median; "
        f"MFU over the chip's dense FP16 peak). Source: `{source.as_posix()}`.",
        "",
        "| configuration | batch | images/s | MFU | peak GB | first step s | × article's loop | × default FP32 |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for _, r in res.table().iterrows():
        name = f"**{r['label']}**" if r["config"] == RECOMMENDED else r["label"]
        lines.append(
            f"| {name} | {r['batch']} | {_cell(r['img/s'], '.0f')} | {_cell(r['MFU'], '.1%')} | {_cell(r['GB'], '.1f')} "
            f"| {_cell(r['first step s'], '.0f')} | {_cell(r['x_article'], '.2f')} | {_cell(r['x_fp32_default'], '.2f')} |"
        )
    lines += ["", *_targets_markdown(res), *_explore_markdown(res), *_profile_markdown(res), "",
              f"The article's claim ({ARTICLE_CLAIM['gpu']}, batch not stated; cited): "
              + ", ".join(f"{r['precision']} {r['img_per_s']:.0f} images/s, {r['memory_gb']} GB" for r in ARTICLE_CLAIM["rows"])
              + ".", "",
              f"![{b.get('model', 'model')} benchmark on {m.get('device')}]({png_path.as_posix()})"]
    return "\n".join(lines)


def _targets_markdown(res: BenchResult) -> list[str]:
    t = res.targets()
    lines = ["| target | goal | median | spread | values | verdict |", "|---|---|---|---|---|---|"]
    for _, r in t.iterrows():
        stretch = f"; stretch {r['stretch']}: {r['stretch verdict']}" if r["stretch"] else ""
        src = f"{r['n']} {'rounds' if r['source'] == 'interleaved rounds' else 'single run'}" if r["n"] else ""
        spread = _cell(r["spread"], ".3f") if r["n"] > 1 else ""
        lines.append(f"| {r['target']} | {r['goal']} | {_cell(r['median'], '.3f')} | {spread} "
                     f"| {src} | {r['verdict']}{stretch} |")
    return lines


def _explore_markdown(res: BenchResult) -> list[str]:
    t = res.table("explore")
    if t.empty:
        return []
    lines = ["", "| also tried (single runs) | images/s | × article's loop | first step s | note |", "|---|---|---|---|---|"]
    for _, r in t.iterrows():
        lines.append(f"| {r['label']} | {_cell(r['img/s'], '.0f')} | {_cell(r['x_article'], '.2f')} "
                     f"| {_cell(r['first step s'], '.0f')} | {str(r['note']).replace('|', '/')[:100]} |")
    return lines


def _profile_markdown(res: BenchResult) -> list[str]:
    t = profile_table(res.metadata)
    if t.empty:
        return []
    names = [CONFIGS[c].label if c in CONFIGS else c for c in t.columns]
    lines = ["", "| share of a step (profiled) | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
    for kind, r in t.iterrows():
        lines.append(f"| {kind} | " + " | ".join(_cell(v, ".0%") if not isinstance(v, str) else v[:60] for v in r) + " |")
    return lines
