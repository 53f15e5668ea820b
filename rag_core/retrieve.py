"""Hybrid retrieval: BM25 ∥ dense → reciprocal rank fusion → cross-encoder rerank → the final top-K."""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Hashable, Sequence

from .config import RetrievalConfig
from .index.store import IndexReader, IndexUnavailable
from .ingest.clean import normalise_fragment
from .lexical import Tokenizer
from .models import Embedder, Reranker
from .rank.features import Candidate
from .rank.infer import LearnedReranker
from .rank.model import RankerUnavailable
from .records import Hit, Retrieval

log = logging.getLogger(__name__)
_WARNED: set[str] = set()  # fallback reasons already logged
DenseHits = tuple[object, list[int]] | None  # a question's dense vector and the chunk positions its channel ranked


class QueryError(ValueError):
    """The question cannot be searched (e.g. it is empty)."""


def rrf(ranked_lists: Sequence[Sequence[Hashable]], k: int = 60) -> list[tuple[Hashable, float]]:
    """Reciprocal rank fusion: score(d) = Σ 1 / (k + rank of d in each list), ranks from 1; duplicates within a
    list count once (their best rank). Ties keep first-seen order."""
    scores: dict[Hashable, float] = {}
    for ranked in ranked_lists:
        seen: set[Hashable] = set()
        for rank, key in enumerate(ranked, start=1):
            if key in seen:
                continue
            seen.add(key)
            scores[key] = scores.get(key, 0.0) + 1.0 / (k + rank)
    return sorted(scores.items(), key=lambda kv: kv[1], reverse=True)


@dataclass(frozen=True)
class Channels:
    bm25: bool = True
    dense: bool = True
    rerank: bool = True


def clip_query(query: str, limit: int) -> tuple[str, list[str]]:
    query = " ".join(query.split())
    if not query:
        raise QueryError("empty question")
    if len(query) > limit:
        return query[:limit], [f"question clipped from {len(query)} to {limit} characters"]
    return query, []


@dataclass(frozen=True)
class Pool:
    """The fused candidates of one question, before reranking."""

    query: str  # the (clipped) text that was searched
    normalised: str
    fused: list[tuple[int, float]]  # (chunk position, RRF score), best first
    ranks: dict[str, dict[int, int]]  # channel → chunk position → rank (1-based)
    vector: object | None  # the question's dense vector, when the dense channel ran
    timings: dict[str, float]
    warnings: list[str]
    context: str = ""  # a follow-up as a sentence encoder reads it (history.conversation_text); "" = the query

    def candidates(self) -> list[Candidate]:
        out = []
        for rank, (pos, score) in enumerate(self.fused, 1):
            ranks = {name: r[pos] for name, r in self.ranks.items() if pos in r}
            ranks["rrf"] = rank
            out.append(Candidate(pos, score, ranks))
        return out


