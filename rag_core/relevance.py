"""Does the knowledge base cover the question? Offline there is no calibrated neural relevance score, so two plain
lexical tests decide, both calibrated on ../shared/eval/dev.jsonl (see bench/results/refusal.md):

1. the question is about something the knowledge base never mentions: a time-bound or out-of-scope topic (prices,
   subsidies, forecasts) or a named pest, disease, input or crop (红蜘蛛, 沼液 …) that occurs nowhere in the corpus;
2. the best evidence covers too little of what the question asks (weighted share of its content words).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

from .history import topic_strength
from .lexical import Tokenizer
from .records import Hit
from .termstats import TermStats

MIN_COVERAGE = 0.12

# Topics an agronomy manual does not answer; a question is refused on them only when the corpus lacks the word.
_SCOPE = re.compile(
    r"收购价|价格|多少钱|几块钱|行情|期货|市价|卖价|补贴|补助|贷款|保险|政府|政策|申请|合同|天气预报|下个?礼拜|下个?星期|下周|明天|后天"
)
# Named things: a pest, disease, pathogen, input or crop the question names by its head character.
_NAMED = re.compile(r"([\u4e00-\u9fff])(蜘蛛|螨|蚜虫|蚧|蛾|蝇|蓟马|线虫|病|菌|液|灵)")
_NOT_A_NAME = set("这那啥么哪该此得有生发的了个种是样怎咋一防治患染传")


@dataclass(frozen=True)
class Coverage:
    covered: bool
    score: float
    missing: str = ""  # the topic the knowledge base does not know, when that is the reason


def content_words(question: str, tokenizer: Tokenizer) -> list[str]:
    words = [w for w in tokenizer.words(question) if len(w) >= 2 and not w.isascii()]
    # search-mode segmentation yields a long word and its parts: keep the longest, drop the parts inside it
    return [w for w in dict.fromkeys(words) if not any(w != o and w in o for o in words)]


def coverage_score(question: str, hits: Sequence[Hit], tokenizer: Tokenizer, top: int = 3) -> float:
    """The weighted share of the question's content words found in the top evidence."""
    words = content_words(question, tokenizer)
    if not words:
        return 1.0
    evidence = "".join(h.chunk.section + h.chunk.text for h in hits[:top])
    total = sum(min(len(w), 4) for w in words)
    found = sum(min(len(w), 4) for w in words if w in evidence)
    return found / total


def unknown_topic(question: str, corpus_text: str) -> str:
    """A topic of the question that the corpus never mentions ("" when there is none)."""
    for m in _SCOPE.finditer(question):
        if m.group(0) not in corpus_text:
            return m.group(0)
    for m in _NAMED.finditer(question):
        # the shortest name, one character before the head ("红蜘蛛", "沼液"); unknown when even that is absent
        if m.group(1) not in _NOT_A_NAME and m.group(0) not in corpus_text:
            return m.group(0)
    return ""


_TOPICAL_POS = ("n", "nr", "ns", "nz", "nt", "vn", "j")
MIN_WORD_FREQ = 10  # in jieba's general dictionary: a real word, not a fragment of a bad segmentation
UNKNOWN_FOCUS_STRENGTH = 2.0  # below this much known topic, an unknown word is what the question is about


def unknown_words(question: str, tokenizer: Tokenizer, stats: TermStats) -> list[str]:
    """Topical words of the question (nouns, names, nominal verbs) that occur nowhere in the knowledge base and
    are not growers' words the synonym table maps onto it: 贷款, 茶叶, 星巴克, 吡虫啉 …"""
    out = []
    for word, flag in tokenizer.tagged(question):
        if len(word) < 2 or word.isascii() or flag not in _TOPICAL_POS or word in tokenizer.stopwords:
            continue
        if stats.known(word) or tokenizer.general_frequency(word) < MIN_WORD_FREQ and not _looks_like_a_name(word):
            continue
        if any(word in key or key in word for key in tokenizer.synonyms):
            continue
        out.append(word)
    return list(dict.fromkeys(out))


def _looks_like_a_name(word: str) -> bool:
    """Chemical and pest names jieba has never seen (吡虫啉, 噻虫嗪) end like the names the KB does use."""
    return len(word) >= 3 and word[-1] in "啉嗪磷酯胺醇酮菌蝇螨蚜蛾"


def unknown_focus(question: str, tokenizer: Tokenizer, stats: TermStats) -> str:
    """What the question is about that the knowledge base never mentions, when that is most of what it names
    ("" otherwise): a question naming a word the knowledge base has never seen, and little that it knows well,
    is about that word."""
    unknown = unknown_words(question, tokenizer, stats)
    if not unknown:
        return ""
    strength = topic_strength(question, tokenizer, stats)
    return unknown[0] if strength < UNKNOWN_FOCUS_STRENGTH else ""


def assess(question: str, hits: Sequence[Hit], tokenizer: Tokenizer, corpus_text: str,
           stats: TermStats | None = None) -> Coverage:
    if not hits:
        return Coverage(False, 0.0)
    score = coverage_score(question, hits, tokenizer)
    missing = unknown_topic(question, corpus_text) or (unknown_focus(question, tokenizer, stats) if stats else "")
    return Coverage(covered=not missing and score >= MIN_COVERAGE, score=score, missing=missing)
