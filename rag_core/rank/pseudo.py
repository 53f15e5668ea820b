"""Training questions the knowledge base yields by itself, so the ranker adapts when admins add documents:

- FAQ questions ("问：…" lines) → the passage that holds them, asked as written and reworded;
- headings → every passage of their section, asked as a topic with a question word;
- a sentence's key terms, some replaced by a growers' word from the synonym table (read in reverse), with the
  question word its content calls for (a number with a unit → 多少; a time → 什么时候; control measures → 怎么防治).

Deterministic for a given knowledge base (seeded by nothing but the chunk ids).
"""
from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Sequence

from ..lexical import Tokenizer, has_cjk
from ..records import Chunk
from .features import CorpusStats

_FAQ = re.compile(r"(?:^|\n)\s*(?:问|Q)[：:]\s*(.+)")
_NUMBERING = re.compile(r"^\s*(?:第[一二三四五六七八九十百\d]+[章节条部分篇]|[（(]?[一二三四五六七八九十\d]+[）)、.．]|\d+(?:\.\d+)*)\s*")
_SENTENCE = re.compile(r"[^。！？；\n]{10,80}[。！？；]?")
_CONTENT = {
    "amount": re.compile(r"\d+(?:\.\d+)?\s*(?:%|℃|°C|cm|mm|kg|g|mL|L|m|厘米|毫米|米|千克|公斤|克|斤|毫升|升|倍|株|亩|天|年|小时)"),
    "time": re.compile(r"\d+\s*月|[一二三四五六七八九十]+月|雨季|旱季|季节|时期"),
    "control": re.compile(r"防治|防控|喷施|药剂"),
    "reason": re.compile(r"原因|导致|引起|由于"),
    "symptom": re.compile(r"症状|病斑|为害|危害状"),
}
# Question words a grower adds for each kind of content; general interrogatives, no gold question's words.
_ASK = {
    "amount": ("多少", "要多少", "一般多少"),
    "time": ("什么时候", "啥时候", "几月份"),
    "control": ("怎么防治", "咋办", "怎么治"),
    "reason": ("为什么", "是什么原因", "为啥"),
    "symptom": ("是什么样子", "怎么看出来", "有什么症状"),
    "": ("怎么办", "怎么弄", "要注意什么", "怎么做", "是什么", ""),
}


@dataclass(frozen=True)
class PseudoQuery:
    text: str
    positives: frozenset[int]  # chunk positions that answer it
    kind: str  # "faq", "heading", "sentence"


def reverse_synonyms(tokenizer: Tokenizer) -> dict[str, list[str]]:
    """Canonical term → the growers' words that map to it."""
    out: dict[str, list[str]] = {}
    for word, targets in tokenizer.synonyms.items():
        for t in targets:
            out.setdefault(t, []).append(word)
    return out


def _colloquial(text: str, reverse: dict[str, list[str]], rng: random.Random, rate: float = 0.6) -> str:
    for canonical in sorted(reverse, key=len, reverse=True):
        if canonical in text and rng.random() < rate:
            text = text.replace(canonical, rng.choice(reverse[canonical]), 1)
    return text


def _heading(section: str) -> str:
    last = section.split("›")[-1].strip()
    return _NUMBERING.sub("", last).strip(" 　：:")


def _kind(text: str) -> str:
    for name, rx in _CONTENT.items():
        if rx.search(text):
            return name
    return ""


def faq_queries(chunks: Sequence[Chunk], reverse, rng: random.Random) -> list[PseudoQuery]:
    out = []
    for pos, c in enumerate(chunks):
        for question in _FAQ.findall(c.text):
            question = question.strip()
            if len(question) < 6:
                continue
            out.append(PseudoQuery(question, frozenset([pos]), "faq"))
            reworded = _colloquial(question, reverse, rng, rate=0.9)
            clauses = [s for s in re.split(r"[，,？?。！!]", reworded) if len(s) >= 4]
            if len(clauses) > 1:  # growers often ask only part of it
                reworded = rng.choice(clauses)
            if reworded != question:
                out.append(PseudoQuery(reworded, frozenset([pos]), "faq"))
    return out


def heading_queries(chunks: Sequence[Chunk], rng: random.Random) -> list[PseudoQuery]:
    sections: dict[tuple[str, str], list[int]] = {}
    for pos, c in enumerate(chunks):
        if c.section:
            sections.setdefault((c.docid, c.section), []).append(pos)
    out = []
    for (_, section), positions in sections.items():
        topic = _heading(section)
        if len(topic) < 3 or not has_cjk(topic) or len(positions) > 6:
            continue
        ask = rng.choice(_ASK[_kind(" ".join(chunks[p].text for p in positions))])
        out.append(PseudoQuery(f"{topic}{ask}", frozenset(positions), "heading"))
    return out


def sentence_queries(chunks: Sequence[Chunk], tokenizer: Tokenizer, stats: CorpusStats, reverse,
                     rng: random.Random) -> list[PseudoQuery]:
    out = []
    for pos, c in enumerate(chunks):
        sentences = [s for s in _SENTENCE.findall(c.text) if has_cjk(s) and not s.lstrip().startswith(("问", "Q"))]
        if not sentences:
            continue
        sentence = rng.choice(sentences)
        words = [w for w in dict.fromkeys(tokenizer.words(sentence)) if len(w) >= 2 and has_cjk(w)]
        words = [w for w in words if not any(w != o and w in o for o in words)]
        if len(words) < 2:
            continue
        keep = sorted(words, key=lambda w: -stats.idf(w))[: rng.randint(2, 4)]
        keep.sort(key=sentence.find)  # in the sentence's order
        text = _colloquial("".join(keep), reverse, rng) + rng.choice(_ASK[_kind(sentence)])
        out.append(PseudoQuery(text, frozenset([pos]), "sentence"))
    return out


def pseudo_queries(chunks: Sequence[Chunk], tokenizer: Tokenizer, stats: CorpusStats, limit: int) -> list[PseudoQuery]:
    """At most `limit` pseudo-queries, a fixed share of each kind when there are more (FAQ first)."""
    rng = random.Random(len(chunks))
    reverse = reverse_synonyms(tokenizer)
    kinds = [faq_queries(chunks, reverse, rng), heading_queries(chunks, rng),
             sentence_queries(chunks, tokenizer, stats, reverse, rng)]
    out: list[PseudoQuery] = []
    budget = limit
    for i, queries in enumerate(kinds):
        share = budget // (len(kinds) - i)
        if len(queries) > share:
            queries = rng.sample(queries, share)
        out.extend(queries)
        budget -= len(queries)
    return out
