"""answer(question, history) → Answer: HAR → retrieval → coverage check → LLM or extractive generation → citation
validation, with per-stage timings. The `Engine` holds the loaded models and follows index swaps."""
from __future__ import annotations

import logging
import math
import threading
import time
from dataclasses import dataclass, field, replace
from typing import Callable, Sequence

from .citations import backfill, cited_ids, validate_citations
from .config import Config
from .generate import (NOT_COVERED, build_messages, build_rewrite_messages, cite_sisters, extractive_answer,
                       not_covered, with_control_sections)
from .history import (as_pointed, asks_next_step, carry_topic, classify, conversation_text, inject_history, last_reply,
                      leans_back, names_little_of_its_own, opens_new_topic, plain_reply, rewrite_query)
from .homophones import Correction, Homophones
from .index.layout import Layout
from .index.store import IndexReader, open_current
from .lexical import Tokenizer
from .llm import ChatModel, LLMError
from .models import Embedder, Reranker
from .rank import conversation
from .rank.features import CorpusStats
from .rank.infer import load_stats
from .records import Answer, Chunk, Hit, Retrieval, Turn
from .relevance import amount_stated, asked_amounts, assess, states_asked_amount, unanchored_amount
from .retrieve import Channels, Retriever
from .termstats import TermStats

log = logging.getLogger(__name__)

FOLLOW_DOCS = 2  # a follow-up stays with the documents of the previous question's first FOLLOW_DOCS passages
CONTINUE_OWN_DOCS = 3  # a new question continues the conversation when its first passages meet those documents
HEDGE_ALONE = 2  # an ambiguous question ("那…" naming a topic) keeps this many of its own passages in the evidence
UNSURE_MARGIN = math.log(2)  # learned-ranker score gap under which the second passage is cited too (lead_passages)
BARE_ALONE = 1  # a follow-up only by naming little ("一月份咖啡园的水该咋个管？": no 它, 那…, …呢) keeps its best one
NEXT_STEP_AT = 4  # the passage after the reply's joins a next step's evidence at this rank (Engine._with_next_step)
NEXT_STEP_TOLD = 2  # passages a reply may have gone on past its own (Engine._told), for the next step after them
TOLD_WORDS = 2  # specific words of a passage, not of the reply's own, that say the reply told it too
SAID_AT = 3  # the passage the last reply stood on joins a follow-up's evidence at this rank, unless it is above it


@dataclass(frozen=True)
class Options:
    """Per-call switches, used by the CLI flags and the evaluation's ablations."""

    channels: Channels = Channels()
    har: bool = True
    ihi: bool = True
    llm: bool = True
    refuse: bool = True