class Retriever:
    """BM25 ∥ dense → RRF → rerank: the configured cross-encoder when one is loaded, else the build's learned ranker
    (rag_core.rank), else fusion order, each fallback said in `warnings`."""

    def __init__(
        self,
        index: IndexReader,
        tokenizer: Tokenizer,
        embedder: Embedder | None,
        reranker: Reranker | None,
        cfg: RetrievalConfig,
        warnings: Sequence[str] = (),
        learned: bool | None = None,
    ):
        self.index = index
        self.tokenizer = tokenizer
        self.embedder = embedder
        self.reranker = reranker
        self.cfg = cfg
        if embedder is not None and index.embedder_name != embedder.name:
            raise IndexUnavailable(
                f"the index was built with embedder {index.embedder_name!r} but {embedder.name!r} is loaded: "
                "run `coffeebot index` to rebuild it"
            )
        use_learned = cfg.learned_ranker if learned is None else learned
        self.learned: LearnedReranker | None = None
        notes = list(warnings)
        if use_learned and reranker is None:
            try:
                self.learned = LearnedReranker.from_build(index, tokenizer, embedder, cfg.rrf_k, cfg.ranker_encoder)
            except RankerUnavailable as exc:
                if str(exc) not in _WARNED:  # once per process and reason: eval makes one engine per system
                    _WARNED.add(str(exc))
                    log.warning("learned ranker unavailable, results in fusion order: %s", exc)
                notes.append(f"learned ranker unavailable ({exc}): results are in fusion order")
        self.warnings = tuple(notes)

    @property
    def reranker_name(self) -> str:
        """Which reranker runs: the cross-encoder's name, the learned ranker's, or "none" (fusion order)."""
        if self.reranker is not None:
            return self.reranker.name
        return self.learned.name if self.learned is not None else "none"

    def _depth(self, size: int) -> int:
        return max(size, self.cfg.bm25_top, self.cfg.dense_top)

    def dense_text(self, query: str, rewritten: str | None = None) -> str:
        """What the dense channel embeds for this question."""
        return self.tokenizer.expand(normalise_fragment(clip_query(rewritten or query, self.cfg.max_query_chars)[0]))

    def dense_many(self, texts: Sequence[str], size: int) -> list[DenseHits]:
        """The dense channel for many questions (`dense_text` each) in one embedding batch and one index query: what
        `pool` takes as `dense` (ranker training pools thousands of questions)."""
        if self.embedder is None or not texts:
            return [None] * len(texts)
        vectors = self.embedder.embed(list(texts))
        tops = self.index.dense.top_many(vectors, self._depth(size))
        return [(v, self._positions(top)) for v, top in zip(vectors, tops)]

    def _positions(self, top: Sequence[tuple[str, float]]) -> list[int]:
        return [p for cid, _ in top if (p := self.index.dense_position(cid)) is not None]

    def pool(self, query: str, rewritten: str | None = None, channels: Channels = Channels(), size: int | None = None,
             context: str = "", dense: DenseHits = None) -> Pool:
        """BM25 ∥ dense → RRF: the first `size` fused candidates (default: the rerank candidates). `dense` is this
        question's dense channel when `dense_many` ran it already."""
        timings: dict[str, float] = {}
        warnings = list(self.warnings)
        q, clipped = clip_query(rewritten or query, self.cfg.max_query_chars)
        warnings += clipped
        qn = normalise_fragment(q)
        lists: dict[str, list[int]] = {}
        use_dense = channels.dense and self.embedder is not None
        if not (channels.bm25 or use_dense):
            raise QueryError("both retrieval channels are switched off")
        size = size or self.cfg.rerank_candidates
        depth = self._depth(size)

        t = time.perf_counter()
        if channels.bm25:
            tokens = self.tokenizer.query_tokens(qn)
            if rewritten and rewritten != query:  # HAR carried terms over: the question's own words count double
                tokens += self.tokenizer.query_tokens(normalise_fragment(query))
            lists["bm25"] = [i for i, _ in self.index.sparse.top(tokens, max(self.cfg.bm25_top, depth))]
        timings["bm25"] = (time.perf_counter() - t) * 1000

        t = time.perf_counter()
        vector = None
        if use_dense and dense is not None:
            vector, lists["dense"] = dense
        elif use_dense:
            vector = self.embedder.embed([self.dense_text(query, rewritten)])[0]
            lists["dense"] = self._positions(self.index.dense.top(vector, depth))
        timings["dense"] = (time.perf_counter() - t) * 1000

        t = time.perf_counter()
        top = {"bm25": self.cfg.bm25_top, "dense": self.cfg.dense_top}
        fused = rrf([ranked[: top[name]] for name, ranked in lists.items()], k=self.cfg.rrf_k)
        if len(fused) < size:  # a wider pool than the channels' tops: fill it from deeper in each list
            deeper = rrf(list(lists.values()), k=self.cfg.rrf_k)
            seen = {p for p, _ in fused}
            fused += [(p, s) for p, s in deeper if p not in seen]
        fused = fused[:size]
        timings["rrf"] = (time.perf_counter() - t) * 1000
        ranks = {name: {pos: r for r, pos in enumerate(ranked, 1)} for name, ranked in lists.items()}
        return Pool(q, qn, fused, ranks, vector, timings, warnings, context)

    def search(self, query: str, rewritten: str | None = None, channels: Channels = Channels(),
               context: str = "") -> Retrieval:
        """Rank evidence for `rewritten` (HAR's q′; defaults to the query itself); `context`, a follow-up with the
        turn it continues in plain words, is what the learned ranker's sentence encoder reads."""
        learned = channels.rerank and self.reranker is None and self.learned is not None
        size = self.cfg.learned_candidates if learned else self.cfg.rerank_candidates
        if learned and (context or (rewritten or query).strip()):  # e5 encodes the question while BM25 and dense run
            self.learned.prefetch(context or clip_query(rewritten or query, self.cfg.max_query_chars)[0])
        pool = self.pool(query, rewritten, channels, size, context)
        timings, warnings, fused = pool.timings, pool.warnings, pool.fused
        candidates = [pos for pos, _ in fused]
        scores = {pos: s for pos, s in fused}
        t = time.perf_counter()
        rerank_scores: dict[int, float] = {}
        if channels.rerank and self.reranker is not None and candidates:
            texts = [_rerank_text(self.index.chunks[p]) for p in candidates]
            rerank_scores = dict(zip(candidates, self.reranker.score(pool.normalised, texts)))
        elif learned and candidates:
            rerank_scores = dict(zip(candidates, self.learned.score(pool, query)))
        if rerank_scores:
            candidates.sort(key=lambda p: rerank_scores[p], reverse=True)  # stable: ties keep fusion order
        timings["rerank"] = (time.perf_counter() - t) * 1000

        hits = []
        fused_rank = {p: i for i, (p, _) in enumerate(fused, 1)}
        for final_rank, pos in enumerate(candidates[: self.cfg.final_topk], 1):
            hit_ranks = {name: r[pos] for name, r in pool.ranks.items() if pos in r}
            hit_ranks["rrf"] = fused_rank[pos]
            if rerank_scores:
                hit_ranks["rerank"] = final_rank
            hits.append(Hit(self.index.chunks[pos], rerank_scores.get(pos, scores[pos]), hit_ranks))
        ran = self.reranker.name if self.reranker is not None and channels.rerank else (
            self.learned.name if learned else "none")
        return Retrieval(query=query, rewritten_query=pool.query, evidence=tuple(hits), timings_ms=timings,
                         warnings=tuple(warnings), reranker=ran)


def _rerank_text(chunk) -> str:
    return f"{chunk.section}\n{chunk.text}" if chunk.section else chunk.text
