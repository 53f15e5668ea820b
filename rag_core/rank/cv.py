"""Honest numbers for the learned ranker, on the serving build:

- dev.jsonl + dev-multiturn.jsonl by k-fold (items of the test fold are never trained on; pseudo-queries always are);
- dev2.jsonl (kept for checking) with the ranker trained on everything else, as `coffeebot index` trains it;
- fusion order against the ranker (Hit@1, Hit@5, MRR@5 of the gold chunks, 95 % bootstrap intervals, paired
  sign-flip p), recall of the gold chunk in the fused pool, a leave-one-group-out feature ablation and the weights.

    .venv/bin/python -m rag_core.rank.cv [--config F] [--folds 5] [--out bench/results/ranker.md]
"""
from __future__ import annotations

import argparse
import json
import logging
import time
from pathlib import Path
from typing import Sequence

import numpy as np

from ..config import load_config
from ..eval.stats import bootstrap_ci, paired_permutation_test
from .features import FEATURES
from .infer import Featurizer
from .pseudo import pseudo_queries
from .train import GOLD_DIR, Example, Group, collect, corpus_stats, fit, gold_examples

log = logging.getLogger(__name__)

ABLATIONS = {
    "channel ranks (rrf, rrf_rr, bm25_rr, dense_rr)": ("rrf", "rrf_rr", "bm25_rr", "dense_rr"),
    "BM25 of text and headings": ("bm25_text", "bm25_head"),
    "IDF coverage (words, headings, bigrams, title)": ("cov_words", "cov_head", "cov_bigram", "title_cov"),
    "phrase and proximity": ("phrase", "window"),
    "dense cosine": ("dense_cos",),
    "FAQ question similarity": ("faq",),
    "intent vs passage": tuple(f for f in FEATURES if f.startswith("intent_")),
    "length and document share": ("length", "short", "doc_share"),
    "domain terms (lexicon entities)": ("ent_text", "ent_head"),
    "section and document coverage": ("cov_section", "cov_doc"),
}


def per_item(groups: Sequence[Group], scores: Sequence[np.ndarray] | None) -> dict[str, np.ndarray]:
    """Hit@1, Hit@5 and reciprocal rank (within the top 5) per question; `scores` None: fusion order."""
    h1, h5, rr = [], [], []
    for i, g in enumerate(groups):
        order = np.argsort(-scores[i], kind="stable") if scores is not None else np.arange(len(g.y))
        top = g.y[order][:5]
        h1.append(float(top[:1].sum() > 0))
        h5.append(float(top.sum() > 0))
        rr.append(1.0 / (int(np.argmax(top > 0)) + 1) if top.sum() > 0 else 0.0)
    return {"hit_at_1": np.array(h1), "hit_at_5": np.array(h5), "mrr": np.array(rr)}


def _mask(groups: Sequence[Group], drop: Sequence[str]) -> list[Group]:
    keep = [i for i, f in enumerate(FEATURES) if f not in drop]
    out = []
    for g in groups:
        x = np.zeros_like(g.x)
        x[:, keep] = g.x[:, keep]  # a dropped feature is constant: the model cannot use it
        out.append(Group(g.example, x, g.y, g.positions))
    return out


def kfold_scores(labelled: list[Group], pseudo: list[Group], folds: int, drop: Sequence[str] = ()) -> list[np.ndarray]:
    labelled, pseudo = _mask(labelled, drop), _mask(pseudo, drop)
    order = np.random.RandomState(0).permutation(len(labelled))
    scores: list[np.ndarray | None] = [None] * len(labelled)
    for fold in np.array_split(order, folds):
        test = set(int(i) for i in fold)
        train = [g for i, g in enumerate(labelled) if i not in test] + pseudo
        model = fit([g for g in train if 0 < g.y.sum() < len(g.y)])
        for i in test:
            scores[i] = model.score(labelled[i].x)
    return scores


def _summary(values: dict[str, np.ndarray]) -> dict:
    out = {}
    for k, v in values.items():
        lo, hi, _ = bootstrap_ci(v, n_resamples=5000, seed=0)
        out[k] = [round(float(v.mean()), 3), round(lo, 3), round(hi, 3)]
    return out


