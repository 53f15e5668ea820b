"""The evaluation report names what ran: the reranker in the labels, no latency of a stage that did not run, a
legend for b1 … b5, one share panel when a zoom would repeat it, progress on a terminal."""
from __future__ import annotations

import dataclasses
import struct
from pathlib import Path

from rag_core.config import with_overrides
from rag_core.eval.gold import load_gold
from rag_core.eval.plots import plot_f1, plot_latency_share, stages_that_ran
from rag_core.eval.report import label_for, markdown
from rag_core.eval.run import evaluate, run_system
from rag_core.eval.systems import SYSTEMS
from tests.conftest import SHARED_EVAL


def png_size(path: Path) -> tuple[int, int]:
    return struct.unpack(">II", path.read_bytes()[16:24])


def test_labels_name_the_reranker_that_ran():
    full = SYSTEMS["full"].label
    assert "rerank" not in label_for(full, "none")
    assert "rerank (learned-mlp)" in label_for(full, "learned-mlp")
    assert label_for("B2b: BM25 only", "none") == "B2b: BM25 only"


def latency(generate_share: float) -> dict:
    stages = {"rewrite": 0.05, "bm25": 0.3, "dense": 0.3, "rrf": 0.01, "rerank": 0.0, "generate": generate_share}
    return {s: {"p50": 10 * v, "p90": 12 * v, "p99": 15 * v, "mean": 10 * v, "share": v} for s, v in stages.items()} | {
        "total": {"p50": 10, "p90": 12, "p99": 15, "mean": 10, "share": 1.0}}


def test_stages_that_did_not_run_are_left_out():
    assert "rerank" not in stages_that_ran(latency(0.3))  # never timed
    lat = latency(0.3)
    lat["rerank"] = {"p50": 0.001, "p90": 0.001, "p99": 0.002, "mean": 0.001, "share": 0.0}
    assert "rerank" in stages_that_ran(lat) and "rerank" not in stages_that_ran(lat, ["rerank"])
    assert set(stages_that_ran(lat, ["rerank"])) == {"rewrite", "bm25", "dense", "rrf", "generate", "total"}


def test_the_zoom_panel_only_when_generation_hides_retrieval(tmp_path):
    one = png_size(plot_latency_share(tmp_path / "a.png", stages_that_ran(latency(0.05))))
    two = png_size(plot_latency_share(tmp_path / "b.png", stages_that_ran(latency(0.9))))
    assert two[0] > 1.5 * one[0]  # 11 in wide with the zoom, 6.5 in without


def test_the_f1_plot_has_a_legend_for_the_short_names(tmp_path):
    systems = {n: {"f1": 0.6, "f1_ci": [0.5, 0.7], "label": SYSTEMS[n].label} for n in ("full", "b1", "b2a", "b5")}
    bare = {n: {"f1": 0.6, "f1_ci": [0.5, 0.7]} for n in systems}
    with_legend = png_size(plot_f1(tmp_path / "legend.png", systems))
    without = png_size(plot_f1(tmp_path / "bare.png", bare))
    assert with_legend[1] > without[1]  # the legend's lines add height under the bars


def test_the_report_says_what_ran(sample_cfg, tmp_path, capsys):
    gold = tmp_path / "gold.jsonl"
    gold.write_text("".join((SHARED_EVAL / "dev.jsonl").read_text(encoding="utf-8").splitlines(True)[:8]),
                    encoding="utf-8")
    cfg = dataclasses.replace(sample_cfg, paths=dataclasses.replace(sample_cfg.paths, data_dir=str(tmp_path / "data")))
    if "learned_ranker" in {f.name for f in dataclasses.fields(cfg.retrieval)}:  # no reranker of any kind here
        cfg = with_overrides(cfg, retrieval={"learned_ranker": False})
    report = evaluate(cfg, gold, ["full", "b1"], runs=1, out_dir=tmp_path / "out", resamples=200)
    full = report["systems"]["full"]
    assert full["reranker"] == "none" and "rerank" not in full["label"]
    assert "= full" in report["systems"]["b1"]["label"]
    text = (tmp_path / "out" / "report.md").read_text(encoding="utf-8")
    assert "| rerank |" not in text and "Did not run: rerank." in text
    assert markdown(report) == text

    from tests.conftest import engine_for

    run_system(engine_for(sample_cfg), SYSTEMS["full"], load_gold(gold)[:3], runs=1, progress=True)
    assert "full" in capsys.readouterr().err  # the bar, on stderr
