"""An embedding cache keyed by (model, text hash), so a rebuild embeds only new or changed text."""
from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path
from typing import Sequence

import numpy as np

from ..models import Embedder


def text_key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class EmbeddingCache:
    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(path, timeout=30)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS vectors (model TEXT, key TEXT, dim INTEGER, vec BLOB, PRIMARY KEY (model, key))"
        )
        self.hits = 0
        self.misses = 0

    def _cached(self, model: str, keys: Sequence[str]) -> dict[str, np.ndarray]:
        found: dict[str, np.ndarray] = {}
        for i in range(0, len(keys), 500):
            batch = keys[i : i + 500]
            rows = self._db.execute(
                f"SELECT key, vec FROM vectors WHERE model = ? AND key IN ({','.join('?' * len(batch))})",
                [model, *batch],
            )
            found.update({key: np.frombuffer(vec, dtype=np.float32) for key, vec in rows})
        return found

    def missing(self, model: str, texts: Sequence[str]) -> int:
        """How many distinct texts have no vector cached for `model` yet."""
        keys = list(dict.fromkeys(text_key(t) for t in texts))
        return len(keys) - len(self._cached(model, keys))

    def embed(self, embedder: Embedder, texts: Sequence[str]) -> np.ndarray:
        """Vectors for `texts`, computing only those not cached for this embedder."""
        keys = [text_key(t) for t in texts]
        found = self._cached(embedder.name, keys)
        missing = list(dict.fromkeys(k for k in keys if k not in found))
        self.hits += len(keys) - len(missing)
        self.misses += len(missing)
        if missing:
            by_key = dict(zip(keys, texts))
            vectors = embedder.embed([by_key[k] for k in missing])
            with self._db:
                self._db.executemany(
                    "INSERT OR REPLACE INTO vectors VALUES (?, ?, ?, ?)",
                    [(embedder.name, k, v.shape[0], v.astype(np.float32).tobytes()) for k, v in zip(missing, vectors)],
                )
            found.update(zip(missing, np.asarray(vectors, dtype=np.float32)))
        if not keys:
            return np.zeros((0, embedder.dim), dtype=np.float32)
        return np.stack([found[k] for k in keys])

    def close(self) -> None:
        self._db.close()
