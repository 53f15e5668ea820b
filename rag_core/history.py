"""History-aware query rewriting (HAR) and in-prompt history injection (IHI), as pure functions over turns.

HAR rewrites only what cannot stand alone. A question that points back (它, 这个病, 那…呢) or names no topic of its
own (拿啥消？兑多浓？) is a follow-up: it gets the topic terms of the user's previous question. A question that names
its own topic is a new question, even after a long exchange on another one, and is searched exactly as asked. How
much a word names a topic comes from the knowledge base itself (`TermStats`): a word in a few passages does, a word
in most of them ("咖啡") does not.
"""
from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Callable, Literal, Sequence

from .citations import CANONICAL
from .generate import EXTRACTIVE_HEADER, is_not_covered
from .lexical import Tokenizer
from .records import Turn
from .termstats import TermStats

log = logging.getLogger(__name__)

# Words that point back at the conversation: pronouns, demonstratives with a head, "the same" (同样, 也是一样),
# "what about …".
_BACK_REFERENCE = re.compile(
    r"它|这个|那个|这种|那种|这些|那些|这样|那样|这么做|这病|这虫|这药|这肥|该病|该虫|该药|此病|此虫|此药"
    r"|上面|刚才|前面说|你说的|同样|[也还]是?一样|还有呢|其他的呢|别的呢|然后呢"
)
# Openings that lean on the previous turn when the question has little of its own ("那遮多少合适？"), conditions
# that continue it ("给苗子打的话，…"), and an action named without its object, which is the last turn's ("撒了以后…",
# "修好后…": zero anaphora), or the step just done (挖好塘以后…, 移进袋子以后…: what comes next).
_DEMONSTRATIVE = re.compile(r"它|这个|那个|这种|那种|这些|那些|这样|那样")
_LEANING_OPENING = re.compile(r"^(?:那|那么|还|再|要是|如果|假如|可是|但是|不过)|^.{1,8}的话[，,]"
                              r"|^[\u4e00-\u9fff]{1,3}(?:了|好|完)后|^[\u4e00-\u9fff]{2,6}(?:以后|之后)")
# Openings that announce another question ("对了，…", "还有，…", "另外…": by the way): a question so opened that names
# its own topic is a new one, though 还 alone leans back ("还要打几次？").
_NEW_TOPIC_OPENING = re.compile(r"^(?:对了|还有个?事|还有一?个问题|还有[，,、]|另外|顺便问一?[下问]|换个问题|再问一?个"
                                r"|问个?别的|问一?个事|问一?下别的)")
# What to do after a step (发酵好了以后呢, 热起来以后接下来要咋个弄, 下一步咋个整): the next step of the process the
# conversation is in.
_NEXT_STEP = re.compile(r"(?<=[\u4e00-\u9fff])(?:以后|之后|[了好完]后|过后)[^，,。？?\s]{0,10}?"
                        r"(?:呢|咋|怎|整|做|搞|弄|管|要|该|还|再|哪样|啥|什么|多久|好久|几|多少|好多)"
                        r"|下一步|接下来|然后呢|然后(?:咋|怎|要|该|再)|再(?:咋个?|怎么)(?:整|弄|搞|做|办)")


def asks_next_step(question: str) -> bool:
    """Whether the question asks what to do after a step: the next step of a process."""
    return bool(_NEXT_STEP.search(question))


# "…呢？" asks "and what about …", relative to what was said before, at the end or before a second clause.
_WHAT_ABOUT = re.compile(r"呢[？?！!。\s]*$|呢[？?]")
_LEADING_DEMONSTRATIVE = re.compile(r"^(?:那么|那|这样的话|这样)[，,\s]*")

