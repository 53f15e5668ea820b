"""`coffeebot gold synth`: draft gold items from the index's chunks with the configured LLM, then apply the seed
paper's automatic checks and keep only what passes, in the quote-anchored format of ../shared/eval/README.md.

Chunks are sampled stratified by topic (guessed from the section heading and the document's name), then by document.
For each, the LLM sees one or two adjacent chunks with their `[docid#cid]` ids and writes a grower-style question, a
short reference answer citing 1–3 of the ids, and for each cited id a verbatim quote from that chunk. A draft is kept
only when its citations parse and resolve to the chunks shown, it cites 1–3 of them, every quote occurs in its cited
chunk and maps back to that same chunk through `map_gold` (as the scorer will map it), the question is long enough,
not generic and has a content word, it is no near-duplicate of a kept question, and its topic is under the balance cap.
"""
from __future__ import annotations

import json
import logging
import math
import random
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..citations import CANONICAL, validate_citations
from ..ingest.clean import normalise_fragment
from ..lexical import Tokenizer
from ..llm import ChatModel, LLMError, Messages
from ..records import Chunk
from .gold import GoldItem, map_gold

log = logging.getLogger(__name__)

TOPICS: tuple[str, ...] = ("ecology", "cultivar", "propagation", "establishment", "pruning", "soil", "nutrition",
                           "water", "shade", "disease", "pest", "disaster", "harvest", "processing", "quality",
                           "industry", "calendar")

MIN_CHUNK_CHARS = 60  # shorter chunks (headings, definitions) rarely carry a question worth asking
MAX_PASSAGE_CHARS = 900  # a second, adjacent chunk is shown only while both stay under this
MIN_QUESTION_CHARS = 8
QUOTE_CHARS = (10, 100)  # the prompt asks for 15–80; outside this a quote is too vague or not a quote
MAX_CITATIONS = 3
DUPLICATE_JACCARD = 0.7
BALANCE_SLACK = 1.5
MAX_LLM_FAILURES_IN_A_ROW = 5

# Section-heading keywords per topic, in priority order: the first topic with a keyword in the heading wins.
_HEADING_KEYWORDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("calendar", ("农事", "月历", "日历", "农历", "周年")),
    ("cultivar", ("品种", "卡蒂姆", "铁皮卡", "波旁", "种质")),
    ("propagation", ("育苗", "苗圃", "苗床", "种子", "嫁接", "扦插", "砧木", "苗木", "出圃")),
    ("pruning", ("修剪", "整形", "截干", "打顶", "定干", "多干", "单干", "剪枝", "复壮")),
    ("processing", ("加工", "发酵", "水洗", "日晒", "蜜处理", "干燥", "脱壳", "脱皮", "贮存", "晾晒")),
    ("quality", ("品质", "杯测", "分级", "缺陷", "含水率", "筛网", "粒度", "风味", "质量")),
    ("harvest", ("采收", "采摘", "成熟度")),
    ("nutrition", ("施肥", "肥料", "营养", "养分", "缺素", "追肥", "基肥", "水肥")),
    ("water", ("灌溉", "水分", "排水", "催花水", "滴灌", "喷灌", "需水", "保墒", "涝")),
    ("shade", ("荫蔽", "遮荫", "遮阴", "间作")),
    ("soil", ("土壤", "水土", "覆盖", "绿肥", "除草", "堆肥", "板结", "石灰", "有机质")),
    ("pest", ("虫", "天牛", "蚧", "小蠹", "蚂蚁", "农药", "打药", "施药", "用药")),
    ("disease", ("病",)),
    ("disaster", ("霜", "冻", "冰雹", "干旱", "旱灾", "灾", "寒害", "台风", "大风")),
    ("establishment", ("定植", "建园", "开垦", "密度", "株行距", "挖塘", "改造", "重种", "低产")),
    ("ecology", ("生态", "气候", "海拔", "区划", "气温", "降水", "光照", "适宜区")),
    ("industry", ("产业", "市场", "价格", "合作社", "认证", "销售", "品牌", "概况")),
)

