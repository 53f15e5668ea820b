"""Answers from evidence: the Chinese prompt for the LLM, and the offline extractive answer.

Both cite with `[docid#cid]`; both refuse, citing nothing, when the evidence does not cover the question.
"""
from __future__ import annotations

import logging
import math
import re
from dataclasses import dataclass
from typing import Callable, Sequence

from .lexical import WHAT_TO_DO, Tokenizer
from .records import Chunk, Hit, Turn
from .sentences import FULL_STOP, TABLE_RULE, sentence_spans
from .termstats import TermStats

log = logging.getLogger(__name__)

EXTRACTIVE_HEADER = "以下内容摘自知识库："
NOT_COVERED = "抱歉，知识库中没有找到能回答这个问题的内容，我不便凭空作答。建议咨询当地农业技术推广部门或咖啡专业合作社。"
NOT_COVERED_TOPIC = "抱歉，知识库中没有关于“{topic}”的内容，我不便凭空作答。建议咨询当地农业技术推广部门或咖啡专业合作社。"
NOT_COVERED_OPENING = "抱歉，知识库中没有"  # how every refusal above opens


def is_not_covered(reply: str) -> bool:
    """Whether a reply is one of the refusals above (after a note on how a keyboard slip was read, if any)."""
    return NOT_COVERED_OPENING in reply[:40]


def not_covered(topic: str = "") -> str:
    """The refusal, naming the topic the knowledge base lacks when it is known."""
    return NOT_COVERED_TOPIC.format(topic=topic) if topic else NOT_COVERED

SYSTEM_PROMPT = """你是云南小粒咖啡种植顾问，为咖啡农解答生产问题。请严格遵守：
1. 只根据下面提供的【资料】回答，不要使用资料以外的知识，不要编造数字、药名或浓度。
2. 每个关键事实（做法、时间、用量、浓度、指标）后面紧跟出处标注，格式为 [文档号#段号]，例如 [e76faa05#3]；只能使用资料中给出的编号，可以连续标注多个，如 [e76faa05#3][9c1d22ab#0]。
3. 如果资料不能回答这个问题，直接说明“知识库中没有相关内容”，不要标注任何出处。
4. 回答要简短实用、适合在手机上阅读：先给结论，再分条说明做法，约{chars}字以内（除非提问者要求详细说明）。
5. 资料中有农药标签、安全间隔期、防护等安全提示时，必须保留。
6. 用通俗的中文回答，数字和单位照抄资料。"""


def _evidence_block(hits: Sequence[Hit]) -> str:
    parts = []
    for hit in hits:
        c = hit.chunk
        where = f"{c.title} › {c.section}" if c.section and c.section != c.title else c.title
        parts.append(f"[{c.id}]（{where}）\n{c.text}")
    return "\n\n".join(parts)


def build_messages(question: str, rewritten: str, hits: Sequence[Hit], history: Sequence[Turn], answer_chars: int = 300) -> list[dict[str, str]]:
    """System prompt, the injected history (IHI), then the evidence and the question."""
    messages = [{"role": "system", "content": SYSTEM_PROMPT.format(chars=answer_chars)}]
    messages += [{"role": t.role, "content": t.content} for t in history]
    question_line = question if rewritten == question else f"{question}\n（结合上文，这个问题指的是：{rewritten}）"
    messages.append({"role": "user", "content": f"【资料】\n{_evidence_block(hits)}\n\n【问题】\n{question_line}"})
    return messages


REWRITE_PROMPT = """把用户的最后一个问题改写成一个不依赖上下文、意思完整的问题（补全省略的对象，如品种、病虫害名称、做法），只输出改写后的问题本身。

对话：
{history}
最后的问题：{question}"""


def build_rewrite_messages(question: str, history: Sequence[Turn]) -> list[dict[str, str]]:
    lines = "\n".join(f"{'用户' if t.role == 'user' else '顾问'}：{t.content[:300]}" for t in history)
    return [{"role": "user", "content": REWRITE_PROMPT.format(history=lines, question=question)}]


