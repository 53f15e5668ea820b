"""`coffeebot eval`: run systems over a gold set and score them as the seed paper does.

Per item: citation P/R/F1 (macro), document-level P/R/F1, Hit@K and MRR of the gold chunks in the evidence; 95 %
bootstrap intervals over items (runs averaged per item first); paired sign-flip permutation tests against the full
system; error categories of the full system; per-stage latency. Markdown report and plots in --out; JSON on stdout.
"""
from __future__ import annotations

import json
import logging
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

from ..config import Config, Secrets
from ..pipeline import Engine
from ..records import REPLIES, Turn
from .gold import GoldItem, load_gold, map_gold
from .metrics import ItemScore, category_shares, classify_error, latency_summary, macro_average, score_item
from .stats import bootstrap_ci, mean_over_runs, paired_permutation_test
from .systems import SYSTEMS, EngineFactory, Skip, System

log = logging.getLogger(__name__)


@dataclass
class ItemRun:
    item: GoldItem
    cited: list[str]
    evidence: list[str]
    timings: dict[str, float]
    score: ItemScore
    category: str
    mode: str


@dataclass
class SystemResult:
    system: System
    runs: list[list[ItemRun]]  # runs × items
    warnings: list[str]
    gold_errors: list[str]
    reranker: str = "none"  # what reranked: the cross-encoder's or the learned ranker's name, or "none"
    alone: list[ItemRun] = field(default_factory=list)  # topic-switch items asked again without their history

    def per_item(self, metric: str) -> np.ndarray:
        from .metrics import per_item_values

        return mean_over_runs([per_item_values([r.score for r in run], metric) for run in self.runs])


def reranker_that_ran(engine: Engine, system: System) -> str:
    """The reranker the engine reports for this system's options ("none": fusion order)."""
    if not system.options.channels.rerank:
        return "none"
    name = getattr(engine.retriever, "reranker_name", None)  # the cross-encoder, else a learned ranker, else "none"
    return name or getattr(engine.reranker, "name", None) or "none"


def own_history(engine: Engine, history: Sequence[Turn], options, cache: dict) -> tuple[Turn, ...]:
    """`history` as a user of the bot would have it: each assistant turn is what the engine itself answers to the
    user turn before it, given the turns rebuilt so far (cited, extractive or generated, a refusal where it refuses).
    `cache` keys on the turns before each reply, so a history many items share is answered once."""
    turns: list[Turn] = []
    for turn in history:
        if turn.role == "assistant" and turns and turns[-1].role == "user":
            key = tuple(turns)
            if key not in cache:
                cache[key] = engine.answer(turns[-1].content, turns[:-1], options).text
            turn = Turn("assistant", cache[key])
        turns.append(turn)
    return tuple(turns)


def run_system(engine: Engine, system: System, items: Sequence[GoldItem], runs: int,
               progress: bool = False, replies: str = "written") -> SystemResult:
    """Every item through the engine `runs` times; with `progress`, a bar on stderr (for a terminal). `replies`
    "own": each history's assistant turns are the system's own replies (`own_history`), as in a real chat."""
    from tqdm import tqdm

    index = engine.index
    documents = {d["path"]: d["text"] for d in index.documents.values()}
    mapping = map_gold(items, documents, index.chunks)

    def run_item(item: GoldItem, history: Sequence[Turn]) -> ItemRun | None:
        answer = engine.answer(item.question, list(history), system.options)
        cited = [c.id for c in answer.citations]
        evidence = [h.chunk.id for h in answer.evidence]
        gold = mapping.gold.get(item.id, set()) if item.answerable else set()
        if item.answerable and not gold:
            return None  # its quotes are reported in gold_errors
        score = score_item(cited, evidence, gold, item.answerable)
        category = classify_error(cited, evidence, gold, item.answerable)
        return ItemRun(item, cited, evidence, dict(answer.timings_ms), score, category, answer.mode)

    cache: dict = {}

    def history_of(item: GoldItem) -> Sequence[Turn]:
        return own_history(engine, item.history, system.options, cache) if replies == "own" else item.history

    all_runs = []
    for run in range(runs):
        desc = system.name if runs == 1 else f"{system.name} run {run + 1}/{runs}"
        bar = tqdm(items, desc=desc, unit="q", disable=not progress, leave=False, file=sys.stderr)
        all_runs.append([r for item in bar if (r := run_item(item, history_of(item)))])
    # A topic switch must be answered as if asked alone: the same questions without their history, for comparison.
    alone = [r for item in items if item.kind == "switch" and (r := run_item(item, ()))]
    return SystemResult(system, all_runs, list(engine.warnings), mapping.errors, reranker_that_ran(engine, system),
                        alone)