OWN_TOPIC = 2.0  # topic strength at which a question stands alone
CLAUSE_WORDS = 4  # a question saying this many dictionary words is no ellipsis, even in words the KB lacks
MAX_CARRIED = 2  # topic terms carried into a follow-up from each of the user's turns (4 carried more noise: 叶子, 打伤, 长大)
REPLY_CARRIED = 2  # … and from the opening of the reply, only when the user's turns name no topic
CHAIN_TURNS = 2  # a follow-up of a follow-up also carries the topic of up to this many earlier user questions
GENERAL_FREQ = 2000  # a word this common in general Chinese (时候, 出来, 提前: jieba's dictionary) is not a topic
REPLY_CHARS = 120  # the opening of the reply that the follow-up continues
CARRY_SHARE = 0.15  # a noun in more passages than this is too general to carry a topic
ENTITY_SHARE = 0.3  # a domain term in more passages than this (小粒咖啡) is the domain, not a topic
DOMAIN_SHARE = 0.5  # a word in most passages (咖啡) is the domain itself: the subject a follow-up leaves out

Kind = Literal["new", "followup", "ambiguous"]


@dataclass(frozen=True)
class QuestionKind:
    kind: Kind
    strength: float  # how much topic the question names by itself
    reason: str


def _content_words(text: str, tokenizer: Tokenizer) -> list[str]:
    words = [w for w in tokenizer.words(text) if len(w) >= 2 and not w.isascii()]
    return [w for w in dict.fromkeys(words) if not any(w != o and w in o for o in words)]


def _clause_words(question: str, tokenizer: Tokenizer) -> list[str]:
    """The question's content words that jieba's dictionary knows, whether or not the knowledge base uses them."""
    return [w for w in dict.fromkeys(tokenizer.content_words(question)) if len(w) >= 2 and tokenizer.general_frequency(w) > 0]


def _names_topic(term: str, stats: TermStats | None) -> bool:
    """Whether a domain term names a topic: it is in some passages, not in most (without statistics: yes)."""
    return stats is None or 0.0 < stats.share(term) <= ENTITY_SHARE


def topic_strength(question: str, tokenizer: Tokenizer, stats: TermStats | None, grammar: bool = False) -> float:
    """Domain terms count 2 and words specific to a few passages 1; words in most passages, or absent from the
    knowledge base, name no topic it can search for, nor do words of grammar: 不是 cut out of 是不是, 还要, 最多 (a
    conjunction, an adverb) are specific to a few passages of the KB's written style, but only content words (nouns,
    verbs, adjectives, or words within them) count. With `grammar`, they count too: how much of a question the KB
    knows at all, as the refusal of an unknown word weighs it (`relevance.unknown_focus`: without them, 32 answerable
    questions on growers' words were refused, 荒地, 后头, 礼拜)."""
    joined = [t for t in _joined_terms(question, tokenizer, stats) if t not in tokenizer.lexicon_set]
    entities = set(tokenizer.entities(question)) | set(joined)
    said = () if grammar else tokenizer.content_words(question)  # the words that may name a topic
    strength = 0.0
    for word in dict.fromkeys(_content_words(question, tokenizer) + joined):
        if word in entities:
            strength += 2.0 if _names_topic(word, stats) else 0.0
        elif stats is not None and stats.specific(word) and (grammar or any(word in w for w in said)):
            strength += 1.0
    return strength


_NOUN = ("n", "nz", "vn", "ns")


def _joined_terms(question: str, tokenizer: Tokenizer, stats: TermStats | None) -> list[str]:
    """A name jieba cut in two that the knowledge base writes whole (防雹 + 网 → 防雹网): two nouns side by side, the
    first of two characters or more, whose join the KB uses in few passages, is a domain term like the lexicon's."""
    if stats is None:
        return []
    tagged = tokenizer.tagged(question)
    return [a + b for (a, fa), (b, fb) in zip(tagged, tagged[1:])
            if fa in _NOUN and fb in _NOUN and len(a) >= 2 and stats.specific(a + b)]


