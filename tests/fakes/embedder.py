"""Deterministic embedders for tests: vectors chosen by the test, no model."""
from __future__ import annotations

from typing import Sequence

import numpy as np


class KeywordEmbedder:
    """Each text becomes the one-hot vector of the first keyword it contains (the last axis when none):
    sentences about the same keyword have cosine 1, different keywords 0."""

    def __init__(self, keywords: Sequence[str], name: str = "keyword-test"):
        self.keywords = list(keywords)
        self.dim = len(self.keywords) + 1
        self.name = name
        self.calls: list[list[str]] = []

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append(list(texts))
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            axis = next((i for i, k in enumerate(self.keywords) if k in text), self.dim - 1)
            out[row, axis] = 1.0
        return out
