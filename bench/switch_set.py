"""Write a topic-switch set from a single-turn gold set: every answerable item asked after the previous item's
exchange (its question and reference answer) as history. A good system answers each as if it were asked alone.
With --lean each switched question opens with "那", as people often start a new question in a chat: a leaning
opening is a hint, not proof, of a follow-up.

    .venv/bin/python bench/switch_set.py tests/data/eval/dev.jsonl tests/data/eval/dev-switch.jsonl
    .venv/bin/python bench/switch_set.py --lean tests/data/eval/dev.jsonl tests/data/eval/dev-switch-lean.jsonl
"""
from __future__ import annotations

import json
import sys
from pathlib import Path


def switch_items(items: list[dict], lean: bool = False) -> list[dict]:
    out = []
    for prev, item in zip(items, items[1:]):
        if item.get("history") or prev.get("history"):
            continue
        history = [{"role": "user", "content": prev["question"]}, {"role": "assistant", "content": prev["answer"]}]
        question = "那" + item["question"] if lean else item["question"]
        out.append(item | {"id": f"{item['id']}-after-{prev['id']}", "question": question, "history": history,
                           "kind": "switch"})
    return out


def main() -> None:
    args = sys.argv[1:]
    lean = "--lean" in args
    src, dst = (Path(a) for a in args if a != "--lean")
    items = [json.loads(line) for line in src.read_text(encoding="utf-8").splitlines() if line.strip()]
    out = switch_items(items, lean)
    dst.write_text("".join(json.dumps(i, ensure_ascii=False) + "\n" for i in out), encoding="utf-8")
    print(f"{dst}: {len(out)} items")


if __name__ == "__main__":
    main()
