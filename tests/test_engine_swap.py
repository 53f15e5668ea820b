"""After an index swap, questions keep being answered from the old build while the new one loads."""
from __future__ import annotations

import shutil
import threading

from rag_core.index.build import build_index
from rag_core.index.layout import Layout
from tests.conftest import engine_for, offline_config


def test_old_build_serves_while_the_new_one_loads(sample_cfg, tmp_path):
    data = tmp_path / "data"
    shutil.copytree(sample_cfg.data_dir, data, ignore=shutil.ignore_patterns("history.sqlite3*"))
    cfg = offline_config(data)
    engine = engine_for(cfg)
    old = engine.retriever
    report = build_index(cfg, engine.embedder, engine.tokenizer)  # unchanged KB: a quick incremental build
    assert report.swapped and Layout(data).current_id() == report.build_id != old.index.build_id

    engine._lock.acquire()  # as if another thread were loading the new build right now
    try:
        got: list = []
        t = threading.Thread(target=lambda: got.append(engine.retriever))
        t.start()
        t.join(timeout=5)
        assert not t.is_alive() and got == [old], "a question during the load is served by the old build at once"
        assert engine.search("咖啡锈病怎么防治").evidence
    finally:
        engine._lock.release()

    engine.refresh()
    assert engine.retriever is not old and engine.retriever.index.build_id == report.build_id
    assert "sparse" in engine.retriever.index.__dict__, "the new build was warmed when it was loaded"