# ---- the extractive answer -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Sentence:
    hit_rank: int
    start: int  # offset in the chunk, for document order
    text: str
    score: float
    answers: frozenset[int] = frozenset()  # the intents (indexes into INTENTS) its section or text answers
    states: frozenset[int] = frozenset()  # … that it answers itself: by its text, its own heading or FAQ question,
    # not a chapter's ("9 苗圃病虫害防治" frames its 症状 sentence as well as its 防治 one)


_QUESTION_LINE = re.compile(r"^(?:问|Q|提问)\s*[：:]|[？?]$")
_CAPTION = re.compile(r"^(?:表|图)\s*\d+(?:\s*[-–—.．]\s*\d+)*\s")  # "表 10-2 咖啡霜冻受害分级与恢复措施": names a table


def _is_question_line(sentence: str) -> bool:
    """An FAQ question ("问：叶子发黄是缺什么肥？"): it frames the answer after it and is never the answer."""
    return bool(_QUESTION_LINE.search(sentence.strip()))


def _table_row(row: str, header: list[str] | None) -> tuple[str, list[str] | None]:
    """A Markdown table row as a sentence a phone can show: "主干（直生枝）：垂直向上生长…；单干整形留 1 条…。", and a
    row of figures with each column's name ("成龄结果树（中等产量）：年施纯氮 N（g/株） 40–50；…；施肥位置 树冠滴水线").
    The first row of a table is its header (returned, not shown); rule rows vanish. A passage that opens inside a
    table has no header: figures without their columns would say nothing, so its rows of figures are left out."""
    if TABLE_RULE.match(row):
        return "", header
    cells = [c.strip() for c in row.strip().strip("|").split("|") if c.strip()]
    if header is None:
        if any(_FIGURE_CELL.match(c) for c in cells[1:]):  # a data row: the table's header is in another passage
            return "", []
        return "", cells
    if not cells:
        return "", header
    cells = [c.rstrip("；;，,。") for c in cells]
    if len(cells) == 1:
        return cells[0], header
    parts = cells[1:]
    if any(_FIGURE_CELL.match(c) for c in parts):  # figures: every cell of the row with its column's name
        if len(header) != len(cells):
            return "", header  # a figure whose column is unknown
        parts = [f"{h} {c}" for h, c in zip(header[1:], parts)]
    return f"{cells[0]}：{'；'.join(parts)}。", header


_FIGURE_CELL = re.compile(r"^(?:约|≤|≥|<|>|＜|＞)?\s*\d")  # a cell that is a figure ("40–50", "约 5", "3 次")


def _intents(frame: str, sentence: str) -> frozenset[int]:
    """The kinds of ask a sentence answers, read under its frame (headings, the FAQ question it answers); what to
    spray only by a product with its dose in the sentence itself, not by a 化学防治 heading over 轮换用药."""
    text = f"{frame}\n{sentence}"
    return frozenset(i for i, (_asks, answers) in enumerate(INTENTS)
                     if answers.search(text) and (i != REMEDY or _PRODUCT.search(sentence)))


def _holds(asked: Sequence[int], sentence: str) -> set[int]:
    """The asks (INTENTS positions) whose kind of answer the sentence itself holds."""
    return {i for i in asked if (_PRODUCT if i == REMEDY else INTENTS[i][1]).search(sentence)}


def asked_intents(question: str) -> list[int]:
    """The kinds of thing a question asks for, in the order it asks them ("用什么药？什么时候喷？" → remedy, time)."""
    found = [(m.start(), i) for i, (asks, _answers) in enumerate(INTENTS) if (m := asks.search(question))]
    return [i for _pos, i in sorted(found)]


def _bigrams(text: str) -> set[str]:
    chars = [c for c in text if not c.isspace()]
    return {a + b for a, b in zip(chars, chars[1:])}


def _similar(a: str, b: str) -> bool:
    x, y = _bigrams(a), _bigrams(b)
    return bool(x and y) and len(x & y) / min(len(x), len(y)) > 0.6


def _is_heading(sentence: str, section: str) -> bool:
    s = sentence.strip()
    return bool(s) and s[-1] not in "。！？；：!?;:" and len(s) <= 40 and s in section


