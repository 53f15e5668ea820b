"""How specific a word is in the knowledge base: the share of the build's chunks that contain it.

Corpus statistics, not word lists: "咖啡" is in most passages and names no topic; "成龄" or "发酵" is in a few and
does. History-aware rewriting uses it to tell a question that names its own topic from an elliptical follow-up,
and the coverage test uses it to find what a question asks about that the knowledge base never mentions.
"""
from __future__ import annotations

import threading
from typing import Sequence

GENERIC_SHARE = 0.05  # a word in more than this share of passages is the domain itself, not a topic


class TermStats:
    @classmethod
    def of_chunks(cls, chunks) -> "TermStats":
        """The statistics of a build: each chunk with its heading path."""
        return cls([f"{c.section}\n{c.text}" for c in chunks])

    def __init__(self, texts: Sequence[str]):
        self._texts = [t for t in texts if t]
        self._cache: dict[str, float] = {}
        self._lock = threading.Lock()

    def share(self, term: str) -> float:
        """The share of passages containing `term` (0.0 when the knowledge base never uses it)."""
        cached = self._cache.get(term)
        if cached is not None:
            return cached
        n = sum(1 for t in self._texts if term in t)
        value = n / len(self._texts) if self._texts else 0.0
        with self._lock:
            if len(self._cache) > 50_000:
                self._cache.clear()
            self._cache[term] = value
        return value

    def together(self, *terms: str) -> int:
        """How many passages contain every one of `terms` (香蕉 with 叶斑病: none)."""
        return sum(1 for t in self._texts if all(term in t for term in terms))

    def known(self, term: str) -> bool:
        return self.share(term) > 0.0

    def specific(self, term: str) -> bool:
        """Used by the knowledge base, and not so widely that it names no topic."""
        return 0.0 < self.share(term) <= GENERIC_SHARE
