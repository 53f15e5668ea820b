"""Phone-keyboard typos put right against the knowledge base's own words.

Growers type with a pinyin keyboard, which offers every character of a syllable: 绣病 for 锈病, 节顶 for 截顶, 续水池
for 蓄水池, 香跟草 for 香根草. Such a word is in no passage, so retrieval misses what it names and the coverage test
may take it for a topic the knowledge base lacks. A run of the question that the knowledge base never contains, read
the same (tones too; three characters or more, without tones: 壮果废) as one of its words but for one character, is
that word: learned from the build's own
vocabulary (the domain lexicon's terms it uses, and its passages' words that general Chinese lacks: 截顶, 炼苗), not
from a list of typos. Only a run that stands as whole words of the question and that general Chinese lacks too is
read as a typo: 今年 is no slip for 近年, nor 花开 for 化开.
"""
from __future__ import annotations

import itertools
from collections import Counter
from typing import TYPE_CHECKING, Iterable, NamedTuple

if TYPE_CHECKING:
    from .lexical import Tokenizer


MIN_LEN, MAX_LEN = 2, 5  # the words looked for: a one-character typo of a two- to five-character word (磷酸二氢钾)
MIN_WORD_FREQ = 10  # in jieba's general dictionary: a real word, not a fragment of a cut around a slip
READ_CACHE = 256  # texts whose reading is remembered (Homophones.correct)
LONG_RUN = 3  # a run this long is matched without tones (see Homophones.__init__)
MIN_COUNT = 2  # a word of the passages counts as vocabulary from this many passages (one may be an OCR slip)
_TOPICAL = ("n", "nz", "vn", "v", "nr", "ns")  # a word of the passages that names a thing or a practice
# Grammar, not topic: a typo is a content word's (的/得/地 and 在/再 are grammar's own confusions, never a term's).
_FUNCTION = set("的得地了着过是在再有和与及或就都也还又很太吗嘛么呢吧啊哦呀个这那哪啥咋怎不没要会能可把被给让从向对")


def _hanzi(text: str) -> bool:
    return all("\u4e00" <= ch <= "\u9fff" for ch in text)


class Correction(NamedTuple):
    typed: str  # what the question says (绣病)
    meant: str  # the knowledge base's word (锈病)


