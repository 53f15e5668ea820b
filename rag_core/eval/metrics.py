"""Per-item citation and retrieval metrics, error categories and latency summaries.

Ids are ``"docid#cid"``. The scoring rules are those of ``shared/eval/README.md``:

* P is the set of cited ids, G the gold chunk set. Precision |P∩G|/|P|, recall |P∩G|/|G|, F1 their harmonic
  mean; all three are 0 when P is empty and G is not.
* Unanswerable items (``answerable`` false, G empty): citing nothing scores 1 for P, R and F1, citing anything 0.
* The document-level scores apply the same rules to the documents of P and of G.
* Hit@K and reciprocal rank look for the first gold chunk in the ranked evidence; they are ``None`` for
  unanswerable items, which every average here leaves out.
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Callable, Iterable, Mapping, Sequence

import numpy as np

DocOf = Callable[[str], str]

#: Error categories, in the order of precedence :func:`classify_error` applies (after "Correct").
ERROR_CATEGORIES: tuple[str, ...] = (
    "Correct",
    "NoCitation",
    "WrongDoc",
    "WrongChunk",
    "MissingEvidence",
    "ExtraCitation",
    "FalseCitation",
)

STAGES: tuple[str, ...] = ("spell", "rewrite", "bm25", "dense", "rrf", "rerank", "generate", "total")


def default_doc_of(chunk_id: str) -> str:
    """The docid of ``"docid#cid"`` (everything before the first ``#``)."""
    return chunk_id.split("#", 1)[0]


@dataclass(frozen=True)
class ItemScore:
    """Scores of one answer to one gold item."""

    precision: float
    recall: float
    f1: float
    doc_precision: float
    doc_recall: float
    doc_f1: float
    hit: dict[int, float] | None  # K -> 1.0 if a gold chunk is in the top K of the evidence; None if unanswerable
    rr: float | None  # 1 / rank of the first gold chunk in the evidence (0 if none); None if unanswerable


def _check_item(gold: set[str], answerable: bool) -> None:
    if answerable and not gold:
        raise ValueError("answerable item with an empty gold set (a gold quote was not found?)")
    if not answerable and gold:
        raise ValueError("unanswerable item with a non-empty gold set")


def set_prf(predicted: set[str], gold: set[str]) -> tuple[float, float, float]:
    """Precision, recall and F1 of a predicted set against a gold set, with the README's edge cases."""
    if not gold:
        return (1.0, 1.0, 1.0) if not predicted else (0.0, 0.0, 0.0)
    if not predicted:
        return 0.0, 0.0, 0.0
    tp = len(predicted & gold)
    if tp == 0:
        return 0.0, 0.0, 0.0
    p, r = tp / len(predicted), tp / len(gold)
    return p, r, 2 * p * r / (p + r)


def _dedupe(ids: Iterable[str]) -> list[str]:
    """The ids in order, each kept at its first occurrence."""
    return list(dict.fromkeys(ids))


def score_item(
    cited: Sequence[str],
    evidence: Sequence[str],
    gold: set[str],
    answerable: bool,
    doc_of: DocOf = default_doc_of,
    ks: Sequence[int] = (1, 3, 5),
) -> ItemScore:
    """Score one item: citation P/R/F1, document P/R/F1, Hit@K and reciprocal rank over the ranked evidence."""
    gold = set(gold)
    _check_item(gold, answerable)
    predicted = set(cited)
    p, r, f = set_prf(predicted, gold)
    dp, dr, df = set_prf({doc_of(i) for i in predicted}, {doc_of(g) for g in gold})
    if not answerable:
        return ItemScore(p, r, f, dp, dr, df, None, None)
    ranked = _dedupe(evidence)
    first = next((rank for rank, cid in enumerate(ranked, 1) if cid in gold), None)
    hit = {k: float(first is not None and first <= k) for k in ks}
    rr = 0.0 if first is None else 1.0 / first
    return ItemScore(p, r, f, dp, dr, df, hit, rr)


def classify_error(
    cited: Sequence[str],
    evidence: Sequence[str],
    gold: set[str],
    answerable: bool,
    doc_of: DocOf = default_doc_of,
) -> str:
    """The one primary error category of an item (see ``ERROR_CATEGORIES``).

    Unanswerable: "FalseCitation" if anything is cited, else "Correct". Answerable, first rule that holds:

    1. "Correct"          P == G (citation F1 = 1);
    2. "NoCitation"       P is empty;
    3. "WrongDoc"         no cited id lies in a gold document;
    4. "WrongChunk"       some cited id lies in a gold document, but none is a gold chunk;
    5. "MissingEvidence"  some gold chunk is not cited (recall < 1): either it is not among the evidence or it
                          is there but was not cited (see :func:`missing_evidence_kind`);
    6. "ExtraCitation"    every gold chunk is cited but so is a non-gold chunk (recall 1, precision < 1).
    """
    gold = set(gold)
    _check_item(gold, answerable)
    predicted = set(cited)
    if not answerable:
        return "FalseCitation" if predicted else "Correct"
    if predicted == gold:
        return "Correct"
    if not predicted:
        return "NoCitation"
    gold_docs = {doc_of(g) for g in gold}
    if not any(doc_of(c) in gold_docs for c in predicted):
        return "WrongDoc"
    if not predicted & gold:
        return "WrongChunk"
    if gold - predicted:
        return "MissingEvidence"
    return "ExtraCitation"


def missing_evidence_kind(cited: Sequence[str], evidence: Sequence[str], gold: set[str]) -> str:
    """Why gold chunks are uncited: "not_retrieved" if one is absent from the evidence, else "not_cited"."""
    uncited = set(gold) - set(cited)
    return "not_retrieved" if uncited - set(evidence) else "not_cited"


def category_shares(categories: Iterable[str]) -> dict[str, float]:
    """Share of items in each category (every known category listed, unknown ones appended)."""
    labels = list(categories)
    counts = {c: 0 for c in ERROR_CATEGORIES}
    for label in labels:
        counts[label] = counts.get(label, 0) + 1
    n = len(labels)
    return {c: (k / n if n else 0.0) for c, k in counts.items()}


def per_item_values(scores: Sequence[ItemScore], metric: str) -> list[float | None]:
    """One metric over items: a field name ("f1", "rr", ...) or "hit@K"; ``None`` where it does not apply."""
    if metric.startswith("hit@"):
        k = int(metric[4:])
        return [None if s.hit is None else s.hit[k] for s in scores]
    return [getattr(s, metric) for s in scores]


def macro_average(scores: Sequence[ItemScore]) -> dict[str, float | None]:
    """Macro average over items of every metric; ``None`` values are left out (``None`` if nothing is left)."""
    names = [f.name for f in fields(ItemScore) if f.name != "hit"]
    ks = sorted({k for s in scores if s.hit is not None for k in s.hit})
    out: dict[str, float | None] = {}
    for metric in names + [f"hit@{k}" for k in ks]:
        vals = [v for v in per_item_values(scores, metric) if v is not None]
        out[metric] = float(np.mean(vals)) if vals else None
    return out


def latency_summary(
    timings: Sequence[Mapping[str, float]],
    stages: Sequence[str] = STAGES,
) -> dict[str, dict[str, float]]:
    """Per stage: p50/p90/p99 and mean (ms) and the mean over requests of the stage's share of the total.

    A stage missing from a request's timings counts as 0 ms (it did not run). The total is the request's
    "total" entry, or the sum of its other stages when it has none; requests with a zero total are left out of
    the share. Percentiles interpolate linearly (numpy's default).
    """
    if not timings:
        raise ValueError("no timings")
    totals = np.array(
        [t["total"] if "total" in t else sum(v for k, v in t.items() if k != "total") for t in timings], float
    )
    positive = totals > 0
    out: dict[str, dict[str, float]] = {}
    for stage in stages:
        ms = np.array([totals[i] if stage == "total" else t.get(stage, 0.0) for i, t in enumerate(timings)], float)
        p50, p90, p99 = np.percentile(ms, [50, 90, 99])
        share = float(np.mean(ms[positive] / totals[positive])) if positive.any() else 0.0
        out[stage] = {"p50": float(p50), "p90": float(p90), "p99": float(p99), "mean": float(ms.mean()),
                      "share": share}
    return out
