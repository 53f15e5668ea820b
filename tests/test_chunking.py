"""Chunkers: length bounds, exact offsets, heading paths, protected spans, and stable ids."""
from __future__ import annotations

import re

import pytest

from rag_core.chunking import chunk_document, heading_paths, semantic_chunks, sliding_chunks
from rag_core.config import ChunkingConfig
from rag_core.ids import docid_for, parse_id
from rag_core.ingest.clean import normalise
from rag_core.ingest.readers import RawDocument
from rag_core.records import Document, Heading
from rag_core.sentences import clause_cuts
from tests.fakes.embedder import KeywordEmbedder


def make_doc(raw: str, path: str = "sample.md") -> Document:
    norm = normalise(RawDocument(pages=(raw,), kind="md", encoding="utf-8"))
    headings = tuple(Heading(h.start, h.end, h.level, h.text) for h in norm.headings)
    return Document(docid_for(path), path, norm.title, norm.text, "0" * 64, tuple(norm.units), headings)


SENT_RUST = "咖啡锈病由咖啡驼孢锈菌引起，雨季高温高湿时发生较重，叶背出现橙黄色粉状孢子堆。"
SENT_BORER = "咖啡果小蠹雌成虫钻蛀果实，在果内产卵繁殖，造成落果和豆粒被蛀。"
SENT_FERT = "成龄树每株每年施纯氮40～50克，分三次施下，壮果肥用量最大。"


def long_doc() -> Document:
    body = "\n".join(
        ["# 第八章 病虫害", "## 第一节 咖啡锈病"] + [SENT_RUST] * 12 + ["## 第二节 咖啡果小蠹"] + [SENT_BORER] * 12
        + ["## 第三节 施肥"] + [SENT_FERT * 2] * 8 + ["一段没有标点而且特别长的文字" * 60]
    )
    return make_doc(body)


@pytest.mark.parametrize("method", ["semantic", "sliding"])
def test_offsets_are_exact_and_cover_the_text(method):
    doc = long_doc()
    chunks = chunk_document(doc, ChunkingConfig(method=method), KeywordEmbedder(["锈病", "果小蠹", "施"]))
    assert chunks
    for i, c in enumerate(chunks):
        assert doc.text[c.start : c.end] == c.text
        assert c.cid == i and c.docid == doc.docid
    covered = set()
    for c in chunks:
        covered.update(range(c.start, c.end))
    missing = [i for i in range(len(doc.text)) if i not in covered and not doc.text[i].isspace()]
    assert missing == []


def test_semantic_chunks_respect_length_bounds_and_topics():
    cfg = ChunkingConfig()
    doc = long_doc()
    chunks = semantic_chunks(doc, cfg, KeywordEmbedder(["锈病", "果小蠹", "施"]))
    assert max(len(c.text) for c in chunks) <= cfg.l_max
    # the 840-character sentence with no punctuation was cut (at L_hard) and spread over more than one chunk
    assert len([c for c in chunks if "特别长的文字" in c.text]) >= 2
    # a topic change (cosine 0 < τ) never lands in the same chunk as the previous topic once L_min is reached
    assert not any(SENT_RUST in c.text and SENT_BORER in c.text for c in chunks)
    # headings open chunks and label them
    rust = [c for c in chunks if SENT_RUST in c.text]
    assert "第一节 咖啡锈病" in rust[0].text
    assert all(c.section == "第八章 病虫害 › 第一节 咖啡锈病" for c in rust)


def test_semantic_merges_on_topic_sentences_up_to_l_min():
    cfg = ChunkingConfig(l_min=200, l_max=600)
    doc = make_doc("\n".join([SENT_RUST] * 20))
    same_topic = semantic_chunks(doc, cfg, KeywordEmbedder(["锈病"]))
    assert all(200 <= len(c.text) <= 600 for c in same_topic[:-1])
    # without similarity information the chunker still bounds lengths
    assert all(len(c.text) <= 600 for c in semantic_chunks(doc, cfg, None))


SENT_TIME = "5.3.4 发酵时间一般为 12～36 h，随温度变化：环境温度较高时一般为 12～24 h；高海拔地区夜间气温低时可延长至 24～36 h。"


@pytest.mark.parametrize("embedder", [None, KeywordEmbedder(["发酵"])])
def test_semantic_chunks_keep_a_sentence_whole_across_its_semicolons(embedder):
    # A standard's clause states one fact in one sentence; its semicolons divide the cases (12～24 h when warm;
    # 24～36 h at altitude). A length cut that fell at the semicolon left "一般为 12～36 h" in one passage and its
    # cases in the next, so the passage a question ranked first stated only part of the answer.
    cfg = ChunkingConfig(l_min=60, l_max=120)
    doc = make_doc("\n".join(["5.3.1 发酵池宜采用内壁光滑的水泥池，设排水口，并有顶棚遮阳挡雨。", SENT_TIME,
                               "5.3.5 应记录每池发酵的开始时间和环境温度。"]))
    chunks = semantic_chunks(doc, cfg, embedder)
    assert len(chunks) >= 2  # the lengths force a cut
    assert any(SENT_TIME in c.text for c in chunks)
    assert not any(c.text.rstrip().endswith("；") for c in chunks)