# Fragments of a document's file name, in priority order (pest_disease_faq → pest, nutrition_water_faq → nutrition).
_DOC_NAME_TOPICS: tuple[tuple[str, str], ...] = (
    ("calendar", "calendar"), ("cultivar", "cultivar"), ("variet", "cultivar"), ("nursery", "propagation"),
    ("propagat", "propagation"), ("seedling", "propagation"), ("prun", "pruning"), ("process", "processing"),
    ("quality", "quality"), ("grading", "quality"), ("harvest", "harvest"), ("fertili", "nutrition"),
    ("nutrition", "nutrition"), ("water", "water"), ("irrigat", "water"), ("shade", "shade"), ("intercrop", "shade"),
    ("soil", "soil"), ("ipm", "pest"), ("pesticide", "pest"), ("pest", "pest"), ("disease", "disease"),
    ("drought", "disaster"), ("hail", "disaster"), ("frost", "disaster"), ("disaster", "disaster"),
    ("establish", "establishment"), ("renovat", "establishment"), ("planting", "establishment"),
    ("ecolog", "ecology"), ("zoning", "ecology"), ("climate", "ecology"), ("industry", "industry"),
    ("market", "industry"),
)

# Questions about the passage rather than about coffee.
_GENERIC = re.compile(
    r"这(一)?(段|篇|部分)|本(文|段|节|章)|文中|原文|片段|资料中|材料中|上文|下文"
    r"|(根据|按照|依据|结合)(上述|以上|上面|资料|材料|内容|文章|文本)"
    r"|(上述|以上|上面)(的)?(内容|资料|材料|文字|说法)"
    r"|讲了(什么|啥|哪些)|说了(什么|啥|哪些)|主要内容|(介绍|说明|提到)了(什么|啥|哪些)"
)
_EXTRA_STOPWORDS = ("咖啡",)  # every question is about coffee: on its own it is not a content word
_PUNCT = re.compile(r"[^\w]+")
_HEX_ID = re.compile(r"^([0-9a-fA-F]{8})\s*[#＃]\s*(\d+)$")
_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.S)


@dataclass
class SynthReport:
    items: list[dict] = field(default_factory=list)  # gold-format items, ready to write as JSON Lines
    rejected: list[tuple[dict | str, str]] = field(default_factory=list)  # (draft, or the raw reply; reason)
    calls: int = 0  # LLM calls made

    def reasons(self) -> Counter:
        return Counter(reason for _, reason in self.rejected)


# ---- topics and sampling -------------------------------------------------------------------------------------------


def guess_topic(chunk: Chunk) -> str | None:
    """The README topic a chunk is most likely about: its own heading, then its document's name, then the
    heading path and title; None when nothing matches."""
    heading_path = [part.strip() for part in chunk.section.split("›") if part.strip()]
    if topic := _keyword_topic(heading_path[-1] if heading_path else ""):
        return topic
    name = Path(chunk.doc).stem.lower()
    for fragment, topic in _DOC_NAME_TOPICS:
        if fragment in name:
            return topic
    return _keyword_topic(" ".join(heading_path[:-1]) + " " + chunk.title)


def _keyword_topic(text: str) -> str | None:
    for topic, keywords in _HEADING_KEYWORDS:
        if any(k in text for k in keywords):
            return topic
    return None


def _interleave(lists: Sequence[Sequence[Any]]) -> list[Any]:
    """Round-robin over the lists: a[0], b[0], c[0], a[1], …"""
    out: list[Any] = []
    for i in range(max((len(x) for x in lists), default=0)):
        out.extend(x[i] for x in lists if i < len(x))
    return out


def stratified_order(chunks: Sequence[Chunk], topics: Sequence[str], rng: random.Random) -> list[tuple[Chunk, str]]:
    """Every usable chunk once, with its guessed topic, ordered so that topics take turns and, within a topic,
    documents take turns."""
    by_topic: dict[str, dict[str, list[Chunk]]] = {}
    for c in chunks:
        topic = guess_topic(c)
        if topic in topics and len(_squeeze(c.text)) >= MIN_CHUNK_CHARS:
            by_topic.setdefault(topic, {}).setdefault(c.doc, []).append(c)
    per_topic: list[list[tuple[Chunk, str]]] = []
    for topic in sorted(by_topic):
        docs = [by_topic[topic][d] for d in sorted(by_topic[topic])]
        for cs in docs:
            rng.shuffle(cs)
        rng.shuffle(docs)
        per_topic.append([(c, topic) for c in _interleave(docs)])
    rng.shuffle(per_topic)
    return _interleave(per_topic)