def query_terms(question: str, tokenizer: Tokenizer, context: str = "", context_weight: float = 0.5) -> dict[str, float]:
    """Query features with weights: domain words weigh more, longer words more, growers' words map to the KB's.
    Terms only in `context` (what HAR carried over from earlier turns) weigh `context_weight` as much."""
    lexicon = tokenizer.lexicon_set
    terms: dict[str, float] = {}
    for text, scale in ((question, 1.0), (context, context_weight)):
        for w in tokenizer.words(text):
            weight = scale * min(len(w), 4) * (1.5 if w in lexicon else 1.0)
            terms[w] = max(terms.get(w, 0.0), weight)
        for word, targets in tokenizer.synonyms.items():
            if word in text:
                for t in targets:
                    for w in tokenizer.words(t):
                        terms[w] = max(terms.get(w, 0.0), 0.8 * scale * min(len(w), 4))
    return terms


# What a grower asks for, and the headings under which a manual answers it: "怎么防治" is answered under
# "防治方法", not under "发生季节", even when both sections name the disease.
INTENTS = (
    (re.compile(r"怎么防|咋防|怎么治|咋治|防治|怎么处理|咋处理|" + WHAT_TO_DO),
     re.compile(r"防治|防控|措施|方法|用药|化学|处理|预防|恢复|补救")),
    (re.compile(r"(?:用|打|喷|施)(?:什么|啥)(?:药|农药)|什么药|啥药|药剂"), re.compile(r"化学|药剂|用药|喷施|喷药|杀菌剂|杀虫剂")),
    # a when is also a wait: "等待 2～4 周", "2～4 周后再剪" (not "1–2 周内脱落", how soon a symptom shows)
    (re.compile(r"什么时候|啥时候|几月|哪个月|季节|时期"),
     re.compile(r"季节|时期|时间|月|物候|农事|等(?:待|到)?\s*\d[^，,。；;]{0,6}(?:周|天|d)|\d\s*(?:周|天|d)(?:后|以后)再")),
    (re.compile(r"怎么识别|咋识别|什么症状|啥症状|是什么病|是啥病|什么虫|啥虫|怎么看"), re.compile(r"症状|识别|诊断|特征")),
    (re.compile(r"施多少|用量|多少肥|几次肥|怎么施|咋施"), re.compile(r"施肥|用量|肥")),
    (re.compile(r"怎么恢复|咋恢复|怎么救|咋救|还有救|怎么补救|怎么管|咋管|怎么处理"), re.compile(r"恢复|补救|管理|复壮|更新")),
)
# What a sentence must itself hold to answer what to spray, where a heading's word is not enough: a product with
# its dose or formulation (not 轮换用药 or 三唑类药剂, which only name a class of drugs).
_PRODUCT = re.compile(r"\d\s*(?:倍液|倍|%|g/升|克/升|毫升)|可湿性粉剂|悬浮剂|乳油|水剂|波尔多液|石硫合剂")
INTENT_WEIGHT = 6.0  # as much as a four-character domain term
ANSWER_WEIGHT = 3.0  # a sentence that itself holds the kind of answer asked for (a time for 什么时候)
LEAD_FLOOR = 0.5  # a second passage led with shows only when its best sentence scores at least this share of the first's
RANK_DECAY = 0.25  # how much less a sentence of the next-ranked passage counts


# A tree's stage of life: a question about bearing trees is not answered by the young trees' rates beside them in the
# same passage (定植第 1 年的咖啡幼树…每次每株用尿素约 10 g), nor the other way round.
_STAGES = (re.compile(r"幼树|幼龄|小苗|幼苗|苗期|定植第\s*[1１一]\s*年|定植当年|新植"),
           re.compile(r"成龄|结果树|成年树|挂果的树"))


def _other_stage(question: str) -> Callable[[str], bool]:
    """A test of sentences: True for one about the stage of life the question does not ask (the question naming one
    stage only); never True when the question names none or both."""
    named = [bool(stage.search(question)) for stage in _STAGES]
    if sum(named) != 1:
        return lambda sentence: False
    asked, other = (_STAGES[0], _STAGES[1]) if named[0] else (_STAGES[1], _STAGES[0])
    return lambda sentence: bool(other.search(sentence)) and not asked.search(sentence)