def classify(question: str, tokenizer: Tokenizer, stats: TermStats | None = None) -> QuestionKind:
    """A follow-up (points back, or names too little to search for), a new question (names its own topic), or
    ambiguous: it leans on the previous turn ("那…", "…呢", "要是…") yet names a topic of its own, as both a
    follow-up ("那苗圃里的小苗几月份容易得？") and a new question opened the way people talk ("那咖啡锈病怎么防治？") do."""
    q = question.strip()
    strength = topic_strength(q, tokenizer, stats)
    back = _pointer_back(q, tokenizer)
    # a demonstrative after clauses that name their own topic points to them (…新的咖啡价值评估体系，那个是咋个打分的？;
    # not 有没得它, whose own clause is what it is in);
    # 也是一样, 刚才 and the like compare with the turn before wherever they stand
    before = re.sub(r"[^，,。；;？?！!]*$", "", q[:back.start()]) if back else ""  # the clauses before its own
    if back and not before and _resolved_within(q, back, tokenizer):
        before = re.sub(r"[^，,。；;？?！!\s]*$", "", q[:back.start()])  # … typed with spaces for commas
    # a question that says it is another (问个别的，…; 对了，…) and says two words of its own is one, unless it points
    # back: 它, 刚才, a bare 那个 (对了，那个药要打几次？); a demonstrative after 的 is the thing the words before it
    # describe (对了，防天牛刷树干的那个白灰浆咋个配). Next to nothing said (对了，要打几次？ 对了，用量呢？) continues.
    described = back and back.group(0) != "它" and _DEMONSTRATIVE.fullmatch(back.group(0)) and q[:back.start()].endswith("的")
    if opens_new_topic(q) and (strength >= OWN_TOPIC or len(_clause_words(_NEW_TOPIC_OPENING.sub("", q), tokenizer)) >= 2) \
            and (not back or described):
        return QuestionKind("new", strength, "says it is another question and names something of its own")
    if back and not (_DEMONSTRATIVE.fullmatch(back.group(0)) and topic_strength(before, tokenizer, stats) >= OWN_TOPIC):
        return QuestionKind("followup", strength, "points back")
    if strength < OWN_TOPIC:
        # a follow-up leaves the crop out: one that names it is put whole (昨晚上刮大风，好多咖啡树吹歪了，咋个扶), unless
        # it asks a process's next step (砍稀了以后咖啡要咋个管)
        if names_the_domain(q, tokenizer, stats) and not asks_next_step(q):
            return QuestionKind("new", strength, "names the crop itself, as a question of its own does")
        if len(_clause_words(q, tokenizer)) >= CLAUSE_WORDS:  # "沟边那块地一年到头雾气散不开，闷得很，种咖啡要注意啥？"
            return QuestionKind("ambiguous", strength, "names little the knowledge base knows, but in a clause of its own")
        return QuestionKind("followup", strength, "names too little of its own")
    if opens_new_topic(q):
        return QuestionKind("new", strength, "opens another question and names its own topic")
    if (_WHAT_ABOUT.search(q) or _LEANING_OPENING.search(q)) and strength < 2 * OWN_TOPIC:
        if names_the_domain(q, tokenizer, stats):
            return QuestionKind("new", strength, "leans on the previous turn but names its topic and the crop itself")
        return QuestionKind("ambiguous", strength, "leans on the previous turn but names a topic")
    return QuestionKind("new", strength, "names its own topic")


def names_the_domain(question: str, tokenizer: Tokenizer, stats: TermStats | None) -> bool:
    """Whether the question names the domain itself (咖啡: a word in most passages), not as part of a topic's name
    (咖啡锈病). Within a conversation about coffee a follow-up leaves the crop out ("那要打几次？", "那老树呢？"); a
    question that says it again ("那12月份地干了，给咖啡灌一次大水行不行？") is put whole, as a new one is."""
    if stats is None:
        return False
    topics = [e for e in tokenizer.entities(question) if _names_topic(e, stats)]
    return any(len(w) >= 2 and stats.share(w) > DOMAIN_SHARE and not any(w != t and w in t for t in topics)
               for w in tokenizer.words(question))  # a word, not a character every passage has (不, 的)


