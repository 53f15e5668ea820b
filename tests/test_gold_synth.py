"""`coffeebot gold synth`: drafts from the loopback fake LLM, every automatic check exercised, kept items round-trip
through load_gold + map_gold."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bot.cli import main as cli_main
from rag_core.config import LLMConfig
from rag_core.eval.gold import load_gold, map_gold
from rag_core.eval.synth import (
    MIN_CHUNK_CHARS,
    TOPICS,
    balance_cap,
    guess_topic,
    has_content_word,
    parse_drafts,
    question_problem,
    synthesize,
    write_jsonl,
)
from rag_core.index.store import open_current
from rag_core.lexical import Tokenizer
from rag_core.llm import OpenAIChatModel
from tests.conftest import REPO
from tests.fakes import FakeOpenAIServer, ScriptedChatModel

_SHOWN = re.compile(r"^\[([0-9a-f]{8}#\d+)\]（", re.M)  # a passage header in the drafting prompt


@pytest.fixture(scope="module")
def index(sample_cfg):
    return open_current(sample_cfg.data_dir)


def _squeeze(text: str) -> str:
    return "".join(text.split())


class Grower:
    """The fake LLM's author: reads the passages' ids from the prompt and writes one draft per call, cycling through
    `script`, a list of behaviours (a good draft, or one made to fail a named check)."""

    def __init__(self, index, script: list[str], topic: str | None = None):
        self.index = index
        self.script = script
        self.topic = topic
        self.calls = 0
        self.good_questions: list[str] = []
        self.docs = {d["path"]: _squeeze(d["text"]) for d in index.documents.values()}

    def shown(self, prompt: str):
        ids = _SHOWN.findall(prompt)
        assert 1 <= len(ids) <= 2, prompt[:300]
        chunks = [self.index.by_id[i] for i in ids]
        for c in chunks:
            assert c.text.strip() in prompt  # the model really sees the passage it must quote
        return chunks

    def quote(self, chunk) -> str:
        """A 24-character slice of the chunk that occurs once in its document (so it maps back to this chunk)."""
        text = chunk.text
        for start in range(len(text) // 3, len(text) - 24):
            q = text[start : start + 24]
            sq = _squeeze(q)
            if len(sq) >= 18 and self.docs[chunk.doc].count(sq) == 1:
                return q
        raise AssertionError(f"no unique quote in {chunk.id}")

    def draft(self, chunk, question: str, *, ids=None, quotes=None, answer_ids=None) -> dict:
        ids = ids or [chunk.id]
        quotes = quotes or {i: self.quote(self.index.by_id[i]) for i in ids}
        tags = "".join(f"[{i}]" for i in (answer_ids or ids))
        draft = {"question": question, "answer": f"按资料里的做法处理即可{tags}。",
                 "evidence": [{"id": i, "quote": quotes[i]} for i in ids]}
        if self.topic:
            draft["topic"] = self.topic
        return draft

    def good_question(self, chunk) -> str:
        words = re.sub(r"[^\u4e00-\u9fff]", "", chunk.text)[:16]
        return f"老师，{words}这块具体要注意哪几点？"

    def __call__(self, request: dict) -> str:
        prompt = request["messages"][-1]["content"]
        chunks = self.shown(prompt)
        chunk = chunks[0]
        kind = self.script[self.calls % len(self.script)]
        self.calls += 1
        if kind in ("good", "fenced", "chatty_list"):
            question = self.good_question(chunk)
            self.good_questions.append(question)
            ids = [c.id for c in chunks]  # cite every passage shown: 1 or 2 citations
            body = json.dumps(self.draft(chunk, question, ids=ids), ensure_ascii=False)
            if kind == "fenced":
                return f"好的，题目如下：\n```json\n{body}\n```"
            if kind == "chatty_list":
                return f"以下是题目：[{body}] 希望有用。"
            return body
        if kind == "unparseable":
            return "抱歉，这段资料我出不了题。"
        if kind == "bad_quote":
            quote = self.quote(chunk)
            question = self.good_question(chunk).replace("老师", "师傅")
            return json.dumps(self.draft(chunk, question, quotes={chunk.id: quote[::-1]}), ensure_ascii=False)
        if kind == "duplicate":
            question = (self.good_questions[-1] if self.good_questions else "老师，咖啡锈病的防治这块具体要注意哪几点？")
            return json.dumps(self.draft(chunk, question.replace("？", "呢？")), ensure_ascii=False)
        if kind == "generic":
            return json.dumps(self.draft(chunk, "根据资料，这段话主要讲了什么内容？"), ensure_ascii=False)
        if kind == "short":
            return json.dumps(self.draft(chunk, "锈病咋办？"), ensure_ascii=False)
        if kind == "no_content":
            return json.dumps(self.draft(chunk, "这个要怎么弄才可以呢？是不是这样啊？"), ensure_ascii=False)
        question = self.good_question(chunk).replace("老师", "请问")
        if kind == "four_ids":
            fakes = [f"{n:08x}#{n}" for n in range(3)]
            draft = self.draft(chunk, question)
            draft["answer"] += "".join(f"[{i}]" for i in fakes)
            return json.dumps(draft, ensure_ascii=False)
        if kind == "unknown_id":
            draft = self.draft(chunk, question)
            draft["answer"] += "[deadbeef#7]"
            draft["evidence"].append({"id": "deadbeef#7", "quote": "这句话不在任何片段里面，是编出来的一句。"})
            return json.dumps(draft, ensure_ascii=False)
        if kind == "no_citation":
            return json.dumps({"question": question, "answer": "按资料里的做法处理即可。", "evidence": []},
                              ensure_ascii=False)
        if kind == "missing_quote":
            draft = self.draft(chunk, question)
            draft["evidence"] = []
            return json.dumps(draft, ensure_ascii=False)
        if kind == "missing_fields":
            return json.dumps({"question": question}, ensure_ascii=False)
        raise AssertionError(kind)


def chat_over(server: FakeOpenAIServer) -> OpenAIChatModel:
    return OpenAIChatModel(LLMConfig(base_url=server.base_url, timeout_s=10, max_retries=0, stream=False), "test-key")


def assert_round_trip(items: list[dict], index, tmp_path: Path) -> None:
    out = tmp_path / "synth.jsonl"
    write_jsonl(items, out)
    gold = load_gold(out)
    assert [g.id for g in gold] == [i["id"] for i in items]
    documents = {d["path"]: d["text"] for d in index.documents.values()}
    mapping = map_gold(gold, documents, index.chunks)
    assert mapping.errors == []
    assert all(mapping.gold[g.id] for g in gold)
    for g in gold:
        assert g.answerable and g.topic in TOPICS and 1 <= len(g.evidence) <= 3
        assert not re.search(r"\[[0-9a-f]{8}#\d+\]", g.answer)  # chunk ids are not stable across chunkings


BAD_KINDS = {
    "unparseable": "unparseable",
    "bad_quote": "quote_not_verbatim",
    "duplicate": "near_duplicate",
    "generic": "generic_question",
    "short": "question_too_short",
    "no_content": "no_content_word",
    "four_ids": "citation_count",
    "no_citation": "citation_count",
    "unknown_id": "unresolved_citation",
    "missing_quote": "missing_quote",
    "missing_fields": "missing_fields",
}


def test_synthesize_keeps_good_drafts_and_rejects_each_bad_kind(index, tmp_path):
    script = ["good", *BAD_KINDS, "fenced", "duplicate", "chatty_list"]
    grower = Grower(index, script)
    with FakeOpenAIServer(default=grower) as server:
        chat = chat_over(server)
        report = synthesize(index, chat, n=5, seed=3, topics=TOPICS, max_calls=40)
        chat.close()
    assert len(report.items) == 5
    assert report.calls == grower.calls == len(server.requests)
    reasons = report.reasons()
    assert set(reasons) == set(BAD_KINDS.values())
    assert reasons["citation_count"] >= 2 and reasons["near_duplicate"] >= 2
    for draft, reason in report.rejected:  # every rejection keeps what was rejected
        assert draft
    assert [i["id"] for i in report.items] == [f"syn-{k:04d}" for k in range(1, 6)]
    assert [i["question"] for i in report.items] == grower.good_questions[:5]
    assert_round_trip(report.items, index, tmp_path)
    # each quote is the cited chunk's own text and maps back to the chunk the draft cited
    for item in report.items:
        for e in item["evidence"]:
            assert any(_squeeze(e["quote"]) in _squeeze(c.text) for c in index.chunks if c.doc == e["doc"])
            assert 15 <= len(_squeeze(e["quote"])) <= 80


def test_topic_balance_caps_each_topic(index, tmp_path):
    grower = Grower(index, ["good"], topic="pest")  # a model that files everything under one topic
    with FakeOpenAIServer(default=grower) as server:
        chat = chat_over(server)
        report = synthesize(index, chat, n=4, seed=0, topics=TOPICS, max_calls=6)
        chat.close()
    cap = balance_cap(4, len(TOPICS))
    assert cap == 2
    assert [i["topic"] for i in report.items] == ["pest"] * cap
    assert report.reasons() == {"topic_cap": 6 - cap}
    assert report.calls == 6
    assert_round_trip(report.items, index, tmp_path)


def test_a_quote_that_maps_to_another_chunk_is_rejected(index):
    """A phrase the document repeats: found in the cited chunk, but the scorer maps its first occurrence elsewhere."""
    docs = {d["path"]: _squeeze(d["text"]) for d in index.documents.values()}
    target = None
    for c in index.chunks:
        s = _squeeze(c.text)
        if len(s) < MIN_CHUNK_CHARS or guess_topic(c) is None:
            continue
        for i in range(0, len(s) - 20):
            q = s[i : i + 20]
            if docs[c.doc].count(q) > 1 and docs[c.doc].find(q) < docs[c.doc].find(s):
                target = (c, q)
                break
        if target:
            break
    assert target, "the sample KB has repeated phrases (cultivar names, spacings)"
    chunk, quote = target

    def reply(messages) -> str:
        return json.dumps({"question": "老师，这个品种的具体情况和种植要点是怎样的？", "answer": f"见资料[{chunk.id}]",
                           "evidence": [{"id": chunk.id, "quote": quote}]}, ensure_ascii=False)

    report = synthesize(index, ScriptedChatModel(default=reply), n=1, seed=0, pool=[chunk], topics=TOPICS)
    assert report.items == []
    assert report.reasons() == {"quote_maps_elsewhere": 1}


def test_sampling_is_stratified_and_seeded(index):
    def sample(seed: int) -> list[str]:
        chat = ScriptedChatModel(default="不是 JSON")
        report = synthesize(index, chat, n=10, seed=seed, topics=TOPICS, max_calls=len(TOPICS))
        assert report.reasons() == {"unparseable": len(TOPICS)}
        return [_SHOWN.findall(m[-1]["content"])[0] for m in chat.calls]

    first = sample(0)
    topics = [guess_topic(index.by_id[i]) for i in first]
    assert sorted(topics) == sorted(TOPICS)  # one chunk of every topic before any topic's second
    assert sample(0) == first
    assert sample(1) != first
    only = synthesize(index, ScriptedChatModel(default="{}"), n=3, seed=0, topics=["pruning"], max_calls=3)
    assert only.reasons() == {"missing_fields": 3}


def test_guess_topic_reads_heading_then_document_name(index):
    by_doc = {}
    for c in index.chunks:
        by_doc.setdefault(c.doc, []).append(guess_topic(c))
    for doc, topic in (("pruning.md", "pruning"), ("diseases.md", "disease"), ("processing_regulation.txt", "processing"),
                       ("shade_intercropping.docx", "shade"), ("farming_calendar.md", "calendar")):
        topics = by_doc[doc]
        assert max(set(topics), key=topics.count) == topic, doc


@pytest.mark.parametrize("reply, expected", [
    ('{"question": "q"}', [{"question": "q"}]),
    ('```json\n{"question": "q"}\n```', [{"question": "q"}]),
    ('好的：\n{"question": "q", "evidence": [{"id": "a"}]}\n以上。', [{"question": "q", "evidence": [{"id": "a"}]}]),
    ('[{"question": "a"}, {"question": "b"}]', [{"question": "a"}, {"question": "b"}]),
    ('{"items": [{"question": "a"}]}', [{"question": "a"}]),
])
def test_parse_drafts_reads_what_models_write(reply, expected):
    assert parse_drafts(reply) == expected


@pytest.mark.parametrize("reply", ["", "抱歉。", "[1, 2]", "```json\n{broken\n```"])
def test_parse_drafts_refuses_replies_without_an_object(reply):
    with pytest.raises(ValueError):
        parse_drafts(reply)


def test_question_checks():
    stop = Tokenizer().stopwords
    assert question_problem("我家地在1900米的山上，种咖啡能行不？", stop) is None
    assert question_problem("叶子背面有黄粉，咋整？", stop) is None
    assert question_problem("咋整？", stop) == "question_too_short"
    assert question_problem("文中提到的施肥时间是什么时候？", stop) == "generic_question"
    assert question_problem("以上内容说的是哪种病啊？", stop) == "generic_question"
    assert question_problem("咖啡咖啡是不是要这样呢？", stop) == "no_content_word"
    assert has_content_word("pH 多少合适", stop)


# ---- the command ---------------------------------------------------------------------------------------------------


def coffeebot(*args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bot.cli", *args], capture_output=True, text=True, timeout=120,
                          cwd=REPO, env=env)


def clean_env(**extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("DEEPSEEK_API_KEY", "OPENAI_API_KEY")}
    return env | extra


def config_for(tmp_path: Path, sample_cfg, base_url: str = "http://127.0.0.1:9/v1") -> Path:
    path = tmp_path / "config.toml"
    path.write_text(
        f'[paths]\nkb_dir = "{REPO / "kb"}"\ndata_dir = "{sample_cfg.data_dir}"\n'
        f'[models]\nembedder = "hashing"\nreranker = ""\n[retrieval]\nranker_encoder = "off"\n'
        f'[llm]\nbase_url = "{base_url}"\ntimeout_s = 10\nmax_retries = 0\n',
        encoding="utf-8",
    )
    return path


def test_cli_gold_synth_writes_checked_items(sample_cfg, index, tmp_path):
    grower = Grower(index, ["good", "generic", "bad_quote", "fenced"])
    out = tmp_path / "out" / "synth.jsonl"
    with FakeOpenAIServer(default=grower) as server:
        config = config_for(tmp_path, sample_cfg, server.base_url)
        done = coffeebot("--config", str(config), "gold", "synth", "--n", "3", "--out", str(out), "--seed", "1",
                         env=clean_env(DEEPSEEK_API_KEY="test-key"))
    assert done.returncode == 0, done.stderr
    assert "kept 3 of 3 wanted" in done.stdout
    assert "rejected 1: generic_question" in done.stdout and "rejected 1: quote_not_verbatim" in done.stdout
    assert server.requests[0]["model"] == "deepseek-chat"
    items = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert len(items) == 3
    assert set(items[0]) == {"id", "question", "answer", "evidence", "topic", "answerable"}
    assert_round_trip(items, index, tmp_path)


def test_cli_gold_synth_without_a_key_says_what_to_set(sample_cfg, tmp_path, monkeypatch, capsys):
    for name in ("DEEPSEEK_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    out = tmp_path / "x.jsonl"
    assert cli_main(["--config", str(config_for(tmp_path, sample_cfg)), "gold", "synth", "--out", str(out)]) == 2
    assert "DEEPSEEK_API_KEY" in capsys.readouterr().err
    assert not out.exists()


def test_cli_gold_synth_refuses_unknown_topics(sample_cfg, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("DEEPSEEK_API_KEY", "k")
    argv = ["--config", str(config_for(tmp_path, sample_cfg)), "gold", "synth", "--out", str(tmp_path / "x.jsonl"),
            "--topics", "pruning,futures"]
    assert cli_main(argv) == 2
    assert "futures" in capsys.readouterr().err
