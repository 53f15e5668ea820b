"""Chinese tokenisation for BM25: jieba with the domain lexicon, stopwords, and synonyms for growers' words.

Tokenisation stays outside the scorer. Each `Tokenizer` owns a private jieba instance whose cache lives in the
project's data directory, not the system temp dir.
"""
from __future__ import annotations

import logging
import re
import threading
from functools import cached_property
from pathlib import Path

log = logging.getLogger(__name__)

_KEEP = re.compile(r"[\w°²³%.]+")  # a token worth indexing has a letter, digit or CJK character
_CJK = re.compile(r"[\u4e00-\u9fff]")
# Asking what to do about something, in standard and Yunnan words (咋整, 咋个办, 怎么弄): the answer stage's and the
# ranker's control intent
WHAT_TO_DO = r"咋办|怎么办|咋个?整|怎么整|咋个办|咋个?弄|怎么弄"
TAG_CACHE = 1024  # questions whose part-of-speech tags a tokenizer keeps (emptied when full)
_FUNCTION_POS = set("mqrdcfupyeoxwz")  # jieba's numerals, measures, pronouns, adverbs, conjunctions, particles …


RESOURCES = Path(__file__).parent / "resources"


def resource_path(name: str) -> Path:
    return RESOURCES / name


def _read_lines(path: Path) -> list[str]:
    if not path.exists():
        log.warning("resource missing: %s", path)
        return []
    return [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip() and not line.startswith("#")]


def _read_pairs(path: Path) -> list[tuple[str, str]]:
    return [tuple(line.split("\t", 1)) for line in _read_lines(path) if "\t" in line]