def names_little_of_its_own(question: str, tokenizer: Tokenizer, stats: TermStats | None) -> bool:
    """No domain term (a lexicon term specific to some passages: 锈病, 石灰), and fewer than two words that are
    specific both in the knowledge base and in general Chinese: "泡过头了会是哪样样子？" (样子 is everyday Chinese) or
    "找到洞了，往里头咋个打药？" may continue the conversation in words of their own, while "湿法加工发酵要多长时间？"
    (湿法, 发酵) names its topic. Nor does a question saying CLAUSE_WORDS dictionary words of its own, as `classify`
    reads it ("想自己看看地块排水好不好 有没有简单办法": no ellipsis, whatever few of them the KB holds)."""
    q = question.strip()
    if stats is None or any(_names_topic(e, stats) for e in tokenizer.entities(q)):
        return False
    rare = [w for w in _content_words(q, tokenizer) if stats.specific(w) and tokenizer.general_frequency(w) < GENERAL_FREQ]
    return len(rare) < OWN_TOPIC and len(_clause_words(q, tokenizer)) < CLAUSE_WORDS


def opens_new_topic(question: str) -> bool:
    """The question says it is another one (对了，…; 另外…; 问个别的，…)."""
    return bool(new_topic_opening(question))


def new_topic_opening(question: str) -> str:
    """The words that say the question is another one (对了, 还有个事, 问个别的), or ""."""
    m = _NEW_TOPIC_OPENING.search(question.strip())
    return m.group(0) if m else ""


def leans_back(question: str, tokenizer: Tokenizer) -> bool:
    """Whether the question itself signals that it continues the conversation (它, 那…, …呢), beyond naming little."""
    q = question.strip()
    return bool(_pointer_back(q, tokenizer) or _LEANING_OPENING.search(q) or _WHAT_ABOUT.search(q))


# a measure just before a demonstrative (我们1600多米这种地方, 两三年那种小树): what it describes, not a pointer back
_MEASURE_BEFORE = re.compile(r"(?:\d|[一二两三四五六七八九十百千])\s*(?:多|来)?\s*(?:米|m|亩|棵|株|年|岁|公斤|斤|度|厘米|公分|cm)$")


def _pointer_back(q: str, tokenizer: Tokenizer) -> re.Match | None:
    """The first word of `q` that points back at the conversation, or None. A demonstrative right after a name is
    that name's (卡蒂姆这种矮的, 铁皮卡那种老树: such as 卡蒂姆), and one right after a measure describes it (我们1600多米
    这种地方: places like ours): neither points back."""
    entities = tokenizer.entities(q)
    return next((m for m in _BACK_REFERENCE.finditer(q) if not (_DEMONSTRATIVE.fullmatch(m.group(0)) and (
        any(q[:m.start()].endswith(e) for e in entities) or _MEASURE_BEFORE.search(q[:m.start()])
        or _after_place(q[:m.start()], tokenizer)))), None)


def _after_place(before: str, tokenizer: Tokenizer) -> bool:
    """Whether the words before a demonstrative end with a place (苗圃里, 地里, 枝条上): 苗圃里那些小苗 are the seedlings
    found there, described, not the conversation's."""
    flags = [flag for _, flag in tokenizer.tagged(before[-8:])] if before else []
    return flags[-1:] == ["s"] or (len(flags) > 1 and flags[-1] == "f" and flags[-2].startswith("n"))


_SPACED_CLAUSE = re.compile(r"(?<=[\u4e00-\u9fff\d%％])\s+(?=[\u4e00-\u9fff])")


def _resolved_within(q: str, back: re.Match, tokenizer: Tokenizer) -> bool:
    """Whether a demonstrative in a question typed with spaces for commas names what an earlier clause of the question
    said: its head is a word said before it (拿去杯测打了86分 这个分算哪个档次), or it follows the words it sums up
    (开花采收这些, 看影子那个办法, 一千多米的那些), or, bare, a figure it states (荫蔽度30%到40% 这个到底是啥意思). 它, and a
    head the question has not said (也照这个浓度喷), point back."""
    word = back.group(0)
    if word == "它" or not _DEMONSTRATIVE.fullmatch(word) or not _SPACED_CLAUSE.search(q[:back.end()]):
        return False
    head = next(iter(tokenizer.words(q[back.end():])), "")  # 分 of 这个分算: jieba may join it to the next word
    if head and any(w in (head, head[:1]) for w in tokenizer.words(q[:back.start()])):
        return True
    tagged = [(w, f) for w, f in tokenizer.tagged(q[:back.start()]) if w.strip()]
    last, flag = tagged[-1] if tagged else ("", "")
    # a figure the question states (荫蔽度30%到40% 这个到底是啥意思): the bare demonstrative sums it up
    after = tokenizer.tagged(q[back.end():])[:1]
    figure = (flag == "m" or last in ("%", "％")) and not any(f in _NOUN for _, f in after)
    return last == "的" or flag in _NOUN or figure or (flag == "v" and word in ("这些", "那些"))  # 开花采收这些: those


