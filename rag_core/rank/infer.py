"""The learned ranker at query time: the build's weights and corpus statistics, features for the fused candidates,
one score each. Loaded with the build; a missing or corrupt file raises RankerUnavailable (the retriever then keeps
fusion order and says so)."""
from __future__ import annotations

import logging
from functools import cached_property
from typing import TYPE_CHECKING, Sequence

import numpy as np

from ..index.bm25 import load_tokens
from ..lexical import Tokenizer
from ..models import Embedder
from ..records import Chunk
from .features import CorpusStats, feature_matrix, query_terms
from .model import STATS_FILE, LinearRanker, RankerUnavailable, load_ranker

if TYPE_CHECKING:
    from ..index.store import IndexReader
    from ..retrieve import Pool

log = logging.getLogger(__name__)


def load_stats(index: "IndexReader") -> CorpusStats:
    path = index.dir / STATS_FILE
    try:
        return CorpusStats.load(path)
    except FileNotFoundError:
        log.info("no %s in build %s: counting document frequencies from its tokens", STATS_FILE, index.build_id)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.warning("%s of build %s unreadable (%s): counting from its tokens", STATS_FILE, index.build_id, exc)
    try:
        return CorpusStats.from_tokens(load_tokens(index.dir / "tokens.jsonl"), index.chunks)
    except (OSError, ValueError) as exc:
        raise RankerUnavailable(f"no corpus statistics for build {index.build_id} ({exc})") from exc


class Featurizer:
    """Feature rows for a pool of fused candidates over one build."""

    def __init__(self, index: "IndexReader", tokenizer: Tokenizer, stats: CorpusStats, rrf_k: int):
        self.index = index
        self.tokenizer = tokenizer
        self.stats = stats
        self.rrf_k = rrf_k

    @cached_property
    def _sections(self) -> dict[tuple[str, str], str]:
        out: dict[tuple[str, str], list[str]] = {}
        for c in self.index.chunks:
            out.setdefault((c.docid, c.section), []).append(c.text)
        return {(docid, section): section + "\n" + "\n".join(texts) for (docid, section), texts in out.items()}

    @cached_property
    def _documents(self) -> dict[str, str]:
        out: dict[str, list[str]] = {}
        for c in self.index.chunks:
            out.setdefault(c.docid, []).append(f"{c.section}\n{c.text}")
        return {k: "\n".join(v) for k, v in out.items()}

    def context(self, chunk: Chunk) -> tuple[str, str]:
        """The text of the chunk's whole section and of its whole document."""
        return self._sections[(chunk.docid, chunk.section)], self._documents[chunk.docid]

    def cosines(self, pool: "Pool", positions: Sequence[int]) -> list[float] | None:
        if pool.vector is None or not positions:
            return None
        ids = [self.index.chunks[p].id for p in positions]
        vectors = self.index.dense.vectors(ids)
        if vectors is None:  # a store keyed by position (builds before 2026-11-30)
            vectors = self.index.dense.vectors([str(p) for p in positions])
        if vectors is None:
            return None
        return [float(v @ pool.vector) if v is not None else 0.0 for v in vectors]

    def __call__(self, pool: "Pool") -> np.ndarray:
        candidates = pool.candidates()
        q = query_terms(pool.normalised, self.tokenizer, self.stats)
        cos = self.cosines(pool, [c.position for c in candidates])
        return feature_matrix(q, candidates, self.index.chunks, self.stats, cos, self.rrf_k, self.context)


class LearnedReranker:
    def __init__(self, model: LinearRanker, featurize: Featurizer):
        self.model = model
        self.featurize = featurize
        self.name = model.name

    @classmethod
    def from_build(cls, index: "IndexReader", tokenizer: Tokenizer, embedder: Embedder | None, rrf_k: int) -> "LearnedReranker":
        model = load_ranker(index.dir)
        return cls(model, Featurizer(index, tokenizer, load_stats(index), rrf_k))

    def score(self, pool: "Pool", query: str = "") -> list[float]:
        return [float(s) for s in self.model.score(self.featurize(pool))]