@dataclass
class Engine:
    cfg: Config
    tokenizer: Tokenizer
    embedder: Embedder | None
    reranker: Reranker | None
    chat: ChatModel | None = None
    warnings: tuple[str, ...] = ()
    _retriever: Retriever | None = field(default=None, repr=False)
    _retired: Retriever | None = field(default=None, repr=False)
    _stats: tuple[str, TermStats] | None = field(default=None, repr=False)
    _corpus_stats: tuple[str, CorpusStats] | None = field(default=None, repr=False)
    _homophones: tuple[str, Homophones] | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def retriever(self) -> Retriever:
        """The retriever over the current build. After a swap, one caller loads the new build while everyone else
        keeps answering from the old one; a first load (nothing to serve yet) waits for it."""
        current = Layout(self.cfg.data_dir).current_id()
        serving = self._retriever
        if serving is not None and (not current or serving.index.build_id == current):
            return serving
        if not self._lock.acquire(blocking=serving is None):
            return serving  # another thread is loading the new build
        try:
            if self._retriever is serving:
                self._load()
            return self._retriever
        finally:
            self._lock.release()

    def _load(self) -> None:
        index = open_current(self.cfg.data_dir, self.cfg.retrieval.bm25_engine, self.cfg.index.chroma_url)
        retriever = Retriever(index, self.tokenizer, self.embedder, self.reranker, self.cfg.retrieval, self.warnings)
        index.warm()  # BM25 index, dense store, corpus text: built here, not in the first question after a swap
        if self._retired is not None:  # two swaps ago: no query can still be reading it
            self._retired.index.close()
        self._retired, self._retriever = self._retriever, retriever
        log.info("serving index build %s (%d chunks)", index.build_id, len(index.chunks))

    def refresh(self) -> None:
        """Load the current build now, with the vocabulary its keyboard-slip reading needs (~2 s of tagging: not in
        the first question's time); called at start-up and by the rebuilder after a swap, off the event loop."""
        _ = self.retriever
        _ = self.homophones

    @property
    def index(self) -> IndexReader:
        return self.retriever.index

    def _of_build(self, attr: str, make: Callable[[IndexReader], object]):
        """`make(index)` for the served build, made once a build and kept in `attr` as (build id, value)."""
        index = self.index
        cached = getattr(self, attr)
        if cached is None or cached[0] != index.build_id:
            cached = (index.build_id, make(index))
            setattr(self, attr, cached)
        return cached[1]

    @property
    def term_stats(self) -> TermStats:
        """How specific each word is in the served build (for HAR and the coverage test)."""
        return self._of_build("_stats", lambda index: TermStats.of_chunks(index.chunks))

    @property
    def corpus_stats(self) -> CorpusStats:
        """The served build's document frequencies of its BM25 tokens (IDF for the conversation ranker): the learned
        ranker's own copy where it runs (the conversation ranker runs only beside it), else read once a build."""
        learned = self.retriever.learned
        if learned is not None:
            return learned.featurize.stats
        return self._of_build("_corpus_stats", load_stats)

    @property
    def homophones(self) -> Homophones:
        """The served build's vocabulary by sound, for growers' pinyin-keyboard slips (绣病 → 锈病)."""
        return self._of_build("_homophones", lambda index: Homophones.of_passages(
            [f"{c.section}\n{c.text}" for c in index.chunks], self.tokenizer))

    def spelled(self, question: str) -> tuple[str, tuple[Correction, ...]]:
        """The question with its keyboard slips put right (节顶 → 截顶), and what was put right."""
        return self.homophones.correct(question, self.tokenizer)

    def _llm_rewrite(self) -> Callable[[str, Sequence[Turn]], str | None] | None:
        if self.chat is None or not self.cfg.history.har_llm:
            return None
        return lambda q, turns: self.chat.complete(build_rewrite_messages(q, turns))

    def rewrite(self, question: str, history: Sequence[Turn], options: Options = Options()) -> str:
        if not options.har:
            return question
        rewrite_llm = self._llm_rewrite() if options.llm else None
        return rewrite_query(question, history, self.tokenizer, self.cfg.history.har_turns, rewrite_llm,
                             stats=self.term_stats)

    def search(self, question: str, history: Sequence[Turn] = (), options: Options = Options()) -> Retrieval:
        result, readings = self.read(question, history, options)
        if readings is None or not self.cfg.history.har_ranker:
            return result
        model = conversation.for_ranker(result.reranker)  # trained over this passage ranker's order, or none
        if model is None:
            return result
        t = time.perf_counter()
        evidence = self._with_next_step(question, model.order(readings, self.index.position, self.tokenizer,
                                                              self.corpus_stats), readings.said, readings.reply)
        timings = {**result.timings_ms, "converse": (time.perf_counter() - t) * 1000}
        timings["total"] = sum(v for k, v in timings.items() if k != "total")
        return replace(result, evidence=evidence, timings_ms=timings)

    def read(self, question: str, history: Sequence[Turn] = (), options: Options = Options()
             ) -> tuple[Retrieval, conversation.Readings | None]:
        """The retrieval in the pipeline's own order and, for a question that continues the conversation, what its
        readings found (for the conversation ranker, which `search` applies)."""
        t = time.perf_counter()
        question, corrections = self.spelled(question)
        # the earlier questions as they were read (定值穴 → 定植穴): their topic is carried, not a fragment of the slip
        history = [replace(turn, content=self.spelled(turn.content)[0]) if turn.role == "user" else turn
                   for turn in as_pointed(question, history)]  # 回到头先那个肥: the exchange pointed at
        spell_ms = (time.perf_counter() - t) * 1000
        t = time.perf_counter()
        rewritten = self.rewrite(question, history, options)
        rewrite_ms = (time.perf_counter() - t) * 1000
        kind = classify(question, self.tokenizer, self.term_stats).kind if rewritten != question else "new"
        # a rewritten question is read by the ranker's sentence encoder with the turn it continues, in plain words
        context = conversation_text(question, history, self.cfg.history.har_turns) if kind != "new" else ""
        result = carried = self.retriever.search(question, rewritten, options.channels, context)
        readings = None
        if kind == "new" and history and options.har and not opens_new_topic(question):
            result = self._continue(result, question, history, options,
                                    always=names_little_of_its_own(question, self.tokenizer, self.term_stats))
        elif kind != "new":
            t = time.perf_counter()  # the other readings: the previous question's, the question alone, the reply's
            docs = self._previous_docs(history, options)
            alone = self.retriever.search(question, question, options.channels)
            said = self._said(question, history, options)
            result = replace(result, timings_ms={**result.timings_ms, "readings": (time.perf_counter() - t) * 1000})
            if kind == "ambiguous":
                result = self._hedge(result, alone, docs, HEDGE_ALONE, names_topic=True)
            elif not leans_back(question, self.tokenizer):
                result = self._hedge(result, alone, docs, BARE_ALONE, names_topic=False)
            else:
                result = self._follow_topic(result, docs)
            result = self._with_said(result, said)
            # a new topic after all: its own order stays; not a next step asked (热起来以后接下来要咋个弄 after the
            # compost heap's heating), which goes on with the conversation's process whatever it finds alone
            if not (kind == "ambiguous" and opens_new(docs, alone) and not asks_next_step(question)):
                reply = last_reply(history)
                readings = conversation.Readings(question, rewritten, kind, result.evidence, alone.evidence,
                                                 carried.evidence, said, frozenset(docs), self._beside(said),
                                                 said_cited=bool(cited_ids(reply)), reply=reply)
        timings = {"spell": spell_ms, "rewrite": rewrite_ms, **result.timings_ms}
        timings["total"] = sum(timings.values())
        return replace(result, timings_ms=timings, corrections=corrections), readings

    def _continue(self, result: Retrieval, question: str, history: Sequence[Turn], options: Options,
                  always: bool = False) -> Retrieval:
        """A question that names its own topic yet stays in the conversation's documents ("排水沟要挖好深？" after "雨季
        地里积了水") is also read in the conversation's context: its own passages and the contextual ones alternate,
        its own first. A question whose passages meet none of the previous question's documents is a new topic: as is.
        `always`: the question names no domain term and little else ("找到洞了，往里头咋个打药？" after 天牛; "泡过头了会
        是哪样样子？" after 发酵), so what it finds alone says little about the topic: it is read both ways all the same."""
        own_docs = {h.chunk.docid for h in result.evidence[:CONTINUE_OWN_DOCS]}
        if not always and not self._previous_docs(history, options) & own_docs:
            return result
        turns = self.cfg.history.har_turns
        rewritten = carry_topic(question, history, self.tokenizer, turns, self.term_stats)
        if rewritten == question:
            return result
        contextual = self.retriever.search(question, rewritten, options.channels,
                                           conversation_text(question, history, turns))
        alternating = [hit for pair in zip(result.evidence, contextual.evidence) for hit in pair]
        evidence = _first_of_each(len(result.evidence), alternating, result.evidence, contextual.evidence)
        timings = {**result.timings_ms, "context": sum(contextual.timings_ms.values())}
        return replace(result, evidence=evidence, timings_ms=timings)

    @staticmethod
    def _with_said(result: Retrieval, chunk: Chunk | None) -> Retrieval:
        """A follow-up often asks another detail of what the last reply stood on (那山上头1700米那块呢 after the
        harvest dates by altitude: the same table), and often something else (那要咋个处理 after what hail leads to):
        the reply's passage (`chunk`) joins the evidence at SAID_AT (its own score the passage's it displaces, so the
        margin the citations are chosen by stays the follow-up's), after the follow-up's own two best. At rank 2 it was
        cited too often where the follow-up asked something else (follow-up F1 over 325: 0.391 against 0.394)."""
        if chunk is None or len(result.evidence) < SAID_AT:
            return result
        return replace(result, evidence=_joined(result.evidence, chunk, SAID_AT, unless_within=SAID_AT))

    def _with_next_step(self, question: str, evidence: Sequence[Hit], said: Chunk | None,
                        reply: str = "") -> tuple[Hit, ...]:
        """A follow-up that asks a process's next step (发酵好了以后呢, 热起来以后接下来要咋个弄) is answered where the
        manual goes on: the passage right after the one the last reply stood on joins the evidence at NEXT_STEP_AT
        when it is not in the first five (over 153 such gold follow-ups, Hit@5 0.712 -> 0.745; the ranker above keeps
        the first places, which a next step's own words often find)."""
        after = self._neighbour(said, 1) if evidence and asks_next_step(question) else None
        # a reply that went on past its passage (发酵 12～36 h, then the hand test of its end, the next section's) has
        # told that step too: the next one is after it
        told = self._specific_words(reply) if after is not None else set()
        for _ in range(NEXT_STEP_TOLD):
            if after is None or not self._told(told, said, after):
                break
            said, after = after, self._neighbour(after, 1)
        return tuple(evidence) if after is None else _joined(evidence, after, NEXT_STEP_AT, unless_within=5)

    def _specific_words(self, reply: str) -> set[str]:
        """The reply's content words of two characters or more that are specific to a few passages."""
        return {w for w in self.tokenizer.content_words(plain_reply(reply))
                if len(w) >= 2 and self.term_stats.specific(w)}

    @staticmethod
    def _told(words: set[str], said: Chunk, after: Chunk) -> bool:
        """Whether a reply whose specific `words` these are tells what `after` says beyond `said`: TOLD_WORDS of them
        that `after` uses and `said` does not (手搓, 沙沙 of the fermentation's end after its duration)."""
        return sum(1 for w in words if w in after.text and w not in said.text) >= TOLD_WORDS

    def _neighbour(self, chunk: Chunk | None, step: int) -> Chunk | None:
        """The passage `step` places after `chunk` (before it, for a negative step) in its document, or None."""
        if chunk is None or chunk.id not in self.index.position:
            return None
        at, chunks = self.index.position[chunk.id] + step, self.index.chunks
        return chunks[at] if 0 <= at < len(chunks) and chunks[at].docid == chunk.docid else None

    def _beside(self, chunk: Chunk | None) -> tuple[Chunk, ...]:
        """The passages right before and after `chunk` in its document."""
        return tuple(c for c in (self._neighbour(chunk, -1), self._neighbour(chunk, 1)) if c is not None)

    def _said(self, question: str, history: Sequence[Turn], options: Options) -> Chunk | None:
        """The passage the last reply stood on: its first citation, or the first that states the kind of figure the
        follow-up asks ("要打几次？" after a reply citing the spraying rules, then the schedule with 连喷 2 次); the best
        match for its words when it cites nothing (a reply written by hand); None after a refusal or with no reply."""
        reply = last_reply(history)
        if not reply:
            return None
        cited = [chunk for cid in cited_ids(reply) if (chunk := self.index.by_id.get(cid)) is not None]
        if cited:
            return next((c for c in cited if states_asked_amount(question, c.text)), cited[0])
        words = plain_reply(reply).strip()
        found = self.retriever.search(words, words, options.channels).evidence if words else ()
        return found[0].chunk if found else None

    def _hedge(self, result: Retrieval, alone: Retrieval, docs: set[str], keep: int, names_topic: bool) -> Retrieval:
        """A question that may continue the conversation or open a new topic: read as a follow-up first (a leaning
        opening mostly is one), with the `keep` best passages for the question asked alone in the top 5 too, the best
        of each reading leading (那接穗要从哪种枝子上剪 after 老铁皮卡: the Typica passage, then the grafting one); when
        none of the passages a question naming its own topic finds alone lies in the documents of the previous
        question ("那鸡粪能直接撒到地里不？" after pruning), it opens a new topic the way people talk: its own passages
        first, `keep` of the follow-up's. (What a question naming little finds alone says nothing either way.)"""
        followed = self._follow_topic(result, docs)
        n = len(followed.evidence)
        if names_topic and opens_new(docs, alone):
            evidence = _first_of_each(n, alone.evidence[: n - keep], followed.evidence[:keep],
                                      alone.evidence, followed.evidence)
        else:
            evidence = _first_of_each(n, followed.evidence[:1], alone.evidence[:1], followed.evidence[: n - keep],
                                      alone.evidence[:keep], followed.evidence, alone.evidence)
        return replace(followed, evidence=evidence)

    def _previous_docs(self, history: Sequence[Turn], options: Options) -> set[str]:
        """The documents of the first FOLLOW_DOCS passages the user's previous question finds (none without one),
        read as it was read then: a follow-up of a follow-up ("那用什么药？" → "要打几次？") stays in its chapter."""
        turns = list(history)
        at = next((i for i in range(len(turns) - 1, -1, -1) if turns[i].role == "user"), None)
        if at is None:
            return set()
        previous = turns[at].content
        understood = self.rewrite(previous, turns[:at], options)
        return {h.chunk.docid for h in self.retriever.search(previous, understood, options.channels).evidence[:FOLLOW_DOCS]}

    @staticmethod
    def _follow_topic(result: Retrieval, docs: set[str]) -> Retrieval:
        """A follow-up continues the topic of the user's previous question: evidence from the documents that
        question finds first (`docs`) moves ahead (stable), so 那用什么药 stays in the rust chapter."""
        if not docs:
            return result
        ordered = sorted(result.evidence, key=lambda h: h.chunk.docid not in docs)
        return replace(result, evidence=tuple(ordered))

    def answer(
        self,
        question: str,
        history: Sequence[Turn] = (),
        options: Options = Options(),
        on_delta: Callable[[str], None] | None = None,
    ) -> Answer:
        started = time.perf_counter()
        retrieval = self.search(question, history, options)
        question = retrieval.query  # as read: a keyboard slip put right (retrieval.corrections)
        timings = dict(retrieval.timings_ms)
        warnings = list(retrieval.warnings)
        hits = retrieval.evidence
        t = time.perf_counter()
        coverage = assess(retrieval.rewritten_query, hits, self.tokenizer, self.index.corpus_text, self.term_stats,
                          asked=question)
        covered = bool(hits) and (coverage.covered or not options.refuse)
        shown: Sequence[Hit] = hits
        if not covered:
            text, mode, cited = not_covered(coverage.missing), "extractive", []
        else:
            text, mode, cited = None, "extractive", []
            if self.chat is not None and options.llm:
                try:
                    text, cited = self._generate(question, retrieval.rewritten_query, hits, history, options, on_delta)
                    mode, covered = "llm", text != NOT_COVERED
                except LLMError as exc:
                    log.warning("LLM failed (%s), answering extractively: %s", exc.kind, exc)
                    warnings.append(f"LLM unavailable ({exc.kind}): extractive answer")
            if text is None:
                shown, lead = self.figure_lead(question, with_control_sections(question, hits, self.index.chunks),
                                               lead_passages(retrieval))
                text, cited = extractive_answer(
                    question, shown, self.tokenizer, self.cfg.llm.answer_chars, context=retrieval.rewritten_query,
                    lead=lead, states_asked=amount_stated(question),
                )
                text, cited = cite_sisters(text, cited, hits, self.tokenizer, self.term_stats)
                if not cited:
                    text, cited = backfill("以下内容摘自知识库，供参考。", [hits[0].chunk.id]), [hits[0].chunk.id]
        if retrieval.corrections:  # say how the question was read: the grower sees 节顶 taken for 截顶, and can say so
            text = "（" + "，".join(f"“{typed}”按“{meant}”理解" for typed, meant in retrieval.corrections) + "）\n" + text
        timings["generate"] = (time.perf_counter() - t) * 1000
        timings["total"] = (time.perf_counter() - started) * 1000
        by_id = {h.chunk.id: h.chunk for h in shown}  # a cited sibling control section is no retrieved hit
        return Answer(
            query=question,
            rewritten_query=retrieval.rewritten_query,
            text=text,
            mode=mode,
            citations=tuple(by_id[c] for c in cited),
            evidence=hits,
            timings_ms=timings,
            warnings=tuple(warnings),
            covered=covered,
            reranker=retrieval.reranker,
        )

    def figure_lead(self, question: str, hits: Sequence[Hit], lead: int) -> tuple[Sequence[Hit], int]:
        """An amount asked that the passages an answer leads with do not state beside the question's words, where a
        later one of the first five does (unanchored_amount): that one leads too, after them (一天最多打几个钟头: 9.6
        施药操作 leads, and 10.4's 每人每天施药时间不宜超过 6 h joins it). Returns the passages and how many lead."""
        if not lead or not asked_amounts(question):
            return hits, lead
        if not unanchored_amount(question, hits[:lead], self.tokenizer, self.term_stats):
            return hits, lead
        stating = next((i for i in range(lead, min(len(hits), 5))
                        if not unanchored_amount(question, hits[i:i + 1], self.tokenizer, self.term_stats)), None)
        if stating is None:
            return hits, lead
        return [*hits[:lead], hits[stating], *(h for i, h in enumerate(hits) if i >= lead and i != stating)], lead + 1

    def _generate(self, question, rewritten, hits: Sequence[Hit], history, options: Options, on_delta) -> tuple[str, list[str]]:
        injected = inject_history(history, self.cfg.history.ihi_turns, self.cfg.history.ihi_chars) if options.ihi else []
        messages = build_messages(question, rewritten, hits, injected, self.cfg.llm.answer_chars)
        raw = self.chat.complete(messages, on_delta=on_delta)
        checked = validate_citations(raw, [h.chunk.id for h in hits])
        if _is_refusal(checked.text):
            return NOT_COVERED if not checked.cited else checked.text, list(checked.cited)
        if not checked.cited:
            top = [h.chunk.id for h in hits[:2]]
            return backfill(checked.text, top), top
        return checked.text, list(checked.cited)