def needs_rewrite(question: str, tokenizer: Tokenizer, stats: TermStats | None = None) -> bool:
    return classify(question, tokenizer, stats).kind != "new"


def topic_terms(text: str, tokenizer: Tokenizer, stats: TermStats | None, limit: int) -> list[str]:
    """The terms of a turn worth carrying: domain terms first, then nouns specific to a few passages, rarest
    first. Never a word most passages use, nor one the knowledge base does not know."""
    terms = list(tokenizer.entities(text))
    places = {w for w, flag in tokenizer.tagged(text) if flag == "s"}  # 地里, 园子里: where, not what about
    nouns = [w for w in dict.fromkeys(tokenizer.content_words(text))
             if len(w) >= 2 and not w.isascii() and tokenizer.general_frequency(w) < GENERAL_FREQ and w not in places]
    for word in sorted(nouns, key=lambda w: (stats.share(w) if stats else 1.0, text.find(w))):
        if word not in terms and not any(word in t for t in terms) and (stats is None or stats.share(word) <= CARRY_SHARE):
            terms.append(word)
    if stats is not None:
        terms = [t for t in terms if stats.known(t) and stats.share(t) <= 0.5]
    return terms[:limit]


def rewrite_query(
    question: str,
    history: Sequence[Turn],
    tokenizer: Tokenizer,
    turns: int = 2,
    llm_rewrite: Callable[[str, Sequence[Turn]], str | None] | None = None,
    stats: TermStats | None = None,
) -> str:
    """q′ = f(q, last `turns` turns): a follow-up, preceded by the topic terms of the user's recent questions and
    then of the opening of the reply; a new question unchanged. An LLM rewrite, when given and it answers
    sensibly, takes precedence (for follow-ups only)."""
    recent = list(history)[-turns:] if turns > 0 else []
    if not recent:
        return question
    kind = classify(question, tokenizer, stats)
    if kind.kind == "new":
        return question
    if llm_rewrite is not None:
        try:
            rewritten = llm_rewrite(question, recent)
        except Exception as exc:  # the rule-based rewrite below always works
            log.warning("LLM query rewrite failed, using the rule-based one: %s", exc)
            rewritten = None
        if rewritten and 2 <= len(rewritten.strip()) <= 200:
            return rewritten.strip()
    x, then = what_about(question)  # the previous question is read again only for a 那X呢
    again = ask_again_of(x, _previous_question(history, tokenizer, turns, stats), tokenizer) if x else ""
    return f"{again} {then}".strip() if again else carry_topic(question, history, tokenizer, turns, stats)


def _previous_question(history: Sequence[Turn], tokenizer: Tokenizer, turns: int, stats: TermStats | None) -> str:
    """The user's previous question as it was understood: rewritten when it was itself a follow-up."""
    answered = _answered(history)
    at = next((i for i in range(len(answered) - 1, -1, -1) if answered[i].role == "user"), None)
    if at is None:
        return ""
    return rewrite_query(answered[at].content, answered[:at], tokenizer, turns, stats=stats)


