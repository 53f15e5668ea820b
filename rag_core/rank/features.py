"""Features of (question, candidate passage) pairs for the learned ranker.

Every feature is computed from the question, the passage, its headings and the build's corpus statistics; none
names a word taken from any gold question. Lexical matching is by substring (the tokenizer's words and CJK bigrams
looked up in the passage), so no passage has to be segmented at query time.
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping, Sequence

import numpy as np

from ..lexical import WHAT_TO_DO, Tokenizer, has_cjk
from ..records import Chunk
from ..relevance import asked_figures, figure_windows

FEATURES = (
    "rrf",  # fused score, scaled so rank 1 in both channels is 1
    "rrf_rr",  # 1 / rank in the fused list
    "bm25_rr",  # 1 / rank in the BM25 list (0: not in it)
    "dense_rr",  # 1 / rank in the dense list (0: not in it)
    "bm25_text",  # BM25 of the question's tokens in heading + text, relative to the best candidate
    "bm25_head",  # BM25 in the heading path and title alone, relative to the best candidate
    "cov_words",  # IDF-weighted share of the question's content words found in heading + text
    "cov_head",  # … found in the heading path and title
    "cov_bigram",  # IDF-weighted share of the question's CJK bigrams found in the text
    "phrase",  # longest run of the question found verbatim in the passage, relative to the question's length
    "window",  # best IDF-weighted coverage within one 40-character window of the text (proximity)
    "dense_cos",  # cosine of question and passage vectors, relative to the best candidate
    "faq",  # best character-bigram Dice of the question with a "问：" line of the passage
    "intent_control",  # the question asks how to control/treat, the passage is about control measures
    "intent_time",  # the question asks when, the passage names a time (month, period, season)
    "intent_amount",  # the question asks how much/many, the passage has a number with a unit
    "intent_reason",  # the question asks why, the passage gives causes
    "intent_symptom",  # the question asks what it looks like / how to tell, the passage describes symptoms
    "intent_method",  # the question asks how to do something, the passage has steps or methods
    "length",  # log length of the text
    "short",  # text shorter than 80 characters (headings, fragments)
    "doc_share",  # share of the fused candidates' weight (1/rank) that comes from the same document
    "title_cov",  # IDF-weighted share of the question's content words in the document's title
    "ent_text",  # share of the question's domain terms (lexicon entities, growers' words mapped) in heading + text
    "ent_head",  # … in the heading path and title
    "cov_section",  # IDF-weighted share of the question's content words in the whole section (all its passages)
    "cov_doc",  # … in the whole document
    "faq_chunk",  # the passage is a question and its answer (a "问：" line): FAQ passages share growers' register
    "figure_words",  # the question asks amounts (几个钟头, 好多克): the IDF-weighted share of its content words that the
    #                  best sentence stating a figure of each kind asked has beside it (its neighbours); the least of
    #                  these over the kinds asked; 0 when none is asked or the passage states none
    "intent_consequence",  # the question asks what happens if (会咋样, 有啥影响), the passage says what follows (否则, 导致)
)

_K1, _B = 1.5, 0.75
_WINDOW = 40

# Question intents (interrogative patterns, general Chinese) → what a passage answering them tends to contain.
_Q_INTENT = {
    "control": re.compile(r"防治|防控|治|如何办|怎样处理|怎么处理|打什么药|用什么药|喷什么|控制|消灭|预防|" + WHAT_TO_DO),
    "time": re.compile(r"什么时候|啥时候|何时|几月|哪个月|多久|多长时间|时期|季节|啥时|什么季节|时间"),
    "amount": re.compile(r"多少|几[个次天年株斤公克米倍成]|多大|多高|多深|多远|多宽|多长|多重|多厚|几度|比例|浓度|用量"),
    "reason": re.compile(r"为什么|为啥|咋回事|怎么回事|原因|什么原因|怎么会|为何"),
    "symptom": re.compile(r"什么样|啥样|症状|表现|怎么看|怎么判断|如何判断|怎么认|识别|区别|分辨|看出"),
    "method": re.compile(r"怎么|如何|咋|怎样|方法|步骤|要点"),
    "consequence": re.compile(r"会(?:咋样|咋个样|怎样|怎么样|哪样)|(?:什么|啥|哪样)(?:影响|后果|坏处|害处)|影响不|有没(?:有|得)影响"
                              r"|会不会有影响|后果|出(?:啥|什么|哪样)问题|要不要紧|要紧不|不得事|会不会(?:死|坏|烂|减产|伤)"),
}
_P_INTENT = {
    "control": re.compile(r"防治|防控|措施|喷施|喷洒|药剂|农药|倍液|处理|清除|剪除|消毒|诱杀|防除"),
    "time": re.compile(r"\d+\s*[-～~至到]?\s*\d*\s*月|[一二三四五六七八九十]+月|月份|时期|季节|雨季|旱季|期间|之前|以后|春|夏|秋|冬"),
    "amount": re.compile(r"\d+(?:\.\d+)?\s*(?:%|‰|℃|°C|cm|mm|m|kg|g|ml|mL|L|厘米|毫米|米|千克|公斤|克|斤|毫升|升|倍|株|亩|公顷|天|年|小时|分钟|次|个|粒|吨|方)"),
    "reason": re.compile(r"原因|因为|由于|导致|引起|造成|所致|诱发"),
    "symptom": re.compile(r"症状|表现|病斑|斑点|特征|识别|为害状|危害状|变黄|枯死|出现"),
    "method": re.compile(r"方法|步骤|措施|先|然后|再|要求|做法|技术"),
    "consequence": re.compile(r"否则|导致|造成|引起|影响|降低|下降|减产|过度|过量|过多|过高|过低|过早|过晚|过迟|后果|不良|受害|反而"),
}
_FAQ_LINE = re.compile(r"(?:^|\n)\s*(?:问|Q)[：:](.+)")
_CJK_RUN = re.compile(r"[\u4e00-\u9fff]+")


@dataclass(frozen=True)
class Candidate:
    """What retrieval knows about one fused candidate."""

    position: int  # in the build's chunk list
    rrf: float
    ranks: Mapping[str, int]  # "bm25", "dense", "rrf" (1-based; absent: not in that list)


class CorpusStats:
    """Document frequencies of the build's BM25 tokens (for IDF) and the mean passage length."""

    def __init__(self, n: int, df: Mapping[str, int], mean_chars: float):
        self.n = max(n, 1)
        self.df = dict(df)
        self.mean_chars = max(mean_chars, 1.0)

    def idf(self, token: str) -> float:
        df = self.df.get(token, 0)
        return math.log((self.n - df + 0.5) / (df + 0.5) + 1.0)

    @classmethod
    def from_tokens(cls, tokens: Sequence[Sequence[str]], chunks: Sequence[Chunk]) -> "CorpusStats":
        df: dict[str, int] = {}
        for toks in tokens:
            for t in set(toks):
                df[t] = df.get(t, 0) + 1
        mean = sum(len(c.text) for c in chunks) / max(len(chunks), 1)
        return cls(len(tokens), df, mean)

    def to_json(self) -> dict:
        return {"n": self.n, "mean_chars": self.mean_chars, "df": self.df}

    @classmethod
    def from_json(cls, data: dict) -> "CorpusStats":
        return cls(int(data["n"]), {str(k): int(v) for k, v in data["df"].items()}, float(data["mean_chars"]))

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(self.to_json(), ensure_ascii=False, separators=(",", ":")), encoding="utf-8")

    @classmethod
    def load(cls, path: Path) -> "CorpusStats":
        return cls.from_json(json.loads(path.read_text(encoding="utf-8")))


