"""The two BM25 engines behind one interface, and the automatic choice between them."""
from __future__ import annotations

import pytest

from rag_core.index.bm25 import AUTO_BM25S_ABOVE, BM25sIndex, RankBM25Index, load_tokens, make_sparse_index, save_tokens

CORPUS = [["咖啡锈病", "铜制剂", "防治"], ["咖啡果小蠹", "采收"], ["锈病", "叶背", "黄粉"], ["施肥", "尿素"]] * 3


@pytest.mark.parametrize("engine", ["rank_bm25", "bm25s"])
def test_engines_rank_matching_chunks_first(engine):
    index = make_sparse_index(engine, CORPUS)
    top = index.top(["锈病", "黄粉"], 5)
    assert [pos for pos, _ in top][:3] == [2, 6, 10]  # ties keep corpus order
    assert all(score > 0 for _, score in top)
    assert index.top(["不存在"], 5) == [] and index.top([], 5) == []


def test_auto_switches_to_bm25s_for_large_corpora():
    assert isinstance(make_sparse_index("auto", CORPUS), RankBM25Index)
    assert isinstance(make_sparse_index("auto", CORPUS * (AUTO_BM25S_ABOVE // len(CORPUS) + 1)), BM25sIndex)


def test_tokens_round_trip(tmp_path):
    save_tokens(tmp_path / "t.jsonl", CORPUS)
    assert load_tokens(tmp_path / "t.jsonl") == CORPUS


def test_rank_bm25_scores_are_rank_bm25s_own_to_the_last_bit_with_each_tokens_scores_kept():
    index = RankBM25Index(CORPUS)
    for tokens in (["锈病", "黄粉"], ["锈病", "锈病", "不存在", "施肥"], ["采收"], ["黄粉", "锈病"]):
        assert (index.scores(tokens) == index._bm25.get_scores(tokens)).all(), tokens
    info = index._token.cache_info()
    assert info.currsize == 5 and info.hits == 4  # 锈病 黄粉 不存在 施肥 采收: each scored once, then reused