# "那X呢" asks the previous question again of X, in place of what X stands beside there: a month for a month (那二月呢
# after 一月份要做些啥子活路), a season, a year of growth, an altitude, a stage of tree, a processing method or form of
# the crop, a name for a name (那炭疽病呢 after 锈病几月份最凶). These are the kinds such a question swaps; the previous
# question's topic terms carried in front of X would ask of the old topic instead. A clause after it asks on of the
# same question (那旱季呢？也要查得这么勤么, 那铁皮卡呢？产量跟卡蒂姆比得不得).
_X = r"[，,\s]*(?P<x>[^，,。；;？?！!]{1,16}?)的?(?:呢|咋样|怎么样)"
_ONLY_X = re.compile(r"^(?:那么|那|还有)?" + _X + r"[？?。！!…\s]*$")
_X_THEN = re.compile(r"^(?:那么|那)" + _X + r"[？?。！!，,\s]+(?P<then>\S.*)$")
_ASKS_ITSELF = re.compile(r"咋|怎么|如何|几|多少|好多|啥|什么|哪|要不要|能不能|会不会|可不可以|行不行|要是|如果|假如"
                          r"|以后|之后|接下来|然后")
_SWAPPED_KINDS = tuple(re.compile(p) for p in (
    r"(?:[一二三四五六七八九十]{1,3}|\d{1,2})月份?(?:[上中下]旬)?",  # a month
    r"旱季|干季|雨季|冬天|冬季|春天|春季|夏天|夏季|秋天|秋季",  # a season
    r"第[一二三四五六七八九十\d]+年|头[一两]?年|当年|[一两二三四五六\d]{1,3}年(?:生|的)",  # a year of growth
    r"(?:海拔)?\s*\d{3,4}\s*(?:米|m)(?:以上|以下|左右|上下)?|高山地?|河谷|低海拔|高海拔",  # an altitude
    r"小树|大树|幼树|老树|成龄树|结果树|幼龄树|小苗|幼苗|袋苗|成龄园|幼龄园|老园",  # a stage of tree
    r"半水洗|水洗|日晒|蜜处理|湿法|干法",  # a processing method
    r"鲜果|带壳豆|生豆|整果|果干",  # a form of the crop
))


def what_about(question: str) -> tuple[str, str]:
    """The X of a "那X呢" whose X asks nothing itself, and the clause after it ("" for a bare 那X呢); ("", "") for any
    other question (要是…呢 a condition, 发酵完了接下来呢 the next step)."""
    q = question.strip()
    m = _ONLY_X.match(q) or _X_THEN.match(q)
    if m is None or _ASKS_ITSELF.search(m.group("x")):
        return "", ""
    return m.group("x").strip(), (m.groupdict().get("then") or "").strip()


def ask_again_of(x: str, previous: str, tokenizer: Tokenizer) -> str:
    """The previous question asked of `x` (what_about's X): X, then the previous question without what X replaces
    (那炭疽病呢 after 咖啡锈病一般几月份最凶 → 炭疽病 一般几月份最凶); "" when X replaces nothing there (石灰用量呢 asks an
    aspect of the same topic: the topic is carried as for any follow-up)."""
    if not previous:
        return ""
    rest = previous
    for kind in _SWAPPED_KINDS:
        if kind.search(x):
            rest = kind.sub(" ", rest)
    names = set(tokenizer.entities(x)) & tokenizer.names
    if names:
        for name in sorted(set(tokenizer.entities(previous)) & tokenizer.names - names, key=len, reverse=True):
            rest = rest.replace(name, " ")
    if rest == previous:
        return ""
    return f"{x} {' '.join(rest.split())}"


