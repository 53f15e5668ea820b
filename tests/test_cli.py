"""The `coffeebot` command as other tools use it: JSON contracts, batches, piped chat, clear errors."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

CONTRACT_KEYS = {"query", "rewritten_query", "evidence", "timings_ms", "warnings"}
HIT_KEYS = {"id", "doc", "text", "score", "ranks"}


def write_config(path: Path, data_dir: Path, kb_dir: Path = REPO / "kb") -> Path:
    path.write_text(
        f'[paths]\nkb_dir = "{kb_dir}"\ndata_dir = "{data_dir}"\n[models]\nembedder = "hashing"\nreranker = ""\n'
        '[retrieval]\nranker_encoder = "off"\n',
        encoding="utf-8",
    )
    return path


def coffeebot(*args: str, stdin: str | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "bot.cli", *args], input=stdin, capture_output=True, text=True, timeout=120,
        cwd=REPO, env=env,
    )


@pytest.fixture(scope="module")
def config_file(sample_cfg, tmp_path_factory) -> Path:
    return write_config(tmp_path_factory.mktemp("cli") / "config.toml", sample_cfg.data_dir)


def test_search_json_contract(config_file):
    out = coffeebot("--config", str(config_file), "search", "叶子背面有黄粉咋办", "--json")
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert CONTRACT_KEYS <= result.keys()
    assert len(result["evidence"]) == 5
    assert HIT_KEYS <= result["evidence"][0].keys()
    assert {"bm25", "dense", "rrf", "rerank", "total"} <= result["timings_ms"].keys()
    assert any("reranker" in w for w in result["warnings"])


def test_ask_batch_prints_one_result_a_line_with_ids(config_file, tmp_path):
    batch = tmp_path / "q.jsonl"
    batch.write_text(
        json.dumps({"id": "a", "question": "咖啡果小蠹怎么防治？"}, ensure_ascii=False) + "\n"
        + json.dumps({"id": 7, "question": "那要用什么药？", "history": [
            {"role": "user", "content": "咖啡叶子背面有橙黄色粉末"}, {"role": "assistant", "content": "这是咖啡锈病。"}]},
            ensure_ascii=False) + "\n",
        encoding="utf-8",
    )
    out = coffeebot("--config", str(config_file), "ask", "--batch", str(batch), "--json")
    assert out.returncode == 0, out.stderr
    lines = [json.loads(line) for line in out.stdout.splitlines()]
    assert [r["id"] for r in lines] == ["a", 7]
    assert all(r["mode"] == "extractive" and r["citations"] for r in lines)
    assert lines[1]["rewritten_query"] != lines[1]["query"]
    for r in lines:
        for c in r["citations"]:
            assert f"[{c['id']}]" in r["answer"]


def test_piped_chat_prints_plain_answers_and_exits(config_file):
    out = coffeebot("--config", str(config_file), "chat", stdin="咖啡锈病怎么防治\n/source zz\n")
    assert out.returncode == 0, out.stderr
    assert "以下内容摘自知识库" in out.stdout and "来源：" in out.stdout
    assert "问>" not in out.stdout  # no prompt when stdin is not a terminal
    assert "不是有效的引用编号" in out.stdout


def test_source_json(config_file, sample_engine):
    cid = sample_engine.index.chunks[3].id
    out = coffeebot("--config", str(config_file), "source", cid, "--json")
    assert out.returncode == 0
    assert json.loads(out.stdout)["text"] == sample_engine.index.chunks[3].text


def test_missing_index_is_a_clear_message(tmp_path):
    cfg = write_config(tmp_path / "config.toml", tmp_path / "empty-data")
    out = coffeebot("--config", str(cfg), "search", "咖啡锈病")
    assert out.returncode == 2
    assert "coffeebot index" in out.stderr and "Traceback" not in out.stderr


def test_empty_kb_is_a_clear_error_and_bad_files_are_skipped(tmp_path):
    kb = tmp_path / "kb"
    kb.mkdir()
    cfg = write_config(tmp_path / "config.toml", tmp_path / "data", kb)
    out = coffeebot("--config", str(cfg), "index")
    assert out.returncode == 2 and "no supported files" in out.stderr
    (kb / "good.md").write_text("# 咖啡锈病\n咖啡锈病由咖啡驼孢锈菌引起，雨季发生较重。", encoding="utf-8")
    (kb / "broken.pdf").write_bytes(b"%PDF-1.4 not really a pdf")
    (kb / "empty.txt").write_text("", encoding="utf-8")
    out = coffeebot("--config", str(cfg), "index", "--json")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["documents"] == 1
    assert {f["path"] for f in report["failures"]} == {"broken.pdf", "empty.txt"}


def test_empty_question_is_a_clear_error(config_file):
    out = coffeebot("--config", str(config_file), "search", "  ")
    assert out.returncode == 2 and "empty question" in out.stderr
