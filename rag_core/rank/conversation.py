"""The conversation ranker: the final order of a question that continues the conversation.

A follow-up (它, 那…呢, a question with no topic of its own) is read several ways, and each reading knows something:
the pipeline's own order (the question with the conversation's topic carried in, the passages of the previous
question's documents first, the last reply's passage at rank 3), the question asked alone, the question with the
topic carried, and the passage the last reply stood on. Which one to trust depends on the question: another detail
of what the reply said (那雨季呢) lives in or beside the reply's passage; what the reply did not say (晒过头了会咋样)
in the question's own words. A linear model over these relations, trained pairwise on follow-ups and topic switches
written as growers ask them, picks the order.

Every feature is a rank, a score gap within one reading (relative to its own top-5 spread, so a retrained passage
ranker does not move it), a relation to the reply's passage or the previous question's documents, whether a sentence
the reply has not told states the figure asked, or the IDF share of the question's words a passage (or one untold
sentence) holds: none names a word or a document, so the weights carry over to a knowledge base
an admin has changed. The readings' ranks and gaps are the passage ranker's, so there is one model per passage ranker
(with e5 features and without: each learned its own order); under any other (a cross-encoder, fusion order) the
pipeline's own order stays. They ship in rag_core/resources/conversation_ranker.json, trained by

    .venv/bin/python -m rag_core.rank.conversation [--config F] [--out F] [GOLD.jsonl …]

on the follow-ups and switches of the sets the passage ranker trains on (eval/gold.py GOLD_FILES; never CHECK_FILES,
dev2.jsonl and the newest round's blind sets), each item twice: after its written reply and after the engine's own
(cited, as a user has it). A missing or unreadable file keeps the pipeline's own order, said once in the log.
"""
from __future__ import annotations

import argparse
import json
import logging
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from ..eval.gold import GOLD_DIR, GOLD_FILES
from ..lexical import Tokenizer
from ..records import REPLIES, Chunk, Hit
from ..relevance import asked_figures
from ..sentences import sentence_spans
from .features import CorpusStats, _bigram_set, _coverage, query_terms
from .model import fit_pairwise

log = logging.getLogger(__name__)

FEATURES = (
    "result_rr",  # 1 / rank in the pipeline's own order (0: not in its evidence)
    "result_top",  # first in the pipeline's own order
    "alone_rr",  # 1 / rank of the question asked alone
    "carried_rr",  # 1 / rank of the question with the conversation's topic carried in
    "alone_gap",  # score below the alone reading's best, relative to its top-5 spread (-3: not in it)
    "carried_gap",  # … the carried reading's
    "said",  # the passage the last reply stood on
    "said_next",  # the passage right after it in its document
    "said_previous",  # the one right before it
    "said_section",  # another passage of its section
    "said_document",  # a passage of its document
    "previous_document",  # a passage of a document the previous question found first
    "own_coverage",  # IDF share of the question's own words in the passage (heading and text)
    "carried_coverage",  # … of the carried reading's words
    "followup_x_carried",  # carried_rr of a question read as a follow-up (not one HAR could not tell)
    "followup_x_said",  # said, of a question read as a follow-up
    "ambiguous_x_alone",  # alone_rr of a question HAR could not tell (那… naming a topic)
    "cited_x_said",  # said, where the reply cited it (the bot's own reply, as a user has it, not a gold set's words)
    "cited_x_said_document",  # said_document, where the reply cited its passage
    "reply_overlap",  # share of the passage's character pairs the last reply already says
    "novel_coverage",  # IDF share of the question's words the reply does not use, in the passage
    "untold_figure",  # the question asks a figure (要晒好久, 翻几回) and a sentence the reply did not tell states it
    "told_figure",  # … and every sentence of the passage stating it, the reply told already
    "untold_sentence",  # the most of the question's words one sentence the reply did not tell holds (IDF share)
)
RESOURCE = Path(__file__).resolve().parent.parent / "resources" / "conversation_ranker.json"
FORMAT = 5
L2 = 10.0  # leave-one-set-out over 13 conversation sets: 3 ≈ 10 ≈ 30 (follow-up Hit@1 0.458, 0.455, 0.449)
GAP_FLOOR = -3.0


@dataclass(frozen=True)
class Readings:
    """What the pipeline knows about a question that continues the conversation, before the final order."""

    question: str  # as asked (keyboard slips put right)
    carried_query: str  # the question with the conversation's topic carried in
    kind: str  # "followup" or "ambiguous" (history.classify)
    result: tuple[Hit, ...]  # the pipeline's own order
    alone: tuple[Hit, ...]
    carried: tuple[Hit, ...]
    said: Chunk | None  # the passage the last reply stood on
    previous_docs: frozenset[str]
    neighbours: tuple[Chunk, ...] = ()  # the passages right before and after it in its document: candidates too
    said_cited: bool = False  # the reply cited its passage (the bot's own reply), rather than being matched by its words
    reply: str = ""  # the last reply's text: what the grower has been told already


