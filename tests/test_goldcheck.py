"""The blind writers' gold checker (tests/data/eval/briefs/goldcheck.py) runs from a copy outside the repo: round 24's
copy in /tmp/r24/check failed with IndexError, for it took the folder four levels above itself for the repo."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHECKER = ROOT / "tests" / "data" / "eval" / "briefs" / "goldcheck.py"
ITEM = {"id": "g-001", "question": "湿法加工发酵要多长时间", "answer": "12～36 小时", "topic": "processing",
        "answerable": True, "kind": "single",
        "evidence": [{"doc": "processing_regulation.txt", "quote": "发酵时间一般为 12～36 h"}]}


def _run(checker: Path, gold: Path, root: str | None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "COFFEEBOT_ROOT"} | ({"COFFEEBOT_ROOT": root} if root else {})
    return subprocess.run([sys.executable, str(checker), str(gold)], capture_output=True, text=True, env=env,
                          cwd=gold.parent, timeout=120)


def test_a_copy_outside_the_repo_checks_against_the_repo_it_is_pointed_at(tmp_path):
    gold = tmp_path / "set.jsonl"
    gold.write_text(json.dumps(ITEM, ensure_ascii=False) + "\n", encoding="utf-8")
    copy = tmp_path / "check" / "goldcheck.py"
    copy.parent.mkdir()
    shutil.copy(CHECKER, copy)
    done = _run(copy, gold, str(ROOT))
    assert done.returncode == 0 and "1 items, 0 errors" in done.stdout, done.stdout + done.stderr
    lost = _run(copy, gold, None)  # nowhere to find the KB: said plainly, no traceback
    assert lost.returncode != 0 and "COFFEEBOT_ROOT" in lost.stderr and "Traceback" not in lost.stderr
    assert "1 items, 0 errors" in _run(CHECKER, gold, None).stdout  # in the repo it finds the repo itself
    wrong = tmp_path / "wrong.jsonl"
    wrong.write_text(json.dumps({**ITEM, "evidence": [{"doc": "processing_regulation.txt", "quote": "这句话不在文件里"}]},
                                ensure_ascii=False) + "\n", encoding="utf-8")
    assert "0 errors" not in _run(copy, wrong, str(ROOT)).stdout
