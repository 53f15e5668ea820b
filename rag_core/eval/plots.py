"""Report plots of an evaluation run, written as PNG files.

Figures are built with :class:`matplotlib.figure.Figure` and rendered by the Agg canvas, so no pyplot state or
GUI backend is involved. Labels are kept ASCII (no CJK font is assumed): non-ASCII characters in system or
stage names are replaced by "?".
"""
from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
from matplotlib.figure import Figure

RETRIEVAL_STAGES: tuple[str, ...] = ("spell", "rewrite", "bm25", "dense", "rrf", "rerank")
_PERCENTILES: tuple[str, ...] = ("p50", "p90", "p99")


def _ascii(label: str) -> str:
    """The label with non-ASCII characters replaced by '?'."""
    return label.encode("ascii", "replace").decode("ascii")


def _save(fig: Figure, path: Path, tight: bool = True) -> Path:
    if tight:
        fig.tight_layout()
    fig.savefig(path, dpi=110)
    return path


def plot_f1(path: Path, systems: Mapping[str, Mapping]) -> Path:
    """Bar chart of each system's macro F1 with its 95% interval as an error bar; a legend says what each short
    name (b1 … b5) is, from the systems' labels."""
    names = list(systems)
    f1 = np.array([float(systems[n]["f1"]) for n in names])
    ci = np.array([[float(v) for v in systems[n]["f1_ci"]] for n in names]).reshape(-1, 2)
    err = np.vstack([np.maximum(f1 - ci[:, 0], 0), np.maximum(ci[:, 1] - f1, 0)])
    labels = {n: str(systems[n].get("label") or "") for n in names}
    legend = [f"{n}: {_ascii(labels[n])}" for n in names if labels[n] and labels[n] != n]
    fig = Figure(figsize=(max(4.0, 1.2 * len(names) + 2), 4 + 0.22 * len(legend)))
    ax = fig.add_subplot()
    if legend:
        fig.text(0.01, 0.01, "\n".join(legend), fontsize=7, family="monospace", va="bottom")
        fig.subplots_adjust(bottom=0.12 + 0.045 * len(legend))
    x = np.arange(len(names))
    ax.bar(x, f1, yerr=err, capsize=6, color="tab:blue", alpha=0.8)
    for xi, v in zip(x, f1):
        ax.annotate(f"{v:.3f}", (xi, v), textcoords="offset points", xytext=(8, 2), fontsize=8)
    ax.set_xticks(x, [_ascii(n) for n in names], rotation=20 if len(names) > 4 else 0)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("citation F1 (macro)")
    ax.set_title("Citation F1 per system, 95% bootstrap interval")
    return _save(fig, path, tight=not legend)  # tight_layout would drop the legend's room