@dataclass(frozen=True)
class ConversationRanker:
    mean: np.ndarray
    scale: np.ndarray
    weights: np.ndarray
    info: dict  # what it was trained on (gold files, questions, the passage ranker)

    def score(self, x: np.ndarray) -> np.ndarray:
        return ((x - self.mean) / self.scale) @ self.weights

    def order(self, readings: Readings, position: Mapping[str, int], tokenizer: Tokenizer,
              stats: CorpusStats) -> tuple[Hit, ...]:
        """The readings' passages in this model's order, as many as the pipeline's own evidence. Each keeps its
        Hit, with the score of the place it takes in the pipeline's order (the margin the citations are chosen by
        stays the one that order had)."""
        hits, x = feature_rows(readings, position, tokenizer, stats)
        if not hits:
            return readings.result
        order = np.argsort(-self.score(x), kind="stable")[: len(readings.result)]
        scores = [h.score for h in readings.result]
        return tuple(Hit(hits[i].chunk, scores[rank], hits[i].ranks) for rank, i in enumerate(order))

    def to_json(self) -> dict:
        return {**{k: [round(float(v), 6) for v in getattr(self, k)] for k in ("mean", "scale", "weights")},
                "info": self.info}


class ConversationRankerUnavailable(RuntimeError):
    """The shipped weights are missing or do not fit this code; the message says which."""


def from_json(data: dict) -> ConversationRanker:
    arrays = [np.asarray(data[k], dtype=np.float64) for k in ("mean", "scale", "weights")]
    if any(a.shape != (len(FEATURES),) or not np.all(np.isfinite(a)) for a in arrays) or np.any(arrays[1] <= 0):
        raise ConversationRankerUnavailable("weights of the wrong shape, not finite, or scales not positive")
    return ConversationRanker(*arrays, dict(data.get("info", {})))


def models_from_json(data: dict) -> dict[str, ConversationRanker]:
    """{passage ranker name: its conversation ranker}."""
    if data.get("format") != FORMAT or tuple(data.get("features", ())) != FEATURES:
        raise ConversationRankerUnavailable("trained on other features than this code computes")
    return {name: from_json(model) for name, model in data["models"].items()}


def models_to_json(models: Mapping[str, ConversationRanker]) -> dict:
    return {"format": FORMAT, "features": list(FEATURES), "models": {k: m.to_json() for k, m in models.items()}}


@lru_cache(maxsize=4)
def load(path: Path = RESOURCE) -> dict[str, ConversationRanker]:
    """The shipped models by passage ranker, or none (said once) when the file is missing or unusable: the
    pipeline's own order stays."""
    try:
        return models_from_json(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError, TypeError, AttributeError, ConversationRankerUnavailable) as exc:
        log.warning("conversation ranker %s unusable (%s): follow-ups keep the pipeline's own order", path.name, exc)
        return {}


def for_ranker(name: str, path: Path = RESOURCE) -> ConversationRanker | None:
    """The model trained over the passage ranker `name` ("learned-mlp+e5", "learned-mlp"); None for any other."""
    return load(path).get(name)


def _rr(hits: Sequence[Hit], chunk_id: str) -> float:
    return next((1.0 / (i + 1) for i, h in enumerate(hits) if h.chunk.id == chunk_id), 0.0)


def _gap(hits: Sequence[Hit], chunk_id: str) -> float:
    at = next((i for i, h in enumerate(hits) if h.chunk.id == chunk_id), None)
    if at is None:
        return GAP_FLOOR
    spread = hits[0].score - hits[min(4, len(hits) - 1)].score
    return max((hits[at].score - hits[0].score) / (spread + 1e-6), GAP_FLOOR)


def _share_told(text: str, told: set[str]) -> float:
    """The share of the text's character pairs among `told` (0 for a text with none)."""
    pairs = _bigram_set(text)
    return len(pairs & told) / len(pairs) if pairs else 0.0


TOLD_SENTENCE = 0.5  # a sentence whose character pairs the reply says this share of, it has told


def _untold(text: str, told: set[str], figures: Sequence, words: Sequence[tuple[str, float]]) -> tuple[float, float, float]:
    """What of a passage the last reply has not told: whether an untold sentence states every figure asked, whether
    only told ones do, and the largest IDF share of `words` one untold sentence holds."""
    sentences = [(s, _share_told(s, told) < TOLD_SENTENCE) for s in (text[a:b] for a, b in sentence_spans(text))]
    stating = [untold for s, untold in sentences if figures and all(f.search(s) for f in figures)]
    return (float(any(stating)), float(bool(stating) and not any(stating)),
            max((_coverage(words, s) for s, untold in sentences if untold), default=0.0))