def balance_cap(n: int, topics_present: int) -> int:
    """The most items one topic may take: 1.5 times its fair share of n."""
    share = math.ceil(n / max(1, topics_present))
    return math.ceil(share * BALANCE_SLACK)


# ---- prompting and parsing -----------------------------------------------------------------------------------------

SYSTEM_PROMPT = ("你是云南小粒咖啡栽培的农技专家，正在为一个咖啡种植答疑机器人编写评测题。"
                 "你只依据给出的资料片段出题，并严格按要求只输出 JSON。")


def build_prompt(passages: Sequence[Chunk], topics: Sequence[str]) -> Messages:
    """The drafting prompt: the passages with their ids, the rules, and the JSON shape to answer in."""
    blocks = []
    for c in passages:
        where = " › ".join(x for x in (c.title, c.section) if x)
        blocks.append(f"[{c.id}]（{where}）\n{c.text.strip()}")
    example = passages[0].id
    user = (
        f"下面是知识库中的 {len(passages)} 个资料片段，每段开头方括号里是它的编号：\n\n"
        + "\n\n".join(blocks)
        + "\n\n---\n请根据这些片段写 1 道云南咖啡种植户可能在手机上问的问题，并给出参考答案。要求：\n"
        "1. 问题像农户的口语提问（例如“我家咖啡叶子背面有黄粉，咋整？”），具体，只靠这些片段就能回答；"
        "不要出现“根据资料”“文中”“这段话”之类的说法，不要照抄原文。\n"
        f"2. 参考答案简短（不超过120字），用方括号标注引用的片段编号，如 [{example}]；"
        "引用 1～3 个编号，只能用上面给出的编号。\n"
        "3. 对每个引用的编号，从该片段中逐字摘抄一句支撑答案的原文（15～80字），不得改写，不得跨片段。\n"
        f"4. topic 从下列中选一个：{'、'.join(topics)}。\n"
        "只输出一个 JSON 对象，不要其他文字：\n"
        f'{{"question": "……", "answer": "……[{example}]", '
        f'"evidence": [{{"id": "{example}", "quote": "逐字摘抄的原文"}}], "topic": "……"}}'
    )
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]


def parse_drafts(text: str) -> list[dict]:
    """The draft objects in a model reply: bare JSON, JSON in a ``` fence, or the outermost {…}/[…] in chatter;
    a list of objects or {"items": […]} gives several. ValueError when there is none."""
    candidates = [text.strip()] + [m.group(1).strip() for m in _FENCE.finditer(text)]
    for open_, close in (("{", "}"), ("[", "]")):
        start, end = text.find(open_), text.rfind(close)
        if 0 <= start < end:
            candidates.append(text[start : end + 1])
    for candidate in candidates:
        try:
            data = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(data, dict) and isinstance(data.get("items"), list):
            data = data["items"]
        if isinstance(data, dict):
            return [data]
        drafts = [d for d in data if isinstance(d, dict)] if isinstance(data, list) else []
        if drafts:
            return drafts
    raise ValueError("no JSON object in the reply")


# ---- the checks ----------------------------------------------------------------------------------------------------


def _squeeze(text: str) -> str:
    return "".join(text.split())


def _norm_id(raw: object) -> str | None:
    m = _HEX_ID.match(str(raw).strip().strip("[]【】"))
    return f"{m.group(1).lower()}#{int(m.group(2))}" if m else None


def question_bigrams(question: str) -> set[str]:
    text = _PUNCT.sub("", question.lower())
    return {text[i : i + 2] for i in range(len(text) - 1)} or {text}


def jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a or b else 1.0


def has_content_word(question: str, stopwords: frozenset[str]) -> bool:
    """True when something is left after removing punctuation and stopwords: two CJK characters in a row, or a
    word or number of two or more letters or digits."""
    rest = question.lower()
    for word in sorted(set(stopwords) | set(_EXTRA_STOPWORDS), key=len, reverse=True):
        rest = rest.replace(word, " ")
    return bool(re.search(r"[\u4e00-\u9fff]{2}|[a-z0-9]{2}", rest))