_NUMERALS = {"一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9}
_MONTHS_IN_WORDS = re.compile(r"[一二两三四五六七八九十]{1,5}(?=个?月)")


def _numbers(run: str) -> list[int]:
    """The months or counts a run of Chinese numerals names before 月: 九十 → 9, 10; 十一二 → 11, 12; 三四 → 3, 4."""
    out: list[int] = []
    i = 0
    while i < len(run):
        if run[i] == "十":
            if i + 1 < len(run) and run[i + 1] in "一二":
                out.append(10 + _NUMERALS[run[i + 1]])
                i += 2
                continue
            out.append(10)
        elif out and out[-1] == 11 and run[i] == "二":
            out.append(12)  # 十一二月: November and December
        else:
            out.append(_NUMERALS[run[i]])
        i += 1
    return out


def arabic_months(text: str) -> str:
    """Months and month counts in Arabic digits, as the knowledge base writes them: "九十月份" → "9 10 月份",
    "一两个月" → "1 2 个月", so a grower's 九十月份 meets the calendar's "9–10 月"."""
    return _MONTHS_IN_WORDS.sub(lambda m: " " + " ".join(map(str, _numbers(m.group(0)))) + " ", text)


class Mandarin:
    """Yunnan question words put into Mandarin (resources/dialect.tsv) for the sentence encoder, which learned
    Mandarin: "咋个整？兑好多水？" → "怎么办？兑多少水？". Keys are replaced longest first, left to right."""

    def __init__(self, resources_dir: Path | None = None):
        self.pairs = dict(_read_pairs((resources_dir or RESOURCES) / "dialect.tsv"))
        keys = sorted(self.pairs, key=len, reverse=True)
        self._rx = re.compile("|".join(map(re.escape, keys))) if keys else None

    def __call__(self, text: str) -> str:
        return self._rx.sub(lambda m: self.pairs[m.group(0)], text) if self._rx is not None else text


class Tokenizer:
    """jieba search-mode segmentation + the domain lexicon; features are words, optionally with CJK bigrams."""

    def __init__(self, cache_dir: Path | None = None, bigrams: bool = True, resources_dir: Path | None = None):
        self.cache_dir = cache_dir
        self.bigrams = bigrams
        self._res = resources_dir or resource_path("")
        self._lock = threading.Lock()
        self._tags: dict[str, tuple[tuple[str, str], ...]] = {}

    @cached_property
    def lexicon(self) -> list[str]:
        return [line.split()[0] for line in _read_lines(self._res / "lexicon.txt")]

    @cached_property
    def lexicon_set(self) -> frozenset[str]:
        return frozenset(self.lexicon)

    @cached_property
    def names(self) -> frozenset[str]:
        """The lexicon's proper names (tag nz: cultivars, pests, diseases, agrochemicals), not its nouns and practices
        (子叶, 沙床, 截干)."""
        return frozenset(p[0] for p in (line.split() for line in _read_lines(self._res / "lexicon.txt"))
                         if len(p) >= 3 and p[2] == "nz")

    @cached_property
    def stopwords(self) -> frozenset[str]:
        return frozenset(_read_lines(self._res / "stopwords.txt"))

    @cached_property
    def synonyms(self) -> dict[str, list[str]]:
        table: dict[str, list[str]] = {}
        for line in _read_lines(self._res / "synonyms.tsv"):
            if "\t" not in line:
                continue
            word, targets = line.split("\t", 1)
            table.setdefault(word.strip(), []).extend(t.strip() for t in targets.split("|") if t.strip())
        return table

    @cached_property
    def _jieba(self):
        import jieba

        jieba.setLogLevel(logging.WARNING)
        tok = jieba.Tokenizer()
        if self.cache_dir is not None:
            self.cache_dir.mkdir(parents=True, exist_ok=True)
            tok.tmp_dir = str(self.cache_dir)
            tok.cache_file = str(self.cache_dir / "jieba.cache")
        tok.initialize()
        lexicon = self._res / "lexicon.txt"
        if lexicon.exists():
            tok.load_userdict(str(lexicon))
        return tok

    def words(self, text: str) -> list[str]:
        """Segmented words (search mode: long domain words and their parts), lower-cased, stopwords removed."""
        with self._lock:  # jieba's lazy structures are not thread-safe
            pieces = list(self._jieba.cut_for_search(arabic_months(text.lower())))
        return [w for w in (p.strip() for p in pieces) if w and _KEEP.search(w) and w not in self.stopwords]

    @cached_property
    def _tagger(self):
        import jieba.posseg

        return jieba.posseg.POSTokenizer(self._jieba)

    def tagged(self, text: str) -> list[tuple[str, str]]:
        """(word, jieba part-of-speech tag) pairs, lower-cased. The coverage test tags one question up to three times
        (unknown words, another crop, amounts: ~1.3 ms each), so the latest questions' tags are kept."""
        with self._lock:
            cached = self._tags.get(text)
            if cached is None:
                if len(self._tags) >= TAG_CACHE:
                    self._tags.clear()
                cached = self._tags[text] = tuple((p.word, p.flag) for p in self._tagger.cut(text.lower()))
        return list(cached)

    def general_frequency(self, word: str) -> int:
        """How often jieba's general-language dictionary has seen the word (0: never); the domain lexicon's own
        entries do not count."""
        return 0 if word in self.lexicon_set else self._jieba.FREQ.get(word, 0)

    def content_words(self, text: str) -> list[str]:
        """Words that can name a topic (nouns, verbs, adjectives, idioms), lower-cased, in order: no numerals,
        measure words, pronouns, adverbs, time words, particles or stopwords."""
        return [w for w, flag in self.tagged(text) if flag[:1] not in _FUNCTION_POS and w not in self.stopwords and _KEEP.search(w)]

    def tokens(self, text: str) -> list[str]:
        """The BM25 features of a passage."""
        tokens = self.words(text)
        if self.bigrams:
            tokens.extend(_cjk_bigrams(text))
        return tokens

    @cached_property
    def _mandarin(self) -> Mandarin:
        return Mandarin(self._res)

    def synonym_targets(self, text: str) -> list[str]:
        """The canonical terms of the growers' words in `text`, each key matched in the text as typed or in its Mandarin
        reading (好远 → 多远 → 距离|间距; 撒好多 → 撒多少 → 用量|每亩): the table's keys are written in Mandarin."""
        mandarin = self._mandarin(text)
        return [t for word, targets in self.synonyms.items() if word in text or word in mandarin for t in targets]

    def query_tokens(self, text: str) -> list[str]:
        """The BM25 features of a question, with the canonical terms of growers' words appended."""
        extra = [token for target in self.synonym_targets(text) for token in self.tokens(target)]
        return self.tokens(text) + extra

    def expand(self, text: str) -> str:
        """The question with canonical terms for growers' words appended (for the dense channel and reranker)."""
        extra = [t for t in self.synonym_targets(text) if t not in text]
        return text + (" " + " ".join(dict.fromkeys(extra)) if extra else "")

    def entities(self, text: str) -> list[str]:
        """Domain terms from the lexicon that occur in the text, longest first, no term inside another found one."""
        found = sorted({t for t in self.lexicon if len(t) > 1 and t in text}, key=lambda t: (-len(t), text.index(t), t))
        kept: list[str] = []
        for term in found:
            if not any(term in longer for longer in kept):
                kept.append(term)
        return kept


def _cjk_bigrams(text: str) -> list[str]:
    out: list[str] = []
    for run in re.findall(r"[\u4e00-\u9fff]+", text):
        out.extend(run[i : i + 2] for i in range(len(run) - 1))
    return out


def has_cjk(text: str) -> bool:
    return bool(_CJK.search(text))
