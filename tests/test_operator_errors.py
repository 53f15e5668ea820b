"""What an operator sees from the `coffeebot` command when something is off: one readable line and a non-zero
status, each warning once, help for every option, and `--version`."""
from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO


def coffeebot(*args: str, env: dict | None = None, cwd: Path = REPO, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bot.cli", *args], capture_output=True, text=True, timeout=timeout,
                          cwd=cwd, env=env, stdin=subprocess.DEVNULL)


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nobody listens once the socket is closed


def test_version():
    out = coffeebot("--version")
    assert out.returncode == 0 and out.stdout.startswith("coffeebot ") and out.stdout.split()[1][0].isdigit()


def test_models_fetch_without_a_route_is_one_line_naming_hf_endpoint_and_the_folder(tmp_path):
    config = tmp_path / "config.toml"
    config.write_text('[models]\nembedder = "sentence-transformers/paraphrase-multilingual-MiniLM-L12-v2"\n',
                      encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    env.update(HF_ENDPOINT=f"http://127.0.0.1:{closed_port()}", HF_HOME=str(tmp_path / "hf"))
    out = coffeebot("--config", str(config), "models", "fetch", env=env)
    assert out.returncode != 0
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert "HF_ENDPOINT" in lines[0] and str(tmp_path / "hf" / "hub") in lines[0] and "Traceback" not in out.stderr
    assert "HF_HUB_OFFLINE" not in lines[0]  # it went online: the operator did not ask for offline


def test_models_fetch_with_hf_hub_offline_says_so(tmp_path):
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_HOME=str(tmp_path / "hf"))
    out = coffeebot("models", "fetch", env=env, cwd=tmp_path)
    assert out.returncode != 0 and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert "HF_HUB_OFFLINE" in out.stderr and "HF_ENDPOINT" in out.stderr


def test_eval_with_a_missing_gold_file_is_one_line(tmp_path):
    out = coffeebot("eval", "--gold", str(tmp_path / "missing.jsonl"), cwd=REPO)
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert "missing.jsonl" in out.stderr and "tests/data/eval" in out.stderr


def test_eval_rejects_unknown_systems_and_lists_the_valid_ones():
    out = coffeebot("eval", "--gold", "tests/data/eval/dev.jsonl", "--systems", "full,foo")
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert "foo" in out.stderr and "full, b1, b2a, b2b, b3, b4, b5, simple" in out.stderr
    assert not out.stdout


def test_every_option_has_help():
    from bot.cli import build_parser

    missing = []

    def walk(parser: argparse.ArgumentParser, path: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, f"{path} {name}")
            elif not isinstance(action, argparse._HelpAction) and not action.help:
                missing.append(f"{path} {'/'.join(action.option_strings) or action.dest}")

    walk(build_parser(), "coffeebot")
    assert not missing, missing


def test_the_readme_eval_commands_work_in_a_clone():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    golds = [w.strip("`") for w in readme.split() if w.strip("`").endswith(".jsonl") and "eval" in w]
    assert golds and "../shared/eval" not in readme
    for gold in golds:
        assert (REPO / gold).is_file(), gold


def test_each_fallback_warning_is_printed_once(sample_cfg, tmp_path):
    config = tmp_path / "config.toml"
    config.write_text(
        f'[paths]\nkb_dir = "{sample_cfg.kb_dir}"\ndata_dir = "{sample_cfg.data_dir}"\n'
        '[models]\nembedder = "no-such-org/no-such-embedder"\nreranker = "no-such-org/no-such-reranker"\n'
        '[retrieval]\nranker_encoder = "off"\n',
        encoding="utf-8")
    out = coffeebot("--config", str(config), "ask", "咖啡锈病怎么防治")
    assert out.returncode == 0, out.stderr
    assert out.stderr.count("no-such-embedder") >= 1
    assert out.stderr.count("embedder fallback in use") == 1, out.stderr
    assert out.stderr.count("no-such-reranker") == 1, out.stderr


@pytest.mark.slow
def test_eval_logs_each_warning_once(eval_cfg, tmp_path):
    """One engine per system: a model fallback is still said once per command, not once per system. (The shared
    evaluation folder: the fallback is the hashing embedder, so its evaluation index is built once for the session.)"""
    gold = tmp_path / "gold.jsonl"
    gold.write_text("".join((REPO / "tests/data/eval/dev.jsonl").read_text(encoding="utf-8").splitlines(True)[:3]),
                    encoding="utf-8")
    config = tmp_path / "config.toml"
    config.write_text(
        f'[paths]\nkb_dir = "{eval_cfg.kb_dir}"\ndata_dir = "{eval_cfg.data_dir}"\n'
        '[models]\nembedder = "no-such-org/no-such-embedder"\nreranker = "no-such-org/no-such-reranker"\n'
        '[retrieval]\nranker_encoder = "off"\n',
        encoding="utf-8")
    # where no test of this process built the evaluation index yet, this eval builds it and trains the ranker on
    # every gold set (the test took 176 s on 2 cores with another process busy): a bound against a hang, not a target
    out = coffeebot("--config", str(config), "eval", "--gold", str(gold), "--systems", "full,b1,b2b",
                    "--out", str(tmp_path / "out"), "--resamples", "50", timeout=360)
    assert out.returncode == 0, out.stderr
    warnings = [line.split(" WARNING ", 1)[1] for line in out.stderr.splitlines() if " WARNING " in line]
    assert warnings and len(warnings) == len(set(warnings)), warnings