def question_problem(question: str, stopwords: frozenset[str]) -> str | None:
    """Why a question is unusable on its own, or None."""
    if len(_PUNCT.sub("", question)) < MIN_QUESTION_CHARS:
        return "question_too_short"
    if _GENERIC.search(question):
        return "generic_question"
    if not has_content_word(question, stopwords):
        return "no_content_word"
    return None


def _quote_in_chunk(quote: str, chunk: Chunk) -> str | None:
    """The chunk's own text for a quote found in it (normalised, whitespace-insensitive), or None."""
    q = _squeeze(normalise_fragment(quote))
    offsets = [i for i, ch in enumerate(chunk.text) if not ch.isspace()]
    at = "".join(chunk.text[i] for i in offsets).find(q) if q else -1
    if at < 0:
        return None
    text = chunk.text[offsets[at] : offsets[at + len(q) - 1] + 1]
    return " ".join(text.split()) if any(ch.isspace() for ch in text) else text


@dataclass
class _Reviewer:
    """The automatic checks, with the state they need: what the index holds and what is already kept."""

    documents: Mapping[str, str]  # doc path → normalised text
    chunks_by_doc: Mapping[str, list[Chunk]]
    topics: Sequence[str]
    cap: int
    stopwords: frozenset[str]
    kept_bigrams: list[set[str]] = field(default_factory=list)
    per_topic: Counter = field(default_factory=Counter)

    def review(self, draft: dict, shown: Sequence[Chunk], guessed_topic: str) -> tuple[dict | None, str]:
        """(the gold item, "kept") or (None, the reason it was rejected)."""
        question, answer = draft.get("question"), draft.get("answer")
        raw_evidence = draft.get("evidence")
        if not isinstance(question, str) or not isinstance(answer, str) or not question.strip() or not answer.strip():
            return None, "missing_fields"
        if not isinstance(raw_evidence, list) or not all(isinstance(e, dict) for e in raw_evidence):
            return None, "missing_fields"
        by_id = {c.id: c for c in shown}
        validated = validate_citations(answer, list(by_id))
        evidence: dict[str, str] = {}
        unparsed = False
        for e in raw_evidence:
            cid = _norm_id(e.get("id", e.get("chunk", e.get("citation", ""))))
            quote = e.get("quote", e.get("text"))
            if cid is None or not isinstance(quote, str):
                unparsed = True
                continue
            evidence.setdefault(cid, quote)
        cited = set(validated.cited) | set(validated.dropped) | set(evidence)
        if not 1 <= len(cited) <= MAX_CITATIONS:
            return None, "citation_count"
        if unparsed or validated.dropped or any(cid not in by_id for cid in evidence):
            return None, "unresolved_citation"
        if any(cid not in evidence for cid in validated.cited):
            return None, "missing_quote"
        quotes: list[tuple[Chunk, str]] = []
        for cid, quote in evidence.items():
            if not QUOTE_CHARS[0] <= len(_squeeze(normalise_fragment(quote))) <= QUOTE_CHARS[1]:
                return None, "quote_length"
            found = _quote_in_chunk(quote, by_id[cid])
            if found is None:
                return None, "quote_not_verbatim"
            quotes.append((by_id[cid], found))
        question = " ".join(question.split())
        if problem := question_problem(question, self.stopwords):
            return None, problem
        topic = draft.get("topic") if draft.get("topic") in self.topics else guessed_topic
        grams = question_bigrams(question)
        if any(jaccard(grams, kept) >= DUPLICATE_JACCARD for kept in self.kept_bigrams):
            return None, "near_duplicate"
        if self.per_topic[topic] >= self.cap:
            return None, "topic_cap"
        item = {"question": question, "answer": CANONICAL.sub("", validated.text).strip(),
                "evidence": [{"doc": c.doc, "quote": q} for c, q in quotes], "topic": topic, "answerable": True}
        if problem := self._maps_back(item, {c.id for c, _ in quotes}):
            return None, problem
        self.kept_bigrams.append(grams)
        self.per_topic[topic] += 1
        return item, "kept"

    def _maps_back(self, item: dict, cited: set[str]) -> str | None:
        """The scorer's view: map_gold must find every quote and land on exactly the cited chunks."""
        docs = {e["doc"] for e in item["evidence"]}
        gold = GoldItem(id="draft", question=item["question"], answerable=True, topic=item["topic"],
                        evidence=tuple((e["doc"], e["quote"]) for e in item["evidence"]))
        mapping = map_gold([gold], {d: self.documents[d] for d in docs if d in self.documents},
                           [c for d in docs for c in self.chunks_by_doc.get(d, [])])
        if mapping.errors:
            return "quote_unmapped"
        if mapping.gold.get("draft") != cited:
            return "quote_maps_elsewhere"
        return None