def intent_bonus(question: str, heading: str) -> float:
    return sum(INTENT_WEIGHT for asks, answers in INTENTS if asks.search(question) and answers.search(heading))


def score_sentence(sentence: str, terms: dict[str, float]) -> float:
    return sum(w for t, w in terms.items() if t in sentence)


def extractive_answer(
    question: str,
    hits: Sequence[Hit],
    tokenizer: Tokenizer,
    budget: int = 300,
    max_sources: int = 2,
    second_source_ratio: float = 0.9,
    context: str = "",
    lead: int = 0,
    states_asked: Callable[[str], bool] | None = None,
) -> tuple[str, list[str]]:
    """The most relevant sentences of the top evidence, each group followed by its citation, without repeats and
    within about `budget` characters; `context` is the HAR-rewritten question, whose carried-over terms count
    half. `lead` > 0: the answer is drawn from the first `lead` passages as ranked (each cited, its best sentence
    shown), since the ranker knows better than word overlap which passage answers; 0: from the passages whose
    best sentence scores highest. A second ask or a sibling control section may still add a further passage.
    `states_asked(sentence)`: whether a sentence states the amount the question asks (relevance.amount_stated);
    such a sentence holds the kind of answer asked (每人每天施药时间不宜超过 6 h, for 一天最多打几个钟头).
    Returns (text, cited ids)."""
    terms = query_terms(question, tokenizer, context)
    asked_kinds = asked_intents(question)
    other_stage = _other_stage(question)
    candidates: list[_Sentence] = []
    for rank, hit in enumerate(hits):
        text = hit.chunk.text
        prior = 1.0 / (1.0 + RANK_DECAY * rank)
        # the nearest headings frame every sentence under them ("五、咖啡锈病的防治方法" answers "怎么防治")
        # a sentence is read under its nearest headings: their terms count (once), and so does the kind of
        # section a question asks for ("怎么防治" → "防治方法", not "发生季节")
        heading = " ".join(hit.chunk.section.split(" › ")[-2:])
        leaf = hit.chunk.section.rpartition(" › ")[2]  # what a sentence answers itself, without its chapter
        framing = intent_bonus(question, heading)
        asked = ""  # the FAQ question a sentence answers frames it, as a heading does
        table_header: list[str] | None = None
        for s, e in sentence_spans(text, ends=FULL_STOP):
            sent = text[s:e].strip()
            if sent.startswith("|"):
                sent, table_header = _table_row(sent, table_header)
            else:
                table_header = None
            if len(sent) < 4 or _is_heading(sent, hit.chunk.section) or _CAPTION.match(sent) or other_stage(sent):
                continue
            if _is_question_line(sent):
                asked = sent
                continue
            frame = f"{heading}\n{asked}"
            holds = len(_holds(asked_kinds, sent)) + bool(states_asked is not None and states_asked(sent))
            score = (score_sentence(f"{frame}\n{sent}", terms) + framing + intent_bonus(question, asked)
                     + ANSWER_WEIGHT * holds) * prior
            if score > 0:
                candidates.append(_Sentence(rank, s, sent, score, _intents(f"{heading}\n{asked}", sent),
                                            _intents(f"{leaf}\n{asked}", sent)))
    if not candidates:
        return "", []
    best = max(c.score for c in candidates)
    candidates.sort(key=lambda c: c.score, reverse=True)
    all_candidates = list(candidates)
    # Cite few passages: the best one, and another only when its best sentence is nearly as relevant.
    source_best: dict[int, float] = {}
    for c in candidates:
        source_best.setdefault(c.hit_rank, c.score)
    allowed = [r for r in range(lead) if r in source_best]
    if allowed:
        allowed = allowed[:1] + [r for r in allowed[1:] if source_best[r] >= LEAD_FLOOR * source_best[allowed[0]]]
        best = max(source_best[r] for r in allowed)
    else:
        allowed = [r for r, sc in source_best.items() if sc >= second_source_ratio * best][:max_sources]
    candidates = [c for c in candidates if c.hit_rank in allowed]
    chosen: list[_Sentence] = []
    used = 0

    def row(c: _Sentence) -> bool:
        return hits[c.hit_rank].chunk.text.startswith("|", c.start)

    sources: list[int] = []
    if lead:  # every passage the answer leads with shows its best sentence, whatever the others score
        for rank in allowed:
            c = next(c for c in candidates if c.hit_rank == rank)
            chosen.append(c)
            used += len(c.text)
            sources.append(rank)
    for c in candidates:
        if c in chosen:
            continue
        if c.score < 0.6 * best or used >= budget:
            break
        if c.hit_rank not in sources and len(sources) >= max_sources:
            continue
        if any(_similar(c.text, o.text) and not (c.hit_rank == o.hit_rank and row(c) and row(o)) for o in chosen):
            continue  # a repeat; the rows of one table share their words, not their figures
        if used and used + len(c.text) > budget * 1.3:
            continue
        chosen.append(c)
        used += len(c.text)
        if c.hit_rank not in sources:
            sources.append(c.hit_rank)
    # A question with two asks ("用什么药？什么时候喷？") gets a sentence for each when the evidence has one, even
    # from a further passage, cited on its own.
    # With `lead`, so does the first ask: the passages led with were chosen by rank, not for holding its kind of
    # answer ("咋办" answered by symptoms alone gets the recovery section too).
    for intent in asked_kinds:
        if any(intent in c.states for c in chosen):
            continue
        extra = next((c for c in all_candidates if intent in c.answers and c.score >= 0.5 * best
                      and not any(_similar(c.text, o.text) for o in chosen)), None)
        if extra is None:
            continue
        # a section looked up for what it is (the measures behind a description; no channel ranked it) is read
        # from its start, where a manual puts what to do first, not from one sentence that shares a word
        group = _opening(all_candidates, extra.hit_rank) if not hits[extra.hit_rank].ranks else [extra]
        if used + sum(len(c.text) for c in group) <= budget * 1.5:
            chosen.extend(group)
            used += sum(len(c.text) for c in group)
            if extra.hit_rank not in sources:
                sources.append(extra.hit_rank)
    # "怎么防治" is answered by every control section under the same heading (农业防治 and 化学防治 under
    # 锈病的防治方法): the best sentence of a sibling section among the evidence joins, cited on its own.
    if asked_kinds[:1] == [CONTROL]:
        extra = _sibling_section(chosen, all_candidates, hits, 0.5 * best)
        if extra is not None and used + len(extra.text) <= budget * 1.5:
            chosen.append(extra)
            sources.append(extra.hit_rank)
    # A lead-in ("咖啡园喷施杀菌剂时应做到：") says nothing without its list: its items follow it, in order, as far as
    # the answer has room (the first always), unless one already does; a lead-in whose list is not in its passage goes.
    numbered: dict[tuple[int, int], int] = {}  # (rank, start) of a list item's sentence shown → its place in the list
    for c in [c for c in chosen if c.text.endswith(_OPENS_LIST)]:
        items = _list_after(hits[c.hit_rank].chunk, c.start)
        shown = {o.start for o in chosen if o.hit_rank == c.hit_rank}
        if not items:
            if len(shown) > 1:
                chosen.remove(c)
            continue
        if not any(start in shown for start, _, _ in items):
            for n, (start, sent, _) in enumerate(items):
                if n and used + len(sent) > budget * 1.5:
                    break
                chosen.append(_Sentence(c.hit_rank, start, sent, 0.0))
                used += len(sent)
        numbered.update({(c.hit_rank, start): place for start, _, place in items})
    lines = []
    for rank in sources:
        group = sorted((c for c in chosen if c.hit_rank == rank), key=lambda c: c.start)
        # a table's rows read one to a line, as on the page, and so do a list's items after their lead-in; prose runs on
        pieces = []
        in_list = False  # the last piece was an item of a numbered list: what follows it starts a line
        for i, c in enumerate(group):
            follows = i + 1 < len(group) and (rank, group[i + 1].start) in numbered
            if i and (rank, c.start) in numbered:
                marked = bool(_LEAD.match(c.text))  # a numbered line; else the item's next sentence or wrapped prose
                in_list = in_list or marked
                item = _LEAD.sub("", c.text).rstrip("；;，,")
                if item[-1:] not in FULL_STOP:
                    item += "；" if follows else "。"
                pieces.append(f"\n{_MARKS[numbered[rank, c.start] - 1]}{item}" if marked else item)
            elif follows and c.text.endswith(_OPENS_LIST):
                pieces.append(("\n" if i else "") + _LEAD.sub("", c.text).rstrip("：: ") + "：")
            else:
                pieces.append(("\n" if i and (row(c) or in_list) else "") + _end_sentence(c.text))
                in_list = False
        lines.append(f"{''.join(pieces)}[{hits[rank].chunk.id}]")
    bullets = lines[0] if len(lines) == 1 else "\n".join(f"{i}. {line}" for i, line in enumerate(lines, 1))
    gap = NO_NUMBER if _QUANTITY_ASK.search(question) and not any(_NUMBER.search(c.text) for c in chosen) else ""
    return f"{EXTRACTIVE_HEADER}\n{bullets}{gap}", [hits[r].chunk.id for r in sources]