def carry_topic(question: str, history: Sequence[Turn], tokenizer: Tokenizer, turns: int = 2,
                stats: TermStats | None = None) -> str:
    """The question preceded by the topic terms of the user's recent questions (then of the opening of the reply),
    whatever its kind: `rewrite_query` for a follow-up, and the contextual reading of a new question that continues
    the conversation (`Engine.search`)."""
    history = _answered(history)  # a question the bot refused found no topic in the knowledge base to continue
    recent = list(history)[-turns:] if turns > 0 else []
    present = set(_content_words(question, tokenizer)) | set(tokenizer.entities(question))
    carried: list[str] = []

    def carry(text: str, limit: int) -> None:
        for term in topic_terms(text, tokenizer, stats, limit=MAX_CARRIED):
            if len(carried) < limit and term not in present and term not in question and term not in carried:
                carried.append(term)

    # The user's own words carry the topic (the latest question first, then, while that one was itself a follow-up,
    # the question it followed: 咖啡锈病怎么防治 → 那用什么药 → 要打几次). The reply's words only when the user's
    # name none: what the reply said is not what the user asks next ("那用什么药" after cultural control).
    # A user who only described what they see (叶子背后一层橙黄色的粉) and asked what it is, or only said it, names no
    # pest, disease or cultivar (a lexicon name: 子叶 and 沙床 are lexicon nouns, not names); the reply that named it
    # (咖啡锈病, 旋皮天牛) says what the conversation is now about, and its domain terms come first. Not after "咋办": that reply says what to do, and its terms are not a name for the user's words.
    # Asked what it is (是啥病？是哪样虫？), the reply's name is the topic now and the description only what led to it:
    # 这个虫一般哪几个月最凶 after 叶背趴着绿色扁扁的小虫，是哪样虫 searches 咖啡绿蚧's season, not the description
    # passage again. So too when the user only described it and the reply's opening says what it is (听起来是咖啡锈病):
    # the name alone. Only told (天气预报说后天寒潮过了就转晴), the user's words still say what it is about.
    # The reply's diagnosis leads even where the description had a cultivar or a symptom word (卡蒂姆, 水渍状); a
    # disorder the lexicon does not list as a name (霜冻, 缺锌) leads the description's words rather than replacing them.
    for text in _topic_chain(list(history), recent, tokenizer, stats):
        carry(text, MAX_CARRIED)
    reply = _last(recent, "assistant")[:REPLY_CHARS]
    if not carried:
        carry(reply, REPLY_CARRIED)
    elif _asks_what_it_is(_last(recent, "user")) or _DENIAL.match(reply):
        named = [e for e in tokenizer.entities(reply) if e not in present and e not in question and e not in carried
                 and _names_topic(e, stats)]
        diagnosis = _diagnosis(reply, named)
        if diagnosis in tokenizer.names:
            carried[:] = [diagnosis]
        elif diagnosis:
            carried[:] = [diagnosis] + carried[: MAX_CARRIED - 1]
        elif any(t in tokenizer.names for t in carried):
            pass
        elif _WHAT_IS_IT.search(_last(recent, "user")):
            carried[:] = named[:REPLY_CARRIED] or carried
        else:
            carried[:] = named[:REPLY_CARRIED] + carried
    if not carried:
        return question
    question = _LEADING_DEMONSTRATIVE.sub("", question) or question  # "那要打什么药" → "要打什么药"
    return f"{' '.join(carried)} {question}".strip()


_WHAT_IS_IT = re.compile(r"是(?:啥|什么|哪样|哪种)|(?:啥|什么|哪样)(?:病|虫|毛病|原因|东西)|咋回事|怎么回事|为啥|为什么")
# 几 and 好多 ask only with other signs (那几棵, 蚂蚁好多 describe): a question word or a question mark
_ASKS = re.compile(r"[？?]|吗|呢|咋|怎么|如何|啥|什么|哪样|多少|能不能|要不要|得不得")


# the reply's opening clause says what the user described is: 这是咖啡褐眼斑病, 多半是旋皮天牛, 听起来是咖啡锈病
_OPENING_CLAUSE = re.compile(r"^[^，,。；;！!？?]*")
# … after the user's guess denied (不是锈病，这是咖啡褐眼斑病): the clause after the denial says what it is; an extractive
# answer of several passages numbers them (1. 不是锈病，是…)
_DENIAL = re.compile(r"^(?:[^，,。；;！!？?\n]*\n)?\s*(?:\d+\.\s*)?(?:这|这个|它)?(?:并|应该|多半|可能)?(?:不是|不像)[^，,。；;！!？?]*[，,。；;]\s*")


