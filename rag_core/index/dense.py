"""The dense channel's store: our own vectors in a chromadb PersistentClient (never its default embedding
function, which would download a model), telemetry off."""
from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Sequence

import numpy as np

log = logging.getLogger(__name__)
COLLECTION = "chunks"
# A wide search beam: at our sizes (10³–10⁵ chunks) it costs little, and the default (10) both misses true
# neighbours for top-20 and makes results vary from one process to the next.
HNSW = {"hnsw:space": "cosine", "hnsw:search_ef": 200, "hnsw:construction_ef": 200, "hnsw:M": 32}


def _client(path: Path):
    os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
    import chromadb
    from chromadb.config import Settings

    return chromadb.PersistentClient(path=str(path), settings=Settings(anonymized_telemetry=False, allow_reset=False))


class DenseStore:
    """Vectors keyed by chunk id ("docid#cid"), with the embedded text's hash in the metadata; cosine space.

    Keyed by id, a build can start from a copy of the previous build's store and touch only what changed.
    """

    def __init__(self, path: Path, create: bool = False):
        self.path = path
        self._client = _client(path)
        if create:
            self._col = self._client.create_collection(COLLECTION, embedding_function=None, metadata=HNSW)
        else:
            self._col = self._client.get_collection(COLLECTION, embedding_function=None)

    def add(self, ids: Sequence[str], vectors: np.ndarray, metadatas: Sequence[dict], batch: int = 2000) -> None:
        for i in range(0, len(ids), batch):
            self._col.add(
                ids=list(ids[i : i + batch]),
                embeddings=np.asarray(vectors[i : i + batch], dtype=np.float32),
                metadatas=list(metadatas[i : i + batch]),
            )

    def delete(self, ids: Sequence[str], batch: int = 2000) -> None:
        for i in range(0, len(ids), batch):
            self._col.delete(ids=list(ids[i : i + batch]))

    def fingerprints(self) -> dict[str, str]:
        """Chunk id → hash of the text its vector was made from."""
        got = self._col.get(include=["metadatas"])
        return {i: (m or {}).get("text_hash", "") for i, m in zip(got["ids"], got["metadatas"])}

    def close(self) -> None:
        """Release chromadb's shared system for this path (it is cached per path for the process's lifetime)."""
        self._client.close()

    def count(self) -> int:
        return self._col.count()

    def top(self, vector: np.ndarray, k: int) -> list[tuple[str, float]]:
        """(chunk id, cosine similarity) best first."""
        n = self.count()
        if n == 0:
            return []
        res = self._col.query(query_embeddings=[np.asarray(vector, dtype=np.float32)], n_results=min(k, n), include=["distances"])
        return [(i, 1.0 - float(d)) for i, d in zip(res["ids"][0], res["distances"][0])]

    def vectors(self, ids: Sequence[str]) -> list[np.ndarray | None] | None:
        """The stored vectors of these ids, in order (None for an unknown id); None when none is known."""
        got = self._col.get(ids=list(ids), include=["embeddings"])
        found = {i: np.asarray(v, dtype=np.float32) for i, v in zip(got["ids"], got["embeddings"])}
        return [found.get(i) for i in ids] if found else None
