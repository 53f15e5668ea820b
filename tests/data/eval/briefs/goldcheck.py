"""Check a gold JSONL file: format, and that every quote maps to exactly one place in its document's text.

Usage: .venv/bin/python tests/data/eval/briefs/goldcheck.py FILE.jsonl. The blind writers run a copy of it outside
the repo (the briefs name that copy's path), so the repo is the first folder above the script that holds rag_core/,
else COFFEEBOT_ROOT.
"""
import json
import os
import sys
from pathlib import Path


def _root() -> Path:
    here = Path(__file__).resolve()
    found = next((p for p in here.parents if (p / "rag_core").is_dir()), None)
    if found is None and "COFFEEBOT_ROOT" not in os.environ:
        sys.exit(f"{here} is outside the repo: set COFFEEBOT_ROOT to the repo's folder")
    return found or Path(os.environ["COFFEEBOT_ROOT"])


ROOT = _root()
sys.path.insert(0, str(ROOT))
from rag_core.ingest.clean import normalise, normalise_fragment  # noqa: E402
from rag_core.ingest.readers import read_file  # noqa: E402

KB = ROOT / "kb"
TOPICS = set("ecology cultivar propagation establishment pruning soil nutrition water shade disease pest disaster "
             "harvest processing quality industry calendar".split())
KINDS = {"single", "unanswerable", "followup", "switch"}


def squeeze(t):
    return "".join(t.split())


texts = {}


def doc_text(doc):
    if doc not in texts:
        p = KB / doc
        texts[doc] = squeeze(normalise(read_file(p)).text) if p.is_file() else None
    return texts[doc]


def main(path):
    errors, n, ids = [], 0, set()
    for ln, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        n += 1
        where = f"line {ln}"
        try:
            it = json.loads(line)
        except json.JSONDecodeError as e:
            errors.append(f"{where}: not JSON ({e})")
            continue
        iid = it.get("id")
        where = f"line {ln} ({iid})"
        if not iid or iid in ids:
            errors.append(f"{where}: id missing or repeated")
        ids.add(iid)
        for k in ("question", "answer", "topic", "answerable"):
            if k not in it:
                errors.append(f"{where}: no '{k}'")
        if it.get("topic") not in TOPICS:
            errors.append(f"{where}: topic {it.get('topic')!r} not one of {sorted(TOPICS)}")
        kind = it.get("kind")
        if kind is not None and kind not in KINDS:
            errors.append(f"{where}: kind {kind!r}")
        hist = it.get("history", [])
        if hist:
            roles = [t.get("role") for t in hist]
            if len(roles) % 2 or any(r != ("user", "assistant")[i % 2] for i, r in enumerate(roles)):
                errors.append(f"{where}: history must alternate user/assistant and end with assistant")
            if any(not t.get("content") for t in hist):
                errors.append(f"{where}: empty history turn")
            if kind == "single":
                errors.append(f"{where}: kind single with a history")
        elif kind in ("followup", "switch"):
            errors.append(f"{where}: kind {kind} needs a history")
        ev = it.get("evidence", [])
        if it.get("answerable") is False:
            if ev:
                errors.append(f"{where}: unanswerable item with evidence")
            continue
        if it.get("answerable") is not True:
            errors.append(f"{where}: answerable must be true or false")
        if not ev:
            errors.append(f"{where}: answerable item without evidence")
        for e in ev:
            doc, quote = e.get("doc"), e.get("quote", "")
            text = doc_text(doc) if doc else None
            if text is None:
                errors.append(f"{where}: document {doc!r} not in kb/")
                continue
            q = squeeze(normalise_fragment(quote))
            count = text.count(q) if q else 0
            if count == 0:
                errors.append(f"{where}: quote not found in {doc}: {quote[:50]}")
            elif count > 1:
                errors.append(f"{where}: quote found {count} times in {doc} (make it longer): {quote[:50]}")
            if not 8 <= len(q) <= 160:
                errors.append(f"{where}: quote length {len(q)} (keep 15-80 characters)")
    for e in errors:
        print(e)
    print(f"{path}: {n} items, {len(errors)} errors")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
