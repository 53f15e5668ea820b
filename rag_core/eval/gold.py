"""The quote-anchored gold format (../shared/eval/README.md): load items and map each quote to its gold chunk.

A quote's gold chunk is the chunk of its document containing the quote's middle character, found by comparing the
normalised quote with the document's normalised text with all whitespace removed from both. A quote that cannot be
found is a gold-set error: reported, never skipped silently.
"""
from __future__ import annotations

import bisect
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from ..ingest.clean import normalise_fragment
from ..records import Chunk, Turn


# The shipped gold sets (tests/data/eval) the learned rankers train on, and those kept for checking.
GOLD_DIR = Path(__file__).resolve().parents[2] / "tests" / "data" / "eval"
# Every gold set written for tuning, and each earlier round's blind sets once their round had read them: growers'
# questions from many independent writers (9,814 in 130 files, 7,872 answerable; follow-ups and switches rewritten as the
# pipeline rewrites them). Never CHECK_FILES: dev2.jsonl and the newest round's blind sets are kept for checking.
GOLD_FILES = ("dev.jsonl", "dev-multiturn.jsonl", "train-colloquial.jsonl", "dev-conversations.jsonl", "dev-switch.jsonl",
              *(f"dev{n}.jsonl" for n in range(3, 38)), "colloquial7.jsonl",
              *(f"colloquial{n}.jsonl" for n in range(9, 37)), *(f"conv{n}.jsonl" for n in range(11, 38)),
              *(f"adversarial-oos{n}.jsonl" for n in (2, 3, 4, 5, 6, 7, *range(9, 37))))
CHECK_FILES = ("dev2.jsonl", "dev38.jsonl", "conv38.jsonl", "colloquial37.jsonl", "adversarial-oos37.jsonl")


@dataclass(frozen=True)
class GoldItem:
    id: str
    question: str
    answerable: bool
    topic: str
    evidence: tuple[tuple[str, str], ...]  # (doc, quote)
    history: tuple[Turn, ...] = ()
    answer: str = ""
    kind: str = ""  # single | unanswerable | followup | switch (inferred when the set does not say)


@dataclass
class GoldMapping:
    gold: dict[str, set[str]] = field(default_factory=dict)  # item id → gold chunk ids
    errors: list[str] = field(default_factory=list)  # quotes not found, documents missing


def load_gold(path: Path) -> list[GoldItem]:
    items = []
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        raw = json.loads(line)
        items.append(
            GoldItem(
                id=str(raw.get("id", n)),
                question=raw["question"],
                answerable=bool(raw.get("answerable", True)),
                topic=raw.get("topic", ""),
                evidence=tuple((e["doc"], e["quote"]) for e in raw.get("evidence", [])),
                history=tuple(Turn(t["role"], t["content"]) for t in raw.get("history", [])),
                answer=raw.get("answer", ""),
                kind=raw.get("kind") or _infer_kind(raw),
            )
        )
    return items


def _infer_kind(raw: dict) -> str:
    """Items without a `kind`: followup when they have a history, else single or unanswerable."""
    if raw.get("history"):
        return "followup"
    return "single" if raw.get("answerable", True) else "unanswerable"


class _Squeezed:
    """A document's text with whitespace removed, and the map back to original offsets."""

    def __init__(self, text: str):
        self.offsets = [i for i, ch in enumerate(text) if not ch.isspace()]
        self.text = "".join(text[i] for i in self.offsets)


def _squeeze(text: str) -> str:
    return "".join(text.split())


def map_gold(items: Sequence[GoldItem], documents: dict[str, str], chunks: Sequence[Chunk]) -> GoldMapping:
    """`documents`: doc path → normalised text; `chunks`: the build's chunks (any chunking)."""
    by_doc: dict[str, list[Chunk]] = {}
    for c in chunks:
        by_doc.setdefault(c.doc, []).append(c)
    for cs in by_doc.values():
        cs.sort(key=lambda c: c.start)
    squeezed = {doc: _Squeezed(text) for doc, text in documents.items()}
    mapping = GoldMapping()
    for item in items:
        gold: set[str] = set()
        for doc, quote in item.evidence:
            if doc not in squeezed:
                mapping.errors.append(f"{item.id}: document {doc} is not in the index")
                continue
            sq = squeezed[doc]
            q = _squeeze(normalise_fragment(quote))
            at = sq.text.find(q)
            if not q or at < 0:
                mapping.errors.append(f"{item.id}: quote not found in {doc}: {quote[:40]}")
                continue
            middle = sq.offsets[at + len(q) // 2]
            cs = by_doc.get(doc, [])
            i = bisect.bisect_right([c.start for c in cs], middle) - 1
            if i >= 0 and cs[i].start <= middle < cs[i].end:
                gold.add(cs[i].id)
            else:  # the middle character fell between chunks (whitespace they do not cover): take the nearest
                nearest = min(cs, key=lambda c: min(abs(c.start - middle), abs(c.end - middle)), default=None)
                if nearest is None:
                    mapping.errors.append(f"{item.id}: no chunk of {doc}")
                    continue
                gold.add(nearest.id)
        mapping.gold[item.id] = gold
    return mapping