@dataclass(frozen=True)
class QueryTerms:
    """What the features need from a question, computed once per question."""

    text: str
    words: tuple[tuple[str, float], ...]  # content words (with synonyms' canonical words) and their IDF
    tokens: tuple[tuple[str, float], ...]  # BM25 tokens (words + bigrams + expansions) and their IDF
    bigrams: tuple[tuple[str, float], ...]
    intents: frozenset[str]
    entities: tuple[tuple[str, float], ...] = ()  # lexicon terms of the question (synonyms mapped) and their IDF
    figures: tuple = ()  # what states each amount the question asks (relevance.asked_figures)


def query_terms(question: str, tokenizer: Tokenizer, stats: CorpusStats) -> QueryTerms:
    expanded = tokenizer.expand(question)
    words = [w for w in dict.fromkeys(tokenizer.words(expanded)) if (len(w) >= 2 or not has_cjk(w)) and stats.df.get(w)]
    tokens = [t for t in tokenizer.query_tokens(question) if stats.df.get(t)]
    bigrams = [b for run in _CJK_RUN.findall(question) for b in (run[i : i + 2] for i in range(len(run) - 1))]
    bigrams = [b for b in dict.fromkeys(bigrams) if stats.df.get(b)]
    intents = frozenset(name for name, rx in _Q_INTENT.items() if rx.search(question))
    entities = [e for e in tokenizer.entities(expanded) if stats.df.get(e)]
    return QueryTerms(
        question,
        tuple((w, stats.idf(w)) for w in words),
        tuple((t, stats.idf(t)) for t in tokens),
        tuple((b, stats.idf(b)) for b in bigrams),
        intents,
        tuple((e, max(stats.idf(e), 1.0)) for e in entities),
        tuple(asked_figures(question)),
    )


def _coverage(terms: Sequence[tuple[str, float]], text: str) -> float:
    total = sum(w for _, w in terms)
    return sum(w for t, w in terms if t in text) / total if total else 0.0


def _bm25(terms: Sequence[tuple[str, float]], text: str, mean_chars: float) -> float:
    norm = _K1 * (1 - _B + _B * len(text) / mean_chars)
    score = 0.0
    for t, idf in terms:
        tf = text.count(t)
        if tf:
            score += idf * tf * (_K1 + 1) / (tf + norm)
    return score