def kind_summary(runs: Sequence[ItemRun]) -> dict:
    """Citation F1, retrieval and refusal figures of one kind of item (first run)."""
    means = macro_average([r.score for r in runs])
    answerable = [r for r in runs if r.item.answerable]
    unanswerable = [r for r in runs if not r.item.answerable]
    return {
        "n": len(runs),
        "f1": means["f1"],
        "hit_at_1": means.get("hit@1"),
        "hit_at_5": means.get("hit@5"),
        "mrr": means["rr"],
        "refused": sum(1 for r in unanswerable if not r.cited) / len(unanswerable) if unanswerable else None,
        "false_refusals": sum(1 for r in answerable if not r.cited) / len(answerable) if answerable else None,
    }


def by_kind(result: SystemResult) -> dict[str, dict]:
    kinds: dict[str, list[ItemRun]] = {}
    for r in result.runs[0]:
        kinds.setdefault(r.item.kind or "single", []).append(r)
    out = {kind: kind_summary(rs) for kind, rs in sorted(kinds.items())}
    if result.alone:
        out["switch_alone"] = kind_summary(result.alone)
    return out


def summarise(result: SystemResult, resamples: int, seed: int = 0) -> tuple[dict, np.ndarray]:
    f1 = result.per_item("f1")
    lo, hi, boot = bootstrap_ci(f1, n_resamples=resamples, seed=seed)
    means = macro_average([r.score for run in result.runs for r in run])
    answerable = [r for r in result.runs[0] if r.item.answerable]
    refused = [r for r in result.runs[0] if not r.item.answerable and not r.cited]
    unanswerable = [r for r in result.runs[0] if not r.item.answerable]
    from .report import label_for

    summary = {
        "label": label_for(result.system.label, result.reranker),
        "reranker": result.reranker,
        "n": len(result.runs[0]),
        "precision": float(np.nanmean(result.per_item("precision"))),
        "recall": float(np.nanmean(result.per_item("recall"))),
        "f1": float(np.nanmean(f1)),
        "f1_ci": [lo, hi],
        "doc_precision": means["doc_precision"],
        "doc_recall": means["doc_recall"],
        "doc_f1": means["doc_f1"],
        "hit_at_1": means.get("hit@1"),
        "hit_at_3": means.get("hit@3"),
        "hit_at_5": means.get("hit@5"),
        "mrr": means["rr"],
        "refusal_rate_unanswerable": len(refused) / len(unanswerable) if unanswerable else None,
        "false_refusal_rate": sum(1 for r in answerable if not r.cited) / len(answerable) if answerable else None,
        "by_kind": by_kind(result),
        "modes": sorted({r.mode for run in result.runs for r in run}),
        "warnings": sorted(set(result.warnings)),
    }
    return summary, boot


