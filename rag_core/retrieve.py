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
from .records import Hit, Retrieval

log = logging.getLogger(__name__)


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


class Retriever:
    def __init__(
        self,
        index: IndexReader,
        tokenizer: Tokenizer,
        embedder: Embedder | None,
        reranker: Reranker | None,
        cfg: RetrievalConfig,
        warnings: Sequence[str] = (),
    ):
        self.index = index
        self.tokenizer = tokenizer
        self.embedder = embedder
        self.reranker = reranker
        self.cfg = cfg
        self.warnings = tuple(warnings)
        if embedder is not None and index.embedder_name != embedder.name:
            raise IndexUnavailable(
                f"the index was built with embedder {index.embedder_name!r} but {embedder.name!r} is loaded: "
                "run `coffeebot index` to rebuild it"
            )

    def search(self, query: str, rewritten: str | None = None, channels: Channels = Channels()) -> Retrieval:
        """Rank evidence for `rewritten` (HAR's q′; defaults to the query itself)."""
        timings: dict[str, float] = {}
        warnings = list(self.warnings)
        q, clipped = clip_query(rewritten or query, self.cfg.max_query_chars)
        warnings += clipped
        qn = normalise_fragment(q)
        lists: dict[str, list[int]] = {}
        use_dense = channels.dense and self.embedder is not None
        if not (channels.bm25 or use_dense):
            raise QueryError("both retrieval channels are switched off")

        t = time.perf_counter()
        if channels.bm25:
            tokens = self.tokenizer.query_tokens(qn)
            if rewritten and rewritten != query:  # HAR carried terms over: the question's own words count double
                tokens += self.tokenizer.query_tokens(normalise_fragment(query))
            lists["bm25"] = [i for i, _ in self.index.sparse.top(tokens, self.cfg.bm25_top)]
        timings["bm25"] = (time.perf_counter() - t) * 1000

        t = time.perf_counter()
        if use_dense:
            vector = self.embedder.embed([self.tokenizer.expand(qn)])[0]
            lists["dense"] = [p for cid, _ in self.index.dense.top(vector, self.cfg.dense_top)
                              if (p := self.index.dense_position(cid)) is not None]
        timings["dense"] = (time.perf_counter() - t) * 1000

        t = time.perf_counter()
        fused = rrf(list(lists.values()), k=self.cfg.rrf_k)[: self.cfg.rerank_candidates]
        timings["rrf"] = (time.perf_counter() - t) * 1000

        ranks = {name: {pos: r for r, pos in enumerate(ranked, 1)} for name, ranked in lists.items()}
        candidates = [pos for pos, _ in fused]
        scores = {pos: s for pos, s in fused}
        t = time.perf_counter()
        rerank_scores: dict[int, float] = {}
        if channels.rerank and self.reranker is not None and candidates:
            texts = [_rerank_text(self.index.chunks[p]) for p in candidates]
            rerank_scores = dict(zip(candidates, self.reranker.score(qn, texts)))
            candidates.sort(key=lambda p: rerank_scores[p], reverse=True)
        timings["rerank"] = (time.perf_counter() - t) * 1000

        hits = []
        for final_rank, pos in enumerate(candidates[: self.cfg.final_topk], 1):
            hit_ranks = {name: r[pos] for name, r in ranks.items() if pos in r}
            hit_ranks["rrf"] = next(i for i, (p, _) in enumerate(fused, 1) if p == pos)
            if rerank_scores:
                hit_ranks["rerank"] = final_rank
            hits.append(Hit(self.index.chunks[pos], rerank_scores.get(pos, scores[pos]), hit_ranks))
        return Retrieval(query=query, rewritten_query=q, evidence=tuple(hits), timings_ms=timings, warnings=tuple(warnings))


def _rerank_text(chunk) -> str:
    return f"{chunk.section}\n{chunk.text}" if chunk.section else chunk.text