def test_clause_cuts_prefer_a_semicolon_in_an_over_long_sentence():
    text = "甲" * 30 + "，" + "乙" * 30 + "；" + "丙" * 20 + "，" + "丁" * 30 + "。"
    pieces = clause_cuts(text, 0, len(text), 90)
    assert text[pieces[0][0]:pieces[0][1]].endswith("；")  # not at the later comma, though it is nearer the limit


def test_sliding_window_overlap_and_snapping():
    cfg = ChunkingConfig(method="sliding", window=500, overlap=100, lookback=80)
    doc = make_doc("\n".join([SENT_RUST, SENT_BORER, SENT_FERT] * 15))
    chunks = sliding_chunks(doc, cfg)
    assert len(chunks) > 3
    for a, b in zip(chunks, chunks[1:]):
        assert len(a.text) <= cfg.window
        assert b.start < a.end, "consecutive windows overlap"
        assert a.text[-1] in "。！？；\n" or a.end == len(doc.text), "window ends snapped to a sentence end"


ID_LIKE = "参见[e76faa05#3]与[9c1d22ab#12]。"


@pytest.mark.parametrize("method", ["semantic", "sliding"])
@pytest.mark.parametrize("size", [30, 45, 60, 90])
def test_never_cuts_inside_citation_tokens_or_numbers_with_units(method, size):
    text = ("每株施用1500～2000 kg腐熟农家肥，温度21–25 °C，" + ID_LIKE + "苗高30～35 cm，地径0.5 cm。") * 10
    doc = make_doc(text)
    cfg = ChunkingConfig(method=method, window=size, overlap=size // 5, lookback=size // 3, l_min=size // 2, l_max=size, l_hard=size)
    chunks = chunk_document(doc, cfg, None)
    protected = [m.group(0) for m in re.finditer(r"\[[0-9a-f]{8}#\d+\]|\d+(?:\.\d+)?(?:～\d+)?\s*(?:kg|cm|°C)|21–25 °C", doc.text)]
    for c in chunks:
        # no chunk starts or ends in the middle of a protected token
        for token in protected:
            for cut in (c.start, c.end):
                for m in re.finditer(re.escape(token), doc.text):
                    assert not (m.start() < cut < m.end()), f"cut at {cut} inside {token!r}"


def test_heading_paths_follow_levels():
    hs = [Heading(0, 3, 1, "第八章"), Heading(10, 14, 2, "第一节"), Heading(20, 24, 3, "一、"), Heading(30, 34, 2, "第二节")]
    starts, paths = heading_paths(hs)
    assert paths == ["第八章", "第八章 › 第一节", "第八章 › 第一节 › 一、", "第八章 › 第二节"]


def test_docid_is_stable_per_path_and_ids_parse():
    assert docid_for("diseases.md") == docid_for("diseases.md")
    assert docid_for("diseases.md") != docid_for("pests.md")
    assert re.fullmatch(r"[0-9a-f]{8}", docid_for("sub/dir/a.txt"))
    assert docid_for("sub\\dir\\a.txt") == docid_for("sub/dir/a.txt")
    assert parse_id("[E76FAA05 ＃ 3]") == "e76faa05#3"
    assert parse_id("【e76faa05#03】") == "e76faa05#3"
    assert parse_id("e76faa05") is None and parse_id("zz76faa05#3") is None


def test_docid_survives_an_edit(tmp_path):
    from rag_core.index.build import load_document

    kb = tmp_path / "kb"
    kb.mkdir()
    f = kb / "note.md"
    f.write_text("# 标题\n" + SENT_RUST, encoding="utf-8")
    before = load_document(kb, f)
    f.write_text("# 标题\n" + SENT_RUST + SENT_BORER, encoding="utf-8")
    after = load_document(kb, f)
    assert before.docid == after.docid and before.sha256 != after.sha256


def test_chunks_carry_unit_originals():
    doc = make_doc("每株施腐熟农家肥5～10公斤，离主干15～20公分开沟。")
    (chunk,) = semantic_chunks(doc, ChunkingConfig(), None)
    originals = " ".join(u.original for u in chunk.units)
    assert "公斤" in originals and "公分" in originals
    for u in chunk.units:
        assert chunk.text[u.start : u.end] == u.canonical
    assert "kg" in chunk.text and "cm" in chunk.text