SISTER_SHARE = 0.55  # of the IDF weight of an answer line's words that a passage of another document holds to state it too
SISTER_RANKS = 3  # … among this many passages at the top of the evidence
_SPECIFIC_SHARE = 0.2  # a word in more of the passages than this says little of which fact a line states
_CITED_LINE = re.compile(r"([^\[\]]*?)\[([^\[\]\s]+#\d+)\]")


def cite_sisters(text: str, cited: Sequence[str], hits: Sequence[Hit], tokenizer: Tokenizer,
                 stats: TermStats) -> tuple[str, list[str]]:
    """The knowledge base states many facts twice: a chapter's rule and the FAQ's answer, a regulation and a bulletin
    (石灰与氮肥间隔 2 周 in the fertiliser chapter and the nutrition FAQ). When a passage of another document, among the
    first SISTER_RANKS of the evidence, holds SISTER_SHARE of the IDF weight of the first cited line's words, it states
    that line too and is cited beside it: the agronomist sees both sources, and a writer who quoted either finds it.
    Which of two sisters a question's writer quotes, the ranker cannot tell: over the gold sets' 6,357 questions
    citing both changed 249 answers and raised mean citation F1 by 0.005, in no family of sets less (a share of 0.5:
    the same, with 327 changed; 0.65: 0.004; among 2 passages 0.003, 4 the same with 305 changed, 5 0.004; words
    tagged with their part of speech instead of cut for search: 0.004). Returns (text, cited ids)."""
    docs = {cid.partition("#")[0] for cid in cited}
    sisters = [h for h in hits[:SISTER_RANKS] if h.chunk.id not in cited and h.chunk.docid not in docs]
    line = dict((cid, body) for body, cid in _CITED_LINE.findall(text)).get(cited[0]) if cited and sisters else None
    if line is None:
        return text, list(cited)
    weights: dict[str, float] = {}  # the words as BM25 cuts them for search: long words and their parts
    for word in tokenizer.words(line.replace(EXTRACTIVE_HEADER, "")):
        share = stats.share(word)
        if len(word) >= 2 and not word.isascii() and 0.0 < share <= _SPECIFIC_SHARE:
            weights[word] = math.log(1 / share)
    total = sum(weights.values())

    def held(hit: Hit) -> float:
        return sum(w for word, w in weights.items() if word in hit.chunk.text) / total

    best = max(sisters, key=held) if total else None
    if best is None or held(best) < SISTER_SHARE:
        return text, list(cited)
    first = f"[{cited[0]}]"
    return text.replace(first, f"{first}[{best.chunk.id}]", 1), [cited[0], best.chunk.id, *cited[1:]]