def feature_rows(readings: Readings, position: Mapping[str, int], tokenizer: Tokenizer,
                 stats: CorpusStats) -> tuple[list[Hit], np.ndarray]:
    """The readings' distinct passages (the pipeline's order first) and one row of FEATURES each."""
    first: dict[str, Hit] = {}
    for hit in (*readings.result, *readings.alone, *readings.carried, *(Hit(c, 0.0) for c in readings.neighbours)):
        first.setdefault(hit.chunk.id, hit)
    hits = list(first.values())
    own = query_terms(readings.question, tokenizer, stats).words
    carried = query_terms(readings.carried_query, tokenizer, stats).words
    said = readings.said
    followup, ambiguous = readings.kind == "followup", readings.kind == "ambiguous"
    told = _bigram_set(readings.reply)
    novel = [(w, idf) for w, idf in own if w not in readings.reply]
    figures = asked_figures(readings.question)
    x = np.zeros((len(hits), len(FEATURES)))
    for row, hit in enumerate(hits):
        c, cid = hit.chunk, hit.chunk.id
        same_doc = said is not None and c.docid == said.docid
        step = position.get(cid, 0) - position.get(said.id, 0) if same_doc else 0
        text = f"{c.section}\n{c.text}"
        alone_rr, carried_rr = _rr(readings.alone, cid), _rr(readings.carried, cid)
        is_said = float(said is not None and cid == said.id)
        x[row] = (
            _rr(readings.result, cid), float(bool(readings.result) and readings.result[0].chunk.id == cid),
            alone_rr, carried_rr, _gap(readings.alone, cid), _gap(readings.carried, cid),
            is_said, float(same_doc and step == 1), float(same_doc and step == -1),
            float(same_doc and c.section == said.section and not is_said), float(same_doc),
            float(c.docid in readings.previous_docs),
            _coverage(own, text), _coverage(carried, text),
            followup * carried_rr, followup * is_said, ambiguous * alone_rr,
            readings.said_cited * is_said, float(readings.said_cited and same_doc),
            _share_told(c.text, told), _coverage(novel, text), *_untold(c.text, told, figures, own),
        )
    return hits, x


# --- training ------------------------------------------------------------------------------------------------------

def examples(engine, paths: Sequence[Path], replies: Sequence[str] = REPLIES) -> list[tuple[Readings, frozenset[str]]]:
    """(readings, gold chunk ids) of every answerable item with history that the pipeline reads as continuing the
    conversation, over `engine`'s build: after the gold set's written replies and after the engine's own (cited, as a
    user has them: `eval --replies own`), per `replies`."""
    from ..eval.gold import load_gold, map_gold
    from ..eval.run import own_history
    from ..pipeline import Options

    documents = {d["path"]: d["text"] for d in engine.index.documents.values()}
    out, answered = [], {}
    for path in paths:
        items = [i for i in load_gold(path) if i.answerable and i.history]
        mapping = map_gold(items, documents, engine.index.chunks)
        for item in items:
            gold = frozenset(mapping.gold.get(item.id, ()))
            if not gold:
                continue
            for which in replies:
                history = item.history if which == "written" else own_history(engine, item.history, Options(), answered)
                _, readings = engine.read(item.question, history)
                if readings is not None:
                    out.append((readings, gold))
    return out


def train(rows: Sequence[tuple[Readings, frozenset[str]]], position: Mapping[str, int], tokenizer: Tokenizer,
          stats: CorpusStats, info: dict | None = None) -> ConversationRanker:
    groups = []
    for readings, gold in rows:
        hits, x = feature_rows(readings, position, tokenizer, stats)
        y = np.array([1.0 if h.chunk.id in gold else 0.0 for h in hits])
        if 0 < y.sum() < len(y):
            groups.append((x, y))
    mean, scale, w = fit_pairwise(groups, l2=L2)
    return ConversationRanker(mean, scale, w, {**(info or {}), "questions": len(groups)})


def main(argv: Sequence[str] | None = None) -> int:
    import dataclasses

    from ..config import load_config
    from ..pipeline import load_engine

    p = argparse.ArgumentParser(prog="python -m rag_core.rank.conversation", description=__doc__.split("\n\n")[0])
    p.add_argument("--config", default=None)
    p.add_argument("--out", type=Path, default=RESOURCE)
    p.add_argument("gold", nargs="*", type=Path, help=f"gold files (default: the passage ranker's, {', '.join(GOLD_FILES)})")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    cfg = load_config(args.config)
    paths = args.gold or [GOLD_DIR / name for name in GOLD_FILES]
    models: dict[str, ConversationRanker] = {}
    for encoder in (cfg.retrieval.ranker_encoder, "off"):  # the passage ranker with e5 features, then without
        retrieval = dataclasses.replace(cfg.retrieval, ranker_encoder=encoder, learned_ranker=True)
        engine = load_engine(dataclasses.replace(cfg, retrieval=retrieval), with_reranker=False)
        ranker = engine.retriever.reranker_name
        if ranker in models or ranker == "none":
            continue
        rows = examples(engine, paths)
        models[ranker] = train(rows, engine.index.position, engine.tokenizer, engine.corpus_stats,
                               {"ranker": ranker, "gold_files": [p.name for p in paths], "l2": L2})
        print(f"{ranker}: {models[ranker].info['questions']} questions; weights "
              + ", ".join(f"{f} {w:+.2f}" for f, w in zip(FEATURES, models[ranker].weights)))
    if not models:
        print("no learned passage ranker in this build: nothing to train over", file=sys.stderr)
        return 1
    args.out.write_text(json.dumps(models_to_json(models), ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
