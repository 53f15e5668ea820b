"""Dense vectors on a chromadb server (`[index] chroma_url`), started by the fixture (`chroma run`): each build
writes its own collection, the build's dense.json names it, an engine follows CURRENT to the new collection, and
pruned builds' collections are dropped."""
from __future__ import annotations

import shutil

import pytest

from rag_core.index.build import build_index
from rag_core.index.dense import collection_for, http_client, remote_of
from rag_core.index.layout import Layout
from rag_core.models import HashingEmbedder
from rag_core.pipeline import make_tokenizer
from tests.conftest import KB, engine_for, offline_config
from tests.servers import chroma_url  # noqa: F401 - fixture

pytestmark = pytest.mark.timeout(120)

NEW_DOC = "# 咖啡晒场管理\n\n晒场要用竹席架空晾晒咖啡豆，晒豆时每天翻动四次，阴雨天盖上塑料布防潮。\n"


def server_collections(url: str) -> dict[str, int]:
    client = http_client(url)
    try:
        return {c.name: c.count() for c in client.list_collections() if c.name.startswith("coffeebot_")}
    finally:
        client.close()


def test_builds_write_their_own_collection_and_engines_follow_current(chroma_url, tmp_path):
    kb = tmp_path / "kb"
    shutil.copytree(KB, kb)
    cfg = offline_config(tmp_path / "data", kb, index={"chroma_url": chroma_url, "keep_builds": 2},
                         retrieval={"learned_ranker": False})
    embedder, tokenizer = HashingEmbedder(), make_tokenizer(cfg)
    first = build_index(cfg, embedder, tokenizer)
    layout = Layout(cfg.data_dir)
    build_dir = layout.current_dir()
    assert remote_of(build_dir) == {"url": chroma_url, "collection": collection_for(first.build_id)}
    assert not (build_dir / "chroma").exists()  # nothing embedded beside the build
    assert server_collections(chroma_url)[collection_for(first.build_id)] == first.chunks

    engine = engine_for(cfg)
    found = engine.search("咖啡锈病怎么防治")
    assert any(h.ranks.get("dense") for h in found.evidence)  # the dense channel answered, from the server

    (kb / "drying.md").write_text(NEW_DOC, encoding="utf-8")
    second = build_index(cfg, embedder, tokenizer)
    assert second.swapped and second.build_id != first.build_id
    found = engine.search("晒场竹席晾晒咖啡豆")
    assert engine.index.build_id == second.build_id  # the engine followed CURRENT to the new build
    assert any(h.chunk.doc == "drying.md" and h.ranks.get("dense") for h in found.evidence)

    (kb / "drying.md").write_text(NEW_DOC + "\n晒干后含水量降到百分之十二左右再入库。\n", encoding="utf-8")
    third = build_index(cfg, embedder, tokenizer)
    kept = set(layout.all_builds())
    assert third.build_id in kept and first.build_id not in kept
    assert set(server_collections(chroma_url)) == {collection_for(b) for b in kept}  # pruned builds' dropped
