"""The evaluation harness: gold mapping, skipped systems, the report, and the regression guard on dev.jsonl."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from rag_core.eval.gold import GoldItem, load_gold, map_gold
from rag_core.eval.run import evaluate
from rag_core.records import Chunk
from tests.conftest import SHARED_EVAL

# Citation F1 of the offline systems on ../shared/eval/dev.jsonl when these floors were set (2026-12-01):
# full 0.661 (learned ranker), BM25-only 0.627 (weight-free embedder, no cross-encoder, extractive answers). The
# floors sit a little under, so a real regression fails CI. The BM25-only floor moved from 0.60 to 0.58 on 2026-12-02
# with the ranker's faq_chunk feature, which lifts the full system on every check set (dev2 F1 0.526 -> 0.553) yet
# costs the BM25-only ablation (which still runs the learned ranker, trained with the dense channel) about 0.03.
FLOOR_F1 = {"full": 0.64, "b2b": 0.58}


def chunk(cid: int, start: int, text: str) -> Chunk:
    return Chunk("aaaaaaaa", cid, "d.md", "T", "", text, start, start + len(text))


def test_quotes_map_to_the_chunk_holding_their_middle_character():
    text = "第一段讲锈病。\n第二段讲施肥，每株5～10 kg农家肥。"
    chunks = [chunk(0, 0, text[:7]), chunk(1, 8, text[8:])]
    items = [
        GoldItem("a", "q", True, "x", (("d.md", "每株5～10公斤农家肥"),)),  # the quote is normalised like the text
        GoldItem("b", "q", True, "x", (("d.md", "讲锈病。第二"),)),  # crosses a chunk boundary: its middle decides
        GoldItem("c", "q", True, "x", (("d.md", "不存在的句子"),)),
        GoldItem("d", "q", True, "x", (("other.md", "锈病"),)),
    ]
    mapping = map_gold(items, {"d.md": text}, chunks)
    assert mapping.gold["a"] == {"aaaaaaaa#1"}
    assert mapping.gold["b"] == {"aaaaaaaa#0"}
    assert mapping.gold["c"] == set() and mapping.gold["d"] == set()
    assert len(mapping.errors) == 2 and any("不存在" in e for e in mapping.errors)


def test_every_dev_quote_maps_on_the_sample_index(sample_engine):
    index = sample_engine.index
    docs = {d["path"]: d["text"] for d in index.documents.values()}
    for name in ("dev.jsonl", "dev-multiturn.jsonl"):
        items = load_gold(SHARED_EVAL / name)
        mapping = map_gold(items, docs, index.chunks)
        assert mapping.errors == []
        assert all(mapping.gold[i.id] for i in items if i.answerable)


@pytest.mark.slow
def test_regression_guard_and_report(eval_cfg, tmp_path):
    report = evaluate(eval_cfg, SHARED_EVAL / "dev.jsonl", ["full", "b2b", "b4"], runs=1, out_dir=tmp_path / "out", resamples=500)
    assert "b4" in report["skipped"] and "not available" in report["skipped"]["b4"]
    for name, floor in FLOOR_F1.items():
        s = report["systems"][name]
        assert s["f1"] >= floor, f"{name} citation F1 {s['f1']:.3f} fell below {floor}"
        assert s["f1_ci"][0] <= s["f1"] <= s["f1_ci"][1]
        assert s["refusal_rate_unanswerable"] == 1.0
    (comparison,) = report["comparisons"]
    assert comparison["a"] == "full" and comparison["b"] == "b2b" and 0 < comparison["p"] <= 1
    assert abs(sum(report["errors"]["shares"].values()) - 1) < 1e-9
    assert report["latency"]["total"]["p50"] > 0
    out = tmp_path / "out"
    assert (out / "report.md").read_text(encoding="utf-8").count("| B2b: BM25 only |") == 1
    assert json.loads((out / "results.json").read_text(encoding="utf-8"))["systems"]["full"]["n"] == 114
    for png in ("f1_by_system.png", "bootstrap_f1.png", "latency_percentiles.png", "latency_share.png"):
        assert (out / png).stat().st_size > 1000


@pytest.mark.slow
def test_topic_switches_rank_as_if_asked_alone_and_out_of_scope_is_refused(eval_cfg, tmp_path):
    """dev-switch.jsonl: every dev question asked after the previous item's exchange (bench/switch_set.py), and
    dev-switch-lean.jsonl, the same opened with "那"; dev-conversations.jsonl (follow-ups and switches);
    adversarial-oos.jsonl: 40 out-of-scope questions of many kinds, written apart from the dev sets."""
    data = Path(__file__).parent / "data" / "eval"  # the project's own sets (not in ../shared)
    switch = evaluate(eval_cfg, data / "dev-switch.jsonl", ["full"], runs=1, out_dir=tmp_path / "s", resamples=200)
    kinds = switch["systems"]["full"]["by_kind"]
    assert kinds["switch"]["n"] == kinds["switch_alone"]["n"] == 113
    assert kinds["switch"]["f1"] >= 0.95 * kinds["switch_alone"]["f1"]
    assert kinds["switch"]["hit_at_5"] >= 0.95 * kinds["switch_alone"]["hit_at_5"]
    # the same questions opened with "那", as people start a new question in a chat (bench/switch_set.py --lean):
    # ambiguous, so the question's own two best passages join the follow-up's evidence (the old rule: Hit@5 0.738
    # and MRR 0.602 against 0.854 and 0.727 alone)
    lean = evaluate(eval_cfg, data / "dev-switch-lean.jsonl", ["full"], runs=1, out_dir=tmp_path / "l", resamples=200)
    kinds = lean["systems"]["full"]["by_kind"]
    assert kinds["switch"]["hit_at_5"] >= 0.93 * kinds["switch_alone"]["hit_at_5"]
    assert kinds["switch"]["mrr"] >= 0.84 * kinds["switch_alone"]["mrr"]
    # dev-conversations.jsonl: 66 conversations written from the KB apart from the dev sets (e5 off here: follow-ups
    # Hit@5 0.75, switches equal to alone at Hit@1 0.50 and Hit@5 0.77 when this guard was written)
    conv = evaluate(eval_cfg, data / "dev-conversations.jsonl", ["full"], runs=1, out_dir=tmp_path / "c", resamples=200)
    kinds = conv["systems"]["full"]["by_kind"]
    assert kinds["followup"]["n"] == 44 and kinds["followup"]["hit_at_5"] >= 0.70
    assert kinds["switch"]["hit_at_1"] >= 0.9 * kinds["switch_alone"]["hit_at_1"]
    assert kinds["switch"]["hit_at_5"] >= 0.95 * kinds["switch_alone"]["hit_at_5"]
    oos = evaluate(eval_cfg, data / "adversarial-oos.jsonl", ["full"], runs=1, out_dir=tmp_path / "o", resamples=200)
    assert oos["systems"]["full"]["refusal_rate_unanswerable"] >= 0.6


def test_every_training_set_maps_on_the_sample_index(sample_engine):
    # the learned ranker trains on these files at every build: a quote lost to an edit of kb/ or to a typo would
    # silently shrink its training data
    from rag_core.eval.gold import CHECK_FILES, GOLD_DIR, GOLD_FILES

    index = sample_engine.index
    docs = {d["path"]: d["text"] for d in index.documents.values()}
    assert "dev2.jsonl" in CHECK_FILES and not set(CHECK_FILES) & set(GOLD_FILES)  # kept for checking, never trained on
    assert len(set(GOLD_FILES)) == len(GOLD_FILES) >= 40
    for name in GOLD_FILES:
        items = load_gold(GOLD_DIR / name)
        mapping = map_gold(items, docs, index.chunks)
        assert mapping.errors == [], (name, mapping.errors[:3])
        assert all(mapping.gold[i.id] for i in items if i.answerable), name
    colloquial = load_gold(GOLD_DIR / "train-colloquial.jsonl")
    assert len(colloquial) >= 500 and len({i.id for i in colloquial}) == len(colloquial)
    assert {e[0] for i in colloquial for e in i.evidence} == set(docs)  # written over every document
    assert sum(1 for i in colloquial if i.history) >= 80  # follow-ups, rewritten as the pipeline rewrites them


class CountingEngine:
    """Answers "答<question>/<turns before it>", counting its calls (own_history needs only `answer`)."""

    def __init__(self) -> None:
        self.calls = 0

    def answer(self, question, history, options):
        self.calls += 1
        return type("A", (), {"text": f"答{question}/{len(history)}"})()


def test_own_history_replaces_each_reply_with_the_systems_own_given_the_turns_rebuilt_before_it():
    from rag_core.eval.run import own_history
    from rag_core.records import Turn

    written = (Turn("user", "锈病咋个防"), Turn("assistant", "写好的回答一"), Turn("user", "那用什么药"),
               Turn("assistant", "写好的回答二"))
    engine, cache = CountingEngine(), {}
    turns = own_history(engine, written, None, cache)
    assert [t.role for t in turns] == ["user", "assistant", "user", "assistant"]
    assert [t.content for t in turns] == ["锈病咋个防", "答锈病咋个防/0", "那用什么药", "答那用什么药/2"]
    # the second reply was answered after the rebuilt first one, not the written one
    assert all("写好的回答一" not in t.content for key in cache for t in key)
    assert own_history(engine, written[:2], None, cache)[1].content == "答锈病咋个防/0" and engine.calls == 2
    assert own_history(engine, (Turn("user", "只问不答"),), None, cache) == (Turn("user", "只问不答"),)


@pytest.mark.slow
def test_eval_with_the_systems_own_replies_cites_in_the_history_and_says_so(eval_cfg, tmp_path, sample_engine):
    from rag_core.eval.run import own_history
    from rag_core.pipeline import Options
    from rag_core.records import Turn

    written = (Turn("user", "咖啡锈病怎么防治"), Turn("assistant", "种抗锈品种，发病初期喷药。"))
    rebuilt = own_history(sample_engine, written, Options(), {})
    assert rebuilt[0] == written[0] and re.search(r"\[[0-9a-f]{8}#\d+\]", rebuilt[1].content)
    gold = tmp_path / "g.jsonl"
    gold.write_text(json.dumps({"id": "f1", "question": "那要打几次？", "answerable": True, "kind": "followup",
                                "history": [{"role": t.role, "content": t.content} for t in written],
                                "evidence": [{"doc": "cultivars.md", "quote": "咖啡锈病的典型症状"}]}, ensure_ascii=False) + "\n",
                    encoding="utf-8")
    report = evaluate(eval_cfg, gold, ["full"], runs=1, out_dir=tmp_path / "o", resamples=50, replies="own")
    assert report["replies"] == "own" and report["systems"]["full"]["n"] == 1
    assert "--replies own" in (tmp_path / "o" / "report.md").read_text(encoding="utf-8")
    with pytest.raises(ValueError):
        evaluate(eval_cfg, gold, ["full"], runs=1, out_dir=tmp_path / "p", resamples=50, replies="gold")