def _joined(evidence: Sequence[Hit], chunk: Chunk, rank: int, unless_within: int) -> tuple[Hit, ...]:
    """`chunk` joins the evidence at `rank` (1-based; the last place of a shorter list) unless it already stands among
    the first `unless_within`. Its score is the passage's it displaces, so the margin the citations are chosen by stays
    the question's own; the evidence keeps its length."""
    if any(h.chunk.id == chunk.id for h in evidence[:unless_within]):
        return tuple(evidence)
    at = min(rank, len(evidence)) - 1
    rest = [h for h in evidence if h.chunk.id != chunk.id]
    rest.insert(at, Hit(chunk, evidence[at].score, {}))
    return tuple(rest[: len(evidence)])


def lead_passages(retrieval: Retrieval) -> int:
    """How many of the ranked passages an extractive answer leads with and cites: the first, and the second too
    when the learned ranker cannot tell them apart. Its scores are pairwise log-odds (RankNet), so the second is
    the answer with probability about exp(s2 − s1) relative to the first; citing both has the larger expected
    citation F1 (2/3 · (p1 + p2) against p1) once that ratio passes 1/2. Other rankers' scores are not log-odds:
    the first passage alone. The evidence's order is the engine's last word, the ranker's and then the
    conversation's (a follow-up's topic first, a continuing question's own passages alternating with its reading in
    context): the first passage leads whatever its score, and a second that scored higher joins it (the arrangement,
    not the ranker, put it second: for a question continuing the conversation, the best passage of each reading).
    Leading by sentence overlap instead cited less well on every conversation set (train-colloquial follow-ups
    0.273 against 0.330), and so did the first alone (0.318)."""
    hits = retrieval.evidence
    if len(hits) > 1 and retrieval.reranker.startswith("learned") and hits[0].score - hits[1].score < UNSURE_MARGIN:
        return 2
    return 1 if hits else 0