def _window(terms: Sequence[tuple[str, float]], text: str) -> float:
    total = sum(w for _, w in terms)
    if not total:
        return 0.0
    events: list[tuple[int, int]] = []
    for i, (t, _) in enumerate(terms):
        at = text.find(t)
        while at >= 0 and len(events) < 400:
            events.append((at, i))
            at = text.find(t, at + 1)
    events.sort()
    best, counts, got, lo = 0.0, {}, 0.0, 0
    for pos, i in events:
        counts[i] = counts.get(i, 0) + 1
        if counts[i] == 1:
            got += terms[i][1]
        while events[lo][0] < pos - _WINDOW:
            j = events[lo][1]
            counts[j] -= 1
            if counts[j] == 0:
                got -= terms[j][1]
            lo += 1
        best = max(best, got)
    return best / total


def _figure_words(q: QueryTerms, text: str) -> float:
    if not q.figures:
        return 0.0
    return min(max((_coverage(q.words, w) for w in figure_windows(text, figure)), default=0.0) for figure in q.figures)


def _longest_common_run(question: str, text: str) -> int:
    """Length of the longest substring of the question that occurs in the text (CJK runs only)."""
    best = 0
    for run in _CJK_RUN.findall(question):
        for i in range(len(run)):
            n = best + 1
            while i + n <= len(run) and run[i : i + n] in text:
                best = n
                n += 1
    return best


def _bigram_set(text: str) -> set[str]:
    return {run[i : i + 2] for run in _CJK_RUN.findall(text) for i in range(len(run) - 1)}


def _faq(question: str, text: str) -> float:
    lines = _FAQ_LINE.findall(text)
    if not lines:
        return 0.0
    q = _bigram_set(question)
    best = 0.0
    for line in lines:
        b = _bigram_set(line)
        if q and b:
            best = max(best, 2 * len(q & b) / (len(q) + len(b)))
    return best


def heading_text(chunk: Chunk) -> str:
    return f"{chunk.title}\n{chunk.section}"


def feature_matrix(
    q: QueryTerms,
    candidates: Sequence[Candidate],
    chunks: Sequence[Chunk],
    stats: CorpusStats,
    cosines: Sequence[float] | None,
    rrf_k: int,
    context: Callable[[Chunk], tuple[str, str]] | None = None,
) -> np.ndarray:
    """One row per candidate, columns in FEATURES order. `context(chunk)` gives the text of the chunk's whole
    section and of its whole document (default: the chunk's own text for both)."""
    n = len(candidates)
    x = np.zeros((n, len(FEATURES)), dtype=np.float64)
    if n == 0:
        return x
    qlen = max(sum(len(r) for r in _CJK_RUN.findall(q.text)), 1)
    weights: dict[str, float] = {}
    for c in candidates:
        doc = chunks[c.position].docid
        weights[doc] = weights.get(doc, 0.0) + 1.0 / c.ranks.get("rrf", n)
    total_weight = sum(weights.values()) or 1.0
    for row, c in enumerate(candidates):
        chunk = chunks[c.position]
        full = f"{chunk.section}\n{chunk.text}"
        head = heading_text(chunk)
        f = x[row]
        f[0] = c.rrf * rrf_k / 2
        f[1] = 1.0 / c.ranks.get("rrf", n)
        f[2] = 1.0 / c.ranks["bm25"] if "bm25" in c.ranks else 0.0
        f[3] = 1.0 / c.ranks["dense"] if "dense" in c.ranks else 0.0
        f[4] = _bm25(q.tokens, full, stats.mean_chars)
        f[5] = _bm25(q.tokens, head, 30.0)
        f[6] = _coverage(q.words, full)
        f[7] = _coverage(q.words, head)
        f[8] = _coverage(q.bigrams, chunk.text)
        f[9] = min(_longest_common_run(q.text, full) / qlen, 1.0)
        f[10] = _window(q.words, chunk.text)
        f[11] = cosines[row] if cosines is not None else 0.0
        f[12] = _faq(q.text, chunk.text)
        for col, name in enumerate(("control", "time", "amount", "reason", "symptom", "method"), 13):
            f[col] = float(name in q.intents and bool(_P_INTENT[name].search(full)))
        f[19] = math.log(len(chunk.text) + 1) / math.log(600)
        f[20] = float(len(chunk.text) < 80)
        f[21] = weights[chunk.docid] / total_weight
        f[22] = _coverage(q.words, chunk.title)
        f[23] = _coverage(q.entities, full)
        f[24] = _coverage(q.entities, head)
        section_text, doc_text = context(chunk) if context is not None else (full, full)
        f[25] = _coverage(q.words, section_text)
        f[26] = _coverage(q.words, doc_text)
        f[27] = float(bool(_FAQ_LINE.search(chunk.text)))
        f[28] = _figure_words(q, full)
        f[29] = float("consequence" in q.intents and bool(_P_INTENT["consequence"].search(full)))
    for col in (4, 5, 11):  # relative to the best candidate of this question
        top = x[:, col].max()
        if top > 0:
            x[:, col] /= top
    return x