def run(config: str | None, folds: int) -> dict:
    from ..pipeline import load_engine

    cfg = load_config(config)
    engine = load_engine(cfg, with_reranker=False)
    retriever = engine.retriever
    index = retriever.index
    stats = corpus_stats(index.dir, index)
    featurize = Featurizer(index, engine.tokenizer, stats, cfg.retrieval.rrf_k)
    size = cfg.retrieval.learned_candidates
    sets = {}
    for name in ("dev.jsonl", "dev-multiturn.jsonl", "dev2.jsonl"):
        examples = gold_examples(index, engine.tokenizer, cfg.history.har_turns, [GOLD_DIR / name])
        sets[name] = collect(retriever, featurize, examples, max(size, 40))
    pseudo = [Example(f"pseudo:{q.kind}:{n}", q.text, q.text, q.positives)
              for n, q in enumerate(pseudo_queries(index.chunks, engine.tokenizer, stats, cfg.retrieval.ranker_pseudo_queries))]
    pseudo_groups = collect(retriever, featurize, pseudo, size)
    recall = {name: {f"@{k}": round(float(np.mean([g.y[:k].sum() > 0 for g in gs])), 3) for k in (5, 10, 20, 30, 40)}
              for name, gs in sets.items()}
    # features are normalised per pool: collect again at the size the ranker sees
    cut = {name: collect(retriever, featurize, [g.example for g in gs], size) for name, gs in sets.items()}
    labelled = cut["dev.jsonl"] + cut["dev-multiturn.jsonl"]
    n_dev = len(cut["dev.jsonl"])
    t = time.monotonic()
    cv = kfold_scores(labelled, pseudo_groups, folds)
    fit_s = (time.monotonic() - t) / folds
    table = {}
    for name, part in (("dev.jsonl", slice(0, n_dev)), ("dev-multiturn.jsonl", slice(n_dev, None))):
        groups = labelled[part]
        fusion, ranked = per_item(groups, None), per_item(groups, cv[part])
        table[name + " (k-fold)"] = {"n": len(groups), "b1 fusion order": _summary(fusion), "full learned": _summary(ranked),
                                     "p": {k: paired_permutation_test(ranked[k], fusion[k], n_permutations=5000, seed=1)
                                           for k in fusion}}
    model = fit([g for g in labelled + pseudo_groups if 0 < g.y.sum() < len(g.y)])
    dev2 = cut["dev2.jsonl"]
    fusion, ranked = per_item(dev2, None), per_item(dev2, [model.score(g.x) for g in dev2])
    table["dev2.jsonl (untuned)"] = {"n": len(dev2), "b1 fusion order": _summary(fusion), "full learned": _summary(ranked),
                                     "p": {k: paired_permutation_test(ranked[k], fusion[k], n_permutations=5000, seed=1)
                                           for k in fusion}}
    ablation = {}
    for label, drop in ABLATIONS.items():
        scores = kfold_scores(labelled, pseudo_groups, folds, drop)
        m = per_item(labelled[:n_dev], scores[:n_dev])
        ablation[label] = {k: round(float(v.mean()), 3) for k, v in m.items()}
    full = per_item(labelled[:n_dev], cv[:n_dev])
    ablation["(none dropped)"] = {k: round(float(v.mean()), 3) for k, v in full.items()}
    return {"build": index.build_id, "candidates": size, "folds": folds, "pseudo_queries": len(pseudo_groups),
            "recall_of_pool": recall, "table": table, "ablation_dev_kfold": ablation,
            "weights": [[f, round(w, 3)] for f, w in model.explain()], "fit_seconds_per_fold": round(fit_s, 2)}


def markdown(r: dict) -> str:
    lines = [f"# Learned ranker: honest numbers (build {r['build']}, {r['candidates']} candidates, "
             f"{r['folds']}-fold on dev, {r['pseudo_queries']} pseudo-queries)", "",
             "Hit@1, Hit@5 and MRR@5 of the gold chunk, mean [95 % bootstrap interval]; p: paired sign-flip test.", "",
             "| set | n | system | Hit@1 | Hit@5 | MRR |", "| --- | --- | --- | --- | --- | --- |"]
    for name, row in r["table"].items():
        for system in ("b1 fusion order", "full learned"):
            cells = " | ".join(f"{v[0]:.3f} [{v[1]:.3f}, {v[2]:.3f}]" for v in row[system].values())
            lines.append(f"| {name} | {row['n']} | {system} | {cells} |")
        lines.append(f"| | | p (full vs b1) | " + " | ".join(f"{v:.3f}" for v in row["p"].values()) + " |")
    lines += ["", "Recall of the gold chunk in the fused pool (fusion order):", "",
              "| set | " + " | ".join(next(iter(r["recall_of_pool"].values()))) + " |",
              "| --- |" + " --- |" * 5]
    for name, rec in r["recall_of_pool"].items():
        lines.append(f"| {name} | " + " | ".join(f"{v:.3f}" for v in rec.values()) + " |")
    lines += ["", "Ablation on dev (k-fold): the ranker retrained without one feature group.", "",
              "| dropped | Hit@1 | Hit@5 | MRR |", "| --- | --- | --- | --- |"]
    for label, m in r["ablation_dev_kfold"].items():
        lines.append(f"| {label} | {m['hit_at_1']:.3f} | {m['hit_at_5']:.3f} | {m['mrr']:.3f} |")
    lines += ["", "Weights of the shipped model (on standardised features), largest first:", "",
              ", ".join(f"{f} {w:+.2f}" for f, w in r["weights"]), "",
              f"Fitting one fold: {r['fit_seconds_per_fold']} s."]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config")
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--out", default="bench/results/ranker.md")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    result = run(args.config, args.folds)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(markdown(result), encoding="utf-8")
    out.with_suffix(".json").write_text(json.dumps(result, ensure_ascii=False, indent=1), encoding="utf-8")
    print(markdown(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