def _diagnosis(reply: str, named: Sequence[str]) -> str:
    """What the reply's opening clause says the user's description is (the first of `named` after its 是 or 像), or
    ""."""
    opening = _OPENING_CLAUSE.match(_DENIAL.sub("", reply, count=1)).group(0)
    at = max(opening.find("是"), opening.find("像"))
    return next((e for e in named if at >= 0 and opening.find(e, at) > at), "")


def _answered(history: Sequence[Turn]) -> list[Turn]:
    """The history without the exchanges the bot refused (the user's question and the refusal after it)."""
    out: list[Turn] = []
    for turn in history:
        if turn.role == "assistant" and is_not_covered(turn.content):
            if out and out[-1].role == "user":
                out.pop()
            continue
        out.append(turn)
    return out


def _last(turns: Sequence[Turn], role: str) -> str:
    """The latest turn of `role` ("" when there is none)."""
    return next((t.content for t in reversed(turns) if t.role == role), "")


def _asks_what_it_is(text: str) -> bool:
    """The user asked what they describe is (是啥病？咋回事？), or only described it without asking anything."""
    return bool(_WHAT_IS_IT.search(text)) or not _ASKS.search(text)


def _topic_chain(history: list[Turn], recent: list[Turn], tokenizer: Tokenizer, stats: TermStats | None) -> list[str]:
    """The user's questions whose topic a follow-up continues, latest first: those within the last turns, and
    earlier ones while the earliest taken was itself a follow-up (at most CHAIN_TURNS more)."""
    asked = [t.content for t in recent if t.role == "user"][::-1]
    earlier = [t.content for t in history[: len(history) - len(recent)] if t.role == "user"][::-1]
    for text in earlier[:CHAIN_TURNS]:
        if not asked or classify(asked[-1], tokenizer, stats).kind == "new":
            break
        asked.append(text)
    return asked


# A pointer past the last exchange to an earlier one (回到头先那个肥, 头一个说的那个, 前头说那个打顶, 头先说的干季; not
# 头一个月, the first month): the question continues that exchange, not the last.
_EARLIER_EXCHANGE = re.compile(r"回到|头先|头一个(?![月年周天星礼旱雨])|(?:前头|一开始|最开始|刚开始|开头)说")


def as_pointed(question: str, history: Sequence[Turn]) -> list[Turn]:
    """The history as of the exchange the question continues: without the last exchange when the question points past
    it to an earlier one and there is one; unchanged otherwise. Over the 16 such questions of the conversation sets
    (two exchanges each), every one asks about the first."""
    turns = list(history)
    users = [i for i, t in enumerate(turns) if t.role == "user"]
    if len(users) < 2 or not _EARLIER_EXCHANGE.search(question):
        return turns
    return turns[: users[-1]]


def conversation_text(question: str, history: Sequence[Turn], turns: int = 2) -> str:
    """A follow-up in plain words, as a sentence encoder reads it: the user's previous question, the opening of the
    reply (without citation tags or the extractive header line), then the question."""
    recent = list(history)[-turns:] if turns > 0 else []
    previous, reply = _last(recent, "user"), plain_reply(_last(recent, "assistant"))
    return " ".join(part.strip() for part in (previous, reply[:REPLY_CHARS], question) if part.strip())


def plain_reply(reply: str) -> str:
    """A reply's words without citation tags or the extractive header line."""
    return CANONICAL.sub("", reply.split("\n", 1)[1] if reply.startswith(EXTRACTIVE_HEADER) else reply)


def last_reply(history: Sequence[Turn]) -> str:
    """The latest reply, "" when there is none or the bot declined the question (a refusal stood on no passage)."""
    reply = _last(history, "assistant")
    return "" if is_not_covered(reply) else reply


def inject_history(history: Sequence[Turn], turns: int = 8, chars: int = 800) -> list[Turn]:
    """The last `turns` turns for the prompt: assistant replies clipped to their first `chars` characters, user
    turns to their last `chars` characters."""
    recent = list(history)[-turns:] if turns > 0 else []
    return [
        Turn(t.role, t.content[:chars] if t.role == "assistant" else t.content[-chars:] if chars else "")
        for t in recent
    ]