def evaluate(cfg: Config, gold_path: Path, names: Sequence[str], runs: int, out_dir: Path, resamples: int, chat=None,
             progress: bool = False, replies: str = "written") -> dict:
    if replies not in REPLIES:
        raise ValueError(f"replies must be one of {REPLIES}, not {replies!r}")
    items = load_gold(gold_path)
    factory = EngineFactory(cfg, cfg.data_dir / "eval", chat=chat)
    systems: dict[str, dict] = {}
    results: dict[str, SystemResult] = {}
    boots: dict[str, np.ndarray] = {}
    skipped: dict[str, str] = {}
    for name in names:
        if name not in SYSTEMS:
            skipped[name] = f"unknown system (known: {', '.join(SYSTEMS)})"
            continue
        system = SYSTEMS[name]
        try:
            engine, _warnings = factory.engine(system)
        except Skip as exc:
            skipped[name] = str(exc)
            log.warning("system %s skipped: %s", name, exc)
            continue
        started = time.monotonic()
        results[name] = run_system(engine, system, items, runs, progress, replies)
        systems[name], boots[name] = summarise(results[name], resamples)
        systems[name]["seconds"] = round(time.monotonic() - started, 1)
        log.info("system %s: F1 %.3f", name, systems[name]["f1"])
    _note_degenerate(systems)
    comparisons = []
    base = "full" if "full" in results else next(iter(results), None)
    for name, result in results.items():
        if name == base:
            continue
        if [r.item.id for r in result.runs[0]] != [r.item.id for r in results[base].runs[0]]:
            continue  # different item sets (gold errors under one chunking): not paired
        a, b = results[base].per_item("f1"), result.per_item("f1")
        comparisons.append({"a": base, "b": name, "delta_f1": float(np.nanmean(a) - np.nanmean(b)),
                            "p": paired_permutation_test(a, b, n_permutations=resamples, seed=1)})
    report: dict = {"gold": str(gold_path), "items": len(items), "runs": runs, "replies": replies, "systems": systems,
                    "skipped": skipped, "comparisons": comparisons}
    if base:
        full = results[base]
        report["errors"] = {"system": base, "shares": category_shares(r.category for run in full.runs for r in run)}
        report["latency"] = latency_summary([r.timings for run in full.runs for r in run])
        report["gold_errors"] = full.gold_errors
        report["skipped_stages"] = ["rerank"] if full.reranker == "none" else []
        report["items_detail"] = [
            {"id": r.item.id, "cited": r.cited, "evidence": r.evidence, "category": r.category, "f1": r.score.f1}
            for r in full.runs[0]
        ]
    write_report(out_dir, report, boots)
    return report


def _note_degenerate(systems: dict[str, dict]) -> None:
    """Say so when an ablation equals the full system because the full system already runs without that model."""
    full_warnings = " ".join(systems.get("full", {}).get("warnings", []))
    if "b1" in systems and systems.get("full", {}).get("reranker") == "none":
        systems["b1"]["label"] += " (= full: no reranker ran in full either)"
    if "b3" in systems and "embedder fallback in use" in full_warnings:
        systems["b3"]["label"] += " (= full: it already uses the fallback here)"


def write_report(out_dir: Path, report: dict, boots: dict[str, np.ndarray]) -> None:
    from .plots import plot_report
    from .report import markdown

    out_dir.mkdir(parents=True, exist_ok=True)
    plots = plot_report(out_dir, report["systems"], boots, report.get("latency", {}), report.get("skipped_stages", ()))
    report["plots"] = [str(p) for p in plots]
    (out_dir / "report.md").write_text(markdown(report), encoding="utf-8")
    (out_dir / "results.json").write_text(json.dumps(report, ensure_ascii=False, indent=1), encoding="utf-8")


def main(cfg: Config, args) -> int:
    names = [n.strip() for n in args.systems.split(",") if n.strip()]
    chat = None
    key = Secrets.from_env().llm_api_key
    if key:
        from ..llm import OpenAIChatModel

        chat = OpenAIChatModel(cfg.llm, key)
    report = evaluate(cfg, Path(args.gold), names, args.runs, Path(args.out), args.resamples, chat=chat,
                      progress=sys.stderr.isatty(), replies=args.replies)
    if args.json:
        slim = {k: v for k, v in report.items() if k != "items_detail"}
        sys.stdout.write(json.dumps(slim, ensure_ascii=False) + "\n")
    else:
        from .report import markdown

        print(markdown(report))
    return 0