class Homophones:
    """The build's vocabulary keyed by its pinyin (tones too; without them for LONG_RUN characters or more); `correct`
    puts a question's one-character slips right."""

    def __init__(self, vocabulary: Iterable[str], corpus_text: str, corpus_words: Iterable[str] = (),
                 long_vocabulary: Iterable[str] = ()):
        from pypinyin import Style, lazy_pinyin, pinyin

        self._pinyin, self._lazy, self._style, self._letters = pinyin, lazy_pinyin, Style.TONE3, Style.NORMAL
        self._read: dict[tuple[str, int], tuple[str, tuple[Correction, ...]]] = {}  # recent texts (a history's turns)
        self._corpus = corpus_text
        self._words = frozenset(corpus_words)  # the passages' words as cut: 挖定 (of 挖定植穴) is a piece, no word
        self._by_sound: dict[tuple[str, ...], list[str]] = {}
        for word in dict.fromkeys(vocabulary):
            if MIN_LEN <= len(word) <= MAX_LEN and _hanzi(word):
                self._by_sound.setdefault(tuple(lazy_pinyin(word, style=self._style)), []).append(word)
        # A run of LONG_RUN characters or more is matched without tones, and against the passages' everyday words
        # too (气象站): a keyboard offers 废 for fei whatever the tone (壮果废), and two matching characters out of
        # three leave little to chance; a two-character run ("有鸡" of 养得有鸡, 才种) keeps tones and domain words.
        self._by_letters: dict[tuple[str, ...], list[str]] = {}
        for word in dict.fromkeys([*vocabulary, *long_vocabulary]):
            if LONG_RUN <= len(word) <= MAX_LEN and _hanzi(word):
                self._by_letters.setdefault(tuple(lazy_pinyin(word, style=self._letters)), []).append(word)

    @classmethod
    def of_passages(cls, texts: Iterable[str], tokenizer: Tokenizer) -> "Homophones":
        """From the passages' texts: the lexicon's terms they use, and their words (in MIN_COUNT passages at least)
        that jieba's general dictionary lacks and its tagger reads as one noun or verb."""
        texts = list(texts)
        corpus = "\n".join(texts)
        counts = Counter(word for text in texts for word in set(tokenizer.words(text)))
        topical = [w for w, n in counts.items() if n >= MIN_COUNT
                   and len(tagged := tokenizer.tagged(w)) == 1 and tagged[0][1] in _TOPICAL]  # 截顶; not 越重 (越/重)
        vocabulary = [t for t in tokenizer.lexicon if t in corpus] + [
            w for w in topical if tokenizer.general_frequency(w) == 0]
        return cls(vocabulary, corpus, counts, long_vocabulary=topical)

    def correct(self, text: str, tokenizer: Tokenizer) -> tuple[str, tuple[Correction, ...]]:
        """The text with each run of whole words that the knowledge base and general Chinese lack replaced by the one
        word of the vocabulary read alike, and what was replaced. A conversation's earlier questions are read again
        with every new one (`Engine.search`): the last READ_CACHE texts are remembered."""
        key = (text, id(tokenizer))
        if (read := self._read.get(key)) is None:
            read = self._read[key] = self._correct(text, tokenizer)
            if len(self._read) > READ_CACHE:
                self._read.pop(next(iter(self._read)))
        return read

    def _correct(self, text: str, tokenizer: Tokenizer) -> tuple[str, tuple[Correction, ...]]:
        # where a run may start and end: between the tagger's words, and inside a "word" that is none, jieba's cut
        # around the slip itself (个续/水池 for 个蓄水池); never inside a real word (今年, 土样 of 送土样)
        starts, ends, at = set(), set(), 0
        for word, _ in tokenizer.tagged(text):
            inner = range(at, at + len(word) + 1) if self._no_word(word, tokenizer) else (at, at + len(word))
            starts.update(inner)
            ends.update(inner)
            at += len(word)
        if at != len(text):  # the tagger lower-cases; any other change of length and no run is trusted
            return text, ()
        out, corrections, i = [], [], 0
        while i < len(text):
            found = None
            if i in starts:
                for n in range(MAX_LEN, MIN_LEN - 1, -1):
                    run = text[i:i + n]
                    if (len(run) == n and i + n in ends and _hanzi(run)
                            and tokenizer.general_frequency(run) == 0):
                        found = self._meant(run)
                        if found and run not in self._corpus:
                            break
                        found = None
            if found:
                out.append(found)
                corrections.append(Correction(text[i:i + len(found)], found))
                i += len(found)
            else:
                out.append(text[i])
                i += 1
        return "".join(out), tuple(corrections)

    def _no_word(self, word: str, tokenizer: Tokenizer) -> bool:
        """A tagger's "word" that is none: rare in general Chinese, no lexicon term, and no word of the passages (the
        question's 挖定/值穴 cut around 定值穴 is in the text of 挖定植穴, but no passage has it as a word)."""
        return (len(word) > 1 and tokenizer.general_frequency(word) < MIN_WORD_FREQ and word not in tokenizer.lexicon_set
                and word not in (self._words or self._corpus))

    def _meant(self, run: str) -> str | None:
        style, by_sound = (self._letters, self._by_letters) if len(run) >= LONG_RUN else (self._style, self._by_sound)
        readings = [tuple(dict.fromkeys(self._pinyin(ch, style=style, heteronym=True)[0])) for ch in run]
        typed = self._lazy(run, style=style)  # what the keyboard was given: the slip's own common reading (种 is
        #                                       zhong, not the surname's chong: 哪种枝 is no slip for 虫枝)
        candidates = {w for sound in itertools.islice(itertools.product(*readings), 64)
                      for w in by_sound.get(sound, ())
                      if sum(a != b for a, b in zip(w, run)) == 1
                      and all(a == b or sound[k] == typed[k] for k, (a, b) in enumerate(zip(w, run)))
                      and not any(a != b and (a in _FUNCTION or b in _FUNCTION) for a, b in zip(w, run))}
        return next(iter(candidates)) if len(candidates) == 1 else None