OPENING_CHARS = 120  # how much of a looked-up section's start an answer shows


def _opening(candidates: list[_Sentence], rank: int) -> list[_Sentence]:
    """The first sentences of one passage, in its order, up to about OPENING_CHARS (at least one)."""
    group: list[_Sentence] = []
    for c in sorted((c for c in candidates if c.hit_rank == rank), key=lambda c: c.start):
        if group and sum(len(g.text) for g in group) + len(c.text) > OPENING_CHARS:
            break
        group.append(c)
    return group


CONTROL, REMEDY = 0, 1  # INTENTS[0]: how to control or treat; INTENTS[1]: what to spray


def _sibling_section(chosen: list[_Sentence], candidates: list[_Sentence], hits: Sequence[Hit], floor: float) -> _Sentence | None:
    """The best candidate from a passage in another control section under the same parent heading as the first
    chosen passage (same document), not already cited. A section that names what to spray (化学防治) joins whatever its
    sentences score (the heading makes it the same disease's control; its sentences, ranked lower, may score under
    `floor`); another only above `floor`."""
    if not chosen:
        return None
    first = hits[chosen[0].hit_rank].chunk
    parent, _, leaf = first.section.rpartition(" › ")
    if not parent or not INTENTS[CONTROL][1].search(leaf):
        return None
    cited = {c.hit_rank for c in chosen}
    siblings: list[tuple[_Sentence, bool]] = []  # (candidate, whether its section names what to spray), best first
    for c in candidates:
        chunk = hits[c.hit_rank].chunk
        p, _, l = chunk.section.rpartition(" › ")
        remedy = bool(INTENTS[REMEDY][1].search(l))
        if (c.hit_rank not in cited and (c.score >= floor or remedy) and chunk.docid == first.docid
                and p == parent and l != leaf and INTENTS[CONTROL][1].search(l)
                and not any(_similar(c.text, o.text) for o in chosen)):
            siblings.append((c, remedy))
    # control is cultural and chemical: a sibling that names what to spray (化学防治) before one that does not
    best = min(siblings, key=lambda s: not s[1], default=None)
    return best[0] if best else None


