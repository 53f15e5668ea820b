"""Model loading through the real code paths, on tiny models built here; loud fallbacks; the dense store on disk."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

from rag_core.config import ModelsConfig
from rag_core.index.store import IndexUnavailable
from rag_core.models import HashingEmbedder, load_embedder, load_reranker, resolve_model_path
from rag_core.retrieve import Retriever
from tests.conftest import REPO

CHARS = "咖啡锈病叶片背面橙黄色粉末防治铜制剂三唑酮果小蠹施肥修剪采收天牛"


def tiny_bert(path, num_labels: int | None):
    """A 2-layer random BERT with a Chinese character vocabulary, saved with its tokenizer."""
    from transformers import BertConfig, BertForSequenceClassification, BertModel, BertTokenizer

    path.mkdir(parents=True, exist_ok=True)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *dict.fromkeys(CHARS), *"abcdefghijklmnopqrstuvwxyz"]
    (path / "vocab.txt").write_text("\n".join(vocab), encoding="utf-8")
    tok = BertTokenizer(str(path / "vocab.txt"))
    cfg = BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=64, max_position_embeddings=128, num_labels=num_labels or 2)
    model = BertForSequenceClassification(cfg) if num_labels else BertModel(cfg)
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path


@pytest.mark.slow
def test_reranker_loads_from_a_local_folder_and_orders_candidates(tmp_path):
    folder = tiny_bert(tmp_path / "tiny-ce", num_labels=1)
    reranker, warnings = load_reranker(ModelsConfig(reranker=str(folder), device="cpu"))
    assert warnings == [] and reranker is not None and reranker.name == str(folder)
    texts = ["咖啡锈病防治用铜制剂", "天牛修剪", "果小蠹采收"]
    scores = reranker.score("咖啡锈病怎么防治", texts)
    assert len(scores) == 3 and all(np.isfinite(scores))
    assert scores == reranker.score("咖啡锈病怎么防治", texts)  # deterministic in eval mode
    assert reranker.score("咖啡锈病", []) == []


@pytest.mark.slow
def test_retriever_orders_by_the_cross_encoder(sample_engine, tmp_path):
    folder = tiny_bert(tmp_path / "tiny-ce", num_labels=1)
    reranker, _ = load_reranker(ModelsConfig(reranker=str(folder), device="cpu"))
    r = Retriever(sample_engine.index, sample_engine.tokenizer, sample_engine.embedder, reranker, sample_engine.cfg.retrieval)
    result = r.search("咖啡锈病怎么防治")
    assert [h.ranks["rerank"] for h in result.evidence] == [1, 2, 3, 4, 5]
    scores = [h.score for h in result.evidence]
    assert scores == sorted(scores, reverse=True)
    assert result.timings_ms["rerank"] > 0


@pytest.mark.slow
def test_embedder_loads_from_a_local_folder(tmp_path):
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer

    bert = tiny_bert(tmp_path / "tiny-bert", num_labels=None)
    word = Transformer(str(bert), max_seq_length=64)
    st = SentenceTransformer(modules=[word, Pooling(word.get_embedding_dimension())])
    st.save(str(tmp_path / "tiny-st"))
    embedder, warnings = load_embedder(ModelsConfig(embedder=str(tmp_path / "tiny-st"), device="cpu"))
    assert warnings == [] and embedder.dim == 32
    vectors = embedder.embed(["咖啡锈病", "天牛"])
    assert vectors.shape == (2, 32) and np.allclose(np.linalg.norm(vectors, axis=1), 1, atol=1e-5)


def test_missing_models_fall_back_loudly(tmp_path):
    embedder, warnings = load_embedder(ModelsConfig(embedder=str(tmp_path / "no-such-model")))
    assert isinstance(embedder, HashingEmbedder)
    assert any("fallback in use" in w for w in warnings)
    reranker, warnings = load_reranker(ModelsConfig(reranker="BAAI/bge-reranker-base"))
    assert reranker is None and "reranker unavailable" in warnings[0]
    with pytest.raises(RuntimeError, match="embedder_fallback"):
        load_embedder(ModelsConfig(embedder=str(tmp_path / "no-such-model"), embedder_fallback="none"))
    assert resolve_model_path("some-org/not-in-the-local-cache") is None  # no network: just "not here"


def test_an_index_built_with_another_embedder_is_a_clear_error(sample_engine):
    other = HashingEmbedder()
    other.name = "another-model"
    with pytest.raises(IndexUnavailable, match="coffeebot index"):
        Retriever(sample_engine.index, sample_engine.tokenizer, other, None, sample_engine.cfg.retrieval)


def test_dense_store_persists_across_processes(tmp_path):
    write = textwrap.dedent(f"""
        import numpy as np
        from pathlib import Path
        from rag_core.index.dense import DenseStore
        store = DenseStore(Path({str(tmp_path / 'chroma')!r}), create=True)
        vectors = np.eye(4, dtype=np.float32)
        store.add([f"x#{{i}}" for i in range(4)], vectors, [{{"text_hash": str(i)}} for i in range(4)])
    """)
    subprocess.run([sys.executable, "-c", write], cwd=REPO, check=True, timeout=120)
    from rag_core.index.dense import DenseStore

    store = DenseStore(tmp_path / "chroma")
    assert store.count() == 4
    top = store.top(np.array([0, 0, 1, 0.1], dtype=np.float32), 2)
    assert top[0][0] == "x#2" and top[1][0] == "x#3" and top[0][1] > top[1][1]
    assert store.fingerprints() == {f"x#{i}": str(i) for i in range(4)}


def test_dense_vectors_read_once_are_kept_until_the_store_changes(tmp_path):
    from rag_core.index.dense import DenseStore

    store = DenseStore(tmp_path / "chroma", create=True)
    store.add([f"x#{i}" for i in range(4)], np.eye(4, dtype=np.float32), [{"text_hash": str(i)} for i in range(4)])
    first = store.vectors(["x#1", "x#3", "nope"])
    assert [list(v) for v in first[:2]] == [[0, 1, 0, 0], [0, 0, 0, 1]] and first[2] is None
    assert store.vectors(["x#1"])[0] is first[0]  # kept, not read again
    store.delete(["x#1"])
    assert store.vectors(["x#1"]) is None  # a change empties what was kept
    store.add(["x#1"], np.array([[1, 1, 0, 0]], dtype=np.float32), [{"text_hash": "new"}])
    assert np.allclose(store.vectors(["x#1"])[0], [1, 1, 0, 0])
