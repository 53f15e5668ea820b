"""BM25 over pre-tokenised chunks: rank-bm25 (the paper's configuration) or bm25s (much faster at large corpora),
behind one interface. Tokenisation happens outside (rag_core.lexical)."""
from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Protocol, Sequence

import numpy as np


class SparseIndex(Protocol):
    def top(self, query_tokens: Sequence[str], k: int) -> list[tuple[int, float]]:
        """(chunk position, score) best first; only positive scores."""


def _top(scores: np.ndarray, k: int) -> list[tuple[int, float]]:
    if scores.size == 0:
        return []
    k = min(k, scores.size)
    idx = np.argpartition(-scores, k - 1)[:k]
    idx = idx[np.lexsort((idx, -scores[idx]))]  # best first; ties in corpus order
    return [(int(i), float(scores[i])) for i in idx if scores[i] > 0]


CACHED_SCORES = 4_000_000  # token score vectors kept by RankBM25Index, counted in chunks scored (32 MB of floats)


class RankBM25Index:
    """rank-bm25's BM25Okapi, its per-token scores kept: a question's score is the sum over its tokens, in its order,
    of exactly what `BM25Okapi.get_scores` adds for each, so results are the same to the last bit, and a token asked
    again (training asks a thousand questions of one build; growers ask the same words) costs no pass over the corpus."""

    def __init__(self, corpus_tokens: Sequence[Sequence[str]]):
        from rank_bm25 import BM25Okapi

        self._bm25 = b = BM25Okapi([list(t) or ["∅"] for t in corpus_tokens])
        self._norm = b.k1 * (1 - b.b + b.b * np.array(b.doc_len) / b.avgdl)
        self._token = functools.lru_cache(maxsize=max(256, CACHED_SCORES // max(b.corpus_size, 1)))(self._token_scores)
        postings: dict[str, tuple[list[int], list[int]]] = {}  # token → the chunks it occurs in, and how often
        for position, freqs in enumerate(b.doc_freqs):
            for token, n in freqs.items():
                where, counts = postings.setdefault(token, ([], []))
                where.append(position)
                counts.append(n)
        self._postings = {t: (np.array(w), np.array(c)) for t, (w, c) in postings.items()}

    def _token_scores(self, token: str) -> np.ndarray:
        b = self._bm25
        q_freq = np.zeros(b.corpus_size, dtype=np.int64)  # the token's count in each chunk, as rank-bm25 reads it
        if token in self._postings:
            where, counts = self._postings[token]
            q_freq[where] = counts
        return (b.idf.get(token) or 0) * (q_freq * (b.k1 + 1) / (q_freq + self._norm))

    def scores(self, query_tokens: Sequence[str]) -> np.ndarray:
        score = np.zeros(self._bm25.corpus_size)
        for token in query_tokens:
            score += self._token(token)
        return score

    def top(self, query_tokens, k):
        if not query_tokens:
            return []
        return _top(self.scores(list(query_tokens)), k)


class BM25sIndex:
    def __init__(self, corpus_tokens: Sequence[Sequence[str]]):
        import bm25s

        vocab: dict[str, int] = {}
        ids = [[vocab.setdefault(t, len(vocab)) for t in doc] or [vocab.setdefault("∅", len(vocab))] for doc in corpus_tokens]
        self._vocab = vocab
        self._n = len(corpus_tokens)
        self._bm25 = bm25s.BM25()
        self._bm25.index(bm25s.tokenization.Tokenized(ids=ids, vocab=vocab), show_progress=False)

    def top(self, query_tokens, k):
        known = [self._vocab[t] for t in query_tokens if t in self._vocab]
        if not known:
            return []
        scores = np.asarray(self._bm25.get_scores(known))
        return _top(scores, k)


# bench/results/retrieval.md: rank-bm25 costs about 24 ms per 1,000 chunks per question (it scores every chunk in
# Python) and passes 50 ms near 2,000 chunks; bm25s stays near 1 ms up to 85,000 chunks.
AUTO_BM25S_ABOVE = 2000


def make_sparse_index(engine: str, corpus_tokens: Sequence[Sequence[str]]) -> SparseIndex:
    """"rank_bm25" (the paper's), "bm25s", or "auto": rank-bm25 up to AUTO_BM25S_ABOVE chunks, bm25s beyond."""
    if engine == "bm25s" or (engine == "auto" and len(corpus_tokens) > AUTO_BM25S_ABOVE):
        return BM25sIndex(corpus_tokens)
    return RankBM25Index(corpus_tokens)


def save_tokens(path: Path, corpus_tokens: Sequence[Sequence[str]]) -> None:
    path.write_text("\n".join(json.dumps(list(t), ensure_ascii=False) for t in corpus_tokens), encoding="utf-8")


def load_tokens(path: Path) -> list[list[str]]:
    text = path.read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines()] if text else []