# ---- the driver ----------------------------------------------------------------------------------------------------


def _passages(chunk: Chunk, neighbours: Mapping[tuple[str, int], Chunk], rng: random.Random) -> list[Chunk]:
    """The sampled chunk, and half the time the next one of its document when both stay short enough."""
    nxt = neighbours.get((chunk.docid, chunk.cid + 1))
    if nxt is not None and rng.random() < 0.5 and len(chunk.text) + len(nxt.text) <= MAX_PASSAGE_CHARS:
        return [chunk, nxt]
    return [chunk]


def synthesize(
    index: Any,
    chat: ChatModel,
    n: int,
    seed: int = 0,
    topics: Sequence[str] = TOPICS,
    *,
    pool: Sequence[Chunk] | None = None,
    max_calls: int | None = None,
    on_draft: Callable[[str], None] | None = None,
) -> SynthReport:
    """Draft until `n` items pass the checks, the sample runs out, or `max_calls` (default 3n + 10) is spent.

    `index`: an IndexReader (its `chunks` and `documents`); `pool`: the chunks to sample from (default all);
    `on_draft` hears each outcome ("kept" or a rejection reason). Auth and bad-request LLM errors, and
    MAX_LLM_FAILURES_IN_A_ROW failures of any kind, are raised; other single failures are recorded and skipped.
    """
    unknown = [t for t in topics if t not in TOPICS]
    if unknown:
        raise ValueError(f"unknown topic(s) {', '.join(unknown)}; choose from {', '.join(TOPICS)}")
    rng = random.Random(seed)
    order = stratified_order(index.chunks if pool is None else pool, topics, rng)
    chunks_by_doc: dict[str, list[Chunk]] = {}
    for c in index.chunks:
        chunks_by_doc.setdefault(c.doc, []).append(c)
    reviewer = _Reviewer(
        documents={d["path"]: d["text"] for d in index.documents.values()},
        chunks_by_doc=chunks_by_doc,
        topics=topics,
        cap=balance_cap(n, len({topic for _, topic in order})),
        stopwords=Tokenizer().stopwords,
    )
    neighbours = {(c.docid, c.cid): c for c in index.chunks}
    max_calls = 3 * n + 10 if max_calls is None else max_calls
    report = SynthReport()
    failures = 0

    def outcome(draft: dict | str, reason: str) -> None:
        if reason != "kept":
            report.rejected.append((draft, reason))
        log.info("draft %d: %s", report.calls, reason)
        if on_draft is not None:
            on_draft(reason)

    for chunk, guessed in order:
        if len(report.items) >= n or report.calls >= max_calls:
            break
        shown = _passages(chunk, neighbours, rng)
        report.calls += 1
        try:
            reply = chat.complete(build_prompt(shown, topics))
        except LLMError as exc:
            failures += 1
            if exc.kind in ("auth", "bad_request") or failures >= MAX_LLM_FAILURES_IN_A_ROW:
                raise
            outcome(f"[{', '.join(c.id for c in shown)}] {exc}", f"llm_error:{exc.kind}")
            continue
        failures = 0
        try:
            drafts = parse_drafts(reply)
        except ValueError:
            outcome(reply, "unparseable")
            continue
        for draft in drafts:
            if len(report.items) >= n:
                break
            item, reason = reviewer.review(draft, shown, guessed)
            if item is not None:
                report.items.append({"id": f"syn-{len(report.items) + 1:04d}", **item})
            outcome(draft, reason)
    return report


def write_jsonl(items: Sequence[dict], path: Path) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(item, ensure_ascii=False) + "\n" for item in items), encoding="utf-8")
