"""Synthetic knowledge bases N times the size of kb/, for scale benchmarks (bench/retrieval.py).

    .venv/bin/python bench/synth.py OUT_DIR --scale 10 [--seed 7]

OUT_DIR gets a copy of kb/ (so the dev questions keep their gold passages) plus scale-1 variants of every document
under syn/vNNN/, written as .md (from .md sources) or .txt (everything else; .pdf and .docx are read with the
project's own readers first). A variant keeps its source's layout (headings, FAQ pairs, the hard wraps of the
*_pdfnoisy.txt scans) and varies the body text, so chunk lengths and term statistics stay close to the real KB's
while no two chunks repeat:
  - about a quarter of body blocks are replaced by body blocks of documents of the same kind
    (chapter / regulation / FAQ / scanned / other), and neighbouring body blocks are sometimes swapped;
  - 18 % of body sentences are replaced by a sentence of another document of the same kind, and another 32 % are
    led in by a connective or a local attribution (此外，/ 据保山农技站的经验，...); every body line (block, in
    scans) gets at least one of the two;
  - domain terms are remapped consistently within the variant, inside their group (cultivars, places, diseases,
    pests, agrochemicals, fertilisers, shade trees);
  - numbers in body text are rescaled by 0.7-1.4 (clause numbers, years and headings are left alone);
  - common function phrases are swapped for their synonyms (一般/通常, 及时/尽早, ...) half of the time;
  - month numbers are kept, so 9–12 月 stays a plausible season.
The vocabulary therefore stays the KB's own (a real 100x corpus would also bring new words: BM25 postings here
are, if anything, denser than real ones, which is the pessimistic side for bm25s).
"""
from __future__ import annotations

import argparse
import random
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KB = ROOT / "kb"

TERM_GROUPS = [
    ["卡蒂姆", "铁皮卡", "波旁", "萨奇姆", "瑰夏", "帕卡马拉", "卡杜拉"],
    ["普洱", "保山", "德宏", "临沧", "西双版纳", "文山", "红河", "怒江", "大理"],
    ["锈病", "褐眼斑病", "炭疽病", "根腐病", "枯枝病"],
    ["猝倒病", "立枯病"],
    ["咖啡果小蠹", "旋皮天牛", "根粉蚧", "蚜虫", "介壳虫"],
    ["三唑酮", "戊唑醇", "多菌灵", "甲基硫菌灵", "代森锰锌"],
    ["波尔多液", "氢氧化铜", "石硫合剂"],
    ["尿素", "钙镁磷肥", "硫酸钾", "复合肥"],
    ["有机肥", "农家肥"],
    ["香蕉", "澳洲坚果", "木豆", "山毛豆"],
]
PHRASES = [("一般", "通常"), ("及时", "尽早"), ("同时", "并且"), ("注意", "留意"), ("比较", "较为"), ("必须", "务必"),
           ("立即", "马上"), ("尽量", "尽可能"), ("如果", "假如"), ("但是", "不过"), ("大约", "大概"), ("容易", "易于"),
           ("不应", "不宜"), ("适当", "适度"), ("选择", "选用"), ("清除", "除去"), ("保持", "维持"), ("提高", "提升"),
           ("减少", "降低"), ("防止", "避免"), ("完成", "做完"), ("及早", "提早")]
LEADS = ["此外，", "另外，", "一般来说，", "实践中，", "需要说明的是，", "从多年观察看，", "据{place}农技站的经验，",
         "在{place}的咖啡园，", "{place}的种植户反映，", "按{place}的做法，"]
_TERM_RE = re.compile("|".join(sorted({t for g in TERM_GROUPS for t in g}, key=len, reverse=True)))
_PHRASE_RE = re.compile("|".join(sorted({p for pair in PHRASES for p in pair}, key=len, reverse=True)))
_PHRASE_ALT = {a: b for a, b in PHRASES} | {b: a for a, b in PHRASES}
_NUM_RE = re.compile(r"(?<![\d.])\d+(?:\.\d+)?(?![\d.])")
_LABEL_RE = re.compile(r"(\s*(?:问：|答：|\d+(?:\.\d+)*\s+)?)(.*)", re.S)  # kept in front of a varied sentence
_SENT_RE = re.compile(r"[^。！？；\n]+[。！？；]")
_BLOCK_START = re.compile(r"^(问：|#|[一二三四五六七八九十]+、|第[一二三四五六七八九十\d]+[章节条]|\d+(\.\d+)*\s)")
_PLACES = TERM_GROUPS[1]


def kind_of(name: str) -> str:
    if name.endswith("_pdfnoisy.txt"):
        return "scan"
    if "_faq" in name:
        return "faq"
    if "regulation" in name:
        return "regulation"
    if name.endswith(".md"):
        return "chapter"
    return "other"


@dataclass
class Block:
    text: str
    heading: bool


def source_text(path: Path) -> str:
    if path.suffix.lower() in (".md", ".txt"):
        return path.read_text(encoding="utf-8")
    import sys

    sys.path.insert(0, str(ROOT))
    from rag_core.ingest.clean import normalise
    from rag_core.ingest.readers import read_file

    return normalise(read_file(path)).text


def _is_heading(text: str) -> bool:
    line = text.strip()
    return line.startswith("#") or ("\n" not in line and len(line) < 30 and not re.search(r"[。；？！]", line))


def split_blocks(text: str) -> list[Block]:
    """Blank-line paragraphs; documents without them (scans, some FAQs) are cut where a question, heading or
    numbered clause starts, keeping their hard wraps."""
    if text.count("\n\n") >= 10:
        parts = [p for p in re.split(r"\n\s*\n", text) if p.strip()]
    else:
        parts, cur = [], []
        for line in text.splitlines():
            if cur and _BLOCK_START.match(line):
                parts.append("\n".join(cur))
                cur = []
            cur.append(line)
        if cur:
            parts.append("\n".join(cur))
    return [Block(p, _is_heading(p)) for p in parts]


