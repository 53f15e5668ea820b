"""Does the knowledge base cover the question? Offline there is no calibrated neural relevance score, so the
decision is lexical and explainable, from the corpus itself and the question's structure, and names what is missing:

1. a topical word of the question (a noun, a name, an agrochemical or pest) that occurs nowhere in the corpus, when
   the question names little the corpus does know, or when it is a chemical or pest name (阿维菌素, 吡虫啉);
2. a time-bound or out-of-scope topic (prices, subsidies, forecasts) or a named pest, disease, input or crop
   (红蜘蛛, 沼液 …) that the corpus lacks (character patterns, the older test);
3. the kind of fact the question asks for (a price, a forecast, a brand or vendor, paperwork, a year) absent from the
   best evidence: the near miss, where the knowledge base has the topic but not the fact;
4. the best evidence covers too little of what the question asks (weighted share of its content words).
Measured on dev, dev-switch and adversarial-oos (tests/data/eval); dev2 is kept for checking.
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


# What kind of fact a question asks for, and what evidence answering it must contain. A manual that names the topic
# but holds no such fact (a price, a forecast, a brand, an office) does not answer the question: the near miss.
ASKED_FACTS: tuple[tuple[str, re.Pattern, re.Pattern | None], ...] = (
    ("价格", re.compile(r"多少钱|几块钱|几块|价格|价钱|收购价|卖价|市价|租金|工钱|工资|保费|费用|收费|收多少|补多少"),
     re.compile(r"\d\s*(?:元|块|万元)|元/")),
    ("天气和行情预测", re.compile(r"(?:明天|后天|今晚|这几天|近几天|最近几天|下周|下个?星期|下个?礼拜|下个?月|明年|未来)"
                          r"[^，,。？?]{0,12}(?:会不会|会不|会下|会涨|会跌|涨|跌|预报|行情)"),
     re.compile(r"(?!)")),  # a manual holds no forecast
    ("品牌和购买渠道", re.compile(r"哪个牌子|什么牌子|啥牌子|品牌|哪家|哪个厂|哪里买|哪儿买|在哪买|去哪买|哪里能买|"
                          r"哪里有卖|在哪里可以买|买得到|联系方式|电话"),
     re.compile(r"品牌|牌子|公司|厂家|商店|经销|电话|网站|地址|购买渠道")),
    ("办理手续", re.compile(r"手续|办证|许可证|认证|审批|流程"), None),  # None: the asked word itself must be there
    ("年份", re.compile(r"哪年|哪一年|哪个年代|什么年代|几几年"), re.compile(r"\d{4}\s*年|\d{2}\s*世纪|\d{2}\s*年代")),
)


def missing_fact(question: str, hits: Sequence[Hit], top: int = 3) -> str:
    """The kind of fact the question asks for that the best evidence does not contain ("" when none is missing)."""
    evidence = "".join(h.chunk.text for h in hits[:top])
    for name, asks, answered_by in ASKED_FACTS:
        m = asks.search(question)
        if m and not (answered_by.search(evidence) if answered_by else m.group(0) in evidence):
            return name
    return ""


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
    """The weighted share of the question's content words found in the top evidence; a growers' word counts as
    found when the knowledge base's word for it (the synonym table's) is there ("黄粉" → "锈病")."""
    words = content_words(question, tokenizer)
    if not words:
        return 1.0
    evidence = "".join(h.chunk.section + h.chunk.text for h in hits[:top])
    keys = [k for k in tokenizer.synonyms if k in question]

    def found(word: str) -> bool:
        if word in evidence:
            return True
        return any(t in evidence for k in keys if word in k or k in word for t in tokenizer.synonyms[k])

    total = sum(min(len(w), 4) for w in words)
    return sum(min(len(w), 4) for w in words if found(w)) / total


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
        if stats.known(word):
            continue
        freq = tokenizer.general_frequency(word)
        if freq < MIN_WORD_FREQ and not (len(word) >= 4 and freq) and not _looks_like_a_name(word, flag):
            continue  # a fragment of a bad segmentation, not a word (long dictionary words are words: 小额贷款)
        if any(word in key or key in word for key in tokenizer.synonyms):
            continue
        out.append(word)
    return list(dict.fromkeys(out))


_CHEMICAL_OR_PEST = re.compile(r"^..+[啉嗪磷酯胺醇酮菌灵威素蜱脲腈唑蝇螨蚜蛾虱蚧蝽]$")  # 吡虫啉, 噻虫嗪, 毒死蜱 …: how such names end


def _looks_like_a_name(word: str, flag: str) -> bool:
    """A word jieba's dictionary lacks is a segmentation fragment, unless jieba's HMM took it for a name (拉花, 冷萃,
    孟连) or it ends like the chemical and pest names the KB does use (吡虫啉, 噻虫嗪)."""
    return flag in ("nr", "ns", "nz") or bool(_CHEMICAL_OR_PEST.search(word))


def unknown_focus(question: str, tokenizer: Tokenizer, stats: TermStats) -> str:
    """What the question is about that the knowledge base never mentions, when that is most of what it names
    ("" otherwise): a question naming a word the knowledge base has never seen, and little that it knows well,
    is about that word."""
    unknown = unknown_words(question, tokenizer, stats)
    if not unknown:
        return ""
    named = [w for w in unknown if _CHEMICAL_OR_PEST.search(w)]
    if named:  # an agrochemical or pest the KB never names: it cannot say how it works, whatever else is asked
        return named[0]
    strength = topic_strength(question, tokenizer, stats)
    return unknown[0] if strength < UNKNOWN_FOCUS_STRENGTH else ""


def assess(question: str, hits: Sequence[Hit], tokenizer: Tokenizer, corpus_text: str,
           stats: TermStats | None = None) -> Coverage:
    if not hits:
        return Coverage(False, 0.0)
    score = coverage_score(question, hits, tokenizer)
    # whole words first (阿维菌素, not the 维菌 the character patterns of unknown_topic would name)
    missing = ((unknown_focus(question, tokenizer, stats) if stats else "") or unknown_topic(question, corpus_text)
               or missing_fact(question, hits))
    return Coverage(covered=not missing and score >= MIN_COVERAGE, score=score, missing=missing)