def with_control_sections(question: str, hits: Sequence[Hit], chunks: Sequence[Chunk], limit: int = 3) -> list[Hit]:
    """The evidence, and for "怎么防治" whose first passage is one control section of a heading (农业防治 under 锈病的
    防治方法), the opening passage of each sibling control section of the same document (田间监测, 化学防治) behind it,
    even when retrieval ranked it below the five: a manual answers 怎么防治 with the whole section.
    A what-to-do question whose first passage only describes (叶片受冻的症状 for "叶子冻黑了，咋办？") gets the
    opening passages of the measures that retrieval found further down in the same document (受害后的恢复管理 ›
    不要急于修剪, 按受害程度修剪): what to do is the measures' section, from its start. Where no heading there names
    measures, a passage of that document whose opening clause does (采收卫生是预防…的主要措施) moves up to second."""
    hits = list(hits)
    if not hits or asked_intents(question)[:1] != [CONTROL]:
        return hits
    if _names_measures(hits[0].chunk.section):
        return _with_sibling_controls(hits, chunks, limit)
    return _with_measures(hits, chunks, limit)


def _with_sibling_controls(hits: list[Hit], chunks: Sequence[Chunk], limit: int) -> list[Hit]:
    """The first passage is one control section of a heading: its siblings' openings behind the evidence."""
    first = hits[0].chunk
    parent, _, leaf = first.section.rpartition(" › ")
    acts = INTENTS[CONTROL][1]
    if not parent or not acts.search(leaf):
        return hits

    def sibling(section: str) -> bool:
        p, _, l = section.rpartition(" › ")
        return p == parent and l != leaf and bool(acts.search(l))

    return _append_openings(hits, chunks, first.docid, sibling, limit)


def _with_measures(hits: list[Hit], chunks: Sequence[Chunk], limit: int) -> list[Hit]:
    """The first passage only describes: the measures of its document read right after it."""
    docid, acts = hits[0].chunk.docid, INTENTS[CONTROL][1]
    measure = next((h.chunk for h in hits[1:] if h.chunk.docid == docid and _names_measures(h.chunk.section)), None)
    if measure is None:
        # a section that says in its opening words that it is a measure ("采收卫生是预防咖啡果小蠹的主要措施：")
        # though its heading does not: read second, behind the description
        stated = next((h for h in hits[1:] if h.chunk.docid == docid and acts.search(_opening_clause(h.chunk))), None)
        return hits if stated is None else [hits[0], stated, *(h for h in hits[1:] if h is not stated)]
    # the measures' group: the heading that names them (受害后的恢复管理), every section under it, in the order the
    # document gives them, right after the description
    path = measure.section.split(" › ")
    group = " › ".join(path[: next(i for i in range(1, len(path)) if acts.search(path[i])) + 1])
    added = _append_openings(hits, chunks, docid, lambda section: section.startswith(group), limit)[len(hits):]
    return [hits[0], *added, *hits[1:]]