class Variator:
    def __init__(self, sources: dict[str, str]):
        self.blocks = {name: split_blocks(text) for name, text in sources.items()}
        self.kinds = {name: kind_of(name) for name in sources}
        self.sep = {name: "\n\n" if text.count("\n\n") >= 10 else "\n" for name, text in sources.items()}
        self.body_pool: dict[str, list[str]] = {}
        self.sent_pool: dict[str, list[str]] = {}
        for name, blocks in self.blocks.items():
            for b in blocks:
                if not b.heading:
                    self.body_pool.setdefault(self.kinds[name], []).append(b.text)
                    self.sent_pool.setdefault(self.kinds[name], []).extend(
                        s for s in _SENT_RE.findall(b.text) if 8 <= len(s) <= 120)

    def variant(self, name: str, j: int, rng: random.Random) -> str:
        kind = self.kinds[name]
        term_map = {}
        for group in TERM_GROUPS:
            shuffled = group[:]
            rng.shuffle(shuffled)
            term_map.update(zip(group, shuffled))
        out = [Block(b.text, b.heading) for b in self.blocks[name]]
        for b in out:
            if not b.heading and rng.random() < 0.25:
                b.text = rng.choice(self.body_pool[kind])
        for i in range(len(out) - 1):
            if not out[i].heading and not out[i + 1].heading and rng.random() < 0.2:
                out[i], out[i + 1] = out[i + 1], out[i]
        texts = []
        for k, b in enumerate(out):
            text = b.text
            if k == 0:
                first, _, rest = text.partition("\n")
                texts.append(f"{first.rstrip()}（{rng.choice(_PLACES)}·第{j}稿）" + ("\n" + rest if rest else ""))
                continue
            if not b.heading:
                if kind == "scan":  # hard-wrapped lines: vary per block
                    text = self._vary_sentences(text, kind, rng)
                else:  # one paragraph or clause a line: vary per line
                    text = "\n".join(self._vary_sentences(line, kind, rng) for line in text.split("\n"))
                text = _NUM_RE.sub(lambda m: _new_number(m, text, rng), text)
                text = _PHRASE_RE.sub(lambda m: _PHRASE_ALT[m.group()] if rng.random() < 0.5 else m.group(), text)
            texts.append(_TERM_RE.sub(lambda m: term_map[m.group()], text))
        return self.sep[name].join(texts) + "\n"

    def _vary_sentences(self, text: str, kind: str, rng: random.Random) -> str:
        """Per sentence: replaced by a sentence of a document of the same kind (18 %), or led in by a connective
        or a local attribution (32 %). A text left untouched gets one of the two anyway, so that no chunk repeats
        its source. Question/answer labels and clause numbers stay in front."""
        sents = [m for m in _SENT_RE.finditer(text) if not _LABEL_RE.match(m.group()).group(2).startswith("#")]
        plan = {}
        for m in sents:
            r = rng.random()
            if r < 0.50:
                plan[m.start()] = "replace" if r < 0.18 else "lead"
        if sents and not plan:
            plan[rng.choice(sents).start()] = "replace" if rng.random() < 0.4 else "lead"
        out, pos = [], 0
        for m in sents:
            if m.start() not in plan:
                continue
            label, sent = _LABEL_RE.match(m.group()).groups()
            if plan[m.start()] == "replace":
                new = rng.choice(self.sent_pool[kind]).lstrip()
            else:
                new = rng.choice(LEADS).format(place=rng.choice(_PLACES)) + sent.lstrip()
            out += [text[pos: m.start()], label, new]
            pos = m.end()
        return "".join(out) + text[pos:]


def _new_number(m: re.Match, text: str, rng: random.Random) -> str:
    s, start = m.group(), m.start()
    before, after = text[max(0, start - 1): start], text[m.end(): m.end() + 1]
    if start == 0 or before in ("\n", "第") or after in ("条", "章", "节", "、") or "月" in text[m.end(): m.end() + 5]:
        return s
    value = float(s)
    if "." not in s and 1900 <= value <= 2100:
        return str(int(value) + rng.randint(-6, 6))
    new = value * rng.uniform(0.7, 1.4)
    if "." in s:
        return f"{new:.{len(s.split('.')[1])}f}"
    return str(max(1, round(new)))


def generate(out_dir: Path, scale: int, seed: int = 7, kb_dir: Path = KB) -> dict:
    """Write the scale-`scale` knowledge base into out_dir (which must not exist or be empty)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    files = sorted(p for p in kb_dir.iterdir() if p.is_file() and p.suffix.lower() in (".md", ".txt", ".pdf", ".docx"))
    for p in files:
        shutil.copy2(p, out_dir / p.name)
    sources = {p.name: source_text(p) for p in files}
    v = Variator(sources)
    written, chars = len(files), 0
    for j in range(1, scale):
        rng = random.Random(seed * 100003 + j)
        folder = out_dir / "syn" / f"v{j:03d}"
        folder.mkdir(parents=True, exist_ok=True)
        for p in files:
            text = v.variant(p.name, j, rng)
            suffix = ".md" if p.suffix == ".md" else ".txt"
            (folder / (p.stem + suffix)).write_text(text, encoding="utf-8")
            written += 1
            chars += len(text)
    return {"files": written, "variant_chars": chars}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", type=Path)
    ap.add_argument("--scale", type=int, default=10)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    print(generate(args.out, args.scale, args.seed))


if __name__ == "__main__":
    main()
