"""BM25 over pre-tokenised chunks: rank-bm25 (the paper's configuration) or bm25s (much faster at large corpora),
behind one interface. Tokenisation happens outside (rag_core.lexical)."""
from __future__ import annotations

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


class RankBM25Index:
    def __init__(self, corpus_tokens: Sequence[Sequence[str]]):
        from rank_bm25 import BM25Okapi

        self._bm25 = BM25Okapi([list(t) or ["∅"] for t in corpus_tokens])

    def top(self, query_tokens, k):
        if not query_tokens:
            return []
        return _top(np.asarray(self._bm25.get_scores(list(query_tokens))), k)


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
