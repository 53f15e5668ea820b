"""One grower's chat, asked as the console asks it (each answer joins the history of the next question), printed as a
transcript: the question, how it was read (HAR), the answer and what each citation opens. Issue 13's 12-question
chat: new questions after other topics, three follow-ups, one question the knowledge base cannot answer.

    .venv/bin/python bench/chat_transcript.py [--config F] [--out bench/results/chat-transcript.md]

Needs a current build (`coffeebot index`, as `make run` makes on first use); offline, extractive answers."""
from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rag_core.config import load_config  # noqa: E402
from rag_core.pipeline import load_engine  # noqa: E402
from rag_core.records import Turn  # noqa: E402

CHAT = (
    "咖啡树主干长到多高要打顶？",
    "成龄咖啡树一年施几次肥，每株施多少？",
    "湿法加工发酵要多长时间？",
    "咖啡树叶子发黄是缺什么肥？",
    "咖啡锈病怎么防治？",
    "那用什么药？什么时候喷？",  # follow-up: the rust chapter's chemical control
    "要打几次？",  # follow-up of a follow-up
    "昨晚下霜了，咖啡叶子冻黑了一大片，咋办？",
    "那冻死的枝条什么时候剪？",  # follow-up: frost recovery
    "咖啡果小蠹怎么防治？",
    "果子红到什么程度采摘最好？",
    "今年咖啡豆收购价多少钱一公斤？",  # not in the knowledge base: refused
)


def transcript(engine, questions=CHAT) -> list[str]:
    chunks = {c.id: c for c in engine.index.chunks}
    history: list[Turn] = []
    lines = [f"Build {engine.index.build_id}, reranker {engine.retriever.reranker_name}, extractive answers.", ""]
    for n, question in enumerate(questions, 1):
        answer = engine.answer(question, history)
        lines.append(f"**{n}. {question}**")
        if answer.rewritten_query != question:
            lines.append(f"(read as: {answer.rewritten_query})")
        lines += ["", "```", answer.text, "```"]
        for c in answer.citations:
            lines.append(f"- [{c.id}] {chunks[c.id].doc} › {chunks[c.id].section.rpartition(' › ')[2] or chunks[c.id].title}")
        lines.append("")
        history += [Turn("user", question), Turn("assistant", answer.text)]
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    text = "\n".join(transcript(load_engine(load_config(args.config)))) + "\n"
    if args.out:
        args.out.write_text("# The 12-question chat (issue 13)\n\n" + text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