def _is_refusal(text: str) -> bool:
    return any(p in text[:80] for p in ("知识库中没有相关内容", "没有相关内容", "无法回答", "资料中没有"))


def make_tokenizer(cfg: Config) -> Tokenizer:
    return Tokenizer(cache_dir=Layout(cfg.data_dir).jieba_cache)


def load_engine(cfg: Config, api_key: str | None = None, with_reranker: bool = True, chat: ChatModel | None = None) -> Engine:
    """Models from config (with loud fallbacks), the tokenizer, and the LLM when a key is configured."""
    from .models import load_models

    loaded = load_models(cfg.models, with_reranker=with_reranker)
    warnings = list(loaded.warnings)
    if chat is None and api_key:
        from .llm import OpenAIChatModel

        chat = OpenAIChatModel(cfg.llm, api_key)
    return Engine(cfg, make_tokenizer(cfg), loaded.embedder, loaded.reranker, chat, tuple(warnings))


def opens_new(previous_docs: set[str], alone: Retrieval) -> bool:
    """None of the passages a question finds asked alone lies in the documents the previous question found first."""
    return bool(previous_docs) and not previous_docs & {h.chunk.docid for h in alone.evidence}


def _first_of_each(n: int, *rankings: Sequence[Hit]) -> tuple[Hit, ...]:
    """The first `n` distinct passages of the rankings read one after another."""
    first: dict[str, Hit] = {}
    for hit in (h for ranking in rankings for h in ranking):
        first.setdefault(hit.chunk.id, hit)
    return tuple(first.values())[:n]