def plot_bootstraps(path: Path, bootstraps: Mapping[str, np.ndarray]) -> Path:
    """One histogram panel per system of its bootstrap means, with the 2.5/97.5 percentiles marked."""
    names = list(bootstraps)
    cols = min(3, len(names))
    rows = -(-len(names) // cols)
    fig = Figure(figsize=(4 * cols, 3 * rows))
    axes = fig.subplots(rows, cols, squeeze=False, sharex=True)
    for ax, name in zip(axes.ravel(), names):
        means = np.asarray(bootstraps[name], dtype=float)
        ax.hist(means, bins=40, color="tab:green", alpha=0.8)
        lo, hi = np.quantile(means, [0.025, 0.975])
        for v in (lo, hi):
            ax.axvline(v, color="black", linestyle="--", linewidth=1)
        ax.set_title(f"{_ascii(name)}  [{lo:.3f}, {hi:.3f}]", fontsize=9)
        ax.set_xlabel("bootstrap mean F1")
    for ax in axes.ravel()[len(names):]:
        ax.set_visible(False)
    return _save(fig, path)


def plot_latency_percentiles(path: Path, latency: Mapping[str, Mapping[str, float]]) -> Path:
    """Grouped bars of p50/p90/p99 latency per stage, on a log scale (stages differ by orders of magnitude)."""
    stages = list(latency)
    fig = Figure(figsize=(max(6.0, 1.1 * len(stages) + 2), 4))
    ax = fig.add_subplot()
    x = np.arange(len(stages))
    width = 0.8 / len(_PERCENTILES)
    for i, pct in enumerate(_PERCENTILES):
        vals = [max(float(latency[s][pct]), 1e-3) for s in stages]
        ax.bar(x + (i - 1) * width, vals, width, label=pct)
    ax.set_yscale("log")
    ax.set_xticks(x, [_ascii(s) for s in stages])
    ax.set_ylabel("latency (ms, log scale)")
    ax.set_title("Latency percentiles per stage")
    ax.legend()
    return _save(fig, path)


def _share_bars(ax, stages: list[str], shares: list[float], title: str) -> None:
    x = np.arange(len(stages))
    ax.bar(x, [100 * s for s in shares], color="tab:orange", alpha=0.85)
    for xi, s in zip(x, shares):
        ax.annotate(f"{100 * s:.1f}%" if s >= 0.01 else f"{100 * s:.2f}%", (xi, 100 * s), textcoords="offset points", xytext=(0, 2),
                    ha="center", fontsize=8)
    ax.set_xticks(x, [_ascii(s) for s in stages])
    ax.set_ylabel("mean share of total (%)")
    ax.set_title(title)
    top = max([100 * s for s in shares] + [0.0])
    ax.set_ylim(0, top * 1.2 if top > 0 else 1.0)


ZOOM_WHEN_HIDDEN = 0.5  # the retrieval zoom is drawn only when the other stages take at least this share


def plot_latency_share(path: Path, latency: Mapping[str, Mapping[str, float]]) -> Path:
    """Mean share of the total per stage; a second panel zooms on the retrieval stages only when generation takes
    most of the time (otherwise the zoom would repeat the first panel)."""
    stages = [s for s in latency if s != "total"]
    retrieval = [s for s in RETRIEVAL_STAGES if s in latency]
    hidden = sum(float(latency[s]["share"]) for s in stages if s not in retrieval)
    zoom = bool(retrieval) and hidden >= ZOOM_WHEN_HIDDEN
    fig = Figure(figsize=(11, 4) if zoom else (6.5, 4))
    axes = fig.subplots(1, 2) if zoom else [fig.add_subplot()]
    _share_bars(axes[0], stages, [float(latency[s]["share"]) for s in stages], "Cost share per stage")
    if zoom:
        _share_bars(axes[1], retrieval, [float(latency[s]["share"]) for s in retrieval],
                    "Retrieval stages only (zoom, generate excluded)")
    return _save(fig, path)


def stages_that_ran(latency: Mapping[str, Mapping[str, float]], skipped: Sequence[str] = ()) -> dict:
    """The latency summary without the stages that did not run: never timed (all zeros) or named in `skipped`
    (e.g. "rerank" when no reranker was loaded: its timing is only the bookkeeping around nothing)."""
    return {s: v for s, v in latency.items()
            if s not in skipped and (s == "total" or float(v.get("mean", 0)) > 0 or float(v.get("p99", 0)) > 0)}


def plot_report(
    out_dir: Path,
    systems: dict[str, dict],
    bootstraps: dict[str, np.ndarray],
    latency: dict[str, dict[str, float]],
    skipped_stages: Sequence[str] = (),
) -> list[Path]:
    """Write the report's PNG plots into ``out_dir`` (created if needed); return the written paths.

    ``systems[name]`` holds at least "f1" and "f1_ci" ([lo, hi]); ``bootstraps[name]`` the bootstrap means of
    its F1; ``latency`` is :func:`rag_core.eval.metrics.latency_summary` output. Empty inputs skip their plots;
    stages that did not run (see ``stages_that_ran``) are not drawn.
    """
    latency = stages_that_ran(latency, skipped_stages) if latency else latency
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    if systems:
        written.append(plot_f1(out_dir / "f1_by_system.png", systems))
    if bootstraps:
        written.append(plot_bootstraps(out_dir / "bootstrap_f1.png", bootstraps))
    if latency:
        written.append(plot_latency_percentiles(out_dir / "latency_percentiles.png", latency))
        written.append(plot_latency_share(out_dir / "latency_share.png", latency))
    return written
