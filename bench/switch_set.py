"""Write a topic-switch set from a single-turn gold set: every answerable item asked after the previous item's
exchange (its question and reference answer) as history. A good system answers each as if it were asked alone.

    .venv/bin/python bench/switch_set.py tests/data/eval/dev.jsonl tests/data/eval/dev-switch.jsonl
"""
from __future__ import annotations

import json
import sys
from pathlib import Path


def switch_items(items: list[dict]) -> list[dict]:
    out = []
    for prev, item in zip(items, items[1:]):
        if item.get("history") or prev.get("history"):
            continue
        history = [{"role": "user", "content": prev["question"]}, {"role": "assistant", "content": prev["answer"]}]
        out.append(item | {"id": f"{item['id']}-after-{prev['id']}", "history": history, "kind": "switch"})
    return out


def main() -> None:
    src, dst = Path(sys.argv[1]), Path(sys.argv[2])
    items = [json.loads(line) for line in src.read_text(encoding="utf-8").splitlines() if line.strip()]
    dst.write_text("".join(json.dumps(i, ensure_ascii=False) + "\n" for i in switch_items(items)), encoding="utf-8")
    print(f"{dst}: {len(switch_items(items))} items")


if __name__ == "__main__":
    main()