def _opening_clause(chunk: Chunk) -> str:
    """The passage's first clause below its headings (to the first colon, full stop or semicolon)."""
    lines = [line for line in chunk.text.splitlines() if line.strip() and not _is_heading(line, chunk.section)]
    return re.split(r"[：:。；;]", "\n".join(lines), maxsplit=1)[0]


def _names_measures(section: str) -> bool:
    """Whether a heading below the document's title names measures (the title, 主要病害识别与防治, names its whole
    chapter, descriptions included)."""
    return any(INTENTS[CONTROL][1].search(h) for h in section.split(" › ")[1:])


def _append_openings(hits: list[Hit], chunks: Sequence[Chunk], docid: str, wanted: Callable[[str], bool],
                     limit: int) -> list[Hit]:
    """`hits` and, behind them, the opening passage of each wanted section of the document not shown yet (at most
    `limit`, in document order), scored below every hit."""
    hits = list(hits)
    shown = {h.chunk.section for h in hits if h.chunk.docid == docid}
    floor, retrieved = min(h.score for h in hits), len(hits)
    for chunk in chunks:  # in document order: a section's opening passage comes first
        if len(hits) - retrieved >= limit:
            break
        if chunk.docid == docid and chunk.section not in shown and wanted(chunk.section):
            hits.append(Hit(chunk, floor - 1.0, {}))
            shown.add(chunk.section)
    return hits


# A question asking how many, how much or how long wants a number; when the passages shown hold none, say so rather
# than let the nearest text pass for an answer ("它一年发生几代？").
_QUANTITY_ASK = re.compile(r"多少|几[代次年月天周个棵株斤克倍遍度米成]|多久|多长|多大|多高|多深|多宽|多厚|多远|多浓")
_NUMBER = re.compile(r"[0-9０-９一二两三四五六七八九十百千万半]")
NO_NUMBER = "\n（知识库里没有找到这个问题要的具体数字，以上是最相关的内容，仅供参考。）"


_OPENS_LIST = ("：", ":")  # a sentence that ends so opens the list of the lines after it


def _list_after(chunk: Chunk, start: int) -> list[tuple[int, str, int]]:
    """The items of the list that the lead-in sentence at `start` of the passage opens, as (start, sentence, place in
    the list): the numbered or bulleted lines after it (an item's further sentences on its line share its place), or,
    when the next line has no mark (a PDF's wrapped prose), the lines up to the first full stop. Never a heading, a
    table (whose rows read on their own) or the next lead-in."""
    text = chunk.text
    after = [(s, e) for s, e in sentence_spans(text, ends=FULL_STOP) if s > start]
    marked = bool(after) and bool(_LEAD.match(text[after[0][0]:after[0][1]]))
    items: list[tuple[int, str, int]] = []
    place = 0
    for s, e in after:
        sent = text[s:e].strip()
        same_line = bool(items) and not text[:s].endswith("\n")
        if (sent.startswith("|") or _is_heading(sent, chunk.section) or sent.endswith(_OPENS_LIST)
                or (marked and not same_line and not _LEAD.match(sent))):
            break
        if not same_line or not marked:
            place += 1
        if place > _LIST_ITEMS:
            break
        items.append((s, sent, place))
        if not marked and sent.endswith(tuple(FULL_STOP)):
            break
    return items


_MARKS = "①②③④⑤⑥⑦⑧⑨⑩⑪⑫"  # a list's items as shown, one to a line
_LIST_ITEMS = len(_MARKS)  # … and how many of them at most


_LEAD = re.compile(r"^\s*(?:[-*•]|\d+(?:\.\d+)+\s|\d+[.、）)]|（\d+）|[①-⑩]|答[：:])\s*")


def _end_sentence(text: str) -> str:
    text = _LEAD.sub("", text.strip()).rstrip("；;，,、：:")
    return text if text[-1:] in "。！？!?" else text + "。"
